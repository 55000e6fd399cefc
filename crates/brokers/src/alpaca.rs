//! Alpaca, through its REST API: the trading host (paper or live) for the account, its
//! positions, activities and orders, and the market-data host for quotes and bars.
//!
//! Fills come from `FILL` account activities. Alpaca charges no commission; its
//! regulatory fees arrive as separate `FEE` activities: one that names its order is
//! joined to that order's first fill as its commission, any other is reported as a fee
//! in cash (with a note), so P&L is never silently net of a fee it did not see. Cash is
//! anchored to what the account reports: the activities' history is replayed, and any
//! difference with the account's `cash` becomes an opening balance, said in a note.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset, NaiveDate, Offset, SecondsFormat, TimeZone, Utc};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_core::{
    Account, ActionKind, AssetClass, Bar, Book, BookParts, CashEntry, CashKind, CorporateAction,
    Currency, Fill, FillKind, FillRef, Instrument, InstrumentKey, Interval, MadeFill, Mode,
    OrderRecord, OrderRequest, OrderStatus, OrderType, Quote, ReportedPosition, Side, TimeInForce,
    TradableInstrument, UnknownSpec,
};

use crate::calendar::Market;
use crate::{AccountHealth, Broker, BrokerError, HealthStatus, OrderFilter, OrderRef, Placed};

mod assets;
mod chain;
mod snapshots;

/// Where and how to reach one Alpaca account.
#[derive(Clone)]
pub struct AlpacaConfig {
    pub account: String,
    /// Trades on the live host (`api.alpaca.markets`) rather than the paper one.
    pub live: bool,
    pub base_url: String,
    pub data_url: String,
    pub key: String,
    pub secret: String,
    pub timeout: Duration,
}

impl std::fmt::Debug for AlpacaConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key or the secret.
        f.debug_struct("AlpacaConfig")
            .field("account", &self.account)
            .field("live", &self.live)
            .field("base_url", &self.base_url)
            .field("data_url", &self.data_url)
            .finish_non_exhaustive()
    }
}

impl AlpacaConfig {
    pub const PAPER_URL: &'static str = "https://paper-api.alpaca.markets";
    pub const LIVE_URL: &'static str = "https://api.alpaca.markets";
    pub const DATA_URL: &'static str = "https://data.alpaca.markets";
}

#[derive(Debug)]
pub struct AlpacaBroker {
    config: AlpacaConfig,
    client: reqwest::Client,
    /// Exchange per symbol, from the asset lookup (it never changes within a run).
    exchanges: Mutex<BTreeMap<String, String>>,
    /// Multiplier per option symbol, from the option contract lookup (`None`: Alpaca
    /// did not state one).
    multipliers: Mutex<BTreeMap<String, Option<Decimal>>>,
    /// The account's equity as Alpaca reported it when the book was last built.
    equity: Mutex<Option<(Currency, Decimal)>>,
    /// Its `buying_power` and `maintenance_margin`, likewise.
    margin: Mutex<Option<crate::AccountMargin>>,
    /// The asset lists `search_instruments` reads (see `assets`).
    assets: assets::AssetCache,
}

/// The exchange an option is keyed under: Alpaca names none for an option position, and
/// every US listed option is quoted through OPRA.
pub const OPTION_EXCHANGE: &str = "OPRA";

/// The markets an Alpaca account trades: US stocks and crypto.
pub const MARKETS: [Market; 2] = [Market::Nyse, Market::Crypto];

/// The activity types the book is built from: every type Alpaca documents
/// (docs/dev/alpaca-facts.md), bar the two that only name groups of them (`TRANS`, `MISC`).
const ACTIVITY_TYPES: &str = "FILL,ACATC,ACATS,CFEE,CGD,CSD,CSW,DIV,DIVCGL,DIVCGS,DIVFEE,DIVFT,DIVNRA,DIVROC,DIVTW,DIVTXEX,FEE,INT,INTNRA,INTTW,JNL,JNLC,JNLS,MA,NC,OPASN,OPCA,OPCSH,OPEXC,OPEXP,OPTRD,PTC,PTR,REORG,SPIN,SPLIT,FOPT";

/// One reading of the activity history.
enum Pages {
    Read(Vec<Value>),
    /// Alpaca's 422 `invalid activity type`, with its message.
    Refused(String),
}

/// An option event on a contract held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OptionEvent {
    Expired,
    Assigned,
    Exercised,
}

/// What an activity type means to the book (docs/dev/alpaca-facts.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meaning {
    /// `FILL`: an execution.
    Trade,
    /// Cash of a known kind: deposits, withdrawals, dividends and distributions,
    /// withholding, fees and rebates, interest.
    Cash(CashKind),
    /// `DIVROC`: a distribution that returns capital.
    ReturnOfCapital,
    /// Cash moved in or out by a transfer or journal (`ACATC`, `JNLC`, `JNL`); a `JNL`
    /// that names a symbol and a quantity moves shares.
    Transfer,
    /// Shares moved in or out by a transfer or journal (`ACATS`, `JNLS`, `FOPT`).
    Shares,
    /// `OPEXP`, `OPASN`, `OPEXC`.
    Option(OptionEvent),
    /// Corporate actions whose terms the activity does not state (`SPLIT`, `NC`, `MA`,
    /// `SPIN`, `REORG`, `OPCA`, `OPCSH`, `OPTRD`): noted, their cash kept.
    Unapplied,
    /// A type Alpaca does not document: kept with a note, never guessed.
    Unknown,
}

fn meaning(kind: &str) -> Meaning {
    match kind {
        "FILL" => Meaning::Trade,
        "CSD" => Meaning::Cash(CashKind::Deposit),
        "CSW" => Meaning::Cash(CashKind::Withdrawal),
        "DIV" | "DIVCGL" | "DIVCGS" | "CGD" | "DIVTXEX" => Meaning::Cash(CashKind::Dividend),
        "DIVROC" => Meaning::ReturnOfCapital,
        "DIVNRA" | "DIVFT" | "DIVTW" | "INTNRA" | "INTTW" => Meaning::Cash(CashKind::Tax),
        "FEE" | "CFEE" | "PTC" | "PTR" | "DIVFEE" => Meaning::Cash(CashKind::Fee),
        "INT" => Meaning::Cash(CashKind::Interest),
        "ACATC" | "JNLC" | "JNL" => Meaning::Transfer,
        "ACATS" | "JNLS" | "FOPT" => Meaning::Shares,
        "OPEXP" => Meaning::Option(OptionEvent::Expired),
        "OPASN" => Meaning::Option(OptionEvent::Assigned),
        "OPEXC" => Meaning::Option(OptionEvent::Exercised),
        "SPLIT" | "NC" | "MA" | "SPIN" | "REORG" | "OPCA" | "OPCSH" | "OPTRD" => Meaning::Unapplied,
        _ => Meaning::Unknown,
    }
}

/// What the activities left to say, gathered while they are booked.
#[derive(Debug, Default)]
struct Said {
    return_of_capital: Vec<String>,
    transferred_out: Vec<String>,
    transferred_at_average: Vec<String>,
    transferred_without_cost: Vec<String>,
    delivery_from_terms: Vec<String>,
    unapplied: Vec<String>,
    unknown: Vec<String>,
    unread: Vec<String>,
}

impl Said {
    fn notes(&self, account: &str, currency: Currency, fees: Decimal, notes: &mut Vec<String>) {
        let mut say = |items: &[String], text: &str| {
            if !items.is_empty() {
                notes.push(format!("{account}: {text}: {}", items.join(", ")));
            }
        };
        say(
            &self.return_of_capital,
            "return of capital (DIVROC) is booked as a distribution in cash; the lots' cost is not reduced by it, so their cost basis is above Alpaca's by that much",
        );
        say(
            &self.transferred_at_average,
            "shares transferred in without a price are opened at the position's avg_entry_price",
        );
        say(
            &self.transferred_without_cost,
            "shares transferred in without a price, and no longer held to give an average cost, are left out (positions and P&L around them are the reconciliation's to show)",
        );
        say(
            &self.transferred_out,
            "shares transferred out are taken off the lots first in, first out, their cost leaving with them (no sale: nothing realized, no cash moved; performance does not count them as a withdrawal)",
        );
        say(
            &self.delivery_from_terms,
            "the shares an assignment or exercise delivered are taken from the contract's terms (strike, 100 a contract), as no activity of its group names them",
        );
        say(
            &self.unapplied,
            "corporate actions whose terms Alpaca's activities do not state are not applied to the lots (their cash is kept as a transfer); positions across them may not match Alpaca's",
        );
        say(
            &self.unknown,
            "activity types Alpaca does not document are kept as transfers of their cash, not classed as income or cost",
        );
        say(&self.unread, "activities that could not be read");
        if !fees.is_zero() {
            notes.push(format!(
                "{account}: Alpaca fees of {} {} name no order: they are account fees in cash, so realized P&L is gross of them",
                currency.round(fees),
                currency.code()
            ));
        }
    }
}

/// What the book knows of one symbol: asset class, multiplier, and what was assumed.
#[derive(Debug, Clone)]
struct Spec {
    class: AssetClass,
    multiplier: Decimal,
    assumed: Option<(String, String)>,
    note: Option<String>,
}

impl Spec {
    const EQUITY: Self = Self {
        class: AssetClass::Equity,
        multiplier: Decimal::ONE,
        assumed: None,
        note: None,
    };
}

/// A decimal field, sent as a string (trading API) or a JSON number (market data). A
/// small number such as a crypto trade's 0.00008231 coins prints as `8.231e-5`: read in
/// scientific notation too.
fn dec(v: &Value, field: &str) -> Option<Decimal> {
    match v.get(field)? {
        Value::String(s) => Decimal::from_str(s.trim()).ok(),
        Value::Number(n) => {
            let written = n.to_string();
            Decimal::from_str(&written)
                .or_else(|_| Decimal::from_scientific(&written).map(|d| d.normalize()))
                .ok()
        }
        _ => None,
    }
}

fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

fn time(v: &Value, field: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text(v, field)?)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Alpaca's `type` of an order, and back.
fn order_type_of(text: &str) -> Option<OrderType> {
    match text {
        "market" => Some(OrderType::Market),
        "limit" => Some(OrderType::Limit),
        "stop" => Some(OrderType::Stop),
        "stop_limit" => Some(OrderType::StopLimit),
        _ => None,
    }
}

/// Alpaca's order statuses in ours: everything still able to fill is `accepted`.
fn status_of(text: &str) -> OrderStatus {
    match text {
        "filled" => OrderStatus::Filled,
        "canceled" | "replaced" | "done_for_day" => OrderStatus::Cancelled,
        "expired" => OrderStatus::Expired,
        "rejected" | "suspended" => OrderStatus::Rejected,
        _ => OrderStatus::Accepted,
    }
}

fn timeframe(interval: Interval) -> &'static str {
    match interval {
        Interval::M1 => "1Min",
        Interval::M5 => "5Min",
        Interval::M15 => "15Min",
        Interval::H1 => "1Hour",
        Interval::D1 => "1Day",
    }
}

/// The most pages one listing follows: a bound, so no loop can run away.
const MAX_PAGES: usize = 1_000;

impl AlpacaBroker {
    /// # Errors
    /// The HTTP client cannot be built (no TLS roots).
    pub fn new(config: AlpacaConfig) -> Result<Self, BrokerError> {
        let client = crate::http_client(&config.account, config.timeout)?;
        Ok(Self {
            config,
            client,
            exchanges: Mutex::new(BTreeMap::new()),
            multipliers: Mutex::new(BTreeMap::new()),
            equity: Mutex::new(None),
            margin: Mutex::new(None),
            assets: assets::AssetCache::default(),
        })
    }

    fn mode(&self) -> Mode {
        if self.config.live {
            Mode::Live
        } else {
            Mode::Paper
        }
    }

    fn unavailable(&self, detail: String) -> BrokerError {
        BrokerError::Unavailable {
            account: self.config.account.clone(),
            detail,
            hint: format!(
                "check that {} is reachable and that APCA_API_KEY_ID / APCA_API_SECRET_KEY hold this account's keys",
                self.config.base_url
            ),
        }
    }

    /// Sends a request; maps transport failures, 401/403, 429 and 5xx to broker errors.
    /// `write` marks a request whose outcome must never be guessed: a timeout or a 5xx
    /// after it was sent is `Uncertain`.
    async fn send(
        &self,
        request: reqwest::RequestBuilder,
        write: bool,
    ) -> Result<(u16, Value), BrokerError> {
        let response = request
            .header("APCA-API-KEY-ID", &self.config.key)
            .header("APCA-API-SECRET-KEY", &self.config.secret)
            .send()
            .await;
        let response = match response {
            Ok(r) => r,
            Err(e) if e.is_connect() => {
                return Err(self.unavailable(format!("cannot connect: {e}")));
            }
            Err(e) if e.is_timeout() && write => {
                return Err(BrokerError::Uncertain {
                    account: self.config.account.clone(),
                    detail: format!("no answer within {:?}", self.config.timeout),
                });
            }
            Err(e) if e.is_timeout() => {
                return Err(BrokerError::Timeout {
                    account: self.config.account.clone(),
                    timeout: self.config.timeout,
                });
            }
            Err(e) if write => {
                return Err(BrokerError::Uncertain {
                    account: self.config.account.clone(),
                    detail: e.to_string(),
                });
            }
            Err(e) => return Err(self.unavailable(e.to_string())),
        };
        let status = response.status().as_u16();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<i64>().ok())
        };
        let retry_after = header("retry-after")
            .map(|s| Duration::from_secs(u64::try_from(s.max(1)).unwrap_or(1)))
            .or_else(|| {
                header("x-ratelimit-reset").map(|reset| {
                    let wait = (reset - Utc::now().timestamp()).clamp(1, 3_600);
                    Duration::from_secs(u64::try_from(wait).unwrap_or(60))
                })
            });
        let body: Value = response.json().await.unwrap_or(Value::Null);
        let message = || {
            text(&body, "message")
                .map(tradedesk_core::error::quote)
                .unwrap_or_else(|| format!("HTTP {status}"))
        };
        match status {
            200..=299 => Ok((status, body)),
            401 | 403 if !write => Err(BrokerError::Unavailable {
                account: self.config.account.clone(),
                detail: format!("not authorized ({})", message()),
                hint: "set APCA_API_KEY_ID and APCA_API_SECRET_KEY (or the env names in key_env / secret_env) to this account's keys; paper and live keys differ".to_owned(),
            }),
            429 => Err(BrokerError::RateLimited {
                account: self.config.account.clone(),
                retry_after,
            }),
            500..=599 if write => Err(BrokerError::Uncertain {
                account: self.config.account.clone(),
                detail: format!("the broker answered {status} ({})", message()),
            }),
            500..=599 => Err(self.unavailable(format!("the broker answered {status} ({})", message()))),
            _ => Ok((status, body)),
        }
    }

    /// A read whose only acceptable failure is a 404 the caller handles.
    async fn get(
        &self,
        url: String,
        query: &[(&str, String)],
    ) -> Result<(u16, Value), BrokerError> {
        let (status, body) = self.send(self.client.get(url).query(query), false).await?;
        if status == 404 || (200..300).contains(&status) {
            return Ok((status, body));
        }
        Err(self.unavailable(format!(
            "the broker answered {status} ({})",
            text(&body, "message").map_or_else(String::new, tradedesk_core::error::quote)
        )))
    }

    /// A read that must answer 2xx with a JSON body of the expected shape.
    async fn get_ok(
        &self,
        url: String,
        query: &[(&str, String)],
        array: bool,
    ) -> Result<Value, BrokerError> {
        let (status, body) = self.get(url, query).await?;
        let shaped = if array {
            body.is_array()
        } else {
            body.is_object()
        };
        if status == 404 || !shaped {
            return Err(self.unavailable(format!(
                "the broker answered {status} without the expected {}",
                if array { "list" } else { "object" }
            )));
        }
        Ok(body)
    }

    fn trading(&self, path: &str) -> String {
        format!("{}{path}", self.config.base_url.trim_end_matches('/'))
    }

    fn data(&self, path: &str) -> String {
        format!("{}{path}", self.config.data_url.trim_end_matches('/'))
    }

    fn rejected(&self, status: u16, body: &Value) -> BrokerError {
        BrokerError::Rejected {
            account: self.config.account.clone(),
            reason: format!(
                "HTTP {status}: {}",
                text(body, "message")
                    .map(tradedesk_core::error::quote)
                    .unwrap_or_default()
            ),
            order_id: None,
        }
    }

    /// The exchange Alpaca lists a symbol on, from the asset lookup.
    async fn exchange_of(&self, symbol: &str) -> Result<String, BrokerError> {
        if let Some(e) = self
            .exchanges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(symbol)
        {
            return Ok(e.clone());
        }
        let (status, body) = self
            .get(
                self.trading(&format!("/v2/assets/{}", urlencode(symbol))),
                &[],
            )
            .await?;
        if status == 404 {
            return Err(BrokerError::UnknownSymbol {
                account: self.config.account.clone(),
                symbol: tradedesk_core::error::quote(symbol),
                known: "US stocks and ETFs Alpaca lists (GET /v2/assets)".to_owned(),
            });
        }
        let exchange = text(&body, "exchange").unwrap_or("US").to_owned();
        self.exchanges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(symbol.to_owned(), exchange.clone());
        Ok(exchange)
    }

    /// An option contract's multiplier as Alpaca states it (`GET
    /// /v2/options/contracts/{symbol}`, field `multiplier`); `None` when the lookup
    /// answers without one (404 for an expired contract, say).
    async fn option_multiplier(&self, symbol: &str) -> Result<Option<Decimal>, BrokerError> {
        if let Some(m) = self
            .multipliers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(symbol)
        {
            return Ok(*m);
        }
        let url = self.trading(&format!("/v2/options/contracts/{}", urlencode(symbol)));
        let (status, body) = self.send(self.client.get(url), false).await?;
        let stated = Some(&body)
            .filter(|_| (200..300).contains(&status))
            .and_then(|b| dec(b, "multiplier"))
            .filter(|m| m.is_sign_positive() && !m.is_zero());
        self.multipliers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(symbol.to_owned(), stated);
        Ok(stated)
    }

    /// The asset class and multiplier of a symbol: an OCC option symbol (or a position
    /// Alpaca classes `us_option`) takes the contract's multiplier, else the one its
    /// position's market value implies, else the OCC standard of 100 with a note (and,
    /// for an adjusted contract, an unknown spec); `crypto` positions are crypto; the
    /// rest equities. See docs/methodology/instruments.md.
    async fn spec_of(&self, symbol: &str, position: Option<&Value>) -> Result<Spec, BrokerError> {
        let class = position.and_then(|p| text(p, "asset_class"));
        let occ = crate::occ::parse(symbol);
        if class == Some("crypto") {
            return Ok(Spec {
                class: AssetClass::Crypto,
                ..Spec::EQUITY
            });
        }
        if occ.is_none() && class != Some("us_option") {
            return Ok(Spec::EQUITY);
        }
        let account = &self.config.account;
        let option = |multiplier, assumed, note| Spec {
            class: AssetClass::Option,
            multiplier,
            assumed,
            note,
        };
        if let Some(m) = self.option_multiplier(symbol).await? {
            return Ok(option(m, None, None));
        }
        // market_value = qty x current_price x multiplier (Alpaca's own figures).
        if let Some(m) = position
            .and_then(|p| {
                let per_unit = dec(p, "qty")?.checked_mul(dec(p, "current_price")?)?;
                dec(p, "market_value")?.checked_div(per_unit)
            })
            .map(|m| m.abs().round_dp(6).normalize())
            .filter(|m| m.is_integer() && !m.is_zero())
        {
            return Ok(option(
                m,
                None,
                Some(format!(
                    "{account}: Alpaca's contract lookup gave no multiplier for {symbol}: {m} is taken from its position (market_value / (qty x current_price))"
                )),
            ));
        }
        let hundred = Decimal::ONE_HUNDRED;
        if occ.as_ref().is_some_and(|o| !o.is_adjusted()) {
            return Ok(option(
                hundred,
                None,
                Some(format!(
                    "{account}: Alpaca's contract lookup gave no multiplier for {symbol}: the standard contract's 100 is used"
                )),
            ));
        }
        Ok(option(
            hundred,
            Some((
                "Alpaca stated no multiplier for this adjusted (non-standard) option contract: 100 assumed".to_owned(),
                format!("check the contract's deliverable (GET /v2/options/contracts/{symbol})"),
            )),
            None,
        ))
    }

    /// Every activity of the listed types, oldest first, following the pages, and what
    /// was said about the asking. Alpaca answers 422 `invalid activity type: X` to a type
    /// it does not take: `X` is dropped and the history asked again from its start; a
    /// refusal that names no type the request holds falls back to asking with no type
    /// filter (every activity, Alpaca's default). Either way each row is booked by its own
    /// `activity_type` as before, and the note says so (docs/dev/alpaca-facts.md).
    async fn activities(&self) -> Result<(Vec<Value>, Option<String>), BrokerError> {
        let mut types: Vec<&str> = ACTIVITY_TYPES.split(',').collect();
        let mut refused: Vec<String> = Vec::new();
        let mut filtered = true;
        let mut unfiltered_because: Option<String> = None;
        // Each refusal drops a type or the filter, so this bound is never the one hit.
        for _ in 0..=types.len() + 1 {
            match self.activity_pages(filtered.then_some(&types[..])).await? {
                Pages::Read(out) => {
                    let account = &self.config.account;
                    let said = match (&unfiltered_because, refused.is_empty()) {
                        (Some(message), _) => Some(format!(
                            "{account}: Alpaca refused the activity types asked for ({message}{}): every activity was asked for without a type filter, and each is booked by its own activity_type as before",
                            if refused.is_empty() {
                                String::new()
                            } else {
                                format!("; {} refused before", refused.join(", "))
                            }
                        )),
                        (None, false) => Some(format!(
                            "{account}: Alpaca refused the activity type {} (422 invalid activity type): the activities were asked for without it, so any of that type are not in the history (cash is still anchored to the account's)",
                            refused.join(", ")
                        )),
                        (None, true) => None,
                    };
                    return Ok((out, said));
                }
                Pages::Refused(message) if filtered => {
                    let named = message
                        .split_once(':')
                        .map(|(_, t)| t.trim().to_ascii_uppercase())
                        .and_then(|t| types.iter().position(|x| *x == t));
                    match named {
                        Some(i) => refused.push(types.remove(i).to_owned()),
                        None => {
                            filtered = false;
                            unfiltered_because = Some(tradedesk_core::error::quote(&message));
                        }
                    }
                }
                Pages::Refused(message) => {
                    return Err(self.unavailable(format!(
                        "the broker answered 422 ({}) to a request for activities without a type filter",
                        tradedesk_core::error::quote(&message)
                    )));
                }
            }
        }
        Err(self.unavailable(
            "Alpaca kept refusing the activity types asked for; refusing a partial history"
                .to_owned(),
        ))
    }

    /// One reading of the activity history, every page, with `types` as the filter (none:
    /// every activity). A 422 `invalid activity type` ends it as [`Pages::Refused`].
    async fn activity_pages(&self, types: Option<&[&str]>) -> Result<Pages, BrokerError> {
        let mut out: Vec<Value> = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut query = Vec::new();
            if let Some(types) = types {
                query.push(("activity_types", types.join(",")));
            }
            query.push(("direction", "asc".to_owned()));
            query.push(("page_size", "100".to_owned()));
            if let Some(t) = &token {
                query.push(("page_token", t.clone()));
            }
            let request = self
                .client
                .get(self.trading("/v2/account/activities"))
                .query(&query);
            let (status, body) = self.send(request, false).await?;
            let message = text(&body, "message").unwrap_or_default();
            if status == 422
                && message
                    .to_ascii_lowercase()
                    .starts_with("invalid activity type")
            {
                return Ok(Pages::Refused(message.to_owned()));
            }
            let Some(page) = body.as_array().filter(|_| (200..300).contains(&status)) else {
                return Err(self.unavailable(format!(
                    "the broker answered {status} without the expected list{}",
                    if message.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", tradedesk_core::error::quote(message))
                    }
                )));
            };
            let full = page.len() == 100;
            token = page.last().and_then(|a| text(a, "id")).map(str::to_owned);
            out.extend(page.iter().cloned());
            if !full || token.is_none() {
                return Ok(Pages::Read(out));
            }
        }
        Err(self.unavailable(format!(
            "more than {MAX_PAGES} pages of activities; refusing a partial history"
        )))
    }

    /// The exchange an order's instrument is keyed under, as positions and fills key it:
    /// `OPRA` for an option, else the exchange the asset lookup gave (see
    /// [`Self::learn_exchanges`]), else `US` for a symbol Alpaca no longer lists.
    fn known_exchange(&self, o: &Value) -> Option<String> {
        let symbol = text(o, "symbol")?;
        if text(o, "asset_class") == Some("us_option") || crate::occ::parse(symbol).is_some() {
            return Some(OPTION_EXCHANGE.to_owned());
        }
        Some(
            self.exchanges
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(symbol)
                .cloned()
                .unwrap_or_else(|| "US".to_owned()),
        )
    }

    /// Looks up the exchange of every symbol these orders (and their legs) name that is
    /// not known yet, so an order is keyed as its position is (`NASDAQ:AAPL`, never
    /// `US:AAPL`). A symbol Alpaca does not list stays `US`; other failures are the
    /// caller's.
    async fn learn_exchanges(&self, orders: &[&Value]) -> Result<(), BrokerError> {
        let mut symbols: Vec<&str> = Vec::new();
        for o in orders {
            symbols.push(text(o, "symbol").unwrap_or_default());
            for leg in o
                .get("legs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                symbols.push(text(leg, "symbol").unwrap_or_default());
            }
        }
        symbols.sort_unstable();
        symbols.dedup();
        for symbol in symbols {
            if symbol.is_empty() || crate::occ::parse(symbol).is_some() {
                continue;
            }
            match self.exchange_of(symbol).await {
                Ok(_) | Err(BrokerError::UnknownSymbol { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn record_of(&self, o: &Value) -> Option<OrderRecord> {
        let created = time(o, "created_at").or_else(|| time(o, "submitted_at"))?;
        Some(OrderRecord {
            order_id: text(o, "id")?.to_owned(),
            client_order_id: text(o, "client_order_id").unwrap_or_default().to_owned(),
            account: self.config.account.clone(),
            key: InstrumentKey::new(self.known_exchange(o)?, text(o, "symbol")?),
            side: if text(o, "side")? == "buy" {
                Side::Buy
            } else {
                Side::Sell
            },
            order_type: order_type_of(text(o, "type").or_else(|| text(o, "order_type"))?)
                .unwrap_or(OrderType::Market),
            quantity: dec(o, "qty").unwrap_or_default(),
            filled_quantity: dec(o, "filled_qty").unwrap_or_default(),
            average_price: dec(o, "filled_avg_price"),
            limit_price: dec(o, "limit_price"),
            stop_price: dec(o, "stop_price"),
            time_in_force: match text(o, "time_in_force") {
                Some("gtc") => TimeInForce::Gtc,
                Some("ioc") => TimeInForce::Ioc,
                Some("fok") => TimeInForce::Fok,
                _ => TimeInForce::Day,
            },
            stop_loss: o
                .get("legs")
                .and_then(Value::as_array)
                .and_then(|legs| legs.iter().find_map(|l| dec(l, "stop_price"))),
            take_profit: o
                .get("legs")
                .and_then(Value::as_array)
                .and_then(|legs| legs.iter().find_map(|l| dec(l, "limit_price"))),
            status: status_of(text(o, "status")?),
            mode: self.mode(),
            comment: None,
            reason: text(o, "status")
                .filter(|s| matches!(*s, "rejected" | "canceled" | "expired" | "replaced"))
                .map(str::to_owned),
            created,
            updated: time(o, "updated_at").unwrap_or(created),
        })
    }

    /// Builds the book: fills from activities, fees joined to their orders where named,
    /// cash anchored to the account's reported cash, marks and reported positions from
    /// the positions.
    async fn build_book(&self) -> Result<Book, BrokerError> {
        let account = self.get_ok(self.trading("/v2/account"), &[], false).await?;
        let positions = self
            .get_ok(self.trading("/v2/positions"), &[], true)
            .await?;
        let (activities, asked) = self.activities().await?;
        let currency = Currency::new_checked(text(&account, "currency").unwrap_or("USD"))
            .unwrap_or(Currency::USD);
        let utc = Utc.fix();
        let today = Utc::now().date_naive();
        // Symbols and their exchanges.
        let positions = positions.as_array().cloned().unwrap_or_default();
        for p in &positions {
            if let (Some(sym), Some(exchange)) = (text(p, "symbol"), text(p, "exchange")) {
                self.exchanges
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(sym.to_owned(), exchange.to_owned());
            }
        }
        // Every symbol a fill, a transfer of shares or an option event names, and the
        // underlying an option event may deliver.
        let mut symbols: Vec<String> = activities
            .iter()
            .filter(|a| {
                matches!(
                    meaning(text(a, "activity_type").unwrap_or_default()),
                    Meaning::Trade | Meaning::Shares | Meaning::Transfer | Meaning::Option(_)
                )
            })
            .filter_map(|a| text(a, "symbol").map(str::to_owned))
            .collect();
        let roots: Vec<String> = activities
            .iter()
            .filter(|a| {
                matches!(
                    meaning(text(a, "activity_type").unwrap_or_default()),
                    Meaning::Option(OptionEvent::Assigned | OptionEvent::Exercised)
                )
            })
            .filter_map(|a| crate::occ::parse(text(a, "symbol")?))
            .filter(|o| !o.is_adjusted())
            .map(|o| o.root)
            .collect();
        symbols.extend(roots);
        symbols.sort();
        symbols.dedup();
        // Each symbol's class and multiplier, fills' and positions' alike.
        let mut specs: BTreeMap<String, Spec> = BTreeMap::new();
        for s in symbols
            .iter()
            .map(String::as_str)
            .chain(positions.iter().filter_map(|p| text(p, "symbol")))
        {
            if specs.contains_key(s) {
                continue;
            }
            let position = positions.iter().find(|p| text(p, "symbol") == Some(s));
            let spec = self.spec_of(s, position).await?;
            if spec.class == AssetClass::Option {
                self.exchanges
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .insert(s.to_owned(), OPTION_EXCHANGE.to_owned());
            }
            specs.insert(s.to_owned(), spec);
        }
        let mut unlisted = Vec::new();
        for s in &symbols {
            if specs.get(s).is_some_and(|x| x.class == AssetClass::Option) {
                continue;
            }
            match self.exchange_of(s).await {
                Ok(_) => {}
                // Delisted or renamed since: kept, under the exchange "US".
                Err(BrokerError::UnknownSymbol { .. }) => unlisted.push(s.clone()),
                Err(e) => return Err(e),
            }
        }
        let mut instruments: Vec<Instrument> = Vec::new();
        let mut unknown_specs: Vec<UnknownSpec> = Vec::new();
        let mut index = |symbol: &str, exchanges: &BTreeMap<String, String>| -> u32 {
            let key = InstrumentKey::new(
                exchanges
                    .get(symbol)
                    .cloned()
                    .unwrap_or_else(|| "US".to_owned()),
                symbol,
            );
            if let Some(i) = instruments.iter().position(|x| x.key == key) {
                return u32::try_from(i).unwrap_or(u32::MAX);
            }
            let spec = specs.get(symbol).unwrap_or(&Spec::EQUITY);
            let idx = u32::try_from(instruments.len()).unwrap_or(u32::MAX);
            if let Some((detail, fix)) = &spec.assumed {
                unknown_specs.push(UnknownSpec {
                    instrument: idx,
                    detail: detail.clone(),
                    fix: fix.clone(),
                });
            }
            instruments.push(Instrument {
                key,
                currency,
                asset_class: spec.class,
                multiplier: spec.multiplier,
                name: None,
                sector: None,
                country: Some("US".to_owned()),
            });
            idx
        };
        let exchanges = self
            .exchanges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let positions_by_symbol: BTreeMap<&str, &Value> = positions
            .iter()
            .filter_map(|p| Some((text(p, "symbol")?, p)))
            .collect();
        let mut fills: Vec<Fill> = Vec::new();
        let mut cash: Vec<CashEntry> = Vec::new();
        let mut actions: Vec<CorporateAction> = Vec::new();
        let mut account_fees = Decimal::ZERO;
        let mut said = Said::default();
        // The rows an option event's stock delivery is read from (same group, the
        // underlying's symbol): consumed by the event, not booked again.
        let mut delivered: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
        for (n, a) in activities.iter().enumerate() {
            let seq = u32::try_from(n).unwrap_or(u32::MAX);
            let kind = text(a, "activity_type").unwrap_or_default();
            if text(a, "status") == Some("canceled") || delivered.contains(&n) {
                continue;
            }
            let meaning = meaning(kind);
            if meaning == Meaning::Trade {
                let (Some(id), Some(symbol), Some(t), Some(qty), Some(price)) = (
                    text(a, "id"),
                    text(a, "symbol"),
                    time(a, "transaction_time"),
                    dec(a, "qty"),
                    dec(a, "price"),
                ) else {
                    return Err(self.unavailable(format!(
                        "a FILL activity lacks id, symbol, transaction_time, qty or price: {}",
                        tradedesk_core::error::quote(&a.to_string())
                    )));
                };
                // Alpaca names a short sale `sell_short`: a plain `sell` closes a long
                // holding, and never opens a short one (docs/dev/alpaca-facts.md).
                let (side, fill_kind) = match text(a, "side") {
                    Some("buy") => (Side::Buy, FillKind::Trade),
                    Some("sell") => (Side::Sell, FillKind::Close),
                    Some("sell_short") => (Side::Sell, FillKind::Trade),
                    other => {
                        return Err(self.unavailable(format!(
                            "a FILL activity has the side {}, not buy, sell or sell_short: {}",
                            other.map_or_else(|| "(none)".to_owned(), tradedesk_core::error::quote),
                            tradedesk_core::error::quote(id)
                        )));
                    }
                };
                fills.push(Fill {
                    id: id.into(),
                    account: 0,
                    instrument: index(symbol, &exchanges),
                    side,
                    quantity: qty.abs(),
                    price,
                    commission: Decimal::ZERO,
                    commission_currency: currency,
                    commission_known: true,
                    time: t.with_timezone(&utc),
                    trade_date: t.with_timezone(&eastern(t)).date_naive(),
                    seq,
                    kind: fill_kind,
                    position: 0,
                });
                continue;
            }
            // A non-trade activity: its own date first (`created_at` can be years later).
            let day = text(a, "date")
                .and_then(|d| NaiveDate::parse_from_str(d.get(..10).unwrap_or(d), "%Y-%m-%d").ok())
                .or_else(|| time(a, "created_at").map(|t| t.date_naive()));
            let Some(day) = day else {
                said.unread
                    .push(format!("{kind} {} (no date)", text(a, "id").unwrap_or("?")));
                continue;
            };
            let at = Utc
                .from_utc_datetime(&day.and_time(chrono::NaiveTime::MIN))
                .with_timezone(&utc)
                + chrono::Duration::hours(12);
            let amount = dec(a, "net_amount").filter(|x| !x.is_zero());
            let id = text(a, "id").unwrap_or_default();
            let symbol = text(a, "symbol");
            let mut book_cash = |kind: CashKind, amount: Decimal| {
                cash.push(CashEntry {
                    account: 0,
                    kind,
                    amount,
                    currency,
                    time: at,
                });
            };
            let flow = |x: Decimal| {
                if x.is_sign_negative() {
                    CashKind::Withdrawal
                } else {
                    CashKind::Deposit
                }
            };
            match meaning {
                Meaning::Trade => {}
                Meaning::Cash(cash_kind) => {
                    if let Some(x) = amount {
                        if cash_kind == CashKind::Fee {
                            account_fees -= x;
                        }
                        book_cash(cash_kind, x);
                    }
                }
                Meaning::ReturnOfCapital => {
                    if let Some(x) = amount {
                        book_cash(CashKind::Dividend, x);
                        said.return_of_capital.push(format!(
                            "{} {} on {day}",
                            currency.round(x),
                            symbol.unwrap_or("?")
                        ));
                    }
                }
                Meaning::Transfer if symbol.is_none() || dec(a, "qty").is_none() => {
                    if let Some(x) = amount {
                        book_cash(flow(x), x);
                    }
                }
                Meaning::Transfer | Meaning::Shares => {
                    if let Some(x) = amount {
                        book_cash(flow(x), x);
                    }
                    let (Some(symbol), Some(qty)) = (symbol, dec(a, "qty")) else {
                        said.unread.push(format!("{kind} {id} (no symbol or qty)"));
                        continue;
                    };
                    if qty.is_sign_negative() {
                        // Off the lots first in, first out, their cost leaving with the
                        // shares: no sale, nothing realized, no cash moved. The price is
                        // the activity's, shown only (docs/dev/alpaca-facts.md).
                        said.transferred_out
                            .push(format!("{kind} {} {symbol} on {day}", qty.abs()));
                        fills.push(
                            MadeFill {
                                id: id.to_owned(),
                                account: 0,
                                instrument: index(symbol, &exchanges),
                                side: Side::Sell,
                                quantity: qty.abs(),
                                price: dec(a, "price")
                                    .filter(|p| !p.is_sign_negative())
                                    .unwrap_or_default(),
                                currency,
                                time: at,
                                kind: FillKind::TransferOut,
                                commission_known: true,
                                seq,
                            }
                            .into(),
                        );
                        continue;
                    }
                    let reported = positions_by_symbol
                        .get(symbol)
                        .and_then(|p| dec(p, "avg_entry_price"))
                        .filter(|p| p.is_sign_positive() && !p.is_zero());
                    let price = match (dec(a, "price").filter(|p| !p.is_sign_negative()), reported)
                    {
                        (Some(p), _) => p,
                        (None, Some(p)) => {
                            said.transferred_at_average
                                .push(format!("{kind} {qty} {symbol} on {day} at {p}"));
                            p
                        }
                        (None, None) => {
                            said.transferred_without_cost
                                .push(format!("{kind} {qty} {symbol} on {day}"));
                            continue;
                        }
                    };
                    fills.push(
                        MadeFill {
                            id: id.to_owned(),
                            account: 0,
                            instrument: index(symbol, &exchanges),
                            side: Side::Buy,
                            quantity: qty,
                            price,
                            currency,
                            time: at,
                            kind: FillKind::Opening,
                            commission_known: false,
                            seq,
                        }
                        .into(),
                    );
                }
                Meaning::Option(event) => {
                    let Some(symbol) = symbol else {
                        said.unread.push(format!("{kind} {id} (no symbol)"));
                        continue;
                    };
                    let Some(occ) = crate::occ::parse(symbol) else {
                        // The stock leg of an event whose option row is elsewhere.
                        said.unread
                            .push(format!("{kind} {id} ({symbol} is not an option)"));
                        continue;
                    };
                    let contracts = dec(a, "qty").map(|q| q.abs()).filter(|q| !q.is_zero());
                    let option = index(symbol, &exchanges);
                    let action_kind = match event {
                        OptionEvent::Expired => ActionKind::Expiry {
                            quantity: contracts,
                        },
                        OptionEvent::Assigned | OptionEvent::Exercised => {
                            // The delivered shares: the sibling row naming the underlying,
                            // else the contract's own terms.
                            let group = text(a, "group_id");
                            let sibling = group.and_then(|g| {
                                activities.iter().enumerate().find(|(m, b)| {
                                    *m != n
                                        && text(b, "group_id") == Some(g)
                                        && text(b, "symbol")
                                            .is_some_and(|s| crate::occ::parse(s).is_none())
                                })
                            });
                            let holder_buys = (occ.right == crate::occ::Right::Call)
                                == (event == OptionEvent::Exercised);
                            let delivery = match sibling {
                                Some((m, b)) => {
                                    delivered.insert(m);
                                    let shares = dec(b, "qty");
                                    let price = dec(b, "price").or_else(|| {
                                        dec(b, "net_amount")?.abs().checked_div(shares?.abs())
                                    });
                                    match (text(b, "symbol"), shares, price) {
                                        (Some(u), Some(q), Some(p)) if !q.is_zero() => Some((
                                            text(b, "id").unwrap_or(id).to_owned(),
                                            u.to_owned(),
                                            if holder_buys { Side::Buy } else { Side::Sell },
                                            q.abs(),
                                            p,
                                        )),
                                        _ => None,
                                    }
                                }
                                None if !occ.is_adjusted() => {
                                    let per = specs
                                        .get(symbol)
                                        .map_or(Decimal::ONE_HUNDRED, |x| x.multiplier);
                                    contracts.and_then(|c| c.checked_mul(per)).map(|q| {
                                        said.delivery_from_terms
                                            .push(format!("{kind} {symbol} on {day}"));
                                        (
                                            format!("{id}:delivery"),
                                            occ.root.clone(),
                                            if holder_buys { Side::Buy } else { Side::Sell },
                                            q,
                                            occ.strike,
                                        )
                                    })
                                }
                                None => None,
                            };
                            let Some((fill_id, underlying, side, quantity, price)) = delivery
                            else {
                                said.unread.push(format!(
                                    "{kind} {symbol} on {day} (its delivery is not stated)"
                                ));
                                continue;
                            };
                            fills.push(
                                MadeFill {
                                    id: fill_id.clone(),
                                    account: 0,
                                    instrument: index(&underlying, &exchanges),
                                    side,
                                    quantity,
                                    price,
                                    currency,
                                    time: at,
                                    kind: FillKind::Trade,
                                    commission_known: true,
                                    seq,
                                }
                                .into(),
                            );
                            let fill = FillRef::new(fill_id);
                            if event == OptionEvent::Assigned {
                                ActionKind::Assignment {
                                    quantity: contracts,
                                    fill,
                                }
                            } else {
                                ActionKind::Exercise {
                                    quantity: contracts,
                                    fill,
                                }
                            }
                        }
                    };
                    actions.push(CorporateAction {
                        id: id.to_owned(),
                        account: 0,
                        instrument: option,
                        date: day,
                        kind: action_kind,
                    });
                }
                Meaning::Unapplied => {
                    if let Some(x) = amount {
                        book_cash(flow(x), x);
                    }
                    said.unapplied.push(format!(
                        "{kind}{} {} on {day}{}",
                        text(a, "activity_sub_type").map_or_else(String::new, |s| format!(" {s}")),
                        symbol.unwrap_or("?"),
                        amount.map_or_else(String::new, |x| format!(
                            " ({} {})",
                            currency.round(x),
                            currency.code()
                        ))
                    ));
                }
                Meaning::Unknown => {
                    if let Some(x) = amount {
                        book_cash(flow(x), x);
                    }
                    said.unknown.push(format!(
                        "{} {}{} on {day}",
                        tradedesk_core::error::quote(kind),
                        tradedesk_core::error::quote(id),
                        amount.map_or_else(String::new, |x| format!(
                            " ({} {})",
                            currency.round(x),
                            currency.code()
                        ))
                    ));
                }
            }
        }
        let mut marks = Vec::new();
        let mut reported = Vec::new();
        let mut average_cost: BTreeMap<u32, Decimal> = BTreeMap::new();
        for p in &positions {
            let Some(symbol) = text(p, "symbol") else {
                continue;
            };
            let instrument = index(symbol, &exchanges);
            if let Some(price) = dec(p, "current_price") {
                marks.push((instrument, today, price));
            }
            if let Some(avg) =
                dec(p, "avg_entry_price").filter(|x| x.is_sign_positive() && !x.is_zero())
            {
                average_cost.insert(instrument, avg);
            }
            if let Some(qty) = dec(p, "qty") {
                let signed = if text(p, "side") == Some("short") && qty.is_sign_positive() {
                    -qty
                } else {
                    qty
                };
                reported.push(ReportedPosition {
                    account: 0,
                    instrument,
                    quantity: signed,
                });
            }
        }
        let account_id = &self.config.account;
        let mut parts = BookParts {
            base_currency: currency,
            as_of: today,
            accounts: vec![self.account(currency)],
            instruments,
            fills,
            cash,
            marks,
            fx_rates: Vec::new(),
            reported_positions: reported,
            corporate_actions: actions,
            notes: specs.values().filter_map(|s| s.note.clone()).collect(),
            unknown_specs,
            tickets: Vec::new(),
            margin_modes: Vec::new(),
        };
        // Holdings the activities do not explain were held before the history Alpaca
        // gives: opened just before it at the position's average entry price. Only what
        // the broker holds beyond the fills, the same way round: fills that imply more
        // than the broker holds are the reconciliation's to show, not an opening short.
        let implied = crate::implied_quantities(&parts);
        let all_reported = std::mem::take(&mut parts.reported_positions);
        parts.reported_positions = all_reported
            .iter()
            .filter(|r| {
                let held = implied.get(&r.instrument).copied().unwrap_or_default();
                let beyond = r.quantity - held;
                !beyond.is_zero() && beyond.is_sign_positive() == r.quantity.is_sign_positive()
            })
            .cloned()
            .collect();
        let opened = crate::open_unexplained(&mut parts, &average_cost);
        parts.reported_positions = all_reported;
        if !opened.is_empty() {
            parts.notes.push(format!(
                "{account_id}: {} was held before the activities Alpaca gives: the part the fills do not explain is opened at Alpaca's avg_entry_price, fees unknown; P&L before the history is Alpaca's, not ours",
                opened.join(", ")
            ));
        }
        said.notes(account_id, currency, account_fees, &mut parts.notes);
        parts.notes.extend(asked);
        if !unlisted.is_empty() {
            parts.notes.push(format!(
                "{account_id}: Alpaca no longer lists {}: shown under the exchange US",
                unlisted.join(", ")
            ));
        }
        if let Some(reported_cash) = dec(&account, "cash") {
            crate::anchor_cash(
                &mut parts,
                &[(currency, reported_cash)],
                "Alpaca",
                "the account's activities",
            );
        }
        *self
            .equity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = dec(&account, "equity")
            .or_else(|| dec(&account, "portfolio_value"))
            .map(|e| (currency, e));
        *self
            .margin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(crate::AccountMargin {
            currency,
            margin_used: None,
            free_margin: None,
            margin_level: None,
            leverage: None,
            buying_power: dec(&account, "buying_power"),
            maintenance_margin: dec(&account, "maintenance_margin"),
        });
        Ok(Book::assemble(parts))
    }

    fn account(&self, currency: Currency) -> Account {
        Account {
            id: self.config.account.clone(),
            broker: "alpaca".to_owned(),
            currency,
            name: Some(format!(
                "Alpaca {}",
                if self.config.live { "live" } else { "paper" }
            )),
            mode: self.mode(),
        }
    }

    fn check_account(&self, account: &str) -> Result<(), BrokerError> {
        crate::check_served(&self.config.account, account)
    }
}

/// The waiting legs of a position's bracket: its stop-loss and take-profit orders.
#[derive(Debug, Default)]
struct Legs {
    stop: Option<Value>,
    take_profit: Option<Value>,
}

impl AlpacaBroker {
    async fn open_legs(&self, symbol: &str) -> Result<Legs, BrokerError> {
        let bare = symbol.rsplit_once(':').map_or(symbol, |(_, s)| s);
        let (_, body) = self
            .get(
                self.trading("/v2/orders"),
                // The legs wait under their parent, which has usually filled: every
                // order, nested, newest first.
                &[
                    ("status", "all".to_owned()),
                    ("nested", "true".to_owned()),
                    ("symbols", bare.to_owned()),
                    ("limit", "500".to_owned()),
                    ("direction", "desc".to_owned()),
                ],
            )
            .await?;
        let mut legs = Legs::default();
        let mut brackets = 0;
        for parent in body.as_array().into_iter().flatten() {
            // Only the bracket that opened the position: a pending one is another order.
            if !matches!(text(parent, "status"), Some("filled" | "partially_filled")) {
                continue;
            }
            let mut found = false;
            for leg in parent
                .get("legs")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !matches!(
                    text(leg, "status"),
                    Some("held" | "new" | "accepted" | "partially_filled" | "pending_replace")
                ) {
                    continue;
                }
                let slot = match text(leg, "type").or_else(|| text(leg, "order_type")) {
                    Some("stop" | "stop_limit") => &mut legs.stop,
                    Some("limit") => &mut legs.take_profit,
                    _ => continue,
                };
                found = true;
                if slot.is_none() {
                    *slot = Some(leg.clone());
                }
            }
            brackets += usize::from(found);
        }
        if brackets > 1 {
            // Which stop guards the position is not ours to guess.
            return Err(BrokerError::Rejected {
                account: self.config.account.clone(),
                reason: format!(
                    "{brackets} filled brackets on {} still have working legs; cancel the ones that no longer apply (get_orders) and retry",
                    tradedesk_core::error::quote(bare)
                ),
                order_id: None,
            });
        }
        Ok(legs)
    }
}

/// New York's offset at `t`, for the exchange's trade date: the US daylight-saving rule
/// of [`crate::flex::us_eastern_daylight`], asked at `t`'s standard-time wall clock (its
/// one ambiguous hour, 01:00 to 02:00 on the night clocks fall back, never moves a date).
fn eastern(t: DateTime<Utc>) -> FixedOffset {
    let standard = t.naive_utc() - chrono::Duration::hours(5);
    let hours = if crate::flex::us_eastern_daylight(standard) {
        -4
    } else {
        -5
    };
    FixedOffset::east_opt(hours * 3600).unwrap_or_else(|| Utc.fix())
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[async_trait]
impl Broker for AlpacaBroker {
    fn accounts(&self) -> Vec<Account> {
        vec![self.account(Currency::USD)]
    }

    fn markets(&self, _account: &str) -> Vec<Market> {
        MARKETS.to_vec()
    }

    /// Alpaca's clock and calendar are the US stock market's.
    fn keeps_calendar(&self, market: Market) -> bool {
        matches!(market, Market::Nyse | Market::Nasdaq)
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        self.build_book().await.map(Arc::new)
    }

    fn reported_equity(&self, account: &str) -> Option<(Currency, Decimal)> {
        if account != self.config.account {
            return None;
        }
        *self
            .equity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn reported_margin(&self, account: &str) -> Option<crate::AccountMargin> {
        if account != self.config.account {
            return None;
        }
        self.margin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Fills and activities arrive on their own: the book is read again every 30 s.
    fn generation(&self) -> u64 {
        crate::every(Duration::from_secs(30))
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let probe = self.get(self.trading("/v2/account"), &[]).await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        // The market clock says whether quotes are live (best effort: not a failure).
        let clock = match &probe {
            Ok(_) => self.get(self.trading("/v2/clock"), &[]).await.ok(),
            Err(_) => None,
        };
        let market = clock.map_or_else(String::new, |(_, c)| {
            match c.get("is_open").and_then(Value::as_bool) {
                Some(true) => format!(
                    "; market open until {}",
                    tradedesk_core::error::quote(text(&c, "next_close").unwrap_or("?"))
                ),
                Some(false) => format!(
                    "; market closed, opens {}",
                    tradedesk_core::error::quote(text(&c, "next_open").unwrap_or("?"))
                ),
                None => String::new(),
            }
        });
        let (status, detail, hint) = match probe {
            Ok((_, body)) => (
                HealthStatus::Ok,
                format!(
                    "{} account {}, status {}{market}",
                    if self.config.live { "live" } else { "paper" },
                    tradedesk_core::error::quote(text(&body, "account_number").unwrap_or("?")),
                    tradedesk_core::error::quote(text(&body, "status").unwrap_or("?"))
                ),
                None,
            ),
            Err(BrokerError::RateLimited { .. }) => (
                HealthStatus::Degraded,
                "rate limited".to_owned(),
                Some("wait a minute; Alpaca allows 200 requests a minute".to_owned()),
            ),
            Err(e) => crate::down(&e, None, "check the network and Alpaca's status page"),
        };
        vec![AccountHealth {
            account: self.config.account.clone(),
            broker: "alpaca".to_owned(),
            mode: self.mode(),
            status,
            latency_ms: Some(latency_ms),
            detail,
            hint,
        }]
    }

    fn trading_modes(&self, account: &str) -> Vec<Mode> {
        if account == self.config.account {
            vec![self.mode()]
        } else {
            Vec::new()
        }
    }

    async fn instrument(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<TradableInstrument, BrokerError> {
        self.check_account(account)?;
        let symbol = symbol
            .rsplit_once(':')
            .map_or(symbol, |(_, s)| s)
            .trim()
            .to_ascii_uppercase();
        if crate::occ::parse(&symbol).is_some() {
            let spec = self.spec_of(&symbol, None).await?;
            if let Some((detail, fix)) = spec.assumed {
                return Err(BrokerError::UnknownSymbol {
                    account: self.config.account.clone(),
                    symbol: tradedesk_core::error::quote(&symbol),
                    known: format!(
                        "option contracts whose multiplier Alpaca states ({detail}; {fix})"
                    ),
                });
            }
            return Ok(TradableInstrument {
                key: InstrumentKey::new(OPTION_EXCHANGE, symbol),
                currency: Currency::USD,
                asset_class: AssetClass::Option,
                multiplier: spec.multiplier,
                lot_step: Decimal::ONE,
                min_quantity: Decimal::ONE,
                max_quantity: Decimal::from(10_000),
                tick: Decimal::new(1, 2),
                pip: None,
                margin_rate: Decimal::ONE,
                unit: "contracts",
            });
        }
        let (status, body) = self
            .get(
                self.trading(&format!("/v2/assets/{}", urlencode(&symbol))),
                &[],
            )
            .await?;
        if status == 404 || body.get("tradable").and_then(Value::as_bool) == Some(false) {
            return Err(BrokerError::UnknownSymbol {
                account: self.config.account.clone(),
                symbol: tradedesk_core::error::quote(&symbol),
                known: "US stocks and ETFs Alpaca lists".to_owned(),
            });
        }
        let exchange = text(&body, "exchange").unwrap_or("US").to_owned();
        self.exchanges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(symbol.clone(), exchange.clone());
        let fractionable = body.get("fractionable").and_then(Value::as_bool) == Some(true);
        let step = if fractionable {
            dec(&body, "min_trade_increment").unwrap_or(Decimal::new(1, 9))
        } else {
            Decimal::ONE
        };
        Ok(TradableInstrument {
            key: InstrumentKey::new(exchange, symbol),
            currency: Currency::USD,
            asset_class: if text(&body, "class") == Some("us_equity") {
                AssetClass::Equity
            } else {
                AssetClass::Crypto
            },
            multiplier: Decimal::ONE,
            lot_step: step,
            min_quantity: dec(&body, "min_order_size").unwrap_or(step),
            max_quantity: Decimal::from(1_000_000),
            tick: dec(&body, "price_increment").unwrap_or(Decimal::new(1, 2)),
            pip: None,
            margin_rate: Decimal::ONE,
            unit: "shares",
        })
    }

    async fn quote(&self, account: &str, symbol: &str) -> Result<Quote, BrokerError> {
        self.check_account(account)?;
        let bare = symbol.rsplit_once(':').map_or(symbol, |(_, s)| s);
        let (status, body) = self
            .get(
                self.data(&format!("/v2/stocks/{}/quotes/latest", urlencode(bare))),
                &[("feed", "iex".to_owned())],
            )
            .await?;
        let q = body.get("quote").filter(|_| status == 200).ok_or_else(|| {
            BrokerError::UnknownSymbol {
                account: self.config.account.clone(),
                symbol: tradedesk_core::error::quote(bare),
                known: "US stocks and ETFs Alpaca quotes".to_owned(),
            }
        })?;
        let (Some(bid), Some(ask)) = (dec(q, "bp"), dec(q, "ap")) else {
            return Err(self.unavailable(format!("the quote for {bare} has no bid or ask")));
        };
        let exchange = self
            .exchange_of(bare)
            .await
            .unwrap_or_else(|_| "US".to_owned());
        Ok(Quote {
            key: InstrumentKey::new(exchange, bare),
            currency: Currency::USD,
            bid,
            ask,
            time: time(q, "t").unwrap_or_else(Utc::now),
        })
    }

    async fn bars(
        &self,
        account: &str,
        symbol: &str,
        interval: Interval,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<Bar>, BrokerError> {
        self.check_account(account)?;
        let bare = symbol.rsplit_once(':').map_or(symbol, |(_, s)| s);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let mut query = vec![
                ("timeframe", timeframe(interval).to_owned()),
                ("start", start.to_rfc3339_opts(SecondsFormat::Secs, true)),
                ("end", end.to_rfc3339_opts(SecondsFormat::Secs, true)),
                ("limit", "10000".to_owned()),
                ("adjustment", "raw".to_owned()),
                ("feed", "iex".to_owned()),
            ];
            if let Some(t) = &token {
                query.push(("page_token", t.clone()));
            }
            let (_, body) = self
                .get(
                    self.data(&format!("/v2/stocks/{}/bars", urlencode(bare))),
                    &query,
                )
                .await?;
            for b in body
                .get("bars")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let (Some(t), Some(o), Some(h), Some(l), Some(c)) = (
                    time(b, "t"),
                    b.get("o").and_then(Value::as_f64),
                    b.get("h").and_then(Value::as_f64),
                    b.get("l").and_then(Value::as_f64),
                    b.get("c").and_then(Value::as_f64),
                ) else {
                    continue;
                };
                out.push(Bar {
                    time: if interval == Interval::D1 {
                        t.with_timezone(&eastern(t)).date_naive().to_string()
                    } else {
                        t.to_rfc3339_opts(SecondsFormat::Secs, true)
                    },
                    instant: t,
                    open: o,
                    high: h,
                    low: l,
                    close: c,
                    volume: b.get("v").and_then(Value::as_f64),
                });
            }
            token = text(&body, "next_page_token").map(str::to_owned);
            if token.is_none() {
                return Ok(out);
            }
        }
        Err(BrokerError::InvalidRequest {
            account: self.config.account.clone(),
            reason: format!("more than {MAX_PAGES} pages of bars; ask for a shorter range"),
        })
    }

    async fn orders(
        &self,
        account: Option<&str>,
        filter: OrderFilter,
    ) -> Result<Vec<OrderRecord>, BrokerError> {
        if let Some(a) = account {
            self.check_account(a)?;
        }
        let status = match filter {
            OrderFilter::Open => "open",
            OrderFilter::Closed => "closed",
            OrderFilter::All => "all",
        };
        let (_, body) = self
            .get(
                self.trading("/v2/orders"),
                &[
                    ("status", status.to_owned()),
                    ("limit", "500".to_owned()),
                    ("direction", "desc".to_owned()),
                    ("nested", "true".to_owned()),
                ],
            )
            .await?;
        let listed: Vec<&Value> = body.as_array().into_iter().flatten().collect();
        self.learn_exchanges(&listed).await?;
        Ok(listed
            .into_iter()
            .filter_map(|o| self.record_of(o))
            .collect())
    }

    async fn find_order(
        &self,
        account: &str,
        client_order_id: &str,
    ) -> Result<Option<OrderRecord>, BrokerError> {
        self.check_account(account)?;
        let (status, body) = self
            .get(
                self.trading("/v2/orders:by_client_order_id"),
                &[("client_order_id", client_order_id.to_owned())],
            )
            .await?;
        if status == 404 {
            return Ok(None);
        }
        self.learn_exchanges(&[&body]).await?;
        Ok(self.record_of(&body))
    }

    async fn place(&self, order: &OrderRequest) -> Result<Placed, BrokerError> {
        self.check_account(&order.terms.account)?;
        let mut body = json!({
            "symbol": order.key.symbol,
            "qty": order.quantity.normalize().to_string(),
            "side": order.terms.side.as_str(),
            "type": order.terms.order_type.as_str(),
            "time_in_force": order.terms.time_in_force.as_str(),
            "client_order_id": order.client_order_id,
        });
        if let Some(p) = order.terms.limit_price {
            body["limit_price"] = json!(p.normalize().to_string());
        }
        if let Some(p) = order.terms.stop_price {
            body["stop_price"] = json!(p.normalize().to_string());
        }
        // Alpaca keeps stop-loss and take-profit as legs: both is a bracket, one is OTO.
        match (order.terms.stop_loss, order.terms.take_profit) {
            (None, None) => {}
            (sl, tp) => {
                body["order_class"] = json!(if sl.is_some() && tp.is_some() {
                    "bracket"
                } else {
                    "oto"
                });
                if let Some(sl) = sl {
                    body["stop_loss"] = json!({"stop_price": sl.normalize().to_string()});
                }
                if let Some(tp) = tp {
                    body["take_profit"] = json!({"limit_price": tp.normalize().to_string()});
                }
            }
        }
        // A close is an ordinary order too: Alpaca's close-position endpoint takes no
        // client order id, and an order without one could not be looked up after a
        // timeout. The guards have already capped it at the position.
        let request = self.client.post(self.trading("/v2/orders")).json(&body);
        let (status, answer) = self.send(request, true).await?;
        if status == 422 && text(&answer, "message").is_some_and(|m| m.contains("client_order_id"))
        {
            // Alpaca already has an order with this id: this may be our own, sent before.
            // Only a lookup can tell; never a second order.
            return Err(BrokerError::Uncertain {
                account: self.config.account.clone(),
                detail: format!(
                    "Alpaca already has an order with client order id {}",
                    tradedesk_core::error::quote(&order.client_order_id)
                ),
            });
        }
        if status >= 300 {
            return Err(self.rejected(status, &answer));
        }
        // Best effort: the order is placed whatever the lookup answers.
        let _ = self.learn_exchanges(&[&answer]).await;
        let record = self
            .record_of(&answer)
            .ok_or_else(|| BrokerError::Uncertain {
                account: self.config.account.clone(),
                detail: "the broker's answer is not an order".to_owned(),
            })?;
        if record.status == OrderStatus::Rejected {
            return Err(BrokerError::Rejected {
                account: self.config.account.clone(),
                reason: "rejected by Alpaca".to_owned(),
                order_id: Some(record.order_id),
            });
        }
        let message = format!(
            "Alpaca order {} is {}",
            record.order_id,
            text(&answer, "status").unwrap_or("?")
        );
        Ok(Placed {
            order: record,
            message,
        })
    }

    async fn position_levels(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        self.check_account(account)?;
        let legs = self.open_legs(symbol).await?;
        Ok((
            legs.stop.as_ref().and_then(|l| dec(l, "stop_price")),
            legs.take_profit
                .as_ref()
                .and_then(|l| dec(l, "limit_price")),
        ))
    }

    /// Alpaca keeps a position's stop-loss and take-profit as the waiting legs of a
    /// bracket (or OTO) order: moving one replaces that leg (`PATCH`, which answers a
    /// new order in its place).
    async fn modify_position(
        &self,
        account: &str,
        symbol: &str,
        stop_loss: Option<Decimal>,
        take_profit: Option<Decimal>,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        self.check_account(account)?;
        let legs = self.open_legs(symbol).await?;
        let mut levels = (
            legs.stop.as_ref().and_then(|l| dec(l, "stop_price")),
            legs.take_profit
                .as_ref()
                .and_then(|l| dec(l, "limit_price")),
        );
        // The stop-loss's new level once it has moved (it is moved first).
        let mut moved_stop: Option<Decimal> = None;
        for (new, leg, field, slot) in [
            (stop_loss, &legs.stop, "stop_price", &mut levels.0),
            (take_profit, &legs.take_profit, "limit_price", &mut levels.1),
        ] {
            let Some(new) = new else {
                continue;
            };
            let Some(id) = leg.as_ref().and_then(|l| text(l, "id")) else {
                return Err(BrokerError::Rejected {
                    account: self.config.account.clone(),
                    reason: format!(
                        "{} has no {} order to move: Alpaca keeps them as legs of a bracket order; place the position with stop_loss / take_profit",
                        symbol.rsplit_once(':').map_or(symbol, |(_, s)| s),
                        if field == "stop_price" {
                            "stop-loss"
                        } else {
                            "take-profit"
                        }
                    ),
                    order_id: None,
                });
            };
            let (status, answer) = self
                .send(
                    self.client
                        .patch(self.trading(&format!("/v2/orders/{}", urlencode(id))))
                        .json(&json!({ field: new.normalize().to_string() })),
                    true,
                )
                .await?;
            if status >= 300 {
                let mut error = self.rejected(status, &answer);
                if let Some(stop) = moved_stop
                    && let BrokerError::Rejected { reason, .. } = &mut error
                {
                    // The first leg did move: say so, so nobody moves it twice.
                    *reason = format!(
                        "{reason} (the stop-loss was already moved to {stop}; only the take-profit failed)"
                    );
                }
                return Err(error);
            }
            *slot = dec(&answer, field);
            if field == "stop_price" {
                moved_stop = *slot;
            }
        }
        Ok(levels)
    }

    async fn cancel(
        &self,
        account: &str,
        reference: &OrderRef,
    ) -> Result<(OrderRecord, bool), BrokerError> {
        self.check_account(account)?;
        let order = match reference {
            OrderRef::OrderId(id) => {
                let (status, body) = self
                    .get(self.trading(&format!("/v2/orders/{}", urlencode(id))), &[])
                    .await?;
                if status == 200 {
                    self.learn_exchanges(&[&body]).await?;
                }
                (status == 200).then(|| self.record_of(&body)).flatten()
            }
            OrderRef::ClientOrderId(id) => self.find_order(account, id).await?,
        };
        let Some(order) = order else {
            return Err(BrokerError::UnknownOrder {
                account: account.to_owned(),
                reference: match reference {
                    OrderRef::OrderId(id) | OrderRef::ClientOrderId(id) => {
                        tradedesk_core::error::quote(id)
                    }
                },
            });
        };
        let (status, answer) = self
            .send(
                self.client
                    .delete(self.trading(&format!("/v2/orders/{}", urlencode(&order.order_id)))),
                true,
            )
            .await?;
        if status == 422 {
            // Not cancelable: filled, cancelled or expired already.
            return Ok((order, false));
        }
        if status >= 300 {
            return Err(self.rejected(status, &answer));
        }
        // Alpaca cancels asynchronously: what the order says now decides, not the 204.
        let after = self
            .get(
                self.trading(&format!("/v2/orders/{}", urlencode(&order.order_id))),
                &[],
            )
            .await
            .ok()
            .and_then(|(_, body)| {
                self.record_of(&body)
                    .map(|r| (r, text(&body, "status").map(str::to_owned)))
            });
        Ok(match after {
            Some((record, status)) => {
                let cancelled = matches!(status.as_deref(), Some("canceled" | "pending_cancel"));
                (record, cancelled)
            }
            None => (order, true),
        })
    }

    /// Stock and option snapshots, one request each (`snapshots.rs`).
    async fn market_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<crate::MarketSnapshots, BrokerError> {
        self.read_snapshots(account, symbols).await
    }

    /// The contract list and the chain's snapshots (`chain.rs`).
    async fn option_chain(
        &self,
        account: &str,
        query: &crate::option_chain::ChainQuery,
    ) -> Result<crate::option_chain::OptionChain, BrokerError> {
        self.read_option_chain(account, query).await
    }

    /// Alpaca's asset list (`assets`).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        self.search(account, query).await
    }

    async fn news(
        &self,
        account: &str,
        query: &crate::news::NewsQuery,
    ) -> Result<crate::news::NewsPage, BrokerError> {
        self.check_account(account)?;
        self.read_news(query).await
    }

    async fn market_calendar(
        &self,
        account: &str,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<crate::calendar::VenueCalendar, BrokerError> {
        self.check_account(account)?;
        self.read_calendar(from, to).await
    }
}

// ---------------------------------------------------------------------------------------
// News and the market calendar (get_news, get_market_hours), in their own files.

mod calendar;
mod news;
