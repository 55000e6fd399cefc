//! Research tools through the registry: backtests worked by hand, the look-ahead guard,
//! long runs and their run ids, factor analysis and patterns on CSV files, and the
//! equity curve as an image.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    clippy::cast_precision_loss
)]

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use tradedesk_tools::{ToolContext, call};

fn csv(dir: &Path, name: &str, rows: &[(String, f64, f64, f64, f64)]) -> PathBuf {
    let mut text = String::from("date,open,high,low,close,volume\n");
    for (d, o, h, l, c) in rows {
        writeln!(text, "{d},{o},{h},{l},{c},1000").unwrap();
    }
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn day(i: usize) -> String {
    (chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap()
        + chrono::Duration::days(i64::try_from(i).unwrap()))
    .to_string()
}

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> (Value, usize) {
    let out = call(ctx, name, args).await.unwrap();
    (out.structured, out.images.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_backtest_worked_by_hand_with_its_chart() {
    let dir = tempfile::tempdir().unwrap();
    // Closes 10, 11, 12, 12, 13, 13.5; opens 10, 10, 11, 12, 12.5, 13.
    let opens: [f64; 6] = [10.0, 10.0, 11.0, 12.0, 12.5, 13.0];
    let closes: [f64; 6] = [10.0, 11.0, 12.0, 12.0, 13.0, 13.5];
    let rows: Vec<_> = (0..6)
        .map(|i| {
            (
                day(i),
                opens[i],
                closes[i].max(opens[i]) + 0.5,
                closes[i].min(opens[i]) - 0.5,
                closes[i],
            )
        })
        .collect();
    let path = csv(dir.path(), "HAND.csv", &rows);
    let ctx = ToolContext::new("test");
    // Enter when the close rises above 10.5 (bar 1: fills at bar 2's open, 11); exit when
    // the close stops rising (bar 3: fills at bar 4's open, 12.5). Fee 10 bps each way.
    let (r, images) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > 10.5", "exit": "close <= shift(close, 1)",
            "initial_cash": 1000, "fee_bps": 10}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(images, 1, "the equity curve comes as an image");
    let qty = 1000.0 / (11.0 * 1.001);
    let entry_fee = qty * 11.0 * 0.001;
    let exit_fee = qty * 12.5 * 0.001;
    let t = &r["trades"][0];
    assert_eq!(
        (t["entry_time"].as_str(), t["exit_time"].as_str()),
        (Some("2026-01-03"), Some("2026-01-05"))
    );
    assert_eq!(
        (t["entry_price"].as_f64(), t["exit_price"].as_f64()),
        (Some(11.0), Some(12.5))
    );
    assert!((t["quantity"].as_f64().unwrap() - qty).abs() < 1e-9);
    assert!((t["pnl"].as_f64().unwrap() - (qty * 1.5 - entry_fee - exit_fee)).abs() < 1e-9);
    assert!((t["return_pct"].as_f64().unwrap() - (12.5 / 11.0 - 1.0) * 100.0).abs() < 1e-9);
    // The re-entry on bar 5 commits it all again: equity at the last close.
    let cash = qty * 12.5 - exit_fee;
    let qty2 = cash / (13.0 * 1.001);
    let final_equity = qty2 * 13.5;
    assert!(
        (r["final_equity"].as_f64().unwrap() - final_equity).abs() < 1e-9,
        "{r:#}"
    );
    assert_eq!(r["trade_count"], 1);
    // Held at the closes of bars 2, 3 and 5: 3 of 6.
    assert!((r["exposure_pct"].as_f64().unwrap() - 50.0).abs() < 1e-9);
    assert_eq!(r["bars_per_year"], 252.0);
    // A second signal after the exit (bar 4: close 13 > 10.5) fills at bar 5's open and is
    // still open at the end: reported, not a trade.
    assert_eq!(r["open_position"]["entry_time"], "2026-01-06", "{r:#}");
    assert_eq!(r["open_position"]["last_price"], 13.5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_signal_can_use_the_bar_it_trades_on() {
    // A peek ahead cannot be written: shift takes no negative period.
    let ctx = ToolContext::new("test");
    let dir = tempfile::tempdir().unwrap();
    // Every up bar is followed by a down bar that opens at the up bar's close: a
    // strategy that buys up bars earns only if it could fill at the up bar's own open.
    let mut rows = Vec::new();
    let mut price: f64 = 100.0;
    for i in 0..200 {
        let (open, close) = if i % 2 == 0 {
            (price, price + 2.0)
        } else {
            (price, price - 2.5)
        };
        rows.push((
            day(i),
            open,
            open.max(close) + 0.1,
            open.min(close) - 0.1,
            close,
        ));
        price = close;
    }
    let path = csv(dir.path(), "SAW.csv", &rows);
    let (peek, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "shift(close, -1) > close"}),
    )
    .await;
    assert_eq!(peek["error"]["code"], "invalid_argument", "{peek:#}");
    assert!(
        peek["error"]["message"]
            .as_str()
            .unwrap()
            .contains("from 0"),
        "{peek:#}"
    );
    // "Buy the up bar, sell the down bar" would win every time with same-bar fills; here
    // it fills a bar later, on the down bar, and loses every trade.
    let (r, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > open", "exit": "close < open"}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert!(r["trade_count"].as_u64().unwrap() > 50);
    assert_eq!(r["win_rate_pct"], 0.0, "{r:#}");
    assert!(r["total_return_pct"].as_f64().unwrap() < 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expression_errors_name_the_position_and_what_was_expected() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<_> = (0..5).map(|i| (day(i), 10.0, 11.0, 9.0, 10.0)).collect();
    let path = csv(dir.path(), "E.csv", &rows);
    let ctx = ToolContext::new("test");
    for (entry, expect) in [
        ("close > sma(close 20)", "at character 19"),
        ("clsoe > 1", "unknown name 'clsoe'"),
        ("sma(close, 5)", "must be a condition"),
        ("close > 1 and", "expected a number"),
    ] {
        let (r, _) = tool(
            &ctx,
            "backtest",
            json!({"source": {"csv": path}, "entry": entry}),
        )
        .await;
        assert_eq!(r["error"]["code"], "invalid_argument", "{entry}: {r:#}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.starts_with("entry: "), "{message}");
        assert!(message.contains(expect), "{entry}: {message}");
    }
    let (r, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > 1", "size": 1.5}),
    )
    .await;
    assert!(
        r["error"]["message"].as_str().unwrap().contains("size"),
        "{r:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_wait_seconds_answers_a_run_id_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let rows: Vec<_> = (0..3_000)
        .map(|i| {
            let c = 100.0 + (i as f64 / 20.0).sin() * 10.0;
            (day(i), c, c + 1.0, c - 1.0, c)
        })
        .collect();
    let path = csv(dir.path(), "LONG.csv", &rows);
    let ctx = ToolContext::new("test");
    let args = json!({"source": {"csv": path}, "entry": "cross_above(sma(close, 10), sma(close, 30))",
        "exit": "cross_below(sma(close, 10), sma(close, 30))", "wait_seconds": 0});
    let (first, images) = tool(&ctx, "backtest", args.clone()).await;
    assert_eq!(first["state"], "running", "{first:#}");
    assert_eq!(first["entry"], args["entry"], "{first:#}");
    assert_eq!(images, 0);
    let id = first["run_id"].as_str().unwrap().to_owned();
    let started = std::time::Instant::now();
    let done = loop {
        let (r, images) = tool(&ctx, "get_run_result", json!({"run_id": id})).await;
        if r["state"] == "done" {
            assert_eq!(images, 1);
            break r;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "never finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    // The same answer as a run that waited.
    let mut waited = args;
    waited["wait_seconds"] = json!(30);
    let (direct, _) = tool(&ctx, "backtest", waited).await;
    assert_eq!(done["final_equity"], direct["final_equity"]);
    assert_eq!(done["trades"], direct["trades"]);
    assert_eq!(done["entry"], direct["entry"]);
    // Fetched again, and by two callers at once (a client that timed out retries): the
    // same result each time, nothing lost.
    let ask = || tool(&ctx, "get_run_result", json!({"run_id": id}));
    let ((a, a_images), (b, b_images)) = tokio::join!(ask(), ask());
    assert_eq!((a_images, b_images), (1, 1));
    assert_eq!(a, done);
    assert_eq!(b, done);
    // An id never answered reads as one.
    let (none, _) = tool(&ctx, "get_run_result", json!({"run_id": "bt-1-999"})).await;
    assert_eq!(none["error"]["code"], "invalid_argument", "{none:#}");
    assert!(
        none["error"]["message"]
            .as_str()
            .unwrap()
            .contains("bt-1-999"),
        "{none:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_momentum_factor_ranks_a_universe_and_states_its_definitions() {
    let dir = tempfile::tempdir().unwrap();
    // Five assets with steady, different drifts: past return ranks future return.
    let mut universe = Vec::new();
    for (k, drift) in [0.004, 0.002, 0.0, -0.002, -0.004].iter().enumerate() {
        let mut c: f64 = 100.0;
        let rows: Vec<_> = (0..120)
            .map(|i| {
                let wiggle = ((i * (k + 3)) as f64).sin() * 0.001;
                c *= 1.0 + drift + wiggle;
                (day(i), c, c * 1.01, c * 0.99, c)
            })
            .collect();
        universe.push(json!({"csv": csv(dir.path(), &format!("A{k}.csv"), &rows)}));
    }
    let ctx = ToolContext::new("test");
    let (r, _) = tool(
        &ctx,
        "factor_analysis",
        json!({"universe": universe, "factor": "ret(close, 20)", "horizon": 5}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["assets"].as_array().unwrap().len(), 5);
    assert!(r["periods"].as_u64().unwrap() > 80, "{r:#}");
    assert!(r["rank_ic_mean"].as_f64().unwrap() > 0.9, "{r:#}");
    assert_eq!(r["hit_rate_pct"], 100.0, "{r:#}");
    let q = r["quantiles"].as_array().unwrap();
    assert_eq!(q.len(), 5);
    assert!(
        q[4]["mean_forward_return_pct"].as_f64().unwrap()
            > q[0]["mean_forward_return_pct"].as_f64().unwrap()
    );
    assert!(r["definitions"].as_str().unwrap().len() > 100);
    // A horizon of 5: neighbouring cross-sections overlap, and a note says what that does
    // to the t-stats.
    assert!(
        r["notes"].to_string().contains("Newey-West with 4 lags"),
        "{r:#}"
    );
    let (bad, _) = tool(
        &ctx,
        "factor_analysis",
        json!({"universe": universe, "factor": "close > 1"}),
    )
    .await;
    assert!(
        bad["error"]["message"].as_str().unwrap().contains("series"),
        "{bad:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn patterns_come_with_their_bar_and_their_rule() {
    let dir = tempfile::tempdir().unwrap();
    // A falling run, then a bearish bar engulfed by a bullish one on 2026-01-14.
    let mut rows: Vec<_> = (0..12)
        .map(|i| {
            let c = 100.0 - i as f64;
            (day(i), c + 0.5, c + 1.0, c - 0.2, c)
        })
        .collect();
    rows.push((day(12), 88.5, 88.8, 87.0, 87.5));
    rows.push((day(13), 87.0, 90.0, 86.8, 89.5));
    let path = csv(dir.path(), "P.csv", &rows);
    let ctx = ToolContext::new("test");
    let (r, _) = tool(
        &ctx,
        "detect_patterns",
        json!({"source": {"csv": path}, "patterns": ["bullish_engulfing", "doji"]}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let hits = r["hits"].as_array().unwrap();
    let engulfing = hits
        .iter()
        .find(|h| h["pattern"] == "bullish_engulfing")
        .unwrap();
    assert_eq!(engulfing["time"], "2026-01-14");
    assert!(engulfing["rule"].as_str().unwrap().contains("engulf"));
    assert!(r["rules"]["doji"].is_string());
    let (bad, _) = tool(
        &ctx,
        "detect_patterns",
        json!({"source": {"csv": path}, "patterns": ["dragon"]}),
    )
    .await;
    assert!(
        bad["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("three_white_soldiers"),
        "{bad:#}"
    );
}

/// The same bars as a Python backtesting library: backtesting.py 0.6.6 on
/// `tests/fixtures/backtest/sma_cross.csv` (see `sma_cross_backtesting_py.json` for the
/// library's version and every setting, and `make_reference.py` to regenerate it): the
/// same entry and exit bars, fill prices and per-trade returns, and the same open trade.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sma_crossover_matches_backtesting_py_trade_for_trade() {
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/backtest");
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("sma_cross_backtesting_py.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(reference["library"], "backtesting.py");
    let ctx = ToolContext::new("test");
    let (r, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": fixtures.join("sma_cross.csv")},
            "entry": "cross_above(sma(close, 10), sma(close, 30))",
            "exit": "cross_below(sma(close, 10), sma(close, 30))",
            "initial_cash": 10_000_000, "fractional": false}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let theirs = reference["trades"].as_array().unwrap();
    let ours = r["trades"].as_array().unwrap();
    assert_eq!(r["trade_count"], reference["trade_count"], "{r:#}");
    assert_eq!(ours.len(), theirs.len());
    for (a, b) in ours.iter().zip(theirs) {
        assert_eq!(a["entry_time"], b["entry_time"], "{a} vs {b}");
        assert_eq!(a["exit_time"], b["exit_time"], "{a} vs {b}");
        assert!(
            (a["entry_price"].as_f64().unwrap() - b["entry_price"].as_f64().unwrap()).abs() < 1e-9
        );
        assert!(
            (a["exit_price"].as_f64().unwrap() - b["exit_price"].as_f64().unwrap()).abs() < 1e-9
        );
        assert!(
            (a["return_pct"].as_f64().unwrap() - b["return_pct"].as_f64().unwrap()).abs() < 1e-9,
            "{a} vs {b}"
        );
    }
    let open = &reference["open_trade_at_end"];
    assert_eq!(r["open_position"]["entry_time"], open["entry_time"]);
    assert!(
        (r["open_position"]["entry_price"].as_f64().unwrap()
            - open["entry_price"].as_f64().unwrap())
        .abs()
            < 1e-9
    );
    assert!(
        (r["open_position"]["last_price"].as_f64().unwrap() - open["last_close"].as_f64().unwrap())
            .abs()
            < 1e-9
    );
}

/// Equity 1000, 1000, 1100, 990, 1210 at the closes (100 units bought at bar 1's open of
/// 10 and held): every metric of the report from the contract's formulas.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_metric_worked_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let closes = [10.0, 10.0, 11.0, 9.9, 12.1];
    let rows: Vec<_> = closes
        .iter()
        .enumerate()
        .map(|(i, &c)| (day(i), 10.0, 13.0, 9.0, c))
        .collect();
    let path = csv(dir.path(), "METRICS.csv", &rows);
    let ctx = ToolContext::new("test");
    let (r, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > 0", "initial_cash": 1000}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let returns = [0.0, 0.1, -0.1, 1210.0 / 990.0 - 1.0];
    let n = returns.len() as f64;
    let mean = returns.iter().sum::<f64>() / n;
    let sd = (returns.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let downside = (returns.iter().map(|x| x.min(0.0).powi(2)).sum::<f64>() / n).sqrt();
    let year = 252.0_f64.sqrt();
    let near = |field: &str, want: f64| {
        let got = r[field]
            .as_f64()
            .unwrap_or_else(|| panic!("{field}: {r:#}"));
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{field}: {got} vs {want}"
        );
    };
    near("final_equity", 1210.0);
    near("total_return_pct", 21.0);
    near("volatility_pct", sd * year * 100.0);
    near("sharpe", mean / sd * year);
    near("sortino", mean / downside * year);
    // Four calendar days from the first bar to the last.
    near("cagr_pct", (1.21_f64.powf(365.25 / 4.0) - 1.0) * 100.0);
    // From 1100 (bar 2) to 990 (bar 3).
    near("max_drawdown_pct", 10.0);
    assert_eq!(r["max_drawdown_start"], day(2));
    assert_eq!(r["max_drawdown_end"], day(3));
    near("exposure_pct", 80.0);
    near("bars_per_year", 252.0);
    assert_eq!(r["trade_count"], 0);
    assert_eq!(r["win_rate_pct"], Value::Null);
    assert_eq!(r["profit_factor"], Value::Null);
    assert_eq!(r["open_position"]["quantity"], 100.0);
    near(
        "final_equity",
        r["open_position"]["unrealized_pnl"].as_f64().unwrap() + 1000.0,
    );

    // A bars_per_year of one's own scales the annualised figures; bars within one day
    // have no CAGR.
    let (r2, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > 0", "initial_cash": 1000, "bars_per_year": 52}),
    )
    .await;
    let got = r2["sharpe"].as_f64().unwrap();
    assert!((got - mean / sd * 52.0_f64.sqrt()).abs() < 1e-9, "{r2:#}");
    let mut text = String::from("time,open,high,low,close\n");
    for (i, c) in closes.iter().enumerate() {
        writeln!(text, "2026-01-05T10:0{i}:00Z,10,13,9,{c}").unwrap();
    }
    let minutes = dir.path().join("MINUTES.csv");
    std::fs::write(&minutes, text).unwrap();
    let (r3, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": minutes}, "entry": "close > 0"}),
    )
    .await;
    assert_eq!(r3["status"], "ok", "{r3:#}");
    assert_eq!(r3["cagr_pct"], Value::Null, "{r3:#}");
}

/// Bad arguments are refused before any work, each naming what is wrong.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_research_arguments_name_what_is_wrong() {
    let ctx = ToolContext::new("test");
    let missing = "/nonexistent/BARS.csv";
    let dir = tempfile::tempdir().unwrap();
    let novol = dir.path().join("NOVOL.csv");
    std::fs::write(
        &novol,
        "date,open,high,low,close\n2026-01-01,1,2,1,2\n2026-01-02,2,3,2,3\n2026-01-03,3,4,3,4\n",
    )
    .unwrap();
    let cases = [
        (
            "backtest",
            json!({"source": {"csv": novol}, "entry": "close > 1", "exit": "sma(volume, 2) > 0"}),
            "exit reads volume",
        ),
        (
            "factor_analysis",
            json!({"universe": [{"csv": novol}, {"csv": novol}, {"csv": novol}], "factor": "ret(volume, 1)"}),
            "factor reads volume",
        ),
        (
            "get_bars",
            json!({"source": {"symbol": "AAPL"}}),
            "missing account",
        ),
        (
            "get_bars",
            json!({"source": {"csv": missing, "symbol": "AAPL"}}),
            "csv goes alone",
        ),
        ("get_bars", json!({"source": {}}), "missing csv"),
        (
            "get_bars",
            json!({"source": {"csv": missing}, "max_rows": 1}),
            "max_rows",
        ),
        (
            "backtest",
            json!({"source": {"csv": missing}, "entry": "close > 1", "initial_cash": 1e16}),
            "at most 1e15",
        ),
        (
            "backtest",
            json!({"source": {"csv": missing}, "entry": format!("{}close{} > 1", "(".repeat(5_000), ")".repeat(5_000))}),
            "at most 2000",
        ),
        (
            "backtest",
            json!({"source": {"csv": missing}, "entry": format!("{}close{} > 1", "(".repeat(90), ")".repeat(90))}),
            "deeper than 64",
        ),
        (
            "factor_analysis",
            json!({"universe": [{"csv": missing}, {"csv": missing}, {"csv": missing}], "factor": "close", "horizon": 0}),
            "horizon is 0",
        ),
        (
            "factor_analysis",
            json!({"universe": [{"csv": missing}, {"csv": missing}, {"csv": missing}], "factor": "close", "quantiles": 50}),
            "quantiles is 50",
        ),
        (
            "detect_patterns",
            json!({"source": {"csv": missing}, "patterns": []}),
            "empty list",
        ),
        (
            "detect_patterns",
            json!({"source": {"csv": missing}, "max_hits": 0}),
            "max_hits is 0",
        ),
        (
            "detect_patterns",
            json!({"source": {"csv": missing}, "max_hits": 20_000}),
            "from 1 to 10000",
        ),
    ];
    for (name, args, says) in cases {
        let (r, _) = tool(&ctx, name, args).await;
        assert_eq!(r["status"], "error", "{name}: {r:#}");
        let message = r["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{name}: {message}");
        assert!(!message.contains("untagged"), "{name}: {message}");
    }
}

/// Calendars that differ: one asset misses a day and writes its times with +00:00. The
/// cross-sections are the instants all three share, and each forward return spans the
/// same common bars for every asset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn factor_cross_sections_are_the_shared_instants_and_horizons_count_shared_bars() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, level: f64, step: f64, skip: Option<u32>, offset: &str| {
        let mut text = String::from("time,open,high,low,close\n");
        for d in 1..=8_u32 {
            if Some(d) == skip {
                continue;
            }
            let c = level + step * f64::from(d);
            writeln!(text, "2026-01-0{d}T00:00:00{offset},{c},{c},{c},{c}").unwrap();
        }
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        json!({"csv": path})
    };
    // The factor is the close: A (about 10) is always the lowest quantile.
    let universe = [
        write("A.csv", 9.0, 1.0, None, "Z"),
        write("B.csv", 100.0, 3.0, Some(4), "+00:00"),
        write("C.csv", 1000.0, -7.0, None, "Z"),
    ];
    let ctx = ToolContext::new("test");
    let (r, _) = tool(
        &ctx,
        "factor_analysis",
        json!({"universe": universe, "factor": "close", "horizon": 1, "quantiles": 3}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["common_bars"], 7, "{r:#}");
    assert_eq!(r["periods"], 6, "{r:#}");
    assert_eq!(r["ic_series"][0]["time"], "2026-01-01T00:00:00Z", "{r:#}");
    // A's closes on the shared days 1, 2, 3, 5, 6, 7, 8: 10, 11, 12, 14, 15, 16, 17; day
    // 3's forward return runs to day 5, the next shared bar.
    let a = [10.0, 11.0, 12.0, 14.0, 15.0, 16.0, 17.0];
    let mean = a.windows(2).map(|w| w[1] / w[0] - 1.0).sum::<f64>() / 6.0 * 100.0;
    let got = r["quantiles"][0]["mean_forward_return_pct"]
        .as_f64()
        .unwrap();
    assert!((got - mean).abs() < 1e-9, "{got} vs {mean}: {r:#}");
}

/// A short with slippage in whole units, an entry too small to buy one unit (skipped
/// with a note), and a trade list cut at max_trades.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shorts_whole_units_skipped_entries_and_the_trade_list_cut() {
    let dir = tempfile::tempdir().unwrap();
    // Opens 100 each day; closes alternate 100 and 90.
    let rows: Vec<_> = (0..10)
        .map(|i| {
            let c = if i % 2 == 0 { 100.0 } else { 90.0 };
            (day(i), 100.0, 101.0, 89.0, c)
        })
        .collect();
    let path = csv(dir.path(), "SHORT.csv", &rows);
    let ctx = ToolContext::new("test");
    // Enter short after an up close (even bars), cover after a down close (odd bars).
    let (r, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > 95", "exit": "close < 95",
            "direction": "short", "slippage_bps": 100, "fractional": false,
            "initial_cash": 1000, "max_trades": 2}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    // Each short sells at 100 x 0.99 = 99: floor(1000 / 99) = 10 units; covers at
    // 100 x 1.01 = 101: a loss of 20 a trade, fees 0.
    let t = &r["trades"][0];
    assert_eq!(
        (t["side"].as_str(), t["quantity"].as_f64()),
        (Some("short"), Some(10.0))
    );
    assert_eq!(
        (t["entry_price"].as_f64(), t["exit_price"].as_f64()),
        (Some(99.0), Some(101.0))
    );
    assert!((t["pnl"].as_f64().unwrap() + 20.0).abs() < 1e-9, "{r:#}");
    assert!((t["return_pct"].as_f64().unwrap() - (99.0 / 101.0 - 1.0) * 100.0).abs() < 1e-9);
    // Signals on bars 0..8: entries fill on 1, 3, 5, 7; exits on 2, 4, 6, 8: four trades,
    // two listed.
    assert_eq!(r["trade_count"], 4, "{r:#}");
    assert_eq!(r["trades"].as_array().unwrap().len(), 2);
    assert_eq!(r["trades_truncated"], true);
    assert_eq!(r["win_rate_pct"], 0.0);

    // 50 of cash cannot buy one unit at 100: every entry is skipped, and a note says so.
    let (small, _) = tool(
        &ctx,
        "backtest",
        json!({"source": {"csv": path}, "entry": "close > 95", "fractional": false, "initial_cash": 50}),
    )
    .await;
    assert_eq!(small["trade_count"], 0, "{small:#}");
    assert_eq!(small["open_position"], Value::Null);
    assert!(small["notes"].to_string().contains("skipped"), "{small:#}");
}
