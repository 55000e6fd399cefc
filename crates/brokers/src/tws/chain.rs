//! `get_option_chain` through TWS / IB Gateway (docs/dev/ibkr-tws-facts.md, "Option
//! chains"; docs/methodology/research.md, "Option chains"):
//!
//! 1. The underlying's contract details (`reqContractDetails`): its conId, currency and
//!    exchange. IBKR's "no security definition" (200) is an unknown symbol.
//! 2. Its option parameters (`reqSecDefOptParams`): one answer per exchange the options
//!    list on, each with a trading class, a multiplier, expirations and strikes (the
//!    strikes of every expiry together), then an end marker, which TWS may not send: the
//!    answers are taken after [`QUIET`] without a frame, with a note. The SMART answer
//!    whose trading class is the symbol is used (else SMART's with the most expiries,
//!    else the first), and the others named in a note.
//! 3. The underlying's price: one market-data snapshot (last trade, else the mid).
//! 4. The chosen expiry's contracts (`reqContractDetails` of an option with that expiry
//!    and no strike or right): its own strikes, each contract's local (OCC) symbol,
//!    conId and multiplier.
//! 5. Market data for the contracts within `strikes_around` of the price, at most
//!    [`MAX_CONTRACTS`] (the nearest to the price; a note says when more exist): one
//!    streaming `reqMktData` per contract with generic tick 101 (open interest: IBKR
//!    takes no generic ticks in a snapshot), read until bid or ask, the model's option
//!    computation and the open interest came, or [`QUIET`] passed without a tick, then
//!    cancelled. The requests are paced by the connection's 50-messages-a-second limiter
//!    and read at once, so the call takes about as long as the slowest contract; every
//!    read ends at three quarters of the account's timeout, and a contract that had not
//!    answered by then is named in a note, its row without figures.
//!
//! Greeks are TWS's model computation (tick 13, or its delayed twin 83): implied
//! volatility, delta, gamma, vega (per volatility point) and theta (per day); IBKR
//! computes no rho. IBKR states no rate, so where it sends prices without a computation
//! the tool's solver needs the `rate` argument.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use ibapi::contracts::tick_types::TickType;
use ibapi::contracts::{ContractDetails, OptionRight};
use ibapi::market_data::MarketDataType;
use ibapi::market_data::realtime::generic_tick;
use ibapi::prelude::{Contract, SecurityType, StreamExt, SubscriptionItem, TickTypes};
use rust_decimal::Decimal;
use tradedesk_core::{Currency, InstrumentKey};

use super::{Session, TwsBroker, decimal, stated_multiplier};
use crate::BrokerError;
use crate::market_snapshot::positive;
use crate::occ::{self, Right};
use crate::option_chain::{
    BrokerGreeks, ChainContract, ChainQuery, OptionChain, listed_dates, strike_window, us_close,
};

/// The most option contracts one call asks market data for: each holds one of the
/// account's market-data lines (100 by default) while it is read, and costs two of the
/// 50 messages a second (the request and its cancel).
pub(super) const MAX_CONTRACTS: usize = 60;

/// How long a read waits for another frame once one came: option parameters and
/// contract details without their end marker, a contract's ticks that stopped short.
const QUIET: Duration = Duration::from_secs(1);

/// TWS's codes for market data the account does not subscribe to: 354 (not
/// subscribed), 10089 (needs an API subscription; delayed data available), 10167 (not
/// subscribed, delayed data shown).
const NOT_SUBSCRIBED: [i32; 2] = [354, 10089];
const DELAYED_SHOWN: i32 = 10167;

/// What one contract's market-data request brought.
#[derive(Debug, Default)]
struct Ticks {
    ticks: Vec<TickTypes>,
    /// TWS's notices on the request (10167: delayed data shown).
    notices: Vec<(i32, String)>,
    /// The request failed (the error TWS sent, or the send itself).
    failed: Option<ibapi::Error>,
    /// No tick at all by the read's end.
    silent: bool,
}

impl Ticks {
    fn quote(&self) -> ibapi::prelude::Quote {
        ibapi::prelude::Quote::from_ticks(&self.ticks)
    }

    fn delayed(&self) -> bool {
        self.notices.iter().any(|(c, _)| *c == DELAYED_SHOWN)
            || matches!(
                self.quote().market_data_type,
                Some(MarketDataType::Delayed | MarketDataType::DelayedFrozen)
            )
    }

    /// The open interest of a call (tick 27) or a put (28).
    fn open_interest(&self, right: Right) -> Option<Decimal> {
        let want = match right {
            Right::Call => TickType::OptionCallOpenInterest,
            Right::Put => TickType::OptionPutOpenInterest,
        };
        self.ticks.iter().rev().find_map(|t| match t {
            TickTypes::Size(s) if s.tick_type == want => {
                decimal(s.size).filter(|v| !v.is_sign_negative())
            }
            _ => None,
        })
    }
}

/// Whether a contract's ticks hold all a chain row reads.
fn complete(ticks: &[TickTypes], right: Right) -> bool {
    let q = ibapi::prelude::Quote::from_ticks(ticks);
    let oi = match right {
        Right::Call => TickType::OptionCallOpenInterest,
        Right::Put => TickType::OptionPutOpenInterest,
    };
    (q.bid.is_some() || q.ask.is_some())
        && q.model_greeks.is_some()
        && ticks
            .iter()
            .any(|t| matches!(t, TickTypes::Size(s) if s.tick_type == oi))
}

/// Reads one contract's streaming market data until it is complete, a quiet spell after
/// a tick, an error, or `cut`; dropping the subscription then cancels it at TWS.
async fn read_ticks<S>(mut sub: S, right: Right, cut: tokio::time::Instant) -> Ticks
where
    S: StreamExt<Item = Result<SubscriptionItem<TickTypes>, ibapi::Error>> + Unpin,
{
    let mut out = Ticks::default();
    loop {
        let until = if out.ticks.is_empty() {
            cut
        } else {
            (tokio::time::Instant::now() + QUIET).min(cut)
        };
        match tokio::time::timeout_at(until, sub.next()).await {
            Err(_) | Ok(None) => break,
            Ok(Some(Err(e))) => {
                out.failed = Some(e);
                break;
            }
            Ok(Some(Ok(SubscriptionItem::Notice(n)))) => {
                let refused = NOT_SUBSCRIBED.contains(&n.code);
                out.notices.push((n.code, n.message));
                // 10089: TWS sends nothing more for this request.
                if refused && out.ticks.is_empty() {
                    break;
                }
            }
            Ok(Some(Ok(SubscriptionItem::Data(t)))) => {
                out.ticks.push(t);
                if complete(&out.ticks, right) {
                    break;
                }
            }
        }
    }
    out.silent = out.ticks.is_empty() && out.failed.is_none() && out.notices.is_empty();
    out
}

/// IBKR's date text (`YYYYMMDD`, possibly followed by a time) as a date.
fn ib_date(text: &str) -> Option<NaiveDate> {
    let digits: String = text.trim().chars().take(8).collect();
    NaiveDate::parse_from_str(&digits, "%Y%m%d").ok()
}

/// When a contract stops trading: 16:00 on its expiry day in its exchange's zone (IBKR's
/// time zone for the contract, else the currency's, else New York).
fn close_of(expiry: NaiveDate, details: &ContractDetails, currency: &str) -> Option<DateTime<Utc>> {
    let zone = crate::zones::named(details.time_zone_id.trim())
        .or_else(|| crate::zones::of_currency(currency));
    match zone {
        Some(z) => crate::zones::resolve(expiry.and_hms_opt(16, 0, 0)?, z),
        None => us_close(expiry),
    }
}

/// The option parameters row a chain is read from, and a note naming the others.
fn pick_row<'a>(
    rows: &'a [ibapi::contracts::OptionChain],
    symbol: &str,
) -> Option<(&'a ibapi::contracts::OptionChain, Option<String>)> {
    let smart: Vec<&ibapi::contracts::OptionChain> =
        rows.iter().filter(|r| r.exchange == "SMART").collect();
    let row = smart
        .iter()
        .find(|r| r.trading_class == symbol)
        .or_else(|| smart.iter().max_by_key(|r| r.expirations.len()))
        .copied()
        .or_else(|| rows.first())?;
    let mut others: Vec<String> = rows
        .iter()
        .filter(|r| !std::ptr::eq(*r, row))
        .map(|r| format!("{} ({})", r.exchange, r.trading_class))
        .collect();
    others.sort();
    others.dedup();
    let note = (!others.is_empty()).then(|| {
        format!(
            "IBKR lists options on {} exchange answer(s); this chain is {}'s, trading class {}; the others: {}",
            rows.len(),
            row.exchange,
            row.trading_class,
            others.join(", ")
        )
    });
    Some((row, note))
}

/// The underlying's price from its snapshot: the last trade, else the mid of bid and
/// ask, else the previous close; and which it is.
fn price_of(q: &ibapi::prelude::Quote) -> Option<(Decimal, &'static str)> {
    let p = |v: Option<f64>| positive(v.and_then(decimal));
    if let Some(last) = p(q.last) {
        return Some((last, "TWS last trade"));
    }
    if let (Some(b), Some(a)) = (p(q.bid), p(q.ask))
        && b <= a
    {
        return Some(((b + a) / Decimal::TWO, "mid of TWS bid and ask"));
    }
    p(q.close).map(|c| (c, "TWS previous close (no trade or quote now)"))
}

/// One option contract of the expiry, as TWS's details describe it.
struct Listed {
    details: ContractDetails,
    right: Right,
    strike: Decimal,
}

impl TwsBroker {
    pub(super) async fn read_chain(
        &self,
        account: &str,
        query: &ChainQuery,
    ) -> Result<OptionChain, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let contract = self.contract_for(query.underlying.trim());
        self.with_session(|s| async move { self.chain_on(&s, account, query, &contract).await })
            .await
    }

    /// IBKR's "no such contract" for the underlying, named as the symbol asked.
    fn unknown_underlying(&self, e: BrokerError, asked: &str) -> BrokerError {
        match e {
            BrokerError::InvalidRequest { .. } => BrokerError::UnknownSymbol {
                account: self.config.id.clone(),
                symbol: tradedesk_core::error::quote(asked),
                known: "underlyings IBKR lists options on (use EXCHANGE:SYMBOL for non-US stocks)"
                    .to_owned(),
            },
            other => other,
        }
    }

    async fn chain_on(
        &self,
        s: &Session,
        account: &str,
        query: &ChainQuery,
        underlying: &Contract,
    ) -> Result<OptionChain, BrokerError> {
        let started = tokio::time::Instant::now();
        // Every read ends by then, so the answer is assembled within the account's timeout.
        let cut = started + self.config.timeout * 3 / 4;
        let mut out = OptionChain::default();
        let mut requests = 0usize;

        // 1. The underlying's contract details.
        requests += 1;
        let asked = query.underlying.trim();
        let mut sub = s
            .client
            .contract_details_stream(underlying)
            .subscribe()
            .await
            .map_err(|e| self.failure(&e, "asking the underlying's contract details"))
            .map_err(|e| self.unknown_underlying(e, asked))?;
        let read = self
            .read_quiet(
                &mut sub,
                QUIET,
                false,
                cut,
                "reading the underlying's contract details",
            )
            .await
            .map_err(|e| self.unknown_underlying(e, asked))?;
        drop(sub);
        let Some(found) = read.items.into_iter().next() else {
            return Err(if read.ended {
                self.unknown_underlying(
                    BrokerError::InvalidRequest {
                        account: account.to_owned(),
                        reason: String::new(),
                    },
                    asked,
                )
            } else {
                self.timeout()
            });
        };
        let under = found.contract;
        let symbol = under.symbol.as_str().to_owned();
        let currency = under.currency.as_str().to_owned();
        let exchange = [under.primary_exchange.as_str(), under.exchange.as_str()]
            .into_iter()
            .find(|e| !e.trim().is_empty() && *e != "SMART")
            .unwrap_or("SMART")
            .to_owned();
        out.underlying = InstrumentKey::new(exchange, symbol.clone()).qualified();
        out.currency = Currency::new_checked(&currency).ok();

        // 2. The option parameters, one answer per exchange.
        requests += 1;
        let mut sub = s
            .client
            .option_chain(&symbol, under.security_type.clone(), under.contract_id)
            .subscribe()
            .await
            .map_err(|e| self.failure(&e, "asking the option parameters"))?;
        let params = self
            .read_quiet(&mut sub, QUIET, false, cut, "reading the option parameters")
            .await?;
        drop(sub);
        if !params.ended && !params.items.is_empty() {
            out.notes.push(format!(
                "{account}: TWS sent no end to its option parameters (reqSecDefOptParams); the {} answer(s) that came within {} ms are used",
                params.items.len(),
                params.waited.as_millis()
            ));
        }
        let Some((row, others)) = pick_row(&params.items, &symbol) else {
            return Err(if params.ended {
                BrokerError::InvalidRequest {
                    account: account.to_owned(),
                    reason: format!("IBKR lists no options on {}", out.underlying),
                }
            } else {
                self.timeout()
            });
        };
        out.notes.extend(others.map(|n| format!("{account}: {n}")));
        let row_multiplier = row
            .multiplier
            .trim()
            .parse::<Decimal>()
            .ok()
            .filter(|m| m.is_sign_positive() && !m.is_zero());
        // Today in the underlying's exchange's zone: an expiry before it is gone.
        let today = super::exchange_time(Utc::now(), &currency).date_naive();
        let mut expiries: Vec<NaiveDate> = row
            .expirations
            .iter()
            .filter_map(|e| ib_date(e))
            .filter(|d| *d >= today)
            .collect();
        expiries.sort();
        expiries.dedup();
        out.expiries.clone_from(&expiries);
        let expiry = match query.expiry {
            Some(want) if !expiries.contains(&want) => {
                return Err(BrokerError::InvalidRequest {
                    account: account.to_owned(),
                    reason: format!(
                        "IBKR lists no {} option expiring {want} ({}, trading class {}); its expiries: {}",
                        out.underlying,
                        row.exchange,
                        row.trading_class,
                        listed_dates(&expiries)
                    ),
                });
            }
            Some(want) => want,
            None => match expiries.first() {
                Some(d) => *d,
                None => {
                    return Err(BrokerError::InvalidRequest {
                        account: account.to_owned(),
                        reason: format!("IBKR lists no unexpired option on {}", out.underlying),
                    });
                }
            },
        };
        out.expiry = Some(expiry);

        // 3. The underlying's price.
        requests += 1;
        let priced = match s.client.market_data(&under).snapshot().subscribe().await {
            Ok(mut sub) => self
                .read(
                    &mut sub,
                    cut,
                    |t| matches!(t, TickTypes::SnapshotEnd),
                    "reading the underlying's price",
                )
                .await
                .map(|ticks| price_of(&ibapi::prelude::Quote::from_ticks(&ticks))),
            Err(e) => Err(self.failure(&e, "asking the underlying's price")),
        };
        match priced {
            Ok(Some((p, source))) => {
                out.underlying_price = Some(p);
                out.underlying_price_source = Some(source.to_owned());
            }
            Ok(None) => out.notes.push(format!(
                "{account}: TWS sent no price for {}",
                out.underlying
            )),
            Err(e) => out.notes.push(format!(
                "{account}: the underlying's price could not be read ({e})"
            )),
        }

        // 4. The expiry's contracts.
        requests += 1;
        let wanted = Contract {
            symbol: under.symbol.clone(),
            security_type: SecurityType::Option,
            last_trade_date_or_contract_month: expiry.format("%Y%m%d").to_string(),
            exchange: "SMART".into(),
            currency: under.currency.clone(),
            trading_class: row.trading_class.clone(),
            ..Contract::default()
        };
        let mut sub = s
            .client
            .contract_details_stream(&wanted)
            .subscribe()
            .await
            .map_err(|e| self.failure(&e, "asking the expiry's contracts"))?;
        let listed = match self
            .read_quiet(
                &mut sub,
                QUIET,
                false,
                cut,
                "reading the expiry's contracts",
            )
            .await
        {
            Ok(read) => {
                if !read.ended {
                    out.notes.push(format!(
                        "{account}: TWS sent no end to the expiry's contract details; the {} that came are used",
                        read.items.len()
                    ));
                }
                read.items
            }
            Err(BrokerError::InvalidRequest { reason, .. }) => {
                out.notes.push(format!(
                    "{account}: TWS lists no contract of {} expiring {expiry} ({reason})",
                    out.underlying
                ));
                Vec::new()
            }
            Err(e) => return Err(e),
        };
        drop(sub);
        let mut listed: Vec<Listed> = listed
            .into_iter()
            .filter_map(|d| {
                let right = match d.contract.right {
                    Some(OptionRight::Call) => Right::Call,
                    Some(OptionRight::Put) => Right::Put,
                    None => return None,
                };
                let strike = decimal(d.contract.strike)?;
                Some(Listed {
                    details: d,
                    right,
                    strike,
                })
            })
            .collect();
        listed.sort_by(|a, b| {
            (a.strike, matches!(a.right, Right::Put))
                .cmp(&(b.strike, matches!(b.right, Right::Put)))
        });

        // 5. The window, capped, and its market data.
        let strikes: Vec<Decimal> = listed.iter().map(|l| l.strike).collect();
        let keep = strike_window(&strikes, out.underlying_price, query.strikes_around);
        let mut window: Vec<&Listed> = listed
            .iter()
            .filter(|l| keep.binary_search(&l.strike).is_ok())
            .collect();
        if window.len() > MAX_CONTRACTS {
            let centre = out.underlying_price.unwrap_or(Decimal::ZERO);
            let mut near = window.clone();
            near.sort_by_key(|l| (l.strike - centre).abs());
            near.truncate(MAX_CONTRACTS);
            out.notes.push(format!(
                "{account}: {} contracts are in the window: market data was asked for the {MAX_CONTRACTS} nearest the underlying's price (at most {MAX_CONTRACTS} a call: each holds a TWS market-data line); lower strikes_around",
                window.len()
            ));
            window.retain(|l| near.iter().any(|n| std::ptr::eq(*n, *l)));
            out.truncated = true;
        }
        let mut readers = tokio::task::JoinSet::new();
        for (i, l) in window.iter().enumerate() {
            requests += 1;
            let right = l.right;
            match s
                .client
                .market_data(&l.details.contract)
                .generic_ticks(&[generic_tick::OPTION_OPEN_INTEREST])
                .subscribe()
                .await
            {
                Ok(sub) => {
                    readers.spawn(async move { (i, read_ticks(sub, right, cut).await) });
                }
                Err(e) => {
                    readers.spawn(async move {
                        (
                            i,
                            Ticks {
                                failed: Some(e),
                                ..Ticks::default()
                            },
                        )
                    });
                }
            }
        }
        let mut answers: BTreeMap<usize, Ticks> = BTreeMap::new();
        while let Some(joined) = readers.join_next().await {
            if let Ok((i, t)) = joined {
                answers.insert(i, t);
            }
        }
        if !s.client.is_connected() {
            return Err(self.unavailable(
                format!(
                    "the connection to {} was lost while reading the chain's market data",
                    self.address()
                ),
                &self.start_hint(),
            ));
        }

        let mut silent = Vec::new();
        let mut refused: BTreeMap<i32, (String, Vec<String>)> = BTreeMap::new();
        let mut failed = Vec::new();
        let mut delayed = Vec::new();
        let mut greekless = 0usize;
        for (i, l) in window.iter().enumerate() {
            let c = &l.details.contract;
            let code = c.local_symbol.split_whitespace().collect::<String>();
            let symbol_of = if code.is_empty() {
                occ::compact(&symbol, expiry, l.right, l.strike)
            } else {
                code
            };
            let expiry_of = ib_date(&c.last_trade_date_or_contract_month).unwrap_or(expiry);
            let Some(expires_at) = close_of(expiry_of, &l.details, &currency) else {
                continue;
            };
            let mut row = ChainContract {
                symbol: symbol_of.clone(),
                right: l.right,
                strike: l.strike,
                expiry: expiry_of,
                expires_at,
                multiplier: stated_multiplier(c).or(row_multiplier),
                bid: None,
                ask: None,
                last: None,
                last_time: None,
                volume: None,
                open_interest: None,
                open_interest_date: None,
                implied_volatility: None,
                greeks: None,
            };
            let t = answers.remove(&i).unwrap_or_default();
            if let Some(e) = &t.failed {
                match e {
                    ibapi::Error::Notice(n) if NOT_SUBSCRIBED.contains(&n.code) => {
                        refused
                            .entry(n.code)
                            .or_insert_with(|| (n.message.clone(), Vec::new()))
                            .1
                            .push(symbol_of.clone());
                    }
                    other => failed.push(format!(
                        "{symbol_of} ({})",
                        self.failure(other, "reading market data")
                    )),
                }
            } else if let Some((code, message)) =
                t.notices.iter().find(|(c, _)| NOT_SUBSCRIBED.contains(c))
                && t.ticks.is_empty()
            {
                refused
                    .entry(*code)
                    .or_insert_with(|| (message.clone(), Vec::new()))
                    .1
                    .push(symbol_of.clone());
            } else if t.silent {
                silent.push(symbol_of.clone());
            }
            if t.delayed() {
                delayed.push(symbol_of.clone());
            }
            let q = t.quote();
            let price = |v: Option<f64>| positive(v.and_then(decimal));
            row.bid = price(q.bid);
            row.ask = price(q.ask);
            row.last = price(q.last);
            row.last_time = super::snapshots::last_time(&t.ticks);
            row.volume = q.volume.and_then(decimal).filter(|v| !v.is_sign_negative());
            row.open_interest = t.open_interest(l.right);
            if let Some(m) = &q.model_greeks {
                row.implied_volatility = m.implied_volatility;
                if let (Some(delta), Some(gamma), Some(theta), Some(vega)) =
                    (m.delta, m.gamma, m.theta, m.vega)
                {
                    row.greeks = Some(BrokerGreeks {
                        delta,
                        gamma,
                        theta,
                        vega,
                        rho: None,
                    });
                }
                if out.underlying_price.is_none()
                    && let Some(u) = m
                        .underlying_price
                        .and_then(decimal)
                        .and_then(|u| positive(Some(u)))
                {
                    out.underlying_price = Some(u);
                    out.underlying_price_source =
                        Some("TWS option model's underlying price".to_owned());
                }
            }
            if row.greeks.is_none()
                && (row.bid.is_some() || row.ask.is_some() || row.last.is_some())
            {
                greekless += 1;
            }
            out.contracts.push(row);
        }

        out.notes.push(format!(
            "{account}: IBKR option parameters ({} {}, multiplier {}), the expiry's contract details, and one market-data request per contract with open interest (generic tick 101); greeks are TWS's model computation (implied volatility, delta, gamma, vega per volatility point, theta per day; IBKR computes no rho)",
            row.exchange,
            row.trading_class,
            row_multiplier.map_or_else(|| "not stated".to_owned(), |m| m.normalize().to_string())
        ));
        if row_multiplier.is_none() {
            out.notes.push(format!(
                "{account}: IBKR's option parameters state no multiplier: a contract's is its details' where they give one, else null"
            ));
        }
        for (code, (message, symbols)) in &refused {
            out.notes.push(format!(
                "{account}: no market-data subscription for {} contract(s) (TWS error {code}: {message}): their rows have no prices or greeks; US options need IBKR's OPRA subscription in Client Portal: {}",
                symbols.len(),
                symbols.join(", ")
            ));
        }
        if !delayed.is_empty() {
            out.notes.push(format!(
                "{account}: TWS sent delayed data (no real-time subscription) for {} contract(s): {}",
                delayed.len(),
                delayed.join(", ")
            ));
        }
        if !silent.is_empty() {
            out.notes.push(format!(
                "{account}: {} contract(s) sent no market data within {} ms (three quarters of the account's timeout): {}; their rows have no figures",
                silent.len(),
                (self.config.timeout * 3 / 4).as_millis(),
                silent.join(", ")
            ));
        }
        if !failed.is_empty() {
            out.notes.push(format!(
                "{account}: market data failed for {}",
                failed.join("; ")
            ));
        }
        if greekless > 0 {
            out.notes.push(format!(
                "{account}: TWS sent prices without its model computation for {greekless} contract(s); IBKR states no rate"
            ));
        }
        out.as_of = Some(Utc::now());
        out.requests = requests;
        Ok(out)
    }
}
