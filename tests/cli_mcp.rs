//! The market-data tools answer the same figures over the CLI (`tradedesk call`) and over
//! MCP stdio (`tradedesk serve`, `structuredContent`): each of the seven is called with the
//! same arguments both ways and the two results are compared whole.
//!
//! Both processes serve the demo's paper exchange (the sim, as `SIM-PAPER` is on the
//! demo) with its clock frozen by the config's `clock`: the sim's prices, tape, news and
//! chain are functions of its clock, so with the wall clock every price would move between
//! the two runs. With the clock frozen no field is time-varying, and none is ignored
//! ([`TIME_VARYING`] is empty): any difference is a difference between the transports.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use serde_json::{Value, json};

#[path = "common/cli.rs"]
mod cli;
#[path = "common/stdio.rs"]
mod stdio;

/// The demo's sim account, its clock frozen at the instant docs/tools.md's examples run at.
const CONFIG: &str = r#"
[[accounts]]
id = "SIM-PAPER"
broker = "sim"
clock = "2026-11-30T15:00:00Z"
"#;

/// The fields left out of the comparison (JSON pointers), because they would change
/// between the two runs: none, with the sim's clock frozen.
const TIME_VARYING: &[&str] = &[];

/// Every path (JSON pointer) where `a` and `b` differ.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    if TIME_VARYING.contains(&path) {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))) {
                let p = format!("{path}/{k}");
                differences(
                    &p,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (u, v)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}/{i}"), u, v, out);
            }
        }
        _ if a != b => out.push(format!("{path}: cli {a} / mcp {b}")),
        _ => {}
    }
}

#[test]
fn each_market_data_tool_answers_the_same_over_the_cli_and_mcp() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let config = config.to_str().unwrap();
    let calls: [(&str, Value); 7] = [
        (
            "get_snapshots",
            json!({"account": "SIM-PAPER", "symbols": ["AAPL", "EURUSD", "BTC-PERP", "NOPE"]}),
        ),
        ("search_instruments", json!({"query": "apple"})),
        ("get_news", json!({"symbols": ["AAPL", "NVDA"], "limit": 2})),
        ("get_market_hours", json!({"account": "SIM-PAPER"})),
        (
            "get_option_chain",
            json!({"underlying": "AAPL", "account": "SIM-PAPER", "strikes_around": 2}),
        ),
        ("list_markets", json!({"account": "SIM-PAPER"})),
        (
            "get_recent_trades",
            json!({"market": "BTC-PERP", "account": "SIM-PAPER", "limit": 3}),
        ),
    ];
    let mut lines = vec![
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "cli-mcp-test", "version": "1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    ];
    for (id, (name, args)) in (1_i64..).zip(&calls) {
        lines.push(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": args}}).to_string());
    }
    let (messages, _) = stdio::session_with(&["--config", config], &lines);
    let mut failed = Vec::new();
    for (id, (name, args)) in (1_i64..).zip(&calls) {
        let over_cli = cli::call_ok(&["--config", config], name, &args.to_string());
        let result = &stdio::by_id(&messages, id)["result"];
        assert_ne!(result["isError"], true, "{name} over MCP: {result:#}");
        let over_mcp = &result["structuredContent"];
        assert_eq!(
            over_cli["status"], "ok",
            "{name} over the CLI: {over_cli:#}"
        );
        let mut diff = Vec::new();
        differences("", &over_cli, over_mcp, &mut diff);
        if !diff.is_empty() {
            failed.push(format!("{name}:\n  {}", diff.join("\n  ")));
        }
    }
    assert!(
        failed.is_empty(),
        "the CLI and MCP answers differ:\n{}",
        failed.join("\n")
    );
}
