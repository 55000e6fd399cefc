//! `get_option_chain` on the sim: a made-up chain on each of its US stocks and ETFs, so the
//! demo answers as a broker would (docs/methodology/research.md, "Option chains"). The
//! underlying is the sim's own quote; contracts are standard (100 shares), expire on the
//! next eight Fridays at 16:00 New York time, and are priced by Black-Scholes-Merton at the
//! sim's stated rate from a volatility smile around the instrument's own volatility. Like
//! a broker that sends prices without greeks, the sim gives no implied volatility or
//! greeks: the tool solves them from the prices. Everything is a function of the
//! instrument, the seed and the sim's clock, so the same moment answers the same chain.

// Analytics: the model prices are floating point, turned into cents at the boundary.
#![allow(
    clippy::float_arithmetic,
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation
)]

use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc, Weekday};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use tradedesk_core::AssetClass;
use tradedesk_research::options::{Contract, Kind, price};

use super::SimBroker;
use super::market::SimInstrument;
use crate::BrokerError;
use crate::occ::Right;
use crate::option_chain::{ChainContract, ChainQuery, OptionChain, us_close};

/// The risk-free rate the sim prices its options at (continuously compounded).
pub(super) const SIM_RATE: f64 = 0.04;
/// Weekly expiries listed.
const EXPIRIES: usize = 8;
/// Strikes listed on each side of the money.
const STRIKES_EACH_SIDE: i64 = 40;

/// The strike grid's step for an underlying at `spot`.
fn step_of(spot: f64) -> Decimal {
    if spot < 25.0 {
        Decimal::new(5, 1)
    } else if spot < 100.0 {
        Decimal::ONE
    } else if spot < 250.0 {
        Decimal::new(25, 1)
    } else if spot < 1000.0 {
        Decimal::new(5, 0)
    } else {
        Decimal::new(10, 0)
    }
}

/// A stable number in [0, 1) from the parts.
fn unit(parts: &[u64]) -> f64 {
    let h = parts.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, p| {
        (h ^ p).wrapping_mul(0x0100_0000_01b3).rotate_left(29)
    });
    (h >> 11) as f64 / (1_u64 << 53) as f64
}

fn salt(text: &str) -> u64 {
    text.bytes().fold(0x811c_9dc5_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The expiries listed at `now`: the next Fridays whose 16:00 New York close is ahead.
fn expiries(now: DateTime<Utc>) -> Vec<(NaiveDate, DateTime<Utc>)> {
    let mut out = Vec::with_capacity(EXPIRIES);
    let mut day = now.date_naive() - Duration::days(1);
    while out.len() < EXPIRIES {
        day += Duration::days(1);
        if day.weekday() != Weekday::Fri {
            continue;
        }
        if let Some(close) = us_close(day).filter(|c| *c > now) {
            out.push((day, close));
        }
    }
    out
}

/// Cents, rounded down (`up`: up); `None` at zero.
fn cents(x: f64, up: bool) -> Option<Decimal> {
    let c = if up {
        (x * 100.0).ceil()
    } else {
        (x * 100.0).floor()
    };
    Decimal::from_f64_retain(c)
        .map(|c| c / Decimal::ONE_HUNDRED)
        .filter(|d| d.is_sign_positive() && !d.is_zero())
}

impl SimBroker {
    pub(super) fn read_option_chain(
        &self,
        account: &str,
        query: &ChainQuery,
    ) -> Result<OptionChain, BrokerError> {
        self.check_account(account)?;
        let inst = self.find(&query.underlying)?;
        if !matches!(inst.spec.asset_class, AssetClass::Equity | AssetClass::Etf)
            || inst.spec.key.exchange == "BURSA"
        {
            let listed: Vec<&str> = self
                .universe
                .iter()
                .filter(|i| optionable(i))
                .map(|i| i.spec.key.symbol.as_str())
                .collect();
            return Err(BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: format!(
                    "the sim lists options on its US stocks and ETFs only, not {}; ask for one of {}",
                    inst.spec.key.qualified(),
                    listed.join(", ")
                ),
            });
        }
        let now = self.clock.now();
        let (bid, ask) = inst.bid_ask(self.config.seed, now);
        let spot_dec = (bid + ask) / Decimal::TWO;
        let spot = spot_dec.to_f64().unwrap_or(0.0);
        let listed = expiries(now);
        let (expiry, close) = match query.expiry {
            None => listed[0],
            Some(want) => *listed.iter().find(|(d, _)| *d == want).ok_or_else(|| {
                BrokerError::InvalidRequest {
                    account: account.to_owned(),
                    reason: format!(
                        "the sim lists no {} expiry {want}; it lists {}",
                        inst.spec.key.symbol,
                        listed
                            .iter()
                            .map(|(d, _)| d.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            })?,
        };
        let step = step_of(spot);
        let atm = (spot_dec / step).round() * step;
        // Every strike listed: the tool keeps those near the money.
        let strikes: Vec<Decimal> = (-STRIKES_EACH_SIDE..=STRIKES_EACH_SIDE)
            .map(|i| atm + step * Decimal::from(i))
            .filter(|k| k.is_sign_positive() && !k.is_zero())
            .collect();
        let years = (close - now).num_seconds() as f64 / (365.0 * 86_400.0);
        // The instrument's daily scale, annualized, bounded to a plausible range.
        let base = (inst.volatility * 252_f64.sqrt()).clamp(0.12, 1.2);
        let root = inst.spec.key.symbol.clone();
        let mut contracts = Vec::with_capacity(strikes.len() * 2);
        for strike in &strikes {
            for right in [Right::Call, Right::Put] {
                let k = strike.to_f64().unwrap_or(0.0);
                let m = (k / spot).ln();
                let vol = (base + 0.4 * m * m - 0.1 * m).clamp(0.05, 3.0);
                let kind = match right {
                    Right::Call => Kind::Call,
                    Right::Put => Kind::Put,
                };
                let model = price(
                    kind,
                    &Contract {
                        spot,
                        strike: k,
                        volatility: vol,
                        rate: SIM_RATE,
                        dividend_yield: 0.0,
                        time_years: years,
                    },
                );
                let half = (model * 0.02).max(0.01);
                let symbol = crate::occ::compact(&root, expiry, right, *strike);
                let s = salt(&symbol);
                let day = u64::try_from(now.date_naive().num_days_from_ce()).unwrap_or(0);
                let liquidity = (-8.0 * m.abs()).exp();
                let volume =
                    (3000.0 * liquidity * (0.2 + 0.8 * unit(&[self.config.seed, s, day]))).floor();
                let oi =
                    (20_000.0 * liquidity * (0.3 + 0.7 * unit(&[self.config.seed, s]))).floor();
                let traded = volume >= 1.0;
                contracts.push(ChainContract {
                    symbol,
                    right,
                    strike: *strike,
                    expiry,
                    expires_at: close,
                    multiplier: Some(Decimal::ONE_HUNDRED),
                    bid: cents(model - half, false),
                    ask: cents(model + half, true).or(Some(Decimal::new(1, 2))),
                    last: if traded {
                        cents(model, false).or(Some(Decimal::new(1, 2)))
                    } else {
                        None
                    },
                    last_time: traded.then(|| {
                        now - Duration::seconds(
                            (unit(&[self.config.seed, s, day, 7]) * 600.0) as i64,
                        )
                    }),
                    volume: Decimal::from_f64_retain(volume),
                    open_interest: Decimal::from_f64_retain(oi),
                    open_interest_date: Some(now.date_naive() - Duration::days(1)),
                    implied_volatility: None,
                    greeks: None,
                });
            }
        }
        Ok(OptionChain {
            underlying: inst.spec.key.qualified(),
            currency: Some(inst.spec.currency),
            underlying_price: Some(spot_dec),
            underlying_price_source: Some("the mid of the sim's quote".to_owned()),
            expiries: listed.iter().map(|(d, _)| *d).collect(),
            expiry: Some(expiry),
            contracts,
            rate: Some(SIM_RATE),
            simulated: true,
            as_of: Some(now),
            truncated: false,
            notes: vec![format!(
                "{account}: a simulated chain, not a market's: standard 100-share contracts on the next {EXPIRIES} Fridays, priced by Black-Scholes-Merton at the sim's rate {SIM_RATE} from a volatility smile; the sim sends prices without implied volatility or greeks"
            )],
            requests: 1,
        })
    }
}

fn optionable(i: &SimInstrument) -> bool {
    matches!(i.spec.asset_class, AssetClass::Equity | AssetClass::Etf)
        && i.spec.key.exchange != "BURSA"
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use chrono::TimeZone;
    use rust_decimal_macros::dec;

    #[test]
    fn fridays_ahead_and_occ_symbols() {
        // Friday 2026-12-04 20:00 UTC is 15:00 in New York: that day still lists.
        let now = Utc.with_ymd_and_hms(2026, 12, 4, 20, 0, 0).unwrap();
        let e = expiries(now);
        assert_eq!(e[0].0.to_string(), "2026-12-04");
        assert_eq!(e[0].1, Utc.with_ymd_and_hms(2026, 12, 4, 21, 0, 0).unwrap());
        let later = Utc.with_ymd_and_hms(2026, 12, 4, 21, 0, 0).unwrap();
        assert_eq!(expiries(later)[0].0.to_string(), "2026-12-11");
        let d = NaiveDate::from_ymd_opt(2024, 1, 26).unwrap();
        let s = crate::occ::compact("AAPL", d, Right::Put, dec!(50));
        assert_eq!(s, "AAPL240126P00050000");
        let p = crate::occ::parse(&s).unwrap();
        assert_eq!((p.strike, p.expiry), (dec!(50), d));
        assert_eq!(
            crate::occ::compact("SPY", d, Right::Call, dec!(602.5)),
            "SPY240126C00602500"
        );
    }
}
