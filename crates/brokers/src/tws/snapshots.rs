//! `get_snapshots` through TWS / IB Gateway: TWS has no batch request, so one market-data
//! snapshot (`reqMktData` with snapshot=true) per contract, every request sent first on
//! the one connection and the answers then read, so the call takes about as long as the
//! slowest contract rather than their sum. The ticks read: bid (1), ask (2), last (4),
//! last size (5), high (6), low (7), volume (8), close (9: the previous session's), open
//! (14) and the last trade's time (45), or their delayed twins (docs/dev/ibkr-tws-facts.md).
//! TWS sends -1 for a price it has none of: left `None`.

use chrono::{DateTime, Utc};
use ibapi::contracts::tick_types::TickType;
use ibapi::market_data::MarketDataType;
use ibapi::prelude::TickTypes;
use tradedesk_core::{Currency, InstrumentKey};

use super::{TwsBroker, decimal, symbol_of};
use crate::BrokerError;
use crate::market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol, positive};

/// The most snapshot requests in flight at once: TWS's default allows 100 market-data
/// lines, and tradedesk's other reads need a few.
const IN_FLIGHT: usize = 50;

/// The last trade's time (tick 45, Unix seconds), where TWS sent it.
pub(super) fn last_time(ticks: &[TickTypes]) -> Option<DateTime<Utc>> {
    ticks.iter().rev().find_map(|t| match t {
        TickTypes::String(s)
            if matches!(
                s.tick_type,
                TickType::LastTimestamp | TickType::DelayedLastTimestamp
            ) =>
        {
            DateTime::from_timestamp(s.value.trim().parse().ok()?, 0)
        }
        _ => None,
    })
}

impl TwsBroker {
    pub(super) async fn read_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let contracts: Vec<_> = symbols
            .iter()
            .map(|s| self.contract_for(s.trim()))
            .collect();
        let answers = self
            .with_session(|s| {
                let contracts = contracts.clone();
                async move {
                    let deadline = tokio::time::Instant::now() + self.config.timeout;
                    let mut answers = Vec::with_capacity(contracts.len());
                    for group in contracts.chunks(IN_FLIGHT) {
                        let mut subs = Vec::with_capacity(group.len());
                        for c in group {
                            subs.push(
                                s.client
                                    .market_data(c)
                                    .snapshot()
                                    .subscribe()
                                    .await
                                    .map_err(|e| self.failure(&e, "requesting a snapshot")),
                            );
                        }
                        for sub in subs {
                            answers.push(match sub {
                                Ok(mut sub) => {
                                    self.read(
                                        &mut sub,
                                        deadline,
                                        |t| matches!(t, TickTypes::SnapshotEnd),
                                        "reading a snapshot",
                                    )
                                    .await
                                }
                                Err(e) => Err(e),
                            });
                        }
                    }
                    // A lost connection fails the call; per contract errors are answers.
                    if !s.client.is_connected() {
                        return Err(self.unavailable(
                            format!(
                                "the connection to {} was lost while reading snapshots",
                                self.address()
                            ),
                            &self.start_hint(),
                        ));
                    }
                    Ok(answers)
                }
            })
            .await?;
        let mut out = MarketSnapshots {
            requests: symbols.len(),
            ..MarketSnapshots::default()
        };
        let mut delayed = Vec::new();
        let mut failures = Vec::new();
        for ((symbol, contract), answer) in symbols.iter().zip(&contracts).zip(answers) {
            let ticks = match answer {
                Ok(ticks) => ticks,
                Err(e) => {
                    out.unknown.push(UnknownSymbol {
                        symbol: symbol.clone(),
                        reason: match &e {
                            BrokerError::InvalidRequest { reason, .. } => reason.clone(),
                            BrokerError::Timeout { .. } => format!(
                                "TWS sent no complete snapshot within {:?}",
                                self.config.timeout
                            ),
                            other => other.to_string(),
                        },
                    });
                    failures.push(e);
                    continue;
                }
            };
            let q = ibapi::prelude::Quote::from_ticks(&ticks);
            if matches!(
                q.market_data_type,
                Some(MarketDataType::Delayed | MarketDataType::DelayedFrozen)
            ) {
                delayed.push(symbol.clone());
            }
            let price = |v: Option<f64>| positive(v.and_then(decimal));
            let exchange = if contract.primary_exchange.as_str().is_empty() {
                contract.exchange.as_str().to_owned()
            } else {
                contract.primary_exchange.as_str().to_owned()
            };
            out.rows.push(MarketSnapshot {
                symbol: symbol.clone(),
                market: InstrumentKey::new(exchange, symbol_of(contract)).qualified(),
                currency: Currency::new_checked(contract.currency.as_str()).ok(),
                last: price(q.last),
                last_size: q
                    .last_size
                    .and_then(decimal)
                    .filter(|v| !v.is_sign_negative()),
                last_time: last_time(&ticks),
                bid: price(q.bid),
                ask: price(q.ask),
                open: price(q.open),
                high: price(q.high),
                low: price(q.low),
                volume: q.volume.and_then(decimal).filter(|v| !v.is_sign_negative()),
                prev_close: price(q.close),
                time: Some(Utc::now()),
                ..MarketSnapshot::default()
            });
        }
        // Nothing answered and no contract was unknown: the gateway's failure is the answer.
        if out.rows.is_empty()
            && !failures.is_empty()
            && failures
                .iter()
                .all(|e| !matches!(e, BrokerError::InvalidRequest { .. }))
            && let Some(e) = failures.into_iter().next()
        {
            return Err(e);
        }
        out.notes.push(format!(
            "{account}: TWS market-data snapshots, one request per contract: close is TWS's previous-session close (prev_close here), so the day's close is not given; volume is the day's as TWS sends it (tick 8)"
        ));
        if !delayed.is_empty() {
            out.notes.push(format!(
                "{account}: TWS sent delayed data (no real-time subscription) for {}",
                delayed.join(", ")
            ));
        }
        Ok(out)
    }
}
