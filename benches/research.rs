//! The backtester's speed, printed as figures: an SMA 10/30 crossover (long only,
//! next-bar-open fills, no fees) over 1,000,000 bars already in memory, on one core:
//! signals plus engine, no CSV parsing and no chart in the timed part (the same work the
//! peers in `bench/peers.py` are timed on). Beside it, the whole `backtest` tool call on a
//! 1,000,000-row CSV file: reading and parsing it, signals, engine and the PNG chart, cold
//! (a new server: nothing cached) and warm (the parsed file cached), and each part alone;
//! and the call in a new process (this binary run again, `child-call`), the first ever
//! (parsing the CSV and writing its column file) and with the column file present.
//!
//! `cargo bench --bench research` prints one `OURS_JSON {...}` line per figure so
//! `bench/run_research.sh` can put them beside the peers'; `-- memory` times only the
//! in-memory run.

#![allow(
    clippy::print_stdout,
    clippy::float_arithmetic,
    clippy::cast_precision_loss
)]

use std::fmt::Write as _;
use std::hint::black_box;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

use serde_json::json;
use tradedesk_research::backtest::{Settings, Times};
use tradedesk_research::expr;
use tradedesk_tools::bar_table::{
    BarCache, CACHE_BYTES, COLUMN_DIR, DISK_BYTES, SETTLE, read_table,
};
use tradedesk_tools::bars::read_csv;
use tradedesk_tools::research::{BarColumns, compute, equity_chart, run_columns};
use tradedesk_tools::{ToolContext, call};

const BARS: usize = 1_000_000;

/// A seeded random walk (xorshift), the same shape on every run.
fn walk(n: usize) -> Vec<tradedesk_core::Bar> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut price = 100.0_f64;
    let start = chrono::DateTime::from_timestamp(946_684_800, 0).unwrap_or_default();
    (0..n)
        .map(|i| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let open = price;
            price *= 1.0 + u * 0.02;
            let close = price;
            let instant = start + chrono::Duration::minutes(i64::try_from(i).unwrap_or(0));
            tradedesk_core::Bar {
                time: instant.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                instant,
                open,
                high: open.max(close) * 1.001,
                low: open.min(close) * 0.999,
                close,
                volume: Some(1_000.0),
            }
        })
        .collect()
}

/// The arguments of the timed tool call.
fn call_args(path: &std::path::Path) -> serde_json::Value {
    json!({"source": {"csv": path}, "entry": "cross_above(sma(close, 10), sma(close, 30))",
        "exit": "cross_below(sma(close, 10), sma(close, 30))", "max_trades": 100})
}

/// `child-call CSV COLUMN_DIR`: one backtest call in this new process, on a context
/// keeping column files in COLUMN_DIR (as a server started on a state directory does);
/// prints `CHILD seconds trades parsed from_column_files`.
fn child_call(csv: &str, columns: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut ctx = ToolContext::new("bench");
    ctx.bar_cache.set_column_dir(columns.into(), DISK_BYTES);
    let args = call_args(std::path::Path::new(csv));
    let started = Instant::now();
    let out = rt
        .block_on(call(&ctx, "backtest", args))
        .unwrap_or_else(|e| panic!("{e}"));
    let secs = started.elapsed().as_secs_f64();
    assert_eq!(out.images.len(), 1, "{}", out.structured);
    println!(
        "CHILD {secs} {} {} {}",
        out.structured["trade_count"].as_u64().unwrap_or(0),
        ctx.bar_cache.parsed(),
        ctx.bar_cache.from_column_files()
    );
}

/// `child-engine`: the engine's first run in this new process, on bars already in
/// memory (as the peers are given them), so its own working memory is touched for the
/// first time, as a new process's tool call touches it; prints `ENGINE seconds trades`.
fn child_engine() {
    let bars = walk(BARS);
    let cols = BarColumns::of(&bars);
    let time: Vec<&str> = bars.iter().map(|b| b.time.as_str()).collect();
    let (entry, exit) = crossover();
    let (secs, trades) = engine_once(&time, &cols, &entry, &exit);
    println!("ENGINE {secs} {trades}");
}

/// The SMA 10/30 crossover's entry and exit, as the peers run it.
fn crossover() -> (expr::Expr, expr::Expr) {
    let parse = |text: &str| expr::parse_condition(text).unwrap_or_else(|e| panic!("{e}"));
    (
        parse("cross_above(sma(close, 10), sma(close, 30))"),
        parse("cross_below(sma(close, 10), sma(close, 30))"),
    )
}

/// One engine run (signals, engine, report) on bars in memory: its seconds and trades.
fn engine_once(
    time: &dyn Times,
    cols: &BarColumns,
    entry: &expr::Expr,
    exit: &expr::Expr,
) -> (f64, usize) {
    let progress = AtomicU64::new(0);
    let started = Instant::now();
    let r = run_columns(
        black_box(time),
        black_box(cols),
        entry,
        Some(exit),
        &Settings::default(),
        &progress,
    );
    (started.elapsed().as_secs_f64(), r.trade_count)
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    if let Some(i) = argv.iter().position(|a| a == "child-call") {
        let arg = |k: usize| argv.get(i + k).cloned().unwrap_or_default();
        child_call(&arg(1), &arg(2));
        return;
    }
    if argv.iter().any(|a| a == "child-engine") {
        child_engine();
        return;
    }
    let bars = walk(BARS);
    let (entry, exit) = crossover();
    // In memory, as the peers get it: columns of numbers (and the bar times).
    let cols = BarColumns::of(&bars);
    let time: Vec<&str> = bars.iter().map(|b| b.time.as_str()).collect();
    // Best of 20, after a warm-up (this machine's timings vary by tens of percent from
    // run to run; the best is the least disturbed).
    let mut best = f64::MAX;
    let mut trades = 0;
    let runs = std::env::var("BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    for run in 0..=runs {
        let (secs, count) = engine_once(&time, &cols, &entry, &exit);
        if run > 0 {
            best = best.min(secs);
        }
        trades = count;
    }
    let rate = BARS as f64 / best;
    println!(
        "backtest in memory: {BARS} bars, {trades} trades, best {:.2} ms, {:.1} M bars/s",
        best * 1e3,
        rate / 1e6
    );
    println!(
        "OURS_JSON {}",
        json!({"peer": "tradedesk (in memory)", "bars": BARS, "seconds": best, "bars_per_second": rate})
    );

    // `cargo bench --bench research -- memory` stops here (for profiling the engine).
    if std::env::args().any(|a| a == "memory") {
        return;
    }
    // The whole tool call on a CSV file of the same bars.
    let dir = std::env::temp_dir().join(format!("tradedesk-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("WALK.csv");
    let mut text = String::with_capacity(BARS * 80);
    text.push_str("time,open,high,low,close,volume\n");
    for b in &bars {
        let _ = writeln!(
            text,
            "{},{},{},{},{},1000",
            b.time, b.open, b.high, b.low, b.close
        );
    }
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    // The cache keeps only files left alone for SETTLE.
    std::thread::sleep(SETTLE + std::time::Duration::from_millis(200));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let args = call_args(&path);
    let timed_call = |ctx: &ToolContext| {
        let started = Instant::now();
        let out = rt
            .block_on(call(ctx, "backtest", args.clone()))
            .unwrap_or_else(|e| panic!("{e}"));
        let secs = started.elapsed().as_secs_f64();
        assert_eq!(out.images.len(), 1, "{}", out.structured);
        assert_eq!(
            out.structured["trade_count"].as_u64(),
            Some(trades as u64),
            "{}",
            out.structured
        );
        secs
    };
    // Cold: each call on a new context, so nothing is cached: read, parse, run, chart.
    let mut cold = f64::MAX;
    for _ in 0..5 {
        cold = cold.min(timed_call(&ToolContext::new("bench")));
    }
    // Warm: one context; its first call parses the file and keeps the table, the rest
    // reuse it (a server answering repeated backtests on one file).
    let ctx = ToolContext::new("bench");
    let _ = timed_call(&ctx);
    let mut warm = f64::MAX;
    for _ in 0..runs {
        warm = warm.min(timed_call(&ctx));
    }
    assert_eq!(
        ctx.bar_cache.parsed(),
        1,
        "the warm calls parsed the file again"
    );

    // A new process, as a server started on a state directory: its first-ever call
    // (parse the CSV, write the column file), then calls with the column file present.
    let columns = dir.join("state").join(COLUMN_DIR);
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
    let child = |fresh: bool| {
        if fresh {
            let _ = std::fs::remove_dir_all(&columns);
        }
        let out = std::process::Command::new(&exe)
            .arg("child-call")
            .arg(&path)
            .arg(&columns)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("CHILD "))
            .unwrap_or_else(|| panic!("child: {text} {}", String::from_utf8_lossy(&out.stderr)));
        let f: Vec<f64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
        assert_eq!(f.get(1).copied(), Some(trades as f64), "{line}");
        // The first-ever call parses; a call with the file present reads it.
        let want = if fresh { [1.0, 0.0] } else { [0.0, 1.0] };
        assert_eq!(f.get(2..4), Some(&want[..]), "{line}");
        f.first().copied().unwrap_or(f64::MAX)
    };
    let first_ever: Vec<f64> = (0..5).map(|_| child(true)).collect();
    let with_file: Vec<f64> = (0..5).map(|_| child(false)).collect();
    // The engine alone, first run in a new process (its memory new too).
    let engine_new: Vec<f64> = (0..5)
        .map(|_| {
            let out = std::process::Command::new(&exe)
                .arg("child-engine")
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("ENGINE "))
                .unwrap_or_else(|| panic!("child: {text}"));
            let f: Vec<f64> = line.split(' ').filter_map(|x| x.parse().ok()).collect();
            assert_eq!(f.get(1).copied(), Some(trades as f64), "{line}");
            f.first().copied().unwrap_or(f64::MAX)
        })
        .collect();
    let best_in = |v: &[f64]| v.iter().copied().fold(f64::MAX, f64::min);
    let column_bytes = std::fs::read_dir(&columns)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum::<u64>()
        })
        .unwrap_or(0);

    // Where a cold call's time goes, each part alone (best of 5).
    let best_of = |f: &mut dyn FnMut()| {
        (0..5)
            .map(|_| {
                let started = Instant::now();
                f();
                started.elapsed().as_secs_f64()
            })
            .fold(f64::MAX, f64::min)
    };
    let read = best_of(&mut || {
        black_box(std::fs::read(&path).unwrap_or_else(|e| panic!("{e}")));
    });
    let parse = best_of(&mut || {
        black_box(read_table(&path).unwrap_or_else(|e| panic!("{e}")));
    });
    let table = read_table(&path).unwrap_or_else(|e| panic!("{e}"));
    // The column file read back (validated against the CSV's key, checksummed) into a
    // table, in a cache with nothing in memory.
    let from_file = best_of(&mut || {
        let mut cache = BarCache::new(CACHE_BYTES, SETTLE);
        cache.set_column_dir(columns.clone(), DISK_BYTES);
        black_box(cache.load(&path).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(cache.from_column_files(), 1);
    });
    let old_parse = best_of(&mut || {
        black_box(read_csv(&path).unwrap_or_else(|e| panic!("{e}")));
    });
    let (settings, progress) = (Settings::default(), AtomicU64::new(0));
    let mut finished = None;
    let run_secs = best_of(&mut || {
        finished = Some(compute(
            "WALK",
            &table,
            &entry,
            Some(&exit),
            &settings,
            &progress,
            false,
        ));
    });
    let report = finished
        .and_then(|f| f.result.report)
        .unwrap_or_else(|| panic!("no report"));
    let chart = best_of(&mut || {
        black_box(equity_chart("WALK", &report, &report.start, &report.end));
    });
    let _ = std::fs::remove_dir_all(&dir);
    let ms = |s: f64| s * 1e3;
    println!(
        "backtest tool call on a CSV, cold (nothing cached): {BARS} rows read, parsed, run and charted, best {:.1} ms, {:.1} M bars/s, {:.1}x the in-memory run",
        ms(cold),
        BARS as f64 / cold / 1e6,
        cold / best
    );
    println!(
        "backtest tool call on a CSV, warm (the parsed file cached): best {:.1} ms, {:.1} M bars/s, {:.1}x the in-memory run",
        ms(warm),
        BARS as f64 / warm / 1e6,
        warm / best
    );
    println!(
        "backtest tool call in a new process, first ever (parses the CSV, writes the column file): best {:.1} ms, {:.1} M bars/s, {:.1}x the in-memory run (all: {})",
        ms(best_in(&first_ever)),
        BARS as f64 / best_in(&first_ever) / 1e6,
        best_in(&first_ever) / best,
        first_ever
            .iter()
            .map(|s| format!("{:.1}", ms(*s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "backtest tool call in a new process, column file present ({:.1} MB): best {:.1} ms, {:.1} M bars/s, {:.1}x the in-memory run (all: {})",
        column_bytes as f64 / 1e6,
        ms(best_in(&with_file)),
        BARS as f64 / best_in(&with_file) / 1e6,
        best_in(&with_file) / best,
        with_file
            .iter()
            .map(|s| format!("{:.1}", ms(*s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "engine alone, first run in a new process (its working memory new): best {:.1} ms, {:.1}x the in-memory run; the call with the column file present is {:.1}x it (all: {})",
        ms(best_in(&engine_new)),
        best_in(&engine_new) / best,
        best_in(&with_file) / best_in(&engine_new),
        engine_new
            .iter()
            .map(|s| format!("{:.1}", ms(*s)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "  the column file read back into a table alone: {:.1} ms",
        ms(from_file)
    );
    println!(
        "  parts alone: the file read into memory {:.1} ms; read and parsed into columns (read_table, as a cold call does) {:.1} ms (read_csv, the row-by-row parser into bars: {:.1} ms); signals, engine and report {:.1} ms; chart {:.1} ms",
        ms(read),
        ms(parse),
        ms(old_parse),
        ms(run_secs),
        ms(chart)
    );
    println!(
        "OURS_JSON {}",
        json!({"peer": "tradedesk (whole tool call, CSV + chart, cold)", "bars": BARS, "seconds": cold, "bars_per_second": BARS as f64 / cold})
    );
    for (name, v) in [
        (
            "tradedesk (whole tool call, new process, first ever: CSV parsed, column file written)",
            &first_ever,
        ),
        (
            "tradedesk (whole tool call, new process, column file present)",
            &with_file,
        ),
        (
            "tradedesk (engine alone, first run in a new process)",
            &engine_new,
        ),
    ] {
        let s = best_in(v);
        println!(
            "OURS_JSON {}",
            json!({"peer": name, "bars": BARS, "seconds": s, "bars_per_second": BARS as f64 / s})
        );
    }
    println!(
        "OURS_JSON {}",
        json!({"peer": "tradedesk (whole tool call, CSV + chart, warm cache)", "bars": BARS, "seconds": warm, "bars_per_second": BARS as f64 / warm})
    );
}
