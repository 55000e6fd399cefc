//! The broker seam: the [`Broker`] trait and its adapters.
//!
//! Only this crate knows a vendor API exists. Each adapter maps its venue's data into
//! the normalized [`tradedesk_core::Book`] types, in one place.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tradedesk_core::{
    Account, Bar, Book, Error, ErrorCode, Interval, Mode, OrderRecord, OrderRequest, Quote,
    TradableInstrument,
};

pub mod accounts;
pub mod alpaca;
pub mod book;
pub mod calendar;
pub mod demo;
pub mod dwx;
pub mod ecb;
pub mod flex;
pub mod futu;
pub mod hyperliquid;
pub mod ibkr;
pub mod market_snapshot;
pub mod news;
pub mod occ;
pub mod option_chain;
pub mod search;
pub mod sim;
pub mod tws;
mod zones;
pub use zones::{SteadyOffset, steady_offset};

pub use market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol};

pub use book::{
    BookBroker, BookError, BookIssue, load_book, parse_book, parse_fx_file, write_book,
};

/// Why a broker call failed. Transient failures (`Unavailable`, `Timeout`,
/// `RateLimited`) are told apart from rejections (`Rejected`, `InvalidRequest`) and from
/// `Uncertain` (a write whose outcome is unknown and must be looked up, never retried).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    #[error("{account}: cannot connect: {detail}")]
    Unavailable {
        account: String,
        detail: String,
        hint: String,
    },
    #[error("{account}: no answer within {timeout:?}")]
    Timeout { account: String, timeout: Duration },
    #[error("{account}: rate limited")]
    RateLimited {
        account: String,
        retry_after: Option<Duration>,
    },
    #[error("{account}: rejected: {reason}")]
    Rejected {
        account: String,
        reason: String,
        /// The broker's id for the rejected order, when it gave one.
        order_id: Option<String>,
    },
    #[error("{account}: invalid request: {reason}")]
    InvalidRequest { account: String, reason: String },
    #[error("{account}: unknown symbol {symbol}")]
    UnknownSymbol {
        account: String,
        symbol: String,
        /// The symbols the account can trade, for the hint.
        known: String,
    },
    #[error("{account}: no such order: {reference}")]
    UnknownOrder { account: String, reference: String },
    #[error("{account}: outcome unknown: {detail}")]
    Uncertain { account: String, detail: String },
    #[error("{account}: {capability} is not supported by this broker")]
    Unsupported {
        account: String,
        capability: &'static str,
    },
    /// A book file that breaks a rule of the format, read in the background.
    #[error("{0}")]
    InvalidBook(BookError),
}

impl BrokerError {
    /// Whether the failure proves the order was not placed (the broker refused it, or it
    /// never left): only then may a write be recorded as rejected rather than uncertain.
    pub fn provably_not_placed(&self) -> bool {
        matches!(
            self,
            Self::Rejected { .. }
                | Self::InvalidRequest { .. }
                | Self::UnknownSymbol { .. }
                | Self::Unsupported { .. }
                // A 429 is refused before it is processed.
                | Self::RateLimited { .. }
        )
    }

    /// The broker's order id, when the failure names one.
    pub fn order_id(&self) -> Option<&str> {
        match self {
            Self::Rejected { order_id, .. } => order_id.as_deref(),
            _ => None,
        }
    }
}

impl From<BrokerError> for Error {
    fn from(e: BrokerError) -> Self {
        let message = e.to_string();
        match e {
            BrokerError::Unavailable { hint, .. } => Error::new(
                ErrorCode::BrokerUnavailable,
                message,
                format!("{hint}; get_server_health shows every gateway's state"),
            ),
            BrokerError::Timeout { .. } => Error::new(
                ErrorCode::BrokerTimeout,
                message,
                "the gateway accepted the connection but did not answer; retry later or check get_server_health",
            ),
            BrokerError::RateLimited { retry_after, .. } => Error::new(
                ErrorCode::BrokerUnavailable,
                message,
                match retry_after {
                    Some(d) => format!("retry after {} seconds", d.as_secs().max(1)),
                    None => "retry in a minute".to_owned(),
                },
            ),
            BrokerError::Rejected { .. } => Error::new(
                ErrorCode::BrokerRejected,
                message,
                "the broker refused the order as given; change it rather than retrying",
            ),
            BrokerError::InvalidRequest { .. } => Error::invalid_argument(
                message,
                "the broker refused the request as given; change it rather than retrying",
            ),
            BrokerError::UnknownSymbol { known, .. } => Error::new(
                ErrorCode::UnknownSymbol,
                message,
                format!("this account trades: {known}"),
            ),
            BrokerError::UnknownOrder { .. } => Error::new(
                ErrorCode::UnknownOrder,
                message,
                "list the account's orders with get_orders (status all) for valid ids",
            ),
            BrokerError::Uncertain { .. } => Error::new(
                ErrorCode::Uncertain,
                message,
                "do not resend: look the order up with get_orders by its client_order_id",
            ),
            BrokerError::Unsupported { .. } => Error::new(
                ErrorCode::NotSupported,
                message,
                "this broker does not offer that; use another account",
            ),
            BrokerError::InvalidBook(_) => {
                Error::new(ErrorCode::InvalidBook, message, book::BOOK_FIX)
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Degraded,
    Down,
}

/// One account's state as `get_server_health` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountHealth {
    pub account: String,
    pub broker: String,
    pub mode: Mode,
    pub status: HealthStatus,
    pub latency_ms: Option<u64>,
    pub detail: String,
    pub hint: Option<String>,
}

/// Which orders `orders` lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrderFilter {
    Open,
    Closed,
    All,
}

/// A broker's answer to an order it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placed {
    pub order: OrderRecord,
    /// What the broker said, for the result's `message`.
    pub message: String,
}

/// Which order to cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OrderRef {
    OrderId(String),
    ClientOrderId(String),
}

/// The signed quantity the fills imply per instrument (closes and openings alike).
pub(crate) fn implied_quantities(
    parts: &tradedesk_core::BookParts,
) -> std::collections::BTreeMap<u32, rust_decimal::Decimal> {
    let mut implied = std::collections::BTreeMap::new();
    for f in &parts.fills {
        *implied.entry(f.instrument).or_default() += match f.side {
            tradedesk_core::Side::Buy => f.quantity,
            tradedesk_core::Side::Sell => -f.quantity,
        };
    }
    implied
}

/// Opens, before the history read, what a broker reports held but the fills read do not
/// explain (a position older than the history): one fill per instrument for the
/// difference, at `cost` (the broker's average cost per unit) or else the latest mark,
/// fees unknown. Answers the symbols opened, for the note.
pub(crate) fn open_unexplained(
    parts: &mut tradedesk_core::BookParts,
    cost: &std::collections::BTreeMap<u32, rust_decimal::Decimal>,
) -> Vec<String> {
    use tradedesk_core::Side;
    let implied = implied_quantities(parts);
    let earliest = parts
        .fills
        .iter()
        .map(|f| f.time)
        .chain(parts.cash.iter().map(|c| c.time))
        .min();
    let mut opened = Vec::new();
    let reported = parts.reported_positions.clone();
    for r in &reported {
        let diff = r.quantity - implied.get(&r.instrument).copied().unwrap_or_default();
        if diff.is_zero() {
            continue;
        }
        let price = cost
            .get(&r.instrument)
            .copied()
            .filter(|p| p.is_sign_positive() && !p.is_zero())
            .or_else(|| {
                parts
                    .marks
                    .iter()
                    .filter(|(i, _, _)| *i == r.instrument)
                    .max_by_key(|(_, d, _)| *d)
                    .map(|(_, _, p)| *p)
            });
        let Some(price) = price.filter(|p| p.is_sign_positive() && !p.is_zero()) else {
            continue;
        };
        let first_own = parts
            .fills
            .iter()
            .filter(|f| f.instrument == r.instrument)
            .map(|f| f.time)
            .min();
        let at = first_own
            .or(earliest)
            .unwrap_or_else(|| Utc::now().fixed_offset())
            - chrono::Duration::seconds(1);
        let instrument = &parts.instruments[r.instrument as usize];
        opened.push(instrument.key.qualified());
        let seq = u32::try_from(parts.fills.len()).unwrap_or(u32::MAX);
        parts.fills.push(
            tradedesk_core::MadeFill {
                id: format!("opening-{}", instrument.key.qualified()),
                account: r.account,
                instrument: r.instrument,
                side: if diff.is_sign_positive() {
                    Side::Buy
                } else {
                    Side::Sell
                },
                quantity: diff.abs(),
                price,
                currency: instrument.currency,
                time: at,
                kind: tradedesk_core::FillKind::Opening,
                commission_known: false,
                seq,
            }
            .into(),
        );
    }
    opened
}

/// Anchors an account's cash (account 0 of `parts`) to the balances its broker reports:
/// what the fills and cash entries read leave unexplained, per currency, becomes one
/// opening balance just before the first event, said in a note ("cash is anchored to what
/// {source} reports: ... opening balance {unexplained_by} do not explain"). Currencies the
/// replay holds but the broker does not report are brought to zero the same way. Nothing
/// is anchored when the fills cannot be replayed: that would count the cash twice.
pub(crate) fn anchor_cash(
    parts: &mut tradedesk_core::BookParts,
    reported: &[(tradedesk_core::Currency, rust_decimal::Decimal)],
    source: &str,
    unexplained_by: &str,
) {
    if reported.is_empty() {
        return;
    }
    let probe = tradedesk_core::Book::assemble(parts.clone());
    match tradedesk_core::ledger::replay(&probe, |_, _| {}) {
        Ok(ledger) => anchor_cash_to(parts, reported, &ledger.cash, source, unexplained_by),
        Err(e) => {
            let id = parts
                .accounts
                .first()
                .map(|a| a.id.clone())
                .unwrap_or_default();
            parts.notes.push(format!(
                "{id}: cash is not anchored to what {source} reports: the fills cannot be replayed ({})",
                e.message
            ));
        }
    }
}

/// [`anchor_cash`] with the cash the fills and entries imply already known (`implied`,
/// by account and currency, as a ledger replay answers it).
pub(crate) fn anchor_cash_to(
    parts: &mut tradedesk_core::BookParts,
    reported: &[(tradedesk_core::Currency, rust_decimal::Decimal)],
    implied: &std::collections::BTreeMap<(u32, tradedesk_core::Currency), rust_decimal::Decimal>,
    source: &str,
    unexplained_by: &str,
) {
    use chrono::Offset;
    use tradedesk_core::{CashEntry, CashKind};
    if reported.is_empty() {
        return;
    }
    let id = parts
        .accounts
        .first()
        .map(|a| a.id.clone())
        .unwrap_or_default();
    let first = parts
        .fills
        .iter()
        .map(|f| f.time)
        .chain(parts.cash.iter().map(|c| c.time))
        .min()
        .map_or_else(Utc::now, |t| t.with_timezone(&Utc))
        - chrono::Duration::seconds(1);
    let mut currencies: std::collections::BTreeSet<tradedesk_core::Currency> =
        reported.iter().map(|(c, _)| *c).collect();
    currencies.extend(implied.keys().filter(|(a, _)| *a == 0).map(|(_, c)| *c));
    for currency in currencies {
        let balance = reported
            .iter()
            .find(|(c, _)| *c == currency)
            .map_or(rust_decimal::Decimal::ZERO, |(_, v)| *v);
        let implied = implied.get(&(0, currency)).copied().unwrap_or_default();
        let gap = balance - implied;
        if gap.is_zero() {
            continue;
        }
        parts.notes.push(format!(
            "{id}: cash is anchored to what {source} reports: {} {} of it is an opening balance {unexplained_by} do not explain",
            currency.round(gap),
            currency.code()
        ));
        parts.cash.push(CashEntry {
            account: 0,
            kind: if gap.is_sign_positive() {
                CashKind::Deposit
            } else {
                CashKind::Withdrawal
            },
            amount: gap,
            currency,
            time: first.with_timezone(&Utc.fix()),
        });
    }
}

/// A failed health probe: down, the error, and the hint that says what to do (the
/// error's own for `Unavailable`, `timeout_hint` for a timeout when given, else `hint`).
pub(crate) fn down(
    e: &BrokerError,
    timeout_hint: Option<&str>,
    hint: &str,
) -> (HealthStatus, String, Option<String>) {
    let hint = match (e, timeout_hint) {
        (BrokerError::Unavailable { hint, .. }, _) => hint.clone(),
        (BrokerError::Timeout { .. }, Some(t)) => t.to_owned(),
        _ => hint.to_owned(),
    };
    (HealthStatus::Down, e.to_string(), Some(hint))
}

/// The HTTP client every REST adapter uses: connects within 5 s (or the timeout, if
/// shorter), answers within `timeout`, names tradedesk as its agent. It follows a
/// redirect only to the same scheme, host and port (at most 5): the adapters send their
/// keys in headers of their own (`APCA-API-KEY-ID`, a Flex token), which an HTTP client
/// would otherwise carry to whatever host a `307` names. A redirect elsewhere is not
/// followed; the adapter sees the redirect itself and reports it.
pub(crate) fn http_client(
    account: &str,
    timeout: Duration,
) -> Result<reqwest::Client, BrokerError> {
    reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(5)))
        .timeout(timeout)
        .user_agent(concat!("tradedesk/", env!("CARGO_PKG_VERSION")))
        .redirect(same_origin_redirects())
        .build()
        .map_err(|e| BrokerError::Unavailable {
            account: account.to_owned(),
            detail: format!("cannot build the HTTP client: {e}"),
            hint: "this is a bug in tradedesk's build".to_owned(),
        })
}

/// Redirects followed only within the origin of the first request.
pub(crate) fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let first = attempt.previous().first().cloned();
        let same = first.is_some_and(|f| {
            f.scheme() == attempt.url().scheme()
                && f.host_str() == attempt.url().host_str()
                && f.port_or_known_default() == attempt.url().port_or_known_default()
        });
        if same && attempt.previous().len() <= 5 {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

/// Refuses a request for an account other than the one an adapter serves.
/// A generation that moves once every `period`, for an adapter whose venue changes on
/// its own: the merged book asks it for a new snapshot at most once a period (a
/// counter bumped inside `snapshot` would never move, since `snapshot` is only called
/// when the generation has).
pub(crate) fn every(period: Duration) -> u64 {
    u64::try_from(Utc::now().timestamp()).unwrap_or(0) / period.as_secs().max(1)
}

pub(crate) fn check_served(served: &str, asked: &str) -> Result<(), BrokerError> {
    if asked == served {
        Ok(())
    } else {
        Err(BrokerError::InvalidRequest {
            account: asked.to_owned(),
            reason: format!("this adapter serves account {served}"),
        })
    }
}

/// A perpetual future's live mark and the venue's maximum leverage for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerpMark {
    /// `EXCHANGE:SYMBOL`.
    pub market: String,
    pub mark: rust_decimal::Decimal,
    pub max_leverage: u32,
}

/// One perpetual market as its venue lists it (`list_markets`). A figure the venue does
/// not give is `None`, never a made-up zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PerpListing {
    /// `EXCHANGE:SYMBOL`.
    pub market: String,
    /// The venue's own name for it (Hyperliquid's coin, `BTC`).
    pub name: String,
    pub mark: rust_decimal::Decimal,
    /// The index (oracle) price funding is measured against.
    pub oracle: Option<rust_decimal::Decimal>,
    /// The funding rate of one period, as a fraction (0.0000125 is 0.00125%).
    pub funding_rate: Option<rust_decimal::Decimal>,
    /// How long a funding period is, in hours.
    pub funding_period_hours: Option<u32>,
    /// Open interest in units of the market (coins, contracts).
    pub open_interest: Option<rust_decimal::Decimal>,
    pub max_leverage: u32,
    /// The size increment, which is also the smallest size.
    pub size_step: rust_decimal::Decimal,
    /// False once the venue has delisted it (or halted it).
    pub open: bool,
}

/// One trade printed on a venue's tape (`get_recent_trades`): anyone's, not the account's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TapeTrade {
    pub price: rust_decimal::Decimal,
    pub size: rust_decimal::Decimal,
    /// The taker's side: a buy lifted the ask, a sell hit the bid.
    pub side: tradedesk_core::Side,
    pub time: DateTime<Utc>,
    /// The venue's trade id, when it gives one.
    pub id: Option<String>,
}

/// The perpetual markets of a venue and what the answer could not say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PerpListings {
    pub markets: Vec<PerpListing>,
    pub notes: Vec<String>,
}

/// A market's latest trades, newest first, and what the answer could not say.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Tape {
    /// `EXCHANGE:SYMBOL`.
    pub market: String,
    pub trades: Vec<TapeTrade>,
    pub notes: Vec<String>,
}

/// An account's margin as its broker reports it, in the account's currency. A figure the
/// broker does not state is `None`, never a made-up zero.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountMargin {
    pub currency: tradedesk_core::Currency,
    /// Margin held by the open positions (MetaTrader: equity less free margin).
    pub margin_used: Option<rust_decimal::Decimal>,
    /// What is left to open new positions with (MetaTrader's free margin).
    pub free_margin: Option<rust_decimal::Decimal>,
    /// Equity over margin used, in percent (MetaTrader's margin level); `None` with no
    /// margin in use.
    pub margin_level: Option<rust_decimal::Decimal>,
    /// The account's leverage (100 for 1:100).
    pub leverage: Option<rust_decimal::Decimal>,
    /// The value of securities the account can buy now (Alpaca, IBKR, Futu).
    pub buying_power: Option<rust_decimal::Decimal>,
    /// The maintenance margin the positions require.
    pub maintenance_margin: Option<rust_decimal::Decimal>,
}

fn unsupported<T>(account: &str, capability: &'static str) -> Result<T, BrokerError> {
    Err(BrokerError::Unsupported {
        account: account.to_owned(),
        capability,
    })
}

/// A broker: the read side every adapter has, and market data and a write side that an
/// adapter may lack. A capability an adapter lacks answers
/// [`BrokerError::Unsupported`], never a silent success.
#[async_trait]
pub trait Broker: Send + Sync + fmt::Debug {
    /// The accounts this adapter serves, without contacting the venue.
    fn accounts(&self) -> Vec<Account>;

    /// Accounts, instruments, fills, cash, marks, FX and reported positions, normalized.
    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError>;

    /// A bounded-time probe of each account.
    async fn health(&self) -> Vec<AccountHealth>;

    /// The base currency of the snapshot, when it is known without contacting the venue
    /// (a book file's): what the server's instructions name before any broker answers.
    fn base_currency(&self) -> Option<tradedesk_core::Currency> {
        None
    }

    /// The account's total value (equity) as the broker itself reported it with the last
    /// snapshot, in its currency; `None` where the broker states none. The trading guards
    /// value the account by it (docs/methodology/trading.md).
    fn reported_equity(
        &self,
        _account: &str,
    ) -> Option<(tradedesk_core::Currency, rust_decimal::Decimal)> {
        None
    }

    /// The account's margin figures as the broker itself reported them with the last
    /// snapshot (get_accounts; the guards' `free_margin` rule); `None` where the broker
    /// states none, and each figure `None` where it does not state that one
    /// (docs/methodology/trading.md, "Margin").
    fn reported_margin(&self, _account: &str) -> Option<AccountMargin> {
        None
    }

    /// What the broker does not state of an instrument's trading rules (a MetaTrader
    /// symbol's lot step and limits the EA does not write), said with every order on it.
    fn instrument_notes(&self, _account: &str, _symbol: &str) -> Vec<String> {
        Vec::new()
    }

    /// Changes whenever `snapshot` would answer differently (new fills, new marks), so
    /// callers can cache a snapshot until it moves. A static source stays at 0.
    fn generation(&self) -> u64 {
        0
    }

    /// The modes an account can trade in (empty: it cannot trade here).
    fn trading_modes(&self, _account: &str) -> Vec<Mode> {
        Vec::new()
    }

    /// Resolves a symbol (bare or `EXCHANGE:SYMBOL`) to what the venue trades.
    async fn instrument(
        &self,
        account: &str,
        _symbol: &str,
    ) -> Result<TradableInstrument, BrokerError> {
        unsupported(account, "trading instruments")
    }

    /// The broker's commission for a fill, in the instrument's currency, when it can
    /// tell in advance.
    fn estimate_commission(
        &self,
        _account: &str,
        _instrument: &TradableInstrument,
        _quantity: rust_decimal::Decimal,
        _price: rust_decimal::Decimal,
    ) -> Option<rust_decimal::Decimal> {
        None
    }

    async fn quote(&self, account: &str, _symbol: &str) -> Result<Quote, BrokerError> {
        unsupported(account, "quotes")
    }

    /// Whether this broker is a perpetuals venue, asked first for a market's mark and
    /// trades before any other account that knows the market (the sim's simulated perps
    /// are not a venue).
    fn offers_perps(&self) -> bool {
        false
    }

    /// Whether an order can carry a magic number (the tag MetaTrader's EA keeps on each
    /// ticket for the strategy that opened it); the guards refuse `magic` elsewhere.
    fn takes_magic(&self) -> bool {
        false
    }

    /// A perpetual's mark price and maximum leverage.
    async fn perp_market(&self, account: &str, _symbol: &str) -> Result<PerpMark, BrokerError> {
        unsupported(account, "perpetual markets")
    }

    /// Every perpetual market the venue lists, with its context.
    async fn perp_markets(&self, account: &str) -> Result<PerpListings, BrokerError> {
        unsupported(account, "listing perpetual markets")
    }

    /// The latest trades of one market, newest first.
    async fn recent_trades(&self, account: &str, _symbol: &str) -> Result<Tape, BrokerError> {
        unsupported(account, "recent trades")
    }

    /// News articles (`get_news`): about `query.symbols` (any when empty), newest first,
    /// at most `query.limit`.
    async fn news(
        &self,
        account: &str,
        _query: &news::NewsQuery,
    ) -> Result<news::NewsPage, BrokerError> {
        unsupported(account, "news")
    }

    /// The broker's own clock and calendar of the market the account trades (US stocks
    /// for Alpaca), with the trading days from `from` to `to` (`get_market_hours`).
    async fn market_calendar(
        &self,
        account: &str,
        _from: chrono::NaiveDate,
        _to: chrono::NaiveDate,
    ) -> Result<calendar::VenueCalendar, BrokerError> {
        unsupported(account, "a market calendar")
    }

    /// The markets the account trades, for `get_market_hours` with `account`; empty where
    /// they are not known.
    fn markets(&self, _account: &str) -> Vec<calendar::Market> {
        Vec::new()
    }

    /// Whether [`Broker::market_calendar`] answers for `market` with the broker's own clock
    /// and calendar, preferred to the exchange calendar (Alpaca's, for the US markets).
    fn keeps_calendar(&self, _market: calendar::Market) -> bool {
        false
    }

    /// The IANA zone the broker's server clock keeps (MetaTrader's server time), when it
    /// is known without contacting the venue.
    fn server_time_zone(&self, _account: &str) -> Option<String> {
        None
    }

    /// Bars whose start lies in `[start, end]`, oldest first.
    async fn bars(
        &self,
        account: &str,
        _symbol: &str,
        _interval: Interval,
        _start: DateTime<Utc>,
        _end: DateTime<Utc>,
    ) -> Result<Vec<Bar>, BrokerError> {
        unsupported(account, "bars")
    }

    /// Orders of `account` (every account of this broker when `None`), newest first.
    async fn orders(
        &self,
        account: Option<&str>,
        _filter: OrderFilter,
    ) -> Result<Vec<OrderRecord>, BrokerError> {
        unsupported(account.unwrap_or("this broker"), "orders")
    }

    /// The order with this client order id, if the broker has it: how an uncertain
    /// outcome is resolved (never by sending the order again).
    async fn find_order(
        &self,
        account: &str,
        _client_order_id: &str,
    ) -> Result<Option<OrderRecord>, BrokerError> {
        unsupported(account, "order lookup")
    }

    async fn place(&self, order: &OrderRequest) -> Result<Placed, BrokerError> {
        unsupported(&order.terms.account, "placing orders")
    }

    /// Cancels a working order: the order as it now stands, and whether this call
    /// cancelled it (false: it had already filled, expired or been cancelled).
    async fn cancel(
        &self,
        account: &str,
        _order: &OrderRef,
    ) -> Result<(OrderRecord, bool), BrokerError> {
        unsupported(account, "cancelling orders")
    }

    /// Sets the stop-loss and take-profit of an open position (`None` leaves one as it
    /// is); answers the levels now in force.
    /// The stop-loss and take-profit now set on a position.
    async fn position_levels(
        &self,
        account: &str,
        _symbol: &str,
    ) -> Result<(Option<rust_decimal::Decimal>, Option<rust_decimal::Decimal>), BrokerError> {
        unsupported(account, "position levels")
    }

    async fn modify_position(
        &self,
        account: &str,
        _symbol: &str,
        _stop_loss: Option<rust_decimal::Decimal>,
        _take_profit: Option<rust_decimal::Decimal>,
    ) -> Result<(Option<rust_decimal::Decimal>, Option<rust_decimal::Decimal>), BrokerError> {
        unsupported(account, "modifying positions")
    }

    /// As [`Broker::modify_position`], on one of the broker's own positions (a
    /// MetaTrader ticket) alone.
    async fn modify_ticket(
        &self,
        account: &str,
        _symbol: &str,
        _ticket: &str,
        _stop_loss: Option<rust_decimal::Decimal>,
        _take_profit: Option<rust_decimal::Decimal>,
    ) -> Result<(Option<rust_decimal::Decimal>, Option<rust_decimal::Decimal>), BrokerError> {
        unsupported(account, "modifying positions by ticket")
    }

    // -- get_snapshots (docs/methodology/research.md, "Snapshots") ---------------------

    /// Several symbols' latest trade, quote and day figures, in one request where the
    /// venue batches (at most [`market_snapshot::MAX_SNAPSHOT_SYMBOLS`]). A symbol the
    /// venue does not know is listed in `unknown` with its reason, not an error; a figure
    /// it does not give is `None`.
    async fn market_snapshots(
        &self,
        account: &str,
        _symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        unsupported(account, "snapshots")
    }

    /// One expiry of an underlying's option chain (`get_option_chain`,
    /// docs/methodology/research.md, "Option chains"): the contracts with their quotes and,
    /// where the venue computes them, implied volatility and greeks.
    async fn option_chain(
        &self,
        account: &str,
        _query: &option_chain::ChainQuery,
    ) -> Result<option_chain::OptionChain, BrokerError> {
        unsupported(account, "option chains")
    }

    /// Instruments the venue lists for `account` that match `query`, each with how it
    /// matched (`search_instruments`, docs/tools.md; the rule is [`search`]'s).
    async fn search_instruments(
        &self,
        account: &str,
        _query: &search::InstrumentQuery,
    ) -> Result<search::InstrumentMatches, BrokerError> {
        unsupported(account, "instrument search")
    }
}

#[cfg(test)]
mod redirect_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A loopback server answering every request with `reply(path)`; counts requests.
    async fn serve(reply: fn(&str, u16) -> String) -> (u16, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&seen);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let mut buf = vec![0u8; 4096];
                let n = socket.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).to_string();
                let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let _ = socket.write_all(reply(&path, port).as_bytes()).await;
            }
        });
        (port, seen)
    }

    #[tokio::test]
    async fn keys_never_follow_a_redirect_to_another_host() {
        let (elsewhere, seen) = serve(|_, _| {
            "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok".to_owned()
        })
        .await;
        // The redirecting server learns the other port through a static: tests run it once.
        static TARGET: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
        TARGET.set(elsewhere).unwrap();
        let (origin, _) = serve(|path, port| {
            let to = if path == "/away" {
                format!("http://127.0.0.1:{}/stolen", TARGET.get().copied().unwrap_or(0))
            } else if path == "/here" {
                format!("http://127.0.0.1:{port}/landed")
            } else {
                return "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nlanded"
                    .to_owned();
            };
            format!("HTTP/1.1 307 Temporary Redirect\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        })
        .await;
        let client = super::http_client("A", Duration::from_secs(5)).unwrap();
        let away = client
            .get(format!("http://127.0.0.1:{origin}/away"))
            .header("APCA-API-KEY-ID", "secret")
            .send()
            .await
            .unwrap();
        assert_eq!(away.status().as_u16(), 307, "not followed");
        assert_eq!(
            seen.load(Ordering::SeqCst),
            0,
            "the other host got no request"
        );
        let here = client
            .get(format!("http://127.0.0.1:{origin}/here"))
            .header("APCA-API-KEY-ID", "secret")
            .send()
            .await
            .unwrap();
        assert_eq!(here.status().as_u16(), 200, "same origin followed");
        assert_eq!(here.text().await.unwrap(), "landed");
    }
}
