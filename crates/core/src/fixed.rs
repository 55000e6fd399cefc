//! `Fixed`: a decimal with 18 places held in an `i128`, the number type of the FIFO hot
//! loop. Integer arithmetic is exact and an order of magnitude faster than `Decimal`'s
//! 96-bit software arithmetic; `Decimal` stays the type of every input and output.
//!
//! | operation | returns | fails when |
//! | --- | --- | --- |
//! | `from_decimal` | `Option<Fixed>` | the value is 1.7e20 or more (more than 18 places are rounded half away from zero) |
//! | `checked_add`, `checked_sub` | `Option<Fixed>` | overflow |
//! | `to_decimal` | `Decimal` | never (past 7.9e10 the last places are rounded) |
//! | `round_to(dp)` | `i128`, the mantissa at `dp` places | never, for `dp <= 18` (every currency's minor unit) |
//!
//! Every value of a book (prices, quantities, commissions of at most 18 places) converts
//! exactly. Commission shares, the one division in FIFO, are rounded at the 18th place;
//! the last share of a commission takes what remains, so commissions are conserved exactly.

use rust_decimal::Decimal;

/// Places after the decimal point.
pub const SCALE: u32 = 18;

const POW10: [i128; 39] = {
    let mut t = [1i128; 39];
    let mut i = 1;
    while i < 39 {
        t[i] = t[i - 1] * 10;
        i += 1;
    }
    t
};

/// `10^n`, for `n <= 38`.
pub const fn pow10(n: u32) -> i128 {
    POW10[n as usize]
}

/// `10^n`, or `None` past `10^38`.
pub fn pow10_checked(n: u32) -> Option<i128> {
    POW10.get(n as usize).copied()
}

/// `n / d` rounded half away from zero (`d != 0`; a zero divisor gives 0). One hardware
/// division when both fit in 64 bits.
pub fn div_round(n: i128, d: i128) -> i128 {
    if d == 0 {
        return 0;
    }
    let (a, b) = (n.unsigned_abs(), d.unsigned_abs());
    let (q, r) = match (u64::try_from(a), u64::try_from(b)) {
        (Ok(a), Ok(b)) => (u128::from(a / b), u128::from(a % b)),
        _ => {
            let q = a / b;
            (q, a - q * b)
        }
    };
    let q = if r >= b - r { q + 1 } else { q };
    signed(q, (n < 0) != (d < 0))
}

/// `q` with a sign, saturating at the ends of `i128` (reached only by `i128::MIN / 1`).
fn signed(q: u128, negative: bool) -> i128 {
    match (i128::try_from(q), negative) {
        (Ok(q), true) => -q,
        (Ok(q), false) => q,
        (Err(_), true) => i128::MIN,
        (Err(_), false) => i128::MAX,
    }
}

const POW5: [u64; 28] = {
    let mut t = [1u64; 28];
    let mut i = 1;
    while i < 28 {
        t[i] = t[i - 1] * 5;
        i += 1;
    }
    t
};

/// `n / 10^k` rounded half away from zero (`k <= 38`). As `10^k = 2^k x 5^k`, a shift leaves a
/// 64-bit division for every value below about 2^(63+k): the common case.
pub fn div_round_pow10(n: i128, k: u32) -> i128 {
    if k == 0 {
        return n;
    }
    let a = n.unsigned_abs();
    let shifted = a >> k;
    let q = match (u64::try_from(shifted), POW5.get(k as usize)) {
        (Ok(s), Some(&p5)) => u128::from(s / p5),
        _ => a / pow10(k).unsigned_abs(),
    };
    let d = pow10(k).unsigned_abs();
    let r = a - q * d;
    let q = if r >= d - r { q + 1 } else { q };
    signed(q, n < 0)
}

/// `a * b / 10^k` rounded half away from zero, for `k` up to 76, with a 256-bit
/// intermediate; `None` when the result does not fit.
pub fn mul_div_pow10(a: i128, b: i128, k: u32) -> Option<i128> {
    if k <= 38 {
        return mul_div(a, b, pow10(k));
    }
    if k > 76 {
        return None;
    }
    // Truncate by 10^38 first, then round by 10^(k-38): the first remainder is below
    // 10^38, so it can never carry the second one across the half-way point.
    let negative = (a < 0) ^ (b < 0);
    let (hi, lo) = mul_u256(a.unsigned_abs(), b.unsigned_abs());
    let (q1, _) = div_rem_u256(hi, lo, pow10(38).unsigned_abs())?;
    let d = pow10(k - 38).unsigned_abs();
    let (q, r) = (q1 / d, q1 % d);
    let q = if r >= d - r { q + 1 } else { q };
    let q = i128::try_from(q).ok()?;
    Some(if negative { -q } else { q })
}

/// `a * b / c` rounded half away from zero, with a 256-bit intermediate when `a * b`
/// overflows; `None` when the quotient does not fit or `c` is zero.
pub fn mul_div(a: i128, b: i128, c: i128) -> Option<i128> {
    if c == 0 {
        return None;
    }
    if let (Ok(x), Ok(y)) = (i64::try_from(a), i64::try_from(b)) {
        return Some(div_round(i128::from(x) * i128::from(y), c));
    }
    if let Some(p) = a.checked_mul(b) {
        return Some(div_round(p, c));
    }
    let negative = (a < 0) ^ (b < 0) ^ (c < 0);
    let (hi, lo) = mul_u256(a.unsigned_abs(), b.unsigned_abs());
    let d = c.unsigned_abs();
    let (q, rem) = div_rem_u256(hi, lo, d)?;
    let q = if rem >= d - rem { q.checked_add(1)? } else { q };
    let q = i128::try_from(q).ok()?;
    Some(if negative { -q } else { q })
}

/// `a x b x c`, a product at `scale` places, as [`Fixed`] (rounded half away from zero
/// to 18 places when `scale` is more): exact whenever the result fits, however many
/// digits the factors carry (a 256-bit intermediate when `b x c` overflows 128 bits);
/// `None` when it does not fit.
pub fn product3(a: i128, b: i128, c: i128, scale: u32) -> Option<Fixed> {
    if a == 0 || b == 0 || c == 0 {
        return Some(Fixed::ZERO);
    }
    if let Some(bc) = b.checked_mul(c) {
        return product(a, bc, scale);
    }
    let negative = (a < 0) ^ (b < 0) ^ (c < 0);
    let (hi, lo) = mul_u256(b.unsigned_abs(), c.unsigned_abs());
    // (hi, lo) x |a|, which must stay within 256 bits: a result that fits is below
    // 2^127 x 10^(scale - 18), and 10^38 < 2^127.
    let x = a.unsigned_abs();
    let (carry, lo) = mul_u256(lo, x);
    let hi = hi.checked_mul(x)?.checked_add(carry)?;
    let magnitude = if scale <= SCALE {
        if hi != 0 {
            return None;
        }
        i128::try_from(lo).ok()?.checked_mul(pow10(SCALE - scale))?
    } else {
        let k = scale - SCALE;
        let q = if k <= 38 {
            let d = pow10(k).unsigned_abs();
            let (q, r) = div_rem_u256(hi, lo, d)?;
            if r >= d - r { q.checked_add(1)? } else { q }
        } else if k <= 76 {
            // Truncate by 10^38 first, then round by 10^(k-38) (see mul_div_pow10).
            let (q1, _) = div_rem_u256(hi, lo, pow10(38).unsigned_abs())?;
            let d = pow10(k - 38).unsigned_abs();
            let (q, r) = (q1 / d, q1 % d);
            if r >= d - r { q + 1 } else { q }
        } else {
            return None;
        };
        i128::try_from(q).ok()?
    };
    Some(Fixed(if negative { -magnitude } else { magnitude }))
}

/// `a x b`, a product at `scale` places, as [`Fixed`]; `None` when it does not fit.
pub fn product(a: i128, b: i128, scale: u32) -> Option<Fixed> {
    if let (Ok(a), Ok(b), true) = (i64::try_from(a), i64::try_from(b), scale <= SCALE) {
        // Two 64-bit factors cannot overflow 128 bits; only the rescale can.
        return (i128::from(a) * i128::from(b))
            .checked_mul(pow10(SCALE - scale))
            .map(Fixed);
    }
    if scale <= SCALE {
        return a
            .checked_mul(b)
            .and_then(|p| p.checked_mul(pow10(SCALE - scale)))
            .map(Fixed);
    }
    // Products of up to 28 + 28 + 28 places: rounded to 18, through 256 bits.
    mul_div_pow10(a, b, scale - SCALE).map(Fixed)
}

fn mul_u256(a: u128, b: u128) -> (u128, u128) {
    let (a1, a0) = (a >> 64, a & u128::from(u64::MAX));
    let (b1, b0) = (b >> 64, b & u128::from(u64::MAX));
    let p00 = a0 * b0;
    let p01 = a0 * b1;
    let p10 = a1 * b0;
    let p11 = a1 * b1;
    let mid = (p00 >> 64) + (p01 & u128::from(u64::MAX)) + (p10 & u128::from(u64::MAX));
    let lo = (p00 & u128::from(u64::MAX)) | (mid << 64);
    let hi = p11 + (p01 >> 64) + (p10 >> 64) + (mid >> 64);
    (hi, lo)
}

/// (hi, lo) / d, truncated, with the remainder, by shift and subtract; `None` if the
/// quotient needs more than 128 bits.
fn div_rem_u256(hi: u128, lo: u128, d: u128) -> Option<(u128, u128)> {
    if hi >= d {
        return None;
    }
    let (mut rem, mut q) = (hi, 0u128);
    for i in (0..128).rev() {
        let carry = rem >> 127;
        rem = (rem << 1) | ((lo >> i) & 1);
        q <<= 1;
        if carry == 1 || rem >= d {
            rem = rem.wrapping_sub(d);
            q |= 1;
        }
    }
    Some((q, rem))
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Fixed(pub i128);

impl Fixed {
    pub const ZERO: Self = Self(0);

    /// The value of a mantissa at `scale` places (`scale <= 38`).
    pub fn from_scaled(mantissa: i128, scale: u32) -> Option<Self> {
        if scale <= SCALE
            && let Ok(m) = i64::try_from(mantissa)
        {
            // A 64-bit mantissa times 10^18 at most stays below 2^127.
            return Some(Self(i128::from(m) * pow10(SCALE - scale)));
        }
        if scale <= SCALE {
            mantissa.checked_mul(pow10(SCALE - scale)).map(Self)
        } else {
            Some(Self(div_round_pow10(mantissa, scale - SCALE)))
        }
    }

    pub fn from_decimal(d: Decimal) -> Option<Self> {
        Self::from_scaled(d.mantissa(), d.scale())
    }

    pub fn to_decimal(self) -> Decimal {
        let (mut v, mut scale) = (self.0, SCALE);
        loop {
            if let Ok(d) = Decimal::try_from_i128_with_scale(v, scale) {
                return d;
            }
            if scale == 0 {
                return if v < 0 { Decimal::MIN } else { Decimal::MAX };
            }
            v = div_round_pow10(v, 1);
            scale -= 1;
        }
    }

    pub fn checked_add(self, o: Self) -> Option<Self> {
        self.0.checked_add(o.0).map(Self)
    }

    pub fn checked_sub(self, o: Self) -> Option<Self> {
        self.0.checked_sub(o.0).map(Self)
    }

    /// The mantissa of this value rounded to `dp <= 18` places (half away from zero);
    /// more places than the value has saturate.
    pub fn round_to(self, dp: u32) -> i128 {
        if dp >= SCALE {
            self.0 * pow10(dp - SCALE)
        } else {
            div_round(self.0, pow10(SCALE - dp))
        }
    }

    pub fn is_zero(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    #[test]
    fn decimals_round_trip_exactly() {
        for d in [
            dec!(0),
            dec!(150.25),
            dec!(-0.000000000000000001),
            dec!(123456789.123456789),
            dec!(1e10),
        ] {
            assert_eq!(Fixed::from_decimal(d).unwrap().to_decimal(), d);
        }
        // More than 18 places: rounded half away from zero at the 18th.
        let third = Fixed::from_decimal(dec!(1) / dec!(3)).unwrap();
        assert_eq!(third.0, 333_333_333_333_333_333);
        assert!(Fixed::from_decimal(Decimal::MAX).is_none());
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(Fixed::from_decimal(dec!(1.005)).unwrap().round_to(2), 101);
        assert_eq!(Fixed::from_decimal(dec!(-1.005)).unwrap().round_to(2), -101);
        assert_eq!(
            Fixed::from_decimal(dec!(1.00499999)).unwrap().round_to(2),
            100
        );
        assert_eq!(div_round(7, 2), 4);
        assert_eq!(div_round(-7, 2), -4);
        assert_eq!(div_round(5, 3), 2);
        assert_eq!(div_round(i128::MAX, 1), i128::MAX);
        assert_eq!(div_round(7, -2), -4);
        assert_eq!(mul_div(1, 1, -1), Some(-1));
        assert_eq!(mul_div_pow10(1, 1, 77), None);
        assert_eq!(div_round(-(10i128.pow(30)) - 5, 10), -(10i128.pow(29)) - 1);
        for n in [
            0i128,
            4,
            5,
            6,
            -5,
            -6,
            149,
            150,
            10i128.pow(37) + 5 * 10i128.pow(17),
            -(10i128.pow(37)),
        ] {
            for k in [1u32, 2, 16, 18, 27, 30] {
                assert_eq!(
                    div_round_pow10(n, k),
                    div_round(n, pow10(k)),
                    "{n} / 10^{k}"
                );
            }
        }
    }

    #[test]
    fn products_round_once_at_any_scale() {
        // 1998 (18 places) x 1/4.4 (28 places) -> cents: 454.090909... -> 454.09
        let net = 1998 * pow10(18);
        let rate = (rust_decimal::Decimal::ONE / dec!(4.4)).mantissa();
        assert_eq!(mul_div_pow10(net, rate, 18 + 28 - 2), Some(45409));
        assert_eq!(mul_div_pow10(-net, rate, 44), Some(-45409));
        assert_eq!(mul_div_pow10(5, 1, 1), Some(1));
        assert_eq!(mul_div_pow10(15 * pow10(37), 10, 39), Some(2));
        assert_eq!(mul_div_pow10(149_999 * pow10(33), 10, 39), Some(1));
    }

    #[test]
    fn three_factor_products_are_exact_whatever_the_digits() {
        // 1e12 at 18 places x 1e6 at 18 places x 100: the mantissas' product (1e72) is far
        // past 128 bits, the value (1e20) is not.
        let q = 10i128.pow(30);
        let m = 10i128.pow(24);
        assert_eq!(
            product3(100, q, m, 36),
            Some(Fixed(10i128.pow(20) * pow10(SCALE)))
        );
        assert_eq!(
            product3(-1, q, m, 36),
            Some(Fixed(-(10i128.pow(18)) * pow10(SCALE)))
        );
        // Rounded once at the 18th place, half away from zero.
        assert_eq!(product3(5, 1, 1, 19), Some(Fixed(1)));
        assert_eq!(product3(-5, 1, 1, 19), Some(Fixed(-1)));
        assert_eq!(product3(15, q, m, 73), Some(Fixed(2)));
        // The same as two factors when they fit.
        for (a, b, c, s) in [
            (7i128, 11i128, 13i128, 2u32),
            (123_456, 789, 10, 20),
            (-5, 4, 3, 0),
        ] {
            assert_eq!(product3(a, b, c, s), product(a, b * c, s));
        }
        assert_eq!(product3(0, q, m, 0), Some(Fixed::ZERO));
        // Too large for Fixed: None, never a wrapped value.
        assert_eq!(product3(10i128.pow(3), q, m, 36), None);
        assert_eq!(product3(i128::MAX, i128::MAX, i128::MAX, 18), None);
        assert_eq!(product3(1, q, m, 18), None);
    }

    #[test]
    fn mul_div_survives_intermediate_overflow() {
        let big = 10i128.pow(30);
        assert_eq!(mul_div(big, big, big), Some(big));
        assert_eq!(mul_div(-big, big, 10i128.pow(25)), Some(-(10i128.pow(35))));
        assert_eq!(mul_div(7, 1, 2), Some(4));
        assert_eq!(mul_div(big, big, 1), None);
        assert_eq!(mul_div(1, 1, 0), None);
        // (2^127 - 1) * 3 / 3 needs the wide path and gives the factor back.
        assert_eq!(mul_div(i128::MAX, 3, 3), Some(i128::MAX));
    }
}
