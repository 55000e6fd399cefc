//! Interactive Brokers through the TWS / IB Gateway socket API (the `ibapi` crate),
//! read-only by construction: this module has no order code path at all.
//!
//! * **Connect:** a TCP precheck first (under half a second), so a gateway that is not
//!   running answers at once with a hint naming TWS / IB Gateway and their ports; then the
//!   handshake, bounded by the account's timeout. Where the server reports its API
//!   settings (server version 219+), the "Read-Only API" flag is read and shown.
//! * **Accounts:** a gateway may serve several accounts; `account` in the config picks
//!   one, and without it a gateway serving several is refused with the list.
//! * **Reads:** the portfolio (positions with TWS's market prices), cash balances and
//!   exchange rates by currency (`reqAccountUpdates`), executions joined with their
//!   commission reports by execution id (TWS keeps only days of them), quotes, bars.
//! * **Executions as TWS really sends them** (docs/dev/ibkr-tws-facts.md): every API
//!   client's (the filter's client id is 0), gathered until the end marker or until
//!   [`EXECUTIONS_QUIET`] passes without a frame (TWS sometimes never sends the end: the
//!   book is served with what arrived, its notes and health say so). Commission reports
//!   come frames after their executions, often after the end marker: a feed open for the
//!   whole connection keeps every one by execution id, the read waits up to
//!   [`COMMISSION_GRACE`] for those still missing, and a fill whose report has not come
//!   is marked commission unknown (never a silent 0) until a later read finds it.
//! * **Too old a TWS:** a server version below what `ibapi` needs (213, the protobuf
//!   API) is refused at connect with a hint naming the TWS / IB Gateway release to
//!   install.
//! * **History:** with a `flex` source, the Flex statement's full history is the base and
//!   recent TWS executions are merged into it by execution id, so a fill is never counted
//!   twice (a correction, an execution id that differs only after its last period,
//!   replaces the execution it corrects).
//! * **TWS down, statement on hand:** the account is answered from the statement alone,
//!   as of its date, with a note saying how old it is and that live positions are not in
//!   it; health reports the account degraded (TWS down, the statement answering).
//!
//! Every call is bounded by the account's timeout; the library's own log records go
//! wherever the process routes the `log` crate, which in stdio mode is nowhere near
//! stdout.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, TimeZone, Utc};
use ibapi::prelude::{
    AccountId, AccountUpdate, Contract, ExecutionFilter, HistoricalBarSize, HistoricalWhatToShow,
    OrderUpdate, SecurityType, StreamExt, SubscriptionItem, TickTypes, TradingHours,
};
use rust_decimal::Decimal;
use tokio::sync::Mutex;
use tradedesk_core::{
    Account, AssetClass, Bar, Book, BookParts, Currency, Fill, FxQuote, Instrument, InstrumentKey,
    Interval, Mode, Quote, ReportedPosition, Side, UnknownSpec,
};

use crate::ibkr::IbkrFlexBroker;
use crate::zones;
use crate::{AccountHealth, Broker, BrokerError, HealthStatus};

mod chain;
mod news;
mod search;
mod snapshots;

/// The ports TWS and IB Gateway listen on by default, for hints.
pub const USUAL_PORTS: &str =
    "7497 (TWS paper), 7496 (TWS live), 4002 (IB Gateway paper), 4001 (IB Gateway live)";

/// How long the TCP precheck waits: a gateway that is running accepts at once.
const PRECHECK: Duration = Duration::from_millis(450);

/// TWS keeps executions for this many days (the API's `lastNDays` maximum).
const EXECUTION_DAYS: i32 = 7;

/// How long executions are gathered with no frame from TWS before its end marker
/// (`ExecutionDetailsEnd`) is given up on; TWS sometimes never sends it. Never past the
/// read's own share of the account's timeout (see `build_book`).
pub const EXECUTIONS_QUIET: Duration = Duration::from_secs(2);

/// How long a read waits, after the executions, for commission reports still missing:
/// TWS sends them frames later, often after the end marker. A report later than this is
/// kept by the connection's feed and used by the next read.
pub const COMMISSION_GRACE: Duration = Duration::from_millis(1500);

/// The execution filter's client id that asks for every API client's executions (and
/// TWS's own, manual ones): IBKR's reference client sends 0 by default.
const EVERY_CLIENT: i32 = 0;

/// The TWS / IB Gateway release that first speaks a server version, for hints. From
/// IBKR's API releases (the highest server version each speaks): 10.37 speaks 203,
/// 10.40 215, 10.41 217, 10.42 218, 10.43 219, 10.44 222, 10.46 225 (see
/// docs/dev/ibkr-tws-facts.md).
fn tws_release_for(server_version: i32) -> &'static str {
    match server_version {
        ..=215 => "10.40",
        216..=217 => "10.41",
        218 => "10.42",
        219 => "10.43",
        220..=222 => "10.44",
        223 => "10.45",
        224..=225 => "10.46",
        _ => "the latest",
    }
}

/// Commission reports seen on one connection, by execution id.
#[derive(Debug, Default)]
struct CommissionBook {
    reports: std::sync::Mutex<BTreeMap<String, (Decimal, Currency)>>,
    /// Woken on every report.
    arrived: tokio::sync::Notify,
}

impl CommissionBook {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (Decimal, Currency)>> {
        self.reports
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record(&self, report: &ibapi::orders::CommissionReport) {
        if let (Some(amount), Ok(currency)) = (
            decimal(report.commission),
            Currency::new_checked(&report.currency),
        ) {
            self.lock()
                .insert(report.execution_id.clone(), (amount, currency));
            self.arrived.notify_waiters();
        }
    }

    fn get(&self, execution_id: &str) -> Option<(Decimal, Currency)> {
        self.lock().get(execution_id).copied()
    }

    /// Waits until every id has its report, or `until`.
    async fn wait_for(&self, ids: &[String], until: tokio::time::Instant) {
        loop {
            // Registered before the check, so a report between the two still wakes it.
            let woken = self.arrived.notified();
            if ids.iter().all(|id| self.get(id).is_some()) {
                return;
            }
            if tokio::time::timeout_at(until, woken).await.is_err() {
                return;
            }
        }
    }

    /// Forgets reports for executions TWS no longer lists (TWS sends them again with
    /// their executions).
    fn keep_only(&self, ids: &BTreeSet<String>) {
        self.lock().retain(|id, _| ids.contains(id));
    }
}

/// What one request read until its end marker or a quiet spell brought.
struct QuietRead<T> {
    items: Vec<T>,
    /// False when TWS's end marker had not come within the bounded wait.
    ended: bool,
    waited: Duration,
}

/// An IBKR account read through TWS / IB Gateway.
#[derive(Debug, Clone)]
pub struct TwsConfig {
    /// The config's name for the account.
    pub id: String,
    pub host: String,
    pub port: u16,
    pub client_id: i32,
    /// IBKR's account number, when the gateway serves several.
    pub account: Option<String>,
    /// The bound on every call (connect, each request).
    pub timeout: Duration,
}

/// What the connection learned at connect.
struct Session {
    client: ibapi::Client,
    /// IBKR's account number served under the config's id.
    account: String,
    /// Every account the gateway serves.
    managed: Vec<String>,
    /// The "Read-Only API" setting, where the server reports it.
    read_only: Option<bool>,
    /// Every commission report this connection has seen, whenever it came.
    commissions: Arc<CommissionBook>,
    /// The task that fills `commissions` from the client's order-update stream.
    feed: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(feed) = &self.feed {
            feed.abort();
        }
    }
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("server_version", &self.client.server_version())
            .field("account", &self.account)
            .field("managed", &self.managed)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

/// The TWS / IB Gateway adapter.
#[derive(Debug)]
pub struct TwsBroker {
    config: TwsConfig,
    flex: Option<IbkrFlexBroker>,
    session: Mutex<Option<Arc<Session>>>,
    /// One account-updates stream at a time per client (TWS's rule).
    reading: Mutex<()>,
    /// Contracts seen in the portfolio and executions, for quotes and bars by symbol.
    contracts: std::sync::Mutex<BTreeMap<String, Contract>>,
    /// What the last read could not get from TWS (no end marker), for health.
    last_read: std::sync::Mutex<Option<String>>,
    /// The account's BuyingPower and MaintMarginReq as the last read got them.
    margin: std::sync::Mutex<Option<crate::AccountMargin>>,
    /// The symbol matches `search_instruments` read (see `search`).
    matches: search::MatchCache,
}

fn decimal(v: f64) -> Option<Decimal> {
    // The shortest text that reads back as the same double: what TWS sent.
    if !v.is_finite() || v == f64::MAX {
        return None;
    }
    v.to_string().parse::<Decimal>().ok()
}

fn to_chrono(t: time::OffsetDateTime) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.unix_timestamp(), t.nanosecond())
}

/// An execution's time as TWS renders it: `YYYYMMDD HH:MM:SS ZONE`, `YYYYMMDD  HH:MM:SS`
/// (the gateway's zone) or `YYYYMMDD-HH:MM:SS` (UTC).
fn execution_instant(text: &str, gateway: Option<&'static zones::Tz>) -> Option<DateTime<Utc>> {
    let text = text.trim();
    let (local, zone) = if let Some((d, t)) = text.split_once('-') {
        (format!("{d} {t}"), zones::named("UTC"))
    } else {
        let mut parts = text.split_whitespace();
        let (d, t) = (parts.next()?, parts.next()?);
        let rest: Vec<&str> = parts.collect();
        let zone = if rest.is_empty() {
            gateway
        } else {
            Some(zones::named(&rest.join(" "))?)
        };
        (format!("{d} {t}"), zone)
    };
    let naive = NaiveDateTime::parse_from_str(&local, "%Y%m%d %H:%M:%S").ok()?;
    zones::resolve(naive, zone?)
}

/// `instant` in the exchange's zone (UTC where the currency names none).
fn exchange_time(instant: DateTime<Utc>, currency: &str) -> DateTime<FixedOffset> {
    zones::at(instant, zones::of_currency(currency))
}

/// The contract's multiplier, when TWS states one (a positive number).
fn stated_multiplier(contract: &Contract) -> Option<Decimal> {
    contract
        .multiplier
        .trim()
        .parse::<Decimal>()
        .ok()
        .filter(|m| m.is_sign_positive() && !m.is_zero())
}

/// Classes whose multiplier is the contract's, never a 1 to assume.
fn is_derivative(class: AssetClass) -> bool {
    matches!(
        class,
        AssetClass::Option | AssetClass::Future | AssetClass::Cfd
    )
}

fn asset_class(contract: &Contract) -> AssetClass {
    match contract.security_type {
        SecurityType::Option | SecurityType::FuturesOption => AssetClass::Option,
        SecurityType::Future | SecurityType::ContinuousFuture => AssetClass::Future,
        SecurityType::ForexPair => AssetClass::Fx,
        SecurityType::Crypto => AssetClass::Crypto,
        SecurityType::CFD => AssetClass::Cfd,
        SecurityType::Bond => AssetClass::Bond,
        SecurityType::MutualFund => AssetClass::Fund,
        _ => AssetClass::Equity,
    }
}

/// The symbol as IBKR's statements show it: the local symbol for derivatives and FX
/// (`AAPL  251219C00200000`, `MESZ5`, `EUR.USD`), the ticker for stocks.
fn symbol_of(contract: &Contract) -> String {
    let local = contract.local_symbol.trim();
    match contract.security_type {
        SecurityType::Stock => contract.symbol.as_str().to_owned(),
        _ if !local.is_empty() => contract.local_symbol.clone(),
        _ => contract.symbol.as_str().to_owned(),
    }
}

/// Which exchange a symbol given with `EXCHANGE:` trades in, by currency.
fn exchange_currency(exchange: &str) -> &'static str {
    match exchange {
        "SEHK" | "HKEX" => "HKD",
        "MYX" | "BURSA" => "MYR",
        "TSE" | "TSEJ" => "JPY",
        "LSE" => "GBP",
        "IBIS" | "XETRA" | "SBF" | "AEB" | "BVME" => "EUR",
        "SGX" => "SGD",
        "ASX" => "AUD",
        "TSX" => "CAD",
        _ => "USD",
    }
}

fn bar_size(interval: Interval) -> HistoricalBarSize {
    match interval {
        Interval::M1 => HistoricalBarSize::Min,
        Interval::M5 => HistoricalBarSize::Min5,
        Interval::M15 => HistoricalBarSize::Min15,
        Interval::H1 => HistoricalBarSize::Hour,
        Interval::D1 => HistoricalBarSize::Day,
    }
}

/// An execution id and the execution it corrects: IBKR marks a correction by changing
/// only the digits after the last period (`….01` corrected by `….02`).
fn execution_base(id: &str) -> &str {
    id.rsplit_once('.').map_or(id, |(base, _)| base)
}

impl TwsBroker {
    /// `flex`: the account's Flex statement, the full history recent executions join.
    pub fn new(config: TwsConfig, flex: Option<IbkrFlexBroker>) -> Self {
        Self {
            config,
            flex,
            session: Mutex::new(None),
            reading: Mutex::new(()),
            contracts: std::sync::Mutex::new(BTreeMap::new()),
            last_read: std::sync::Mutex::new(None),
            margin: std::sync::Mutex::new(None),
            matches: search::MatchCache::default(),
        }
    }

    fn address(&self) -> String {
        if self.config.host.contains(':') {
            format!("[{}]:{}", self.config.host, self.config.port)
        } else {
            format!("{}:{}", self.config.host, self.config.port)
        }
    }

    fn unavailable(&self, detail: String, hint: &str) -> BrokerError {
        BrokerError::Unavailable {
            account: self.config.id.clone(),
            detail,
            hint: hint.to_owned(),
        }
    }

    fn timeout(&self) -> BrokerError {
        BrokerError::Timeout {
            account: self.config.id.clone(),
            timeout: self.config.timeout,
        }
    }

    fn start_hint(&self) -> String {
        format!(
            "start TWS or IB Gateway, log in, and enable Configure > API > Settings > \"Enable ActiveX and Socket Clients\" on port {} (the usual ports: {USUAL_PORTS}); set host/port in the config to match",
            self.config.port
        )
    }

    /// What a library error means for this account.
    fn failure(&self, e: &ibapi::Error, doing: &str) -> BrokerError {
        match e {
            ibapi::Error::Timeout => self.timeout(),
            ibapi::Error::ConnectionRejected(_) => self.unavailable(
                format!("{} closed the connection while {doing}", self.address()),
                "TWS / IB Gateway refuses this host: add 127.0.0.1 to API > Settings > Trusted IPs, or allow connections from localhost",
            ),
            ibapi::Error::ClientIdInUse { client_id } => self.unavailable(
                format!("client id {client_id} is in use by another API connection"),
                "give this account another client_id in the config",
            ),
            ibapi::Error::ServerVersion(need, got, _) => self.unavailable(
                format!(
                    "TWS / IB Gateway at {} speaks API server version {got}; {doing} needs {need} or later",
                    self.address()
                ),
                &format!(
                    "install TWS or IB Gateway {} or later from IBKR's download page (the one running speaks server version {got}, which is too old), then start it and log in again",
                    tws_release_for(*need)
                ),
            ),
            ibapi::Error::Notice(n) if n.code == 200 => BrokerError::InvalidRequest {
                account: self.config.id.clone(),
                reason: format!("IBKR has no such contract ({})", n.message),
            },
            ibapi::Error::Notice(n) if n.code == 354 || n.code == 10089 || n.code == 162 => self
                .unavailable(
                    format!("TWS error {}: {}", n.code, n.message),
                    "this data needs a market-data subscription in IBKR's Client Portal (or try again later: 162 also means pacing)",
                ),
            ibapi::Error::Notice(n) => self.unavailable(
                format!("TWS error {} while {doing}: {}", n.code, n.message),
                "see IBKR's message codes for this error",
            ),
            other if other.is_connection_lost() => self.unavailable(
                format!("the connection to {} was lost while {doing}", self.address()),
                &self.start_hint(),
            ),
            other => self.unavailable(format!("{doing}: {other}"), &self.start_hint()),
        }
    }

    /// A connected session, connecting (or reconnecting) first when needed.
    async fn session(&self) -> Result<Arc<Session>, BrokerError> {
        let mut slot = self.session.lock().await;
        if let Some(s) = slot.as_ref()
            && s.client.is_connected()
        {
            return Ok(Arc::clone(s));
        }
        *slot = None;
        let session = Arc::new(self.connect().await?);
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Forgets the session after a failure that may have left it unusable.
    async fn drop_session(&self) {
        if let Some(s) = self.session.lock().await.take() {
            s.client.disconnect().await;
        }
    }

    async fn precheck(&self) -> Result<(), BrokerError> {
        let bound = PRECHECK.min(self.config.timeout);
        match tokio::time::timeout(
            bound,
            tokio::net::TcpStream::connect((self.config.host.as_str(), self.config.port)),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(self.unavailable(
                format!("nothing accepts connections on {}: {e}", self.address()),
                &self.start_hint(),
            )),
            Err(_) => Err(self.unavailable(
                format!(
                    "{} did not accept a connection within {} ms",
                    self.address(),
                    bound.as_millis()
                ),
                &self.start_hint(),
            )),
        }
    }

    async fn connect(&self) -> Result<Session, BrokerError> {
        self.precheck().await?;
        let started = Instant::now();
        let builder = ibapi::Client::builder()
            .address(self.address())
            .client_id(self.config.client_id)
            .one_shot_timeout(self.config.timeout)
            // tradedesk reconnects on the next call; the library must not keep a
            // dead gateway's calls waiting.
            .max_reconnect_attempts(0)
            // IBKR's documented 50 messages a second: a request over it waits (a chain's
            // many market-data requests), never rejected by TWS (error 100).
            .rate_limiter(ibapi::RateLimiter::default());
        let client = tokio::time::timeout(self.config.timeout, builder.connect())
            .await
            // Accepted but silent: TWS showing its "accept incoming connection?"
            // dialog, still logging in, or another program on the port.
            .map_err(|_| self.timeout())
            .and_then(|r| r.map_err(|e| self.failure(&e, "connecting")))?;
        let managed: Vec<String> = client.handshake_managed_accounts().to_vec();
        let account = match &self.config.account {
            Some(want) if managed.iter().any(|m| m == want) => want.clone(),
            Some(want) => {
                return Err(self.unavailable(
                    format!(
                        "the gateway serves {}, not {want}",
                        if managed.is_empty() {
                            "no account".to_owned()
                        } else {
                            managed.join(", ")
                        }
                    ),
                    "set account to one of the gateway's accounts",
                ));
            }
            None => match managed.as_slice() {
                [one] => one.clone(),
                [] => {
                    return Err(self.unavailable(
                        "the gateway reported no account".to_owned(),
                        "log in to TWS / IB Gateway with a trading account",
                    ));
                }
                many => {
                    return Err(self.unavailable(
                        format!("the gateway serves {} accounts: {}", many.len(), many.join(", ")),
                        "set account = \"…\" to one of them, and list one [[accounts]] entry per account you want",
                    ));
                }
            },
        };
        let left = self.config.timeout.saturating_sub(started.elapsed());
        // The read-only flag, where the server reports its settings (219+, TWS 10.43).
        let read_only = match tokio::time::timeout(left, client.config()).await {
            Ok(Ok(config)) => config
                .api
                .and_then(|a| a.settings)
                .and_then(|s| s.read_only_api),
            _ => None,
        };
        // Commission reports come frames after their executions, often after the end
        // marker that closes an executions request: this feed keeps every one the
        // connection sees. Nothing is sent to TWS for it.
        let commissions = Arc::new(CommissionBook::default());
        let feed = match client.order_update_stream().await {
            Ok(mut stream) => {
                let book = Arc::clone(&commissions);
                Some(tokio::spawn(async move {
                    while let Some(item) = stream.next().await {
                        match item {
                            Ok(SubscriptionItem::Data(OrderUpdate::CommissionReport(c))) => {
                                book.record(&c);
                            }
                            Ok(_) => {}
                            Err(_) => break,
                        }
                    }
                }))
            }
            // Without it, only reports that come before the end marker are seen.
            Err(_) => None,
        };
        Ok(Session {
            client,
            account,
            managed,
            read_only,
            commissions,
            feed,
        })
    }

    /// Reads a request until TWS's end marker, or until `quiet` passes with no frame
    /// (from the start when `from_start`, else once the first item came), or `cap`: TWS
    /// sometimes never sends the end (executions, option parameters), and that must not
    /// make every read time out.
    async fn read_quiet<T, S>(
        &self,
        stream: &mut S,
        quiet: Duration,
        from_start: bool,
        cap: tokio::time::Instant,
        doing: &str,
    ) -> Result<QuietRead<T>, BrokerError>
    where
        S: StreamExt<Item = Result<SubscriptionItem<T>, ibapi::Error>> + Unpin,
    {
        let started = tokio::time::Instant::now();
        let mut items = Vec::new();
        loop {
            let until = if from_start || !items.is_empty() {
                (tokio::time::Instant::now() + quiet).min(cap)
            } else {
                cap
            };
            match tokio::time::timeout_at(until, stream.next()).await {
                Err(_) => {
                    return Ok(QuietRead {
                        items,
                        ended: false,
                        waited: started.elapsed(),
                    });
                }
                Ok(None) => {
                    return Ok(QuietRead {
                        items,
                        ended: true,
                        waited: started.elapsed(),
                    });
                }
                Ok(Some(Err(e))) => return Err(self.failure(&e, doing)),
                Ok(Some(Ok(SubscriptionItem::Notice(_)))) => {}
                Ok(Some(Ok(SubscriptionItem::Data(item)))) => items.push(item),
            }
        }
    }

    /// Reads a subscription until `done` says its last item ends it, or the stream ends.
    async fn read<T, S>(
        &self,
        stream: &mut S,
        deadline: tokio::time::Instant,
        done: impl Fn(&T) -> bool,
        doing: &str,
    ) -> Result<Vec<T>, BrokerError>
    where
        S: StreamExt<Item = Result<SubscriptionItem<T>, ibapi::Error>> + Unpin,
    {
        let mut items = Vec::new();
        loop {
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Err(_) => return Err(self.timeout()),
                Ok(None) => return Ok(items),
                Ok(Some(Err(e))) => return Err(self.failure(&e, doing)),
                Ok(Some(Ok(SubscriptionItem::Notice(_)))) => {}
                Ok(Some(Ok(SubscriptionItem::Data(item)))) => {
                    let last = done(&item);
                    items.push(item);
                    if last {
                        return Ok(items);
                    }
                }
            }
        }
    }

    /// Runs one read against the session; a lost connection or a timeout drops the
    /// session so the next call connects afresh.
    async fn with_session<T, F, Fut>(&self, f: F) -> Result<T, BrokerError>
    where
        F: FnOnce(Arc<Session>) -> Fut,
        Fut: std::future::Future<Output = Result<T, BrokerError>>,
    {
        let session = self.session().await?;
        let connected = Arc::clone(&session);
        let result = f(session).await;
        // A request TWS refused (no subscription, pacing) leaves the session fine; a
        // timeout or a lost connection does not.
        if matches!(result, Err(BrokerError::Timeout { .. })) || !connected.client.is_connected() {
            self.drop_session().await;
        }
        result
    }

    /// The contract for a symbol: the one seen in the account, else a SMART-routed stock
    /// (`EXCHANGE:SYMBOL` names its primary exchange).
    fn contract_for(&self, symbol: &str) -> Contract {
        let known = self
            .contracts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(symbol)
            .cloned();
        if let Some(c) = known {
            return c;
        }
        let (exchange, bare) = symbol
            .split_once(':')
            .map_or((None, symbol), |(e, s)| (Some(e), s));
        let exchange = exchange.filter(|e| *e != "SMART");
        let builder = Contract::stock(bare).on_exchange("SMART");
        match exchange {
            Some(e) => builder.primary(e).in_currency(exchange_currency(e)).build(),
            None => builder.in_currency("USD").build(),
        }
    }

    fn remember(&self, contract: &Contract, key: &InstrumentKey) {
        let mut c = contract.clone();
        if c.exchange.as_str().is_empty() || c.security_type == SecurityType::Stock {
            c.exchange = "SMART".into();
        }
        let mut map = self
            .contracts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.insert(key.to_string(), c.clone());
        map.entry(key.symbol.clone()).or_insert(c);
    }

    /// The account from its Flex statement alone, while TWS / IB Gateway does not
    /// answer: the statement's positions, cash and history as of its date, with a note
    /// saying how old it is and that live positions are not in it.
    fn statement_alone(&self, history: &Book, e: &BrokerError) -> Book {
        let mut parts = history.to_parts();
        let age = (Utc::now().date_naive() - history.as_of).num_days().max(0);
        parts.notes.push(format!(
            "{}: TWS / IB Gateway does not answer ({e}): this account is read from its Flex statement alone, as of {} ({age} day(s) old); live positions, cash and executions since then are not included; get_server_health shows TWS's state",
            self.config.id, history.as_of
        ));
        parts.accounts = vec![self.account(parts.base_currency)];
        Book::assemble(parts)
    }

    async fn build_book(&self) -> Result<Book, BrokerError> {
        let _one = self.reading.lock().await;
        // Until TWS answers again, no figure of an earlier read stands for the account.
        *self
            .margin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
        let history = match &self.flex {
            Some(flex) => Some(flex.snapshot().await?),
            None => None,
        };
        // With a statement to fall back on, TWS gets most of the timeout, all told, so a
        // silent gateway leaves time for the statement to answer within the caller's bound.
        let budget = match &history {
            Some(_) => self.config.timeout * 4 / 5,
            None => self.config.timeout,
        };
        let session_read = self.with_session(|s| async move {
            let started = tokio::time::Instant::now();
            let deadline = started + budget;
            let mut sub = s
                .client
                .account_updates(&AccountId(s.account.clone()))
                .await
                .map_err(|e| self.failure(&e, "requesting the portfolio"))?;
            let updates = self
                .read(
                    &mut sub,
                    deadline,
                    |u| matches!(u, AccountUpdate::End),
                    "reading the portfolio",
                )
                .await?;
            // One account-updates stream per client: ended before the next read.
            sub.cancel().await;
            let filter = ExecutionFilter {
                // Every API client's executions and TWS's own (manual orders), not only
                // those this client placed.
                client_id: Some(EVERY_CLIENT),
                account_code: s.account.clone(),
                last_n_days: EXECUTION_DAYS,
                ..ExecutionFilter::default()
            };
            let mut sub = s
                .client
                .executions(filter)
                .await
                .map_err(|e| self.failure(&e, "requesting executions"))?;
            // The executions get until a quarter of the budget is left, their commission
            // reports until a tenth is: the book is then assembled within the budget.
            let read = self
                .read_quiet(
                    &mut sub,
                    EXECUTIONS_QUIET,
                    true,
                    deadline - budget / 4,
                    "reading executions",
                )
                .await?;
            drop(sub);
            if !s.client.is_connected() {
                return Err(self.unavailable(
                    format!(
                        "the connection to {} was lost while reading executions",
                        self.address()
                    ),
                    &self.start_hint(),
                ));
            }
            for item in &read.items {
                if let ibapi::orders::Executions::CommissionReport(c) = item {
                    s.commissions.record(c);
                }
            }
            let ids: Vec<String> = read
                .items
                .iter()
                .filter_map(|e| match e {
                    ibapi::orders::Executions::ExecutionData(d) => {
                        Some(d.execution.execution_id.clone())
                    }
                    ibapi::orders::Executions::CommissionReport(_) => None,
                })
                .collect();
            let grace =
                (tokio::time::Instant::now() + COMMISSION_GRACE).min(deadline - budget / 10);
            s.commissions.wait_for(&ids, grace).await;
            s.commissions.keep_only(&ids.iter().cloned().collect());
            Ok((updates, read, s))
        });
        let read = match &history {
            Some(_) => match tokio::time::timeout(budget, session_read).await {
                Ok(read) => read,
                Err(_) => {
                    self.drop_session().await;
                    Err(self.timeout())
                }
            },
            None => session_read.await,
        };
        let (updates, executions_read, session) = match (read, &history) {
            (Ok(read), _) => read,
            // TWS down, the statement on hand: the statement answers alone, and says so.
            (Err(e), Some(h)) => return Ok(self.statement_alone(h, &e)),
            (Err(e), None) => return Err(e),
        };
        let ended = executions_read.ended;
        let waited = executions_read.waited;
        let executions = executions_read.items;
        let today = Utc::now().date_naive();
        let mut values: Vec<ibapi::accounts::AccountValue> = Vec::new();
        let mut portfolio: Vec<ibapi::accounts::AccountPortfolioValue> = Vec::new();
        for u in updates {
            match u {
                AccountUpdate::AccountValue(v) => values.push(v),
                AccountUpdate::PortfolioValue(p) => portfolio.push(p),
                _ => {}
            }
        }
        let base = values
            .iter()
            .find(|v| v.key == "NetLiquidation")
            .and_then(|v| Currency::new_checked(&v.currency).ok())
            .or_else(|| history.as_ref().map(|h| h.base_currency))
            .unwrap_or(Currency::USD);
        let mut parts = match &history {
            Some(h) => h.to_parts(),
            None => BookParts {
                base_currency: base,
                as_of: today,
                accounts: Vec::new(),
                instruments: Vec::new(),
                fills: Vec::new(),
                cash: Vec::new(),
                marks: Vec::new(),
                fx_rates: Vec::new(),
                reported_positions: Vec::new(),
                corporate_actions: Vec::new(),
                notes: Vec::new(),
                unknown_specs: Vec::new(),
                tickets: Vec::new(),
                margin_modes: Vec::new(),
            },
        };
        parts.base_currency = base;
        parts.as_of = parts.as_of.max(today);
        parts.accounts = vec![self.account(base)];
        let mut notes: Vec<String> = Vec::new();

        // Instruments: by (primary exchange, symbol); an execution's contract often lacks
        // the primary exchange, so the portfolio's and the statement's are used by con id
        // and symbol.
        let mut primary: BTreeMap<i32, String> = BTreeMap::new();
        for p in &portfolio {
            if !p.contract.primary_exchange.as_str().is_empty() {
                primary.insert(
                    p.contract.contract_id,
                    p.contract.primary_exchange.as_str().to_owned(),
                );
            }
        }
        for e in &executions {
            if let ibapi::orders::Executions::ExecutionData(d) = e
                && !d.contract.primary_exchange.as_str().is_empty()
            {
                primary
                    .entry(d.contract.contract_id)
                    .or_insert_with(|| d.contract.primary_exchange.as_str().to_owned());
            }
        }
        let index = |contract: &Contract, parts: &mut BookParts| -> Result<u32, BrokerError> {
            let symbol = symbol_of(contract);
            let currency = Currency::new_checked(contract.currency.as_str()).map_err(|_| {
                self.unavailable(
                    format!(
                        "TWS sent a contract with currency {}",
                        tradedesk_core::error::quote(contract.currency.as_str())
                    ),
                    "report this as a bug",
                )
            })?;
            let exchange = primary
                .get(&contract.contract_id)
                .cloned()
                .or_else(|| {
                    parts
                        .instruments
                        .iter()
                        .find(|i| i.key.symbol == symbol && i.currency == currency)
                        .map(|i| i.key.exchange.clone())
                })
                .unwrap_or_else(|| "IBKR".to_owned());
            let key = InstrumentKey::new(exchange, &symbol);
            self.remember(contract, &key);
            if let Some(i) = parts.instruments.iter().position(|x| x.key == key) {
                return Ok(u32::try_from(i).unwrap_or(u32::MAX));
            }
            let stated = stated_multiplier(contract);
            let class = asset_class(contract);
            let idx = u32::try_from(parts.instruments.len()).unwrap_or(u32::MAX);
            if stated.is_none() && is_derivative(class) {
                parts.unknown_specs.push(UnknownSpec {
                    instrument: idx,
                    detail: format!(
                        "TWS sent this {} (con id {}) without a multiplier: 1 assumed",
                        class.as_str(),
                        contract.contract_id
                    ),
                    fix: "give the account a flex source (its statements state each contract's multiplier)".to_owned(),
                });
            }
            parts.instruments.push(Instrument {
                key,
                currency,
                asset_class: class,
                multiplier: stated.unwrap_or(Decimal::ONE),
                name: None,
                sector: None,
                country: None,
            });
            Ok(u32::try_from(parts.instruments.len() - 1).unwrap_or(u32::MAX))
        };

        // Executions joined with their commission reports by execution id: those that
        // came with the executions, after the end marker, or since an earlier read.
        let commissions = &session.commissions;
        // The statement's fills by execution id (and by the id a correction replaces).
        let seen: BTreeSet<String> = parts.fills.iter().map(|f| f.id.to_string()).collect();
        let seen_base: BTreeSet<&str> = seen.iter().map(|id| execution_base(id)).collect();
        let mut latest: BTreeMap<String, &ibapi::orders::ExecutionData> = BTreeMap::new();
        for e in &executions {
            if let ibapi::orders::Executions::ExecutionData(d) = e {
                let id = &d.execution.execution_id;
                let slot = latest.entry(execution_base(id).to_owned()).or_insert(d);
                if slot.execution.execution_id < *id {
                    *slot = d;
                }
            }
        }
        let latest_count = executions
            .iter()
            .filter(|e| matches!(e, ibapi::orders::Executions::ExecutionData(_)))
            .count();
        let zone = session.client.time_zone();
        let mut merged = 0usize;
        let mut without_commission = Vec::new();
        let first_seq = u32::try_from(parts.fills.len()).unwrap_or(u32::MAX);
        for (n, (base_id, d)) in latest.into_iter().enumerate() {
            let x = &d.execution;
            if seen.contains(&x.execution_id) {
                continue;
            }
            if seen_base.contains(base_id.as_str()) {
                // A correction of a statement fill: the correction replaces it.
                parts.fills.retain(|f| execution_base(&f.id) != base_id);
            }
            let (Some(quantity), Some(price)) = (decimal(x.shares), decimal(x.price)) else {
                return Err(self.unavailable(
                    format!(
                        "execution {} has no usable shares or price",
                        tradedesk_core::error::quote(&x.execution_id)
                    ),
                    "report this as a bug",
                ));
            };
            let Some(instant) = execution_instant(&x.time, zone) else {
                return Err(self.unavailable(
                    format!(
                        "execution {} has a time tradedesk cannot read: {}",
                        tradedesk_core::error::quote(&x.execution_id),
                        tradedesk_core::error::quote(&x.time)
                    ),
                    "report this as a bug, with the time as TWS shows it",
                ));
            };
            let instrument = index(&d.contract, &mut parts)?;
            let currency = parts.instruments[instrument as usize].currency;
            let (commission, commission_currency, known) = match commissions.get(&x.execution_id) {
                Some((amount, c)) => (amount, c, true),
                None => {
                    without_commission.push(x.execution_id.clone());
                    (Decimal::ZERO, currency, false)
                }
            };
            let time = exchange_time(instant, d.contract.currency.as_str());
            parts.fills.push(Fill {
                id: x.execution_id.as_str().into(),
                account: 0,
                instrument,
                side: match x.side {
                    ibapi::orders::ExecutionSide::Bought => Side::Buy,
                    _ => Side::Sell,
                },
                quantity: quantity.abs(),
                price,
                commission,
                commission_currency,
                commission_known: known,
                time,
                trade_date: time.date_naive(),
                seq: first_seq.saturating_add(u32::try_from(n).unwrap_or(u32::MAX)),
                kind: tradedesk_core::FillKind::Trade,
                position: 0,
            });
            merged += 1;
        }
        if !without_commission.is_empty() {
            notes.push(format!(
                "{}: TWS had sent no commission report for {} execution(s) ({}) within {} ms of the executions: their fees are unknown (commission_known false) and their P&L is gross of fees until a later read finds the reports; TWS sends other API clients' commission reports only to its Master API client ID (Configure > API > Settings), so give tradedesk that client_id if they never come",
                self.config.id,
                without_commission.len(),
                without_commission.join(", "),
                COMMISSION_GRACE.as_millis()
            ));
        }
        let unfinished = (!ended).then(|| {
            format!(
                "TWS sent no end to its list of executions (ExecutionDetailsEnd) within {} ms; the {} execution(s) that came are used, and any TWS had not sent yet are missing",
                waited.as_millis(),
                latest_count
            )
        });
        if let Some(text) = &unfinished {
            notes.push(format!(
                "{}: {text}; get_server_health shows the account degraded until a read gets the end",
                self.config.id
            ));
        }
        *self
            .last_read
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = unfinished;

        // The portfolio: TWS's positions (for reconciliation), its market prices and its
        // average costs (per unit: TWS quotes them per contract).
        parts.reported_positions.clear();
        let mut cost = BTreeMap::new();
        for p in &portfolio {
            let instrument = index(&p.contract, &mut parts)?;
            // A derivative TWS sent without a multiplier: its portfolio line's market
            // value over position x price states it.
            if let Some(at) = parts
                .unknown_specs
                .iter()
                .position(|u| u.instrument == instrument)
                && let Some(m) = decimal(p.market_value)
                    .zip(decimal(p.position).zip(decimal(p.market_price)))
                    .and_then(|(value, (qty, price))| value.checked_div(qty.checked_mul(price)?))
                    .map(|m| m.abs().round_dp(6).normalize())
                    .filter(|m| !m.is_zero())
            {
                parts.unknown_specs.remove(at);
                parts.instruments[instrument as usize].multiplier = m;
                notes.push(format!(
                    "{}: TWS sent {} without a multiplier: {m} is taken from its portfolio line (market value / (position x market price))",
                    self.config.id,
                    parts.instruments[instrument as usize].key
                ));
            }
            let multiplier = parts.instruments[instrument as usize].multiplier;
            if let Some(avg) = decimal(p.average_cost).and_then(|a| a.checked_div(multiplier)) {
                cost.insert(instrument, avg);
            }
            if let Some(quantity) = decimal(p.position) {
                parts.reported_positions.push(ReportedPosition {
                    account: 0,
                    instrument,
                    quantity,
                });
            }
            if let Some(price) = decimal(p.market_price).filter(|p| p.is_sign_positive()) {
                parts
                    .marks
                    .retain(|(i, d, _)| !(*i == instrument && *d == today));
                parts.marks.push((instrument, today, price));
            }
        }

        // Without a statement, positions older than TWS's 7 days of executions are opened
        // at TWS's average cost, so the lots and their P&L follow what the account holds.
        // With one, the statement is the history: a difference is a discrepancy, and the
        // reconciliation shows it.
        let opened = if history.is_none() {
            crate::open_unexplained(&mut parts, &cost)
        } else {
            Vec::new()
        };
        if !opened.is_empty() {
            notes.push(format!(
                "{}: {} was held before the executions TWS keeps (7 days): opened at TWS's average cost, with unknown fees",
                self.config.id,
                opened.join(", ")
            ));
        }
        // Exchange rates to the base currency, as TWS values the account.
        for v in &values {
            if v.key == "ExchangeRate"
                && v.currency != "BASE"
                && v.currency != base.code()
                && let (Ok(c), Ok(rate)) = (Currency::new_checked(&v.currency), v.value.parse())
            {
                parts.fx_rates.push(FxQuote {
                    base: c,
                    quote: base,
                    rate,
                    date: today,
                });
            }
        }

        // Margin: the account values TWS states in the base currency.
        let figure = |key: &str| {
            let of = |ccy: &str| {
                values
                    .iter()
                    .find(|v| v.key == key && v.currency == ccy)
                    .and_then(|v| v.value.trim().parse::<Decimal>().ok())
            };
            of(base.code()).or_else(|| of("BASE"))
        };
        *self
            .margin
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(crate::AccountMargin {
            currency: base,
            margin_used: None,
            free_margin: None,
            margin_level: None,
            leverage: None,
            buying_power: figure("BuyingPower"),
            maintenance_margin: figure("MaintMarginReq"),
        });

        // Cash: anchored to the balances TWS reports, per currency.
        let reported_cash: Vec<(Currency, Decimal)> = values
            .iter()
            .filter(|v| v.key == "CashBalance" && v.currency != "BASE")
            .filter_map(|v| {
                Some((
                    Currency::new_checked(&v.currency).ok()?,
                    v.value.parse().ok()?,
                ))
            })
            .collect();
        crate::anchor_cash(
            &mut parts,
            &reported_cash,
            "TWS",
            if history.is_some() {
                "the Flex statement and TWS's executions"
            } else {
                "the executions TWS keeps"
            },
        );
        if history.is_none() {
            notes.push(format!(
                "{}: TWS gives only the last {EXECUTION_DAYS} days of executions: realized P&L before them is not known; give the account a flex source for its full history",
                self.config.id
            ));
        } else if merged > 0 {
            notes.push(format!(
                "{}: {merged} execution(s) from TWS newer than the Flex statement were added",
                self.config.id
            ));
        }
        if session.read_only == Some(false) {
            notes.push(format!(
                "{}: TWS's \"Read-Only API\" setting is off; tradedesk never places orders through TWS, but turning it on is safer",
                self.config.id
            ));
        }
        parts.notes.extend(notes);
        Ok(Book::assemble(parts))
    }

    /// Paper accounts' numbers start with `D` (`DU…`, `DF…`).
    fn mode(&self) -> Mode {
        match &self.config.account {
            Some(a) if a.starts_with('D') => Mode::Paper,
            _ => Mode::Live,
        }
    }

    fn account(&self, currency: Currency) -> Account {
        Account {
            id: self.config.id.clone(),
            broker: "ibkr".to_owned(),
            currency,
            name: Some("Interactive Brokers (TWS / IB Gateway)".to_owned()),
            mode: self.mode(),
        }
    }
}

#[async_trait]
impl Broker for TwsBroker {
    fn accounts(&self) -> Vec<Account> {
        vec![self.account(Currency::USD)]
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        self.build_book().await.map(Arc::new)
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

    fn generation(&self) -> u64 {
        // New executions and prices arrive on their own: read again every 30 s.
        crate::every(Duration::from_secs(30))
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let probe = self
            .with_session(|s| async move {
                let now = tokio::time::timeout(self.config.timeout, s.client.server_time())
                    .await
                    .map_err(|_| self.timeout())?
                    .map_err(|e| self.failure(&e, "asking the server time"))?;
                Ok((s, now))
            })
            .await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, detail, hint) = match probe {
            Ok((s, _)) => {
                let read_only = match s.read_only {
                    Some(true) => "Read-Only API on",
                    Some(false) => "Read-Only API OFF",
                    None => "Read-Only API setting not reported (TWS before 10.43)",
                };
                let detail = format!(
                    "TWS / IB Gateway at {} (API version {}), account {} of {}; {read_only}",
                    self.address(),
                    s.client.server_version(),
                    s.account,
                    s.managed.join(", ")
                );
                let unfinished = self
                    .last_read
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .clone();
                match unfinished {
                    // Answering, but its last list of executions may be short.
                    Some(text) => (
                        HealthStatus::Degraded,
                        format!("{detail}; the last read: {text}"),
                        Some(
                            "if this lasts, restart TWS / IB Gateway; until then recent executions may be missing from positions and P&L".to_owned(),
                        ),
                    ),
                    None => (
                        HealthStatus::Ok,
                        detail,
                        (s.read_only == Some(false)).then(|| {
                            "tradedesk only reads from TWS; check Configure > API > Settings > \"Read-Only API\" to make that certain".to_owned()
                        }),
                    ),
                }
            }
            Err(e) => crate::down(
                &e,
                Some(
                    "TWS / IB Gateway is connected but not answering: check it is logged in and not showing a dialog",
                ),
                &self.start_hint(),
            ),
        };
        let mut out = vec![AccountHealth {
            account: self.config.id.clone(),
            broker: "ibkr".to_owned(),
            mode: self.mode(),
            status,
            latency_ms: Some(latency_ms),
            detail,
            hint,
        }];
        if let Some(flex) = &self.flex {
            for mut h in flex.health().await {
                h.detail = format!("history: {}", h.detail);
                if h.status != HealthStatus::Ok && out[0].status == HealthStatus::Ok {
                    out[0].status = HealthStatus::Degraded;
                    out[0].detail = format!("{}; {}", out[0].detail, h.detail);
                    out[0].hint = h.hint.clone();
                } else if h.status == HealthStatus::Ok && out[0].status == HealthStatus::Down {
                    // The statement still answers: the account is served from it alone.
                    out[0].status = HealthStatus::Degraded;
                    out[0].detail = format!(
                        "TWS / IB Gateway down ({}); the account is answered from its Flex statement alone, without live positions ({})",
                        out[0].detail, h.detail
                    );
                }
            }
        }
        out
    }

    /// What a symbol names at IBKR, for quotes and bars: the contract held or traded in
    /// the account, else a SMART-routed stock (`EXCHANGE:SYMBOL` for a non-US listing).
    async fn instrument(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<tradedesk_core::TradableInstrument, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let contract = self.contract_for(symbol.trim());
        let exchange = if contract.primary_exchange.as_str().is_empty() {
            contract.exchange.as_str().to_owned()
        } else {
            contract.primary_exchange.as_str().to_owned()
        };
        let multiplier = stated_multiplier(&contract).unwrap_or(Decimal::ONE);
        Ok(tradedesk_core::TradableInstrument {
            key: InstrumentKey::new(exchange, symbol_of(&contract)),
            currency: Currency::new_checked(contract.currency.as_str()).unwrap_or(Currency::USD),
            asset_class: asset_class(&contract),
            multiplier,
            lot_step: Decimal::ONE,
            min_quantity: Decimal::ONE,
            max_quantity: Decimal::from(1_000_000),
            tick: Decimal::new(1, 2),
            pip: None,
            margin_rate: Decimal::ONE,
            unit: match asset_class(&contract) {
                AssetClass::Option | AssetClass::Future => "contracts",
                _ => "shares",
            },
        })
    }

    async fn quote(&self, account: &str, symbol: &str) -> Result<Quote, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let contract = self.contract_for(symbol);
        let ticks = self
            .with_session(|s| {
                let contract = contract.clone();
                async move {
                    let deadline = tokio::time::Instant::now() + self.config.timeout;
                    let mut sub = s
                        .client
                        .market_data(&contract)
                        .snapshot()
                        .subscribe()
                        .await
                        .map_err(|e| self.failure(&e, "requesting a quote"))?;
                    self.read(
                        &mut sub,
                        deadline,
                        |t| matches!(t, TickTypes::SnapshotEnd),
                        "reading a quote",
                    )
                    .await
                }
            })
            .await
            .map_err(|e| match e {
                BrokerError::InvalidRequest { .. } => BrokerError::UnknownSymbol {
                    account: self.config.id.clone(),
                    symbol: tradedesk_core::error::quote(symbol),
                    known: "contracts IBKR lists (use EXCHANGE:SYMBOL for non-US stocks)"
                        .to_owned(),
                },
                other => other,
            })?;
        let q = ibapi::prelude::Quote::from_ticks(&ticks);
        let valid = |v: Option<f64>| v.filter(|x| *x > 0.0).and_then(decimal);
        let (bid, ask) = match (valid(q.bid), valid(q.ask), valid(q.last)) {
            (Some(b), Some(a), _) => (b, a),
            (_, _, Some(last)) => (last, last),
            _ => {
                return Err(self.unavailable(
                    format!("TWS sent no bid, ask or last price for {symbol}"),
                    "the market may be closed with no frozen data, or the account lacks a market-data subscription",
                ));
            }
        };
        let exchange = if contract.primary_exchange.as_str().is_empty() {
            contract.exchange.as_str().to_owned()
        } else {
            contract.primary_exchange.as_str().to_owned()
        };
        Ok(Quote {
            key: InstrumentKey::new(exchange, symbol_of(&contract)),
            currency: Currency::new_checked(contract.currency.as_str()).unwrap_or(Currency::USD),
            bid,
            ask,
            time: Utc::now(),
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
        let contract = self.contract_for(symbol);
        let (Ok(from), Ok(to)) = (
            time::OffsetDateTime::from_unix_timestamp(start.timestamp()),
            time::OffsetDateTime::from_unix_timestamp(end.timestamp()),
        ) else {
            return Err(BrokerError::InvalidRequest {
                account: self.config.id.clone(),
                reason: "the range is outside the dates TWS takes".to_owned(),
            });
        };
        let data = self
            .with_session(|s| {
                let contract = contract.clone();
                async move {
                    tokio::time::timeout(
                        self.config.timeout,
                        s.client
                            .historical_data(&contract, bar_size(interval))
                            .what_to_show(HistoricalWhatToShow::Trades)
                            .trading_hours(TradingHours::Regular)
                            .between(from, to)
                            .fetch(),
                    )
                    .await
                    .map_err(|_| self.timeout())?
                    .map_err(|e| self.failure(&e, "requesting bars"))
                }
            })
            .await
            .map_err(|e| match e {
                BrokerError::InvalidRequest { .. } => BrokerError::UnknownSymbol {
                    account: self.config.id.clone(),
                    symbol: tradedesk_core::error::quote(symbol),
                    known: "contracts IBKR lists (use EXCHANGE:SYMBOL for non-US stocks)"
                        .to_owned(),
                },
                other => other,
            })?;
        let mut out = Vec::with_capacity(data.bars.len());
        for b in data.bars {
            let (time, instant) = match b.date {
                ibapi::market_data::historical::BarTimestamp::Date(d) => {
                    let Some(date) = NaiveDate::from_ymd_opt(
                        d.year(),
                        u32::from(u8::from(d.month())),
                        u32::from(d.day()),
                    ) else {
                        continue;
                    };
                    (
                        date.to_string(),
                        Utc.from_utc_datetime(&date.and_time(chrono::NaiveTime::MIN)),
                    )
                }
                ibapi::market_data::historical::BarTimestamp::DateTime(t) => {
                    let Some(t) = to_chrono(t) else {
                        continue;
                    };
                    (t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true), t)
                }
            };
            if instant < start - chrono::Duration::days(1) || instant > end {
                continue;
            }
            out.push(Bar {
                time,
                instant,
                open: b.open,
                high: b.high,
                low: b.low,
                close: b.close,
                volume: (b.volume >= 0.0).then_some(b.volume),
            });
        }
        Ok(out)
    }

    /// The subscribed providers' headlines per symbol (`news.rs`).
    async fn news(
        &self,
        account: &str,
        query: &crate::news::NewsQuery,
    ) -> Result<crate::news::NewsPage, BrokerError> {
        self.read_news(account, query).await
    }

    /// One market-data snapshot per contract, all sent at once (`snapshots.rs`).
    async fn market_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<crate::MarketSnapshots, BrokerError> {
        self.read_snapshots(account, symbols).await
    }

    /// IBKR's option parameters, contract details and one market-data request per
    /// contract (`chain.rs`).
    async fn option_chain(
        &self,
        account: &str,
        query: &crate::option_chain::ChainQuery,
    ) -> Result<crate::option_chain::OptionChain, BrokerError> {
        self.read_chain(account, query).await
    }

    /// IBKR's matching symbols (`search`).
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
    fn execution_times_read_in_their_zone() {
        let ny = execution_instant("20261127 10:30:00 US/Eastern", None).unwrap();
        assert_eq!(ny.to_rfc3339(), "2026-11-27T15:30:00+00:00");
        let summer = execution_instant("20260715 10:30:00 America/New_York", None).unwrap();
        assert_eq!(summer.to_rfc3339(), "2026-07-15T14:30:00+00:00");
        let utc = execution_instant("20261127-15:30:00", None).unwrap();
        assert_eq!(utc, ny);
        let gateway = zones::named("Asia/Kuala_Lumpur");
        let kl = execution_instant("20261127  09:00:00", gateway).unwrap();
        assert_eq!(kl.to_rfc3339(), "2026-11-27T01:00:00+00:00");
        assert!(execution_instant("20261127 10:30:00 Nowhere/Land", None).is_none());
        assert!(execution_instant("yesterday", None).is_none());
    }

    #[test]
    fn a_fill_takes_its_exchange_date() {
        // 01:00 UTC on the 27th is the 27th in Kuala Lumpur, the 26th in New York.
        let t = Utc.with_ymd_and_hms(2026, 11, 27, 1, 0, 0).unwrap();
        assert_eq!(
            exchange_time(t, "MYR").date_naive().to_string(),
            "2026-11-27"
        );
        assert_eq!(
            exchange_time(t, "USD").date_naive().to_string(),
            "2026-11-26"
        );
    }

    #[test]
    fn corrections_share_a_base() {
        assert_eq!(
            execution_base("0000e0d5.6555a859.01.01"),
            "0000e0d5.6555a859.01"
        );
        assert_eq!(
            execution_base("0000e0d5.6555a859.01.02"),
            execution_base("0000e0d5.6555a859.01.01")
        );
        assert_eq!(decimal(189.12), Some(Decimal::new(18912, 2)));
        assert_eq!(decimal(f64::MAX), None);
    }
}
