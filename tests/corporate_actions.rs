//! Corporate actions, option events and histories that start mid-life, through the
//! tools: a book worked by hand (`tests/fixtures/actions/book.json`), the book format's
//! rules for them, and properties (a split never changes cost or realized P&L, a symbol
//! change is invisible to P&L, every action round-trips through the book file).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::sync::Arc;

use chrono::{Duration, NaiveDate};
use proptest::prelude::*;
use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_brokers::{BookBroker, parse_book, write_book};
use tradedesk_core::{ActionKind, Book};
use tradedesk_tools::{ToolContext, call};

const BOOK: &str = include_str!("fixtures/actions/book.json");

fn context(book: Book) -> ToolContext {
    ToolContext::new("test").with_broker(Arc::new(BookBroker::new("actions", book)), None)
}

fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt.block_on(call(ctx, name, args)).unwrap().structured;
    assert_eq!(out["status"], "ok", "{name}: {out}");
    out
}

fn num(v: &Value) -> Decimal {
    let f = v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));
    Decimal::from_str_exact(&f.to_string()).unwrap().round_dp(8)
}

fn group<'a>(out: &'a Value, key: &str) -> &'a Value {
    out["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == key)
        .unwrap_or_else(|| panic!("no group {key} in {out}"))
}

fn d(text: &str) -> Decimal {
    Decimal::from_str_exact(text).unwrap()
}

#[test]
fn every_action_gives_the_figures_worked_by_hand() {
    let ctx = context(parse_book("actions", BOOK).unwrap());
    let realized = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-01-01", "end": "2026-06-30", "group_by": "symbol", "include_lots": true}),
    );
    // (symbol, net, gross, commissions), each worked by hand:
    let cases = [
        // 12,000 bought at 0.50 (fee 6) become 480 at 12.50 by the 1-for-25 reverse split,
        // then sold at 13.00 (fee 2): (13.00 - 12.50) x 480 = 240, net 232.
        ("NASDAQ:MULN", "232", "240", "8"),
        // 1,000 bought at 4.00 (fee 1), tendered for 5.25 cash: 1,250, net 1,249.
        ("NASDAQ:ELAN", "1249", "1250", "1"),
        // The spun-off 50 CHILD (one for two PARENT) take 20% of the 5,000 cost: 20 each;
        // sold at 25: 250.
        ("NYSE:CHILD", "250", "250", "0"),
        // A put sold at 2.50 (x100, fee 1) is assigned: 100 AAPL bought at 150 cost 147.50
        // each; sold at 155 (fee 1): 5 x 100 + 250 = 750, commissions 1 + 1.
        ("NASDAQ:AAPL", "748", "750", "2"),
        // Two calls bought at 1.20 (x100, fee 1.30) expire: -240, net -241.30.
        ("OPRA:XYZ260320C00030000", "-241.3", "-240", "1.3"),
        // OLD renamed NEW: 10 bought at 20, sold as NEW at 25: 50.
        ("NASDAQ:NEW", "50", "50", "0"),
        // 200 held at the start at the broker's cost of 30, sold at 35: 1,000.
        ("NYSE:HIST", "1000", "1000", "0"),
    ];
    for (key, net, gross, commissions) in cases {
        let g = group(&realized, key);
        assert_eq!(num(&g["net_pnl"]), d(net), "{key} net");
        assert_eq!(num(&g["gross_pnl"]), d(gross), "{key} gross");
        assert_eq!(num(&g["commissions"]), d(commissions), "{key} commissions");
    }
    assert_eq!(num(&realized["net_pnl"]), d("3287.7"));
    assert_eq!(realized["groups"].as_array().unwrap().len(), cases.len());
    // The option that was assigned realizes nothing itself: its premium is in the stock.
    assert!(
        !realized["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["key"] == "OPRA:AAPL260220P00150000")
    );
    let lots = realized["lots"].as_array().unwrap();
    let child = lots.iter().find(|l| l["symbol"] == "CHILD").unwrap();
    assert_eq!(
        child["open_date"], "2026-01-12",
        "a spun-off lot keeps its parent's date"
    );
    assert_eq!(num(&child["open_price"]), d("20"));
    let renamed = lots.iter().find(|l| l["symbol"] == "NEW").unwrap();
    assert_eq!(renamed["open_date"], "2026-01-05");
    let tender = lots.iter().find(|l| l["symbol"] == "ELAN").unwrap();
    assert_eq!(tender["close_fill_id"], "action:elan-tender");
    let notes = realized["notes"].to_string();
    assert!(
        notes.contains("fill lost-sell closed 50 NYSE:LOST"),
        "{notes}"
    );
    assert!(notes.contains("history starts mid-life"), "{notes}");

    // Only PARENT is still held: 100 at the 80% of the cost it kept.
    let positions = tool(&ctx, "get_positions", json!({}));
    let rows = positions["positions"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{positions}");
    assert_eq!(rows[0]["symbol"], "PARENT");
    assert_eq!(num(&rows[0]["avg_cost"]), d("40"));
    assert_eq!(num(&rows[0]["cost_basis"]), d("4000"));
    assert_eq!(num(&rows[0]["unrealized_pnl"]), d("500"));

    // Cash: the deposit, every trade's cash, the tender's 5,250 and the 500 of the sale
    // that closed nothing; the opening position moved none.
    let accounts = tool(&ctx, "get_accounts", json!({}));
    assert_eq!(num(&accounts["accounts"][0]["cash"]), d("105787.7"));

    let summary = tool(&ctx, "get_portfolio_summary", json!({}));
    assert_eq!(num(&summary["total_value"]), d("110287.7"));
    assert_eq!(num(&summary["unrealized_pnl"]), d("500"));
    let journal = tool(
        &ctx,
        "analyze_trades",
        json!({"start": "2026-01-01", "end": "2026-06-30"}),
    );
    assert_eq!(journal["trade_count"], 7);
    assert_eq!(num(&journal["net_pnl"]), d("3287.7"));

    let history = tool(
        &ctx,
        "get_trade_history",
        json!({"start": "2026-01-01", "end": "2026-06-30"}),
    );
    let kind_of = |id: &str| {
        history["fills"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["id"] == id)
            .map(|f| f.get("kind").cloned().unwrap_or(Value::Null))
            .unwrap_or_else(|| panic!("no fill {id} in {history}"))
    };
    assert_eq!(kind_of("action:elan-tender"), "action");
    assert_eq!(kind_of("action:call-expired"), "action");
    assert_eq!(kind_of("opening:U1:NYSE:HIST"), "opening");
    assert_eq!(kind_of("muln-buy"), Value::Null);

    let health = tool(&ctx, "get_server_health", json!({}));
    let unexplained = health["unexplained_closes"].as_array().unwrap();
    assert_eq!(unexplained.len(), 1, "{health}");
    assert_eq!(unexplained[0]["fill_id"], "lost-sell");
    assert_eq!(num(&unexplained[0]["quantity"]), d("50"));
}

#[test]
fn the_performance_walk_applies_actions_on_their_day() {
    let ctx = context(parse_book("actions", BOOK).unwrap());
    let perf = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-01-02", "end": "2026-06-30"}),
    );
    // The end value is the account's whole value: cash plus PARENT at 45.
    assert_eq!(num(&perf["end_value"]), d("110287.7"), "{perf}");
}

#[test]
fn a_split_alone_changes_no_cost() {
    let book = json!({
        "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-03-01",
        "accounts": [{"id": "A", "broker": "ibkr", "currency": "USD"}],
        "instruments": [{"exchange": "X", "symbol": "S", "currency": "USD", "asset_class": "equity"}],
        "fills": [
            {"id": "b1", "account": "A", "exchange": "X", "symbol": "S", "side": "buy", "quantity": "100", "price": "10.01", "commission": "1", "time": "2026-01-02T10:00:00Z"},
            {"id": "b2", "account": "A", "exchange": "X", "symbol": "S", "side": "buy", "quantity": "7", "price": "9.99", "time": "2026-01-03T10:00:00Z"}
        ],
        "corporate_actions": [
            {"id": "s", "account": "A", "exchange": "X", "symbol": "S", "kind": "split", "date": "2026-02-01", "new_units": "3", "old_units": "1"}
        ]
    });
    let ctx = context(parse_book("split", &book.to_string()).unwrap());
    let positions = tool(&ctx, "get_positions", json!({}));
    let row = &positions["positions"][0];
    assert_eq!(num(&row["quantity"]), d("321"));
    // 100 x 10.01 + 7 x 9.99 + 1 = 1,071.93, whatever the split's rounded prices.
    assert_eq!(num(&row["cost_basis"]), d("1071.93"));
}

#[test]
fn bad_actions_are_refused_with_their_path() {
    let base = |actions: Value| {
        json!({
            "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-03-01",
            "accounts": [{"id": "A", "broker": "ibkr", "currency": "USD"}],
            "instruments": [
                {"exchange": "X", "symbol": "S", "currency": "USD", "asset_class": "equity"},
                {"exchange": "X", "symbol": "T", "currency": "USD", "asset_class": "equity"}
            ],
            "fills": [{"id": "b1", "account": "A", "exchange": "X", "symbol": "S", "side": "buy", "quantity": "1", "price": "1", "time": "2026-01-02T10:00:00Z"}],
            "corporate_actions": actions
        })
        .to_string()
    };
    let cases = [
        (
            json!([{"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "merge", "date": "2026-02-01"}]),
            "corporate_actions[0].kind: 'merge' must be one of split",
        ),
        (
            json!([{"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "split", "date": "2026-02-01", "new_units": "0", "old_units": "1"}]),
            "corporate_actions[0].new_units: must be > 0",
        ),
        (
            json!([{"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "split", "date": "2026-02-01", "new_units": "2", "old_units": "1", "ratio": "2"}]),
            "corporate_actions[0].ratio: unknown field",
        ),
        (
            json!([{"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "symbol_change", "date": "2026-02-01", "target_exchange": "X", "target_symbol": "U"}]),
            "corporate_actions[0].target_symbol: instrument X:U is not listed",
        ),
        (
            json!([{"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "expiry", "date": "2026-02-01"}]),
            "corporate_actions[0].kind: 'expiry' applies to an option",
        ),
        (
            json!([{"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "spin_off", "date": "2026-02-01", "target_exchange": "X", "target_symbol": "T", "new_units": "1", "old_units": "1", "cost_fraction": "1.5"}]),
            "corporate_actions[0].cost_fraction: must be from 0 to 1",
        ),
        (
            json!([
                {"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "split", "date": "2026-02-01", "new_units": "2", "old_units": "1"},
                {"id": "a", "account": "A", "exchange": "X", "symbol": "S", "kind": "split", "date": "2026-02-02", "new_units": "2", "old_units": "1"}
            ]),
            "corporate_actions[1].id: duplicate corporate action id 'a'",
        ),
    ];
    for (actions, want) in cases {
        let err = parse_book("bad", &base(actions)).unwrap_err().to_string();
        assert!(err.contains(want), "want {want:?} in {err}");
    }
    let opening = json!({
        "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-03-01",
        "accounts": [{"id": "A", "broker": "ibkr", "currency": "USD"}],
        "instruments": [{"exchange": "X", "symbol": "S", "currency": "USD", "asset_class": "equity"}],
        "fills": [],
        "opening_positions": [{"account": "A", "exchange": "X", "symbol": "S", "quantity": "5", "date": "2026-01-01"}]
    });
    let err = parse_book("bad", &opening.to_string())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("opening_positions[0].cost: is required: the book has no mark of X:S"),
        "{err}"
    );
}

/// A book of one stock traded in lots of `old` units; when `applied`, a `new`-for-`old`
/// split at the `cut`-th fill's date, the fills from there on in post-split terms.
fn split_book(
    trades: &[(bool, u32, u32)],
    cut: usize,
    (new, old): (u32, u32),
    applied: bool,
) -> String {
    let split = applied.then_some((new, old));
    let fills: Vec<Value> = trades
        .iter()
        .enumerate()
        .map(|(i, &(buy, lots, cents))| {
            let day = NaiveDate::from_ymd_opt(2025, 1, 2).unwrap() + Duration::days(i64::try_from(i).unwrap());
            let mut quantity = Decimal::from(lots * old);
            let mut price = Decimal::from(cents) / Decimal::ONE_HUNDRED;
            if applied && i >= cut {
                quantity = quantity * Decimal::from(new) / Decimal::from(old);
                price = price * Decimal::from(old) / Decimal::from(new);
            }
            json!({"id": format!("f{i}"), "account": "A", "exchange": "X", "symbol": "S",
                   "side": if buy { "buy" } else { "sell" }, "quantity": quantity.normalize().to_string(),
                   "price": price.normalize().to_string(), "commission": "0.37",
                   "time": format!("{day}T15:00:00Z")})
        })
        .collect();
    let cut_day =
        NaiveDate::from_ymd_opt(2025, 1, 2).unwrap() + Duration::days(i64::try_from(cut).unwrap());
    let actions: Vec<Value> = split
        .map(|(new, old)| json!({"id": "s", "account": "A", "exchange": "X", "symbol": "S", "kind": "split",
                                 "date": cut_day.to_string(), "new_units": new.to_string(), "old_units": old.to_string()}))
        .into_iter()
        .collect();
    json!({
        "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2025-12-31",
        "accounts": [{"id": "A", "broker": "ibkr", "currency": "USD"}],
        "instruments": [{"exchange": "X", "symbol": "S", "currency": "USD", "asset_class": "equity"}],
        "fills": fills,
        "cash": [{"account": "A", "kind": "deposit", "amount": "1000000", "currency": "USD", "time": "2025-01-01T00:00:00Z"}],
        "marks": [{"exchange": "X", "symbol": "S", "price": "10", "date": "2025-12-31"}],
        "corporate_actions": actions
    })
    .to_string()
}

fn realized_and_cost(text: &str) -> (Decimal, Decimal, Decimal) {
    let ctx = context(parse_book("p", text).unwrap());
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2025-01-01", "end": "2025-12-31"}),
    );
    let p = tool(&ctx, "get_accounts", json!({}));
    let positions = tool(&ctx, "get_positions", json!({}));
    let cost: Decimal = positions["positions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| num(&row["cost_basis"]))
        .sum();
    (num(&r["net_pnl"]), cost, num(&p["accounts"][0]["cash"]))
}

fn ratio() -> impl Strategy<Value = (u32, u32)> {
    // Ratios whose divisions end (powers of 2 and 5), so the unsplit book can be written
    // in post-split terms exactly.
    prop::sample::select(vec![
        (2, 1),
        (4, 1),
        (10, 1),
        (5, 2),
        (1, 2),
        (1, 4),
        (1, 25),
        (2, 5),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn a_split_never_changes_cost_realized_pnl_or_cash(
        trades in prop::collection::vec((any::<bool>(), 1u32..40, 100u32..20_000), 1..24),
        cut in 0usize..24,
        r in ratio(),
    ) {
        let cut = cut.min(trades.len());
        let plain = realized_and_cost(&split_book(&trades, cut, r, false));
        let split = realized_and_cost(&split_book(&trades, cut, r, true));
        prop_assert_eq!(plain, split);
    }

    #[test]
    fn a_symbol_change_is_invisible_to_pnl(
        trades in prop::collection::vec((any::<bool>(), 1u32..40, 100u32..20_000), 1..24),
        cut in 0usize..24,
    ) {
        let cut = cut.min(trades.len());
        let plain = split_book(&trades, cut, (1, 1), false);
        let mut renamed: Value = serde_json::from_str(&plain).unwrap();
        renamed["instruments"].as_array_mut().unwrap().push(
            json!({"exchange": "X", "symbol": "S2", "currency": "USD", "asset_class": "equity"}));
        for f in renamed["fills"].as_array_mut().unwrap().iter_mut().skip(cut) {
            f["symbol"] = json!("S2");
        }
        renamed["marks"] = json!([{"exchange": "X", "symbol": "S2", "price": "10", "date": "2025-12-31"},
                                  {"exchange": "X", "symbol": "S", "price": "10", "date": "2025-12-31"}]);
        let cut_day = NaiveDate::from_ymd_opt(2025, 1, 2).unwrap() + Duration::days(i64::try_from(cut).unwrap());
        renamed["corporate_actions"] = json!([{"id": "r", "account": "A", "exchange": "X", "symbol": "S",
            "kind": "symbol_change", "date": cut_day.to_string(), "target_exchange": "X", "target_symbol": "S2"}]);
        prop_assert_eq!(realized_and_cost(&plain), realized_and_cost(&renamed.to_string()));
    }

    #[test]
    fn every_action_round_trips_through_the_book_file(
        kinds in prop::collection::vec(0usize..9, 1..12),
        cents in prop::collection::vec(1u32..100_000, 12),
    ) {
        let text = BOOK;
        let mut book: Value = serde_json::from_str(text).unwrap();
        let templates = [
            json!({"kind": "split", "new_units": "3", "old_units": "2"}),
            json!({"kind": "stock_merger", "target_exchange": "NASDAQ", "target_symbol": "NEW", "new_units": "0.5", "old_units": "1"}),
            json!({"kind": "symbol_change", "target_exchange": "NASDAQ", "target_symbol": "NEW"}),
            json!({"kind": "cash_merger", "cash_per_unit": "1.25"}),
            json!({"kind": "cash_merger", "cash_per_unit": "1.25", "quantity": "10"}),
            json!({"kind": "spin_off", "target_exchange": "NYSE", "target_symbol": "CHILD", "new_units": "1", "old_units": "3", "cost_fraction": "0.125"}),
            json!({"kind": "cash_in_lieu", "quantity": "0.5", "amount": "3.10"}),
            json!({"kind": "split", "new_units": "1", "old_units": "25"}),
            json!({"kind": "cash_merger", "cash_per_unit": "0"}),
        ];
        let actions = book["corporate_actions"].as_array_mut().unwrap();
        for (n, k) in kinds.iter().enumerate() {
            let mut a = templates[*k].clone();
            let day = NaiveDate::from_ymd_opt(2026, 1, 1).unwrap() + Duration::days(i64::from(cents[n] % 180));
            a["id"] = json!(format!("gen{n}"));
            a["account"] = json!("U1");
            a["exchange"] = json!("NASDAQ");
            a["symbol"] = json!("MULN");
            a["date"] = json!(day.to_string());
            actions.push(a);
        }
        let first = parse_book("gen", &book.to_string()).unwrap();
        let written = write_book(&first);
        let second = parse_book("written", &written).unwrap();
        prop_assert_eq!(&first.corporate_actions, &second.corporate_actions);
        let shape = |b: &Book| -> Vec<String> {
            b.fills
                .iter()
                .map(|f| format!("{} {} {} {:?} {} {} {} {} {:?}", f.id, f.account, f.instrument, f.side, f.quantity, f.price, f.commission, f.time, f.kind))
                .collect()
        };
        prop_assert_eq!(shape(&first), shape(&second));
        prop_assert_eq!(write_book(&second), written);
        let generated = first.corporate_actions.iter().filter(|a| a.id.starts_with("gen")).count();
        prop_assert_eq!(generated, kinds.len());
        let assignment = first.corporate_actions.iter().find(|a| a.id == "put-assigned").unwrap();
        let delivered = matches!(&assignment.kind, ActionKind::Assignment { fill, .. } if fill.index.is_some());
        prop_assert!(delivered, "the assignment's delivered fill is indexed");
    }
}
