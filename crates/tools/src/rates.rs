//! FX lookups for the tools: the book's rate table with the last answer per pair kept
//! (rows arrive grouped by date, so it nearly always answers), and every rate older than
//! [`STALE_DAYS`] before the date it served recorded for a note.

use std::collections::BTreeSet;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use tradedesk_core::{Book, Currency, FxRate, Result};

/// Days after which a rate used is called stale.
pub const STALE_DAYS: i64 = 7;

/// Whether a rate dated `date` is stale on `on`.
pub fn is_stale(on: NaiveDate, date: NaiveDate) -> bool {
    (on - date).num_days() > STALE_DAYS
}

pub(crate) struct Rates<'a> {
    book: &'a Book,
    /// (from, to, on) -> rate, the last lookup of each pair.
    last: Vec<(Currency, Currency, NaiveDate, FxRate)>,
    pub(crate) stale: BTreeSet<String>,
}

impl<'a> Rates<'a> {
    pub(crate) fn new(book: &'a Book) -> Self {
        Self {
            book,
            last: Vec::new(),
            stale: BTreeSet::new(),
        }
    }

    /// The rate converting `from` into `to` on `on`.
    ///
    /// # Errors
    /// `no_fx_rate` when there is no path.
    pub(crate) fn rate(&mut self, from: Currency, to: Currency, on: NaiveDate) -> Result<FxRate> {
        if let Some(&(.., rate)) = self
            .last
            .iter()
            .find(|(f, t, d, _)| (*f, *t, *d) == (from, to, on))
        {
            return Ok(rate);
        }
        let rate = self.book.fx.rate(from, to, on)?;
        if let Some(date) = rate.date
            && is_stale(on, date)
        {
            self.stale.insert(format!(
                "{from}->{to} uses a rate from {date}, {} days before {on}",
                (on - date).num_days()
            ));
        }
        match self
            .last
            .iter_mut()
            .find(|(f, t, ..)| (*f, *t) == (from, to))
        {
            Some(slot) => *slot = (from, to, on, rate),
            None => self.last.push((from, to, on, rate)),
        }
        Ok(rate)
    }

    /// `amount` converted at full precision and rounded once to `to`'s minor unit.
    ///
    /// # Errors
    /// `no_fx_rate`, or `internal` on overflow.
    pub(crate) fn convert_rounded(
        &mut self,
        amount: Decimal,
        from: Currency,
        to: Currency,
        on: NaiveDate,
    ) -> Result<Decimal> {
        Ok(to.round(self.rate(from, to, on)?.apply(amount)?))
    }
}
