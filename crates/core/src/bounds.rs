//! What the engine can compute, as the bounds every value of a book is held to: one
//! definition, read by the book loader (which refuses a row past them with its path, the
//! value and the bound) and by the engine (whose overflow errors name them). The rules and
//! their reasons are in docs/methodology/book-format.md ("Bounds").
//!
//! The engine holds quantities, prices, values, commissions, P&L and cash as [`Fixed`]:
//! 18 decimal places in an `i128`, exact up to [`fixed_max`] (about 1.7e20). Rows within
//! these bounds compute exactly in every tool, and their sums have room to spare: a sum
//! of [`HEADROOM_ROWS`] values each at [`max_notional`] still fits. A figure derived
//! past that (a cash balance or a position summed over more rows at the bounds, lots
//! grown by splits, a conversion crossing several extreme rates) is checked, never
//! wrapped: it is the error `invalid_book` naming it and the bound ([`too_large`]).

use rust_decimal::Decimal;

use crate::error::{Error, ErrorCode};
use crate::fixed::{self, Fixed};

/// Decimal places any value may have: the fixed point's own.
pub const MAX_PLACES: u32 = fixed::SCALE;

/// Any single value (a quantity, price, multiplier, commission, amount, units of an
/// action) is at most `10^VALUE_DIGITS` in size.
pub const VALUE_DIGITS: u32 = 12;

/// A fill's or an opening position's value, quantity x price x multiplier, is at most
/// `10^NOTIONAL_DIGITS` in size.
pub const NOTIONAL_DIGITS: u32 = 15;

/// An FX rate and its inverse (a conversion the other way divides by the rate) are each
/// at most `10^RATE_DIGITS`: one row's value converted at a rate stays exact in
/// [`Fixed`] (a commission) and in a `Decimal` at any currency's minor units.
pub const RATE_DIGITS: u32 = 8;

/// Values at [`max_notional`] that sum within [`fixed_max`]: the headroom the bounds
/// leave for totals.
pub const HEADROOM_ROWS: i128 = 1 << 17;

// The bounds fit what the engine holds: a row's value, with room for HEADROOM_ROWS of
// them; a commission at the largest rate; a row's value at the largest rate, at 4 minor
// places (the most any currency has), within a Decimal's 96-bit mantissa.
const _: () = {
    let notional = fixed::pow10(NOTIONAL_DIGITS + fixed::SCALE);
    assert!(notional <= i128::MAX / HEADROOM_ROWS);
    assert!(VALUE_DIGITS + RATE_DIGITS + fixed::SCALE <= 38);
    assert!(fixed::pow10(VALUE_DIGITS + RATE_DIGITS + fixed::SCALE) < i128::MAX);
    assert!(fixed::pow10(NOTIONAL_DIGITS + RATE_DIGITS + 4) < 1 << 96);
};

/// `10^VALUE_DIGITS`.
pub fn max_value() -> Decimal {
    Decimal::from_i128_with_scale(fixed::pow10(VALUE_DIGITS), 0)
}

/// `10^NOTIONAL_DIGITS`.
pub fn max_notional() -> Decimal {
    Decimal::from_i128_with_scale(fixed::pow10(NOTIONAL_DIGITS), 0)
}

/// `10^RATE_DIGITS`.
pub fn max_rate() -> Decimal {
    Decimal::from_i128_with_scale(fixed::pow10(RATE_DIGITS), 0)
}

/// `10^-RATE_DIGITS`.
pub fn min_rate() -> Decimal {
    Decimal::new(1, RATE_DIGITS)
}

/// The largest size [`Fixed`] holds: `i128::MAX` at 18 places, about 1.7e20.
pub fn fixed_max() -> Decimal {
    Fixed(i128::MAX).to_decimal()
}

/// A figure derived from a book's rows that passes what the engine holds: the error
/// `invalid_book` (not `internal`: the book's values are the cause), naming `what` and
/// the bound.
pub fn too_large(what: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::InvalidBook,
        format!(
            "{what} is too large to compute exactly: past about 1.7e20, the most the engine's \
             18-place fixed point holds (or a decimal's 7.9e28 in a conversion)"
        ),
        format!(
            "the book's values are beyond any real account: check its quantities, prices, multipliers, \
             corporate actions and rates (each row may be at most 1e{VALUE_DIGITS} in size, a fill worth at \
             most 1e{NOTIONAL_DIGITS}, a rate between 1e-{RATE_DIGITS} and 1e{RATE_DIGITS}; `tradedesk validate` \
             names any row past them), or ask in a currency nearer the book's"
        ),
    )
}

/// An error of the book's values ([`too_large`]) says where it arose (`fill F-12`, a
/// position, a cash balance); any other error is returned as it is.
pub fn at(e: Error, row: impl FnOnce() -> String) -> Error {
    if e.code == ErrorCode::InvalidBook {
        Error {
            message: format!("{}: {}", row(), e.message),
            ..e
        }
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bounds_are_what_they_say() {
        assert_eq!(max_value().to_string(), "1000000000000");
        assert_eq!(max_notional().to_string(), "1000000000000000");
        assert_eq!(max_rate().to_string(), "100000000");
        assert_eq!(min_rate().to_string(), "0.00000001");
        assert!(fixed_max() > Decimal::new(170, 0) * Decimal::from(10_i64.pow(18)));
        assert!(fixed_max() < Decimal::new(171, 0) * Decimal::from(10_i64.pow(18)));
        let err = too_large("cash of account A in USD");
        assert_eq!(err.code, ErrorCode::InvalidBook);
        assert!(
            err.message
                .starts_with("cash of account A in USD is too large")
        );
    }
}
