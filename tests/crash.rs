//! A server killed with SIGKILL in the middle of an order leaves the sim's ledger, the
//! idempotency store and the audit chain consistent, and the order is resolved after a
//! restart by looking it up, never by sending it again. Real child processes; the
//! failpoint `TRADEDESK_FAILPOINT` holds the server at the step where it is killed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tradedesk_store::Store;
use tradedesk_store::audit::{Verdict, verify};

const CONFIG: &str = r#"
base_currency = "USD"
broker_timeout_ms = 100
[[accounts]]
id = "SIM"
broker = "sim"
clock = "2026-11-30T15:00:00Z"
[trading]
enabled = true
"#;

struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let state = dir.path().join("state");
    Setup {
        config,
        state,
        _dir: dir,
    }
}

fn base_args(s: &Setup) -> Vec<String> {
    vec![
        "--config".into(),
        s.config.display().to_string(),
        "--state-dir".into(),
        s.state.display().to_string(),
    ]
}

/// Starts `serve` over stdio and sends a whole order request, without reading the answer.
fn serve_and_order(s: &Setup, failpoint: &str, order: &Value) -> Child {
    serve_and_order_paused(s, failpoint, 30_000, order)
}

/// As [`serve_and_order`], with the failpoint holding the server `pause_ms`.
fn serve_and_order_paused(s: &Setup, failpoint: &str, pause_ms: u64, order: &Value) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(base_args(s))
        .arg("serve")
        .env("TRADEDESK_FAILPOINT", failpoint)
        .env("TRADEDESK_FAILPOINT_PAUSE_MS", pause_ms.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for message in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "crash-test", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "place_order", "arguments": order}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    // Keep stdin open: closing it would end the session before the failpoint.
    std::mem::forget(stdin);
    child
}

fn query(state: &Path, sql: &str) -> i64 {
    let store = Store::open(state).unwrap();
    store
        .read(|c| {
            c.query_row(sql, [], |r| r.get::<_, i64>(0))
                .map_err(tradedesk_store::sql)
        })
        .unwrap()
}

fn try_query(state: &Path, sql: &str) -> Option<i64> {
    Store::open(state)
        .ok()?
        .read(|c| {
            c.query_row(sql, [], |r| r.get::<_, i64>(0))
                .map_err(tradedesk_store::sql)
        })
        .ok()
}

fn wait_for(state: &Path, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        // The sim declares its tables when the server opens it: until then, not yet.
        if state.join(tradedesk_store::DB_FILE).exists() && try_query(state, sql) > Some(0) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting for: {sql}");
}

fn audit_intact(state: &Path) -> u64 {
    let store = Store::open(state).unwrap();
    match store.read(verify).unwrap() {
        Verdict::Intact { entries } => entries,
        Verdict::Broken { seq, reason } => panic!("audit broken at {seq}: {reason}"),
    }
}

fn cli(s: &Setup, args: &[&str]) -> (i32, Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(base_args(s))
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(&stdout).unwrap_or(Value::Null),
        stdout,
    )
}

fn order(id: &str) -> Value {
    json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": 2, "client_order_id": id})
}

#[test]
fn killed_after_reserving_the_order_never_reached_the_broker() {
    let s = setup();
    let mut child = serve_and_order(&s, "after_reserve", &order("crash-1"));
    wait_for(
        &s.state,
        "SELECT COUNT(*) FROM idempotency WHERE client_order_id = 'crash-1' AND state = 'reserved'",
    );
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    // Consistent as the kill left it: reserved and audited, nothing at the broker.
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_orders"), 0);
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_fills"), 0);
    assert_eq!(audit_intact(&s.state), 1);

    // The retry resolves it at once: its owner is gone (its lease is free) and it was
    // never marked as being sent, so it provably never reached the broker.
    let (code, v, text) = cli(&s, &["call", "place_order", &order("crash-1").to_string()]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(v["error"]["code"], "broker_rejected", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("never reached")
    );
    assert_eq!(v["error"]["client_order_id"], "crash-1");
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_orders"), 0);
    assert_eq!(
        query(
            &s.state,
            "SELECT COUNT(*) FROM idempotency WHERE state = 'rejected'"
        ),
        1
    );
    // A new id goes through.
    let (code, v, _) = cli(&s, &["call", "place_order", &order("crash-2").to_string()]);
    assert_eq!((code, v["outcome"].as_str()), (0, Some("filled")));
    let (code, _, text) = cli(&s, &["audit", "verify"]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn a_stalled_order_is_uncertain_to_a_retry_until_its_own_process_settles_it() {
    let s = setup();
    // Held 4 s between the reservation and the broker call: far more than twice the
    // broker timeout (100 ms), which is what a timer-based guess would wait.
    let mut stalled = serve_and_order_paused(&s, "after_reserve", 4_000, &order("stall-1"));
    wait_for(
        &s.state,
        "SELECT COUNT(*) FROM idempotency WHERE client_order_id = 'stall-1' AND state = 'reserved'",
    );
    let (code, v, text) = cli(&s, &["call", "place_order", &order("stall-1").to_string()]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(v["error"]["code"], "uncertain", "{v:#}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("still placing"),
        "{v:#}"
    );
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_orders"), 0);
    // The stalled process goes on and fills it; then the retry replays that fill.
    wait_for(
        &s.state,
        "SELECT COUNT(*) FROM idempotency WHERE client_order_id = 'stall-1' AND state = 'acknowledged'",
    );
    let (code, v, text) = cli(&s, &["call", "place_order", &order("stall-1").to_string()]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(
        (v["outcome"].as_str(), v["replayed"].as_bool()),
        (Some("filled"), Some(true))
    );
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_orders"), 1);
    stalled.kill().unwrap();
    stalled.wait().unwrap();
    let (code, _, text) = cli(&s, &["audit", "verify"]);
    assert_eq!(code, 0, "{text}");
}

#[test]
fn killed_while_sending_is_never_called_not_placed() {
    let s = setup();
    // Killed after the key was marked as being sent and the broker answered, before the
    // outcome was recorded; then the sim's order is removed, as if the request had been
    // lost on the way: the retry must not say it was never placed.
    let mut child = serve_and_order(&s, "after_broker", &order("lost-1"));
    wait_for(
        &s.state,
        "SELECT COUNT(*) FROM sim_orders WHERE client_order_id = 'lost-1'",
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let store = Store::open(&s.state).unwrap();
    store
        .read(|c| {
            c.execute_batch("DELETE FROM sim_fills; DELETE FROM sim_orders;")
                .map_err(tradedesk_store::sql)
        })
        .unwrap();
    drop(store);
    let (code, v, text) = cli(&s, &["call", "place_order", &order("lost-1").to_string()]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(v["error"]["code"], "uncertain", "{v:#}");
    assert_eq!(
        query(
            &s.state,
            "SELECT COUNT(*) FROM idempotency WHERE state = 'submitted'"
        ),
        1
    );
}

#[test]
fn killed_after_the_broker_filled_is_resolved_on_restart_without_a_second_order() {
    let s = setup();
    let mut child = serve_and_order(&s, "after_broker", &order("crash-3"));
    wait_for(
        &s.state,
        "SELECT COUNT(*) FROM sim_orders WHERE client_order_id = 'crash-3'",
    );
    child.kill().unwrap();
    child.wait().unwrap();

    // The order and its fill are whole; the key still says submitted.
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_orders"), 1);
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_fills"), 1);
    assert_eq!(
        query(
            &s.state,
            "SELECT COUNT(*) FROM idempotency WHERE state = 'submitted'"
        ),
        1
    );
    audit_intact(&s.state);

    // A restarted server resolves it at start by looking the id up.
    let mut server = Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(base_args(&s))
        .arg("serve")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "crash-test", "version": "1"}}})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"result\""), "{line}");
    drop(stdin);
    server.wait().unwrap();
    assert_eq!(
        query(
            &s.state,
            "SELECT COUNT(*) FROM idempotency WHERE state = 'acknowledged'"
        ),
        1
    );

    // The retry returns the stored outcome: the same order, replayed, still one fill.
    let (code, v, text) = cli(&s, &["call", "place_order", &order("crash-3").to_string()]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(v["replayed"], true);
    assert_eq!(v["order_id"], "SIM-1");
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_orders"), 1);
    let (_, history, _) = cli(
        &s,
        &[
            "call",
            "get_trade_history",
            r#"{"account": "SIM", "start": "2026-11-30", "end": "2026-11-30"}"#,
        ],
    );
    assert_eq!(history["total_count"], 1, "{history:#}");
    let (code, _, text) = cli(&s, &["audit", "verify"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("intact"));
}

#[test]
fn audit_verify_names_the_entry_an_edit_breaks() {
    let s = setup();
    for id in ["a-1", "a-2"] {
        let (code, _, text) = cli(&s, &["call", "place_order", &order(id).to_string()]);
        assert_eq!(code, 0, "{text}");
    }
    let store = Store::open(&s.state).unwrap();
    store
        .read(|c| {
            c.execute_batch(
                "DROP TRIGGER audit_no_update;
                 UPDATE audit SET detail = '{\"edited\": true}' WHERE seq = 2;",
            )
            .map_err(tradedesk_store::sql)
        })
        .unwrap();
    drop(store);
    let (code, _, text) = cli(&s, &["audit", "verify"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("entry 2"), "{text}");
}

#[test]
fn a_rejection_found_after_a_restart_is_reported_as_a_rejection() {
    let s = setup();
    // An ioc limit far under the market is cancelled on arrival.
    let mut o = order("crash-4");
    o["type"] = json!("limit");
    o["limit_price"] = json!(100);
    o["time_in_force"] = json!("ioc");
    let mut child = serve_and_order(&s, "after_broker", &o);
    wait_for(
        &s.state,
        "SELECT COUNT(*) FROM sim_orders WHERE client_order_id = 'crash-4' AND status = 'cancelled'",
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, v, text) = cli(&s, &["call", "place_order", &o.to_string()]);
    assert_eq!(code, 1, "{text}");
    assert_eq!(v["error"]["code"], "broker_rejected", "{v:#}");
    assert_eq!(v["error"]["order_id"], "SIM-1");
    assert_eq!(
        query(
            &s.state,
            "SELECT COUNT(*) FROM idempotency WHERE state = 'rejected'"
        ),
        1
    );
    // Not counted against the day: a rejected order never traded.
    assert_eq!(query(&s.state, "SELECT COUNT(*) FROM sim_fills"), 0);
    let (code, _, _) = cli(&s, &["audit", "verify"]);
    assert_eq!(code, 0);
}
