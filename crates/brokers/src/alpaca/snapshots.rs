//! `get_snapshots` at Alpaca: `GET /v2/stocks/snapshots?symbols=...` (the market-data
//! API, one request for every stock), `GET /v1beta1/options/snapshots?symbols=...` for
//! option contracts (OCC symbols) and `GET /v1beta3/crypto/us/snapshots?symbols=...` for
//! crypto pairs (`BTC/USD`, or `BTCUSD` as Alpaca's positions name it): at most one
//! request per class. Each snapshot holds `latestTrade`, `latestQuote`, `minuteBar`,
//! `dailyBar` and `prevDailyBar`; any of them may be missing, and a quote's `bp`/`ap` of 0
//! means no active bid or ask (docs/dev/alpaca-facts.md). A symbol Alpaca does not know is
//! left out of its answer; a symbol it refuses outright (400 naming it) is taken out and
//! the rest asked again.

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
    /// As the snapshot request names it (`AAPL`, `BTC/USD`).
    bare: String,
    /// As the row's market names it: the form asked (`BTCUSD` stays `BTCUSD`, as
    /// Alpaca's positions key it; `BTC/USD` stays `BTC/USD`, as its assets list it).
    named: String,
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

/// The three snapshot endpoints, one request (and its pages) each.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Class {
    Stock,
    Option,
    Crypto,
}

/// The quote currencies Alpaca's crypto pairs are priced in, longest first so `USDT`
/// is not read as `USD` and a `T`.
const CRYPTO_QUOTES: [&str; 4] = ["USDT", "USDC", "USD", "BTC"];

/// Where Alpaca's crypto pairs are listed when no position or asset lookup said
/// otherwise (its assets list them under `ALPACA`).
const CRYPTO_EXCHANGE: &str = "ALPACA";

/// The exchange prefixes that mark a symbol as a crypto pair.
const CRYPTO_PREFIXES: [&str; 3] = ["ALPACA", "CRYPTO", "FTXU"];

/// The crypto pair `bare` names, `BASE/QUOTE`: written with its slash, or run together
/// as Alpaca's trading API names positions (`BTCUSD`: letters only, six or more, ending in
/// a quote currency; no US stock ticker is that long), or any letters under a crypto
/// exchange's prefix. `None` for a stock or option.
fn crypto_pair(prefix: Option<&str>, bare: &str) -> Option<String> {
    if let Some((base, quote)) = bare.split_once('/') {
        return (!base.is_empty() && !quote.is_empty()).then(|| bare.to_owned());
    }
    let crypto_prefix = prefix.is_some_and(|p| CRYPTO_PREFIXES.contains(&p));
    let letters = bare.chars().all(|c| c.is_ascii_alphabetic());
    if !letters || (bare.len() < 6 && !crypto_prefix) {
        return None;
    }
    CRYPTO_QUOTES.iter().find_map(|q| {
        let base = bare.strip_suffix(q)?;
        (base.len() >= 2).then(|| format!("{base}/{q}"))
    })
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
        let mut cryptos = Vec::new();
        for s in symbols {
            let (prefix, bare) = s
                .rsplit_once(':')
                .map_or((None, s.as_str()), |(p, b)| (Some(p), b));
            let prefix = prefix.map(|p| p.trim().to_ascii_uppercase());
            let bare = bare.trim().to_ascii_uppercase();
            if let Some(pair) = crypto_pair(prefix.as_deref(), &bare) {
                cryptos.push(Asked {
                    asked: s.clone(),
                    bare: pair,
                    named: bare,
                });
            } else if crate::occ::parse(&bare).is_some() {
                options.push(Asked {
                    asked: s.clone(),
                    named: bare.clone(),
                    bare,
                });
            } else {
                stocks.push(Asked {
                    asked: s.clone(),
                    named: bare.clone(),
                    bare,
                });
            }
        }
        let mut guessed = 0usize;
        if !stocks.is_empty() {
            let body = self.batch(&mut stocks, &mut out, Class::Stock).await?;
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
            out.notes.push(format!(
                "{account}: Alpaca's stock figures are from its IEX feed (the free one): IEX's own trades and quotes, not the whole US market; the day's bars are Alpaca's dailyBar and prevDailyBar"
            ));
        }
        if !options.is_empty() {
            let body = self.batch(&mut options, &mut out, Class::Option).await?;
            for a in &options {
                match body.get(&a.bare).filter(|v| v.is_object()) {
                    Some(snap) => {
                        let market = format!("{OPTION_EXCHANGE}:{}", a.bare);
                        out.rows.push(row_of(a, snap, market, Some(Currency::USD)));
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
        if !cryptos.is_empty() {
            let body = self.batch(&mut cryptos, &mut out, Class::Crypto).await?;
            let mut unpriced = Vec::new();
            for a in &cryptos {
                match body.get(&a.bare).filter(|v| v.is_object()) {
                    Some(snap) => {
                        let exchange = self.crypto_exchange(a);
                        let market = format!("{exchange}:{}", a.named);
                        let quote = a.bare.rsplit_once('/').map_or("", |(_, q)| q);
                        let currency = Currency::new_checked(quote).ok();
                        if currency.is_none() {
                            unpriced.push(a.asked.clone());
                        }
                        out.rows.push(row_of(a, snap, market, currency));
                    }
                    None => out.unknown.push(UnknownSymbol {
                        symbol: a.asked.clone(),
                        reason: format!(
                            "Alpaca has no crypto snapshot of {}: not a pair it quotes (its pairs are written BASE/QUOTE, e.g. BTC/USD)",
                            a.bare
                        ),
                    }),
                }
            }
            out.notes.push(format!(
                "{account}: crypto figures are Alpaca's own crypto venue's (location us); sizes and volumes are in coins, fractional; crypto trades around the clock, so the day's bar is Alpaca's daily bar, not an exchange session"
            ));
            if !unpriced.is_empty() {
                out.notes.push(format!(
                    "{account}: {} priced in a quote currency that is not an ISO currency (a stablecoin or a coin): currency null, prices in the pair's quote currency",
                    unpriced.join(", ")
                ));
            }
        }
        if guessed > 0 {
            out.notes.push(format!(
                "{account}: {guessed} stock(s) named US:SYMBOL: Alpaca's snapshot does not say their listing exchange (get_quote looks it up); the symbol alone names the same Alpaca asset"
            ));
        }
        Ok(out)
    }

    /// The exchange a crypto pair is keyed under: what a position or asset lookup said
    /// (under either spelling), else Alpaca's `ALPACA`.
    fn crypto_exchange(&self, a: &Asked) -> String {
        let known = self
            .exchanges
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        known
            .get(&a.named)
            .or_else(|| known.get(&a.bare))
            .cloned()
            .unwrap_or_else(|| CRYPTO_EXCHANGE.to_owned())
    }

    /// One snapshot request for `asked` (of one class), every page; a symbol Alpaca
    /// refuses by name (400) is moved to `unknown` and the rest asked again. Answers the
    /// snapshots by symbol.
    async fn batch(
        &self,
        asked: &mut Vec<Asked>,
        out: &mut MarketSnapshots,
        class: Class,
    ) -> Result<serde_json::Map<String, Value>, BrokerError> {
        let mut found = serde_json::Map::new();
        let mut token: Option<String> = None;
        let mut pages = 0usize;
        // At most one refusal per symbol, then the rest answers.
        let mut refusals = asked.len();
        while !asked.is_empty() {
            // `BTCUSD` and `BTC/USD` asked together are one pair, asked once.
            let mut names: Vec<&str> = Vec::new();
            for a in asked.iter() {
                if !names.contains(&a.bare.as_str()) {
                    names.push(&a.bare);
                }
            }
            let joined = names.join(",");
            let (url, mut query) = match class {
                Class::Option => (
                    self.data("/v1beta1/options/snapshots"),
                    vec![("symbols", joined), ("limit", "1000".to_owned())],
                ),
                Class::Stock => (
                    self.data("/v2/stocks/snapshots"),
                    vec![("symbols", joined), ("feed", "iex".to_owned())],
                ),
                Class::Crypto => (
                    self.data("/v1beta3/crypto/us/snapshots"),
                    vec![("symbols", joined)],
                ),
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
            let page = if class == Class::Stock {
                body.as_object()
            } else {
                body.get("snapshots").and_then(Value::as_object)
            };
            let Some(page) = page else {
                return Err(self.unavailable(format!(
                    "the snapshot answer is not {}",
                    if class == Class::Stock {
                        "an object by symbol"
                    } else {
                        "an object with snapshots"
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
        (row_of(a, snap, market, Some(Currency::USD)), known)
    }
}

/// A snapshot's figures: the latest trade and quote, the day's bar and the previous
/// day's close. A missing part leaves its figures `None`.
fn row_of(a: &Asked, snap: &Value, market: String, currency: Option<Currency>) -> MarketSnapshot {
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
        currency,
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
        // Stock daily bars are stamped at New York midnight of their day, crypto ones at
        // Chicago midnight: either is the same date in New York.
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
            named: "AAPL".into(),
        };
        let r = row_of(
            &a,
            &json!({"latestQuote": {"bp": 10.5, "ap": 0, "t": "2026-03-02T15:00:00Z"},
                    "dailyBar": {"o": 10, "h": 11, "l": 9.5, "c": 10.75, "v": 1200,
                                 "t": "2026-03-02T05:00:00Z"}}),
            "NASDAQ:AAPL".into(),
            Some(Currency::USD),
        );
        assert_eq!(r.symbol, "aapl");
        assert_eq!(r.bid, Some(Decimal::new(105, 1)));
        assert_eq!(r.ask, None, "ap 0: no active ask");
        assert_eq!((r.last, r.last_time, r.prev_close), (None, None, None));
        assert_eq!(r.close, Some(Decimal::new(1075, 2)));
        assert_eq!(r.session_date.unwrap().to_string(), "2026-03-02");
        assert_eq!(exchange_of_tape(Some("B")), None);
    }

    #[test]
    fn crypto_pairs_are_told_from_stocks_and_fractional_sizes_read() {
        assert_eq!(crypto_pair(None, "BTC/USD").as_deref(), Some("BTC/USD"));
        assert_eq!(crypto_pair(None, "BTCUSD").as_deref(), Some("BTC/USD"));
        assert_eq!(crypto_pair(None, "ETHUSDT").as_deref(), Some("ETH/USDT"));
        assert_eq!(crypto_pair(None, "ETHBTC").as_deref(), Some("ETH/BTC"));
        assert_eq!(
            crypto_pair(Some("ALPACA"), "SOLUSD").as_deref(),
            Some("SOL/USD")
        );
        for stock in ["AAPL", "GOOGL", "BRK.B", "AAPL260320C00180000", "/USD"] {
            assert_eq!(crypto_pair(None, stock), None, "{stock}");
        }
        let a = Asked {
            asked: "BTCUSD".into(),
            bare: "BTC/USD".into(),
            named: "BTCUSD".into(),
        };
        let r = row_of(
            &a,
            &json!({"latestTrade": {"i": 1, "p": 47458.69, "s": 0.00008231, "tks": "S",
                                    "t": "2022-03-28T17:27:57.794134Z"},
                    "dailyBar": {"o": 47149.3, "h": 47900, "l": 46770.7, "c": 47447.73,
                                 "v": 8720.15520728, "n": 345005, "vw": 47383.11,
                                 "t": "2022-03-28T05:00:00Z"}}),
            "ALPACA:BTCUSD".into(),
            Some(Currency::USD),
        );
        assert_eq!(r.last_size, Some(Decimal::new(8231, 8)));
        assert_eq!(r.volume, Some(Decimal::new(872_015_520_728, 8)));
        assert_eq!(r.session_date.unwrap().to_string(), "2022-03-28");
    }
}
