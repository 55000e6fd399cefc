//! Option tools: `option_price`, `implied_volatility` and `option_strategy`
//! (docs/methodology/research.md, "Options"). European, Black-Scholes-Merton with a continuous
//! dividend yield; numbers are analytics (`f64`).

// Analytics: floating point is the point here (docs/methodology/research.md).
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)]

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::{Error, Result};
use tradedesk_research::chart::{Line, line_chart};
use tradedesk_research::options::{
    self, Contract, Greeks, IvError, Kind, Leg, LegKind, Market, Strategy,
};

use crate::args::check_number as check;
use crate::tool::Meta;

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OptionType {
    Call,
    Put,
}

impl From<OptionType> for Kind {
    fn from(t: OptionType) -> Self {
        match t {
            OptionType::Call => Self::Call,
            OptionType::Put => Self::Put,
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionPriceArgs {
    /// call or put.
    #[serde(rename = "type")]
    pub kind: OptionType,
    /// Price of the underlying (> 0).
    pub spot: f64,
    /// Strike (> 0).
    pub strike: f64,
    /// Annual volatility as a fraction: 0.2 means 20% (> 0, at most 100).
    pub volatility: f64,
    /// Continuously compounded risk-free rate as a fraction: 0.05 means 5%.
    pub rate: f64,
    /// Continuous dividend yield as a fraction (default 0).
    pub dividend_yield: Option<f64>,
    /// Time to expiry in years (> 0, at most 100).
    pub time_years: f64,
}

/// Price and greeks; vega and rho per 1 point (0.01), theta per calendar day.
pub type OptionPriceResult = Greeks;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImpliedVolArgs {
    /// call or put.
    #[serde(rename = "type")]
    pub kind: OptionType,
    pub spot: f64,
    pub strike: f64,
    /// Continuously compounded risk-free rate as a fraction.
    pub rate: f64,
    /// Continuous dividend yield as a fraction (default 0).
    pub dividend_yield: Option<f64>,
    /// Time to expiry in years (> 0).
    pub time_years: f64,
    /// The option's price, strictly inside the no-arbitrage bounds.
    pub price: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ImpliedVolResult {
    /// As a fraction: 0.2 means 20%.
    pub implied_volatility: f64,
    /// Solver iterations.
    pub iterations: u32,
}

fn positive(name: &str, v: f64) -> Result<f64> {
    check(name, v, |v| v > 0.0 && v < 1e15, "above 0")
}

fn volatility(name: &str, v: f64) -> Result<f64> {
    check(
        name,
        v,
        |v| v > 0.0 && v <= 100.0,
        "above 0 and at most 100 (0.2 means 20%)",
    )
}

fn years(name: &str, v: f64) -> Result<f64> {
    check(
        name,
        v,
        |v| v > 0.0 && v <= 100.0,
        "above 0 and at most 100",
    )
}

fn rate(name: &str, v: Option<f64>) -> Result<f64> {
    check(
        name,
        v.unwrap_or(0.0),
        |v| (-1.0..=1.0).contains(&v),
        "from -1 to 1 (0.05 means 5%)",
    )
}

/// The contract's market arguments, checked.
fn contract(
    spot: f64,
    strike: f64,
    vol: f64,
    r: f64,
    q: Option<f64>,
    time_years: f64,
) -> Result<Contract> {
    Ok(Contract {
        spot: positive("spot", spot)?,
        strike: positive("strike", strike)?,
        volatility: vol,
        rate: rate("rate", Some(r))?,
        dividend_yield: rate("dividend_yield", q)?,
        time_years: years("time_years", time_years)?,
    })
}

/// `option_price`.
///
/// # Errors
/// `invalid_argument` naming an argument out of its range.
pub fn option_price(a: &OptionPriceArgs) -> Result<OptionPriceResult> {
    let c = contract(
        a.spot,
        a.strike,
        volatility("volatility", a.volatility)?,
        a.rate,
        a.dividend_yield,
        a.time_years,
    )?;
    Ok(options::greeks(a.kind.into(), &c))
}

/// `x` to 10 significant digits, in plain notation unless tiny or huge.
fn significant(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    let magnitude = x.abs().log10().floor();
    if !(-6.0..=15.0).contains(&magnitude) {
        return format!("{x:.9e}");
    }
    // In [0, 15]: exact as an integer count of places.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let places = (9.0 - magnitude).max(0.0) as usize;
    format!("{x:.places$}")
}

/// `implied_volatility`.
///
/// # Errors
/// `invalid_argument` for a price on or outside the no-arbitrage bounds (the message
/// says which and gives the bound) or an argument out of range.
pub fn implied_volatility(a: &ImpliedVolArgs) -> Result<ImpliedVolResult> {
    let c = contract(
        a.spot,
        a.strike,
        0.2,
        a.rate,
        a.dividend_yield,
        a.time_years,
    )?;
    let price = check("price", a.price, |v| v >= 0.0, "0 or above")?;
    let kind: Kind = a.kind.into();
    let name = match kind {
        Kind::Call => "call",
        Kind::Put => "put",
    };
    match options::implied_volatility(kind, &c, price) {
        Ok(iv) => Ok(ImpliedVolResult {
            implied_volatility: iv.volatility,
            iterations: iv.iterations,
        }),
        Err(IvError::BelowLower(bound)) => Err(Error::invalid_argument(
            format!(
                "price {price} is below the lower bound {} of a European {name} (its discounted intrinsic value): no volatility gives it",
                significant(bound)
            ),
            "check the price, spot, strike, rate, dividend_yield and time_years; a price must be above max(S e^-qT - K e^-rT, 0) for a call or max(K e^-rT - S e^-qT, 0) for a put",
        )),
        Err(IvError::AboveUpper(bound)) => Err(Error::invalid_argument(
            format!(
                "price {price} is above the upper bound {} of a European {name}: no volatility gives it",
                significant(bound)
            ),
            "a call must be below S e^-qT and a put below K e^-rT; check the price and the other arguments",
        )),
        Err(IvError::NoConvergence(best)) => Err(Error::invalid_argument(
            format!(
                "no volatility up to 10000% reprices {price} to 1e-10 (closest {best}): the price is too close to a bound for its volatility to be determined"
            ),
            "the option has almost no time value; its implied volatility is not meaningful",
        )),
    }
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LegType {
    Call,
    Put,
    Stock,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LegArgs {
    /// call, put or stock (taken from the chain for a contract leg).
    #[serde(rename = "type")]
    pub kind: Option<LegType>,
    /// An OCC contract symbol from get_option_chain (AAPL240126P00050000), read from the
    /// strategy's account: its type, strike, expiry, multiplier, price and implied
    /// volatility come from the chain, and quantity counts contracts.
    pub contract: Option<String>,
    /// Strike (options only).
    pub strike: Option<f64>,
    /// Signed: + long, - short; per share, or contracts for a contract leg.
    pub quantity: f64,
    /// Per share; default the model price now (the spot for stock).
    pub premium: Option<f64>,
    /// Annual volatility as a fraction (options only).
    pub volatility: Option<f64>,
    /// Years to the leg's expiry (options only).
    pub time_years: Option<f64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StrategyArgs {
    /// The underlying's price (default, with contract legs, the chain's).
    pub spot: Option<f64>,
    /// The account whose option chain contract legs are read from (get_option_chain).
    pub account: Option<String>,
    /// Continuously compounded risk-free rate as a fraction.
    pub rate: f64,
    /// Continuous dividend yield as a fraction (default 0).
    pub dividend_yield: Option<f64>,
    /// 1 to 20 legs, at least one an option.
    pub legs: Vec<LegArgs>,
    /// [low, high] of the underlying's price (default spot x [0.5, 1.5]).
    pub price_range: Option<[f64; 2]>,
    /// Points across the range, 2 to 2001 (default 101).
    pub points: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PricePnl {
    pub price: f64,
    pub pnl: f64,
}

/// Greeks of the whole strategy, summed over legs (units as option_price).
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StrategyGreeks {
    pub delta: f64,
    pub gamma: f64,
    pub vega: f64,
    pub theta: f64,
    pub rho: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct StrategyResult {
    /// Premium paid (positive) or received (negative), per share, over all legs.
    pub net_premium: f64,
    /// "At expiry": the earliest leg's expiry, in years from now.
    pub expiry_years: f64,
    /// P&L at expiry across the price range (later legs valued by the model).
    pub payoff_at_expiry: Vec<PricePnl>,
    /// P&L now if the underlying moved there at once.
    pub value_now: Vec<PricePnl>,
    /// Underlying prices at expiry where the P&L crosses zero, found as roots.
    pub breakevens: Vec<f64>,
    /// The highest P&L at expiry; null when unbounded.
    pub max_profit: Option<f64>,
    /// The lowest P&L at expiry (negative for a loss); null when unbounded.
    pub max_loss: Option<f64>,
    /// P(P&L at expiry > 0), lognormal with the risk-neutral drift.
    pub probability_of_profit: f64,
    pub greeks: StrategyGreeks,
    pub notes: Vec<String>,
}

impl ImpliedVolResult {
    /// The text summary beside the result.
    pub fn summary(&self) -> String {
        format!(
            "implied volatility {:.6}% ({} iteration(s)).",
            self.implied_volatility * 100.0,
            self.iterations
        )
    }
}

impl StrategyResult {
    /// The text summary beside the result.
    pub fn summary(&self) -> String {
        let opt = |v: Option<f64>| v.map_or_else(|| "unbounded".to_owned(), |v| format!("{v:.4}"));
        format!(
            "net premium {:.4}; breakevens {:?}; max profit {}; max loss {}; probability of profit {:.2}%.",
            self.net_premium,
            self.breakevens,
            opt(self.max_profit),
            opt(self.max_loss),
            self.probability_of_profit * 100.0
        )
    }
}

/// A leg argument, checked and priced.
fn leg(i: usize, a: &LegArgs, m: Market) -> Result<Leg> {
    let name = |field: &str| format!("legs[{i}].{field}");
    let quantity = check(
        &name("quantity"),
        a.quantity,
        |v| v != 0.0 && v.abs() < 1e12,
        "not 0 (+ long, - short)",
    )?;
    if a.contract.is_some() {
        return Err(Error::invalid_argument(
            format!(
                "{} names a chain contract but the strategy has no account",
                name("contract")
            ),
            "give account, the account whose option chain the contract is read from (get_option_chain)",
        ));
    }
    let Some(leg_type) = a.kind else {
        return Err(Error::invalid_argument(
            format!("{} is missing", name("type")),
            "give each leg a type (call, put or stock), or a contract from get_option_chain",
        ));
    };
    let kind = match leg_type {
        LegType::Stock => {
            if a.strike.is_some() || a.volatility.is_some() {
                return Err(Error::invalid_argument(
                    format!("legs[{i}] is a stock leg and has a strike or volatility"),
                    "a stock leg takes type, quantity and premium? only; strike and volatility are for calls and puts",
                ));
            }
            LegKind::Stock
        }
        LegType::Call | LegType::Put => {
            let missing = |field: &str| {
                Error::invalid_argument(
                    format!("{} is missing", name(field)),
                    "an option leg needs type, strike, quantity, volatility and time_years",
                )
            };
            LegKind::Option {
                kind: if matches!(leg_type, LegType::Call) {
                    Kind::Call
                } else {
                    Kind::Put
                },
                strike: positive(&name("strike"), a.strike.ok_or_else(|| missing("strike"))?)?,
                volatility: volatility(
                    &name("volatility"),
                    a.volatility.ok_or_else(|| missing("volatility"))?,
                )?,
                time_years: years(
                    &name("time_years"),
                    a.time_years.ok_or_else(|| missing("time_years"))?,
                )?,
            }
        }
    };
    let premium = match a.premium {
        None => kind.value(&m, m.spot, 0.0),
        Some(p) => check(
            &name("premium"),
            p,
            |v| (0.0..1e15).contains(&v),
            "0 or above",
        )?,
    };
    Ok(Leg {
        kind,
        quantity,
        premium,
    })
}

/// `option_strategy` and its payoff chart.
///
/// # Errors
/// `invalid_argument` naming the leg and field out of range, or the range or points.
pub fn option_strategy(a: &StrategyArgs) -> Result<(StrategyResult, Option<Vec<u8>>)> {
    let Some(spot) = a.spot else {
        return Err(Error::invalid_argument(
            "spot is missing",
            "give spot, the underlying's price; with legs naming a chain contract it defaults to the chain's",
        ));
    };
    let market = Market {
        spot: positive("spot", spot)?,
        rate: rate("rate", Some(a.rate))?,
        dividend_yield: rate("dividend_yield", a.dividend_yield)?,
    };
    if a.legs.is_empty() || a.legs.len() > 20 {
        return Err(Error::invalid_argument(
            format!(
                "legs has {} entries: a strategy takes 1 to 20",
                a.legs.len()
            ),
            "pass legs as a list such as [{\"type\": \"call\", \"strike\": 100, \"quantity\": 1, \"volatility\": 0.2, \"time_years\": 0.5}]",
        ));
    }
    let legs = a
        .legs
        .iter()
        .enumerate()
        .map(|(i, l)| leg(i, l, market))
        .collect::<Result<Vec<_>>>()?;
    let s = Strategy { market, legs };
    let Some(expiry) = s.expiry() else {
        return Err(Error::invalid_argument(
            "legs has no call or put: a strategy needs at least one option leg",
            "add a call or put leg; a stock position alone has no expiry",
        ));
    };
    let [low, high] = a
        .price_range
        .unwrap_or([market.spot * 0.5, market.spot * 1.5]);
    if !(low.is_finite() && high.is_finite() && low >= 0.0 && low < high && high < 1e15) {
        return Err(Error::invalid_argument(
            format!("price_range is [{low}, {high}]: it must be [low, high] with 0 <= low < high"),
            "pass price_range as two numbers, such as [50, 150], or leave it out for spot x [0.5, 1.5]",
        ));
    }
    let points = a.points.unwrap_or(101);
    if !(2..=2001).contains(&points) {
        return Err(Error::invalid_argument(
            format!("points is {points}: it must be from 2 to 2001"),
            "leave points out for 101",
        ));
    }
    let step = (high - low) / (points - 1) as f64;
    let prices: Vec<f64> = (0..points)
        .map(|i| {
            if i + 1 == points {
                high
            } else {
                low + step * i as f64
            }
        })
        .collect();
    let payoff: Vec<PricePnl> = prices
        .iter()
        .map(|&p| PricePnl {
            price: p,
            pnl: s.pnl_at_expiry(p),
        })
        .collect();
    let now: Vec<PricePnl> = prices
        .iter()
        .map(|&p| PricePnl {
            price: p,
            pnl: s.pnl_now(p),
        })
        .collect();
    let vol = s.expiry_volatility(expiry);
    // Far enough up that the lognormal mass above it is negligible.
    let search_high = high.max(market.spot * (10.0 * vol * expiry.sqrt()).exp());
    let breakevens = s.breakevens(search_high);
    let (max_profit, max_loss) = s.extremes(&prices);
    let pop = s.probability_of_profit(&breakevens, vol);
    let g = s.greeks();
    let mut notes = vec![format!(
        "probability_of_profit: the underlying at {expiry} years is lognormal with drift rate - dividend_yield and volatility {vol} (the |quantity|-weighted volatility of the legs expiring then)"
    )];
    if s.has_later_legs(expiry) {
        notes.push(format!(
            "legs expiring after {expiry} years are valued at that date by the model with their remaining time; breakevens are searched up to {search_high:.6} and max profit and loss over the price range"
        ));
    }
    let chart = payoff_chart(&payoff, &now, low, high);
    Ok((
        StrategyResult {
            net_premium: s.net_premium(),
            expiry_years: expiry,
            payoff_at_expiry: payoff,
            value_now: now,
            breakevens,
            max_profit,
            max_loss,
            probability_of_profit: pop,
            greeks: StrategyGreeks {
                delta: g.delta,
                gamma: g.gamma,
                vega: g.vega,
                theta: g.theta,
                rho: g.rho,
            },
            notes,
        },
        chart,
    ))
}

fn payoff_chart(payoff: &[PricePnl], now: &[PricePnl], low: f64, high: f64) -> Option<Vec<u8>> {
    let at_expiry: Vec<(f64, f64)> = payoff.iter().map(|p| (p.price, p.pnl)).collect();
    let today: Vec<(f64, f64)> = now.iter().map(|p| (p.price, p.pnl)).collect();
    let zero = [(low, 0.0), (high, 0.0)];
    line_chart(
        "P&L by underlying price: at expiry (blue), now (orange)",
        &format!("{low:.2}"),
        &format!("{high:.2}"),
        &[
            Line {
                label: "zero",
                points: &zero,
                color: (160, 160, 160),
            },
            Line {
                label: "at expiry",
                points: &at_expiry,
                color: (31, 119, 180),
            },
            Line {
                label: "now",
                points: &today,
                color: (255, 127, 14),
            },
        ],
    )
    .ok()
}

/// option_price.
#[derive(Debug)]
pub struct OptionPrice;

impl crate::tool::Tool for OptionPrice {
    type Args = OptionPriceArgs;
    type Output = OptionPriceResult;
    const META: Meta = Meta::live(
        "option_price",
        "Option price and greeks",
        crate::toolset::Toolset::Options,
        "Price and greeks of a European call or put by Black-Scholes-Merton with \
                a continuous dividend yield: vega and rho per 1 point, theta per calendar day, \
                d1, d2.",
    );

    async fn run(_: &mut crate::tool::Call<'_>, a: OptionPriceArgs) -> Result<OptionPriceResult> {
        option_price(&a)
    }

    fn summary(r: &OptionPriceResult) -> String {
        format!(
            "price {:.6}, delta {:.6}, gamma {:.6}, vega {:.6} per point, theta {:.6} per day, rho {:.6} per point.",
            r.price, r.delta, r.gamma, r.vega, r.theta, r.rho
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"type": "call", "spot": 100, "strike": 105, "volatility": 0.25,
            "rate": 0.04, "dividend_yield": 0.01, "time_years": 0.5})
    }
}

/// implied_volatility.
#[derive(Debug)]
pub struct ImpliedVolatility;

impl crate::tool::Tool for ImpliedVolatility {
    type Args = ImpliedVolArgs;
    type Output = ImpliedVolResult;
    const META: Meta = Meta::live(
        "implied_volatility",
        "Implied volatility",
        crate::toolset::Toolset::Options,
        "The Black-Scholes-Merton volatility that reprices a European option to \
                1e-10 relative, deep in or out of the money. A price on or outside the discounted \
                no-arbitrage bounds is refused with the bound it broke.",
    );

    async fn run(_: &mut crate::tool::Call<'_>, a: ImpliedVolArgs) -> Result<ImpliedVolResult> {
        implied_volatility(&a)
    }

    fn summary(r: &ImpliedVolResult) -> String {
        r.summary()
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"type": "put", "spot": 100, "strike": 95, "rate": 0.04,
            "time_years": 0.25, "price": 2.1})
    }
}

/// option_strategy: the payoff, and its chart beside it as an image.
#[derive(Debug)]
pub struct OptionStrategy;

impl crate::tool::Tool for OptionStrategy {
    type Args = StrategyArgs;
    type Output = StrategyResult;
    const META: Meta = Meta::live(
        "option_strategy",
        "Option strategy payoff",
        crate::toolset::Toolset::Options,
        "What does this spread pay, and where does it break even? Multi-leg \
                payoff of calls, puts and stock: net premium, P&L at the earliest expiry and now \
                across a price range, breakevens, max profit and loss (null when unbounded), \
                probability of profit (lognormal), summed greeks, and the payoff chart as an \
                image.",
    );

    async fn run(call: &mut crate::tool::Call<'_>, a: StrategyArgs) -> Result<StrategyResult> {
        let (result, chart) = crate::chain::option_strategy(call.ctx, a).await?;
        call.attach_images(chart);
        Ok(result)
    }

    fn summary(r: &StrategyResult) -> String {
        r.summary()
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"spot": 100, "rate": 0.04, "points": 5, "legs": [
            {"type": "call", "strike": 100, "quantity": 1, "volatility": 0.25, "time_years": 0.25},
            {"type": "call", "strike": 110, "quantity": -1, "volatility": 0.23, "time_years": 0.25}]})
    }
}
