//! Orders, quotes and tradable instruments: what the trading tools and every broker's
//! write side share. Prices and quantities are `Decimal`; nothing here does I/O.

use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};

use crate::book::{Mode, Side};
use crate::currency::Currency;
use crate::instrument::{AssetClass, InstrumentKey};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum OrderType {
    #[default]
    Market,
    Limit,
    Stop,
    StopLimit,
}

impl OrderType {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Market => "market",
            Self::Limit => "limit",
            Self::Stop => "stop",
            Self::StopLimit => "stop_limit",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Market, Self::Limit, Self::Stop, Self::StopLimit]
            .into_iter()
            .find(|t| t.as_str() == text)
    }

    pub fn needs_limit(self) -> bool {
        matches!(self, Self::Limit | Self::StopLimit)
    }

    pub fn needs_stop(self) -> bool {
        matches!(self, Self::Stop | Self::StopLimit)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TimeInForce {
    #[default]
    Day,
    Gtc,
    Ioc,
    Fok,
}

impl TimeInForce {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Gtc => "gtc",
            Self::Ioc => "ioc",
            Self::Fok => "fok",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::Day, Self::Gtc, Self::Ioc, Self::Fok]
            .into_iter()
            .find(|t| t.as_str() == text)
    }
}

/// Where an order stands at its broker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderStatus {
    /// Working at the broker (not yet triggered or not yet filled).
    Accepted,
    Filled,
    Cancelled,
    Expired,
    Rejected,
}

impl OrderStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Filled => "filled",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
            Self::Rejected => "rejected",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::Accepted,
            Self::Filled,
            Self::Cancelled,
            Self::Expired,
            Self::Rejected,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }

    pub fn is_open(self) -> bool {
        self == Self::Accepted
    }
}

/// What a broker needs to know to trade an instrument: its lot rules, tick, pip and
/// margin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TradableInstrument {
    pub key: InstrumentKey,
    pub currency: Currency,
    pub asset_class: AssetClass,
    /// Units per quantity of 1 (100000 for an FX lot, 100 for a gold lot).
    pub multiplier: Decimal,
    /// Quantities must be whole multiples of this.
    pub lot_step: Decimal,
    pub min_quantity: Decimal,
    pub max_quantity: Decimal,
    /// Price increment.
    pub tick: Decimal,
    /// The pip, for FX and metals (what MetaTrader users count spreads in).
    pub pip: Option<Decimal>,
    /// Margin as a fraction of notional (1 for a cash equity, 1/30 for FX at 30:1).
    pub margin_rate: Decimal,
    /// What `quantity` counts: `shares`, `lots`, `contracts`.
    pub unit: &'static str,
}

/// A two-sided quote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quote {
    pub key: InstrumentKey,
    pub currency: Currency,
    pub bid: Decimal,
    pub ask: Decimal,
    pub time: DateTime<Utc>,
}

impl Quote {
    /// The side an order of `side` would trade against: the ask for a buy.
    pub fn for_side(&self, side: Side) -> Decimal {
        match side {
            Side::Buy => self.ask,
            Side::Sell => self.bid,
        }
    }
}

/// A normalized order, as a broker receives it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRequest {
    pub account: String,
    pub key: InstrumentKey,
    pub side: Side,
    pub quantity: Decimal,
    pub order_type: OrderType,
    pub limit_price: Option<Decimal>,
    pub stop_price: Option<Decimal>,
    pub time_in_force: TimeInForce,
    pub stop_loss: Option<Decimal>,
    pub take_profit: Option<Decimal>,
    pub comment: Option<String>,
    pub client_order_id: String,
    pub mode: Mode,
    /// Only reduces an existing position (a close): the kill switch lets it through.
    pub reduce_only: bool,
    /// The broker's position id a close is for (a MetaTrader ticket): only it is closed.
    pub ticket: Option<String>,
    /// MetaTrader's magic number for the order (`None`: the account's).
    pub magic: Option<i64>,
}

/// An order as a broker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRecord {
    pub order_id: String,
    pub client_order_id: String,
    pub account: String,
    pub key: InstrumentKey,
    pub side: Side,
    pub order_type: OrderType,
    pub quantity: Decimal,
    pub filled_quantity: Decimal,
    pub average_price: Option<Decimal>,
    pub limit_price: Option<Decimal>,
    pub stop_price: Option<Decimal>,
    pub time_in_force: TimeInForce,
    pub stop_loss: Option<Decimal>,
    pub take_profit: Option<Decimal>,
    pub status: OrderStatus,
    pub mode: Mode,
    pub comment: Option<String>,
    /// Why it was rejected, cancelled or expired, as the broker says it.
    pub reason: Option<String>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

/// One bar of prices. Analytics: `f64` (docs/methodology/research.md).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    /// Echoed exactly as the source gives it (`YYYY-MM-DD` or RFC 3339).
    pub time: String,
    pub instant: DateTime<Utc>,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    pub volume: Option<f64>,
}

/// Bar lengths the sim and brokers serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Interval {
    M1,
    M5,
    M15,
    H1,
    D1,
}

impl Interval {
    pub const ALL: [Self; 5] = [Self::M1, Self::M5, Self::M15, Self::H1, Self::D1];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::M1 => "1m",
            Self::M5 => "5m",
            Self::M15 => "15m",
            Self::H1 => "1h",
            Self::D1 => "1d",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|i| i.as_str() == text)
    }

    pub fn seconds(self) -> i64 {
        match self {
            Self::M1 => 60,
            Self::M5 => 300,
            Self::M15 => 900,
            Self::H1 => 3600,
            Self::D1 => 86_400,
        }
    }
}
