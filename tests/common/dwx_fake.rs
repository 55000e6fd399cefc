//! A fake of the DWXConnect expert advisor (`DWX_Server_MT4` / `DWX_Server_MT5`) that
//! talks to its client through files, built from the notes in
//! `docs/dev/dwx-hyperliquid-facts.md` (Part A); no EA code is copied.
//!
//! It plays the EA against `<root>/DWX/`, where `root` stands for `MQL4/Files` (or
//! `MQL5/Files`). A background thread runs the EA's pass every `EaState::poll` (10 ms by
//! default), in the EA's order: read the command slots, write `DWX_Orders.txt`, write
//! `DWX_Market_Data.txt`, then write any pending `DWX_Historic_Trades.txt` answer.
//! `DWX_Messages.txt` is rewritten whenever a message is added, as the EA does.
//!
//! What it reproduces: slots 0..49 scanned from 0 up to the first missing one; the file
//! deleted before it is validated; a format error or a duplicate id stops the pass; the
//! ring of the last 1000 ids and `RESET_COMMAND_IDS`; the `OPEN_ORDER` checks in the EA's
//! order; MT4 partial closes that re-ticket the remainder (`from #<old>`) and MT5 partial
//! closes that keep the ticket; the EA's number formats and raw (unescaped) strings; the
//! one-second heartbeat of the orders file; "written only when the text changed" for
//! market data; plain truncate-and-write output (no temp file, no rename) ending in
//! "\r\n", optionally UTF-16LE with a BOM or ANSI (code page 1252); MT5 history deals
//! newest first, commission half on the entry deal and half on the exit, an entry deal
//! for each open position opened inside the window, and any extra deals a test adds
//! (`EaState::extra_deals`, an `in_out` reversal say); the trade server's refusal of
//! lots off a symbol's volume step (`EaState::volume_steps`), which the EA itself never
//! checks; and the folder reset of `OnInit`/`OnDeinit`.
//!
//! Symbol specs are the broker's, as a terminal holds them (`EaState::specs`): contract
//! size, tick size and the rate from the profit currency to the account's; the EA writes
//! none of them, only each trade's `pnl` (in the account currency) and the market data's
//! `tick_value` (contract size x tick size x that rate, the account currency's value of
//! one tick of one lot), as the real EA does.
//! Deliberate simplifications: a symbol without a spec has tick value 1.0, 5 price digits,
//! and contract size 100,000 for six-letter symbols and 1 otherwise; a close of a symbol
//! without a price fills at the open price; bar data and historic bar data are not served
//! (`GET_HISTORIC_DATA` answers an ERROR `HISTORIC_DATA`); `GET_BID_ASK` is emitted once
//! when a subscribed symbol has no price, not on every pass; message times are
//! `server_time - gmt_offset_secs` rather than the wall clock, so they are deterministic.

#![allow(dead_code, unreachable_pub)]
#![allow(clippy::float_arithmetic)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Command slots `DWX_Commands_0.txt` .. `DWX_Commands_49.txt`.
pub const COMMAND_SLOTS: usize = 50;
/// How many command ids the EA remembers.
pub const ID_RING: usize = 1000;
/// `DWX_Orders.txt` is rewritten at least this often, even when unchanged.
pub const ORDERS_HEARTBEAT: Duration = Duration::from_millis(1000);

pub const ORDERS_FILE: &str = "DWX_Orders.txt";
pub const MESSAGES_FILE: &str = "DWX_Messages.txt";
pub const MARKET_DATA_FILE: &str = "DWX_Market_Data.txt";
pub const BAR_DATA_FILE: &str = "DWX_Bar_Data.txt";
pub const HISTORIC_DATA_FILE: &str = "DWX_Historic_Data.txt";
pub const HISTORIC_TRADES_FILE: &str = "DWX_Historic_Trades.txt";

const ORDER_KINDS: [&str; 6] = [
    "buy",
    "sell",
    "buylimit",
    "selllimit",
    "buystop",
    "sellstop",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Mt4,
    Mt5,
}

/// An open position (`kind` buy/sell) or a pending order.
#[derive(Debug, Clone)]
pub struct EaOrder {
    pub ticket: u64,
    pub magic: i64,
    pub symbol: String,
    pub lots: f64,
    /// buy, sell, buylimit, selllimit, buystop, sellstop.
    pub kind: String,
    pub open_price: f64,
    /// "YYYY.MM.DD HH:MM:SS", broker server time.
    pub open_time: String,
    pub sl: f64,
    pub tp: f64,
    pub pnl: f64,
    pub commission: f64,
    pub swap: f64,
    pub comment: String,
}

/// One MT5 history deal, as `DWX_Historic_Trades.txt` has it.
#[derive(Debug, Clone)]
pub struct EaDeal {
    pub ticket: u64,
    pub magic: i64,
    pub symbol: String,
    pub lots: f64,
    /// buy, sell, balance, ...
    pub kind: String,
    /// entry_in, entry_out, entry_out_by, in_out.
    pub entry: String,
    pub time: String,
    pub price: f64,
    pub pnl: f64,
    pub commission: f64,
    pub swap: f64,
    pub comment: String,
}

/// A closed position, or a deleted pending order, in the account history.
#[derive(Debug, Clone)]
pub struct EaClosed {
    pub ticket: u64,
    pub magic: i64,
    pub symbol: String,
    pub lots: f64,
    pub kind: String,
    pub open_time: String,
    pub close_time: String,
    pub open_price: f64,
    pub close_price: f64,
    pub sl: f64,
    pub tp: f64,
    pub pnl: f64,
    pub commission: f64,
    pub swap: f64,
    pub comment: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum EaMode {
    #[default]
    Normal,
    /// The EA stops: no command is read, no file is written (DWX_Orders.txt goes stale).
    Frozen,
    /// Commands are read and executed, but the resulting orders appear in DWX_Orders.txt
    /// only after this delay (a slow broker): for "uncertain, then found by lookup" tests.
    DelayOrders(Duration),
    /// The next OPEN_ORDER that passes the EA's own checks is rejected by the "broker":
    /// ERROR message with error_type "OPEN_ORDER", description "Could not open order: not
    /// enough money". The mode then falls back to `Normal`.
    RejectNextOpen,
    /// The broker rewrites comments of new orders: keeps only the first 20 characters and
    /// appends "[sl]" (so a client must not depend on the comment's tail).
    RewriteComments,
}

#[derive(Debug, Clone)]
pub struct EaState {
    /// Default `Mt4`.
    pub platform: Platform,
    pub name: String,
    pub number: i64,
    pub currency: String,
    pub leverage: i64,
    pub balance: f64,
    pub equity: f64,
    pub free_margin: f64,
    /// Unkind: `account_info` names the account only (no leverage, balance, equity or
    /// free margin), as an EA other than the stock one may write it.
    pub bare_account_info: bool,
    /// Open positions and pending orders, in the terminal's order.
    pub orders: Vec<EaOrder>,
    /// History, oldest first.
    pub closed: Vec<EaClosed>,
    /// (bid, ask) per symbol: the market.
    pub prices: BTreeMap<String, (f64, f64)>,
    /// Tick subscription, in the order given by SUBSCRIBE_SYMBOLS.
    pub subscribed: Vec<String>,
    /// EA input MaximumOrders; default 10 (the real default is 1).
    pub maximum_orders: usize,
    /// EA input MaximumLotSize; default 1.0 (the real default is 0.01).
    pub maximum_lot_size: f64,
    /// Symbol volume limits, default 0.01 / 100.
    pub min_lot: f64,
    pub max_lot: f64,
    /// Volume steps per symbol (`MODE_LOTSTEP` / `SYMBOL_VOLUME_STEP`), 0.01 where none
    /// is given. The EA does not check the step; the trade server refuses an order off
    /// it, which the EA reports as ERROR `OPEN_ORDER` "Could not open order: invalid
    /// trade volume".
    pub volume_steps: BTreeMap<String, f64>,
    pub mode: EaMode,
    /// Next ticket the broker hands out; default 1000.
    pub next_ticket: u64,
    /// The EA's TimeCurrent, "YYYY.MM.DD HH:MM:SS"; default "2026.11.30 17:00:00".
    pub server_time: String,
    /// Every command executed: (id, COMMAND, CONTENT). Duplicates are not in it.
    pub commands: Vec<(i64, String, String)>,
    /// Every ERROR error_type emitted, in order.
    pub command_errors: Vec<String>,
    /// Commands skipped as duplicate ids (each one also stopped its pass).
    pub duplicate_ids: usize,
    /// Write output files as UTF-16LE with a BOM (as MT4 may); default false.
    pub utf16: bool,
    /// Write output files as ANSI, code page 1252 (MT5's `FILE_ANSI`): each character
    /// one byte, `?` for what the code page lacks; default false (UTF-8). `utf16` wins.
    pub ansi: bool,
    /// MT5 deals the history answer also holds (a netting account's `in_out` reversal,
    /// say), written as the EA writes a deal.
    pub extra_deals: Vec<EaDeal>,
    /// Pass period (the EA's MILLISECOND_TIMER); default 10 ms.
    pub poll: Duration,
    /// EA input numLastMessages; default 50.
    pub num_last_messages: usize,
    /// Server time minus GMT, in seconds; message times are `server_time - this`.
    /// Default 7200 (a GMT+2 server).
    pub gmt_offset_secs: i64,
    /// The first message key (GetTickCount at start); keys then grow by the milliseconds
    /// elapsed, always strictly increasing. Default 100000.
    pub tick_count_start: u64,
    /// When true, every pass sets the pnl of each position that has a price from the
    /// market, and equity = balance + open pnl + commission + swap. Default false: seeded
    /// pnl stays as given.
    pub mark_to_market: bool,
    /// Loop iterations so far (they count while Frozen too); see `FakeEa::settle`.
    pub passes: u64,
    /// The broker's spec per symbol (see the module's notes); none by default.
    pub specs: BTreeMap<String, SymbolSpec>,
}

/// What the terminal's Specification window shows of a symbol, and the rate its profit
/// currency converts into the account's at (1 when they are the same).
#[derive(Debug, Clone, Copy)]
pub struct SymbolSpec {
    pub contract_size: f64,
    pub tick_size: f64,
    pub profit_to_account: f64,
}

impl Default for EaState {
    fn default() -> Self {
        EaState {
            platform: Platform::Mt4,
            name: "Test".to_string(),
            number: 5_550_123,
            currency: "USD".to_string(),
            leverage: 100,
            balance: 10_000.0,
            equity: 10_000.0,
            free_margin: 10_000.0,
            bare_account_info: false,
            orders: Vec::new(),
            closed: Vec::new(),
            prices: BTreeMap::new(),
            subscribed: Vec::new(),
            maximum_orders: 10,
            maximum_lot_size: 1.0,
            min_lot: 0.01,
            max_lot: 100.0,
            volume_steps: BTreeMap::new(),
            mode: EaMode::Normal,
            next_ticket: 1000,
            server_time: "2026.11.30 17:00:00".to_string(),
            commands: Vec::new(),
            command_errors: Vec::new(),
            duplicate_ids: 0,
            utf16: false,
            ansi: false,
            extra_deals: Vec::new(),
            poll: Duration::from_millis(10),
            num_last_messages: 50,
            gmt_offset_secs: 7200,
            tick_count_start: 100_000,
            mark_to_market: false,
            passes: 0,
            specs: BTreeMap::new(),
        }
    }
}

/// The EA's memory that is not account state.
#[derive(Debug)]
struct Engine {
    dir: PathBuf,
    /// The last `ID_RING` command ids.
    ids: VecDeque<i64>,
    /// (key, JSON text of the entry).
    messages: VecDeque<(u64, String)>,
    last_key: u64,
    started: Instant,
    last_orders_text: Option<String>,
    last_orders_write: Option<Instant>,
    last_market_text: Option<String>,
    /// Tickets held back from the orders file (DelayOrders), until this instant.
    hidden_until: BTreeMap<u64, Instant>,
    /// Lookback days of a GET_HISTORIC_TRADES awaiting its answer.
    pending_trades: Option<i64>,
    /// Subscribed symbols whose GET_BID_ASK error was already sent.
    bid_ask_failing: BTreeSet<String>,
    /// Removed from the chart (OnDeinit ran): no passes.
    detached: bool,
}

#[derive(Debug)]
pub struct FakeEa {
    /// The MQL4/Files (or MQL5/Files) directory; the EA works in `root/DWX`.
    pub root: PathBuf,
    pub state: Arc<Mutex<EaState>>,
    engine: Arc<Mutex<Engine>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Drop for FakeEa {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl FakeEa {
    /// Creates `root/DWX`, resets it as `OnInit` does, runs one pass (so `DWX_Orders.txt`
    /// exists when this returns, unless the mode is Frozen) and starts the loop on a std
    /// thread. Works from any context, inside a tokio runtime or not.
    pub fn start(root: &Path, state: EaState) -> FakeEa {
        let dir = root.join("DWX");
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
        let mut engine = Engine {
            dir,
            ids: VecDeque::with_capacity(ID_RING),
            messages: VecDeque::new(),
            last_key: 0,
            started: Instant::now(),
            last_orders_text: None,
            last_orders_write: None,
            last_market_text: None,
            hidden_until: BTreeMap::new(),
            pending_trades: None,
            bid_ask_failing: BTreeSet::new(),
            detached: false,
        };
        engine.on_init();
        let mut state = state;
        engine.tick(&mut state);
        let engine = Arc::new(Mutex::new(engine));
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (engine, state, stop) =
                (Arc::clone(&engine), Arc::clone(&state), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("fake-dwx-ea".to_string())
                .spawn(move || run(&engine, &state, &stop))
                .unwrap_or_else(|e| panic!("spawn fake EA: {e}"))
        };
        FakeEa {
            root: root.to_path_buf(),
            state,
            engine,
            stop,
            thread: Some(thread),
        }
    }

    /// `root/DWX`.
    pub fn dir(&self) -> PathBuf {
        self.root.join("DWX")
    }

    pub fn set_mode(&self, m: EaMode) {
        lock(&self.state).mode = m;
    }

    pub fn set_price(&self, symbol: &str, bid: f64, ask: f64) {
        lock(&self.state)
            .prices
            .insert(symbol.to_string(), (bid, ask));
    }

    pub fn remove_price(&self, symbol: &str) {
        lock(&self.state).prices.remove(symbol);
    }

    pub fn set_server_time(&self, time: &str) {
        lock(&self.state).server_time = time.to_string();
    }

    /// Moves the server clock by `secs` (may be negative).
    pub fn advance_server_time(&self, secs: i64) {
        let mut s = lock(&self.state);
        let now = mt_time_to_secs(&s.server_time)
            .unwrap_or_else(|| panic!("bad server_time {:?}", s.server_time));
        s.server_time = secs_to_mt_time(now + secs);
    }

    pub fn snapshot(&self) -> EaState {
        lock(&self.state).clone()
    }

    /// Loop iterations so far (counting Frozen ones).
    pub fn passes(&self) -> u64 {
        lock(&self.state).passes
    }

    /// Waits until a full pass has started after this call, so every command file written
    /// before the call has been handled and its effects written (unless Frozen, or the
    /// command sits behind a gap in the slots). Panics after 5 s.
    pub async fn settle(&self) {
        let target = self.passes() + 1;
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.passes() < target {
            assert!(Instant::now() < deadline, "the fake EA made no pass in 5 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }

    /// `settle` for synchronous code.
    pub fn settle_blocking(&self) {
        let target = self.passes() + 1;
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.passes() < target {
            assert!(Instant::now() < deadline, "the fake EA made no pass in 5 s");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Runs one pass now, on the caller's thread (does nothing while Frozen or removed).
    pub fn pass(&self) {
        let mut e = lock(&self.engine);
        let mut s = lock(&self.state);
        e.tick(&mut s);
    }

    /// The EA is removed from its chart: `OnDeinit` resets the folder (so
    /// `DWX_Orders.txt` disappears) and no more passes run until `init`.
    pub fn deinit(&self) {
        let mut e = lock(&self.engine);
        e.reset_folder();
        e.detached = true;
    }

    /// The EA is attached again: `OnInit` resets the folder and the EA forgets its id
    /// ring, its messages, its subscriptions and the texts it last wrote. Message keys
    /// keep growing (GetTickCount is the OS's counter).
    pub fn init(&self) {
        let mut e = lock(&self.engine);
        let mut s = lock(&self.state);
        e.on_init();
        s.subscribed.clear();
    }

    /// `deinit` then `init`.
    pub fn restart(&self) {
        self.deinit();
        self.init();
    }

    /// Closes a position as the broker would on a stop-loss hit: moves it to `closed` at
    /// `price`, its comment gets " [sl]" appended (MT4 style), pnl is
    /// (close-open)*lots*100000*dir for 6-letter FX pairs (else *1). Balance and equity
    /// change by the realized amount. Panics if `ticket` is not an open position.
    pub fn hit_stop_loss(&self, ticket: u64, price: f64) {
        self.broker_close(ticket, price, " [sl]");
    }

    /// As `hit_stop_loss`, with " [tp]".
    pub fn hit_take_profit(&self, ticket: u64, price: f64) {
        self.broker_close(ticket, price, " [tp]");
    }

    fn broker_close(&self, ticket: u64, price: f64, tag: &str) {
        let mut s = lock(&self.state);
        let idx = s
            .orders
            .iter()
            .position(|o| o.ticket == ticket && is_position(&o.kind))
            .unwrap_or_else(|| panic!("fake EA: no open position with ticket {ticket}"));
        let order = s.orders.remove(idx);
        let lots = order.lots;
        let mut closed = realize(&mut s, &order, lots, price);
        closed.comment.push_str(tag);
        s.closed.push(closed);
    }

    /// The broker fills a pending order at `price`: it becomes a buy/sell position with
    /// the same ticket, opened now. Panics if `ticket` is not a pending order.
    pub fn fill_pending(&self, ticket: u64, price: f64) {
        let mut s = lock(&self.state);
        let now = s.server_time.clone();
        let order = s
            .orders
            .iter_mut()
            .find(|o| o.ticket == ticket && !is_position(&o.kind))
            .unwrap_or_else(|| panic!("fake EA: no pending order with ticket {ticket}"));
        order.kind = if order.kind.starts_with("buy") {
            "buy"
        } else {
            "sell"
        }
        .to_string();
        order.open_price = price;
        order.open_time = now;
    }
}

fn run(engine: &Mutex<Engine>, state: &Mutex<EaState>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let poll = {
            let mut e = lock(engine);
            let mut s = lock(state);
            e.tick(&mut s);
            s.poll
        };
        std::thread::park_timeout(poll);
    }
}

// ---------------------------------------------------------------------------------------
// The EA's pass.

impl Engine {
    fn tick(&mut self, st: &mut EaState) {
        st.passes += 1;
        if self.detached || st.mode == EaMode::Frozen {
            return;
        }
        self.check_commands(st);
        if st.mark_to_market {
            mark_to_market(st);
        }
        self.check_open_orders(st);
        self.check_market_data(st);
        self.answer_historic_trades(st);
    }

    fn on_init(&mut self) {
        self.reset_folder();
        self.ids.clear();
        self.messages.clear();
        self.last_orders_text = None;
        self.last_orders_write = None;
        self.last_market_text = None;
        self.pending_trades = None;
        self.bid_ask_failing.clear();
        self.detached = false;
    }

    /// ResetFolder: leaves DWX_Historic_Trades.txt and the client's *_Stored.txt alone.
    fn reset_folder(&self) {
        let _ = std::fs::create_dir_all(&self.dir);
        for f in [
            MARKET_DATA_FILE,
            BAR_DATA_FILE,
            HISTORIC_DATA_FILE,
            ORDERS_FILE,
            MESSAGES_FILE,
        ] {
            let _ = std::fs::remove_file(self.dir.join(f));
        }
        for i in 0..COMMAND_SLOTS {
            let _ = std::fs::remove_file(self.dir.join(format!("DWX_Commands_{i}.txt")));
        }
    }

    fn write(&self, st: &EaState, file: &str, text: &str) -> bool {
        if st.ansi && !st.utf16 {
            let bytes: Vec<u8> = format!("{text}\r\n")
                .chars()
                .map(|c| match c {
                    '\u{20ac}' => 0x80,
                    c => u8::try_from(u32::from(c)).unwrap_or(b'?'),
                })
                .collect();
            return std::fs::write(self.dir.join(file), bytes).is_ok();
        }
        write_out(&self.dir.join(file), text, st.utf16).is_ok()
    }

    // --- messages ---------------------------------------------------------------------

    fn error(&mut self, st: &mut EaState, error_type: &str, description: &str) {
        st.command_errors.push(error_type.to_string());
        let time = message_time(st);
        let body = format!(
            "{{\"type\": \"ERROR\", \"time\": \"{time}\", \"error_type\": \"{error_type}\", \"description\": \"{description}\"}}"
        );
        self.message(st, body);
    }

    fn info(&mut self, st: &EaState, message: &str) {
        let time = message_time(st);
        let body =
            format!("{{\"type\": \"INFO\", \"time\": \"{time}\", \"message\": \"{message}\"}}");
        self.message(st, body);
    }

    fn message(&mut self, st: &EaState, body: String) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let tick = st.tick_count_start.saturating_add(elapsed);
        let key = if self.messages.is_empty() && self.last_key == 0 {
            tick
        } else {
            tick.max(self.last_key + 1)
        };
        self.last_key = key;
        self.messages.push_back((key, body));
        while self.messages.len() > st.num_last_messages.max(1) {
            self.messages.pop_front();
        }
        let entries: Vec<String> = self
            .messages
            .iter()
            .map(|(k, b)| format!("\"{k}\": {b}"))
            .collect();
        let text = format!("{{{}}}", entries.join(", "));
        self.write(st, MESSAGES_FILE, &text);
    }

    // --- CheckCommands ----------------------------------------------------------------

    fn check_commands(&mut self, st: &mut EaState) {
        for slot in 0..COMMAND_SLOTS {
            let path = self.dir.join(format!("DWX_Commands_{slot}.txt"));
            if !path.is_file() {
                break;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                break;
            };
            for _ in 0..10 {
                if std::fs::remove_file(&path).is_ok() || !path.exists() {
                    break;
                }
            }
            let text: String = decode(&bytes).lines().collect();
            if !self.handle_command(st, &text) {
                break;
            }
        }
    }

    /// False stops the pass.
    fn handle_command(&mut self, st: &mut EaState, text: &str) -> bool {
        let Some(rest) = text.strip_prefix("<:") else {
            self.error(
                st,
                "WRONG_FORMAT_START_IDENTIFIER",
                &format!("Start identifier not found for command: {text}"),
            );
            return false;
        };
        let Some(inner) = rest.strip_suffix(":>") else {
            self.error(
                st,
                "WRONG_FORMAT_END_IDENTIFIER",
                &format!("End identifier not found for command: {text}"),
            );
            return false;
        };
        let parts: Vec<&str> = inner.split('|').collect();
        let [id, command, content] = parts.as_slice() else {
            self.error(
                st,
                "WRONG_FORMAT_COMMAND",
                &format!("Wrong format for command: {text}"),
            );
            return false;
        };
        let id = mql_int(id);
        if *command == "RESET_COMMAND_IDS" {
            self.ids.clear();
            st.commands
                .push((id, (*command).to_string(), (*content).to_string()));
            return true;
        }
        if self.ids.contains(&id) {
            // The EA only prints to the journal.
            st.duplicate_ids += 1;
            return false;
        }
        self.ids.push_back(id);
        while self.ids.len() > ID_RING {
            self.ids.pop_front();
        }
        st.commands
            .push((id, (*command).to_string(), (*content).to_string()));
        self.execute(st, command, content);
        true
    }

    fn execute(&mut self, st: &mut EaState, command: &str, content: &str) {
        match command {
            "OPEN_ORDER" => self.open_order(st, content),
            "CLOSE_ORDER" => self.close_order(st, content),
            "CLOSE_ALL_ORDERS" => self.close_many(st, &Filter::All),
            "CLOSE_ORDERS_BY_SYMBOL" => self.close_many(st, &Filter::Symbol(content.to_string())),
            "CLOSE_ORDERS_BY_MAGIC" => self.close_many(st, &Filter::Magic(mql_int(content))),
            "MODIFY_ORDER" => self.modify_order(st, content),
            "SUBSCRIBE_SYMBOLS" => self.subscribe(st, content),
            "SUBSCRIBE_SYMBOLS_BAR_DATA" => self.subscribe_bars(st, content),
            "GET_HISTORIC_DATA" => self.historic_data(st, content),
            "GET_HISTORIC_TRADES" => {
                let days = mql_int(content);
                if days <= 0 {
                    self.error(
                        st,
                        "HISTORIC_TRADES",
                        &format!("Lookback days must be a positive integer: {content}"),
                    );
                } else {
                    self.pending_trades = Some(days);
                }
            }
            // Unknown commands are recorded and otherwise ignored.
            _ => {}
        }
    }

    fn open_order(&mut self, st: &mut EaState, content: &str) {
        let f: Vec<&str> = content.split(',').collect();
        let [
            symbol,
            kind,
            lots,
            price,
            sl,
            tp,
            magic,
            comment,
            _expiration,
        ] = f.as_slice()
        else {
            self.error(
                st,
                "OPEN_ORDER_WRONG_FORMAT",
                &format!("Wrong format for OPEN_ORDER command: {content}"),
            );
            return;
        };
        if st.orders.len() >= st.maximum_orders {
            let msg = format!(
                "Number of orders ({}) larger than or equal to MaximumOrders ({}).",
                st.orders.len(),
                st.maximum_orders
            );
            self.error(st, "OPEN_ORDER_MAXIMUM_NUMBER", &msg);
            return;
        }
        if !ORDER_KINDS.contains(kind) {
            self.error(
                st,
                "OPEN_ORDER_TYPE",
                &format!("Order type could not be parsed: {kind}"),
            );
            return;
        }
        let lots = round_to(mql_double(lots), 2);
        if lots < st.min_lot || lots > st.max_lot {
            let msg = format!(
                "Lot size out of range (min: {}, max: {}): {lots}",
                st.min_lot, st.max_lot
            );
            self.error(st, "OPEN_ORDER_LOTSIZE_OUT_OF_RANGE", &msg);
            return;
        }
        if lots > st.maximum_lot_size {
            let msg = format!(
                "Lot size ({lots}) larger than MaximumLotSize ({}).",
                st.maximum_lot_size
            );
            self.error(st, "OPEN_ORDER_LOTSIZE_TOO_LARGE", &msg);
            return;
        }
        let mut price = round_to(mql_double(price), 5);
        if price == 0.0 && is_position(kind) {
            let (bid, ask) = st.prices.get(*symbol).copied().unwrap_or((0.0, 0.0));
            price = if *kind == "buy" { ask } else { bid };
        }
        if price == 0.0 {
            self.error(
                st,
                "OPEN_ORDER_PRICE_ZERO",
                &format!("Price is zero: {content}"),
            );
            return;
        }
        let step = st.volume_steps.get(*symbol).copied().unwrap_or(0.01);
        let steps = lots / step;
        if (steps - steps.round()).abs() > 1e-6 {
            self.error(
                st,
                "OPEN_ORDER",
                "Could not open order: invalid trade volume",
            );
            return;
        }
        if st.mode == EaMode::RejectNextOpen {
            st.mode = EaMode::Normal;
            self.error(st, "OPEN_ORDER", "Could not open order: not enough money");
            return;
        }
        let comment = if st.mode == EaMode::RewriteComments {
            let mut c: String = comment.chars().take(20).collect();
            c.push_str("[sl]");
            c
        } else {
            (*comment).to_string()
        };
        let ticket = st.next_ticket;
        st.next_ticket += 1;
        st.orders.push(EaOrder {
            ticket,
            magic: mql_int(magic),
            symbol: (*symbol).to_string(),
            lots,
            kind: (*kind).to_string(),
            open_price: price,
            open_time: st.server_time.clone(),
            sl: round_to(mql_double(sl), 5),
            tp: round_to(mql_double(tp), 5),
            pnl: 0.0,
            commission: 0.0,
            swap: 0.0,
            comment,
        });
        if let EaMode::DelayOrders(d) = st.mode {
            self.hidden_until.insert(ticket, Instant::now() + d);
        }
        let msg = match st.platform {
            Platform::Mt4 => {
                format!("Successfully sent order {ticket}: {symbol}, {kind}, {lots}, {price}")
            }
            Platform::Mt5 => format!("Successfully sent order: {symbol}, {kind}, {lots}, {price}"),
        };
        self.info(st, &msg);
    }

    fn close_order(&mut self, st: &mut EaState, content: &str) {
        let f: Vec<&str> = content.split(',').collect();
        let [ticket, lots] = f.as_slice() else {
            self.error(
                st,
                "CLOSE_ORDER_WRONG_FORMAT",
                &format!("Wrong format for CLOSE_ORDER command: {content}"),
            );
            return;
        };
        let ticket = mql_int(ticket);
        let Some(idx) = st
            .orders
            .iter()
            .position(|o| i64::try_from(o.ticket).ok() == Some(ticket))
        else {
            self.error(
                st,
                "CLOSE_ORDER_SELECT_TICKET",
                &format!("Could not select order with ticket {ticket}."),
            );
            return;
        };
        let (symbol, closed) = close_at(st, idx, round_to(mql_double(lots), 2));
        self.info(
            st,
            &format!("Successfully closed order: {ticket}, {symbol}, {closed}"),
        );
    }

    fn close_many(&mut self, st: &mut EaState, filter: &Filter) {
        let tickets: Vec<u64> = st
            .orders
            .iter()
            .filter(|o| match filter {
                Filter::All => true,
                Filter::Symbol(s) => &o.symbol == s,
                Filter::Magic(m) => o.magic == *m,
            })
            .map(|o| o.ticket)
            .collect();
        for t in &tickets {
            if let Some(idx) = st.orders.iter().position(|o| o.ticket == *t) {
                close_at(st, idx, 0.0);
            }
        }
        let n = tickets.len();
        match filter {
            Filter::All => {
                if n == 0 {
                    self.info(st, "No orders to close.");
                }
                self.info(st, &format!("Successfully closed {n} orders."));
            }
            Filter::Symbol(s) => {
                if n == 0 {
                    self.info(st, &format!("No orders to close with symbol {s}."));
                } else {
                    self.info(
                        st,
                        &format!("Successfully closed {n} orders with symbol {s}."),
                    );
                }
            }
            Filter::Magic(m) => {
                if n == 0 {
                    self.info(st, &format!("No orders to close with magic {m}."));
                } else {
                    self.info(
                        st,
                        &format!("Successfully closed {n} orders with magic {m}."),
                    );
                }
            }
        }
    }

    fn modify_order(&mut self, st: &mut EaState, content: &str) {
        let f: Vec<&str> = content.split(',').collect();
        let [ticket, price, sl, tp, _expiration] = f.as_slice() else {
            self.error(
                st,
                "MODIFY_ORDER_WRONG_FORMAT",
                &format!("Wrong format for MODIFY_ORDER command: {content}"),
            );
            return;
        };
        let ticket = mql_int(ticket);
        let price = round_to(mql_double(price), 5);
        let (sl, tp) = (round_to(mql_double(sl), 5), round_to(mql_double(tp), 5));
        let Some(order) = st
            .orders
            .iter_mut()
            .find(|o| i64::try_from(o.ticket).ok() == Some(ticket))
        else {
            self.error(
                st,
                "MODIFY_ORDER_SELECT_TICKET",
                &format!("Could not select order with ticket {ticket}."),
            );
            return;
        };
        if !is_position(&order.kind) && price != 0.0 {
            order.open_price = price;
        }
        order.sl = sl;
        order.tp = tp;
        let msg = format!(
            "Successfully modified order {ticket}: {}, {}, {}, {}",
            order.symbol, order.open_price, order.sl, order.tp
        );
        self.info(st, &msg);
    }

    fn subscribe(&mut self, st: &mut EaState, content: &str) {
        st.subscribed = content
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        let subscribed = &st.subscribed;
        self.bid_ask_failing.retain(|s| subscribed.contains(s));
        if st.subscribed.is_empty() {
            self.info(
                st,
                "Unsubscribed from all tick data because of empty symbol list.",
            );
        } else {
            let list = st.subscribed.join(", ");
            self.info(st, &format!("Successfully subscribed to: {list}"));
        }
    }

    fn subscribe_bars(&mut self, st: &mut EaState, content: &str) {
        let f: Vec<&str> = content.split(',').filter(|s| !s.is_empty()).collect();
        if !f.len().is_multiple_of(2) {
            self.error(
                st,
                "BAR_DATA_WRONG_FORMAT",
                &format!("Wrong format for SUBSCRIBE_SYMBOLS_BAR_DATA command: {content}"),
            );
        } else if f.is_empty() {
            self.info(
                st,
                "Unsubscribed from all bar data because of empty symbol list.",
            );
        } else {
            let list: Vec<String> = f.chunks(2).map(|p| p.join("_")).collect();
            self.info(
                st,
                &format!("Successfully subscribed to bar data: {}", list.join(", ")),
            );
        }
    }

    fn historic_data(&mut self, st: &mut EaState, content: &str) {
        let f: Vec<&str> = content.split(',').collect();
        let [symbol, tf, _start, _end] = f.as_slice() else {
            self.error(
                st,
                "HISTORIC_DATA_WRONG_FORMAT",
                &format!("Wrong format for GET_HISTORIC_DATA command: {content}"),
            );
            return;
        };
        self.error(
            st,
            "HISTORIC_DATA",
            &format!("Could not read historic data for {symbol}_{tf}: the fake EA has no bars."),
        );
    }

    // --- CheckOpenOrders ----------------------------------------------------------------

    fn check_open_orders(&mut self, st: &EaState) {
        let now = Instant::now();
        self.hidden_until
            .retain(|t, until| *until > now && st.orders.iter().any(|o| o.ticket == *t));
        let text = orders_text(st, &self.hidden_until);
        let changed = self.last_orders_text.as_deref() != Some(text.as_str());
        let due = self
            .last_orders_write
            .is_none_or(|t| now.duration_since(t) >= ORDERS_HEARTBEAT);
        if (changed || due) && self.write(st, ORDERS_FILE, &text) {
            self.last_orders_text = Some(text);
            self.last_orders_write = Some(now);
        }
    }

    // --- CheckMarketData ----------------------------------------------------------------

    fn check_market_data(&mut self, st: &mut EaState) {
        let mut entries = Vec::new();
        let symbols = st.subscribed.clone();
        for s in &symbols {
            match st.prices.get(s).copied() {
                Some((bid, ask)) => {
                    self.bid_ask_failing.remove(s);
                    let tick_value = st
                        .specs
                        .get(s)
                        .map_or(1.0, |x| x.contract_size * x.tick_size * x.profit_to_account);
                    entries.push(match st.platform {
                        Platform::Mt4 => format!(
                            "\"{s}\": {{\"bid\": {bid:.5}, \"ask\": {ask:.5}, \"tick_value\": {tick_value:.5}}}"
                        ),
                        Platform::Mt5 => format!(
                            "\"{s}\": {{\"bid\": {bid:.5}, \"ask\": {ask:.5}, \"last\": {:.5}, \"tick_value\": {tick_value:.5}}}",
                            0.0
                        ),
                    });
                }
                None => {
                    if self.bid_ask_failing.insert(s.clone()) {
                        self.error(
                            st,
                            "GET_BID_ASK",
                            &format!("Could not get bid/ask for {s}."),
                        );
                    }
                }
            }
        }
        let text = format!("{{{}}}", entries.join(", "));
        if self.last_market_text.as_deref() != Some(text.as_str())
            && self.write(st, MARKET_DATA_FILE, &text)
        {
            self.last_market_text = Some(text);
        }
    }

    // --- GET_HISTORIC_TRADES answer -----------------------------------------------------

    fn answer_historic_trades(&mut self, st: &mut EaState) {
        let Some(days) = self.pending_trades.take() else {
            return;
        };
        let text = match st.platform {
            Platform::Mt4 => mt4_trades_text(st, days),
            Platform::Mt5 => mt5_deals_text(st, days),
        };
        if self.write(st, HISTORIC_TRADES_FILE, &text) {
            self.info(st, "Successfully read historic trades.");
        } else {
            self.error(
                st,
                "HISTORIC_TRADES",
                "Could not write DWX_Historic_Trades.txt.",
            );
        }
    }
}

enum Filter {
    All,
    Symbol(String),
    Magic(i64),
}

// ---------------------------------------------------------------------------------------
// Broker side: closing and pnl.

fn is_position(kind: &str) -> bool {
    kind == "buy" || kind == "sell"
}

/// Account currency per unit of price move of one lot.
fn per_point(specs: &BTreeMap<String, SymbolSpec>, symbol: &str) -> f64 {
    if let Some(s) = specs.get(symbol) {
        return s.contract_size * s.profit_to_account;
    }
    if symbol.len() == 6 && symbol.chars().all(|c| c.is_ascii_alphabetic()) {
        100_000.0
    } else {
        1.0
    }
}

fn pnl_of(specs: &BTreeMap<String, SymbolSpec>, order: &EaOrder, lots: f64, close: f64) -> f64 {
    let dir = if order.kind == "sell" { -1.0 } else { 1.0 };
    round_to(
        (close - order.open_price) * lots * per_point(specs, &order.symbol) * dir,
        2,
    )
}

/// The price a close of `order` fills at: bid for a buy, ask for a sell; the open price
/// when the symbol has no price.
fn close_price(st: &EaState, order: &EaOrder) -> f64 {
    match st.prices.get(&order.symbol) {
        Some(&(bid, _)) if order.kind.starts_with("buy") => bid,
        Some(&(_, ask)) => ask,
        None => order.open_price,
    }
}

/// Turns `lots` of `order` into a history entry at `price` and books the result.
fn realize(st: &mut EaState, order: &EaOrder, lots: f64, price: f64) -> EaClosed {
    let frac = if order.lots > 0.0 {
        lots / order.lots
    } else {
        1.0
    };
    let (pnl, commission, swap) = if is_position(&order.kind) {
        (
            pnl_of(&st.specs, order, lots, price),
            round_to(order.commission * frac, 2),
            round_to(order.swap * frac, 2),
        )
    } else {
        (0.0, 0.0, 0.0)
    };
    let carried = (order.pnl + order.commission + order.swap) * frac;
    let realized = pnl + commission + swap;
    st.balance = round_to(st.balance + realized, 2);
    st.equity = round_to(st.equity + realized - carried, 2);
    EaClosed {
        ticket: order.ticket,
        magic: order.magic,
        symbol: order.symbol.clone(),
        lots,
        kind: order.kind.clone(),
        open_time: order.open_time.clone(),
        close_time: st.server_time.clone(),
        open_price: order.open_price,
        close_price: price,
        sl: order.sl,
        tp: order.tp,
        pnl,
        commission,
        swap,
        comment: order.comment.clone(),
    }
}

/// CLOSE_ORDER on `st.orders[idx]`: a pending order is deleted; `lots` 0 or at least the
/// volume closes the position; less closes part of it. Returns (symbol, lots closed).
fn close_at(st: &mut EaState, idx: usize, lots: f64) -> (String, f64) {
    let order = st.orders.remove(idx);
    let price = close_price(st, &order);
    let symbol = order.symbol.clone();
    let remaining = round_to(order.lots - lots, 2);
    if !is_position(&order.kind) || lots <= 0.0 || remaining <= 0.0 {
        let closed = realize(st, &order, order.lots, price);
        st.closed.push(closed);
        return (symbol, order.lots);
    }
    let mut closed = realize(st, &order, lots, price);
    let keep = remaining / order.lots;
    let mut rest = order.clone();
    rest.lots = remaining;
    rest.pnl = round_to(order.pnl * keep, 2);
    rest.commission = round_to(order.commission * keep, 2);
    rest.swap = round_to(order.swap * keep, 2);
    match st.platform {
        Platform::Mt4 => {
            let new_ticket = st.next_ticket;
            st.next_ticket += 1;
            closed.comment = format!("to #{new_ticket}");
            rest.ticket = new_ticket;
            rest.comment = format!("from #{}", order.ticket);
            st.orders.push(rest);
        }
        Platform::Mt5 => st.orders.insert(idx, rest),
    }
    st.closed.push(closed);
    (symbol, lots)
}

fn mark_to_market(st: &mut EaState) {
    let prices = st.prices.clone();
    let specs = st.specs.clone();
    let mut open = 0.0;
    for o in st.orders.iter_mut().filter(|o| is_position(&o.kind)) {
        if let Some(&(bid, ask)) = prices.get(&o.symbol) {
            let close = if o.kind == "buy" { bid } else { ask };
            o.pnl = pnl_of(&specs, o, o.lots, close);
        }
        open += o.pnl + o.commission + o.swap;
    }
    st.equity = round_to(st.balance + open, 2);
}

// ---------------------------------------------------------------------------------------
// File texts. Strings are inserted raw, as the EA does: a `"` in a comment breaks the JSON.

fn orders_text(st: &EaState, hidden: &BTreeMap<u64, Instant>) -> String {
    let visible = st.orders.iter().filter(|o| !hidden.contains_key(&o.ticket));
    let ordered: Vec<&EaOrder> = match st.platform {
        Platform::Mt4 => visible.collect(),
        Platform::Mt5 => {
            let (mut pos, pending): (Vec<&EaOrder>, Vec<&EaOrder>) =
                visible.partition(|o| is_position(&o.kind));
            pos.extend(pending);
            pos
        }
    };
    let entries: Vec<String> = ordered
        .iter()
        .map(|o| {
            let pending = !is_position(&o.kind);
            let (pnl, swap) = if st.platform == Platform::Mt5 && pending {
                (0.0, 0.0)
            } else {
                (o.pnl, o.swap)
            };
            let commission = match st.platform {
                Platform::Mt4 => format!("\"commission\": {:.2}, ", z(o.commission)),
                Platform::Mt5 => String::new(),
            };
            format!(
                "\"{}\": {{\"magic\": {}, \"symbol\": \"{}\", \"lots\": {:.2}, \"type\": \"{}\", \"open_price\": {:.5}, \"open_time\": \"{}\", \"SL\": {:.5}, \"TP\": {:.5}, \"pnl\": {:.2}, {commission}\"swap\": {:.2}, \"comment\": \"{}\"}}",
                o.ticket,
                o.magic,
                o.symbol,
                z(o.lots),
                kind_name(&o.kind),
                z(o.open_price),
                o.open_time,
                z(o.sl),
                z(o.tp),
                z(pnl),
                z(swap),
                o.comment
            )
        })
        .collect();
    if st.bare_account_info {
        return format!(
            "{{\"account_info\": {{\"name\": \"{}\", \"number\": {}, \"currency\": \"{}\"}}, \"orders\": {{{}}}}}",
            st.name,
            st.number,
            st.currency,
            entries.join(", ")
        );
    }
    format!(
        "{{\"account_info\": {{\"name\": \"{}\", \"number\": {}, \"currency\": \"{}\", \"leverage\": {}, \"free_margin\": {:.6}, \"balance\": {:.6}, \"equity\": {:.6}}}, \"orders\": {{{}}}}}",
        st.name,
        st.number,
        st.currency,
        st.leverage,
        z(st.free_margin),
        z(st.balance),
        z(st.equity),
        entries.join(", ")
    )
}

fn kind_name(kind: &str) -> &str {
    if ORDER_KINDS.contains(&kind) {
        kind
    } else {
        "unknown"
    }
}

fn lookback_start(st: &EaState, days: i64) -> (i64, i64) {
    let now = mt_time_to_secs(&st.server_time).unwrap_or(0);
    (now - days.saturating_mul(86_400), now)
}

/// MT4: history orders keyed by ticket, selected by open time.
fn mt4_trades_text(st: &EaState, days: i64) -> String {
    let (from, _) = lookback_start(st, days);
    let entries: Vec<String> = st
        .closed
        .iter()
        .filter(|c| mt_time_to_secs(&c.open_time).is_some_and(|t| t >= from))
        .map(|c| {
            format!(
                "\"{}\": {{\"magic\": {}, \"symbol\": \"{}\", \"lots\": {:.2}, \"type\": \"{}\", \"open_time\": \"{}\", \"close_time\": \"{}\", \"open_price\": {:.5}, \"close_price\": {:.5}, \"SL\": {:.5}, \"TP\": {:.5}, \"pnl\": {:.2}, \"commission\": {:.2}, \"swap\": {:.2}, \"comment\": \"{}\"}}",
                c.ticket,
                c.magic,
                c.symbol,
                z(c.lots),
                kind_name(&c.kind),
                c.open_time,
                c.close_time,
                z(c.open_price),
                z(c.close_price),
                z(c.sl),
                z(c.tp),
                z(c.pnl),
                z(c.commission),
                z(c.swap),
                c.comment
            )
        })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// First deal ticket of the MT5 deal numbering (in-deal 2i, out-deal 2i+1 for closed[i]).
pub const MT5_FIRST_DEAL: u64 = 5_000_000;

/// MT5: history deals keyed by deal ticket, selected by deal time, newest first as the
/// EA writes them. Each closed position gives one `entry_in` deal (for the first history
/// entry of its ticket, with the whole volume opened and half its commission) and one
/// `entry_out` deal per history entry (its profit, swap and the rest of the commission).
/// Deleted pending orders have no deals.
fn mt5_deals_text(st: &EaState, days: i64) -> String {
    let (from, to) = lookback_start(st, days);
    let in_window = |t: &str| mt_time_to_secs(t).is_some_and(|t| t >= from && t <= to);
    let mut seen = BTreeSet::new();
    let mut entries = Vec::new();
    let deal = |key: u64,
                c: &EaClosed,
                kind: &str,
                entry: &str,
                time: &str,
                price: f64,
                lots: f64,
                money: (f64, f64, f64)| {
        format!(
            "\"{key}\": {{\"magic\": {}, \"symbol\": \"{}\", \"lots\": {:.2}, \"type\": \"{kind}\", \"entry\": \"{entry}\", \"deal_time\": \"{time}\", \"deal_price\": {:.5}, \"pnl\": {:.2}, \"commission\": {:.2}, \"swap\": {:.2}, \"comment\": \"{}\"}}",
            c.magic,
            c.symbol,
            z(lots),
            z(price),
            z(money.0),
            z(money.1),
            z(money.2),
            c.comment
        )
    };
    for (i, c) in st.closed.iter().enumerate() {
        if !is_position(&c.kind) {
            continue;
        }
        let base = MT5_FIRST_DEAL + 2 * u64::try_from(i).unwrap_or(0);
        // A broker charging per side books half the commission on the entry deal (even
        // when that deal is older than the window) and the rest on the exit.
        let first = seen.insert(c.ticket);
        let in_share = if first {
            round_to(c.commission / 2.0, 2)
        } else {
            0.0
        };
        if first && in_window(&c.open_time) {
            let opened: f64 = st
                .closed
                .iter()
                .filter(|x| x.ticket == c.ticket)
                .map(|x| x.lots)
                .sum::<f64>()
                + st.orders
                    .iter()
                    .filter(|o| o.ticket == c.ticket)
                    .map(|o| o.lots)
                    .sum::<f64>();
            entries.push(deal(
                base,
                c,
                &c.kind,
                "entry_in",
                &c.open_time,
                c.open_price,
                round_to(opened, 2),
                (0.0, in_share, 0.0),
            ));
        }
        if in_window(&c.close_time) {
            let opposite = if c.kind == "buy" { "sell" } else { "buy" };
            entries.push(deal(
                base + 1,
                c,
                opposite,
                "entry_out",
                &c.close_time,
                c.close_price,
                c.lots,
                (c.pnl, round_to(c.commission - in_share, 2), c.swap),
            ));
        }
    }
    // The entry deal of each open position no close has written yet.
    for (j, o) in st
        .orders
        .iter()
        .filter(|o| is_position(&o.kind) && !seen.contains(&o.ticket))
        .enumerate()
    {
        if !in_window(&o.open_time) {
            continue;
        }
        let key = MT5_FIRST_DEAL + 2 * u64::try_from(st.closed.len() + j).unwrap_or(0);
        entries.push(format!(
            "\"{key}\": {{\"magic\": {}, \"symbol\": \"{}\", \"lots\": {:.2}, \"type\": \"{}\", \"entry\": \"entry_in\", \"deal_time\": \"{}\", \"deal_price\": {:.5}, \"pnl\": 0.00, \"commission\": {:.2}, \"swap\": 0.00, \"comment\": \"{}\"}}",
            o.magic,
            o.symbol,
            z(o.lots),
            o.kind,
            o.open_time,
            z(o.open_price),
            z(o.commission),
            o.comment
        ));
    }
    for x in &st.extra_deals {
        if in_window(&x.time) {
            entries.push(format!(
                "\"{}\": {{\"magic\": {}, \"symbol\": \"{}\", \"lots\": {:.2}, \"type\": \"{}\", \"entry\": \"{}\", \"deal_time\": \"{}\", \"deal_price\": {:.5}, \"pnl\": {:.2}, \"commission\": {:.2}, \"swap\": {:.2}, \"comment\": \"{}\"}}",
                x.ticket,
                x.magic,
                x.symbol,
                z(x.lots),
                x.kind,
                x.entry,
                x.time,
                z(x.price),
                z(x.pnl),
                z(x.commission),
                z(x.swap),
                x.comment
            ));
        }
    }
    // The EA walks the deals from the newest.
    entries.reverse();
    format!("{{{}}}", entries.join(", "))
}

// ---------------------------------------------------------------------------------------
// Helpers.

/// Truncate and write, as the EA's FileOpen(FILE_WRITE) + FileWrite does: the text plus
/// "\r\n", as bytes or as UTF-16LE with a BOM.
fn write_out(path: &Path, text: &str, utf16: bool) -> std::io::Result<()> {
    let full = format!("{text}\r\n");
    if utf16 {
        let mut bytes = vec![0xFF, 0xFE];
        for u in full.encode_utf16() {
            bytes.extend_from_slice(&u.to_le_bytes());
        }
        std::fs::write(path, bytes)
    } else {
        std::fs::write(path, full)
    }
}

/// Text of a file as the EA would read it: UTF-16LE when it starts with a BOM, else bytes.
pub fn decode(bytes: &[u8]) -> String {
    if let Some(rest) = bytes.strip_prefix(&[0xFF, 0xFE]) {
        let units: Vec<u16> = rest
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

/// -0.0 prints as "-0.00"; the EA's values would not.
fn z(x: f64) -> f64 {
    x + 0.0
}

fn round_to(x: f64, digits: i32) -> f64 {
    let p = 10f64.powi(digits);
    (x * p).round() / p
}

/// MQL StringToInteger: optional sign and leading digits, else 0.
fn mql_int(s: &str) -> i64 {
    let t = s.trim();
    let (neg, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let v = digits.parse::<i64>().unwrap_or(0);
    if neg { -v } else { v }
}

/// MQL StringToDouble, roughly: a number, else 0.
fn mql_double(s: &str) -> f64 {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|x| x.is_finite())
        .unwrap_or(0.0)
}

fn message_time(st: &EaState) -> String {
    mt_time_to_secs(&st.server_time).map_or_else(
        || st.server_time.clone(),
        |t| secs_to_mt_time(t - st.gmt_offset_secs),
    )
}

/// "YYYY.MM.DD HH:MM:SS" to seconds since 1970 (no time zone).
pub fn mt_time_to_secs(s: &str) -> Option<i64> {
    let (date, time) = s.trim().split_once(' ')?;
    let mut d = date.split('.').map(str::parse::<i64>);
    let (y, m, day) = (d.next()?.ok()?, d.next()?.ok()?, d.next()?.ok()?);
    let mut t = time.split(':').map(str::parse::<i64>);
    let (hh, mm, ss) = (t.next()?.ok()?, t.next()?.ok()?, t.next()?.ok()?);
    if d.next().is_some()
        || t.next().is_some()
        || !(1..=12).contains(&m)
        || !(1..=31).contains(&day)
    {
        return None;
    }
    Some(days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Seconds since 1970 to "YYYY.MM.DD HH:MM:SS".
pub fn secs_to_mt_time(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}.{m:02}.{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}
