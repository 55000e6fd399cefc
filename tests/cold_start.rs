//! `serve` answers `initialize` and `tools/list` without waiting for a book file, however
//! large: the file is read in the background, the first call that needs it waits for
//! it, and a broken file is said on stderr and in every answer that needs it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::needless_pass_by_value
)]

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

/// Only proves that nothing hangs: the answers come long before it on any machine.
const GENEROUS: Duration = Duration::from_secs(120);

/// A book of `n` fills: two accounts, four instruments, buys and sells that keep each
/// position small, one deposit per account.
fn write_book(path: &Path, n: usize) {
    let instruments = [
        ("NASDAQ", "AAA", "USD", "US"),
        ("NASDAQ", "BBB", "USD", "US"),
        ("NYSE", "CCC", "USD", "US"),
        ("BURSA", "1155", "MYR", "MY"),
    ];
    let mut s = String::with_capacity(n * 200);
    s.push_str(r#"{"format":"tradedesk-book/1","base_currency":"USD","as_of":"2026-06-30","#);
    s.push_str(r#""accounts":[{"id":"US","broker":"ibkr","currency":"USD"},{"id":"MY","broker":"moomoo","currency":"MYR"}],"instruments":["#);
    for (i, (exchange, symbol, currency, _)) in instruments.iter().enumerate() {
        let comma = if i > 0 { "," } else { "" };
        write!(
            s,
            r#"{comma}{{"exchange":"{exchange}","symbol":"{symbol}","currency":"{currency}","asset_class":"equity"}}"#
        )
        .unwrap();
    }
    s.push_str(r#"],"fills":["#);
    for k in 0..n {
        let (exchange, symbol, _, account) = instruments[k % instruments.len()];
        // Buy two, sell one, ...: every position grows by one unit per three fills (all
        // at one instant, in file order).
        let side = if (k / instruments.len()) % 3 == 2 {
            "sell"
        } else {
            "buy"
        };
        let comma = if k > 0 { "," } else { "" };
        write!(
            s,
            r#"{comma}{{"id":"F{k}","account":"{account}","exchange":"{exchange}","symbol":"{symbol}","side":"{side}","quantity":"1","price":"{}.25","commission":"0.50","time":"2025-01-01T00:00:00Z"}}"#,
            100 + k % 7
        )
        .unwrap();
    }
    s.push_str(r#"],"cash":[{"account":"US","kind":"deposit","amount":"1000000","currency":"USD","time":"2025-01-01T00:00:00Z"},{"account":"MY","kind":"deposit","amount":"1000000","currency":"MYR","time":"2025-01-01T00:00:00Z"}],"#);
    s.push_str(r#""marks":[{"exchange":"NASDAQ","symbol":"AAA","price":"110","date":"2026-06-30"},{"exchange":"NASDAQ","symbol":"BBB","price":"110","date":"2026-06-30"},{"exchange":"NYSE","symbol":"CCC","price":"110","date":"2026-06-30"},{"exchange":"BURSA","symbol":"1155","price":"110","date":"2026-06-30"}],"#);
    s.push_str(r#""fx_rates":[{"base":"USD","quote":"MYR","rate":"4.5","date":"2025-01-01"}]}"#);
    std::fs::write(path, s).unwrap();
}

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    next_id: i64,
}

impl Server {
    fn start(book: &Path, state: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .args(["--book", book.to_str().unwrap()])
            .args([
                "serve",
                "--no-telemetry",
                "--state-dir",
                state.to_str().unwrap(),
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        let (tx, stderr) = channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                if tx.send(line.unwrap()).is_err() {
                    return;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            stderr,
            next_id: 1,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(GENEROUS)
                .unwrap_or_else(|_| panic!("no answer to {method}"));
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
            if v["id"] == id {
                return v;
            }
        }
    }

    fn initialize(&mut self) -> (Value, Value) {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        let tools = self.request("tools/list", json!({}));
        (init, tools)
    }

    fn call(&mut self, tool: &str, arguments: Value) -> Value {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer["result"]["structuredContent"].clone()
    }

    /// Closes stdin and waits for a clean exit; returns what the server said on stderr.
    fn stop(mut self) -> String {
        drop(self.stdin.take());
        let (tx, done) = channel();
        let mut child = self.child;
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        let status = done
            .recv_timeout(GENEROUS)
            .expect("the server did not exit after stdin closed")
            .unwrap();
        assert!(status.success(), "server exited with {status}");
        let mut err = String::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            err.push_str(&line);
            err.push('\n');
        }
        err
    }
}

fn call_once(book: &Path, tool: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(["--book", book.to_str().unwrap(), "call", tool, "{}"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_large_book_is_read_behind_the_transport_and_then_served() {
    let dir = tempfile::tempdir().unwrap();
    let book = dir.path().join("big.json");
    write_book(&book, 200_000);
    let mut server = Server::start(&book, &dir.path().join("state"));

    let (init, tools) = server.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "tradedesk",
        "{init:#}"
    );
    // The base currency is read from the head of the file, not from the whole book.
    let instructions = init["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("USD (the base currency)"),
        "{instructions}"
    );
    assert!(
        tools["result"]["tools"].as_array().unwrap().len() > 10,
        "{tools:#}"
    );

    // The first call waits for the book and answers from all of it, as a command that
    // reads the book first does.
    let served = server.call("get_portfolio_summary", json!({}));
    assert_eq!(served["status"], "ok", "{served:#}");
    let alone = call_once(&book, "get_portfolio_summary");
    assert_eq!(served["total_value"], alone["total_value"], "{served:#}");
    assert_eq!(served["positions_value"], alone["positions_value"]);
    let accounts = server.call("get_accounts", json!({}));
    assert_eq!(
        accounts["accounts"].as_array().unwrap().len(),
        2,
        "{accounts:#}"
    );
    let stderr = server.stop();
    assert!(!stderr.contains("error"), "{stderr}");
}

#[test]
fn a_broken_book_read_behind_the_transport_is_said_at_start_and_in_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let book = dir.path().join("broken.json");
    write_book(&book, 2_000);
    let mut text = std::fs::read_to_string(&book).unwrap();
    let at = text.find(r#""id":"F1234""#).unwrap();
    let quantity = at + text[at..].find(r#""quantity":"1""#).unwrap();
    text.replace_range(quantity..quantity + 14, r#""quantity":"0""#);
    std::fs::write(&book, text).unwrap();
    let mut server = Server::start(&book, &dir.path().join("state"));

    let (init, tools) = server.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "tradedesk",
        "{init:#}"
    );
    assert!(
        tools["result"]["tools"].as_array().unwrap().len() > 10,
        "{tools:#}"
    );
    for tool in ["get_portfolio_summary", "get_accounts", "get_positions"] {
        let answer = server.call(tool, json!({}));
        assert_eq!(answer["status"], "error", "{tool}: {answer:#}");
        assert_eq!(
            answer["error"]["code"], "invalid_book",
            "{tool}: {answer:#}"
        );
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("fills[1234].quantity: must be > 0"),
            "{message}"
        );
        assert!(message.contains("broken.json"), "{message}");
    }
    let stderr = server.stop();
    assert!(
        stderr.contains("fills[1234].quantity: must be > 0"),
        "{stderr}"
    );
}

#[test]
fn initialize_and_tools_list_answer_while_the_book_is_still_unread() {
    // A named pipe as the book: nothing can be read from it until the test writes, so
    // a server that read its book before serving could not answer `initialize`.
    let dir = tempfile::tempdir().unwrap();
    let pipe = dir.path().join("book.pipe");
    let made = Command::new("mkfifo").arg(&pipe).status().unwrap();
    assert!(made.success());
    let copy = dir.path().join("copy.json");
    write_book(&copy, 20_000);
    let mut server = Server::start(&pipe, &dir.path().join("state"));

    let (init, tools) = server.initialize();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "tradedesk",
        "{init:#}"
    );
    assert!(
        tools["result"]["tools"].as_array().unwrap().len() > 10,
        "{tools:#}"
    );

    // Now the book arrives, and the first call answers from it.
    let text = std::fs::read(&copy).unwrap();
    let writer = std::thread::spawn(move || std::fs::write(&pipe, text).unwrap());
    let served = server.call("get_portfolio_summary", json!({}));
    writer.join().unwrap();
    assert_eq!(served["status"], "ok", "{served:#}");
    let alone = call_once(&copy, "get_portfolio_summary");
    assert_eq!(served["total_value"], alone["total_value"], "{served:#}");
    server.stop();
}
