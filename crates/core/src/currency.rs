//! Currencies and their minor units (ISO 4217), plus the few settlement coins that
//! crypto venues quote in.
//!
//! A [`Currency`] is an index into a static table, so it is `Copy`, two bytes wide and
//! compares in one instruction; its code and minor unit come from the table.

use std::fmt;

use rust_decimal::{Decimal, RoundingStrategy};

use crate::error::{Error, ErrorCode, Result, quote};

/// (code, minor unit). Active ISO 4217 codes; then stablecoins used as account currencies.
const TABLE: &[(&str, u32)] = &[
    ("AED", 2),
    ("AFN", 2),
    ("ALL", 2),
    ("AMD", 2),
    ("ANG", 2),
    ("AOA", 2),
    ("ARS", 2),
    ("AUD", 2),
    ("AWG", 2),
    ("AZN", 2),
    ("BAM", 2),
    ("BBD", 2),
    ("BDT", 2),
    ("BGN", 2),
    ("BHD", 3),
    ("BIF", 0),
    ("BMD", 2),
    ("BND", 2),
    ("BOB", 2),
    ("BRL", 2),
    ("BSD", 2),
    ("BTN", 2),
    ("BWP", 2),
    ("BYN", 2),
    ("BZD", 2),
    ("CAD", 2),
    ("CDF", 2),
    ("CHF", 2),
    ("CLF", 4),
    ("CLP", 0),
    ("CNY", 2),
    ("CNH", 2),
    ("COP", 2),
    ("CRC", 2),
    ("CUP", 2),
    ("CVE", 2),
    ("CZK", 2),
    ("DJF", 0),
    ("DKK", 2),
    ("DOP", 2),
    ("DZD", 2),
    ("EGP", 2),
    ("ERN", 2),
    ("ETB", 2),
    ("EUR", 2),
    ("FJD", 2),
    ("FKP", 2),
    ("GBP", 2),
    ("GEL", 2),
    ("GHS", 2),
    ("GIP", 2),
    ("GMD", 2),
    ("GNF", 0),
    ("GTQ", 2),
    ("GYD", 2),
    ("HKD", 2),
    ("HNL", 2),
    ("HTG", 2),
    ("HUF", 2),
    ("IDR", 2),
    ("ILS", 2),
    ("INR", 2),
    ("IQD", 3),
    ("IRR", 2),
    ("ISK", 0),
    ("JMD", 2),
    ("JOD", 3),
    ("JPY", 0),
    ("KES", 2),
    ("KGS", 2),
    ("KHR", 2),
    ("KMF", 0),
    ("KPW", 2),
    ("KRW", 0),
    ("KWD", 3),
    ("KYD", 2),
    ("KZT", 2),
    ("LAK", 2),
    ("LBP", 2),
    ("LKR", 2),
    ("LRD", 2),
    ("LSL", 2),
    ("LYD", 3),
    ("MAD", 2),
    ("MDL", 2),
    ("MGA", 2),
    ("MKD", 2),
    ("MMK", 2),
    ("MNT", 2),
    ("MOP", 2),
    ("MRU", 2),
    ("MUR", 2),
    ("MVR", 2),
    ("MWK", 2),
    ("MXN", 2),
    ("MYR", 2),
    ("MZN", 2),
    ("NAD", 2),
    ("NGN", 2),
    ("NIO", 2),
    ("NOK", 2),
    ("NPR", 2),
    ("NZD", 2),
    ("OMR", 3),
    ("PAB", 2),
    ("PEN", 2),
    ("PGK", 2),
    ("PHP", 2),
    ("PKR", 2),
    ("PLN", 2),
    ("PYG", 0),
    ("QAR", 2),
    ("RON", 2),
    ("RSD", 2),
    ("RUB", 2),
    ("RWF", 0),
    ("SAR", 2),
    ("SBD", 2),
    ("SCR", 2),
    ("SDG", 2),
    ("SEK", 2),
    ("SGD", 2),
    ("SHP", 2),
    ("SLE", 2),
    ("SOS", 2),
    ("SRD", 2),
    ("SSP", 2),
    ("STN", 2),
    ("SVC", 2),
    ("SYP", 2),
    ("SZL", 2),
    ("THB", 2),
    ("TJS", 2),
    ("TMT", 2),
    ("TND", 3),
    ("TOP", 2),
    ("TRY", 2),
    ("TTD", 2),
    ("TWD", 2),
    ("TZS", 2),
    ("UAH", 2),
    ("UGX", 0),
    ("USD", 2),
    ("UYI", 0),
    ("UYU", 2),
    ("UYW", 4),
    ("UZS", 2),
    ("VED", 2),
    ("VES", 2),
    ("VND", 0),
    ("VUV", 0),
    ("WST", 2),
    ("XAF", 0),
    ("XCD", 2),
    ("XOF", 0),
    ("XPF", 0),
    ("YER", 2),
    ("ZAR", 2),
    ("ZMW", 2),
    ("ZWG", 2),
    ("USDC", 2),
    ("USDT", 2),
];

/// A currency of the table above.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Currency(u16);

impl Currency {
    pub const USD: Self = Self::from_static("USD");
    pub const MYR: Self = Self::from_static("MYR");

    const fn from_static(code: &str) -> Self {
        let mut i = 0;
        while i < TABLE.len() {
            if const_eq(TABLE[i].0, code) {
                #[allow(clippy::cast_possible_truncation)] // the table has < 65536 rows
                return Self(i as u16);
            }
            i += 1;
        }
        panic!("currency missing from the table");
    }

    /// Parses an upper-case code such as `USD`.
    ///
    /// # Errors
    /// `invalid_argument` when the text is not a code of the table.
    pub fn new_checked(code: &str) -> Result<Self> {
        TABLE
            .iter()
            .position(|(c, _)| *c == code)
            .and_then(|i| u16::try_from(i).ok())
            .map(Self)
            .ok_or_else(|| {
                let hint = if code.len() == 3 && code.chars().all(|c| c.is_ascii_alphabetic()) {
                    format!(
                        "currency codes are upper-case ISO 4217, e.g. {}",
                        code.to_ascii_uppercase()
                    )
                } else {
                    "currency codes are upper-case ISO 4217 codes such as USD, MYR, EUR".to_owned()
                };
                Error::new(
                    ErrorCode::InvalidArgument,
                    format!("{} is not an ISO 4217 currency code", quote(code)),
                    hint,
                )
            })
    }

    /// Parses a code, panicking on an unknown one: for literals in tests.
    ///
    /// # Panics
    /// When `code` is not in the table.
    #[allow(clippy::expect_used)]
    pub fn new(code: &str) -> Self {
        Self::new_checked(code).expect("a valid currency code literal")
    }

    pub fn code(self) -> &'static str {
        TABLE[usize::from(self.0)].0
    }

    /// Digits after the decimal point of the currency's minor unit.
    pub fn minor_units(self) -> u32 {
        TABLE[usize::from(self.0)].1
    }

    /// Rounds an amount in this currency to its minor unit, half away from zero: the one
    /// rounding every money row gets.
    pub fn round(self, amount: Decimal) -> Decimal {
        amount.round_dp_with_strategy(self.minor_units(), RoundingStrategy::MidpointAwayFromZero)
    }
}

const fn const_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl fmt::Debug for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    #[test]
    fn minor_units_follow_iso_4217() {
        for (code, units) in [
            ("USD", 2),
            ("MYR", 2),
            ("JPY", 0),
            ("KRW", 0),
            ("BHD", 3),
            ("KWD", 3),
        ] {
            assert_eq!(Currency::new(code).minor_units(), units, "{code}");
        }
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        let usd = Currency::USD;
        assert_eq!(usd.round(dec!(1.005)), dec!(1.01));
        assert_eq!(usd.round(dec!(-1.005)), dec!(-1.01));
        assert_eq!(usd.round(dec!(1.0049999)), dec!(1.00));
        assert_eq!(Currency::new("JPY").round(dec!(12.5)), dec!(13));
        assert_eq!(Currency::new("BHD").round(dec!(0.0005)), dec!(0.001));
    }

    #[test]
    fn unknown_and_lower_case_codes_are_refused_with_a_hint() {
        let err = Currency::new_checked("usd").unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidArgument);
        assert!(err.hint.contains("USD"), "{}", err.hint);
        assert!(Currency::new_checked("XXQ").is_err());
        assert!(Currency::new_checked("").is_err());
        assert_eq!(Currency::new("MYR"), Currency::MYR);
        assert_eq!(Currency::MYR.code(), "MYR");
    }
}
