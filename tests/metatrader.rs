//! MetaTrader 4 and 5 through the DWXConnect file bridge, against a fake EA that plays
//! the real one's file protocol in a temporary `MQL4/Files` (or `MQL5/Files`) folder:
//! reads, guarded orders tagged so a retry finds them, closes ticket by ticket, SL/TP
//! moves, and an EA that is stopped or slow.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use common::dwx_fake::{
    EaClosed, EaDeal, EaMode, EaOrder, EaState, FakeEa, Platform, SymbolSpec as EaSpec,
};
use serde_json::{Value, json};
use tradedesk_brokers::Broker;
use tradedesk_brokers::dwx::{DwxBroker, DwxConfig, LotRules, tag_of};
use tradedesk_brokers::sim::{Clock, ManualClock};
use tradedesk_tools::config::{ConfigNumber, State, TradingConfig, trading_for};
use tradedesk_tools::{ToolContext, call};

const MAGIC: i64 = 730_001;

fn scenario(platform: Platform) -> EaState {
    let mut s = EaState {
        platform,
        balance: 10_000.0,
        equity: 10_050.0,
        free_margin: 9_000.0,
        ..EaState::default()
    };
    s.prices.insert("EURUSD".into(), (1.08500, 1.08510));
    s.prices.insert("GBPUSD".into(), (1.26000, 1.26012));
    s.orders.push(EaOrder {
        ticket: 900,
        magic: 0,
        symbol: "EURUSD".into(),
        lots: 0.10,
        kind: "buy".into(),
        open_price: 1.08000,
        open_time: "2026.11.27 10:00:00".into(),
        sl: 1.07000,
        tp: 0.0,
        pnl: 50.0,
        commission: -0.70,
        swap: 0.0,
        comment: "manual".into(),
    });
    s.closed.push(EaClosed {
        ticket: 800,
        magic: 0,
        symbol: "GBPUSD".into(),
        lots: 0.20,
        kind: "buy".into(),
        open_time: "2026.11.20 09:00:00".into(),
        close_time: "2026.11.21 16:00:00".into(),
        open_price: 1.25000,
        close_price: 1.25500,
        sl: 0.0,
        tp: 0.0,
        pnl: 100.0,
        commission: -1.40,
        swap: -0.50,
        comment: "swing".into(),
    });
    s
}

fn config(
    files: &Path,
    platform: tradedesk_brokers::dwx::Platform,
    timeout: Duration,
) -> DwxConfig {
    DwxConfig {
        id: "MT".into(),
        files: files.to_path_buf(),
        platform,
        magic: MAGIC,
        live: false,
        server_time_zone: Some("Europe/Athens".into()),
        history_days: 30,
        timeout,
        symbols: std::collections::BTreeMap::new(),
        margin_mode: None,
        lots: std::collections::BTreeMap::new(),
    }
}

struct Desk {
    ctx: ToolContext,
    state: State,
    ea: FakeEa,
    _dir: tempfile::TempDir,
}

fn desk(platform: Platform, timeout: Duration) -> Desk {
    desk_with(scenario(platform), timeout)
}

fn desk_with(scenario: EaState, timeout: Duration) -> Desk {
    desk_mode(scenario, timeout, None)
}

fn desk_mode(
    scenario: EaState,
    timeout: Duration,
    margin_mode: Option<tradedesk_core::MarginMode>,
) -> Desk {
    desk_cfg(scenario, timeout, |c| c.margin_mode = margin_mode)
}

/// A desk whose account config `edit` changes (margin mode, lot rules, ...).
fn desk_cfg(scenario: EaState, timeout: Duration, edit: impl FnOnce(&mut DwxConfig)) -> Desk {
    let platform = scenario.platform;
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join(if platform == Platform::Mt5 {
        "MQL5/Files"
    } else {
        "MQL4/Files"
    });
    std::fs::create_dir_all(&files).unwrap();
    let ea = FakeEa::start(&files, scenario);
    let state = State::open(&dir.path().join("state")).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Utc::now()));
    let trading = TradingConfig {
        enabled: Some(true),
        max_order_notional: Some(ConfigNumber::Int(100_000)),
        max_daily_notional: Some(ConfigNumber::Int(1_000_000)),
        max_position_weight_pct: Some(ConfigNumber::Int(100_000)),
        ..TradingConfig::default()
    };
    let trading = trading_for(Some(&trading), Vec::new(), &state, clock).unwrap();
    let which = if platform == Platform::Mt5 {
        tradedesk_brokers::dwx::Platform::Mt5
    } else {
        tradedesk_brokers::dwx::Platform::Mt4
    };
    let mut account = config(&files, which, timeout);
    edit(&mut account);
    let mut ctx = ToolContext::new("test")
        .with_broker(Arc::new(DwxBroker::new(account)), None)
        .with_trading(Arc::new(trading));
    ctx.broker_timeout = timeout * 3;
    Desk {
        ctx,
        state,
        ea,
        _dir: dir,
    }
}

impl Desk {
    async fn call(&self, tool: &str, args: Value) -> Value {
        call(&self.ctx, tool, args).await.unwrap().structured
    }

    fn opens(&self) -> usize {
        self.ea
            .snapshot()
            .commands
            .iter()
            .filter(|(_, c, _)| c == "OPEN_ORDER")
            .count()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_positions_quotes_and_closed_trades_read_from_the_files() {
    for platform in [Platform::Mt4, Platform::Mt5] {
        let d = desk(platform, Duration::from_secs(5));
        let positions = d.call("get_positions", json!({})).await;
        assert_eq!(positions["status"], "ok", "{platform:?}: {positions:#}");
        let eur = &positions["positions"][0];
        assert_eq!(
            (
                eur["exchange"].as_str(),
                eur["symbol"].as_str(),
                eur["quantity"].as_f64()
            ),
            (Some("FX"), Some("EURUSD"), Some(0.1)),
            "{platform:?}: {positions:#}"
        );
        // Marked at the EA's bid/ask mid.
        assert_eq!(eur["market_price"], 1.08505, "{positions:#}");
        // 0.20 lots of GBPUSD, 1.25000 to 1.25500: 0.005 x 20,000 = 100.00 gross.
        let pnl = d
            .call(
                "get_realized_pnl",
                json!({"start": "2026-11-01", "end": "2026-11-30"}),
            )
            .await;
        assert_eq!(pnl["gross_pnl"], 100.0, "{platform:?}: {pnl:#}");
        assert_eq!(pnl["commissions"], 1.4, "{platform:?}: {pnl:#}");
        let q = d
            .call("get_quote", json!({"account": "MT", "symbol": "EURUSD"}))
            .await;
        assert_eq!(q["spread_pips"], 1.0, "{q:#}");
        let health = d.call("get_server_health", json!({})).await;
        assert_eq!(health["brokers"][0]["status"], "ok", "{health:#}");
        assert!(
            health["brokers"][0]["detail"]
                .as_str()
                .unwrap()
                .contains("5550123"),
            "{health:#}"
        );
        assert_eq!(
            health["reconciliation"].as_array().map(Vec::len),
            Some(0),
            "{platform:?}: {health:#}"
        );
        let accounts = d.call("get_accounts", json!({})).await;
        assert_eq!(accounts["accounts"][0]["cash"], 10000.0, "{accounts:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mt5_books_a_yen_pairs_pnl_in_the_account_currency_and_cash_is_the_balance() {
    // A closed USDJPY trade makes its P&L in yen; MetaTrader 5 books it in dollars. The
    // yen are shown converted out, and the dollar cash is the balance MetaTrader reports.
    let mut s = scenario(Platform::Mt5);
    s.closed.push(EaClosed {
        ticket: 801,
        magic: 0,
        symbol: "USDJPY".into(),
        lots: 0.10,
        kind: "buy".into(),
        open_time: "2026.11.24 09:00:00".into(),
        close_time: "2026.11.25 16:00:00".into(),
        open_price: 150.000,
        close_price: 151.000,
        sl: 0.0,
        tp: 0.0,
        pnl: 66.23,
        commission: -0.70,
        swap: 0.0,
        comment: "yen".into(),
    });
    let d = desk_with(s, Duration::from_secs(5));
    let accounts = d.call("get_accounts", json!({})).await;
    assert_eq!(accounts["status"], "ok", "{accounts:#}");
    assert_eq!(accounts["accounts"][0]["cash"], 10000.0, "{accounts:#}");
    assert!(
        accounts.to_string().contains("converts each trade's P&L"),
        "{accounts:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_pass_every_guard_and_carry_the_magic_and_the_tag() {
    let d = desk(Platform::Mt4, Duration::from_secs(5));
    let placed = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.05,
                "stop_loss": 1.07, "take_profit": 1.1, "comment": "breakout, london open session",
                "client_order_id": "mt-1"}),
        )
        .await;
    assert_eq!(placed["status"], "ok", "{placed:#}");
    assert_eq!(placed["outcome"], "filled", "{placed:#}");
    assert!(
        placed["message"]
            .as_str()
            .unwrap()
            .contains("comment was changed"),
        "{placed:#}"
    );
    let ea = d.ea.snapshot();
    let order = ea.orders.iter().find(|o| o.magic == MAGIC).unwrap();
    assert!(
        order.comment.starts_with(&tag_of("mt-1")),
        "{}",
        order.comment
    );
    assert!(order.comment.len() <= 31);
    assert_eq!((order.lots, order.sl, order.tp), (0.05, 1.07, 1.1));
    // A retry is the stored outcome: no second OPEN_ORDER.
    let again = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.05,
                "stop_loss": 1.07, "take_profit": 1.1, "comment": "breakout, london open session",
                "client_order_id": "mt-1"}),
        )
        .await;
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(d.opens(), 1);
    // The guards: lot step, SL on the wrong side, the kill-switch-free path of a close.
    let off_step = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.015}),
        )
        .await;
    assert_eq!(off_step["error"]["rule"], "lot_step", "{off_step:#}");
    let wrong_sl = d
        .call("place_order", json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.01, "stop_loss": 1.2}))
        .await;
    assert_eq!(wrong_sl["error"]["code"], "invalid_order", "{wrong_sl:#}");
    assert_eq!(d.opens(), 1);
    // The broker refusing: broker_rejected, with its words.
    d.ea.set_mode(EaMode::RejectNextOpen);
    let refused = d
        .call("place_order", json!({"account": "MT", "symbol": "GBPUSD", "side": "sell", "quantity": 0.01, "client_order_id": "mt-2"}))
        .await;
    assert_eq!(refused["error"]["code"], "broker_rejected", "{refused:#}");
    assert!(
        refused.to_string().contains("not enough money"),
        "{refused:#}"
    );
    // A pending limit is an accepted order, listed and cancelled by its client id.
    let resting = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.02, "type": "limit",
                "limit_price": 1.07, "time_in_force": "gtc", "client_order_id": "mt-3"}),
        )
        .await;
    assert_eq!(resting["outcome"], "accepted", "{resting:#}");
    let open = d.call("get_orders", json!({"account": "MT"})).await;
    assert_eq!(open["count"], 1, "{open:#}");
    let cancelled = d
        .call(
            "cancel_order",
            json!({"account": "MT", "client_order_id": "mt-3"}),
        )
        .await;
    assert_eq!(cancelled["outcome"], "cancelled", "{cancelled:#}");
    // SL/TP moved on every EURUSD ticket.
    let moved = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "EURUSD", "stop_loss": 1.075}),
        )
        .await;
    assert_eq!(moved["status"], "ok", "{moved:#}");
    let ea = d.ea.snapshot();
    assert!(
        ea.orders
            .iter()
            .filter(|o| o.symbol == "EURUSD")
            .all(|o| o.sl == 1.075),
        "{:?}",
        ea.orders
    );
    // A partial close closes the oldest ticket's lots; no opposite order is sent.
    let closed = d
        .call("close_position", json!({"account": "MT", "symbol": "EURUSD", "quantity": 0.05, "client_order_id": "c-1"}))
        .await;
    assert_eq!(closed["status"], "ok", "{closed:#}");
    let ea = d.ea.snapshot();
    assert_eq!(d.opens(), 3, "a close never opens");
    let eur: f64 = ea
        .orders
        .iter()
        .filter(|o| o.symbol == "EURUSD")
        .map(|o| o.lots)
        .sum();
    assert!((eur - 0.10).abs() < 1e-9, "0.15 - 0.05: {:?}", ea.orders);
    assert!(
        ea.commands
            .iter()
            .any(|(_, c, body)| c == "CLOSE_ORDER" && body.starts_with("900,"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_whose_answer_is_late_is_uncertain_then_found_never_resent() {
    let d = desk(Platform::Mt5, Duration::from_millis(600));
    // A slow broker; and comments rewritten, so only the fallback match can find it.
    d.ea.set_mode(EaMode::DelayOrders(Duration::from_millis(1_500)));
    let started = Instant::now();
    let late = d
        .call("place_order", json!({"account": "MT", "symbol": "GBPUSD", "side": "buy", "quantity": 0.03, "client_order_id": "slow-1"}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(late["error"]["code"], "uncertain", "{late:#}");
    assert_eq!(d.opens(), 1);
    tokio::time::sleep(Duration::from_millis(1_600)).await;
    let retry = d
        .call("place_order", json!({"account": "MT", "symbol": "GBPUSD", "side": "buy", "quantity": 0.03, "client_order_id": "slow-1"}))
        .await;
    assert_eq!(retry["status"], "ok", "found by lookup: {retry:#}");
    assert_eq!(d.opens(), 1, "never sent twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_comment_still_finds_the_order_by_symbol_lots_side_and_magic() {
    let d = desk(Platform::Mt4, Duration::from_secs(3));
    d.ea.set_mode(EaMode::RewriteComments);
    let placed = d
        .call("place_order", json!({"account": "MT", "symbol": "GBPUSD", "side": "sell", "quantity": 0.04, "comment": "a long comment the broker cuts", "client_order_id": "rw-1"}))
        .await;
    assert_eq!(placed["status"], "ok", "{placed:#}");
    assert_eq!(d.opens(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_ea_answers_unavailable_with_the_installation_hint() {
    let d = desk(Platform::Mt4, Duration::from_millis(800));
    d.ea.set_mode(EaMode::Frozen);
    // The orders file stops being rewritten: stale after a few seconds.
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("MQL4/Files");
    std::fs::create_dir_all(&empty).unwrap();
    let nothing = DwxBroker::new(config(
        &empty,
        tradedesk_brokers::dwx::Platform::Mt4,
        Duration::from_millis(500),
    ));
    let started = Instant::now();
    let h = nothing.health().await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(h[0].status, tradedesk_brokers::HealthStatus::Down);
    let hint = h[0].hint.clone().unwrap();
    assert!(
        hint.contains("dwxconnect") && hint.contains("AutoTrading"),
        "{hint}"
    );
    // A frozen EA takes no command: an order is refused as not sent, within the bound.
    let started = Instant::now();
    let refused = d
        .call("place_order", json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.01, "client_order_id": "fz-1"}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(6));
    assert_eq!(refused["status"], "error", "{refused:#}");
    assert_eq!(d.opens(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_ea_times_out_reads_and_sends_no_order() {
    let d = desk(Platform::Mt4, Duration::from_millis(700));
    // A first command (the quote's subscription) resets the EA's ids.
    let q = d
        .call("get_quote", json!({"account": "MT", "symbol": "EURUSD"}))
        .await;
    assert_eq!(q["status"], "ok", "{q:#}");
    d.ea.set_mode(EaMode::Frozen);
    // Reads that need the EA: broker_timeout within the bound.
    let started = Instant::now();
    let hung = d.call("get_positions", json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(hung["error"]["code"], "broker_timeout", "{hung:#}");
    // An order while the EA hangs: the guards' own reads time out first; nothing is sent.
    let refused = d
        .call("place_order", json!({"account": "MT", "symbol": "EURUSD", "side": "buy", "quantity": 0.01, "client_order_id": "hang-0"}))
        .await;
    assert_eq!(refused["status"], "error", "{refused:#}");
    d.ea.set_mode(EaMode::Normal);
    d.ea.settle().await;
    assert_eq!(d.opens(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_the_ea_has_not_taken_is_withdrawn_on_lookup_and_never_runs() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("MQL4/Files");
    std::fs::create_dir_all(&files).unwrap();
    let ea = FakeEa::start(&files, scenario(Platform::Mt4));
    let broker = DwxBroker::new(config(
        &files,
        tradedesk_brokers::dwx::Platform::Mt4,
        Duration::from_millis(600),
    ));
    // A first command resets the EA's ids; then the EA hangs.
    broker.quote("MT", "EURUSD").await.unwrap();
    ea.set_mode(EaMode::Frozen);
    let quantity = rust_decimal::Decimal::new(1, 2);
    let order = tradedesk_core::OrderRequest {
        terms: tradedesk_core::OrderTerms::market(
            "MT",
            tradedesk_core::Side::Buy,
            tradedesk_core::Mode::Paper,
        ),
        key: tradedesk_core::InstrumentKey::new("FX", "EURUSD"),
        quantity,
        client_order_id: "hang-1".into(),
        reduce_only: false,
    };
    match broker.place(&order).await {
        Err(tradedesk_brokers::BrokerError::Uncertain { .. }) => {}
        other => panic!("{other:?}"),
    }
    let slots = || {
        std::fs::read_dir(ea.dir())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| e.file_name().to_string_lossy().starts_with("DWX_Commands_"))
            .count()
    };
    assert_eq!(slots(), 1, "the command waits for the EA");
    // The lookup withdraws it: not found, and it can never run.
    assert!(broker.find_order("MT", "hang-1").await.unwrap().is_none());
    assert_eq!(slots(), 0);
    ea.set_mode(EaMode::Normal);
    ea.settle().await;
    let opens = ea
        .snapshot()
        .commands
        .iter()
        .filter(|(_, c, _)| c == "OPEN_ORDER")
        .count();
    assert_eq!(opens, 0, "the EA never saw the order");
}

/// A cross in a USD account: EURGBP pays its P&L in GBP, which the terminal converts with
/// its own GBPUSD quote; the adapter asks the EA for it (docs/methodology/fx.md).
/// 0.10 lots of EURGBP bought at 0.85000, marked at the mid 0.85105: 10,000 x 0.00105 =
/// GBP 10.50; GBPUSD's mid 1.26006 makes it USD 13.23 (13.23063).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_converts_through_the_terminals_own_quote() {
    for platform in [Platform::Mt4, Platform::Mt5] {
        let mut s = scenario(platform);
        s.prices.insert("EURGBP".into(), (0.85100, 0.85110));
        s.orders.push(EaOrder {
            ticket: 901,
            magic: 0,
            symbol: "EURGBP".into(),
            lots: 0.10,
            kind: "buy".into(),
            open_price: 0.85000,
            open_time: "2026.11.27 11:00:00".into(),
            sl: 0.0,
            tp: 0.0,
            pnl: 13.23,
            commission: 0.0,
            swap: 0.0,
            comment: "cross".into(),
        });
        let d = desk_with(s, Duration::from_secs(5));
        let positions = d.call("get_positions", json!({"symbol": "EURGBP"})).await;
        assert_eq!(positions["status"], "ok", "{platform:?}: {positions:#}");
        let cross = &positions["positions"][0];
        assert_eq!(cross["instrument_currency"], "GBP", "{positions:#}");
        assert_eq!(cross["market_value"], 10.5, "{platform:?}: {positions:#}");
        assert_eq!(
            cross["market_value_converted"], 13.23,
            "{platform:?}: {positions:#}"
        );
        let accounts = d.call("get_accounts", json!({})).await;
        assert_eq!(accounts["status"], "ok", "{accounts:#}");
        let health = d.call("get_server_health", json!({})).await;
        let pairs = health["fx"]["pairs"].as_array().unwrap();
        assert!(
            pairs
                .iter()
                .any(|p| p["base"] == "GBP" && p["quote"] == "USD" && p["rate"] == 1.26006),
            "{platform:?}: {health:#}"
        );
        assert_eq!(health["fx"]["missing"], json!([]), "{health:#}");
    }
}

/// MT4 writes a closed trade's profit in the account's currency: a EURGBP trade, 0.10 lots
/// from 0.85000 to 0.85500, makes GBP 50.00 (0.005 x 10,000), which the terminal booked as
/// USD 63.00: its rate 1.26 on the closing date converts the lot to the terminal's own
/// figure (the GBPUSD fill of that day, 1.25500, would give 62.75).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mt4_converts_a_closed_cross_at_the_rate_its_own_profit_implies() {
    let mut s = scenario(Platform::Mt4);
    s.closed.push(EaClosed {
        ticket: 801,
        magic: 0,
        symbol: "EURGBP".into(),
        lots: 0.10,
        kind: "buy".into(),
        open_time: "2026.11.20 10:00:00".into(),
        close_time: "2026.11.21 17:00:00".into(),
        open_price: 0.85000,
        close_price: 0.85500,
        sl: 0.0,
        tp: 0.0,
        pnl: 63.0,
        commission: 0.0,
        swap: 0.0,
        comment: "cross".into(),
    });
    let d = desk_with(s, Duration::from_secs(5));
    let pnl = d
        .call(
            "get_realized_pnl",
            json!({"start": "2026-11-01", "end": "2026-11-30", "symbol": "EURGBP"}),
        )
        .await;
    assert_eq!(pnl["status"], "ok", "{pnl:#}");
    assert_eq!(pnl["gross_pnl"], 63.0, "{pnl:#}");
    assert!(
        pnl["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("implied by closed trades' own profit")),
        "{pnl:#}"
    );
}

/// The EA writes comments raw: a `"` or `\` in one (typed in the terminal) is read, and
/// the comment comes back as written. A file that is truly broken is named, with what is
/// wrong in it, instead of a stopped EA or a timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quote_or_backslash_in_a_comment_is_read_and_a_broken_file_is_named() {
    for utf16 in [false, true] {
        let mut s = scenario(Platform::Mt4);
        s.utf16 = utf16;
        s.orders[0].comment = r#"my "best" C:\trades\x"#.into();
        s.orders.push(EaOrder {
            ticket: 902,
            magic: 0,
            symbol: "EURUSD".into(),
            lots: 0.01,
            kind: "buylimit".into(),
            open_price: 1.07,
            open_time: "2026.11.28 10:00:00".into(),
            sl: 0.0,
            tp: 0.0,
            pnl: 0.0,
            commission: 0.0,
            swap: 0.0,
            comment: r#"dip \ "buy""#.into(),
        });
        s.closed[0].comment = r#"closed "early""#.into();
        let d = desk_with(s, Duration::from_secs(2));
        let positions = d.call("get_positions", json!({})).await;
        assert_eq!(positions["status"], "ok", "utf16 {utf16}: {positions:#}");
        let orders = d.call("get_orders", json!({"account": "MT"})).await;
        assert_eq!(
            orders["orders"][0]["comment"], r#"dip \ "buy""#,
            "{orders:#}"
        );
        let pnl = d
            .call(
                "get_realized_pnl",
                json!({"start": "2026-11-01", "end": "2026-11-30"}),
            )
            .await;
        assert_eq!(pnl["gross_pnl"], 100.0, "{pnl:#}");
    }
    // A comment that closes its string early and opens a key with no value: no JSON.
    let mut s = scenario(Platform::Mt4);
    s.orders[0].comment = r#"x", "y"#.into();
    let d = desk_with(s, Duration::from_millis(600));
    let started = Instant::now();
    let broken = d.call("get_positions", json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(broken["error"]["code"], "broker_unavailable", "{broken:#}");
    let message = broken["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("DWX_Orders.txt cannot be read") && message.contains("near `"),
        "{broken:#}"
    );
    let hint = broken["error"]["hint"].as_str().unwrap();
    assert!(!hint.contains("install"), "{hint}");
}

// ---------------------------------------------------------------------------------------
// Every figure the terminal's own, with no symbol stated in the config: a USD account
// holding FX majors, a cross, a JPY pair, gold, an index CFD and an oil CFD. The fake
// broker holds the symbols' specs; the EA writes only each trade's pnl and the market
// data's tick value, as the real one does.

fn spec(contract_size: f64, tick_size: f64, profit_to_account: f64) -> EaSpec {
    EaSpec {
        contract_size,
        tick_size,
        profit_to_account,
    }
}

#[allow(clippy::too_many_arguments)]
fn trade(
    ticket: u64,
    symbol: &str,
    kind: &str,
    lots: f64,
    times: (&str, &str),
    prices: (f64, f64),
    pnl: f64,
    commission: f64,
    swap: f64,
) -> EaClosed {
    EaClosed {
        ticket,
        magic: 0,
        symbol: symbol.into(),
        lots,
        kind: kind.into(),
        open_time: times.0.into(),
        close_time: times.1.into(),
        open_price: prices.0,
        close_price: prices.1,
        sl: 0.0,
        tp: 0.0,
        pnl,
        commission,
        swap,
        comment: String::new(),
    }
}

fn position(ticket: u64, symbol: &str, kind: &str, lots: f64, price: f64, pnl: f64) -> EaOrder {
    EaOrder {
        ticket,
        magic: 0,
        symbol: symbol.into(),
        lots,
        kind: kind.into(),
        open_price: price,
        open_time: "2026.11.26 10:00:00".into(),
        sl: 0.0,
        tp: 0.0,
        pnl,
        commission: 0.0,
        swap: 0.0,
        comment: String::new(),
    }
}

/// The terminal, worked by hand. Closed (in the account's USD, as the terminal books them):
/// * GBPUSD 0.20 lots 1.25000 to 1.25500: 0.005 x 20,000 = 100.00;
/// * USDJPY 0.10 lots 150.000 to 151.000: JPY 10,000 at 151.000 = 66.23, commission 1.40;
/// * GER40 1 lot 18,000 to 18,100, 1 EUR a point, EURUSD 1.09 then: 109.00;
/// * XBRUSD 1 lot 75.00 to 75.20, 100 barrels a lot: 20.00;
/// * XAUUSD 0.10 lots 2,000.00 to 2,010.00, 100 oz: 100.00, swap -2.10;
/// * EURGBP 0.10 lots 0.85000 to 0.85500: GBP 50.00 at GBPUSD 1.26 = 63.00.
///
/// Open: GER40 1 lot from 18,000, marked 18,199 (199 EUR x 1.0845 = 215.82); EURGBP 0.10
/// lots from 0.85000, bid 0.85100 (GBP 10.00 at 1.26 = 12.60); EURUSD 0.10 from 1.08000
/// (45.00); USDJPY 0.10 sold at 152.000 (JPY 10,000 at 151 = 66.23); XAUUSD 0.10 from
/// 2,000.00 (50.00); XBRUSD 1 lot sold at 75.50 (40.00). The terminal marks each ticket
/// itself and its equity is the balance plus their profit.
fn terminal(platform: Platform) -> EaState {
    let mut s = EaState {
        platform,
        balance: 10_000.0,
        equity: 10_000.0,
        free_margin: 9_000.0,
        mark_to_market: true,
        ..EaState::default()
    };
    for (symbol, bid, ask) in [
        ("EURUSD", 1.0845, 1.0845),
        ("GBPUSD", 1.26, 1.26),
        ("USDJPY", 151.0, 151.0),
        ("EURGBP", 0.851, 0.851),
        ("GER40", 18_199.0, 18_199.0),
        ("XBRUSD", 75.1, 75.1),
        ("XAUUSD", 2_005.0, 2_005.0),
    ] {
        s.prices.insert(symbol.into(), (bid, ask));
    }
    for (symbol, spec) in [
        ("GER40", spec(1.0, 0.01, 1.0845)),
        ("XBRUSD", spec(100.0, 0.01, 1.0)),
        ("XAUUSD", spec(100.0, 0.01, 1.0)),
        ("USDJPY", spec(100_000.0, 0.001, 1.0 / 151.0)),
        ("EURGBP", spec(100_000.0, 0.00001, 1.26)),
    ] {
        s.specs.insert(symbol.into(), spec);
    }
    let day = |d: u32, h: u32| format!("2026.11.{d:02} {h:02}:00:00");
    s.closed = vec![
        trade(
            801,
            "GBPUSD",
            "buy",
            0.2,
            (&day(20, 9), &day(21, 16)),
            (1.25, 1.255),
            100.0,
            0.0,
            0.0,
        ),
        trade(
            802,
            "USDJPY",
            "buy",
            0.1,
            (&day(23, 9), &day(24, 16)),
            (150.0, 151.0),
            66.23,
            -1.40,
            0.0,
        ),
        trade(
            803,
            "GER40",
            "buy",
            1.0,
            (&day(24, 11), &day(24, 15)),
            (18_000.0, 18_100.0),
            109.0,
            0.0,
            0.0,
        ),
        trade(
            804,
            "XBRUSD",
            "buy",
            1.0,
            (&day(25, 10), &day(25, 12)),
            (75.0, 75.2),
            20.0,
            0.0,
            0.0,
        ),
        trade(
            805,
            "XAUUSD",
            "buy",
            0.1,
            (&day(25, 13), &day(26, 9)),
            (2_000.0, 2_010.0),
            100.0,
            0.0,
            -2.10,
        ),
        trade(
            806,
            "EURGBP",
            "buy",
            0.1,
            (&day(26, 10), &day(26, 17)),
            (0.85, 0.855),
            63.0,
            0.0,
            0.0,
        ),
    ];
    s.orders = vec![
        position(900, "GER40", "buy", 1.0, 18_000.0, 215.82),
        position(901, "EURGBP", "buy", 0.1, 0.85, 12.6),
        position(902, "EURUSD", "buy", 0.1, 1.08, 45.0),
        position(903, "USDJPY", "sell", 0.1, 152.0, 66.23),
        position(904, "XAUUSD", "buy", 0.1, 2_000.0, 50.0),
        position(905, "XBRUSD", "sell", 1.0, 75.5, 40.0),
    ];
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_figure_is_the_terminals_own_on_mt4_and_mt5() {
    for platform in [Platform::Mt4, Platform::Mt5] {
        let d = desk_with(terminal(platform), Duration::from_secs(5));
        let pnl = d
            .call(
                "get_realized_pnl",
                json!({"start": "2026-11-01", "end": "2026-11-30", "group_by": "symbol"}),
            )
            .await;
        assert_eq!(pnl["status"], "ok", "{platform:?}: {pnl:#}");
        let group = |key: &str| {
            pnl["groups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|g| g["key"] == key)
                .unwrap_or_else(|| panic!("{platform:?}: no {key}: {pnl:#}"))
                .clone()
        };
        for (key, gross, commissions) in [
            ("FX:GBPUSD", 100.0, 0.0),
            ("FX:USDJPY", 66.23, 1.40),
            ("CFD:GER40", 109.0, 0.0),
            ("CFD:XBRUSD", 20.0, 0.0),
            ("FX:XAUUSD", 100.0, 0.0),
            ("FX:EURGBP", 63.0, 0.0),
        ] {
            let g = group(key);
            assert_eq!(
                (g["gross_pnl"].as_f64(), g["commissions"].as_f64()),
                (Some(gross), Some(commissions)),
                "{platform:?} {key}: {g:#}"
            );
        }
        assert_eq!(pnl["net_pnl"], 456.83, "{platform:?}: {pnl:#}");
        let notes = pnl["notes"].to_string();
        assert!(
            notes.contains("1 EUR a point a lot is assumed"),
            "{platform:?}: {notes}"
        );
        assert!(
            notes.contains("100 USD a point a lot"),
            "{platform:?}: {notes}"
        );

        let positions = d.call("get_positions", json!({})).await;
        assert_eq!(positions["status"], "ok", "{platform:?}: {positions:#}");
        let row = |symbol: &str| {
            positions["positions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["symbol"] == symbol)
                .unwrap()
                .clone()
        };
        let ger = row("GER40");
        assert_eq!(ger["instrument_currency"], "EUR", "{ger:#}");
        assert_eq!(ger["unrealized_pnl"], 199.0, "{ger:#}");
        assert_eq!(ger["unrealized_pnl_converted"], 215.82, "{ger:#}");
        let cross = row("EURGBP");
        assert_eq!(cross["unrealized_pnl_converted"], 12.6, "{cross:#}");
        // Every open ticket's P&L is the terminal's own, to the cent.
        let ea = d.ea.snapshot();
        for o in &ea.orders {
            let r = row(&o.symbol);
            assert_eq!(
                r["unrealized_pnl_converted"].as_f64(),
                Some(o.pnl),
                "{platform:?} {}: {r:#}",
                o.symbol
            );
            assert_eq!(r["tickets"][0]["profit"].as_f64(), Some(o.pnl), "{r:#}");
        }
        // The account's figures are the terminal's: equity 10,429.65 (the balance and
        // the six tickets' profit), free margin as written, margin the difference.
        let accounts = d.call("get_accounts", json!({})).await;
        let a = &accounts["accounts"][0];
        assert_eq!(ea.equity, 10_429.65, "{platform:?}");
        assert_eq!(
            (
                a["broker_equity"].as_f64(),
                a["free_margin"].as_f64(),
                a["margin_used"].as_f64(),
                a["margin_level"].as_f64(),
                a["leverage"].as_f64()
            ),
            (
                Some(ea.equity),
                Some(ea.free_margin),
                Some(1_429.65),
                Some(729.52),
                Some(100.0)
            ),
            "{platform:?}: {accounts:#}"
        );
        for (tool, args) in [
            ("get_accounts", json!({})),
            ("get_portfolio_summary", json!({})),
            ("get_exposure", json!({"by": "symbol"})),
        ] {
            let r = d.call(tool, args).await;
            assert_eq!(r["status"], "ok", "{platform:?} {tool}: {r:#}");
        }
    }
}

/// MT5 reads deals: a position opened before the history read (30 days) and closed
/// inside it has only its `entry_out` deal; it is a close, never a short, and its P&L is
/// the deal's own. One partly closed inside the read keeps its open ticket, which opens it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mt5_closing_deals_of_positions_older_than_the_read_close_and_keep_their_pnl() {
    let mut s = scenario(Platform::Mt5);
    s.prices.insert("NZDUSD".into(), (0.605, 0.605));
    // 0.10 AUDUSD, 0.65000 to 0.66000: 0.01 x 10,000 = 100.00; commission 0.70 a side.
    s.closed.push(trade(
        810,
        "AUDUSD",
        "buy",
        0.1,
        ("2026.10.01 10:00:00", "2026.11.10 10:00:00"),
        (0.65, 0.66),
        100.0,
        -1.40,
        0.0,
    ));
    // 0.10 NZDUSD from 0.60000; 0.05 closed at 0.61000 (50.00), 0.05 still open.
    s.closed.push(trade(
        811,
        "NZDUSD",
        "buy",
        0.05,
        ("2026.10.01 10:00:00", "2026.11.12 10:00:00"),
        (0.6, 0.61),
        50.0,
        0.0,
        0.0,
    ));
    let mut rest = position(811, "NZDUSD", "buy", 0.05, 0.6, 25.0);
    rest.open_time = "2026.10.01 10:00:00".into();
    s.orders.push(rest);
    let d = desk_with(s, Duration::from_secs(5));
    let positions = d.call("get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let symbols: Vec<(&str, f64)> = positions["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["symbol"].as_str().unwrap(),
                p["quantity"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        symbols,
        vec![("EURUSD", 0.1), ("NZDUSD", 0.05)],
        "{positions:#}"
    );
    let nzd = &positions["positions"][1];
    assert_eq!(nzd["unrealized_pnl"], 25.0, "{nzd:#}");
    let pnl = d
        .call(
            "get_realized_pnl",
            json!({"start": "2026-11-01", "end": "2026-11-30", "group_by": "symbol"}),
        )
        .await;
    let group = |key: &str| {
        pnl["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| g["key"] == key)
            .unwrap_or_else(|| panic!("no {key}: {pnl:#}"))
            .clone()
    };
    assert_eq!(group("FX:AUDUSD")["gross_pnl"], 100.0, "{pnl:#}");
    // Only the exit's half of the commission is inside the read.
    assert_eq!(group("FX:AUDUSD")["commissions"], 0.7, "{pnl:#}");
    assert_eq!(group("FX:NZDUSD")["gross_pnl"], 50.0, "{pnl:#}");
    assert!(
        pnl["notes"]
            .to_string()
            .contains("opened before the history read and closed inside it"),
        "{pnl:#}"
    );
    let health = d.call("get_server_health", json!({})).await;
    assert_eq!(
        health["unexplained_closes"]
            .as_array()
            .map(Vec::len)
            .unwrap_or(0),
        0,
        "{health:#}"
    );
}

/// An MT5 netting account reverses with one `in_out` deal: long 0.10 EURUSD from 1.08000
/// (entry_in), then a sell of 0.30 at 1.09000 closes the 0.10 (0.01 x 10,000 = 100.00)
/// and leaves 0.20 short, the one open position. The files are ANSI (code page 1252),
/// with an accented comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mt5_netting_reversal_closes_and_opens_and_ansi_files_are_read() {
    let mut s = scenario(Platform::Mt5);
    s.ansi = true;
    s.orders.clear();
    s.closed.clear();
    let deal = |ticket: u64, kind: &str, entry: &str, time: &str, lots: f64, pnl: f64| EaDeal {
        ticket,
        magic: 0,
        symbol: "EURUSD".into(),
        lots,
        kind: kind.into(),
        entry: entry.into(),
        time: time.into(),
        price: if entry == "entry_in" { 1.08 } else { 1.09 },
        pnl,
        commission: 0.0,
        swap: 0.0,
        comment: "réversal".into(),
    };
    s.extra_deals = vec![
        deal(7001, "buy", "entry_in", "2026.11.02 10:00:00", 0.1, 0.0),
        deal(7002, "sell", "in_out", "2026.11.03 10:00:00", 0.3, 100.0),
    ];
    let mut short = position(7001, "EURUSD", "sell", 0.2, 1.09, 9.8);
    short.open_time = "2026.11.03 10:00:00".into();
    short.comment = "réversal".into();
    s.orders.push(short);
    let d = desk_with(s, Duration::from_secs(5));
    let positions = d.call("get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    assert_eq!(positions["positions"][0]["quantity"], -0.2, "{positions:#}");
    let pnl = d
        .call(
            "get_realized_pnl",
            json!({"start": "2026-11-01", "end": "2026-11-30"}),
        )
        .await;
    assert_eq!(pnl["gross_pnl"], 100.0, "{pnl:#}");
    let health = d.call("get_server_health", json!({})).await;
    assert_eq!(health["reconciliation"], json!([]), "{health:#}");
}

/// A hedging MT4 account holding gold both ways: ticket 910 bought 0.10 lots at 2,000.00
/// (profit 50.00 at the bid of 2,005.00, 100 oz a lot), ticket 911 sold 0.05 lots at
/// 2,001.00 (loss 20.00 at the ask of 2,005.00). In the history, ticket 700 bought 0.10
/// at 2,000 and sold at 2,010 (100.00) while ticket 701 sold 0.10 at 2,005 and bought
/// back at 2,008 (-30.00), each its own position.
fn gold_hedged() -> EaState {
    let mut s = EaState {
        platform: Platform::Mt4,
        balance: 10_070.0,
        equity: 10_100.0,
        free_margin: 9_500.0,
        mark_to_market: true,
        ..EaState::default()
    };
    s.prices.insert("XAUUSD".into(), (2_005.0, 2_005.0));
    s.specs.insert("XAUUSD".into(), spec(100.0, 0.01, 1.0));
    let day = |d: u32, h: u32| format!("2026.11.{d:02} {h:02}:00:00");
    s.closed = vec![
        trade(
            700,
            "XAUUSD",
            "buy",
            0.1,
            (&day(25, 13), &day(26, 9)),
            (2_000.0, 2_010.0),
            100.0,
            0.0,
            0.0,
        ),
        trade(
            701,
            "XAUUSD",
            "sell",
            0.1,
            (&day(25, 14), &day(26, 10)),
            (2_005.0, 2_008.0),
            -30.0,
            0.0,
            0.0,
        ),
    ];
    let mut buy = position(910, "XAUUSD", "buy", 0.10, 2_000.0, 50.0);
    buy.swap = -1.20;
    buy.commission = -0.70;
    buy.comment = "gold long".into();
    buy.magic = 42;
    let mut sell = position(911, "XAUUSD", "sell", 0.05, 2_001.0, -20.0);
    sell.open_time = "2026.11.27 12:00:00".into();
    s.orders = vec![buy, sell];
    s
}

/// The gold volumes the terminal's Specification window shows, as the config states them.
fn gold_lots(c: &mut DwxConfig) {
    c.lots.insert(
        "XAUUSD".into(),
        LotRules {
            step: Some("0.01".parse().unwrap()),
            min: Some("0.01".parse().unwrap()),
            max: Some("50".parse().unwrap()),
        },
    );
}

fn gold_rows(positions: &Value) -> Vec<&Value> {
    positions["positions"]
        .as_array()
        .unwrap_or_else(|| panic!("{positions:#}"))
        .iter()
        .filter(|p| p["symbol"] == "XAUUSD")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedging_mt4_account_runs_the_three_gold_scenarios_ticket_by_ticket() {
    let d = desk_cfg(gold_hedged(), Duration::from_secs(5), gold_lots);

    // The account says how it holds positions; each ticket is its own position.
    let accounts = d.call("get_accounts", json!({})).await;
    assert_eq!(
        accounts["accounts"][0]["margin_mode"], "hedging",
        "{accounts:#}"
    );
    let positions = d.call("get_positions", json!({})).await;
    let gold = gold_rows(&positions);
    assert_eq!(gold.len(), 2, "a long and a short row: {positions:#}");
    let long = gold.iter().find(|p| p["side"] == "long").unwrap();
    let short = gold.iter().find(|p| p["side"] == "short").unwrap();
    // Never netted: 0.10 long at 2,000 and 0.05 short at 2,001 (netted, FIFO would
    // leave 0.05 long and realize 5.00).
    assert_eq!(
        (long["quantity"].as_f64(), long["avg_cost"].as_f64()),
        (Some(0.1), Some(2000.0)),
        "{long:#}"
    );
    assert_eq!(
        (short["quantity"].as_f64(), short["avg_cost"].as_f64()),
        (Some(-0.05), Some(2001.0)),
        "{short:#}"
    );
    // 50.00 at the bid, less the ticket's 0.70 opening commission.
    assert_eq!(long["market_value"], 50.0, "{long:#}");
    assert_eq!(long["unrealized_pnl"], 49.3, "{long:#}");
    assert_eq!(short["unrealized_pnl"], -20.0, "{short:#}");
    let t = &long["tickets"][0];
    assert_eq!(
        (
            &t["ticket"],
            &t["side"],
            &t["lots"],
            &t["open_price"],
            &t["swap"],
            &t["commission"],
            &t["profit"],
            &t["magic"],
            &t["comment"]
        ),
        (
            &json!("910"),
            &json!("buy"),
            &json!(0.1),
            &json!(2000.0),
            &json!(-1.2),
            &json!(-0.7),
            &json!(50.0),
            &json!(42),
            &json!("gold long")
        ),
        "{long:#}"
    );
    assert!(
        t["open_time"]
            .as_str()
            .unwrap()
            .starts_with("2026-11-26T08:00:00"),
        "{t:#}"
    );
    assert_eq!(short["tickets"][0]["ticket"], "911", "{short:#}");
    // The history: each closed ticket its own round trip (100.00 and -30.00).
    let pnl = d
        .call(
            "get_realized_pnl",
            json!({"start": "2026-11-01", "end": "2026-11-30"}),
        )
        .await;
    assert_eq!(pnl["gross_pnl"], 70.0, "{pnl:#}");

    // Scenario 1: check equity, buy 0.1 lots of XAUUSD (with its own magic number).
    // The account's figures are the terminal's: equity 10,070.00 + 50.00 - 0.70 - 1.20
    // - 20.00, free margin as written, margin used the rest, level equity over it.
    let a = &accounts["accounts"][0];
    assert_eq!(
        (
            &a["broker_equity"],
            &a["free_margin"],
            &a["margin_used"],
            &a["margin_level"],
            &a["leverage"],
            &a["buying_power"]
        ),
        (
            &json!(10098.1),
            &json!(9500.0),
            &json!(598.1),
            &json!(1688.36),
            &json!(100.0),
            &Value::Null
        ),
        "{accounts:#}"
    );
    let health = d.call("get_server_health", json!({})).await;
    assert!(health.to_string().contains("equity 10098.1"), "{health:#}");
    // The tickets both ways add up to what the terminal holds: no disagreement.
    assert_eq!(health["reconciliation"], json!([]), "{health:#}");
    let bought = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.1,
                "magic": 777, "client_order_id": "gold-1"}),
        )
        .await;
    assert_eq!(bought["outcome"], "filled", "{bought:#}");
    let ea = d.ea.snapshot();
    let new = ea
        .orders
        .iter()
        .find(|o| o.comment.starts_with(&tag_of("gold-1")))
        .unwrap();
    assert_eq!((new.magic, new.lots, new.kind.as_str()), (777, 0.1, "buy"));
    let new_ticket = new.ticket.to_string();

    // Scenario 2: SL/TP on the gold position. Held both ways, the ticket must be said.
    let which = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "XAUUSD", "stop_loss": 1990.0}),
        )
        .await;
    assert_eq!(which["error"]["rule"], "ticket_required", "{which:#}");
    assert!(which.to_string().contains("910 (buy 0.1"), "{which:#}");
    let neither = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "910"}),
        )
        .await;
    assert_eq!(neither["error"]["rule"], "sl_or_tp_required", "{neither:#}");
    let crossed = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "910", "stop_loss": 2004.0, "take_profit": 2003.0}),
        )
        .await;
    assert_eq!(crossed["error"]["rule"], "sl_above_tp", "{crossed:#}");
    let crossed_sell = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "911", "stop_loss": 2000.0, "take_profit": 2010.0}),
        )
        .await;
    assert_eq!(
        crossed_sell["error"]["rule"], "sl_below_tp",
        "{crossed_sell:#}"
    );
    let missing = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "999", "stop_loss": 1990.0}),
        )
        .await;
    assert_eq!(missing["error"]["rule"], "ticket_found", "{missing:#}");
    assert!(
        missing.to_string().contains("910"),
        "names the open tickets: {missing:#}"
    );
    let set = d
        .call(
            "modify_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "910", "stop_loss": 1990.0, "take_profit": 2030.0}),
        )
        .await;
    assert_eq!(set["status"], "ok", "{set:#}");
    let ea = d.ea.snapshot();
    let levels = |t: u64| {
        ea.orders
            .iter()
            .find(|o| o.ticket == t)
            .map(|o| (o.sl, o.tp))
            .unwrap()
    };
    assert_eq!(levels(910), (1990.0, 2030.0));
    assert_eq!(levels(911), (0.0, 0.0), "the other ticket is untouched");
    assert!(
        ea.commands
            .iter()
            .all(|(_, c, b)| c != "MODIFY_ORDER" || b.starts_with("910,"))
    );

    // The close rules: lots above the ticket, off the step, a ticket not open.
    let too_many = d
        .call(
            "close_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "911", "quantity": 0.2}),
        )
        .await;
    assert_eq!(
        too_many["error"]["rule"], "close_exceeds_ticket",
        "{too_many:#}"
    );
    let off_step = d
        .call(
            "close_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "911", "quantity": 0.015}),
        )
        .await;
    assert_eq!(off_step["error"]["rule"], "lot_step", "{off_step:#}");
    let gone = d
        .call(
            "close_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "12345"}),
        )
        .await;
    assert_eq!(gone["error"]["rule"], "ticket_found", "{gone:#}");
    let too_big = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 150}),
        )
        .await;
    assert_eq!(too_big["error"]["rule"], "max_quantity", "{too_big:#}");
    assert!(
        too_big["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum of 50 lots"),
        "names the configured maximum: {too_big:#}"
    );
    let both = d
        .call(
            "close_position",
            json!({"account": "MT", "symbol": "XAUUSD"}),
        )
        .await;
    assert_eq!(both["error"]["rule"], "ticket_required", "{both:#}");
    // A partial close by ticket: 0.02 of 911's 0.05 (MT4 reopens the rest as a new ticket).
    let part = d
        .call("close_position", json!({"account": "MT", "symbol": "XAUUSD", "ticket": "911", "quantity": 0.02, "client_order_id": "part-911"}))
        .await;
    assert_eq!(part["status"], "ok", "{part:#}");
    let ea = d.ea.snapshot();
    assert!(
        ea.commands
            .iter()
            .any(|(_, c, b)| c == "CLOSE_ORDER" && b == "911,0.02"),
        "{:?}",
        ea.commands
    );
    let short_left: f64 = ea
        .orders
        .iter()
        .filter(|o| o.symbol == "XAUUSD" && o.kind == "sell")
        .map(|o| o.lots)
        .sum();
    assert!((short_left - 0.03).abs() < 1e-9, "{:?}", ea.orders);

    // Scenario 3: close all profitable gold positions, ticket by ticket.
    let positions = d.call("get_positions", json!({"symbol": "XAUUSD"})).await;
    let profitable: Vec<String> = gold_rows(&positions)
        .iter()
        .flat_map(|p| p["tickets"].as_array().unwrap().iter())
        .filter(|t| t["profit"].as_f64().unwrap() > 0.0)
        .map(|t| t["ticket"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        profitable,
        vec!["910".to_owned()],
        "only 910 is in profit (the new ticket is at 0): {positions:#}"
    );
    for t in &profitable {
        let closed = d
            .call("close_position", json!({"account": "MT", "symbol": "XAUUSD", "ticket": t, "client_order_id": format!("close-{t}")}))
            .await;
        assert_eq!(closed["status"], "ok", "{closed:#}");
    }
    let ea = d.ea.snapshot();
    let open: Vec<u64> = ea
        .orders
        .iter()
        .filter(|o| o.symbol == "XAUUSD")
        .map(|o| o.ticket)
        .collect();
    assert!(!open.contains(&910), "{open:?}");
    assert!(open.contains(&new_ticket.parse().unwrap()), "{open:?}");
    assert_eq!(open.len(), 2, "the new buy and the rest of 911: {open:?}");
    assert!(
        ea.commands
            .iter()
            .any(|(_, c, b)| c == "CLOSE_ORDER" && b == "910,0"),
        "{:?}",
        ea.commands
    );
    assert_eq!(d.opens(), 1, "closes never open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_and_magic_are_bound_into_the_confirmation_token_and_the_audit_log() {
    let d = desk_with(gold_hedged(), Duration::from_secs(5));
    // A preview of closing ticket 910, then a close of 911 with its token: refused.
    let preview = d
        .call(
            "preview_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "sell", "quantity": 0.05, "ticket": "910"}),
        )
        .await;
    assert_eq!(preview["status"], "ok", "{preview:#}");
    assert_eq!(preview["order"]["ticket"], "910", "{preview:#}");
    let token = preview["confirmation_token"].as_str().unwrap().to_owned();
    let wrong = d
        .call(
            "close_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "911", "quantity": 0.05, "confirmation_token": token}),
        )
        .await;
    assert_eq!(wrong["error"]["code"], "confirmation_invalid", "{wrong:#}");
    // The same ticket, side and lots: accepted.
    let right = d
        .call(
            "close_position",
            json!({"account": "MT", "symbol": "XAUUSD", "ticket": "910", "quantity": 0.05, "confirmation_token": token}),
        )
        .await;
    assert_eq!(right["status"], "ok", "{right:#}");
    // A preview's side must be the ticket's opposite; a ticket takes market orders only.
    let same_side = d
        .call("preview_order", json!({"account": "MT", "symbol": "XAUUSD", "side": "sell", "quantity": 0.01, "ticket": "911"}))
        .await;
    assert!(
        same_side.to_string().contains("ticket_side"),
        "{same_side:#}"
    );
    // A magic number changes the binding too.
    let p = d
        .call("preview_order", json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.01, "magic": 5}))
        .await;
    let token = p["confirmation_token"].as_str().unwrap().to_owned();
    let other_magic = d
        .call("place_order", json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.01, "magic": 6, "confirmation_token": token}))
        .await;
    assert_eq!(
        other_magic["error"]["code"], "confirmation_invalid",
        "{other_magic:#}"
    );
    // The audit log names the ticket.
    let details: Vec<String> = d
        .state
        .store
        .read(|c| {
            let mut stmt = c
                .prepare("SELECT detail FROM audit WHERE kind = 'submitted' ORDER BY seq")
                .unwrap();
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
            Ok::<_, tradedesk_store::StoreError>(rows.map(Result::unwrap).collect())
        })
        .unwrap();
    assert!(
        details.iter().any(|d| d.contains("\"ticket\":\"910\"")),
        "{details:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mt5_netting_account_says_so_and_closes_part_of_its_ticket() {
    let mut s = gold_hedged();
    s.platform = Platform::Mt5;
    s.closed.clear();
    s.orders.truncate(1); // one gold position: ticket 910, 0.10 lots bought at 2,000
    let d = desk_mode(
        s.clone(),
        Duration::from_secs(5),
        Some(tradedesk_core::MarginMode::Netting),
    );
    let accounts = d.call("get_accounts", json!({})).await;
    assert_eq!(
        accounts["accounts"][0]["margin_mode"], "netting",
        "{accounts:#}"
    );
    let positions = d.call("get_positions", json!({})).await;
    let gold = gold_rows(&positions);
    assert_eq!(gold.len(), 1, "{positions:#}");
    assert_eq!(gold[0]["quantity"], 0.1, "{positions:#}");
    assert_eq!(gold[0]["tickets"][0]["ticket"], "910", "{positions:#}");
    let part = d
        .call("close_position", json!({"account": "MT", "symbol": "XAUUSD", "ticket": "910", "quantity": 0.04, "client_order_id": "mt5-part"}))
        .await;
    assert_eq!(part["status"], "ok", "{part:#}");
    let ea = d.ea.snapshot();
    let left: Vec<(u64, f64)> = ea.orders.iter().map(|o| (o.ticket, o.lots)).collect();
    assert_eq!(
        left,
        vec![(910, 0.06)],
        "MT5 keeps the ticket with the rest"
    );
    // Without margin_mode the MT5 account's mode is asked for, never guessed.
    let d = desk_with(s, Duration::from_secs(5));
    let accounts = d.call("get_accounts", json!({})).await;
    assert!(
        accounts["accounts"][0].get("margin_mode").is_none(),
        "{accounts:#}"
    );
    assert!(
        accounts.to_string().contains("set margin_mode"),
        "{accounts:#}"
    );
}

/// An `account_info` without the account's figures gives no made-up balance or leverage:
/// cash stays what the history implies, with a note, and the health line says which
/// figures the EA did not write.
#[tokio::test]
async fn an_account_info_without_its_figures_is_said_not_made_up() {
    let mut s = scenario(Platform::Mt4);
    s.bare_account_info = true;
    let d = desk_with(s, Duration::from_secs(5));
    let accounts = d.call("get_accounts", json!({})).await;
    assert_eq!(accounts["status"], "ok", "{accounts:#}");
    assert!(
        accounts["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("writes no balance")),
        "{accounts:#}"
    );
    let health = d.call("get_server_health", json!({})).await;
    let detail = health["brokers"][0]["detail"].as_str().unwrap();
    assert!(
        detail.contains("balance not written by the EA")
            && detail.contains("leverage not written by the EA"),
        "{detail}"
    );
}

fn check<'a>(preview: &'a Value, rule: &str) -> &'a Value {
    preview["checks"]
        .as_array()
        .unwrap_or_else(|| panic!("{preview:#}"))
        .iter()
        .find(|c| c["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule} check: {preview:#}"))
}

/// The guards weigh an order against the terminal's own free margin (gold at 2,005.00,
/// 100 oz a lot, 1:100: 200.50 a tenth of a lot): 0.2 lots need 401.00 of the 300.00
/// free and are refused with the rule's error before anything is sent; 0.1 lots pass;
/// a close needs none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_above_the_terminals_free_margin_is_refused_and_one_below_passes() {
    let mut s = gold_hedged();
    s.free_margin = 300.0;
    let d = desk_cfg(s, Duration::from_secs(5), gold_lots);
    let preview = d
        .call(
            "preview_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.2}),
        )
        .await;
    assert_eq!(preview["allowed"], false, "{preview:#}");
    let c = check(&preview, "free_margin");
    assert_eq!(c["passed"], false, "{c:#}");
    assert_eq!(
        c["detail"], "needs 401.00 USD of free margin; the broker reports 300.00 USD",
        "{c:#}"
    );
    let refused = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.2, "client_order_id": "too-much"}),
        )
        .await;
    assert_eq!(
        (&refused["error"]["code"], &refused["error"]["rule"]),
        (&json!("limit_exceeded"), &json!("free_margin")),
        "{refused:#}"
    );
    assert!(
        refused["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("get_accounts shows it"),
        "{refused:#}"
    );
    assert_eq!(d.opens(), 0, "nothing was sent");
    let fits = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.1, "client_order_id": "fits"}),
        )
        .await;
    assert_eq!(fits["outcome"], "filled", "{fits:#}");
    // Closing a ticket only takes risk off: it needs no free margin.
    d.ea.state.lock().unwrap().free_margin = 0.0;
    let close = d
        .call(
            "preview_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "sell", "quantity": 0.1, "ticket": "910"}),
        )
        .await;
    assert_eq!(close["allowed"], true, "{close:#}");
    assert_eq!(check(&close, "free_margin")["passed"], true, "{close:#}");
}

/// Volumes: the config's step, minimum and maximum are checked before sending, each
/// error naming the figure; without them the answer says the EA does not write them,
/// and the terminal's own refusal of lots off the symbol's step says how to configure it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lots_are_held_to_the_symbols_step_minimum_and_maximum() {
    let d = desk_cfg(gold_hedged(), Duration::from_secs(5), |c| {
        c.lots.insert(
            "XAUUSD".into(),
            LotRules {
                step: Some("0.1".parse().unwrap()),
                min: Some("0.2".parse().unwrap()),
                max: Some("5".parse().unwrap()),
            },
        );
    });
    for (lots, rule, says) in [
        (0.15, "lot_step", "0.15 lots in steps of 0.1"),
        (0.1, "min_quantity", "0.1 against a minimum of 0.2 lots"),
        (6.0, "max_quantity", "6 against a maximum of 5 lots"),
    ] {
        let r = d
            .call(
                "place_order",
                json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": lots}),
            )
            .await;
        assert_eq!(r["error"]["rule"], rule, "{r:#}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(says),
            "{r:#}"
        );
    }
    let fine = d
        .call(
            "preview_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.2}),
        )
        .await;
    assert_eq!(fine["allowed"], true, "{fine:#}");
    assert!(
        !fine["notes"].to_string().contains("does not write"),
        "{fine:#}"
    );
    assert_eq!(d.opens(), 0);

    // Unstated: the EA's own lot (0.01) is checked, and the answer says what is not.
    let mut s = gold_hedged();
    s.volume_steps.insert("XAUUSD".into(), 0.1);
    let d = desk_with(s, Duration::from_secs(5));
    let preview = d
        .call(
            "preview_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.15}),
        )
        .await;
    assert_eq!(preview["allowed"], true, "{preview:#}");
    assert!(
        preview["notes"].to_string().contains(
            "XAUUSD: the DWXConnect EA does not write its lot step (0.01 is checked, the finest lot the EA carries), its minimum (0.01 is checked), its maximum (none is checked)"
        ),
        "{preview:#}"
    );
    assert_eq!(
        check(&preview, "max_quantity")["detail"],
        "0.15 lots: the broker states no maximum",
        "{preview:#}"
    );
    let off = d
        .call(
            "place_order",
            json!({"account": "MT", "symbol": "XAUUSD", "side": "buy", "quantity": 0.15, "client_order_id": "off-step"}),
        )
        .await;
    assert_eq!(off["error"]["code"], "broker_rejected", "{off:#}");
    let text = off.to_string();
    assert!(
        text.contains("invalid trade volume")
            && text.contains(
                "add lot_step, min_lots and max_lots under [accounts.symbols.\\\"XAUUSD\\\"]"
            ),
        "{off:#}"
    );
}

/// A hedging MT5 account, each ticket its own position as on MT4, from deals that name
/// no position. Gold, 100 oz a lot: 700 long 0.10 from 2,000 closed at 2,010 (100.00);
/// 701 short 0.10 from 2,005 bought back at 2,008 (-30.00); 910 long 0.20 from 2,000 and
/// 912 long 0.20 from 1,990, 0.10 of each closed: 912's first, at 2,004 (140.00), then
/// 910's at 2,012 (120.00) - the oldest lots first would take 910's at 2,004 and leave
/// 912 whole; 911 short 0.05 from 2,001 and 913 short 0.10 from 2,020, opened before the
/// history read, still open. At 2,005: longs 50.00 + 150.00, shorts -20.00 + 150.00.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hedging_mt5_account_keeps_each_ticket_its_own_position() {
    let mut s = gold_hedged();
    s.platform = Platform::Mt5;
    let day = |d: u32, h: u32| format!("2026.11.{d:02} {h:02}:00:00");
    s.closed.push(trade(
        912,
        "XAUUSD",
        "buy",
        0.1,
        (&day(26, 11), &day(26, 14)),
        (1_990.0, 2_004.0),
        140.0,
        0.0,
        0.0,
    ));
    s.closed.push(trade(
        910,
        "XAUUSD",
        "buy",
        0.1,
        (&day(26, 10), &day(26, 15)),
        (2_000.0, 2_012.0),
        120.0,
        0.0,
        0.0,
    ));
    s.orders[0].commission = 0.0;
    s.orders[0].swap = 0.0;
    let mut second = position(912, "XAUUSD", "buy", 0.1, 1_990.0, 150.0);
    second.open_time = day(26, 11);
    let mut old = position(913, "XAUUSD", "sell", 0.1, 2_020.0, 150.0);
    old.open_time = "2026.10.01 10:00:00".into();
    s.orders.push(second);
    s.orders.push(old);
    let d = desk_mode(
        s,
        Duration::from_secs(5),
        Some(tradedesk_core::MarginMode::Hedging),
    );
    let positions = d.call("get_positions", json!({})).await;
    let gold = gold_rows(&positions);
    assert_eq!(gold.len(), 2, "a long and a short row: {positions:#}");
    let long = gold.iter().find(|p| p["side"] == "long").unwrap();
    let short = gold.iter().find(|p| p["side"] == "short").unwrap();
    assert_eq!(
        (
            long["quantity"].as_f64(),
            long["avg_cost"].as_f64(),
            long["unrealized_pnl"].as_f64()
        ),
        (Some(0.2), Some(1995.0), Some(200.0)),
        "{long:#}"
    );
    assert_eq!(
        (short["quantity"].as_f64(), short["unrealized_pnl"].as_f64()),
        (Some(-0.15), Some(130.0)),
        "{short:#}"
    );
    let tickets: Vec<&str> = gold
        .iter()
        .flat_map(|p| p["tickets"].as_array().unwrap())
        .map(|t| t["ticket"].as_str().unwrap())
        .collect();
    assert_eq!(tickets.len(), 4, "{positions:#}");
    let pnl = d
        .call(
            "get_realized_pnl",
            json!({"start": "2026-11-01", "end": "2026-11-30"}),
        )
        .await;
    assert_eq!(pnl["gross_pnl"], 330.0, "{pnl:#}");
    assert!(
        pnl["notes"]
            .to_string()
            .contains("each ticket is its own position"),
        "{pnl:#}"
    );
    let health = d.call("get_server_health", json!({})).await;
    assert_eq!(health["reconciliation"], json!([]), "{health:#}");
}
