//! `get_snapshots` against every adapter's fake (in the vendor's shapes, unkind on demand)
//! and the sim: figures checked against what each fake was given, unknown symbols named
//! without failing the rest, a late venue cut off at `broker_timeout`, and the same
//! answer over the CLI's `call` and over MCP.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::alpaca_fake::{AlpacaFake, CryptoFigures, Failure};
use common::desk::{KEY, SECRET, alpaca, ctx_of, opend, sim_at, tool, tws};
use common::dwx_fake::{EaState, FakeEa, Platform};
use common::hl_fake::{HlFailure, HlFake, HlMarket, HlState};
use common::opend_fake::{OpenDFailure, OpenDFake, OpenDState, build};
use common::opend_pb as pb;
use common::tws_fake::{FakeTws, TwsDay, TwsQuote, TwsState};
use serde_json::{Value, json};
use tradedesk_brokers::BookBroker;
use tradedesk_brokers::Broker;
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::dwx::{DwxBroker, DwxConfig};
use tradedesk_brokers::hyperliquid::{HyperliquidBroker, HyperliquidConfig};
use tradedesk_tools::ToolContext;

/// 2026-11-30 15:00:00 UTC, in milliseconds.
const T: i64 = 1_796_050_800_000;
const WALLET: &str = "0x00000000000000000000000000000000c0ffee01";

/// The row of `symbol` (as asked).
fn row<'a>(r: &'a Value, symbol: &str) -> &'a Value {
    r["snapshots"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}"))
        .iter()
        .find(|s| s["symbol"] == symbol)
        .unwrap_or_else(|| panic!("no {symbol}: {r:#}"))
}

/// The reason `symbol` was not answered.
fn unknown<'a>(r: &'a Value, symbol: &str) -> &'a str {
    r["unknown_symbols"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}"))
        .iter()
        .find(|s| s["symbol"] == symbol)
        .and_then(|s| s["reason"].as_str())
        .unwrap_or_else(|| panic!("{symbol} is not unknown: {r:#}"))
}

fn close_to(a: &Value, b: f64) -> bool {
    a.as_f64().is_some_and(|a| (a - b).abs() < 1e-9)
}

// -- the sim --------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sims_snapshots_agree_with_its_quotes_bars_and_tape() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx_of(sim_at(&dir, T), Duration::from_secs(10));
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "SIM", "symbols": ["AAPL", "EURUSD", "BTC-PERP", "NOPE", "AAPL"]}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(
        (r["count"].as_u64(), r["asked"].as_u64()),
        (Some(3), Some(4))
    );
    assert_eq!(r["limit"], 100);
    assert_eq!(r["requests"], 1);
    assert!(
        unknown(&r, "NOPE").contains("AAPL"),
        "the reason names what it quotes"
    );
    assert!(
        r["notes"].to_string().contains("1 repeated symbol"),
        "{r:#}"
    );
    for symbol in ["AAPL", "EURUSD", "BTC-PERP"] {
        let s = row(&r, symbol);
        let q = tool(
            &ctx,
            "get_quote",
            json!({"account": "SIM", "symbol": symbol}),
        )
        .await;
        assert_eq!((&s["bid"], &s["ask"]), (&q["bid"], &q["ask"]), "{symbol}");
        assert_eq!(
            s["market"],
            format!("{}:{}", q["exchange"].as_str().unwrap(), symbol)
        );
        assert_eq!(s["session_date"], "2026-11-30");
        // The day opens at the previous daily bar's close.
        let bars = tool(
            &ctx,
            "get_bars",
            json!({"source": {"symbol": symbol, "account": "SIM", "interval": "1d",
                   "start": "2026-11-29", "end": "2026-11-29"}}),
        )
        .await;
        assert_eq!(
            s["prev_close"], bars["bars"][0]["close"],
            "{symbol}: {bars:#}"
        );
        assert_eq!(s["open"], s["prev_close"]);
        let (high, low) = (s["high"].as_f64().unwrap(), s["low"].as_f64().unwrap());
        for p in ["open", "close"] {
            let p = s[p].as_f64().unwrap();
            assert!(low <= p && p <= high, "{symbol}: {s:#}");
        }
        // The volume is the day's one-minute bars' (15 hours of them).
        let minutes = tool(
            &ctx,
            "get_bars",
            json!({"source": {"symbol": symbol, "account": "SIM", "interval": "1m",
                   "start": "2026-11-30", "end": "2026-11-30T15:00:00Z"}, "max_rows": 0}),
        )
        .await;
        assert_eq!(minutes["count"], 900, "{symbol}");
        let volume: f64 = minutes["bars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["volume"].as_f64().unwrap())
            .sum();
        assert!(
            close_to(&s["volume"], volume),
            "{symbol}: {} vs {volume}",
            s["volume"]
        );
        // The last trade is the tape's latest print.
        let tape = tool(
            &ctx,
            "get_recent_trades",
            json!({"market": symbol, "account": "SIM", "limit": 1}),
        )
        .await;
        assert_eq!(s["last"], tape["trades"][0]["price"], "{symbol}");
        assert_eq!(s["last_size"], tape["trades"][0]["size"], "{symbol}");
        assert_eq!(s["last_time"], "2026-11-30T15:00:00.000Z");
        // The change is from the last trade, against the previous close.
        assert_eq!(s["change_from"], "last");
        let change = s["last"].as_f64().unwrap() - s["prev_close"].as_f64().unwrap();
        assert!(
            (s["change"].as_f64().unwrap() - change).abs() < 1e-9,
            "{s:#}"
        );
        let pct = change / s["prev_close"].as_f64().unwrap() * 100.0;
        assert!(
            (s["change_pct"].as_f64().unwrap() - pct).abs() <= 0.005 + 1e-9,
            "{s:#}"
        );
    }
    assert_eq!(row(&r, "BTC-PERP")["mark"], row(&r, "BTC-PERP")["mid"]);
    assert_eq!(row(&r, "AAPL")["mark"], Value::Null);
    assert_eq!(row(&r, "AAPL")["turnover"], Value::Null);
    // The same clock, the same answer.
    let again = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "SIM", "symbols": ["AAPL", "EURUSD", "BTC-PERP", "NOPE"]}),
    )
    .await;
    assert_eq!(again["snapshots"], r["snapshots"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_and_brokers_without_snapshots_are_named() {
    let book = demo_book().unwrap();
    let ctx = ToolContext::new("test")
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book.clone())), None);
    let account = book.accounts[0].id.clone();
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": account, "symbols": ["AAPL"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "not_supported", "{r:#}");
    let hint = r["error"]["hint"].as_str().unwrap();
    for broker in ["Alpaca", "OpenD", "Hyperliquid", "TWS", "MetaTrader", "sim"] {
        assert!(hint.contains(broker), "{hint}");
    }
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "NOPE", "symbols": ["AAPL"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "unknown_account", "{r:#}");
    let many: Vec<String> = (0..101).map(|i| format!("S{i}")).collect();
    for (args, says) in [
        (json!({"account": account, "symbols": []}), "symbols"),
        (json!({"account": account, "symbols": many}), "101"),
        (
            json!({"account": account, "symbols": ["AAPL", " "]}),
            "symbols[1]",
        ),
        (json!({"account": account}), "symbols"),
    ] {
        let r = tool(&ctx, "get_snapshots", args.clone()).await;
        assert_eq!(r["error"]["code"], "invalid_argument", "{args}: {r:#}");
        assert!(
            r["error"]["message"].as_str().unwrap().contains(says),
            "{r:#}"
        );
    }
}

// -- Alpaca ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpaca_answers_every_stock_in_one_request_and_names_the_rest() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    fake.omit_from_snapshot("JPM", &["latestTrade", "prevDailyBar"]);
    fake.set_price("SPY", "600.00", "0");
    fake.set_option_quote("AAPL260320C00180000", "4.15", "4.3", "4.2");
    let ctx = ctx_of(
        alpaca(&fake.url, Duration::from_secs(5)),
        Duration::from_secs(15),
    );
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "ALPACA", "symbols": [
            "AAPL", "NASDAQ:jpm", "SPY", "NOPE", "BAD$", "AAPL260320C00180000", "BTC/USD"]}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["count"], 4, "{r:#}");
    // Stocks: one request refused for BAD$, then one for the rest; options: one; crypto:
    // one (the fake was given no pair, so BTC/USD is unknown there).
    assert_eq!(r["requests"], 4);
    let asked: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|q| q.contains("snapshots"))
        .collect();
    assert_eq!(asked.len(), 4, "{asked:?}");
    assert!(
        asked[1].contains("symbols=AAPL%2CJPM%2CSPY%2CNOPE&feed=iex"),
        "{asked:?}"
    );
    assert!(
        unknown(&r, "BAD$").contains("invalid symbol: BAD$"),
        "{r:#}"
    );
    assert!(unknown(&r, "NOPE").contains("no snapshot"), "{r:#}");
    assert!(
        unknown(&r, "BTC/USD").contains("no crypto snapshot of BTC/USD"),
        "{r:#}"
    );

    // AAPL against the fake's quote (181.00 / 181.10, last trade at the bid, 100 shares)
    // and its daily bars (the last two of its series).
    let bars = tool(
        &ctx,
        "get_bars",
        json!({"source": {"symbol": "AAPL", "account": "ALPACA", "interval": "1d",
               "start": "2026-02-27", "end": "2026-03-02"}}),
    )
    .await;
    let (prev, day) = (&bars["bars"][0], &bars["bars"][1]);
    assert_eq!(day["time"], "2026-03-02", "{bars:#}");
    let s = row(&r, "AAPL");
    assert_eq!(s["market"], "NASDAQ:AAPL", "tape C is Nasdaq-listed");
    assert_eq!(s["currency"], "USD");
    assert_eq!(
        (s["bid"].as_f64(), s["ask"].as_f64()),
        (Some(181.0), Some(181.1))
    );
    assert_eq!(s["mid"], 181.05);
    assert_eq!(
        (s["last"].as_f64(), s["last_size"].as_f64()),
        (Some(181.0), Some(100.0))
    );
    for (field, bar) in [
        ("open", "open"),
        ("high", "high"),
        ("low", "low"),
        ("close", "close"),
    ] {
        assert_eq!(s[field], day[bar], "{field}");
    }
    assert_eq!(s["volume"], day["volume"]);
    assert_eq!(s["session_date"], "2026-03-02");
    assert_eq!(s["prev_close"], prev["close"]);
    assert_eq!(s["change_from"], "last");
    let change = 181.0 - prev["close"].as_f64().unwrap();
    assert!(
        (s["change"].as_f64().unwrap() - change).abs() < 1e-9,
        "{s:#}"
    );

    // JPM without its latest trade and previous day: those are null, never 0.
    let s = row(&r, "NASDAQ:jpm");
    assert_eq!(s["market"], "NYSE:JPM", "its quote's tape A is NYSE-listed");
    assert_eq!((&s["last"], &s["last_time"]), (&Value::Null, &Value::Null));
    assert_eq!(s["prev_close"], Value::Null);
    assert_eq!(
        (&s["change"], &s["change_from"]),
        (&Value::Null, &Value::Null)
    );
    assert_eq!(s["bid"], 240.0);
    assert!(s["close"].is_number());
    // SPY's ask of 0 is Alpaca's "no active ask"; tape B names no one exchange.
    let s = row(&r, "SPY");
    assert_eq!((s["bid"].as_f64(), &s["ask"]), (Some(600.0), &Value::Null));
    assert_eq!(s["mid"], Value::Null);
    assert_eq!(s["market"], "US:SPY");
    assert!(r["notes"].to_string().contains("US:SYMBOL"), "{r:#}");
    // The option, from the option snapshots.
    let s = row(&r, "AAPL260320C00180000");
    assert_eq!(s["market"], "OPRA:AAPL260320C00180000");
    assert_eq!(
        (s["bid"].as_f64(), s["ask"].as_f64(), s["last"].as_f64()),
        (Some(4.15), Some(4.3), Some(4.2))
    );
    assert_eq!((&s["open"], &s["prev_close"]), (&Value::Null, &Value::Null));
    assert!(r["notes"].to_string().contains("IEX"), "{r:#}");
    // Rows in the order asked.
    let order: Vec<&str> = r["snapshots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["AAPL", "NASDAQ:jpm", "SPY", "AAPL260320C00180000"]);

    // A data host that hangs is cut off at the broker timeout.
    let slow = ctx_of(
        alpaca(&fake.url, Duration::from_secs(60)),
        Duration::from_millis(300),
    );
    fake.fail_next(Failure::Hang);
    let started = Instant::now();
    let r = tool(
        &slow,
        "get_snapshots",
        json!({"account": "ALPACA", "symbols": ["AAPL"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    assert!(started.elapsed() < Duration::from_secs(30));
    fake.fail_next(Failure::ServerError);
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "ALPACA", "symbols": ["AAPL"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "broker_unavailable", "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpaca_reads_crypto_pairs_in_one_request_beside_stocks_and_options() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let btc = CryptoFigures::btc();
    fake.set_crypto_snapshot("BTC/USD", btc.clone());
    fake.set_crypto_snapshot(
        "ETH/BTC",
        CryptoFigures {
            last: "0.0521",
            last_size: "1.5",
            bid: "0.05205",
            ask: "0.05215",
            ..CryptoFigures::btc()
        },
    );
    fake.set_crypto_snapshot("SOL/USDT", CryptoFigures::btc());
    fake.omit_from_snapshot("SOL/USDT", &["latestTrade", "prevDailyBar"]);
    fake.set_option_quote("AAPL260320C00180000", "4.15", "4.3", "4.2");
    let ctx = ctx_of(
        alpaca(&fake.url, Duration::from_secs(5)),
        Duration::from_secs(15),
    );
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "ALPACA", "symbols": [
            "AAPL", "AAPL260320C00180000", "BTC/USD", "BTCUSD", "ALPACA:eth/btc",
            "SOL/USDT", "DOGE/USD", "NOPE"]}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    // One request per class: stocks, options, crypto (BTCUSD and BTC/USD asked once).
    assert_eq!(r["requests"], 3, "{r:#}");
    let asked: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|q| q.contains("crypto"))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(
            "/v1beta3/crypto/us/snapshots?symbols=BTC%2FUSD%2CETH%2FBTC%2CSOL%2FUSDT%2CDOGE%2FUSD"
        ),
        "{asked:?}"
    );
    assert_eq!(r["count"], 6, "{r:#}");
    assert!(unknown(&r, "DOGE/USD").contains("BASE/QUOTE"), "{r:#}");
    assert!(unknown(&r, "NOPE").contains("no snapshot"), "{r:#}");

    // BTC/USD against the fake's figures: fractional sizes and volumes kept exactly.
    let s = row(&r, "BTC/USD");
    assert_eq!(s["market"], "ALPACA:BTC/USD");
    assert_eq!(s["currency"], "USD");
    assert_eq!(
        (s["last"].as_f64(), s["last_size"].as_f64()),
        (Some(67012.5), Some(0.00008231))
    );
    assert_eq!(s["last_time"], "2026-03-02T15:59:30.123Z", "{s:#}");
    assert_eq!(
        (s["bid"].as_f64(), s["ask"].as_f64()),
        (Some(67010.25), Some(67014.75))
    );
    assert!(close_to(&s["mid"], 67012.5), "{s:#}");
    assert_eq!(
        (
            s["open"].as_f64(),
            s["high"].as_f64(),
            s["low"].as_f64(),
            s["close"].as_f64()
        ),
        (Some(66250.0), Some(67450.5), Some(65980.25), Some(67012.5))
    );
    assert_eq!(s["volume"].as_f64(), Some(812.40516327), "{s:#}");
    assert_eq!(s["session_date"], "2026-03-02");
    assert_eq!(s["prev_close"].as_f64(), Some(66250.0));
    assert_eq!(s["change_from"], "last");
    assert!(close_to(&s["change"], 762.5), "{s:#}");
    // 762.5 / 66250 x 100 = 1.1509..., rounded once to 2 places.
    assert!(close_to(&s["change_pct"], 1.15), "{s:#}");
    // The same pair as Alpaca's positions name it keeps that name in its market.
    let t = row(&r, "BTCUSD");
    assert_eq!(t["market"], "ALPACA:BTCUSD");
    assert_eq!((&t["last"], &t["volume"]), (&s["last"], &s["volume"]));
    // A pair quoted in a coin has no ISO currency: null, and said.
    let e = row(&r, "ALPACA:eth/btc");
    assert_eq!(e["market"], "ALPACA:ETH/BTC");
    assert_eq!(e["currency"], Value::Null);
    assert_eq!(e["last"].as_f64(), Some(0.0521));
    assert!(
        r["notes"].to_string().contains("not an ISO currency"),
        "{r:#}"
    );
    // A stablecoin pair with parts missing: those figures are null, never 0.
    let u = row(&r, "SOL/USDT");
    assert_eq!(u["currency"], "USDT");
    assert_eq!((&u["last"], &u["prev_close"]), (&Value::Null, &Value::Null));
    assert_eq!(u["change"], Value::Null);
    assert_eq!(u["bid"].as_f64(), Some(67010.25));
    // The stock and the option still answer beside them.
    assert_eq!(row(&r, "AAPL")["bid"].as_f64(), Some(181.0));
    assert_eq!(row(&r, "AAPL260320C00180000")["ask"].as_f64(), Some(4.3));
    assert!(r["notes"].to_string().contains("fractional"), "{r:#}");

    // A pair Alpaca refuses by name is listed, the rest asked again.
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "ALPACA", "symbols": ["BTC/US$", "BTC/USD"]}),
    )
    .await;
    assert_eq!(r["count"], 1, "{r:#}");
    assert!(
        unknown(&r, "BTC/US$").contains("invalid symbol: BTC/US$"),
        "{r:#}"
    );
    // A crypto host that hangs is cut off at the broker timeout.
    let slow = ctx_of(
        alpaca(&fake.url, Duration::from_secs(60)),
        Duration::from_millis(300),
    );
    fake.fail_next(Failure::Hang);
    let r = tool(
        &slow,
        "get_snapshots",
        json!({"account": "ALPACA", "symbols": ["BTCUSD"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
}

// -- Moomoo / Futu OpenD ----------------------------------------------------------------

fn opend_state() -> OpenDState {
    let mut s = OpenDState {
        accounts: vec![build::my_account()],
        ..OpenDState::default()
    };
    let mut maybank = build::snapshot(pb::QOT_MARKET_MY, "1155", 10.28, 10.30);
    maybank.basic.open_price = 10.20;
    maybank.basic.high_price = 10.34;
    maybank.basic.low_price = 10.18;
    maybank.basic.cur_price = 10.30;
    maybank.basic.last_close_price = 10.24;
    maybank.basic.volume = 4_250_300;
    maybank.basic.turnover = 43_602_150.5;
    s.snapshots
        .insert((pb::QOT_MARKET_MY, "1155".to_owned()), maybank);
    // Before its first trade: OpenD's required prices are 0, and it has no quote yet.
    let mut quiet = build::snapshot(pb::QOT_MARKET_MY, "5347", 0.0, 0.0);
    quiet.basic.open_price = 0.0;
    quiet.basic.high_price = 0.0;
    quiet.basic.low_price = 0.0;
    quiet.basic.cur_price = 0.0;
    quiet.basic.ask_price = None;
    quiet.basic.bid_price = None;
    quiet.basic.last_close_price = 12.80;
    quiet.basic.volume = 0;
    s.snapshots
        .insert((pb::QOT_MARKET_MY, "5347".to_owned()), quiet);
    for i in 0..25 {
        let code = format!("{:05}", 700 + i);
        s.snapshots.insert(
            (pb::QOT_MARKET_HK, code.clone()),
            build::snapshot(
                pb::QOT_MARKET_HK,
                &code,
                380.0 + f64::from(i),
                380.2 + f64::from(i),
            ),
        );
    }
    s
}

fn snapshot_requests(fake: &OpenDFake) -> usize {
    fake.snapshot()
        .requests
        .iter()
        .filter(|(id, _)| *id == pb::proto_id::QOT_GET_SECURITY_SNAPSHOT)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opend_answers_many_codes_a_request_and_an_unknown_one_is_taken_out() {
    let mut state = opend_state();
    state.snapshot_hk_limit = Some(20);
    let fake = OpenDFake::start(state).await;
    let ctx = ctx_of(
        opend(fake.port, Duration::from_secs(5)),
        Duration::from_secs(15),
    );
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "MOOMOO-MY", "symbols": ["1155", "BURSA:5347", "9999", "HKEX:00700"]}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["count"], 3, "{r:#}");
    // Bursa's batch refused for 9999, asked again without it; HK's own batch.
    assert_eq!(r["requests"], 3);
    assert_eq!(snapshot_requests(&fake), 3);
    assert!(unknown(&r, "9999").contains("Unknown stock 9999"), "{r:#}");
    let s = row(&r, "1155");
    assert_eq!(s["market"], "BURSA:1155");
    assert_eq!(s["currency"], "MYR");
    assert_eq!(
        (s["bid"].as_f64(), s["ask"].as_f64()),
        (Some(10.28), Some(10.3))
    );
    assert_eq!(s["last"], 10.3);
    assert_eq!(
        (s["open"].as_f64(), s["high"].as_f64(), s["low"].as_f64()),
        (Some(10.2), Some(10.34), Some(10.18))
    );
    assert_eq!(
        s["close"],
        Value::Null,
        "OpenD gives no day close apart from the latest price"
    );
    assert_eq!(s["volume"], 4_250_300.0);
    assert_eq!(s["turnover"], 43_602_150.5);
    assert_eq!(s["prev_close"], 10.24);
    // 10.30 - 10.24 = 0.06, 0.06 / 10.24 = 0.586 %.
    assert_eq!(
        (s["change"].as_f64(), s["change_pct"].as_f64()),
        (Some(0.06), Some(0.59))
    );
    assert_eq!(
        s["time"], "2026-11-30T08:50:00.000Z",
        "OpenD's updateTimestamp"
    );
    // Before its first trade: no prices (OpenD's 0s), a real 0 volume, and no change.
    let s = row(&r, "BURSA:5347");
    for field in [
        "last",
        "bid",
        "ask",
        "open",
        "high",
        "low",
        "change",
        "change_pct",
    ] {
        assert_eq!(s[field], Value::Null, "{field}: {s:#}");
    }
    assert_eq!(s["prev_close"], 12.8);
    assert_eq!(s["volume"], 0.0);
    assert_eq!(row(&r, "HKEX:00700")["currency"], "HKD");

    // 25 HK codes with BMP rights: 20, then 5.
    let before = snapshot_requests(&fake);
    let hk: Vec<String> = (0..25).map(|i| format!("HKEX:{:05}", 700 + i)).collect();
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "MOOMOO-MY", "symbols": hk}),
    )
    .await;
    assert_eq!(r["count"], 25, "{r:#}");
    assert_eq!(snapshot_requests(&fake) - before, 2);
    assert_eq!(row(&r, "HKEX:00724")["bid"], 404.0);

    // Several unknown codes in one batch: each taken out in turn, the rest answered.
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "MOOMOO-MY", "symbols": ["0001", "1155", "0002", "0003"]}),
    )
    .await;
    assert_eq!(
        (
            r["count"].as_u64(),
            r["unknown_symbols"].as_array().map(Vec::len)
        ),
        (Some(1), Some(3)),
        "{r:#}"
    );

    // An OpenD that never answers: broker_timeout.
    fake.state.lock().unwrap().failure = OpenDFailure::Silent;
    let slow = ctx_of(
        opend(fake.port, Duration::from_secs(60)),
        Duration::from_millis(500),
    );
    let started = Instant::now();
    let r = tool(
        &slow,
        "get_snapshots",
        json!({"account": "MOOMOO-MY", "symbols": ["1155"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

// -- Hyperliquid ----------------------------------------------------------------------

fn perp(coin: &str, mark: &str, delisted: bool) -> HlMarket {
    HlMarket {
        coin: coin.into(),
        mark: mark.into(),
        mid: mark.into(),
        funding: "0.0000125".into(),
        open_interest: "10.0".into(),
        max_leverage: 20,
        sz_decimals: 3,
        oracle: None,
        delisted,
    }
}

fn venue() -> HlState {
    let mut btc = perp("BTC", "95000.0", false);
    btc.mid = "95000.5".into();
    let mut s = HlState {
        wallet: WALLET.into(),
        markets: vec![
            btc,
            perp("ETH", "3500.0", false),
            perp("MATIC", "0.38", true),
        ],
        account_value: "0.0".into(),
        ..HlState::default()
    };
    let fields = |pairs: &[(&str, Value)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect::<serde_json::Map<_, _>>()
    };
    s.contexts.insert(
        "BTC".into(),
        fields(&[
            ("prevDayPx", json!("94000.0")),
            ("dayBaseVlm", json!("1234.56789")),
            ("dayNtlVlm", json!("117283950.12")),
        ]),
    );
    // ETH's context has no mid (the venue sends null for a coin without one).
    s.contexts
        .insert("ETH".into(), fields(&[("midPx", Value::Null)]));
    s
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

async fn check_hyperliquid(r: &Value) {
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["count"], 2, "{r:#}");
    let s = row(r, "BTC");
    assert_eq!(s["market"], "HYPERLIQUID:BTC-PERP");
    assert_eq!(
        (s["mark"].as_f64(), s["mid"].as_f64()),
        (Some(95000.0), Some(95000.5))
    );
    assert_eq!(s["prev_close"], 94000.0);
    assert_eq!(s["volume"], 1234.56789);
    assert_eq!(s["turnover"], 117_283_950.12);
    // No last trade or close: the change is from the mark. 1000 / 94000 = 1.0638 %.
    assert_eq!(s["change_from"], "mark");
    assert_eq!(
        (s["change"].as_f64(), s["change_pct"].as_f64()),
        (Some(1000.0), Some(1.06))
    );
    for field in ["last", "bid", "ask", "open", "high", "low", "close"] {
        assert_eq!(s[field], Value::Null, "{field}");
    }
    // ETH's mid from allMids.
    assert_eq!(row(r, "HYPERLIQUID:ETH-PERP")["mid"], 3500.0);
    assert!(unknown(r, "MATIC").contains("delisted"), "{r:#}");
    assert!(unknown(r, "NOPE").contains("BTC"), "{r:#}");
}

const HL_ASK: &str =
    r#"{"account": "HL", "symbols": ["BTC", "HYPERLIQUID:ETH-PERP", "MATIC", "NOPE"]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hyperliquid_reads_every_context_at_once_and_mids_where_missing() {
    let fake = HlFake::start(venue()).await;
    let ctx = ctx_of(
        hyperliquid(&fake.url, Duration::from_secs(5)),
        Duration::from_secs(15),
    );
    let r = tool(&ctx, "get_snapshots", serde_json::from_str(HL_ASK).unwrap()).await;
    check_hyperliquid(&r).await;
    assert_eq!(r["requests"], 2);
    assert_eq!(fake.requests(), ["metaAndAssetCtxs", "allMids"]);
    // Every mid in the contexts: one request.
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "HL", "symbols": ["BTC"]}),
    )
    .await;
    assert_eq!(r["requests"], 1, "{r:#}");
    fake.fail(HlFailure::Hang);
    let slow = ctx_of(
        hyperliquid(&fake.url, Duration::from_secs(60)),
        Duration::from_millis(300),
    );
    let r = tool(
        &slow,
        "get_snapshots",
        json!({"account": "HL", "symbols": ["BTC"]}),
    )
    .await;
    assert_eq!(r["error"]["code"], "broker_timeout", "{r:#}");
}

/// The same question over the CLI's `call` and over MCP (stdio): the same figures.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_and_mcp_answer_the_same_snapshots() {
    let fake = HlFake::start(venue()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(
        &config,
        format!(
            "base_currency = \"USD\"\n[[accounts]]\nid = \"HL\"\nbroker = \"hyperliquid\"\naccount = \"{WALLET}\"\nbase_url = \"{}\"\n",
            fake.url
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let (config2, state2) = (config.clone(), state.clone());
    let cli = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .arg("--config")
            .arg(&config2)
            .arg("--state-dir")
            .arg(&state2)
            .args(["call", "get_snapshots", HL_ASK])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(
        cli.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&cli.stderr)
    );
    let by_cli: Value = serde_json::from_slice(&cli.stdout).unwrap();
    check_hyperliquid(&by_cli).await;

    let reply = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(&state)
            .arg("serve")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let args: Value = serde_json::from_str(HL_ASK).unwrap();
        let requests = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "snapshots-test", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "get_snapshots", "arguments": args}}),
        ];
        let mut last = Value::Null;
        for request in &requests {
            writeln!(stdin, "{request}").unwrap();
            stdin.flush().unwrap();
            if request.get("id").is_some() {
                last = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
            }
        }
        drop(stdin);
        let _ = child.wait();
        last
    })
    .await
    .unwrap();
    assert_eq!(reply["result"]["isError"], false, "{reply:#}");
    let by_mcp = &reply["result"]["structuredContent"];
    check_hyperliquid(by_mcp).await;
    assert_eq!(by_mcp["snapshots"], by_cli["snapshots"]);
    assert_eq!(by_mcp["unknown_symbols"], by_cli["unknown_symbols"]);
    // The text block carries the figures too.
    let text = reply["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("HYPERLIQUID:BTC-PERP 95000") && text.contains("1.06%"),
        "{text}"
    );
}

// -- TWS ------------------------------------------------------------------------------

fn tws_state() -> TwsState {
    let quote = |bid: f64, ask: f64, last: f64| TwsQuote {
        bid,
        ask,
        last,
        bid_size: "300".into(),
        ask_size: "200".into(),
    };
    let mut s = TwsState::default();
    s.quotes
        .insert("AAPL".into(), quote(230.10, 230.14, 230.12));
    s.quotes.insert("MSFT".into(), quote(410.0, 410.2, 410.1));
    s.quotes.insert("SLOW".into(), quote(1.0, 1.1, 1.05));
    s.days.insert(
        "AAPL".into(),
        TwsDay {
            open: 228.5,
            high: 231.0,
            low: 228.1,
            close: 227.9,
            volume: "41234567".into(),
            last_size: "100".into(),
            last_time: Some(1_796_050_790),
            ..TwsDay::default()
        },
    );
    s.days.insert(
        "MSFT".into(),
        TwsDay {
            open: 405.0,
            high: 411.0,
            low: 404.0,
            close: 400.0,
            volume: "1000".into(),
            delayed: true,
            ..TwsDay::default()
        },
    );
    s.days.insert(
        "SLOW".into(),
        TwsDay {
            silent: true,
            ..TwsDay::default()
        },
    );
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tws_sends_every_snapshot_request_then_reads_them_and_names_the_late_one() {
    let fake = FakeTws::start(tws_state()).await.unwrap();
    let ctx = ctx_of(
        tws(fake.port(), Duration::from_secs(2)),
        Duration::from_secs(15),
    );
    let r = tool(
        &ctx,
        "get_snapshots",
        json!({"account": "ibkr", "symbols": ["AAPL", "NASDAQ:MSFT", "NOPE", "SLOW"]}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["requests"], 4);
    let asked = fake
        .received()
        .iter()
        .filter(|id| **id == common::tws_fake::ids::REQ_MARKET_DATA)
        .count();
    assert_eq!(asked, 4);
    let s = row(&r, "AAPL");
    assert_eq!(s["market"], "SMART:AAPL");
    assert_eq!(
        (s["bid"].as_f64(), s["ask"].as_f64(), s["last"].as_f64()),
        (Some(230.1), Some(230.14), Some(230.12))
    );
    assert_eq!(
        (s["open"].as_f64(), s["high"].as_f64(), s["low"].as_f64()),
        (Some(228.5), Some(231.0), Some(228.1))
    );
    assert_eq!(
        s["prev_close"], 227.9,
        "TWS's close tick is the previous session's"
    );
    assert_eq!(s["close"], Value::Null);
    assert_eq!(
        (s["volume"].as_f64(), s["last_size"].as_f64()),
        (Some(41_234_567.0), Some(100.0))
    );
    assert_eq!(s["last_time"], "2026-11-30T14:59:50.000Z");
    // 230.12 - 227.9 = 2.22; / 227.9 = 0.974 %.
    assert_eq!(
        (s["change"].as_f64(), s["change_pct"].as_f64()),
        (Some(2.22), Some(0.97))
    );
    // Delayed ticks fill the same figures, and the answer says they are delayed.
    let s = row(&r, "NASDAQ:MSFT");
    assert_eq!(s["market"], "NASDAQ:MSFT");
    assert_eq!(
        (
            s["bid"].as_f64(),
            s["prev_close"].as_f64(),
            s["volume"].as_f64()
        ),
        (Some(410.0), Some(400.0), Some(1000.0))
    );
    assert!(
        r["notes"]
            .to_string()
            .contains("delayed data (no real-time subscription) for NASDAQ:MSFT"),
        "{r:#}"
    );
    assert!(unknown(&r, "NOPE").contains("no such contract"), "{r:#}");
    assert!(
        unknown(&r, "SLOW").contains("no complete snapshot"),
        "{r:#}"
    );
}

// -- MetaTrader -----------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metatrader_reads_the_eas_bid_and_ask_and_names_a_symbol_it_lacks() {
    for platform in [Platform::Mt4, Platform::Mt5] {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join(if platform == Platform::Mt5 {
            "MQL5/Files"
        } else {
            "MQL4/Files"
        });
        std::fs::create_dir_all(&files).unwrap();
        let mut state = EaState {
            platform,
            balance: 10_000.0,
            equity: 10_000.0,
            free_margin: 10_000.0,
            ..EaState::default()
        };
        state.prices.insert("EURUSD".into(), (1.08500, 1.08510));
        state.prices.insert("XAUUSD".into(), (2650.10, 2650.45));
        let ea = FakeEa::start(&files, state);
        let broker = Arc::new(DwxBroker::new(DwxConfig {
            id: "MT".into(),
            files: files.clone(),
            platform: if platform == Platform::Mt5 {
                tradedesk_brokers::dwx::Platform::Mt5
            } else {
                tradedesk_brokers::dwx::Platform::Mt4
            },
            magic: 1,
            live: false,
            server_time_zone: None,
            history_days: 30,
            timeout: Duration::from_secs(3),
            symbols: std::collections::BTreeMap::new(),
            margin_mode: None,
            lots: std::collections::BTreeMap::new(),
        }));
        let ctx = ctx_of(broker, Duration::from_secs(15));
        let r = tool(
            &ctx,
            "get_snapshots",
            json!({"account": "MT", "symbols": ["EURUSD", "MT4:XAUUSD", "NOPE"]}),
        )
        .await;
        assert_eq!(r["status"], "ok", "{platform:?}: {r:#}");
        let s = row(&r, "EURUSD");
        assert_eq!(
            (s["bid"].as_f64(), s["ask"].as_f64()),
            (Some(1.085), Some(1.0851))
        );
        assert_eq!(s["mid"], 1.08505);
        assert_eq!(s["market"], "FX:EURUSD");
        // MT5's last of 0 is none; nothing else is written.
        for field in [
            "last",
            "open",
            "high",
            "low",
            "close",
            "volume",
            "prev_close",
            "change",
        ] {
            assert_eq!(s[field], Value::Null, "{platform:?} {field}");
        }
        assert_eq!(row(&r, "MT4:XAUUSD")["ask"], 2650.45);
        assert!(
            unknown(&r, "NOPE").contains("Could not get bid/ask for NOPE"),
            "{r:#}"
        );
        assert!(
            r["notes"].to_string().contains("only the bid and ask"),
            "{r:#}"
        );
        // One subscription for all three.
        let subs = ea
            .snapshot()
            .commands
            .iter()
            .filter(|(_, c, _)| c == "SUBSCRIBE_SYMBOLS")
            .count();
        assert_eq!(subs, 1, "{platform:?}");
    }
}
