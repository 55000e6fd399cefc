//! An offline fake of Interactive Brokers' TWS / IB Gateway socket API, for tests.
//!
//! [`FakeTws::start`] listens on `127.0.0.1` (a free port) and speaks the protobuf-era
//! wire protocol that the `ibapi` crate (5.x) requires, serving many connections at once.
//! It was written from the protocol's facts: frame layout, message ids and protobuf field
//! numbers as IBKR defines them.
//!
//! # Wire format
//!
//! * Greeting (client → server): the 4 bytes `API\0`, then one length-prefixed text frame
//!   `v<min>..<max>` (an optional ` <options>` suffix is ignored). A malformed greeting or
//!   `max < 213` (the first protobuf-only server version) closes the socket.
//! * Version ack (server → client): one length-prefixed text frame
//!   `<version>\0<YYYYMMDD HH:MM:SS> <time zone>\0`, version = `min(server_version, max)`.
//! * Every later frame, both ways: 4-byte big-endian length, then a 4-byte big-endian message
//!   id, then a protobuf payload. Protobuf message ids travel as `id + 200`; all ids in this
//!   module ([`ids`], [`TwsState::received`], [`ORDER_FRAME_IDS`]) are those wire ids.
//!   Client→server and server→client ids are separate number spaces.
//!
//! # Behaviour ([`TwsBehaviour::Normal`])
//!
//! After `StartApi` (271) the fake sends `NextValidId` (209, order id 1), `ManagedAccounts`
//! (215) and one farm-OK notice (`ErrorMessage` 204, id −1, code 2104). Then it answers:
//!
//! | request (wire id)              | answer (wire ids, in order)                                               |
//! |--------------------------------|---------------------------------------------------------------------------|
//! | ManagedAccountsRequest 217     | ManagedAccounts 215                                                       |
//! | CurrentTimeRequest 249         | CurrentTime 249                                                           |
//! | CurrentTimeInMillisRequest 305 | CurrentTimeInMillis 309                                                   |
//! | IdsRequest 208                 | NextValidId 209                                                           |
//! | ConfigRequest 308              | ConfigResponse 310 (`api.settings.read_only_api`)                         |
//! | AccountDataRequest 206         | subscribe=true: AccountValue 206 ×n, PortfolioValue 207 ×n, AccountUpdateTime 208, AccountDataEnd 254; subscribe=false (the cancel): nothing |
//! | AccountSummaryRequest 262      | AccountSummary 263 ×n (account values whose key is a requested tag), AccountSummaryEnd 264 |
//! | PositionsRequest 261           | Position 261 ×n (every portfolio item, all accounts), PositionEnd 262      |
//! | ExecutionRequest 207           | per matching execution: ExecutionDetails 211 then (if any) CommissionAndFeesReport 259; then ExecutionDetailsEnd 255 (see *Executions* below for the unkind modes) |
//! | MarketDataRequest 201          | known symbol: TickReqParams 281, MarketDataType 258 (1), TickPrice 201 bid (1, with size), ask (2, with size), last (4), with a [`TwsDay`] also TickPrice open (14), high (6), low (7), close (9), TickSize last size (5), volume (8) and TickString last timestamp (45) (delayed: MarketDataType 3 and the delayed tick types 66.. instead), TickSnapshotEnd 257 (snapshot only); unknown: ErrorMessage 204 code 200 with the req id; a silent [`TwsDay`]: nothing at all |
//! | HistoricalDataRequest 220      | known symbol: HistoricalData 217 (all bars), HistoricalDataEnd 308; unknown: ErrorMessage 204 code 200 |
//! | NewsProvidersRequest 285       | NewsProviders 285: [`TwsState::news_providers`] (none: an empty list, as for a user without a news subscription) |
//! | HistoricalNewsRequest 286      | HistoricalNews 286 ×n: the [`TwsState::news`] of the conId from a requested provider inside the window, newest first, at most total results; then HistoricalNewsEnd 287 (has_more when more matched); a conId in [`TwsState::news_errors`]: ErrorMessage 204 with the req id; [`TwsState::news_delay`] sends it all that late |
//! | MatchingSymbolsRequest 281     | SymbolSamples 279: the [`TwsState::symbol_samples`] whose symbol starts with the pattern or whose description has it (none with [`TwsState::matching_silent`]) |
//! | ContractDataRequest 209        | an option (OPT, symbol, expiry, perhaps strike, right, trading class): ContractData 210 per matching [`TwsOption`]; another: ContractData 210 of [`TwsState::contract_details`] by symbol; then ContractDataEnd 252; nothing matching: ErrorMessage 204 code 200 |
//! | SecDefOptParamsRequest 278     | SecDefOptParameter 275 per [`TwsOptionParams`] of the underlying's conId (several exchanges, as TWS), then SecDefOptParameterEnd 276 (none with [`TwsState::option_params_end`] false); conId 0: ErrorMessage 321 |
//! | MarketDataRequest 201 for an OPT | its [`TwsOption`] by conId or local symbol: MarketDataType 258, TickPrice bid, ask, last, TickSize volume, TickOptionComputation 221 (bid 10, model 13), with generic tick 101 its open interest (TickSize 27 call, 28 put); delayed: a 10167 notice and the delayed twins; `error`: that ErrorMessage; `silent`: nothing; a snapshot with generic ticks: ErrorMessage 321, as IBKR |
//! | anything else (cancels, 259 MarketDataTypeRequest, orders, …) | nothing (recorded only) |
//!
//! # Executions, as TWS really sends them
//!
//! By default the fake is kinder than TWS: each commission report follows its execution
//! and the end marker comes last. [`TwsState`] can make it behave as TWS does:
//!
//! * [`TwsState::execution_end`] `= false`: no `ExecutionDetailsEnd` at all.
//! * [`TwsState::commissions`] `= CommissionTiming::AfterEnd { delay }`: every commission
//!   report comes after the end marker, a farm-status notice (an unrelated frame) first,
//!   and, with a non-zero `delay`, that long after the executions.
//! * The filter's client id is honoured: `clientId` 0 returns every client's
//!   executions (IBKR's reference client always sends the field, 0 by default); another
//!   value returns only that client's. IBKR does not say what an absent field means, so
//!   the fake takes the narrowest reading, the requesting connection's own executions,
//!   and a client that leaves the field out sees what a wrong filter would show.
//!   [`TwsExecution::client_id`] names the client that placed each order (`None`: the
//!   requesting connection).
//! * [`TwsState::server_version`] below 213 (e.g. 203, what IB Gateway 10.37 speaks)
//!   answers the handshake with that version, as an old TWS does: `ibapi` then refuses
//!   the connection.
//!
//! Quotes and bars are looked up by the request contract's symbol, then its local symbol,
//! then `SYMBOL.CURRENCY` (handy for forex: key `"EUR.USD"`).
//!
//! Wall-clock strings (the version ack, `AccountUpdateTime`, `HistoricalDataEnd`) are
//! [`TwsState::current_time`] shifted by [`TwsState::utc_offset_secs`] and labelled with
//! [`TwsState::time_zone`]; the fake has no time-zone database, so keep the two consistent
//! (the defaults, 2026-11-30 15:00 UTC, −5 h, `US/Eastern`, give `20261130 10:00:00 US/Eastern`).
//!
//! Every inbound frame's id is appended to [`TwsState::received`] whatever the behaviour,
//! and the behaviour is re-read for every request, so [`FakeTws::set_behaviour`] can make a
//! live connection go silent.
#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prost::Message as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};

/// Wire ids (protobuf id + 200) of the frames the fake knows.
pub mod ids {
    // ---- client → server ----
    /// `MarketDataRequest` (reqMktData).
    pub const REQ_MARKET_DATA: i32 = 201;
    /// `CancelMarketData`.
    pub const CANCEL_MARKET_DATA: i32 = 202;
    /// `PlaceOrderRequest` (place or modify an order).
    pub const PLACE_ORDER: i32 = 203;
    /// `CancelOrderRequest`.
    pub const CANCEL_ORDER: i32 = 204;
    /// `OpenOrdersRequest`.
    pub const REQ_OPEN_ORDERS: i32 = 205;
    /// `AccountDataRequest` (reqAccountUpdates; also its cancel, with subscribe=false).
    pub const REQ_ACCOUNT_DATA: i32 = 206;
    /// `ExecutionRequest`.
    pub const REQ_EXECUTIONS: i32 = 207;
    /// `IdsRequest`.
    pub const REQ_IDS: i32 = 208;
    /// `ManagedAccountsRequest`.
    pub const REQ_MANAGED_ACCOUNTS: i32 = 217;
    /// `FaReplace`.
    pub const REPLACE_FA: i32 = 219;
    /// `HistoricalDataRequest`.
    pub const REQ_HISTORICAL_DATA: i32 = 220;
    /// `ExerciseOptionsRequest`.
    pub const EXERCISE_OPTIONS: i32 = 221;
    /// `CancelHistoricalData`.
    pub const CANCEL_HISTORICAL_DATA: i32 = 225;
    /// `CurrentTimeRequest`.
    pub const REQ_CURRENT_TIME: i32 = 249;
    /// `GlobalCancelRequest`.
    pub const GLOBAL_CANCEL: i32 = 258;
    /// `MarketDataTypeRequest`.
    pub const REQ_MARKET_DATA_TYPE: i32 = 259;
    /// `PositionsRequest`.
    pub const REQ_POSITIONS: i32 = 261;
    /// `AccountSummaryRequest`.
    pub const REQ_ACCOUNT_SUMMARY: i32 = 262;
    /// `CancelAccountSummary`.
    pub const CANCEL_ACCOUNT_SUMMARY: i32 = 263;
    /// `CancelPositions`.
    pub const CANCEL_POSITIONS: i32 = 264;
    /// `StartApiRequest`.
    pub const START_API: i32 = 271;
    /// `CurrentTimeInMillisRequest`.
    pub const REQ_CURRENT_TIME_MILLIS: i32 = 305;
    /// `ConfigRequest`.
    pub const REQ_CONFIG: i32 = 308;
    /// `UpdateConfigRequest`.
    pub const UPDATE_CONFIG: i32 = 309;

    // ---- server → client ----
    /// `TickPrice`.
    pub const TICK_PRICE: i32 = 201;
    /// `TickSize`.
    pub const TICK_SIZE: i32 = 202;
    /// `TickString`.
    pub const TICK_STRING: i32 = 246;
    /// `ErrorMessage` (errors and notices).
    pub const ERROR: i32 = 204;
    /// `AccountValue`.
    pub const ACCOUNT_VALUE: i32 = 206;
    /// `PortfolioValue`.
    pub const PORTFOLIO_VALUE: i32 = 207;
    /// `AccountUpdateTime`.
    pub const ACCOUNT_UPDATE_TIME: i32 = 208;
    /// `NextValidId`.
    pub const NEXT_VALID_ID: i32 = 209;
    /// `ExecutionDetails`.
    pub const EXECUTION_DETAILS: i32 = 211;
    /// `ManagedAccounts`.
    pub const MANAGED_ACCOUNTS: i32 = 215;
    /// `HistoricalData`.
    pub const HISTORICAL_DATA: i32 = 217;
    /// `CurrentTime`.
    pub const CURRENT_TIME: i32 = 249;
    /// `AccountDataEnd`.
    pub const ACCOUNT_DATA_END: i32 = 254;
    /// `ExecutionDetailsEnd`.
    pub const EXECUTION_DETAILS_END: i32 = 255;
    /// `TickSnapshotEnd`.
    pub const TICK_SNAPSHOT_END: i32 = 257;
    /// `MarketDataType`.
    pub const MARKET_DATA_TYPE: i32 = 258;
    /// `CommissionAndFeesReport`.
    pub const COMMISSION_REPORT: i32 = 259;
    /// `Position`.
    pub const POSITION: i32 = 261;
    /// `PositionEnd`.
    pub const POSITION_END: i32 = 262;
    /// `AccountSummary`.
    pub const ACCOUNT_SUMMARY: i32 = 263;
    /// `AccountSummaryEnd`.
    pub const ACCOUNT_SUMMARY_END: i32 = 264;
    /// `TickReqParams`.
    pub const TICK_REQ_PARAMS: i32 = 281;
    /// `HistoricalDataEnd`.
    pub const HISTORICAL_DATA_END: i32 = 308;
    /// `CurrentTimeInMillis`.
    pub const CURRENT_TIME_MILLIS: i32 = 309;
    /// `ConfigResponse`.
    pub const CONFIG_RESPONSE: i32 = 310;
}

/// Inbound wire ids that would place, modify or cancel an order: PlaceOrder (203, also
/// used to modify), CancelOrder (204), ExerciseOptions (221) and GlobalCancel (258).
pub const ORDER_FRAME_IDS: &[i32] = &[
    ids::PLACE_ORDER,
    ids::CANCEL_ORDER,
    ids::EXERCISE_OPTIONS,
    ids::GLOBAL_CANCEL,
];

/// Inbound wire ids that would change TWS's settings: UpdateConfig (309), ReplaceFA (219).
pub const CONFIG_WRITE_FRAME_IDS: &[i32] = &[ids::UPDATE_CONFIG, ids::REPLACE_FA];

/// Lowest client max version the fake accepts (protobuf-only servers).
const MIN_PROTOBUF_VERSION: i32 = 213;
/// Largest inbound frame the fake reads.
const MAX_FRAME: usize = 16 * 1024 * 1024;
/// Protobuf message ids travel with this offset added.
const PROTOBUF_OFFSET: i32 = 200;

// ------------------------------------------------------------------------------------------
// Public scenario types
// ------------------------------------------------------------------------------------------

/// A contract as the fake sends it (proto `Contract`; empty strings are left out).
#[derive(Debug, Clone, Default)]
pub struct TwsContract {
    pub con_id: i32,
    pub symbol: String,
    /// "STK", "CASH", "FUT", "OPT", …
    pub sec_type: String,
    pub exchange: String,
    pub primary_exchange: String,
    pub currency: String,
    pub local_symbol: String,
    pub multiplier: Option<f64>,
}

/// One `PortfolioValue` line of an account update (also a `Position` line).
#[derive(Debug, Clone)]
pub struct TwsPortfolioItem {
    pub account: String,
    pub contract: TwsContract,
    /// Decimal string, e.g. "100" or "-2.5".
    pub position: String,
    pub market_price: f64,
    pub market_value: f64,
    pub average_cost: f64,
    pub unrealized_pnl: f64,
    pub realized_pnl: f64,
}

/// One `AccountValue` of an account update (also an `AccountSummary` row).
#[derive(Debug, Clone)]
pub struct TwsAccountValue {
    pub account: String,
    pub key: String,
    pub value: String,
    pub currency: String,
}

/// One fill, sent as `ExecutionDetails` (+ `CommissionAndFeesReport`).
#[derive(Debug, Clone)]
pub struct TwsExecution {
    pub account: String,
    pub contract: TwsContract,
    pub exec_id: String,
    pub order_id: i32,
    pub perm_id: i64,
    /// Sent verbatim, e.g. "20261127 10:30:00 US/Eastern".
    pub time: String,
    pub exchange: String,
    /// "BOT" or "SLD" (ibapi rejects anything else).
    pub side: String,
    /// Decimal string.
    pub shares: String,
    pub price: f64,
    /// (amount, currency); `None` sends no commission report.
    pub commission: Option<(f64, String)>,
    /// The API client that placed the order (0: TWS itself, a manual order); `None`
    /// is the client id of the connection that asks.
    pub client_id: Option<i32>,
}

/// When the fake sends commission reports in answer to an `ExecutionRequest`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommissionTiming {
    /// Right after each execution, before the end marker (kinder than TWS).
    #[default]
    WithExecution,
    /// After the end marker (and an unrelated frame), `delay` after the executions:
    /// what TWS does.
    AfterEnd { delay: Duration },
}

/// One historical bar.
#[derive(Debug, Clone)]
pub struct TwsBar {
    /// "YYYYMMDD" for daily and longer bars, else unix seconds as a decimal string.
    pub date: String,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    /// Decimal string.
    pub volume: String,
}

/// A top-of-book quote.
#[derive(Debug, Clone)]
pub struct TwsQuote {
    pub bid: f64,
    pub ask: f64,
    pub last: f64,
    /// Decimal string; empty sends no size.
    pub bid_size: String,
    /// Decimal string; empty sends no size.
    pub ask_size: String,
}

/// A contract's day, sent after its quote's ticks: IBKR's tick types open (14), high
/// (6), low (7), close (9, the previous session's), last size (5), volume (8) and last
/// timestamp (45, Unix seconds as text).
#[derive(Debug, Clone, Default)]
pub struct TwsDay {
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    /// Decimal strings; empty sends no size.
    pub volume: String,
    pub last_size: String,
    pub last_time: Option<i64>,
    /// Sent as delayed data: MarketDataType 3 and the delayed tick types (66 bid, 67 ask,
    /// 68 last, 69 bid size, 70 ask size, 71 last size, 72 high, 73 low, 74 volume, 75
    /// close, 76 open, 88 last timestamp).
    pub delayed: bool,
    /// Answers nothing to a request for it (no ticks, no end): a snapshot that never comes.
    pub silent: bool,
}

/// How the fake treats a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TwsBehaviour {
    /// Answers everything as described in the module docs.
    #[default]
    Normal,
    /// Accepts TCP, reads, never writes a byte.
    SilentAfterAccept,
    /// Completes the handshake (version, NextValidId, ManagedAccounts) then never answers
    /// any request.
    SilentAfterHandshake,
    /// Closes the socket right after accepting (what a non-trusted IP sees).
    CloseOnAccept,
}

/// Everything the fake serves and records. Shared by all connections.
#[derive(Debug, Clone)]
pub struct TwsState {
    /// Server version offered; the ack carries `min(this, client's max)`, even when
    /// that is below the client's min (an old TWS answers with what it speaks). Default
    /// 221 (≥ 219, so `Client::config` works).
    pub server_version: i32,
    /// Time-zone name in the version ack and `HistoricalDataEnd`. Default "US/Eastern".
    pub time_zone: String,
    /// UTC offset of `time_zone` at `current_time`, in seconds. Default −18 000 (EST).
    pub utc_offset_secs: i32,
    /// Managed accounts, comma-joined in `ManagedAccounts`. Default `["DU1234567"]`.
    pub accounts: Vec<String>,
    /// `ConfigResponse.api.settings.read_only_api`; `None` leaves the field out. Default
    /// `Some(true)`.
    pub read_only: Option<bool>,
    pub account_values: Vec<TwsAccountValue>,
    pub portfolio: Vec<TwsPortfolioItem>,
    pub executions: Vec<TwsExecution>,
    /// By symbol (or local symbol, or "SYMBOL.CURRENCY").
    pub quotes: BTreeMap<String, TwsQuote>,
    /// By symbol (or local symbol, or "SYMBOL.CURRENCY").
    pub bars: BTreeMap<String, Vec<TwsBar>>,
    /// The day's ticks by symbol, sent with its quote.
    pub days: BTreeMap<String, TwsDay>,
    pub behaviour: TwsBehaviour,
    /// Every inbound frame's wire id (e.g. 271 StartApi), in order, across all connections.
    pub received: Vec<i32>,
    /// (acctCode, lastNDays) of each `ExecutionRequest`; absent fields read as "" and 0.
    pub execution_filters: Vec<(String, i32)>,
    /// The filter's clientId of each `ExecutionRequest` (`None`: left out).
    pub execution_filter_clients: Vec<Option<i32>>,
    /// Whether `ExecutionDetailsEnd` ends an answer to `ExecutionRequest`. Default true.
    pub execution_end: bool,
    /// When commission reports are sent. Default [`CommissionTiming::WithExecution`].
    pub commissions: CommissionTiming,
    /// Version acks sent (connections that got past the greeting).
    pub handshakes: usize,
    /// Client ids sent in `StartApi`, in order.
    pub client_ids: Vec<i32>,
    /// Epoch seconds answered to `CurrentTimeRequest`. Default 1 796 050 800
    /// (2026-11-30 15:00:00 UTC).
    pub current_time: i64,
    /// What `MatchingSymbolsRequest` searches (see [`TwsSymbolSample`]).
    pub symbol_samples: Vec<TwsSymbolSample>,
    /// The pattern of each `MatchingSymbolsRequest`, in order.
    pub matching_patterns: Vec<String>,
    /// `MatchingSymbolsRequest` gets no answer (unkind: TWS paces it).
    pub matching_silent: bool,
    /// The news providers the user subscribes to (code, name), answered to
    /// `NewsProvidersRequest`; empty: no news subscription.
    pub news_providers: Vec<(String, String)>,
    /// The headlines `HistoricalNewsRequest` serves (see [`TwsNews`]).
    pub news: Vec<TwsNews>,
    /// Every `HistoricalNewsRequest` as received: conId, provider codes, start, end,
    /// total results.
    pub news_requests: Vec<(i32, String, String, String, i32)>,
    /// The historical news answer comes this long late (unkind).
    pub news_delay: Option<Duration>,
    /// conIds whose news request is answered by an `ErrorMessage` (code, message) with
    /// the request id instead.
    pub news_errors: BTreeMap<i32, (i32, String)>,
    /// What `reqContractDetails` answers for a stock, by symbol (conId, exchange,
    /// currency); options come from [`TwsState::options`].
    pub contract_details: BTreeMap<String, TwsContract>,
    /// The `reqSecDefOptParams` answers by the underlying's conId, one per exchange.
    pub option_params: BTreeMap<i32, Vec<TwsOptionParams>>,
    /// Whether `SecDefOptParameterEnd` ends those answers. Default true.
    pub option_params_end: bool,
    /// Every option contract listed and quoted.
    pub options: Vec<TwsOption>,
    /// Each `ContractDataRequest` as "SECTYPE SYMBOL EXPIRY".
    pub contract_queries: Vec<String>,
    /// Each `SecDefOptParamsRequest`: symbol, security type, conId, futFopExchange.
    pub option_param_requests: Vec<(String, String, i32, String)>,
    /// Each option's `MarketDataRequest`: local symbol, generic tick list, snapshot.
    pub option_market_data: Vec<(String, String, bool)>,
}

impl Default for TwsState {
    fn default() -> Self {
        Self {
            server_version: 221,
            time_zone: "US/Eastern".to_owned(),
            utc_offset_secs: -18_000,
            accounts: vec!["DU1234567".to_owned()],
            read_only: Some(true),
            account_values: Vec::new(),
            portfolio: Vec::new(),
            executions: Vec::new(),
            quotes: BTreeMap::new(),
            bars: BTreeMap::new(),
            days: BTreeMap::new(),
            behaviour: TwsBehaviour::Normal,
            received: Vec::new(),
            execution_filters: Vec::new(),
            execution_filter_clients: Vec::new(),
            execution_end: true,
            commissions: CommissionTiming::WithExecution,
            handshakes: 0,
            client_ids: Vec::new(),
            current_time: 1_796_050_800,
            symbol_samples: Vec::new(),
            matching_patterns: Vec::new(),
            matching_silent: false,
            news_providers: Vec::new(),
            news: Vec::new(),
            news_requests: Vec::new(),
            news_delay: None,
            news_errors: BTreeMap::new(),
            contract_details: BTreeMap::new(),
            option_params: BTreeMap::new(),
            option_params_end: true,
            options: Vec::new(),
            contract_queries: Vec::new(),
            option_param_requests: Vec::new(),
            option_market_data: Vec::new(),
        }
    }
}

/// A running fake. Dropping it stops the listener and every connection.
#[derive(Debug)]
pub struct FakeTws {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<TwsState>>,
    accept_task: JoinHandle<()>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
}

impl FakeTws {
    /// Binds `127.0.0.1:0` and serves connections concurrently, one task each.
    pub async fn start(state: TwsState) -> std::io::Result<FakeTws> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(state));
        let connections: Arc<Mutex<Vec<AbortHandle>>> = Arc::new(Mutex::new(Vec::new()));
        let accept_task = tokio::spawn(accept_loop(
            listener,
            Arc::clone(&state),
            Arc::clone(&connections),
        ));
        Ok(FakeTws {
            addr,
            state,
            accept_task,
            connections,
        })
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// "127.0.0.1:<port>", ready for `ClientBuilder::address`.
    pub fn address(&self) -> String {
        self.addr.to_string()
    }

    /// Every inbound frame's wire id so far.
    pub fn received(&self) -> Vec<i32> {
        lock(&self.state).received.clone()
    }

    pub fn set_behaviour(&self, b: TwsBehaviour) {
        lock(&self.state).behaviour = b;
    }

    /// Changes the state of a running fake (read again for every request).
    pub fn update(&self, f: impl FnOnce(&mut TwsState)) {
        f(&mut lock(&self.state));
    }

    /// A snapshot of the whole state.
    pub fn snapshot(&self) -> TwsState {
        lock(&self.state).clone()
    }

    /// Drops every open connection (the listener keeps accepting), e.g. to make a client
    /// reconnect.
    pub fn disconnect_all(&self) {
        let handles = std::mem::take(&mut *lock_vec(&self.connections));
        for handle in handles {
            handle.abort();
        }
    }
}

impl Drop for FakeTws {
    fn drop(&mut self) {
        self.accept_task.abort();
        self.disconnect_all();
    }
}

fn lock(state: &Mutex<TwsState>) -> MutexGuard<'_, TwsState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

fn lock_vec(v: &Mutex<Vec<AbortHandle>>) -> MutexGuard<'_, Vec<AbortHandle>> {
    v.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<Mutex<TwsState>>,
    connections: Arc<Mutex<Vec<AbortHandle>>>,
) {
    loop {
        let Ok((socket, _peer)) = listener.accept().await else {
            // E.g. out of file descriptors: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let _ = socket.set_nodelay(true);
        let task = tokio::spawn(serve_connection(socket, Arc::clone(&state)));
        let mut open = lock_vec(&connections);
        open.retain(|h| !h.is_finished());
        open.push(task.abort_handle());
    }
}

// ------------------------------------------------------------------------------------------
// Connection handling
// ------------------------------------------------------------------------------------------

async fn serve_connection(mut socket: TcpStream, state: Arc<Mutex<TwsState>>) {
    let behaviour = lock(&state).behaviour;
    match behaviour {
        TwsBehaviour::CloseOnAccept => {
            // FIN first, so the client reads a clean EOF; then drain until it hangs up so
            // that unread bytes do not turn the close into a reset.
            let _ = socket.shutdown().await;
            let _ = tokio::time::timeout(Duration::from_secs(5), drain(&mut socket)).await;
        }
        TwsBehaviour::SilentAfterAccept => drain(&mut socket).await,
        TwsBehaviour::Normal | TwsBehaviour::SilentAfterHandshake => {
            let _ = run_session(socket, &state).await;
        }
    }
}

async fn drain(socket: &mut TcpStream) {
    let mut buf = [0_u8; 4096];
    while let Ok(n) = socket.read(&mut buf).await {
        if n == 0 {
            break;
        }
    }
}

async fn read_frame(socket: &mut (impl AsyncReadExt + Unpin)) -> std::io::Result<Vec<u8>> {
    let mut len = [0_u8; 4];
    socket.read_exact(&mut len).await?;
    let len = usize::try_from(u32::from_be_bytes(len)).map_err(std::io::Error::other)?;
    if len > MAX_FRAME {
        return Err(std::io::Error::other("frame too large"));
    }
    let mut body = vec![0_u8; len];
    socket.read_exact(&mut body).await?;
    Ok(body)
}

/// Parses `v<min>..<max>[ options]` (or `v<n>`).
fn parse_version_range(text: &str) -> Option<(i32, i32)> {
    let spec = text.strip_prefix('v')?.split_whitespace().next()?;
    match spec.split_once("..") {
        Some((min, max)) => Some((min.parse().ok()?, max.parse().ok()?)),
        None => {
            let v = spec.parse().ok()?;
            Some((v, v))
        }
    }
}

/// What one connection knows about itself.
#[derive(Debug, Default)]
struct Connection {
    /// The client id its `StartApi` named.
    client_id: Option<i32>,
}

async fn run_session(socket: TcpStream, state: &Mutex<TwsState>) -> std::io::Result<()> {
    let (mut reader, mut writer) = socket.into_split();
    let mut magic = [0_u8; 4];
    reader.read_exact(&mut magic).await?;
    if &magic != b"API\0" {
        return Ok(());
    }
    let greeting = read_frame(&mut reader).await?;
    let Some((_min, max)) = std::str::from_utf8(&greeting)
        .ok()
        .and_then(parse_version_range)
    else {
        return Ok(());
    };
    if max < MIN_PROTOBUF_VERSION {
        return Ok(());
    }

    let ack = {
        let mut st = lock(state);
        st.handshakes += 1;
        let version = st.server_version.min(max);
        let (date, time) = wall_clock(st.current_time, st.utc_offset_secs);
        let text = format!("{version}\0{date} {time} {}\0", st.time_zone);
        length_prefixed(text.as_bytes())?
    };
    writer.write_all(&ack).await?;

    // One writer for the connection, so frames sent later (after a delay) keep whole.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writing = tokio::spawn(async move {
        while let Some(bytes) = rx.recv().await {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    let mut connection = Connection::default();
    let result = loop {
        let body = match read_frame(&mut reader).await {
            Ok(b) => b,
            Err(e) => break Err(e),
        };
        let Some((id_bytes, payload)) = body.split_first_chunk::<4>() else {
            continue;
        };
        let id = i32::from_be_bytes(*id_bytes);
        let reply = {
            let mut st = lock(state);
            st.received.push(id);
            match respond(&mut st, &mut connection, id, payload) {
                Ok(r) => r,
                Err(e) => break Err(e),
            }
        };
        if !reply.bytes.is_empty() && tx.send(reply.bytes).is_err() {
            break Ok(());
        }
        for (delay, bytes) in reply.later {
            let tx = tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let _ = tx.send(bytes);
            });
        }
    };
    drop(tx);
    writing.abort();
    result
}

/// The frames to send for one inbound frame (empty when silent or nothing to say).
fn respond(
    st: &mut TwsState,
    connection: &mut Connection,
    id: i32,
    payload: &[u8],
) -> std::io::Result<Out> {
    let mut out = Out::default();
    match (st.behaviour, id) {
        (TwsBehaviour::Normal | TwsBehaviour::SilentAfterHandshake, ids::START_API) => {
            let req = pb::StartApiRequest::decode(payload).unwrap_or_default();
            let client_id = req.client_id.unwrap_or_default();
            st.client_ids.push(client_id);
            connection.client_id = Some(client_id);
            out.push(ids::NEXT_VALID_ID, &pb::NextValidId { order_id: Some(1) })?;
            out.push(ids::MANAGED_ACCOUNTS, &managed_accounts(st))?;
            if st.behaviour == TwsBehaviour::Normal {
                out.push(
                    ids::ERROR,
                    &error_message(st, -1, 2104, "Market data farm connection is OK:usfarm"),
                )?;
            }
        }
        (TwsBehaviour::Normal, _) => serve_request(st, connection, id, payload, &mut out)?,
        _ => {}
    }
    Ok(out)
}

fn serve_request(
    st: &mut TwsState,
    connection: &Connection,
    id: i32,
    payload: &[u8],
    out: &mut Out,
) -> std::io::Result<()> {
    match id {
        ids::REQ_MANAGED_ACCOUNTS => out.push(ids::MANAGED_ACCOUNTS, &managed_accounts(st))?,
        ids::REQ_CURRENT_TIME => out.push(
            ids::CURRENT_TIME,
            &pb::CurrentTime {
                current_time: Some(st.current_time),
            },
        )?,
        ids::REQ_CURRENT_TIME_MILLIS => out.push(
            ids::CURRENT_TIME_MILLIS,
            &pb::CurrentTimeInMillis {
                current_time_in_millis: Some(st.current_time.saturating_mul(1000)),
            },
        )?,
        ids::REQ_IDS => out.push(ids::NEXT_VALID_ID, &pb::NextValidId { order_id: Some(1) })?,
        ids::REQ_CONFIG => {
            let req = pb::ReqIdOnly::decode(payload).unwrap_or_default();
            out.push(
                ids::CONFIG_RESPONSE,
                &pb::ConfigResponse {
                    req_id: req.req_id,
                    api: Some(pb::ApiConfig {
                        settings: Some(pb::ApiSettingsConfig {
                            read_only_api: st.read_only,
                        }),
                    }),
                },
            )?;
        }
        ids::REQ_ACCOUNT_DATA => {
            let req = pb::AccountDataRequest::decode(payload).unwrap_or_default();
            if req.subscribe == Some(true) {
                account_updates(st, &req.acct_code.unwrap_or_default(), out)?;
            }
        }
        ids::REQ_ACCOUNT_SUMMARY => {
            let req = pb::AccountSummaryRequest::decode(payload).unwrap_or_default();
            account_summary(st, &req, out)?;
        }
        ids::REQ_POSITIONS => {
            for item in &st.portfolio {
                out.push(
                    ids::POSITION,
                    &pb::Position {
                        account: Some(item.account.clone()),
                        contract: Some(contract_pb(&item.contract)),
                        position: Some(item.position.clone()),
                        avg_cost: Some(item.average_cost),
                    },
                )?;
            }
            out.push_raw(ids::POSITION_END, &[])?;
        }
        ids::REQ_EXECUTIONS => {
            let req = pb::ExecutionRequest::decode(payload).unwrap_or_default();
            executions(st, connection, &req, out)?;
        }
        ids::REQ_MARKET_DATA => {
            // An option contract's request is the chains module's; any other is a quote.
            let an_option = chains::option_market_data(st, payload, out)?;
            if !an_option {
                let req = pb::MarketDataRequest::decode(payload).unwrap_or_default();
                market_data(st, &req, out)?;
            }
        }
        chains::REQ_CONTRACT_DATA => chains::contract_data(st, payload, out)?,
        chains::REQ_SEC_DEF_OPT_PARAMS => chains::sec_def_opt_params(st, payload, out)?,
        ids::REQ_HISTORICAL_DATA => {
            let req = pb::HistoricalDataRequest::decode(payload).unwrap_or_default();
            historical_data(st, &req, out)?;
        }
        symbols::REQ_MATCHING_SYMBOLS => symbols::matching(st, payload, out)?,
        news::REQ_NEWS_PROVIDERS => news::providers(st, out)?,
        news::REQ_HISTORICAL_NEWS => news::historical(st, payload, out)?,
        _ => {}
    }
    Ok(())
}

fn managed_accounts(st: &TwsState) -> pb::ManagedAccounts {
    pb::ManagedAccounts {
        accounts_list: Some(st.accounts.join(",")),
    }
}

fn error_message(st: &TwsState, id: i32, code: i32, msg: &str) -> pb::ErrorMessage {
    pb::ErrorMessage {
        id: Some(id),
        error_time: Some(st.current_time.saturating_mul(1000)),
        error_code: Some(code),
        error_msg: Some(msg.to_owned()),
        advanced_order_reject_json: None,
    }
}

fn account_updates(st: &TwsState, account: &str, out: &mut Out) -> std::io::Result<()> {
    for v in st.account_values.iter().filter(|v| v.account == account) {
        out.push(
            ids::ACCOUNT_VALUE,
            &pb::AccountValue {
                key: Some(v.key.clone()),
                value: Some(v.value.clone()),
                currency: non_empty(&v.currency),
                account_name: Some(v.account.clone()),
            },
        )?;
    }
    for item in st.portfolio.iter().filter(|p| p.account == account) {
        out.push(
            ids::PORTFOLIO_VALUE,
            &pb::PortfolioValue {
                contract: Some(contract_pb(&item.contract)),
                position: Some(item.position.clone()),
                market_price: Some(item.market_price),
                market_value: Some(item.market_value),
                average_cost: Some(item.average_cost),
                unrealized_pnl: Some(item.unrealized_pnl),
                realized_pnl: Some(item.realized_pnl),
                account_name: Some(item.account.clone()),
            },
        )?;
    }
    let (_date, time) = wall_clock(st.current_time, st.utc_offset_secs);
    out.push(
        ids::ACCOUNT_UPDATE_TIME,
        &pb::AccountUpdateTime {
            time_stamp: Some(time.get(..5).unwrap_or(&time).to_owned()),
        },
    )?;
    out.push(
        ids::ACCOUNT_DATA_END,
        &pb::AccountDataEnd {
            account_name: Some(account.to_owned()),
        },
    )
}

fn account_summary(
    st: &TwsState,
    req: &pb::AccountSummaryRequest,
    out: &mut Out,
) -> std::io::Result<()> {
    let tags = req.tags.clone().unwrap_or_default();
    let tags: Vec<&str> = tags
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    for v in st
        .account_values
        .iter()
        .filter(|v| tags.contains(&v.key.as_str()))
    {
        out.push(
            ids::ACCOUNT_SUMMARY,
            &pb::AccountSummary {
                req_id: req.req_id,
                account: Some(v.account.clone()),
                tag: Some(v.key.clone()),
                value: Some(v.value.clone()),
                currency: non_empty(&v.currency),
            },
        )?;
    }
    out.push(
        ids::ACCOUNT_SUMMARY_END,
        &pb::ReqIdOnly { req_id: req.req_id },
    )
}

fn executions(
    st: &mut TwsState,
    connection: &Connection,
    req: &pb::ExecutionRequest,
    out: &mut Out,
) -> std::io::Result<()> {
    let filter = req.execution_filter.clone().unwrap_or_default();
    let acct = filter.acct_code.unwrap_or_default();
    st.execution_filters
        .push((acct.clone(), filter.last_n_days.unwrap_or_default()));
    st.execution_filter_clients.push(filter.client_id);
    let asking = connection.client_id.unwrap_or_default();
    // 0 names every client; an absent field, only the asking connection's (see the
    // module docs).
    let wanted = filter.client_id.unwrap_or(asking);
    let mut reports = Vec::new();
    for e in st
        .executions
        .iter()
        .filter(|e| acct.is_empty() || e.account == acct)
    {
        let placed_by = e.client_id.unwrap_or(asking);
        if wanted != 0 && placed_by != wanted {
            continue;
        }
        out.push(
            ids::EXECUTION_DETAILS,
            &pb::ExecutionDetails {
                req_id: req.req_id,
                contract: Some(contract_pb(&e.contract)),
                execution: Some(pb::Execution {
                    order_id: Some(e.order_id),
                    exec_id: Some(e.exec_id.clone()),
                    time: Some(e.time.clone()),
                    acct_number: Some(e.account.clone()),
                    exchange: non_empty(&e.exchange),
                    side: Some(e.side.clone()),
                    shares: Some(e.shares.clone()),
                    price: Some(e.price),
                    perm_id: Some(e.perm_id),
                    client_id: Some(placed_by),
                    is_liquidation: None,
                    cum_qty: Some(e.shares.clone()),
                    avg_price: Some(e.price),
                }),
            },
        )?;
        if let Some((amount, currency)) = &e.commission {
            let report = pb::CommissionAndFeesReport {
                exec_id: Some(e.exec_id.clone()),
                commission_and_fees: Some(*amount),
                currency: Some(currency.clone()),
                // TWS's "no value" sentinel.
                realized_pnl: Some(f64::MAX),
                bond_yield: Some(f64::MAX),
                yield_redemption_date: None,
            };
            match st.commissions {
                CommissionTiming::WithExecution => out.push(ids::COMMISSION_REPORT, &report)?,
                CommissionTiming::AfterEnd { .. } => reports.push(report),
            }
        }
    }
    if st.execution_end {
        out.push(
            ids::EXECUTION_DETAILS_END,
            &pb::ReqIdOnly { req_id: req.req_id },
        )?;
    }
    if let CommissionTiming::AfterEnd { delay } = st.commissions {
        let mut later = Out::default();
        // Frames later: something unrelated comes first.
        later.push(
            ids::ERROR,
            &error_message(st, -1, 2106, "HMDS data farm connection is OK:ushmds"),
        )?;
        for report in &reports {
            later.push(ids::COMMISSION_REPORT, report)?;
        }
        if delay.is_zero() {
            out.bytes.extend(later.bytes);
        } else {
            out.later.push((delay, later.bytes));
        }
    }
    Ok(())
}

/// Finds the scenario key for a request contract: symbol, local symbol, "SYMBOL.CURRENCY".
fn lookup<'a, T>(map: &'a BTreeMap<String, T>, contract: Option<&pb::Contract>) -> Option<&'a T> {
    let c = contract?;
    let symbol = c.symbol.as_deref().unwrap_or_default();
    let local = c.local_symbol.as_deref().unwrap_or_default();
    let currency = c.currency.as_deref().unwrap_or_default();
    map.get(symbol)
        .or_else(|| map.get(local))
        .or_else(|| map.get(&format!("{symbol}.{currency}")))
}

const NO_SECURITY_DEFINITION: &str = "No security definition has been found for the request";

fn market_data(st: &TwsState, req: &pb::MarketDataRequest, out: &mut Out) -> std::io::Result<()> {
    let req_id = req.req_id;
    let Some(q) = lookup(&st.quotes, req.contract.as_ref()) else {
        return out.push(
            ids::ERROR,
            &error_message(st, req_id.unwrap_or(-1), 200, NO_SECURITY_DEFINITION),
        );
    };
    let day = lookup(&st.days, req.contract.as_ref());
    if day.is_some_and(|d| d.silent) {
        return Ok(());
    }
    let delayed = day.is_some_and(|d| d.delayed);
    // IBKR's delayed twin of each tick type.
    let kind = |t: i32| {
        if !delayed {
            return t;
        }
        match t {
            1 => 66,
            2 => 67,
            4 => 68,
            0 => 69,
            3 => 70,
            5 => 71,
            6 => 72,
            7 => 73,
            8 => 74,
            9 => 75,
            14 => 76,
            45 => 88,
            other => other,
        }
    };
    out.push(
        ids::TICK_REQ_PARAMS,
        &pb::TickReqParams {
            req_id,
            min_tick: Some("0.01".to_owned()),
            bbo_exchange: Some("9c0001".to_owned()),
            snapshot_permissions: Some(3),
        },
    )?;
    out.push(
        ids::MARKET_DATA_TYPE,
        &pb::MarketDataType {
            req_id,
            market_data_type: Some(if delayed { 3 } else { 1 }),
        },
    )?;
    let mut ticks = vec![
        (1, q.bid, non_empty(&q.bid_size)),
        (2, q.ask, non_empty(&q.ask_size)),
        (4, q.last, None),
    ];
    if let Some(d) = day {
        ticks.extend([
            (14, d.open, None),
            (6, d.high, None),
            (7, d.low, None),
            (9, d.close, None),
        ]);
    }
    for (tick_type, price, size) in ticks {
        out.push(
            ids::TICK_PRICE,
            &pb::TickPrice {
                req_id,
                tick_type: Some(kind(tick_type)),
                price: Some(price),
                size,
                attr_mask: Some(0),
            },
        )?;
    }
    if let Some(d) = day {
        for (tick_type, size) in [(5, &d.last_size), (8, &d.volume)] {
            if let Some(size) = non_empty(size) {
                out.push(
                    ids::TICK_SIZE,
                    &pb::TickSize {
                        req_id,
                        tick_type: Some(kind(tick_type)),
                        size: Some(size),
                    },
                )?;
            }
        }
        if let Some(t) = d.last_time {
            out.push(
                ids::TICK_STRING,
                &pb::TickString {
                    req_id,
                    tick_type: Some(kind(45)),
                    value: Some(t.to_string()),
                },
            )?;
        }
    }
    if req.snapshot == Some(true) {
        out.push(ids::TICK_SNAPSHOT_END, &pb::ReqIdOnly { req_id })?;
    }
    Ok(())
}

/// Seconds in an IB duration string ("30 D", "1 Y", "3600 S", …); one day if unparsable.
fn duration_secs(text: &str) -> i64 {
    let mut parts = text.split_whitespace();
    let n: i64 = parts.next().and_then(|n| n.parse().ok()).unwrap_or(1);
    let unit = match parts.next().unwrap_or("D") {
        "S" => 1,
        "W" => 7 * 86_400,
        "M" => 30 * 86_400,
        "Y" => 365 * 86_400,
        _ => 86_400,
    };
    n.saturating_mul(unit)
}

fn historical_data(
    st: &TwsState,
    req: &pb::HistoricalDataRequest,
    out: &mut Out,
) -> std::io::Result<()> {
    let req_id = req.req_id;
    let Some(bars) = lookup(&st.bars, req.contract.as_ref()) else {
        return out.push(
            ids::ERROR,
            &error_message(st, req_id.unwrap_or(-1), 200, NO_SECURITY_DEFINITION),
        );
    };
    out.push(
        ids::HISTORICAL_DATA,
        &pb::HistoricalData {
            req_id,
            historical_data_bars: bars
                .iter()
                .map(|b| pb::HistoricalDataBar {
                    date: Some(b.date.clone()),
                    open: Some(b.open),
                    high: Some(b.high),
                    low: Some(b.low),
                    close: Some(b.close),
                    volume: non_empty(&b.volume),
                    wap: None,
                    bar_count: None,
                })
                .collect(),
        },
    )?;
    let end = st.current_time;
    let start = end.saturating_sub(duration_secs(req.duration.as_deref().unwrap_or_default()));
    let render = |t: i64| {
        let (date, time) = wall_clock(t, st.utc_offset_secs);
        format!("{date} {time} {}", st.time_zone)
    };
    out.push(
        ids::HISTORICAL_DATA_END,
        &pb::HistoricalDataEnd {
            req_id,
            start_date_str: Some(render(start)),
            end_date_str: Some(render(end)),
        },
    )
}

// ------------------------------------------------------------------------------------------
// Encoding helpers
// ------------------------------------------------------------------------------------------

/// Outbound frames, concatenated, and frames to send after a delay.
#[derive(Debug, Default)]
struct Out {
    bytes: Vec<u8>,
    later: Vec<(Duration, Vec<u8>)>,
}

impl Out {
    fn push(&mut self, wire_id: i32, msg: &impl prost::Message) -> std::io::Result<()> {
        self.push_raw(wire_id, &msg.encode_to_vec())
    }

    fn push_raw(&mut self, wire_id: i32, payload: &[u8]) -> std::io::Result<()> {
        debug_assert!(wire_id > PROTOBUF_OFFSET);
        let len = u32::try_from(payload.len() + 4).map_err(std::io::Error::other)?;
        self.bytes.extend_from_slice(&len.to_be_bytes());
        self.bytes.extend_from_slice(&wire_id.to_be_bytes());
        self.bytes.extend_from_slice(payload);
        Ok(())
    }
}

fn length_prefixed(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let len = u32::try_from(data.len()).map_err(std::io::Error::other)?;
    let mut out = Vec::with_capacity(data.len() + 4);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(data);
    Ok(out)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_owned())
}

fn contract_pb(c: &TwsContract) -> pb::Contract {
    pb::Contract {
        con_id: (c.con_id != 0).then_some(c.con_id),
        symbol: non_empty(&c.symbol),
        sec_type: non_empty(&c.sec_type),
        multiplier: c.multiplier,
        exchange: non_empty(&c.exchange),
        primary_exch: non_empty(&c.primary_exchange),
        currency: non_empty(&c.currency),
        local_symbol: non_empty(&c.local_symbol),
        ..pb::Contract::default()
    }
}

/// Civil date (year, month, day) of a day count since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// ("YYYYMMDD", "HH:MM:SS") of `epoch + offset`.
fn wall_clock(epoch: i64, offset: i32) -> (String, String) {
    let t = epoch.saturating_add(i64::from(offset));
    let (y, m, d) = civil_from_days(t.div_euclid(86_400));
    let secs = t.rem_euclid(86_400);
    (
        format!("{y:04}{m:02}{d:02}"),
        format!(
            "{:02}:{:02}:{:02}",
            secs / 3_600,
            secs % 3_600 / 60,
            secs % 60
        ),
    )
}

// ------------------------------------------------------------------------------------------
// Protobuf messages (IBKR's .proto numbering; only the fields the fake uses)
// ------------------------------------------------------------------------------------------

mod pb {
    message! {
        /// The proto `Contract`, with the fields any of the fake's messages carries.
        pub(super) struct Contract {
            pub(super) con_id: Option<i32> = optional(int32, 1),
            pub(super) symbol: Option<String> = optional(string, 2),
            pub(super) sec_type: Option<String> = optional(string, 3),
            pub(super) last_trade_date_or_contract_month: Option<String> = optional(string, 4),
            pub(super) strike: Option<f64> = optional(double, 5),
            pub(super) right: Option<String> = optional(string, 6),
            pub(super) multiplier: Option<f64> = optional(double, 7),
            pub(super) exchange: Option<String> = optional(string, 8),
            pub(super) primary_exch: Option<String> = optional(string, 9),
            pub(super) currency: Option<String> = optional(string, 10),
            pub(super) local_symbol: Option<String> = optional(string, 11),
            pub(super) trading_class: Option<String> = optional(string, 12),
            pub(super) description: Option<String> = optional(string, 15),
            pub(super) last_trade_date: Option<String> = optional(string, 21),
        }
    }

    // ---- client → server ----

    message! {
        pub(super) struct StartApiRequest {
            pub(super) client_id: Option<i32> = optional(int32, 1),
            pub(super) optional_capabilities: Option<String> = optional(string, 2),
        }
    }

    message! {
        /// Any message whose field 1 is the request id (ConfigRequest, cancels, *End frames).
        pub(super) struct ReqIdOnly {
            pub(super) req_id: Option<i32> = optional(int32, 1),
        }
    }

    message! {
        pub(super) struct AccountDataRequest {
            pub(super) subscribe: Option<bool> = optional(bool, 1),
            pub(super) acct_code: Option<String> = optional(string, 2),
        }
    }

    message! {
        pub(super) struct AccountSummaryRequest {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) group: Option<String> = optional(string, 2),
            pub(super) tags: Option<String> = optional(string, 3),
        }
    }

    message! {
        pub(super) struct ExecutionFilter {
            pub(super) client_id: Option<i32> = optional(int32, 1),
            pub(super) acct_code: Option<String> = optional(string, 2),
            pub(super) time: Option<String> = optional(string, 3),
            pub(super) symbol: Option<String> = optional(string, 4),
            pub(super) sec_type: Option<String> = optional(string, 5),
            pub(super) exchange: Option<String> = optional(string, 6),
            pub(super) side: Option<String> = optional(string, 7),
            pub(super) last_n_days: Option<i32> = optional(int32, 8),
            pub(super) specific_dates: Vec<i32> = repeated(int32, 9),
        }
    }

    message! {
        pub(super) struct ExecutionRequest {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) execution_filter: Option<ExecutionFilter> = optional(message, 2),
        }
    }

    message! {
        pub(super) struct MarketDataRequest {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) contract: Option<Contract> = optional(message, 2),
            pub(super) generic_tick_list: Option<String> = optional(string, 3),
            pub(super) snapshot: Option<bool> = optional(bool, 4),
            pub(super) regulatory_snapshot: Option<bool> = optional(bool, 5),
        }
    }

    message! {
        pub(super) struct HistoricalDataRequest {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) contract: Option<Contract> = optional(message, 2),
            pub(super) end_date_time: Option<String> = optional(string, 3),
            pub(super) bar_size_setting: Option<String> = optional(string, 4),
            pub(super) duration: Option<String> = optional(string, 5),
            pub(super) use_rth: Option<bool> = optional(bool, 6),
            pub(super) what_to_show: Option<String> = optional(string, 7),
            pub(super) format_date: Option<i32> = optional(int32, 8),
            pub(super) keep_up_to_date: Option<bool> = optional(bool, 9),
        }
    }

    // ---- server → client ----

    message! {
        pub(super) struct ErrorMessage {
            pub(super) id: Option<i32> = optional(int32, 1),
            pub(super) error_time: Option<i64> = optional(int64, 2),
            pub(super) error_code: Option<i32> = optional(int32, 3),
            pub(super) error_msg: Option<String> = optional(string, 4),
            pub(super) advanced_order_reject_json: Option<String> = optional(string, 5),
        }
    }

    message! {
        pub(super) struct NextValidId {
            pub(super) order_id: Option<i32> = optional(int32, 1),
        }
    }

    message! {
        pub(super) struct ManagedAccounts {
            pub(super) accounts_list: Option<String> = optional(string, 1),
        }
    }

    message! {
        pub(super) struct CurrentTime {
            pub(super) current_time: Option<i64> = optional(int64, 1),
        }
    }

    message! {
        pub(super) struct CurrentTimeInMillis {
            pub(super) current_time_in_millis: Option<i64> = optional(int64, 1),
        }
    }

    message! {
        pub(super) struct ApiSettingsConfig {
            pub(super) read_only_api: Option<bool> = optional(bool, 1),
        }
    }

    message! {
        pub(super) struct ApiConfig {
            pub(super) settings: Option<ApiSettingsConfig> = optional(message, 2),
        }
    }

    message! {
        pub(super) struct ConfigResponse {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) api: Option<ApiConfig> = optional(message, 4),
        }
    }

    message! {
        pub(super) struct AccountValue {
            pub(super) key: Option<String> = optional(string, 1),
            pub(super) value: Option<String> = optional(string, 2),
            pub(super) currency: Option<String> = optional(string, 3),
            pub(super) account_name: Option<String> = optional(string, 4),
        }
    }

    message! {
        pub(super) struct PortfolioValue {
            pub(super) contract: Option<Contract> = optional(message, 1),
            pub(super) position: Option<String> = optional(string, 2),
            pub(super) market_price: Option<f64> = optional(double, 3),
            pub(super) market_value: Option<f64> = optional(double, 4),
            pub(super) average_cost: Option<f64> = optional(double, 5),
            pub(super) unrealized_pnl: Option<f64> = optional(double, 6),
            pub(super) realized_pnl: Option<f64> = optional(double, 7),
            pub(super) account_name: Option<String> = optional(string, 8),
        }
    }

    message! {
        pub(super) struct AccountUpdateTime {
            pub(super) time_stamp: Option<String> = optional(string, 1),
        }
    }

    message! {
        pub(super) struct AccountDataEnd {
            pub(super) account_name: Option<String> = optional(string, 1),
        }
    }

    message! {
        pub(super) struct AccountSummary {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) account: Option<String> = optional(string, 2),
            pub(super) tag: Option<String> = optional(string, 3),
            pub(super) value: Option<String> = optional(string, 4),
            pub(super) currency: Option<String> = optional(string, 5),
        }
    }

    message! {
        pub(super) struct Position {
            pub(super) account: Option<String> = optional(string, 1),
            pub(super) contract: Option<Contract> = optional(message, 2),
            pub(super) position: Option<String> = optional(string, 3),
            pub(super) avg_cost: Option<f64> = optional(double, 4),
        }
    }

    message! {
        pub(super) struct Execution {
            pub(super) order_id: Option<i32> = optional(int32, 1),
            pub(super) exec_id: Option<String> = optional(string, 2),
            pub(super) time: Option<String> = optional(string, 3),
            pub(super) acct_number: Option<String> = optional(string, 4),
            pub(super) exchange: Option<String> = optional(string, 5),
            pub(super) side: Option<String> = optional(string, 6),
            pub(super) shares: Option<String> = optional(string, 7),
            pub(super) price: Option<f64> = optional(double, 8),
            pub(super) perm_id: Option<i64> = optional(int64, 9),
            pub(super) client_id: Option<i32> = optional(int32, 10),
            pub(super) is_liquidation: Option<bool> = optional(bool, 11),
            pub(super) cum_qty: Option<String> = optional(string, 12),
            pub(super) avg_price: Option<f64> = optional(double, 13),
        }
    }

    message! {
        pub(super) struct ExecutionDetails {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) contract: Option<Contract> = optional(message, 2),
            pub(super) execution: Option<Execution> = optional(message, 3),
        }
    }

    message! {
        pub(super) struct CommissionAndFeesReport {
            pub(super) exec_id: Option<String> = optional(string, 1),
            pub(super) commission_and_fees: Option<f64> = optional(double, 2),
            pub(super) currency: Option<String> = optional(string, 3),
            pub(super) realized_pnl: Option<f64> = optional(double, 4),
            pub(super) bond_yield: Option<f64> = optional(double, 5),
            pub(super) yield_redemption_date: Option<String> = optional(string, 6),
        }
    }

    message! {
        pub(super) struct TickPrice {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) tick_type: Option<i32> = optional(int32, 2),
            pub(super) price: Option<f64> = optional(double, 3),
            pub(super) size: Option<String> = optional(string, 4),
            pub(super) attr_mask: Option<i32> = optional(int32, 5),
        }
    }

    message! {
        pub(super) struct TickSize {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) tick_type: Option<i32> = optional(int32, 2),
            pub(super) size: Option<String> = optional(string, 3),
        }
    }

    message! {
        pub(super) struct TickString {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) tick_type: Option<i32> = optional(int32, 2),
            pub(super) value: Option<String> = optional(string, 3),
        }
    }

    message! {
        pub(super) struct TickReqParams {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) min_tick: Option<String> = optional(string, 2),
            pub(super) bbo_exchange: Option<String> = optional(string, 3),
            pub(super) snapshot_permissions: Option<i32> = optional(int32, 4),
        }
    }

    message! {
        pub(super) struct MarketDataType {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) market_data_type: Option<i32> = optional(int32, 2),
        }
    }

    message! {
        pub(super) struct HistoricalDataBar {
            pub(super) date: Option<String> = optional(string, 1),
            pub(super) open: Option<f64> = optional(double, 2),
            pub(super) high: Option<f64> = optional(double, 3),
            pub(super) low: Option<f64> = optional(double, 4),
            pub(super) close: Option<f64> = optional(double, 5),
            pub(super) volume: Option<String> = optional(string, 6),
            pub(super) wap: Option<String> = optional(string, 7),
            pub(super) bar_count: Option<i32> = optional(int32, 8),
        }
    }

    message! {
        pub(super) struct HistoricalData {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) historical_data_bars: Vec<HistoricalDataBar> = repeated(message, 2),
        }
    }

    message! {
        pub(super) struct HistoricalDataEnd {
            pub(super) req_id: Option<i32> = optional(int32, 1),
            pub(super) start_date_str: Option<String> = optional(string, 2),
            pub(super) end_date_str: Option<String> = optional(string, 3),
        }
    }
}

// ------------------------------------------------------------------------------------------
// Matching symbols (reqMatchingSymbols): MatchingSymbolsRequest 281 -> SymbolSamples 279
// ------------------------------------------------------------------------------------------

/// One contract description `SymbolSamples` may carry: IBKR's answer has the contract id,
/// symbol, security type, primary exchange, currency and description (the company name),
/// and the derivative types listed on it; no exchange, no trading rules.
#[derive(Debug, Clone, Default)]
pub struct TwsSymbolSample {
    pub con_id: i32,
    pub symbol: String,
    pub sec_type: String,
    pub primary_exchange: String,
    pub currency: String,
    pub description: String,
    pub derivative_sec_types: Vec<String>,
}

mod symbols {
    use prost::Message as _;

    use super::pb::Contract;
    use super::{Out, TwsState, non_empty};

    /// `MatchingSymbolsRequest` (client -> server).
    pub(super) const REQ_MATCHING_SYMBOLS: i32 = 281;
    /// `SymbolSamples` (server -> client).
    pub(super) const SYMBOL_SAMPLES: i32 = 279;

    message! {
        struct MatchingSymbolsRequest {
            req_id: Option<i32> = optional(int32, 1),
            pattern: Option<String> = optional(string, 2),
        }
    }

    message! {
        struct ContractDescription {
            contract: Option<Contract> = optional(message, 1),
            derivative_sec_types: Vec<String> = repeated(string, 2),
        }
    }

    message! {
        struct SymbolSamples {
            req_id: Option<i32> = optional(int32, 1),
            contract_descriptions: Vec<ContractDescription> = repeated(message, 2),
        }
    }

    /// IBKR's rule, as its docs put it: the pattern is the start of a ticker, or a word
    /// of the security's name.
    fn matches(sample: &super::TwsSymbolSample, pattern: &str) -> bool {
        let p = pattern.trim().to_uppercase();
        !p.is_empty()
            && (sample.symbol.to_uppercase().starts_with(&p)
                || sample.description.to_uppercase().contains(&p)
                || sample
                    .description
                    .to_uppercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .any(|w| !w.is_empty() && w.starts_with(&p)))
    }

    pub(super) fn matching(
        st: &mut TwsState,
        payload: &[u8],
        out: &mut Out,
    ) -> std::io::Result<()> {
        let req = MatchingSymbolsRequest::decode(payload).unwrap_or_default();
        let pattern = req.pattern.unwrap_or_default();
        st.matching_patterns.push(pattern.clone());
        if st.matching_silent {
            return Ok(());
        }
        let contract_descriptions = st
            .symbol_samples
            .iter()
            .filter(|s| matches(s, &pattern))
            .map(|s| ContractDescription {
                contract: Some(Contract {
                    con_id: (s.con_id != 0).then_some(s.con_id),
                    symbol: non_empty(&s.symbol),
                    sec_type: non_empty(&s.sec_type),
                    primary_exch: non_empty(&s.primary_exchange),
                    currency: non_empty(&s.currency),
                    description: non_empty(&s.description),
                    ..Contract::default()
                }),
                derivative_sec_types: s.derivative_sec_types.clone(),
            })
            .collect();
        out.push(
            SYMBOL_SAMPLES,
            &SymbolSamples {
                req_id: req.req_id,
                contract_descriptions,
            },
        )
    }
}

// ------------------------------------------------------------------------------------------
// News: NewsProvidersRequest 285 -> NewsProviders 285; HistoricalNewsRequest 286 ->
// HistoricalNews 286 ×n, HistoricalNewsEnd 287. Field numbers as IBKR's protobuf
// definitions give them.
// ------------------------------------------------------------------------------------------

/// One headline the fake serves: the contract it is about, TWS's time text
/// (`YYYY-MM-DD HH:MM:SS.f`, UTC), the provider code, article id and the headline as the
/// provider writes it (some start with a `{A:…:L:…}` metadata block).
#[derive(Debug, Clone, Default)]
pub struct TwsNews {
    pub con_id: i32,
    pub time: String,
    pub provider: String,
    pub article_id: String,
    pub headline: String,
}

mod news {
    use prost::Message as _;

    use super::{Out, TwsState, error_message, ids};

    /// `NewsProvidersRequest` (client -> server, empty) and `NewsProviders` (server ->
    /// client): message 85, wire 285.
    pub(super) const REQ_NEWS_PROVIDERS: i32 = 285;
    pub(super) const NEWS_PROVIDERS: i32 = 285;
    /// `HistoricalNewsRequest` and `HistoricalNews`: message 86; `HistoricalNewsEnd`: 87.
    pub(super) const REQ_HISTORICAL_NEWS: i32 = 286;
    pub(super) const HISTORICAL_NEWS: i32 = 286;
    pub(super) const HISTORICAL_NEWS_END: i32 = 287;

    message! {
        struct NewsProvider {
            provider_code: Option<String> = optional(string, 1),
            provider_name: Option<String> = optional(string, 2),
        }
    }

    message! {
        struct NewsProviders {
            news_providers: Vec<NewsProvider> = repeated(message, 1),
        }
    }

    message! {
        struct HistoricalNewsRequest {
            req_id: Option<i32> = optional(int32, 1),
            con_id: Option<i32> = optional(int32, 2),
            provider_codes: Option<String> = optional(string, 3),
            start_date_time: Option<String> = optional(string, 4),
            end_date_time: Option<String> = optional(string, 5),
            total_results: Option<i32> = optional(int32, 6),
        }
    }

    message! {
        struct HistoricalNews {
            req_id: Option<i32> = optional(int32, 1),
            time: Option<String> = optional(string, 2),
            provider_code: Option<String> = optional(string, 3),
            article_id: Option<String> = optional(string, 4),
            headline: Option<String> = optional(string, 5),
        }
    }

    message! {
        struct HistoricalNewsEnd {
            req_id: Option<i32> = optional(int32, 1),
            has_more: Option<bool> = optional(bool, 2),
        }
    }

    pub(super) fn providers(st: &TwsState, out: &mut Out) -> std::io::Result<()> {
        out.push(
            NEWS_PROVIDERS,
            &NewsProviders {
                news_providers: st
                    .news_providers
                    .iter()
                    .map(|(code, name)| NewsProvider {
                        provider_code: Some(code.clone()),
                        provider_name: Some(name.clone()),
                    })
                    .collect(),
            },
        )
    }

    /// `YYYYMMDD HH:MM:SS` or `YYYYMMDD-HH:MM:SS` (the request's forms) or
    /// `YYYY-MM-DD HH:MM:SS.f` (the answer's) as one comparable `YYYYMMDDHHMMSS` key.
    fn key(text: &str) -> String {
        text.chars().filter(char::is_ascii_digit).take(14).collect()
    }

    pub(super) fn historical(
        st: &mut TwsState,
        payload: &[u8],
        out: &mut Out,
    ) -> std::io::Result<()> {
        let req = HistoricalNewsRequest::decode(payload).unwrap_or_default();
        let req_id = req.req_id.unwrap_or_default();
        let con_id = req.con_id.unwrap_or_default();
        let codes = req.provider_codes.clone().unwrap_or_default();
        let (start, end) = (
            req.start_date_time.clone().unwrap_or_default(),
            req.end_date_time.clone().unwrap_or_default(),
        );
        let total = req.total_results.unwrap_or(10).clamp(1, 300);
        st.news_requests
            .push((con_id, codes.clone(), start.clone(), end.clone(), total));
        let mut now = Out::default();
        if let Some((code, message)) = st.news_errors.get(&con_id) {
            now.push(ids::ERROR, &error_message(st, req_id, *code, message))?;
        } else {
            let wanted: Vec<&str> = codes.split('+').collect();
            let (from, to) = (key(&start), key(&end));
            let mut rows: Vec<&super::TwsNews> = st
                .news
                .iter()
                .filter(|n| n.con_id == con_id && wanted.contains(&n.provider.as_str()))
                .filter(|n| {
                    let k = key(&n.time);
                    (from.is_empty() || k >= from) && (to.is_empty() || k <= to)
                })
                .collect();
            rows.sort_by_key(|n| std::cmp::Reverse(key(&n.time)));
            let more = rows.len() > usize::try_from(total).unwrap_or(usize::MAX);
            for n in rows
                .iter()
                .take(usize::try_from(total).unwrap_or(usize::MAX))
            {
                now.push(
                    HISTORICAL_NEWS,
                    &HistoricalNews {
                        req_id: Some(req_id),
                        time: Some(n.time.clone()),
                        provider_code: Some(n.provider.clone()),
                        article_id: Some(n.article_id.clone()),
                        headline: Some(n.headline.clone()),
                    },
                )?;
            }
            now.push(
                HISTORICAL_NEWS_END,
                &HistoricalNewsEnd {
                    req_id: Some(req_id),
                    has_more: Some(more),
                },
            )?;
        }
        match st.news_delay {
            Some(delay) => out.later.push((delay, now.bytes)),
            None => out.bytes.extend(now.bytes),
        }
        Ok(())
    }
}

// ------------------------------------------------------------------------------------------
// Option chains: ContractDataRequest 209 -> ContractData 210 ×n, ContractDataEnd 252;
// SecDefOptParamsRequest 278 -> SecDefOptParameter 275 ×n (one per exchange),
// SecDefOptParameterEnd 276; an option's MarketDataRequest 201 -> ticks and
// TickOptionComputation 221. Field numbers as IBKR's protobuf definitions give them.
// ------------------------------------------------------------------------------------------

/// One answer of `reqSecDefOptParams`: IBKR sends one per exchange the options list on
/// (SMART and the exchanges themselves), each with its trading class, multiplier (text),
/// expirations (`YYYYMMDD`) and strikes (every expiry's together).
#[derive(Debug, Clone, Default)]
pub struct TwsOptionParams {
    pub exchange: String,
    pub trading_class: String,
    pub multiplier: String,
    pub expirations: Vec<String>,
    pub strikes: Vec<f64>,
}

/// TWS's option computation for one tick type (13 the model's; IBKR's units: implied
/// volatility as a fraction, vega per volatility point, theta per day).
#[derive(Debug, Clone, Copy, Default)]
pub struct TwsComputation {
    pub implied_vol: f64,
    pub delta: f64,
    pub opt_price: f64,
    pub pv_dividend: f64,
    pub gamma: f64,
    pub vega: f64,
    pub theta: f64,
    pub und_price: f64,
}

/// One option contract: listed by contract details for its expiry and quoted by market
/// data (bid 1, ask 2, last 4, volume 8, open interest 27 for a call or 28 for a put when
/// generic tick 101 is asked, the model's computation 13 and a bid computation 10).
#[derive(Debug, Clone, Default)]
pub struct TwsOption {
    pub con_id: i32,
    /// The underlying's symbol.
    pub symbol: String,
    /// `YYYYMMDD`.
    pub expiry: String,
    pub strike: f64,
    /// "C" or "P".
    pub right: String,
    pub multiplier: Option<f64>,
    pub trading_class: String,
    pub currency: String,
    /// OCC: `AAPL  261218C00200000`.
    pub local_symbol: String,
    /// -1 sends TWS's "no price".
    pub bid: f64,
    pub ask: f64,
    pub last: f64,
    /// Decimal strings; empty sends none.
    pub volume: String,
    pub open_interest: String,
    pub computation: Option<TwsComputation>,
    /// Delayed data: a 10167 notice, MarketDataType 3 and the delayed tick types.
    pub delayed: bool,
    /// Answers nothing to a market-data request for it.
    pub silent: bool,
    /// Answers a market-data request with this error (code, message), e.g. 354.
    pub error: Option<(i32, String)>,
}

mod chains {
    use prost::Message as _;

    use super::pb::{Contract, MarketDataType, ReqIdOnly, TickPrice, TickSize};
    use super::{Out, TwsState, error_message, ids, non_empty};

    pub(super) const REQ_CONTRACT_DATA: i32 = 209;
    pub(super) const REQ_SEC_DEF_OPT_PARAMS: i32 = 278;
    const CONTRACT_DATA: i32 = 210;
    const CONTRACT_DATA_END: i32 = 252;
    const SEC_DEF_OPT_PARAMETER: i32 = 275;
    const SEC_DEF_OPT_PARAMETER_END: i32 = 276;
    const TICK_OPTION_COMPUTATION: i32 = 221;

    message! {
        struct ContractDataRequest {
            req_id: Option<i32> = optional(int32, 1),
            contract: Option<Contract> = optional(message, 2),
        }
    }

    message! {
        /// The proto `ContractDetails` fields the fake sends.
        struct ContractDetails {
            market_name: Option<String> = optional(string, 1),
            min_tick: Option<String> = optional(string, 2),
            under_con_id: Option<i32> = optional(int32, 6),
            long_name: Option<String> = optional(string, 7),
            time_zone_id: Option<String> = optional(string, 12),
            under_symbol: Option<String> = optional(string, 19),
            under_sec_type: Option<String> = optional(string, 20),
        }
    }

    message! {
        struct ContractData {
            req_id: Option<i32> = optional(int32, 1),
            contract: Option<Contract> = optional(message, 2),
            contract_details: Option<ContractDetails> = optional(message, 3),
        }
    }

    message! {
        struct SecDefOptParamsRequest {
            req_id: Option<i32> = optional(int32, 1),
            underlying_symbol: Option<String> = optional(string, 2),
            fut_fop_exchange: Option<String> = optional(string, 3),
            underlying_sec_type: Option<String> = optional(string, 4),
            underlying_con_id: Option<i32> = optional(int32, 5),
        }
    }

    message! {
        struct SecDefOptParameter {
            req_id: Option<i32> = optional(int32, 1),
            exchange: Option<String> = optional(string, 2),
            underlying_con_id: Option<i32> = optional(int32, 3),
            trading_class: Option<String> = optional(string, 4),
            multiplier: Option<String> = optional(string, 5),
            expirations: Vec<String> = repeated(string, 6),
            strikes: Vec<f64> = repeated(double, 7),
        }
    }

    message! {
        struct MarketDataRequest {
            req_id: Option<i32> = optional(int32, 1),
            contract: Option<Contract> = optional(message, 2),
            generic_tick_list: Option<String> = optional(string, 3),
            snapshot: Option<bool> = optional(bool, 4),
        }
    }

    message! {
        struct TickOptionComputation {
            req_id: Option<i32> = optional(int32, 1),
            tick_type: Option<i32> = optional(int32, 2),
            tick_attrib: Option<i32> = optional(int32, 3),
            implied_vol: Option<f64> = optional(double, 4),
            delta: Option<f64> = optional(double, 5),
            opt_price: Option<f64> = optional(double, 6),
            pv_dividend: Option<f64> = optional(double, 7),
            gamma: Option<f64> = optional(double, 8),
            vega: Option<f64> = optional(double, 9),
            theta: Option<f64> = optional(double, 10),
            und_price: Option<f64> = optional(double, 11),
        }
    }

    fn option_contract(o: &super::TwsOption) -> Contract {
        Contract {
            con_id: Some(o.con_id),
            symbol: non_empty(&o.symbol),
            sec_type: Some("OPT".to_owned()),
            last_trade_date_or_contract_month: non_empty(&o.expiry),
            strike: Some(o.strike),
            right: non_empty(&o.right),
            multiplier: o.multiplier,
            exchange: Some("SMART".to_owned()),
            currency: non_empty(&o.currency),
            local_symbol: non_empty(&o.local_symbol),
            trading_class: non_empty(&o.trading_class),
            last_trade_date: non_empty(&o.expiry),
            ..Contract::default()
        }
    }

    /// `reqContractDetails`: an option query (OPT, the symbol, an expiry, perhaps a
    /// strike, right or trading class) lists every matching [`super::TwsOption`]; any
    /// other the [`TwsState::contract_details`] of its symbol; nothing matching: 200.
    pub(super) fn contract_data(
        st: &mut TwsState,
        payload: &[u8],
        out: &mut Out,
    ) -> std::io::Result<()> {
        let req = ContractDataRequest::decode(payload).unwrap_or_default();
        let req_id = req.req_id;
        let c = req.contract.unwrap_or_default();
        let symbol = c.symbol.clone().unwrap_or_default();
        st.contract_queries.push(format!(
            "{} {} {}",
            c.sec_type.as_deref().unwrap_or_default(),
            symbol,
            c.last_trade_date_or_contract_month
                .as_deref()
                .unwrap_or_default()
        ));
        let mut found = Vec::new();
        if c.sec_type.as_deref() == Some("OPT") {
            for o in &st.options {
                let same = |asked: &Option<String>, have: &str| {
                    asked.as_deref().is_none_or(|a| a.is_empty() || a == have)
                };
                if o.symbol == symbol
                    && same(&c.last_trade_date_or_contract_month, &o.expiry)
                    && same(&c.right, &o.right)
                    && same(&c.trading_class, &o.trading_class)
                    && c.strike
                        .is_none_or(|k| k == 0.0 || (k - o.strike).abs() < 1e-9)
                {
                    found.push(ContractData {
                        req_id,
                        contract: Some(option_contract(o)),
                        contract_details: Some(ContractDetails {
                            market_name: non_empty(&o.trading_class),
                            min_tick: Some("0.01".to_owned()),
                            under_con_id: st.contract_details.get(&o.symbol).map(|u| u.con_id),
                            long_name: None,
                            time_zone_id: Some(st.time_zone.clone()),
                            under_symbol: Some(o.symbol.clone()),
                            under_sec_type: Some("STK".to_owned()),
                        }),
                    });
                }
            }
        } else if let Some(u) = st.contract_details.get(&symbol) {
            found.push(ContractData {
                req_id,
                contract: Some(Contract {
                    con_id: Some(u.con_id),
                    symbol: non_empty(&u.symbol),
                    sec_type: non_empty(&u.sec_type),
                    exchange: Some("SMART".to_owned()),
                    primary_exch: non_empty(&u.primary_exchange),
                    currency: non_empty(&u.currency),
                    local_symbol: non_empty(&u.local_symbol),
                    trading_class: non_empty(&u.symbol),
                    ..Contract::default()
                }),
                contract_details: Some(ContractDetails {
                    market_name: non_empty(&u.symbol),
                    min_tick: Some("0.01".to_owned()),
                    long_name: Some(format!("{} INC", u.symbol)),
                    time_zone_id: Some(st.time_zone.clone()),
                    ..ContractDetails::default()
                }),
            });
        }
        if found.is_empty() {
            return out.push(
                ids::ERROR,
                &error_message(st, req_id.unwrap_or(-1), 200, super::NO_SECURITY_DEFINITION),
            );
        }
        for f in &found {
            out.push(CONTRACT_DATA, f)?;
        }
        out.push(CONTRACT_DATA_END, &ReqIdOnly { req_id })
    }

    /// `reqSecDefOptParams`: the [`TwsState::option_params`] of the underlying's conId,
    /// one frame each, then the end (left out with `option_params_end = false`). A conId
    /// of 0 is IBKR's 321; one without options answers the end alone.
    pub(super) fn sec_def_opt_params(
        st: &mut TwsState,
        payload: &[u8],
        out: &mut Out,
    ) -> std::io::Result<()> {
        let req = SecDefOptParamsRequest::decode(payload).unwrap_or_default();
        let req_id = req.req_id;
        let con_id = req.underlying_con_id.unwrap_or_default();
        st.option_param_requests.push((
            req.underlying_symbol.clone().unwrap_or_default(),
            req.underlying_sec_type.clone().unwrap_or_default(),
            con_id,
            req.fut_fop_exchange.clone().unwrap_or_default(),
        ));
        if con_id == 0 {
            return out.push(
                ids::ERROR,
                &error_message(st, req_id.unwrap_or(-1), 321, "Invalid contract id"),
            );
        }
        for p in st.option_params.get(&con_id).into_iter().flatten() {
            out.push(
                SEC_DEF_OPT_PARAMETER,
                &SecDefOptParameter {
                    req_id,
                    exchange: non_empty(&p.exchange),
                    underlying_con_id: Some(con_id),
                    trading_class: non_empty(&p.trading_class),
                    multiplier: non_empty(&p.multiplier),
                    expirations: p.expirations.clone(),
                    strikes: p.strikes.clone(),
                },
            )?;
        }
        if st.option_params_end {
            out.push(SEC_DEF_OPT_PARAMETER_END, &ReqIdOnly { req_id })?;
        }
        Ok(())
    }

    /// An option's `reqMktData`; `false` when the request is not for an option (the
    /// stock path answers it). IBKR refuses generic ticks in a snapshot (321).
    pub(super) fn option_market_data(
        st: &mut TwsState,
        payload: &[u8],
        out: &mut Out,
    ) -> std::io::Result<bool> {
        let req = MarketDataRequest::decode(payload).unwrap_or_default();
        let c = req.contract.clone().unwrap_or_default();
        if c.sec_type.as_deref() != Some("OPT") {
            return Ok(false);
        }
        let req_id = req.req_id;
        let generic = req.generic_tick_list.clone().unwrap_or_default();
        let snapshot = req.snapshot == Some(true);
        st.option_market_data.push((
            c.local_symbol.clone().unwrap_or_default(),
            generic.clone(),
            snapshot,
        ));
        let found = st.options.iter().find(|o| {
            c.con_id.is_some_and(|id| id == o.con_id)
                || c.local_symbol.as_deref() == Some(o.local_symbol.as_str())
        });
        let Some(o) = found.cloned() else {
            out.push(
                ids::ERROR,
                &error_message(st, req_id.unwrap_or(-1), 200, super::NO_SECURITY_DEFINITION),
            )?;
            return Ok(true);
        };
        if snapshot && !generic.is_empty() {
            out.push(
                ids::ERROR,
                &error_message(
                    st,
                    req_id.unwrap_or(-1),
                    321,
                    "Error validating request:-'bW' : cause - Snapshot market data subscription is not applicable to generic ticks",
                ),
            )?;
            return Ok(true);
        }
        if o.silent {
            return Ok(true);
        }
        if let Some((code, message)) = &o.error {
            out.push(
                ids::ERROR,
                &error_message(st, req_id.unwrap_or(-1), *code, message),
            )?;
            return Ok(true);
        }
        let delayed = o.delayed;
        if delayed {
            out.push(
                ids::ERROR,
                &error_message(
                    st,
                    req_id.unwrap_or(-1),
                    10167,
                    "Requested market data is not subscribed. Displaying delayed market data.",
                ),
            )?;
        }
        // IBKR's delayed twins: bid 66, ask 67, last 68, volume 74, model 83, bid
        // computation 80.
        let kind = |live: i32, late: i32| if delayed { late } else { live };
        out.push(
            ids::MARKET_DATA_TYPE,
            &MarketDataType {
                req_id,
                market_data_type: Some(if delayed { 3 } else { 1 }),
            },
        )?;
        for (live, late, price) in [(1, 66, o.bid), (2, 67, o.ask), (4, 68, o.last)] {
            out.push(
                ids::TICK_PRICE,
                &TickPrice {
                    req_id,
                    tick_type: Some(kind(live, late)),
                    price: Some(price),
                    size: None,
                    attr_mask: Some(0),
                },
            )?;
        }
        if let Some(v) = non_empty(&o.volume) {
            out.push(
                ids::TICK_SIZE,
                &TickSize {
                    req_id,
                    tick_type: Some(kind(8, 74)),
                    size: Some(v),
                },
            )?;
        }
        if let Some(c) = o.computation {
            // A bid computation first (its volatility differs), then the model's.
            for (live, late, iv) in [(10, 80, c.implied_vol + 0.01), (13, 83, c.implied_vol)] {
                out.push(
                    TICK_OPTION_COMPUTATION,
                    &TickOptionComputation {
                        req_id,
                        tick_type: Some(kind(live, late)),
                        tick_attrib: Some(1),
                        implied_vol: Some(iv),
                        delta: Some(c.delta),
                        opt_price: Some(c.opt_price),
                        pv_dividend: Some(c.pv_dividend),
                        gamma: Some(c.gamma),
                        vega: Some(c.vega),
                        theta: Some(c.theta),
                        und_price: Some(c.und_price),
                    },
                )?;
            }
        }
        if generic.split(',').any(|g| g.trim() == "101")
            && let Some(oi) = non_empty(&o.open_interest)
        {
            out.push(
                ids::TICK_SIZE,
                &TickSize {
                    req_id,
                    tick_type: Some(if o.right == "P" { 28 } else { 27 }),
                    size: Some(oi),
                },
            )?;
        }
        if snapshot {
            out.push(ids::TICK_SNAPSHOT_END, &ReqIdOnly { req_id })?;
        }
        Ok(true)
    }
}

#[cfg(test)]
mod unit_tests {
    use super::{
        CommissionTiming, Connection, Out, TwsExecution, TwsState, civil_from_days, duration_secs,
        executions, ids, parse_version_range, pb, wall_clock,
    };

    /// The wire ids of the frames in `bytes`, in order.
    fn frame_ids(bytes: &[u8]) -> Vec<i32> {
        let mut rest = bytes;
        let mut out = Vec::new();
        while let Some((len, tail)) = rest.split_first_chunk::<4>() {
            let len = u32::from_be_bytes(*len) as usize;
            let (frame, next) = tail.split_at(len);
            out.push(i32::from_be_bytes(
                *frame.split_first_chunk::<4>().unwrap().0,
            ));
            rest = next;
        }
        out
    }

    fn placed_by(client_id: Option<i32>) -> TwsExecution {
        TwsExecution {
            account: "DU1".into(),
            contract: super::TwsContract::default(),
            exec_id: format!("{client_id:?}"),
            order_id: 0,
            perm_id: 1,
            time: "20261127 10:30:00 US/Eastern".into(),
            exchange: String::new(),
            side: "BOT".into(),
            shares: "1".into(),
            price: 1.0,
            commission: Some((1.0, "USD".into())),
            client_id,
        }
    }

    /// How many executions the fake answers a filter with, and the frames it sends now.
    fn answer(st: &mut TwsState, filter_client: Option<i32>) -> (usize, Vec<i32>, Out) {
        let req = pb::ExecutionRequest {
            req_id: Some(1_500_000_000),
            execution_filter: Some(pb::ExecutionFilter {
                client_id: filter_client,
                ..Default::default()
            }),
        };
        let connection = Connection { client_id: Some(7) };
        let mut out = Out::default();
        executions(st, &connection, &req, &mut out).unwrap();
        let frames = frame_ids(&out.bytes);
        let n = frames
            .iter()
            .filter(|id| **id == ids::EXECUTION_DETAILS)
            .count();
        (n, frames, out)
    }

    #[test]
    fn the_execution_filter_client_id_is_honoured() {
        let mut st = TwsState {
            executions: vec![placed_by(None), placed_by(Some(0)), placed_by(Some(12))],
            ..TwsState::default()
        };
        // 0: every client's; 12: that client's; absent: the asking connection's (7).
        assert_eq!(answer(&mut st, Some(0)).0, 3);
        assert_eq!(answer(&mut st, Some(12)).0, 1);
        assert_eq!(answer(&mut st, None).0, 1);
        assert_eq!(st.execution_filter_clients, [Some(0), Some(12), None]);
    }

    #[test]
    fn unkind_modes_shape_the_answer() {
        let mut st = TwsState {
            executions: vec![placed_by(None)],
            ..TwsState::default()
        };
        let (_, kind, _) = answer(&mut st, Some(0));
        assert_eq!(
            kind,
            [
                ids::EXECUTION_DETAILS,
                ids::COMMISSION_REPORT,
                ids::EXECUTION_DETAILS_END
            ]
        );
        st.execution_end = false;
        st.commissions = CommissionTiming::AfterEnd {
            delay: std::time::Duration::ZERO,
        };
        let (_, frames, _) = answer(&mut st, Some(0));
        assert_eq!(
            frames,
            [ids::EXECUTION_DETAILS, ids::ERROR, ids::COMMISSION_REPORT]
        );
        st.execution_end = true;
        st.commissions = CommissionTiming::AfterEnd {
            delay: std::time::Duration::from_secs(1),
        };
        let (_, frames, out) = answer(&mut st, Some(0));
        assert_eq!(frames, [ids::EXECUTION_DETAILS, ids::EXECUTION_DETAILS_END]);
        assert_eq!(out.later.len(), 1);
        assert_eq!(
            frame_ids(&out.later[0].1),
            [ids::ERROR, ids::COMMISSION_REPORT]
        );
    }

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(
            wall_clock(1_796_050_800, -18_000),
            ("20261130".to_owned(), "10:00:00".to_owned())
        );
        assert_eq!(duration_secs("30 D"), 30 * 86_400);
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version_range("v213..226"), Some((213, 226)));
        assert_eq!(parse_version_range("v100..187 +PACEAPI"), Some((100, 187)));
        assert_eq!(parse_version_range("x"), None);
    }
}
