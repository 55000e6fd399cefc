//! The Alpaca adapter against an offline fake of Alpaca's REST API on loopback: the
//! book it builds (fills, fees, cash), market data, the guarded write path, and the
//! failures a fixture never shows (429, 5xx, a hang, a port nobody listens on).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use common::alpaca_fake::{AlpacaFake, Failure};
use serde_json::{Value, json};
use tradedesk_brokers::Broker;
use tradedesk_brokers::alpaca::{AlpacaBroker, AlpacaConfig};
use tradedesk_brokers::sim::{Clock, ManualClock};
use tradedesk_tools::config::{State, TradingConfig, trading_for};
use tradedesk_tools::{ToolContext, call};

const KEY: &str = "PKTESTKEY";
const SECRET: &str = "test-secret";

fn config(url: &str, timeout: Duration) -> AlpacaConfig {
    AlpacaConfig {
        account: "ALPACA".into(),
        live: false,
        base_url: url.into(),
        data_url: url.into(),
        key: KEY.into(),
        secret: SECRET.into(),
        timeout,
    }
}

struct Desk {
    ctx: ToolContext,
    _dir: tempfile::TempDir,
}

fn desk(url: &str, timeout: Duration) -> Desk {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new(Utc::now()));
    let enabled = TradingConfig {
        enabled: Some(true),
        ..TradingConfig::default()
    };
    let trading = trading_for(Some(&enabled), Vec::new(), &state, clock).unwrap();
    let mut ctx = ToolContext::new("test")
        .with_broker(
            Arc::new(AlpacaBroker::new(config(url, timeout)).unwrap()),
            None,
        )
        .with_trading(Arc::new(trading));
    ctx.broker_timeout = timeout * 3;
    Desk { ctx, _dir: dir }
}

impl Desk {
    async fn call(&self, tool: &str, args: Value) -> Value {
        call(&self.ctx, tool, args).await.unwrap().structured
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_the_fake_matches_alpacas_published_openapi_documents() {
    // Statuses Alpaca sends that its documents leave undeclared (their bodies are still
    // checked against the Error schema); anything else failing panics inside.
    let undeclared = common::alpaca_fake::self_check().await;
    assert!(undeclared.len() <= 20, "{undeclared:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_book_keeps_fees_as_account_fees_and_anchors_cash_to_the_account() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let d = desk(&fake.url, Duration::from_secs(5));
    let positions = d.call("get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let rows = positions["positions"].as_array().unwrap();
    let qty = |sym: &str| {
        rows.iter()
            .find(|p| p["symbol"] == sym)
            .map(|p| p["quantity"].as_f64().unwrap())
    };
    assert_eq!(qty("AAPL"), Some(6.0));
    assert_eq!(qty("JPM"), Some(5.0));
    let aapl = rows.iter().find(|p| p["symbol"] == "AAPL").unwrap();
    assert_eq!(aapl["exchange"], "NASDAQ");
    // Realized: 4 AAPL bought at 150.00, sold at 170.00 = 80.00; Alpaca's fee activities
    // name no order (none is documented), so the REG and TAF fees are account fees in
    // cash, and the answer says so.
    let pnl = d
        .call(
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2026-12-31"}),
        )
        .await;
    assert_eq!(pnl["gross_pnl"], 80.0, "{pnl:#}");
    assert_eq!(pnl["net_pnl"], 80.0, "{pnl:#}");
    let notes = pnl["notes"].to_string();
    assert!(notes.contains("name no order"), "{notes}");
    assert!(!notes.contains("opening balance"), "{notes}");
    // Cash as the account reports it: 10000 - 1500 - 1000 + 680 - 0.03 + 1.25.
    let accounts = d.call("get_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["cash"], 8181.22, "{accounts:#}");
    assert_eq!(accounts["accounts"][0]["mode"], "paper");
    // What the broker reports held is what the fills imply.
    let health = d.call("get_server_health", json!({})).await;
    assert_eq!(health["brokers"][0]["status"], "ok", "{health:#}");
    assert!(
        health["brokers"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("market "),
        "{health:#}"
    );
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_and_bars_come_from_the_market_data_host() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let d = desk(&fake.url, Duration::from_secs(5));
    let q = d
        .call("get_quote", json!({"account": "ALPACA", "symbol": "AAPL"}))
        .await;
    assert_eq!(
        (q["bid"].as_f64(), q["ask"].as_f64()),
        (Some(181.0), Some(181.1)),
        "{q:#}"
    );
    let bars = d
        .call(
            "get_bars",
            json!({"source": {"symbol": "AAPL", "account": "ALPACA", "interval": "1d",
                "start": "2024-01-01", "end": "2026-12-31"}, "max_rows": 0}),
        )
        .await;
    assert_eq!(bars["status"], "ok", "{bars:#}");
    let total = bars["total"].as_u64().unwrap();
    assert!(total >= 300, "{total}");
    let times: Vec<&str> = bars["bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["time"].as_str().unwrap())
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]), "bars out of order");
    assert!(fake.requests().iter().any(|r| r.contains("/bars")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orders_go_through_the_guards_with_a_client_order_id() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let d = desk(&fake.url, Duration::from_secs(5));
    let placed = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 2, "client_order_id": "t-1"}),
        )
        .await;
    assert_eq!(placed["status"], "ok", "{placed:#}");
    assert_eq!(placed["mode"], "paper");
    assert_eq!(placed["outcome"], "filled");
    let with_id = |id: &str| {
        fake.orders()
            .iter()
            .filter(|o| o["client_order_id"] == id)
            .count()
    };
    let seeded = fake.orders().len() - 1;
    assert_eq!(with_id("t-1"), 1);
    // A retry is the stored outcome; Alpaca sees no second order.
    let again = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 2, "client_order_id": "t-1"}),
        )
        .await;
    assert_eq!(again["replayed"], true);
    assert_eq!(with_id("t-1"), 1);
    // The guards apply: a limit far above the quote is valued at its limit.
    let capped = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 2, "type": "limit", "limit_price": 900}),
        )
        .await;
    assert_eq!(capped["error"]["rule"], "max_order_notional", "{capped:#}");
    assert_eq!(fake.orders().len(), seeded + 1);
    // Alpaca saying it already has the id: maybe our own order from before, so the
    // outcome is uncertain (to be looked up), never "nothing placed".
    fake.fail_next(Failure::DuplicateClientOrderId);
    let dup = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 1, "client_order_id": "t-2"}),
        )
        .await;
    assert_eq!(dup["error"]["code"], "uncertain", "{dup:#}");
    assert_eq!(dup["error"]["client_order_id"], "t-2");
    // A working limit is cancelled by its client id.
    let resting = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 1, "type": "limit", "limit_price": 100, "time_in_force": "gtc", "client_order_id": "t-3"}),
        )
        .await;
    assert_eq!(resting["outcome"], "accepted", "{resting:#}");
    let open = d.call("get_orders", json!({"account": "ALPACA"})).await;
    assert_eq!(open["count"], 1, "{open:#}");
    // One identity everywhere: the order is keyed as the position is.
    assert_eq!(open["orders"][0]["exchange"], "NASDAQ", "{open:#}");
    // A fresh process (no asset looked up yet) names the same exchange.
    let fresh = desk(&fake.url, Duration::from_secs(5));
    let listed = fresh.call("get_orders", json!({"account": "ALPACA"})).await;
    assert_eq!(listed["orders"][0]["exchange"], "NASDAQ", "{listed:#}");
    let cancelled = d
        .call(
            "cancel_order",
            json!({"account": "ALPACA", "client_order_id": "t-3"}),
        )
        .await;
    assert_eq!(cancelled["outcome"], "cancelled", "{cancelled:#}");
    let again = d
        .call(
            "cancel_order",
            json!({"account": "ALPACA", "client_order_id": "t-3"}),
        )
        .await;
    assert_eq!(again["outcome"], "not_cancellable", "{again:#}");
    // A close is a sell with its own client order id, so it can be looked up.
    let closed = d
        .call(
            "close_position",
            json!({"account": "ALPACA", "symbol": "JPM", "quantity": 2, "client_order_id": "c-1"}),
        )
        .await;
    assert_eq!(closed["status"], "ok", "{closed:#}");
    let close = fake
        .orders()
        .into_iter()
        .find(|o| o["client_order_id"] == "c-1")
        .unwrap();
    assert_eq!(
        (close["side"].as_str(), close["qty"].as_str()),
        (Some("sell"), Some("2"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_hangs_is_uncertain_and_resolved_by_lookup_never_resent() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let d = desk(&fake.url, Duration::from_millis(300));
    fake.fail_next(Failure::HangOnOrder);
    let started = Instant::now();
    let hung = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 1, "client_order_id": "h-1"}),
        )
        .await;
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(hung["error"]["code"], "uncertain", "{hung:#}");
    assert_eq!(hung["error"]["client_order_id"], "h-1");
    let posts = || {
        fake.requests()
            .iter()
            .filter(|r| r.starts_with("POST /v2/orders"))
            .count()
    };
    assert_eq!(posts(), 1);
    // The retry looks the id up; it never posts the order again.
    let retry = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 1, "client_order_id": "h-1"}),
        )
        .await;
    assert_eq!(posts(), 1, "{retry:#}");
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.starts_with("GET /v2/orders:by_client_order_id"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_server_errors_and_dead_or_hung_gateways_answer_in_bounded_time() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let broker = AlpacaBroker::new(config(&fake.url, Duration::from_millis(500))).unwrap();
    fake.fail_next(Failure::TooManyRequests { reset_in_secs: 7 });
    match broker.snapshot().await {
        Err(tradedesk_brokers::BrokerError::RateLimited { retry_after, .. }) => {
            assert!(retry_after.is_some());
        }
        other => panic!("{other:?}"),
    }
    fake.fail_next(Failure::ServerError);
    assert!(matches!(
        broker.snapshot().await,
        Err(tradedesk_brokers::BrokerError::Unavailable { .. })
    ));
    fake.fail_next(Failure::Hang);
    let started = Instant::now();
    assert!(matches!(
        broker.snapshot().await,
        Err(tradedesk_brokers::BrokerError::Timeout { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(5));
    // Wrong keys: unavailable, with a hint naming the variables.
    let wrong = AlpacaBroker::new(AlpacaConfig {
        key: "nope".into(),
        ..config(&fake.url, Duration::from_secs(2))
    })
    .unwrap();
    match wrong.snapshot().await {
        Err(tradedesk_brokers::BrokerError::Unavailable { hint, .. }) => {
            assert!(hint.contains("APCA_API_KEY_ID"), "{hint}");
        }
        other => panic!("{other:?}"),
    }
    // Nobody listening: unavailable well within a second.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dead =
        AlpacaBroker::new(config(&format!("http://{closed}"), Duration::from_secs(5))).unwrap();
    let started = Instant::now();
    let health = dead.health().await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(health[0].status, tradedesk_brokers::HealthStatus::Down);
    assert!(health[0].hint.is_some());
    let _ = Utc.timestamp_opt(0, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_names_an_alpaca_account_and_doctor_says_what_to_fix() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, url: &str| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "base_currency = \"USD\"\n[[accounts]]\nid = \"ALPACA\"\nbroker = \"alpaca\"\nbase_url = \"{url}\"\ndata_url = \"{url}\"\nkey_env = \"TD_TEST_KEY\"\nsecret_env = \"TD_TEST_SECRET\"\ntimeout_ms = 2000\n"
            ),
        )
        .unwrap();
        path
    };
    let good = write("good.toml", &fake.url);
    let run = |config: &std::path::Path, args: &[&str], with_keys: bool| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"));
        cmd.arg("--config")
            .arg(config)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(args);
        if with_keys {
            cmd.env("TD_TEST_KEY", KEY).env("TD_TEST_SECRET", SECRET);
        } else {
            cmd.env_remove("TD_TEST_KEY").env_remove("TD_TEST_SECRET");
        }
        cmd.output().unwrap()
    };
    let out = run(&good, &["call", "get_portfolio_summary"], true);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["status"], "ok");
    let out = run(&good, &["doctor"], true);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // No keys in the environment: refused at start, naming the variable.
    let out = run(&good, &["doctor"], false);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("TD_TEST_KEY"));
    // A gateway nobody listens on: doctor fails fast, with a hint.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let dead = write("dead.toml", &format!("http://{closed}"));
    let started = Instant::now();
    let out = run(&dead, &["doctor"], true);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FAILED") && text.contains("fix:"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_loss_and_take_profit_are_bracket_legs_moved_by_replacing_them() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let d = desk(&fake.url, Duration::from_secs(5));
    // AAPL at 181.00 / 181.10: a bracket buy.
    let placed = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 1,
                "stop_loss": 170, "take_profit": 200}),
        )
        .await;
    assert_eq!(placed["status"], "ok", "{placed:#}");
    let sent = fake
        .orders()
        .into_iter()
        .find(|o| o["id"] == placed["order_id"])
        .unwrap();
    assert_eq!(sent["order_class"], "bracket", "{sent:#}");
    let moved = d
        .call(
            "modify_position",
            json!({"account": "ALPACA", "symbol": "AAPL", "stop_loss": 175}),
        )
        .await;
    assert_eq!(moved["status"], "ok", "{moved:#}");
    assert_eq!(moved["stop_loss"], 175.0);
    assert_eq!(moved["take_profit"], 200.0);
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.starts_with("PATCH /v2/orders/"))
    );
    // A take-profit under the stop-loss already set is refused before anything is sent.
    let crossed = d
        .call(
            "modify_position",
            json!({"account": "ALPACA", "symbol": "AAPL", "take_profit": 174}),
        )
        .await;
    assert_eq!(crossed["error"]["code"], "invalid_order", "{crossed:#}");
    // JPM has no bracket: nothing to move, said plainly.
    let none = d
        .call(
            "modify_position",
            json!({"account": "ALPACA", "symbol": "JPM", "stop_loss": 200}),
        )
        .await;
    assert_eq!(none["error"]["code"], "broker_rejected", "{none:#}");
    // Two brackets guard AAPL now: which stop to move is not guessed.
    let second = d
        .call(
            "place_order",
            json!({"account": "ALPACA", "symbol": "AAPL", "side": "buy", "quantity": 1,
                "stop_loss": 172, "take_profit": 205}),
        )
        .await;
    assert_eq!(second["status"], "ok", "{second:#}");
    let patches = fake
        .requests()
        .iter()
        .filter(|r| r.starts_with("PATCH"))
        .count();
    let ambiguous = d
        .call(
            "modify_position",
            json!({"account": "ALPACA", "symbol": "AAPL", "stop_loss": 176}),
        )
        .await;
    assert_eq!(
        ambiguous["error"]["code"], "broker_rejected",
        "{ambiguous:#}"
    );
    assert!(
        ambiguous["error"]["message"]
            .as_str()
            .unwrap()
            .contains("brackets"),
        "{ambiguous:#}"
    );
    assert_eq!(
        fake.requests()
            .iter()
            .filter(|r| r.starts_with("PATCH"))
            .count(),
        patches
    );
}
