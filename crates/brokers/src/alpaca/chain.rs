//! `get_option_chain` at Alpaca (docs/dev/alpaca-facts.md, "Option chains"): the
//! underlying's price from its stock snapshot; the listed contracts, with open interest
//! and multiplier, from the trading API's `GET /v2/options/contracts`; and one expiry's
//! quotes, trades, day bars, implied volatility and greeks from the data API's
//! `GET /v1beta1/options/snapshots/{underlying}`. Both lists are paged and followed up to
//! a cap; a cap reached is said. Greeks and implied volatility are optional in Alpaca's
//! answer (a contract with no recent quote has none): the tool fills them in.

use std::collections::BTreeMap;

use chrono::{Duration, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde_json::Value;

use super::{AlpacaBroker, dec, eastern, text, time};
use crate::BrokerError;
use crate::market_snapshot::positive;
use crate::occ::{self, Right};
use crate::option_chain::{
    BrokerGreeks, ChainContract, ChainQuery, OptionChain, listed_dates, strikes_near, us_close,
};

/// Pages of contracts (up to 10000 each) and of snapshots (up to 1000 each) followed.
const MAX_CONTRACT_PAGES: usize = 10;
const MAX_SNAPSHOT_PAGES: usize = 10;
/// How far ahead expiries are listed.
const EXPIRY_HORIZON_DAYS: i64 = 3 * 366;

/// What the contracts list says of one contract.
#[derive(Debug, Clone, Default)]
struct Listed {
    multiplier: Option<Decimal>,
    open_interest: Option<Decimal>,
    open_interest_date: Option<NaiveDate>,
}

fn date(v: &Value, field: &str) -> Option<NaiveDate> {
    text(v, field).and_then(|t| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
}

fn float(v: &Value, field: &str) -> Option<f64> {
    v.get(field)
        .and_then(Value::as_f64)
        .filter(|x| x.is_finite())
}

impl AlpacaBroker {
    pub(super) async fn read_option_chain(
        &self,
        account: &str,
        q: &ChainQuery,
    ) -> Result<OptionChain, BrokerError> {
        self.check_account(account)?;
        let bare = q
            .underlying
            .rsplit_once(':')
            .map_or(q.underlying.as_str(), |(_, b)| b)
            .trim()
            .to_ascii_uppercase();
        if bare.is_empty()
            || bare.len() > 6
            || !bare
                .chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '.')
        {
            return Err(BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: format!(
                    "{} is not a US stock or ETF symbol: Alpaca's option chains are by the underlying's ticker, such as AAPL",
                    tradedesk_core::error::quote(&q.underlying)
                ),
            });
        }
        let mut out = OptionChain {
            as_of: Some(Utc::now()),
            ..OptionChain::default()
        };
        // The underlying: its latest trade, else the middle of its quote.
        let snap = self
            .read_snapshots(account, std::slice::from_ref(&bare))
            .await?;
        out.requests += snap.requests;
        let Some(row) = snap.rows.into_iter().next() else {
            return Err(BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: format!(
                    "Alpaca has no snapshot of {bare}: not a US stock or ETF it quotes, so no chain"
                ),
            });
        };
        out.underlying = row.market.clone();
        out.currency = row.currency;
        let mid = match (row.bid, row.ask) {
            (Some(b), Some(a)) if b <= a => Some((b + a) / Decimal::TWO),
            _ => None,
        };
        (out.underlying_price, out.underlying_price_source) = match (row.last, mid) {
            (Some(p), _) => (Some(p), Some("the latest IEX trade".to_owned())),
            (None, Some(m)) => (Some(m), Some("the middle of the IEX quote".to_owned())),
            _ => (None, None),
        };
        let now = Utc::now();
        let today = now.with_timezone(&eastern(now)).date_naive();

        // Every contract listed: the expiries, strikes, multipliers and open interest.
        let listed = match self.list_contracts(&bare, today, &mut out).await {
            Ok(l) => Some(l),
            Err(e @ BrokerError::Timeout { .. }) => return Err(e),
            Err(e) => {
                out.notes.push(format!(
                    "{account}: the contract list (GET /v2/options/contracts) failed ({e}): open interest is null, and a multiplier is the OCC standard 100 only for a contract whose symbol is not adjusted"
                ));
                None
            }
        };
        let mut expiries: Vec<NaiveDate> = listed
            .iter()
            .flat_map(|l| l.keys().map(|(d, _, _)| *d))
            .collect();
        expiries.sort();
        expiries.dedup();
        let expiry = match (q.expiry, &listed) {
            (Some(want), Some(_)) if !expiries.contains(&want) => {
                return Err(BrokerError::InvalidRequest {
                    account: account.to_owned(),
                    reason: format!(
                        "Alpaca lists no {bare} contract expiring {want}; its expiries: {}",
                        listed_dates(&expiries)
                    ),
                });
            }
            (Some(want), _) => Some(want),
            (None, _) => expiries.first().copied(),
        };
        if listed.is_some() && expiry.is_none() {
            return Err(BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: format!("Alpaca lists no active option contract on {bare}"),
            });
        }
        // The strike window, where the list and the price say it.
        let window = match (&listed, expiry, out.underlying_price, q.strikes_around) {
            (Some(l), Some(e), Some(p), Some(n)) => {
                let strikes: Vec<Decimal> = l
                    .keys()
                    .filter(|(d, _, _)| *d == e)
                    .map(|(_, k, _)| *k)
                    .collect();
                let near = strikes_near(&strikes, p, n);
                near.first().zip(near.last()).map(|(a, b)| (*a, *b))
            }
            _ => None,
        };
        let snapshots = self
            .chain_snapshots(&bare, expiry, today, window, &mut out)
            .await?;
        // Without the list, the nearest expiry the snapshots hold.
        let expiry = expiry.or_else(|| {
            snapshots
                .keys()
                .filter_map(|s| occ::parse(s))
                .map(|p| p.expiry)
                .filter(|d| *d >= today)
                .min()
        });
        if expiries.is_empty() {
            expiries = snapshots
                .keys()
                .filter_map(|s| occ::parse(s))
                .map(|p| p.expiry)
                .collect();
            expiries.sort();
            expiries.dedup();
            out.notes.push(format!(
                "{account}: expiries are those of the snapshots read, not Alpaca's whole list"
            ));
        }
        let mut standard_guess = 0usize;
        for (symbol, s) in &snapshots {
            let Some(p) = occ::parse(symbol) else {
                continue;
            };
            if Some(p.expiry) != expiry || !p.root.starts_with(bare.as_str()) {
                continue;
            }
            let meta = listed
                .as_ref()
                .and_then(|l| l.get(&(p.expiry, p.strike, symbol.clone())).cloned());
            let multiplier = match &meta {
                Some(m) => m.multiplier,
                None if !p.is_adjusted() => {
                    standard_guess += 1;
                    Some(Decimal::ONE_HUNDRED)
                }
                None => None,
            };
            let part = |name: &str| s.get(name).filter(|v| v.is_object());
            let quote = part("latestQuote");
            let trade = part("latestTrade");
            let day = part("dailyBar");
            let greeks = part("greeks").and_then(|g| {
                Some(BrokerGreeks {
                    delta: float(g, "delta")?,
                    gamma: float(g, "gamma")?,
                    theta: float(g, "theta")?,
                    vega: float(g, "vega")?,
                    rho: Some(float(g, "rho")?),
                })
            });
            let Some(expires_at) = us_close(p.expiry) else {
                continue;
            };
            out.contracts.push(ChainContract {
                symbol: symbol.clone(),
                right: p.right,
                strike: p.strike,
                expiry: p.expiry,
                expires_at,
                multiplier,
                bid: positive(quote.and_then(|v| dec(v, "bp"))),
                ask: positive(quote.and_then(|v| dec(v, "ap"))),
                last: positive(trade.and_then(|v| dec(v, "p"))),
                last_time: trade.and_then(|v| time(v, "t")),
                volume: day
                    .and_then(|v| dec(v, "v"))
                    .filter(|v| !v.is_sign_negative()),
                open_interest: meta.as_ref().and_then(|m| m.open_interest),
                open_interest_date: meta.as_ref().and_then(|m| m.open_interest_date),
                implied_volatility: float(s, "impliedVolatility").filter(|v| *v > 0.0),
                greeks,
            });
        }
        // Listed contracts with no snapshot still belong to the chain, without prices.
        if let (Some(l), Some(e)) = (&listed, expiry) {
            for ((d, k, symbol), m) in l {
                if *d != e
                    || snapshots.contains_key(symbol)
                    || window.is_some_and(|(lo, hi)| *k < lo || *k > hi)
                {
                    continue;
                }
                let (Some(p), Some(expires_at)) = (occ::parse(symbol), us_close(*d)) else {
                    continue;
                };
                out.contracts.push(ChainContract {
                    symbol: symbol.clone(),
                    right: p.right,
                    strike: *k,
                    expiry: *d,
                    expires_at,
                    multiplier: m.multiplier,
                    bid: None,
                    ask: None,
                    last: None,
                    last_time: None,
                    volume: None,
                    open_interest: m.open_interest,
                    open_interest_date: m.open_interest_date,
                    implied_volatility: None,
                    greeks: None,
                });
            }
        }
        out.contracts.sort_by(|a, b| {
            (a.strike, a.right == Right::Put).cmp(&(b.strike, b.right == Right::Put))
        });
        if standard_guess > 0 {
            out.notes.push(format!(
                "{account}: {standard_guess} contract(s) not in the contract list: their multiplier is the OCC standard 100 shares, their symbols not being adjusted ones"
            ));
        }
        out.notes.push(format!(
            "{account}: option prices are per share, from Alpaca's default option feed (OPRA with a subscription, else its indicative feed, whose trades are delayed and quotes modified); greeks and implied volatility are Alpaca's where it sends them"
        ));
        out.expiries = expiries;
        out.expiry = expiry;
        Ok(out)
    }

    /// `GET /v2/options/contracts` for the underlying: active contracts expiring from
    /// today to three years ahead, every page up to the cap, by (expiry, strike, symbol).
    async fn list_contracts(
        &self,
        underlying: &str,
        today: NaiveDate,
        out: &mut OptionChain,
    ) -> Result<BTreeMap<(NaiveDate, Decimal, String), Listed>, BrokerError> {
        let mut found = BTreeMap::new();
        let mut token: Option<String> = None;
        for page in 0.. {
            let mut query = vec![
                ("underlying_symbols", underlying.to_owned()),
                ("status", "active".to_owned()),
                ("limit", "10000".to_owned()),
            ];
            // Every expiry ahead, so the answer lists them all: without an upper bound
            // Alpaca lists only up to the next weekend.
            query.push(("expiration_date_gte", today.to_string()));
            query.push((
                "expiration_date_lte",
                (today + Duration::days(EXPIRY_HORIZON_DAYS)).to_string(),
            ));
            if let Some(t) = &token {
                query.push(("page_token", t.clone()));
            }
            out.requests += 1;
            let body = self
                .get_ok(self.trading("/v2/options/contracts"), &query, false)
                .await?;
            let Some(rows) = body.get("option_contracts").and_then(Value::as_array) else {
                return Err(self.unavailable(
                    "the contract list is not an object with option_contracts".to_owned(),
                ));
            };
            for r in rows {
                let (Some(symbol), Some(d), Some(k)) = (
                    text(r, "symbol"),
                    date(r, "expiration_date"),
                    dec(r, "strike_price"),
                ) else {
                    continue;
                };
                found.insert(
                    (d, k.normalize(), symbol.to_ascii_uppercase()),
                    Listed {
                        multiplier: dec(r, "multiplier")
                            .filter(|m| m.is_sign_positive() && !m.is_zero()),
                        open_interest: dec(r, "open_interest").filter(|v| !v.is_sign_negative()),
                        open_interest_date: date(r, "open_interest_date"),
                    },
                );
            }
            token = text(&body, "next_page_token").map(str::to_owned);
            if token.is_none() {
                break;
            }
            if page + 1 >= MAX_CONTRACT_PAGES {
                out.truncated = true;
                out.notes.push(format!(
                    "the contract list has more than {MAX_CONTRACT_PAGES} pages: later expiries may be missing"
                ));
                break;
            }
        }
        Ok(found)
    }

    /// `GET /v1beta1/options/snapshots/{underlying}` for one expiry (all from today when
    /// none is known) and a strike window, every page up to the cap.
    async fn chain_snapshots(
        &self,
        underlying: &str,
        expiry: Option<NaiveDate>,
        today: NaiveDate,
        window: Option<(Decimal, Decimal)>,
        out: &mut OptionChain,
    ) -> Result<BTreeMap<String, Value>, BrokerError> {
        let mut found = BTreeMap::new();
        let mut token: Option<String> = None;
        let url = self.data(&format!("/v1beta1/options/snapshots/{underlying}"));
        for page in 0.. {
            let mut query = vec![("limit", "1000".to_owned())];
            match expiry {
                Some(e) => query.push(("expiration_date", e.to_string())),
                None => query.push(("expiration_date_gte", today.to_string())),
            }
            if let Some((lo, hi)) = window {
                query.push(("strike_price_gte", lo.to_string()));
                query.push(("strike_price_lte", hi.to_string()));
            }
            if let Some(t) = &token {
                query.push(("page_token", t.clone()));
            }
            out.requests += 1;
            let (status, body) = self
                .send(self.client.get(url.clone()).query(&query), false)
                .await?;
            if !(200..300).contains(&status) {
                return Err(BrokerError::InvalidRequest {
                    account: self.config.account.clone(),
                    reason: format!(
                        "Alpaca answered {status} to the option chain request ({})",
                        text(&body, "message")
                            .map_or_else(|| "no message".to_owned(), tradedesk_core::error::quote)
                    ),
                });
            }
            let Some(snaps) = body.get("snapshots").and_then(Value::as_object) else {
                return Err(self.unavailable(
                    "the option chain answer is not an object with snapshots".to_owned(),
                ));
            };
            found.extend(
                snaps
                    .iter()
                    .map(|(k, v)| (k.to_ascii_uppercase(), v.clone())),
            );
            token = text(&body, "next_page_token").map(str::to_owned);
            if token.is_none() {
                break;
            }
            if page + 1 >= MAX_SNAPSHOT_PAGES {
                out.truncated = true;
                out.notes.push(format!(
                    "the chain has more than {MAX_SNAPSHOT_PAGES} pages of snapshots: tradedesk read the first {MAX_SNAPSHOT_PAGES}; narrow it with strikes_around"
                ));
                break;
            }
        }
        Ok(found)
    }
}
