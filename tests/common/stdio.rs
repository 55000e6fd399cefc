//! An MCP session over stdio as a client runs it: `tradedesk serve` spawned with a state
//! directory of its own, the lines written one by one, every stdout line parsed as
//! JSON-RPC. Included by path (`#[path = "common/stdio.rs"]`) from the tests that use it.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// `command` started with its stdin, stdout and stderr piped to the test.
pub fn spawn_piped(command: &mut Command) -> Child {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

pub fn session(lines: &[String]) -> (Vec<Value>, String) {
    session_with(&[], lines)
}

/// A session with global options (`--config PATH`) before `serve`.
pub fn session_with(global: &[&str], lines: &[String]) -> (Vec<Value>, String) {
    let state = tempfile::tempdir().unwrap();
    let mut child = spawn_piped(
        Command::new(env!("CARGO_BIN_EXE_tradedesk"))
            .args(global)
            .args(["serve", "--state-dir", state.path().to_str().unwrap()]),
    );
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let expected = lines
        .iter()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v.get("id").is_some()))
        .count();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        for line in BufReader::new(stdout).lines() {
            out.push(line.unwrap());
        }
        out
    });
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    // Give the server time to answer, bounded, then end the session by closing stdin.
    let started = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    drop(stdin);
    let out = reader.join().unwrap();
    let status = child.wait().unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the session did not end"
    );
    assert!(status.success(), "server exited with {status}");
    let mut messages = Vec::new();
    for line in &out {
        let v: Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "not JSON-RPC: {line}");
        messages.push(v);
    }
    assert!(
        messages.iter().filter(|m| m.get("id").is_some()).count() >= expected - 1,
        "missing answers: {out:?}"
    );
    let telemetry =
        std::fs::read_to_string(state.path().join("telemetry.jsonl")).unwrap_or_default();
    (messages, telemetry)
}

pub fn by_id(messages: &[Value], id: i64) -> &Value {
    messages
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to id {id}: {messages:?}"))
}
