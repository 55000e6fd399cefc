//! The backtest engine, as docs/methodology/research.md says: signals on each bar's close, fills
//! at the next bar's open, fees and slippage against the trader, whole or fractional
//! units, long or short, equity marked at every close.

use schemars::JsonSchema;
use serde::Serialize;

use crate::expr::TRUE;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Long,
    Short,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub direction: Direction,
    pub initial_cash: f64,
    pub fee_bps: f64,
    pub slippage_bps: f64,
    /// Fraction of equity committed at entry, in (0, 1].
    pub size: f64,
    pub fractional: bool,
    pub max_trades: usize,
    /// `None`: from the bars' median spacing.
    pub bars_per_year: Option<f64>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            direction: Direction::Long,
            initial_cash: 10_000.0,
            fee_bps: 0.0,
            slippage_bps: 0.0,
            size: 1.0,
            fractional: true,
            max_trades: 100,
            bars_per_year: None,
        }
    }
}

/// The bars' times as a result names them: the source's own text. A report names only a
/// few bars (its start and end, the listed trades, the drawdown's), so a source may keep
/// its times as numbers and write the text of a bar only when it is asked for.
pub trait Times: std::fmt::Debug {
    /// How many bars have a time.
    fn count(&self) -> usize;
    /// The time of bar `i` (below [`Times::count`]), exactly as the source gives it.
    fn time(&self, i: usize) -> String;
}

impl<S: AsRef<str> + std::fmt::Debug> Times for [S] {
    fn count(&self) -> usize {
        self.len()
    }

    fn time(&self, i: usize) -> String {
        self.get(i)
            .map(|t| t.as_ref().to_owned())
            .unwrap_or_default()
    }
}

impl<S: AsRef<str> + std::fmt::Debug> Times for Vec<S> {
    fn count(&self) -> usize {
        self.len()
    }

    fn time(&self, i: usize) -> String {
        self.as_slice().time(i)
    }
}

/// The bars a backtest runs over.
#[derive(Debug, Clone, Copy)]
pub struct Prices<'a> {
    pub time: &'a dyn Times,
    /// Unix seconds of each bar, for spacing and CAGR.
    pub instant: &'a [i64],
    pub open: &'a [f64],
    pub close: &'a [f64],
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Trade {
    pub entry_time: String,
    pub entry_price: f64,
    pub exit_time: String,
    pub exit_price: f64,
    pub quantity: f64,
    pub side: Direction,
    /// Net of both fees.
    pub pnl: f64,
    /// Fees excluded.
    pub return_pct: f64,
    #[serde(skip)]
    pub entry_bar: usize,
    #[serde(skip)]
    pub exit_bar: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct OpenPosition {
    pub entry_time: String,
    pub entry_price: f64,
    pub quantity: f64,
    pub side: Direction,
    pub last_price: f64,
    /// At the last close, net of the entry fee, before any exit fee.
    pub unrealized_pnl: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Report {
    pub bars: usize,
    pub start: String,
    pub end: String,
    pub final_equity: f64,
    pub total_return_pct: f64,
    pub cagr_pct: Option<f64>,
    pub volatility_pct: Option<f64>,
    pub sharpe: Option<f64>,
    pub sortino: Option<f64>,
    pub max_drawdown_pct: f64,
    pub max_drawdown_start: Option<String>,
    pub max_drawdown_end: Option<String>,
    pub trade_count: usize,
    pub win_rate_pct: Option<f64>,
    pub profit_factor: Option<f64>,
    pub exposure_pct: f64,
    pub trades: Vec<Trade>,
    pub trades_truncated: bool,
    pub open_position: Option<OpenPosition>,
    pub bars_per_year: f64,
    pub notes: Vec<String>,
    /// The equity curve (at each bar's close) thinned for the chart: of each of at most
    /// 1,000 buckets of bars, the lowest and the highest bar as (bar index, equity), in bar
    /// order, so no drawdown disappears. Not serialized.
    #[serde(skip)]
    pub curve: Vec<(usize, f64)>,
}

/// 252 when the bars' median spacing is between 20 hours and 4 days, else a year over
/// the median spacing.
pub fn bars_per_year(instant: &[i64]) -> f64 {
    // Evenly spaced bars (the usual case): the spacing is the median, no sort needed.
    if let [a, b, ..] = instant
        && b > a
        && evenly_spaced(instant, b - a)
    {
        return per_year((b - a) as f64);
    }
    let mut gaps: Vec<i64> = instant
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|g| *g > 0)
        .collect();
    if gaps.is_empty() {
        return 252.0;
    }
    // The median in linear time: the upper middle, and for an even count the lower one
    // (the largest of the lower half).
    let count = gaps.len();
    let mid = count / 2;
    let (lower, upper, _) = gaps.select_nth_unstable(mid);
    let upper = *upper;
    let median = if count.is_multiple_of(2) {
        let below = lower.iter().copied().max().unwrap_or(upper);
        (below + upper) as f64 / 2.0
    } else {
        upper as f64
    };
    per_year(median)
}

/// Whether each instant is `step` after the one before. Blocks are folded without a
/// branch, so the check vectorizes; it stops at the first block with another step.
fn evenly_spaced(instant: &[i64], step: i64) -> bool {
    let (now, before) = (&instant[1..], &instant[..instant.len() - 1]);
    now.chunks(64).zip(before.chunks(64)).all(|(now, before)| {
        now.iter()
            .zip(before)
            .fold(true, |even, (a, b)| even & (a.wrapping_sub(*b) == step))
    })
}

/// Bars a year at a median spacing of `seconds`.
fn per_year(seconds: f64) -> f64 {
    if (20.0 * 3600.0..=4.0 * 86_400.0).contains(&seconds) {
        252.0
    } else {
        365.25 * 86_400.0 / seconds
    }
}

/// Runs the strategy. `entry` and `exit` are conditions per bar ([`crate::expr::TRUE`]
/// signals); `progress` is told the share done now and then.
pub fn run(
    prices: &Prices<'_>,
    entry: &[u8],
    exit: Option<&[u8]>,
    settings: &Settings,
    progress: &mut dyn FnMut(f64),
) -> Report {
    let n = prices
        .close
        .len()
        .min(prices.open.len())
        .min(prices.time.count())
        .min(entry.len());
    // Slices of exactly n bars: the loop below indexes them without checks.
    let (open_col, close_col, entry) = (&prices.open[..n], &prices.close[..n], &entry[..n]);
    let exit = exit.map(|e| &e[..n.min(e.len())]);
    let long = settings.direction == Direction::Long;
    let mut book = Position {
        settings,
        time: prices.time,
        long,
        fee: settings.fee_bps / 10_000.0,
        slip: settings.slippage_bps / 10_000.0,
        cash: settings.initial_cash,
        units: 0.0,
        entry_price: 0.0,
        entry_fee: 0.0,
        entry_bar: 0,
        trades: Vec::new(),
        trade_count: 0,
        gross_win: 0.0,
        gross_loss: 0.0,
        wins: 0,
        skipped: 0,
    };
    // The open a pending signal fills at (an entry when flat, else an exit), read as
    // soon as the signal is found: the open column is not otherwise streamed, so the
    // read misses the cache, and issued early it overlaps the run of bars before the fill.
    let mut pending: Option<f64> = None;
    let mut curve = Curve::new(n);
    let mut held_bars = 0usize;
    let mut stats = Stats::default();
    // The engine goes a run of bars at a time, from one fill to the next signal: flat,
    // the equity is the cash on every bar of the run, which the statistics, the drawdown
    // and the chart's curve take at once; in a position, each close's equity goes into a
    // small buffer (a run is cut at its length) that they then read in loops without
    // calls. Fills are rare and out of line.
    const PIECE: usize = 1024;
    let mut values = vec![0.0_f64; PIECE];
    let report_every = (n / 100).max(1);
    let mut reported = 0;
    let mut t = 0;
    while t < n {
        // A signal on the previous close fills at this bar's open.
        if let Some(open) = pending.take() {
            if book.units == 0.0 {
                book.enter(t, open);
            } else {
                book.exit(t, open);
            }
        }
        let (signals, flat) = if book.units == 0.0 {
            (Some(entry), true)
        } else {
            (exit, false)
        };
        // The run ends at the bar after the next signal, or at the piece's end in a
        // position. Signals on the last bar do nothing: no signal is read there.
        let limit = if flat { n } else { n.min(t + PIECE) };
        let next = signals.and_then(|sig| {
            sig.get(t..limit.min(n - 1))?
                .iter()
                .position(|&v| v == TRUE)
                .map(|p| t + p)
        });
        let end = next.map_or(limit, |s| s + 1);
        if next.is_some() {
            // A signal is never read on the last bar, so `end` is a bar.
            pending = Some(open_col[end]);
        }
        if flat {
            let cash = book.cash;
            stats.add_constant(t, cash, end - t);
            curve.add_constant(t, cash, end - t);
        } else {
            let slots = &mut values[..end - t];
            let (cash, units) = (book.cash, book.units);
            for (slot, close) in slots.iter_mut().zip(&close_col[t..end]) {
                *slot = cash + units * close;
            }
            held_bars += end - t;
            stats.add_chunk(t, slots);
            curve.add_chunk(t, slots);
        }
        t = end;
        if t - reported >= report_every {
            progress(t as f64 / n as f64);
            reported = t;
        }
    }
    let Position {
        units,
        entry_price,
        entry_fee,
        entry_bar,
        trades,
        trade_count,
        gross_win,
        gross_loss,
        wins,
        skipped,
        ..
    } = book;
    let open_position = (units != 0.0).then(|| {
        let last = prices.close[n - 1];
        let qty = units.abs();
        OpenPosition {
            entry_time: prices.time.time(entry_bar),
            entry_price,
            quantity: qty,
            side: settings.direction,
            last_price: last,
            unrealized_pnl: if long {
                qty * (last - entry_price) - entry_fee
            } else {
                qty * (entry_price - last) - entry_fee
            },
        }
    });
    let mut notes = Vec::new();
    if skipped > 0 {
        notes.push(format!(
            "{skipped} entry signal(s) were skipped: the quantity they would buy rounds to 0 units (fractional is false or cash is spent)"
        ));
    }
    let bpy = settings
        .bars_per_year
        .unwrap_or_else(|| bars_per_year(prices.instant));
    let Stats {
        count,
        sum,
        sum_sq,
        down_sq,
        drawdown,
        previous,
    } = stats;
    let mean = (count > 0).then(|| sum / count as f64);
    let sd = (count > 1).then(|| {
        let nf = count as f64;
        ((sum_sq - sum * sum / nf) / (nf - 1.0)).max(0.0).sqrt()
    });
    let downside = (count > 0 && down_sq > 0.0).then(|| (down_sq / count as f64).sqrt());
    // The equity at the last close: the last value the statistics took.
    let final_equity = previous.unwrap_or(settings.initial_cash);
    let days = match (prices.instant.first(), prices.instant.last()) {
        (Some(a), Some(b)) => (b - a) as f64 / 86_400.0,
        _ => 0.0,
    };
    let (dd, dd_start, dd_end) = drawdown.best;
    progress(1.0);
    Report {
        bars: n,
        start: prices.time.time(0),
        end: prices.time.time(prices.time.count().saturating_sub(1)),
        final_equity,
        total_return_pct: (final_equity / settings.initial_cash - 1.0) * 100.0,
        cagr_pct: (days >= 1.0 && final_equity > 0.0)
            .then(|| ((final_equity / settings.initial_cash).powf(365.25 / days) - 1.0) * 100.0),
        volatility_pct: sd.map(|s| s * bpy.sqrt() * 100.0),
        sharpe: match (mean, sd) {
            (Some(m), Some(s)) if s > 0.0 => Some(m / s * bpy.sqrt()),
            _ => None,
        },
        sortino: match (mean, downside) {
            (Some(m), Some(d)) => Some(m / d * bpy.sqrt()),
            _ => None,
        },
        max_drawdown_pct: dd,
        max_drawdown_start: dd_start.map(|i| prices.time.time(i)),
        max_drawdown_end: dd_end.map(|i| prices.time.time(i)),
        trade_count,
        win_rate_pct: (trade_count > 0).then(|| wins as f64 / trade_count as f64 * 100.0),
        profit_factor: (gross_loss > 0.0).then(|| gross_win / gross_loss),
        exposure_pct: if n == 0 {
            0.0
        } else {
            held_bars as f64 / n as f64 * 100.0
        },
        trades_truncated: trade_count > trades.len(),
        trades,
        open_position,
        bars_per_year: bpy,
        notes,
        curve: curve.finish(),
    }
}

/// The equity curve thinned as it is made: see [`Report::curve`].
struct Curve {
    bucket: usize,
    filled: usize,
    low: (usize, f64),
    high: (usize, f64),
    points: Vec<(usize, f64)>,
}

impl Curve {
    fn new(n: usize) -> Self {
        Self {
            bucket: n.div_ceil(1_000).max(1),
            filled: 0,
            low: (0, 0.0),
            high: (0, 0.0),
            points: Vec::with_capacity(2_000),
        }
    }

    /// Adds the equity of bars `from..` (`values`), a bucket's share at a time: the
    /// loop over a share only compares.
    fn add_chunk(&mut self, from: usize, values: &[f64]) {
        let (mut rest, mut t) = (values, from);
        while let Some(&first) = rest.first() {
            let (share, tail) = rest.split_at((self.bucket - self.filled).min(rest.len()));
            let (mut low, mut high) = if self.filled == 0 {
                ((t, first), (t, first))
            } else {
                (self.low, self.high)
            };
            for (k, &v) in share.iter().enumerate() {
                if v < low.1 {
                    low = (t + k, v);
                }
                if v > high.1 {
                    high = (t + k, v);
                }
            }
            (self.low, self.high) = (low, high);
            self.filled += share.len();
            if self.filled == self.bucket {
                self.flush();
            }
            (rest, t) = (tail, t + share.len());
        }
    }

    /// Adds `k` bars from `from` whose equity is `value` on each: in each bucket only the
    /// first of them can be its lowest or highest (ties keep the earliest bar).
    fn add_constant(&mut self, from: usize, value: f64, k: usize) {
        let (mut t, mut left) = (from, k);
        while left > 0 {
            let share = (self.bucket - self.filled).min(left);
            if self.filled == 0 {
                (self.low, self.high) = ((t, value), (t, value));
            } else {
                if value < self.low.1 {
                    self.low = (t, value);
                }
                if value > self.high.1 {
                    self.high = (t, value);
                }
            }
            self.filled += share;
            if self.filled == self.bucket {
                self.flush();
            }
            (t, left) = (t + share, left - share);
        }
    }

    #[cold]
    #[inline(never)]
    fn flush(&mut self) {
        if self.filled == 0 {
            return;
        }
        let (a, b) = if self.low.0 <= self.high.0 {
            (self.low, self.high)
        } else {
            (self.high, self.low)
        };
        self.points.push(a);
        if b.0 != a.0 {
            self.points.push(b);
        }
        self.filled = 0;
    }

    fn finish(mut self) -> Vec<(usize, f64)> {
        self.flush();
        self.points
    }
}

/// The account while the engine runs, and what fills change in it.
struct Position<'a> {
    settings: &'a Settings,
    time: &'a dyn Times,
    long: bool,
    fee: f64,
    slip: f64,
    cash: f64,
    /// Signed units held.
    units: f64,
    entry_price: f64,
    entry_fee: f64,
    entry_bar: usize,
    trades: Vec<Trade>,
    trade_count: usize,
    gross_win: f64,
    gross_loss: f64,
    wins: usize,
    skipped: usize,
}

impl Position<'_> {
    /// Enters at bar `t`'s open (with slippage), or skips an entry of 0 units.
    #[cold]
    #[inline(never)]
    fn enter(&mut self, t: usize, open: f64) {
        let (fee, long) = (self.fee, self.long);
        let fill = if long {
            open * (1.0 + self.slip)
        } else {
            open * (1.0 - self.slip)
        };
        let budget = self.cash.max(0.0) * self.settings.size;
        let mut qty = budget / (fill * (1.0 + fee));
        if !self.settings.fractional {
            qty = qty.floor();
        }
        if qty > 0.0 && qty.is_finite() {
            self.entry_fee = qty * fill * fee;
            if long {
                self.cash -= qty * fill + self.entry_fee;
                self.units = qty;
            } else {
                self.cash += qty * fill - self.entry_fee;
                self.units = -qty;
            }
            self.entry_price = fill;
            self.entry_bar = t;
        } else {
            self.skipped += 1;
        }
    }

    /// Exits at bar `t`'s open (with slippage) and books the trade.
    #[cold]
    #[inline(never)]
    fn exit(&mut self, t: usize, open: f64) {
        let (fee, long, entry_price) = (self.fee, self.long, self.entry_price);
        let qty = self.units.abs();
        let fill = if long {
            open * (1.0 - self.slip)
        } else {
            open * (1.0 + self.slip)
        };
        let exit_fee = qty * fill * fee;
        let pnl = if long {
            self.cash += qty * fill - exit_fee;
            qty * (fill - entry_price) - self.entry_fee - exit_fee
        } else {
            self.cash -= qty * fill + exit_fee;
            qty * (entry_price - fill) - self.entry_fee - exit_fee
        };
        self.units = 0.0;
        self.trade_count += 1;
        if pnl > 0.0 {
            self.wins += 1;
            self.gross_win += pnl;
        } else {
            self.gross_loss -= pnl;
        }
        if self.trades.len() < self.settings.max_trades {
            self.trades.push(Trade {
                entry_time: self.time.time(self.entry_bar),
                entry_price,
                exit_time: self.time.time(t),
                exit_price: fill,
                quantity: qty,
                side: self.settings.direction,
                pnl,
                return_pct: if long {
                    (fill / entry_price - 1.0) * 100.0
                } else {
                    (entry_price / fill - 1.0) * 100.0
                },
                entry_bar: self.entry_bar,
                exit_bar: t,
            });
        }
    }
}

/// What the report needs from the equity curve, gathered as the engine runs (a run of
/// equal values at once): the bar returns (their count, sum, sum of squares and downside
/// squares) and the maximum drawdown. The sums are added in another order than one bar
/// at a time would (four lanes, runs at once), so they equal that to rounding.
#[derive(Debug, Default)]
struct Stats {
    count: usize,
    sum: f64,
    sum_sq: f64,
    down_sq: f64,
    previous: Option<f64>,
    drawdown: Drawdown,
}

impl Stats {
    /// Adds the equity of bars `from..` (`values`). The sums run in four lanes without a
    /// branch, so the divisions and the sums vectorize; the lanes are added at the end.
    fn add_chunk(&mut self, from: usize, values: &[f64]) {
        let Some((&first, _)) = values.split_first() else {
            return;
        };
        // The first bar pairs with the last of the previous chunk, if any.
        if let Some(before) = self.previous {
            self.add(bar_return(before, first));
        }
        let (now, before) = (&values[1..], &values[..values.len() - 1]);
        let (mut sum, mut sum_sq, mut down_sq) = ([0.0_f64; 4], [0.0_f64; 4], [0.0_f64; 4]);
        let (now4, before4) = (now.chunks_exact(4), before.chunks_exact(4));
        let (now_rest, before_rest) = (now4.remainder(), before4.remainder());
        for (now, before) in now4.zip(before4) {
            for lane in 0..4 {
                let r = bar_return(before[lane], now[lane]);
                let down = r.min(0.0);
                sum[lane] += r;
                sum_sq[lane] += r * r;
                down_sq[lane] += down * down;
            }
        }
        self.count += now.len() - now_rest.len();
        self.sum += (sum[0] + sum[1]) + (sum[2] + sum[3]);
        self.sum_sq += (sum_sq[0] + sum_sq[1]) + (sum_sq[2] + sum_sq[3]);
        self.down_sq += (down_sq[0] + down_sq[1]) + (down_sq[2] + down_sq[3]);
        for (&now, &before) in now_rest.iter().zip(before_rest) {
            self.add(bar_return(before, now));
        }
        self.previous = values.last().copied();
        self.drawdown.add_chunk(from, values);
    }

    /// Adds `k` bars from `from` whose equity is `value` on each: after the first, the
    /// returns are exactly 0 (unless the value is not a number, then bar by bar).
    fn add_constant(&mut self, from: usize, value: f64, k: usize) {
        if k == 0 {
            return;
        }
        if value.is_nan() {
            for _ in 0..k {
                if let Some(before) = self.previous {
                    self.add(bar_return(before, value));
                }
                self.previous = Some(value);
            }
        } else {
            if let Some(before) = self.previous {
                self.add(bar_return(before, value));
            }
            self.count += k - 1;
            self.previous = Some(value);
        }
        // Only the first of equal values can move the peak or the low.
        self.drawdown.add_chunk(from, &[value]);
    }

    fn add(&mut self, r: f64) {
        let down = r.min(0.0);
        self.count += 1;
        self.sum += r;
        self.sum_sq += r * r;
        self.down_sq += down * down;
    }
}

/// The return from one bar's equity to the next's: exactly 0 for an unchanged value (a
/// flat bar) and after a value of 0. Branch-free: the division is done and discarded.
fn bar_return(before: f64, now: f64) -> f64 {
    let r = now / before - 1.0;
    if before == 0.0 || now == before {
        0.0
    } else {
        r
    }
}

/// The largest peak-to-trough fall in percent, the peak (the earliest bar at which that
/// peak value was reached) and the trough.
#[derive(Debug)]
struct Drawdown {
    peak: f64,
    peak_at: usize,
    /// The lowest value since the peak: only a new low can deepen the drawdown, so the
    /// division is done only then.
    low: f64,
    best: (f64, Option<usize>, Option<usize>),
}

impl Default for Drawdown {
    fn default() -> Self {
        Self {
            peak: f64::NEG_INFINITY,
            peak_at: 0,
            low: f64::NEG_INFINITY,
            best: (0.0, None, None),
        }
    }
}

impl Drawdown {
    /// Adds the equity of bars `from..` (`values`), with the running state in locals.
    fn add_chunk(&mut self, from: usize, values: &[f64]) {
        let (mut peak, mut peak_at, mut low) = (self.peak, self.peak_at, self.low);
        let mut best = self.best;
        for (k, &v) in values.iter().enumerate() {
            if v > peak {
                peak = v;
                peak_at = from + k;
                low = v;
            } else if peak > 0.0 && v < low {
                low = v;
                let dd = (peak - v) / peak * 100.0;
                if dd > best.0 {
                    best = (dd, Some(peak_at), Some(from + k));
                }
            }
        }
        (self.peak, self.peak_at, self.low, self.best) = (peak, peak_at, low, best);
    }
}

#[cfg(test)]
fn max_drawdown(equity: &[f64]) -> (f64, Option<usize>, Option<usize>) {
    let mut d = Drawdown::default();
    d.add_chunk(0, equity);
    d.best
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::expr::{FALSE, UNKNOWN};

    fn prices(open: &[f64], _close: &[f64]) -> (Vec<String>, Vec<i64>) {
        let time = (0..open.len())
            .map(|i| format!("2026-01-{:02}", i + 1))
            .collect();
        let instant = (0..open.len())
            .map(|i| 1_767_225_600 + i64::try_from(i).unwrap() * 86_400)
            .collect();
        (time, instant)
    }

    /// A small case worked by hand: every fill, fee and equity point.
    #[test]
    fn a_long_round_trip_by_hand() {
        let open = [10.0, 10.0, 11.0, 12.0, 12.5, 13.0];
        let close = [10.0, 11.0, 12.0, 12.0, 13.0, 13.5];
        let (time, instant) = prices(&open, &close);
        let time: Vec<&str> = time.iter().map(String::as_str).collect();
        let p = Prices {
            time: &time,
            instant: &instant,
            open: &open,
            close: &close,
        };
        // Entry signal on bar 0 → buy at bar 1's open; exit signal on bar 3 → sell at bar 4's open.
        let entry = [TRUE, FALSE, FALSE, FALSE, FALSE, FALSE];
        let exit = [UNKNOWN, FALSE, FALSE, TRUE, FALSE, FALSE];
        let s = Settings {
            fee_bps: 10.0,
            slippage_bps: 0.0,
            initial_cash: 1000.0,
            ..Settings::default()
        };
        let r = run(&p, &entry, Some(&exit), &s, &mut |_| {});
        // qty = 1000 / (10 x 1.001) = 99.9000999...; entry fee = qty x 10 x 0.001 = 0.999000999.
        let qty: f64 = 1000.0 / (10.0 * 1.001);
        let entry_fee = qty * 10.0 * 0.001;
        // cash after entry = 1000 - qty x 10 - fee = 0 (all committed).
        assert!((qty * 10.0 + entry_fee - 1000.0).abs() < 1e-9);
        // Equity: bar0 1000; bar1 qty x 11; bar2 qty x 12; bar3 qty x 12; exit at 12.5 on bar4.
        let exit_fee = qty * 12.5 * 0.001;
        let after = qty * 12.5 - exit_fee;
        let want = [1000.0, qty * 11.0, qty * 12.0, qty * 12.0, after, after];
        // Six bars: one bar per bucket, so the curve is every bar.
        assert_eq!(r.curve.len(), want.len());
        for ((i, a), (j, b)) in r.curve.iter().zip(want.iter().enumerate()) {
            assert_eq!(*i, j);
            assert!((a - b).abs() < 1e-9, "{:?}", r.curve);
        }
        assert_eq!(r.trade_count, 1);
        let t = &r.trades[0];
        assert_eq!(
            (t.entry_time.as_str(), t.exit_time.as_str()),
            ("2026-01-02", "2026-01-05")
        );
        assert_eq!((t.entry_price, t.exit_price), (10.0, 12.5));
        assert!((t.pnl - (qty * 2.5 - entry_fee - exit_fee)).abs() < 1e-9);
        assert!((t.return_pct - 25.0).abs() < 1e-12);
        assert_eq!(r.open_position, None);
        // Held at the closes of bars 1, 2, 3: 3 of 6.
        assert!((r.exposure_pct - 50.0).abs() < 1e-12);
        assert!((r.final_equity - after).abs() < 1e-9);
        assert_eq!(r.win_rate_pct, Some(100.0));
        assert_eq!(r.profit_factor, None);
        // bars a day apart → 252.
        assert_eq!(r.bars_per_year, 252.0);
    }

    #[test]
    fn shorts_slippage_whole_units_and_an_open_position() {
        let open = [100.0, 100.0, 90.0, 80.0];
        let close = [100.0, 95.0, 85.0, 82.0];
        let (time, instant) = prices(&open, &close);
        let time: Vec<&str> = time.iter().map(String::as_str).collect();
        let p = Prices {
            time: &time,
            instant: &instant,
            open: &open,
            close: &close,
        };
        let entry = [TRUE, FALSE, FALSE, FALSE];
        let s = Settings {
            direction: Direction::Short,
            slippage_bps: 100.0,
            fractional: false,
            initial_cash: 1000.0,
            ..Settings::default()
        };
        let r = run(&p, &entry, None, &s, &mut |_| {});
        // A short entry sells at 100 x 0.99 = 99; units floor(1000 / 99) = 10.
        let o = r.open_position.clone().unwrap();
        assert_eq!(
            (o.entry_price, o.quantity, o.last_price),
            (99.0, 10.0, 82.0)
        );
        assert!((o.unrealized_pnl - 170.0).abs() < 1e-9);
        // Equity at the last close: 1000 + 990 - 820.
        assert!((r.final_equity - 1170.0).abs() < 1e-9);
        assert_eq!(r.trade_count, 0);
        // A signal on the last bar does nothing.
        let late = [FALSE, FALSE, FALSE, TRUE];
        let r = run(&p, &late, None, &Settings::default(), &mut |_| {});
        assert!(r.open_position.is_none() && r.trade_count == 0);
    }

    #[test]
    fn the_curve_keeps_each_buckets_lowest_and_highest_bar_across_chunks() {
        // 2,500 bars: buckets of 3, so buckets straddle the engine's chunks of 1,024.
        let values: Vec<f64> = (0..2_500_u32)
            .map(|i| f64::from((i * 7_919) % 1_000) - f64::from(i % 3) * 0.5)
            .collect();
        let mut curve = Curve::new(values.len());
        for (k, chunk) in values.chunks(1_024).enumerate() {
            curve.add_chunk(k * 1_024, chunk);
        }
        let mut want = Vec::new();
        for (b, bucket) in values.chunks(3).enumerate() {
            let at = |pick: fn(f64, f64) -> bool| {
                let mut best = 0;
                for (k, &v) in bucket.iter().enumerate() {
                    if pick(v, bucket[best]) {
                        best = k;
                    }
                }
                (b * 3 + best, bucket[best])
            };
            let (low, high) = (at(|v, w| v < w), at(|v, w| v > w));
            let (a, z) = if low.0 <= high.0 {
                (low, high)
            } else {
                (high, low)
            };
            want.push(a);
            if z.0 != a.0 {
                want.push(z);
            }
        }
        assert_eq!(curve.finish(), want);
    }

    #[test]
    fn return_sums_in_lanes_match_one_bar_at_a_time() {
        // Flat stretches (returns of exactly 0), a value of 0, odd chunk lengths.
        let values: Vec<f64> = (0..3_001_u32)
            .map(|i| match i % 50 {
                0..=9 => 100.0,
                10 => 0.0,
                k => 100.0 + f64::from((i * 31) % 17) - f64::from(k) * 0.1,
            })
            .collect();
        let mut stats = Stats::default();
        let mut from = 0;
        for len in [1, 2, 5, 1_024, 7].into_iter().cycle() {
            let to = (from + len).min(values.len());
            stats.add_chunk(from, &values[from..to]);
            from = to;
            if from == values.len() {
                break;
            }
        }
        let (mut sum, mut sum_sq, mut down_sq) = (0.0, 0.0, 0.0);
        for w in values.windows(2) {
            let r = if w[0] == 0.0 || w[1] == w[0] {
                0.0
            } else {
                w[1] / w[0] - 1.0
            };
            sum += r;
            sum_sq += r * r;
            if r < 0.0 {
                down_sq += r * r;
            }
        }
        assert_eq!(stats.count, values.len() - 1);
        for (got, want) in [
            (stats.sum, sum),
            (stats.sum_sq, sum_sq),
            (stats.down_sq, down_sq),
        ] {
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{got} vs {want}"
            );
        }
    }

    #[test]
    fn flat_runs_taken_at_once_match_the_same_bars_one_by_one() {
        // Runs of equal values (flat, held at the cash) between runs that move, across
        // the curve's buckets of 3 and through a value of 0 and a NaN.
        let mut runs: Vec<Vec<f64>> = Vec::new();
        for k in 0..200_u32 {
            let level = 1_000.0 + f64::from(k % 7) * 13.0 - f64::from(k % 3) * 20.0;
            runs.push(vec![level; (k % 11 + 1) as usize]);
            runs.push(
                (0..(k % 5))
                    .map(|i| level + f64::from(i) * 3.5 - 4.0)
                    .collect(),
            );
        }
        runs.push(vec![0.0; 4]);
        runs.push(vec![900.0; 3]);
        check_runs_against_bars(&runs);
        // A value that is not a number spoils the sums either way, bar by bar alike.
        runs.push(vec![f64::NAN; 2]);
        runs.push(vec![900.0; 3]);
        check_runs_against_bars(&runs);
    }

    fn check_runs_against_bars(runs: &[Vec<f64>]) {
        let all: Vec<f64> = runs.concat();
        let (mut by_runs, mut one_by_one) = (Stats::default(), Stats::default());
        let (mut curve_runs, mut curve_bars) = (Curve::new(2_500), Curve::new(2_500));
        let mut t = 0;
        for run in runs {
            if run.len() > 1 && run.iter().all(|v| v.to_bits() == run[0].to_bits()) {
                by_runs.add_constant(t, run[0], run.len());
                curve_runs.add_constant(t, run[0], run.len());
            } else if !run.is_empty() {
                by_runs.add_chunk(t, run);
                curve_runs.add_chunk(t, run);
            }
            t += run.len();
        }
        for (k, v) in all.iter().enumerate() {
            one_by_one.add_chunk(k, std::slice::from_ref(v));
            curve_bars.add_chunk(k, std::slice::from_ref(v));
        }
        assert_eq!(by_runs.count, one_by_one.count);
        for (a, b) in [
            (by_runs.sum, one_by_one.sum),
            (by_runs.sum_sq, one_by_one.sum_sq),
            (by_runs.down_sq, one_by_one.down_sq),
        ] {
            assert!(
                (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-12 * b.abs().max(1.0),
                "{a} vs {b}"
            );
        }
        assert_eq!(by_runs.drawdown.best, one_by_one.drawdown.best);
        let (a, b) = (curve_runs.finish(), curve_bars.finish());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert!(
                x.0 == y.0 && x.1.to_bits() == y.1.to_bits(),
                "{x:?} vs {y:?}"
            );
        }
    }

    #[test]
    fn drawdown_peaks_at_the_earliest_bar_of_the_peak() {
        let (dd, start, end) = max_drawdown(&[100.0, 120.0, 120.0, 90.0, 130.0, 117.0]);
        assert!((dd - 25.0).abs() < 1e-12);
        assert_eq!((start, end), (Some(1), Some(3)));
        assert_eq!(max_drawdown(&[1.0, 2.0, 3.0]), (0.0, None, None));
    }

    #[test]
    fn bars_per_year_from_spacing() {
        assert_eq!(bars_per_year(&[0, 86_400, 172_800]), 252.0);
        assert!((bars_per_year(&[0, 3_600, 7_200]) - 8_766.0).abs() < 1e-9);
        assert!((bars_per_year(&[0, 604_800, 1_209_600]) - 365.25 / 7.0).abs() < 1e-9);
    }
}
