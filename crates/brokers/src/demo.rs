//! The embedded demo book: synthetic IBKR-style (USD) and Moomoo-style (MYR, Bursa)
//! accounts with invented prices and fills, so every tool answers on a fresh machine.

use tradedesk_core::Book;

use crate::book::{BookError, parse_book};

/// The demo book's JSON, as shipped in the binary.
pub const DEMO_BOOK_JSON: &str = include_str!("../../../demo/demo-book.json");

/// The label the demo is reported under.
pub const DEMO_SOURCE: &str = "embedded demo book (synthetic)";

/// Parses the embedded demo.
///
/// # Errors
/// Only if the shipped file is broken, which the test suite rules out.
pub fn demo_book() -> Result<Book, BookError> {
    parse_book(DEMO_SOURCE, DEMO_BOOK_JSON)
}
