//! The seven portfolio tools on a small book whose every figure is worked by hand here.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::sync::Arc;

use serde_json::{Value, json};
use tradedesk_brokers::{BookBroker, parse_book};
use tradedesk_tools::{CallError, ToolContext, call};

const SMALL: &str = include_str!("../../../tests/fixtures/small-book.json");

fn ctx_from(json_text: &str) -> ToolContext {
    let book = parse_book("small", json_text).unwrap();
    ToolContext::new("test").with_broker(Arc::new(BookBroker::new("small", book)), None)
}

fn run(ctx: &ToolContext, tool: &str, args: Value) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(call(ctx, tool, args)).unwrap().structured
}

fn small(tool: &str, args: Value) -> Value {
    run(&ctx_from(SMALL), tool, args)
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn find<'a>(items: &'a Value, field: &str, value: &str) -> &'a Value {
    items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i[field] == value)
        .unwrap_or_else(|| panic!("no {field}={value} in {items}"))
}

#[test]
fn realized_pnl_prorates_commissions_and_converts_at_the_closing_date() {
    let r = small(
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-03-31", "include_lots": true}),
    );
    assert_eq!(r["status"], "ok");
    // A3 sells 120 @170 against A1 (100 @150, comm 1.00) and A2 (50 @160, comm 1.00), comm 1.20:
    //   lot 1: gross 2000, comm 1.00 + 1.20*100/120 = 2.00 -> net 1998.00
    //   lot 2: gross  200, comm 1.00*20/50 + 0.20   = 0.60 -> net  199.40
    // F2 buys 1 MES @4950 against the short @5000 (x5): gross 250, comm 0.31 + 0.62 -> 249.07
    // M2 sells 400 1155 @10.30 against 9.80: 200 MYR gross of fees / 4.50 (2026-03-01 rate) = 44.44
    assert_eq!(num(&r["net_pnl"]), 2490.91);
    assert_eq!(num(&r["gross_pnl"]), 2494.44);
    assert_eq!(num(&r["commissions"]), 3.53);
    assert_eq!(r["lot_count"], 4);
    assert_eq!(
        num(&find(&r["groups"], "key", "NASDAQ:AAPL")["net_pnl"]),
        2197.40
    );
    assert_eq!(
        num(&find(&r["groups"], "key", "CME:MES")["net_pnl"]),
        249.07
    );
    assert_eq!(
        num(&find(&r["groups"], "key", "BURSA:1155")["net_pnl"]),
        44.44
    );
    assert_eq!(r["biggest_gain"]["fill_id"], "A3");
    assert_eq!(num(&r["biggest_gain"]["net_pnl"]), 2197.40);
    assert_eq!(r["biggest_loss"], Value::Null);
    let bursa = find(&r["lots"], "symbol", "1155");
    assert_eq!(num(&bursa["net_pnl"]), 200.0);
    assert_eq!(num(&bursa["fx_rate"]), 1.0 / 4.5);
    assert_eq!(bursa["commission_known"], false);
    let short = find(&r["lots"], "symbol", "MES");
    assert_eq!(short["side"], "short");
    assert!(
        r["notes"]
            .to_string()
            .contains("gross of fees for BURSA:1155")
    );
}

#[test]
fn realized_pnl_in_ringgit_rounds_each_lot_once() {
    let r = small(
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-03-31", "currency": "MYR", "group_by": "none"}),
    );
    // 1998 x 4.40 = 8791.20; 199.40 x 4.40 = 877.36; 249.07 x 4.50 = 1120.815 -> 1120.82; 200.00
    assert_eq!(num(&r["net_pnl"]), 10989.38);
    assert_eq!(r["groups"], json!([]));
}

#[test]
fn a_period_without_closed_lots_is_a_true_zero() {
    let r = small(
        "get_realized_pnl",
        json!({"start": "2025-01-01", "end": "2025-12-31"}),
    );
    assert_eq!(r["status"], "ok");
    assert_eq!(num(&r["net_pnl"]), 0.0);
    assert_eq!(r["lot_count"], 0);
    assert!(r["notes"][0].as_str().unwrap().contains("true zero"));
}

#[test]
fn positions_value_margin_and_cash_settled_alike() {
    let r = small("get_positions", json!({}));
    let aapl = find(&r["positions"], "symbol", "AAPL");
    assert_eq!(num(&aapl["quantity"]), 30.0);
    assert_eq!(num(&aapl["avg_cost"]), 160.0);
    assert_eq!(num(&aapl["cost_basis"]), 4800.60); // 30 x 160 + the 0.60 of A2's commission still open
    assert_eq!(num(&aapl["market_value"]), 5400.0);
    assert_eq!(num(&aapl["unrealized_pnl"]), 599.40);
    let mes = find(&r["positions"], "symbol", "MES");
    assert_eq!(mes["side"], "short");
    assert_eq!(num(&mes["quantity"]), -1.0);
    assert_eq!(num(&mes["notional"]), -24500.0);
    assert_eq!(num(&mes["market_value"]), 500.0); // margin-settled: gross unrealized P&L
    assert_eq!(num(&mes["unrealized_pnl"]), 499.69);
    let bank = find(&r["positions"], "symbol", "1155");
    assert_eq!(num(&bank["market_price"]), 10.50); // the 2026-04-01 mark is after as_of
    assert_eq!(bank["market_price_date"], "2026-03-30");
    assert_eq!(num(&bank["market_value_converted"]), 1400.0);
    assert_eq!(num(&bank["unrealized_pnl_converted"]), 93.33);
    assert_eq!(num(&r["total_market_value"]), 7300.0);
    // weights over |notional_converted|: 5400, 24500, 1400 of 31300
    assert_eq!(num(&mes["weight_pct"]), 78.27);
}

#[test]
fn accounts_and_summary_agree_to_the_cent() {
    let a = small("get_accounts", json!({}));
    let us = find(&a["accounts"], "account", "US-1");
    // 30000 + 12 - 15000 - 8000 + 20400 - (1 + 1 + 1.20) + 250 (MES closed gross) - 1.24
    assert_eq!(num(&us["cash"]), 27657.56);
    assert_eq!(num(&us["positions_value"]), 5900.0);
    let my = find(&a["accounts"], "account", "MY-1");
    assert_eq!(num(&my["cash"]), 14320.0);
    assert_eq!(num(&my["total_value_converted"]), 4582.22); // 20620 / 4.50
    let s = small("get_portfolio_summary", json!({}));
    assert_eq!(num(&s["total_value"]), num(&a["total_value"]));
    assert_eq!(num(&s["total_value"]), 38139.78);
    assert_eq!(
        num(&find(&s["by_currency"], "currency", "MYR")["pct"]),
        12.01
    );
}

#[test]
fn exposure_buckets_include_unclassified_and_add_to_100() {
    let r = small("get_exposure", json!({"by": "sector"}));
    assert_eq!(num(&r["gross_total"]), 31300.0);
    assert_eq!(
        num(&find(&r["buckets"], "key", "Unclassified")["pct"]),
        78.27
    );
    assert_eq!(r["buckets"][0]["key"], "Unclassified");
    let sum: f64 = r["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| num(&b["pct"]))
        .sum();
    assert!((sum - 100.0).abs() <= 0.02, "{sum}");
    assert!(r["notes"].to_string().contains("Unclassified"));
    let net = small("get_exposure", json!({"by": "symbol", "basis": "net"}));
    assert_eq!(num(&net["total"]), -17700.0);
    assert_eq!(num(&find(&net["buckets"], "key", "CME:MES")["pct"]), -78.27);
}

#[test]
fn trade_history_is_newest_first_by_trade_date_in_the_fills_own_offset() {
    let r = small(
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-03-31"}),
    );
    let ids: Vec<&str> = r["fills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["M2", "F2", "A3", "F1", "A2", "A1", "M1"]);
    assert_eq!(r["fills"][0]["commission"], Value::Null);
    // M1 is 2026-01-01 in UTC but 2026-01-02 in Kuala Lumpur: its trade date.
    let jan1 = small(
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-01-01"}),
    );
    assert_eq!(jan1["total_count"], 0);
    let jan2 = small(
        "get_trade_history",
        json!({"start": "2026-01-02", "end": "2026-01-02"}),
    );
    assert_eq!(jan2["fills"][0]["id"], "M1");
    let limited = small(
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-03-31", "limit": 2, "side": "buy"}),
    );
    assert_eq!(limited["count"], 2);
    assert_eq!(limited["total_count"], 4);
    assert_eq!(limited["truncated"], true);
}

#[test]
fn health_reconciles_reported_positions_against_the_fills() {
    let r = small("get_server_health", json!({}));
    assert_eq!(r["health"], "ok");
    assert_eq!(r["brokers"][0]["mode"], "book");
    assert_eq!(
        r["reconciliation"],
        json!([{
            "account": "MY-1", "exchange": "BURSA", "symbol": "1155",
            "reported_quantity": 500.0, "implied_quantity": 600.0, "difference": -100.0
        }])
    );
    assert_eq!(r["fx"]["pairs"][0]["rate"], 4.5);
    assert_eq!(r["fx"]["stale"], json!(["USD/MYR"]));
}

struct ErrorCase {
    tool: &'static str,
    args: Value,
    code: &'static str,
    message: &'static str,
}

#[test]
fn bad_arguments_are_error_results_that_name_the_argument() {
    let cases = [
        ErrorCase {
            tool: "get_realized_pnl",
            args: json!({"start": "last quarter", "end": "2026-03-31"}),
            code: "invalid_date",
            message: "start: 'last quarter'",
        },
        ErrorCase {
            tool: "get_realized_pnl",
            args: json!({"start": "2026-03-01", "end": "2026-01-01"}),
            code: "invalid_date_range",
            message: "end 2026-01-01 is before start",
        },
        ErrorCase {
            tool: "get_realized_pnl",
            args: json!({"end": "2026-01-01"}),
            code: "invalid_argument",
            message: "missing argument `start`",
        },
        ErrorCase {
            tool: "get_realized_pnl",
            args: json!({"start": "2026-01-01", "end": "2026-01-31", "group": "month"}),
            code: "invalid_argument",
            message: "unknown argument `group`",
        },
        ErrorCase {
            tool: "get_realized_pnl",
            args: json!({"start": "2026-01-01", "end": "2026-01-31", "group_by": "week"}),
            code: "invalid_argument",
            message: "group_by: unknown variant `week`",
        },
        ErrorCase {
            tool: "get_realized_pnl",
            args: json!({"start": "2026-01-01", "end": "2026-03-31", "currency": "EUR"}),
            code: "no_fx_rate",
            message: "no rate at all into EUR",
        },
        ErrorCase {
            tool: "get_positions",
            args: json!({"currency": "usd"}),
            code: "invalid_argument",
            message: "currency: 'usd'",
        },
        ErrorCase {
            tool: "get_positions",
            args: json!({"symbol": "TSLA"}),
            code: "unknown_symbol",
            message: "symbol: no instrument 'TSLA'",
        },
        ErrorCase {
            tool: "get_positions",
            args: json!({"account": "NOPE"}),
            code: "unknown_account",
            message: "account: no account 'NOPE'",
        },
        ErrorCase {
            tool: "get_positions",
            args: json!({"broker": "alpaca"}),
            code: "unknown_broker",
            message: "broker: no configured account",
        },
        ErrorCase {
            tool: "get_trade_history",
            args: json!({"start": "2026-01-01", "end": "2026-01-31", "limit": 0}),
            code: "invalid_argument",
            message: "limit: 0 is outside 1..=1000",
        },
        ErrorCase {
            tool: "get_trade_history",
            args: json!({"start": "2026-01-01", "end": "2026-01-31", "limit": "5"}),
            code: "invalid_argument",
            message: "limit: expected an integer or null, got the string \"5\"",
        },
        ErrorCase {
            tool: "get_exposure",
            args: json!({}),
            code: "invalid_argument",
            message: "missing argument `by`",
        },
        ErrorCase {
            tool: "get_server_health",
            args: json!({"verbose": true}),
            code: "invalid_argument",
            message: "unknown argument `verbose`",
        },
    ];
    for case in cases {
        let r = small(case.tool, case.args.clone());
        assert_eq!(r["status"], "error", "{} {}", case.tool, case.args);
        assert_eq!(
            r["error"]["code"], case.code,
            "{} {}: {r}",
            case.tool, case.args
        );
        let message = r["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(case.message),
            "{} {}: {message}",
            case.tool,
            case.args
        );
        assert!(!r["error"]["hint"].as_str().unwrap().is_empty());
    }
}

#[test]
fn symbols_resolve_bare_or_qualified_and_ambiguity_is_named() {
    let r = small("get_positions", json!({"symbol": "BURSA:1155"}));
    assert_eq!(r["positions"].as_array().unwrap().len(), 1);
    let r = small("get_positions", json!({"symbol": "aapl"}));
    assert_eq!(r["positions"][0]["symbol"], "AAPL");
    let mut book: Value = serde_json::from_str(SMALL).unwrap();
    book["instruments"].as_array_mut().unwrap().push(
        json!({"symbol": "AAPL", "exchange": "XETRA", "currency": "USD", "asset_class": "equity"}),
    );
    let r = run(
        &ctx_from(&book.to_string()),
        "get_positions",
        json!({"symbol": "AAPL"}),
    );
    assert_eq!(r["error"]["code"], "invalid_argument");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("NASDAQ:AAPL, XETRA:AAPL")
    );
    let r = small("get_positions", json!({"symbol": "Maybank"}));
    assert!(
        r["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("numeric codes such as 1155")
    );
}

#[test]
fn malformed_calls_are_call_errors_not_results() {
    let ctx = ctx_from(SMALL);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    assert_eq!(
        rt.block_on(call(&ctx, "get_nothing", json!({})))
            .unwrap_err(),
        CallError::UnknownTool("get_nothing".into())
    );
    assert_eq!(
        rt.block_on(call(&ctx, "get_accounts", json!([1])))
            .unwrap_err(),
        CallError::ArgumentsNotObject
    );
}

#[test]
fn an_account_without_cash_entries_has_unknown_cash() {
    let mut book: Value = serde_json::from_str(SMALL).unwrap();
    book["cash"] = json!([]);
    let r = run(&ctx_from(&book.to_string()), "get_accounts", json!({}));
    let us = find(&r["accounts"], "account", "US-1");
    assert_eq!(us["cash"], Value::Null);
    assert_eq!(num(&us["total_value"]), 5900.0);
    assert!(r["notes"].to_string().contains("cash is unknown"));
}

#[test]
fn a_position_without_a_mark_is_listed_but_left_out_of_totals() {
    let mut book: Value = serde_json::from_str(SMALL).unwrap();
    book["marks"]
        .as_array_mut()
        .unwrap()
        .retain(|m| m["symbol"] != "AAPL");
    let ctx = ctx_from(&book.to_string());
    let r = run(&ctx, "get_positions", json!({}));
    let aapl = find(&r["positions"], "symbol", "AAPL");
    assert_eq!(aapl["market_price"], Value::Null);
    assert_eq!(aapl["weight_pct"], Value::Null);
    assert_eq!(num(&r["total_market_value"]), 1900.0);
    assert!(r["notes"].to_string().contains("NASDAQ:AAPL in US-1"));
    let s = run(&ctx, "get_portfolio_summary", json!({}));
    assert_eq!(num(&s["positions_value"]), 1900.0);
}
