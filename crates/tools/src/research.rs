//! Research tools: `backtest` and `get_run_result` (research-contract.md). A backtest
//! runs on a blocking thread; a run that outlasts `wait_seconds` answers a `run_id` and
//! keeps going, so a client's timeout loses nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::{Error, ErrorCode, Result};
use tradedesk_research::backtest::{self, Direction, Prices, Report, Settings};
use tradedesk_research::chart::{Line, line_chart};
use tradedesk_research::expr::{self, Columns};

use crate::context::ToolContext;
use crate::market::{BarSource, load_bars};

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DirectionArg {
    #[default]
    Long,
    Short,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BacktestArgs {
    /// Bars: {"csv": "PATH"} or {"symbol", "account", "interval", "start", "end"}.
    pub source: BarSource,
    /// When to enter, evaluated on each bar's close, for example
    /// "cross_above(sma(close, 10), sma(close, 30))".
    pub entry: String,
    /// When to exit; without it a position is held until the data ends.
    pub exit: Option<String>,
    /// long (default) or short.
    pub direction: Option<DirectionArg>,
    /// Default 10000.
    pub initial_cash: Option<f64>,
    /// Fee in basis points of traded notional, on entry and on exit (default 0).
    pub fee_bps: Option<f64>,
    /// Slippage in basis points, against the trader on every fill (default 0).
    pub slippage_bps: Option<f64>,
    /// Fraction of equity committed at entry, in (0, 1] (default 1).
    pub size: Option<f64>,
    /// Default true; false trades whole units (rounded down).
    pub fractional: Option<bool>,
    /// Trades listed (default 100; the first in time order).
    pub max_trades: Option<usize>,
    /// Seconds to wait before answering a run_id instead (default 30).
    pub wait_seconds: Option<f64>,
    /// Default: 252 for daily bars, else a year over the median spacing.
    pub bars_per_year: Option<f64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BacktestResult {
    /// "done", or "running" (then fetch it with get_run_result).
    pub state: String,
    pub run_id: Option<String>,
    /// Share done, 0 to 1 (while running).
    pub progress: Option<f64>,
    pub symbol: Option<String>,
    pub entry: Option<String>,
    pub exit: Option<String>,
    #[serde(flatten)]
    pub report: Option<Report>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunResultArgs {
    /// The run_id a backtest answered.
    pub run_id: String,
}

/// A finished backtest: the result and its equity chart.
#[derive(Debug, Clone)]
pub struct Finished {
    pub result: BacktestResult,
    pub chart: Option<Vec<u8>>,
}

#[derive(Debug)]
struct Run {
    progress: Arc<AtomicU64>,
    handle: Option<tokio::task::JoinHandle<Result<Finished>>>,
    done: Option<Result<Finished>>,
}

/// Runs still going (or done and not yet fetched), by id.
#[derive(Debug, Default)]
pub struct RunRegistry {
    runs: Mutex<HashMap<String, Run>>,
    next: AtomicU64,
}

fn lock(r: &RunRegistry) -> std::sync::MutexGuard<'_, HashMap<String, Run>> {
    r.runs
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn number(
    name: &str,
    v: Option<f64>,
    default: f64,
    ok: impl Fn(f64) -> bool,
    rule: &str,
) -> Result<f64> {
    let v = v.unwrap_or(default);
    if v.is_finite() && ok(v) {
        Ok(v)
    } else {
        Err(Error::invalid_argument(
            format!("{name} is {v}: it must be {rule}"),
            format!("pass {name} as {rule}, or leave it out for {default}"),
        ))
    }
}

fn settings(a: &BacktestArgs) -> Result<Settings> {
    Ok(Settings {
        direction: match a.direction.unwrap_or_default() {
            DirectionArg::Long => Direction::Long,
            DirectionArg::Short => Direction::Short,
        },
        initial_cash: number(
            "initial_cash",
            a.initial_cash,
            10_000.0,
            |v| v > 0.0 && v <= 1e15,
            "above 0",
        )?,
        fee_bps: number(
            "fee_bps",
            a.fee_bps,
            0.0,
            |v| (0.0..1_000.0).contains(&v),
            "from 0 to below 1000",
        )?,
        slippage_bps: number(
            "slippage_bps",
            a.slippage_bps,
            0.0,
            |v| (0.0..1_000.0).contains(&v),
            "from 0 to below 1000",
        )?,
        size: number("size", a.size, 1.0, |v| v > 0.0 && v <= 1.0, "in (0, 1]")?,
        fractional: a.fractional.unwrap_or(true),
        max_trades: match a.max_trades {
            Some(n) if n > 100_000 => {
                return Err(Error::invalid_argument(
                    format!("max_trades is {n}: at most 100000 trades are listed"),
                    "ask for fewer; trade_count counts them all",
                ));
            }
            Some(n) => n,
            None => 100,
        },
        bars_per_year: match a.bars_per_year {
            None => None,
            Some(v) => Some(number(
                "bars_per_year",
                Some(v),
                252.0,
                |v| v > 0.0 && v <= 1e7,
                "above 0",
            )?),
        },
    })
}

fn parse_signal(which: &str, text: &str) -> Result<expr::Expr> {
    expr::parse_condition(text).map_err(|e| {
        Error::invalid_argument(
            format!("{which}: {e}"),
            format!(
                "write {which} as a condition over the bars, such as cross_above(sma(close, 10), sma(close, 30)); series: open, high, low, close, volume; functions: {}",
                expr::FUNCTIONS
            ),
        )
    })
}

/// The computation: signals, the engine, the chart. `progress` gets the share done.
pub fn compute(
    symbol: &str,
    bars: &[tradedesk_core::Bar],
    entry: &expr::Expr,
    exit: Option<&expr::Expr>,
    settings: &Settings,
    progress: &AtomicU64,
    chart: bool,
) -> Finished {
    let time: Vec<String> = bars.iter().map(|b| b.time.clone()).collect();
    let instant: Vec<i64> = bars.iter().map(|b| b.instant.timestamp()).collect();
    let open: Vec<f64> = bars.iter().map(|b| b.open).collect();
    let high: Vec<f64> = bars.iter().map(|b| b.high).collect();
    let low: Vec<f64> = bars.iter().map(|b| b.low).collect();
    let close: Vec<f64> = bars.iter().map(|b| b.close).collect();
    let volume: Vec<f64> = bars.iter().map(|b| b.volume.unwrap_or(f64::NAN)).collect();
    let cols = Columns {
        open: &open,
        high: &high,
        low: &low,
        close: &close,
        volume: &volume,
    };
    let entry_sig = expr::eval_condition(entry, &cols);
    let exit_sig = exit.map(|e| expr::eval_condition(e, &cols));
    let prices = Prices {
        time: &time,
        instant: &instant,
        open: &open,
        close: &close,
    };
    let report = backtest::run(
        &prices,
        &entry_sig,
        exit_sig.as_deref(),
        settings,
        &mut |p| {
            progress.store(p.to_bits(), Ordering::Relaxed);
        },
    );
    let chart = chart.then(|| {
        let points: Vec<(f64, f64)> = report
            .equity
            .iter()
            .enumerate()
            .map(|(i, v)| (i as f64, *v))
            .collect();
        line_chart(
            &format!(
                "{symbol}: equity, {} trade(s), {:+.2}%",
                report.trade_count, report.total_return_pct
            ),
            time.first().map_or("", String::as_str),
            time.last().map_or("", String::as_str),
            &[Line {
                label: "equity",
                points: &points,
                color: (31, 119, 180),
            }],
        )
        .ok()
    });
    Finished {
        result: BacktestResult {
            state: "done".to_owned(),
            run_id: None,
            progress: None,
            symbol: Some(symbol.to_owned()),
            entry: None,
            exit: None,
            report: Some(report),
        },
        chart: chart.flatten(),
    }
}

/// `backtest`.
///
/// # Errors
/// `invalid_argument` (an expression, with its position; a setting out of range; too few
/// bars), the bar source's errors.
pub async fn backtest(
    ctx: &ToolContext,
    args: BacktestArgs,
    progress: Option<&(dyn Fn(f64) + Send + Sync)>,
) -> Result<Finished> {
    let settings = settings(&args)?;
    let entry = parse_signal("entry", &args.entry)?;
    let exit = match &args.exit {
        Some(text) => Some(parse_signal("exit", text)?),
        None => None,
    };
    let wait = number(
        "wait_seconds",
        args.wait_seconds,
        30.0,
        |v| (0.0..=3_600.0).contains(&v),
        "from 0 to 3600",
    )?;
    let series = load_bars(ctx, &args.source).await?;
    if series.bars.len() < 2 {
        return Err(Error::invalid_argument(
            format!(
                "the source has {} bar(s): a backtest needs at least 2",
                series.bars.len()
            ),
            "widen the date range or use a longer file",
        ));
    }
    let share = Arc::new(AtomicU64::new(0f64.to_bits()));
    let job_share = Arc::clone(&share);
    let symbol = series.symbol.clone();
    let job_exit = exit.clone();
    let mut handle = tokio::task::spawn_blocking(move || {
        Ok::<Finished, Error>(compute(
            &symbol,
            &series.bars,
            &entry,
            job_exit.as_ref(),
            &settings,
            &job_share,
            true,
        ))
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(wait);
    loop {
        let tick = tokio::time::sleep_until(
            (tokio::time::Instant::now() + Duration::from_millis(250)).min(deadline),
        );
        tokio::select! {
            joined = &mut handle => {
                let mut finished = joined.map_err(|e| Error::internal(format!("the backtest stopped: {e}")))??;
                finished.result.entry = Some(args.entry.clone());
                finished.result.exit = args.exit.clone();
                return Ok(finished);
            }
            () = tick => {
                if let Some(p) = progress {
                    p(f64::from_bits(share.load(Ordering::Relaxed)));
                }
                if tokio::time::Instant::now() >= deadline {
                    break;
                }
            }
        }
    }
    // Still going: it keeps running, and get_run_result answers it.
    let runs = Arc::clone(&ctx.runs);
    let id = format!(
        "bt-{}-{}",
        std::process::id(),
        runs.next.fetch_add(1, Ordering::Relaxed) + 1
    );
    let done = f64::from_bits(share.load(Ordering::Relaxed));
    let entry_text = args.entry.clone();
    let exit_text = args.exit.clone();
    let wrapped = tokio::spawn(async move {
        let mut finished = handle
            .await
            .map_err(|e| Error::internal(format!("the backtest stopped: {e}")))??;
        finished.result.entry = Some(entry_text);
        finished.result.exit = exit_text;
        Ok::<Finished, Error>(finished)
    });
    lock(&runs).insert(
        id.clone(),
        Run {
            progress: share,
            handle: Some(wrapped),
            done: None,
        },
    );
    Ok(Finished {
        result: BacktestResult {
            state: "running".to_owned(),
            run_id: Some(id),
            progress: Some(done),
            symbol: None,
            entry: Some(args.entry),
            exit: args.exit,
            report: None,
        },
        chart: None,
    })
}

/// `get_run_result`: a run's result once done, else its progress.
///
/// # Errors
/// `invalid_argument` for an id this server never answered (or already returned).
pub async fn get_run_result(ctx: &ToolContext, args: RunResultArgs) -> Result<Finished> {
    let handle = {
        let mut runs = lock(&ctx.runs);
        let Some(run) = runs.get_mut(&args.run_id) else {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("no run {}", tradedesk_core::error::quote(&args.run_id)),
                "pass the run_id a backtest answered; a finished run's result is kept until it is fetched once",
            ));
        };
        match &run.handle {
            Some(h) if !h.is_finished() => {
                return Ok(Finished {
                    result: BacktestResult {
                        state: "running".to_owned(),
                        run_id: Some(args.run_id.clone()),
                        progress: Some(f64::from_bits(run.progress.load(Ordering::Relaxed))),
                        symbol: None,
                        entry: None,
                        exit: None,
                        report: None,
                    },
                    chart: None,
                });
            }
            _ => run.handle.take(),
        }
    };
    if let Some(h) = handle {
        let done = h
            .await
            .unwrap_or_else(|e| Err(Error::internal(format!("the backtest stopped: {e}"))));
        if let Some(run) = lock(&ctx.runs).get_mut(&args.run_id) {
            run.done = Some(done);
        }
    }
    let run = lock(&ctx.runs).remove(&args.run_id);
    match run.and_then(|r| r.done) {
        Some(Ok(mut f)) => {
            f.result.run_id = Some(args.run_id);
            Ok(f)
        }
        Some(Err(e)) => Err(e),
        None => Err(Error::internal("the run finished without a result")),
    }
}
