//! Research tools: `backtest` and `get_run_result` (docs/methodology/research.md). A backtest
//! runs on a blocking thread; a run that outlasts `wait_seconds` answers a `run_id` and
//! keeps going, so a client's timeout loses nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::{Error, ErrorCode, Result};
use tradedesk_research::backtest::{self, Direction, Prices, Report, Settings, Times};
use tradedesk_research::chart::{Line, line_chart};
use tradedesk_research::expr::{self, Columns};

use crate::bar_table::{BarTable, Needs, load_table};
use crate::context::ToolContext;
use crate::market::{BarSource, load_bars};
use crate::tool::{Call, Meta, Tool, fmt_opt, notes_suffix};

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
    /// The bars: a CSV file, or a symbol's bars at an account.
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
    /// Basis points of traded notional, on entry and exit (default 0).
    pub fee_bps: Option<f64>,
    /// Basis points against the trader on every fill (default 0).
    pub slippage_bps: Option<f64>,
    /// Fraction of equity committed at entry, in (0, 1] (default 1).
    pub size: Option<f64>,
    /// Default true; false trades whole units (rounded down).
    pub fractional: Option<bool>,
    /// Trades listed (default 100; the first in time order).
    pub max_trades: Option<usize>,
    /// Seconds before answering a run_id instead (default 30).
    pub wait_seconds: Option<f64>,
    /// Default: 252 for daily bars, else a year over the median spacing.
    pub bars_per_year: Option<f64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BacktestResult {
    /// done, or running (then call get_run_result).
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

/// A backtest's place among those computing at once, given back when dropped (when the
/// computation ends, or unwinds).
#[derive(Debug)]
struct Slot(Arc<RunRegistry>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.going.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A backtest running in the background, by its run id.
#[derive(Debug)]
struct Run {
    progress: Arc<AtomicU64>,
    /// Set once, by the run itself, when it ends: when, and what it answered.
    outcome: Arc<OnceLock<(Instant, Result<Finished>)>>,
}

impl Run {
    fn finished_at(&self) -> Option<Instant> {
        self.outcome.get().map(|(at, _)| *at)
    }
}

/// Backtests answered with a run id: those still going, and the results of those done.
/// A result can be fetched any number of times (a client that timed out fetching it
/// fetches it again) until it is dropped: an hour after its run ended, or sooner once
/// 32 newer results are kept. At most 8 backtests compute at once (waited for or not).
#[derive(Debug)]
pub struct RunRegistry {
    runs: Mutex<HashMap<String, Run>>,
    next: AtomicU64,
    /// Backtests computing now: each holds a [`Slot`].
    going: AtomicUsize,
    keep_for: Duration,
    keep_at_most: usize,
    running_at_most: usize,
}

impl Default for RunRegistry {
    fn default() -> Self {
        Self::new(Duration::from_secs(3_600), 32, 8)
    }
}

impl RunRegistry {
    fn new(keep_for: Duration, keep_at_most: usize, running_at_most: usize) -> Self {
        Self {
            runs: Mutex::default(),
            next: AtomicU64::new(0),
            going: AtomicUsize::new(0),
            keep_for,
            keep_at_most,
            running_at_most,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Run>> {
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A place for one more backtest computing, or an error when all are taken.
    fn reserve(registry: &Arc<Self>) -> Result<Slot> {
        registry
            .going
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < registry.running_at_most).then_some(n + 1)
            })
            .map(|_| Slot(Arc::clone(registry)))
            .map_err(|n| {
                Error::rule(
                    ErrorCode::LimitExceeded,
                    "max_running_backtests",
                    format!("{n} backtests are running, the most this server runs at once"),
                    "wait for one to finish (get_run_result tells when a run in the background is done), then run this one again",
                )
            })
    }

    /// Registers a run going on in the background; answers its id.
    fn add(&self, run: Run) -> String {
        let id = format!(
            "bt-{}-{}",
            std::process::id(),
            self.next.fetch_add(1, Ordering::Relaxed) + 1
        );
        let mut runs = self.lock();
        self.prune(&mut runs);
        runs.insert(id.clone(), run);
        id
    }

    /// What `get_run_result` answers for `id`: the result once done, else the progress.
    fn look(&self, id: &str) -> Result<Finished> {
        let mut runs = self.lock();
        self.prune(&mut runs);
        let Some(run) = runs.get(id) else {
            return Err(Error::new(
                ErrorCode::InvalidArgument,
                format!("no run {}", tradedesk_core::error::quote(id)),
                "pass the run_id a backtest answered; a result is kept for an hour after its run ends (the newest 32), so run the backtest again",
            ));
        };
        match run.outcome.get() {
            Some((_, Ok(finished))) => {
                let mut finished = finished.clone();
                finished.result.run_id = Some(id.to_owned());
                Ok(finished)
            }
            Some((_, Err(e))) => Err(e.clone()),
            None => Ok(Finished {
                result: BacktestResult {
                    state: "running".to_owned(),
                    run_id: Some(id.to_owned()),
                    progress: Some(f64::from_bits(run.progress.load(Ordering::Relaxed))),
                    symbol: None,
                    entry: None,
                    exit: None,
                    report: None,
                },
                chart: None,
            }),
        }
    }

    /// Drops results older than `keep_for`, then the oldest beyond `keep_at_most`.
    fn prune(&self, runs: &mut HashMap<String, Run>) {
        let now = Instant::now();
        runs.retain(|_, r| {
            r.finished_at()
                .is_none_or(|at| now.duration_since(at) < self.keep_for)
        });
        let mut ended: Vec<(Instant, String)> = runs
            .iter()
            .filter_map(|(id, r)| Some((r.finished_at()?, id.clone())))
            .collect();
        if ended.len() > self.keep_at_most {
            ended.sort_unstable();
            for (_, id) in &ended[..ended.len() - self.keep_at_most] {
                runs.remove(id);
            }
        }
    }
}

/// An optional number argument: `default` when left out, else checked as
/// [`crate::args::check_number`] does.
fn number(
    name: &str,
    v: Option<f64>,
    default: f64,
    ok: impl Fn(f64) -> bool,
    rule: &str,
) -> Result<f64> {
    crate::args::check_number(name, v.unwrap_or(default), ok, rule).map_err(|mut e| {
        e.hint = format!("pass {name} as {rule}, or leave it out for {default}");
        e
    })
}

/// An optional whole-number argument: `default` when left out, else within `range`.
fn count(
    name: &str,
    v: Option<usize>,
    default: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<usize> {
    let v = v.unwrap_or(default);
    if range.contains(&v) {
        return Ok(v);
    }
    let (low, high) = (range.start(), range.end());
    Err(Error::invalid_argument(
        format!("{name} is {v}: it must be from {low} to {high}"),
        format!("pass {name} from {low} to {high}, or leave it out for {default}"),
    ))
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
            "above 0 and at most 1e15",
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
        max_trades: count("max_trades", a.max_trades, 100, 0..=100_000)?,
        // No default to fall back on: left out, it comes from the bars' spacing.
        bars_per_year: a
            .bars_per_year
            .map(|v| {
                crate::args::check_number(
                    "bars_per_year",
                    v,
                    |v| v > 0.0 && v <= 1e7,
                    "above 0 and at most 10000000",
                )
            })
            .transpose()?,
    })
}

/// Refuses an expression that reads volume over bars that have none (it would be
/// unknown on every bar, and silently never signal).
fn check_volume(which: &str, e: &expr::Expr, symbol: &str, has_volume: bool) -> Result<()> {
    if e.reads(expr::Field::Volume) && !has_volume {
        return Err(Error::invalid_argument(
            format!("{which} reads volume, but the bars of {symbol} have none"),
            format!(
                "use a source with volumes (a CSV needs a volume column), or write {which} without volume"
            ),
        ));
    }
    Ok(())
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

/// The bars as columns, as the engine and the signal language read them.
#[derive(Debug, Clone)]
pub struct BarColumns {
    pub instant: Vec<i64>,
    pub open: Vec<f64>,
    pub high: Vec<f64>,
    pub low: Vec<f64>,
    pub close: Vec<f64>,
    pub volume: Vec<f64>,
    /// From the bars' spacing ([`backtest::bars_per_year`]): a property of the series,
    /// found once as it is loaded, as a peer is given its series' frequency.
    pub bars_per_year: f64,
}

impl BarColumns {
    pub fn of(bars: &[tradedesk_core::Bar]) -> Self {
        let n = bars.len();
        let mut cols = Self {
            instant: Vec::with_capacity(n),
            open: Vec::with_capacity(n),
            high: Vec::with_capacity(n),
            low: Vec::with_capacity(n),
            close: Vec::with_capacity(n),
            volume: Vec::with_capacity(n),
            bars_per_year: 0.0,
        };
        // One pass over the bars (each is read once, not once per column).
        for b in bars {
            cols.instant.push(b.instant.timestamp());
            cols.open.push(b.open);
            cols.high.push(b.high);
            cols.low.push(b.low);
            cols.close.push(b.close);
            cols.volume.push(b.volume.unwrap_or(f64::NAN));
        }
        cols.bars_per_year = backtest::bars_per_year(&cols.instant);
        cols
    }

    /// The columns as the signal language reads them.
    pub fn view(&self) -> Columns<'_> {
        Columns {
            open: &self.open,
            high: &self.high,
            low: &self.low,
            close: &self.close,
            volume: &self.volume,
        }
    }
}

/// Signals and the engine over bars already in columns: the timed core of a backtest.
pub fn run_columns(
    time: &dyn Times,
    cols: &BarColumns,
    entry: &expr::Expr,
    exit: Option<&expr::Expr>,
    settings: &Settings,
    progress: &AtomicU64,
) -> Report {
    // One evaluator: what the entry and the exit share is computed once.
    let mut eval = expr::Evaluator::new(cols.view());
    let entry_sig = eval.condition(entry);
    let exit_sig = exit.map(|e| eval.condition(e));
    let prices = Prices {
        time,
        instant: &cols.instant,
        open: &cols.open,
        close: &cols.close,
    };
    let settings = Settings {
        bars_per_year: settings.bars_per_year.or(Some(cols.bars_per_year)),
        ..*settings
    };
    backtest::run(
        &prices,
        &entry_sig,
        exit_sig.as_deref(),
        &settings,
        &mut |p| {
            progress.store(p.to_bits(), Ordering::Relaxed);
        },
    )
}

/// The equity curve as a PNG, from the report's thinned curve (at most 2,000 points).
pub fn equity_chart(symbol: &str, report: &Report, first: &str, last: &str) -> Option<Vec<u8>> {
    let points: Vec<(f64, f64)> = report.curve.iter().map(|&(i, v)| (i as f64, v)).collect();
    line_chart(
        &format!(
            "{symbol}: equity, {} trade(s), {:+.2}%",
            report.trade_count, report.total_return_pct
        ),
        first,
        last,
        &[Line {
            label: "equity",
            points: &points,
            color: (31, 119, 180),
        }],
    )
    .ok()
}

/// The computation: signals, the engine, the chart. `progress` gets the share done.
pub fn compute(
    symbol: &str,
    bars: &BarTable,
    entry: &expr::Expr,
    exit: Option<&expr::Expr>,
    settings: &Settings,
    progress: &AtomicU64,
    chart: bool,
) -> Finished {
    let report = run_columns(bars, &bars.columns, entry, exit, settings, progress);
    let chart = if chart {
        equity_chart(symbol, &report, &report.start, &report.end)
    } else {
        None
    };
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
        chart,
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
    // Only the columns the rules read (beside the instants, opens and closes).
    let needs = Needs::of(std::iter::once(&entry).chain(exit.as_ref()));
    let (symbol, table) = load_table(ctx, &args.source, needs).await?;
    if table.len() < 2 {
        return Err(Error::invalid_argument(
            format!(
                "the source has {} bar(s): a backtest needs at least 2",
                table.len()
            ),
            "widen the date range or use a longer file",
        ));
    }
    check_volume("entry", &entry, &symbol, table.has_volume)?;
    if let Some(exit) = &exit {
        check_volume("exit", exit, &symbol, table.has_volume)?;
    }
    let slot = RunRegistry::reserve(&ctx.runs)?;
    let share = Arc::new(AtomicU64::new(0f64.to_bits()));
    let job_share = Arc::clone(&share);
    let (entry_text, exit_text) = (args.entry.clone(), args.exit.clone());
    let mut handle = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        let mut finished = compute(
            &symbol,
            &table,
            &entry,
            exit.as_ref(),
            &settings,
            &job_share,
            true,
        );
        finished.result.entry = Some(entry_text);
        finished.result.exit = exit_text;
        finished
    });
    let stopped = |e: tokio::task::JoinError| Error::internal(format!("the backtest stopped: {e}"));
    // wait_seconds 0: answer the run id at once.
    if wait > 0.0 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(wait);
        loop {
            let tick = tokio::time::sleep_until(
                (tokio::time::Instant::now() + Duration::from_millis(250)).min(deadline),
            );
            tokio::select! {
                joined = &mut handle => return joined.map_err(stopped),
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
    }
    // Still going: it keeps running, records how it ended, and get_run_result answers it.
    let outcome = Arc::new(OnceLock::new());
    let ended = Arc::clone(&outcome);
    tokio::spawn(async move {
        let _ = ended.set((Instant::now(), handle.await.map_err(stopped)));
    });
    let id = ctx.runs.add(Run {
        progress: share,
        outcome,
    });
    let mut answer = ctx.runs.look(&id)?;
    if answer.result.state == "running" {
        // The running answer says what is running.
        (answer.result.entry, answer.result.exit) = (Some(args.entry), args.exit);
    }
    Ok(answer)
}

/// `get_run_result`: a run's result once done (as often as asked, while it is kept),
/// else its progress.
///
/// # Errors
/// `invalid_argument` for an id this server never answered or no longer keeps; the
/// run's own error if it failed.
pub async fn get_run_result(ctx: &ToolContext, args: RunResultArgs) -> Result<Finished> {
    ctx.runs.look(&args.run_id)
}

// ---------------------------------------------------------------------------------------
// factor_analysis

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FactorArgs {
    /// At least 3 bar sources, one per asset.
    pub universe: Vec<BarSource>,
    /// The factor, a series in the signal language: for example "ret(close, 20)" or
    /// "-rsi(close, 14)". Higher values are expected to lead to higher returns.
    pub factor: String,
    /// Forward-return horizon in bars (default 5).
    pub horizon: Option<usize>,
    /// Quantile buckets (default 5).
    pub quantiles: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct FactorResult {
    pub factor: String,
    pub horizon: usize,
    pub assets: Vec<String>,
    /// Bar times every asset has (the cross-sections' axis).
    pub common_bars: usize,
    #[serde(flatten)]
    pub stats: tradedesk_research::factor::FactorStats,
    pub definitions: String,
    pub notes: Vec<String>,
}

/// `factor_analysis`.
///
/// # Errors
/// `invalid_argument` (the expression with its position, fewer than 3 sources, no common
/// bars), the sources' errors.
pub async fn factor_analysis(ctx: &ToolContext, args: FactorArgs) -> Result<FactorResult> {
    let factor = expr::parse_series(&args.factor).map_err(|e| {
        Error::invalid_argument(
            format!("factor: {e}"),
            format!(
                "write the factor as a series, such as ret(close, 20); functions: {}",
                expr::FUNCTIONS
            ),
        )
    })?;
    if args.universe.len() < 3 || args.universe.len() > 500 {
        return Err(Error::invalid_argument(
            format!(
                "the universe has {} source(s): it needs 3 to 500",
                args.universe.len()
            ),
            "list at least three bar sources, one per asset",
        ));
    }
    let horizon = count("horizon", args.horizon, 5, 1..=1_000)?;
    let quantiles = count("quantiles", args.quantiles, 5, 2..=20)?;
    let mut series = Vec::with_capacity(args.universe.len());
    for source in &args.universe {
        let bars = load_bars(ctx, source).await?;
        let has_volume = bars.bars.iter().any(|b| b.volume.is_some());
        check_volume("factor", &factor, &bars.symbol, has_volume)?;
        series.push(bars);
    }
    let job = tokio::task::spawn_blocking(move || {
        // The common time axis: the instants every asset has a bar at (matched as
        // instants, so `Z` and `+00:00` agree), named as the first asset names them.
        let mut common: Option<std::collections::BTreeSet<i64>> = None;
        for s in &series {
            let instants = s.bars.iter().map(|b| b.instant.timestamp()).collect();
            common = Some(match common {
                None => instants,
                Some(c) => c.intersection(&instants).copied().collect(),
            });
        }
        let common: Vec<i64> = common.unwrap_or_default().into_iter().collect();
        let mut factor_rows = Vec::with_capacity(series.len());
        let mut fwd_rows = Vec::with_capacity(series.len());
        let mut names = Vec::new();
        for s in &series {
            let cols = BarColumns::of(&s.bars);
            let at: std::collections::HashMap<i64, usize> = cols
                .instant
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, i))
                .collect();
            let places: Vec<usize> = common.iter().filter_map(|t| at.get(t).copied()).collect();
            if names.is_empty() {
                names = places.iter().map(|&i| s.bars[i].time.clone()).collect();
            }
            // The factor on the asset's own bars (its indicators see every bar it has),
            // read at the common times; the forward return along the common times, so
            // every asset's horizon spans the same bars.
            let values = expr::eval_series(&factor, &cols.view());
            factor_rows.push(places.iter().map(|&i| values[i]).collect::<Vec<f64>>());
            let closes: Vec<f64> = places.iter().map(|&i| cols.close[i]).collect();
            fwd_rows.push(tradedesk_research::factor::forward_returns(
                &closes, horizon,
            ));
        }
        let common = names;
        let stats = tradedesk_research::factor::analyze(
            &common,
            &factor_rows,
            &fwd_rows,
            quantiles,
            3,
            horizon - 1,
        );
        (
            common.len(),
            stats,
            series.iter().map(|s| s.symbol.clone()).collect::<Vec<_>>(),
        )
    });
    let (common_bars, stats, assets) = job
        .await
        .map_err(|e| Error::internal(format!("the factor analysis stopped: {e}")))?;
    let mut notes = Vec::new();
    if common_bars == 0 {
        return Err(Error::invalid_argument(
            "the sources share no bar time: cross-sections need the same dates",
            "use sources with the same interval over overlapping dates",
        ));
    }
    if stats.periods == 0 {
        notes.push("no cross-section had 3 assets with both a factor value and a forward return: widen the dates or shorten the indicators' periods".to_owned());
    }
    if horizon > 1 && stats.periods > 1 {
        notes.push(format!(
            "with a horizon of {horizon} bars the forward returns of neighbouring cross-sections overlap by {} bars, so their ICs are correlated: the t-stats are Newey-West with {} lags (see definitions)",
            horizon - 1,
            horizon - 1
        ));
    }
    Ok(FactorResult {
        factor: args.factor,
        horizon,
        assets,
        common_bars,
        stats,
        definitions: tradedesk_research::factor::DEFINITIONS.to_owned(),
        notes,
    })
}

// ---------------------------------------------------------------------------------------
// detect_patterns

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PatternsArgs {
    /// The bars: a CSV file, or a symbol's bars at an account.
    pub source: BarSource,
    /// Which patterns (default all): bullish_engulfing, bearish_engulfing, hammer,
    /// shooting_star, doji, morning_star, evening_star, three_white_soldiers,
    /// three_black_crows, swing_high, swing_low.
    pub patterns: Option<Vec<String>>,
    /// Bars on each side a swing must beat (default 3).
    pub swing_window: Option<usize>,
    /// Swing prices within this percent form one support/resistance level (default 0.5).
    pub level_tolerance_pct: Option<f64>,
    /// Swings a level needs (default 2).
    pub min_touches: Option<usize>,
    /// Hits listed, the most recent kept (default 100, 1 to 10000).
    pub max_hits: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PatternsResult {
    pub symbol: String,
    pub bars: usize,
    /// Oldest first; the most recent max_hits.
    pub hits: Vec<tradedesk_research::patterns::Hit>,
    pub hit_count: usize,
    pub truncated: bool,
    pub levels: Vec<tradedesk_research::patterns::Level>,
    /// Each pattern asked for and the rule that defines it.
    pub rules: std::collections::BTreeMap<String, String>,
}

/// `detect_patterns`.
///
/// # Errors
/// `invalid_argument` (an unknown pattern name, a setting out of range), the source's.
pub async fn detect_patterns(ctx: &ToolContext, args: PatternsArgs) -> Result<PatternsResult> {
    use tradedesk_research::patterns::{Pattern, PatternParams, detect};
    let which: Vec<Pattern> = match &args.patterns {
        None => Pattern::ALL.to_vec(),
        Some(names) if names.is_empty() => {
            return Err(Error::invalid_argument(
                "patterns is an empty list",
                "name at least one pattern, or leave patterns out for all of them",
            ));
        }
        Some(names) => names
            .iter()
            .map(|n| {
                Pattern::parse(n).ok_or_else(|| {
                    Error::invalid_argument(
                        format!("unknown pattern {}", tradedesk_core::error::quote(n)),
                        format!(
                            "patterns are {}",
                            Pattern::ALL
                                .iter()
                                .map(|p| p.name())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )
                })
            })
            .collect::<Result<_>>()?,
    };
    let defaults = PatternParams::default();
    let params = PatternParams {
        swing_window: count(
            "swing_window",
            args.swing_window,
            defaults.swing_window,
            1..=100,
        )?,
        level_tolerance_pct: number(
            "level_tolerance_pct",
            args.level_tolerance_pct,
            defaults.level_tolerance_pct,
            |v| (0.0..=50.0).contains(&v),
            "from 0 to 50",
        )?,
        min_touches: count(
            "min_touches",
            args.min_touches,
            defaults.min_touches,
            1..=100,
        )?,
        trend_window: defaults.trend_window,
    };
    let max_hits = count("max_hits", args.max_hits, 100, 1..=10_000)?;
    let series = load_bars(ctx, &args.source).await?;
    let bars = series.bars;
    let symbol = series.symbol;
    let rules = which
        .iter()
        .map(|p| (p.name().to_owned(), p.rule().to_owned()))
        .collect();
    let (hits, levels, count) = tokio::task::spawn_blocking(move || {
        let time: Vec<String> = bars.iter().map(|b| b.time.clone()).collect();
        let c = BarColumns::of(&bars);
        let (hits, levels) = detect(&time, &c.open, &c.high, &c.low, &c.close, &which, &params);
        (hits, levels, bars.len())
    })
    .await
    .map_err(|e| Error::internal(format!("the pattern scan stopped: {e}")))?;
    let hit_count = hits.len();
    let keep = hits.len().saturating_sub(max_hits);
    Ok(PatternsResult {
        symbol,
        bars: count,
        hits: hits[keep..].to_vec(),
        hit_count,
        truncated: keep > 0,
        levels,
        rules,
    })
}

/// A backtest's answer: the result, its equity curve beside it as an image.
fn answer(call: &mut Call<'_>, finished: Finished) -> BacktestResult {
    call.attach_images(finished.chart);
    finished.result
}

fn backtest_summary(r: &BacktestResult) -> String {
    match &r.report {
        Some(rep) => format!(
            "{}: {} bar(s) {} to {}; {} trade(s), total return {:.2}%, max drawdown {:.2}%, final equity {:.2}{}.{}",
            r.symbol.as_deref().unwrap_or("?"),
            rep.bars,
            rep.start,
            rep.end,
            rep.trade_count,
            rep.total_return_pct,
            rep.max_drawdown_pct,
            rep.final_equity,
            rep.open_position
                .as_ref()
                .map(|_| ", a position still open")
                .unwrap_or_default(),
            notes_suffix(&rep.notes)
        ),
        None => format!(
            "still running ({:.2} done): call get_run_result with run_id {}",
            r.progress.unwrap_or(0.0),
            serde_json::Value::String(r.run_id.clone().unwrap_or_default())
        ),
    }
}

/// backtest.
#[derive(Debug)]
pub struct Backtest;

impl Tool for Backtest {
    type Args = BacktestArgs;
    type Output = BacktestResult;
    const META: Meta = Meta::live(
        "backtest",
        "Backtest a strategy",
        crate::toolset::Toolset::Research,
        "Would this have worked? Tests entry/exit signals over bars: a signal is \
                evaluated on a bar's close and fills at the next bar's open, so it never trades \
                on the bar it saw. Signal language: numbers; open, high, low, close, volume; \
                sma(x,n), ema(x,n), rsi(x,n), atr(n), bb_upper(x,n,k), bb_lower(x,n,k), \
                highest(x,n), lowest(x,n), ret(x,n), shift(x,n), cross_above(a,b), \
                cross_below(a,b); < <= > >= == !=; + - * /; and, or, not; parentheses. A \
                condition with an indicator still in its warm-up never signals. Returns the \
                metrics (return, CAGR, volatility, Sharpe, Sortino, max drawdown, win rate, \
                profit factor, exposure), the trades, any open position and the equity curve as \
                an image; a run longer than wait_seconds answers a run_id for get_run_result.",
    );

    async fn run(call: &mut Call<'_>, a: BacktestArgs) -> Result<BacktestResult> {
        let finished = backtest(call.ctx, a, call.progress).await?;
        Ok(answer(call, finished))
    }

    fn summary(r: &BacktestResult) -> String {
        backtest_summary(r)
    }
}

/// factor_analysis.
#[derive(Debug)]
pub struct FactorAnalysis;

impl Tool for FactorAnalysis {
    type Args = FactorArgs;
    type Output = FactorResult;
    const META: Meta = Meta::live(
        "factor_analysis",
        "Factor analysis",
        crate::toolset::Toolset::Research,
        "Does a factor predict returns across a universe? Evaluates a factor (a \
                series in backtest's signal language) over 3 or more bar sources on their common \
                dates: information coefficient (Pearson) and rank IC (Spearman) against forward \
                returns per cross-section, their mean, deviation and t-stat, hit rate, and mean \
                forward return by quantile. The result states the definitions.",
    );

    async fn run(call: &mut Call<'_>, a: FactorArgs) -> Result<FactorResult> {
        factor_analysis(call.ctx, a).await
    }

    fn summary(r: &FactorResult) -> String {
        format!(
            "{} over {} asset(s), {} cross-section(s), horizon {} bar(s): IC mean {}, rank IC mean {}, IC t-stat {}, hit rate {}%.{}",
            serde_json::Value::String(r.factor.clone()),
            r.assets.len(),
            r.stats.periods,
            r.horizon,
            fmt_opt(r.stats.ic_mean),
            fmt_opt(r.stats.rank_ic_mean),
            fmt_opt(r.stats.ic_t_stat),
            fmt_opt(r.stats.hit_rate_pct),
            notes_suffix(&r.notes)
        )
    }
}

/// detect_patterns.
#[derive(Debug)]
pub struct DetectPatterns;

impl Tool for DetectPatterns {
    type Args = PatternsArgs;
    type Output = PatternsResult;
    const META: Meta = Meta::live(
        "detect_patterns",
        "Candlestick and swing patterns",
        crate::toolset::Toolset::Research,
        "Scans bars for candlestick patterns (engulfing, hammer, shooting star, \
                doji, morning/evening star, three white soldiers/black crows), swing highs and \
                lows, and support/resistance levels where swings cluster. Each hit has its bar \
                time; the result states each pattern's exact rule.",
    );

    async fn run(call: &mut Call<'_>, a: PatternsArgs) -> Result<PatternsResult> {
        detect_patterns(call.ctx, a).await
    }

    fn summary(r: &PatternsResult) -> String {
        format!(
            "{}: {} pattern hit(s) in {} bar(s){}; {} support/resistance level(s).",
            r.symbol,
            r.hit_count,
            r.bars,
            if r.truncated {
                " (the most recent listed)"
            } else {
                ""
            },
            r.levels.len()
        )
    }
}

/// get_run_result.
#[derive(Debug)]
pub struct GetRunResult;

impl Tool for GetRunResult {
    type Args = RunResultArgs;
    type Output = BacktestResult;
    const META: Meta = Meta::live(
        "get_run_result",
        "A long run's result",
        crate::toolset::Toolset::Research,
        "The result of a backtest that answered a run_id: the full result once \
                done (kept an hour after the run ends, the newest 32), else its progress.",
    );

    async fn run(call: &mut Call<'_>, a: RunResultArgs) -> Result<BacktestResult> {
        let finished = get_run_result(call.ctx, a).await?;
        Ok(answer(call, finished))
    }

    fn summary(r: &BacktestResult) -> String {
        backtest_summary(r)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ended(ago: Duration, outcome: Result<Finished>) -> Run {
        Run {
            progress: Arc::default(),
            outcome: Arc::new(OnceLock::from((Instant::now() - ago, outcome))),
        }
    }

    fn going() -> Run {
        Run {
            progress: Arc::new(AtomicU64::new(0.25f64.to_bits())),
            outcome: Arc::default(),
        }
    }

    fn done() -> Finished {
        Finished {
            result: BacktestResult {
                state: "done".to_owned(),
                run_id: None,
                progress: None,
                symbol: Some("X".to_owned()),
                entry: None,
                exit: None,
                report: None,
            },
            chart: Some(vec![1, 2, 3]),
        }
    }

    #[test]
    fn results_stay_for_every_fetch_until_they_age_or_newer_ones_crowd_them_out() {
        let runs = RunRegistry::new(Duration::from_secs(60), 2, 2);
        let old = runs.add(ended(Duration::from_secs(61), Ok(done())));
        let first = runs.add(ended(Duration::from_secs(3), Ok(done())));
        let failed = runs.add(ended(
            Duration::from_secs(2),
            Err(Error::internal("the backtest stopped")),
        ));
        let running = runs.add(going());
        // Older than keep_for: gone, with a message that says why and what to do.
        let gone = runs.look(&old).unwrap_err();
        assert!(gone.message.contains(&old), "{gone}");
        // Any number of fetches answer the same result.
        for _ in 0..3 {
            let f = runs.look(&first).unwrap();
            assert_eq!(f.result.run_id.as_deref(), Some(first.as_str()));
            assert_eq!(f.chart, Some(vec![1, 2, 3]));
        }
        assert_eq!(
            runs.look(&failed).unwrap_err().message,
            "the backtest stopped"
        );
        let r = runs.look(&running).unwrap();
        assert_eq!(
            (r.result.state.as_str(), r.result.progress),
            ("running", Some(0.25))
        );
        // A third result crowds out the oldest; a run still going is never dropped.
        let newest = runs.add(ended(Duration::from_secs(1), Ok(done())));
        assert!(runs.look(&first).unwrap_err().message.contains(&first));
        assert_eq!(
            runs.look(&failed).unwrap_err().message,
            "the backtest stopped"
        );
        assert!(runs.look(&newest).is_ok());
        assert!(runs.look(&running).is_ok());
    }

    #[test]
    fn at_most_so_many_backtests_compute_at_once_and_a_place_is_given_back_when_one_ends() {
        let runs = Arc::new(RunRegistry::new(Duration::from_secs(60), 2, 2));
        let a = RunRegistry::reserve(&runs).unwrap();
        let b = RunRegistry::reserve(&runs).unwrap();
        let full = RunRegistry::reserve(&runs).unwrap_err();
        assert_eq!(full.code, ErrorCode::LimitExceeded);
        assert_eq!(full.rule, Some("max_running_backtests"));
        assert!(full.message.contains("2 backtests"), "{full}");
        drop(a);
        let c = RunRegistry::reserve(&runs).unwrap();
        drop((b, c));
        assert_eq!(runs.going.load(Ordering::Acquire), 0);
    }
}

/// A backtest over a CSV file read into a table answers exactly what it answered over
/// the file's bars, and a server asked again on an unchanged file reads it once.
#[cfg(test)]
mod table_tests {
    #![allow(
        clippy::unwrap_used,
        clippy::float_arithmetic,
        clippy::cast_precision_loss
    )]
    use std::fmt::Write as _;

    use serde_json::json;

    use super::*;
    use crate::bar_table::{BarCache, CACHE_BYTES, read_table};

    /// A walk of `n` bars, its times written in `form`.
    fn walk(n: usize, form: usize, seed: u64) -> String {
        let mut state = seed;
        let mut price = 100.0_f64;
        let mut text = String::from("time,open,high,low,close,volume\n");
        for i in 0..n {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let open = price;
            price *= 1.0 + u * 0.02;
            let at =
                chrono::DateTime::from_timestamp(1_700_000_000 + i64::try_from(i).unwrap() * 60, 0)
                    .unwrap();
            let time = match form {
                0 => (at.date_naive() + chrono::Duration::days(i64::try_from(i).unwrap()))
                    .format("%Y-%m-%d")
                    .to_string(),
                1 => at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                2 => at
                    .with_timezone(&chrono::FixedOffset::west_opt(5 * 3_600).unwrap())
                    .to_rfc3339(),
                _ => format!("{}.5Z", at.format("%Y-%m-%dT%H:%M:%S")),
            };
            let _ = writeln!(
                text,
                "{time},{open},{},{},{price},{}",
                open.max(price) * 1.001,
                open.min(price) * 0.999,
                i % 7
            );
        }
        text
    }

    #[test]
    fn a_backtest_over_the_table_answers_what_it_answered_over_the_bars() {
        let dir = tempfile::tempdir().unwrap();
        let entry = expr::parse_condition("cross_above(sma(close, 5), sma(close, 20))").unwrap();
        let exit =
            expr::parse_condition("cross_below(sma(close, 5), sma(close, 20)) or volume > 5")
                .unwrap();
        for form in 0..4 {
            let path = dir.path().join(format!("W{form}.csv"));
            std::fs::write(&path, walk(3_000, form, 0x9e37_79b9 + form as u64)).unwrap();
            let table = read_table(&path).unwrap();
            let bars = crate::bars::read_csv(&path).unwrap().bars;
            for settings in [
                Settings::default(),
                Settings {
                    direction: Direction::Short,
                    fee_bps: 5.0,
                    max_trades: 3,
                    ..Settings::default()
                },
            ] {
                let progress = AtomicU64::new(0);
                let new = compute("W", &table, &entry, Some(&exit), &settings, &progress, true);
                // As the backtest ran before: the bars' own times and columns.
                let time: Vec<&str> = bars.iter().map(|b| b.time.as_str()).collect();
                let old = run_columns(
                    &time,
                    &BarColumns::of(&bars),
                    &entry,
                    Some(&exit),
                    &settings,
                    &progress,
                );
                let old_chart = equity_chart("W", &old, time[0], time[time.len() - 1]);
                let report = new.result.report.unwrap();
                assert!(
                    report.trade_count > 10,
                    "form {form}: {}",
                    report.trade_count
                );
                assert_eq!(
                    serde_json::to_value(&report).unwrap(),
                    serde_json::to_value(&old).unwrap(),
                    "form {form}"
                );
                let bits = |c: &[(usize, f64)]| {
                    c.iter().map(|&(i, v)| (i, v.to_bits())).collect::<Vec<_>>()
                };
                assert_eq!(bits(&report.curve), bits(&old.curve), "form {form}");
                assert_eq!(new.chart, old_chart, "form {form}");
            }
        }
    }

    #[tokio::test]
    async fn repeated_backtests_on_an_unchanged_file_read_it_once_and_a_changed_one_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("W.csv");
        std::fs::write(&path, walk(500, 1, 7)).unwrap();
        let mut ctx = ToolContext::new("test");
        ctx.bar_cache = BarCache::new(CACHE_BYTES, Duration::from_millis(100));
        tokio::time::sleep(Duration::from_millis(250)).await;
        let args =
            json!({"source": {"csv": path}, "entry": "close > open", "exit": "close < open"});
        let first = crate::call(&ctx, "backtest", args.clone()).await.unwrap();
        let again = crate::call(&ctx, "backtest", args.clone()).await.unwrap();
        assert_eq!(first.structured, again.structured);
        assert_eq!(first.images, again.images);
        assert_eq!(ctx.bar_cache.parsed(), 1);
        // Rewritten with the same length (each bar's open and close swapped): the new
        // prices are backtested.
        let text: String = std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let c: Vec<&str> = line.split(',').collect();
                match i {
                    0 => format!("{line}\n"),
                    _ => format!("{},{},{},{},{},{}\n", c[0], c[4], c[2], c[3], c[1], c[5]),
                }
            })
            .collect();
        assert_eq!(text.len(), std::fs::read(&path).unwrap().len());
        std::fs::write(&path, text).unwrap();
        let changed = crate::call(&ctx, "backtest", args).await.unwrap();
        assert_eq!(ctx.bar_cache.parsed(), 2);
        assert_ne!(
            changed.structured["final_equity"],
            first.structured["final_equity"]
        );
    }
}
