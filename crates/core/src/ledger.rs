//! A full replay of a book: FIFO lots plus the cash the fills imply.
//!
//! Cash of an account in a currency = its cash entries + proceeds of cash-settled sells
//! − cost of cash-settled buys + gross P&L of closed margin-settled lots − every fill's
//! commission (in the commission's own currency).

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use crate::book::{AccountIdx, Book, CashEntry, Fill, Side};
use crate::currency::Currency;
use crate::error::{Error, ErrorCode, Result};
use crate::fifo::{ClosedLot, Fifo, notional};
use crate::fixed::Fixed;

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
}

fn overflow() -> Error {
    Error::internal("decimal overflow while computing cash")
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
/// `internal` on overflow (a commission without a rate is noted, never an error).
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
    Ok(replayer.into_ledger())
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
        }
    }

    /// Adds a cash entry (deposit, dividend, ...).
    ///
    /// # Errors
    /// `internal` on overflow.
    pub fn cash_entry(&mut self, entry: &CashEntry) -> Result<()> {
        if self.keep_cash {
            self.cash
                .add(entry.account, entry.currency, fixed(entry.amount)?)?;
        }
        Ok(())
    }

    /// Applies the book's fill at `index`, passing each lot it closes to `on_close`. A
    /// commission that cannot be converted into the instrument currency is left out of
    /// the lots (which then count as gross of fees) and the fill is listed in
    /// [`Ledger::unconverted_commissions`].
    ///
    /// # Errors
    /// `internal` on overflow.
    pub fn fill(
        &mut self,
        index: usize,
        mut on_close: impl FnMut(&Fill, &ClosedLot),
    ) -> Result<()> {
        let book = self.book;
        let fill = &book.fills[index];
        let instrument = book.instrument(fill.instrument);
        let own_commission = fixed(fill.commission)?;
        let index = u32::try_from(index).map_err(|_| Error::internal("more than 2^32 fills"))?;
        let mut gross_fill = None;
        let commission = if fill.commission_currency == instrument.currency {
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
        let lots_fill = gross_fill.as_ref().unwrap_or(fill);
        let margin = self.keep_cash && instrument.asset_class.is_margin_settled();
        let mut margin_gross = Fixed::ZERO;
        let mut overflowed = false;
        self.fifo
            .apply(index, lots_fill, instrument.multiplier, commission, |lot| {
                if margin {
                    match margin_gross.checked_add(lot.gross_pnl) {
                        Some(sum) => margin_gross = sum,
                        None => overflowed = true,
                    }
                }
                on_close(fill, lot);
            })?;
        if overflowed {
            return Err(overflow());
        }
        if !self.keep_cash {
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
        }
    }
}
