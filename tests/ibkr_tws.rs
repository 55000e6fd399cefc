//! IBKR through TWS / IB Gateway: the real `ibapi` client against a fake TWS on loopback
//! that speaks the socket protocol (handshake, framing, protobuf messages), with the
//! account's Flex statement as its history; and the failures fixtures never show: a
//! gateway that is down, one that accepts and never answers, one that refuses the host.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;
#[path = "common/stdio.rs"]
mod stdio;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::tws_fake::{
    CommissionTiming, FakeTws, ORDER_FRAME_IDS, TwsAccountValue, TwsBar, TwsBehaviour, TwsContract,
    TwsExecution, TwsPortfolioItem, TwsQuote, TwsState,
};
use serde_json::{Value, json};
use tradedesk_brokers::Broker;
use tradedesk_brokers::ibkr::{FlexSource, IbkrFlexBroker};
use tradedesk_brokers::tws::{TwsBroker, TwsConfig};
use tradedesk_tools::{ToolContext, call};

const ACCOUNT: &str = "U7654321";

/// Full history to 25 November: 100 AAPL at 200 and 10 MSFT at 400, no commission.
const STATEMENT: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<FlexQueryResponse queryName="tradedesk-test" type="AF">
<FlexStatements count="1">
<FlexStatement accountId="U7654321" fromDate="20260101" toDate="20261125" period="YearToDate" whenGenerated="20261126;080000">
<AccountInformation accountId="U7654321" currency="USD"/>
<Trades>
<Trade accountId="U7654321" currency="USD" assetCategory="STK" symbol="AAPL" conid="265598" listingExchange="NASDAQ" multiplier="1" tradeID="1" ibExecID="0000a1.6601.01.01" dateTime="20260302;100000" tradeDate="20260302" quantity="100" tradePrice="200" ibCommission="0" ibCommissionCurrency="USD" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U7654321" currency="USD" assetCategory="STK" symbol="MSFT" conid="272093" listingExchange="NASDAQ" multiplier="1" tradeID="2" ibExecID="0000a1.6602.01.01" dateTime="20261124;100000" tradeDate="20261124" quantity="10" tradePrice="400" ibCommission="0" ibCommissionCurrency="USD" buySell="BUY" levelOfDetail="EXECUTION"/>
</Trades>
</FlexStatement>
</FlexStatements>
</FlexQueryResponse>
"#;

fn stock(con_id: i32, symbol: &str, primary: &str) -> TwsContract {
    TwsContract {
        con_id,
        symbol: symbol.into(),
        sec_type: "STK".into(),
        exchange: "SMART".into(),
        primary_exchange: primary.into(),
        currency: "USD".into(),
        local_symbol: symbol.into(),
        multiplier: None,
    }
}

#[allow(clippy::too_many_arguments)]
fn execution(
    account: &str,
    contract: TwsContract,
    exec_id: &str,
    time: &str,
    side: &str,
    shares: &str,
    price: f64,
    commission: Option<f64>,
) -> TwsExecution {
    TwsExecution {
        account: account.into(),
        // Executions carry the venue, not the primary exchange.
        contract: TwsContract {
            primary_exchange: String::new(),
            ..contract
        },
        exec_id: exec_id.into(),
        order_id: 0,
        perm_id: 9_001,
        time: time.into(),
        exchange: "ISLAND".into(),
        side: side.into(),
        shares: shares.into(),
        price,
        commission: commission.map(|c| (c, "USD".to_owned())),
        client_id: None,
    }
}

fn value(key: &str, value: &str, currency: &str) -> TwsAccountValue {
    TwsAccountValue {
        account: ACCOUNT.into(),
        key: key.into(),
        value: value.into(),
        currency: currency.into(),
    }
}

fn holding(contract: TwsContract, position: &str, price: f64) -> TwsPortfolioItem {
    TwsPortfolioItem {
        account: ACCOUNT.into(),
        contract,
        position: position.into(),
        market_price: price,
        market_value: 0.0,
        average_cost: 200.0,
        unrealized_pnl: 0.0,
        realized_pnl: 0.0,
    }
}

/// A gateway serving two accounts; the one under test sold AAPL this week, once with a
/// correction, and re-reports the MSFT buy the statement already holds.
fn scenario() -> TwsState {
    let aapl = stock(265_598, "AAPL", "NASDAQ");
    let msft = stock(272_093, "MSFT", "NASDAQ");
    let mut quotes = std::collections::BTreeMap::new();
    quotes.insert(
        "AAPL".to_owned(),
        TwsQuote {
            bid: 254.9,
            ask: 255.1,
            last: 255.0,
            bid_size: "300".into(),
            ask_size: "200".into(),
        },
    );
    let mut bars = std::collections::BTreeMap::new();
    bars.insert(
        "AAPL".to_owned(),
        (0..5)
            .map(|i| TwsBar {
                date: format!("2026112{}", i + 3),
                open: 250.0 + f64::from(i),
                high: 252.0 + f64::from(i),
                low: 249.0 + f64::from(i),
                close: 251.0 + f64::from(i),
                volume: "1000".into(),
            })
            .collect(),
    );
    TwsState {
        accounts: vec![ACCOUNT.into(), "U1111111".into()],
        account_values: vec![
            value("NetLiquidation", "40000.00", "USD"),
            value("BuyingPower", "160000.00", "USD"),
            value("MaintMarginReq", "3750.25", "USD"),
            value("CashBalance", "25000.00", "USD"),
            value("CashBalance", "25000.00", "BASE"),
            value("ExchangeRate", "1.00", "USD"),
        ],
        portfolio: vec![
            holding(aapl.clone(), "50", 255.0),
            holding(msft.clone(), "10", 410.0),
        ],
        executions: vec![
            // Already in the statement: must not count twice.
            execution(
                ACCOUNT,
                msft.clone(),
                "0000a1.6602.01.01",
                "20261124 10:00:00 US/Eastern",
                "BOT",
                "10",
                400.0,
                Some(0.0),
            ),
            execution(
                ACCOUNT,
                aapl.clone(),
                "0000b2.6701.01.01",
                "20261127 10:30:00 US/Eastern",
                "SLD",
                "40",
                250.0,
                Some(1.05),
            ),
            // Corrected: only the .02 stands.
            execution(
                ACCOUNT,
                aapl.clone(),
                "0000b2.6702.01.01",
                "20261127 11:00:00 US/Eastern",
                "SLD",
                "10",
                251.0,
                Some(1.0),
            ),
            execution(
                ACCOUNT,
                aapl.clone(),
                "0000b2.6702.01.02",
                "20261127 11:00:00 US/Eastern",
                "SLD",
                "10",
                251.5,
                Some(1.0),
            ),
            // Another account's: filtered out.
            execution(
                "U1111111",
                aapl,
                "0000c3.6801.01.01",
                "20261127 12:00:00 US/Eastern",
                "BOT",
                "1",
                252.0,
                Some(1.0),
            ),
        ],
        quotes,
        bars,
        ..TwsState::default()
    }
}

fn tws_config(port: u16, account: Option<&str>, timeout: Duration) -> TwsConfig {
    TwsConfig {
        id: "ibkr".into(),
        host: "127.0.0.1".into(),
        port,
        client_id: 7,
        account: account.map(str::to_owned),
        timeout,
    }
}

fn with_statement(dir: &Path, config: TwsConfig) -> TwsBroker {
    let path = dir.join("statement.xml");
    std::fs::write(&path, STATEMENT).unwrap();
    let flex = IbkrFlexBroker::new(
        "ibkr",
        Some(ACCOUNT.into()),
        FlexSource::File(path),
        Duration::from_secs(5),
    )
    .unwrap();
    TwsBroker::new(config, Some(flex))
}

fn desk(broker: TwsBroker) -> ToolContext {
    let mut ctx = ToolContext::new("test").with_broker(Arc::new(broker), None);
    ctx.broker_timeout = Duration::from_secs(10);
    ctx
}

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args).await.unwrap().structured
}

/// A tool's error answer (`status: error`), as text for matching.
async fn tool_error(ctx: &ToolContext, name: &str, args: Value) -> String {
    let out = tool(ctx, name, args).await;
    assert_eq!(out["status"], "error", "{out:#}");
    out.to_string()
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recent_executions_join_the_flex_history_by_execution_id_never_twice() {
    let fake = FakeTws::start(scenario()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = desk(with_statement(
        dir.path(),
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
    ));

    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let rows = positions["positions"].as_array().unwrap();
    let held = |sym: &str| {
        rows.iter()
            .find(|p| p["symbol"] == sym)
            .map(|p| (p["quantity"].as_f64().unwrap(), p["exchange"].clone()))
    };
    // 100 - 40 - 10 (the correction, not the corrected execution too).
    assert_eq!(held("AAPL"), Some((50.0, json!("NASDAQ"))), "{positions:#}");
    // The MSFT buy TWS re-reports is the statement's: 10, not 20.
    assert_eq!(held("MSFT"), Some((10.0, json!("NASDAQ"))), "{positions:#}");
    // Marked at TWS's market prices.
    let aapl = rows.iter().find(|p| p["symbol"] == "AAPL").unwrap();
    assert_eq!(aapl["market_price"], 255.0, "{aapl:#}");

    // FIFO against the statement's buy at 200: 40 x 50 + 10 x 51.50 = 2,515.00 gross,
    // less the commission reports' 1.05 + 1.00.
    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    assert_eq!(pnl["gross_pnl"], 2515.0, "{pnl:#}");
    assert_eq!(pnl["net_pnl"], 2512.95, "{pnl:#}");

    let history = tool(
        &ctx,
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-12-31", "limit": 100}),
    )
    .await;
    assert_eq!(history["total_count"], 4, "{history:#}");
    let text = history.to_string();
    assert!(text.contains("0000b2.6702.01.02"), "{history:#}");
    assert!(!text.contains("0000b2.6702.01.01"), "{history:#}");
    assert!(
        !text.contains("0000c3"),
        "another account's fill: {history:#}"
    );

    // Cash anchored to what TWS reports, with the unexplained part said.
    let accounts = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["cash"], 25000.0, "{accounts:#}");
    // The margin figures TWS's account values state, in the base currency; the
    // MetaTrader ones it does not state are null.
    let row = &accounts["accounts"][0];
    assert_eq!(
        (
            &row["buying_power"],
            &row["maintenance_margin"],
            &row["free_margin"]
        ),
        (&json!(160000.0), &json!(3750.25), &Value::Null),
        "{accounts:#}"
    );
    assert!(
        accounts.to_string().contains("opening balance"),
        "{accounts:#}"
    );

    // What TWS reports held is what the fills imply; the gateway is up and read-only.
    let health = tool(&ctx, "get_server_health", json!({})).await;
    let broker = &health["brokers"][0];
    assert_eq!(broker["status"], "ok", "{health:#}");
    let detail = broker["detail"].as_str().unwrap();
    assert!(detail.contains("Read-Only API on"), "{detail}");
    assert!(
        detail.contains("U1111111"),
        "lists the gateway's accounts: {detail}"
    );
    assert!(broker["latency_ms"].as_u64().is_some(), "{health:#}");
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );

    // TWS was asked for the account's last 7 days, and never sent an order frame.
    let seen = fake.snapshot();
    assert!(
        seen.execution_filters
            .iter()
            .all(|(acct, days)| acct == ACCOUNT && *days == 7),
        "{:?}",
        seen.execution_filters
    );
    assert!(
        !seen.received.iter().any(|id| ORDER_FRAME_IDS.contains(id)),
        "{:?}",
        seen.received
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_position_the_fills_do_not_explain_shows_in_reconciliation() {
    let mut state = scenario();
    // TWS holds 60 AAPL; the fills imply 50.
    state.portfolio[0].position = "60".into();
    let fake = FakeTws::start(state).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = desk(with_statement(
        dir.path(),
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
    ));
    let health = tool(&ctx, "get_server_health", json!({})).await;
    let rows = health["reconciliation"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{health:#}");
    assert!(rows[0].to_string().contains("AAPL"), "{health:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_statement_tws_alone_answers_and_says_what_it_cannot_see() {
    let fake = FakeTws::start(scenario()).await.unwrap();
    let ctx = desk(TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    ));
    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let notes = positions["notes"].to_string();
    assert!(notes.contains("last 7 days"), "{positions:#}");
    // The week's fills alone imply AAPL -50 (sold what TWS's week does not show bought):
    // the 50 held and the 50 sold are opened before, at TWS's average cost of 200.
    let aapl = positions["positions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["symbol"] == "AAPL")
        .unwrap();
    assert_eq!(aapl["quantity"], 50.0, "{positions:#}");
    assert!(
        notes.contains("opened at TWS's average cost"),
        "{positions:#}"
    );
    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    // 40 x (250 - 200) + 10 x (251.50 - 200).
    assert_eq!(pnl["gross_pnl"], 2515.0, "{pnl:#}");
    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holdings_that_share_a_symbol_open_each_at_its_own_average_cost() {
    // Shell in London (GBP) and in New York (USD), both held since before the week of
    // executions TWS keeps: each opens at its own average cost, not the other's.
    let mut state = scenario();
    let mut london = stock(1_001, "SHEL", "LSE");
    london.currency = "GBP".into();
    let new_york = stock(1_002, "SHEL", "NYSE");
    let mut gbp = holding(london, "100", 28.0);
    gbp.average_cost = 27.5;
    let mut usd = holding(new_york, "20", 71.0);
    usd.average_cost = 70.0;
    state.portfolio.extend([gbp, usd]);
    state
        .account_values
        .push(value("ExchangeRate", "1.25", "GBP"));
    let fake = FakeTws::start(state).await.unwrap();
    let ctx = desk(TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    ));
    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let shel = |exchange: &str| {
        positions["positions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["symbol"] == "SHEL" && p["exchange"] == exchange)
            .unwrap_or_else(|| panic!("no SHEL on {exchange}: {positions:#}"))
            .clone()
    };
    let (lse, nyse) = (shel("LSE"), shel("NYSE"));
    assert_eq!(
        (lse["quantity"].as_f64(), lse["avg_cost"].as_f64()),
        (Some(100.0), Some(27.5))
    );
    assert_eq!(
        (nyse["quantity"].as_f64(), nyse["avg_cost"].as_f64()),
        (Some(20.0), Some(70.0))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quotes_and_bars_come_from_tws() {
    let fake = FakeTws::start(scenario()).await.unwrap();
    let ctx = desk(TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    ));
    let q = tool(
        &ctx,
        "get_quote",
        json!({"account": "ibkr", "symbol": "AAPL"}),
    )
    .await;
    assert_eq!(
        (q["bid"].as_f64(), q["ask"].as_f64()),
        (Some(254.9), Some(255.1)),
        "{q:#}"
    );
    let text = tool_error(
        &ctx,
        "get_quote",
        json!({"account": "ibkr", "symbol": "NOPE"}),
    )
    .await;
    assert!(
        text.contains("unknown_symbol") && text.contains("NOPE"),
        "{text}"
    );
    let bars = tool(
        &ctx,
        "get_bars",
        json!({"source": {"symbol": "AAPL", "account": "ibkr", "interval": "1d",
            "start": "2026-11-01", "end": "2026-11-30"}, "max_rows": 0}),
    )
    .await;
    assert_eq!(bars["status"], "ok", "{bars:#}");
    assert_eq!(bars["total"], 5, "{bars:#}");
    assert_eq!(bars["bars"][0]["time"], "2026-11-23", "{bars:#}");
    assert_eq!(bars["bars"][4]["close"], 255.0, "{bars:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_serving_several_accounts_lists_each_and_the_config_picks_one() {
    let mut state = scenario();
    state.read_only = Some(false);
    let fake = FakeTws::start(state).await.unwrap();
    let unpicked = TwsBroker::new(tws_config(fake.port(), None, Duration::from_secs(5)), None);
    match unpicked.snapshot().await {
        Err(tradedesk_brokers::BrokerError::Unavailable { detail, hint, .. }) => {
            assert!(
                detail.contains(ACCOUNT) && detail.contains("U1111111"),
                "{detail}"
            );
            assert!(hint.contains("account ="), "{hint}");
        }
        other => panic!("{other:?}"),
    }
    let wrong = TwsBroker::new(
        tws_config(fake.port(), Some("U0000000"), Duration::from_secs(5)),
        None,
    );
    assert!(matches!(
        wrong.snapshot().await,
        Err(tradedesk_brokers::BrokerError::Unavailable { .. })
    ));
    let other = TwsBroker::new(
        tws_config(fake.port(), Some("U1111111"), Duration::from_secs(5)),
        None,
    );
    let book = other.snapshot().await.unwrap();
    assert_eq!(book.fills.len(), 1, "only U1111111's execution");
    // The Read-Only API setting is off: the health says so, with what to check.
    let health = other.health().await;
    assert!(health[0].detail.contains("Read-Only API OFF"), "{health:?}");
    assert!(
        health[0]
            .hint
            .as_deref()
            .unwrap_or("")
            .contains("Read-Only")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_is_down_answers_unavailable_within_a_second_with_its_hint() {
    let ctx = desk(TwsBroker::new(
        tws_config(closed_port(), None, Duration::from_secs(10)),
        None,
    ));
    let started = Instant::now();
    let text = tool_error(&ctx, "get_positions", json!({})).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert!(text.contains("broker_unavailable"), "{text}");
    for port in ["7497", "7496", "4002", "4001"] {
        assert!(text.contains(port), "{text}");
    }
    assert!(text.contains("IB Gateway"), "{text}");
    let started = Instant::now();
    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(health["brokers"][0]["status"], "down", "{health:#}");
    assert!(
        health["brokers"][0]["hint"]
            .as_str()
            .unwrap()
            .contains("Enable ActiveX and Socket Clients"),
        "{health:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_silent_tws_the_statement_answers_alone_within_the_bound() {
    let mut state = scenario();
    state.behaviour = TwsBehaviour::SilentAfterHandshake;
    let fake = FakeTws::start(state).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bound = Duration::from_secs(1);
    let mut ctx = desk(with_statement(
        dir.path(),
        tws_config(fake.port(), Some(ACCOUNT), bound),
    ));
    // The caller's bound is the account's: TWS must give up in time for the statement.
    ctx.broker_timeout = bound;
    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    assert_eq!(positions["positions"].as_array().unwrap().len(), 2);
    let notes = positions["notes"].to_string();
    assert!(notes.contains("Flex statement alone"), "{notes}");
    assert!(notes.contains("no answer within"), "{notes}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tws_down_the_statement_answers_alone_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = desk(with_statement(
        dir.path(),
        tws_config(closed_port(), Some(ACCOUNT), Duration::from_secs(5)),
    ));
    let positions = tool(&ctx, "get_positions", json!({})).await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let held: Vec<(String, f64)> = positions["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["symbol"].as_str().unwrap().to_owned(),
                p["quantity"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        held,
        [("AAPL".to_owned(), 100.0), ("MSFT".to_owned(), 10.0)],
        "{positions:#}"
    );
    assert_eq!(positions["as_of"], "2026-11-25");
    let notes = positions["notes"].to_string();
    assert!(
        notes.contains("read from its Flex statement alone, as of 2026-11-25")
            && notes.contains("live positions"),
        "{notes}"
    );
    let accounts = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(accounts["accounts"][0]["account"], "ibkr", "{accounts:#}");
    assert_eq!(accounts["accounts"][0]["mode"], "live");
    // A statement states no buying power: nothing from TWS stands in for it.
    assert!(
        accounts["accounts"][0]["buying_power"].is_null(),
        "{accounts:#}"
    );
    // Health says which part is down.
    let health = tool(&ctx, "get_server_health", json!({})).await;
    let row = &health["brokers"][0];
    assert_eq!(row["status"], "degraded", "{health:#}");
    let detail = row["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("TWS / IB Gateway down") && detail.contains("Flex statement"),
        "{detail}"
    );
    assert!(
        row["hint"]
            .as_str()
            .unwrap()
            .contains("Enable ActiveX and Socket Clients")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_accepts_and_never_answers_times_out_within_the_bound() {
    let bound = Duration::from_millis(800);
    for behaviour in [
        TwsBehaviour::SilentAfterAccept,
        TwsBehaviour::SilentAfterHandshake,
    ] {
        let mut state = scenario();
        state.behaviour = behaviour;
        let fake = FakeTws::start(state).await.unwrap();
        let ctx = desk(TwsBroker::new(
            tws_config(fake.port(), Some(ACCOUNT), bound),
            None,
        ));
        for (name, args) in [
            ("get_positions", json!({})),
            ("get_quote", json!({"account": "ibkr", "symbol": "AAPL"})),
        ] {
            let started = Instant::now();
            let text = tool_error(&ctx, name, args).await;
            let took = started.elapsed();
            assert!(
                text.contains("broker_timeout"),
                "{behaviour:?} {name}: {text}"
            );
            // Connect and the read each get the bound at most.
            assert!(took < bound * 2 + Duration::from_millis(500), "{took:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_refuses_the_host_names_trusted_ips() {
    let mut state = scenario();
    state.behaviour = TwsBehaviour::CloseOnAccept;
    let fake = FakeTws::start(state).await.unwrap();
    let broker = TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(3)),
        None,
    );
    match broker.snapshot().await {
        Err(tradedesk_brokers::BrokerError::Unavailable { hint, .. }) => {
            assert!(hint.contains("Trusted IPs"), "{hint}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_is_made_again_on_the_next_call() {
    let fake = FakeTws::start(scenario()).await.unwrap();
    let broker = TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    );
    broker.snapshot().await.unwrap();
    fake.disconnect_all();
    // The first call after the drop may find the dead socket; the next connects afresh.
    let mut ok = false;
    for _ in 0..3 {
        if broker.snapshot().await.is_ok() {
            ok = true;
            break;
        }
    }
    assert!(ok, "never reconnected");
    assert!(fake.snapshot().handshakes >= 2);
}

/// The stdio server against the fake: stdout carries JSON-RPC and nothing else, even
/// when something in the process prints to stdout; log records go to stderr.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdout_stays_pure_json_rpc_when_a_library_prints() {
    let fake = FakeTws::start(scenario()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let statement = dir.path().join("statement.xml");
    std::fs::write(&statement, STATEMENT).unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(
        &config,
        format!(
            "base_currency = \"USD\"\n\n[[accounts]]\nid = \"ibkr\"\nbroker = \"ibkr\"\nport = {}\naccount = \"{ACCOUNT}\"\nclient_id = 11\nflex = {{ path = \"{}\" }}\n",
            fake.port(),
            statement.display()
        ),
    )
    .unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "get_positions", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "get_server_health", "arguments": {}}}),
    ];
    let out = tokio::task::spawn_blocking(move || {
        let mut child = stdio::spawn_piped(
            Command::new(env!("CARGO_BIN_EXE_tradedesk"))
                .arg("--config")
                .arg(&config)
                .arg("--state-dir")
                .arg(dir.path().join("state"))
                .arg("serve")
                .env("TRADEDESK_FAILPOINT", "stray_print")
                .env("TRADEDESK_LOG", "debug"),
        );
        let mut stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut replies = Vec::new();
        let mut lines_out = stdout.lines();
        for line in &lines {
            writeln!(stdin, "{line}").unwrap();
            if line.get("id").is_some() {
                // Wait for this request's reply before the next.
                let reply = lines_out.next().unwrap().unwrap();
                replies.push(reply);
            }
        }
        drop(stdin);
        let rest: Vec<String> = lines_out.map(Result::unwrap).collect();
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        (replies, rest, status, err)
    })
    .await
    .unwrap();
    let (replies, rest, _status, stderr) = out;
    for line in replies.iter().chain(rest.iter()) {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{line}");
    }
    assert_eq!(replies.len(), 3);
    let positions: Value = serde_json::from_str(&replies[1]).unwrap();
    assert_eq!(
        positions["result"]["isError"],
        json!(false),
        "{positions:#}"
    );
    assert!(
        stderr.contains("a stray line a library printed"),
        "the stray print belongs on stderr: {stderr}"
    );
    // The IBKR client's own log records (debug level here) reach stderr, not stdout.
    assert!(stderr.contains("ibapi"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_checks_the_gateway_and_says_what_to_fix() {
    let fake = FakeTws::start(scenario()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, port: u16| {
        let path = dir.path().join(name);
        std::fs::write(
            &path,
            format!(
                "base_currency = \"USD\"\n\n[[accounts]]\nid = \"ibkr\"\nbroker = \"ibkr\"\nport = {port}\naccount = \"{ACCOUNT}\"\ntimeout_ms = 2000\n"
            ),
        )
        .unwrap();
        path
    };
    let state = dir.path().join("state");
    let run = move |config: std::path::PathBuf| {
        Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .arg("--config")
            .arg(config)
            .arg("--state-dir")
            .arg(&state)
            .arg("doctor")
            .output()
            .unwrap()
    };
    let good = write("good.toml", fake.port());
    let probe = run.clone();
    let out = tokio::task::spawn_blocking(move || probe(good))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(text.contains(ACCOUNT), "{text}");
    let dead = write("dead.toml", closed_port());
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || run(dead))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("FAILED") && text.contains("fix:") && text.contains("7497"),
        "{text}"
    );
}

// ------------------------------------------------------------------------------------------
// TWS as it really behaves (issue 17 point 4): the fake's unkind modes.
// ------------------------------------------------------------------------------------------

/// A fill in the book, by execution id.
fn fill<'a>(book: &'a tradedesk_core::Book, id: &str) -> &'a tradedesk_core::Fill {
    book.fills
        .iter()
        .find(|f| f.id == id)
        .unwrap_or_else(|| panic!("no fill {id}: {:?}", book.fills))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn executions_without_an_end_marker_are_served_with_what_came_and_say_so() {
    let mut state = scenario();
    state.execution_end = false;
    let fake = FakeTws::start(state).await.unwrap();
    let ctx = desk(TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    ));
    let started = Instant::now();
    let positions = tool(&ctx, "get_positions", json!({})).await;
    // Generous: the read stops within the account's timeout, not the caller's.
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(positions["status"], "ok", "{positions:#}");
    let aapl = positions["positions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["symbol"] == "AAPL")
        .unwrap();
    assert_eq!(aapl["quantity"], 50.0, "{positions:#}");
    let notes = positions["notes"].to_string();
    assert!(
        notes.contains("no end to its list of executions") && notes.contains("ExecutionDetailsEnd"),
        "{notes}"
    );
    // The week's P&L is still there: the executions that came are used.
    let pnl = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-12-31"}),
    )
    .await;
    assert_eq!(pnl["gross_pnl"], 2515.0, "{pnl:#}");
    // Health does not say ok while the last read had no end.
    let health = tool(&ctx, "get_server_health", json!({})).await;
    let row = &health["brokers"][0];
    assert_eq!(row["status"], "degraded", "{health:#}");
    assert!(
        row["detail"]
            .as_str()
            .unwrap()
            .contains("ExecutionDetailsEnd"),
        "{health:#}"
    );
    assert!(
        row["hint"].as_str().unwrap().contains("restart"),
        "{health:#}"
    );

    // Once TWS ends its list again, health is ok again.
    fake.state.lock().unwrap().execution_end = true;
    let broker = TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    );
    broker.snapshot().await.unwrap();
    assert_eq!(
        broker.health().await[0].status,
        tradedesk_brokers::HealthStatus::Ok
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commission_reports_after_the_end_marker_still_join_their_executions() {
    // Frames later (an unrelated frame first), and some time later.
    for delay in [Duration::ZERO, Duration::from_millis(300)] {
        let mut state = scenario();
        state.commissions = CommissionTiming::AfterEnd { delay };
        let fake = FakeTws::start(state).await.unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ctx = desk(with_statement(
            dir.path(),
            tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        ));
        let pnl = tool(
            &ctx,
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2026-12-31"}),
        )
        .await;
        assert_eq!(pnl["gross_pnl"], 2515.0, "{delay:?}: {pnl:#}");
        // Less the commission reports' 1.05 + 1.00: none was lost.
        assert_eq!(pnl["net_pnl"], 2512.95, "{delay:?}: {pnl:#}");
        let positions = tool(&ctx, "get_positions", json!({})).await;
        assert!(
            !positions["notes"]
                .to_string()
                .contains("no commission report"),
            "{delay:?}: {positions:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commission_report_later_than_the_grace_is_unknown_then_joined_by_a_later_read() {
    let mut state = scenario();
    // Well past the grace a read waits for it.
    let delay = tradedesk_brokers::tws::COMMISSION_GRACE + Duration::from_millis(2_500);
    state.commissions = CommissionTiming::AfterEnd { delay };
    let fake = FakeTws::start(state).await.unwrap();
    let broker = TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(10)),
        None,
    );
    let first = broker.snapshot().await.unwrap();
    let sold = fill(&first, "0000b2.6701.01.01");
    // Not yet known: marked so, never a silent 0 taken as the fee.
    assert!(!sold.commission_known, "{sold:?}");
    let notes = first.notes.join("\n");
    assert!(
        notes.contains("no commission report") && notes.contains("commission_known false"),
        "{notes}"
    );
    // The report comes later; a later read joins it (bounded: it cannot hang).
    let mut joined = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let book = broker.snapshot().await.unwrap();
        let f = fill(&book, "0000b2.6701.01.01");
        if f.commission_known {
            joined = Some(f.commission);
            break;
        }
    }
    assert_eq!(joined, Some(rust_decimal::Decimal::new(105, 2)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_clients_executions_are_read_not_only_tradedesks() {
    let mut state = scenario();
    let aapl = stock(265_598, "AAPL", "NASDAQ");
    // Bought by hand in TWS (client 0) and by another API program (client 12); the
    // statement ends on 25 November, so both are TWS's alone.
    let mut manual = execution(
        ACCOUNT,
        aapl.clone(),
        "0000d4.6901.01.01",
        "20261127 13:00:00 US/Eastern",
        "BOT",
        "5",
        252.0,
        Some(1.0),
    );
    manual.client_id = Some(0);
    let mut other = execution(
        ACCOUNT,
        aapl,
        "0000d4.6902.01.01",
        "20261127 14:00:00 US/Eastern",
        "BOT",
        "5",
        253.0,
        Some(1.0),
    );
    other.client_id = Some(12);
    state.executions.extend([manual, other]);
    state.portfolio[0].position = "60".into();
    let fake = FakeTws::start(state).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broker = with_statement(
        dir.path(),
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
    );
    let book = broker.snapshot().await.unwrap();
    fill(&book, "0000d4.6901.01.01");
    fill(&book, "0000d4.6902.01.01");
    // What TWS holds (60) is what the fills imply: nothing unexplained.
    let ctx = desk(broker);
    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );
    // The filter named client 0 (every client) explicitly.
    let asked = fake.snapshot().execution_filter_clients;
    assert!(
        !asked.is_empty() && asked.iter().all(|c| *c == Some(0)),
        "{asked:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_too_old_for_the_protobuf_api_names_the_release_to_install() {
    let mut state = scenario();
    // What IB Gateway 10.37 speaks.
    state.server_version = 203;
    let fake = FakeTws::start(state).await.unwrap();
    let broker = TwsBroker::new(
        tws_config(fake.port(), Some(ACCOUNT), Duration::from_secs(5)),
        None,
    );
    let started = Instant::now();
    match broker.snapshot().await {
        Err(tradedesk_brokers::BrokerError::Unavailable { detail, hint, .. }) => {
            assert!(detail.contains("203") && detail.contains("213"), "{detail}");
            assert!(hint.contains("TWS or IB Gateway 10.40 or later"), "{hint}");
        }
        other => panic!("{other:?}"),
    }
    // Refused at the handshake, not left to time out (generous bound).
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let ctx = desk(broker);
    let text = tool_error(&ctx, "get_positions", json!({})).await;
    assert!(
        text.contains("broker_unavailable") && text.contains("10.40"),
        "{text}"
    );
    let health = tool(&ctx, "get_server_health", json!({})).await;
    let row = &health["brokers"][0];
    assert_eq!(row["status"], "down", "{health:#}");
    assert!(
        row["hint"].as_str().unwrap().contains("10.40"),
        "{health:#}"
    );
    // ibapi sends nothing after refusing the version: no StartApi reached the fake.
    assert!(fake.snapshot().client_ids.is_empty());
}
