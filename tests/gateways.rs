//! A server that outlives its gateways: the binary served over stdio with one account
//! whose gateway is down (or silent) and one that answers, then the gateway brought up
//! where the config points, and served without a restart. And positions a broker reports
//! otherwise than the fills, noted where they are shown.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use common::alpaca_fake::AlpacaFake;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const KEY: &str = "PKTESTKEY";
const SECRET: &str = "test-secret";

/// A bound that only proves a wait cannot hang; never a measure of speed.
const GENEROUS: Duration = Duration::from_secs(60);

fn small_book() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small-book.json")
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// The small book's US account, and an Alpaca account whose gateway is `port`.
fn write_config(dir: &Path, port: u16, timeout_ms: u64) -> PathBuf {
    let path = dir.join("tradedesk.toml");
    let text = format!(
        r#"base_currency = "USD"
broker_timeout_ms = {timeout_ms}

[[accounts]]
id = "US-1"
broker = "book"
path = {book:?}

[[accounts]]
id = "ALPACA"
broker = "alpaca"
base_url = "http://127.0.0.1:{port}"
data_url = "http://127.0.0.1:{port}"
timeout_ms = {timeout_ms}
"#,
        book = small_book().display().to_string(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `tradedesk --config CONFIG serve` over stdio, as a client spawns it.
struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: i64,
}

impl Server {
    fn start(config: &Path, state: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .args([
                "--config",
                config.to_str().unwrap(),
                "--state-dir",
                state.to_str().unwrap(),
                "serve",
                "--no-telemetry",
            ])
            .env("APCA_API_KEY_ID", KEY)
            .env("APCA_API_SECRET_KEY", SECRET)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    async fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends a request and waits (boundedly) for the answer with its id.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        let wait = async {
            loop {
                let line = self.lines.next_line().await.unwrap().unwrap_or_else(|| {
                    panic!("the server closed stdout before answering {method}")
                });
                let message: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
                if message["id"] == id {
                    return message;
                }
            }
        };
        tokio::time::timeout(GENEROUS, wait)
            .await
            .unwrap_or_else(|_| panic!("no answer to {method}"))
    }

    async fn initialize(&mut self) -> Value {
        let init = self
            .request(
                "initialize",
                json!({"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "gateways-test", "version": "1"}}),
            )
            .await;
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        init
    }

    /// A tool's structured result.
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self
            .request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await;
        answer["result"]["structuredContent"].clone()
    }

    /// Ends the session by closing stdin; the server must exit cleanly.
    async fn stop(mut self) {
        drop(self.stdin.take());
        let status = tokio::time::timeout(GENEROUS, self.child.wait())
            .await
            .expect("the server did not exit after stdin closed")
            .unwrap();
        assert!(status.success(), "server exited with {status}");
    }
}

fn account_ids(result: &Value) -> Vec<String> {
    result["accounts"]
        .as_array()
        .unwrap_or_else(|| panic!("no accounts: {result:#}"))
        .iter()
        .map(|a| a["account"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_down_gateway_is_left_out_named_and_served_again_once_it_comes_up() {
    let dir = tempfile::tempdir().unwrap();
    let port = closed_port();
    let config = write_config(dir.path(), port, 2_000);
    let mut server = Server::start(&config, &dir.path().join("state"));

    // The server answers before any gateway does.
    let init = server.initialize().await;
    assert_eq!(
        init["result"]["serverInfo"]["name"], "tradedesk",
        "{init:#}"
    );
    // The configured base currency is known without a broker.
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("USD (the base currency)"),
        "{instructions}"
    );
    let tools = server.request("tools/list", json!({})).await;
    assert!(
        tools["result"]["tools"].as_array().unwrap().len() > 10,
        "{tools:#}"
    );

    // The answering account is served; the down one is named, with its error.
    let summary = server.call("get_portfolio_summary", json!({})).await;
    assert_eq!(summary["status"], "ok", "{summary:#}");
    assert_eq!(account_ids(&summary), ["US-1"]);
    let down = summary["unavailable_accounts"].as_array().unwrap();
    assert_eq!(down.len(), 1, "{summary:#}");
    assert_eq!(down[0]["account"], "ALPACA");
    assert_eq!(down[0]["broker"], "alpaca");
    assert_eq!(down[0]["code"], "broker_unavailable");
    assert!(
        down[0]["hint"]
            .as_str()
            .unwrap()
            .contains(&port.to_string()),
        "{down:?}"
    );
    let first_note = summary["notes"][0].as_str().unwrap();
    assert!(
        first_note.starts_with("partial answer: ALPACA (alpaca, broker_unavailable)"),
        "{first_note}"
    );
    // The total is the answering account's alone, as the book file alone gives it.
    let alone = {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .args(["--book", small_book().to_str().unwrap()])
            .args(["call", "get_accounts", "{}"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["accounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["account"] == "US-1")
            .unwrap()["total_value_converted"]
            .clone()
    };
    assert_eq!(summary["total_value"], alone, "{summary:#}");

    // A call that names only the down account gets its error and hint.
    let only = server
        .call("get_positions", json!({"account": "ALPACA"}))
        .await;
    assert_eq!(only["status"], "error", "{only:#}");
    assert_eq!(only["error"]["code"], "broker_unavailable");
    assert!(
        only["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("get_server_health")
    );
    let by_broker = server
        .call(
            "get_realized_pnl",
            json!({"start": "2020-01-01", "end": "2030-12-31", "broker": "alpaca"}),
        )
        .await;
    assert_eq!(
        by_broker["error"]["code"], "broker_unavailable",
        "{by_broker:#}"
    );
    // Naming the answering account is a complete answer.
    let us = server
        .call("get_positions", json!({"account": "US-1"}))
        .await;
    assert_eq!(us["status"], "ok", "{us:#}");
    assert!(us.get("unavailable_accounts").is_none(), "{us:#}");

    let accounts = server.call("get_accounts", json!({})).await;
    assert_eq!(accounts["unavailable_accounts"][0]["account"], "ALPACA");
    let health = server.call("get_server_health", json!({})).await;
    assert_eq!(health["health"], "degraded", "{health:#}");
    let alpaca = health["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["account"] == "ALPACA")
        .unwrap();
    assert_eq!(alpaca["status"], "down", "{health:#}");
    assert_eq!(health["unavailable_accounts"][0]["account"], "ALPACA");

    // The gateway comes up where the config points: served without a restart.
    let fake = AlpacaFake::start_on(KEY, SECRET, port).await;
    let served = tokio::time::timeout(GENEROUS, async {
        loop {
            let summary = server.call("get_portfolio_summary", json!({})).await;
            if account_ids(&summary).contains(&"ALPACA".to_owned()) {
                return summary;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await
    .expect("the account was not served again after its gateway came up");
    let mut ids = account_ids(&served);
    ids.sort();
    assert_eq!(ids, ["ALPACA", "US-1"]);
    assert!(served.get("unavailable_accounts").is_none(), "{served:#}");
    assert!(
        !served["notes"].to_string().contains("partial answer"),
        "{served:#}"
    );
    let positions = server
        .call("get_positions", json!({"account": "ALPACA"}))
        .await;
    assert_eq!(positions["status"], "ok", "{positions:#}");
    assert!(
        positions["positions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["symbol"] == "AAPL"),
        "{positions:#}"
    );
    assert!(
        fake.requests()
            .iter()
            .any(|r| r.starts_with("GET /v2/account"))
    );
    server.stop().await;
}

/// Accepts connections and never answers: a gateway that is up but silent.
async fn silent_gateway() -> (u16, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (port, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_gateway_holds_neither_the_start_nor_the_other_accounts() {
    let dir = tempfile::tempdir().unwrap();
    let (port, gateway) = silent_gateway().await;
    let config = write_config(dir.path(), port, 500);
    let mut server = Server::start(&config, &dir.path().join("state"));
    let init = server.initialize().await;
    assert_eq!(init["result"]["serverInfo"]["name"], "tradedesk");
    for _ in 0..3 {
        let summary = server.call("get_portfolio_summary", json!({})).await;
        assert_eq!(summary["status"], "ok", "{summary:#}");
        assert_eq!(account_ids(&summary), ["US-1"]);
        assert_eq!(
            summary["unavailable_accounts"][0]["code"], "broker_timeout",
            "{summary:#}"
        );
    }
    let only = server
        .call(
            "get_trade_history",
            json!({"start": "2020-01-01", "end": "2030-12-31", "account": "ALPACA"}),
        )
        .await;
    assert_eq!(only["error"]["code"], "broker_timeout", "{only:#}");
    server.stop().await;
    gateway.abort();
}

#[test]
fn doctor_still_fails_while_an_account_is_down() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), closed_port(), 2_000);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(["--config", config.to_str().unwrap()])
        .args(["--state-dir", dir.path().join("state").to_str().unwrap()])
        .arg("doctor")
        .env("APCA_API_KEY_ID", KEY)
        .env("APCA_API_SECRET_KEY", SECRET)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("ALPACA (alpaca, paper): FAILED"), "{text}");
    assert!(text.contains("US-1 (ibkr, book): ok"), "{text}");
    // A one-off call answers over the accounts that answer, and says on stderr that
    // the answer is partial.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(["--config", config.to_str().unwrap()])
        .args(["--state-dir", dir.path().join("state").to_str().unwrap()])
        .args(["call", "get_accounts", "{}"])
        .env("APCA_API_KEY_ID", KEY)
        .env("APCA_API_SECRET_KEY", SECRET)
        .output()
        .unwrap();
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "ok", "{result:#}");
    assert_eq!(result["unavailable_accounts"][0]["account"], "ALPACA");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("partial answer"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The small book with its broker reporting `quantity` of BURSA:1155 in MY-1, where the
/// fills leave 600.
fn reporting_book(dir: &Path, quantity: &str) -> PathBuf {
    let mut book: Value =
        serde_json::from_str(&std::fs::read_to_string(small_book()).unwrap()).unwrap();
    book["reported_positions"] =
        json!([{"account": "MY-1", "exchange": "BURSA", "symbol": "1155", "quantity": quantity}]);
    let path = dir.join(format!("reporting-{quantity}.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&book).unwrap()).unwrap();
    path
}

fn call_book(book: &Path, tool: &str, args: &str) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(["--book", book.to_str().unwrap(), "call", tool, args])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{tool}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_position_the_broker_reports_otherwise_carries_both_quantities_where_it_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let book = reporting_book(dir.path(), "650");
    let health = call_book(&book, "get_server_health", "{}");
    let row = &health["reconciliation"][0];
    assert_eq!(row["symbol"], "1155", "{health:#}");
    assert_eq!(row["reported_quantity"], 650.0);
    assert_eq!(row["implied_quantity"], 600.0);
    let expected = "BURSA:1155 in MY-1: the broker reports 650, the fills give 600";
    for (tool, args) in [
        ("get_positions", "{}"),
        ("get_positions", r#"{"symbol": "1155"}"#),
        ("get_positions", r#"{"account": "MY-1"}"#),
        ("get_accounts", "{}"),
        ("get_portfolio_summary", "{}"),
    ] {
        let result = call_book(&book, tool, args);
        let notes = result["notes"].to_string();
        assert!(notes.contains(expected), "{tool} {args}: {notes}");
        assert!(
            notes.contains("get_server_health"),
            "{tool} {args}: {notes}"
        );
    }
    // Positions that do not include it say nothing of it.
    for args in [r#"{"account": "US-1"}"#, r#"{"symbol": "AAPL"}"#] {
        let result = call_book(&book, "get_positions", args);
        assert!(
            !result["notes"]
                .to_string()
                .contains("position differs from the fills"),
            "{args}: {result:#}"
        );
    }
    // A broker that agrees with the fills: no note at all.
    let agreeing = reporting_book(dir.path(), "600");
    for tool in ["get_positions", "get_accounts", "get_portfolio_summary"] {
        let result = call_book(&agreeing, tool, "{}");
        assert!(
            !result["notes"]
                .to_string()
                .contains("position differs from the fills"),
            "{tool}: {result:#}"
        );
    }
}

/// A source the test switches between answering, refusing and never answering.
#[derive(Debug)]
struct Switch {
    inner: tradedesk_brokers::BookBroker,
    /// 0 answers, 1 refuses the connection, 2 never answers.
    mode: std::sync::atomic::AtomicU8,
    /// Moves with every switch, so an answering source is read again.
    generation: std::sync::atomic::AtomicU64,
}

const ANSWERS: u8 = 0;
const REFUSES: u8 = 1;
const SILENT: u8 = 2;

impl Switch {
    fn new(mode: u8) -> Self {
        let book = tradedesk_brokers::load_book(&small_book()).unwrap();
        Self {
            inner: tradedesk_brokers::BookBroker::new("switch", book),
            mode: mode.into(),
            generation: 0.into(),
        }
    }

    fn set(&self, mode: u8) {
        use std::sync::atomic::Ordering;
        self.mode.store(mode, Ordering::SeqCst);
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[async_trait::async_trait]
impl tradedesk_brokers::Broker for Switch {
    fn accounts(&self) -> Vec<tradedesk_core::Account> {
        self.inner.accounts()
    }

    async fn snapshot(
        &self,
    ) -> Result<std::sync::Arc<tradedesk_core::Book>, tradedesk_brokers::BrokerError> {
        match self.mode.load(std::sync::atomic::Ordering::SeqCst) {
            ANSWERS => self.inner.snapshot().await,
            REFUSES => Err(tradedesk_brokers::BrokerError::Unavailable {
                account: "MY-1".into(),
                detail: "connection refused".into(),
                hint: "start the gateway".into(),
            }),
            _ => std::future::pending().await,
        }
    }

    async fn health(&self) -> Vec<tradedesk_brokers::AccountHealth> {
        self.inner.health().await
    }

    fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The small book's US account from its file, and its Bursa account through `switch`.
fn two_sources(switch: std::sync::Arc<Switch>) -> tradedesk_tools::ToolContext {
    let book = tradedesk_brokers::load_book(&small_book()).unwrap();
    let mut ctx = tradedesk_tools::ToolContext::new("test")
        .with_broker(switch, Some(vec!["MY-1".into()]))
        .with_broker(
            std::sync::Arc::new(tradedesk_brokers::BookBroker::new("file", book)),
            Some(vec!["US-1".into()]),
        );
    ctx.broker_timeout = Duration::from_millis(300);
    ctx
}

async fn tool(ctx: &tradedesk_tools::ToolContext, name: &str, args: Value) -> Value {
    tradedesk_tools::call(ctx, name, args)
        .await
        .unwrap()
        .structured
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_that_goes_down_later_is_left_out_then_served_again() {
    let switch = std::sync::Arc::new(Switch::new(ANSWERS));
    let ctx = two_sources(std::sync::Arc::clone(&switch));
    let both = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(account_ids(&both), ["MY-1", "US-1"], "{both:#}");
    assert!(both.get("unavailable_accounts").is_none());

    switch.set(REFUSES);
    let one = tool(&ctx, "get_accounts", json!({})).await;
    assert_eq!(account_ids(&one), ["US-1"], "{one:#}");
    assert_eq!(one["unavailable_accounts"][0]["account"], "MY-1");
    assert_eq!(one["unavailable_accounts"][0]["code"], "broker_unavailable");
    // Every tool that sums across accounts says so.
    for (name, args) in [
        ("get_positions", json!({})),
        ("get_exposure", json!({"by": "currency"})),
        (
            "get_realized_pnl",
            json!({"start": "2020-01-01", "end": "2030-12-31"}),
        ),
        (
            "get_trade_history",
            json!({"start": "2020-01-01", "end": "2030-12-31"}),
        ),
        (
            "analyze_trades",
            json!({"start": "2020-01-01", "end": "2030-12-31"}),
        ),
    ] {
        let out = tool(&ctx, name, args).await;
        assert_eq!(out["status"], "ok", "{name}: {out:#}");
        assert_eq!(
            out["unavailable_accounts"][0]["account"], "MY-1",
            "{name}: {out:#}"
        );
        assert!(
            out["notes"][0]
                .as_str()
                .unwrap()
                .starts_with("partial answer: MY-1"),
            "{name}: {out:#}"
        );
    }
    let named = tool(
        &ctx,
        "get_positions",
        json!({"symbol": "1155", "account": "MY-1"}),
    )
    .await;
    assert_eq!(named["error"]["code"], "broker_unavailable", "{named:#}");
    let moomoo = tool(&ctx, "get_positions", json!({"broker": "moomoo"})).await;
    assert_eq!(moomoo["error"]["code"], "broker_unavailable", "{moomoo:#}");

    // Back: the background retry finds it, no restart.
    switch.set(ANSWERS);
    tokio::time::timeout(GENEROUS, async {
        loop {
            let out = tool(&ctx, "get_accounts", json!({})).await;
            if out.get("unavailable_accounts").is_none() {
                assert_eq!(account_ids(&out), ["MY-1", "US-1"], "{out:#}");
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("never served again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_source_is_left_out_with_broker_timeout_and_never_holds_the_others() {
    let switch = std::sync::Arc::new(Switch::new(SILENT));
    let ctx = two_sources(switch);
    for _ in 0..3 {
        let out = tool(&ctx, "get_portfolio_summary", json!({})).await;
        assert_eq!(account_ids(&out), ["US-1"], "{out:#}");
        assert_eq!(out["unavailable_accounts"][0]["code"], "broker_timeout");
    }
    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(
        health["unavailable_accounts"][0]["account"], "MY-1",
        "{health:#}"
    );
    // Its probe answers while its data does not: degraded, with the reason.
    let row = health["brokers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["account"] == "MY-1")
        .unwrap();
    assert_eq!(row["status"], "degraded", "{health:#}");
    assert!(
        row["detail"]
            .as_str()
            .unwrap()
            .contains("could not be read")
    );
    assert_eq!(health["health"], "degraded");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_account_answering_every_book_tool_answers_the_error() {
    let ctx = tradedesk_tools::ToolContext::new("test")
        .with_broker(std::sync::Arc::new(Switch::new(REFUSES)), None);
    for (name, args) in [
        ("get_accounts", json!({})),
        ("get_portfolio_summary", json!({})),
        (
            "get_performance",
            json!({"start": "2026-01-01", "end": "2026-03-31"}),
        ),
    ] {
        let out = tool(&ctx, name, args).await;
        assert_eq!(out["status"], "error", "{name}: {out:#}");
        assert_eq!(out["error"]["code"], "broker_unavailable", "{name}");
        assert!(
            out["error"]["hint"]
                .as_str()
                .unwrap()
                .contains("start the gateway")
        );
    }
    let health = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(health["status"], "ok", "{health:#}");
    assert_eq!(health["unavailable_accounts"].as_array().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_symbol_while_an_account_is_down_says_it_may_be_that_accounts() {
    let switch = std::sync::Arc::new(Switch::new(REFUSES));
    let ctx = two_sources(switch);
    let out = tool(&ctx, "get_positions", json!({"symbol": "NOPE"})).await;
    assert_eq!(out["error"]["code"], "unknown_symbol", "{out:#}");
    let hint = out["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("MY-1 did not answer, so what it holds is not known"),
        "{hint}"
    );
}

/// A paper account and an Alpaca account whose gateway is `port`, both timeouts
/// `timeout_ms`.
fn trading_config(dir: &Path, name: &str, alpaca_port: Option<u16>, timeout_ms: u64) -> PathBuf {
    let path = dir.join(name);
    let mut text = format!(
        r#"base_currency = "USD"
broker_timeout_ms = {timeout_ms}

[[accounts]]
id = "SIM"
broker = "sim"
clock = "2026-11-30T15:00:00Z"
"#
    );
    if let Some(port) = alpaca_port {
        text.push_str(&format!(
            r#"
[[accounts]]
id = "ALPACA"
broker = "alpaca"
base_url = "http://127.0.0.1:{port}"
data_url = "http://127.0.0.1:{port}"
timeout_ms = {timeout_ms}
"#
        ));
    }
    text.push_str(
        "\n[trading]\nenabled = true\nmax_order_notional = 5000\nmax_daily_notional = 50000\n",
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// One `tradedesk call`, answered within [`GENEROUS`] or it fails.
async fn call_cli(config: &Path, state: &Path, tool: &str, args: &Value) -> Value {
    let out = tokio::time::timeout(
        GENEROUS,
        Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .args(["--config", config.to_str().unwrap()])
            .args(["--state-dir", state.to_str().unwrap()])
            .args(["call", tool, &args.to_string()])
            .env("APCA_API_KEY_ID", KEY)
            .env("APCA_API_SECRET_KEY", SECRET)
            .output(),
    )
    .await
    .expect("a call hung")
    .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "not a tool answer: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn getting_out_on_one_broker_never_waits_for_another() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let alone = trading_config(dir.path(), "alone.toml", None, 2_000);
    let buy = json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": 10});
    let bought = call_cli(&alone, &state, "place_order", &buy).await;
    assert_eq!(bought["outcome"], "filled", "{bought:#}");

    // A silent gateway that would hold every read of it for two minutes: closing and
    // reducing on the paper account must not read it at all.
    let (port, gateway) = silent_gateway().await;
    let silent = trading_config(dir.path(), "silent.toml", Some(port), 120_000);
    let sell = json!({"account": "SIM", "symbol": "AAPL", "side": "sell", "quantity": 4});
    let reduced = call_cli(&silent, &state, "place_order", &sell).await;
    assert_eq!(reduced["outcome"], "filled", "{reduced:#}");
    // Behind the kill switch too.
    std::fs::write(state.join("KILL"), "").unwrap();
    let closed = call_cli(
        &silent,
        &state,
        "close_position",
        &json!({"account": "SIM", "symbol": "AAPL", "quantity": 3}),
    )
    .await;
    assert_eq!(closed["outcome"], "filled", "{closed:#}");
    std::fs::remove_file(state.join("KILL")).unwrap();
    gateway.abort();

    // A gateway that refuses: an order that adds risk cannot have its weight decided
    // without that account, and says so by name; the close still goes through.
    let down = trading_config(dir.path(), "down.toml", Some(closed_port()), 2_000);
    let refused = call_cli(&down, &state, "place_order", &buy).await;
    assert_eq!(
        refused["error"]["rule"], "max_position_weight",
        "{refused:#}"
    );
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.contains("ALPACA did not answer"), "{message}");
    let rest = call_cli(
        &down,
        &state,
        "close_position",
        &json!({"account": "SIM", "symbol": "AAPL"}),
    )
    .await;
    assert_eq!(
        (rest["outcome"].as_str(), rest["filled_quantity"].as_f64()),
        (Some("filled"), Some(3.0)),
        "{rest:#}"
    );
}
