//! What a broker answers for `get_option_chain` (docs/methodology/research.md, "Option
//! chains"): one expiry's contracts of an underlying, with the quote, the day's volume,
//! open interest, and the implied volatility and greeks where the broker computes them.
//! A figure the broker does not give is `None`; the tool fills greeks from its own
//! Black-Scholes-Merton solver only where it knows every input, and says so.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use tradedesk_core::Currency;

use crate::occ::Right;

/// The most strikes a chain keeps on each side of the underlying's price.
pub const MAX_STRIKES_AROUND: usize = 50;

/// What the tool asks a broker for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainQuery {
    /// The underlying as asked (bare or `EXCHANGE:SYMBOL`).
    pub underlying: String,
    /// One expiry; `None`: the nearest one not yet expired.
    pub expiry: Option<NaiveDate>,
    /// Strikes to keep on each side of the underlying's price; `None`: every strike. A
    /// broker may use it to ask for less; the tool applies it again.
    pub strikes_around: Option<usize>,
}

/// The greeks a broker computes itself, per share of the underlying.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BrokerGreeks {
    pub delta: f64,
    pub gamma: f64,
    /// Per calendar day.
    pub theta: f64,
    /// Per 1 volatility point (0.01).
    pub vega: f64,
    /// Per 1 rate point (0.01); `None` where the broker computes no rho (IBKR).
    pub rho: Option<f64>,
}

/// One contract of the chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainContract {
    /// The OCC symbol, compact (`AAPL240126P00050000`).
    pub symbol: String,
    pub right: Right,
    pub strike: Decimal,
    pub expiry: NaiveDate,
    /// When it stops trading (the expiry day's close in the exchange's zone).
    pub expires_at: DateTime<Utc>,
    /// Shares of the underlying one contract's price is multiplied by, where the broker
    /// says (`None`: not known; never assumed).
    pub multiplier: Option<Decimal>,
    /// Per share of the underlying.
    pub bid: Option<Decimal>,
    pub ask: Option<Decimal>,
    pub last: Option<Decimal>,
    pub last_time: Option<DateTime<Utc>>,
    /// Contracts traded in the latest session.
    pub volume: Option<Decimal>,
    pub open_interest: Option<Decimal>,
    /// The day the open interest is of.
    pub open_interest_date: Option<NaiveDate>,
    /// The broker's implied volatility, as a fraction.
    pub implied_volatility: Option<f64>,
    pub greeks: Option<BrokerGreeks>,
}

/// A broker's chain: the underlying, every expiry it lists, and the contracts of the one
/// chosen.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OptionChain {
    /// `EXCHANGE:SYMBOL` of the underlying.
    pub underlying: String,
    pub currency: Option<Currency>,
    /// The underlying's price the chain is read against, and which price it is.
    pub underlying_price: Option<Decimal>,
    pub underlying_price_source: Option<String>,
    /// Every expiry listed, soonest first.
    pub expiries: Vec<NaiveDate>,
    /// The expiry whose contracts these are.
    pub expiry: Option<NaiveDate>,
    pub contracts: Vec<ChainContract>,
    /// A risk-free rate the venue states itself (the sim's simulated one), as a fraction.
    pub rate: Option<f64>,
    /// The chain is made up (the sim), not a market's.
    pub simulated: bool,
    /// When the figures are of.
    pub as_of: Option<DateTime<Utc>>,
    /// More contracts exist than were read (a page cap was reached).
    pub truncated: bool,
    pub notes: Vec<String>,
    pub requests: usize,
}

/// The strikes within `around` strikes of `price` on each side: the `around` highest
/// strikes at or below it and the `around` lowest above it.
pub fn strikes_near(strikes: &[Decimal], price: Decimal, around: usize) -> Vec<Decimal> {
    let mut all: Vec<Decimal> = strikes.to_vec();
    all.sort();
    all.dedup();
    let split = all.partition_point(|s| *s <= price);
    let lo = split.saturating_sub(around);
    let hi = (split + around).min(all.len());
    all[lo..hi].to_vec()
}

/// The strikes a chain reads, sorted and each once: those within `around` strikes of
/// `price` on each side ([`strikes_near`]); the `2 * around` lowest when the price is not
/// known; all of them when no `around` is asked for.
pub fn strike_window(
    strikes: &[Decimal],
    price: Option<Decimal>,
    around: Option<usize>,
) -> Vec<Decimal> {
    if let (Some(p), Some(n)) = (price, around) {
        return strikes_near(strikes, p, n);
    }
    let mut all: Vec<Decimal> = strikes.to_vec();
    all.sort();
    all.dedup();
    if let Some(n) = around {
        all.truncate(n * 2);
    }
    all
}

/// Up to twelve dates, for a message naming the expiries a broker lists.
pub fn listed_dates(dates: &[NaiveDate]) -> String {
    let mut shown: Vec<String> = dates.iter().take(12).map(ToString::to_string).collect();
    if dates.len() > 12 {
        shown.push(format!("and {} more", dates.len() - 12));
    }
    if shown.is_empty() {
        "none".to_owned()
    } else {
        shown.join(", ")
    }
}

/// When a US-listed option stops trading: 16:00 New York time on its expiry day.
pub fn us_close(expiry: NaiveDate) -> Option<DateTime<Utc>> {
    let zone = crate::zones::named("America/New_York")?;
    crate::zones::resolve(expiry.and_hms_opt(16, 0, 0)?, zone)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn the_strike_window_is_sorted_once_each_near_the_price_or_the_lowest() {
        // Calls and puts list each strike twice, not in order.
        let s = [
            dec!(110),
            dec!(90),
            dec!(100),
            dec!(90),
            dec!(105),
            dec!(95),
            dec!(110),
        ];
        let all = vec![dec!(90), dec!(95), dec!(100), dec!(105), dec!(110)];
        assert_eq!(strike_window(&s, None, None), all);
        assert_eq!(strike_window(&s, Some(dec!(101)), None), all);
        assert_eq!(strike_window(&s, None, Some(1)), vec![dec!(90), dec!(95)]);
        assert_eq!(
            strike_window(&s, Some(dec!(101)), Some(1)),
            vec![dec!(100), dec!(105)]
        );
    }

    #[test]
    fn strikes_near_keeps_n_on_each_side() {
        let s = [
            dec!(90),
            dec!(95),
            dec!(100),
            dec!(105),
            dec!(110),
            dec!(100),
        ];
        assert_eq!(strikes_near(&s, dec!(101), 1), vec![dec!(100), dec!(105)]);
        assert_eq!(
            strikes_near(&s, dec!(100), 2),
            vec![dec!(95), dec!(100), dec!(105), dec!(110)]
        );
        assert_eq!(strikes_near(&s, dec!(50), 2), vec![dec!(90), dec!(95)]);
        assert_eq!(strikes_near(&s, dec!(500), 1), vec![dec!(110)]);
    }
}
