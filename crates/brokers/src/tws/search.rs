//! `search_instruments` over TWS / IB Gateway: `reqMatchingSymbols` (the protobuf
//! `MatchingSymbolsRequest`, answered by one `SymbolSamples`; docs/dev/ibkr-tws-facts.md,
//! "Matching symbols"). IBKR matches the start of a ticker or, for longer patterns, a
//! word of the name, and answers contract descriptions without trading rules. Each
//! pattern's answer is kept for [`MATCHES_FOR`]: IBKR paces this request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ibapi::prelude::SecurityType;
use rust_decimal::Decimal;
use tradedesk_core::{AssetClass, InstrumentKey};

use super::{TwsBroker, asset_class, stated_multiplier, symbol_of};
use crate::BrokerError;
use crate::search::{
    Found, InstrumentMatches, InstrumentQuery, ListedInstrument, MatchKind, TradingRules,
};

/// How long one pattern's matches are reused before TWS is asked again.
pub(super) const MATCHES_FOR: Duration = Duration::from_secs(600);
/// Patterns kept at most (the oldest go first).
const KEPT: usize = 256;

/// One pattern's matches, and how many were of types tradedesk does not trade.
#[derive(Debug, Default)]
pub(super) struct Matches {
    pub(super) listed: Vec<ListedInstrument>,
    untraded: usize,
}

/// The answers kept, by pattern, and when.
pub(super) type MatchCache = tokio::sync::Mutex<BTreeMap<String, (Instant, Arc<Matches>)>>;

fn listed_of(d: &ibapi::contracts::ContractDescription) -> Option<ListedInstrument> {
    let c = &d.contract;
    if matches!(
        c.security_type,
        SecurityType::Index
            | SecurityType::Warrant
            | SecurityType::Spread
            | SecurityType::News
            | SecurityType::Commodity
            | SecurityType::Other(_)
    ) {
        return None;
    }
    let symbol = symbol_of(c);
    if symbol.trim().is_empty() {
        return None;
    }
    let exchange = [c.primary_exchange.as_str(), c.exchange.as_str()]
        .into_iter()
        .find(|e| !e.trim().is_empty() && *e != "SMART")
        .unwrap_or("SMART")
        .to_owned();
    let class = asset_class(c);
    let derivative = matches!(class, AssetClass::Option | AssetClass::Future);
    let currency = c.currency.as_str().trim();
    Some(ListedInstrument {
        key: InstrumentKey::new(exchange, symbol),
        venue_symbol: (c.contract_id != 0).then(|| c.contract_id.to_string()),
        name: Some(c.description.trim().to_owned()).filter(|n| !n.is_empty()),
        currency: (!currency.is_empty()).then(|| currency.to_owned()),
        asset_class: class,
        tradable: None,
        rules: TradingRules {
            multiplier: if derivative {
                stated_multiplier(c)
            } else {
                Some(Decimal::ONE)
            },
            unit: Some(if derivative { "contracts" } else { "shares" }),
            ..TradingRules::default()
        },
    })
}

impl TwsBroker {
    /// IBKR's matches for one pattern, from the cache or TWS.
    pub(super) async fn matching(&self, pattern: &str) -> Result<Arc<Matches>, BrokerError> {
        let key = pattern.to_uppercase();
        {
            let cache = self.matches.lock().await;
            if let Some((at, m)) = cache.get(&key)
                && at.elapsed() < MATCHES_FOR
            {
                return Ok(Arc::clone(m));
            }
        }
        let timeout = self.config.timeout;
        let found = self
            .with_session(|s| {
                let pattern = pattern.to_owned();
                async move {
                    match tokio::time::timeout(timeout, s.client.matching_symbols(&pattern)).await {
                        Ok(Ok(found)) => Ok(found),
                        Ok(Err(e)) => Err(self.failure(&e, "searching symbols")),
                        Err(_) => Err(self.timeout()),
                    }
                }
            })
            .await?;
        let listed: Vec<ListedInstrument> = found.iter().filter_map(listed_of).collect();
        let m = Arc::new(Matches {
            untraded: found.len() - listed.len(),
            listed,
        });
        let mut cache = self.matches.lock().await;
        if cache.len() >= KEPT {
            let oldest = cache
                .iter()
                .min_by_key(|(_, (at, _))| *at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                cache.remove(&k);
            }
        }
        cache.insert(key, (Instant::now(), Arc::clone(&m)));
        Ok(m)
    }

    pub(super) async fn search(
        &self,
        account: &str,
        query: &InstrumentQuery,
    ) -> Result<InstrumentMatches, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let pattern = if query.symbol.is_empty() {
            query.words.join(" ")
        } else {
            query.symbol.clone()
        };
        let m = self.matching(&pattern).await?;
        let mut notes = vec![format!(
            "{account}: IBKR's symbol search gives no trading rules (lot, tick, shortable): get_quote and preview_order read a contract's; it lists ETFs as stocks"
        )];
        if m.untraded > 0 {
            notes.push(format!(
                "{account}: {} of IBKR's matches are indexes, warrants, combos or other types tradedesk does not trade, and are left out",
                m.untraded
            ));
        }
        // ETFs come as STK: asked for ETFs, the stocks are the candidates.
        let class = match query.asset_class {
            Some(AssetClass::Etf) => Some(AssetClass::Equity),
            other => other,
        };
        let found = m
            .listed
            .iter()
            .filter(|i| class.is_none_or(|c| c == i.asset_class))
            .filter(|i| {
                query
                    .exchange
                    .as_deref()
                    .is_none_or(|e| i.key.exchange.eq_ignore_ascii_case(e))
            })
            .map(|i| Found {
                // IBKR's own rule may find what tradedesk's does not (a word of the name
                // it does not send, a former symbol): ranked after the others.
                matched: query
                    .match_text(&i.key.symbol, None, i.name.as_deref())
                    .unwrap_or(MatchKind::Broker),
                instrument: i.clone(),
            })
            .collect();
        Ok(InstrumentMatches {
            found,
            source: format!(
                "IBKR's matching symbols (reqMatchingSymbols) for {}, kept {} minutes",
                tradedesk_core::error::quote(&pattern),
                MATCHES_FOR.as_secs() / 60
            ),
            notes,
        })
    }
}
