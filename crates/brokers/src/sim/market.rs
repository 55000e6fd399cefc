//! The sim's instruments and its price process.
//!
//! Prices are a deterministic function of (seed, instrument, time): a sum of smooth
//! value-noise octaves (a month down to a minute) in log space, shifted so the process
//! passes exactly through the instrument's anchor (the demo's latest mark) at the anchor
//! time. The same seed and clock always give the same quotes, bars and fills; the path
//! is bounded (it wanders around the anchor rather than drifting away) and continuous,
//! so stops and limits trigger the way they would on a real tape. The process is
//! analytics (`f64`); every price leaves it quantized to the instrument's tick as a
//! `Decimal`.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use tradedesk_core::{AssetClass, Book, Currency, Instrument, InstrumentKey, TradableInstrument};

/// How a market charges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fees {
    /// US equities: 0.005 per share, at least 1.00, at most 1% of the trade value.
    UsPerShare,
    /// Bursa Malaysia: brokerage 0.08% (at least RM 8), clearing fee 0.03% (at most
    /// RM 1,000), stamp duty RM 1 per RM 1,000 or part of it (at most RM 1,000).
    Bursa,
    /// FX and metals: the spread is the whole cost.
    SpreadOnly,
    /// Perps: a taker fee of 0.045% of notional.
    PerpTaker,
}

/// One instrument the sim trades.
#[derive(Debug, Clone)]
pub struct SimInstrument {
    pub spec: TradableInstrument,
    pub instrument: Instrument,
    pub anchor: Decimal,
    pub spread: Decimal,
    pub fees: Fees,
    /// Scale of the log-price noise (roughly a daily move).
    pub volatility: f64,
    /// Stable per-instrument salt for the noise.
    salt: u64,
}

/// When every anchor holds: the demo's last marks.
pub fn anchor_time() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 0, 0, 0)
        .single()
        .unwrap_or_default()
}

fn dec(text: &str) -> Decimal {
    text.parse().unwrap_or_default()
}

fn salt_of(key: &InstrumentKey) -> u64 {
    key.qualified()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        })
}

struct Static {
    exchange: &'static str,
    symbol: &'static str,
    name: &'static str,
    currency: &'static str,
    class: AssetClass,
    anchor: &'static str,
    multiplier: &'static str,
    lot: &'static str,
    max: &'static str,
    tick: &'static str,
    pip: Option<&'static str>,
    spread: &'static str,
    margin: &'static str,
    volatility: f64,
    fees: Fees,
    unit: &'static str,
}

/// FX pairs and gold as a MetaTrader user sees them, and a crypto perp. Anchors are
/// invented, like the demo's marks.
const STATIC: &[Static] = &[
    Static {
        exchange: "FX",
        symbol: "EURUSD",
        name: "Euro vs US Dollar",
        currency: "USD",
        class: AssetClass::Fx,
        anchor: "1.16500",
        multiplier: "100000",
        lot: "0.01",
        max: "50",
        tick: "0.00001",
        pip: Some("0.0001"),
        spread: "0.00008",
        margin: "0.0333333333",
        volatility: 0.004,
        fees: Fees::SpreadOnly,
        unit: "lots",
    },
    Static {
        exchange: "FX",
        symbol: "GBPUSD",
        name: "British Pound vs US Dollar",
        currency: "USD",
        class: AssetClass::Fx,
        anchor: "1.31500",
        multiplier: "100000",
        lot: "0.01",
        max: "50",
        tick: "0.00001",
        pip: Some("0.0001"),
        spread: "0.00012",
        margin: "0.0333333333",
        volatility: 0.005,
        fees: Fees::SpreadOnly,
        unit: "lots",
    },
    Static {
        exchange: "FX",
        symbol: "USDJPY",
        name: "US Dollar vs Japanese Yen",
        currency: "JPY",
        class: AssetClass::Fx,
        anchor: "154.200",
        multiplier: "100000",
        lot: "0.01",
        max: "50",
        tick: "0.001",
        pip: Some("0.01"),
        spread: "0.012",
        margin: "0.0333333333",
        volatility: 0.005,
        fees: Fees::SpreadOnly,
        unit: "lots",
    },
    Static {
        exchange: "FX",
        symbol: "USDMYR",
        name: "US Dollar vs Malaysian Ringgit",
        currency: "MYR",
        class: AssetClass::Fx,
        anchor: "4.76000",
        multiplier: "100000",
        lot: "0.01",
        max: "50",
        tick: "0.00001",
        pip: Some("0.0001"),
        spread: "0.00150",
        margin: "0.05",
        volatility: 0.003,
        fees: Fees::SpreadOnly,
        unit: "lots",
    },
    Static {
        exchange: "FX",
        symbol: "XAUUSD",
        name: "Gold vs US Dollar",
        currency: "USD",
        class: AssetClass::Cfd,
        anchor: "4050.00",
        multiplier: "100",
        lot: "0.01",
        max: "50",
        tick: "0.01",
        pip: Some("0.1"),
        spread: "0.30",
        margin: "0.05",
        volatility: 0.01,
        fees: Fees::SpreadOnly,
        unit: "lots",
    },
    Static {
        exchange: "PERP",
        symbol: "BTC-PERP",
        name: "Bitcoin perpetual (USD-margined)",
        currency: "USD",
        class: AssetClass::Perp,
        anchor: "92000.0",
        multiplier: "1",
        lot: "0.001",
        max: "100",
        tick: "0.1",
        pip: None,
        spread: "1.0",
        margin: "0.05",
        volatility: 0.03,
        fees: Fees::PerpTaker,
        unit: "contracts",
    },
];

/// Bursa's tick size for a price (Bursa's trading rules).
pub fn bursa_tick(price: Decimal) -> Decimal {
    if price < Decimal::ONE {
        dec("0.005")
    } else if price < Decimal::TEN {
        dec("0.01")
    } else if price < Decimal::ONE_HUNDRED {
        dec("0.02")
    } else {
        dec("0.10")
    }
}

/// The sim's universe: the demo's US and Bursa stocks and ETFs (anchored at their latest
/// marks) and the static FX, metal and perp instruments.
pub fn universe(demo: &Book) -> Vec<SimInstrument> {
    let mut out = Vec::new();
    for (idx, inst) in demo.instruments.iter().enumerate() {
        if !matches!(inst.asset_class, AssetClass::Equity | AssetClass::Etf) {
            continue;
        }
        let Some(&(_, anchor)) = demo
            .marks
            .series(u32::try_from(idx).unwrap_or(u32::MAX))
            .last()
        else {
            continue;
        };
        let bursa = inst.key.exchange == "BURSA";
        let tick = if bursa {
            bursa_tick(anchor)
        } else {
            dec("0.01")
        };
        let spec = TradableInstrument {
            key: inst.key.clone(),
            currency: inst.currency,
            asset_class: inst.asset_class,
            multiplier: Decimal::ONE,
            lot_step: if bursa {
                Decimal::ONE_HUNDRED
            } else {
                Decimal::ONE
            },
            min_quantity: if bursa {
                Decimal::ONE_HUNDRED
            } else {
                Decimal::ONE
            },
            max_quantity: dec("1000000"),
            tick,
            pip: None,
            margin_rate: Decimal::ONE,
            unit: "shares",
        };
        let spread = if bursa {
            tick
        } else {
            (anchor * dec("0.0002") / tick).ceil().max(Decimal::ONE) * tick
        };
        out.push(SimInstrument {
            salt: salt_of(&inst.key),
            spec,
            instrument: inst.clone(),
            anchor,
            spread,
            fees: if bursa { Fees::Bursa } else { Fees::UsPerShare },
            volatility: if inst.asset_class == AssetClass::Etf {
                0.015
            } else {
                0.02
            },
        });
    }
    for s in STATIC {
        let key = InstrumentKey::new(s.exchange, s.symbol);
        let currency = Currency::new(s.currency);
        let instrument = Instrument {
            key: key.clone(),
            currency,
            asset_class: s.class,
            multiplier: dec(s.multiplier),
            name: Some(s.name.to_owned()),
            sector: None,
            country: None,
        };
        out.push(SimInstrument {
            salt: salt_of(&key),
            spec: TradableInstrument {
                key,
                currency,
                asset_class: s.class,
                multiplier: dec(s.multiplier),
                lot_step: dec(s.lot),
                min_quantity: dec(s.lot),
                max_quantity: dec(s.max),
                tick: dec(s.tick),
                pip: s.pip.map(dec),
                margin_rate: dec(s.margin),
                unit: s.unit,
            },
            instrument,
            anchor: dec(s.anchor),
            spread: dec(s.spread),
            fees: s.fees,
            volatility: s.volatility,
        });
    }
    out
}

/// Octaves of the noise: period in seconds and relative amplitude.
const OCTAVES: [(f64, f64); 8] = [
    (2_592_000.0, 1.6),
    (604_800.0, 1.0),
    (86_400.0, 0.6),
    (14_400.0, 0.3),
    (3_600.0, 0.15),
    (900.0, 0.08),
    (180.0, 0.04),
    (60.0, 0.02),
];

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// A value in [-1, 1) for a lattice point.
#[allow(clippy::float_arithmetic, clippy::cast_precision_loss)]
fn lattice(seed: u64, salt: u64, octave: u64, n: i64) -> f64 {
    let h = splitmix(seed ^ splitmix(salt ^ splitmix(octave ^ n.cast_unsigned())));
    ((h >> 11) as f64) / ((1_u64 << 53) as f64) * 2.0 - 1.0
}

#[allow(
    clippy::float_arithmetic,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss
)]
fn log_offset(seed: u64, salt: u64, seconds: f64) -> f64 {
    let mut sum = 0.0;
    for (octave, (period, amplitude)) in OCTAVES.iter().enumerate() {
        let x = seconds / period;
        let n = x.floor();
        let f = x - n;
        let n = n as i64;
        let octave = octave as u64;
        let a = lattice(seed, salt, octave, n);
        let b = lattice(seed, salt, octave, n + 1);
        let t = f * f * (3.0 - 2.0 * f);
        sum += amplitude * (a + (b - a) * t);
    }
    sum
}

/// Rounds to a multiple of `tick` (half away from zero), never below one tick.
pub fn to_tick(price: Decimal, tick: Decimal) -> Decimal {
    let ticks = (price / tick)
        .round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    (ticks * tick).max(tick)
}

impl SimInstrument {
    /// The mid price at `t` (unquantized, `f64`).
    #[allow(clippy::float_arithmetic, clippy::cast_precision_loss)]
    pub fn mid_f64(&self, seed: u64, t: DateTime<Utc>) -> f64 {
        let anchor = self.anchor.to_f64().unwrap_or(1.0);
        let secs = |t: DateTime<Utc>| t.timestamp_millis() as f64 / 1000.0;
        let offset =
            log_offset(seed, self.salt, secs(t)) - log_offset(seed, self.salt, secs(anchor_time()));
        anchor * (self.volatility * offset).exp()
    }

    /// The tick for a price (Bursa's depends on the price).
    pub fn tick_at(&self, price: Decimal) -> Decimal {
        if self.spec.key.exchange == "BURSA" {
            bursa_tick(price)
        } else {
            self.spec.tick
        }
    }

    /// Bid and ask at `t`: the mid on the tick grid, the spread around it.
    pub fn bid_ask(&self, seed: u64, t: DateTime<Utc>) -> (Decimal, Decimal) {
        let mid = Decimal::from_f64_retain(self.mid_f64(seed, t)).unwrap_or(self.anchor);
        let tick = self.tick_at(mid);
        let spread = if self.spec.key.exchange == "BURSA" {
            tick
        } else {
            self.spread
        };
        let bid = to_tick(mid - spread / Decimal::TWO, tick);
        (bid, bid + spread)
    }

    /// The commission of a fill, in the instrument's currency.
    pub fn commission(&self, quantity: Decimal, price: Decimal) -> Decimal {
        let value = quantity * price * self.spec.multiplier;
        let cents = |d: Decimal| {
            d.round_dp_with_strategy(2, rust_decimal::RoundingStrategy::MidpointAwayFromZero)
        };
        match self.fees {
            Fees::UsPerShare => cents(
                (quantity * dec("0.005"))
                    .max(Decimal::ONE)
                    .min(value * dec("0.01")),
            ),
            Fees::Bursa => {
                let brokerage = (value * dec("0.0008")).max(dec("8"));
                let clearing = (value * dec("0.0003")).min(dec("1000"));
                let stamp = (value / dec("1000")).ceil().min(dec("1000"));
                cents(brokerage) + cents(clearing) + stamp
            }
            Fees::SpreadOnly => Decimal::ZERO,
            Fees::PerpTaker => cents(value * dec("0.00045")),
        }
    }
}

/// How often the sim's tape prints a trade.
pub const TAPE_EVERY_SECONDS: i64 = 5;

/// One print of the sim's tape: its time, whether the taker bought, its size in lots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Print {
    pub time: DateTime<Utc>,
    pub buy: bool,
    pub lots: u64,
}

impl SimInstrument {
    /// The sim's tape before `now`, newest first: one print every
    /// [`TAPE_EVERY_SECONDS`], its side and size (1 to 20 lot steps) a deterministic
    /// function of (seed, instrument, time), like the prices. The price is the ask at that
    /// instant for a buy and the bid for a sell.
    pub fn tape(&self, seed: u64, now: DateTime<Utc>, count: usize) -> Vec<Print> {
        let last = now.timestamp().div_euclid(TAPE_EVERY_SECONDS) * TAPE_EVERY_SECONDS;
        (0..count)
            .filter_map(|i| {
                let back = i64::try_from(i).ok()?.checked_mul(TAPE_EVERY_SECONDS)?;
                let t = last.checked_sub(back)?;
                let h = splitmix(seed ^ splitmix(self.salt ^ splitmix(t.cast_unsigned() ^ 0x7a9e)));
                Some(Print {
                    time: Utc.timestamp_opt(t, 0).single()?,
                    buy: h & 1 == 1,
                    lots: 1 + (h >> 8) % 20,
                })
            })
            .collect()
    }
}

/// The start of the UTC day after `t`: when a `day` order lapses.
pub fn day_end(t: DateTime<Utc>) -> DateTime<Utc> {
    let next: NaiveDate = t.date_naive().succ_opt().unwrap_or(t.date_naive());
    Utc.from_utc_datetime(&next.and_hms_opt(0, 0, 0).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_arithmetic)]
    use super::*;
    use crate::demo::demo_book;
    use rust_decimal_macros::dec;

    #[test]
    fn the_process_passes_through_each_anchor_and_stays_near_it() {
        let universe = universe(&demo_book().unwrap());
        assert!(universe.len() > 10);
        for inst in &universe {
            let at_anchor = inst.mid_f64(7, anchor_time());
            let anchor = inst.anchor.to_f64().unwrap();
            assert!((at_anchor / anchor - 1.0).abs() < 1e-9, "{}", inst.spec.key);
            for day in [-400, -30, -1, 1, 30, 365] {
                let t = anchor_time() + chrono::Duration::days(day);
                let ratio = inst.mid_f64(7, t) / anchor;
                assert!(
                    (0.5..2.0).contains(&ratio),
                    "{} {day}: {ratio}",
                    inst.spec.key
                );
            }
            let (bid, ask) = inst.bid_ask(7, anchor_time() + chrono::Duration::minutes(5));
            assert!(ask > bid && bid > Decimal::ZERO);
            assert_eq!(
                inst.bid_ask(7, anchor_time()),
                inst.bid_ask(7, anchor_time())
            );
        }
    }

    #[test]
    fn fees_follow_each_market() {
        let universe = universe(&demo_book().unwrap());
        let find = |s: &str| universe.iter().find(|i| i.spec.key.symbol == s).unwrap();
        // TC1: 100 US shares at 281 = 0.50, raised to the 1.00 minimum.
        assert_eq!(find("AAPL").commission(dec!(100), dec!(281)), dec!(1.00));
        // TC2: 1000 shares = 5.00.
        assert_eq!(find("AAPL").commission(dec!(1000), dec!(281)), dec!(5.00));
        // TC3: 1 share at 0.50 is capped at 1% of 0.50.
        assert_eq!(find("AAPL").commission(dec!(1), dec!(0.50)), dec!(0.01));
        let bursa = universe
            .iter()
            .find(|i| i.spec.key.exchange == "BURSA")
            .unwrap();
        // TC4: RM 10,000 = brokerage 8.00 (minimum) + clearing 3.00 + stamp 10.
        assert_eq!(bursa.commission(dec!(1000), dec!(10)), dec!(21.00));
        // TC5: RM 10,000.01 = stamp duty rounds the part up to 11.
        assert_eq!(bursa.commission(dec!(1), dec!(10000.01)), dec!(22.00));
        assert_eq!(find("EURUSD").commission(dec!(1), dec!(1.1)), Decimal::ZERO);
        // TC6: 0.1 BTC at 92,000 = 9,200 x 0.045% = 4.14.
        assert_eq!(
            find("BTC-PERP").commission(dec!(0.1), dec!(92000)),
            dec!(4.14)
        );
    }

    #[test]
    fn bursa_ticks_follow_the_price_bands() {
        assert_eq!(bursa_tick(dec!(0.995)), dec!(0.005));
        assert_eq!(bursa_tick(dec!(9.99)), dec!(0.01));
        assert_eq!(bursa_tick(dec!(10)), dec!(0.02));
        assert_eq!(bursa_tick(dec!(100)), dec!(0.10));
    }
}
