//! FX rates and conversion under the book's rules (docs/methodology/fx.md): the latest
//! rate on or before the date that matters; a pair quoted in either direction (the
//! later-dated quote wins, a tie going to the straight one); only when neither direction
//! is quoted, a cross through the fewest other currencies that have rates (any currency,
//! not only the base); otherwise `no_fx_rate`.

use std::collections::{BTreeMap, HashMap, HashSet};

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
    /// `invalid_book` when the result passes a decimal's range (a conversion crossing
    /// extreme rates: docs/methodology/book-format.md, "Bounds").
    pub fn apply(self, amount: Decimal) -> Result<Decimal> {
        amount
            .checked_mul(self.num)
            .and_then(|v| v.checked_div(self.den))
            .ok_or_else(|| {
                crate::bounds::too_large(format!("{amount} converted at the rate {}", self.rate))
            })
    }

    /// Converts a [`Fixed`] amount and rounds it once to `dp` places (half away from
    /// zero), returning the mantissa: exact integer arithmetic whenever the factors fit.
    /// The mantissa always fits a decimal's 96 bits.
    ///
    /// # Errors
    /// `invalid_book` when the result passes a decimal's range.
    pub fn apply_rounded(self, amount: Fixed, dp: u32) -> Result<i128> {
        let v = self.apply_rounded_wide(amount, dp)?;
        if v.unsigned_abs() >> 96 != 0 {
            return Err(crate::bounds::too_large(format!(
                "{} converted at the rate {}",
                amount.to_decimal(),
                self.rate
            )));
        }
        Ok(v)
    }

    fn apply_rounded_wide(self, amount: Fixed, dp: u32) -> Result<i128> {
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

/// Merges rate sources in order of precedence, the first source first: a quote of a
/// later source is dropped when an earlier source quotes the same pair (in either
/// direction) on the same date. Within one source every quote is kept.
pub fn by_precedence(sources: &[&[FxQuote]]) -> Vec<FxQuote> {
    let mut taken: HashSet<(Currency, Currency, NaiveDate)> = HashSet::new();
    let mut out = Vec::with_capacity(sources.iter().map(|s| s.len()).sum());
    for source in sources {
        let start = out.len();
        for q in *source {
            if !taken.contains(&(q.base, q.quote, q.date)) {
                out.push(*q);
            }
        }
        for q in &out[start..] {
            taken.insert((q.base, q.quote, q.date));
            taken.insert((q.quote, q.base, q.date));
        }
    }
    out
}

/// A path being explored by the cross search: the exact product so far, its oldest leg
/// and the currencies passed through.
#[derive(Debug, Clone)]
struct Path {
    num: Decimal,
    den: Decimal,
    date: NaiveDate,
    via: Vec<Currency>,
}

impl Path {
    fn extend(&self, through: Currency, leg: FxRate) -> Option<Self> {
        let date = leg.date.map_or(self.date, |d| d.min(self.date));
        let mut via = self.via.clone();
        via.push(through);
        if let (Some(num), Some(den)) =
            (self.num.checked_mul(leg.num), self.den.checked_mul(leg.den))
        {
            return Some(Self {
                num,
                den,
                date,
                via,
            });
        }
        // Too many digits for an exact ratio: fall back to the 28-digit quotient.
        let so_far = self.num.checked_div(self.den)?;
        let num = so_far.checked_mul(leg.num)?.checked_div(leg.den)?;
        Some(Self {
            num,
            den: Decimal::ONE,
            date,
            via,
        })
    }

    /// Whether `self` is preferred to `other` (both with as many legs): the newer oldest
    /// leg, then the currencies passed through in code order.
    fn beats(&self, other: &Self) -> bool {
        if self.date != other.date {
            return self.date > other.date;
        }
        let codes = |p: &Self| p.via.iter().map(|c| c.code()).collect::<Vec<_>>();
        codes(self) < codes(other)
    }
}

#[derive(Debug, Clone, Default)]
pub struct FxTable {
    base: Option<Currency>,
    /// (base, quote) -> rates sorted by date, one per date.
    series: HashMap<(Currency, Currency), Vec<(NaiveDate, Decimal)>>,
    /// Per currency, every currency it is quoted against (either way), in code order.
    neighbors: HashMap<Currency, Vec<Currency>>,
}

impl FxTable {
    /// Builds a table. Rates must be positive; a later entry for the same pair and date
    /// replaces an earlier one (loaders refuse duplicates; [`by_precedence`] merges
    /// sources). `base` is the book's base currency.
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
        let mut neighbors: HashMap<Currency, Vec<Currency>> = HashMap::new();
        for &(b, q) in series.keys() {
            neighbors.entry(b).or_default().push(q);
            neighbors.entry(q).or_default().push(b);
        }
        for list in neighbors.values_mut() {
            list.sort_by_key(|c| c.code());
            list.dedup();
        }
        Self {
            base: Some(base),
            series,
            neighbors,
        }
    }

    /// The base currency the table was built for.
    pub fn base(&self) -> Option<Currency> {
        self.base
    }

    /// Every currency the table has a rate for, in code order.
    pub fn currencies(&self) -> Vec<Currency> {
        let mut out: Vec<Currency> = self.neighbors.keys().copied().collect();
        out.sort_by_key(|c| c.code());
        out
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

    /// The rate converting `from` into `to` on `on`: the pair itself when it is quoted
    /// (either way round), else the cross through the fewest other currencies, each leg
    /// the latest on or before `on`. Among crosses with as many legs, the one whose
    /// oldest leg is newest wins, then the one whose currencies come first in code order,
    /// so the answer never depends on the order rates were loaded in.
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
        self.cross(from, to, on)
            .ok_or_else(|| no_fx_rate(from, to, on))
    }

    /// Whether `from` can be converted into `to` on `on`.
    pub fn has_rate(&self, from: Currency, to: Currency, on: NaiveDate) -> bool {
        self.rate(from, to, on).is_ok()
    }

    /// The shortest cross, searched breadth first over the pairs quoted on or before `on`.
    fn cross(&self, from: Currency, to: Currency, on: NaiveDate) -> Option<FxRate> {
        if !self.neighbors.contains_key(&from) || !self.neighbors.contains_key(&to) {
            return None;
        }
        let mut seen: HashSet<Currency> = HashSet::from([from]);
        let mut frontier: Vec<(Currency, Path)> = vec![(
            from,
            Path {
                num: Decimal::ONE,
                den: Decimal::ONE,
                date: NaiveDate::MAX,
                via: Vec::new(),
            },
        )];
        while !frontier.is_empty() {
            // Keyed by code so the next layer is walked in a fixed order.
            let mut next: BTreeMap<&'static str, (Currency, Path)> = BTreeMap::new();
            for (at, path) in &frontier {
                for &n in self.neighbors.get(at).map_or(&[][..], Vec::as_slice) {
                    if seen.contains(&n) {
                        continue;
                    }
                    let Some(leg) = self.direct(*at, n, on) else {
                        continue;
                    };
                    // The path records the currencies passed through, not the target.
                    let Some(candidate) = path.extend(*at, leg) else {
                        continue;
                    };
                    match next.get(n.code()) {
                        Some((_, best)) if !candidate.beats(best) => {}
                        _ => {
                            next.insert(n.code(), (n, candidate));
                        }
                    }
                }
            }
            if let Some((_, path)) = next.get(to.code()) {
                return Some(FxRate {
                    rate: path.num.checked_div(path.den)?,
                    num: path.num,
                    den: path.den,
                    date: Some(path.date),
                });
            }
            seen.extend(next.values().map(|(c, _)| *c));
            frontier = next.into_values().collect();
        }
        None
    }

    /// Converts `amount` of `from` into `to` at the rate of `on`, at full precision.
    ///
    /// # Errors
    /// `no_fx_rate`, or `invalid_book` when the result passes a decimal's range.
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
        format!(
            "no {from}/{to} rate on or before {on}, directly or crossed through any currency with rates"
        ),
        fix_hint(from, to, on),
    )
}

/// How to supply a missing rate, for errors and notes.
pub fn fix_hint(from: Currency, to: Currency, on: NaiveDate) -> String {
    format!(
        "add a {from}/{to} rate dated on or before {on} to the fx_file named in tradedesk.toml \
         (fx_rates entries: base, quote, rate, date), or set fx_source = \"ecb\" for the European \
         Central Bank's reference rates, or ask in a currency the book has rates for"
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

    #[test]
    fn crosses_through_any_currency_with_rates() {
        // Base USD, but MYR and USD are quoted only against EUR (the ECB's shape).
        let t = FxTable::new(
            Currency::USD,
            [
                q("EUR", "USD", dec!(1.0843), "2026-01-05"),
                q("EUR", "MYR", dec!(4.9812), "2026-01-06"),
            ],
        );
        let r = t
            .rate(Currency::MYR, Currency::USD, d("2026-01-10"))
            .unwrap();
        // MYR -> EUR divides by 4.9812, EUR -> USD multiplies by 1.0843: exact ratio kept.
        assert_eq!((r.num, r.den), (dec!(1.0843), dec!(4.9812)));
        assert_eq!(r.rate, dec!(1.0843) / dec!(4.9812));
        // The date is the oldest leg's.
        assert_eq!(r.date, Some(d("2026-01-05")));
        // Before the MYR leg exists there is no path.
        assert_eq!(
            t.rate(Currency::MYR, Currency::USD, d("2026-01-05"))
                .unwrap_err()
                .code,
            ErrorCode::NoFxRate
        );
    }

    #[test]
    fn the_fewest_legs_win_then_the_newest_oldest_leg_then_code_order() {
        let usd = Currency::USD;
        let jpy = Currency::new("JPY");
        // USD-EUR-JPY (2 legs) against USD-GBP-CHF-JPY (3 legs, fresher).
        let t = FxTable::new(
            usd,
            [
                q("USD", "EUR", dec!(0.9), "2026-01-01"),
                q("EUR", "JPY", dec!(160), "2026-01-01"),
                q("USD", "GBP", dec!(0.8), "2026-01-09"),
                q("GBP", "CHF", dec!(1.1), "2026-01-09"),
                q("CHF", "JPY", dec!(180), "2026-01-09"),
            ],
        );
        let r = t.rate(usd, jpy, d("2026-01-10")).unwrap();
        assert_eq!(r.rate, dec!(144));
        assert_eq!(r.date, Some(d("2026-01-01")));

        // Two 2-leg paths: the one whose oldest leg is newer wins.
        let mut quotes = vec![
            q("USD", "EUR", dec!(0.9), "2026-01-02"),
            q("EUR", "JPY", dec!(160), "2026-01-08"),
            q("USD", "GBP", dec!(0.8), "2026-01-05"),
            q("GBP", "JPY", dec!(190), "2026-01-06"),
        ];
        let r = FxTable::new(usd, quotes.clone())
            .rate(usd, jpy, d("2026-01-10"))
            .unwrap();
        assert_eq!(r.rate, dec!(152)); // through GBP: oldest leg 01-05 beats 01-02
        // The load order never changes the answer.
        quotes.reverse();
        let again = FxTable::new(usd, quotes)
            .rate(usd, jpy, d("2026-01-10"))
            .unwrap();
        assert_eq!(again, r);

        // Equal dates: code order of the currency passed through (EUR before GBP).
        let tie = FxTable::new(
            usd,
            [
                q("USD", "GBP", dec!(0.8), "2026-01-05"),
                q("GBP", "JPY", dec!(190), "2026-01-05"),
                q("USD", "EUR", dec!(0.9), "2026-01-05"),
                q("EUR", "JPY", dec!(160), "2026-01-05"),
            ],
        );
        assert_eq!(tie.rate(usd, jpy, d("2026-01-10")).unwrap().rate, dec!(144));
        // and back the same way: 1 / (160 x 0.9), kept as the exact ratio.
        let back = tie.rate(jpy, usd, d("2026-01-10")).unwrap();
        assert_eq!((back.num, back.den), (dec!(1), dec!(144.0)));
    }

    #[test]
    fn a_quoted_pair_beats_any_cross_and_disconnected_currencies_fail() {
        let usd = Currency::USD;
        let t = FxTable::new(
            usd,
            [
                q("USD", "MYR", dec!(4.40), "2025-06-01"), // old but direct
                q("EUR", "USD", dec!(1.10), "2026-01-05"),
                q("EUR", "MYR", dec!(5.00), "2026-01-05"),
                q("SGD", "HKD", dec!(5.80), "2026-01-05"),
            ],
        );
        let r = t.rate(usd, Currency::MYR, d("2026-01-10")).unwrap();
        assert_eq!(r.rate, dec!(4.40));
        let err = t
            .rate(Currency::MYR, Currency::new("SGD"), d("2026-01-10"))
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::NoFxRate);
        assert!(err.hint.contains("fx_file"), "{}", err.hint);
        assert!(t.has_rate(Currency::new("HKD"), Currency::new("SGD"), d("2026-01-10")));
    }

    #[test]
    fn earlier_sources_win_the_same_pair_and_date_in_either_direction() {
        let file = [q("USD", "MYR", dec!(4.50), "2026-01-05")];
        let broker = [
            q("MYR", "USD", dec!(0.2), "2026-01-05"), // same pair, same date: dropped
            q("USD", "MYR", dec!(4.70), "2026-01-06"), // another date: kept
        ];
        let ecb = [
            q("USD", "MYR", dec!(4.90), "2026-01-06"), // the broker has 01-06: dropped
            q("EUR", "MYR", dec!(5.00), "2026-01-06"),
        ];
        let merged = by_precedence(&[&file, &broker, &ecb]);
        assert_eq!(
            merged,
            vec![
                q("USD", "MYR", dec!(4.50), "2026-01-05"),
                q("USD", "MYR", dec!(4.70), "2026-01-06"),
                q("EUR", "MYR", dec!(5.00), "2026-01-06"),
            ]
        );
        let t = FxTable::new(Currency::USD, merged);
        assert_eq!(
            t.rate(Currency::MYR, Currency::USD, d("2026-01-05"))
                .unwrap()
                .rate,
            dec!(1) / dec!(4.50)
        );
    }

    proptest::proptest! {
        /// Any set of quotes, loaded in any order, gives the same rate for every pair and
        /// date; a crossed rate is the exact product of its legs (num / den).
        #[test]
        fn the_load_order_never_changes_a_rate(
            quotes in proptest::collection::vec((0usize..6, 0usize..6, 1u32..5000, 0u32..20), 1..25),
            seed in 0u64..1000,
        ) {
            const CODES: [&str; 6] = ["USD", "EUR", "MYR", "GBP", "JPY", "SGD"];
            let start = d("2026-01-01");
            let list: Vec<FxQuote> = quotes
                .iter()
                .filter(|(b, q, ..)| b != q)
                .map(|&(b, q, r, day)| FxQuote {
                    base: Currency::new(CODES[b]),
                    quote: Currency::new(CODES[q]),
                    rate: Decimal::new(i64::from(r), 2),
                    date: start + chrono::Days::new(u64::from(day)),
                })
                .collect();
            // Deduplicated on (pair, date) so "a later entry replaces" cannot differ.
            let mut unique: Vec<FxQuote> = Vec::new();
            for q in list {
                if !unique.iter().any(|u| (u.base, u.quote, u.date) == (q.base, q.quote, q.date)) {
                    unique.push(q);
                }
            }
            let mut shuffled = unique.clone();
            let n = shuffled.len();
            for i in 0..n {
                let j = usize::try_from((seed + i as u64 * 7919) % n as u64).unwrap();
                shuffled.swap(i, j);
            }
            let a = FxTable::new(Currency::USD, unique);
            let b = FxTable::new(Currency::USD, shuffled);
            for from in CODES {
                for to in CODES {
                    for day in [0u64, 5, 19, 40] {
                        let on = start + chrono::Days::new(day);
                        let (f, t) = (Currency::new(from), Currency::new(to));
                        let (x, y) = (a.rate(f, t, on).ok(), b.rate(f, t, on).ok());
                        proptest::prop_assert_eq!(x, y, "{}->{} {}", from, to, on);
                        if let Some(r) = x {
                            proptest::prop_assert_eq!(r.rate, r.num / r.den);
                        }
                    }
                }
            }
        }
    }
}
