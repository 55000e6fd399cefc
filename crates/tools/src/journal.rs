//! analyze_trades: journal analytics over the closed lots of a period (the lots
//! get_realized_pnl reports), one "trade" per closing fill. Every lot is converted and
//! rounded exactly as get_realized_pnl rounds it, so the totals agree to the cent.

// Analytics: floating point is the point here (docs/methodology/research.md).
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)]

use chrono::{Datelike, Weekday};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::ledger;
use tradedesk_core::{Book, Currency, DateRange, ErrorCode, Result};

use crate::num::Num;
use crate::realized::LotValuer;
use crate::select::{Selection, select_owned};
use crate::tool::{Call, Meta, Tool, fmt_opt, notes_suffix};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JournalArgs {
    /// First closing trade date, YYYY-MM-DD, inclusive.
    pub start: String,
    /// Last closing trade date, YYYY-MM-DD, inclusive.
    pub end: String,
    /// Only this account id (see get_accounts).
    pub account: Option<String>,
    /// Only accounts at this broker (e.g. ibkr, moomoo).
    pub broker: Option<String>,
    /// Bare (AAPL, 1155) or qualified (BURSA:1155).
    pub symbol: Option<String>,
    /// Report currency (upper-case ISO 4217 code). Default: the base currency.
    pub currency: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct WeekdayRow {
    /// Monday .. Sunday, of the closing trade date.
    pub weekday: String,
    pub trade_count: u32,
    pub net_pnl: Num,
    pub win_rate_pct: Option<f64>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HoldingRow {
    /// <1d, 1-7d, 7-30d, 30-365d or >365d (lower bound included).
    pub period: String,
    pub trade_count: u32,
    pub net_pnl: Num,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct JournalResult {
    pub currency: String,
    pub start: String,
    pub end: String,
    /// Closing fills with closed lots in the period.
    pub trade_count: u32,
    /// Sum of the trades' net P&L: get_realized_pnl's net_pnl for the same filters.
    pub net_pnl: Num,
    pub winning_trades: u32,
    pub losing_trades: u32,
    /// Trades with a net P&L of exactly zero (neither wins nor losses).
    pub breakeven_trades: u32,
    /// Share of trades with net P&L above zero.
    pub win_rate_pct: Option<f64>,
    /// Mean net P&L of the winning trades.
    pub average_win: Option<Num>,
    /// Mean net P&L of the losing trades (negative).
    pub average_loss: Option<Num>,
    /// average_win / |average_loss|.
    pub payoff_ratio: Option<f64>,
    /// Gross wins / |gross losses|; null without losses.
    pub profit_factor: Option<f64>,
    /// Mean net P&L per trade.
    pub expectancy: Option<Num>,
    pub largest_win: Option<Num>,
    /// The most negative trade (negative).
    pub largest_loss: Option<Num>,
    pub average_holding_days_winners: Option<f64>,
    pub average_holding_days_losers: Option<f64>,
    pub longest_win_streak: u32,
    pub longest_loss_streak: u32,
    pub by_weekday: Vec<WeekdayRow>,
    pub by_holding_period: Vec<HoldingRow>,
    pub notes: Vec<String>,
}

/// One closing fill: the net P&L of its lots (minor units) and their quantity-weighted
/// holding days.
#[derive(Debug, Clone, Copy)]
struct Trade {
    fill: usize,
    weekday: Weekday,
    net: i128,
    weighted_days: f64,
    quantity: f64,
}

impl Trade {
    fn holding_days(&self) -> f64 {
        if self.quantity > 0.0 {
            self.weighted_days / self.quantity
        } else {
            0.0
        }
    }
}

const PERIODS: [(&str, f64); 5] = [
    ("<1d", 1.0),
    ("1-7d", 7.0),
    ("7-30d", 30.0),
    ("30-365d", 365.0),
    (">365d", f64::INFINITY),
];

fn period_of(days: f64) -> usize {
    PERIODS
        .iter()
        .position(|(_, below)| days < *below)
        .unwrap_or(PERIODS.len() - 1)
}

/// The trades of the period, in closing order.
fn trades(
    book: &Book,
    sel: &Selection,
    range: DateRange,
    to: Currency,
) -> Result<(Vec<Trade>, bool, Vec<String>)> {
    let mut valuer = LotValuer::new(book, to);
    let mut no_rate_lots = 0u32;
    let mut out: Vec<Trade> = Vec::new();
    let mut failure = None;
    let mut gross_of_fees = false;
    ledger::replay_lots(book, |_, lot| {
        if failure.is_some()
            || !range.contains(lot.close_date)
            || !sel.matches(lot.account, lot.instrument)
        {
            return;
        }
        let valued = match valuer.value(lot) {
            Ok(v) => v,
            // Left out, with a note naming the pair (docs/methodology/fx.md).
            Err(e) if e.code == ErrorCode::NoFxRate => {
                no_rate_lots += 1;
                return;
            }
            Err(e) => {
                failure = Some(tradedesk_core::bounds::at(e, || {
                    format!("fill {}", book.fills[lot.close_fill as usize].id)
                }));
                return;
            }
        };
        gross_of_fees |= !lot.commission_known;
        let quantity = lot.quantity().to_f64().unwrap_or(0.0);
        let days = (lot.close_date - lot.open_date).num_days() as f64;
        let close = lot.close_fill as usize;
        match out.last_mut() {
            Some(t) if t.fill == close => {
                t.net += valued.net;
                t.weighted_days += quantity * days;
                t.quantity += quantity;
            }
            _ => out.push(Trade {
                fill: close,
                weekday: lot.close_date.weekday(),
                net: valued.net,
                weighted_days: quantity * days,
                quantity,
            }),
        }
    })?;
    let mut notes = Vec::new();
    if no_rate_lots > 0 {
        valuer.rates.missing.notes(
            &format!("{no_rate_lots} closed lot(s) (priced on their closing dates)"),
            &mut notes,
        );
    }
    match failure {
        Some(e) => Err(e),
        None => Ok((out, gross_of_fees, notes)),
    }
}

/// Longest runs of wins and of losses, in closing order (a zero trade ends both).
fn streaks(trades: &[Trade]) -> (u32, u32) {
    let (mut win, mut loss, mut best_win, mut best_loss) = (0, 0, 0, 0);
    for t in trades {
        if t.net > 0 {
            win += 1;
            loss = 0;
        } else if t.net < 0 {
            loss += 1;
            win = 0;
        } else {
            win = 0;
            loss = 0;
        }
        best_win = u32::max(best_win, win);
        best_loss = u32::max(best_loss, loss);
    }
    (best_win, best_loss)
}

fn mean_days(trades: &[&Trade]) -> Option<f64> {
    (!trades.is_empty())
        .then(|| trades.iter().map(|t| t.holding_days()).sum::<f64>() / trades.len() as f64)
}

/// `analyze_trades`.
///
/// # Errors
/// `invalid_book` when a total passes what the engine holds (a lot without a rate is
/// left out with a note).
pub fn analyze_trades(
    book: &Book,
    sel: &Selection,
    range: DateRange,
    to: Currency,
) -> Result<JournalResult> {
    let dp = to.minor_units();
    let money = |v: i128| crate::num::minor(v, dp);
    // A mean of minor units, rounded once as the currency rounds.
    let mean = |sum: i128, n: usize| -> Result<Option<Num>> {
        if n == 0 {
            return Ok(None);
        }
        let exact = money(sum)?.0 / Decimal::from(n);
        Ok(Some(Num(to.round(exact))))
    };
    let (trades, gross_of_fees, fx_notes) = trades(book, sel, range, to)?;
    let wins: Vec<&Trade> = trades.iter().filter(|t| t.net > 0).collect();
    let losses: Vec<&Trade> = trades.iter().filter(|t| t.net < 0).collect();
    let won: i128 = wins.iter().map(|t| t.net).sum();
    let lost: i128 = losses.iter().map(|t| t.net).sum();
    let total: i128 = trades.iter().map(|t| t.net).sum();
    let n = trades.len();
    let ratio = |a: i128, b: i128| (b != 0).then(|| a as f64 / b as f64);
    let payoff_ratio = match (wins.len(), losses.len()) {
        (0, _) | (_, 0) => None,
        (w, l) => Some((won as f64 / w as f64) / (-lost as f64 / l as f64)),
    };
    let (longest_win_streak, longest_loss_streak) = streaks(&trades);
    let mut weekdays: Vec<(Weekday, u32, i128, u32)> = [
        Weekday::Mon,
        Weekday::Tue,
        Weekday::Wed,
        Weekday::Thu,
        Weekday::Fri,
        Weekday::Sat,
        Weekday::Sun,
    ]
    .iter()
    .map(|d| (*d, 0, 0, 0))
    .collect();
    let mut periods = [(0u32, 0i128); PERIODS.len()];
    for t in &trades {
        let row = &mut weekdays[t.weekday.num_days_from_monday() as usize];
        row.1 += 1;
        row.2 += t.net;
        row.3 += u32::from(t.net > 0);
        let p = &mut periods[period_of(t.holding_days())];
        p.0 += 1;
        p.1 += t.net;
    }
    let by_weekday = weekdays
        .into_iter()
        // Weekends only when something closed then (crypto, say).
        .filter(|(d, count, _, _)| *count > 0 || !matches!(d, Weekday::Sat | Weekday::Sun))
        .map(|(d, count, net, won)| {
            Ok(WeekdayRow {
                weekday: weekday_name(d).to_owned(),
                trade_count: count,
                net_pnl: money(net)?,
                win_rate_pct: (count > 0).then(|| f64::from(won) / f64::from(count) * 100.0),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let by_holding_period = PERIODS
        .iter()
        .zip(periods)
        .map(|((name, _), (count, net))| {
            Ok(HoldingRow {
                period: (*name).to_owned(),
                trade_count: count,
                net_pnl: money(net)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let mut notes = fx_notes;
    if n == 0 {
        notes.push(format!(
            "no lots were closed between {} and {} under these filters",
            range.start, range.end
        ));
    }
    if gross_of_fees {
        notes.push(
            "some trades are gross of fees: the broker reports no commissions for their fills"
                .to_owned(),
        );
    }
    notes.push(
        "a trade is one closing fill and the FIFO lots it closed, as get_realized_pnl counts them; holding days are the quantity-weighted calendar days from each lot's opening to its closing trade date"
            .to_owned(),
    );
    Ok(JournalResult {
        currency: to.code().to_owned(),
        start: range.start.to_string(),
        end: range.end.to_string(),
        trade_count: u32::try_from(n).unwrap_or(u32::MAX),
        net_pnl: money(total)?,
        winning_trades: u32::try_from(wins.len()).unwrap_or(u32::MAX),
        losing_trades: u32::try_from(losses.len()).unwrap_or(u32::MAX),
        breakeven_trades: u32::try_from(n - wins.len() - losses.len()).unwrap_or(u32::MAX),
        win_rate_pct: (n > 0).then(|| wins.len() as f64 / n as f64 * 100.0),
        average_win: mean(won, wins.len())?,
        average_loss: mean(lost, losses.len())?,
        payoff_ratio,
        profit_factor: ratio(won, -lost),
        expectancy: mean(total, n)?,
        largest_win: wins.iter().map(|t| t.net).max().map(money).transpose()?,
        largest_loss: losses.iter().map(|t| t.net).min().map(money).transpose()?,
        average_holding_days_winners: mean_days(&wins),
        average_holding_days_losers: mean_days(&losses),
        longest_win_streak,
        longest_loss_streak,
        by_weekday,
        by_holding_period,
        notes,
    })
}

fn weekday_name(d: Weekday) -> &'static str {
    match d {
        Weekday::Mon => "Monday",
        Weekday::Tue => "Tuesday",
        Weekday::Wed => "Wednesday",
        Weekday::Thu => "Thursday",
        Weekday::Fri => "Friday",
        Weekday::Sat => "Saturday",
        Weekday::Sun => "Sunday",
    }
}

/// analyze_trades.
#[derive(Debug)]
pub struct AnalyzeTrades;

impl Tool for AnalyzeTrades {
    type Args = JournalArgs;
    type Output = JournalResult;
    const META: Meta = Meta::book(
        "analyze_trades",
        "Trading habits",
        "What are my habits? Journal analytics of the trades that closed FIFO \
                lots between two dates: win rate, average win and loss, payoff ratio, profit \
                factor, expectancy, extremes, holding days of winners and losers (losers held \
                longer is the disposition effect), streaks, and P&L by weekday and holding \
                period. Totals agree with get_realized_pnl.",
    );

    async fn run(call: &mut Call<'_>, a: JournalArgs) -> Result<JournalResult> {
        let (book, _) = call.ledger().await?;
        let range = DateRange::parse(&a.start, &a.end)?;
        let currency = crate::args::report_currency_in(&book, a.currency.as_deref())?;
        let sel = select_owned(&book, &a.account, &a.broker, &a.symbol)?;
        analyze_trades(&book, &sel, range, currency)
    }

    fn summary(r: &JournalResult) -> String {
        format!(
            "{} trade(s) {} to {}: net {} {}, win rate {}%, profit factor {}, winners held {} day(s) and losers {} on average.{}",
            r.trade_count,
            r.start,
            r.end,
            r.net_pnl.0,
            r.currency,
            fmt_opt(r.win_rate_pct),
            fmt_opt(r.profit_factor),
            fmt_opt(r.average_holding_days_winners),
            fmt_opt(r.average_holding_days_losers),
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"start": "2023-01-01", "end": "2026-11-27"})
    }
}
