//! Moomoo / Futu OpenD, read-only, against a fake OpenD on loopback that checks every
//! header and SHA-1: a Bursa Malaysia account in MYR (funds, positions, fills in 90-day
//! windows, per-order fees joined to fills), quotes and bars; and an OpenD that is down,
//! silent, encrypting, corrupt or refusing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::desk::{ctx_of, opend_config as config, tool};
use common::opend_fake::{OpenDFailure, OpenDFake, OpenDState, build};
use common::opend_pb as pb;
use serde_json::{Value, json};
use tradedesk_brokers::Broker;
use tradedesk_brokers::futu::{FutuMarket, OpenDBroker, OpenDConfig};
use tradedesk_tools::ToolContext;

pub const MY_ACC: u64 = 281_234;
const US_ACC: u64 = 281_235;

fn fill(
    id: u64,
    order: &str,
    code: &str,
    side: i32,
    qty: f64,
    price: f64,
    at: &str,
) -> pb::OrderFill {
    let mut f = build::fill(id, order, code, build::MY, side, qty, price, at);
    f.name = format!("Bursa {code}");
    f
}

fn position(code: &str, qty: f64, price: f64) -> pb::Position {
    let mut p = build::position(code, build::MY, qty, price);
    p.name = format!("Bursa {code}");
    p
}

/// A moomoo MY login with a live Bursa account (and a US one beside it).
pub fn bursa() -> OpenDState {
    let mut s = OpenDState {
        accounts: vec![
            build::my_account(),
            build::account(pb::TRD_ENV_REAL, US_ACC, pb::TRD_MARKET_US, "1002"),
        ],
        ..OpenDState::default()
    };
    let mut funds = build::funds(
        pb::CURRENCY_MYR,
        20_000.0,
        12_580.0,
        &[(pb::CURRENCY_MYR, 20_000.0)],
    );
    // A margin account's requirement, as OpenD's optional `maintenanceMargin` gives it.
    funds.maintenance_margin = Some(3_145.0);
    s.funds.insert((MY_ACC, pb::CURRENCY_MYR), funds);
    s.positions.insert(
        MY_ACC,
        vec![
            position("1155", 600.0, 10.30),
            position("5347", 500.0, 12.80),
        ],
    );
    let mut cancelled = fill(4, "O4", "1155", 1, 100.0, 9.0, "2026-11-21 10:00:00");
    cancelled.status = Some(1);
    s.fills.insert(
        MY_ACC,
        vec![
            fill(1, "O1", "1155", 1, 1000.0, 9.50, "2026-03-02 10:00:00"),
            fill(2, "O2", "1155", 2, 400.0, 10.20, "2026-11-20 15:00:00"),
            fill(3, "O3", "5347", 1, 500.0, 13.00, "2026-06-01 09:30:00"),
            cancelled,
        ],
    );
    // O3 has no fee at OpenD (not yet settled, say).
    s.fees.insert("O1".to_owned(), 12.35);
    s.fees.insert("O2".to_owned(), 8.10);
    s.snapshots.insert(
        (pb::QOT_MARKET_MY, "1155".to_owned()),
        build::snapshot(pb::QOT_MARKET_MY, "1155", 10.28, 10.30),
    );
    s.klines.insert(
        (pb::QOT_MARKET_MY, "1155".to_owned()),
        (0..5)
            .map(|i| build::day_line(&format!("2026-11-2{}", i + 3), 10.1 + f64::from(i) / 10.0))
            .collect(),
    );
    s
}

fn desk(config: OpenDConfig) -> ToolContext {
    ctx_of(Arc::new(OpenDBroker::new(config)), Duration::from_secs(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bursa_account_reads_in_ringgit_with_fees_joined_to_fills() {
    let fake = OpenDFake::start(bursa()).await;
    let ctx = desk(config(fake.port, Duration::from_secs(5)));

    let accounts = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(accounts["status"], "ok", "{accounts:#}");
    let acc = &accounts["accounts"][0];
    assert_eq!(acc["account_currency"], "MYR", "{accounts:#}");
    assert_eq!(accounts["total_value"], 32580.0, "{accounts:#}");
    assert_eq!(acc["cash"], 20000.0, "{accounts:#}");
    assert_eq!(acc["mode"], "live");
    // OpenD's funds: `power` (the most it can buy) and `maintenanceMargin`; no free
    // margin or leverage, which OpenD does not state.
    assert_eq!(
        (
            &acc["buying_power"],
            &acc["maintenance_margin"],
            &acc["leverage"]
        ),
        (&json!(20000.0), &json!(3145.0), &Value::Null),
        "{accounts:#}"
    );

    let positions = tool(&ctx, "get_positions", json!({})).await;
    let rows = positions["positions"].as_array().unwrap();
    let held = |code: &str| {
        rows.iter()
            .find(|p| p["symbol"] == code)
            .map(|p| (p["exchange"].clone(), p["quantity"].as_f64().unwrap()))
    };
    // 1000 - 400 (the cancelled fill does not count).
    assert_eq!(held("1155"), Some((json!("BURSA"), 600.0)), "{positions:#}");
    assert_eq!(held("5347"), Some((json!("BURSA"), 500.0)), "{positions:#}");

    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    // 400 x (10.20 - 9.50).
    assert_eq!(pnl["gross_pnl"], 280.0, "{pnl:#}");
    assert_eq!(pnl["currency"], "MYR", "{pnl:#}");

    let history = tool(
        &ctx,
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-12-31", "limit": 10}),
    )
    .await;
    let fills = history["fills"].as_array().unwrap();
    assert_eq!(fills.len(), 3, "{history:#}");
    let by_id = |id: &str| fills.iter().find(|f| f["id"] == id).unwrap();
    assert_eq!(by_id("F1")["commission"], 12.35);
    assert_eq!(by_id("F2")["commission"], 8.10);
    // The fee OpenD does not have is unknown, and the answer says P&L is gross of it.
    assert_eq!(by_id("F3")["commission"], Value::Null);
    assert_eq!(by_id("F3")["commission_known"], false);
    assert!(
        history["notes"].to_string().contains("gross of fees"),
        "{history:#}"
    );
    // Bursa wall-clock time, +08:00, on its own trade date.
    assert_eq!(
        by_id("F1")["time"],
        "2026-03-02T10:00:00+08:00",
        "{history:#}"
    );

    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(health["brokers"][0]["status"], "ok", "{health:#}");
    assert!(
        health["brokers"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("281234"),
        "{health:#}"
    );
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );

    let seen = fake.snapshot();
    // 365 days in windows of at most 90.
    assert_eq!(seen.fill_windows.len(), 5, "{:?}", seen.fill_windows);
    assert_eq!(seen.bad_sha1, 0);
    assert_eq!(
        seen.asked_encryption, 0,
        "InitConnect must say: no encryption"
    );
    // One connection, one InitConnect, for every call above.
    let inits = seen
        .requests
        .iter()
        .filter(|(id, _)| *id == pb::proto_id::INIT_CONNECT)
        .count();
    assert_eq!(inits, 1, "{:?}", seen.requests);
    let serials: Vec<u32> = seen.requests.iter().map(|(_, s)| *s).collect();
    assert!(serials.windows(2).all(|w| w[0] < w[1]), "serials increase");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_and_paged_bars_come_from_opend() {
    let fake = OpenDFake::start(bursa()).await;
    let ctx = desk(config(fake.port, Duration::from_secs(5)));
    let q = tool(
        &ctx,
        "get_quote",
        json!({"account": "MOOMOO-MY", "symbol": "BURSA:1155"}),
    )
    .await;
    assert_eq!(
        (q["bid"].as_f64(), q["ask"].as_f64(), q["currency"].clone()),
        (Some(10.28), Some(10.30), json!("MYR")),
        "{q:#}"
    );
    let unknown = tool(
        &ctx,
        "get_quote",
        json!({"account": "MOOMOO-MY", "symbol": "9999"}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], "unknown_symbol", "{unknown:#}");
    let bars = tool(
        &ctx,
        "get_bars",
        json!({"source": {"symbol": "1155", "account": "MOOMOO-MY", "interval": "1d",
            "start": "2026-11-01", "end": "2026-11-30"}, "max_rows": 0}),
    )
    .await;
    assert_eq!(bars["status"], "ok", "{bars:#}");
    assert_eq!(bars["total"], 5, "three pages of two: {bars:#}");
    assert_eq!(bars["bars"][0]["time"], "2026-11-23", "{bars:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_kept_alive_not_reopened() {
    let mut state = bursa();
    state.keep_alive_secs = 1;
    let fake = OpenDFake::start(state).await;
    let broker = OpenDBroker::new(config(fake.port, Duration::from_secs(5)));
    assert_eq!(
        broker.health().await[0].status,
        tradedesk_brokers::HealthStatus::Ok
    );
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        broker.health().await[0].status,
        tradedesk_brokers::HealthStatus::Ok
    );
    let seen = fake.snapshot();
    let count = |id: u32| seen.requests.iter().filter(|(p, _)| *p == id).count();
    assert_eq!(count(pb::proto_id::KEEP_ALIVE), 1, "{:?}", seen.requests);
    assert_eq!(count(pb::proto_id::INIT_CONNECT), 1, "{:?}", seen.requests);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_account_is_picked_by_market_or_id_and_listed_when_ambiguous() {
    let fake = OpenDFake::start(bursa()).await;
    let us = OpenDBroker::new(OpenDConfig {
        market: FutuMarket::Us,
        ..config(fake.port, Duration::from_secs(5))
    });
    assert!(us.health().await[0].detail.contains("281235"));
    let wrong = OpenDBroker::new(OpenDConfig {
        acc_id: Some(42),
        ..config(fake.port, Duration::from_secs(5))
    });
    let h = wrong.health().await;
    assert!(
        h[0].detail.contains("281234") && h[0].detail.contains("281235"),
        "{h:?}"
    );
    let hk = OpenDBroker::new(OpenDConfig {
        market: FutuMarket::Hk,
        ..config(fake.port, Duration::from_secs(5))
    });
    let h = hk.health().await;
    assert_eq!(h[0].status, tradedesk_brokers::HealthStatus::Down);
    assert!(
        h[0].detail.contains("no real account for market HK"),
        "{h:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opend_that_is_down_silent_corrupt_encrypting_or_refusing_says_so_in_bounded_time() {
    // Down: unavailable within a second, naming OpenD and its port.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ctx = desk(config(closed, Duration::from_secs(10)));
    let started = Instant::now();
    let down = tool(&ctx, "get_positions", json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(down["error"]["code"], "broker_unavailable", "{down:#}");
    let hint = down["error"]["hint"].as_str().unwrap();
    assert!(hint.contains("OpenD") && hint.contains("11111"), "{hint}");

    // Silent: a timeout within the bound.
    let fake = OpenDFake::start(bursa()).await;
    fake.fail(OpenDFailure::Silent);
    let bound = Duration::from_millis(700);
    let ctx = desk(config(fake.port, bound));
    let started = Instant::now();
    let hung = tool(&ctx, "get_positions", json!({})).await;
    assert!(started.elapsed() < bound + Duration::from_secs(1));
    assert_eq!(hung["error"]["code"], "broker_timeout", "{hung:#}");

    // A reply whose SHA-1 is wrong is refused.
    fake.fail(OpenDFailure::WrongSha1);
    let broker = OpenDBroker::new(config(fake.port, Duration::from_secs(5)));
    let h = broker.health().await;
    assert_eq!(h[0].status, tradedesk_brokers::HealthStatus::Down);
    assert!(h[0].detail.contains("SHA-1"), "{h:?}");

    // An OpenD that encrypts: a clear error saying what to change.
    fake.fail(OpenDFailure::Encrypted);
    let broker = OpenDBroker::new(config(fake.port, Duration::from_secs(5)));
    let h = broker.health().await;
    assert!(h[0].detail.contains("encrypt"), "{h:?}");
    assert!(
        h[0].hint.as_deref().unwrap().contains("rsa_private_key"),
        "{h:?}"
    );

    // Not logged in: OpenD's own words, and what to do.
    fake.fail(OpenDFailure::RetType(
        pb::proto_id::INIT_CONNECT,
        "Phone verification code required".to_owned(),
    ));
    let broker = OpenDBroker::new(config(fake.port, Duration::from_secs(5)));
    let h = broker.health().await;
    assert!(
        h[0].detail.contains("Phone verification code required"),
        "{h:?}"
    );
    assert!(
        h[0].hint.as_deref().unwrap().contains("logging in"),
        "{h:?}"
    );

    // A retType error on one request: the tool error quotes OpenD.
    fake.fail(OpenDFailure::RetType(
        pb::proto_id::TRD_GET_FUNDS,
        "Nonexisting acc_id".to_owned(),
    ));
    let ctx = desk(config(fake.port, Duration::from_secs(5)));
    let refused = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(refused["status"], "error", "{refused:#}");
    assert!(
        refused.to_string().contains("Nonexisting acc_id"),
        "{refused:#}"
    );
    assert_eq!(fake.snapshot().bad_sha1, 0);
}

#[test]
fn a_config_for_bursa_refuses_paper_and_bad_ids() {
    let dir = tempfile::tempdir().unwrap();
    for (body, expect) in [
        ("mode = \"paper\"\n", "no simulated"),
        ("account = \"abc\"\n", "not an OpenD account id"),
        ("market = \"CN\"\n", "MY (Bursa Malaysia)"),
    ] {
        let config = dir.path().join("m.toml");
        std::fs::write(
            &config,
            format!("[[accounts]]\nid = \"M\"\nbroker = \"moomoo\"\n{body}"),
        )
        .unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .args(["call", "get_accounts"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expect), "{body}: {err}");
    }
}

// ---------------------------------------------------------------------------------------
// Issue 18.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_connect_sends_the_client_version_of_the_current_sdk() {
    let fake = OpenDFake::start(bursa()).await;
    let broker = OpenDBroker::new(config(fake.port, Duration::from_secs(5)));
    assert_eq!(
        broker.health().await[0].status,
        tradedesk_brokers::HealthStatus::Ok
    );
    // futu-api's CLIENT_VERSION.
    assert_eq!(fake.snapshot().client_vers, vec![300]);
}

/// A moomoo MY universal account holding MYR, USD and HKD cash and a US share beside its
/// Bursa one. OpenD converts the same assets into whichever currency its funds are asked
/// in (to 3 decimals): MYR total assets 32,073.392, USD 6,796.362, HKD 52,926.389 (built
/// here from USD/MYR 4.7192 and HKD/MYR 0.6060). Worked by hand:
///
/// - USD/MYR = 32,073.392 / 6,796.362 = 4.7192000662; HKD/MYR = 32,073.392 / 52,926.389
///   = 0.6060000050 (OpenD's own conversion; one total cannot be split between two
///   currencies, so each is asked for);
/// - cash: MYR 20,000.00 + USD 120.40 (568.19) + HKD 1,000.00 (606.00) = 21,174.19, each
///   row rounded once;
/// - positions: 1155 600 x 10.30 = 6,180.00 and AAPL 5 x 200.00 = USD 1,000.00 = MYR
///   4,719.20: 10,899.20.
fn bursa_with_usd() -> OpenDState {
    let mut s = bursa();
    s.funds.clear();
    let cash = [
        (pb::CURRENCY_MYR, 20_000.0),
        (pb::CURRENCY_USD, 120.40),
        (pb::CURRENCY_HKD, 1_000.0),
    ];
    for (currency, total_cash, market_val, total) in [
        (pb::CURRENCY_MYR, 21_174.192, 10_899.2, 32_073.392),
        (pb::CURRENCY_USD, 4_486.818, 2_309.544, 6_796.362),
        (pb::CURRENCY_HKD, 34_940.91, 17_985.479, 52_926.389),
    ] {
        let mut funds = build::funds(currency, total_cash, market_val, &cash);
        funds.total_assets = total;
        s.funds.insert((MY_ACC, currency), funds);
    }
    let mut aapl = build::position("AAPL", build::US, 5.0, 200.0);
    aapl.average_cost_price = Some(190.0);
    s.positions
        .insert(MY_ACC, vec![position("1155", 600.0, 10.30), aapl]);
    s.fills.insert(
        MY_ACC,
        vec![
            fill(1, "O1", "1155", 1, 1000.0, 9.50, "2026-03-02 10:00:00"),
            fill(2, "O2", "1155", 2, 400.0, 10.20, "2026-11-20 15:00:00"),
        ],
    );
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_myr_account_with_usd_cash_answers_every_tool_at_opend_s_own_rate() {
    let fake = OpenDFake::start(bursa_with_usd()).await;
    let ctx = desk(config(fake.port, Duration::from_secs(5)));
    let accounts = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(accounts["status"], "ok", "{accounts:#}");
    let acc = &accounts["accounts"][0];
    assert_eq!(acc["account_currency"], "MYR", "{accounts:#}");
    assert_eq!(acc["cash"], 21174.19, "{accounts:#}");
    // 6,180.00 + 4,719.20.
    assert_eq!(acc["positions_value"], 10899.2, "{accounts:#}");
    assert!(
        accounts["notes"].to_string().contains("OpenD's own"),
        "{accounts:#}"
    );
    assert!(
        !accounts["notes"].to_string().contains("rate on or before"),
        "{accounts:#}"
    );
    // The USD and HKD funds were asked for: that is where the rates come from.
    let asked = fake.snapshot().funds_asked;
    assert!(
        asked.contains(&Some(pb::CURRENCY_USD)) && asked.contains(&Some(pb::CURRENCY_HKD)),
        "{asked:?}"
    );
    for (name, args) in [
        ("get_positions", json!({})),
        ("get_portfolio_summary", json!({})),
        ("get_exposure", json!({"by": "currency"})),
        (
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2026-12-31"}),
        ),
        (
            "get_trade_history",
            json!({"start": "2026-01-01", "end": "2026-12-31"}),
        ),
        (
            "get_performance",
            json!({"start": "2026-01-01", "end": "2026-11-30"}),
        ),
        (
            "analyze_trades",
            json!({"start": "2026-01-01", "end": "2026-12-31"}),
        ),
        ("get_server_health", json!({})),
    ] {
        let r = tool(&ctx, name, args).await;
        assert_ne!(r["status"], "error", "{name}: {r:#}");
        assert!(!r.to_string().contains("no_fx_rate"), "{name}: {r:#}");
    }
    let exposure = tool(&ctx, "get_exposure", json!({"by": "currency"})).await;
    let usd = exposure["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["key"] == "USD")
        .cloned()
        .unwrap_or_else(|| panic!("{exposure:#}"));
    // AAPL only: 5 x 200 x 4.7191968...
    assert_eq!(usd["value"], 4719.2, "{exposure:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bursa_daily_request_to_a_date_ends_on_that_date() {
    let mut s = bursa();
    s.klines.insert(
        (pb::QOT_MARKET_MY, "1155".to_owned()),
        [
            "2026-11-26",
            "2026-11-27",
            "2026-11-30",
            "2026-12-01",
            "2026-12-02",
        ]
        .iter()
        .enumerate()
        .map(|(i, d)| build::day_line(d, 10.0 + f64::from(u8::try_from(i).unwrap())))
        .collect(),
    );
    let fake = OpenDFake::start(s).await;
    let ctx = desk(config(fake.port, Duration::from_secs(5)));
    let bars = tool(
        &ctx,
        "get_bars",
        json!({"source": {"symbol": "BURSA:1155", "account": "MOOMOO-MY", "interval": "1d",
            "start": "2026-11-27", "end": "2026-11-30"}, "max_rows": 0}),
    )
    .await;
    assert_eq!(bars["status"], "ok", "{bars:#}");
    let days: Vec<&str> = bars["bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["time"].as_str().unwrap())
        .collect();
    assert_eq!(days, ["2026-11-27", "2026-11-30"], "{bars:#}");
    // The window OpenD was asked for is the exchange's days.
    let windows = fake.snapshot().kline_windows;
    assert_eq!(
        windows[0],
        ("2026-11-27".to_owned(), "2026-11-30".to_owned()),
        "{windows:?}"
    );
}

const PAPER_ACC: u64 = 9_100_001;

/// A simulated US account. OpenD gives paper trading no fills (deals): its historical
/// orders say what filled. Worked by hand: bought 10 AAPL (filled at an average of
/// 180.00), sold 4 (average 190.00), a cancelled order that filled nothing; realized
/// 4 x (190.00 - 180.00) = 40.00, gross (OpenD states no fees for paper orders); 6 held.
fn paper() -> OpenDState {
    let mut s = OpenDState {
        accounts: vec![build::account(
            pb::TRD_ENV_SIMULATE,
            PAPER_ACC,
            pb::TRD_MARKET_US,
            "SIM1",
        )],
        ..OpenDState::default()
    };
    s.funds.insert(
        (PAPER_ACC, pb::CURRENCY_USD),
        build::funds(
            pb::CURRENCY_USD,
            98_960.0,
            1_110.0,
            &[(pb::CURRENCY_USD, 98_960.0)],
        ),
    );
    s.positions.insert(
        PAPER_ACC,
        vec![build::position("AAPL", build::US, 6.0, 185.0)],
    );
    let order =
        |id: u64, side: i32, status: i32, qty: f64, filled: f64, avg: f64, at: &str| pb::Order {
            trd_side: side,
            order_type: 1,
            order_status: status,
            order_id: id,
            order_id_ex: format!("SIM-{id}"),
            code: "AAPL".to_owned(),
            name: "Apple".to_owned(),
            qty,
            price: Some(avg),
            create_time: at.to_owned(),
            update_time: at.replace("10:00:00", "10:05:00"),
            fill_qty: Some(filled),
            fill_avg_price: Some(avg),
            last_err_msg: None,
            sec_market: Some(pb::SEC_MARKET_US),
            create_timestamp: None,
            update_timestamp: None,
            currency: Some(pb::CURRENCY_USD),
            trd_market: Some(pb::TRD_MARKET_US),
        };
    s.orders.insert(
        PAPER_ACC,
        vec![
            order(
                1,
                pb::SIDE_BUY,
                pb::ORDER_FILLED_ALL,
                10.0,
                10.0,
                180.0,
                "2026-11-02 10:00:00",
            ),
            order(
                2,
                pb::SIDE_SELL,
                pb::ORDER_FILLED_ALL,
                4.0,
                4.0,
                190.0,
                "2026-11-09 10:00:00",
            ),
            order(
                3,
                pb::SIDE_BUY,
                pb::ORDER_CANCELLED_ALL,
                5.0,
                0.0,
                0.0,
                "2026-11-10 10:00:00",
            ),
        ],
    );
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_account_books_its_filled_orders_and_says_so() {
    let fake = OpenDFake::start(paper()).await;
    let ctx = desk(OpenDConfig {
        id: "MOOMOO-PAPER".into(),
        market: FutuMarket::Us,
        simulate: true,
        ..config(fake.port, Duration::from_secs(5))
    });
    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    assert_eq!(pnl["status"], "ok", "{pnl:#}");
    assert_eq!(pnl["gross_pnl"], 40.0, "{pnl:#}");
    let notes = pnl["notes"].to_string();
    assert!(
        notes.contains("gives no fills (deals) for paper trading"),
        "{notes}"
    );
    assert!(!notes.contains("fills from the last"), "{notes}");
    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["positions"][0]["quantity"], 6.0, "{positions:#}");
    let history = tool(
        &ctx,
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    let fills = history["fills"].as_array().unwrap();
    assert_eq!(
        fills.len(),
        2,
        "the cancelled order filled nothing: {history:#}"
    );
    assert_eq!(fills[0]["commission_known"], false, "{history:#}");
    let seen = fake.snapshot();
    // History orders, never the deals query OpenD refuses for paper trading.
    assert_eq!(seen.fill_windows.len(), 0);
    assert_eq!(seen.order_windows.len(), 5, "{:?}", seen.order_windows);
}

fn cli(config: &std::path::Path, state: &std::path::Path, tool: &str, args: &str) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .arg("--config")
        .arg(config)
        .arg("--state-dir")
        .arg(state)
        .args(["call", tool, args])
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} / {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_calls_in_a_row_share_the_history_read_and_opend_s_budget() {
    let fake = OpenDFake::start(bursa()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("m.toml");
    std::fs::write(
        &config,
        format!(
            "[[accounts]]\nid = \"MOOMOO-MY\"\nbroker = \"moomoo\"\nport = {}\n",
            fake.port
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let (c, st) = (config.clone(), state.clone());
    let answers = tokio::task::spawn_blocking(move || {
        (0..3)
            .map(|_| {
                cli(
                    &c,
                    &st,
                    "get_realized_pnl",
                    r#"{"start": "2026-01-01", "end": "2026-12-31"}"#,
                )
            })
            .collect::<Vec<_>>()
    })
    .await
    .unwrap();
    for a in &answers {
        // 400 x (10.20 - 9.50), each time.
        assert_eq!(a["gross_pnl"], 280.0, "{a:#}");
    }
    let seen = fake.snapshot();
    // 365 days in 5 windows, read once for the three processes.
    assert_eq!(seen.fill_windows.len(), 5, "{:?}", seen.fill_windows);
    assert_eq!(seen.too_frequent, 0);

    // Another process (another state directory) spent OpenD's budget: OpenD's refusal is
    // told as the budget.
    fake.fail(OpenDFailure::RetType(
        pb::proto_id::TRD_GET_HISTORY_ORDER_FILL_LIST,
        common::opend_fake::TOO_FREQUENT.to_owned(),
    ));
    let (c, other) = (config.clone(), dir.path().join("other"));
    let refused = tokio::task::spawn_blocking(move || cli(&c, &other, "get_realized_pnl", "{}"))
        .await
        .unwrap();
    assert_eq!(
        refused["error"]["code"], "broker_unavailable",
        "{refused:#}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("request budget"),
        "{refused:#}"
    );
    fake.fail(OpenDFailure::None);

    // Our own count: ten fill queries in the last 30 s in the shared budget file, so the
    // eleventh is not sent, and the answer says why and when to retry.
    let fresh = dir.path().join("fresh");
    std::fs::create_dir_all(fresh.join("opend")).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis();
    let lines: String = (0..10)
        .map(|i| format!("2222 {}\n", now - i * 100))
        .collect();
    std::fs::write(fresh.join(format!("opend/budget-{MY_ACC}.txt")), lines).unwrap();
    let before = fake.snapshot().fill_windows.len();
    let c = config.clone();
    let spent = tokio::task::spawn_blocking(move || cli(&c, &fresh, "get_realized_pnl", "{}"))
        .await
        .unwrap();
    assert_eq!(spent["error"]["code"], "broker_unavailable", "{spent:#}");
    let message = spent["error"]["message"].as_str().unwrap();
    assert!(message.contains("request budget is spent"), "{message}");
    assert!(
        spent["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("retry in"),
        "{spent:#}"
    );
    assert_eq!(
        fake.snapshot().fill_windows.len(),
        before,
        "no query was sent"
    );
}

/// Today's date at Bursa (and Hong Kong): UTC+8 all year.
fn today_at_utc8() -> String {
    (chrono::Utc::now() + chrono::Duration::hours(8))
        .format("%Y-%m-%d")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fill_made_today_counts_in_positions_and_realized_pnl_once() {
    // OpenD's history may stop before today (the fake's default) or reach it: either way
    // today's fill counts once.
    for history_includes_today in [false, true] {
        let mut state = bursa();
        let today = today_at_utc8();
        state.today = Some(today.clone());
        state.history_includes_today = history_includes_today;
        // Sold 200 of 1155 today, just after midnight: 200 x (10.40 - 9.50) = 180.00.
        state.fills.get_mut(&MY_ACC).unwrap().push(fill(
            6,
            "O6",
            "1155",
            2,
            200.0,
            10.40,
            &format!("{today} 00:00:01"),
        ));
        state.positions.insert(
            MY_ACC,
            vec![
                position("1155", 400.0, 10.30),
                position("5347", 500.0, 12.80),
            ],
        );
        let fake = OpenDFake::start(state).await;
        let ctx = desk(config(fake.port, Duration::from_secs(5)));
        let pnl = tool(
            &ctx,
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2030-12-31"}),
        )
        .await;
        // 400 x (10.20 - 9.50) + 200 x (10.40 - 9.50).
        assert_eq!(pnl["gross_pnl"], 460.0, "{history_includes_today}: {pnl:#}");
        let positions = tool(&ctx, "get_positions", json!({})).await;
        let held = positions["positions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["symbol"] == "1155")
            .map(|p| p["quantity"].as_f64().unwrap());
        assert_eq!(held, Some(400.0), "{positions:#}");
        let history = tool(
            &ctx,
            "get_trade_history",
            json!({"start": "2026-01-01", "end": "2030-12-31", "limit": 50}),
        )
        .await;
        let fills = history["fills"].as_array().unwrap();
        assert_eq!(
            fills.iter().filter(|f| f["id"] == "F6").count(),
            1,
            "{history:#}"
        );
        assert_eq!(fills.len(), 4, "{history:#}");
        let seen = fake.snapshot();
        assert_eq!(seen.today_fill_queries, 1);
        assert_eq!(seen.today_order_queries, 0);
    }
}

const HK_PAPER_ACC: u64 = 990_002;

/// A simulated HK account: bought 100 of 00700 at 300.00 in November, sold 50 at 320.00
/// today (an order OpenD's history does not hold yet): realized 50 x 20.00 = 1,000.00.
fn hk_paper(today: &str) -> OpenDState {
    let hk = (pb::SEC_MARKET_HK, pb::CURRENCY_HKD, pb::TRD_MARKET_HK);
    let mut s = OpenDState {
        accounts: vec![build::account(
            pb::TRD_ENV_SIMULATE,
            HK_PAPER_ACC,
            pb::TRD_MARKET_HK,
            "SIMHK",
        )],
        today: Some(today.to_owned()),
        ..OpenDState::default()
    };
    s.funds.insert(
        (HK_PAPER_ACC, pb::CURRENCY_HKD),
        build::funds(
            pb::CURRENCY_HKD,
            986_000.0,
            15_500.0,
            &[(pb::CURRENCY_HKD, 986_000.0)],
        ),
    );
    s.positions.insert(
        HK_PAPER_ACC,
        vec![build::position("00700", hk, 50.0, 310.0)],
    );
    let order = |id: u64, side: i32, qty: f64, avg: f64, at: String| pb::Order {
        trd_side: side,
        order_type: 1,
        order_status: pb::ORDER_FILLED_ALL,
        order_id: id,
        order_id_ex: format!("SIMHK-{id}"),
        code: "00700".to_owned(),
        name: "Tencent".to_owned(),
        qty,
        price: Some(avg),
        create_time: at.clone(),
        update_time: at.replace("09:30:00", "09:31:00"),
        fill_qty: Some(qty),
        fill_avg_price: Some(avg),
        last_err_msg: None,
        sec_market: Some(pb::SEC_MARKET_HK),
        create_timestamp: None,
        update_timestamp: None,
        currency: Some(pb::CURRENCY_HKD),
        trd_market: Some(pb::TRD_MARKET_HK),
    };
    s.orders.insert(
        HK_PAPER_ACC,
        vec![
            order(
                1,
                pb::SIDE_BUY,
                100.0,
                300.0,
                "2026-11-02 09:30:00".to_owned(),
            ),
            order(2, pb::SIDE_SELL, 50.0, 320.0, format!("{today} 09:30:00")),
        ],
    );
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_account_books_today_s_filled_orders_once() {
    for history_includes_today in [false, true] {
        let mut state = hk_paper(&today_at_utc8());
        state.history_includes_today = history_includes_today;
        let fake = OpenDFake::start(state).await;
        let ctx = desk(OpenDConfig {
            id: "MOOMOO-HK-PAPER".into(),
            market: FutuMarket::Hk,
            simulate: true,
            ..config(fake.port, Duration::from_secs(5))
        });
        let pnl = tool(
            &ctx,
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2030-12-31"}),
        )
        .await;
        assert_eq!(pnl["status"], "ok", "{pnl:#}");
        assert_eq!(
            pnl["gross_pnl"], 1000.0,
            "{history_includes_today}: {pnl:#}"
        );
        let positions = tool(&ctx, "get_positions", json!({})).await;
        assert_eq!(positions["positions"][0]["quantity"], 50.0, "{positions:#}");
        let seen = fake.snapshot();
        assert_eq!(seen.today_order_queries, 1);
        assert_eq!(
            seen.today_fill_queries, 0,
            "no deals query for paper trading"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_cache_refreshes_from_a_day_before_its_end_counting_each_fill_once() {
    use std::sync::atomic::{AtomicI64, Ordering};
    use tradedesk_brokers::futu::history::Clock;

    // OpenD's today is 2026-11-30; the first read is at 12:00:00 Bursa time.
    let mut state = bursa();
    state.today = Some("2026-11-30".to_owned());
    {
        let fills = state.fills.get_mut(&MY_ACC).unwrap();
        // Yesterday evening: inside the day the refresh asks again.
        fills.push(fill(
            5,
            "O5",
            "5347",
            1,
            100.0,
            13.10,
            "2026-11-29 20:00:00",
        ));
        // This morning: 200 x (10.40 - 9.50) = 180.00.
        fills.push(fill(
            6,
            "O6",
            "1155",
            2,
            200.0,
            10.40,
            "2026-11-30 09:30:00",
        ));
    }
    state.positions.insert(
        MY_ACC,
        vec![
            position("1155", 400.0, 10.30),
            position("5347", 600.0, 12.80),
        ],
    );
    let fake = OpenDFake::start(state).await;
    let dir = tempfile::tempdir().unwrap();
    let t0 = chrono::DateTime::parse_from_rfc3339("2026-11-30T12:00:00+08:00")
        .unwrap()
        .timestamp_millis();
    let now = Arc::new(AtomicI64::new(t0));
    let desk_at = || {
        let broker = OpenDBroker::new(OpenDConfig {
            state_dir: Some(dir.path().to_path_buf()),
            ..config(fake.port, Duration::from_secs(5))
        })
        .with_clock(Clock::manual(Arc::clone(&now)));
        let mut ctx = ToolContext::new("test").with_broker(Arc::new(broker), None);
        ctx.broker_timeout = Duration::from_secs(10);
        ctx
    };
    async fn pnl(ctx: &ToolContext) -> Value {
        tool(
            ctx,
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2026-12-31"}),
        )
        .await
    }
    let first = pnl(&desk_at()).await;
    // 400 x (10.20 - 9.50) + 180.00.
    assert_eq!(first["gross_pnl"], 460.0, "{first:#}");
    let seen = fake.snapshot();
    assert_eq!(seen.fill_windows.len(), 5, "{:?}", seen.fill_windows);
    assert_eq!(seen.fill_windows[0].1, "2026-11-30 12:00:00");
    assert_eq!(seen.today_fill_queries, 1);

    // 5 s later another process is served from the shared cache: nothing is asked.
    now.store(t0 + 5_000, Ordering::SeqCst);
    assert_eq!(pnl(&desk_at()).await["gross_pnl"], 460.0);
    assert_eq!(fake.snapshot().fill_windows.len(), 5);
    assert_eq!(fake.snapshot().today_fill_queries, 1);

    // Meanwhile a fill of yesterday reaches OpenD's history late, and one is made now.
    fake.with_state(|s| {
        let fills = s.fills.get_mut(&MY_ACC).unwrap();
        // Sells 100 of 5347 from the June lot: 100 x (13.50 - 13.00) = 50.00.
        fills.push(fill(
            8,
            "O8",
            "5347",
            2,
            100.0,
            13.50,
            "2026-11-29 16:00:00",
        ));
        // 200 x (10.50 - 9.50) = 200.00.
        fills.push(fill(
            7,
            "O7",
            "1155",
            2,
            200.0,
            10.50,
            "2026-11-30 12:00:20",
        ));
        s.positions.insert(
            MY_ACC,
            vec![
                position("1155", 200.0, 10.30),
                position("5347", 500.0, 12.80),
            ],
        );
    });
    // 31 s after the first read: the refresh asks only from a day before the cached end.
    now.store(t0 + 31_000, Ordering::SeqCst);
    let ctx = desk_at();
    let refreshed = pnl(&ctx).await;
    // 280.00 + 180.00 + 200.00 + 50.00; yesterday evening's fill, read twice, once.
    assert_eq!(refreshed["gross_pnl"], 710.0, "{refreshed:#}");
    let seen = fake.snapshot();
    assert_eq!(seen.fill_windows.len(), 6, "{:?}", seen.fill_windows);
    assert_eq!(
        seen.fill_windows[5],
        (
            "2026-11-29 12:00:00".to_owned(),
            "2026-11-30 12:00:31".to_owned()
        )
    );
    assert_eq!(seen.today_fill_queries, 2);
    let history = tool(
        &ctx,
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-12-31", "limit": 50}),
    )
    .await;
    let ids: Vec<&str> = history["fills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 7, "{ids:?}");
    assert_eq!(ids.iter().filter(|i| **i == "F5").count(), 1, "{ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_file_that_cannot_be_used_is_said_in_the_notes_and_the_health() {
    let fake = OpenDFake::start(bursa()).await;
    let dir = tempfile::tempdir().unwrap();
    // The budget's file is a directory: it can be neither opened for writing nor locked.
    std::fs::create_dir_all(dir.path().join(format!("opend/budget-{MY_ACC}.txt"))).unwrap();
    let ctx = desk(OpenDConfig {
        state_dir: Some(dir.path().to_path_buf()),
        ..config(fake.port, Duration::from_secs(5))
    });
    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    // The queries were still sent: OpenD's own refusal is the guard.
    assert_eq!(pnl["gross_pnl"], 280.0, "{pnl:#}");
    let notes = pnl["notes"].to_string();
    assert!(notes.contains("cannot be opened or locked"), "{notes}");
    assert!(
        notes.contains("OpenD's own refusal is the guard"),
        "{notes}"
    );
    let health = tool(&ctx, "get_server_health", json!({})).await;
    let broker = &health["brokers"][0];
    assert_eq!(broker["status"], "degraded", "{health:#}");
    assert!(
        broker["detail"]
            .as_str()
            .unwrap()
            .contains("cannot be opened or locked"),
        "{health:#}"
    );
}
