//! The stdio transport as a client spawns it: a whole session, bad requests included,
//! and every byte of stdout parsed as JSON-RPC.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use serde_json::{Value, json};

#[path = "common/stdio.rs"]
mod stdio;
use stdio::{by_id, session, session_with};

#[test]
fn a_whole_session_keeps_stdout_pure_json_rpc() {
    let lines: Vec<String> = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stdio-test", "version": "1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_portfolio_summary", "arguments": {}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_realized_pnl", "arguments": {"start": "last quarter", "end": "2026-01-01"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_accounts", "arguments": "not an object"}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}).to_string(),
        "{this is not json".to_owned(),
        json!({"hello": "world"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 7, "method": "resources/list"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "tradedesk://methodology/realized-pnl"}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 9, "method": "prompts/list"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 10, "method": "prompts/get", "params": {"name": "period_performance", "arguments": {"start": "2026-01-01", "end": "2026-03-31"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 11, "method": "prompts/get", "params": {"name": "period_performance", "arguments": {"start": "last year", "end": "2026-03-31"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 12, "method": "tools/call", "params": {"name": "get_positions", "arguments": {"symbol": "x".repeat(5000)}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {"name": "get_exposure", "arguments": {"by": "sector"}, "_meta": {"progressToken": "p-13"}}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 14, "method": "tools/unknown", "params": {}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 15, "method": "no/such/method"}).to_string(),
        json!({"jsonrpc": "1.0", "id": 16, "method": "tools/list"}).to_string(),
        json!({"jsonrpc": "2.0", "id": 17, "method": "tools/list", "params": [1]}).to_string(),
        json!({"jsonrpc": "2.0", "id": 18, "method": 7}).to_string(),
        "[1e400]".to_owned(),
        "{\"jsonrpc\": \"2.0\", \"id\": 01, \"method\": \"tools/list\"}".to_owned(),
        "[]".to_owned(),
        "\"a string\"".to_owned(),
    ]
    .into_iter()
    .collect();
    let (messages, telemetry) = session(&lines);

    let init = by_id(&messages, 1);
    assert_eq!(init["result"]["serverInfo"]["name"], "tradedesk");
    assert!(
        init["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("never instructions")
    );

    let tools = by_id(&messages, 2)["result"]["tools"]
        .as_array()
        .unwrap()
        .clone();
    // Trading is off by default: the read tools only, no write tool.
    assert_eq!(tools.len(), 29);
    for t in &tools {
        assert!(
            ![
                "preview_order",
                "place_order",
                "close_position",
                "modify_position",
                "cancel_order"
            ]
            .contains(&t["name"].as_str().unwrap()),
            "{} listed with trading off",
            t["name"]
        );
        assert_eq!(t["annotations"]["readOnlyHint"], true, "{}", t["name"]);
        assert_eq!(t["annotations"]["destructiveHint"], false);
        assert_eq!(t["annotations"]["idempotentHint"], true);
        assert_eq!(t["inputSchema"]["additionalProperties"], false);
        // Listed without output schemas by default (docs/tools.md, "Toolsets").
        assert!(t.get("outputSchema").is_none(), "{}", t["name"]);
    }

    let summary = &by_id(&messages, 3)["result"];
    assert_eq!(summary["structuredContent"]["status"], "ok");
    assert!(
        summary["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("Total value")
    );
    assert_ne!(summary["isError"], true);
    // The second text block is the structured result itself, for text-only clients.
    let text: Value =
        serde_json::from_str(summary["content"][1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, summary["structuredContent"]);

    let bad_date = &by_id(&messages, 4)["result"];
    assert_eq!(bad_date["isError"], true);
    assert_eq!(
        bad_date["structuredContent"]["error"]["code"],
        "invalid_date"
    );

    assert_eq!(by_id(&messages, 5)["error"]["code"], -32602);
    assert_eq!(by_id(&messages, 6)["error"]["code"], -32602);
    assert!(
        by_id(&messages, 7)["result"]["resources"]
            .as_array()
            .unwrap()
            .len()
            >= 4
    );
    assert!(
        by_id(&messages, 8)["result"]["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("FIFO")
    );
    assert_eq!(
        by_id(&messages, 9)["result"]["prompts"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    assert!(
        by_id(&messages, 10)["result"]["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .contains("2026-03-31")
    );
    assert_eq!(by_id(&messages, 11)["error"]["code"], -32602);
    // An unknown method is -32601, whatever its prefix.
    assert_eq!(by_id(&messages, 14)["error"]["code"], -32601);
    assert_eq!(by_id(&messages, 15)["error"]["code"], -32601);
    // Lines that are not JSON-RPC requests are answered, never dropped: -32600 with the id
    // when it can be read, -32700 for what is not JSON, `"id": null` when there is none.
    for id in [16, 17, 18] {
        assert_eq!(by_id(&messages, id)["error"]["code"], -32600, "id {id}");
    }
    let nulls: Vec<i64> = messages
        .iter()
        .filter(|m| m.get("id") == Some(&Value::Null))
        .map(|m| m["error"]["code"].as_i64().unwrap())
        .collect();
    // "{this is not json", {"hello": "world"}, [1e400], 01, [] and a string.
    assert_eq!(
        nulls,
        [-32700, -32600, -32700, -32700, -32600, -32600],
        "{messages:?}"
    );

    // A huge argument never comes back huge.
    let huge = by_id(&messages, 12);
    let text = huge.to_string();
    assert!(text.len() < 2000, "echoed {} bytes", text.len());
    assert_eq!(
        huge["result"]["structuredContent"]["error"]["code"],
        "unknown_symbol"
    );

    // Progress: a call that carries a token gets notifications for it before its answer.
    let progress: Vec<&Value> = messages
        .iter()
        .filter(|m| {
            m["method"] == "notifications/progress" && m["params"]["progressToken"] == "p-13"
        })
        .collect();
    assert_eq!(progress.len(), 2, "{messages:?}");
    assert_eq!(progress[1]["params"]["progress"], 1.0);
    assert_eq!(
        by_id(&messages, 13)["result"]["structuredContent"]["status"],
        "ok"
    );

    // Telemetry: one line per tool call, never on stdout, huge arguments cut short.
    let calls: Vec<Value> = telemetry
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(calls.len(), 4, "{telemetry}");
    // Calls run concurrently, so lines come in the order the calls finish.
    let line = |tool: &str| {
        calls
            .iter()
            .find(|c| c["tool"] == tool)
            .unwrap_or_else(|| panic!("no telemetry line for {tool}: {telemetry}"))
    };
    assert!(
        line("get_positions")["arguments"]["symbol"]
            .as_str()
            .unwrap()
            .len()
            < 300
    );
    assert_eq!(line("get_portfolio_summary")["client"], "stdio-test");
    assert_eq!(line("get_realized_pnl")["error_code"], "invalid_date");
}

const TRADING_CONFIG: &str = r#"
base_currency = "USD"
[[accounts]]
id = "SIM"
broker = "sim"
clock = "2026-11-30T15:00:00Z"
[trading]
enabled = true
confirm_paper = false
"#;

#[test]
fn numbers_sent_as_strings_are_refused_over_stdio_and_nothing_is_placed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(&config, TRADING_CONFIG).unwrap();
    let call = |id: i64, tool: &str, arguments: Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}).to_string()
    };
    let order = |quantity: Value| json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": quantity});
    let lines = vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "stdio-test", "version": "1"}}}).to_string(),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        call(2, "place_order", order(json!("1_0"))),
        call(3, "place_order", order(json!("1e0"))),
        call(4, "close_position", json!({"account": "SIM", "symbol": "AAPL", "quantity": "1"})),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_orders", "arguments": null}}).to_string(),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "get_orders"}}).to_string(),
        call(7, "get_orders", json!({"status": "all"})),
    ];
    let (messages, _) = session_with(&["--config", config.to_str().unwrap()], &lines);
    for (id, name, sent) in [
        (2, "quantity", "1_0"),
        (3, "quantity", "1e0"),
        (4, "quantity", "1"),
    ] {
        let result = &by_id(&messages, id)["result"];
        assert_eq!(result["isError"], true, "id {id}: {result:#}");
        let err = &result["structuredContent"]["error"];
        assert_eq!(err["code"], "invalid_argument", "id {id}: {err}");
        assert_eq!(
            err["message"],
            format!("{name}: expected a number or null, got the string \"{sent}\""),
            "id {id}"
        );
    }
    let null = by_id(&messages, 5);
    assert_eq!(null["error"]["code"], -32602, "{null}");
    assert!(
        null["error"]["message"]
            .as_str()
            .unwrap()
            .contains("arguments must be a JSON object, not null"),
        "{null}"
    );
    assert_eq!(
        by_id(&messages, 6)["result"]["structuredContent"]["status"],
        "ok"
    );
    // Nothing was placed.
    let all = &by_id(&messages, 7)["result"]["structuredContent"];
    assert_eq!(all["status"], "ok", "{all}");
    assert_eq!(all["count"], 0, "{all}");
}
