//! The tool list's size: the exact bytes of the `tools/list` result a client receives
//! over stdio, for each toolset and for all of them, trading off and on, against the
//! budgets in docs/benchmarks.md ("The tool list"). `--tools` and `[tools] enabled`
//! select what is listed and served.
//!
//! `cargo test --test tool_list -- --nocapture` prints every tool's size.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

const TRADING_ON: &str = "base_currency = \"USD\"\n[[accounts]]\nid = \"SIM\"\nbroker = \"sim\"\nclock = \"2026-11-30T15:00:00Z\"\n[trading]\nenabled = true\n";

const TOOLSETS: [&str; 7] = [
    "portfolio",
    "market",
    "research",
    "options",
    "perps",
    "trading",
    "marketdata",
];

/// One stdio session: `lines` sent, the answers to the requests with the `want` ids
/// read back as raw lines.
fn session(args: &[&str], config: Option<&str>, lines: &[Value], want: &[i64]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tradedesk"));
    if let Some(text) = config {
        let path = dir.path().join("tradedesk.toml");
        std::fs::write(&path, text).unwrap();
        cmd.arg("--config").arg(path);
    }
    cmd.args(args)
        .args(["serve", "--no-telemetry", "--state-dir"])
        .arg(dir.path().join("state"));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                break;
            }
        }
    });
    for line in lines {
        writeln!(stdin, "{line}").unwrap();
    }
    stdin.flush().unwrap();
    let mut answers = vec![String::new(); want.len()];
    while answers.iter().any(String::is_empty) {
        // Generous: only proves the session cannot hang.
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("no answer within 60 s");
        let v: Value = serde_json::from_str(&line).unwrap();
        if let Some(i) = want.iter().position(|id| v["id"] == *id) {
            answers[i] = line;
        }
    }
    drop(stdin);
    child.wait().unwrap();
    answers
}

fn initialize(protocol: &str) -> [Value; 2] {
    [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": protocol, "capabilities": {}, "clientInfo": {"name": "tool-list-size", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    ]
}

/// The `result` of a JSON-RPC answer exactly as its bytes arrived.
fn raw_result(line: &str) -> (usize, Value) {
    let at = line.find("\"result\":").expect("a result") + "\"result\":".len();
    let raw = line[at..]
        .strip_suffix('}')
        .expect("the result ends the answer");
    let parsed: Value = serde_json::from_str(raw).unwrap();
    let whole: Value = serde_json::from_str(line).unwrap();
    assert_eq!(
        parsed, whole["result"],
        "the result is not where it was looked for"
    );
    (raw.len(), parsed)
}

/// The `tools/list` result served with `args` (and a config): its size in bytes and the
/// tools.
fn tool_list(args: &[&str], config: Option<&str>, protocol: &str) -> (usize, Vec<Value>) {
    let lines: Vec<Value> = if protocol == "2026-07-28" {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": protocol, "io.modelcontextprotocol/clientCapabilities": {}});
        vec![json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}})]
    } else {
        let mut l = initialize(protocol).to_vec();
        l.push(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        l
    };
    let answers = session(args, config, &lines, &[2]);
    let (bytes, result) = raw_result(&answers[0]);
    (bytes, result["tools"].as_array().unwrap().clone())
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools.iter().map(|t| t["name"].as_str().unwrap()).collect()
}

/// The budgets: docs/benchmarks.md's table between the budget markers, keyed by
/// (tools listed, trading, protocol, output schemas).
fn budgets() -> Vec<((String, String, String, String), usize)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/benchmarks.md");
    let text = std::fs::read_to_string(path).unwrap();
    let begin = text
        .find("<!-- tool-list budget: begin -->")
        .expect("docs/benchmarks.md has no tool-list budget table");
    let end = text.find("<!-- tool-list budget: end -->").unwrap();
    text[begin..end]
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|row| {
            let cells: Vec<&str> = row.trim_matches('|').split('|').map(str::trim).collect();
            let clean = |c: &str| c.trim_matches('`').to_owned();
            let budget = cells.last().unwrap().replace(',', "").parse().unwrap();
            (
                (
                    clean(cells[0]),
                    clean(cells[1]),
                    clean(cells[2]),
                    clean(cells[3]),
                ),
                budget,
            )
        })
        .collect()
}

/// One measured list: (tools listed, trading, protocol, output schemas, bytes, tools).
type Measured = (
    String,
    &'static str,
    &'static str,
    &'static str,
    usize,
    Vec<Value>,
);

#[test]
fn the_tool_list_of_every_toolset_stays_within_its_budget() {
    let budgets = budgets();
    let mut measured: Vec<Measured> = Vec::new();
    // The default: no output schemas.
    for set in TOOLSETS {
        let (bytes, tools) = tool_list(&["--tools", set], None, "2025-11-25");
        measured.push((set.to_owned(), "off", "2025-11-25", "no", bytes, tools));
    }
    let (bytes, tools) = tool_list(&["--tools", "trading"], Some(TRADING_ON), "2025-11-25");
    measured.push(("trading".to_owned(), "on", "2025-11-25", "no", bytes, tools));
    // The whole list, without and with them; a 2025-03-26 client gets none even when
    // they are turned on.
    for (args, protocol, schemas) in [
        (&[][..], "2025-11-25", "no"),
        (&[][..], "2026-07-28", "no"),
        (&["--output-schemas", "true"][..], "2025-11-25", "yes"),
        (&["--output-schemas", "true"][..], "2026-07-28", "yes"),
        (&["--output-schemas", "true"][..], "2025-03-26", "no"),
    ] {
        let (bytes, tools) = tool_list(args, None, protocol);
        measured.push(("all".to_owned(), "off", protocol, schemas, bytes, tools));
        let (bytes, tools) = tool_list(args, Some(TRADING_ON), protocol);
        measured.push(("all".to_owned(), "on", protocol, schemas, bytes, tools));
    }

    // Every tool once, from the whole list with trading on.
    let all_on = &measured
        .iter()
        .rfind(|m| m.0 == "all" && m.1 == "on" && m.3 == "yes")
        .unwrap()
        .5;
    println!(
        "{:<24} {:>6} {:>6} {:>7}",
        "tool", "bytes", "input", "output"
    );
    for t in all_on {
        println!(
            "{:<24} {:>6} {:>6} {:>7}",
            t["name"].as_str().unwrap(),
            t.to_string().len(),
            t["inputSchema"].to_string().len(),
            t["outputSchema"].to_string().len()
        );
    }
    let mut over = Vec::new();
    for (set, trading, protocol, schemas, bytes, tools) in &measured {
        let listed = tools
            .iter()
            .filter(|t| t.get("outputSchema").is_some())
            .count();
        assert_eq!(
            listed,
            if *schemas == "yes" { tools.len() } else { 0 },
            "{set} {trading} {protocol}: output schemas on {listed} of {} tools",
            tools.len()
        );
        // What Claude Code and opencode show the model: name, description, input schema.
        let model: usize = tools
            .iter()
            .map(|t| {
                json!({"name": t["name"], "description": t["description"], "input_schema": t["inputSchema"]})
                    .to_string()
                    .len()
            })
            .sum();
        println!(
            "{set:<10} trading {trading:<3} {protocol} output schemas {schemas:<3}: {:>2} tools, {bytes:>6} bytes (~{} tokens); name + description + input schema {model} bytes",
            tools.len(),
            bytes / 4
        );
        let key = (
            set.clone(),
            (*trading).to_owned(),
            (*protocol).to_owned(),
            (*schemas).to_owned(),
        );
        let Some(budget) = budgets.iter().find(|(k, _)| *k == key).map(|(_, b)| *b) else {
            panic!(
                "docs/benchmarks.md has no budget row for `{set}` | `{trading}` | `{protocol}` | `{schemas}`: add one a little above today's {bytes} bytes"
            );
        };
        if *bytes > budget {
            over.push(format!(
                "tools/list for `{set}`, trading {trading}, {protocol}, output schemas {schemas}, is {bytes} bytes, over its budget of {budget} in docs/benchmarks.md: tighten the descriptions or schemas that grew (`cargo test --test tool_list -- --nocapture` prints each tool's size), or raise the budget there deliberately, with the new measurement"
            ));
        }
    }
    assert!(over.is_empty(), "{}", over.join("\n"));
}

#[test]
fn a_toolset_lists_its_tools_and_health_and_refuses_the_others_by_name() {
    let (_, portfolio) = tool_list(&["--tools", "portfolio"], None, "2025-11-25");
    assert_eq!(
        names(&portfolio),
        [
            "get_accounts",
            "get_positions",
            "get_trade_history",
            "get_realized_pnl",
            "get_portfolio_summary",
            "get_exposure",
            "get_server_health",
            "get_performance",
            "analyze_trades",
        ]
    );
    let (_, two) = tool_list(&["--tools", "market,options"], None, "2025-11-25");
    assert_eq!(
        names(&two),
        [
            "get_server_health",
            "get_quote",
            "get_bars",
            "option_price",
            "implied_volatility",
            "option_strategy",
        ]
    );
    // The order tools need trading on as well as the toolset.
    let (_, off) = tool_list(&["--tools", "trading"], None, "2025-11-25");
    assert_eq!(names(&off), ["get_server_health", "get_orders"]);
    let (_, on) = tool_list(&["--tools", "trading"], Some(TRADING_ON), "2025-11-25");
    assert_eq!(on.len(), 7, "{:?}", names(&on));

    // The flag beats the config; a tool outside the toolsets is refused naming its own.
    let config = format!("{TRADING_ON}[tools]\nenabled = [\"portfolio\"]\n");
    let (_, flagged) = tool_list(&["--tools", "research"], Some(&config), "2025-11-25");
    assert!(
        names(&flagged).contains(&"backtest"),
        "{:?}",
        names(&flagged)
    );
    assert!(!names(&flagged).contains(&"get_accounts"));
    let mut lines = initialize("2025-11-25").to_vec();
    lines.extend([
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_bars", "arguments": {"source": {"csv": "x.csv"}}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "place_order", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "get_server_health", "arguments": {}}}),
        json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "get_accounts", "arguments": {}}}),
    ]);
    let answers = session(&[], Some(&config), &lines, &[1, 2, 3, 4, 5, 6]);
    let v: Vec<Value> = answers
        .iter()
        .map(|a| serde_json::from_str(a).unwrap())
        .collect();
    let instructions = v[0]["result"]["instructions"].as_str().unwrap();
    assert!(
        instructions.contains("Trading is off"),
        "the order tools are not listed: {instructions}"
    );
    let listed = names(v[1]["result"]["tools"].as_array().unwrap());
    assert_eq!(listed.len(), 9, "{listed:?}");
    for (answer, tool, set) in [
        (&v[2], "get_bars", "market"),
        (&v[3], "place_order", "trading"),
    ] {
        assert_eq!(answer["result"]["isError"], true, "{answer}");
        let error = &answer["result"]["structuredContent"]["error"];
        assert_eq!(error["code"], "tool_not_enabled", "{answer}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(tool) && message.contains(&format!("the {set} toolset")),
            "{message}"
        );
        let hint = error["hint"].as_str().unwrap();
        assert!(
            hint.contains(&format!("\"{set}\"")) && hint.contains("[tools] enabled"),
            "{hint}"
        );
    }
    assert_eq!(v[4]["result"]["structuredContent"]["status"], "ok");
    assert_eq!(v[5]["result"]["structuredContent"]["status"], "ok");
}

/// `tools/list`'s answer and a `get_accounts` call, in one stdio session.
fn list_and_call(args: &[&str], config: Option<&str>, protocol: &str) -> (Vec<Value>, Value) {
    let lines: Vec<Value> = if protocol == "2026-07-28" {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": protocol, "io.modelcontextprotocol/clientCapabilities": {}});
        vec![
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_accounts", "arguments": {}, "_meta": meta}}),
        ]
    } else {
        let mut l = initialize(protocol).to_vec();
        l.extend([
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_accounts", "arguments": {}}}),
        ]);
        l
    };
    let answers = session(args, config, &lines, &[2, 3]);
    let list: Value = serde_json::from_str(&answers[0]).unwrap();
    let call: Value = serde_json::from_str(&answers[1]).unwrap();
    (
        list["result"]["tools"].as_array().unwrap().clone(),
        call["result"].clone(),
    )
}

#[test]
fn output_schemas_are_left_out_or_listed_without_descriptions_and_results_keep_every_figure() {
    let (tools, _) = list_and_call(&["--output-schemas", "true"], None, "2025-11-25");
    assert_eq!(tools.len(), 29);
    for t in &tools {
        let schema = &t["outputSchema"];
        assert_eq!(schema["type"], "object", "{}", t["name"]);
        assert_eq!(
            schema["properties"]["status"]["enum"],
            json!(["ok", "error"])
        );
        // A described field would read `"description":"..."`; a field *named*
        // description would be an object there.
        assert!(
            !schema.to_string().contains("\"description\":\""),
            "{}: {schema}",
            t["name"]
        );
    }
    let ours = tools.iter().find(|t| t["name"] == "get_accounts").unwrap();
    let props = ours["outputSchema"]["properties"]["accounts"]["items"]["properties"]
        .as_object()
        .unwrap();
    for field in [
        "cash",
        "total_value_converted",
        "broker_equity",
        "margin_mode",
    ] {
        assert!(props.contains_key(field), "get_accounts lost {field}");
    }
    let on = format!("{TRADING_ON}[tools]\noutput_schemas = true\n");
    let (configured, _) = list_and_call(&[], Some(&on), "2025-11-25");
    assert_eq!(configured.len(), 34);
    assert!(
        configured
            .iter()
            .all(|t| t["outputSchema"]["type"] == "object")
    );

    for (args, config, protocol) in [
        (&[][..], None, "2025-11-25"),
        (&[][..], None, "2026-07-28"),
        // The flag beats the config.
        (
            &["--output-schemas", "false"][..],
            Some(on.as_str()),
            "2025-11-25",
        ),
        // Protocols without output schemas never get them.
        (&["--output-schemas", "true"][..], None, "2025-03-26"),
        (&[][..], Some(on.as_str()), "2024-11-05"),
    ] {
        let (bare, call) = list_and_call(args, config, protocol);
        let case = format!("{args:?} {} {protocol}", config.is_some());
        let want = if config.is_some() { 34 } else { 29 };
        assert_eq!(bare.len(), want, "{case}");
        assert!(
            bare.iter().all(|t| t.get("outputSchema").is_none()),
            "{case}: an output schema is listed"
        );
        // The same tools otherwise, input schemas and all.
        let read_tools = bare
            .iter()
            .filter(|b| tools.iter().any(|t| t["name"] == b["name"]));
        for (b, t) in read_tools.zip(&tools) {
            let mut t = t.clone();
            t.as_object_mut().unwrap().remove("outputSchema");
            assert_eq!(*b, t, "{case}");
        }
        // The result still carries every figure, as structured content and as text.
        let structured = &call["structuredContent"];
        assert_eq!(structured["status"], "ok", "{case}: {call}");
        let text: Value =
            serde_json::from_str(call["content"][1]["text"].as_str().unwrap()).unwrap();
        assert_eq!(text, *structured, "{case}");
    }
}

#[test]
fn an_unknown_toolset_is_refused_naming_the_valid_ones() {
    let run = |args: &[&str], config: Option<&str>| {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tradedesk"));
        if let Some(text) = config {
            let path = dir.path().join("tradedesk.toml");
            std::fs::write(&path, text).unwrap();
            cmd.arg("--config").arg(path);
        }
        cmd.args(args)
            .arg("--state-dir")
            .arg(dir.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let valid = "portfolio, market, research, options, perps, trading, marketdata";
    let flag = run(&["--tools", "portfolio,quotes", "serve"], None);
    assert_eq!(flag.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&flag.stderr);
    assert!(
        stderr.contains("'quotes'") && stderr.contains(valid),
        "{stderr}"
    );
    assert!(flag.stdout.is_empty());
    let config = run(
        &["serve"],
        Some("[tools]\nenabled = [\"portfolio\", \"Research\"]\n"),
    );
    assert_eq!(config.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&config.stderr);
    assert!(
        stderr.contains("tools.enabled") && stderr.contains("'Research'") && stderr.contains(valid),
        "{stderr}"
    );
    assert!(config.stdout.is_empty());
}
