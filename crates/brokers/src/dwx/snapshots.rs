//! `get_snapshots` through the DWXConnect EA: the symbols are added to the EA's tick
//! subscription (`SUBSCRIBE_SYMBOLS`, every one in one command) and read from
//! `DWX_Market_Data.txt`, which the EA writes for its subscribed symbols. It writes only
//! each symbol's bid and ask (MT5 also `last`, 0 for most FX), so the day's figures are
//! `None`. A symbol the terminal does not have is named in a `GET_BID_ASK` (or
//! `SUBSCRIBE_SYMBOL`) error in `DWX_Messages.txt`: listed as unknown, and dropped from
//! the subscription tradedesk asks for next.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use chrono::Utc;
use rust_decimal::Decimal;
use tradedesk_core::{Currency, InstrumentKey};

use super::{DwxBroker, POLL, bare_symbol, dec, exchange_of, instrument_of, resolve};
use crate::BrokerError;
use crate::market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol, positive};

/// A symbol's bid, ask and last as the EA wrote them (a 0 is none).
type Prices = (Option<Decimal>, Option<Decimal>, Option<Decimal>);

/// Whether an EA error's description names `symbol` as a word of its own.
fn names(description: &str, symbol: &str) -> bool {
    description
        .split(|c: char| c.is_whitespace() || c == ',' || c == ':')
        .any(|w| w.trim_end_matches('.') == symbol)
}

impl DwxBroker {
    pub(super) async fn read_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        // The heartbeat first: an EA that is not running says so at once.
        let info = self.account_info(&self.orders_file().await?)?;
        let bare: Vec<String> = symbols
            .iter()
            .map(|s| bare_symbol(s).trim().to_owned())
            .collect();
        let wanted: BTreeSet<String> = bare.iter().cloned().collect();
        let mark = self.message_mark().await;
        let deadline = Instant::now() + self.config.timeout;
        let mut requests = 0usize;
        {
            let mut subscribed = self.subscribed.lock().await;
            if !wanted.is_subset(&subscribed) {
                subscribed.extend(wanted.iter().cloned());
                let list = subscribed.iter().cloned().collect::<Vec<_>>().join(",");
                self.command("SUBSCRIBE_SYMBOLS", &list).await?;
                requests += 1;
            }
        }
        let grace = Instant::now() + Duration::from_millis(500);
        let mut resent = false;
        let (prices, refused) = loop {
            let data = self.read_json("DWX_Market_Data.txt").await;
            let prices: Vec<Option<Prices>> = bare
                .iter()
                .map(|s| {
                    let q = data.as_ref()?.get(s)?;
                    Some((
                        positive(dec(q, "bid")),
                        positive(dec(q, "ask")),
                        positive(dec(q, "last")),
                    ))
                })
                .collect();
            let errors = self.errors_after(mark).await;
            let refused: Vec<Option<String>> = bare
                .iter()
                .map(|s| {
                    errors
                        .iter()
                        .find(|(k, d)| {
                            (k == "GET_BID_ASK" || k == "SUBSCRIBE_SYMBOL") && names(d, s)
                        })
                        .map(|(_, d)| d.clone())
                })
                .collect();
            let settled = prices
                .iter()
                .zip(&refused)
                .all(|(p, r)| p.is_some() || r.is_some());
            if settled || Instant::now() >= deadline {
                break (prices, refused);
            }
            if !resent && Instant::now() >= grace {
                // A restarted EA forgets its subscription: ask again, once.
                resent = true;
                let list = self
                    .subscribed
                    .lock()
                    .await
                    .iter()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(",");
                self.command("SUBSCRIBE_SYMBOLS", &list).await?;
                requests += 1;
            }
            tokio::time::sleep(POLL).await;
        };
        let mut out = MarketSnapshots {
            requests,
            ..MarketSnapshots::default()
        };
        let mut gone = Vec::new();
        for (i, symbol) in symbols.iter().enumerate() {
            let name = &bare[i];
            match (&prices[i], &refused[i]) {
                (Some((bid, ask, last)), _) => {
                    let class = instrument_of(name, Currency::USD).0;
                    let currency =
                        resolve(name, info.currency, &self.config.symbols, None).currency;
                    out.rows.push(MarketSnapshot {
                        symbol: symbol.clone(),
                        market: InstrumentKey::new(exchange_of(class), name).qualified(),
                        currency: Some(currency),
                        last: *last,
                        bid: *bid,
                        ask: *ask,
                        time: Some(Utc::now()),
                        ..MarketSnapshot::default()
                    });
                }
                (None, Some(description)) => {
                    gone.push(name.clone());
                    out.unknown.push(UnknownSymbol {
                        symbol: symbol.clone(),
                        reason: format!(
                            "the terminal has no such symbol (the EA: {}); Market Watch names them as the broker does (EURUSD, XAUUSD, US500.cash, ...)",
                            tradedesk_core::error::quote(description)
                        ),
                    });
                }
                (None, None) => out.unknown.push(UnknownSymbol {
                    symbol: symbol.clone(),
                    reason: format!(
                        "the EA wrote no price for it within {:?} (the market may be closed)",
                        self.config.timeout
                    ),
                }),
            }
        }
        if out.rows.is_empty() && gone.is_empty() {
            return Err(self.timeout());
        }
        if !gone.is_empty() {
            let mut subscribed = self.subscribed.lock().await;
            for g in &gone {
                subscribed.remove(g);
            }
        }
        out.notes.push(format!(
            "{account}: the EA writes only the bid and ask of subscribed symbols (MT5 also a last price, 0 for most FX, left null): no day's open, high, low, close, volume or previous close; the symbols stay subscribed"
        ));
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::names;

    #[test]
    fn an_error_names_a_symbol_only_whole() {
        assert!(names("Could not get bid/ask for EURUSD.", "EURUSD"));
        assert!(names("Could not get bid/ask for US500.cash.", "US500.cash"));
        assert!(!names("Could not get bid/ask for EURUSD.m.", "EURUSD"));
    }
}
