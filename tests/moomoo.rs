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

use common::opend_fake::{OpenDFailure, OpenDFake, OpenDState};
use serde_json::{Value, json};
use tradedesk_brokers::Broker;
use tradedesk_brokers::futu::proto;
use tradedesk_brokers::futu::{FutuMarket, OpenDBroker, OpenDConfig};
use tradedesk_tools::{ToolContext, call};

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
) -> proto::OrderFill {
    proto::OrderFill {
        trd_side: Some(side),
        fill_id: Some(id),
        fill_id_ex: Some(format!("F{id}")),
        order_id: Some(id * 10),
        order_id_ex: Some(order.to_owned()),
        code: Some(code.to_owned()),
        name: Some(format!("Bursa {code}")),
        qty: Some(qty),
        price: Some(price),
        create_time: Some(at.to_owned()),
        sec_market: Some(proto::sec_market::MY),
        create_timestamp: None,
        status: Some(0),
        trd_market: Some(proto::trd_market::MY),
    }
}

fn position(code: &str, qty: f64, price: f64) -> proto::Position {
    proto::Position {
        position_id: Some(1),
        position_side: Some(0),
        code: Some(code.to_owned()),
        name: Some(format!("Bursa {code}")),
        qty: Some(qty),
        can_sell_qty: Some(qty),
        price: Some(price),
        val: Some(qty * price),
        pl_val: Some(0.0),
        sec_market: Some(proto::sec_market::MY),
        currency: Some(proto::currency::MYR),
        trd_market: Some(proto::trd_market::MY),
        average_cost_price: None,
    }
}

fn basic(code: &str, bid: f64, ask: f64) -> proto::SnapshotBasicData {
    proto::SnapshotBasicData {
        security: Some(proto::Security {
            market: Some(proto::qot_market::MY),
            code: Some(code.to_owned()),
        }),
        r#type: Some(3),
        is_suspend: Some(false),
        list_time: Some("1990-01-01".to_owned()),
        lot_size: Some(100),
        price_spread: Some(0.01),
        update_time: Some("2026-11-30 16:50:00".to_owned()),
        high_price: Some(ask),
        open_price: Some(bid),
        low_price: Some(bid),
        last_close_price: Some(bid),
        cur_price: Some(ask),
        volume: Some(1_000_000),
        turnover: Some(0.0),
        turnover_rate: Some(0.0),
        update_timestamp: Some(1_796_028_600.0),
        ask_price: Some(ask),
        bid_price: Some(bid),
        name: Some(format!("Bursa {code}")),
    }
}

/// A moomoo MY login with a live Bursa account (and a US one beside it).
pub fn bursa() -> OpenDState {
    let accounts = vec![
        proto::TrdAcc {
            trd_env: Some(proto::trd_env::REAL),
            acc_id: Some(MY_ACC),
            trd_market_auth_list: vec![proto::trd_market::MY],
            acc_type: Some(1),
            card_num: Some("1001".to_owned()),
            security_firm: Some(6),
            acc_status: Some(0),
        },
        proto::TrdAcc {
            trd_env: Some(proto::trd_env::REAL),
            acc_id: Some(US_ACC),
            trd_market_auth_list: vec![proto::trd_market::US],
            acc_type: Some(2),
            card_num: Some("1002".to_owned()),
            security_firm: Some(6),
            acc_status: Some(0),
        },
    ];
    let mut s = OpenDState {
        accounts,
        ..OpenDState::default()
    };
    s.funds.insert(
        MY_ACC,
        proto::Funds {
            power: Some(20_000.0),
            total_assets: Some(32_580.0),
            cash: Some(20_000.0),
            market_val: Some(12_580.0),
            frozen_cash: Some(0.0),
            debt_cash: Some(0.0),
            avl_withdrawal_cash: Some(20_000.0),
            currency: Some(proto::currency::MYR),
            cash_info_list: vec![proto::AccCashInfo {
                currency: Some(proto::currency::MYR),
                cash: Some(20_000.0),
                available_balance: Some(20_000.0),
                net_cash_power: Some(20_000.0),
            }],
        },
    );
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
        (proto::qot_market::MY, "1155".to_owned()),
        basic("1155", 10.28, 10.30),
    );
    s.klines.insert(
        (proto::qot_market::MY, "1155".to_owned()),
        (0..5)
            .map(|i| proto::KLine {
                time: Some(format!("2026-11-2{} 00:00:00", i + 3)),
                is_blank: Some(false),
                high_price: Some(10.5),
                open_price: Some(10.0),
                low_price: Some(9.9),
                close_price: Some(10.1 + f64::from(i) / 10.0),
                last_close_price: Some(10.0),
                volume: Some(1_000),
                turnover: None,
                timestamp: None,
            })
            .collect(),
    );
    s
}

pub fn config(port: u16, timeout: Duration) -> OpenDConfig {
    OpenDConfig {
        id: "MOOMOO-MY".into(),
        host: "127.0.0.1".into(),
        port,
        acc_id: None,
        market: FutuMarket::My,
        simulate: false,
        history_days: 365,
        timeout,
    }
}

fn desk(config: OpenDConfig) -> ToolContext {
    let mut ctx = ToolContext::new("test").with_broker(Arc::new(OpenDBroker::new(config)), None);
    ctx.broker_timeout = Duration::from_secs(10);
    ctx
}

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args).await.unwrap().structured
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
        .filter(|(id, _)| *id == proto::id::INIT_CONNECT)
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
    assert_eq!(count(proto::id::KEEP_ALIVE), 1, "{:?}", seen.requests);
    assert_eq!(count(proto::id::INIT_CONNECT), 1, "{:?}", seen.requests);
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
        proto::id::INIT_CONNECT,
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
        proto::id::GET_FUNDS,
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
