//! Hyperliquid, read-only, against a fake of its `/info` endpoint on loopback: markets,
//! a wallet's positions and paged fills, quotes and candles; and a venue that is down or
//! hangs.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::hl_fake::{HlFailure, HlFake, HlFill, HlMarket, HlPosition, HlState};
use serde_json::{Value, json};
use tradedesk_brokers::hyperliquid::{HyperliquidBroker, HyperliquidConfig};
use tradedesk_tools::{ToolContext, call};

const WALLET: &str = "0x00000000000000000000000000000000c0ffee01";
/// 2026-11-01 00:00:00 UTC.
const T0: i64 = 1_793_491_200_000;

fn scenario() -> HlState {
    let market = |coin: &str, mark: &str, mid: &str, lev: u32, dec: u32| HlMarket {
        coin: coin.into(),
        mark: mark.into(),
        mid: mid.into(),
        funding: "0.0000125".into(),
        open_interest: "1000.5".into(),
        max_leverage: lev,
        sz_decimals: dec,
    };
    // 2,001 buys of 0.001 BTC at 90,000 (more than one page of 2,000), then one sell of 1.
    let mut fills: Vec<HlFill> = (0..2_001u64)
        .map(|i| HlFill {
            coin: "BTC".into(),
            px: "90000.0".into(),
            sz: "0.001".into(),
            side: "B".into(),
            time: T0 + i64::try_from(i).unwrap() * 1_000,
            fee: "0.03".into(),
            tid: 1_000 + i,
            closed_pnl: "0.0".into(),
        })
        .collect();
    fills.push(HlFill {
        coin: "BTC".into(),
        px: "95000.0".into(),
        sz: "1.0".into(),
        side: "A".into(),
        time: T0 + 3_000_000,
        fee: "1.0".into(),
        tid: 9_999,
        closed_pnl: "5000.0".into(),
    });
    HlState {
        wallet: WALLET.into(),
        markets: vec![
            market("BTC", "95000.0", "95010.0", 40, 5),
            market("ETH", "3500.0", "3500.5", 25, 4),
        ],
        positions: vec![HlPosition {
            coin: "BTC".into(),
            szi: "1.001".into(),
            entry_px: "90000.0".into(),
            unrealized_pnl: "5005.0".into(),
            liquidation_px: Some("61000.0".into()),
            leverage: 10,
        }],
        account_value: "20000.0".into(),
        fills,
        ..HlState::default()
    }
}

fn broker(url: &str, timeout: Duration) -> HyperliquidBroker {
    HyperliquidBroker::new(HyperliquidConfig {
        id: "HL".into(),
        wallet: WALLET.into(),
        base_url: url.into(),
        timeout,
    })
    .unwrap()
}

fn desk(url: &str, timeout: Duration) -> ToolContext {
    let mut ctx = ToolContext::new("test").with_broker(Arc::new(broker(url, timeout)), None);
    ctx.broker_timeout = timeout * 3;
    ctx
}

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args).await.unwrap().structured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wallet_reads_as_positions_fills_and_pnl() {
    let fake = HlFake::start(scenario()).await;
    let ctx = desk(&fake.url, Duration::from_secs(5));
    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let btc = &positions["positions"][0];
    assert_eq!(btc["symbol"], "BTC-PERP", "{positions:#}");
    assert_eq!(btc["exchange"], "HYPERLIQUID");
    assert_eq!(btc["quantity"], 1.001);
    assert_eq!(btc["market_price"], 95000.0);

    // Every fill once, across the page boundary.
    let history = tool(
        &ctx,
        "get_trade_history",
        json!({"start": "2026-11-01", "end": "2026-11-30", "limit": 1}),
    )
    .await;
    assert_eq!(history["total_count"], 2_002, "{history:#}");
    let pages = fake
        .requests()
        .iter()
        .filter(|r| *r == "userFillsByTime")
        .count();
    assert!(pages >= 2, "{pages}");

    // FIFO: 1 BTC bought at 90,000 sold at 95,000.
    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-11-01", "end": "2026-11-30"}),
    )
    .await;
    assert_eq!(pnl["gross_pnl"], 5000.0, "{pnl:#}");

    // The account's value is what Hyperliquid reports: cash 14,995 + unrealized 5,005.
    let accounts = tool(&ctx, "get_accounts", json!({})).await;
    let value = accounts["accounts"][0]["total_value"].as_f64().unwrap();
    assert!((value - 20000.0).abs() < 0.01, "{accounts:#}");

    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(health["brokers"][0]["status"], "ok", "{health:#}");
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_markets_and_candles_come_from_info() {
    let fake = HlFake::start(scenario()).await;
    let ctx = desk(&fake.url, Duration::from_secs(5));
    let q = tool(&ctx, "get_quote", json!({"account": "HL", "symbol": "BTC"})).await;
    assert_eq!(
        (q["bid"].as_f64(), q["ask"].as_f64()),
        (Some(95009.5), Some(95010.5)),
        "{q:#}"
    );
    assert_eq!(q["symbol"], "BTC-PERP");
    let unknown = tool(
        &ctx,
        "get_quote",
        json!({"account": "HL", "symbol": "NOPE"}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], "unknown_symbol", "{unknown:#}");
    assert!(
        unknown.to_string().contains("BTC"),
        "names listed coins: {unknown:#}"
    );
    let bars = tool(
        &ctx,
        "get_bars",
        json!({"source": {"symbol": "HYPERLIQUID:BTC-PERP", "account": "HL", "interval": "1h",
            "start": "2026-11-29T00:00:00Z", "end": "2026-11-30T00:00:00Z"}, "max_rows": 0}),
    )
    .await;
    assert_eq!(bars["status"], "ok", "{bars:#}");
    assert_eq!(bars["total"], 5, "{bars:#}");
    assert_eq!(bars["bars"][4]["close"], 95000.0, "{bars:#}");
    let market = broker(&fake.url, Duration::from_secs(5))
        .market("ETH")
        .await
        .unwrap();
    assert_eq!(market.max_leverage, 25);
    assert_eq!(market.mark.to_string(), "3500.0");
    assert_eq!(market.funding.to_string(), "0.0000125");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perps_quotes_take_the_live_mark_and_maximum_leverage() {
    let fake = HlFake::start(scenario()).await;
    let ctx = desk(&fake.url, Duration::from_secs(5));
    // BTC: mark 95,000, maximum leverage 40.
    let open = tool(
        &ctx,
        "quote_open_position",
        json!({"market": "BTC", "side": "long", "margin": 1000, "leverage": 40}),
    )
    .await;
    assert_eq!(open["status"], "ok", "{open:#}");
    assert_eq!(open["market"], "HYPERLIQUID:BTC-PERP");
    assert_eq!(open["entry_price"], 95000.0);
    assert_eq!(open["max_leverage"], 40);
    assert_eq!(open["notional"], 40000.0);
    // 95,000 x (1 - 1/40) = 92,625.
    assert!((open["bust_price"].as_f64().unwrap() - 92_625.0).abs() < 1e-9);
    let over = tool(
        &ctx,
        "quote_open_position",
        json!({"market": "BTC", "side": "long", "margin": 1000, "leverage": 41}),
    )
    .await;
    assert_eq!(over["error"]["code"], "invalid_argument", "{over:#}");
    assert!(
        over["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1 to 40")
    );
    let ladder = tool(
        &ctx,
        "quote_leverage_ladder",
        json!({"market": "ETH", "account": "HL", "side": "short", "margin": 100}),
    )
    .await;
    let steps: Vec<u64> = ladder["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["leverage"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 5, 10, 25], "{ladder:#}");
    assert_eq!(ladder["mark_price"], 3500.0);
    let close = tool(
        &ctx,
        "quote_close_position",
        json!({"market": "BTC", "side": "short", "margin": 1000, "leverage": 10, "entry_price": 100000}),
    )
    .await;
    // Short 0.1 BTC from 100,000, out at the mark 95,000: +500.
    assert!(
        (close["net_pnl"].as_f64().unwrap() - 500.0).abs() < 1e-9,
        "{close:#}"
    );
    let unknown = tool(
        &ctx,
        "quote_open_position",
        json!({"market": "NOPE", "side": "long", "margin": 10, "leverage": 2}),
    )
    .await;
    assert_eq!(unknown["error"]["code"], "unknown_symbol", "{unknown:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_venue_that_is_down_or_hangs_answers_in_bounded_time() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let ctx = desk(&format!("http://{closed}"), Duration::from_secs(5));
    let started = Instant::now();
    let down = tool(&ctx, "get_positions", json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(down["error"]["code"], "broker_unavailable", "{down:#}");
    assert!(
        down["error"]["hint"].as_str().unwrap().contains("base_url"),
        "{down:#}"
    );

    let fake = HlFake::start(scenario()).await;
    fake.fail(HlFailure::Hang);
    let bound = Duration::from_millis(700);
    let ctx = desk(&fake.url, bound);
    let started = Instant::now();
    let hung = tool(&ctx, "get_positions", json!({})).await;
    assert!(started.elapsed() < bound + Duration::from_secs(1));
    assert_eq!(hung["error"]["code"], "broker_timeout", "{hung:#}");
    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(health["brokers"][0]["status"], "down", "{health:#}");

    fake.fail(HlFailure::ServerError);
    let ctx = desk(&fake.url, Duration::from_secs(5));
    let failed = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(failed["error"]["code"], "broker_unavailable", "{failed:#}");
}

#[test]
fn a_config_checks_the_wallet() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("hl.toml");
    std::fs::write(
        &config,
        "[[accounts]]\nid = \"HL\"\nbroker = \"hyperliquid\"\naccount = \"0x1234\"\n",
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
    assert!(err.contains("0x1234") && err.contains("40 hex"), "{err}");
}
