//! FX lookups for the tools: the book's rate table with the last answer per pair kept
//! (rows arrive grouped by date, so it nearly always answers), every rate older than
//! [`STALE_DAYS`] before the date it served recorded for a note, and every pair that had
//! no rate at all recorded, so the row that needed it is left out with a note instead of
//! failing the call (docs/methodology/fx.md).

use std::collections::{BTreeMap, BTreeSet};

use chrono::NaiveDate;
use rust_decimal::Decimal;
use tradedesk_core::fx::fix_hint;
use tradedesk_core::{Book, Currency, ErrorCode, FxRate, Result};

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
    /// Pairs without a rate, with the latest date one was needed on.
    pub(crate) missing: Missing,
}

/// Pairs (from, to) that had no rate path, each with the latest date one was needed on.
#[derive(Debug, Clone, Default)]
pub struct Missing(pub BTreeMap<(&'static str, &'static str), NaiveDate>);

impl Missing {
    pub(crate) fn add(&mut self, from: Currency, to: Currency, on: NaiveDate) {
        let slot = self.0.entry((from.code(), to.code())).or_insert(on);
        if on > *slot {
            *slot = on;
        }
    }

    pub(crate) fn extend(&mut self, other: &Self) {
        for (&(from, to), &on) in &other.0 {
            let slot = self.0.entry((from, to)).or_insert(on);
            if on > *slot {
                *slot = on;
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `FROM/TO` labels, in order.
    pub fn pairs(&self) -> Vec<String> {
        self.0.keys().map(|(f, t)| format!("{f}/{t}")).collect()
    }

    /// One note per missing pair: `what` names the rows left out (e.g. "closed lot(s)").
    pub(crate) fn notes(&self, what: &str, notes: &mut Vec<String>) {
        for (&(from, to), &on) in &self.0 {
            let (f, t) = (Currency::new(from), Currency::new(to));
            notes.push(format!(
                "no {from}/{to} rate on or before {on}: {what} in {from} left out of the {to} totals; to include them, {}",
                fix_hint(f, t, on)
            ));
        }
    }
}

impl<'a> Rates<'a> {
    pub(crate) fn new(book: &'a Book) -> Self {
        Self {
            book,
            last: Vec::new(),
            stale: BTreeSet::new(),
            missing: Missing::default(),
        }
    }

    /// The rate converting `from` into `to` on `on`.
    ///
    /// # Errors
    /// `no_fx_rate` when there is no path (the pair is recorded in `missing`).
    pub(crate) fn rate(&mut self, from: Currency, to: Currency, on: NaiveDate) -> Result<FxRate> {
        if let Some(&(.., rate)) = self
            .last
            .iter()
            .find(|(f, t, d, _)| (*f, *t, *d) == (from, to, on))
        {
            return Ok(rate);
        }
        let rate = match self.book.fx.rate(from, to, on) {
            Ok(rate) => rate,
            Err(e) => {
                if e.code == ErrorCode::NoFxRate {
                    self.missing.add(from, to, on);
                }
                return Err(e);
            }
        };
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
    /// `no_fx_rate`, or `invalid_book` when the result passes a decimal's range.
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

impl Rates<'_> {
    /// As [`Rates::convert_rounded`], with `None` when there is no rate (recorded in
    /// `missing`): the row is left out of the totals in `to`.
    ///
    /// # Errors
    /// `invalid_book` when the result passes a decimal's range.
    pub(crate) fn try_convert_rounded(
        &mut self,
        amount: Decimal,
        from: Currency,
        to: Currency,
        on: NaiveDate,
    ) -> Result<Option<Decimal>> {
        match self.convert_rounded(amount, from, to, on) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.code == ErrorCode::NoFxRate => Ok(None),
            Err(e) => Err(e),
        }
    }
}
