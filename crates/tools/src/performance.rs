//! get_performance: time- and money-weighted return of an account or the whole book
//! over a date range, from daily valuations, against an optional benchmark
//! (docs/methodology/research.md, "Performance").
//!
//! One clock: day d runs from its start to its close. The replay walks the book forward
//! a day at a time: external flows (deposits, withdrawals) and the day's fills and other
//! cash land on their own day, then the account is valued at the day's close with the
//! marks and FX rates of that day, exactly as the portfolio tools value `as_of` (each
//! row converted and rounded once, totals the sums of the rows).

// Returns are analytics (f64); the values they come from are money (Decimal).
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)]

use chrono::{Days, NaiveDate};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::ledger::Replayer;
use tradedesk_core::{Book, CashKind, Currency, DateRange, Error, InstrumentIdx, Result};
use tradedesk_research::performance::{Flow, twr, xirr};

use crate::market::{BarSource, load_bars};
use crate::num::Num;
use crate::rates::Rates;
use crate::select::Selection;
use crate::tool::{Call, Meta, Tool, fmt_opt, notes_suffix};
use crate::valuation::{LedgerState, Scope, value_at};

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerformanceArgs {
    /// First day, YYYY-MM-DD (returns start from the close of the day before).
    pub start: String,
    /// Last day, YYYY-MM-DD, inclusive; not after the book's as_of.
    pub end: String,
    /// Only this account (default: the whole book).
    pub account: Option<String>,
    /// Report currency (upper-case ISO 4217 code). Default: the base currency.
    pub currency: Option<String>,
    /// Bars to compare with: a CSV file, or a symbol's bars at an account.
    pub benchmark: Option<BarSource>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PerformanceResult {
    pub currency: String,
    pub start: String,
    pub end: String,
    /// The account, or null for the whole book.
    pub account: Option<String>,
    /// Value at the close of the day before start (0 if nothing was held).
    pub start_value: Num,
    /// Value at the close of end.
    pub end_value: Num,
    /// Deposits minus withdrawals from start to end, each converted on its day.
    pub net_flows: Num,
    /// Time-weighted return over the range, in percent.
    pub twr_pct: Option<f64>,
    /// Money-weighted return (XIRR, actual/365), annualized, in percent.
    pub mwr_pct: Option<f64>,
    /// mwr_pct over the range's length, not annualized.
    pub mwr_period_pct: Option<f64>,
    pub benchmark_symbol: Option<String>,
    /// Last close before start to last close on or before end.
    pub benchmark_return_pct: Option<f64>,
    /// twr_pct minus benchmark_return_pct.
    pub excess_return_pct: Option<f64>,
    /// Days valued (the day before start through end).
    pub days: usize,
    pub method: String,
    pub notes: Vec<String>,
}

const METHOD: &str = "Day d runs from its start to its close. The account is valued at each day's close with the marks and FX rates of that day (the latest on or before it), as the portfolio tools value as_of; a position with no mark yet is valued at its last fill price. External flows (deposits and withdrawals; dividends, interest and fees are returns, not flows) happen at the start of their day, converted at that day's rate. TWR chains the daily returns V_d / (V_(d-1) + F_d) - 1 over the range, skipping days that start with no capital. MWR is the XIRR (actual/365, solved to 1e-10 in the rate) of -start_value at the start of start, -F at the start of each flow's day and +end_value at the close of end (the start of the next day); mwr_period_pct is that rate over the range's length. The benchmark return runs from its last close before start to its last close on or before end.";

/// Days a range may span.
const MAX_DAYS: i64 = 36_600;

/// A day's value and flows, in minor units of the report currency.
#[derive(Debug, Clone, Copy)]
struct Day {
    flow: i128,
    value: i128,
}

/// Values `sel`'s accounts at the close of every day from `first` to `last`, with the
/// external flows of each day.
fn daily(
    book: &Book,
    sel: &Selection,
    currency: Currency,
    first: NaiveDate,
    last: NaiveDate,
    notes: &mut Vec<String>,
) -> Result<Vec<Day>> {
    let dp = currency.minor_units();
    // Rows are already rounded to the currency: as minor units they are exact.
    let minor = |d: Decimal| {
        d.checked_mul(Decimal::from(10i64.pow(dp)))
            .and_then(|m| m.to_i128())
            .ok_or_else(|| tradedesk_core::bounds::too_large(format!("a daily value of {d}")))
    };
    let mut cash: Vec<usize> = (0..book.cash.len()).collect();
    cash.sort_by_key(|&i| (book.cash[i].time.date_naive(), i));
    let mut replayer = Replayer::new(book, true);
    let mut rates = Rates::new(book);
    // The last fill price per instrument: the fallback for a position with no mark yet.
    let mut last_price: Vec<Option<(NaiveDate, Decimal)>> = vec![None; book.instruments.len()];
    let (mut next_fill, mut next_cash) = (0, 0);
    let mut unmarked = std::collections::BTreeSet::new();
    let mut missing = crate::rates::Missing::default();
    let mut unmarked_at_end = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    // The cash as a map, made again only on a day that moved it.
    let mut cash_now = replayer.cash();
    let mut day = first;
    while day <= last {
        let (before_cash, before_fill) = (next_cash, next_fill);
        let mut flow = 0i128;
        while let Some(&i) = cash.get(next_cash) {
            let entry = &book.cash[i];
            if entry.time.date_naive() > day {
                break;
            }
            replayer.cash_entry(entry)?;
            if sel.account(entry.account)
                && matches!(entry.kind, CashKind::Deposit | CashKind::Withdrawal)
            {
                // A flow without a rate is left out, as its cash is (noted below).
                if let Some(v) =
                    rates.try_convert_rounded(entry.amount, entry.currency, currency, day)?
                {
                    flow += minor(v)?;
                }
            }
            next_cash += 1;
        }
        while let Some(fill) = book.fills.get(next_fill) {
            if fill.trade_date > day {
                break;
            }
            replayer.fill(next_fill, |_, _| {})?;
            last_price[fill.instrument as usize] = Some((fill.trade_date, fill.price));
            next_fill += 1;
        }
        let before_actions = replayer.actions_applied();
        replayer.advance_to(day, |_, _| {})?;
        if (next_cash, next_fill) != (before_cash, before_fill)
            || replayer.actions_applied() != before_actions
        {
            cash_now = replayer.cash();
        }
        let state = LedgerState {
            fifo: replayer.fifo(),
            cash: &cash_now,
            has_cash_entries: replayer.has_cash_entries(),
        };
        // Asked only for a position without a mark on the day: it records which.
        let unmarked_today = std::cell::RefCell::new(Vec::new());
        let fallback = |i: InstrumentIdx| {
            unmarked_today.borrow_mut().push(i);
            last_price.get(i as usize).copied().flatten()
        };
        let valuation = value_at(
            book,
            state,
            currency,
            Scope {
                accounts: true,
                selection: Some(sel),
            },
            day,
            &fallback,
        )?;
        for i in unmarked_today.into_inner() {
            unmarked.insert(i);
            if day == last {
                unmarked_at_end.insert(i);
            }
        }
        let mut value = 0i128;
        // Rows without a rate into the report currency are left out (noted below).
        for p in &valuation.positions {
            if let Some(v) = p.marked.as_ref().and_then(|m| m.market_value_converted) {
                value += minor(v)?;
            }
        }
        for c in &valuation.cash {
            if let Some(v) = c.converted {
                value += minor(v)?;
            }
        }
        missing.extend(&valuation.missing);
        out.push(Day { flow, value });
        day = day
            .checked_add_days(Days::new(1))
            .ok_or_else(|| Error::internal("date overflow"))?;
    }
    let names = |set: &std::collections::BTreeSet<InstrumentIdx>| {
        let mut names: Vec<String> = set
            .iter()
            .map(|i| book.instrument(*i).key.qualified())
            .collect();
        names.sort();
        names.join(", ")
    };
    if !unmarked.is_empty() {
        notes.push(format!(
            "on some days {} had no mark yet and were valued at their last fill price, so buying them is not counted as a loss",
            names(&unmarked)
        ));
    }
    if !unmarked_at_end.is_empty() {
        notes.push(format!(
            "end_value includes {} at the last fill price; the portfolio tools leave a position without a mark out of their totals",
            names(&unmarked_at_end)
        ));
    }
    let unknown: Vec<&str> = book
        .accounts
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            u32::try_from(*i).is_ok_and(|i| sel.account(i))
                && !replayer
                    .has_cash_entries()
                    .get(*i)
                    .copied()
                    .unwrap_or(false)
        })
        .map(|(_, a)| a.id.as_str())
        .collect();
    if !unknown.is_empty() {
        notes.push(format!(
            "{} ha{} no cash entries, so cash is unknown and only positions are valued; returns then mix in the cash spent on buys",
            unknown.join(", "),
            if unknown.len() == 1 { "s" } else { "ve" }
        ));
    }
    missing.extend(&rates.missing);
    for &i in replayer.unconverted_commissions() {
        if let Some(f) = book.fills.get(i as usize) {
            missing.add(
                f.commission_currency,
                book.instrument(f.instrument).currency,
                f.trade_date,
            );
        }
    }
    missing.notes(
        "the daily values of positions, cash and flows (or commissions)",
        notes,
    );
    Ok(out)
}

/// The benchmark's return over the range, by bar date (the first 10 characters of the
/// bar's time, its own local date).
fn benchmark_return(
    bars: &[tradedesk_core::Bar],
    start: NaiveDate,
    end: NaiveDate,
    notes: &mut Vec<String>,
) -> Option<f64> {
    let date = |b: &tradedesk_core::Bar| {
        b.time
            .get(..10)
            .and_then(|d| NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
    };
    let before = bars
        .iter()
        .rev()
        .find(|b| date(b).is_some_and(|d| d < start));
    let at_end = bars
        .iter()
        .rev()
        .find(|b| date(b).is_some_and(|d| d <= end));
    match (before, at_end) {
        (Some(a), Some(b)) if a.close > 0.0 => Some((b.close / a.close - 1.0) * 100.0),
        _ => {
            notes.push(format!(
                "the benchmark has no close before {start} (or none on or before {end}), so its return is null"
            ));
            None
        }
    }
}

/// `get_performance`.
///
/// # Errors
/// `invalid_date_range` for a range that ends after as_of; `invalid_argument` for one
/// too long; `no_fx_rate`;
/// the benchmark source's errors.
pub async fn get_performance(
    ctx: &crate::context::ToolContext,
    book: &Book,
    sel: &Selection,
    a: &PerformanceArgs,
    currency: Currency,
) -> Result<PerformanceResult> {
    let range = DateRange::parse(&a.start, &a.end)?;
    if range.end > book.as_of {
        return Err(Error::new(
            tradedesk_core::ErrorCode::InvalidDateRange,
            format!(
                "end {} is after the book's as_of {}: there are no valuations after it",
                range.end, book.as_of
            ),
            format!("pass an end on or before {}", book.as_of),
        ));
    }
    let span = (range.end - range.start).num_days() + 1;
    if span > MAX_DAYS {
        return Err(Error::invalid_argument(
            format!("the range spans {span} days: at most {MAX_DAYS} are valued"),
            "pass a shorter range",
        ));
    }
    let first = range
        .start
        .checked_sub_days(Days::new(1))
        .ok_or_else(|| Error::invalid_argument("start is too early", "pass a later start"))?;
    let mut notes = Vec::new();
    let days = daily(book, sel, currency, first, range.end, &mut notes)?;
    let dp = currency.minor_units();
    let money = |v: i128| crate::num::minor(v, dp);
    let as_f64 = |v: i128| v as f64;
    let start_value = days.first().map_or(0, |d| d.value);
    let end_value = days.last().map_or(0, |d| d.value);
    let in_range = days.get(1..).unwrap_or_default();
    let net_flows: i128 = in_range.iter().map(|d| d.flow).sum();
    let chained: Vec<(f64, f64, f64)> = days
        .windows(2)
        .map(|w| (as_f64(w[0].value), as_f64(w[1].flow), as_f64(w[1].value)))
        .collect();
    let (growth, counted) = twr(&chained);
    let twr_pct = (counted > 0).then_some(growth * 100.0);
    if counted == 0 {
        notes.push("no capital was held in the range, so there is no return".to_owned());
    }
    let mut flows = vec![Flow {
        days: 0.0,
        amount: -as_f64(start_value),
    }];
    for (i, d) in in_range.iter().enumerate() {
        if d.flow != 0 {
            flows.push(Flow {
                days: i as f64,
                amount: -as_f64(d.flow),
            });
        }
    }
    flows.push(Flow {
        days: span as f64,
        amount: as_f64(end_value),
    });
    let mwr = xirr(&flows);
    if mwr.is_none() && counted > 0 {
        notes.push(
            "the money-weighted return has no solution for these flows (all of one sign)"
                .to_owned(),
        );
    }
    let (benchmark_symbol, benchmark_return_pct) = match &a.benchmark {
        None => (None, None),
        Some(source) => {
            let series = load_bars(ctx, source).await?;
            let r = benchmark_return(&series.bars, range.start, range.end, &mut notes);
            (Some(series.symbol), r)
        }
    };
    Ok(PerformanceResult {
        currency: currency.code().to_owned(),
        start: range.start.to_string(),
        end: range.end.to_string(),
        account: a.account.clone(),
        start_value: money(start_value)?,
        end_value: money(end_value)?,
        net_flows: money(net_flows)?,
        twr_pct,
        mwr_pct: mwr.map(|r| r * 100.0),
        mwr_period_pct: mwr.map(|r| ((1.0 + r).powf(span as f64 / 365.0) - 1.0) * 100.0),
        benchmark_symbol,
        benchmark_return_pct,
        excess_return_pct: twr_pct.zip(benchmark_return_pct).map(|(t, b)| t - b),
        days: days.len(),
        method: METHOD.to_owned(),
        notes,
    })
}

/// get_performance: the book, then daily valuations and the benchmark.
#[derive(Debug)]
pub struct GetPerformance;

impl Tool for GetPerformance {
    type Args = PerformanceArgs;
    type Output = PerformanceResult;
    const META: Meta = Meta::live(
        "get_performance",
        "Performance against a benchmark",
        crate::toolset::Toolset::Portfolio,
        "Did I beat the index? Time-weighted and money-weighted (XIRR) return of \
                an account or the whole book, from daily valuations at that day's marks and FX \
                and the deposits and withdrawals between, against an optional benchmark; the \
                result states the method.",
    )
    .partial();

    async fn run(call: &mut Call<'_>, a: PerformanceArgs) -> Result<PerformanceResult> {
        let book = call.book_for(a.account.as_deref()).await?;
        let ccy = crate::args::report_currency_in(&book, a.currency.as_deref())?;
        let sel = crate::select::select(&book, a.account.as_deref(), None, None)?;
        get_performance(call.ctx, &book, &sel, &a, ccy).await
    }

    fn summary(r: &PerformanceResult) -> String {
        format!(
            "{} to {} ({}): value {} -> {} {}, net flows {}; TWR {}%, MWR {}% a year{}.{}",
            r.start,
            r.end,
            r.account.as_deref().unwrap_or("whole book"),
            r.start_value.0,
            r.end_value.0,
            r.currency,
            r.net_flows.0,
            fmt_opt(r.twr_pct),
            fmt_opt(r.mwr_pct),
            r.benchmark_return_pct
                .map(|b| format!(", benchmark {b:.4}%"))
                .unwrap_or_default(),
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"start": "2026-01-01", "end": "2026-11-27", "account": "IBKR-DEMO"})
    }
}
