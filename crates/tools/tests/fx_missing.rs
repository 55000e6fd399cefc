//! A currency without a rate never fails a call: a Bursa (MYR) account holding USD 120.40
//! of cash, one USD share and a closed USD lot, with no USD/MYR rate anywhere. Every
//! portfolio tool answers; each USD row is left out of the MYR totals with a note naming
//! the pair and the fix (docs/methodology/fx.md). Figures worked by hand:
//!
//! - MYR cash: 20,000.00 − 1000 × 9.80 − 8.00 + 400 × 10.30 = 14,312.00 (M2's commission
//!   is paid in USD).
//! - USD cash: 253.40 − 2 × 150 − 1.00 + 170 − 1.00 − 1.00 = 120.40, left out.
//! - 1155: 600 held, mark 10.50: market value 6,300.00; cost 5,880 + 4.80 of the opening
//!   commission still open; unrealized 415.20.
//! - AAPL: 1 held, mark 180: USD 180.00, left out.
//! - Realized: 1155's lot 400 × 0.50 = 200.00 − 3.20 (its share of the MYR opening
//!   commission; the USD closing commission cannot be converted) = 196.80; AAPL's lot
//!   (USD) left out.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use serde_json::{Value, json};
use tradedesk_brokers::{BookBroker, parse_book};
use tradedesk_tools::{ToolContext, call};

const BOOK: &str = include_str!("../../../tests/fixtures/myr-no-usd-rate-book.json");

fn ctx() -> ToolContext {
    let book = parse_book("myr", BOOK).unwrap();
    ToolContext::new("test").with_broker(Arc::new(BookBroker::new("myr", book)), None)
}

fn run(tool: &str, args: Value) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt.block_on(call(&ctx(), tool, args)).unwrap().structured;
    assert_eq!(r["status"], "ok", "{tool}: {r}");
    r
}

fn notes(r: &Value) -> Vec<String> {
    r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

/// The note naming the USD/MYR pair and the fix, which must list `rows`.
fn assert_usd_note(r: &Value, rows: &[&str]) {
    let all = notes(r);
    let note = all
        .iter()
        .find(|n| n.starts_with("no USD/MYR rate on or before"))
        .unwrap_or_else(|| panic!("no USD/MYR note in {all:?}"));
    assert!(note.contains("fx_file"), "{note}");
    assert!(note.contains("fx_source = \"ecb\""), "{note}");
    for row in rows {
        assert!(note.contains(row), "{row} not in {note}");
    }
}

#[test]
fn get_accounts_leaves_the_usd_cash_out_with_a_note() {
    let r = run("get_accounts", json!({}));
    let a = &r["accounts"][0];
    assert_eq!(a["cash"], json!(14312.0));
    assert_eq!(a["positions_value"], json!(6300.0));
    assert_eq!(a["total_value"], json!(20612.0));
    assert_eq!(r["total_value"], json!(20612.0));
    assert_usd_note(
        &r,
        &[
            "cash USD 120.40 in MY-1",
            "NASDAQ:AAPL in MY-1 (market value USD 180.00)",
        ],
    );
    assert!(
        notes(&r)
            .iter()
            .any(|n| n
                .contains("commissions of 1 fill(s) paid in USD could not be converted into MYR")),
        "{:?}",
        notes(&r)
    );
}

#[test]
fn get_positions_shows_the_usd_position_with_null_converted_figures() {
    let r = run("get_positions", json!({}));
    let positions = r["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 2);
    let aapl = positions.iter().find(|p| p["symbol"] == "AAPL").unwrap();
    assert_eq!(aapl["market_value"], json!(180.0));
    assert_eq!(aapl["market_value_converted"], Value::Null);
    assert_eq!(aapl["weight_pct"], Value::Null);
    let bank = positions.iter().find(|p| p["symbol"] == "1155").unwrap();
    assert_eq!(bank["market_value_converted"], json!(6300.0));
    assert_eq!(bank["unrealized_pnl_converted"], json!(415.2));
    assert_eq!(bank["weight_pct"], json!(100.0));
    assert_eq!(r["total_market_value"], json!(6300.0));
    assert_usd_note(&r, &["NASDAQ:AAPL in MY-1"]);
    // Filtered to the MYR position, the USD one is not mentioned.
    let only = run("get_positions", json!({"symbol": "1155"}));
    assert!(!notes(&only).iter().any(|n| n.starts_with("no USD/MYR")));
}

#[test]
fn get_portfolio_summary_and_get_exposure_answer() {
    let r = run("get_portfolio_summary", json!({}));
    assert_eq!(r["total_value"], json!(20612.0));
    assert_eq!(r["cash_value"], json!(14312.0));
    assert_eq!(r["positions_value"], json!(6300.0));
    assert_eq!(r["unrealized_pnl"], json!(415.2));
    let by_currency = r["by_currency"].as_array().unwrap();
    assert_eq!(by_currency.len(), 1, "{by_currency:?}");
    assert_usd_note(&r, &["cash USD 120.40 in MY-1", "NASDAQ:AAPL in MY-1"]);

    let e = run("get_exposure", json!({"by": "currency"}));
    assert_eq!(e["gross_total"], json!(6300.0));
    assert_eq!(e["buckets"].as_array().unwrap().len(), 1);
    assert_usd_note(&e, &["NASDAQ:AAPL in MY-1"]);
}

#[test]
fn realized_pnl_journal_and_performance_answer_unfiltered() {
    let r = run(
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-03-31", "include_lots": true}),
    );
    assert_eq!(r["net_pnl"], json!(196.8));
    assert_eq!(r["lot_count"], json!(1));
    assert_usd_note(&r, &["1 closed lot(s)"]);
    assert!(
        notes(&r)
            .iter()
            .any(|n| n.contains("commissions of 1 fill(s) paid in USD")),
        "{:?}",
        notes(&r)
    );
    assert_eq!(r["lots"][0]["commission_known"], json!(false));

    let j = run(
        "analyze_trades",
        json!({"start": "2026-01-01", "end": "2026-03-31"}),
    );
    assert_usd_note(&j, &["1 closed lot(s)"]);

    let p = run(
        "get_performance",
        json!({"start": "2026-01-01", "end": "2026-03-31"}),
    );
    assert!(
        notes(&p).iter().any(|n| n.starts_with("no USD/MYR rate")),
        "{:?}",
        notes(&p)
    );
}

#[test]
fn asking_in_the_unquoted_currency_leaves_the_myr_rows_out_and_an_unknown_one_is_an_error() {
    // USD is a currency of the book: MYR rows are left out of the USD totals.
    let r = run("get_accounts", json!({"currency": "USD"}));
    assert_eq!(r["total_value"], json!(300.4)); // 120.40 cash + 180.00 AAPL
    assert!(notes(&r).iter().any(|n| n.starts_with("no MYR/USD rate")));
    // The account's own figures (MYR) still leave the USD rows out, and say so.
    let a = &r["accounts"][0];
    assert_eq!(a["cash"], json!(14312.0));
    assert_eq!(a["total_value_converted"], json!(300.4));
    assert!(
        notes(&r).iter().any(|n| n.starts_with("no USD/MYR rate")
            && n.contains("left out of the account's totals in MYR")
            && n.contains("cash USD 120.40 in MY-1")),
        "{:?}",
        notes(&r)
    );
    // JPY: nothing is held in it and no rate mentions it.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let e = rt
        .block_on(call(&ctx(), "get_accounts", json!({"currency": "JPY"})))
        .unwrap()
        .structured;
    assert_eq!(e["error"]["code"], "no_fx_rate");
}

#[test]
fn server_health_lists_the_missing_pairs() {
    let r = run("get_server_health", json!({}));
    let missing = r["fx"]["missing"].as_array().unwrap();
    assert!(missing.contains(&json!("USD/MYR")), "{missing:?}");
}
