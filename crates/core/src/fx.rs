//! FX rates and conversion under the book's rules: the latest rate on or before the date
//! that matters; a pair quoted in either direction (the later-dated quote wins, a tie
//! going to the straight one); only when neither direction is quoted, a cross through the
//! base currency; otherwise `no_fx_rate`.

use std::collections::HashMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;

use crate::currency::Currency;
use crate::error::{Error, ErrorCode, Result};
use crate::fixed::{self, Fixed};

/// `1 base = rate quote` on `date`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FxQuote {
    pub base: Currency,
    pub quote: Currency,
    pub rate: Decimal,
    pub date: NaiveDate,
}

/// The rate that converts one currency into another, as the exact ratio `num / den` of
/// quoted rates (an inverse quote divides, it is never turned into a rounded reciprocal),
/// and the date of its oldest leg (for staleness notes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FxRate {
    /// `num / den` to 28 significant digits, for display.
    pub rate: Decimal,
    pub num: Decimal,
    pub den: Decimal,
    pub date: Option<NaiveDate>,
}

impl FxRate {
    pub const IDENTITY: Self = Self {
        rate: Decimal::ONE,
        num: Decimal::ONE,
        den: Decimal::ONE,
        date: None,
    };

    fn ratio(num: Decimal, den: Decimal, date: NaiveDate) -> Option<Self> {
        Some(Self {
            rate: num.checked_div(den)?,
            num,
            den,
            date: Some(date),
        })
    }

    /// Converts at full precision: `amount x num / den`.
    ///
    /// # Errors
    /// `internal` on decimal overflow.
    pub fn apply(self, amount: Decimal) -> Result<Decimal> {
        amount
            .checked_mul(self.num)
            .and_then(|v| v.checked_div(self.den))
            .ok_or_else(|| {
                Error::internal(format!("overflow converting {amount} at {}", self.rate))
            })
    }

    /// Converts a [`Fixed`] amount and rounds it once to `dp` places (half away from
    /// zero), returning the mantissa: exact integer arithmetic whenever the factors fit.
    ///
    /// # Errors
    /// `internal` on overflow.
    pub fn apply_rounded(self, amount: Fixed, dp: u32) -> Result<i128> {
        // amount/10^18 x (nm/10^sn) / (dm/10^sd) x 10^dp
        //   = amount x nm x 10^(sd + dp) / (dm x 10^(18 + sn))
        let (nm, sn, dm, sd) = (
            self.num.mantissa(),
            self.num.scale(),
            self.den.mantissa(),
            self.den.scale(),
        );
        let factors = nm
            .checked_mul(fixed::pow10(sd + dp))
            .zip(fixed::pow10_checked(fixed::SCALE + sn).and_then(|p| dm.checked_mul(p)));
        if let Some((n, d)) = factors
            && let Some(v) = fixed::mul_div(amount.0, n, d)
        {
            return Ok(v);
        }
        let converted = self.apply(amount.to_decimal())?;
        let rounded = converted
            .round_dp_with_strategy(dp, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
        Ok(rounded.mantissa() * fixed::pow10(dp.saturating_sub(rounded.scale())))
    }
}

#[derive(Debug, Clone, Default)]
pub struct FxTable {
    base: Option<Currency>,
    /// (base, quote) -> rates sorted by date, one per date.
    series: HashMap<(Currency, Currency), Vec<(NaiveDate, Decimal)>>,
}

impl FxTable {
    /// Builds a table that crosses through `base`. Rates must be positive; a later entry
    /// for the same pair and date replaces an earlier one (loaders refuse duplicates).
    pub fn new(base: Currency, quotes: impl IntoIterator<Item = FxQuote>) -> Self {
        let mut series: HashMap<(Currency, Currency), Vec<(NaiveDate, Decimal)>> = HashMap::new();
        for q in quotes {
            series
                .entry((q.base, q.quote))
                .or_default()
                .push((q.date, q.rate));
        }
        for rates in series.values_mut() {
            rates.sort_by_key(|(date, _)| *date);
            // Keep the last of equal dates (stable sort keeps file order).
            rates.reverse();
            rates.dedup_by_key(|(date, _)| *date);
            rates.reverse();
        }
        Self {
            base: Some(base),
            series,
        }
    }

    /// Every quoted pair's latest rate on or before `as_of`, sorted by pair.
    pub fn latest_quotes(&self, as_of: NaiveDate) -> Vec<FxQuote> {
        let mut out: Vec<FxQuote> = self
            .series
            .keys()
            .filter_map(|&(base, quote)| {
                self.latest(base, quote, as_of).map(|(date, rate)| FxQuote {
                    base,
                    quote,
                    rate,
                    date,
                })
            })
            .collect();
        out.sort_by(|a, b| (a.base.code(), a.quote.code()).cmp(&(b.base.code(), b.quote.code())));
        out
    }

    /// Every rate in the table.
    pub fn all_quotes(&self) -> Vec<FxQuote> {
        self.series
            .iter()
            .flat_map(|(&(base, quote), rates)| {
                rates.iter().map(move |&(date, rate)| FxQuote {
                    base,
                    quote,
                    rate,
                    date,
                })
            })
            .collect()
    }

    fn latest(
        &self,
        base: Currency,
        quote: Currency,
        on: NaiveDate,
    ) -> Option<(NaiveDate, Decimal)> {
        let rates = self.series.get(&(base, quote))?;
        let n = rates.partition_point(|(date, _)| *date <= on);
        n.checked_sub(1).map(|i| rates[i])
    }

    /// The pair quoted in either direction, without crossing.
    fn direct(&self, from: Currency, to: Currency, on: NaiveDate) -> Option<FxRate> {
        let straight = self.latest(from, to, on);
        let inverse = self.latest(to, from, on);
        match (straight, inverse) {
            (Some(s), Some(i)) if i.0 > s.0 => FxRate::ratio(Decimal::ONE, i.1, i.0),
            (Some(s), _) => FxRate::ratio(s.1, Decimal::ONE, s.0),
            (None, Some(i)) => FxRate::ratio(Decimal::ONE, i.1, i.0),
            (None, None) => None,
        }
    }

    /// The rate converting `from` into `to` on `on`.
    ///
    /// # Errors
    /// `no_fx_rate` when no path exists on or before `on`.
    pub fn rate(&self, from: Currency, to: Currency, on: NaiveDate) -> Result<FxRate> {
        if from == to {
            return Ok(FxRate::IDENTITY);
        }
        if let Some(rate) = self.direct(from, to, on) {
            return Ok(rate);
        }
        if let Some(base) = self.base.filter(|b| *b != from && *b != to)
            && let (Some(a), Some(b)) = (self.direct(from, base, on), self.direct(base, to, on))
            && let (Some(num), Some(den)) = (a.num.checked_mul(b.num), a.den.checked_mul(b.den))
            && let Some(rate) = num.checked_div(den)
        {
            return Ok(FxRate {
                rate,
                num,
                den,
                date: a.date.min(b.date),
            });
        }
        Err(no_fx_rate(from, to, on))
    }

    /// Converts `amount` of `from` into `to` at the rate of `on`, at full precision.
    ///
    /// # Errors
    /// `no_fx_rate`, or `internal` on overflow.
    pub fn convert(
        &self,
        amount: Decimal,
        from: Currency,
        to: Currency,
        on: NaiveDate,
    ) -> Result<Decimal> {
        self.rate(from, to, on)?.apply(amount)
    }
}

pub fn no_fx_rate(from: Currency, to: Currency, on: NaiveDate) -> Error {
    Error::new(
        ErrorCode::NoFxRate,
        format!("no {from}/{to} rate on or before {on}, directly or through the base currency"),
        format!(
            "ask in a currency the book has rates for, or add a {from}/{to} rate dated on or \
             before {on} to the fx_file named in tradedesk.toml (fx_rates entries: base, quote, rate, date)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    fn d(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
    }

    fn q(base: &str, quote: &str, rate: Decimal, date: &str) -> FxQuote {
        FxQuote {
            base: Currency::new(base),
            quote: Currency::new(quote),
            rate,
            date: d(date),
        }
    }

    fn table() -> FxTable {
        FxTable::new(
            Currency::USD,
            [
                q("USD", "MYR", dec!(4.40), "2026-01-02"),
                q("USD", "MYR", dec!(4.50), "2026-02-02"),
                q("MYR", "USD", dec!(0.25), "2026-03-02"), // inverse, later-dated
                q("USD", "MYR", dec!(4.60), "2026-03-02"), // straight, same date: wins
                q("USD", "EUR", dec!(0.90), "2026-01-02"),
                q("MYR", "SGD", dec!(0.30), "2026-01-05"),
            ],
        )
    }

    struct TestCase {
        from: &'static str,
        to: &'static str,
        on: &'static str,
        want: Option<Decimal>,
    }

    #[test]
    fn conversions_follow_the_as_of_and_direction_rules() {
        let t = table();
        let cases = [
            // TC1: same currency is exact
            TestCase {
                from: "USD",
                to: "USD",
                on: "2020-01-01",
                want: Some(dec!(1)),
            },
            // TC2: latest on or before the date
            TestCase {
                from: "USD",
                to: "MYR",
                on: "2026-01-31",
                want: Some(dec!(4.40)),
            },
            TestCase {
                from: "USD",
                to: "MYR",
                on: "2026-02-02",
                want: Some(dec!(4.50)),
            },
            // TC3: a tie between straight and inverse goes to the straight quote
            TestCase {
                from: "USD",
                to: "MYR",
                on: "2026-03-02",
                want: Some(dec!(4.60)),
            },
            // TC4: inverse direction divides; the tie goes to the straight MYR/USD quote
            TestCase {
                from: "MYR",
                to: "USD",
                on: "2026-03-02",
                want: Some(dec!(0.25)),
            },
            TestCase {
                from: "MYR",
                to: "USD",
                on: "2026-02-10",
                want: Some(dec!(1) / dec!(4.50)),
            },
            // TC5: cross through the base when the pair is not quoted
            TestCase {
                from: "MYR",
                to: "EUR",
                on: "2026-02-10",
                want: Some(dec!(1) / dec!(4.50) * dec!(0.90)),
            },
            // TC6: a directly quoted pair is used before crossing
            TestCase {
                from: "SGD",
                to: "MYR",
                on: "2026-02-10",
                want: Some(dec!(1) / dec!(0.30)),
            },
            // TC7: before any rate exists
            TestCase {
                from: "USD",
                to: "MYR",
                on: "2025-12-31",
                want: None,
            },
            TestCase {
                from: "USD",
                to: "JPY",
                on: "2026-12-31",
                want: None,
            },
        ];
        for c in cases {
            let got = t.rate(Currency::new(c.from), Currency::new(c.to), d(c.on));
            match c.want {
                Some(want) => assert_eq!(got.unwrap().rate, want, "{}->{} {}", c.from, c.to, c.on),
                None => assert_eq!(got.unwrap_err().code, ErrorCode::NoFxRate),
            }
        }
    }

    #[test]
    fn a_later_inverse_quote_beats_an_older_straight_one() {
        let t = FxTable::new(
            Currency::USD,
            [
                q("USD", "MYR", dec!(4.00), "2026-01-01"),
                q("MYR", "USD", dec!(0.20), "2026-01-10"),
            ],
        );
        let r = t
            .rate(Currency::USD, Currency::MYR, d("2026-01-15"))
            .unwrap();
        assert_eq!(r.rate, dec!(5));
        assert_eq!(r.date, Some(d("2026-01-10")));
    }

    #[test]
    fn conversion_divides_by_an_inverse_quote_exactly() {
        let t = table();
        let r = t
            .rate(Currency::MYR, Currency::USD, d("2026-02-10"))
            .unwrap();
        assert_eq!((r.num, r.den), (dec!(1), dec!(4.50)));
        // 1.00 MYR is 0.2222... USD; 0.0225 MYR is exactly 0.005 USD, which rounds up.
        let fixed = |v: Decimal| Fixed::from_decimal(v).unwrap();
        assert_eq!(r.apply_rounded(fixed(dec!(1.00)), 2).unwrap(), 22);
        assert_eq!(r.apply_rounded(fixed(dec!(0.0225)), 2).unwrap(), 1);
        assert_eq!(r.apply_rounded(fixed(dec!(-0.0225)), 2).unwrap(), -1);
        assert_eq!(r.apply(dec!(9)).unwrap(), dec!(2));
    }

    #[test]
    fn latest_quotes_respect_as_of() {
        let quotes = table().latest_quotes(d("2026-02-15"));
        let usd_myr = quotes
            .iter()
            .find(|q| q.base == Currency::USD && q.quote == Currency::MYR);
        assert_eq!(usd_myr.unwrap().rate, dec!(4.50));
        assert!(
            !quotes
                .iter()
                .any(|q| q.base == Currency::MYR && q.quote == Currency::USD)
        );
    }
}
