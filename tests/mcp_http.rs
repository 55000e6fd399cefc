//! Streamable HTTP over a real socket: both protocol eras, and every guard, with the
//! server spawned as users run it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Child,
    addr: String,
    _state: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(env: &[(&str, &str)], bind: &str) -> Result<Server, String> {
    start_with(&[], env, bind)
}

/// Starts the server with global options (`--config PATH`) before `serve`.
fn start_with(global: &[&str], env: &[(&str, &str)], bind: &str) -> Result<Server, String> {
    let state = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tradedesk"));
    cmd.args(global);
    cmd.args([
        "serve",
        "--http",
        bind,
        "--state-dir",
        state.path().to_str().unwrap(),
    ])
    .env_remove("TRADEDESK_HTTP_TOKEN")
    .env("TRADEDESK_RATE_LIMIT", "0")
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    // Notices (trading switched on) may come before the address.
    while stderr.read_line(&mut line).unwrap() > 0 && line.starts_with("tradedesk: ") {
        line.clear();
    }
    let Some(rest) = line.trim().split("http://").nth(1) else {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        let _ = child.wait();
        return Err(format!("{line}{rest}"));
    };
    let addr = rest.trim_end_matches("/mcp").to_owned();
    Ok(Server {
        child,
        addr,
        _state: state,
    })
}

struct Reply {
    status: u16,
    headers: String,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.body))
    }
}

fn request(addr: &str, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Reply {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = headers
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    Reply {
        status,
        headers: headers.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

const JSON: (&str, &str) = ("Content-Type", "application/json");
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");

fn post(addr: &str, extra: &[(&str, &str)], body: &Value) -> Reply {
    let mut headers = vec![JSON, ACCEPT];
    headers.extend_from_slice(extra);
    request(addr, "POST", &headers, body.to_string().as_bytes())
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}})
}

#[test]
fn legacy_and_stateless_clients_share_the_endpoint() {
    let s = start(&[], "127.0.0.1:0").unwrap();
    // Legacy: initialize, then calls.
    let init = post(
        &s.addr,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(init.status, 200, "{}", init.body);
    assert_eq!(init.json()["result"]["protocolVersion"], "2025-03-26");
    let legacy = [("MCP-Protocol-Version", "2025-03-26")];
    let list = post(
        &s.addr,
        &legacy,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    // Trading is off by default: the read tools only, no write tool.
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 29, "{names:?}");
    // No output schemas by default, and 2025-03-26 has none (docs/tools.md, "Toolsets").
    let tools = list.json()["result"]["tools"].clone();
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("outputSchema").is_none()),
        "an output schema listed to a 2025-03-26 client"
    );
    for write in [
        "preview_order",
        "place_order",
        "close_position",
        "modify_position",
        "cancel_order",
    ] {
        assert!(
            !names.iter().any(|n| n == write),
            "{write} listed with trading off"
        );
    }
    let call = post(
        &s.addr,
        &legacy,
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "get_exposure", "arguments": {"by": "currency"}}}),
    );
    assert_eq!(call.json()["result"]["structuredContent"]["status"], "ok");

    // 2026-07-28: no initialize; headers name the method and the tool.
    let modern = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "get_realized_pnl"),
    ];
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "get_realized_pnl", "arguments": {"start": "2026-01-01", "end": "2026-11-27"}, "_meta": meta()}});
    let r = post(&s.addr, &modern, &body);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json()["result"]["structuredContent"]["biggest_loss"]["fill_id"],
        "IB-0028"
    );
    let mismatch = [
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "get_accounts"),
    ];
    assert_eq!(post(&s.addr, &mismatch, &body).status, 400);
    let discover = post(
        &s.addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "server/discover"),
        ],
        &json!({"jsonrpc": "2.0", "id": 5, "method": "server/discover", "params": {"_meta": meta()}}),
    );
    assert_eq!(discover.status, 200, "{}", discover.body);
    assert!(discover.body.contains("tradedesk"));

    // Malformed calls are JSON-RPC errors; bad arguments are tool results.
    let not_object = post(
        &s.addr,
        &legacy,
        &json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "get_accounts", "arguments": 5}}),
    );
    assert_eq!(not_object.json()["error"]["code"], -32602);
    let bad_arg = post(
        &s.addr,
        &legacy,
        &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "get_trade_history", "arguments": {"start": "2026-01-01", "end": "2026-01-31", "limit": 0}}}),
    );
    assert_eq!(bad_arg.json()["result"]["isError"], true);
    assert_eq!(
        bad_arg.json()["result"]["structuredContent"]["error"]["code"],
        "invalid_argument"
    );

    // A plain GET describes the server.
    let get = request(&s.addr, "GET", &[], b"");
    assert_eq!(get.status, 200);
    assert_eq!(get.json()["name"], "tradedesk");
}

#[test]
fn every_legacy_protocol_version_is_negotiated() {
    let s = start(&[], "127.0.0.1:0").unwrap();
    for (i, version) in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
        .into_iter()
        .enumerate()
    {
        let init = post(
            &s.addr,
            &[],
            &json!({"jsonrpc": "2.0", "id": i, "method": "initialize", "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        );
        assert_eq!(
            init.json()["result"]["protocolVersion"],
            version,
            "{}",
            init.body
        );
        let call = post(
            &s.addr,
            &[("MCP-Protocol-Version", version)],
            &json!({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {"name": "get_accounts", "arguments": {}}}),
        );
        assert_eq!(
            call.json()["result"]["structuredContent"]["status"],
            "ok",
            "{version}: {}",
            call.body
        );
    }
}

#[test]
fn hostile_input_gets_the_right_status_and_the_server_stays_up() {
    let s = start(&[], "127.0.0.1:0").unwrap();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let legacy = ("MCP-Protocol-Version", "2025-06-18");
    let cases: Vec<(&str, Reply, u16)> = vec![
        (
            "bad origin",
            post(
                &s.addr,
                &[legacy, ("Origin", "https://evil.example")],
                &ping,
            ),
            403,
        ),
        (
            "bad host",
            post(&s.addr, &[legacy, ("Host", "evil.example:80")], &ping),
            403,
        ),
        (
            "NaN",
            request(
                &s.addr,
                "POST",
                &[JSON, ACCEPT, legacy],
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"x":NaN}}"#,
            ),
            400,
        ),
        (
            "trailing garbage",
            request(
                &s.addr,
                "POST",
                &[JSON, ACCEPT, legacy],
                br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"} xyz"#,
            ),
            400,
        ),
        (
            "not json",
            request(&s.addr, "POST", &[JSON, ACCEPT, legacy], b"{{{{"),
            400,
        ),
        (
            "oversize",
            request(
                &s.addr,
                "POST",
                &[JSON, ACCEPT, legacy],
                &vec![b' '; 70 * 1024],
            ),
            413,
        ),
        (
            "wrong content type",
            request(
                &s.addr,
                "POST",
                &[("Content-Type", "text/plain"), ACCEPT, legacy],
                ping.to_string().as_bytes(),
            ),
            415,
        ),
    ];
    for (name, reply, status) in cases {
        assert_eq!(reply.status, status, "{name}: {}", reply.body);
    }
    let parse = request(
        &s.addr,
        "POST",
        &[JSON, ACCEPT, legacy],
        b"{\"a\": Infinity}",
    );
    assert_eq!(parse.json()["error"]["code"], -32700);
    assert_eq!(parse.json()["id"], Value::Null);
    // JSON that is not a JSON-RPC request: 400 with -32600, the id when it can be read.
    let invalid: [(&[u8], Value); 9] = [
        (b"[]", Value::Null),
        (b"\"a string\"", Value::Null),
        (b"5", Value::Null),
        (
            br#"{"jsonrpc":"1.0","id":3,"method":"tools/list"}"#,
            json!(3),
        ),
        (br#"{"jsonrpc":"2.0","id":4}"#, json!(4)),
        (br#"{"jsonrpc":"2.0","id":"n","method":7}"#, json!("n")),
        (
            br#"{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}"#,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
            Value::Null,
        ),
        (
            br#"{"jsonrpc":"2.0","id":9,"method":"tools/list","params":[1]}"#,
            json!(9),
        ),
    ];
    for (body, id) in invalid {
        let reply = request(&s.addr, "POST", &[JSON, ACCEPT, legacy], body);
        let shown = String::from_utf8_lossy(body);
        assert_eq!(reply.status, 400, "{shown}: {}", reply.body);
        assert_eq!(reply.json()["error"]["code"], -32600, "{shown}");
        assert_eq!(reply.json()["id"], id, "{shown}");
    }
    // A flood of 200 requests, then the server still answers.
    for _ in 0..200 {
        let _ = request(&s.addr, "POST", &[JSON, ACCEPT, legacy], b"[");
    }
    let ok = post(
        &s.addr,
        &[legacy],
        &json!({"jsonrpc": "2.0", "id": 9, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(ok.status, 200, "{}", ok.body);
}

#[test]
fn tokens_are_required_and_a_lockout_never_blocks_the_valid_one() {
    let s = start(
        &[("TRADEDESK_HTTP_TOKEN", "s3cret-token-0123456789")],
        "127.0.0.1:0",
    )
    .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(post(&s.addr, &[], &init).status, 401);
    assert_eq!(
        post(&s.addr, &[("Authorization", "Bearer wrong")], &init).status,
        401
    );
    assert_eq!(
        post(
            &s.addr,
            &[("Authorization", "Bearer s3cret-token-0123456789")],
            &init
        )
        .status,
        200
    );
    assert_eq!(
        post(&s.addr, &[("x-api-key", "s3cret-token-0123456789")], &init).status,
        200
    );
    for _ in 0..12 {
        let _ = post(&s.addr, &[("Authorization", "Bearer guess")], &init);
    }
    let locked = post(&s.addr, &[("Authorization", "Bearer guess")], &init);
    assert_eq!(locked.status, 429);
    assert_eq!(
        post(
            &s.addr,
            &[("Authorization", "Bearer s3cret-token-0123456789")],
            &init
        )
        .status,
        200
    );
}

#[test]
fn cors_is_off_by_default_and_configurable_from_the_environment() {
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let legacy = ("MCP-Protocol-Version", "2025-06-18");
    let off = start(&[], "127.0.0.1:0").unwrap();
    let r = post(
        &off.addr,
        &[legacy, ("Origin", "http://localhost:3000")],
        &list,
    );
    assert_eq!(r.status, 200);
    assert!(
        !r.headers.contains("access-control-allow-origin"),
        "{}",
        r.headers
    );
    let on = start(
        &[("TRADEDESK_CORS_ORIGINS", "https://app.example.com")],
        "127.0.0.1:0",
    )
    .unwrap();
    let r = post(
        &on.addr,
        &[legacy, ("Origin", "https://app.example.com")],
        &list,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        r.headers
            .contains("access-control-allow-origin: https://app.example.com"),
        "{}",
        r.headers
    );
    let preflight = request(
        &on.addr,
        "OPTIONS",
        &[("Origin", "https://app.example.com")],
        b"",
    );
    assert_eq!(preflight.status, 204);
    assert!(preflight.headers.contains("access-control-allow-headers"));
    assert_eq!(
        post(
            &on.addr,
            &[legacy, ("Origin", "https://other.example.com")],
            &list
        )
        .status,
        403
    );
}

#[test]
fn a_short_token_is_refused_at_start() {
    let err = start(&[("TRADEDESK_HTTP_TOKEN", "short")], "127.0.0.1:0")
        .err()
        .expect("must refuse");
    assert!(err.contains("shorter than"), "{err}");
}

#[test]
fn the_rate_limit_answers_429_with_retry_after() {
    let s = start(&[("TRADEDESK_RATE_LIMIT", "5")], "127.0.0.1:0").unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let statuses: Vec<u16> = (0..7)
        .map(|_| post(&s.addr, &[("MCP-Protocol-Version", "2025-06-18")], &list).status)
        .collect();
    assert_eq!(&statuses[..5], &[200; 5]);
    let limited = post(&s.addr, &[("MCP-Protocol-Version", "2025-06-18")], &list);
    assert_eq!(limited.status, 429);
    assert!(
        limited.headers.contains("retry-after:"),
        "{}",
        limited.headers
    );
    assert_eq!(limited.json()["error"]["code"], -32029);
}

#[test]
fn binding_beyond_loopback_without_a_token_refuses_to_start() {
    let err = start(&[], "0.0.0.0:0").err().expect("must refuse");
    assert!(err.contains("TRADEDESK_HTTP_TOKEN"), "{err}");
}

#[test]
fn sigterm_shuts_down_gracefully() {
    let mut s = start(&[], "127.0.0.1:0").unwrap();
    let pid = s.child.id().to_string();
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let started = Instant::now();
    loop {
        if let Some(status) = s.child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_client_that_never_finishes_its_headers_is_disconnected() {
    let s = start(&[], "127.0.0.1:0").unwrap();
    let mut stream = TcpStream::connect(&s.addr).unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // The server's header timeout is 10 s; 40 s is the generous bound that proves the
    // connection cannot be held open forever.
    stream
        .set_read_timeout(Some(Duration::from_secs(40)))
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = stream.read_to_end(&mut buf);
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "the half-sent request was never cut off"
    );
    // Meanwhile the server kept answering others.
    let ok = post(
        &s.addr,
        &[("MCP-Protocol-Version", "2025-06-18")],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    );
    assert_eq!(ok.status, 200);
}

#[test]
fn a_client_that_never_sends_a_byte_is_disconnected() {
    let s = start(&[], "127.0.0.1:0").unwrap();
    let mut silent = TcpStream::connect(&s.addr).unwrap();
    // The head timeout (10 s) runs from accept; 40 s is the generous bound that proves a
    // silent connection cannot be held open forever.
    silent
        .set_read_timeout(Some(Duration::from_secs(40)))
        .unwrap();
    let mut buf = Vec::new();
    let closed = match silent.read_to_end(&mut buf) {
        Ok(_) => true,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "the silent connection was never closed");
    assert!(buf.is_empty(), "{}", String::from_utf8_lossy(&buf));
}

const TRADING_CONFIG: &str = r#"
base_currency = "USD"
data_dirs = ["data"]
[[accounts]]
id = "SIM"
broker = "sim"
clock = "2026-11-30T15:00:00Z"
[trading]
enabled = true
confirm_paper = true
"#;

fn stateless_call(addr: &str, id: u64, tool: &str, params: Value) -> Value {
    let mut params = params;
    params["name"] = json!(tool);
    params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let reply = post(
        addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}),
    );
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.json()
}

#[test]
fn a_stateless_client_confirms_an_order_through_input_required() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(&config, TRADING_CONFIG).unwrap();
    let s = start_with(&["--config", config.to_str().unwrap()], &[], "127.0.0.1:0").unwrap();
    let order = json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": 2});

    // No token: the server asks the user through the client and ends the call.
    let first = stateless_call(&s.addr, 1, "place_order", json!({"arguments": order}));
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first:#}");
    let ask = &result["inputRequests"]["confirm_order"];
    assert_eq!(ask["method"], "elicitation/create");
    let message = ask["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("buy 2 shares NASDAQ:AAPL") && message.contains("PAPER"),
        "{message}"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();

    // The answer for this order does not stand for another one.
    let accept = json!({"confirm_order": {"action": "accept", "content": {"confirm": true}}});
    let mut other = order.clone();
    other["quantity"] = json!(3);
    let swapped = stateless_call(
        &s.addr,
        2,
        "place_order",
        json!({"arguments": other, "inputResponses": accept, "requestState": state}),
    );
    assert_eq!(
        swapped["result"]["structuredContent"]["error"]["code"], "confirmation_invalid",
        "{swapped:#}"
    );

    // A forged state is no acceptance.
    let forged = stateless_call(
        &s.addr,
        7,
        "place_order",
        json!({"arguments": order, "inputResponses": accept, "requestState": "v1.00.1.00"}),
    );
    assert_eq!(
        forged["result"]["structuredContent"]["error"]["code"], "confirmation_invalid",
        "{forged:#}"
    );

    // A refusal places nothing.
    let declined = stateless_call(
        &s.addr,
        3,
        "place_order",
        json!({"arguments": order, "inputResponses": {"confirm_order": {"action": "decline"}}, "requestState": state}),
    );
    assert_eq!(declined["result"]["isError"], true);
    assert_eq!(
        declined["result"]["structuredContent"]["error"]["code"],
        "confirmation_required"
    );

    // Acceptance for this order places it.
    let placed = stateless_call(
        &s.addr,
        4,
        "place_order",
        json!({"arguments": order, "inputResponses": accept, "requestState": state}),
    );
    let placed = &placed["result"]["structuredContent"];
    assert_eq!(placed["status"], "ok", "{placed:#}");
    assert_eq!(placed["outcome"], "filled");
    assert_eq!(placed["mode"], "paper");
    // The same answer sent again is the same order, not a second one.
    let again = stateless_call(
        &s.addr,
        8,
        "place_order",
        json!({"arguments": order, "inputResponses": accept, "requestState": state}),
    );
    let again = &again["result"]["structuredContent"];
    assert_eq!(again["replayed"], true, "{again:#}");
    assert_eq!(again["order_id"], placed["order_id"]);

    // The write tools are listed now that trading is on.
    let list = post(
        &s.addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta()}}),
    );
    let names: Vec<String> = list.json()["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 34, "{names:?}");
    let orders = stateless_call(
        &s.addr,
        6,
        "get_orders",
        json!({"arguments": {"status": "all"}}),
    );
    assert_eq!(
        orders["result"]["structuredContent"]["count"], 1,
        "{orders:#}"
    );
}

#[test]
fn numbers_sent_as_strings_are_refused_over_http_and_nothing_is_placed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(&config, TRADING_CONFIG).unwrap();
    let s = start_with(&["--config", config.to_str().unwrap()], &[], "127.0.0.1:0").unwrap();
    let order = json!({"account": "SIM", "symbol": "AAPL", "side": "buy"});
    let with = |key: &str, value: Value| {
        let mut args = order.clone();
        args[key] = value;
        args
    };
    let cases = [
        ("place_order", with("quantity", json!("1_0")), "quantity"),
        ("place_order", with("quantity", json!("1e0")), "quantity"),
        ("preview_order", with("quantity", json!("10")), "quantity"),
        (
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "quantity": "1_0"}),
            "quantity",
        ),
        (
            "modify_position",
            json!({"account": "SIM", "symbol": "AAPL", "stop_loss": "100"}),
            "stop_loss",
        ),
        ("place_order", with("account", json!(7)), "account"),
    ];
    for (i, (tool, args, name)) in cases.into_iter().enumerate() {
        let reply = stateless_call(&s.addr, 10 + i as u64, tool, json!({"arguments": args}));
        let result = &reply["result"];
        assert_eq!(result["isError"], true, "{tool}: {reply:#}");
        let err = &result["structuredContent"]["error"];
        assert_eq!(err["code"], "invalid_argument", "{tool}: {err}");
        let message = err["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("{name}: expected a")),
            "{tool}: {message}"
        );
    }
    assert_eq!(
        stateless_call(
            &s.addr,
            1,
            "place_order",
            json!({"arguments": with("quantity", json!("1_0"))})
        )["result"]["structuredContent"]["error"]["message"],
        "quantity: expected a number or null, got the string \"1_0\""
    );

    // `"arguments": null` is not an object; arguments left out are no arguments.
    let null = stateless_call(&s.addr, 2, "get_orders", json!({"arguments": null}));
    assert_eq!(null["error"]["code"], -32602, "{null:#}");
    assert_eq!(null["id"], 2);
    assert!(
        null["error"]["message"]
            .as_str()
            .unwrap()
            .contains("arguments must be a JSON object, not null"),
        "{null:#}"
    );
    let omitted = stateless_call(&s.addr, 3, "get_orders", json!({}));
    let orders = &omitted["result"]["structuredContent"];
    assert_eq!(orders["status"], "ok", "{omitted:#}");
    // Nothing was placed by any refused call.
    let all = stateless_call(
        &s.addr,
        4,
        "get_orders",
        json!({"arguments": {"status": "all"}}),
    );
    assert_eq!(all["result"]["structuredContent"]["count"], 0, "{all:#}");
}

#[test]
fn over_http_bar_files_are_read_only_inside_data_dirs() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    std::fs::write(&config, TRADING_CONFIG).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let csv = "date,open,high,low,close\n2026-01-02,1,2,0.5,1.5\n2026-01-03,1.5,2,1,1.8\n";
    let inside = dir.path().join("data/ACME.csv");
    let outside = dir.path().join("SECRET.csv");
    std::fs::write(&inside, csv).unwrap();
    std::fs::write(&outside, csv).unwrap();
    let s = start_with(&["--config", config.to_str().unwrap()], &[], "127.0.0.1:0").unwrap();
    let ok = stateless_call(
        &s.addr,
        1,
        "get_bars",
        json!({"arguments": {"source": {"csv": inside.to_str().unwrap()}}}),
    );
    assert_eq!(ok["result"]["structuredContent"]["total"], 2, "{ok:#}");
    let refused = stateless_call(
        &s.addr,
        2,
        "get_bars",
        json!({"arguments": {"source": {"csv": outside.to_str().unwrap()}}}),
    );
    let error = &refused["result"]["structuredContent"]["error"];
    assert_eq!(error["code"], "invalid_argument", "{refused:#}");
    assert!(
        error["message"].as_str().unwrap().contains("data_dirs"),
        "{error}"
    );
}

#[test]
fn a_silent_gateway_holds_neither_the_http_start_nor_the_answering_accounts() {
    // A gateway that accepts connections and never answers.
    let gateway = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = gateway.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for socket in gateway.incoming() {
            held.push(socket);
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("tradedesk.toml");
    let book =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small-book.json");
    std::fs::write(
        &config,
        format!(
            "base_currency = \"USD\"\nbroker_timeout_ms = 500\n\n[[accounts]]\nid = \"US-1\"\nbroker = \"book\"\npath = {:?}\n\n[[accounts]]\nid = \"ALPACA\"\nbroker = \"alpaca\"\nbase_url = \"http://127.0.0.1:{port}\"\ndata_url = \"http://127.0.0.1:{port}\"\ntimeout_ms = 500\n",
            book.display().to_string()
        ),
    )
    .unwrap();
    let s = start_with(
        &["--config", config.to_str().unwrap()],
        &[
            ("APCA_API_KEY_ID", "PKTESTKEY"),
            ("APCA_API_SECRET_KEY", "test-secret"),
        ],
        "127.0.0.1:0",
    )
    .unwrap();
    let init = post(
        &s.addr,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    );
    assert_eq!(init.status, 200, "{}", init.body);
    let legacy = [("MCP-Protocol-Version", "2025-06-18")];
    let list = post(
        &s.addr,
        &legacy,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    assert!(
        !list.json()["result"]["tools"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let summary = stateless_call(
        &s.addr,
        3,
        "get_portfolio_summary",
        json!({"arguments": {}}),
    );
    let result = &summary["result"]["structuredContent"];
    assert_eq!(result["status"], "ok", "{summary:#}");
    assert_eq!(result["accounts"][0]["account"], "US-1", "{summary:#}");
    assert_eq!(result["unavailable_accounts"][0]["account"], "ALPACA");
    assert_eq!(result["unavailable_accounts"][0]["code"], "broker_timeout");
}

#[test]
fn methods_removed_in_2026_07_28_are_unknown_methods() {
    let s = start(&[], "127.0.0.1:0").unwrap();
    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": method,
            "params": {"uri": "tradedesk://docs/tools", "_meta": meta()}});
        // With and without the Mcp-Name header a 2026-07-28 request would carry.
        for name in [None, Some("tradedesk://docs/tools")] {
            let mut headers = vec![
                ("MCP-Protocol-Version", "2026-07-28"),
                ("Mcp-Method", method),
            ];
            if let Some(n) = name {
                headers.push(("Mcp-Name", n));
            }
            let reply = post(&s.addr, &headers, &body);
            assert_eq!(reply.status, 404, "{method} {name:?}: {}", reply.body);
            let v = reply.json();
            assert_eq!(v["error"]["code"], -32601, "{v:#}");
            assert_eq!(v["id"], 9, "{v:#}");
        }
    }
}

#[test]
fn output_schemas_when_turned_on_reach_clients_of_2025_06_18_on_only() {
    let s = start_with(&["--output-schemas", "true"], &[], "127.0.0.1:0").unwrap();
    let modern = post(
        &s.addr,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}),
    );
    let tools = modern.json()["result"]["tools"].clone();
    assert_eq!(tools.as_array().map(Vec::len), Some(29), "{}", modern.body);
    assert!(
        tools
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["outputSchema"]["type"] == "object"),
        "a 2026-07-28 client lacks an output schema: {}",
        modern.body
    );
    for version in ["2025-06-18", "2025-03-26"] {
        let init = post(
            &s.addr,
            &[],
            &json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        );
        assert_eq!(init.json()["result"]["protocolVersion"], version);
        let list = post(
            &s.addr,
            &[("MCP-Protocol-Version", version)],
            &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}),
        );
        let tools = list.json()["result"]["tools"].clone();
        let with = tools
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t.get("outputSchema").is_some())
            .count();
        let want = if version == "2025-03-26" { 0 } else { 29 };
        assert_eq!(with, want, "{version}: {}", list.body);
    }
}
