//! A full replay of a book: FIFO lots plus the cash the fills imply.
//!
//! Cash of an account in a currency = its cash entries + proceeds of cash-settled sells
//! − cost of cash-settled buys + gross P&L of closed margin-settled lots − every fill's
//! commission (in the commission's own currency). Fills of positions held when the
//! history starts move no cash.
//!
//! Corporate actions apply at their date, before every fill of that trade date
//! (`docs/methodology/corporate-actions.md`).

use std::collections::{BTreeMap, HashMap};

use chrono::{NaiveDate, NaiveTime};
use rust_decimal::Decimal;

use crate::actions::ActionKind;
use crate::book::{AccountIdx, Book, CashEntry, Fill, FillKind, MadeFill, Side};
use crate::bounds::at;
use crate::currency::Currency;
use crate::error::{Error, ErrorCode, Result};
use crate::fifo::{ClosedLot, Fifo, notional};
use crate::fixed::Fixed;

/// A closing fill (or the part of one) that found no open lot: a position older than the
/// history, or fills missing from it. Its cash is booked; its P&L cannot be known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnmatchedClose {
    /// Index of the fill in the book.
    pub fill: u32,
    /// Unsigned quantity that closed nothing.
    pub quantity: Decimal,
}

/// The state after replaying every fill of a book.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub fifo: Fifo,
    /// (account, currency) -> cash at full precision.
    pub cash: BTreeMap<(AccountIdx, Currency), Decimal>,
    /// Per account: whether the book has any cash entry for it (else its cash is unknown).
    pub has_cash_entries: Vec<bool>,
    /// Fills (indices into the book's fills) whose commission was paid in a currency with
    /// no rate into the instrument's on the trade date: their lots carry no commission
    /// and count as gross of fees (docs/methodology/fx.md). Cash still pays it.
    pub unconverted_commissions: Vec<u32>,
    /// Closing fills that found no lot to close.
    pub unmatched_closes: Vec<UnmatchedClose>,
    /// What the replay could not do as the book says (an exercise whose delivered trade is
    /// missing, ...), for the answers' notes.
    pub notes: Vec<String>,
}

fn overflow() -> Error {
    crate::bounds::too_large("the cash the fills and cash entries imply")
}

/// The fill's commission in the instrument currency, converted at the fill's trade date
/// when it was paid in another currency.
///
/// # Errors
/// `no_fx_rate` when the commission currency cannot be converted on that date.
pub fn commission_in_instrument_currency(book: &Book, fill: &Fill) -> Result<Decimal> {
    let currency = book.instrument(fill.instrument).currency;
    if fill.commission.is_zero() || fill.commission_currency == currency {
        return Ok(fill.commission);
    }
    book.fx.convert(
        fill.commission,
        fill.commission_currency,
        currency,
        fill.trade_date,
    )
}

/// Running cash per (account, currency): a handful of entries, searched linearly.
#[derive(Debug, Default)]
struct CashBook {
    entries: Vec<(AccountIdx, Currency, Fixed)>,
}

impl CashBook {
    fn add(&mut self, account: AccountIdx, currency: Currency, amount: Fixed) -> Result<()> {
        match self
            .entries
            .iter_mut()
            .find(|(a, c, _)| *a == account && *c == currency)
        {
            Some(entry) => entry.2 = entry.2.checked_add(amount).ok_or_else(overflow)?,
            None => self.entries.push((account, currency, amount)),
        }
        Ok(())
    }
}

fn fixed(d: Decimal) -> Result<Fixed> {
    Fixed::from_decimal(d).ok_or_else(overflow)
}

/// Replays every fill in order, passing each closed lot (with its closing fill) to
/// `on_close`, and keeps the cash the fills imply.
///
/// # Errors
/// `invalid_book`, naming the fill or cash entry, when a figure passes what the engine
/// holds (a commission without a rate is noted, never an error).
pub fn replay(book: &Book, on_close: impl FnMut(&Fill, &ClosedLot)) -> Result<Ledger> {
    run(book, true, on_close)
}

/// As [`replay`], for callers that need only the lots: no cash is kept (its `cash` is
/// empty).
///
/// # Errors
/// As [`replay`].
pub fn replay_lots(book: &Book, on_close: impl FnMut(&Fill, &ClosedLot)) -> Result<Ledger> {
    run(book, false, on_close)
}

fn run(
    book: &Book,
    keep_cash: bool,
    mut on_close: impl FnMut(&Fill, &ClosedLot),
) -> Result<Ledger> {
    let mut replayer = Replayer::new(book, keep_cash);
    for entry in &book.cash {
        replayer.cash_entry(entry)?;
    }
    for index in 0..book.fills.len() {
        replayer.fill(index, &mut on_close)?;
    }
    replayer.advance_to(book.as_of, &mut on_close)?;
    Ok(replayer.into_ledger())
}

/// Settles the book's paying corporate actions (cash mergers, tenders, cash in lieu,
/// expiries): replays the lots up to each one, and adds the closing fill of kind
/// [`FillKind::Action`] that pays for the holding it finds. Run by
/// [`Book::assemble`]; a problem becomes a note of the book.
pub(crate) fn settle_actions(book: &mut Book) {
    book.index_deliveries();
    if !book.corporate_actions.iter().any(|a| a.kind.pays_out()) {
        return;
    }
    let (made, mut notes) = {
        let mut replayer = Replayer::new(book, false);
        replayer.settling = Some(Vec::new());
        let mut outcome = Ok(());
        for index in 0..book.fills.len() {
            outcome = replayer.fill(index, |_, _| {});
            if outcome.is_err() {
                break;
            }
        }
        if outcome.is_ok() {
            outcome = replayer.advance_to(book.as_of, |_, _| {});
        }
        let mut notes = std::mem::take(&mut replayer.notes);
        if let Err(e) = outcome {
            notes.push(format!(
                "corporate actions could not be settled: {}",
                e.message
            ));
        }
        (replayer.settling.take().unwrap_or_default(), notes)
    };
    notes.retain(|n| !book.notes.contains(n));
    book.notes.append(&mut notes);
    book.fills.extend(made);
    book.fills
        .sort_by(|a, b| a.time.cmp(&b.time).then(a.seq.cmp(&b.seq)));
    book.index_deliveries();
    let ids: HashMap<&str, u32> = book
        .fills
        .iter()
        .enumerate()
        .filter(|(_, f)| f.kind == FillKind::Action)
        .filter_map(|(i, f)| Some((f.id.as_str(), u32::try_from(i).ok()?)))
        .collect();
    let found: Vec<Option<u32>> = book
        .corporate_actions
        .iter()
        .map(|a| ids.get(a.fill_id().as_str()).copied())
        .collect();
    book.action_fills = found;
}

/// A replay that moves forward step by step: cash entries and fills applied one at a
/// time, with the ledger readable in between (daily valuations walk a book this way).
#[derive(Debug)]
pub struct Replayer<'b> {
    book: &'b Book,
    keep_cash: bool,
    fifo: Fifo,
    cash: CashBook,
    has_cash_entries: Vec<bool>,
    unconverted_commissions: Vec<u32>,
    /// The next corporate action to apply.
    next_action: usize,
    /// Per delivered stock fill: the exercised or assigned option's value and commission.
    deliveries: HashMap<u32, (Fixed, Fixed)>,
    unmatched: Vec<UnmatchedClose>,
    notes: Vec<String>,
    /// While the book is assembled: lots only, no commissions, and the settling fills of
    /// paying actions made as they come.
    settling: Option<Vec<Fill>>,
}

impl<'b> Replayer<'b> {
    /// An empty replay of `book`; `keep_cash` false keeps only the lots.
    pub fn new(book: &'b Book, keep_cash: bool) -> Self {
        let mut has_cash_entries = vec![false; book.accounts.len()];
        for entry in &book.cash {
            if let Some(flag) = has_cash_entries.get_mut(entry.account as usize) {
                *flag = true;
            }
        }
        Self {
            book,
            keep_cash,
            fifo: Fifo::new(book.accounts.len(), book.instruments.len()),
            cash: CashBook::default(),
            has_cash_entries,
            unconverted_commissions: Vec::new(),
            next_action: 0,
            deliveries: HashMap::new(),
            unmatched: Vec::new(),
            notes: Vec::new(),
            settling: None,
        }
    }

    /// Adds a cash entry (deposit, dividend, ...).
    ///
    /// # Errors
    /// `invalid_book` when the cash passes what the engine holds.
    pub fn cash_entry(&mut self, entry: &CashEntry) -> Result<()> {
        if self.keep_cash {
            fixed(entry.amount)
                .and_then(|amount| self.cash.add(entry.account, entry.currency, amount))
                .map_err(|e| {
                    at(e, || {
                        format!(
                            "the {} cash of account {} after a cash entry of {}",
                            entry.currency,
                            self.book.account(entry.account).id,
                            entry.amount
                        )
                    })
                })?;
        }
        Ok(())
    }

    /// Applies the book's fill at `index`, passing each lot it closes to `on_close`. A
    /// commission that cannot be converted into the instrument currency is left out of
    /// the lots (which then count as gross of fees) and the fill is listed in
    /// [`Ledger::unconverted_commissions`].
    ///
    /// # Errors
    /// `invalid_book`, naming the fill, when a figure passes what the engine holds (a
    /// commission without a rate is noted in [`Ledger::unconverted_commissions`], never
    /// an error).
    ///
    /// Corporate actions dated on or before the fill's trade date are applied first; a
    /// fill that settles an action was applied with it and is skipped.
    pub fn fill(
        &mut self,
        index: usize,
        mut on_close: impl FnMut(&Fill, &ClosedLot),
    ) -> Result<()> {
        let book = self.book;
        let fill = &book.fills[index];
        self.advance_to(fill.trade_date, &mut on_close)?;
        if fill.kind == FillKind::Action {
            return Ok(());
        }
        let index = u32::try_from(index).map_err(|_| Error::internal("more than 2^32 fills"))?;
        self.apply_fill(index, fill, &mut on_close)
            .map_err(|e| at(e, || format!("fill {}", fill.id)))
    }

    /// Applies every corporate action dated on or before `date` not yet applied, passing
    /// the lots a paying action closes to `on_close`.
    ///
    /// # Errors
    /// `invalid_argument` for an action the lots cannot take (a merger into the other side
    /// of a position); `invalid_book` on overflow.
    pub fn advance_to(
        &mut self,
        date: NaiveDate,
        mut on_close: impl FnMut(&Fill, &ClosedLot),
    ) -> Result<()> {
        let book = self.book;
        while let Some(action) = book.corporate_actions.get(self.next_action) {
            if action.date > date {
                break;
            }
            let k = self.next_action;
            self.next_action += 1;
            self.action(k, &mut on_close)
                .map_err(|e| at(e, || format!("corporate action {}", action.id)))?;
        }
        Ok(())
    }

    fn action(&mut self, k: usize, on_close: &mut impl FnMut(&Fill, &ClosedLot)) -> Result<()> {
        let book = self.book;
        let a = &book.corporate_actions[k];
        let inst = book.instrument(a.instrument);
        let m = inst.multiplier;
        let (acct, i) = (a.account, a.instrument);
        match &a.kind {
            ActionKind::Split { new, old } => self.fifo.split(acct, i, *new, *old, m),
            ActionKind::StockMerger { into, new, old } => {
                let m_to = book.instrument(*into).multiplier;
                self.fifo.transfer(acct, i, *into, (*new, *old), (m, m_to))
            }
            ActionKind::SymbolChange { into } => {
                let m_to = book.instrument(*into).multiplier;
                self.fifo
                    .transfer(acct, i, *into, (Decimal::ONE, Decimal::ONE), (m, m_to))
            }
            ActionKind::SpinOff {
                child,
                new,
                old,
                cost_fraction,
            } => {
                let m_child = book.instrument(*child).multiplier;
                self.fifo.spin_off(
                    acct,
                    (i, *child),
                    (*new, *old),
                    *cost_fraction,
                    (m, m_child),
                )
            }
            ActionKind::Exercise { quantity, fill } | ActionKind::Assignment { quantity, fill } => {
                let (value, commission, taken) = self.fifo.take_at_zero(acct, i, *quantity, m)?;
                if taken.is_zero() {
                    self.notes.push(format!(
                        "{} {} of {} on {}: no open contracts to deliver",
                        a.kind.as_str(),
                        a.id,
                        inst.key,
                        a.date
                    ));
                    return Ok(());
                }
                match fill.index {
                    Some(f) => {
                        let entry = self.deliveries.entry(f).or_insert((Fixed::ZERO, Fixed::ZERO));
                        entry.0 = entry.0.checked_add(value).ok_or_else(overflow)?;
                        entry.1 = entry.1.checked_add(commission).ok_or_else(overflow)?;
                    }
                    None => self.notes.push(format!(
                        "{} {} of {} on {}: the delivered trade {} is not in the history, so the option's premium is in no stock lot",
                        a.kind.as_str(),
                        a.id,
                        inst.key,
                        a.date,
                        fill.id
                    )),
                }
                Ok(())
            }
            ActionKind::CashMerger { .. }
            | ActionKind::CashInLieu { .. }
            | ActionKind::Expiry { .. } => {
                if self.settling.is_some() {
                    return self.settle(k);
                }
                match book.action_fills.get(k).copied().flatten() {
                    Some(f) => self.apply_fill(f, &book.fills[f as usize], on_close),
                    None => Ok(()),
                }
            }
        }
    }

    /// Makes (and applies to the lots) the fill settling the paying action `k`.
    fn settle(&mut self, k: usize) -> Result<()> {
        let book = self.book;
        let a = &book.corporate_actions[k];
        let inst = book.instrument(a.instrument);
        let held = self.fifo.position(a.account, a.instrument);
        let (quantity, price) = match &a.kind {
            ActionKind::CashMerger {
                cash_per_unit,
                quantity,
            } => (
                quantity.unwrap_or(held.abs()).min(held.abs()),
                *cash_per_unit,
            ),
            ActionKind::CashInLieu { quantity, amount } => (
                (*quantity).min(held.abs()),
                amount
                    .checked_div(*quantity)
                    .ok_or_else(overflow)?
                    .round_dp_with_strategy(
                        10,
                        rust_decimal::RoundingStrategy::MidpointAwayFromZero,
                    )
                    .normalize(),
            ),
            ActionKind::Expiry { quantity } => (
                quantity.unwrap_or(held.abs()).min(held.abs()),
                Decimal::ZERO,
            ),
            _ => return Ok(()),
        };
        if quantity.is_zero() {
            self.notes.push(format!(
                "{} {} of {} on {}: the account held none then, so nothing was paid out",
                a.kind.as_str(),
                a.id,
                inst.key,
                a.date
            ));
            return Ok(());
        }
        let time = a.date.and_time(NaiveTime::MIN).and_utc().fixed_offset();
        let fill: Fill = MadeFill {
            id: a.fill_id(),
            account: a.account,
            instrument: a.instrument,
            side: if held.is_sign_positive() {
                Side::Sell
            } else {
                Side::Buy
            },
            quantity,
            price,
            currency: inst.currency,
            time,
            kind: FillKind::Action,
            commission_known: true,
            seq: u32::MAX - u32::try_from(k).unwrap_or(0),
        }
        .into();
        self.fifo
            .apply(u32::MAX, &fill, inst.multiplier, Fixed::ZERO, |_| {})?;
        if let Some(made) = self.settling.as_mut() {
            made.push(fill);
        }
        Ok(())
    }

    fn apply_fill(
        &mut self,
        index: u32,
        fill: &Fill,
        on_close: &mut impl FnMut(&Fill, &ClosedLot),
    ) -> Result<()> {
        let book = self.book;
        let instrument = book.instrument(fill.instrument);
        let settling = self.settling.is_some();
        let own_commission = if settling {
            Fixed::ZERO
        } else {
            fixed(fill.commission)?
        };
        let mut gross_fill = None;
        let mut commission = if settling || fill.commission_currency == instrument.currency {
            own_commission
        } else {
            match commission_in_instrument_currency(book, fill) {
                Ok(c) => fixed(c)?,
                Err(e) if e.code == ErrorCode::NoFxRate => {
                    self.unconverted_commissions.push(index);
                    gross_fill = Some(Fill {
                        commission_known: false,
                        ..fill.clone()
                    });
                    Fixed::ZERO
                }
                Err(e) => return Err(e),
            }
        };
        let mut adjustment = Fixed::ZERO;
        if !self.deliveries.is_empty()
            && let Some((value, option_commission)) = self.deliveries.remove(&index)
        {
            adjustment = value;
            commission = commission
                .checked_add(option_commission)
                .ok_or_else(overflow)?;
        }
        let margin = self.keep_cash && instrument.asset_class.is_margin_settled();
        let mut margin_gross = Fixed::ZERO;
        let mut overflowed = false;
        let lots_fill = gross_fill.as_ref().unwrap_or(fill);
        let unmatched = self.fifo.apply_adjusted(
            index,
            lots_fill,
            instrument.multiplier,
            commission,
            adjustment,
            |lot| {
                if margin {
                    match margin_gross.checked_add(lot.gross_pnl) {
                        Some(sum) => margin_gross = sum,
                        None => overflowed = true,
                    }
                }
                on_close(fill, lot);
            },
        )?;
        if overflowed {
            return Err(overflow());
        }
        if !unmatched.is_zero() && !settling {
            self.unmatched.push(UnmatchedClose {
                fill: index,
                quantity: unmatched,
            });
        }
        if !self.keep_cash || !fill.kind.moves_cash() {
            return Ok(());
        }
        let flow = if margin {
            margin_gross
        } else {
            let value = notional(fill, instrument.multiplier)?;
            if fill.side == Side::Sell {
                value
            } else {
                Fixed(-value.0)
            }
        };
        self.cash.add(fill.account, instrument.currency, flow)?;
        if !fill.commission.is_zero() {
            self.cash.add(
                fill.account,
                fill.commission_currency,
                Fixed(-own_commission.0),
            )?;
        }
        Ok(())
    }

    /// How many of the book's corporate actions have been applied.
    pub fn actions_applied(&self) -> usize {
        self.next_action
    }

    /// Closing fills so far that found no lot to close.
    pub fn unmatched_closes(&self) -> &[UnmatchedClose] {
        &self.unmatched
    }

    /// The lots open now.
    pub fn fifo(&self) -> &Fifo {
        &self.fifo
    }

    /// Cash per (account, currency) now, at full precision.
    pub fn cash(&self) -> BTreeMap<(AccountIdx, Currency), Decimal> {
        self.cash
            .entries
            .iter()
            .map(|(a, c, v)| ((*a, *c), v.to_decimal()))
            .collect()
    }

    /// Per account: whether the book has any cash entry for it (at any date).
    pub fn has_cash_entries(&self) -> &[bool] {
        &self.has_cash_entries
    }

    /// Fills so far whose commission could not be converted (see [`Ledger`]).
    pub fn unconverted_commissions(&self) -> &[u32] {
        &self.unconverted_commissions
    }

    /// The ledger as it stands.
    pub fn into_ledger(self) -> Ledger {
        let cash = self.cash();
        Ledger {
            fifo: self.fifo,
            cash,
            has_cash_entries: self.has_cash_entries,
            unconverted_commissions: self.unconverted_commissions,
            unmatched_closes: self.unmatched,
            notes: self.notes,
        }
    }
}
