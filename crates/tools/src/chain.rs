//! `get_option_chain` (the `marketdata` toolset; docs/methodology/research.md, "Option
//! chains"): one expiry of an underlying's options at one account: each contract's bid,
//! ask, last, volume, open interest, implied volatility and greeks. Greeks are the
//! broker's where it sends them (`greeks_source: "broker"`); where it sends prices without
//! them, tradedesk's own Black-Scholes-Merton solver finds the implied volatility from the
//! price and the greeks from it (`"tradedesk_bsm"`), stating the inputs it used. A rate it
//! does not know is never taken as 0: it is the `rate` argument or the venue's own stated
//! rate, else the solver is not run and a note says so.

// Analytics: implied volatility and greeks are floating point (docs/methodology/research.md).
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)]

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_brokers::BrokerError;
use tradedesk_brokers::occ::Right;
use tradedesk_brokers::option_chain::{
    ChainContract, ChainQuery, MAX_STRIKES_AROUND, OptionChain, strike_window,
};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{Error, ErrorCode, Result};
use tradedesk_research::options::{self, Contract, Kind};

use crate::context::ToolContext;
use crate::num::Num;

/// The brokers that serve option chains, for `not_supported` and `unknown_account` hints.
pub const CHAIN_BROKERS: &str = "Alpaca, IBKR (TWS / IB Gateway) and moomoo/Futu OpenD accounts (US and HK underlyings), and the sim (SIM-PAPER in the demo)";
/// Strikes kept on each side of the underlying's price by default.
pub const DEFAULT_STRIKES_AROUND: usize = 10;
/// The most contracts one answer holds.
pub const MAX_CONTRACTS: usize = 200;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OptionChainArgs {
    /// The underlying: a US stock or ETF symbol (AAPL) or EXCHANGE:SYMBOL (HKEX:00700 at
    /// moomoo/Futu).
    pub underlying: String,
    /// An account that serves option chains (get_accounts; the demo's is SIM-PAPER).
    pub account: String,
    /// One expiry, YYYY-MM-DD (default the nearest one listed).
    pub expiry: Option<String>,
    /// Strikes kept on each side of the underlying's price, 1 to 50 (default 10).
    pub strikes_around: Option<usize>,
    /// Continuously compounded risk-free rate as a fraction (0.04 means 4%), for
    /// tradedesk's solver where the broker sends no greeks; default the venue's own stated
    /// rate (the sim's), else those greeks are left out.
    pub rate: Option<f64>,
    /// Continuous dividend yield as a fraction for that solver (default 0, stated).
    pub dividend_yield: Option<f64>,
}

/// What tradedesk's solver was given for one contract.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BsmInputs {
    /// The option price solved for implied volatility, per share.
    pub price: f64,
    /// mid (of bid and ask) or last.
    pub price_from: &'static str,
    pub underlying_price: f64,
    pub rate: f64,
    /// Where the rate came from: argument or venue.
    pub rate_source: &'static str,
    pub dividend_yield: f64,
    /// Years to the contract's close on its expiry day (days / 365).
    pub time_years: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ContractRow {
    /// The OCC symbol (option_strategy takes it as a leg's contract).
    pub symbol: String,
    /// call or put.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub strike: Num,
    /// YYYY-MM-DD.
    pub expiry: String,
    /// Shares one contract's price is multiplied by; null when the broker does not say.
    pub multiplier: Option<Num>,
    /// Per share.
    pub bid: Option<Num>,
    pub ask: Option<Num>,
    /// The middle of bid and ask.
    pub mid: Option<Num>,
    pub last: Option<Num>,
    pub last_time: Option<String>,
    /// Contracts traded in the latest session.
    pub volume: Option<Num>,
    pub open_interest: Option<Num>,
    pub open_interest_date: Option<String>,
    /// As a fraction: 0.2 means 20%.
    pub implied_volatility: Option<f64>,
    /// Per share; theta per calendar day, vega and rho per 1 point.
    pub delta: Option<f64>,
    pub gamma: Option<f64>,
    pub theta: Option<f64>,
    pub vega: Option<f64>,
    pub rho: Option<f64>,
    /// broker or tradedesk_bsm; null when there are none.
    pub greeks_source: Option<&'static str>,
    /// What tradedesk's solver used (greeks_source tradedesk_bsm only).
    pub bsm_inputs: Option<BsmInputs>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OptionChainResult {
    pub account: String,
    /// EXCHANGE:SYMBOL of the underlying.
    pub underlying: String,
    pub currency: Option<String>,
    pub underlying_price: Option<Num>,
    /// Which price that is.
    pub underlying_price_source: Option<String>,
    /// A made-up chain (the sim), not a market's.
    pub simulated: bool,
    /// The expiry shown (YYYY-MM-DD).
    pub expiry: Option<String>,
    /// Every expiry listed, soonest first.
    pub expiries: Vec<String>,
    pub strikes_around: usize,
    /// Strikes shown, and listed for the expiry (as far as read).
    pub strikes: usize,
    pub strikes_listed: usize,
    /// Contracts shown.
    pub count: usize,
    /// The most contracts one answer holds.
    pub limit: usize,
    /// More contracts exist than are shown.
    pub more: bool,
    pub contracts: Vec<ContractRow>,
    /// When the figures are of (RFC 3339, UTC).
    pub as_of: Option<String>,
    /// Requests sent to the broker.
    pub requests: usize,
    pub notes: Vec<String>,
}

impl OptionChainResult {
    /// The summary line, without the notes.
    pub fn summary(&self) -> String {
        let atm = self
            .underlying_price
            .and_then(|p| {
                self.contracts
                    .iter()
                    .filter(|c| c.kind == "call")
                    .min_by_key(|c| (c.strike.0 - p.0).abs())
            })
            .map(|c| {
                format!(
                    "; nearest call {} bid {} ask {}{}",
                    c.symbol,
                    c.bid.map_or_else(|| "n/a".to_owned(), |b| b.0.to_string()),
                    c.ask.map_or_else(|| "n/a".to_owned(), |a| a.0.to_string()),
                    c.implied_volatility
                        .map(|v| format!(" IV {:.2}%", v * 100.0))
                        .unwrap_or_default()
                )
            })
            .unwrap_or_default();
        format!(
            "{} contract(s) of {}{} expiring {} at {}, underlying {}{}{}{}.",
            self.count,
            self.underlying,
            if self.simulated { " (simulated)" } else { "" },
            self.expiry.as_deref().unwrap_or("n/a"),
            self.account,
            self.underlying_price
                .map_or_else(|| "n/a".to_owned(), |p| p.0.to_string()),
            atm,
            if self.more { " (more exist)" } else { "" },
            if self.expiries.len() > 1 {
                format!("; {} expiries listed", self.expiries.len())
            } else {
                String::new()
            }
        )
    }
}

fn time(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn num(d: Option<Decimal>) -> Option<Num> {
    d.map(|d| Num(d.normalize()))
}

/// The checked arguments.
struct Checked {
    expiry: Option<NaiveDate>,
    strikes_around: usize,
    rate: Option<f64>,
    dividend_yield: f64,
}

fn check(a: &OptionChainArgs) -> Result<Checked> {
    if a.underlying.trim().is_empty() {
        return Err(Error::invalid_argument(
            "underlying is empty",
            "give the underlying's symbol, such as AAPL",
        ));
    }
    let expiry = match a.expiry.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(t) => Some(NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|_| {
            Error::invalid_argument(
                format!("expiry {} is not a date", quoted(t)),
                "give expiry as YYYY-MM-DD, or leave it out for the nearest; the answer's expiries lists them",
            )
        })?),
    };
    let strikes_around = a.strikes_around.unwrap_or(DEFAULT_STRIKES_AROUND);
    if !(1..=MAX_STRIKES_AROUND).contains(&strikes_around) {
        return Err(Error::invalid_argument(
            format!(
                "strikes_around is {strikes_around}: it must be from 1 to {MAX_STRIKES_AROUND}"
            ),
            format!(
                "leave it out for {DEFAULT_STRIKES_AROUND} strikes on each side of the underlying's price"
            ),
        ));
    }
    let fraction = |name: &str, v: f64| {
        if v.is_finite() && (-1.0..=1.0).contains(&v) {
            Ok(v)
        } else {
            Err(Error::invalid_argument(
                format!("{name} is {v}: it must be from -1 to 1"),
                format!("give {name} as a fraction: 0.04 means 4%"),
            ))
        }
    };
    Ok(Checked {
        expiry,
        strikes_around,
        rate: a.rate.map(|r| fraction("rate", r)).transpose()?,
        dividend_yield: fraction("dividend_yield", a.dividend_yield.unwrap_or(0.0))?,
    })
}

/// The chain from the account's broker, within `broker_timeout`.
pub(crate) async fn read_chain(
    ctx: &ToolContext,
    account: &str,
    query: &ChainQuery,
) -> Result<OptionChain> {
    let broker = ctx.broker_for(account).ok_or_else(|| {
        Error::new(
            ErrorCode::UnknownAccount,
            format!("no account {}", quoted(account)),
            format!("get_accounts lists the accounts; option chains are served by {CHAIN_BROKERS}"),
        )
    })?;
    let answer = tokio::time::timeout(ctx.broker_timeout, broker.option_chain(account, query))
        .await
        .unwrap_or_else(|_| {
            Err(BrokerError::Timeout {
                account: account.to_owned(),
                timeout: ctx.broker_timeout,
            })
        });
    match answer {
        Ok(chain) => Ok(chain),
        Err(BrokerError::Unsupported { .. }) => Err(Error::new(
            ErrorCode::NotSupported,
            format!("account {} does not serve option chains", quoted(account)),
            format!(
                "get_option_chain is served by {CHAIN_BROKERS}; get_accounts lists the accounts"
            ),
        )),
        Err(e) => Err(e.into()),
    }
}

/// The price the solver is given: the mid where bid and ask are both there, else the
/// last trade.
fn solver_price(c: &ChainContract) -> Option<(f64, &'static str)> {
    match (c.bid, c.ask, c.last) {
        (Some(b), Some(a), _) if b <= a => Some((((b + a) / Decimal::TWO).to_f64()?, "mid")),
        (_, _, Some(l)) => Some((l.to_f64()?, "last")),
        _ => None,
    }
}

/// How a chain's rate for the solver is known.
#[derive(Clone, Copy)]
pub(crate) struct SolverRate {
    pub rate: f64,
    pub source: &'static str,
}

pub(crate) fn solver_rate(arg: Option<f64>, chain: &OptionChain) -> Option<SolverRate> {
    arg.map(|rate| SolverRate {
        rate,
        source: "argument",
    })
    .or(chain.rate.map(|rate| SolverRate {
        rate,
        source: "venue",
    }))
}

/// Years from `as_of` to the contract's close (days / 365).
fn years_to(c: &ChainContract, as_of: DateTime<Utc>) -> f64 {
    (c.expires_at - as_of).num_seconds() as f64 / (365.0 * 86_400.0)
}

/// One contract's row: the broker's greeks, else tradedesk's where every input is known.
pub(crate) fn contract_row(
    c: &ChainContract,
    spot: Option<f64>,
    rate: Option<SolverRate>,
    dividend_yield: f64,
    as_of: DateTime<Utc>,
    failed: &mut usize,
) -> ContractRow {
    let mid = match (c.bid, c.ask) {
        (Some(b), Some(a)) if b <= a => Some((b + a) / Decimal::TWO),
        _ => None,
    };
    let kind = match c.right {
        Right::Call => Kind::Call,
        Right::Put => Kind::Put,
    };
    let mut row = ContractRow {
        symbol: c.symbol.clone(),
        kind: match c.right {
            Right::Call => "call",
            Right::Put => "put",
        },
        strike: Num(c.strike.normalize()),
        expiry: c.expiry.to_string(),
        multiplier: num(c.multiplier),
        bid: num(c.bid),
        ask: num(c.ask),
        mid: num(mid),
        last: num(c.last),
        last_time: time(c.last_time),
        volume: num(c.volume),
        open_interest: num(c.open_interest),
        open_interest_date: c.open_interest_date.map(|d| d.to_string()),
        implied_volatility: c.implied_volatility,
        delta: None,
        gamma: None,
        theta: None,
        vega: None,
        rho: None,
        greeks_source: None,
        bsm_inputs: None,
    };
    if let Some(g) = c.greeks {
        row.delta = Some(g.delta);
        row.gamma = Some(g.gamma);
        row.theta = Some(g.theta);
        row.vega = Some(g.vega);
        row.rho = g.rho;
        row.greeks_source = Some("broker");
        return row;
    }
    let t = years_to(c, as_of);
    let (Some(spot), Some(rate), Some(strike)) = (spot, rate, c.strike.to_f64()) else {
        return row;
    };
    if t <= 0.0 || spot <= 0.0 || strike <= 0.0 {
        return row;
    }
    let mut contract = Contract {
        spot,
        strike,
        volatility: 0.2,
        rate: rate.rate,
        dividend_yield,
        time_years: t,
    };
    let mut inputs = None;
    let vol = match c.implied_volatility {
        Some(v) => Some(v),
        None => solver_price(c).and_then(|(price, from)| {
            inputs = Some((price, from));
            match options::implied_volatility(kind, &contract, price) {
                Ok(iv) => Some(iv.volatility),
                Err(_) => {
                    *failed += 1;
                    None
                }
            }
        }),
    };
    let Some(vol) = vol else {
        return row;
    };
    contract.volatility = vol;
    let g = options::greeks(kind, &contract);
    row.implied_volatility = Some(vol);
    row.delta = Some(g.delta);
    row.gamma = Some(g.gamma);
    row.theta = Some(g.theta);
    row.vega = Some(g.vega);
    row.rho = Some(g.rho);
    row.greeks_source = Some("tradedesk_bsm");
    let (price, price_from) = inputs.unwrap_or((g.price, "broker_iv"));
    row.bsm_inputs = Some(BsmInputs {
        price,
        price_from,
        underlying_price: spot,
        rate: rate.rate,
        rate_source: rate.source,
        dividend_yield,
        time_years: t,
    });
    row
}

/// `get_option_chain`.
///
/// # Errors
/// `invalid_argument` (an empty underlying, a malformed expiry, strikes_around or rate
/// out of range, an expiry the broker does not list); `unknown_account`;
/// `not_supported` for an account whose broker has no option chains (naming those that
/// do); the broker's failures (`broker_timeout` past `broker_timeout`).
pub async fn get_option_chain(ctx: &ToolContext, a: OptionChainArgs) -> Result<OptionChainResult> {
    let checked = check(&a)?;
    let query = ChainQuery {
        underlying: a.underlying.trim().to_owned(),
        expiry: checked.expiry,
        strikes_around: Some(checked.strikes_around),
    };
    let chain = read_chain(ctx, &a.account, &query).await?;
    let mut notes = chain.notes.clone();
    // The strikes near the underlying's price (all when the price is not known).
    let listed: Vec<Decimal> = chain.contracts.iter().map(|c| c.strike).collect();
    let distinct = strike_window(&listed, None, None);
    let keep = strike_window(
        &listed,
        chain.underlying_price,
        Some(checked.strikes_around),
    );
    if chain.underlying_price.is_none() {
        notes.push(format!(
            "the underlying's price is not known: the {} lowest strikes are shown, and greeks the broker does not send are left out",
            checked.strikes_around * 2
        ));
    }
    let mut contracts: Vec<&ChainContract> = chain
        .contracts
        .iter()
        .filter(|c| keep.binary_search(&c.strike).is_ok())
        .collect();
    let mut more = chain.truncated || keep.len() < distinct.len();
    if keep.len() < distinct.len() {
        notes.push(format!(
            "{} of the expiry's {} strikes shown (strikes_around {} on each side of the underlying's price); raise strikes_around for more",
            keep.len(),
            distinct.len(),
            checked.strikes_around
        ));
    }
    if contracts.len() > MAX_CONTRACTS {
        notes.push(format!(
            "{} contracts match: the first {MAX_CONTRACTS} by strike are shown; lower strikes_around",
            contracts.len()
        ));
        contracts.truncate(MAX_CONTRACTS);
        more = true;
    }
    let spot = chain.underlying_price.and_then(|p| p.to_f64());
    let rate = solver_rate(checked.rate, &chain);
    let as_of = chain.as_of.unwrap_or_else(Utc::now);
    let mut failed = 0usize;
    let rows: Vec<ContractRow> = contracts
        .iter()
        .map(|c| contract_row(c, spot, rate, checked.dividend_yield, as_of, &mut failed))
        .collect();
    let solved = rows
        .iter()
        .filter(|r| r.greeks_source == Some("tradedesk_bsm"))
        .count();
    let without = contracts.iter().filter(|c| c.greeks.is_none()).count();
    if without > 0 && rate.is_none() {
        notes.push(format!(
            "{without} contract(s) came without greeks and no rate is known: give rate (0.04 means 4%) for tradedesk's Black-Scholes-Merton greeks; they are left out rather than computed at a guessed rate"
        ));
    }
    if solved > 0 {
        notes.push(format!(
            "{solved} contract(s) have greeks_source tradedesk_bsm: European Black-Scholes-Merton, implied volatility solved from the price in bsm_inputs, dividend yield {}{}; the broker's figures would account for early exercise of American options, these do not",
            checked.dividend_yield,
            if a.dividend_yield.is_none() { " (the default: give dividend_yield for a payer)" } else { "" }
        ));
    }
    if failed > 0 {
        notes.push(format!(
            "{failed} contract(s) have a price outside the no-arbitrage bounds for these inputs (often a stale or wide quote): no implied volatility or greeks for them"
        ));
    }
    let strikes = {
        let mut s: Vec<Decimal> = contracts.iter().map(|c| c.strike).collect();
        s.dedup();
        s.len()
    };
    Ok(OptionChainResult {
        account: a.account,
        underlying: chain.underlying,
        currency: chain.currency.map(|c| c.code().to_owned()),
        underlying_price: num(chain.underlying_price),
        underlying_price_source: chain.underlying_price_source,
        simulated: chain.simulated,
        expiry: chain.expiry.map(|d| d.to_string()),
        expiries: chain.expiries.iter().map(ToString::to_string).collect(),
        strikes_around: checked.strikes_around,
        strikes,
        strikes_listed: distinct.len(),
        count: rows.len(),
        limit: MAX_CONTRACTS,
        more,
        contracts: rows,
        as_of: time(chain.as_of),
        requests: chain.requests,
        notes,
    })
}

/// `option_strategy` with legs that name chain contracts: each such leg's type, strike,
/// time to expiry, premium (the mid, else the last trade) and volatility (the broker's
/// implied volatility, else tradedesk's from the price at the strategy's rate) come from
/// the account's chain, and its quantity in contracts becomes shares by the contract's
/// multiplier. Legs without a contract are used as given.
///
/// # Errors
/// `invalid_argument` for a contract leg without the strategy's account, a symbol that is
/// not an OCC one, a contract the chain does not hold or without a multiplier, price or
/// volatility, legs on different underlyings; the chain's own errors; and
/// `option_strategy`'s.
pub async fn option_strategy(
    ctx: &ToolContext,
    mut a: crate::options::StrategyArgs,
) -> Result<(crate::options::StrategyResult, Option<Vec<u8>>)> {
    use crate::options::LegType;
    if a.legs.iter().all(|l| l.contract.is_none()) {
        return crate::options::option_strategy(&a);
    }
    let Some(account) = a.account.clone() else {
        return Err(Error::invalid_argument(
            "a leg names a chain contract but the strategy has no account",
            "give account, the account whose option chain the contract is read from (get_option_chain)",
        ));
    };
    let rate = SolverRate {
        rate: a.rate,
        source: "argument",
    };
    let q = a.dividend_yield.unwrap_or(0.0);
    let mut chains: Vec<(String, NaiveDate, OptionChain)> = Vec::new();
    let mut notes = Vec::new();
    let mut underlying: Option<(String, Option<Decimal>)> = None;
    for i in 0..a.legs.len() {
        let Some(symbol) = a.legs[i].contract.clone() else {
            continue;
        };
        let field = |f: &str| format!("legs[{i}].{f}");
        let compact: String = symbol.split_whitespace().collect::<Vec<_>>().join("");
        let compact = compact.to_ascii_uppercase();
        let Some(occ) = tradedesk_brokers::occ::parse(&compact) else {
            return Err(Error::invalid_argument(
                format!(
                    "{} {} is not an OCC option symbol",
                    field("contract"),
                    quoted(&symbol)
                ),
                "give the contract's symbol as get_option_chain lists it, such as AAPL240126P00050000",
            ));
        };
        if a.legs[i].kind.is_some() || a.legs[i].strike.is_some() || a.legs[i].time_years.is_some()
        {
            return Err(Error::invalid_argument(
                format!("legs[{i}] names a contract and also a type, strike or time_years"),
                "a contract leg takes contract, quantity (contracts) and, to override the chain, premium or volatility",
            ));
        }
        let root = occ
            .root
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .to_owned();
        let chain = match chains
            .iter()
            .position(|(r, d, _)| *r == root && *d == occ.expiry)
        {
            Some(k) => &chains[k].2,
            None => {
                let chain = read_chain(
                    ctx,
                    &account,
                    &ChainQuery {
                        underlying: root.clone(),
                        expiry: Some(occ.expiry),
                        strikes_around: None,
                    },
                )
                .await?;
                chains.push((root.clone(), occ.expiry, chain));
                &chains[chains.len() - 1].2
            }
        };
        match &underlying {
            Some((u, _)) if *u != chain.underlying => {
                return Err(Error::invalid_argument(
                    format!(
                        "the legs are on {u} and {}: a strategy has one underlying",
                        chain.underlying
                    ),
                    "give legs on one underlying",
                ));
            }
            Some(_) => {}
            None => underlying = Some((chain.underlying.clone(), chain.underlying_price)),
        }
        let Some(c) = chain.contracts.iter().find(|c| c.symbol == compact) else {
            return Err(Error::invalid_argument(
                format!(
                    "{} {}: the {} chain at {account} has no such contract",
                    field("contract"),
                    quoted(&symbol),
                    chain.underlying
                ),
                "get_option_chain lists the contracts (raise strikes_around for far strikes)",
            ));
        };
        let Some(multiplier) = c.multiplier else {
            return Err(Error::invalid_argument(
                format!(
                    "{} {}: the broker does not say its multiplier",
                    field("contract"),
                    quoted(&symbol)
                ),
                "give the leg explicitly (type, strike, time_years, volatility) with quantity in shares",
            ));
        };
        let spot = a
            .spot
            .or_else(|| chain.underlying_price.and_then(|p| p.to_f64()));
        let as_of = chain.as_of.unwrap_or_else(Utc::now);
        let mut failed = 0usize;
        let row = contract_row(c, spot, Some(rate), q, as_of, &mut failed);
        let premium = a.legs[i]
            .premium
            .or_else(|| row.mid.or(row.last).map(Num::to_f64));
        let Some(premium) = premium else {
            return Err(Error::invalid_argument(
                format!(
                    "{} {} has no bid and ask or last trade",
                    field("contract"),
                    quoted(&symbol)
                ),
                format!("give {} for it", field("premium")),
            ));
        };
        let volatility = a.legs[i].volatility.or(row.implied_volatility);
        let Some(volatility) = volatility else {
            return Err(Error::invalid_argument(
                format!(
                    "{} {}: no implied volatility (the broker sends none and none solves from its price)",
                    field("contract"),
                    quoted(&symbol)
                ),
                format!("give {} for it", field("volatility")),
            ));
        };
        let mult = multiplier.to_f64().unwrap_or(0.0);
        let contracts = a.legs[i].quantity;
        notes.push(format!(
            "legs[{i}] {}: {contracts} contract(s) x {} shares = {} shares, {} strike {} expiring {} ({:.6} years), premium {premium} per share ({}), volatility {volatility} ({})",
            c.symbol,
            multiplier.normalize(),
            contracts * mult,
            row.kind,
            c.strike.normalize(),
            c.expiry,
            years_to(c, as_of),
            if a.legs[i].premium.is_some() { "given" } else if row.mid.is_some() { "the chain's mid" } else { "the chain's last trade" },
            if a.legs[i].volatility.is_some() {
                "given"
            } else if row.greeks_source == Some("tradedesk_bsm") && c.implied_volatility.is_none() {
                "solved by tradedesk from the chain's price at the strategy's rate"
            } else {
                "the broker's implied volatility"
            },
        ));
        let leg = &mut a.legs[i];
        leg.kind = Some(match c.right {
            Right::Call => LegType::Call,
            Right::Put => LegType::Put,
        });
        leg.strike = c.strike.to_f64();
        leg.time_years = Some(years_to(c, as_of));
        leg.volatility = Some(volatility);
        leg.premium = Some(premium);
        leg.quantity = contracts * mult;
        leg.contract = None;
    }
    if a.spot.is_none() {
        a.spot = underlying
            .as_ref()
            .and_then(|(_, p)| p.and_then(|p| p.to_f64()));
        if let Some((u, Some(p))) = &underlying {
            notes.push(format!(
                "spot {} is the chain's price of {u}",
                p.normalize()
            ));
        }
    }
    let simulated = chains.iter().any(|(_, _, c)| c.simulated);
    if simulated {
        notes.push(format!("{account}'s chain is simulated, not a market's"));
    }
    notes.push("quantities are in shares of the underlying: a contract leg's contracts times its multiplier; P&L and greeks are for the whole position".to_owned());
    let (mut result, chart) = crate::options::option_strategy(&a)?;
    result.notes.extend(notes);
    Ok((result, chart))
}

use crate::tool::{Call, Meta, Tool, notes_suffix};

/// get_option_chain.
#[derive(Debug)]
pub struct GetOptionChain;

impl Tool for GetOptionChain {
    type Args = OptionChainArgs;
    type Output = OptionChainResult;
    const META: Meta = Meta::live(
        "get_option_chain",
        "Option chain",
        crate::toolset::Toolset::MarketData,
        "One expiry of an underlying's options at an account (Alpaca, IBKR \
                TWS, moomoo/Futu for US and HK underlyings, the sim): per contract bid, ask, last, volume, open interest, implied volatility \
                and greeks, the broker's where it sends them, else tradedesk's \
                Black-Scholes-Merton from the price (greeks_source says which, with its \
                inputs). strikes_around strikes each side of the underlying's price; default \
                the nearest expiry.",
    );

    async fn run(call: &mut Call<'_>, a: OptionChainArgs) -> Result<OptionChainResult> {
        get_option_chain(call.ctx, a).await
    }

    fn summary(r: &OptionChainResult) -> String {
        format!("{}{}", r.summary(), notes_suffix(&r.notes))
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"underlying": "AAPL", "account": "SIM-PAPER", "strikes_around": 2})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(v: serde_json::Value) -> OptionChainArgs {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn arguments_are_checked() {
        let ok = check(&args(
            serde_json::json!({"underlying": "AAPL", "account": "X"}),
        ))
        .unwrap();
        assert_eq!(
            (ok.strikes_around, ok.rate, ok.dividend_yield),
            (10, None, 0.0)
        );
        for (v, word) in [
            (
                serde_json::json!({"underlying": " ", "account": "X"}),
                "underlying",
            ),
            (
                serde_json::json!({"underlying": "A", "account": "X", "expiry": "soon"}),
                "expiry",
            ),
            (
                serde_json::json!({"underlying": "A", "account": "X", "strikes_around": 0}),
                "strikes_around",
            ),
            (
                serde_json::json!({"underlying": "A", "account": "X", "strikes_around": 51}),
                "strikes_around",
            ),
            (
                serde_json::json!({"underlying": "A", "account": "X", "rate": 4}),
                "rate",
            ),
        ] {
            let e = check(&args(v)).err().unwrap();
            assert!(e.message.contains(word), "{e}");
        }
    }
}
