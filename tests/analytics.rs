//! Research II through the registry: option analytics against QuantLib and py_vollib
//! (committed fixtures), XIRR against pyxirr, time- and money-weighted returns on a book
//! worked by hand, perpetual-futures quotes on worked examples (and the sim's live
//! mark), and journal analytics on a small book worked by hand.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    clippy::cast_precision_loss
)]

use std::sync::Arc;

use serde_json::{Value, json};
use tradedesk_brokers::{BookBroker, parse_book};
use tradedesk_research::performance::{Flow, npv, xirr};
use tradedesk_tools::{ToolContext, call};

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args).await.unwrap().structured
}

fn desk(text: &str) -> ToolContext {
    let book = parse_book("worked", text).unwrap();
    ToolContext::new("test").with_broker(Arc::new(BookBroker::new("worked", book)), None)
}

fn fixture(path: &str) -> Value {
    let text = std::fs::read_to_string(format!(
        "{}/tests/fixtures/{path}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The issue's tolerance: 1e-9 relative, or 1e-12 absolute for values near zero.
fn agrees(ours: f64, reference: f64) -> bool {
    (ours - reference).abs() <= (1e-9 * reference.abs()).max(1e-12)
}

fn num(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} missing in {v}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn option_prices_and_greeks_agree_with_quantlib() {
    let ctx = ToolContext::new("test");
    let f = fixture("options/bsm_reference.json");
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 50, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let args = json!({
            "type": case["type"], "spot": case["spot"], "strike": case["strike"],
            "volatility": case["volatility"], "rate": case["rate"],
            "dividend_yield": case["dividend_yield"], "time_years": case["time_years"],
        });
        let out = tool(&ctx, "option_price", args.clone()).await;
        assert_eq!(out["status"], "ok", "{out:#}");
        for field in [
            "price", "delta", "gamma", "vega", "theta", "rho", "d1", "d2",
        ] {
            let (ours, theirs) = (num(&out, field), num(case, field));
            if !agrees(ours, theirs) {
                failures.push(format!("{args}: {field} {ours} vs {theirs}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn implied_volatilities_agree_with_py_vollib_and_reprice() {
    let ctx = ToolContext::new("test");
    let f = fixture("options/bsm_reference.json");
    let cases = f["iv_cases"].as_array().unwrap();
    assert!(cases.len() >= 20, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let args = json!({
            "type": case["type"], "spot": case["spot"], "strike": case["strike"],
            "rate": case["rate"], "dividend_yield": case["dividend_yield"],
            "time_years": case["time_years"], "price": case["price"],
        });
        let out = tool(&ctx, "implied_volatility", args.clone()).await;
        if out["status"] != "ok" {
            failures.push(format!("{args}: {out}"));
            continue;
        }
        let iv = num(&out, "implied_volatility");
        let reference = num(case, "implied_volatility");
        if !agrees(iv, reference) {
            failures.push(format!("{args}: {iv} vs py_vollib {reference}"));
        }
        // The contract: the volatility reprices the option to within 1e-10 relative.
        let mut priced = args.clone();
        priced.as_object_mut().unwrap().remove("price");
        priced["volatility"] = json!(iv);
        let back = num(&tool(&ctx, "option_price", priced).await, "price");
        let target = num(case, "price");
        if ((back - target) / target).abs() > 1e-10 {
            failures.push(format!("{args}: reprices to {back}, not {target}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prices_outside_the_no_arbitrage_bounds_are_refused_with_the_bound() {
    let ctx = ToolContext::new("test");
    let base = json!({"type": "call", "spot": 100, "strike": 80, "rate": 0.05, "time_years": 1});
    // Lower bound: 100 - 80 e^-0.05 = 23.90164604...
    let mut low = base.clone();
    low["price"] = json!(20.0);
    let out = tool(&ctx, "implied_volatility", low).await;
    assert_eq!(out["error"]["code"], "invalid_argument");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("below the lower bound"), "{message}");
    assert!(
        message.contains("23.901646"),
        "six or more digits: {message}"
    );
    let mut high = base;
    high["price"] = json!(100.0);
    let message = tool(&ctx, "implied_volatility", high).await["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("above the upper bound"), "{message}");
    assert!(message.contains("100.00000"), "{message}");
    // Bad arguments name themselves.
    let out = tool(
        &ctx,
        "option_price",
        json!({"type": "put", "spot": 100, "strike": 100, "volatility": -0.2, "rate": 0, "time_years": 1}),
    )
    .await;
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("volatility")
    );
    let out = tool(
        &ctx,
        "option_price",
        json!({"type": "put", "spot": 100, "strike": 100, "volatility": 0.2, "rate": 0, "time_years": 0}),
    )
    .await;
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("time_years")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strategies_break_even_at_roots_and_bound_their_extremes() {
    let ctx = ToolContext::new("test");
    let call_leg = |strike: f64, quantity: f64, premium: f64| {
        json!({"type": "call", "strike": strike, "quantity": quantity, "premium": premium,
               "volatility": 0.3, "time_years": 0.5})
    };
    // A bull call spread 95/105 for a debit of 4.
    let out = call(
        &ctx,
        "option_strategy",
        json!({"spot": 100, "rate": 0.02, "legs": [call_leg(95.0, 1.0, 7.5), call_leg(105.0, -1.0, 3.5)]}),
    )
    .await
    .unwrap();
    assert_eq!(out.images.len(), 1, "the payoff chart");
    assert!(out.images[0].starts_with(b"\x89PNG"));
    let r = out.structured;
    assert!((num(&r, "net_premium") - 4.0).abs() < 1e-12);
    let be = r["breakevens"].as_array().unwrap();
    assert_eq!(be.len(), 1, "{r:#}");
    assert!((be[0].as_f64().unwrap() - 99.0).abs() < 1e-9, "{r:#}");
    assert!((num(&r, "max_profit") - 6.0).abs() < 1e-12);
    assert!((num(&r, "max_loss") + 4.0).abs() < 1e-12);
    assert_eq!(r["payoff_at_expiry"].as_array().unwrap().len(), 101);
    let pop = num(&r, "probability_of_profit");
    assert!(pop > 0.3 && pop < 0.7, "{pop}");
    // A short straddle: two breakevens, unbounded loss, bounded profit.
    let straddle = tool(
        &ctx,
        "option_strategy",
        json!({"spot": 100, "rate": 0.0, "legs": [
            {"type": "call", "strike": 100, "quantity": -1, "premium": 6, "volatility": 0.25, "time_years": 0.25},
            {"type": "put", "strike": 100, "quantity": -1, "premium": 5, "volatility": 0.25, "time_years": 0.25}
        ]}),
    )
    .await;
    let be: Vec<f64> = straddle["breakevens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(be.len(), 2, "{straddle:#}");
    assert!((be[0] - 89.0).abs() < 1e-9 && (be[1] - 111.0).abs() < 1e-9);
    assert!((num(&straddle, "max_profit") - 11.0).abs() < 1e-12);
    assert!(straddle["max_loss"].is_null());
    // Lognormal with zero drift: P(89 < S_T < 111) from the normal CDF, worked here.
    let (sd, mu) = (0.25 * 0.5, 100f64.ln() - 0.5 * 0.0625 * 0.25);
    let cdf = |x: f64| 0.5 * erfc(-((x.ln() - mu) / sd) / std::f64::consts::SQRT_2);
    let expected = cdf(111.0) - cdf(89.0);
    assert!(
        (num(&straddle, "probability_of_profit") - expected).abs() < 1e-6,
        "{expected} vs {straddle:#}"
    );
    // A covered call: stock plus a short call; greeks sum (stock delta 1).
    let covered = tool(
        &ctx,
        "option_strategy",
        json!({"spot": 100, "rate": 0.01, "legs": [
            {"type": "stock", "quantity": 1, "premium": 100},
            {"type": "call", "strike": 110, "quantity": -1, "volatility": 0.2, "time_years": 1}
        ]}),
    )
    .await;
    let single = tool(
        &ctx,
        "option_price",
        json!({"type": "call", "spot": 100, "strike": 110, "volatility": 0.2, "rate": 0.01, "time_years": 1}),
    )
    .await;
    assert!((num(&covered["greeks"], "delta") - (1.0 - num(&single, "delta"))).abs() < 1e-12);
    assert!(covered["max_profit"].is_number() && covered["max_loss"].is_number());
    assert!(
        (num(&covered, "max_profit") - (10.0 + num(&single, "price"))).abs() < 1e-9,
        "{covered:#}"
    );
    // Bad legs name themselves.
    let bad = tool(
        &ctx,
        "option_strategy",
        json!({"spot": 100, "rate": 0, "legs": [{"type": "call", "quantity": 1, "volatility": 0.2, "time_years": 1}]}),
    )
    .await;
    assert_eq!(bad["error"]["message"], "legs[0].strike is missing");
}

/// erfc for the test's own lognormal check (Abramowitz-Stegun 7.1.26 is too coarse):
/// a continued fraction would do; the series below is enough at these arguments.
fn erfc(x: f64) -> f64 {
    // erf by its Maclaurin series, accurate for |x| < 3.
    let mut term = x;
    let mut sum = x;
    for n in 1..200 {
        term *= -x * x / f64::from(n);
        sum += term / f64::from(2 * n + 1);
    }
    1.0 - sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn xirr_agrees_with_pyxirr() {
    let f = fixture("performance/xirr_reference.json");
    let cases = f["cases"].as_array().unwrap();
    assert!(cases.len() >= 15);
    for case in cases {
        let flows: Vec<(chrono::NaiveDate, f64)> = case["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    chrono::NaiveDate::parse_from_str(f["date"].as_str().unwrap(), "%Y-%m-%d")
                        .unwrap(),
                    f["amount"].as_f64().unwrap(),
                )
            })
            .collect();
        let first = flows[0].0;
        let flows: Vec<Flow> = flows
            .iter()
            .map(|(d, a)| Flow {
                days: (*d - first).num_days() as f64,
                amount: *a,
            })
            .collect();
        let ours = xirr(&flows).unwrap_or_else(|| panic!("no rate for {}", case["name"]));
        let pyxirr = num(case, "expected_rate");
        let exact = num(case, "bisection_rate");
        // pyxirr itself is good to ~5e-10 on two cases; its bisection check to 1e-13.
        assert!(
            (ours - pyxirr).abs() <= 1e-9 * pyxirr.abs().max(1.0),
            "{}: {ours} vs pyxirr {pyxirr}",
            case["name"]
        );
        assert!(
            (ours - exact).abs() <= 1e-10 * exact.abs().max(1.0),
            "{}: {ours} vs {exact}",
            case["name"]
        );
        let scale: f64 = flows.iter().map(|f| f.amount.abs()).sum();
        assert!(npv(&flows, ours).abs() / scale < 1e-9);
    }
}

/// A book worked by hand (see the test below).
const RETURNS_BOOK: &str = r#"{
  "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-01-09",
  "accounts": [{"id": "P-1", "broker": "ibkr", "currency": "USD"},
               {"id": "P-2", "broker": "ibkr", "currency": "USD"}],
  "instruments": [{"symbol": "XYZ", "exchange": "NYSE", "currency": "USD", "asset_class": "equity"}],
  "fills": [
    {"id": "B1", "account": "P-1", "exchange": "NYSE", "symbol": "XYZ", "side": "buy", "quantity": "100", "price": "100", "commission": "0", "time": "2026-01-05T10:00:00-05:00"},
    {"id": "B2", "account": "P-1", "exchange": "NYSE", "symbol": "XYZ", "side": "buy", "quantity": "50", "price": "110", "commission": "0", "time": "2026-01-07T10:00:00-05:00"}
  ],
  "cash": [
    {"account": "P-1", "kind": "deposit", "amount": "10000", "currency": "USD", "time": "2026-01-05T09:00:00-05:00"},
    {"account": "P-1", "kind": "deposit", "amount": "5000", "currency": "USD", "time": "2026-01-07T09:00:00-05:00"},
    {"account": "P-1", "kind": "withdrawal", "amount": "-1000", "currency": "USD", "time": "2026-01-08T09:00:00-05:00"},
    {"account": "P-1", "kind": "dividend", "amount": "50", "currency": "USD", "time": "2026-01-08T12:00:00-05:00"},
    {"account": "P-2", "kind": "deposit", "amount": "777", "currency": "USD", "time": "2026-01-06T09:00:00-05:00"}
  ],
  "marks": [
    {"exchange": "NYSE", "symbol": "XYZ", "price": "100", "date": "2026-01-05"},
    {"exchange": "NYSE", "symbol": "XYZ", "price": "110", "date": "2026-01-06"},
    {"exchange": "NYSE", "symbol": "XYZ", "price": "99", "date": "2026-01-07"},
    {"exchange": "NYSE", "symbol": "XYZ", "price": "105", "date": "2026-01-08"}
  ]
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn performance_is_worked_by_hand_with_flows_and_a_benchmark() {
    let ctx = desk(RETURNS_BOOK);
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("INDEX.csv");
    std::fs::write(
        &bench,
        "date,open,high,low,close\n2026-01-02,190,190,190,190\n2026-01-05,200,200,200,200\n2026-01-08,210,210,210,210\n2026-01-09,999,999,999,999\n",
    )
    .unwrap();
    let r = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-01-06", "end": "2026-01-08", "account": "P-1",
               "benchmark": {"csv": bench.to_str().unwrap()}}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    // Close of 01-05: 100 XYZ at 100, cash 10,000 - 10,000 = 0.
    assert_eq!(r["start_value"], 10000.0);
    // 01-06: 11,000 (r = +10%). 01-07: +5,000 at the start, 50 more bought at 110 (cash
    // -500), 150 at 99 = 14,350 (r = 14,350 / 16,000 - 1). 01-08: -1,000 at the start, a
    // dividend of 50 (a return), 150 at 105 - 1,450 cash = 14,300
    // (r = 14,300 / 13,350 - 1).
    assert_eq!(r["end_value"], 14300.0);
    assert_eq!(r["net_flows"], 4000.0);
    let twr = (1.1 * (14_350.0 / 16_000.0) * (14_300.0 / 13_350.0) - 1.0) * 100.0;
    assert!((num(&r, "twr_pct") - twr).abs() < 1e-9, "{twr} vs {r:#}");
    // XIRR of -10,000 (day 0), -5,000 (day 1), +1,000 (day 2), +14,300 (day 3), by
    // bisection in Python: 1508.5749225079296% a year, 2.309498497695528% over 3 days.
    assert!(
        (num(&r, "mwr_pct") - 1_508.574_922_507_929_6).abs() < 1e-7,
        "{r:#}"
    );
    assert!((num(&r, "mwr_period_pct") - 2.309_498_497_695_528).abs() < 1e-9);
    // Benchmark: 200 (last close before 01-06) to 210 (last on or before 01-08).
    assert!((num(&r, "benchmark_return_pct") - 5.0).abs() < 1e-12);
    assert!((num(&r, "excess_return_pct") - (twr - 5.0)).abs() < 1e-9);
    assert!(
        r["method"]
            .as_str()
            .unwrap()
            .contains("V_d / (V_(d-1) + F_d)")
    );
    // The whole book adds P-2's deposit of 777 on 01-06 as a flow, not a return.
    let book = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-01-06", "end": "2026-01-08"}),
    )
    .await;
    assert_eq!(book["net_flows"], 4777.0);
    assert_eq!(book["end_value"], 15077.0);
    // end_value at as_of is what get_portfolio_summary reports.
    let at = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-01-09", "end": "2026-01-09"}),
    )
    .await;
    let summary = tool(&ctx, "get_portfolio_summary", json!({})).await;
    assert_eq!(at["end_value"], summary["total_value"]);
    assert_eq!(at["twr_pct"], 0.0);
    // After as_of: a date range the book cannot serve.
    let late = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-01-06", "end": "2026-01-10"}),
    )
    .await;
    assert_eq!(late["error"]["code"], "invalid_date_range");
    assert!(late["error"]["message"].as_str().unwrap().contains("as_of"));
}

/// Trades worked by hand:
/// - T1 Fri 03-13: sells 15 AAA at 120 (commission 1.50) against 10 bought at 100 on
///   03-02 (commission 1) and 5 of 10 bought at 110 on 03-04 (commission 1): lot 1 nets
///   200 - 1 - 1 = 198 over 11 days, lot 2 nets 50 - 0.50 - 0.50 = 49 over 9 days:
///   +247, held (10 x 11 + 5 x 9) / 15 = 10.33 days.
/// - T2 Tue 03-17: sells the other 5 at 105 (commission 0.50): -25 - 0.50 - 0.50 = -26,
///   13 days.
/// - T3 Tue 03-17: 100 BBB bought at 10 and sold at 9 the same day: -100, 0 days.
/// - T4 Mon 04-20: 20 BBB bought at 10 on 03-18, sold at 12: +40, 33 days.
const JOURNAL_BOOK: &str = r#"{
  "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-04-30",
  "accounts": [{"id": "J-1", "broker": "ibkr", "currency": "USD"}],
  "instruments": [{"symbol": "AAA", "exchange": "NYSE", "currency": "USD", "asset_class": "equity"},
                  {"symbol": "BBB", "exchange": "NYSE", "currency": "USD", "asset_class": "equity"}],
  "fills": [
    {"id": "F1", "account": "J-1", "exchange": "NYSE", "symbol": "AAA", "side": "buy", "quantity": "10", "price": "100", "commission": "1", "time": "2026-03-02T10:00:00-05:00"},
    {"id": "F2", "account": "J-1", "exchange": "NYSE", "symbol": "AAA", "side": "buy", "quantity": "10", "price": "110", "commission": "1", "time": "2026-03-04T10:00:00-05:00"},
    {"id": "F3", "account": "J-1", "exchange": "NYSE", "symbol": "AAA", "side": "sell", "quantity": "15", "price": "120", "commission": "1.5", "time": "2026-03-13T10:00:00-04:00"},
    {"id": "F4", "account": "J-1", "exchange": "NYSE", "symbol": "AAA", "side": "sell", "quantity": "5", "price": "105", "commission": "0.5", "time": "2026-03-17T10:00:00-04:00"},
    {"id": "F5", "account": "J-1", "exchange": "NYSE", "symbol": "BBB", "side": "buy", "quantity": "100", "price": "10", "commission": "0", "time": "2026-03-17T11:00:00-04:00"},
    {"id": "F6", "account": "J-1", "exchange": "NYSE", "symbol": "BBB", "side": "sell", "quantity": "100", "price": "9", "commission": "0", "time": "2026-03-17T15:00:00-04:00"},
    {"id": "F7", "account": "J-1", "exchange": "NYSE", "symbol": "BBB", "side": "buy", "quantity": "20", "price": "10", "commission": "0", "time": "2026-03-18T10:00:00-04:00"},
    {"id": "F8", "account": "J-1", "exchange": "NYSE", "symbol": "BBB", "side": "sell", "quantity": "20", "price": "12", "commission": "0", "time": "2026-04-20T10:00:00-04:00"}
  ],
  "cash": [{"account": "J-1", "kind": "deposit", "amount": "10000", "currency": "USD", "time": "2026-03-01T09:00:00-05:00"}]
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn journal_analytics_are_worked_by_hand_and_agree_with_realized_pnl() {
    let ctx = desk(JOURNAL_BOOK);
    // The book has no marks: performance values AAA at its last fill price, and says so.
    // 03-05: cash 10,000 - 1,001 - 1,101 = 7,898, plus 20 AAA at 110.
    let perf = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-03-02", "end": "2026-03-05"}),
    )
    .await;
    assert_eq!(perf["end_value"], 10098.0, "{perf:#}");
    let notes = perf["notes"].to_string();
    assert!(
        notes.contains("NYSE:AAA had no mark yet") && notes.contains("end_value includes NYSE:AAA"),
        "{perf:#}"
    );
    let range = json!({"start": "2026-03-01", "end": "2026-04-30"});
    let r = tool(&ctx, "analyze_trades", range.clone()).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["trade_count"], 4);
    assert_eq!(r["net_pnl"], 161.0);
    assert_eq!(r["win_rate_pct"], 50.0);
    assert_eq!(r["average_win"], 143.5);
    assert_eq!(r["average_loss"], -63.0);
    assert!((num(&r, "payoff_ratio") - 143.5 / 63.0).abs() < 1e-12);
    assert!((num(&r, "profit_factor") - 287.0 / 126.0).abs() < 1e-12);
    assert_eq!(r["expectancy"], 40.25);
    assert_eq!(r["largest_win"], 247.0);
    assert_eq!(r["largest_loss"], -100.0);
    let winners = (155.0 / 15.0 + 33.0) / 2.0;
    assert!((num(&r, "average_holding_days_winners") - winners).abs() < 1e-12);
    assert_eq!(r["average_holding_days_losers"], 6.5);
    assert_eq!(r["longest_win_streak"], 1);
    assert_eq!(r["longest_loss_streak"], 2);
    let weekdays: Vec<(String, u64, f64)> = r["by_weekday"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["weekday"].as_str().unwrap().to_owned(),
                w["trade_count"].as_u64().unwrap(),
                w["net_pnl"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        weekdays,
        [
            ("Monday".to_owned(), 1, 40.0),
            ("Tuesday".to_owned(), 2, -126.0),
            ("Wednesday".to_owned(), 0, 0.0),
            ("Thursday".to_owned(), 0, 0.0),
            ("Friday".to_owned(), 1, 247.0),
        ]
    );
    let periods: Vec<(u64, f64)> = r["by_holding_period"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["trade_count"].as_u64().unwrap(),
                p["net_pnl"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        periods,
        [(1, -100.0), (0, 0.0), (2, 221.0), (1, 40.0), (0, 0.0)]
    );
    let realized = tool(&ctx, "get_realized_pnl", range).await;
    assert_eq!(realized["net_pnl"], r["net_pnl"]);
    // Filters narrow both alike.
    let only = tool(
        &ctx,
        "analyze_trades",
        json!({"start": "2026-03-01", "end": "2026-04-30", "symbol": "BBB"}),
    )
    .await;
    assert_eq!(only["trade_count"], 2);
    assert_eq!(only["net_pnl"], -60.0);
    let empty = tool(
        &ctx,
        "analyze_trades",
        json!({"start": "2025-01-01", "end": "2025-12-31"}),
    )
    .await;
    assert_eq!(empty["trade_count"], 0);
    assert!(empty["win_rate_pct"].is_null() && empty["profit_factor"].is_null());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn perps_quotes_are_worked_by_hand() {
    let ctx = ToolContext::new("test");
    // Long 10x on 1,000 at 100, maintenance 0.5%, fees 0.1%: notional 10,000, size 100,
    // bust 100 x (1 - 0.1 + 0.005) = 90.5.
    let common = json!({"mark_price": 100, "side": "long", "margin": 1000,
                        "maintenance_margin_rate": 0.005, "fee_rate": 0.001});
    let mut open = common.clone();
    open["leverage"] = json!(10.0);
    let r = tool(&ctx, "quote_open_position", open).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["leverage"], 10);
    assert_eq!(r["notional"], 10000.0);
    assert_eq!(r["size"], 100.0);
    assert!((num(&r, "bust_price") - 90.5).abs() < 1e-9);
    assert!((num(&r, "bust_distance_pct") - 9.5).abs() < 1e-9);
    assert_eq!(r["valid"], true);
    let ladder = r["ladder"].as_array().unwrap();
    let moves: Vec<f64> = ladder.iter().map(|l| num(l, "price_move_pct")).collect();
    assert_eq!(moves, [-10.0, -5.0, -1.0, 1.0, 5.0, 10.0]);
    // -10%: 90 is beyond the bust: -margin.
    assert_eq!(ladder[0]["liquidated"], true);
    assert_eq!(ladder[0]["net_pnl"], -1000.0);
    // -5%: -500 - (10 + 9.5) fees.
    assert!((num(&ladder[1], "net_pnl") + 519.5).abs() < 1e-9);
    // +10%: +1,000 - (10 + 11).
    assert!((num(&ladder[5], "net_pnl") - 979.0).abs() < 1e-9);
    // Closing at 104: raw 400, fees 10 + 10.4.
    let mut close = common.clone();
    close["leverage"] = json!(10);
    close["entry_price"] = json!(100);
    close["exit_price"] = json!(104);
    let c = tool(&ctx, "quote_close_position", close).await;
    assert!((num(&c, "raw_pnl") - 400.0).abs() < 1e-9, "{c:#}");
    assert!((num(&c, "fees") - 20.4).abs() < 1e-9);
    assert!((num(&c, "net_pnl") - 379.6).abs() < 1e-9);
    assert_eq!(c["liquidated"], false);
    // Short 25x on 200 at 2,000: bust 2,080, 4% away; +5% is liquidated.
    let short = tool(
        &ctx,
        "quote_open_position",
        json!({"mark_price": 2000, "side": "short", "margin": 200, "leverage": 25}),
    )
    .await;
    assert!((num(&short, "bust_price") - 2080.0).abs() < 1e-9);
    assert!((num(&short, "bust_distance_pct") - 4.0).abs() < 1e-9);
    assert!((num(&short["ladder"][3], "net_pnl") + 50.0).abs() < 1e-9);
    assert_eq!(short["ladder"][4]["liquidated"], true);
    assert_eq!(short["ladder"][4]["net_pnl"], -200.0);
    // Invalid positions say why.
    let opened_dead = tool(
        &ctx,
        "quote_open_position",
        json!({"mark_price": 100, "side": "long", "margin": 100, "leverage": 10, "maintenance_margin_rate": 0.1}),
    )
    .await;
    assert_eq!(opened_dead["valid"], false);
    assert!(
        opened_dead["invalid_reason"]
            .as_str()
            .unwrap()
            .contains("liquidated on opening")
    );
    let fee_eats_margin = tool(
        &ctx,
        "quote_open_position",
        json!({"mark_price": 100, "side": "long", "margin": 100, "leverage": 5, "fee_rate": 0.2}),
    )
    .await;
    assert_eq!(fee_eats_margin["valid"], false);
    assert!(
        fee_eats_margin["invalid_reason"]
            .as_str()
            .unwrap()
            .contains("opening fee")
    );
    // The ladder: the listed leverages below the maximum, then the maximum once.
    let ladder = tool(
        &ctx,
        "quote_leverage_ladder",
        json!({"mark_price": 100, "side": "long", "margin": 10, "max_leverage": 40}),
    )
    .await;
    let steps: Vec<u64> = ladder["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["leverage"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [1, 2, 3, 5, 10, 25, 40]);
    let default_max = tool(
        &ctx,
        "quote_leverage_ladder",
        json!({"mark_price": 100, "side": "long", "margin": 10}),
    )
    .await;
    assert_eq!(default_max["steps"].as_array().unwrap().len(), 11);
    // Bounds: a fractional leverage, one above the maximum, a missing mark.
    for (args, field) in [
        (
            json!({"mark_price": 100, "side": "long", "margin": 10, "leverage": 10.5}),
            "leverage",
        ),
        (
            json!({"mark_price": 100, "side": "long", "margin": 10, "leverage": 41, "max_leverage": 40}),
            "leverage",
        ),
        (
            json!({"mark_price": 100, "side": "long", "margin": 0, "leverage": 2}),
            "margin",
        ),
        (
            json!({"side": "long", "margin": 10, "leverage": 2}),
            "mark_price",
        ),
    ] {
        let e = tool(&ctx, "quote_open_position", args).await;
        assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
        assert!(
            e["error"]["message"].as_str().unwrap().contains(field),
            "{e:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_answers_every_research_two_tool() {
    let dir = tempfile::tempdir().unwrap();
    let state = tradedesk_tools::config::State::open(dir.path()).unwrap();
    let ctx = tradedesk_tools::config::default_context("test", &state).unwrap();
    let open = tool(
        &ctx,
        "quote_open_position",
        json!({"market": "BTC-PERP", "side": "long", "margin": 500, "leverage": 5}),
    )
    .await;
    assert_eq!(open["status"], "ok", "{open:#}");
    assert_eq!(open["market"], "PERP:BTC-PERP");
    assert_eq!(open["max_leverage"], 20, "the sim's 5% margin");
    let equity = tool(
        &ctx,
        "quote_open_position",
        json!({"market": "AAPL", "side": "long", "margin": 500, "leverage": 5}),
    )
    .await;
    assert_eq!(equity["status"], "error", "{equity:#}");
    let perf = tool(
        &ctx,
        "get_performance",
        json!({"start": "2026-01-01", "end": "2026-11-27"}),
    )
    .await;
    assert_eq!(perf["status"], "ok", "{perf:#}");
    assert!(perf["twr_pct"].is_number() && perf["mwr_pct"].is_number());
    let journal = tool(
        &ctx,
        "analyze_trades",
        json!({"start": "2023-01-01", "end": "2026-11-27"}),
    )
    .await;
    let realized = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2023-01-01", "end": "2026-11-27"}),
    )
    .await;
    assert_eq!(journal["net_pnl"], realized["net_pnl"]);
    assert!(journal["trade_count"].as_u64().unwrap() > 10);
}
