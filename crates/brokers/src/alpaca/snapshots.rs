//! `get_snapshots` at Alpaca: `GET /v2/stocks/snapshots?symbols=...` (the market-data
//! API, one request for every stock) and `GET /v1beta1/options/snapshots?symbols=...` for
//! option contracts (OCC symbols). Each snapshot holds `latestTrade`, `latestQuote`,
//! `minuteBar`, `dailyBar` and `prevDailyBar`; any of them may be missing, and a quote's
//! `bp`/`ap` of 0 means no active bid or ask (docs/dev/alpaca-facts.md). A stock Alpaca
//! does not know is left out of its answer; a symbol it refuses outright (400 naming it)
//! is taken out and the rest asked again.

use chrono::{DateTime, Utc};
use serde_json::Value;
use tradedesk_core::Currency;

use super::{AlpacaBroker, OPTION_EXCHANGE, dec, eastern, text, time};
use crate::BrokerError;
use crate::market_snapshot::{MarketSnapshot, MarketSnapshots, UnknownSymbol, positive};

/// Pages of option snapshots followed at most (Alpaca answers up to `limit` at a time).
const MAX_OPTION_PAGES: usize = 20;

/// A symbol as asked and as Alpaca names it.
struct Asked {
    asked: String,
    bare: String,
}

/// The listing exchange a stock trade's tape implies: tape A is NYSE-listed, tape C
/// Nasdaq-listed; tape B (NYSE Arca, NYSE American, Cboe and the regional exchanges) names
/// no single one.
fn exchange_of_tape(tape: Option<&str>) -> Option<&'static str> {
    match tape {
        Some("A") => Some("NYSE"),
        Some("C") => Some("NASDAQ"),
        _ => None,
    }
}

impl AlpacaBroker {
    pub(super) async fn read_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<MarketSnapshots, BrokerError> {
        self.check_account(account)?;
        let mut out = MarketSnapshots::default();
        let mut stocks = Vec::new();
        let mut options = Vec::new();
        for s in symbols {
            let bare = s
                .rsplit_once(':')
                .map_or(s.as_str(), |(_, b)| b)
                .trim()
                .to_ascii_uppercase();
            if bare.contains('/') {
                out.unknown.push(UnknownSymbol {
                    symbol: s.clone(),
                    reason:
                        "a crypto pair: tradedesk reads Alpaca's stock and option snapshots only"
                            .to_owned(),
                });
            } else if crate::occ::parse(&bare).is_some() {
                options.push(Asked {
                    asked: s.clone(),
                    bare,
                });
            } else {
                stocks.push(Asked {
                    asked: s.clone(),
                    bare,
                });
            }
        }
        let mut guessed = 0usize;
        if !stocks.is_empty() {
            let body = self.batch(&mut stocks, &mut out, false).await?;
            for a in &stocks {
                match body.get(&a.bare).filter(|v| v.is_object()) {
                    Some(snap) => {
                        let (row, known) = self.stock_row(a, snap);
                        guessed += usize::from(!known);
                        out.rows.push(row);
                    }
                    None => out.unknown.push(UnknownSymbol {
                        symbol: a.asked.clone(),
                        reason: "Alpaca has no snapshot of it: not a US stock or ETF it quotes"
                            .to_owned(),
                    }),
                }
            }
        }
        if !options.is_empty() {
            let body = self.batch(&mut options, &mut out, true).await?;
            for a in &options {
                match body.get(&a.bare).filter(|v| v.is_object()) {
                    Some(snap) => {
                        let market = format!("{OPTION_EXCHANGE}:{}", a.bare);
                        out.rows.push(row_of(a, snap, market));
                    }
                    None => out.unknown.push(UnknownSymbol {
                        symbol: a.asked.clone(),
                        reason: "Alpaca has no snapshot of this option contract".to_owned(),
                    }),
                }
            }
            out.notes.push(format!(
                "{account}: option prices are per share of the underlying, as Alpaca quotes them"
            ));
        }
        out.notes.push(format!(
            "{account}: Alpaca's stock figures are from its IEX feed (the free one): IEX's own trades and quotes, not the whole US market; the day's bars are Alpaca's dailyBar and prevDailyBar"
        ));
        if guessed > 0 {
            out.notes.push(format!(
                "{account}: {guessed} stock(s) named US:SYMBOL: Alpaca's snapshot does not say their listing exchange (get_quote looks it up); the symbol alone names the same Alpaca asset"
            ));
        }
        Ok(out)
    }

    /// One snapshot request for `asked` (stocks, or option contracts), every page; a
    /// symbol Alpaca refuses by name (400) is moved to `unknown` and the rest asked
    /// again. Answers the snapshots by symbol.
    async fn batch(
        &self,
        asked: &mut Vec<Asked>,
        out: &mut MarketSnapshots,
        options: bool,
    ) -> Result<serde_json::Map<String, Value>, BrokerError> {
        let mut found = serde_json::Map::new();
        let mut token: Option<String> = None;
        let mut pages = 0usize;
        // At most one refusal per symbol, then the rest answers.
        let mut refusals = asked.len();
        while !asked.is_empty() {
            let joined = asked
                .iter()
                .map(|a| a.bare.as_str())
                .collect::<Vec<_>>()
                .join(",");
            let (url, mut query) = if options {
                (
                    self.data("/v1beta1/options/snapshots"),
                    vec![("symbols", joined), ("limit", "1000".to_owned())],
                )
            } else {
                (
                    self.data("/v2/stocks/snapshots"),
                    vec![("symbols", joined), ("feed", "iex".to_owned())],
                )
            };
            if let Some(t) = &token {
                query.push(("page_token", t.clone()));
            }
            out.requests += 1;
            let (status, body) = self.send(self.client.get(url).query(&query), false).await?;
            if status == 400 && refusals > 0 {
                let message = text(&body, "message").unwrap_or_default().to_owned();
                let named = asked
                    .iter()
                    .position(|a| message.to_ascii_uppercase().contains(&a.bare));
                if let Some(i) = named {
                    refusals -= 1;
                    let gone = asked.remove(i);
                    out.unknown.push(UnknownSymbol {
                        symbol: gone.asked,
                        reason: format!(
                            "Alpaca refused it: {}",
                            tradedesk_core::error::quote(&message)
                        ),
                    });
                    found.clear();
                    token = None;
                    continue;
                }
            }
            if !(200..300).contains(&status) {
                return Err(BrokerError::InvalidRequest {
                    account: self.config.account.clone(),
                    reason: format!(
                        "Alpaca answered {status} to the snapshot request ({})",
                        text(&body, "message")
                            .map_or_else(|| "no message".to_owned(), tradedesk_core::error::quote)
                    ),
                });
            }
            let page = if options {
                body.get("snapshots").and_then(Value::as_object)
            } else {
                body.as_object()
            };
            let Some(page) = page else {
                return Err(self.unavailable(format!(
                    "the snapshot answer is not {}",
                    if options {
                        "an object with snapshots"
                    } else {
                        "an object by symbol"
                    }
                )));
            };
            found.extend(
                page.iter()
                    .map(|(k, v)| (k.to_ascii_uppercase(), v.clone())),
            );
            token = text(&body, "next_page_token").map(str::to_owned);
            pages += 1;
            if token.is_none() || pages >= MAX_OPTION_PAGES {
                break;
            }
        }
        Ok(found)
    }

    /// A stock's row, and whether its exchange is known (looked up before, or told by
    /// its tape) rather than `US`.
    fn stock_row(&self, a: &Asked, snap: &Value) -> (MarketSnapshot, bool) {
        let cached = self
            .exchanges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&a.bare)
            .cloned();
        let tape = snap
            .get("latestTrade")
            .and_then(|t| text(t, "z"))
            .or_else(|| snap.get("latestQuote").and_then(|q| text(q, "z")));
        let exchange = cached.or_else(|| exchange_of_tape(tape).map(str::to_owned));
        let known = exchange.is_some();
        let market = format!("{}:{}", exchange.as_deref().unwrap_or("US"), a.bare);
        (row_of(a, snap, market), known)
    }
}

/// A snapshot's figures: the latest trade and quote, the day's bar and the previous
/// day's close. A missing part leaves its figures `None`.
fn row_of(a: &Asked, snap: &Value, market: String) -> MarketSnapshot {
    let part = |name: &str| snap.get(name).filter(|v| v.is_object());
    let trade = part("latestTrade");
    let quote = part("latestQuote");
    let day = part("dailyBar");
    let minute = part("minuteBar");
    let price = |v: Option<&Value>, field: &str| positive(v.and_then(|v| dec(v, field)));
    let stamp = |v: Option<&Value>| v.and_then(|v| time(v, "t"));
    let newest: Option<DateTime<Utc>> = [stamp(trade), stamp(quote), stamp(minute)]
        .into_iter()
        .flatten()
        .max();
    MarketSnapshot {
        symbol: a.asked.clone(),
        market,
        currency: Some(Currency::USD),
        last: price(trade, "p"),
        last_size: trade.and_then(|t| dec(t, "s")),
        last_time: stamp(trade),
        bid: price(quote, "bp"),
        ask: price(quote, "ap"),
        mid: None,
        mark: None,
        open: price(day, "o"),
        high: price(day, "h"),
        low: price(day, "l"),
        close: price(day, "c"),
        volume: day
            .and_then(|d| dec(d, "v"))
            .filter(|v| !v.is_sign_negative()),
        turnover: None,
        // Daily bars are stamped at New York midnight of their day.
        session_date: stamp(day).map(|t| t.with_timezone(&eastern(t)).date_naive()),
        prev_close: price(part("prevDailyBar"), "c"),
        time: newest,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rust_decimal::Decimal;
    use serde_json::json;

    #[test]
    fn a_snapshot_without_parts_or_with_a_zero_ask_leaves_them_null() {
        let a = Asked {
            asked: "aapl".into(),
            bare: "AAPL".into(),
        };
        let r = row_of(
            &a,
            &json!({"latestQuote": {"bp": 10.5, "ap": 0, "t": "2026-03-02T15:00:00Z"},
                    "dailyBar": {"o": 10, "h": 11, "l": 9.5, "c": 10.75, "v": 1200,
                                 "t": "2026-03-02T05:00:00Z"}}),
            "NASDAQ:AAPL".into(),
        );
        assert_eq!(r.symbol, "aapl");
        assert_eq!(r.bid, Some(Decimal::new(105, 1)));
        assert_eq!(r.ask, None, "ap 0: no active ask");
        assert_eq!((r.last, r.last_time, r.prev_close), (None, None, None));
        assert_eq!(r.close, Some(Decimal::new(1075, 2)));
        assert_eq!(r.session_date.unwrap().to_string(), "2026-03-02");
        assert_eq!(exchange_of_tape(Some("B")), None);
    }
}
