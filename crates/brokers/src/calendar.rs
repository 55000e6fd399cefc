//! A broker's own market clock and calendar, for `get_market_hours` (docs/tools.md,
//! "get_market_hours"): Alpaca's `GET /v2/clock` and `GET /v2/calendar` for the US stock
//! market. The tool prefers it to the exchange calendar crate's answer and says which it
//! used.

use chrono::{DateTime, NaiveDate, Utc};

/// The market's clock as the broker reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VenueClock {
    /// The broker's time of the reading.
    pub at: DateTime<Utc>,
    pub is_open: bool,
    pub next_open: DateTime<Utc>,
    pub next_close: DateTime<Utc>,
}

/// One trading day of the broker's calendar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VenueDay {
    /// The trading date, in the market's time zone.
    pub date: NaiveDate,
    /// The regular session (an early close shows as an earlier `close`).
    pub open: DateTime<Utc>,
    pub close: DateTime<Utc>,
    /// The extended session (pre-market open to after-hours close), where given.
    pub extended: Option<(DateTime<Utc>, DateTime<Utc>)>,
}

/// A broker's clock and the trading days of a span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VenueCalendar {
    /// What answered, for the result (`Alpaca (ALPACA): GET /v2/clock, GET /v2/calendar`).
    pub source: String,
    /// The IANA zone of the market's local times.
    pub time_zone: String,
    pub clock: VenueClock,
    /// The trading days of the span asked, in date order: a weekday of the span that is
    /// missing is a day the market is closed.
    pub days: Vec<VenueDay>,
    /// The last date the calendar covers; after it a closed day is not known.
    pub known_until: NaiveDate,
    pub notes: Vec<String>,
}

/// A market whose hours `get_market_hours` knows: what [`crate::Broker::markets`] names for
/// an account, and what [`crate::Broker::keeps_calendar`] is asked about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Market {
    Nyse,
    Nasdaq,
    Hkex,
    /// Bursa Malaysia.
    Bursa,
    /// Spot FX.
    Fx,
    /// Crypto spot, around the clock.
    Crypto,
    /// Hyperliquid's perpetuals.
    Hyperliquid,
    /// Perpetuals elsewhere (the sim's).
    Perp,
}

/// The one market a moomoo / Futu account trades, named by its currency: MYR Bursa, HKD
/// Hong Kong, USD the US; none known for another.
#[must_use]
pub fn market_of_currency(currency: tradedesk_core::Currency) -> Vec<Market> {
    match currency.code() {
        "MYR" => vec![Market::Bursa],
        "HKD" => vec![Market::Hkex],
        "USD" => vec![Market::Nyse],
        _ => Vec::new(),
    }
}
