//! `search_instruments` against every adapter's fake (Alpaca's asset list, IBKR's
//! matching symbols over TWS, OpenD's static info, Hyperliquid's `meta`, the DWX EA's
//! files), the sim and book files: figures checked against what each fake was given,
//! exact symbols before prefixes before names, the limit and its note, an account that
//! fails named without failing the rest, and the same answer over the CLI and MCP.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use common::alpaca_fake::{AlpacaFake, Failure, Listing};
use common::desk::{KEY, SECRET, alpaca, opend};
use common::dwx_fake::{EaOrder, EaState, FakeEa};
use common::hl_fake::{HlFake, HlMarket, HlState};
use common::opend_fake::{OpenDFailure, OpenDFake, OpenDState, build};
use common::opend_pb as pb;
use common::tws_fake::{FakeTws, TwsState, TwsSymbolSample};
use serde_json::{Value, json};
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::dwx::{DwxBroker, DwxConfig, Platform, SymbolSpec};
use tradedesk_brokers::hyperliquid::{HyperliquidBroker, HyperliquidConfig};
use tradedesk_brokers::ibkr::{FlexSource, IbkrFlexBroker};
use tradedesk_brokers::sim::{Clock, ManualClock, SimBroker, SimConfig};
use tradedesk_brokers::tws::{TwsBroker, TwsConfig};
use tradedesk_brokers::{BookBroker, Broker, parse_book};
use tradedesk_tools::config::State;
use tradedesk_tools::{ToolContext, call};

const WALLET: &str = "0x00000000000000000000000000000000c0ffee01";

async fn tool(ctx: &ToolContext, args: Value) -> Value {
    call(ctx, "search_instruments", args)
        .await
        .unwrap()
        .structured
}

fn rows(r: &Value) -> &Vec<Value> {
    r["instruments"]
        .as_array()
        .unwrap_or_else(|| panic!("no instruments: {r:#}"))
}

fn row<'a>(r: &'a Value, account: &str, instrument: &str) -> &'a Value {
    rows(r)
        .iter()
        .find(|i| i["account"] == account && i["instrument"] == instrument)
        .unwrap_or_else(|| panic!("no {account} {instrument}: {r:#}"))
}

fn has_note(r: &Value, text: &str) -> bool {
    r["notes"]
        .as_array()
        .is_some_and(|n| n.iter().any(|n| n.as_str().unwrap_or("").contains(text)))
}

/// The demo's book accounts and the sim (SIM) at 2026-11-30 15:00 UTC.
fn demo(dir: &tempfile::TempDir) -> ToolContext {
    let state = State::open(dir.path()).unwrap();
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 11, 30, 15, 0, 0).unwrap(),
    ));
    let book = demo_book().unwrap();
    let sim = SimBroker::new(
        SimConfig::new("SIM"),
        &book,
        Arc::clone(&state.store),
        clock as Arc<dyn Clock>,
    );
    ToolContext::new("test")
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book)), None)
        .with_broker(Arc::new(sim), None)
}

// ---------------------------------------------------------------------------------------
// The sim and book files

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_answers_the_sims_rules_and_the_books_own_instruments() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = demo(&dir);
    let r = tool(&ctx, json!({"query": "aapl"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(
        (r["count"].as_u64(), r["total"].as_u64()),
        (Some(2), Some(2))
    );
    // The sim's (tradable) before the book's (which cannot say).
    let sim = &rows(&r)[0];
    assert_eq!(sim["account"], "SIM");
    assert_eq!(sim["instrument"], "NASDAQ:AAPL");
    assert_eq!(sim["matched"], "symbol");
    assert_eq!(sim["name"], "Apple Inc.");
    assert_eq!(sim["tradable"], true);
    assert_eq!(sim["rules"]["lot_step"], 1.0);
    assert_eq!(sim["rules"]["min_quantity"], 1.0);
    assert_eq!(sim["rules"]["tick"], 0.01);
    assert_eq!(sim["rules"]["unit"], "shares");
    let book = &rows(&r)[1];
    assert_eq!(book["account"], "IBKR-DEMO");
    assert_eq!(book["tradable"], Value::Null);
    assert_eq!(book["rules"]["multiplier"], 1.0);
    assert_eq!(book["rules"]["tick"], Value::Null, "a book gives no tick");
    assert!(has_note(
        &r,
        "IBKR-DEMO: searched the instruments of its own book"
    ));
    let sources: Vec<&str> = r["searched"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["source"].as_str().unwrap())
        .collect();
    assert!(sources.contains(&"the sim's instrument table"), "{r:#}");

    // The qualified symbol is what get_quote takes; the tick is the one it quotes in.
    let r = tool(&ctx, json!({"query": "1155", "account": "SIM"})).await;
    let maybank = &rows(&r)[0];
    assert_eq!(maybank["instrument"], "BURSA:1155");
    assert_eq!(maybank["currency"], "MYR");
    assert_eq!(maybank["rules"]["lot_size"], 100.0, "Bursa's board lot");
    assert_eq!(maybank["rules"]["min_quantity"], 100.0);
    let q = call(
        &ctx,
        "get_quote",
        json!({"account": "SIM", "symbol": maybank["instrument"]}),
    )
    .await
    .unwrap()
    .structured;
    assert_eq!(q["status"], "ok", "{q:#}");
    assert_eq!(
        (&q["exchange"], &q["symbol"]),
        (&json!("BURSA"), &json!("1155"))
    );
    assert_eq!(q["tick"], maybank["rules"]["tick"], "{q:#}");

    // FX and the perp carry their leverage.
    let r = tool(&ctx, json!({"query": "EUR"})).await;
    let eur = row(&r, "SIM", "FX:EURUSD");
    assert_eq!(eur["matched"], "symbol_prefix");
    assert_eq!(eur["rules"]["multiplier"], 100_000.0);
    assert_eq!(eur["rules"]["max_leverage"], 30, "margin 1/30");
    assert_eq!(eur["rules"]["marginable"], true);
    assert_eq!(eur["rules"]["unit"], "lots");
    let r = tool(&ctx, json!({"query": "btc", "asset_class": "perp"})).await;
    assert_eq!(r["count"], 1, "{r:#}");
    assert_eq!(r["instruments"][0]["instrument"], "PERP:BTC-PERP");
    assert_eq!(r["instruments"][0]["rules"]["max_leverage"], 20);
    assert_eq!(r["asset_class"], "perp");

    // An asset class, an exchange, an account.
    let r = tool(&ctx, json!({"query": "a", "asset_class": "etf"})).await;
    assert!(rows(&r).iter().all(|i| i["asset_class"] == "etf"), "{r:#}");
    assert!(rows(&r).iter().any(|i| i["instrument"] == "ARCA:ARKK"));
    let r = tool(&ctx, json!({"query": "NYSE:J"})).await;
    assert!(rows(&r).iter().all(|i| i["exchange"] == "NYSE"), "{r:#}");
    assert!(rows(&r).iter().any(|i| i["instrument"] == "NYSE:JPM"));
    assert!(rows(&r).iter().any(|i| i["instrument"] == "NYSE:JNJ"));
    let r = tool(&ctx, json!({"query": "aapl", "account": "IBKR-DEMO"})).await;
    assert_eq!(r["count"], 1, "{r:#}");

    // Capped, with the limit stated.
    let r = tool(&ctx, json!({"query": "a", "limit": 2})).await;
    assert_eq!(r["count"], 2);
    assert_eq!(r["limit"], 2);
    assert_eq!(r["truncated"], true);
    let total = r["total"].as_u64().unwrap();
    assert!(total > 2, "{r:#}");
    assert!(
        has_note(&r, &format!("2 of {total} matches listed")),
        "{r:#}"
    );

    // Nothing matched: an answer, saying so.
    let r = tool(&ctx, json!({"query": "zzzz"})).await;
    assert_eq!(
        (r["status"].as_str(), r["count"].as_u64()),
        (Some("ok"), Some(0))
    );
    assert!(has_note(&r, "nothing matched"), "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_symbols_come_before_prefixes_before_names() {
    let book = parse_book(
        "test",
        r#"{"format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-11-30",
        "accounts": [{"id": "B", "broker": "book", "currency": "USD"}],
        "instruments": [
            {"symbol": "XYZ", "exchange": "NYSE", "currency": "USD", "asset_class": "equity", "name": "Abacus Holdings"},
            {"symbol": "ABC", "exchange": "NYSE", "currency": "USD", "asset_class": "equity", "name": "Zeta Corp"},
            {"symbol": "AB", "exchange": "NYSE", "currency": "USD", "asset_class": "equity", "name": "Omega Inc"},
            {"symbol": "QQQ", "exchange": "NASDAQ", "currency": "USD", "asset_class": "etf", "name": "Nothing Alike"}
        ],
        "fills": [
            {"id": "1", "account": "B", "exchange": "NYSE", "symbol": "XYZ", "side": "buy", "quantity": "1", "price": "10", "commission": "0", "commission_currency": "USD", "time": "2026-01-05T10:00:00-05:00"},
            {"id": "2", "account": "B", "exchange": "NYSE", "symbol": "ABC", "side": "buy", "quantity": "1", "price": "10", "commission": "0", "commission_currency": "USD", "time": "2026-01-05T10:00:00-05:00"},
            {"id": "3", "account": "B", "exchange": "NYSE", "symbol": "AB", "side": "buy", "quantity": "1", "price": "10", "commission": "0", "commission_currency": "USD", "time": "2026-01-05T10:00:00-05:00"},
            {"id": "4", "account": "B", "exchange": "NASDAQ", "symbol": "QQQ", "side": "buy", "quantity": "1", "price": "10", "commission": "0", "commission_currency": "USD", "time": "2026-01-05T10:00:00-05:00"}
        ]}"#,
    )
    .unwrap();
    let ctx = ToolContext::new("test").with_broker(Arc::new(BookBroker::new("test", book)), None);
    let r = tool(&ctx, json!({"query": "ab"})).await;
    let order: Vec<(&str, &str)> = rows(&r)
        .iter()
        .map(|i| {
            (
                i["instrument"].as_str().unwrap(),
                i["matched"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        order,
        [
            ("NYSE:AB", "symbol"),
            ("NYSE:ABC", "symbol_prefix"),
            ("NYSE:XYZ", "name")
        ]
    );
    let r = tool(&ctx, json!({"query": "zeta corp"})).await;
    assert_eq!(r["count"], 1);
    assert_eq!(r["instruments"][0]["instrument"], "NYSE:ABC");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_name_what_was_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = demo(&dir);
    for (args, code, field) in [
        (json!({"query": ""}), "invalid_argument", "query"),
        (json!({"query": "  !! "}), "invalid_argument", "query"),
        (
            json!({"query": "a".repeat(101)}),
            "invalid_argument",
            "query",
        ),
        (
            json!({"query": "a", "limit": 0}),
            "invalid_argument",
            "limit",
        ),
        (
            json!({"query": "a", "limit": 101}),
            "invalid_argument",
            "limit",
        ),
        (
            json!({"query": "a", "asset_class": "stock"}),
            "invalid_argument",
            "asset_class",
        ),
        (
            json!({"query": "a", "account": "NOPE"}),
            "unknown_account",
            "NOPE",
        ),
    ] {
        let r = tool(&ctx, args.clone()).await;
        assert_eq!(r["error"]["code"], code, "{args}: {r:#}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(field),
            "{args}: {r:#}"
        );
        assert!(!r["error"]["hint"].as_str().unwrap().is_empty());
    }
    let r = tool(&ctx, json!({"query": "a", "account": "NOPE"})).await;
    assert!(
        r["error"]["hint"].as_str().unwrap().contains("Alpaca"),
        "the hint names the brokers that search: {r:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flex_statement_searches_the_instruments_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("statement.xml");
    std::fs::write(
        &path,
        r#"<?xml version="1.0" encoding="UTF-8"?>
<FlexQueryResponse queryName="tradedesk-test" type="AF">
<FlexStatements count="1">
<FlexStatement accountId="U7654321" fromDate="20260101" toDate="20261125" period="YearToDate" whenGenerated="20261126;080000">
<AccountInformation accountId="U7654321" currency="USD"/>
<Trades>
<Trade accountId="U7654321" currency="USD" assetCategory="STK" symbol="AAPL" description="APPLE INC" conid="265598" listingExchange="NASDAQ" multiplier="1" tradeID="1" ibExecID="0000a1.6601.01.01" dateTime="20260302;100000" tradeDate="20260302" quantity="100" tradePrice="200" ibCommission="0" ibCommissionCurrency="USD" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U7654321" currency="USD" assetCategory="STK" symbol="MSFT" description="MICROSOFT CORP" conid="272093" listingExchange="NASDAQ" multiplier="1" tradeID="2" ibExecID="0000a1.6602.01.01" dateTime="20261124;100000" tradeDate="20261124" quantity="10" tradePrice="400" ibCommission="0" ibCommissionCurrency="USD" buySell="BUY" levelOfDetail="EXECUTION"/>
</Trades>
</FlexStatement>
</FlexStatements>
</FlexQueryResponse>
"#,
    )
    .unwrap();
    let flex = IbkrFlexBroker::new(
        "IBKR",
        Some("U7654321".into()),
        FlexSource::File(path),
        Duration::from_secs(5),
    )
    .unwrap();
    let ctx = ToolContext::new("test").with_broker(Arc::new(flex), None);
    let r = tool(&ctx, json!({"query": "msft"})).await;
    assert_eq!(r["count"], 1, "{r:#}");
    let msft = &r["instruments"][0];
    assert_eq!(msft["account"], "IBKR");
    assert_eq!(msft["instrument"], "NASDAQ:MSFT");
    assert_eq!(msft["matched"], "symbol");
    let r = tool(&ctx, json!({"query": "tsla", "account": "IBKR"})).await;
    assert_eq!(
        (r["status"].as_str(), r["count"].as_u64()),
        (Some("ok"), Some(0))
    );
}

// ---------------------------------------------------------------------------------------
// Alpaca: GET /v2/assets

fn alpaca_listing(fake: &AlpacaFake) {
    fake.list_asset(
        "BTC/USD",
        "Bitcoin / US Dollar",
        "ALPACA",
        Listing::crypto("0.0001", "0.000000001", "1"),
    );
    fake.list_asset(
        "APLX",
        "Apple Hospitality Example Trust",
        "OTC",
        Listing {
            tradable: false,
            fractionable: false,
            shortable: false,
            marginable: false,
            easy_to_borrow: false,
            ..Listing::stock()
        },
    );
    fake.list_asset(
        "APLD",
        "Applied Delisted Co",
        "NYSE",
        Listing {
            status: "inactive",
            tradable: false,
            ..Listing::stock()
        },
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpaca_searches_its_active_assets_once_an_hour() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    alpaca_listing(&fake);
    let ctx = ToolContext::new("test").with_broker(alpaca(&fake.url, Duration::from_secs(5)), None);
    let r = tool(&ctx, json!({"query": "apple"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    // The inactive asset is not asked for; the untradable one comes last.
    let order: Vec<&str> = rows(&r)
        .iter()
        .map(|i| i["instrument"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["NASDAQ:AAPL", "OTC:APLX"], "{r:#}");
    let aapl = &rows(&r)[0];
    assert_eq!(aapl["name"], "Apple Inc. Common Stock");
    assert_eq!(aapl["matched"], "name");
    assert_eq!(aapl["tradable"], true);
    assert_eq!(aapl["currency"], "USD");
    let rules = &aapl["rules"];
    assert_eq!(rules["fractionable"], true);
    assert_eq!(rules["shortable"], true);
    assert_eq!(rules["easy_to_borrow"], true);
    assert_eq!(rules["marginable"], true);
    assert_eq!(rules["lot_step"], 0.000000001, "fractional to 9 places");
    assert_eq!(rules["tick"], Value::Null, "Alpaca states none for stocks");
    assert!(has_note(&r, "Reg NMS"), "{r:#}");
    let aplx = &rows(&r)[1];
    assert_eq!(aplx["tradable"], false);
    assert_eq!(aplx["rules"]["lot_step"], 1.0, "not fractionable");
    assert_eq!(
        aplx["rules"]["easy_to_borrow"], false,
        "borrow_status hard_to_borrow"
    );

    // Crypto: its own sizes and increment; BTCUSD is Alpaca's legacy name of BTC/USD.
    let r = tool(&ctx, json!({"query": "BTCUSD"})).await;
    let btc = row(&r, "ALPACA", "ALPACA:BTC/USD");
    assert_eq!(btc["matched"], "symbol");
    assert_eq!(btc["asset_class"], "crypto");
    assert_eq!(btc["currency"], "USD");
    assert_eq!(btc["rules"]["min_quantity"], 0.0001);
    assert_eq!(btc["rules"]["lot_step"], 0.000000001);
    assert_eq!(btc["rules"]["tick"], 1.0);
    assert_eq!(btc["rules"]["shortable"], false);

    // Each class's list was read once for all these searches.
    let asked: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.starts_with("GET /v2/assets?"))
        .collect();
    assert_eq!(
        asked,
        [
            "GET /v2/assets?status=active&asset_class=us_equity",
            "GET /v2/assets?status=active&asset_class=crypto"
        ]
    );

    // ETFs are us_equity at Alpaca: searched, said so.
    let r = tool(&ctx, json!({"query": "SPY", "asset_class": "etf"})).await;
    assert_eq!(r["instruments"][0]["instrument"], "ARCA:SPY", "{r:#}");
    assert!(has_note(&r, "does not tell ETFs"), "{r:#}");
    let r = tool(&ctx, json!({"query": "AAPL", "asset_class": "option"})).await;
    assert_eq!(r["count"], 0);
    assert!(
        has_note(&r, "option contracts are not in its asset list"),
        "{r:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_that_fails_is_named_and_the_others_answer() {
    let dir = tempfile::tempdir().unwrap();
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let ctx = demo(&dir).with_broker(alpaca(&fake.url, Duration::from_secs(5)), None);
    fake.fail_next(Failure::ServerError);
    let r = tool(&ctx, json!({"query": "aapl"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert!(has_note(&r, "ALPACA: left out"), "{r:#}");
    assert!(rows(&r).iter().any(|i| i["account"] == "SIM"));
    let failed = r["searched"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["account"] == "ALPACA")
        .unwrap();
    assert!(failed["source"].as_str().unwrap().starts_with("left out"));
    // Named, the failure is the answer.
    fake.fail_next(Failure::ServerError);
    let r = tool(&ctx, json!({"query": "aapl", "account": "ALPACA"})).await;
    assert_eq!(r["error"]["code"], "broker_unavailable", "{r:#}");
    // Nothing was cached from the failures: the next search reads the list.
    let r = tool(&ctx, json!({"query": "aapl", "account": "ALPACA"})).await;
    assert_eq!(r["instruments"][0]["instrument"], "NASDAQ:AAPL", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_hangs_is_cut_off_at_the_broker_timeout() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    fake.fail_next(Failure::Hang);
    let mut ctx =
        ToolContext::new("test").with_broker(alpaca(&fake.url, Duration::from_secs(60)), None);
    ctx.broker_timeout = Duration::from_millis(300);
    let started = Instant::now();
    let r = tool(&ctx, json!({"query": "aapl"})).await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    // Generous: only proves the call cannot hang.
    assert!(started.elapsed() < Duration::from_secs(30));
}

// ---------------------------------------------------------------------------------------
// Hyperliquid: meta

fn hl_market(coin: &str, lev: u32, dec: u32, delisted: bool) -> HlMarket {
    HlMarket {
        coin: coin.into(),
        mark: "1.0".into(),
        mid: "1.0".into(),
        funding: "0.0".into(),
        open_interest: "0.0".into(),
        max_leverage: lev,
        sz_decimals: dec,
        oracle: None,
        delisted,
    }
}

fn hyperliquid(url: &str) -> Arc<dyn Broker> {
    Arc::new(
        HyperliquidBroker::new(HyperliquidConfig {
            id: "HL".into(),
            wallet: WALLET.into(),
            base_url: url.into(),
            timeout: Duration::from_secs(5),
        })
        .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperliquid_searches_its_perp_universe() {
    let fake = HlFake::start(HlState {
        wallet: WALLET.into(),
        markets: vec![
            hl_market("BTC", 40, 5, false),
            hl_market("BLAST", 3, 0, false),
            hl_market("BADGER", 5, 1, true),
            hl_market("ETH", 25, 4, false),
        ],
        isolated_only: vec!["BLAST".into()],
        nameless_meta_row: true,
        account_value: "0.0".into(),
        ..HlState::default()
    })
    .await;
    let ctx = ToolContext::new("test").with_broker(hyperliquid(&fake.url), None);
    let r = tool(&ctx, json!({"query": "B"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let order: Vec<&str> = rows(&r)
        .iter()
        .map(|i| i["instrument"].as_str().unwrap())
        .collect();
    // All prefixes: tradable first, then the shorter symbol; the delisted one last.
    assert_eq!(
        order,
        [
            "HYPERLIQUID:BTC-PERP",
            "HYPERLIQUID:BLAST-PERP",
            "HYPERLIQUID:BADGER-PERP"
        ]
    );
    let btc = &rows(&r)[0];
    assert_eq!(btc["venue_symbol"], "BTC");
    assert_eq!(btc["asset_class"], "perp");
    assert_eq!(btc["rules"]["lot_step"], 0.00001, "szDecimals 5");
    assert_eq!(btc["rules"]["min_quantity"], 0.00001);
    assert_eq!(btc["rules"]["max_leverage"], 40);
    assert_eq!(btc["rules"]["only_isolated"], false);
    assert_eq!(btc["rules"]["tick"], Value::Null);
    let blast = &rows(&r)[1];
    assert_eq!(blast["rules"]["only_isolated"], true, "onlyIsolated");
    assert_eq!(blast["rules"]["lot_step"], 1.0, "szDecimals 0");
    assert_eq!(blast["rules"]["fractionable"], false);
    assert_eq!(rows(&r)[2]["tradable"], false, "isDelisted");
    assert!(has_note(&r, "1 of Hyperliquid's universe rows"), "{r:#}");
    assert!(has_note(&r, "5 significant figures"), "{r:#}");
    // The coin is the symbol.
    let r = tool(&ctx, json!({"query": "eth"})).await;
    assert_eq!(r["instruments"][0]["matched"], "symbol", "{r:#}");
    // Read once a minute.
    let metas = fake.requests().iter().filter(|k| *k == "meta").count();
    assert_eq!(metas, 1);
    // A perp venue has no stocks.
    let r = tool(&ctx, json!({"query": "btc", "asset_class": "equity"})).await;
    assert_eq!(r["count"], 0, "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperliquid_searches_a_recorded_meta_answer() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/realworld/hyperliquid/recorded.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        println!("skipped: {} is not here", path.display());
        return;
    };
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let meta = recorded
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["request"]["type"] == "meta")
        .map(|p| p["response"].clone())
        .unwrap();
    let replay = common::hl_fake::HlReplay::start(&recorded, 500).await;
    let ctx = ToolContext::new("test").with_broker(hyperliquid(&replay.url), None);
    let r = tool(&ctx, json!({"query": "kpepe", "limit": 100})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let pepe = &rows(&r)[0];
    let recorded_pepe = meta["universe"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "kPEPE")
        .unwrap();
    assert_eq!(pepe["instrument"], "HYPERLIQUID:kPEPE-PERP");
    assert_eq!(pepe["matched"], "symbol");
    let step = 10f64.powi(-i32::try_from(recorded_pepe["szDecimals"].as_i64().unwrap()).unwrap());
    assert_eq!(pepe["rules"]["lot_step"].as_f64(), Some(step));
    assert_eq!(pepe["rules"]["max_leverage"], recorded_pepe["maxLeverage"]);
    // Every recorded coin is found by its name.
    let r = tool(&ctx, json!({"query": "BTC"})).await;
    assert_eq!(r["instruments"][0]["instrument"], "HYPERLIQUID:BTC-PERP");
}

// ---------------------------------------------------------------------------------------
// Futu OpenD: Qot_GetStaticInfo

fn opend_state() -> OpenDState {
    let mut s = OpenDState {
        accounts: vec![build::my_account()],
        ..OpenDState::default()
    };
    let my = |code: &str, name: &str, t: i32| {
        build::static_info(pb::QOT_MARKET_MY, code, name, t, 100, pb::EXCH_TYPE_MY_MYX)
    };
    let mut gone = my("1163", "MAYBULK", pb::SECURITY_TYPE_EQTY);
    gone.basic.delisting = Some(true);
    s.static_info = vec![
        my("1155", "MAYBANK", pb::SECURITY_TYPE_EQTY),
        my("5347", "TENAGA", pb::SECURITY_TYPE_EQTY),
        gone,
        my(
            "0820EA",
            "MAYBANK FTSE BURSA MALAYSIA KLCI ETF",
            pb::SECURITY_TYPE_TRUST,
        ),
        build::static_info(
            pb::QOT_MARKET_HK,
            "00700",
            "TENCENT",
            pb::SECURITY_TYPE_EQTY,
            100,
            pb::EXCH_TYPE_HK_MAIN_BOARD,
        ),
    ];
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opend_searches_the_markets_static_list() {
    let fake = OpenDFake::start(opend_state()).await;
    let ctx = ToolContext::new("test").with_broker(opend(fake.port, Duration::from_secs(5)), None);
    let r = tool(&ctx, json!({"query": "maybank"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    // MAYBANK and the ETF whose name begins with it; MAYBULK is no name match.
    let order: Vec<&str> = rows(&r)
        .iter()
        .map(|i| i["instrument"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["BURSA:1155", "BURSA:0820EA"], "{r:#}");
    let maybank = &rows(&r)[0];
    assert_eq!(maybank["venue_symbol"], "MY.1155");
    assert_eq!(maybank["currency"], "MYR");
    assert_eq!(maybank["asset_class"], "equity");
    assert_eq!(maybank["tradable"], true);
    assert_eq!(maybank["rules"]["lot_size"], 100.0);
    assert_eq!(maybank["rules"]["lot_step"], 100.0);
    assert_eq!(maybank["rules"]["min_quantity"], 100.0);
    assert_eq!(maybank["rules"]["tick"], Value::Null);
    assert_eq!(rows(&r)[1]["asset_class"], "etf", "SecurityType_Trust");
    assert!(has_note(&r, "no tick size"), "{r:#}");

    let r = tool(&ctx, json!({"query": "11"})).await;
    let gone = row(&r, "MOOMOO-MY", "BURSA:1163");
    assert_eq!(gone["tradable"], false, "delisting");
    assert_eq!(
        rows(&r)[0]["instrument"],
        "BURSA:1155",
        "the tradable first"
    );

    // One query per (market, type), however many searches.
    let asked = fake.snapshot().static_queries;
    assert_eq!(
        asked,
        [
            (Some(pb::QOT_MARKET_MY), Some(pb::SECURITY_TYPE_EQTY)),
            (Some(pb::QOT_MARKET_MY), Some(pb::SECURITY_TYPE_TRUST))
        ]
    );
    // ETFs only: the trust list alone.
    let r = tool(&ctx, json!({"query": "maybank", "asset_class": "etf"})).await;
    assert_eq!(r["count"], 1, "{r:#}");
    // An exchange in the query picks OpenD's market.
    let r = tool(&ctx, json!({"query": "HKEX:00700"})).await;
    let tencent = &rows(&r)[0];
    assert_eq!(tencent["instrument"], "HKEX:00700", "{r:#}");
    assert_eq!(tencent["venue_symbol"], "HK.00700");
    assert_eq!(tencent["currency"], "HKD");
    assert!(
        fake.snapshot()
            .static_queries
            .contains(&(Some(pb::QOT_MARKET_HK), Some(pb::SECURITY_TYPE_EQTY)))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opend_refusing_or_silent_is_an_error_named() {
    let fake = OpenDFake::start(opend_state()).await;
    fake.fail(OpenDFailure::RetType(
        pb::QOT_GET_STATIC_INFO,
        "Quote right is not enough".into(),
    ));
    let mut ctx =
        ToolContext::new("test").with_broker(opend(fake.port, Duration::from_millis(800)), None);
    let r = tool(&ctx, json!({"query": "1155", "account": "MOOMOO-MY"})).await;
    assert_eq!(r["error"]["code"], "broker_unavailable", "{r:#}");
    assert!(
        r["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("quote permission"),
        "{r:#}"
    );
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Quote right is not enough"),
        "{r:#}"
    );
    fake.fail(OpenDFailure::Silent);
    ctx.broker_timeout = Duration::from_secs(5);
    let started = Instant::now();
    let r = tool(&ctx, json!({"query": "1155"})).await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

// ---------------------------------------------------------------------------------------
// IBKR over TWS: reqMatchingSymbols

fn sample(con_id: i32, symbol: &str, sec_type: &str, primary: &str, name: &str) -> TwsSymbolSample {
    TwsSymbolSample {
        con_id,
        symbol: symbol.into(),
        sec_type: sec_type.into(),
        primary_exchange: primary.into(),
        currency: "USD".into(),
        description: name.into(),
        derivative_sec_types: vec!["OPT".into(), "WAR".into()],
    }
}

fn tws(port: u16, timeout: Duration) -> Arc<dyn Broker> {
    Arc::new(TwsBroker::new(
        TwsConfig {
            id: "IBKR".into(),
            host: "127.0.0.1".into(),
            port,
            client_id: 7,
            account: None,
            timeout,
        },
        None,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tws_searches_ibkrs_matching_symbols() {
    let fake = FakeTws::start(TwsState {
        symbol_samples: vec![
            sample(265_598, "AAPL", "STK", "NASDAQ", "APPLE INC"),
            sample(
                4_240_498,
                "APLE",
                "STK",
                "NYSE",
                "APPLE HOSPITALITY REIT INC",
            ),
            sample(13_455_763, "AAPL", "IND", "CBOE", "APPLE INDEX"),
            sample(
                38_709_539,
                "PINE",
                "STK",
                "NYSE",
                "ALPINE INCOME PROPERTY TRUST",
            ),
        ],
        ..TwsState::default()
    })
    .await
    .unwrap();
    let mut ctx =
        ToolContext::new("test").with_broker(tws(fake.port(), Duration::from_secs(5)), None);
    ctx.broker_timeout = Duration::from_secs(10);
    let r = tool(&ctx, json!({"query": "aapl"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["count"], 1, "the index is left out: {r:#}");
    let aapl = &rows(&r)[0];
    assert_eq!(aapl["instrument"], "NASDAQ:AAPL");
    assert_eq!(aapl["venue_symbol"], "265598", "the conid");
    assert_eq!(aapl["name"], "APPLE INC");
    assert_eq!(aapl["currency"], "USD");
    assert_eq!(aapl["matched"], "symbol");
    assert_eq!(aapl["tradable"], Value::Null);
    assert_eq!(aapl["rules"]["multiplier"], 1.0);
    assert_eq!(
        aapl["rules"]["lot_step"],
        Value::Null,
        "IBKR's search gives none"
    );
    assert!(has_note(&r, "1 of IBKR's matches are indexes"), "{r:#}");
    assert!(has_note(&r, "gives no trading rules"), "{r:#}");

    // A name: IBKR finds what contains it; tradedesk ranks its own matches first.
    let r = tool(&ctx, json!({"query": "apple hosp"})).await;
    let order: Vec<(&str, &str)> = rows(&r)
        .iter()
        .map(|i| {
            (
                i["instrument"].as_str().unwrap(),
                i["matched"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(order, [("NYSE:APLE", "name")], "{r:#}");
    let r = tool(&ctx, json!({"query": "pine"})).await;
    let order: Vec<(&str, &str)> = rows(&r)
        .iter()
        .map(|i| {
            (
                i["instrument"].as_str().unwrap(),
                i["matched"].as_str().unwrap(),
            )
        })
        .collect();
    // ALPINE holds "PINE" inside a word: IBKR's match, not tradedesk's.
    assert_eq!(order, [("NYSE:PINE", "symbol")], "{r:#}");
    let r = tool(&ctx, json!({"query": "pine", "limit": 5})).await;
    assert_eq!(r["count"], 1);
    let state = fake.snapshot();
    assert_eq!(
        state.matching_patterns,
        ["AAPL", "APPLE HOSP", "PINE"],
        "each pattern asked once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tws_matches_by_a_rule_of_its_own_rank_last() {
    let fake = FakeTws::start(TwsState {
        symbol_samples: vec![
            sample(1, "APP", "STK", "NASDAQ", "APPLOVIN CORP"),
            sample(2, "SNAP", "STK", "NYSE", "SNAP INC"),
        ],
        ..TwsState::default()
    })
    .await
    .unwrap();
    let ctx = ToolContext::new("test").with_broker(tws(fake.port(), Duration::from_secs(5)), None);
    // "NAP" starts no symbol and no word, but IBKR's description holds it.
    let r = tool(&ctx, json!({"query": "nap"})).await;
    assert_eq!(r["instruments"][0]["instrument"], "NYSE:SNAP", "{r:#}");
    assert_eq!(r["instruments"][0]["matched"], "broker");
    assert!(has_note(&r, "matched broker"), "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tws_that_never_answers_is_cut_off() {
    let fake = FakeTws::start(TwsState {
        matching_silent: true,
        ..TwsState::default()
    })
    .await
    .unwrap();
    let ctx =
        ToolContext::new("test").with_broker(tws(fake.port(), Duration::from_millis(800)), None);
    let started = Instant::now();
    let r = tool(&ctx, json!({"query": "aapl", "account": "IBKR"})).await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

// ---------------------------------------------------------------------------------------
// MetaTrader: what the EA and the config know

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metatrader_searches_the_symbols_the_ea_and_the_config_know() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("MQL4/Files");
    std::fs::create_dir_all(&files).unwrap();
    let mut ea = EaState::default();
    ea.orders.push(EaOrder {
        ticket: 4711,
        magic: 7,
        symbol: "XAUUSD".into(),
        lots: 0.10,
        kind: "buy".into(),
        open_price: 4000.0,
        open_time: "2026.11.30 10:00:00".into(),
        sl: 0.0,
        tp: 0.0,
        pnl: 0.0,
        commission: 0.0,
        swap: 0.0,
        comment: String::new(),
    });
    ea.prices.insert("EURUSD".into(), (1.165, 1.1651));
    ea.prices.insert("US500.cash".into(), (6000.0, 6000.5));
    ea.subscribed = vec!["EURUSD".into(), "US500.cash".into()];
    let _ea = FakeEa::start(&files, ea);
    let mut symbols = std::collections::BTreeMap::new();
    symbols.insert(
        "GER40".to_owned(),
        SymbolSpec {
            contract_size: rust_decimal::Decimal::ONE,
            profit_currency: Some(tradedesk_core::Currency::new("EUR")),
        },
    );
    let broker = DwxBroker::new(DwxConfig {
        id: "MT".into(),
        files: files.clone(),
        platform: Platform::Mt4,
        magic: 7,
        live: false,
        server_time_zone: None,
        history_days: 30,
        timeout: Duration::from_secs(3),
        symbols,
        margin_mode: None,
        lots: std::collections::BTreeMap::new(),
    });
    let ctx = ToolContext::new("test").with_broker(Arc::new(broker), None);
    let r = tool(&ctx, json!({"query": "eur"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let eur = row(&r, "MT", "FX:EURUSD");
    assert_eq!(eur["matched"], "symbol_prefix");
    assert_eq!(eur["currency"], "USD");
    assert_eq!(eur["rules"]["multiplier"], 100_000.0);
    assert_eq!(eur["rules"]["tick"], 0.00001);
    assert_eq!(eur["rules"]["lot_step"], 0.01);
    assert!(has_note(&r, "writes no symbol list"), "{r:#}");
    let r = tool(&ctx, json!({"query": "xauusd"})).await;
    let gold = row(&r, "MT", "FX:XAUUSD");
    assert_eq!(gold["matched"], "symbol", "an open position's symbol");
    assert_eq!(gold["rules"]["multiplier"], 100.0);
    let r = tool(&ctx, json!({"query": "GER40"})).await;
    let dax = row(&r, "MT", "CFD:GER40");
    assert_eq!(dax["currency"], "EUR", "the config's profit currency");
    assert_eq!(dax["rules"]["multiplier"], 1.0);
    // Quoted but specified by nobody: its contract size is not known.
    let r = tool(&ctx, json!({"query": "us500"})).await;
    let spx = row(&r, "MT", "CFD:US500.cash");
    assert_eq!(spx["rules"]["multiplier"], Value::Null, "{r:#}");
    assert!(
        has_note(&r, "contract size of US500.cash is not known"),
        "{r:#}"
    );
}

// ---------------------------------------------------------------------------------------
// The CLI and MCP give the same answer

fn write_config(dir: &Path, alpaca: &str, hl: &str, opend: u16) -> std::path::PathBuf {
    let path = dir.join("tradedesk.toml");
    std::fs::write(
        &path,
        format!(
            r#"base_currency = "USD"

[[accounts]]
id = "ALPACA"
broker = "alpaca"
base_url = "{alpaca}"
data_url = "{alpaca}"
key_env = "TD_SEARCH_KEY"
secret_env = "TD_SEARCH_SECRET"

[[accounts]]
id = "HL"
broker = "hyperliquid"
account = "{WALLET}"
base_url = "{hl}"

[[accounts]]
id = "MOOMOO-MY"
broker = "moomoo"
port = {opend}
market = "MY"
"#
        ),
    )
    .unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_mcp_answer_the_same_figures_from_the_fakes() {
    let alpaca = AlpacaFake::start(KEY, SECRET).await;
    alpaca_listing(&alpaca);
    let hl = HlFake::start(HlState {
        wallet: WALLET.into(),
        markets: vec![
            hl_market("BTC", 40, 5, false),
            hl_market("MAV", 5, 0, false),
        ],
        account_value: "0.0".into(),
        ..HlState::default()
    })
    .await;
    let opend = OpenDFake::start(opend_state()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), &alpaca.url, &hl.url, opend.port);
    let state = dir.path().join("state");
    let args = json!({"query": "ma", "limit": 10});

    let cli = {
        let (config, state, args) = (config.clone(), state.clone(), args.to_string());
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_tradedesk"))
                .arg("--config")
                .arg(&config)
                .arg("--state-dir")
                .arg(&state)
                .args(["call", "search_instruments", &args])
                .env("TD_SEARCH_KEY", KEY)
                .env("TD_SEARCH_SECRET", SECRET)
                .output()
                .unwrap()
        })
        .await
        .unwrap()
    };
    assert_eq!(
        cli.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let cli: Value = serde_json::from_slice(&cli.stdout).unwrap();

    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "search", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "search_instruments", "arguments": args}}),
    ];
    let replies = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .arg("serve")
            .env("TD_SEARCH_KEY", KEY)
            .env("TD_SEARCH_SECRET", SECRET)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut replies = Vec::new();
        for r in &requests {
            writeln!(stdin, "{r}").unwrap();
            if r.get("id").is_some() {
                let line = lines.next().unwrap().unwrap();
                replies.push(serde_json::from_str::<Value>(&line).unwrap());
            }
        }
        drop(stdin);
        let _ = child.wait();
        replies
    })
    .await
    .unwrap();
    let mcp = &replies[1]["result"]["structuredContent"];
    assert_eq!(mcp["status"], "ok", "{:#}", replies[1]);
    assert_eq!(mcp["instruments"], cli["instruments"], "{mcp:#}\n{cli:#}");
    assert_eq!(mcp["total"], cli["total"]);
    // The text block carries the figures too.
    let text = replies[1]["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("BURSA:1155"), "{text}");

    // Against the fakes: MAYBANK (a name) from OpenD, MAV (a symbol) from Hyperliquid.
    let r = &cli;
    let mav = row(r, "HL", "HYPERLIQUID:MAV-PERP");
    assert_eq!(mav["matched"], "symbol_prefix");
    assert_eq!(mav["rules"]["max_leverage"], 5);
    let maybank = row(r, "MOOMOO-MY", "BURSA:1155");
    assert_eq!(maybank["matched"], "name");
    assert_eq!(maybank["rules"]["lot_size"], 100.0);
    assert!(
        r["searched"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["account"] == "ALPACA"),
        "{r:#}"
    );
}

/// A broker that offers nothing but the read side every adapter has.
#[derive(Debug)]
struct Bare;

#[async_trait::async_trait]
impl Broker for Bare {
    fn accounts(&self) -> Vec<tradedesk_core::Account> {
        vec![tradedesk_core::Account {
            id: "BARE".into(),
            broker: "bare".into(),
            currency: tradedesk_core::Currency::USD,
            name: None,
            mode: tradedesk_core::Mode::Book,
        }]
    }

    async fn snapshot(&self) -> Result<Arc<tradedesk_core::Book>, tradedesk_brokers::BrokerError> {
        Err(tradedesk_brokers::BrokerError::Unsupported {
            account: "BARE".into(),
            capability: "books",
        })
    }

    async fn health(&self) -> Vec<tradedesk_brokers::AccountHealth> {
        Vec::new()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_cannot_search_is_not_supported_naming_those_that_can() {
    let ctx = ToolContext::new("test").with_broker(Arc::new(Bare), None);
    for args in [
        json!({"query": "aapl"}),
        json!({"query": "aapl", "account": "BARE"}),
    ] {
        let r = tool(&ctx, args.clone()).await;
        assert_eq!(r["error"]["code"], "not_supported", "{args}: {r:#}");
        let hint = r["error"]["hint"].as_str().unwrap();
        assert!(hint.contains("Alpaca") && hint.contains("sim"), "{hint}");
    }
    // Beside one that can, it is passed over.
    let dir = tempfile::tempdir().unwrap();
    let ctx = demo(&dir).with_broker(Arc::new(Bare), None);
    let r = tool(&ctx, json!({"query": "aapl"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert!(rows(&r).iter().all(|i| i["account"] != "BARE"));
}
