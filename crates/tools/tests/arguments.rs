//! Every tool refuses what its advertised input schema refuses: for each argument of
//! every tool in the registry, a value of a type its schema does not allow (a string
//! where it says number or integer, a number where it says string, null where null is
//! not allowed) is `invalid_argument` naming that argument, and nothing is placed.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use serde_json::{Value, json};
use tradedesk_tools::config::{State, docs_context};
use tradedesk_tools::{CallError, ToolContext, call, tools};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The JSON types a property allows, through `$ref` and `anyOf`.
fn types_of(root: &Value, schema: &Value) -> Vec<String> {
    if let Some(name) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
    {
        return types_of(root, &root["$defs"][name]);
    }
    let mut out: Vec<String> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts.iter().map(|t| t.as_str().unwrap().to_owned()).collect(),
        _ => Vec::new(),
    };
    for branch in schema
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.extend(types_of(root, branch));
    }
    out
}

/// Values of types `allowed` does not include, each with the word the error must use.
fn refused_values(allowed: &[String]) -> Vec<Value> {
    let has = |t: &str| allowed.iter().any(|a| a == t);
    let mut bad = Vec::new();
    if has("number") || has("integer") {
        bad.extend([json!("1_0"), json!("1e0"), json!("10")]);
    }
    if has("integer") && !has("number") {
        bad.push(json!(1.5));
    }
    if has("string") {
        bad.extend([json!(5), json!(true)]);
    }
    if has("boolean") {
        bad.extend([json!("true"), json!(1)]);
    }
    if (has("object") || has("array")) && !has("string") {
        bad.push(json!("x"));
    }
    if !has("null") {
        bad.push(Value::Null);
    }
    bad
}

fn expected_word(allowed: &[String]) -> &'static str {
    let has = |t: &str| allowed.iter().any(|a| a == t);
    if has("number") {
        "a number"
    } else if has("integer") {
        "an integer"
    } else if has("string") {
        "a string"
    } else if has("boolean") {
        "a boolean"
    } else if has("object") {
        "an object"
    } else {
        "an array"
    }
}

fn orders_placed(ctx: &ToolContext, rt: &tokio::runtime::Runtime) -> i64 {
    let out = rt
        .block_on(call(ctx, "get_orders", json!({"status": "all"})))
        .unwrap()
        .structured;
    assert_eq!(out["status"], "ok", "{out}");
    out["count"].as_i64().unwrap()
}

#[test]
fn every_argument_of_every_tool_refuses_the_types_its_schema_refuses() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = State::open(state_dir.path()).unwrap();
    let ctx = docs_context("test", &state).unwrap();
    let rt = rt();
    let mut checked = 0;
    for spec in tools() {
        let schema = &spec.input_schema;
        let props = schema["properties"].as_object().unwrap();
        for (name, prop) in props {
            let allowed = types_of(schema, prop);
            assert!(
                !allowed.is_empty(),
                "{}.{name}: no type in {prop}",
                spec.name
            );
            for bad in refused_values(&allowed) {
                let out = rt
                    .block_on(call(&ctx, spec.name, json!({ name: bad })))
                    .unwrap();
                let err = &out.structured["error"];
                assert!(
                    out.is_error,
                    "{} {name}={bad} answered {}",
                    spec.name, out.structured
                );
                assert_eq!(
                    err["code"], "invalid_argument",
                    "{} {name}={bad}: {err}",
                    spec.name
                );
                let message = err["message"].as_str().unwrap();
                let want = format!("{name}: expected {}", expected_word(&allowed));
                assert!(
                    message.starts_with(&want),
                    "{} {name}={bad}: {message:?} does not start with {want:?}",
                    spec.name
                );
                assert!(
                    message.ends_with(&format!("got {}", describe(&bad))),
                    "{} {name}={bad}: {message:?}",
                    spec.name
                );
                assert!(
                    err["hint"].as_str().unwrap().contains(name.as_str()),
                    "{}: {err}",
                    spec.name
                );
                checked += 1;
            }
        }
    }
    // Every tool's every argument: a change that drops tools or arguments shows here.
    assert!(checked > 300, "only {checked} cases");
    assert_eq!(
        orders_placed(&ctx, &rt),
        0,
        "a refused call placed an order"
    );
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string {}", Value::String(s.clone())),
        _ => unreachable!(),
    }
}

#[test]
fn numbers_as_strings_are_refused_inside_objects_and_arrays_too() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = State::open(state_dir.path()).unwrap();
    let ctx = docs_context("test", &state).unwrap();
    let rt = rt();
    let cases = [
        (
            "option_strategy",
            json!({"spot": 100, "rate": 0.04, "legs": [{"type": "call", "strike": 100, "quantity": 1},
                {"type": "put", "strike": 90, "quantity": "1_0"}]}),
            "legs[1].quantity: expected a number, got the string \"1_0\"",
        ),
        (
            "option_strategy",
            json!({"spot": 100, "rate": 0.04, "legs": [], "price_range": [90, "110"]}),
            "price_range[1]: expected a number, got the string \"110\"",
        ),
        (
            "get_bars",
            json!({"source": {"csv": 5}}),
            "source.csv: expected a string, got the number 5",
        ),
        (
            "factor_analysis",
            json!({"universe": [{"csv": "a.csv"}, {"symbol": "AAPL", "account": 7}], "factor": "close"}),
            "universe[1].account: expected a string, got the number 7",
        ),
        (
            "get_trade_history",
            json!({"start": "2026-01-01", "end": "2026-01-31", "side": 1}),
            "side: expected a string or null, got the number 1",
        ),
        (
            "place_order",
            json!({"account": "SIM-PAPER", "symbol": "AAPL", "side": "buy", "quantity": 1, "type": null}),
            "type: expected a string, got null",
        ),
    ];
    for (tool, args, want) in cases {
        let out = rt.block_on(call(&ctx, tool, args)).unwrap();
        let err = &out.structured["error"];
        assert_eq!(err["code"], "invalid_argument", "{tool}: {err}");
        assert_eq!(err["message"], want, "{tool}");
    }
    // A null the argument could simply leave out says so.
    let out = rt
        .block_on(call(&ctx, "get_orders", json!({"status": null})))
        .unwrap();
    assert!(
        out.structured["error"]["hint"]
            .as_str()
            .unwrap()
            .starts_with("leave status out to take its default"),
        "{}",
        out.structured
    );
    assert_eq!(orders_placed(&ctx, &rt), 0);
}

#[test]
fn real_numbers_keep_their_digits_and_place_what_they_say() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = State::open(state_dir.path()).unwrap();
    let ctx = docs_context("test", &state).unwrap();
    let rt = rt();
    // 1e0 as a JSON number is the number one; only a string is refused.
    let placed = rt
        .block_on(call(
            &ctx,
            "place_order",
            json!({"account": "SIM-PAPER", "symbol": "AAPL", "side": "buy", "quantity": 1e0, "client_order_id": "num-1"}),
        ))
        .unwrap()
        .structured;
    assert_eq!(placed["status"], "ok", "{placed}");
    assert_eq!(placed["filled_quantity"], json!(1.0));
    let refused = rt
        .block_on(call(
            &ctx,
            "place_order",
            json!({"account": "SIM-PAPER", "symbol": "AAPL", "side": "buy", "quantity": "1_0", "client_order_id": "num-2"}),
        ))
        .unwrap()
        .structured;
    assert_eq!(refused["error"]["code"], "invalid_argument", "{refused}");
    assert_eq!(orders_placed(&ctx, &rt), 1);
}

#[test]
fn null_arguments_are_not_an_object_and_omitted_ones_are_no_arguments() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = State::open(state_dir.path()).unwrap();
    let ctx = docs_context("test", &state).unwrap();
    let rt = rt();
    for spec in tools() {
        for bad in [Value::Null, json!("x"), json!([1]), json!(5)] {
            assert_eq!(
                rt.block_on(call(&ctx, spec.name, bad)).unwrap_err(),
                CallError::ArgumentsNotObject,
                "{}",
                spec.name
            );
        }
    }
    // A tool whose arguments are all optional answers {} (what a transport passes for
    // arguments left out).
    for tool in [
        "get_accounts",
        "get_positions",
        "get_server_health",
        "get_orders",
    ] {
        let out = rt.block_on(call(&ctx, tool, json!({}))).unwrap().structured;
        assert_eq!(out["status"], "ok", "{tool}: {out}");
    }
}
