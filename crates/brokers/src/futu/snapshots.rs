//! `get_snapshots` at OpenD: `Qot_GetSecuritySnapshot` (3203) for many securities in one
//! request. OpenD takes at most 400 securities a request, and at most 20 HK ones with
//! Hong Kong BMP quote rights, so HK codes go 20 at a time (docs/dev/futu-opend-facts.md);
//! it allows 60 snapshot requests per 30 s. One code OpenD does not know refuses the whole
//! request: the code it names is taken out and the rest asked again (a refusal naming none
//! splits the batch in two), so an unknown code never fails the others.
//!
//! OpenD's day figures are required proto2 fields: a price of 0 (no trade yet, no quote)
//! means it has none, and is left `None`.

use chrono::{TimeZone, Utc};
use rust_decimal::Decimal;
use tradedesk_core::Currency;

use super::{OpenDBroker, decimal, proto};
use crate::BrokerError;
use crate::market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol, positive};

/// Securities per request: OpenD's limit, and the limit with HK BMP quote rights.
pub(super) const PER_REQUEST: usize = 400;
pub(super) const HK_PER_REQUEST: usize = 20;

impl OpenDBroker {
    pub(super) async fn read_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let wanted: Vec<proto::Security> = symbols.iter().map(|s| self.security(s)).collect();
        let hk: Vec<usize> = (0..wanted.len())
            .filter(|&i| wanted[i].market == Some(proto::qot_market::HK))
            .collect();
        let other: Vec<usize> = (0..wanted.len())
            .filter(|&i| wanted[i].market != Some(proto::qot_market::HK))
            .collect();
        let mut queue: std::collections::VecDeque<Vec<usize>> = other
            .chunks(PER_REQUEST)
            .chain(hk.chunks(HK_PER_REQUEST))
            .map(<[usize]>::to_vec)
            .collect();
        // Each refusal takes one code out or halves a batch: this bounds the requests.
        let budget = 2 * symbols.len() + queue.len();
        let mut out = MarketSnapshots::default();
        let mut suspended = Vec::new();
        while let Some(batch) = queue.pop_front() {
            if out.requests >= budget {
                out.unknown.extend(batch.iter().map(|&i| UnknownSymbol {
                    symbol: symbols[i].clone(),
                    reason: "not asked: OpenD refused too many requests of this call".to_owned(),
                }));
                continue;
            }
            out.requests += 1;
            let securities: Vec<proto::Security> =
                batch.iter().map(|&i| wanted[i].clone()).collect();
            match self.snapshot_batch(securities).await {
                Ok(list) => {
                    for &i in &batch {
                        let hit = list.iter().find(|b| {
                            b.security.as_ref().is_some_and(|s| {
                                s.market == wanted[i].market
                                    && s.code.as_deref().map(str::to_ascii_uppercase)
                                        == wanted[i].code.as_deref().map(str::to_ascii_uppercase)
                            })
                        });
                        match hit {
                            Some(basic) => {
                                if basic.is_suspend == Some(true) {
                                    suspended.push(symbols[i].clone());
                                }
                                out.rows.push(row_of(&symbols[i], &wanted[i], basic));
                            }
                            None => out.unknown.push(UnknownSymbol {
                                symbol: symbols[i].clone(),
                                reason: "OpenD answered no snapshot of it".to_owned(),
                            }),
                        }
                    }
                }
                Err(BrokerError::InvalidRequest { reason, .. }) => {
                    // The code OpenD names in its message (after the proto id and retType).
                    let message = reason.split_once("): ").map_or(reason.as_str(), |(_, m)| m);
                    let named = batch
                        .iter()
                        .enumerate()
                        .filter(|(_, i)| {
                            wanted[**i]
                                .code
                                .as_deref()
                                .is_some_and(|c| names(message, c))
                        })
                        .max_by_key(|(_, i)| wanted[**i].code.as_deref().map_or(0, str::len))
                        .map(|(k, _)| k);
                    match (batch.len(), named) {
                        (1, _) => out.unknown.push(UnknownSymbol {
                            symbol: symbols[batch[0]].clone(),
                            reason,
                        }),
                        (_, Some(k)) => {
                            let mut rest = batch.clone();
                            let gone = rest.remove(k);
                            out.unknown.push(UnknownSymbol {
                                symbol: symbols[gone].clone(),
                                reason,
                            });
                            queue.push_front(rest);
                        }
                        (n, None) => {
                            let (a, b) = batch.split_at(n / 2);
                            queue.push_front(b.to_vec());
                            queue.push_front(a.to_vec());
                        }
                    }
                }
                Err(e) => return Err(e),
            }
        }
        out.notes.push(format!(
            "{account}: OpenD's snapshot: last is its latest price (curPrice), the day's open, high, low, volume and turnover so far, prev_close its last close; a price of 0 (none yet) is left null; it gives no day close apart from the latest price"
        ));
        if !suspended.is_empty() {
            out.notes.push(format!(
                "{account}: OpenD says trading is suspended in {}",
                suspended.join(", ")
            ));
        }
        if out.requests > 1 {
            out.notes.push(format!(
                "{account}: {} snapshot requests (OpenD takes 400 securities a request, 20 HK ones with BMP quote rights, and a code it does not know refuses the request it is in); it allows 60 snapshot requests per 30 s",
                out.requests
            ));
        }
        Ok(out)
    }

    /// One `Qot_GetSecuritySnapshot` for `securities`: their basic data.
    async fn snapshot_batch(
        &self,
        securities: Vec<proto::Security>,
    ) -> Result<Vec<proto::SnapshotBasicData>, BrokerError> {
        self.with_conn(move |me, conn| {
            Box::pin(async move {
                Ok(me
                    .snapshot_request(conn, securities)
                    .await?
                    .into_iter()
                    .filter_map(|s| s.basic)
                    .collect())
            })
        })
        .await
    }

    /// One `Qot_GetSecuritySnapshot` for `securities` on `conn`: their whole snapshots
    /// (basic data and, for an option, its extra data).
    pub(super) async fn snapshot_request(
        &self,
        conn: &mut super::Conn,
        securities: Vec<proto::Security>,
    ) -> Result<Vec<proto::Snapshot>, BrokerError> {
        let resp: proto::GetSecuritySnapshotResponse = self
            .call(
                conn,
                proto::id::GET_SECURITY_SNAPSHOT,
                &proto::GetSecuritySnapshotRequest {
                    c2s: Some(proto::GetSecuritySnapshotC2s {
                        security_list: securities,
                    }),
                },
            )
            .await?;
        Ok(resp.s2c.map(|s| s.snapshot_list).unwrap_or_default())
    }
}

/// Whether `message` names `code` as a word of its own (`1155` is not named by `11552`).
fn names(message: &str, code: &str) -> bool {
    if code.is_empty() {
        return false;
    }
    let (m, c) = (message.to_ascii_uppercase(), code.to_ascii_uppercase());
    m.match_indices(&c).any(|(at, _)| {
        let before = m[..at].chars().next_back();
        let after = m[at + c.len()..].chars().next();
        !before.is_some_and(|b| b.is_ascii_alphanumeric())
            && !after.is_some_and(|a| a.is_ascii_alphanumeric())
    })
}

fn row_of(asked: &str, wanted: &proto::Security, b: &proto::SnapshotBasicData) -> MarketSnapshot {
    let security = b.security.clone().unwrap_or_else(|| wanted.clone());
    let (key, currency): (tradedesk_core::InstrumentKey, Currency) = OpenDBroker::key_of(&security);
    let price = |v: Option<f64>| positive(decimal(v));
    let time = b.update_timestamp.and_then(|t| {
        // Unix seconds with a fraction: read through the decimal, not by float arithmetic.
        let ms = (decimal(Some(t))? * Decimal::from(1000)).trunc();
        Utc.timestamp_millis_opt(i64::try_from(ms).ok()?).single()
    });
    MarketSnapshot {
        symbol: asked.to_owned(),
        market: key.qualified(),
        currency: Some(currency),
        last: price(b.cur_price),
        last_size: None,
        last_time: None,
        bid: price(b.bid_price),
        ask: price(b.ask_price),
        mid: None,
        mark: None,
        open: price(b.open_price),
        high: price(b.high_price),
        low: price(b.low_price),
        close: None,
        volume: b
            .volume
            .map(Decimal::from)
            .filter(|v| !v.is_sign_negative()),
        turnover: decimal(b.turnover).filter(|v| !v.is_sign_negative()),
        session_date: None,
        prev_close: price(b.last_close_price),
        time,
    }
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn a_refusal_names_a_code_only_as_a_word_of_its_own() {
        assert!(names("\"Unknown stock 1155\"", "1155"));
        assert!(names("unknown stock: aapl.", "AAPL"));
        assert!(!names("\"Unknown stock 11552\"", "1155"));
        assert!(!names("Unknown stock AAPLX", "AAPL"));
        assert!(!names("anything", ""));
    }
}
