//! `get_option_chain` at OpenD (docs/dev/futu-opend-facts.md, section 16): the
//! underlying's expiries from `Qot_GetOptionExpirationDate` (3224), one expiry's contracts
//! (each call and put's code, strike and contract multiplier) from `Qot_GetOptionChain`
//! (3209), and the underlying's and the contracts' prices, open interest, implied
//! volatility and greeks from `Qot_GetSecuritySnapshot` (3203, 400 codes a request, 20 HK
//! ones with BMP quote rights). OpenD lists options on US and HK underlyings only: Bursa
//! Malaysia has none, and a Bursa underlying is refused before anything is sent.
//!
//! OpenD allows 10 option-chain requests and 60 snapshot requests per 30 s; this process
//! counts what it sends ([`Pace`]) and refuses a call that would go past them, saying
//! when to retry, rather than spend OpenD's budget on a refusal. The whole read is bounded
//! by the account's timeout (one connection, one `with_conn`).

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;

use super::snapshots::{HK_PER_REQUEST, PER_REQUEST};
use super::{Conn, OpenDBroker, decimal, proto};
use crate::BrokerError;
use crate::market_snapshot::positive;
use crate::occ::{self, Right};
use crate::option_chain::{
    BrokerGreeks, ChainContract, ChainQuery, OptionChain, listed_dates, strike_window, us_close,
};

/// Snapshot requests one chain may send (with the underlying's): 4800 US contracts, or
/// 220 HK ones at 20 a request.
const MAX_SNAPSHOT_REQUESTS: usize = 12;
/// OpenD's request windows.
const WINDOW: Duration = Duration::from_secs(30);

/// OpenD's limit for a quote proto tradedesk paces: requests per 30 s, and what they are.
/// The expiry list is paced as the chain is (OpenD's own figure for it is not stated in
/// what was read).
pub(super) fn limit_of(proto_id: u32) -> Option<(usize, &'static str)> {
    match proto_id {
        proto::GET_OPTION_CHAIN => Some((10, "option-chain")),
        proto::GET_OPTION_EXPIRATION_DATE => Some((10, "option-expiry")),
        proto::id::GET_SECURITY_SNAPSHOT => Some((60, "snapshot")),
        _ => None,
    }
}

/// When this process sent each paced request, by proto id.
#[derive(Debug, Default)]
pub(super) struct Pace(std::sync::Mutex<BTreeMap<u32, VecDeque<Instant>>>);

impl Pace {
    /// Counts `n` requests of `proto_id` now, or says how long until they fit in OpenD's
    /// window (nothing is counted then).
    fn take(&self, proto_id: u32, n: usize) -> Result<(), Duration> {
        let Some((limit, _)) = limit_of(proto_id) else {
            return Ok(());
        };
        let mut sent = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let seen = sent.entry(proto_id).or_default();
        while seen.front().is_some_and(|t| t.elapsed() >= WINDOW) {
            seen.pop_front();
        }
        if seen.len() + n > limit {
            // The request that must leave the window before `n` more fit.
            let k = (seen.len() + n - limit).min(seen.len()).saturating_sub(1);
            let wait = seen
                .get(k)
                .map_or(WINDOW, |t| WINDOW.saturating_sub(t.elapsed()));
            return Err(wait);
        }
        seen.extend(std::iter::repeat_n(Instant::now(), n));
        Ok(())
    }
}

/// One contract as the chain lists it.
#[derive(Debug, Clone)]
struct Listed {
    security: proto::Security,
    right: Right,
    strike: Decimal,
    /// `lotSize` of the static data: for an option, the contract multiplier.
    lot: Option<Decimal>,
}

/// When an option of `market` stops trading on its expiry day: 16:00 in New York (US) or
/// Hong Kong (HK).
fn close_of(market: i32, expiry: NaiveDate) -> Option<DateTime<Utc>> {
    if market == proto::qot_market::HK {
        let zone = crate::zones::named("Asia/Hong_Kong")?;
        crate::zones::resolve(expiry.and_hms_opt(16, 0, 0)?, zone)
    } else {
        us_close(expiry)
    }
}

/// The root of an OpenD option code (`AAPL` of `AAPL240126P50000`), when it is one.
fn root_of(code: &str) -> Option<&str> {
    if !super::is_option_code(code) {
        return None;
    }
    let at = code.rfind(['C', 'P'])?;
    code.get(..at.checked_sub(6)?)
}

fn date(text: Option<&str>) -> Option<NaiveDate> {
    NaiveDate::parse_from_str(text?.trim().get(..10)?, "%Y-%m-%d").ok()
}

/// OpenD's percentage (20 means 20%) as a fraction: an analytics figure, `f64` as the
/// chain's volatility is (docs/methodology/research.md).
#[allow(clippy::float_arithmetic)]
fn fraction_of_percent(v: f64) -> f64 {
    v / 100.0
}

/// The broker's greeks, when OpenD sent them: all five, not all 0 (OpenD's required
/// fields carry 0 when it has none).
fn greeks_of(o: &proto::OptionSnapshotExData) -> Option<BrokerGreeks> {
    let g = BrokerGreeks {
        delta: o.delta.filter(|v| v.is_finite())?,
        gamma: o.gamma.filter(|v| v.is_finite())?,
        theta: o.theta.filter(|v| v.is_finite())?,
        vega: o.vega.filter(|v| v.is_finite())?,
        rho: Some(o.rho.filter(|v| v.is_finite())?),
    };
    let zero = [g.delta, g.gamma, g.theta, g.vega, g.rho.unwrap_or(0.0)]
        .iter()
        .all(|v| v.abs() < f64::EPSILON);
    (!zero).then_some(g)
}

/// Shares per contract and where OpenD said it: the snapshot's contract size (float,
/// else integer), else the chain's lotSize.
fn multiplier_of(
    ex: Option<&proto::OptionSnapshotExData>,
    lot: Option<Decimal>,
) -> (Option<Decimal>, &'static str) {
    let size = ex.and_then(|o| {
        decimal(o.contract_size_float)
            .or_else(|| o.contract_size.map(Decimal::from))
            .filter(|d| d.is_sign_positive() && !d.is_zero())
    });
    match (size, lot) {
        (Some(s), _) => (Some(s.normalize()), "snapshot"),
        (None, Some(l)) => (Some(l), "chain"),
        (None, None) => (None, "none"),
    }
}

impl OpenDBroker {
    /// The underlying's security for a chain: `EXCHANGE:CODE` as written; a bare code of
    /// digits is the account's market's (HK, or Bursa at a MY account), one of letters a
    /// US symbol.
    fn chain_security(&self, underlying: &str) -> proto::Security {
        let bare = !underlying.contains(':');
        let mut security = self.security(underlying);
        if bare && !underlying.trim().bytes().all(|b| b.is_ascii_digit()) {
            security.market = Some(proto::qot_market::US);
        }
        if let Some(code) = &mut security.code {
            *code = code.to_ascii_uppercase();
        }
        security
    }

    /// Counts `n` requests of `proto_id` against OpenD's limit, or refuses.
    fn paced(&self, proto_id: u32, n: usize) -> Result<(), BrokerError> {
        self.pace.take(proto_id, n).map_err(|wait| {
            let (limit, what) = limit_of(proto_id).unwrap_or((0, "quote"));
            self.unavailable(
                format!(
                    "OpenD allows {limit} {what} requests per 30 s and this process has sent them: tradedesk did not send {n} more (proto {proto_id})"
                ),
                &format!(
                    "retry in {} s",
                    wait.max(Duration::from_secs(1)).as_secs_f64().ceil()
                ),
            )
        })
    }

    pub(super) async fn read_option_chain(
        &self,
        account: &str,
        q: &ChainQuery,
    ) -> Result<OptionChain, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let owner = self.chain_security(&q.underlying);
        let code = owner.code.clone().unwrap_or_default();
        if code.is_empty() {
            return Err(self.invalid(
                "the underlying is empty: give its code, such as US:AAPL or HKEX:00700".to_owned(),
            ));
        }
        if owner.market == Some(proto::qot_market::MY) {
            return Err(self.invalid(format!(
                "Bursa Malaysia lists no options, so OpenD has no option chain for {}: moomoo/Futu serve option chains on US (US:AAPL) and HK (HKEX:00700) underlyings",
                tradedesk_core::error::quote(&q.underlying)
            )));
        }
        let q = q.clone();
        self.with_conn(move |me, conn| Box::pin(async move { me.chain_on(conn, owner, &q).await }))
            .await
    }

    fn invalid(&self, reason: String) -> BrokerError {
        BrokerError::InvalidRequest {
            account: self.config.id.clone(),
            reason,
        }
    }

    async fn chain_on(
        &self,
        conn: &mut Conn,
        owner: proto::Security,
        q: &ChainQuery,
    ) -> Result<OptionChain, BrokerError> {
        let market = owner.market.unwrap_or(proto::qot_market::US);
        let (key, currency) = Self::key_of(&owner);
        let shown = key.qualified();
        let mut out = OptionChain {
            underlying: shown.clone(),
            currency: Some(currency),
            as_of: Some(Utc::now()),
            ..OptionChain::default()
        };

        // The expiries.
        self.paced(proto::GET_OPTION_EXPIRATION_DATE, 1)?;
        out.requests += 1;
        let dates: proto::GetOptionExpirationDateResponse = self
            .call(
                conn,
                proto::GET_OPTION_EXPIRATION_DATE,
                &proto::GetOptionExpirationDateRequest {
                    c2s: Some(proto::GetOptionExpirationDateC2s {
                        owner: Some(owner.clone()),
                    }),
                },
            )
            .await
            .map_err(|e| self.unknown_underlying(&q.underlying, e))?;
        let mut expiries: Vec<NaiveDate> = dates
            .s2c
            .map(|s| s.date_list)
            .unwrap_or_default()
            .iter()
            .filter(|d| d.option_expiry_date_distance.is_none_or(|n| n >= 0))
            .filter_map(|d| date(d.strike_time.as_deref()))
            .collect();
        expiries.sort();
        expiries.dedup();
        let Some(first) = expiries.first().copied() else {
            return Err(self.invalid(format!(
                "OpenD lists no option expiring from today on {shown}"
            )));
        };
        let expiry = match q.expiry {
            Some(want) if !expiries.contains(&want) => {
                return Err(self.invalid(format!(
                    "OpenD lists no {shown} option expiring {want}; its expiries: {}",
                    listed_dates(&expiries)
                )));
            }
            Some(want) => want,
            None => first,
        };
        out.expiries.clone_from(&expiries);
        out.expiry = Some(expiry);

        // The contracts of that expiry.
        self.paced(proto::GET_OPTION_CHAIN, 1)?;
        out.requests += 1;
        let day = expiry.format("%Y-%m-%d").to_string();
        let chain: proto::GetOptionChainResponse = self
            .call(
                conn,
                proto::GET_OPTION_CHAIN,
                &proto::GetOptionChainRequest {
                    c2s: Some(proto::GetOptionChainC2s {
                        owner: Some(owner.clone()),
                        begin_time: Some(day.clone()),
                        end_time: Some(day),
                    }),
                },
            )
            .await?;
        let mut listed: Vec<Listed> = Vec::new();
        let mut skipped = 0usize;
        for info in chain
            .s2c
            .into_iter()
            .flat_map(|s| s.option_chain)
            .flat_map(|c| c.option)
            .flat_map(|item| [item.call, item.put])
            .flatten()
        {
            match listed_of(&info, expiry) {
                Some(l) => listed.push(l),
                None => skipped += 1,
            }
        }
        if listed.is_empty() {
            return Err(self.invalid(format!(
                "OpenD's chain of {shown} holds no contract expiring {expiry}"
            )));
        }
        if skipped > 0 {
            out.notes.push(format!(
                "{}: {skipped} row(s) of OpenD's chain had no code, type, strike or this expiry and are left out",
                self.config.id
            ));
        }

        // The underlying's price, then the contracts near it.
        self.paced(proto::id::GET_SECURITY_SNAPSHOT, 1)?;
        out.requests += 1;
        let under = self
            .snapshot_request(conn, vec![owner.clone()])
            .await
            .map_err(|e| self.unknown_underlying(&q.underlying, e))?;
        if let Some(b) = under.into_iter().find_map(|s| s.basic) {
            let mid = match (
                positive(decimal(b.bid_price)),
                positive(decimal(b.ask_price)),
            ) {
                (Some(bid), Some(ask)) if bid <= ask => Some((bid + ask) / Decimal::TWO),
                _ => None,
            };
            (out.underlying_price, out.underlying_price_source) =
                match (positive(decimal(b.cur_price)), mid) {
                    (Some(p), _) => (Some(p), Some("OpenD's latest price (curPrice)".to_owned())),
                    (None, Some(m)) => (
                        Some(m),
                        Some("the middle of OpenD's bid and ask".to_owned()),
                    ),
                    _ => (None, None),
                };
        }
        let strikes: Vec<Decimal> = listed.iter().map(|l| l.strike).collect();
        let total = strike_window(&strikes, None, None).len();
        let window = strike_window(&strikes, out.underlying_price, q.strikes_around);
        listed.retain(|l| window.binary_search(&l.strike).is_ok());
        if window.len() < total {
            out.truncated = true;
            out.notes.push(format!(
                "{}: {} of the expiry's {total} strikes read (those around the underlying's price); raise strikes_around for more",
                self.config.id,
                window.len()
            ));
        }
        listed.sort_by(|a, b| {
            (a.strike, a.right == Right::Put).cmp(&(b.strike, b.right == Right::Put))
        });
        let per = if market == proto::qot_market::HK {
            HK_PER_REQUEST
        } else {
            PER_REQUEST
        };
        let batches: Vec<&[Listed]> = listed.chunks(per).collect();
        let sendable = batches.len().min(MAX_SNAPSHOT_REQUESTS - 1);
        self.paced(proto::id::GET_SECURITY_SNAPSHOT, sendable)?;
        let mut snaps: BTreeMap<String, proto::Snapshot> = BTreeMap::new();
        for batch in &batches[..sendable] {
            out.requests += 1;
            let list = self
                .snapshot_request(conn, batch.iter().map(|l| l.security.clone()).collect())
                .await?;
            for s in list {
                if let Some(c) = s
                    .basic
                    .as_ref()
                    .and_then(|b| b.security.as_ref())
                    .and_then(|s| s.code.clone())
                {
                    snaps.insert(c.to_ascii_uppercase(), s);
                }
            }
        }
        if sendable < batches.len() {
            out.truncated = true;
            out.notes.push(format!(
                "{}: the window holds {} contracts, more than {} snapshot requests of {per} carry: the last {} are listed without prices; lower strikes_around",
                self.config.id,
                listed.len(),
                MAX_SNAPSHOT_REQUESTS - 1,
                listed.len() - sendable * per
            ));
        }

        let (mut from_snapshot, mut from_chain, mut without) = (0usize, 0usize, 0usize);
        let expires = close_of(market, expiry);
        for l in &listed {
            let code = l.security.code.clone().unwrap_or_default();
            let snap = snaps.get(&code.to_ascii_uppercase());
            let basic = snap.and_then(|s| s.basic.as_ref());
            let ex = snap.and_then(|s| s.option_ex_data.as_ref());
            let (multiplier, source) = multiplier_of(ex, l.lot);
            match source {
                "snapshot" => from_snapshot += 1,
                "chain" => from_chain += 1,
                _ => without += 1,
            }
            let Some(expires_at) = expires else {
                continue;
            };
            let symbol = if market == proto::qot_market::HK {
                code.clone()
            } else {
                let root = root_of(&code).unwrap_or(key.symbol.as_str());
                occ::compact(root, expiry, l.right, l.strike)
            };
            out.contracts.push(ChainContract {
                symbol,
                right: l.right,
                strike: l.strike,
                expiry,
                expires_at,
                multiplier,
                bid: positive(basic.and_then(|b| decimal(b.bid_price))),
                ask: positive(basic.and_then(|b| decimal(b.ask_price))),
                last: positive(basic.and_then(|b| decimal(b.cur_price))),
                last_time: None,
                volume: basic
                    .and_then(|b| b.volume)
                    .map(Decimal::from)
                    .filter(|v| !v.is_sign_negative()),
                open_interest: ex
                    .and_then(|o| o.open_interest)
                    .map(Decimal::from)
                    .filter(|v| !v.is_sign_negative()),
                open_interest_date: None,
                implied_volatility: ex
                    .and_then(|o| o.implied_volatility)
                    .filter(|v| v.is_finite() && *v > 0.0)
                    .map(fraction_of_percent),
                greeks: ex.and_then(greeks_of),
            });
        }
        let id = &self.config.id;
        out.notes.push(format!(
            "{id}: OpenD's option snapshots: prices per share (real-time or delayed as the account's quote rights give), last is its latest price, volume the day's contracts; implied volatility is OpenD's percentage read as a fraction, and the greeks are OpenD's as sent (its protocol states no units: read as per share, theta per day, vega and rho per point)"
        ));
        out.notes.push(format!(
            "{id}: multipliers are OpenD's: the snapshot's contract size for {from_snapshot} contract(s), the chain's lot size for {from_chain}{}",
            if without > 0 {
                format!(", none for {without} (null, never assumed)")
            } else {
                String::new()
            }
        ));
        if market == proto::qot_market::HK {
            out.notes.push(format!(
                "{id}: HK contracts carry OpenD's own codes (not OCC symbols): option_strategy takes US contracts only"
            ));
        }
        out.notes.push(format!(
            "{id}: {} request(s) to OpenD; it allows 10 option-chain and 60 snapshot requests per 30 s, and tradedesk refuses a call that would pass them",
            out.requests
        ));
        Ok(out)
    }

    /// A refusal of the underlying names it as one OpenD has no options on.
    fn unknown_underlying(&self, asked: &str, e: BrokerError) -> BrokerError {
        match e {
            BrokerError::InvalidRequest { reason, .. } => BrokerError::UnknownSymbol {
                account: self.config.id.clone(),
                symbol: tradedesk_core::error::quote(asked),
                known: format!(
                    "underlyings OpenD lists options on: US stocks and ETFs (US:AAPL) and HK stocks (HKEX:00700) ({reason})"
                ),
            },
            other => other,
        }
    }
}

/// One static row of the chain as a listed contract of `expiry`.
fn listed_of(info: &proto::SecurityStaticInfo, expiry: NaiveDate) -> Option<Listed> {
    let basic = info.basic.as_ref()?;
    let security = basic.security.clone()?;
    security.code.as_deref().filter(|c| !c.trim().is_empty())?;
    let ex = info.option_ex_data.as_ref()?;
    let right = match ex.r#type? {
        proto::OPTION_CALL => Right::Call,
        proto::OPTION_PUT => Right::Put,
        _ => return None,
    };
    if date(ex.strike_time.as_deref()).is_some_and(|d| d != expiry) {
        return None;
    }
    let strike = decimal(ex.strike_price).filter(|s| s.is_sign_positive() && !s.is_zero())?;
    Some(Listed {
        security,
        right,
        strike: strike.normalize(),
        lot: basic.lot_size.filter(|l| *l > 0).map(Decimal::from),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_pace_holds_opends_window() {
        let pace = Pace::default();
        for _ in 0..10 {
            pace.take(proto::GET_OPTION_CHAIN, 1).unwrap();
        }
        let wait = pace.take(proto::GET_OPTION_CHAIN, 1).err().unwrap();
        assert!(wait <= WINDOW && wait > Duration::from_secs(25), "{wait:?}");
        pace.take(proto::id::GET_SECURITY_SNAPSHOT, 60).unwrap();
        assert!(pace.take(proto::id::GET_SECURITY_SNAPSHOT, 1).is_err());
        // An unpaced proto is never held.
        pace.take(proto::id::GET_FUNDS, 1000).unwrap();
    }

    #[test]
    fn roots_come_from_opends_codes() {
        assert_eq!(root_of("AAPL240126P50000"), Some("AAPL"));
        assert_eq!(root_of("TCH240429C350000"), Some("TCH"));
        assert_eq!(root_of("AAPL"), None);
    }
}
