//! The product's first promise, end to end: IBKR (a fake TWS on loopback) in USD, moomoo
//! on Bursa Malaysia (a fake OpenD on loopback) in MYR, and a book file, answered in one
//! currency through MCP (stdio, the way Claude Desktop spawns the server):
//! "what was my biggest losing trade this year, and how much of my portfolio is in ringgit?"
//!
//! The hand-computed answer (USD, at USDMYR 4.50 from the book's rates):
//! * losing trades closed in 2026:
//!   - book `VAULT`: 10 XYZ bought at 100, sold at 95: -50.00;
//!   - IBKR: 5 TSLA bought at 300, sold at 290, 1.00 commission each way: -52.00;
//!   - moomoo: 500 Tenaga (BURSA:5347) bought at 13.00 (fee 10.00), sold at 11.00 (fee
//!     10.00): -1,020.00 MYR = -226.67 USD. The biggest loss.
//! * positions (cash excluded, as `get_exposure` counts): MSFT 10 x 500 = 5,000.00 USD;
//!   AAPL 20 x 255 = 5,100.00 USD; Maybank (BURSA:1155) 600 x 10.30 = 6,180.00 MYR =
//!   1,373.33 USD. In ringgit: 1,373.33 USD of a gross 11,473.33, 11.97 %.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::opend_fake::{OpenDFake, OpenDState};
use common::tws_fake::{
    FakeTws, TwsAccountValue, TwsContract, TwsExecution, TwsPortfolioItem, TwsState,
};
use serde_json::{Value, json};

const BOOK: &str = r#"{
  "format": "tradedesk-book/1",
  "base_currency": "USD",
  "as_of": "2026-11-30",
  "accounts": [{"id": "VAULT", "broker": "book", "currency": "USD", "name": "Long-term holdings"}],
  "instruments": [
    {"symbol": "MSFT", "exchange": "NASDAQ", "currency": "USD", "asset_class": "equity"},
    {"symbol": "XYZ", "exchange": "NYSE", "currency": "USD", "asset_class": "equity"}
  ],
  "fills": [
    {"id": "V-1", "account": "VAULT", "exchange": "NASDAQ", "symbol": "MSFT", "side": "buy", "quantity": "10", "price": "400", "commission": "0", "commission_currency": "USD", "time": "2025-02-03T10:00:00-05:00"},
    {"id": "V-2", "account": "VAULT", "exchange": "NYSE", "symbol": "XYZ", "side": "buy", "quantity": "10", "price": "100", "commission": "0", "commission_currency": "USD", "time": "2026-04-01T10:00:00-04:00"},
    {"id": "V-3", "account": "VAULT", "exchange": "NYSE", "symbol": "XYZ", "side": "sell", "quantity": "10", "price": "95", "commission": "0", "commission_currency": "USD", "time": "2026-05-01T10:00:00-04:00"}
  ],
  "cash": [{"account": "VAULT", "kind": "deposit", "amount": "10000.00", "currency": "USD", "time": "2025-01-02T09:00:00-05:00"}],
  "marks": [{"exchange": "NASDAQ", "symbol": "MSFT", "price": "500", "date": "2026-11-30"}],
  "fx_rates": [
    {"base": "USD", "quote": "MYR", "rate": "4.50", "date": "2025-01-01"},
    {"base": "USD", "quote": "MYR", "rate": "4.50", "date": "2026-11-30"}
  ]
}
"#;

fn ibkr() -> TwsState {
    let stock = |con_id: i32, symbol: &str| TwsContract {
        con_id,
        symbol: symbol.into(),
        sec_type: "STK".into(),
        exchange: "SMART".into(),
        primary_exchange: "NASDAQ".into(),
        currency: "USD".into(),
        local_symbol: symbol.into(),
        multiplier: None,
    };
    let exec =
        |contract: TwsContract, id: &str, time: &str, side: &str, shares: &str, price: f64| {
            TwsExecution {
                account: "U5550001".into(),
                contract,
                exec_id: id.into(),
                order_id: 0,
                perm_id: 1,
                time: time.into(),
                exchange: "ISLAND".into(),
                side: side.into(),
                shares: shares.into(),
                price,
                commission: Some((1.0, "USD".into())),
                client_id: None,
            }
        };
    let value = |key: &str, value: &str| TwsAccountValue {
        account: "U5550001".into(),
        key: key.into(),
        value: value.into(),
        currency: "USD".into(),
    };
    TwsState {
        accounts: vec!["U5550001".into()],
        account_values: vec![
            value("NetLiquidation", "10000"),
            value("CashBalance", "4848"),
        ],
        portfolio: vec![TwsPortfolioItem {
            account: "U5550001".into(),
            contract: stock(265_598, "AAPL"),
            position: "20".into(),
            market_price: 255.0,
            market_value: 5100.0,
            average_cost: 250.0,
            unrealized_pnl: 100.0,
            realized_pnl: 0.0,
        }],
        executions: vec![
            exec(
                stock(265_598, "AAPL"),
                "e1.01.01",
                "20261124 10:00:00 US/Eastern",
                "BOT",
                "20",
                250.0,
            ),
            exec(
                stock(76_792_991, "TSLA"),
                "e2.01.01",
                "20261124 11:00:00 US/Eastern",
                "BOT",
                "5",
                300.0,
            ),
            exec(
                stock(76_792_991, "TSLA"),
                "e3.01.01",
                "20261125 11:00:00 US/Eastern",
                "SLD",
                "5",
                290.0,
            ),
        ],
        ..TwsState::default()
    }
}

fn moomoo() -> OpenDState {
    use common::opend_fake::build;
    use common::opend_pb as pb;
    let fill = |id: u64, order: &str, code: &str, side: i32, qty: f64, price: f64, at: &str| {
        let mut f = build::fill(id, order, code, build::MY, side, qty, price, at);
        f.fill_id_ex = format!("M{id}");
        f.order_id = Some(id);
        f
    };
    let mut s = OpenDState {
        accounts: vec![build::my_account()],
        ..OpenDState::default()
    };
    s.funds.insert(
        (281_234, pb::CURRENCY_MYR),
        build::funds(
            pb::CURRENCY_MYR,
            20_000.0,
            6180.0,
            &[(pb::CURRENCY_MYR, 20_000.0)],
        ),
    );
    let mut held = build::position("1155", build::MY, 600.0, 10.30);
    held.name = "MAYBANK".into();
    s.positions.insert(281_234, vec![held]);
    s.fills.insert(
        281_234,
        vec![
            fill(1, "O1", "1155", 1, 1000.0, 9.50, "2026-03-02 10:00:00"),
            fill(2, "O2", "1155", 2, 400.0, 10.20, "2026-11-20 15:00:00"),
            fill(3, "O3", "5347", 1, 500.0, 13.00, "2026-06-01 09:30:00"),
            fill(5, "O5", "5347", 2, 500.0, 11.00, "2026-09-15 11:00:00"),
        ],
    );
    for (order, fee) in [("O1", 12.35), ("O2", 8.10), ("O3", 10.0), ("O5", 10.0)] {
        s.fees.insert(order.into(), fee);
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_biggest_loss_this_year_and_the_ringgit_share_answer_in_usd_across_brokers() {
    let tws = FakeTws::start(ibkr()).await.unwrap();
    let opend = OpenDFake::start(moomoo()).await;
    let dir = tempfile::tempdir().unwrap();
    let book = dir.path().join("vault.json");
    std::fs::write(&book, BOOK).unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(
        &config,
        format!(
            r#"base_currency = "USD"

[[accounts]]
id = "VAULT"
broker = "book"
path = "{book}"

[[accounts]]
id = "IBKR"
broker = "ibkr"
port = {tws}
account = "U5550001"

[[accounts]]
id = "MOOMOO-MY"
broker = "moomoo"
port = {opend}
market = "MY"
"#,
            book = book.display(),
            tws = tws.port(),
            opend = opend.port,
        ),
    )
    .unwrap();
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cross-broker", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "get_realized_pnl",
            "arguments": {"start": "2026-01-01", "end": "2026-12-31", "group_by": "broker"}}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "get_exposure", "arguments": {"by": "currency"}}}),
    ];
    let replies = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .arg("--config")
            .arg(&config)
            .arg("--state-dir")
            .arg(dir.path().join("state"))
            .arg("serve")
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

    let pnl = &replies[1]["result"]["structuredContent"];
    assert_eq!(pnl["currency"], "USD", "{pnl:#}");
    let loss = &pnl["biggest_loss"];
    assert_eq!(loss["account"], "MOOMOO-MY", "{pnl:#}");
    assert_eq!(loss["exchange"], "BURSA", "{pnl:#}");
    assert_eq!(loss["symbol"], "5347", "{pnl:#}");
    assert_eq!(loss["close_date"], "2026-09-15", "{pnl:#}");
    assert_eq!(loss["net_pnl"], -226.67, "{pnl:#}");
    let groups = pnl["groups"].as_array().unwrap();
    let net = |broker: &str| {
        groups
            .iter()
            .find(|g| g["key"] == broker)
            .map(|g| g["net_pnl"].as_f64().unwrap())
    };
    // IBKR: TSLA -52.00 (AAPL is still open).
    assert_eq!(net("ibkr"), Some(-52.0), "{pnl:#}");

    let exposure = &replies[2]["result"]["structuredContent"];
    assert_eq!(exposure["currency"], "USD", "{exposure:#}");
    assert_eq!(exposure["gross_total"], 11473.33, "{exposure:#}");
    let myr = exposure["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["key"] == "MYR")
        .unwrap_or_else(|| panic!("{exposure:#}"));
    assert_eq!(myr["value"], 1373.33, "{exposure:#}");
    assert_eq!(myr["pct"], 11.97, "{exposure:#}");
}
