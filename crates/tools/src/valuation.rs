//! Positions and cash valued at `as_of`: the rows that get_positions, get_accounts,
//! get_portfolio_summary and get_exposure all build on, so they report the same figures.
//!
//! Every row is computed at full precision in its own currency, converted straight into
//! the report (or account) currency, and rounded once. A row whose currency has no rate
//! into the currency of a total is left out of that total and listed in
//! [`Valuation::left_out`] for a note (docs/methodology/fx.md); it never fails the call.

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use rust_decimal::Decimal;
use tradedesk_core::ledger::{self, Ledger};

use crate::rates::{Missing, Rates};
use crate::select::Selection;
use tradedesk_core::{
    AccountIdx, Book, Currency, Error, Fifo, InstrumentIdx, LotQueue, LotSide, Result,
};

/// Values that exist only for a marked position.
#[derive(Debug, Clone)]
pub struct Marked {
    pub price: Decimal,
    pub date: NaiveDate,
    /// Instrument currency, rounded.
    pub notional: Decimal,
    pub market_value: Decimal,
    pub unrealized_pnl: Decimal,
    /// Report currency, rounded once from full precision; `None` when the instrument
    /// currency has no rate into it (the row is then left out of report totals).
    pub notional_converted: Option<Decimal>,
    pub market_value_converted: Option<Decimal>,
    pub unrealized_pnl_converted: Option<Decimal>,
    /// Account currency, rounded once from full precision (with [`Scope::accounts`]);
    /// `None` without that scope or without a rate.
    pub market_value_account: Option<Decimal>,
}

#[derive(Debug, Clone)]
pub struct PositionRow {
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub side: LotSide,
    /// Signed.
    pub quantity: Decimal,
    pub avg_cost: Decimal,
    /// Instrument currency, rounded.
    pub cost_basis: Decimal,
    pub commission_known: bool,
    pub marked: Option<Marked>,
}

#[derive(Debug, Clone)]
pub struct CashRow {
    pub account: AccountIdx,
    pub currency: Currency,
    /// Full precision in `currency`.
    pub amount: Decimal,
    /// Rounded once, in the account currency; `None` without a rate.
    pub amount_account: Option<Decimal>,
    /// Rounded once, in the report currency; `None` without a rate.
    pub converted: Option<Decimal>,
}

/// A row left out of a total for lack of a rate.
#[derive(Debug, Clone)]
pub struct LeftOut {
    pub account: AccountIdx,
    /// The position's instrument; `None` for a cash row.
    pub instrument: Option<InstrumentIdx>,
    /// The row's own currency and its amount there (market value or cash), rounded.
    pub currency: Currency,
    pub amount: Option<Decimal>,
    /// The currency of the total it is left out of.
    pub to: Currency,
    /// The date a rate was needed on or before.
    pub on: NaiveDate,
}

#[derive(Debug, Clone)]
pub struct Valuation {
    pub currency: Currency,
    pub as_of: NaiveDate,
    pub positions: Vec<PositionRow>,
    pub cash: Vec<CashRow>,
    /// Per account: whether its cash is known.
    pub cash_known: Vec<bool>,
    pub stale_rates: BTreeSet<String>,
    /// Rows left out of a total for lack of a rate, in row order.
    pub left_out: Vec<LeftOut>,
    /// Every pair that had no rate (also from commissions the replay could not convert).
    pub missing: Missing,
    /// Fills whose commission could not be converted (their lots are gross of it).
    pub unconverted_commissions: Vec<u32>,
}

fn overflow() -> Error {
    tradedesk_core::bounds::too_large("its value")
}

fn mul(a: Decimal, b: Decimal) -> Result<Decimal> {
    a.checked_mul(b).ok_or_else(overflow)
}

fn add(a: Decimal, b: Decimal) -> Result<Decimal> {
    a.checked_add(b).ok_or_else(overflow)
}

/// Adds `v` to a total the tools report, checked: a total past a decimal's range is
/// `invalid_book` (docs/methodology/book-format.md, "Bounds"), never a panic.
///
/// # Errors
/// `invalid_book` on overflow.
pub(crate) fn accumulate(total: &mut Decimal, v: Decimal) -> Result<()> {
    *total = total
        .checked_add(v)
        .ok_or_else(|| tradedesk_core::bounds::too_large("a total"))?;
    Ok(())
}

/// The checked sum of `values` (see [`accumulate`]).
///
/// # Errors
/// `invalid_book` on overflow.
pub(crate) fn total(values: impl IntoIterator<Item = Decimal>) -> Result<Decimal> {
    let mut sum = Decimal::ZERO;
    for v in values {
        accumulate(&mut sum, v)?;
    }
    Ok(sum)
}

fn sub(a: Decimal, b: Decimal) -> Result<Decimal> {
    a.checked_sub(b).ok_or_else(overflow)
}

/// What a valuation covers: only what the asking tool reports is converted, so a rate
/// that is not needed can never fail the call.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    /// Cash rows, and each position's value in its account's currency.
    pub accounts: bool,
    /// Only the positions this selection matches.
    pub selection: Option<&'a Selection>,
}

impl Scope<'_> {
    /// Everything: for get_accounts and get_portfolio_summary.
    pub const ACCOUNTS: Self = Self {
        accounts: true,
        selection: None,
    };
    /// Every position, no cash: for get_exposure.
    pub const POSITIONS: Self = Self {
        accounts: false,
        selection: None,
    };
}

/// Values the open positions and cash balances `scope` asks for.
///
/// # Errors
/// `invalid_book` when a figure passes what the engine holds (a missing rate leaves
/// rows out, never fails).
pub fn value_book(book: &Book, currency: Currency, scope: Scope<'_>) -> Result<Valuation> {
    let ledger = if scope.accounts {
        ledger::replay(book, |_, _| {})?
    } else {
        ledger::replay_lots(book, |_, _| {})?
    };
    value_ledger(book, &ledger, currency, scope)
}

/// As [`value_book`], over an already replayed ledger.
///
/// # Errors
/// `invalid_book` when a figure passes what the engine holds (a missing rate leaves
/// rows out, never fails).
pub fn value_ledger(
    book: &Book,
    ledger: &Ledger,
    currency: Currency,
    scope: Scope<'_>,
) -> Result<Valuation> {
    let state = LedgerState {
        fifo: &ledger.fifo,
        cash: &ledger.cash,
        has_cash_entries: &ledger.has_cash_entries,
    };
    let mut v = value_at(book, state, currency, scope, book.as_of, &|_| None)?;
    note_unconverted_commissions(book, &ledger.unconverted_commissions, &mut v);
    Ok(v)
}

/// Notes for fills whose commission the replay could not convert (see
/// [`crate::accounts::missing_rate_notes`]).
pub fn commission_notes(book: &Book, fills: &[u32], notes: &mut Vec<String>) {
    if fills.is_empty() {
        return;
    }
    let v = Valuation {
        currency: book.base_currency,
        as_of: book.as_of,
        positions: Vec::new(),
        cash: Vec::new(),
        cash_known: Vec::new(),
        stale_rates: BTreeSet::new(),
        left_out: Vec::new(),
        missing: Missing::default(),
        unconverted_commissions: fills.to_vec(),
    };
    crate::accounts::missing_rate_notes(book, &v, &[], notes);
}

/// Records the fills whose commission the replay could not convert (and their pairs).
pub fn note_unconverted_commissions(book: &Book, fills: &[u32], v: &mut Valuation) {
    for &i in fills {
        if let Some(f) = book.fills.get(i as usize) {
            let ccy = book.instrument(f.instrument).currency;
            v.missing.add(f.commission_currency, ccy, f.trade_date);
        }
    }
    v.unconverted_commissions.extend_from_slice(fills);
}

/// The parts of a replay a valuation reads: a finished [`Ledger`], or a replay part way
/// through (daily valuations).
#[derive(Debug, Clone, Copy)]
pub struct LedgerState<'a> {
    pub fifo: &'a Fifo,
    pub cash: &'a BTreeMap<(AccountIdx, Currency), Decimal>,
    pub has_cash_entries: &'a [bool],
}

/// A price for a position with no mark on or before the valuation date.
pub type Fallback<'a> = dyn Fn(InstrumentIdx) -> Option<(NaiveDate, Decimal)> + 'a;

/// Values a replay's positions and cash at the close of `on`: marks and FX rates on or
/// before `on`; a position without a mark takes `fallback`'s price, if any. A row without
/// a rate into a total's currency is left out of it (see [`Valuation::left_out`]).
///
/// # Errors
/// `invalid_book` when a figure passes what the engine holds.
pub fn value_at(
    book: &Book,
    ledger: LedgerState<'_>,
    currency: Currency,
    scope: Scope<'_>,
    on: NaiveDate,
    fallback: &Fallback<'_>,
) -> Result<Valuation> {
    let mut rates = Rates::new(book);
    let mut positions = Vec::new();
    let mut left_out = Vec::new();
    for (account, instrument, queue) in ledger.fifo.open_positions() {
        if scope
            .selection
            .is_some_and(|s| !s.matches(account, instrument))
        {
            continue;
        }
        let mark = book
            .marks
            .latest(instrument, on)
            .or_else(|| fallback(instrument));
        let row = position_row(
            book,
            &mut rates,
            PositionAt {
                account,
                instrument,
                queue,
                mark,
                on,
            },
            currency,
            scope.accounts,
        )
        .map_err(|e| {
            tradedesk_core::bounds::at(e, || {
                format!(
                    "the position in {} of account {}",
                    book.instrument(instrument).key,
                    book.account(account).id
                )
            })
        })?;
        if let Some(m) = &row.marked {
            let inst_ccy = book.instrument(instrument).currency;
            let leave = |to: Currency| LeftOut {
                account,
                instrument: Some(instrument),
                currency: inst_ccy,
                amount: Some(m.market_value),
                to,
                on,
            };
            if m.market_value_converted.is_none() {
                left_out.push(leave(currency));
            }
            let account_ccy = book.account(account).currency;
            if scope.accounts && m.market_value_account.is_none() && account_ccy != currency {
                left_out.push(leave(account_ccy));
            }
        }
        positions.push(row);
    }
    positions.sort_by(|a, b| {
        (a.account, &book.instrument(a.instrument).key)
            .cmp(&(b.account, &book.instrument(b.instrument).key))
    });
    let mut cash = Vec::new();
    for (&(account, cash_currency), &amount) in ledger.cash {
        if !scope.accounts
            || scope.selection.is_some_and(|s| !s.account(account))
            || !ledger
                .has_cash_entries
                .get(account as usize)
                .copied()
                .unwrap_or(false)
        {
            continue;
        }
        let account_currency = book.account(account).currency;
        let cash_row = |e| {
            tradedesk_core::bounds::at(e, || {
                format!(
                    "the {cash_currency} cash of account {}",
                    book.account(account).id
                )
            })
        };
        let amount_account = rates
            .try_convert_rounded(amount, cash_currency, account_currency, on)
            .map_err(cash_row)?;
        let converted = rates
            .try_convert_rounded(amount, cash_currency, currency, on)
            .map_err(cash_row)?;
        let leave = |to: Currency| LeftOut {
            account,
            instrument: None,
            currency: cash_currency,
            amount: Some(cash_currency.round(amount)),
            to,
            on,
        };
        if converted.is_none() {
            left_out.push(leave(currency));
        }
        if amount_account.is_none() && account_currency != currency {
            left_out.push(leave(account_currency));
        }
        cash.push(CashRow {
            account,
            currency: cash_currency,
            amount,
            amount_account,
            converted,
        });
    }
    Ok(Valuation {
        currency,
        as_of: on,
        positions,
        cash,
        cash_known: ledger.has_cash_entries.to_vec(),
        stale_rates: rates.stale,
        left_out,
        missing: rates.missing,
        unconverted_commissions: Vec::new(),
    })
}

/// One open position, where and when it is valued.
#[derive(Clone, Copy)]
struct PositionAt<'a> {
    account: AccountIdx,
    instrument: InstrumentIdx,
    queue: &'a LotQueue,
    mark: Option<(NaiveDate, Decimal)>,
    on: NaiveDate,
}

fn position_row(
    book: &Book,
    rates: &mut Rates<'_>,
    at: PositionAt<'_>,
    currency: Currency,
    in_account_currency: bool,
) -> Result<PositionRow> {
    let PositionAt {
        account,
        instrument,
        queue,
        mark,
        on,
    } = at;
    let inst = book.instrument(instrument);
    let ccy = inst.currency;
    let mut quantity = Decimal::ZERO;
    let mut open_cost = Decimal::ZERO; // sum of quantity x price
    let mut commissions = Decimal::ZERO;
    let mut adjustment = Decimal::ZERO;
    let mut commission_known = true;
    for lot in queue.lots() {
        quantity = add(quantity, lot.quantity)?;
        open_cost = add(open_cost, mul(lot.quantity, lot.price)?)?;
        commissions = add(commissions, lot.commission)?;
        adjustment = add(adjustment, lot.adjustment)?;
        commission_known &= lot.commission_known;
    }
    let sign = match queue.side {
        LotSide::Long => Decimal::ONE,
        LotSide::Short => Decimal::NEGATIVE_ONE,
    };
    // A corporate action's adjustment is part of the lots' cost (a long's cost is
    // quantity x price x multiplier - adjustment; a short's proceeds add it).
    let open_value = sub(mul(open_cost, inst.multiplier)?, mul(adjustment, sign)?)?;
    let avg_cost = if adjustment.is_zero() {
        open_cost.checked_div(quantity)
    } else {
        open_value
            .checked_div(quantity)
            .and_then(|v| v.checked_div(inst.multiplier))
            .map(|v| v.round_dp(10))
    }
    .ok_or_else(overflow)?
    .normalize();
    let marked = match mark {
        None => None,
        Some((date, price)) => {
            let notional = mul(mul(mul(quantity, price)?, inst.multiplier)?, sign)?;
            let gross_unrealized = sub(notional, mul(open_value, sign)?)?;
            let unrealized = sub(gross_unrealized, commissions)?;
            let market_value = if inst.asset_class.is_margin_settled() {
                gross_unrealized
            } else {
                notional
            };
            let account_currency = book.account(account).currency;
            Some(Marked {
                price,
                date,
                notional: ccy.round(notional),
                market_value: ccy.round(market_value),
                unrealized_pnl: ccy.round(unrealized),
                notional_converted: rates.try_convert_rounded(notional, ccy, currency, on)?,
                market_value_converted: rates.try_convert_rounded(
                    market_value,
                    ccy,
                    currency,
                    on,
                )?,
                unrealized_pnl_converted: rates
                    .try_convert_rounded(unrealized, ccy, currency, on)?,
                market_value_account: if in_account_currency {
                    rates.try_convert_rounded(market_value, ccy, account_currency, on)?
                } else {
                    None
                },
            })
        }
    };
    Ok(PositionRow {
        account,
        instrument,
        side: queue.side,
        quantity: quantity * sign,
        avg_cost,
        cost_basis: ccy.round(add(open_value, commissions)?),
        commission_known,
        marked,
    })
}

/// `part / whole x 100`, to 2 decimals half away from zero; `None` when `whole` is zero.
pub fn pct(part: Decimal, whole: Decimal) -> Option<Decimal> {
    if whole.is_zero() {
        return None;
    }
    let ratio = part.checked_mul(Decimal::ONE_HUNDRED)?.checked_div(whole)?;
    Some(ratio.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero))
}
