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
use exchange_hours::{Exchange, ExchangeCalendar, SessionKind};
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

/// The weekly expiries listed at `now`, soonest first, each with its close, and a note
/// when one falls past the calendar's holiday table. A week's expiry is its Friday, or,
/// when NYSE is closed that Friday, the trading day before it (OCC's rule for a holiday
/// Friday, docs/methodology/research.md, "Option chains"); it closes with NYSE's regular
/// session that day (16:00 New York time, earlier on a half day). The trading days are
/// the `exchange-hours` calendar's NYSE, the one `get_market_hours` reads.
fn expiries(now: DateTime<Utc>) -> (Vec<(NaiveDate, DateTime<Utc>)>, Option<String>) {
    let cal = ExchangeCalendar::new(Exchange::Nyse);
    let mut out = Vec::with_capacity(EXPIRIES);
    let mut unknown = None;
    let today = now.date_naive();
    let first = today
        + Duration::days(i64::from(
            (7 + Weekday::Fri.num_days_from_monday() - today.weekday().num_days_from_monday()) % 7,
        ));
    // A few weeks more than listed, for weeks with no trading day or one already closed.
    for week in 0..EXPIRIES * 2 {
        if out.len() == EXPIRIES {
            break;
        }
        let friday = first + Duration::weeks(i64::try_from(week).unwrap_or(0));
        let known = cal.holiday_coverage().is_some_and(|c| c.contains(friday));
        let expiry = if known {
            week_expiry(cal, friday)
        } else {
            unknown.get_or_insert(friday);
            us_close(friday).map(|close| (friday, close))
        };
        if let Some(e) = expiry.filter(|(_, close)| *close > now) {
            out.push(e);
        }
    }
    let note = unknown.map(|d| {
        format!(
            "NYSE's holidays are not known for the week of {d} (the exchange calendar's holiday table does not cover it): an expiry in a week the table does not cover is shown on its Friday, which may be a holiday"
        )
    });
    (out, note)
}

/// The expiry of the week ending `friday`: the last NYSE trading day from the Monday to
/// the Friday, with that day's regular close; `None` for a week with no trading day.
fn week_expiry(cal: ExchangeCalendar, friday: NaiveDate) -> Option<(NaiveDate, DateTime<Utc>)> {
    (0..5).find_map(|back| {
        let day = friday - Duration::days(back);
        nyse_close(cal, day).map(|close| (day, close))
    })
}

/// NYSE's regular close on `day`, or `None` when it has no session that day.
fn nyse_close(cal: ExchangeCalendar, day: NaiveDate) -> Option<DateTime<Utc>> {
    let zone = crate::zones::named("America/New_York")?;
    let midnight = crate::zones::resolve(day.and_hms_opt(0, 0, 0)?, zone)?;
    let (open, close) = cal
        .next_session_after_with(midnight - Duration::seconds(1), SessionKind::Regular)
        .ok()??;
    (crate::zones::resolve(day.and_hms_opt(23, 59, 59)?, zone)? > open).then_some(close)
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
        let (listed, calendar_note) = expiries(now);
        let (expiry, close) = match query.expiry {
            None => *listed.first().ok_or_else(|| BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: format!("the sim lists no expiry after {now}"),
            })?,
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
            notes: std::iter::once(format!(
                "{account}: a simulated chain, not a market's: standard 100-share contracts on the next {EXPIRIES} weekly expiries (Fridays, or the trading day before when NYSE is closed that Friday), priced by Black-Scholes-Merton at the sim's rate {SIM_RATE} from a volatility smile; the sim sends prices without implied volatility or greeks"
            ))
            .chain(calendar_note.map(|n| format!("{account}: {n}")))
            .collect(),
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
        let (e, note) = expiries(now);
        assert_eq!(e[0].0.to_string(), "2026-12-04");
        assert_eq!(e[0].1, Utc.with_ymd_and_hms(2026, 12, 4, 21, 0, 0).unwrap());
        assert_eq!(note, None);
        let later = Utc.with_ymd_and_hms(2026, 12, 4, 21, 0, 0).unwrap();
        assert_eq!(expiries(later).0[0].0.to_string(), "2026-12-11");
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

    #[test]
    fn a_holiday_friday_expires_on_the_trading_day_before() {
        let utc = |y, m, d, h, min| Utc.with_ymd_and_hms(y, m, d, h, min, 0).unwrap();
        let listed = |now| {
            expiries(now)
                .0
                .into_iter()
                .map(|(d, close)| (d.to_string(), close))
                .collect::<Vec<_>>()
        };
        // Good Friday 2027-03-26: NYSE is closed, so that week expires on Thursday, at
        // 16:00 New York time (EDT).
        let e = listed(utc(2027, 3, 22, 14, 0));
        assert_eq!(e[0], ("2027-03-25".to_owned(), utc(2027, 3, 25, 20, 0)));
        assert_eq!(e[1].0, "2027-04-02");
        // Christmas 2026 and New Year's Day 2027 are Fridays: Christmas Eve expires at
        // its half day's 13:00 close, New Year's Eve at 16:00 (EST).
        let e = listed(utc(2026, 12, 2, 15, 0));
        let days: Vec<&str> = e.iter().map(|(d, _)| d.as_str()).collect();
        assert_eq!(
            days,
            [
                "2026-12-04",
                "2026-12-11",
                "2026-12-18",
                "2026-12-24",
                "2026-12-31",
                "2027-01-08",
                "2027-01-15",
                "2027-01-22"
            ]
        );
        assert_eq!(e[3].1, utc(2026, 12, 24, 18, 0));
        assert_eq!(e[4].1, utc(2026, 12, 31, 21, 0));
        // After the Thursday's close that week is gone: the next Friday leads.
        assert_eq!(listed(utc(2027, 3, 25, 20, 0))[0].0, "2027-04-02");
    }

    #[test]
    fn past_the_holiday_table_fridays_stand_with_a_note() {
        let far = Utc.with_ymd_and_hms(2040, 3, 26, 14, 0, 0).unwrap();
        let (e, note) = expiries(far);
        assert_eq!(e.len(), EXPIRIES);
        assert!(e.iter().all(|(d, _)| d.weekday() == Weekday::Fri));
        assert!(note.unwrap().contains("not known"));
    }
}
