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

/// What an order is, whatever its size and its id: the part the tools' [`Order`] and the
/// broker's [`OrderRequest`] share. The request carries the order's own terms, unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderTerms {
    pub account: String,
    pub side: Side,
    pub order_type: OrderType,
    pub limit_price: Option<Decimal>,
    pub stop_price: Option<Decimal>,
    pub time_in_force: TimeInForce,
    pub stop_loss: Option<Decimal>,
    pub take_profit: Option<Decimal>,
    pub comment: Option<String>,
    pub mode: Mode,
    /// The broker's position id the order closes (a MetaTrader ticket): only it is closed.
    pub ticket: Option<String>,
    /// MetaTrader's magic number for the order (`None`: the account's).
    pub magic: Option<i64>,
}

impl OrderTerms {
    /// A market order of `side` for the day, with nothing else set.
    pub fn market(account: impl Into<String>, side: Side, mode: Mode) -> Self {
        Self {
            account: account.into(),
            side,
            order_type: OrderType::Market,
            limit_price: None,
            stop_price: None,
            time_in_force: TimeInForce::Day,
            stop_loss: None,
            take_profit: None,
            comment: None,
            mode,
            ticket: None,
            magic: None,
        }
    }
}

/// An order as the trading tools take it, parsed once from a tool's arguments (every
/// decimal normalized, the symbol as typed upper-cased, the ticket trimmed). The guard's
/// rules decide on it (docs/methodology/trading.md), and everything else an order becomes
/// is derived from it once: the request its broker receives (only from the order the
/// rules passed, `CheckedOrder::request` in `crates/tools`), the text its idempotency
/// key and confirmation token are bound to ([`Order::bound_text`]) and the question that
/// asks the user to confirm it ([`Order::confirmation_text`]). The view the tools answer with is derived from it in
/// `crates/tools` (`NormalizedView`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub terms: OrderTerms,
    /// Bare or qualified, as the broker resolves it.
    pub symbol: String,
    /// Exactly one of `quantity` and `notional` makes a valid order (a rule checks it,
    /// so that a preview can show what was sent).
    pub quantity: Option<Decimal>,
    /// An amount in the instrument's currency, traded as the quantity it buys.
    pub notional: Option<Decimal>,
    /// The caller's idempotency key, when it gave one.
    pub client_order_id: Option<String>,
    /// A close (`close_position`): only reduces the position.
    pub reduce_only: bool,
}

impl Order {
    /// A market order of `quantity`, for the day, with nothing else set.
    pub fn market(
        account: impl Into<String>,
        symbol: impl Into<String>,
        side: Side,
        quantity: Decimal,
        mode: Mode,
    ) -> Self {
        Self {
            terms: OrderTerms::market(account, side, mode),
            symbol: symbol.into(),
            quantity: Some(quantity.normalize()),
            notional: None,
            client_order_id: None,
            reduce_only: false,
        }
    }

    /// Normalizes what the caller typed: every decimal to its shortest form, the symbol
    /// trimmed and upper-cased, the ticket trimmed.
    #[must_use]
    pub fn normalized(self) -> Self {
        let n = |v: Option<Decimal>| v.map(|d| d.normalize());
        let t = self.terms;
        Self {
            terms: OrderTerms {
                limit_price: n(t.limit_price),
                stop_price: n(t.stop_price),
                stop_loss: n(t.stop_loss),
                take_profit: n(t.take_profit),
                ticket: t.ticket.map(|t| t.trim().to_owned()),
                ..t
            },
            symbol: self.symbol.trim().to_ascii_uppercase(),
            quantity: n(self.quantity),
            notional: n(self.notional),
            ..self
        }
    }

    /// What the order is, as its idempotency key and confirmation token are bound to
    /// it: every field but the client order id (the key itself) and `reduce_only`, on
    /// the resolved `key`; the ticket and the magic number only where given, so an order
    /// without them keeps the text it always had.
    pub fn bound_text(&self, key: &InstrumentKey) -> String {
        let d = |v: Option<Decimal>| v.map(|d| d.normalize().to_string()).unwrap_or_default();
        let t = &self.terms;
        let mut text = format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            t.account,
            key.qualified(),
            t.side.as_str(),
            d(self.quantity),
            d(self.notional),
            t.order_type.as_str(),
            d(t.limit_price),
            d(t.stop_price),
            t.time_in_force.as_str(),
            d(t.stop_loss),
            d(t.take_profit),
            t.comment.as_deref().unwrap_or(""),
            t.mode.as_str(),
        );
        if let Some(ticket) = &t.ticket {
            text.push_str("|ticket=");
            text.push_str(ticket);
        }
        if let Some(m) = t.magic {
            text.push_str(&format!("|magic={m}"));
        }
        text
    }

    /// The question that asks the user to confirm it: the order on `key`, for
    /// `quantity` `unit`, valued at `valued` in `base`.
    pub fn confirmation_text(
        &self,
        key: &InstrumentKey,
        quantity: Decimal,
        unit: &str,
        valued: Decimal,
        base: Currency,
    ) -> String {
        let t = &self.terms;
        let mut text = format!(
            "Confirm {} order: {} {} {} {} on account {}",
            t.mode.as_str().to_uppercase(),
            t.side.as_str(),
            quantity,
            unit,
            key,
            t.account
        );
        text.push_str(&format!(", {}", t.order_type.as_str()));
        if let Some(p) = t.limit_price {
            text.push_str(&format!(" limit {p}"));
        }
        if let Some(p) = t.stop_price {
            text.push_str(&format!(" stop {p}"));
        }
        text.push_str(&format!(", valued at {} {}", valued, base.code()));
        if let Some(sl) = t.stop_loss {
            text.push_str(&format!(", stop-loss {sl}"));
        }
        if let Some(tp) = t.take_profit {
            text.push_str(&format!(", take-profit {tp}"));
        }
        text.push('.');
        text
    }
}

/// An order as a broker receives it (the trading tools build it only from an order every
/// guard passed: `CheckedOrder::request` in `crates/tools`): the order's terms on the
/// resolved instrument, for the quantity it trades, under its client order id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderRequest {
    pub terms: OrderTerms,
    pub key: InstrumentKey,
    pub quantity: Decimal,
    pub client_order_id: String,
    /// Only reduces an existing position (a close): the kill switch lets it through.
    pub reduce_only: bool,
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

impl OrderRecord {
    /// The record of `request` as its broker has just taken it, as order `order_id` at
    /// `now`: working, nothing filled, the request's terms unchanged.
    pub fn accepted(request: &OrderRequest, order_id: String, now: DateTime<Utc>) -> Self {
        let t = &request.terms;
        Self {
            order_id,
            client_order_id: request.client_order_id.clone(),
            account: t.account.clone(),
            key: request.key.clone(),
            side: t.side,
            order_type: t.order_type,
            quantity: request.quantity,
            filled_quantity: Decimal::ZERO,
            average_price: None,
            limit_price: t.limit_price,
            stop_price: t.stop_price,
            time_in_force: t.time_in_force,
            stop_loss: t.stop_loss,
            take_profit: t.take_profit,
            status: OrderStatus::Accepted,
            mode: t.mode,
            comment: t.comment.clone(),
            reason: None,
            created: now,
            updated: now,
        }
    }
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rust_decimal_macros::dec;

    use super::*;

    fn limit_buy() -> Order {
        let mut o = Order::market(
            "SIM-PAPER",
            " nasdaq:aapl ",
            Side::Buy,
            dec!(3),
            Mode::Paper,
        );
        o.terms.order_type = OrderType::Limit;
        o.terms.limit_price = Some(dec!(280.00));
        o.terms.stop_loss = Some(dec!(260));
        o.terms.take_profit = Some(dec!(300.0));
        o.terms.comment = Some("why".to_owned());
        o.client_order_id = Some("id-1".to_owned());
        o
    }

    fn key() -> InstrumentKey {
        InstrumentKey::new("NASDAQ", "AAPL")
    }

    #[test]
    fn normalizing_trims_upper_cases_and_shortens_every_decimal() {
        let mut o = limit_buy();
        o.terms.ticket = Some(" 7 ".to_owned());
        o.notional = Some(dec!(10.50));
        let o = o.normalized();
        assert_eq!(o.symbol, "NASDAQ:AAPL");
        assert_eq!(o.terms.ticket.as_deref(), Some("7"));
        assert_eq!(o.terms.limit_price.unwrap().to_string(), "280");
        assert_eq!(o.terms.take_profit.unwrap().to_string(), "300");
        assert_eq!(o.notional.unwrap().to_string(), "10.5");
        // What is not the caller's typing stays as given.
        assert_eq!(o.terms.comment.as_deref(), Some("why"));
        assert_eq!(o.client_order_id.as_deref(), Some("id-1"));
    }

    #[test]
    fn an_accepted_record_carries_the_requests_terms_unchanged() {
        let mut o = limit_buy();
        o.terms.time_in_force = TimeInForce::Gtc;
        let request = OrderRequest {
            terms: o.terms.clone(),
            key: key(),
            quantity: dec!(3),
            client_order_id: "td-1".to_owned(),
            reduce_only: false,
        };
        let now = DateTime::from_timestamp(1_764_514_800, 0).unwrap();
        let r = OrderRecord::accepted(&request, "SIM-1".to_owned(), now);
        let t = &o.terms;
        assert_eq!(
            (
                r.order_id.as_str(),
                r.client_order_id.as_str(),
                r.account.as_str()
            ),
            ("SIM-1", "td-1", "SIM-PAPER")
        );
        assert_eq!((r.key, r.side, r.order_type), (key(), t.side, t.order_type));
        assert_eq!(
            (r.quantity, r.filled_quantity, r.average_price),
            (dec!(3), Decimal::ZERO, None)
        );
        assert_eq!(
            (r.limit_price, r.stop_price, r.stop_loss, r.take_profit),
            (t.limit_price, t.stop_price, t.stop_loss, t.take_profit)
        );
        assert_eq!(
            (r.time_in_force, r.status, r.mode),
            (TimeInForce::Gtc, OrderStatus::Accepted, Mode::Paper)
        );
        assert_eq!((r.comment, r.reason), (t.comment.clone(), None));
        assert_eq!((r.created, r.updated), (now, now));
    }

    #[test]
    fn the_bound_text_is_the_one_idempotency_keys_were_always_stored_with() {
        assert_eq!(
            limit_buy().bound_text(&key()),
            "SIM-PAPER|NASDAQ:AAPL|buy|3||limit|280||day|260|300|why|paper"
        );
        let mut o = Order::market("MT", "EURUSD", Side::Sell, dec!(0.10), Mode::Paper);
        o.terms.ticket = Some("7".to_owned());
        o.terms.magic = Some(42);
        assert_eq!(
            o.bound_text(&InstrumentKey::new("FX", "EURUSD")),
            "MT|FX:EURUSD|sell|0.1||market|||day||||paper|ticket=7|magic=42"
        );
        // The client order id and reduce_only are not part of it.
        let mut other = limit_buy();
        other.client_order_id = None;
        other.reduce_only = true;
        assert_eq!(other.bound_text(&key()), limit_buy().bound_text(&key()));
    }

    #[test]
    fn the_confirmation_text_says_the_order_and_its_value() {
        assert_eq!(
            limit_buy().confirmation_text(&key(), dec!(3), "shares", dec!(840.00), Currency::USD),
            "Confirm PAPER order: buy 3 shares NASDAQ:AAPL on account SIM-PAPER, limit limit 280.00, \
             valued at 840.00 USD, stop-loss 260, take-profit 300.0."
        );
    }
}
