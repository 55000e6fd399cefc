//! An amount in a currency, with arithmetic that cannot panic.
//!
//! | operation | returns | fails when |
//! | --- | --- | --- |
//! | `checked_add`, `checked_sub` | `Result<Money, MoneyError>` | currencies differ, or overflow |
//! | `checked_mul` (by a plain decimal) | `Result<Money, MoneyError>` | overflow |
//! | `rounded` | `Money` | never |
//! | `-` (negation) | `Money` | never |
//!
//! There is deliberately no `Add`/`Sub`/`Ord` on `Money`: mixing currencies is an error
//! the caller must handle, not a panic.

use std::fmt;

use rust_decimal::Decimal;

use crate::currency::Currency;

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    #[error("cannot combine {0} with {1}")]
    CurrencyMismatch(Currency, Currency),
    #[error("decimal overflow")]
    Overflow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Money {
    pub amount: Decimal,
    pub currency: Currency,
}

impl Money {
    pub fn new(amount: Decimal, currency: Currency) -> Self {
        Self { amount, currency }
    }

    pub fn zero(currency: Currency) -> Self {
        Self {
            amount: Decimal::ZERO,
            currency,
        }
    }

    /// # Errors
    /// A currency mismatch or a decimal overflow.
    pub fn checked_add(self, other: Self) -> Result<Self, MoneyError> {
        self.same_currency(other)?;
        let amount = self
            .amount
            .checked_add(other.amount)
            .ok_or(MoneyError::Overflow)?;
        Ok(Self {
            amount,
            currency: self.currency,
        })
    }

    /// # Errors
    /// A currency mismatch or a decimal overflow.
    pub fn checked_sub(self, other: Self) -> Result<Self, MoneyError> {
        self.same_currency(other)?;
        let amount = self
            .amount
            .checked_sub(other.amount)
            .ok_or(MoneyError::Overflow)?;
        Ok(Self {
            amount,
            currency: self.currency,
        })
    }

    /// # Errors
    /// A decimal overflow.
    pub fn checked_mul(self, factor: Decimal) -> Result<Self, MoneyError> {
        let amount = self
            .amount
            .checked_mul(factor)
            .ok_or(MoneyError::Overflow)?;
        Ok(Self {
            amount,
            currency: self.currency,
        })
    }

    /// Rounded once to the currency's minor unit, half away from zero.
    #[must_use]
    pub fn rounded(self) -> Self {
        Self {
            amount: self.currency.round(self.amount),
            currency: self.currency,
        }
    }

    fn same_currency(self, other: Self) -> Result<(), MoneyError> {
        if self.currency == other.currency {
            Ok(())
        } else {
            Err(MoneyError::CurrencyMismatch(self.currency, other.currency))
        }
    }
}

impl std::ops::Neg for Money {
    type Output = Self;

    /// Negation cannot overflow: a decimal's range is symmetric.
    fn neg(self) -> Self {
        Self {
            amount: -self.amount,
            currency: self.currency,
        }
    }
}

impl fmt::Display for Money {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.amount, self.currency)
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    #[test]
    fn mixing_currencies_is_an_error_not_a_panic() {
        let usd = Money::new(dec!(1), Currency::USD);
        let myr = Money::new(dec!(1), Currency::MYR);
        assert_eq!(
            usd.checked_add(myr),
            Err(MoneyError::CurrencyMismatch(Currency::USD, Currency::MYR))
        );
        assert_eq!(usd.checked_sub(usd).map(|m| m.amount), Ok(dec!(0)));
    }

    #[test]
    fn overflow_is_an_error() {
        let big = Money::new(Decimal::MAX, Currency::USD);
        assert_eq!(big.checked_add(big), Err(MoneyError::Overflow));
        assert_eq!(big.checked_mul(dec!(2)), Err(MoneyError::Overflow));
    }

    #[test]
    fn rounding_happens_once_to_the_minor_unit() {
        let m = Money::new(dec!(10.125), Currency::USD).rounded();
        assert_eq!(m.amount, dec!(10.13));
        assert_eq!((-m).amount, dec!(-10.13));
        assert_eq!(Money::zero(Currency::MYR).to_string(), "0 MYR");
    }
}
