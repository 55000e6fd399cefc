//! get_realized_pnl's lot pages: every lot of a period is reachable through next_cursor,
//! the pages concatenate to the full list, and the totals never depend on the page.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_brokers::{BookBroker, parse_book};
use tradedesk_tools::{ToolContext, call};

/// 2,345 round trips of 3 shares (bought at 100 + k cents, sold a day later at
/// 100.10 + k cents, 0.07 commission each way, so every lot nets 0.16): more lots than
/// two pages of the default 1,000.
const ROUND_TRIPS: usize = 2_345;

fn busy_book() -> String {
    let mut fills = String::new();
    let start = chrono::NaiveDate::from_ymd_opt(2020, 1, 1).unwrap();
    for k in 0..ROUND_TRIPS {
        let day = start + chrono::Days::new(k as u64);
        let buy = Decimal::new(10_000 + (k % 500) as i64, 2);
        let sell = buy + Decimal::new(10, 2);
        for (side, price, t, n) in [("buy", buy, day, 0), ("sell", sell, day, 1)] {
            if !fills.is_empty() {
                fills.push(',');
            }
            write!(
                fills,
                r#"{{"id": "F{k}-{n}", "account": "U1", "exchange": "NASDAQ", "symbol": "AAPL", "side": "{side}", "quantity": "3", "price": "{price}", "commission": "0.07", "time": "{t}T1{n}:00:00-05:00"}}"#
            )
            .unwrap();
        }
    }
    format!(
        r#"{{"format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-12-31",
        "accounts": [{{"id": "U1", "broker": "ibkr", "currency": "USD"}}],
        "instruments": [{{"symbol": "AAPL", "exchange": "NASDAQ", "currency": "USD", "asset_class": "equity"}}],
        "fx_rates": [{{"base": "EUR", "quote": "USD", "rate": "1.10", "date": "2019-12-31"}}],
        "fills": [{fills}]}}"#
    )
}

fn ctx() -> ToolContext {
    let book = parse_book("busy", &busy_book()).unwrap();
    ToolContext::new("test").with_broker(Arc::new(BookBroker::new("busy", book)), None)
}

/// The answer, or the error object of a failed call.
fn run(ctx: &ToolContext, args: Value) -> Result<Value, Value> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt
        .block_on(call(ctx, "get_realized_pnl", args))
        .unwrap()
        .structured;
    if r["status"] == "ok" {
        Ok(r)
    } else {
        Err(r["error"].clone())
    }
}

fn dec(v: &Value) -> Decimal {
    Decimal::from_str(&v.to_string()).unwrap_or_else(|_| panic!("not a number: {v}"))
}

fn period(extra: Value) -> Value {
    let mut args = json!({"start": "2020-01-01", "end": "2026-12-31"});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            args[k] = v;
        }
    }
    args
}

#[test]
fn every_lot_is_reachable_page_by_page_and_the_totals_never_depend_on_the_page() {
    let ctx = ctx();
    let whole = run(&ctx, period(json!({}))).unwrap();
    assert_eq!(whole["lot_count"], ROUND_TRIPS);
    // Each lot: 0.30 gross less 0.14 of commissions.
    assert_eq!(
        dec(&whole["net_pnl"]),
        Decimal::new(16, 2) * Decimal::from(ROUND_TRIPS)
    );

    for limit in [None, Some(1000), Some(7), Some(1)] {
        let mut args = period(json!({"include_lots": true}));
        if let Some(l) = limit {
            args["lots_limit"] = json!(l);
        }
        let mut all: Vec<Value> = Vec::new();
        let mut pages = 0;
        loop {
            let page = run(&ctx, args.clone()).unwrap();
            pages += 1;
            for field in ["net_pnl", "gross_pnl", "commissions", "lot_count", "groups"] {
                assert_eq!(page[field], whole[field], "{field} on page {pages}");
            }
            let lots = page["lots"].as_array().unwrap();
            assert!(lots.len() <= limit.unwrap_or(1000));
            all.extend(lots.iter().cloned());
            match page.get("next_cursor") {
                Some(c) => {
                    let notes = page["notes"].to_string();
                    assert!(notes.contains("pass next_cursor as cursor"), "{notes}");
                    args["cursor"] = c.clone();
                }
                None => break,
            }
            if limit == Some(1) && pages > 30 {
                // One-lot pages work the same all the way; skip to the last ones.
                let c = args["cursor"].as_str().unwrap().to_owned();
                let fields: Vec<&str> = c.split('-').collect();
                assert_eq!(fields[1], pages.to_string());
                break;
            }
        }
        if limit == Some(1) {
            continue;
        }
        let expected_pages = ROUND_TRIPS.div_ceil(limit.unwrap_or(1000));
        assert_eq!(pages, expected_pages, "limit {limit:?}");
        assert_eq!(all.len(), ROUND_TRIPS);
        // In closing order, each lot once.
        let ids: Vec<&str> = all
            .iter()
            .map(|l| l["close_fill_id"].as_str().unwrap())
            .collect();
        let expected: Vec<String> = (0..ROUND_TRIPS).map(|k| format!("F{k}-1")).collect();
        assert_eq!(ids, expected);
        let sum: Decimal = all.iter().map(|l| dec(&l["net_pnl_converted"])).sum();
        assert_eq!(sum, dec(&whole["net_pnl"]));
    }
}

#[test]
fn a_bad_or_foreign_cursor_is_an_invalid_argument_that_says_how_to_fix_it() {
    let ctx = ctx();
    let first = run(
        &ctx,
        period(json!({"include_lots": true, "lots_limit": 10})),
    )
    .unwrap();
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    for (args, says) in [
        (
            period(json!({"include_lots": true, "cursor": "page-2"})),
            "is not a cursor get_realized_pnl returned",
        ),
        (
            period(
                json!({"include_lots": true, "cursor": cursor.replace("lots-10-", "lots-99999-")}),
            ),
            "is not a cursor get_realized_pnl returned",
        ),
        (
            json!({"start": "2021-01-01", "end": "2026-12-31", "include_lots": true, "cursor": cursor}),
            "was made for another period, filter or currency",
        ),
        (
            period(json!({"include_lots": true, "currency": "EUR", "cursor": cursor})),
            "was made for another period, filter or currency",
        ),
        (
            period(json!({"include_lots": true, "lots_limit": 0})),
            "lots_limit is 0: it must be 1..=1000",
        ),
        (
            period(json!({"include_lots": true, "lots_limit": 1001})),
            "lots_limit is 1001",
        ),
        (
            period(json!({"include_lots": false, "cursor": cursor})),
            "include_lots is false",
        ),
    ] {
        let e = run(&ctx, args.clone()).unwrap_err();
        assert_eq!(e["code"], "invalid_argument", "{args}: {e}");
        assert!(e["message"].as_str().unwrap().contains(says), "{args}: {e}");
        assert!(!e["hint"].as_str().unwrap_or("").is_empty(), "{e}");
    }
    // The second page of ten, the same cursor asked with a larger page: lots 11 to 30.
    let next = run(
        &ctx,
        period(json!({"include_lots": true, "lots_limit": 20, "cursor": cursor})),
    )
    .unwrap();
    let lots = next["lots"].as_array().unwrap();
    assert_eq!(lots.len(), 20);
    assert_eq!(lots[0]["close_fill_id"], "F10-1");
    // A cursor implies include_lots.
    let implied = run(&ctx, period(json!({"cursor": cursor}))).unwrap();
    assert_eq!(implied["lots"][0]["close_fill_id"], "F10-1");
}
