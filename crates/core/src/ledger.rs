//! A full replay of a book: FIFO lots plus the cash the fills imply.
//!
//! Cash of an account in a currency = its cash entries + proceeds of cash-settled sells
//! − cost of cash-settled buys + gross P&L of closed margin-settled lots − every fill's
//! commission (in the commission's own currency).

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use crate::book::{AccountIdx, Book, Fill, Side};
use crate::currency::Currency;
use crate::error::{Error, Result};
use crate::fifo::{ClosedLot, Fifo};

/// The state after replaying every fill of a book.
#[derive(Debug, Clone)]
pub struct Ledger {
    pub fifo: Fifo,
    /// (account, currency) -> cash at full precision.
    pub cash: BTreeMap<(AccountIdx, Currency), Decimal>,
    /// Per account: whether the book has any cash entry for it (else its cash is unknown).
    pub has_cash_entries: Vec<bool>,
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

/// Replays every fill in order, passing each closed lot (with its closing fill) to
/// `on_close`.
///
/// # Errors
/// `no_fx_rate` for a commission that cannot be converted; `internal` on overflow.
pub fn replay(book: &Book, mut on_close: impl FnMut(&Fill, &ClosedLot)) -> Result<Ledger> {
    let mut fifo = Fifo::new(book.accounts.len(), book.instruments.len());
    let mut cash: BTreeMap<(AccountIdx, Currency), Decimal> = BTreeMap::new();
    let mut has_cash_entries = vec![false; book.accounts.len()];
    let add = |cash: &mut BTreeMap<(AccountIdx, Currency), Decimal>,
               key: (AccountIdx, Currency),
               amount: Decimal|
     -> Result<()> {
        let slot = cash.entry(key).or_insert(Decimal::ZERO);
        *slot = slot.checked_add(amount).ok_or_else(overflow)?;
        Ok(())
    };
    for entry in &book.cash {
        if let Some(flag) = has_cash_entries.get_mut(entry.account as usize) {
            *flag = true;
        }
        add(&mut cash, (entry.account, entry.currency), entry.amount)?;
    }
    for (index, fill) in book.fills.iter().enumerate() {
        let instrument = book.instrument(fill.instrument);
        let commission = commission_in_instrument_currency(book, fill)?;
        let index = u32::try_from(index).map_err(|_| Error::internal("more than 2^32 fills"))?;
        let margin = instrument.asset_class.is_margin_settled();
        let mut margin_gross = Decimal::ZERO;
        let mut overflowed = false;
        fifo.apply(index, fill, instrument.multiplier, commission, |lot| {
            if margin {
                match margin_gross.checked_add(lot.gross_pnl) {
                    Some(sum) => margin_gross = sum,
                    None => overflowed = true,
                }
            }
            on_close(fill, &lot);
        })?;
        if overflowed {
            return Err(overflow());
        }
        let key = (fill.account, instrument.currency);
        if margin {
            add(&mut cash, key, margin_gross)?;
        } else {
            let value = fill
                .quantity
                .checked_mul(fill.price)
                .and_then(|v| v.checked_mul(instrument.multiplier))
                .ok_or_else(overflow)?;
            add(
                &mut cash,
                key,
                if fill.side == Side::Sell {
                    value
                } else {
                    -value
                },
            )?;
        }
        if !fill.commission.is_zero() {
            add(
                &mut cash,
                (fill.account, fill.commission_currency),
                -fill.commission,
            )?;
        }
    }
    Ok(Ledger {
        fifo,
        cash,
        has_cash_entries,
    })
}
