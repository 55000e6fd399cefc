//! Working memory of FIFO replay + realized P&L beyond the fills themselves, measured with
//! a peak-tracking allocator at growing history lengths: it follows open lots, not
//! history. Prints a table; run with `cargo bench --bench memory`.
#![allow(
    clippy::print_stdout,
    clippy::float_arithmetic,
    clippy::cast_precision_loss
)]

use peak_alloc::PeakAlloc;
use tradedesk_core::{Currency, DateRange, ledger};
use tradedesk_tools::args::GroupBy;
use tradedesk_tools::realized::{RealizedQuery, get_realized_pnl};
use tradedesk_tools::select::select;

mod common;

#[global_allocator]
static PEAK: PeakAlloc = PeakAlloc;

fn main() {
    println!(
        "| fills | book in memory (MiB) | open lots at end | peak extra during replay + realized P&L (KiB) |"
    );
    println!("| ---: | ---: | ---: | ---: |");
    for n in [10_000usize, 100_000, 1_000_000] {
        let before = PEAK.current_usage();
        let book = common::generate(n);
        let book_bytes = PEAK.current_usage().saturating_sub(before);
        let (start, end) = common::full_range(&book);
        let sel = select(&book, None, None, None).unwrap_or_else(|e| panic!("{e}"));
        let query = RealizedQuery {
            range: DateRange::new_checked(start, end).unwrap_or_else(|e| panic!("{e}")),
            currency: Currency::USD,
            group_by: GroupBy::Month,
            include_lots: false,
            page: tradedesk_tools::realized::LotPage::FIRST,
            fingerprint: 0,
        };
        let open_lots = ledger::replay(&book, |_, _| {})
            .map(|l| l.fifo.open_lot_count())
            .unwrap_or(0);
        let base = PEAK.current_usage();
        PEAK.reset_peak_usage();
        let result = get_realized_pnl(&book, &sel, &query).unwrap_or_else(|e| panic!("{e}"));
        let extra = PEAK.peak_usage().saturating_sub(base);
        std::hint::black_box(result.net_pnl);
        println!(
            "| {n} | {:.1} | {open_lots} | {:.1} |",
            book_bytes as f64 / 1_048_576.0,
            extra as f64 / 1024.0
        );
    }
}
