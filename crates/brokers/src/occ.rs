//! OCC option symbols (the Options Clearing Corporation's 21-character symbology), as
//! Alpaca writes them compact (`AAPL240126P00050000`) and IBKR pads them
//! (`AAPL  240126P00050000`): the root (up to six characters, the underlying's symbol,
//! with a digit suffix on an adjusted contract), the expiry as YYMMDD, `C` or `P`, and
//! the strike times 1000 in eight digits.

use chrono::NaiveDate;
use rust_decimal::Decimal;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    Call,
    Put,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OccSymbol {
    /// The root as written: the underlying's symbol for a standard contract.
    pub root: String,
    pub expiry: NaiveDate,
    pub right: Right,
    pub strike: Decimal,
}

impl OccSymbol {
    /// An adjusted (non-standard) contract: its root carries a digit suffix (`AAPL1`),
    /// and its deliverable is not 100 shares of the root.
    pub fn is_adjusted(&self) -> bool {
        self.root.ends_with(|c: char| c.is_ascii_digit())
    }
}

/// The parts of an OCC symbol, or `None` when `symbol` is not one.
pub fn parse(symbol: &str) -> Option<OccSymbol> {
    let symbol = symbol.trim();
    let n = symbol.len();
    if !symbol.is_ascii() || !(16..=21).contains(&n) {
        return None;
    }
    let (head, strike) = symbol.split_at(n - 8);
    let (head, right) = head.split_at(head.len() - 1);
    let (root, date) = head.split_at(head.len() - 6);
    let root = root.trim_end();
    if root.is_empty()
        || root.len() > 6
        || !root.starts_with(|c: char| c.is_ascii_uppercase())
        || !root
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '.')
        || !strike.bytes().all(|b| b.is_ascii_digit())
        || !date.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let right = match right {
        "C" => Right::Call,
        "P" => Right::Put,
        _ => return None,
    };
    let expiry = NaiveDate::parse_from_str(&format!("20{date}"), "%Y%m%d").ok()?;
    let strike = Decimal::new(strike.parse::<i64>().ok()?, 3).normalize();
    Some(OccSymbol {
        root: root.to_owned(),
        expiry,
        right,
        strike,
    })
}

/// The compact OCC symbol of a contract (as Alpaca writes it).
pub fn compact(root: &str, expiry: NaiveDate, right: Right, strike: Decimal) -> String {
    let thousandths =
        rust_decimal::prelude::ToPrimitive::to_i64(&(strike * Decimal::ONE_THOUSAND).round())
            .unwrap_or(0);
    format!(
        "{root}{}{}{thousandths:08}",
        expiry.format("%y%m%d"),
        match right {
            Right::Call => 'C',
            Right::Put => 'P',
        }
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rust_decimal_macros::dec;

    use super::*;

    #[test]
    fn compact_and_padded_symbols_parse() {
        let p = parse("AAPL240126P00050000").unwrap();
        assert_eq!(p.root, "AAPL");
        assert_eq!(p.expiry, NaiveDate::from_ymd_opt(2024, 1, 26).unwrap());
        assert_eq!(p.right, Right::Put);
        assert_eq!(p.strike, dec!(50));
        assert!(!p.is_adjusted());
        let c = parse("AAPL  251219C00200000 ").unwrap();
        assert_eq!(
            (c.root.as_str(), c.right, c.strike),
            ("AAPL", Right::Call, dec!(200))
        );
        let x = parse("SPXW251219C06850500").unwrap();
        assert_eq!((x.root.as_str(), x.strike), ("SPXW", dec!(6850.5)));
        assert!(parse("AAPL1240126C00150000").unwrap().is_adjusted());
    }

    #[test]
    fn stock_fx_and_malformed_symbols_do_not() {
        for s in [
            "AAPL",
            "BRK.B",
            "BTC/USD",
            "AAPL240126X00050000",
            "AAPL241326P00050000",
            "AAPL240126P0005000A",
            "TOOLONGROOT240126P00050000",
            "240126P00050000",
        ] {
            assert_eq!(parse(s), None, "{s}");
        }
    }
}
