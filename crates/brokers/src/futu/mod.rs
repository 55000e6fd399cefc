//! Moomoo / Futu OpenD, read-only: the OpenD TCP protocol spoken directly (a 44-byte
//! header: `FT`, proto id, format, version, serial number, body length, SHA-1 of the
//! body, 8 reserved bytes, all little-endian; protobuf bodies; no encryption).
//!
//! * **Session:** `InitConnect` (saying "no encryption"), then requests one at a time,
//!   each reply matched by proto id and serial number and its SHA-1 checked; pushes are
//!   skipped. Before reusing an idle connection a `KeepAlive` proves it alive; a dead one
//!   is replaced.
//! * **Account:** `Trd_GetAccList`; `account` in the config picks the account id, else
//!   the one real account with the configured market (`MY` for Bursa Malaysia, `HK`,
//!   `US`); several are refused with the list.
//! * **Book:** funds (cash per currency), positions (with OpenD's prices), historical
//!   fills in windows of 90 days and today's fills (`Trd_GetOrderFillList`; OpenD's
//!   history is its past days), each fill counted once, and each order's fees (`Trd_GetOrderFee`) joined to its
//!   first fill. Fills carry no fees of their own; where OpenD has none for an order, its
//!   fills are marked fees unknown and realized P&L is gross of them, as the book says.
//!   Daily K-lines are windowed in the exchange's days.
//! * **Market data:** snapshots for quotes, `Qot_RequestHistoryKL` for bars.
//!
//! * **Simulated accounts:** OpenD gives paper trading no fills, so their historical and
//!   today's orders (`Trd_GetOrderList`) are read and each filled order is booked as one
//!   fill, without fees, and said so.
//! * **Currencies:** OpenD's own conversion, from the funds asked in each currency held
//!   (`opend_rates`).
//!
//! OpenD allows 10 history queries per 30 s per account, so a built book is kept for
//! `CACHE_FOR` before it is read again, and the history read and the query budget are
//! shared through the state directory by every process using it ([`history`]).

mod chain;
pub mod history;
pub mod proto;
mod search;
mod snapshots;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};
use prost::Message;
use rust_decimal::Decimal;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Mutex;
use tradedesk_core::{
    Account, AssetClass, Bar, Book, BookParts, Currency, Fill, Instrument, InstrumentKey, Interval,
    Mode, Quote, ReportedPosition, Side, TradableInstrument, UnknownSpec,
};

use crate::zones;
use crate::{AccountHealth, Broker, BrokerError, HealthStatus};

pub const DEFAULT_PORT: u16 = 11111;
pub const HEADER_LEN: usize = 44;
/// A bound on one reply's body: OpenD's largest answers are fill lists.
const MAX_BODY: u32 = 64 * 1024 * 1024;
/// How long a built book is served before OpenD is asked again.
const CACHE_FOR: Duration = Duration::from_secs(30);
/// OpenD's history queries are asked in windows of this many days.
const WINDOW_DAYS: i64 = 90;
/// The client version sent in InitConnect: what the current futu-api SDK sends
/// (`CLIENT_VERSION`); OpenD judges a client's protocol by it.
pub const CLIENT_VER: i32 = 300;
/// Orders per fee query.
const FEE_BATCH: usize = 400;

/// Which of the account's markets this adapter reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutuMarket {
    /// Bursa Malaysia (moomoo MY; live only).
    My,
    Hk,
    Us,
}

impl FutuMarket {
    /// # Errors
    /// A market other than MY, HK or US, with what to write.
    pub fn parse(text: &str) -> Result<Self, String> {
        match text.to_ascii_uppercase().as_str() {
            "MY" | "BURSA" => Ok(Self::My),
            "HK" => Ok(Self::Hk),
            "US" => Ok(Self::Us),
            other => Err(format!(
                "market '{other}' is not one tradedesk reads through OpenD: write MY (Bursa Malaysia), HK or US"
            )),
        }
    }

    fn trd_market(self) -> i32 {
        match self {
            Self::My => proto::trd_market::MY,
            Self::Hk => proto::trd_market::HK,
            Self::Us => proto::trd_market::US,
        }
    }

    fn currency(self) -> Currency {
        match self {
            Self::My => Currency::MYR,
            Self::Hk => ccy("HKD"),
            Self::Us => Currency::USD,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::My => "MY",
            Self::Hk => "HK",
            Self::Us => "US",
        }
    }
}

#[derive(Debug, Clone)]
pub struct OpenDConfig {
    /// The config's name for the account.
    pub id: String,
    pub host: String,
    pub port: u16,
    /// OpenD's account id (`accID`), when the login has several.
    pub acc_id: Option<u64>,
    pub market: FutuMarket,
    /// Real (live) or simulated; Bursa has no simulated accounts.
    pub simulate: bool,
    /// How far back fills are read.
    pub history_days: u32,
    pub timeout: Duration,
    /// Where the history read from OpenD and its request budget are kept, shared by every
    /// tradedesk process using this state directory (`None`: this process alone).
    pub state_dir: Option<std::path::PathBuf>,
}

/// Where a security trades, by OpenD's security market.
fn exchange_of(sec_market: i32) -> (&'static str, Currency, &'static str) {
    match sec_market {
        proto::sec_market::MY => ("BURSA", Currency::MYR, "MY"),
        proto::sec_market::HK => ("HKEX", ccy("HKD"), "HK"),
        proto::sec_market::US => ("US", Currency::USD, "US"),
        proto::sec_market::SG => ("SGX", ccy("SGD"), "SG"),
        proto::sec_market::JP => ("TSE", ccy("JPY"), "JP"),
        proto::sec_market::CN_SH => ("SSE", ccy("CNH"), "CN"),
        proto::sec_market::CN_SZ => ("SZSE", ccy("CNH"), "CN"),
        proto::sec_market::AU => ("ASX", ccy("AUD"), "AU"),
        _ => ("FUTU", Currency::USD, "XX"),
    }
}

/// Qot_Common.SecurityType_Drvt: options.
const SECURITY_TYPE_DRVT: i32 = 8;

/// An option's code as OpenD writes it (`AAPL240126P50000`, `TCH240429C350000`): a root
/// starting with a letter, the expiry as YYMMDD, `C` or `P`, and the strike in
/// thousandths.
fn is_option_code(code: &str) -> bool {
    if !code.is_ascii() {
        return false;
    }
    let Some(at) = code.rfind(['C', 'P']) else {
        return false;
    };
    let (head, strike) = (&code[..at], &code[at + 1..]);
    let Some(split) = head.len().checked_sub(6) else {
        return false;
    };
    let (root, date) = head.split_at(split);
    !strike.is_empty()
        && strike.bytes().all(|b| b.is_ascii_digit())
        && root.starts_with(|c: char| c.is_ascii_uppercase())
        && root.bytes().all(|b| b.is_ascii_alphanumeric())
        && date.bytes().all(|b| b.is_ascii_digit())
        && NaiveDate::parse_from_str(&format!("20{date}"), "%Y%m%d").is_ok()
}

/// A currency by its ISO code (the codes here are all valid).
fn ccy(code: &str) -> Currency {
    Currency::new_checked(code).unwrap_or(Currency::USD)
}

fn currency_of(code: i32) -> Option<Currency> {
    Some(match code {
        proto::currency::HKD => ccy("HKD"),
        proto::currency::USD => Currency::USD,
        proto::currency::JPY => ccy("JPY"),
        proto::currency::SGD => ccy("SGD"),
        proto::currency::AUD => ccy("AUD"),
        proto::currency::MYR => Currency::MYR,
        proto::currency::CAD => ccy("CAD"),
        proto::currency::CNH => ccy("CNH"),
        _ => return None,
    })
}

fn decimal(v: Option<f64>) -> Option<Decimal> {
    let v = v?;
    if !v.is_finite() {
        return None;
    }
    v.to_string().parse::<Decimal>().ok()
}

/// OpenD's own conversion, read from the funds: `cash` is every currency's cash converted
/// into the currency the funds were asked in (`Funds.currency`, else `asked`), and
/// `cashInfoList` the cash of each currency. Currencies whose rate is `known` (OpenD's own,
/// from funds asked in them) count at that rate. With exactly one other currency holding
/// cash, its rate on `today` is `(cash − the rest, converted) / its cash`, so that balance
/// converts to OpenD's own figure. With several, the one total cannot be split: no rate,
/// and a note.
fn funds_rates(
    funds: &proto::Funds,
    asked: Currency,
    today: NaiveDate,
    known: &[tradedesk_core::FxQuote],
) -> (Vec<tradedesk_core::FxQuote>, Option<String>) {
    let target = funds.currency.and_then(currency_of).unwrap_or(asked);
    let Some(total) = decimal(funds.cash) else {
        return (Vec::new(), None);
    };
    let mut own = Decimal::ZERO;
    let mut foreign: Vec<(Currency, Decimal)> = Vec::new();
    for c in &funds.cash_info_list {
        let (Some(ccy), Some(cash)) = (c.currency.and_then(currency_of), decimal(c.cash)) else {
            continue;
        };
        if ccy == target {
            own += cash;
        } else if let Some(k) = known.iter().find(|k| k.base == ccy && k.quote == target) {
            own += cash * k.rate;
        } else if !cash.is_zero() {
            foreign.push((ccy, cash));
        }
    }
    match foreign.as_slice() {
        [] => (Vec::new(), None),
        [(ccy, cash)] => {
            let rate = (total - own)
                .checked_div(*cash)
                .map(|r| r.round_dp(10).normalize())
                .filter(|r| r.is_sign_positive() && !r.is_zero());
            match rate {
                Some(rate) => (
                    vec![tradedesk_core::FxQuote {
                        base: *ccy,
                        quote: target,
                        rate,
                        date: today,
                    }],
                    Some(format!(
                        "the {ccy}/{target} rate of {today} ({rate}) is OpenD's own, implied by its funds ({target} {total} of cash in all, {ccy} {cash} of it in {ccy})"
                    )),
                ),
                None => (Vec::new(), None),
            }
        }
        several => (
            Vec::new(),
            Some(format!(
                "OpenD reports cash in {} besides {target} and one converted total, which cannot be split into rates: set fx_source = \"ecb\" or add the rates to the fx_file",
                several
                    .iter()
                    .map(|(c, _)| c.code())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        ),
    }
}

/// OpenD's `Currency` code of a currency (the market currencies tradedesk reads).
fn currency_code(c: Currency) -> i32 {
    match c.code() {
        "HKD" => proto::currency::HKD,
        "MYR" => proto::currency::MYR,
        _ => proto::currency::USD,
    }
}

/// Whether `e` is a refusal for OpenD's request budget (ours or OpenD's own).
fn is_budget(e: &BrokerError) -> bool {
    matches!(e, BrokerError::Unavailable { detail, .. } if detail.contains("request budget"))
}

/// A simulated account's filled order as the one fill OpenD's order states: its filled
/// quantity at its average fill price, at its last update. `None` for an order that
/// filled nothing.
fn order_as_fill(o: &proto::Order) -> Option<proto::OrderFill> {
    let qty = o.fill_qty.filter(|q| q.is_finite() && *q > 0.0)?;
    let order = o
        .order_id_ex
        .clone()
        .or_else(|| o.order_id.map(|i| i.to_string()))?;
    Some(proto::OrderFill {
        trd_side: o.trd_side,
        fill_id: o.order_id,
        fill_id_ex: Some(format!("order-{order}")),
        order_id: o.order_id,
        order_id_ex: Some(order),
        code: o.code.clone(),
        name: o.name.clone(),
        qty: Some(qty),
        price: o.fill_avg_price,
        create_time: o.update_time.clone().or_else(|| o.create_time.clone()),
        sec_market: o.sec_market,
        create_timestamp: None,
        status: Some(0),
        trd_market: o.trd_market,
    })
}

/// OpenD's own rates into the account's currency: each other currency's rate is the
/// ratio of the account's total assets asked in the account's currency to those asked in
/// that currency (`converted`), the same assets converted by OpenD. A currency OpenD did
/// not convert (an account that ignores the asked currency answers in its own) falls
/// back to what the converted cash total implies ([`funds_rates`]), and else to the
/// core's FX order (docs/methodology/fx.md).
fn opend_rates(
    funds: &proto::Funds,
    converted: &[(i32, proto::Funds)],
    asked: Currency,
    today: NaiveDate,
) -> (Vec<tradedesk_core::FxQuote>, Vec<String>) {
    let target = funds.currency.and_then(currency_of).unwrap_or(asked);
    let positive = |v: Option<f64>| decimal(v).filter(|d| d.is_sign_positive() && !d.is_zero());
    let mut rates = Vec::new();
    let mut notes = Vec::new();
    for (code, other) in converted {
        let Some(ccy) = currency_of(*code).filter(|c| *c != target) else {
            continue;
        };
        if other.currency.is_some_and(|c| c != *code) {
            continue;
        }
        let pair = match (positive(funds.total_assets), positive(other.total_assets)) {
            (Some(a), Some(b)) => Some(("total assets", a, b)),
            _ => match (positive(funds.cash), positive(other.cash)) {
                (Some(a), Some(b)) => Some(("cash", a, b)),
                _ => None,
            },
        };
        let Some((what, mine, theirs)) = pair else {
            continue;
        };
        // The same figure in both: OpenD ignored the currency asked.
        if other.currency.is_none() && mine == theirs {
            continue;
        }
        let Some(rate) = mine
            .checked_div(theirs)
            .map(|r| r.round_dp(10).normalize())
            .filter(|r| r.is_sign_positive() && !r.is_zero())
        else {
            continue;
        };
        rates.push(tradedesk_core::FxQuote {
            base: ccy,
            quote: target,
            rate,
            date: today,
        });
        notes.push(format!(
            "the {ccy}/{target} rate of {today} ({rate}) is OpenD's own: the account's {what} are {target} {mine} asked in {target} and {ccy} {theirs} asked in {ccy}"
        ));
    }
    let (implied, note) = funds_rates(funds, asked, today, &rates);
    rates.extend(implied);
    notes.extend(note);
    (rates, notes)
}

/// `YYYY-MM-DD HH:MM:SS[.mmm]` (or a bare date) in `zone`.
fn local_time(text: &str, zone: Option<&zones::Tz>) -> Option<DateTime<Utc>> {
    let text = text.trim();
    let naive = NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S"))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .ok()
                .map(|d| d.and_time(chrono::NaiveTime::MIN))
        })?;
    match zone {
        Some(z) => zones::resolve(naive, z),
        None => Some(Utc.from_utc_datetime(&naive)),
    }
}

/// One header, as read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub proto_id: u32,
    pub format: u8,
    pub version: u8,
    pub serial: u32,
    pub body_len: u32,
    pub sha1: [u8; 20],
}

/// A frame: the 44-byte header and the body.
pub fn frame(proto_id: u32, serial: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(b"FT");
    out.extend_from_slice(&proto_id.to_le_bytes());
    out.push(0); // protobuf
    out.push(0); // version
    out.extend_from_slice(&serial.to_le_bytes());
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&Sha1::digest(body));
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(body);
    out
}

/// Reads a header's fields; `None` when it does not start with `FT`.
pub fn parse_header(bytes: &[u8; HEADER_LEN]) -> Option<Header> {
    if &bytes[0..2] != b"FT" {
        return None;
    }
    let u32_at =
        |i: usize| u32::from_le_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let mut sha1 = [0u8; 20];
    sha1.copy_from_slice(&bytes[16..36]);
    Some(Header {
        proto_id: u32_at(2),
        format: bytes[6],
        version: bytes[7],
        serial: u32_at(8),
        body_len: u32_at(12),
        sha1,
    })
}

/// Why a reply could not be used.
#[derive(Debug)]
enum Wire {
    Io(std::io::Error),
    NotFt,
    TooLong(u32),
    Sha1,
    Decode(String),
}

struct Conn {
    stream: TcpStream,
    keep_alive: Duration,
    last_used: Instant,
    server_ver: i32,
}

/// What the session learned about the account.
#[derive(Debug, Clone)]
struct Chosen {
    acc_id: u64,
    card: Option<String>,
}

#[derive(Debug)]
pub struct OpenDBroker {
    config: OpenDConfig,
    conn: Mutex<Option<Conn>>,
    chosen: Mutex<Option<Chosen>>,
    serial: AtomicU32,
    cache: Mutex<Option<(Instant, Arc<Book>)>>,
    /// The account's history cache and request budget, once the account is known.
    store: Mutex<Option<Arc<history::Store>>>,
    /// What time it is for the history cache and budget (the system's, or a test's).
    clock: history::Clock,
    /// Why the shared request budget could not be used at the last history read (its
    /// queries were sent uncounted): said in the book's notes and in the health.
    budget_problem: std::sync::Mutex<Option<String>>,
    /// The funds' `power` and `maintenanceMargin` as the last book read them.
    margin: std::sync::Mutex<Option<crate::AccountMargin>>,
    /// The static lists `search_instruments` reads (see `search`).
    statics: search::StaticCache,
    /// When this process sent each paced quote request (see `chain`).
    pace: chain::Pace,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("server_ver", &self.server_ver)
            .field("keep_alive", &self.keep_alive)
            .finish_non_exhaustive()
    }
}

impl OpenDBroker {
    pub fn new(config: OpenDConfig) -> Self {
        Self {
            config,
            conn: Mutex::new(None),
            chosen: Mutex::new(None),
            serial: AtomicU32::new(1),
            cache: Mutex::new(None),
            store: Mutex::new(None),
            clock: history::Clock::system(),
            budget_problem: std::sync::Mutex::new(None),
            margin: std::sync::Mutex::new(None),
            statics: search::StaticCache::default(),
            pace: chain::Pace::default(),
        }
    }

    fn budget_problem(&self) -> Option<String> {
        self.budget_problem.lock().ok().and_then(|p| p.clone())
    }

    /// The same broker, its history cache and budget reading time from `clock` (tests
    /// move a manual clock instead of sleeping).
    #[must_use]
    pub fn with_clock(mut self, clock: history::Clock) -> Self {
        self.clock = clock;
        self
    }

    fn address(&self) -> String {
        format!("{}:{}", self.config.host, self.config.port)
    }

    fn unavailable(&self, detail: String, hint: &str) -> BrokerError {
        BrokerError::Unavailable {
            account: self.config.id.clone(),
            detail,
            hint: hint.to_owned(),
        }
    }

    fn start_hint(&self) -> String {
        format!(
            "start moomoo OpenD (or Futu OpenD) and log in; it listens on 127.0.0.1:{DEFAULT_PORT} unless FutuOpenD.xml says otherwise (api_port); set host/port to match ({})",
            self.address()
        )
    }

    fn timeout(&self) -> BrokerError {
        BrokerError::Timeout {
            account: self.config.id.clone(),
            timeout: self.config.timeout,
        }
    }

    fn wire_error(&self, e: &Wire, proto_id: u32) -> BrokerError {
        match e {
            Wire::Io(e) => self.unavailable(
                format!("the connection to OpenD at {} failed: {e}", self.address()),
                &self.start_hint(),
            ),
            Wire::NotFt | Wire::Sha1 | Wire::Decode(_) if proto_id == proto::id::INIT_CONNECT => {
                self.unavailable(
                    format!(
                        "OpenD's answer to InitConnect cannot be read ({}): OpenD seems to encrypt its API",
                        match e {
                            Wire::Sha1 => "its SHA-1 does not match".to_owned(),
                            Wire::NotFt => "no FT header".to_owned(),
                            Wire::Decode(d) => d.clone(),
                            _ => String::new(),
                        }
                    ),
                    "tradedesk speaks OpenD's unencrypted protocol and has no RSA key: remove rsa_private_key from FutuOpenD.xml (OpenD listening on 127.0.0.1 needs none) and restart OpenD",
                )
            }
            Wire::NotFt => self.unavailable(
                format!("{} answered without OpenD's FT header", self.address()),
                "check that port is OpenD's API port (api_port in FutuOpenD.xml), not its telnet or websocket port",
            ),
            Wire::TooLong(n) => self.unavailable(
                format!("OpenD announced a {n}-byte reply, over the {MAX_BODY}-byte bound"),
                "narrow the request; report this if it persists",
            ),
            Wire::Sha1 => self.unavailable(
                format!("a reply to proto {proto_id} failed its SHA-1 check"),
                "the connection is corrupt or OpenD encrypts: retry, or remove rsa_private_key from FutuOpenD.xml",
            ),
            Wire::Decode(d) => self.unavailable(
                format!("a reply to proto {proto_id} is not the expected message: {d}"),
                "update OpenD; report this if it persists",
            ),
        }
    }

    async fn exchange_frames(
        conn: &mut Conn,
        proto_id: u32,
        serial: u32,
        body: &[u8],
    ) -> Result<Vec<u8>, Wire> {
        conn.stream
            .write_all(&frame(proto_id, serial, body))
            .await
            .map_err(Wire::Io)?;
        loop {
            let mut head = [0u8; HEADER_LEN];
            conn.stream.read_exact(&mut head).await.map_err(Wire::Io)?;
            let header = parse_header(&head).ok_or(Wire::NotFt)?;
            if header.body_len > MAX_BODY {
                return Err(Wire::TooLong(header.body_len));
            }
            let mut reply = vec![0u8; header.body_len as usize];
            conn.stream.read_exact(&mut reply).await.map_err(Wire::Io)?;
            if Sha1::digest(&reply).as_slice() != header.sha1 {
                return Err(Wire::Sha1);
            }
            if header.proto_id == proto_id && header.serial == serial {
                conn.last_used = Instant::now();
                return Ok(reply);
            }
            // A push, or an answer to a request given up on: not ours.
        }
    }

    /// One request and its reply, checked: retType 0, or the error OpenD gave.
    async fn call<Req: proto::Ask>(
        &self,
        conn: &mut Conn,
        proto_id: u32,
        request: &Req,
    ) -> Result<Req::Reply, BrokerError> {
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let body = request.encode_to_vec();
        let reply = Self::exchange_frames(conn, proto_id, serial, &body)
            .await
            .map_err(|e| self.wire_error(&e, proto_id))?;
        let resp = <Req::Reply as Message>::decode(reply.as_slice())
            .map_err(|e| self.wire_error(&Wire::Decode(e.to_string()), proto_id))?;
        match proto::Reply::ret(&resp) {
            (Some(proto::RET_SUCCEED), _) => Ok(resp),
            (other, msg) => Err(self.refused(proto_id, other, msg)),
        }
    }

    fn refused(&self, proto_id: u32, ret_type: Option<i32>, msg: Option<&str>) -> BrokerError {
        let text = tradedesk_core::error::quote(msg.unwrap_or("no message"));
        let lower = msg.unwrap_or("").to_lowercase();
        if lower.contains("permission") || lower.contains("权限") || lower.contains("quote right")
        {
            return self.unavailable(
                format!("OpenD refused proto {proto_id}: {text}"),
                "this market's quotes need a quote permission on the moomoo account (Bursa: MY LV1); buy or enable it in the moomoo app",
            );
        }
        if ret_type == Some(-100) {
            return self.timeout();
        }
        if lower.contains("frequen") || lower.contains("频繁") || lower.contains("too many") {
            let budget = match chain::limit_of(proto_id) {
                Some((n, what)) => format!("at most {n} {what} requests per 30 s"),
                None => format!(
                    "at most {} history queries per 30 s per account",
                    history::LIMIT
                ),
            };
            return self.unavailable(
                format!("OpenD refused proto {proto_id} for its request budget ({budget}): {text}"),
                "another program on this OpenD login (or tradedesk with another state directory) spent the budget: retry in 30 s",
            );
        }
        if proto_id == proto::id::INIT_CONNECT {
            return self.unavailable(
                format!("OpenD refused the connection: {text}"),
                "finish logging in to OpenD (it may be waiting for a verification code), then retry",
            );
        }
        BrokerError::InvalidRequest {
            account: self.config.id.clone(),
            reason: format!(
                "OpenD refused proto {proto_id} (retType {}): {text}",
                ret_type.unwrap_or(-400)
            ),
        }
    }

    async fn open(&self) -> Result<Conn, BrokerError> {
        let stream = match tokio::time::timeout(
            self.config.timeout.min(Duration::from_secs(1)),
            TcpStream::connect((self.config.host.as_str(), self.config.port)),
        )
        .await
        {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                return Err(self.unavailable(
                    format!("nothing accepts connections on {}: {e}", self.address()),
                    &self.start_hint(),
                ));
            }
            Err(_) => {
                return Err(self.unavailable(
                    format!(
                        "{} did not accept a connection within a second",
                        self.address()
                    ),
                    &self.start_hint(),
                ));
            }
        };
        let _ = stream.set_nodelay(true);
        let mut conn = Conn {
            stream,
            keep_alive: Duration::from_secs(10),
            last_used: Instant::now(),
            server_ver: 0,
        };
        let init = proto::InitConnectRequest {
            c2s: Some(proto::InitConnectC2s {
                client_ver: Some(CLIENT_VER),
                client_id: Some(format!("tradedesk-{}", env!("CARGO_PKG_VERSION"))),
                recv_notify: Some(false),
                packet_enc_algo: Some(-1),
                push_proto_fmt: Some(0),
                programming_language: Some("Rust".to_owned()),
            }),
        };
        let resp: proto::InitConnectResponse =
            self.call(&mut conn, proto::id::INIT_CONNECT, &init).await?;
        if let Some(s2c) = resp.s2c {
            conn.server_ver = s2c.server_ver.unwrap_or(0);
            if let Some(k) = s2c.keep_alive_interval.filter(|k| *k > 0) {
                conn.keep_alive = Duration::from_secs(u64::try_from(k).unwrap_or(10));
            }
        }
        Ok(conn)
    }

    /// Runs `f` on a live connection (opening one, or proving an idle one alive with a
    /// KeepAlive first), the whole within the account's timeout.
    async fn with_conn<T, F>(&self, f: F) -> Result<T, BrokerError>
    where
        F: for<'c> FnOnce(
            &'c Self,
            &'c mut Conn,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<T, BrokerError>> + Send + 'c>,
        >,
    {
        let mut slot = self.conn.lock().await;
        let work = async {
            let stale = slot
                .as_ref()
                .is_some_and(|c| c.last_used.elapsed() >= c.keep_alive * 4 / 5);
            if stale && let Some(conn) = slot.as_mut() {
                let ping = proto::KeepAliveRequest {
                    c2s: Some(proto::KeepAliveC2s {
                        time: Some(Utc::now().timestamp()),
                    }),
                };
                let alive: Result<proto::KeepAliveResponse, _> =
                    self.call(conn, proto::id::KEEP_ALIVE, &ping).await;
                if alive.is_err() {
                    *slot = None;
                }
            }
            if slot.is_none() {
                *slot = Some(self.open().await?);
            }
            let conn = slot
                .as_mut()
                .ok_or_else(|| self.unavailable("no connection".to_owned(), "retry"))?;
            f(self, conn).await
        };
        let result = match tokio::time::timeout(self.config.timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(self.timeout()),
        };
        if matches!(
            result,
            Err(BrokerError::Timeout { .. } | BrokerError::Unavailable { .. })
        ) {
            // The stream may hold half a reply: never reuse it.
            *slot = None;
        }
        result
    }

    fn header(&self, acc_id: u64) -> proto::TrdHeader {
        proto::TrdHeader {
            trd_env: Some(if self.config.simulate {
                proto::trd_env::SIMULATE
            } else {
                proto::trd_env::REAL
            }),
            acc_id: Some(acc_id),
            trd_market: Some(self.config.market.trd_market()),
        }
    }

    /// The account this adapter reads, chosen once per process.
    async fn choose(&self, conn: &mut Conn) -> Result<Chosen, BrokerError> {
        if let Some(c) = self.chosen.lock().await.clone() {
            return Ok(c);
        }
        let req = proto::GetAccListRequest {
            c2s: Some(proto::GetAccListC2s {
                user_id: Some(0),
                trd_category: Some(1),
                need_general_sec_account: Some(true),
            }),
        };
        let resp: proto::GetAccListResponse =
            self.call(conn, proto::id::GET_ACC_LIST, &req).await?;
        let env = if self.config.simulate {
            proto::trd_env::SIMULATE
        } else {
            proto::trd_env::REAL
        };
        let accounts = resp.s2c.map(|s| s.acc_list).unwrap_or_default();
        let describe = |a: &proto::TrdAcc| {
            format!(
                "{} ({} {})",
                a.acc_id.unwrap_or(0),
                if a.trd_env == Some(proto::trd_env::REAL) {
                    "real"
                } else {
                    "simulated"
                },
                a.trd_market_auth_list
                    .iter()
                    .map(|m| match *m {
                        proto::trd_market::MY => "MY".to_owned(),
                        proto::trd_market::HK => "HK".to_owned(),
                        proto::trd_market::US => "US".to_owned(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join("/")
            )
        };
        let all: Vec<String> = accounts.iter().map(describe).collect();
        let fits: Vec<&proto::TrdAcc> = accounts
            .iter()
            .filter(|a| a.trd_env == Some(env))
            .filter(|a| {
                a.trd_market_auth_list
                    .contains(&self.config.market.trd_market())
            })
            .collect();
        let pick = match self.config.acc_id {
            Some(want) => fits
                .iter()
                .find(|a| a.acc_id == Some(want))
                .copied()
                .ok_or_else(|| {
                    self.unavailable(
                        format!(
                            "OpenD's login has no {} {} account {want}; it has {}",
                            if self.config.simulate { "simulated" } else { "real" },
                            self.config.market.name(),
                            if all.is_empty() { "none".to_owned() } else { all.join(", ") }
                        ),
                        "set account to one of these ids (and market to one it trades), or log OpenD in as the right user",
                    )
                })?,
            None => match fits.as_slice() {
                [one] => *one,
                [] => {
                    return Err(self.unavailable(
                        format!(
                            "OpenD's login has no {} account for market {}; it has {}",
                            if self.config.simulate { "simulated" } else { "real" },
                            self.config.market.name(),
                            if all.is_empty() { "none".to_owned() } else { all.join(", ") }
                        ),
                        if self.config.market == FutuMarket::My {
                            "Bursa Malaysia is read from a moomoo MY live account (there is no simulated one): log OpenD in with it"
                        } else {
                            "set market to one the account trades, or mode = \"paper\" for a simulated account"
                        },
                    ));
                }
                many => {
                    return Err(self.unavailable(
                        format!(
                            "OpenD's login has {} matching accounts: {}",
                            many.len(),
                            many.iter().map(|a| describe(a)).collect::<Vec<_>>().join(", ")
                        ),
                        "set account = \"<id>\" to one of them",
                    ));
                }
            },
        };
        let chosen = Chosen {
            acc_id: pick.acc_id.unwrap_or(0),
            card: pick.card_num.clone(),
        };
        *self.chosen.lock().await = Some(chosen.clone());
        Ok(chosen)
    }

    /// The history cache and budget of account `acc_id` (one per process and account).
    async fn store(&self, acc_id: u64) -> Arc<history::Store> {
        let mut slot = self.store.lock().await;
        if let Some(s) = slot.as_ref()
            && s.key().starts_with(&format!("{acc_id} "))
        {
            return Arc::clone(s);
        }
        let store = Arc::new(
            history::Store::new(
                self.config.state_dir.as_deref(),
                acc_id,
                self.config.simulate,
                self.config.market.name(),
            )
            .with_clock(self.clock.clone()),
        );
        *slot = Some(Arc::clone(&store));
        store
    }

    /// One query of `proto_id` from the shared budget, or a refusal saying so.
    fn spend(&self, store: &history::Store, proto_id: u32) -> Result<(), BrokerError> {
        store
            .take(proto_id)
            .map_err(|spent| self.budget_spent(&spent))
    }

    fn budget_spent(&self, spent: &history::Spent) -> BrokerError {
        let secs = spent.retry_in.as_secs().max(1);
        self.unavailable(
            format!(
                "OpenD's request budget is spent: {} history queries (proto {}) in the last 30 s for this account, of the {} OpenD allows{}; the query was not sent",
                spent.used,
                spent.proto_id,
                history::LIMIT,
                match &spent.file {
                    Some(f) => format!(" (counted across tradedesk processes in {})", f.display()),
                    None => String::new(),
                }
            ),
            &format!(
                "retry in {secs} s; what was read is cached in the state directory, so the next call asks OpenD only for what is new"
            ),
        )
    }

    /// The funds, asked in `currency`.
    async fn funds_in(
        &self,
        conn: &mut Conn,
        header: &proto::TrdHeader,
        currency: i32,
    ) -> Result<Option<proto::Funds>, BrokerError> {
        let funds: proto::GetFundsResponse = self
            .call(
                conn,
                proto::id::GET_FUNDS,
                &proto::GetFundsRequest {
                    c2s: Some(proto::GetFundsC2s {
                        header: Some(header.clone()),
                        refresh_cache: Some(false),
                        currency: Some(currency),
                    }),
                },
            )
            .await?;
        Ok(funds.s2c.and_then(|s| s.funds))
    }

    async fn build_book(&self) -> Result<Book, BrokerError> {
        let history_days = i64::from(self.config.history_days.max(1));
        let (funds, converted, positions, read, fee_problem, acc) = self
            .with_conn(|me, conn| {
                Box::pin(async move {
                    let acc = me.choose(conn).await?;
                    let header = me.header(acc.acc_id);
                    let base = currency_code(me.config.market.currency());
                    let funds = me.funds_in(conn, &header, base).await?;
                    let positions: proto::GetPositionListResponse = me
                        .call(
                            conn,
                            proto::id::GET_POSITION_LIST,
                            &proto::GetPositionListRequest {
                                c2s: Some(proto::GetPositionListC2s {
                                    header: Some(header.clone()),
                                    filter_conditions: None,
                                    refresh_cache: Some(false),
                                }),
                            },
                        )
                        .await?;
                    let positions = positions.s2c.map(|s| s.position_list).unwrap_or_default();
                    // OpenD's own conversion: the funds asked again in each other currency
                    // the account holds, so each rate is OpenD's ratio of the same assets.
                    let mut others: Vec<i32> = funds
                        .iter()
                        .flat_map(|f| &f.cash_info_list)
                        .filter(|c| c.cash.is_some_and(|v| v != 0.0))
                        .filter_map(|c| c.currency)
                        .chain(positions.iter().filter_map(|p| p.currency))
                        .filter(|c| *c != base && currency_of(*c).is_some())
                        .collect();
                    others.sort_unstable();
                    others.dedup();
                    let mut converted = Vec::new();
                    for c in others {
                        match me.funds_in(conn, &header, c).await {
                            Ok(Some(f)) => converted.push((c, f)),
                            Ok(None) | Err(BrokerError::InvalidRequest { .. }) => {}
                            Err(e) => return Err(e),
                        }
                    }
                    let store = me.store(acc.acc_id).await;
                    // Another process reading this account's history: wait for its cache.
                    let _lock = store.exclusive(me.config.timeout).await;
                    let (read, fee_problem) =
                        me.read_history(conn, &header, &store, history_days).await?;
                    if let Ok(mut p) = me.budget_problem.lock() {
                        *p = store.budget_problem();
                    }
                    Ok((funds, converted, positions, read, fee_problem, acc))
                })
            })
            .await?;
        let fees: Result<BTreeMap<String, f64>, String> = match fee_problem {
            Some(p) if read.fees.is_empty() => Err(p),
            _ => Ok(read
                .fees
                .iter()
                .filter_map(|f| Some((f.order_id_ex.clone()?, f.fee_amount?)))
                .collect()),
        };
        // Trd_GetFunds: `power` is the most the account can buy (long), and
        // `maintenanceMargin` what its positions require, in the currency asked (OpenD's
        // Trd_Common.proto, `Funds`); a field OpenD does not send stays unknown.
        *self
            .margin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) =
            funds.as_ref().map(|f| crate::AccountMargin {
                currency: f
                    .currency
                    .and_then(currency_of)
                    .unwrap_or_else(|| self.config.market.currency()),
                margin_used: None,
                free_margin: None,
                margin_level: None,
                leverage: None,
                buying_power: decimal(f.power),
                maintenance_margin: decimal(f.maintenance_margin),
            });
        let fills = if self.config.simulate {
            read.orders.iter().filter_map(order_as_fill).collect()
        } else {
            read.fills.clone()
        };
        self.assemble(funds.as_ref(), &converted, &positions, fills, &fees, &acc)
    }

    /// The account's history: from the shared cache where it is fresh, else read from
    /// OpenD (only what is new since the cached read), each query from the budget; the
    /// read is kept for the next call, in this process or another. A failed fee query
    /// leaves fees unknown (the second value says why), never the book.
    async fn read_history(
        &self,
        conn: &mut Conn,
        header: &proto::TrdHeader,
        store: &history::Store,
        history_days: i64,
    ) -> Result<(history::Cached, Option<String>), BrokerError> {
        let fmt = |t: NaiveDateTime| t.format("%Y-%m-%d %H:%M:%S").to_string();
        let zone = zones::of_currency(self.config.market.currency().code());
        let now_utc = Utc
            .timestamp_millis_opt(store.now_ms())
            .single()
            .unwrap_or_else(Utc::now);
        let now = zones::at(now_utc, zone).naive_local();
        let start = now - chrono::Duration::days(history_days);
        let start_text = fmt(start);
        let cached = store.load().filter(|c| c.begin <= start_text);
        let keep = |c: &history::Cached, before: &str| history::Cached {
            key: c.key.clone(),
            read_at_ms: c.read_at_ms,
            begin: start_text.clone(),
            end: c.end.clone(),
            fills: c
                .fills
                .iter()
                .filter(|f| {
                    let t = f.create_time.as_deref().unwrap_or("");
                    t >= start_text.as_str() && t < before
                })
                .cloned()
                .collect(),
            orders: c
                .orders
                .iter()
                .filter(|o| {
                    let t = o.create_time.as_deref().unwrap_or("");
                    t >= start_text.as_str() && t < before
                })
                .cloned()
                .collect(),
            fees: c.fees.clone(),
        };
        if let Some(c) = &cached
            && store.age(c.read_at_ms) < CACHE_FOR
        {
            return Ok((keep(c, "9999"), None));
        }
        // Fills of past days are final at OpenD: what is new is asked from a day before
        // the cached read's end.
        let from = cached
            .as_ref()
            .and_then(|c| NaiveDateTime::parse_from_str(&c.end, "%Y-%m-%d %H:%M:%S").ok())
            .map_or(start, |end| (end - chrono::Duration::days(1)).max(start));
        let from_text = fmt(from);
        let mut out = match &cached {
            Some(c) => keep(c, &from_text),
            None => history::Cached {
                key: store.key().to_owned(),
                begin: start_text.clone(),
                ..history::Cached::default()
            },
        };
        out.read_at_ms = store.now_ms();
        out.end = fmt(now);
        let mut end = now;
        while end > from {
            let begin = (end - chrono::Duration::days(WINDOW_DAYS)).max(from);
            let filter = Some(proto::TrdFilterConditions {
                begin_time: Some(fmt(begin)),
                end_time: Some(fmt(end)),
                ..proto::TrdFilterConditions::default()
            });
            if self.config.simulate {
                // OpenD gives no fills (deals) for paper trading: its orders, with their
                // filled quantity and average fill price, are what it has.
                self.spend(store, proto::id::GET_HISTORY_ORDER_LIST)?;
                let resp: proto::GetHistoryOrderListResponse = self
                    .call(
                        conn,
                        proto::id::GET_HISTORY_ORDER_LIST,
                        &proto::GetHistoryOrderListRequest {
                            c2s: Some(proto::GetHistoryOrderListC2s {
                                header: Some(header.clone()),
                                filter_conditions: filter,
                                filter_status_list: Vec::new(),
                            }),
                        },
                    )
                    .await?;
                out.orders
                    .extend(resp.s2c.map(|s| s.order_list).unwrap_or_default());
            } else {
                self.spend(store, proto::id::GET_HISTORY_ORDER_FILL_LIST)?;
                let resp: proto::GetHistoryOrderFillListResponse = self
                    .call(
                        conn,
                        proto::id::GET_HISTORY_ORDER_FILL_LIST,
                        &proto::GetHistoryOrderFillListRequest {
                            c2s: Some(proto::GetHistoryOrderFillListC2s {
                                header: Some(header.clone()),
                                filter_conditions: filter,
                            }),
                        },
                    )
                    .await?;
                out.fills
                    .extend(resp.s2c.map(|s| s.order_fill_list).unwrap_or_default());
            }
            end = begin;
        }
        // Today's deals (orders, for a simulated account) are not history yet at OpenD:
        // they come from the today-queries, each counted once against what the history
        // gave (OpenD's history may or may not reach today).
        self.read_today(conn, header, store, &mut out).await?;
        out.orders.sort_by_key(|o| o.order_id);
        out.orders.dedup_by(|a, b| a.order_id == b.order_id);
        // Fees per order, for the orders whose fee is not known yet.
        let mut problem = None;
        if !self.config.simulate {
            let known: std::collections::BTreeSet<&str> = out
                .fees
                .iter()
                .filter_map(|f| f.order_id_ex.as_deref())
                .collect();
            let mut orders: Vec<String> = out
                .fills
                .iter()
                .filter_map(|f| f.order_id_ex.clone())
                .filter(|o| !known.contains(o.as_str()))
                .collect();
            orders.sort();
            orders.dedup();
            for batch in orders.chunks(FEE_BATCH) {
                if let Err(spent) = store.take(proto::id::GET_ORDER_FEE) {
                    problem = Some(self.budget_spent(&spent).to_string());
                    break;
                }
                let answer: Result<proto::GetOrderFeeResponse, BrokerError> = self
                    .call(
                        conn,
                        proto::id::GET_ORDER_FEE,
                        &proto::GetOrderFeeRequest {
                            c2s: Some(proto::GetOrderFeeC2s {
                                header: Some(header.clone()),
                                order_id_ex_list: batch.to_vec(),
                            }),
                        },
                    )
                    .await;
                match answer {
                    Ok(resp) => out
                        .fees
                        .extend(resp.s2c.map(|s| s.order_fee_list).unwrap_or_default()),
                    Err(e @ (BrokerError::Timeout { .. } | BrokerError::Unavailable { .. }))
                        if !is_budget(&e) =>
                    {
                        return Err(e);
                    }
                    Err(e) => {
                        problem = Some(e.to_string());
                        break;
                    }
                }
            }
        }
        // A cache that cannot be written costs only the next call's queries.
        let _ = store.save(&out);
        Ok((out, problem))
    }

    /// Today's fills (Trd_GetOrderFillList) for a real account, today's orders
    /// (Trd_GetOrderList) for a simulated one, merged into `out`: a fill already there (by
    /// its fill id) or order (by its order id) is replaced by today's state of it, so each
    /// counts once.
    async fn read_today(
        &self,
        conn: &mut Conn,
        header: &proto::TrdHeader,
        store: &history::Store,
        out: &mut history::Cached,
    ) -> Result<(), BrokerError> {
        if self.config.simulate {
            self.spend(store, proto::id::GET_ORDER_LIST)?;
            let resp: proto::GetOrderListResponse = self
                .call(
                    conn,
                    proto::id::GET_ORDER_LIST,
                    &proto::GetOrderListRequest {
                        c2s: Some(proto::GetOrderListC2s {
                            header: Some(header.clone()),
                            filter_conditions: None,
                            filter_status_list: Vec::new(),
                            refresh_cache: Some(false),
                        }),
                    },
                )
                .await?;
            for order in resp.s2c.map(|s| s.order_list).unwrap_or_default() {
                out.orders.retain(|o| {
                    o.order_id != order.order_id
                        || (o.order_id.is_none() && o.order_id_ex != order.order_id_ex)
                });
                out.orders.push(order);
            }
        } else {
            self.spend(store, proto::id::GET_ORDER_FILL_LIST)?;
            let resp: proto::GetOrderFillListResponse = self
                .call(
                    conn,
                    proto::id::GET_ORDER_FILL_LIST,
                    &proto::GetOrderFillListRequest {
                        c2s: Some(proto::GetOrderFillListC2s {
                            header: Some(header.clone()),
                            filter_conditions: None,
                            refresh_cache: Some(false),
                        }),
                    },
                )
                .await?;
            let same =
                |a: &proto::OrderFill, b: &proto::OrderFill| match (&a.fill_id_ex, &b.fill_id_ex) {
                    (Some(x), Some(y)) => x == y,
                    _ => a.fill_id.is_some() && a.fill_id == b.fill_id,
                };
            for fill in resp.s2c.map(|s| s.order_fill_list).unwrap_or_default() {
                out.fills.retain(|f| !same(f, &fill));
                out.fills.push(fill);
            }
        }
        Ok(())
    }

    fn assemble(
        &self,
        funds: Option<&proto::Funds>,
        converted: &[(i32, proto::Funds)],
        positions: &[proto::Position],
        mut fills: Vec<proto::OrderFill>,
        fees: &Result<BTreeMap<String, f64>, String>,
        acc: &Chosen,
    ) -> Result<Book, BrokerError> {
        let currency = self.config.market.currency();
        let today = zones::at(Utc::now(), zones::of_currency(currency.code())).date_naive();
        let mut instruments: Vec<Instrument> = Vec::new();
        // An option's contract size, as its position's figures state it: val / (qty x price).
        let implied: BTreeMap<String, Decimal> = positions
            .iter()
            .filter_map(|p| {
                let code = p.code.as_deref().filter(|c| is_option_code(c))?;
                let per_unit = decimal(p.qty)?.checked_mul(decimal(p.price)?)?;
                let m = decimal(p.val)?
                    .checked_div(per_unit)?
                    .abs()
                    .round_dp(6)
                    .normalize();
                (!m.is_zero()).then(|| (code.to_owned(), m))
            })
            .collect();
        let mut unknown_specs: Vec<UnknownSpec> = Vec::new();
        let mut spec_notes: Vec<String> = Vec::new();
        let id = self.config.id.clone();
        let mut index = |sec_market: i32, code: &str, name: Option<&str>| -> u32 {
            let (exchange, ccy, country) = exchange_of(sec_market);
            let key = InstrumentKey::new(exchange, code);
            if let Some(i) = instruments.iter().position(|x| x.key == key) {
                return u32::try_from(i).unwrap_or(u32::MAX);
            }
            let idx = u32::try_from(instruments.len()).unwrap_or(u32::MAX);
            let (asset_class, multiplier) = if !is_option_code(code) {
                (AssetClass::Equity, Decimal::ONE)
            } else if let Some(m) = implied.get(code) {
                spec_notes.push(format!(
                    "{id}: the contract size of {key} ({m}) is taken from its position (val / (qty x price)): OpenD's fills do not state it"
                ));
                (AssetClass::Option, *m)
            } else if sec_market == proto::sec_market::US {
                spec_notes.push(format!(
                    "{id}: {key} is a US option: the standard contract of 100 shares is used (OpenD's fills do not state it)"
                ));
                (AssetClass::Option, Decimal::ONE_HUNDRED)
            } else {
                unknown_specs.push(UnknownSpec {
                    instrument: idx,
                    detail: "OpenD's fills do not state this option's contract size (shares a contract), and no position does: 1 assumed".to_owned(),
                    fix: "check the contract size in the moomoo app's option quote (it differs by underlying)".to_owned(),
                });
                (AssetClass::Option, Decimal::ONE)
            };
            instruments.push(Instrument {
                key,
                currency: ccy,
                asset_class,
                multiplier,
                name: name.map(str::to_owned),
                sector: None,
                country: Some(country.to_owned()),
            });
            u32::try_from(instruments.len() - 1).unwrap_or(u32::MAX)
        };
        let default_sec = match self.config.market {
            FutuMarket::My => proto::sec_market::MY,
            FutuMarket::Hk => proto::sec_market::HK,
            FutuMarket::Us => proto::sec_market::US,
        };
        // Oldest first, each fill once (windows meet at their edges).
        fills.sort_by(|a, b| {
            a.create_time
                .cmp(&b.create_time)
                .then(a.fill_id.cmp(&b.fill_id))
        });
        fills.dedup_by(|a, b| a.fill_id == b.fill_id && a.fill_id_ex == b.fill_id_ex);
        let fee_map = fees.as_ref().ok();
        let mut fee_given: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut without_fee = 0usize;
        let mut out = Vec::with_capacity(fills.len());
        for (seq, f) in fills.iter().enumerate() {
            if f.status == Some(1) {
                continue; // cancelled by the exchange
            }
            let sec = f.sec_market.unwrap_or(default_sec);
            let (_, ccy, _) = exchange_of(sec);
            let zone = zones::of_currency(ccy.code());
            let (Some(code), Some(qty), Some(price), Some(instant)) = (
                f.code.as_deref(),
                decimal(f.qty),
                decimal(f.price),
                f.create_time.as_deref().and_then(|t| local_time(t, zone)),
            ) else {
                return Err(self.unavailable(
                    format!(
                        "fill {} lacks code, qty, price or a readable createTime",
                        f.fill_id_ex.clone().unwrap_or_default()
                    ),
                    "report this as a bug, with the fill as the moomoo app shows it",
                ));
            };
            let instrument = index(sec, code, f.name.as_deref());
            let order = f.order_id_ex.clone().unwrap_or_default();
            let (commission, known) = match fee_map.and_then(|m| m.get(&order)) {
                // An order's fee is charged once: on its first fill.
                Some(fee) if fee_given.insert(order.clone()) => {
                    (decimal(Some(*fee)).unwrap_or_default(), true)
                }
                Some(_) => (Decimal::ZERO, true),
                None => {
                    without_fee += 1;
                    (Decimal::ZERO, false)
                }
            };
            let time = zones::at(instant, zone);
            out.push(Fill {
                id: f
                    .fill_id_ex
                    .clone()
                    .unwrap_or_else(|| f.fill_id.unwrap_or(0).to_string())
                    .into(),
                account: 0,
                instrument,
                side: match f.trd_side {
                    Some(1 | 4) => Side::Buy,
                    _ => Side::Sell,
                },
                quantity: qty.abs(),
                price,
                commission,
                commission_currency: ccy,
                commission_known: known,
                time,
                trade_date: time.date_naive(),
                seq: u32::try_from(seq).unwrap_or(u32::MAX),
                kind: tradedesk_core::FillKind::Trade,
                position: 0,
            });
        }
        let mut marks = Vec::new();
        let mut reported = Vec::new();
        for p in positions {
            let Some(code) = p.code.as_deref() else {
                continue;
            };
            let instrument = index(p.sec_market.unwrap_or(default_sec), code, p.name.as_deref());
            if let Some(qty) = decimal(p.qty) {
                reported.push(ReportedPosition {
                    account: 0,
                    instrument,
                    quantity: if p.position_side == Some(1) {
                        -qty.abs()
                    } else {
                        qty
                    },
                });
            }
            if let Some(price) = decimal(p.price).filter(|p| p.is_sign_positive()) {
                marks.push((instrument, today, price));
            }
        }
        let mut notes = Vec::new();
        let id = &self.config.id;
        let days = self.config.history_days;
        if self.config.simulate {
            notes.push(format!(
                "{id}: a simulated (paper) account: OpenD gives no fills (deals) for paper trading, so each of the last {days} days' orders (history_days, today's from OpenD's list of today's orders) that filled is booked as one fill of its filled quantity at its average fill price, at the order's last update; {} such order(s), without fees (OpenD states none): realized P&L is gross of fees",
                out.len()
            ));
        } else {
            match fees {
                Err(e) => notes.push(format!(
                    "{id}: OpenD gave no order fees ({e}): realized P&L is gross of fees"
                )),
                Ok(_) if without_fee > 0 => notes.push(format!(
                    "{id}: OpenD has no fees for {without_fee} fill(s) (orders before 2018 or not yet settled): their P&L is gross of fees"
                )),
                Ok(_) => {}
            }
            notes.push(format!(
                "{id}: fills from the last {days} days (history_days), today's from OpenD's list of today's deals"
            ));
        }
        if let Some(problem) = self.budget_problem() {
            notes.push(format!("{id}: {problem}"));
        }
        notes.extend(spec_notes);
        let mut parts = BookParts {
            base_currency: currency,
            as_of: today,
            accounts: vec![self.account(currency, acc)],
            instruments,
            fills: out,
            cash: Vec::new(),
            marks,
            fx_rates: Vec::new(),
            reported_positions: reported,
            corporate_actions: Vec::new(),
            notes,
            unknown_specs,
            tickets: Vec::new(),
            margin_modes: Vec::new(),
        };
        // Positions older than history_days: opened at OpenD's average cost.
        let mut cost = BTreeMap::new();
        for p in positions {
            let Some(code) = p.code.as_deref() else {
                continue;
            };
            let (exchange, ..) = exchange_of(p.sec_market.unwrap_or(default_sec));
            let key = InstrumentKey::new(exchange, code);
            if let (Some(i), Some(avg)) = (
                parts.instruments.iter().position(|x| x.key == key),
                decimal(p.average_cost_price).filter(|d| d.is_sign_positive() && !d.is_zero()),
            ) {
                cost.insert(u32::try_from(i).unwrap_or(u32::MAX), avg);
            }
        }
        let opened = crate::open_unexplained(&mut parts, &cost);
        if !opened.is_empty() {
            parts.notes.push(format!(
                "{}: {} was held before the fills read (history_days {}): opened at OpenD's average cost, with unknown fees",
                self.config.id,
                opened.join(", "),
                self.config.history_days
            ));
        }
        // Cash per currency, anchored to what OpenD reports.
        let mut reported_cash: Vec<(Currency, Decimal)> = Vec::new();
        if let Some(f) = funds {
            for c in &f.cash_info_list {
                if let (Some(ccy), Some(cash)) = (c.currency.and_then(currency_of), decimal(c.cash))
                {
                    reported_cash.push((ccy, cash));
                }
            }
            if reported_cash.is_empty()
                && let Some(cash) = decimal(f.cash)
            {
                reported_cash.push((f.currency.and_then(currency_of).unwrap_or(currency), cash));
            }
        }
        crate::anchor_cash(&mut parts, &reported_cash, "OpenD", "the fills read");
        if let Some(f) = funds {
            let (rates, notes) = opend_rates(f, converted, currency, today);
            parts.fx_rates.extend(rates);
            parts.notes.extend(
                notes
                    .into_iter()
                    .map(|n| format!("{}: {n}", self.config.id)),
            );
        }
        Ok(Book::assemble(parts))
    }

    fn account(&self, currency: Currency, acc: &Chosen) -> Account {
        Account {
            id: self.config.id.clone(),
            broker: "moomoo".to_owned(),
            currency,
            name: Some(format!(
                "moomoo {} {}{}",
                self.config.market.name(),
                acc.acc_id,
                acc.card
                    .as_deref()
                    .map(|c| format!(" (card {c})"))
                    .unwrap_or_default()
            )),
            mode: if self.config.simulate {
                Mode::Paper
            } else {
                Mode::Live
            },
        }
    }

    /// A request about `symbol` that OpenD refused names a code it does not list; any
    /// other failure stays what it is.
    fn unknown_symbol(&self, symbol: &str, e: BrokerError) -> BrokerError {
        match e {
            BrokerError::InvalidRequest { reason, .. } => BrokerError::UnknownSymbol {
                account: self.config.id.clone(),
                symbol: tradedesk_core::error::quote(symbol),
                known: format!(
                    "codes OpenD lists ({reason}); Bursa codes are numbers such as BURSA:1155"
                ),
            },
            other => other,
        }
    }

    /// `BURSA:1155`, `1155`, `HKEX:00700`, `US:AAPL` → OpenD's security.
    fn security(&self, symbol: &str) -> proto::Security {
        let (exchange, code) = symbol
            .split_once(':')
            .map_or((None, symbol), |(e, c)| (Some(e), c));
        let market = match exchange.map(str::to_ascii_uppercase).as_deref() {
            Some("BURSA" | "MY") => proto::qot_market::MY,
            Some("HKEX" | "HK") => proto::qot_market::HK,
            Some("US" | "NASDAQ" | "NYSE" | "ARCA" | "AMEX") => proto::qot_market::US,
            _ => match self.config.market {
                FutuMarket::My => proto::qot_market::MY,
                FutuMarket::Hk => proto::qot_market::HK,
                FutuMarket::Us => proto::qot_market::US,
            },
        };
        proto::Security {
            market: Some(market),
            code: Some(code.trim().to_owned()),
        }
    }

    fn key_of(security: &proto::Security) -> (InstrumentKey, Currency) {
        let sec = match security.market {
            Some(proto::qot_market::MY) => proto::sec_market::MY,
            Some(proto::qot_market::HK) => proto::sec_market::HK,
            _ => proto::sec_market::US,
        };
        let (exchange, ccy, _) = exchange_of(sec);
        (
            InstrumentKey::new(exchange, security.code.clone().unwrap_or_default()),
            ccy,
        )
    }

    async fn snapshot_of(&self, symbol: &str) -> Result<proto::SnapshotBasicData, BrokerError> {
        self.full_snapshot_of(symbol).await.map(|(basic, _)| basic)
    }

    /// The snapshot's basic data, and an option's contract size where OpenD states it.
    async fn full_snapshot_of(
        &self,
        symbol: &str,
    ) -> Result<(proto::SnapshotBasicData, Option<Decimal>), BrokerError> {
        let wanted = self.security(symbol);
        let symbol = symbol.to_owned();
        self.with_conn(move |me, conn| {
            Box::pin(async move {
                let resp: Result<proto::GetSecuritySnapshotResponse, BrokerError> = me
                    .call(
                        conn,
                        proto::id::GET_SECURITY_SNAPSHOT,
                        &proto::GetSecuritySnapshotRequest {
                            c2s: Some(proto::GetSecuritySnapshotC2s {
                                security_list: vec![wanted.clone()],
                            }),
                        },
                    )
                    .await;
                let resp = resp.map_err(|e| me.unknown_symbol(&symbol, e))?;
                resp.s2c
                    .into_iter()
                    .flat_map(|s| s.snapshot_list)
                    .filter_map(|s| {
                        let size = s.option_ex_data.and_then(|o| {
                            decimal(o.contract_size_float)
                                .or_else(|| o.contract_size.map(Decimal::from))
                                .filter(|d| d.is_sign_positive() && !d.is_zero())
                        });
                        Some((s.basic?, size))
                    })
                    .next()
                    .ok_or_else(|| {
                        me.unknown_symbol(
                            &symbol,
                            BrokerError::InvalidRequest {
                                account: me.config.id.clone(),
                                reason: "no snapshot".to_owned(),
                            },
                        )
                    })
            })
        })
        .await
    }
}

#[async_trait]
impl Broker for OpenDBroker {
    fn accounts(&self) -> Vec<Account> {
        vec![self.account(
            self.config.market.currency(),
            &Chosen {
                acc_id: self.config.acc_id.unwrap_or(0),
                card: None,
            },
        )]
    }

    fn markets(&self, _account: &str) -> Vec<crate::calendar::Market> {
        crate::calendar::market_of_currency(self.config.market.currency())
    }

    fn reported_margin(&self, account: &str) -> Option<crate::AccountMargin> {
        if account != self.config.id {
            return None;
        }
        self.margin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, book)) = cache.as_ref()
            && at.elapsed() < CACHE_FOR
        {
            return Ok(Arc::clone(book));
        }
        let book = Arc::new(self.build_book().await?);
        *cache = Some((Instant::now(), Arc::clone(&book)));
        Ok(book)
    }

    fn generation(&self) -> u64 {
        crate::every(CACHE_FOR)
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let probe = self
            .with_conn(|me, conn| {
                Box::pin(async move {
                    let acc = me.choose(conn).await?;
                    Ok((acc, conn.server_ver))
                })
            })
            .await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let budget_problem = self.budget_problem();
        let (status, detail, hint) = match probe {
            Ok((acc, ver)) => (
                if budget_problem.is_some() {
                    HealthStatus::Degraded
                } else {
                    HealthStatus::Ok
                },
                format!(
                    "OpenD {ver} at {}, {} account {} ({})",
                    self.address(),
                    if self.config.simulate {
                        "simulated"
                    } else {
                        "real"
                    },
                    acc.acc_id,
                    self.config.market.name()
                ) + &budget_problem
                    .as_ref()
                    .map(|p| format!("; {p}"))
                    .unwrap_or_default(),
                budget_problem.as_ref().map(|_| {
                    "make the state directory's opend/ folder writable (or point --state-dir at one that is), so every tradedesk process counts OpenD's budget together".to_owned()
                }),
            ),
            Err(e) => crate::down(
                &e,
                Some(
                    "OpenD accepted the connection but did not answer: check that it is logged in, and that the port is its API port",
                ),
                &self.start_hint(),
            ),
        };
        vec![AccountHealth {
            account: self.config.id.clone(),
            broker: "moomoo".to_owned(),
            mode: if self.config.simulate {
                Mode::Paper
            } else {
                Mode::Live
            },
            status,
            latency_ms: Some(latency_ms),
            detail,
            hint,
        }]
    }

    async fn instrument(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<TradableInstrument, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let (basic, contract_size) = self.full_snapshot_of(symbol).await?;
        let security = basic
            .security
            .clone()
            .unwrap_or_else(|| self.security(symbol));
        let (key, currency) = Self::key_of(&security);
        let lot = Decimal::from(basic.lot_size.filter(|l| *l > 0).unwrap_or(1));
        // An option is sized by OpenD's contract size; without one it cannot be valued.
        let option = is_option_code(&key.symbol) || basic.r#type == Some(SECURITY_TYPE_DRVT);
        let (asset_class, multiplier) = match (option, contract_size) {
            (false, _) => (AssetClass::Equity, Decimal::ONE),
            (true, Some(size)) => (AssetClass::Option, size),
            (true, None) => {
                return Err(BrokerError::UnknownSymbol {
                    account: self.config.id.clone(),
                    symbol: tradedesk_core::error::quote(symbol),
                    known: "options whose contract size OpenD's snapshot states (optionExData.contractSize)".to_owned(),
                });
            }
        };
        Ok(TradableInstrument {
            key,
            currency,
            asset_class,
            multiplier,
            lot_step: lot,
            min_quantity: lot,
            max_quantity: Decimal::from(100_000_000u64),
            tick: decimal(basic.price_spread)
                .filter(|t| t.is_sign_positive() && !t.is_zero())
                .unwrap_or(Decimal::new(1, 3)),
            pip: None,
            margin_rate: Decimal::ONE,
            unit: if option { "contracts" } else { "shares" },
        })
    }

    async fn quote(&self, account: &str, symbol: &str) -> Result<Quote, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let basic = self.snapshot_of(symbol).await?;
        let security = basic
            .security
            .clone()
            .unwrap_or_else(|| self.security(symbol));
        let (key, currency) = Self::key_of(&security);
        let positive = |v: Option<f64>| decimal(v).filter(|d| d.is_sign_positive() && !d.is_zero());
        let (bid, ask) = match (
            positive(basic.bid_price),
            positive(basic.ask_price),
            positive(basic.cur_price),
        ) {
            (Some(b), Some(a), _) => (b, a),
            (_, _, Some(last)) => (last, last),
            _ => {
                return Err(self.unavailable(
                    format!("OpenD's snapshot of {symbol} has no bid, ask or price"),
                    "the market may be closed before its first trade; retry later",
                ));
            }
        };
        let time = basic
            .update_timestamp
            .and_then(|t| {
                // Unix seconds with a fraction: read through the decimal, not by
                // float arithmetic.
                let ms = (decimal(Some(t))? * Decimal::from(1000)).trunc();
                Utc.timestamp_millis_opt(i64::try_from(ms).ok()?).single()
            })
            .unwrap_or_else(Utc::now);
        Ok(Quote {
            key,
            currency,
            bid,
            ask,
            time,
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
        crate::check_served(&self.config.id, account)?;
        let security = self.security(symbol);
        let (_, currency) = Self::key_of(&security);
        let zone = zones::of_currency(currency.code());
        let kl_type = match interval {
            Interval::M1 => 1,
            Interval::M5 => 6,
            Interval::M15 => 7,
            Interval::H1 => 9,
            Interval::D1 => 2,
        };
        // Daily lines are the exchange's days: a bound at a UTC day's edge (a date, as the
        // tools pass one) names that date; any other instant, the exchange's date then.
        // Intraday lines are instants, asked in the exchange's wall clock.
        let daily = interval == Interval::D1;
        let day_of = |t: DateTime<Utc>, edge: bool| {
            if edge {
                t.date_naive()
            } else {
                zones::at(t, zone).date_naive()
            }
        };
        let first_day = day_of(start, start.time() == chrono::NaiveTime::MIN);
        let last_day = day_of(
            end,
            end.time() == chrono::NaiveTime::from_hms_opt(23, 59, 59).unwrap_or_default(),
        );
        let fmt = |t: DateTime<Utc>| {
            zones::at(t, zone)
                .naive_local()
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        };
        let (begin, finish) = if daily {
            (first_day.to_string(), last_day.to_string())
        } else {
            (fmt(start), fmt(end))
        };
        let owned = symbol.to_owned();
        let lines = self
            .with_conn(move |me, conn| {
                let symbol = owned;
                Box::pin(async move {
                    let mut out = Vec::new();
                    let mut key: Option<Vec<u8>> = None;
                    for _ in 0..1_000 {
                        let resp: Result<proto::RequestHistoryKlResponse, BrokerError> = me
                            .call(
                                conn,
                                proto::id::REQUEST_HISTORY_KL,
                                &proto::RequestHistoryKlRequest {
                                    c2s: Some(proto::RequestHistoryKlC2s {
                                        rehab_type: Some(0),
                                        kl_type: Some(kl_type),
                                        security: Some(security.clone()),
                                        begin_time: Some(begin.clone()),
                                        end_time: Some(finish.clone()),
                                        max_ack_kl_num: Some(1_000),
                                        need_kl_fields_flag: None,
                                        next_req_key: key.clone(),
                                    }),
                                },
                            )
                            .await;
                        let resp = resp.map_err(|e| me.unknown_symbol(&symbol, e))?;
                        let s2c = resp.s2c.unwrap_or_default();
                        out.extend(s2c.kl_list);
                        key = s2c.next_req_key.filter(|k| !k.is_empty());
                        if key.is_none() {
                            return Ok(out);
                        }
                    }
                    Ok(out)
                })
            })
            .await?;
        let mut bars = Vec::with_capacity(lines.len());
        for k in lines {
            if k.is_blank == Some(true) {
                continue;
            }
            let (Some(t), Some(o), Some(h), Some(l), Some(c)) = (
                k.time.as_deref().and_then(|t| local_time(t, zone)),
                k.open_price,
                k.high_price,
                k.low_price,
                k.close_price,
            ) else {
                continue;
            };
            let outside = if daily {
                let day = zones::at(t, zone).date_naive();
                day < first_day || day > last_day
            } else {
                t < start || t > end
            };
            if outside {
                continue;
            }
            bars.push(Bar {
                time: if interval == Interval::D1 {
                    zones::at(t, zone).date_naive().to_string()
                } else {
                    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                },
                instant: t,
                open: o,
                high: h,
                low: l,
                close: c,
                volume: k.volume.and_then(|v| format!("{v}").parse().ok()),
            });
        }
        bars.sort_by_key(|b| b.instant);
        Ok(bars)
    }

    /// Many securities per `Qot_GetSecuritySnapshot` (`snapshots.rs`).
    async fn market_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<crate::MarketSnapshots, BrokerError> {
        self.read_snapshots(account, symbols).await
    }

    /// `Qot_GetOptionExpirationDate`, `Qot_GetOptionChain` and snapshots (`chain.rs`).
    async fn option_chain(
        &self,
        account: &str,
        query: &crate::option_chain::ChainQuery,
    ) -> Result<crate::option_chain::OptionChain, BrokerError> {
        self.read_option_chain(account, query).await
    }

    /// The market's static lists (`search`).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        self.search(account, query).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn option_codes_are_told_from_stock_codes() {
        for code in ["AAPL240126P50000", "TCH240429C350000", "SPXW251219C6850500"] {
            assert!(is_option_code(code), "{code}");
        }
        for code in [
            "1155",
            "AAPL",
            "00700",
            "BRK.B",
            "AAPL241326P50000",
            "240126C100",
            "ÄPL240126P50000",
        ] {
            assert!(!is_option_code(code), "{code}");
        }
    }

    #[test]
    fn opend_funds_give_the_rate_of_a_single_foreign_currency() {
        let info = |c: i32, cash: f64| proto::AccCashInfo {
            currency: Some(c),
            cash: Some(cash),
            available_balance: None,
            net_cash_power: None,
        };
        let today = NaiveDate::from_ymd_opt(2026, 3, 2).unwrap();
        let funds = |cash: f64, list: Vec<proto::AccCashInfo>| proto::Funds {
            cash: Some(cash),
            currency: Some(proto::currency::MYR),
            cash_info_list: list,
            ..proto::Funds::default()
        };
        // MYR 1,000.00 and USD 120.40, 1,539.59 MYR in all: 539.59 / 120.40.
        let one = funds(
            1539.59,
            vec![
                info(proto::currency::MYR, 1000.0),
                info(proto::currency::USD, 120.4),
            ],
        );
        let (rates, note) = funds_rates(&one, Currency::MYR, today, &[]);
        assert_eq!(rates.len(), 1);
        assert_eq!(
            (rates[0].base, rates[0].quote),
            (Currency::USD, Currency::MYR)
        );
        assert_eq!(
            rates[0].rate,
            (Decimal::new(53959, 2) / Decimal::new(12040, 2)).round_dp(10)
        );
        // 120.40 USD converts back to OpenD's 539.59 MYR.
        assert_eq!(
            (Decimal::new(12040, 2) * rates[0].rate).round_dp(2),
            Decimal::new(53959, 2)
        );
        assert!(note.unwrap().contains("OpenD's own"));
        // Two foreign currencies: no rate, a note.
        let two = funds(
            2000.0,
            vec![
                info(proto::currency::MYR, 1000.0),
                info(proto::currency::USD, 120.4),
                info(proto::currency::HKD, 100.0),
            ],
        );
        let (rates, note) = funds_rates(&two, Currency::MYR, today, &[]);
        assert!(rates.is_empty());
        assert!(note.unwrap().contains("cannot be split"));
        // Only the account's currency: nothing to say.
        let none = funds(1000.0, vec![info(proto::currency::MYR, 1000.0)]);
        assert_eq!(
            funds_rates(&none, Currency::MYR, today, &[]),
            (Vec::new(), None)
        );
    }

    #[test]
    fn a_frame_round_trips_its_header() {
        let bytes = frame(2101, 7, b"hello");
        assert_eq!(bytes.len(), HEADER_LEN + 5);
        let mut head = [0u8; HEADER_LEN];
        head.copy_from_slice(&bytes[..HEADER_LEN]);
        let h = parse_header(&head).unwrap();
        assert_eq!((h.proto_id, h.serial, h.body_len), (2101, 7, 5));
        assert_eq!(h.sha1.as_slice(), Sha1::digest(b"hello").as_slice());
        // Little-endian: 2101 = 0x0835.
        assert_eq!(&bytes[2..6], &[0x35, 0x08, 0, 0]);
        head[0] = b'X';
        assert!(parse_header(&head).is_none());
    }

    #[test]
    fn fill_times_are_exchange_wall_clock() {
        let kl = zones::named("Asia/Kuala_Lumpur");
        let t = local_time("2026-11-27 09:30:00.250", kl).unwrap();
        assert_eq!(t.to_rfc3339(), "2026-11-27T01:30:00.250+00:00");
        let ny = zones::named("America/New_York");
        assert_eq!(
            local_time("2026-07-01 10:00:00", ny).unwrap().to_rfc3339(),
            "2026-07-01T14:00:00+00:00"
        );
        assert!(local_time("27/11/2026", kl).is_none());
        assert!(FutuMarket::parse("bursa").is_ok());
        assert!(FutuMarket::parse("CN").unwrap_err().contains("MY"));
    }
}
