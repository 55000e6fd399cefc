//! What a broker answers for `get_snapshots`: several symbols' latest trade, quote and
//! day figures at once (docs/methodology/research.md, "Snapshots"). A figure the broker
//! does not give is `None`, never a made-up zero; a symbol it does not know is listed
//! with the reason rather than failing the others.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use tradedesk_core::Currency;

/// The most symbols one `market_snapshots` call takes.
pub const MAX_SNAPSHOT_SYMBOLS: usize = 100;

/// One symbol's snapshot, as its broker gives it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MarketSnapshot {
    /// The symbol as it was asked for.
    pub symbol: String,
    /// `EXCHANGE:SYMBOL`, as the other tools take it.
    pub market: String,
    pub currency: Option<Currency>,
    /// The latest trade: its price, size and time.
    pub last: Option<Decimal>,
    pub last_size: Option<Decimal>,
    pub last_time: Option<DateTime<Utc>>,
    pub bid: Option<Decimal>,
    pub ask: Option<Decimal>,
    /// A mid the broker states itself (Hyperliquid's `midPx`); else the tool takes the
    /// middle of bid and ask.
    pub mid: Option<Decimal>,
    /// A perp's mark price.
    pub mark: Option<Decimal>,
    /// The day so far (the latest session's): open, high, low, latest close, volume in
    /// units of the instrument, and the value traded in its currency.
    pub open: Option<Decimal>,
    pub high: Option<Decimal>,
    pub low: Option<Decimal>,
    pub close: Option<Decimal>,
    pub volume: Option<Decimal>,
    pub turnover: Option<Decimal>,
    /// The trading day those figures are of, where the broker says.
    pub session_date: Option<NaiveDate>,
    /// The previous session's close (Hyperliquid: the price 24 hours ago).
    pub prev_close: Option<Decimal>,
    /// When the broker stamped the figures (the newest of its stamps).
    pub time: Option<DateTime<Utc>>,
}

/// A symbol left out of a snapshot answer, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownSymbol {
    pub symbol: String,
    pub reason: String,
}

/// A broker's answer for several symbols: one row per symbol it knows, in the order
/// asked, the others with their reason, and what the answer could not say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MarketSnapshots {
    pub rows: Vec<MarketSnapshot>,
    pub unknown: Vec<UnknownSymbol>,
    pub notes: Vec<String>,
    /// How many requests the broker was sent (one where it batches).
    pub requests: usize,
}

impl MarketSnapshots {
    /// Orders rows and unknown symbols as `asked` lists them.
    pub fn in_order_of(mut self, asked: &[String]) -> Self {
        let rank = |s: &str| asked.iter().position(|a| a == s).unwrap_or(usize::MAX);
        self.rows.sort_by_key(|r| rank(&r.symbol));
        self.unknown.sort_by_key(|u| rank(&u.symbol));
        self
    }
}

/// A price a broker sends as a plain number where zero (or less) means it has none
/// (OpenD's required fields, Alpaca's `ap`/`bp`, MetaTrader's `last`, TWS's -1).
pub fn positive(v: Option<Decimal>) -> Option<Decimal> {
    v.filter(|d| d.is_sign_positive() && !d.is_zero())
}
