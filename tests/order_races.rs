//! Orders racing each other on one state directory: parallel `tradedesk call` processes
//! started together on a directory nobody has opened yet, and parallel requests inside
//! one multi-threaded HTTP server. Every limit that depends on other orders (the
//! position weight, the daily cap, the daily count) holds exactly, every process opens
//! the store, and one client order id makes one order whichever process sends it first.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_store::Store;

/// One paper account with 100,000 USD; an order of 36 AAPL (about 9,930 USD) is about
/// 9.9% of it, so two fit under the 25% weight limit and a third does not.
const CONFIG: &str = r#"
base_currency = "USD"
[[accounts]]
id = "SIM"
broker = "sim"
clock = "2026-11-30T15:00:00Z"
[trading]
enabled = true
max_order_notional = 50000
max_daily_notional = 1000000
max_position_weight_pct = 25
max_orders_per_day = 500
"#;

struct Desk {
    _dir: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
}

fn desk(config: &str) -> Desk {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tradedesk.toml");
    std::fs::write(&path, config).unwrap();
    // Not created: the racing processes open it fresh, all at once.
    let state = dir.path().join("state");
    Desk {
        config: path,
        state,
        _dir: dir,
    }
}

fn buy(id: &str, quantity: u32) -> Value {
    json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": quantity, "client_order_id": id})
}

/// Starts one `tradedesk call place_order` per order, all before any is waited for.
fn race(d: &Desk, orders: &[Value]) -> Vec<Value> {
    let children: Vec<Child> = orders
        .iter()
        .map(|o| {
            Command::new(env!("CARGO_BIN_EXE_tradedesk"))
                .args(["--config", d.config.to_str().unwrap()])
                .args(["--state-dir", d.state.to_str().unwrap()])
                .args(["call", "place_order", &o.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).to_string();
            serde_json::from_str(&text).unwrap_or_else(|_| {
                panic!(
                    "not a tool answer (exit {:?}): {text}{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                )
            })
        })
        .collect()
}

fn query(state: &Path, sql: &str) -> String {
    let store = Store::open(state).unwrap();
    store
        .read(|c| {
            c.query_row(sql, [], |r| r.get::<_, Option<String>>(0))
                .map_err(tradedesk_store::sql)
        })
        .unwrap()
        .unwrap_or_default()
}

/// What the paper account bought, in shares and dollars.
fn bought(state: &Path) -> (Decimal, Decimal) {
    let shares: Decimal = query(
        state,
        "SELECT CAST(COALESCE(SUM(CAST(quantity AS REAL)), 0) AS TEXT) FROM sim_fills",
    )
    .parse()
    .unwrap();
    let value: Decimal = query(
        state,
        "SELECT CAST(COALESCE(SUM(CAST(quantity AS REAL) * CAST(price AS REAL)), 0) AS TEXT) FROM sim_fills",
    )
    .parse()
    .unwrap();
    (shares, value)
}

/// Every answer is a fill or the weight limit's refusal; never a store failure.
fn check_answers(answers: &[Value]) -> usize {
    let mut filled = 0;
    for a in answers {
        match a["status"].as_str() {
            Some("ok") => {
                assert_eq!(a["outcome"], "filled", "{a:#}");
                filled += 1;
            }
            Some("error") => {
                assert_eq!(a["error"]["rule"], "max_position_weight", "{a:#}");
                assert_eq!(a["error"]["code"], "limit_exceeded", "{a:#}");
            }
            _ => panic!("not a tool answer: {a:#}"),
        }
    }
    filled
}

fn assert_under_the_limit(state: &Path, filled: usize) {
    let (shares, value) = bought(state);
    assert_eq!(
        shares,
        Decimal::from(36 * filled),
        "fills and answers agree"
    );
    // Held against about 100,000 of portfolio: 25% at most, whatever raced.
    assert!(
        value <= Decimal::from(25_000),
        "{value} USD of AAPL bought: over the 25% weight limit"
    );
    assert!(filled >= 1, "one order alone is under the limit");
}

#[test]
fn parallel_processes_on_a_fresh_state_directory_hold_the_weight_limit() {
    for round in 0..3 {
        let d = desk(CONFIG);
        let orders: Vec<Value> = (0..8).map(|i| buy(&format!("w{round}-{i}"), 36)).collect();
        let answers = race(&d, &orders);
        let filled = check_answers(&answers);
        assert_under_the_limit(&d.state, filled);
        // The refused ones counted nothing against the day; the audit chain is whole.
        let out = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .args(["--config", d.config.to_str().unwrap()])
            .args(["--state-dir", d.state.to_str().unwrap()])
            .args(["audit", "verify"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn parallel_processes_with_one_client_order_id_make_one_order_and_replay_it() {
    let d = desk(CONFIG);
    let orders: Vec<Value> = (0..8).map(|_| buy("same-1", 2)).collect();
    let answers = race(&d, &orders);
    let mut originals = 0;
    for a in &answers {
        assert_eq!(a["status"], "ok", "{a:#}");
        assert_eq!(a["order_id"], answers[0]["order_id"], "{a:#}");
        assert_eq!(a["outcome"], "filled", "{a:#}");
        if a["replayed"] == false {
            originals += 1;
        }
    }
    assert_eq!(originals, 1, "{answers:#?}");
    assert_eq!(
        query(&d.state, "SELECT CAST(COUNT(*) AS TEXT) FROM sim_orders"),
        "1"
    );
}

#[test]
fn many_processes_open_one_fresh_state_directory_at_once() {
    for _ in 0..3 {
        let d = desk(CONFIG);
        let children: Vec<Child> = (0..48)
            .map(|_| {
                Command::new(env!("CARGO_BIN_EXE_tradedesk"))
                    .args(["--config", d.config.to_str().unwrap()])
                    .args(["--state-dir", d.state.to_str().unwrap()])
                    .args(["call", "get_orders", "{}"])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for c in children {
            let out = c.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// The server over HTTP on an ephemeral port, with its state in `d.state`.
struct Server {
    child: Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve_http(d: &Desk) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(["--config", d.config.to_str().unwrap()])
        .args(["serve", "--http", "127.0.0.1:0"])
        .args(["--state-dir", d.state.to_str().unwrap()])
        .env_remove("TRADEDESK_HTTP_TOKEN")
        .env("TRADEDESK_RATE_LIMIT", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("http://") {
        line.clear();
    }
    let addr = line
        .trim()
        .split("http://")
        .nth(1)
        .unwrap_or_else(|| panic!("no address in: {line}"))
        .trim_end_matches("/mcp")
        .to_owned();
    // Keep reading stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Server { child, addr }
}

/// One stateless (2026-07-28) `tools/call` over its own connection.
fn http_call(addr: &str, tool: &str, arguments: &Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": tool, "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
    .to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: {tool}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (_, payload) = raw.split_once("\r\n\r\n").unwrap();
    let reply: Value =
        serde_json::from_str(payload).unwrap_or_else(|e| panic!("not JSON ({e}): {raw}"));
    reply["result"]["structuredContent"].clone()
}

#[test]
fn parallel_requests_inside_one_http_server_hold_the_weight_limit() {
    for round in 0..5 {
        let d = desk(CONFIG);
        let server = serve_http(&d);
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let addr = server.addr.clone();
                std::thread::spawn(move || {
                    http_call(&addr, "place_order", &buy(&format!("h{round}-{i}"), 36))
                })
            })
            .collect();
        let answers: Vec<Value> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let filled = check_answers(&answers);
        assert_under_the_limit(&d.state, filled);
        drop(server);
    }
}
