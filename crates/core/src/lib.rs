//! tradedesk's core: currencies, instruments, fills, FIFO lots, FX and dates. Amounts are
//! `rust_decimal::Decimal` (or `Fixed` in the FIFO loop); no type of its own wraps them.
//!
//! Pure and synchronous: no I/O, no async, no vendor types. Every broker adapter maps its
//! data into these types; every tool computes over them.

pub mod actions;
pub mod book;
pub mod bounds;
pub mod currency;
pub mod dates;
pub mod error;
pub mod fifo;
pub mod fill_id;
pub mod fixed;
pub mod fx;
pub mod instrument;
pub mod ledger;
pub mod order;

pub use actions::{ActionKind, CorporateAction, FillRef};
pub use book::{
    Account, AccountIdx, Book, BookParts, BrokerTicket, CashEntry, CashKind, Fill, FillKind,
    InstrumentIdx, MadeFill, MarginMode, Marks, Mode, ReportedPosition, Side, UnknownSpec,
};
pub use currency::Currency;
pub use dates::{DateRange, parse_date};
pub use error::{Error, ErrorCode, Result};
pub use fifo::{ClosedLot, Fifo, LotQueue, LotSide, OpenLot};
pub use fill_id::FillId;
pub use fixed::Fixed;
pub use fx::{FxQuote, FxRate, FxTable};
pub use instrument::{AssetClass, Instrument, InstrumentKey, SectorMap};
pub use order::{
    Bar, Interval, Order, OrderRecord, OrderRequest, OrderStatus, OrderTerms, OrderType, Quote,
    TimeInForce, TradableInstrument,
};
pub use rust_decimal::Decimal;
