//! The `marketdata` toolset against the perps venues: `list_markets` and
//! `get_recent_trades` from Hyperliquid's `/info` (a fake on loopback, in the venue's
//! shapes) and from the sim, with figures checked against what each was given; a broker
//! without perps answers `not_supported` naming those that have them.

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
use common::hl_fake::{HlFailure, HlFake, HlMarket, HlState, HlTrade};
use serde_json::{Value, json};
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::hyperliquid::{HyperliquidBroker, HyperliquidConfig};
use tradedesk_brokers::sim::{Clock, ManualClock, SimBroker, SimConfig};
use tradedesk_brokers::{BookBroker, Broker};
use tradedesk_tools::config::State;
use tradedesk_tools::{ToolContext, call};

const WALLET: &str = "0x00000000000000000000000000000000c0ffee01";
/// 2026-11-30 15:00:00 UTC, in milliseconds.
const T: i64 = 1_796_050_800_000;

fn market(coin: &str, mark: &str, oi: &str, lev: u32, dec: u32) -> HlMarket {
    HlMarket {
        coin: coin.into(),
        mark: mark.into(),
        mid: mark.into(),
        funding: "0.0000125".into(),
        open_interest: oi.into(),
        max_leverage: lev,
        sz_decimals: dec,
        oracle: None,
        delisted: false,
    }
}

fn trade(coin: &str, side: &str, px: &str, sz: &str, time: i64, tid: u64) -> HlTrade {
    HlTrade {
        coin: coin.into(),
        side: side.into(),
        px: px.into(),
        sz: sz.into(),
        time,
        tid,
    }
}

fn venue() -> HlState {
    let mut btc = market("BTC", "95000.0", "1000.5", 40, 5);
    btc.oracle = Some("94990.0".into());
    btc.funding = "-0.0000031".into();
    let mut gone = market("MATIC", "0.38", "0.0", 20, 1);
    gone.delisted = true;
    HlState {
        wallet: WALLET.into(),
        markets: vec![
            gone,
            market("ETH", "3500.0", "2000.0", 25, 4),
            btc,
            market("DOGE", "0.25", "50000000.0", 10, 0),
        ],
        trades: vec![
            trade("BTC", "B", "95001.0", "0.01500", T - 2_000, 301),
            trade("BTC", "A", "94999.5", "0.20000", T - 1_000, 302),
            trade("BTC", "B", "95000.5", "0.00123", T, 303),
            trade("ETH", "A", "3499.9", "1.5", T, 401),
        ],
        account_value: "0.0".into(),
        ..HlState::default()
    }
}

fn hyperliquid(url: &str, timeout: Duration) -> Arc<dyn Broker> {
    Arc::new(
        HyperliquidBroker::new(HyperliquidConfig {
            id: "HL".into(),
            wallet: WALLET.into(),
            base_url: url.into(),
            timeout,
        })
        .unwrap(),
    )
}

/// A sim account SIM at 2026-11-30 15:00:00 UTC; the directory must outlive the context.
fn sim(dir: &tempfile::TempDir) -> Arc<dyn Broker> {
    let state = State::open(dir.path()).unwrap();
    let clock = Arc::new(ManualClock::new(Utc.timestamp_millis_opt(T).unwrap()));
    Arc::new(SimBroker::new(
        SimConfig::new("SIM"),
        &demo_book().unwrap(),
        Arc::clone(&state.store),
        clock as Arc<dyn Clock>,
    ))
}

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args).await.unwrap().structured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperliquid_lists_every_market_with_its_figures_largest_first() {
    let fake = HlFake::start(venue()).await;
    let ctx =
        ToolContext::new("test").with_broker(hyperliquid(&fake.url, Duration::from_secs(5)), None);
    let r = tool(&ctx, "list_markets", json!({})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(4), Some(4))
    );
    assert_eq!(r["truncated"], false);
    let order: Vec<&str> = r["markets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["market"].as_str().unwrap())
        .collect();
    // 1000.5 x 95,000 = 95,047,500 > 50,000,000 x 0.25 = 12,500,000 > 2,000 x 3,500 =
    // 7,000,000; the delisted market last.
    assert_eq!(
        order,
        [
            "HYPERLIQUID:BTC-PERP",
            "HYPERLIQUID:DOGE-PERP",
            "HYPERLIQUID:ETH-PERP",
            "HYPERLIQUID:MATIC-PERP"
        ]
    );
    let btc = &r["markets"][0];
    assert_eq!(btc["account"], "HL");
    assert_eq!(btc["name"], "BTC");
    assert_eq!(btc["mark"], 95000.0);
    assert_eq!(btc["oracle"], 94990.0);
    assert_eq!(btc["funding_rate"], -0.0000031);
    assert_eq!(btc["funding_period_hours"], 1);
    assert_eq!(btc["open_interest"], 1000.5);
    assert_eq!(btc["open_interest_usd"], 95_047_500.0);
    assert_eq!(btc["max_leverage"], 40);
    assert_eq!(btc["min_size"], 0.00001, "szDecimals 5");
    assert_eq!(btc["open"], true);
    let doge = &r["markets"][1];
    assert_eq!(doge["min_size"], 1.0, "szDecimals 0");
    assert_eq!(doge["open_interest_usd"], 12_500_000.0);
    let matic = &r["markets"][3];
    assert_eq!(matic["open"], false, "isDelisted");
    assert!(
        r["notes"][0].as_str().unwrap().contains("every hour"),
        "{r:#}"
    );

    // Capped: a stated limit and a note when more exist.
    let r = tool(&ctx, "list_markets", json!({"limit": 2})).await;
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(2), Some(4))
    );
    assert_eq!(r["truncated"], true);
    assert_eq!(r["limit"], 2);
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("2 of 4 markets")),
        "{r:#}"
    );
    let r = tool(&ctx, "list_markets", json!({"limit": 501})).await;
    assert_eq!(r["error"]["code"], "invalid_argument", "{r:#}");
    assert!(r["error"]["message"].as_str().unwrap().contains("limit"));

    // The delisted market is still not quoted or traded.
    let q = tool(
        &ctx,
        "get_quote",
        json!({"account": "HL", "symbol": "MATIC"}),
    )
    .await;
    assert_eq!(q["error"]["code"], "unknown_symbol", "{q:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperliquid_recent_trades_are_the_coins_tape_newest_first() {
    let fake = HlFake::start(venue()).await;
    let ctx =
        ToolContext::new("test").with_broker(hyperliquid(&fake.url, Duration::from_secs(5)), None);
    let r = tool(
        &ctx,
        "get_recent_trades",
        json!({"market": "HYPERLIQUID:BTC-PERP"}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["account"], "HL");
    assert_eq!(r["market"], "HYPERLIQUID:BTC-PERP");
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(3), Some(3))
    );
    let t = &r["trades"];
    assert_eq!(t[0]["time"], "2026-11-30T15:00:00.000Z");
    assert_eq!(t[0]["price"], 95000.5);
    assert_eq!(t[0]["size"], 0.00123);
    assert_eq!(t[0]["side"], "buy", "B: the taker bought");
    // 95,000.5 x 0.00123 = 116.850615 -> 116.85.
    assert_eq!(t[0]["value_usd"], 116.85);
    assert_eq!(t[0]["id"], "303");
    assert_eq!(t[1]["side"], "sell", "A: the taker sold");
    assert_eq!(t[1]["size"], 0.2);
    // 94,999.5 x 0.2 = 18,999.90.
    assert_eq!(t[1]["value_usd"], 18999.9);
    assert_eq!(t[2]["time"], "2026-11-30T14:59:58.000Z");
    assert!(fake.requests().iter().any(|k| k == "recentTrades"));

    let r = tool(
        &ctx,
        "get_recent_trades",
        json!({"market": "BTC", "limit": 1}),
    )
    .await;
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(r["truncated"], true);
    assert!(
        r["notes"][0].as_str().unwrap().contains("1 of the 3"),
        "{r:#}"
    );

    let r = tool(&ctx, "get_recent_trades", json!({"market": "NOPE"})).await;
    assert_eq!(r["error"]["code"], "unknown_symbol", "{r:#}");
    assert!(r["error"]["message"].as_str().unwrap().contains("NOPE"));
    // The delisted market has no tape to read.
    let r = tool(&ctx, "get_recent_trades", json!({"market": "MATIC"})).await;
    assert_eq!(r["error"]["code"], "unknown_symbol", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sims_perp_lists_and_prints_at_its_own_quotes() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ToolContext::new("test").with_broker(sim(&dir), None);
    let r = tool(&ctx, "list_markets", json!({"account": "SIM"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["count"], 1);
    let m = &r["markets"][0];
    assert_eq!(m["market"], "PERP:BTC-PERP");
    let q = tool(
        &ctx,
        "get_quote",
        json!({"account": "SIM", "symbol": "BTC-PERP"}),
    )
    .await;
    assert_eq!(m["mark"], q["mid"], "the mark is the mid: {q:#}");
    assert_eq!(m["oracle"], Value::Null);
    assert_eq!(m["open_interest"], Value::Null);
    assert_eq!(m["open_interest_usd"], Value::Null);
    assert_eq!(m["funding_rate"], 0.0, "the sim charges no funding");
    assert_eq!(m["max_leverage"], 20, "margin rate 0.05");
    assert_eq!(m["min_size"], 0.001);
    assert_eq!(m["open"], true);
    assert!(r["notes"][0].as_str().unwrap().contains("no funding"));

    let r = tool(&ctx, "get_recent_trades", json!({"market": "BTC-PERP"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["market"], "PERP:BTC-PERP");
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(20), Some(100))
    );
    assert_eq!(r["truncated"], true);
    let first = &r["trades"][0];
    assert_eq!(first["time"], "2026-11-30T15:00:00.000Z");
    let at = if first["side"] == "buy" {
        &q["ask"]
    } else {
        &q["bid"]
    };
    assert_eq!(&first["price"], at, "{first:#} {q:#}");
    assert_eq!(r["trades"][1]["time"], "2026-11-30T14:59:55.000Z");
    for t in r["trades"].as_array().unwrap() {
        let lots = t["size"].as_f64().unwrap() / 0.001;
        assert!((1.0..=20.0).contains(&lots.round()), "{t:#}");
        let value = t["price"].as_f64().unwrap() * t["size"].as_f64().unwrap();
        assert!(
            (value - t["value_usd"].as_f64().unwrap()).abs() < 0.006,
            "{t:#}"
        );
    }
    // The same clock, the same tape.
    let again = tool(&ctx, "get_recent_trades", json!({"market": "BTC-PERP"})).await;
    assert_eq!(again["trades"], r["trades"]);
    let r = tool(
        &ctx,
        "get_recent_trades",
        json!({"market": "BTC-PERP", "limit": 101}),
    )
    .await;
    assert_eq!(r["error"]["code"], "invalid_argument", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_without_perps_is_not_supported_naming_those_that_are() {
    let book = demo_book().unwrap();
    let ctx = ToolContext::new("test")
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book.clone())), None);
    let account = book.accounts[0].id.clone();
    for (name, args) in [
        ("list_markets", json!({})),
        ("list_markets", json!({"account": account})),
        ("get_recent_trades", json!({"market": "BTC"})),
        (
            "get_recent_trades",
            json!({"market": "BTC", "account": account}),
        ),
    ] {
        let r = tool(&ctx, name, args.clone()).await;
        assert_eq!(r["error"]["code"], "not_supported", "{name} {args}: {r:#}");
        let hint = r["error"]["hint"].as_str().unwrap();
        assert!(
            hint.contains("Hyperliquid") && hint.contains("sim"),
            "{hint}"
        );
    }
    let r = tool(&ctx, "list_markets", json!({"account": "NOPE"})).await;
    assert_eq!(r["error"]["code"], "unknown_account", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_perps_venue_answers_and_one_that_fails_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let fake = HlFake::start(venue()).await;
    let ctx = ToolContext::new("test")
        .with_broker(sim(&dir), None)
        .with_broker(hyperliquid(&fake.url, Duration::from_secs(5)), None);
    let r = tool(&ctx, "list_markets", json!({})).await;
    assert_eq!(r["total"], 5, "{r:#}");
    // The sim's perp has no open interest: after every market that has one.
    assert_eq!(r["markets"][3]["market"], "PERP:BTC-PERP", "{r:#}");
    // Without an account, Hyperliquid's tape first; the sim's BTC-PERP by name.
    let r = tool(&ctx, "get_recent_trades", json!({"market": "BTC-PERP"})).await;
    assert_eq!(r["account"], "HL", "{r:#}");
    let r = tool(
        &ctx,
        "get_recent_trades",
        json!({"market": "PERP:BTC-PERP", "account": "SIM"}),
    )
    .await;
    assert_eq!(r["account"], "SIM", "{r:#}");

    fake.fail(HlFailure::ServerError);
    let r = tool(&ctx, "list_markets", json!({})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["total"], 1);
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().starts_with("HL: left out")),
        "{r:#}"
    );
    let r = tool(&ctx, "list_markets", json!({"account": "HL"})).await;
    assert_eq!(r["error"]["code"], "broker_unavailable", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_venue_that_hangs_is_cut_off_at_the_broker_timeout() {
    let fake = HlFake::start(venue()).await;
    fake.fail(HlFailure::Hang);
    // The adapter's own timeout is long: the tool's broker_timeout cuts it off.
    let mut ctx =
        ToolContext::new("test").with_broker(hyperliquid(&fake.url, Duration::from_secs(60)), None);
    ctx.broker_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let r = tool(
        &ctx,
        "get_recent_trades",
        json!({"market": "BTC", "account": "HL"}),
    )
    .await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    let r = tool(&ctx, "list_markets", json!({"account": "HL"})).await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    // Generous: only proves the call cannot hang.
    assert!(started.elapsed() < Duration::from_secs(30));
}
