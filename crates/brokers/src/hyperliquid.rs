//! Hyperliquid, read-only: its public `POST /info` endpoint (mainnet, testnet, or any
//! base URL), for one wallet.
//!
//! * **Markets:** `metaAndAssetCtxs` (mark, funding, open interest, max leverage per
//!   perp), `allMids`, `l2Book` for a quote's bid and ask, `candleSnapshot` for bars.
//! * **The wallet:** `clearinghouseState` (positions with entry, liquidation price and
//!   leverage, the margin summary) and `userFillsByTime` (fills with their fees, paged by
//!   time, 2,000 a page).
//!
//! Perps are margin-settled in the book: a fill moves only its fee, a close credits its
//! gross P&L. Amounts are in USDC, counted as USD. Cash is anchored to the account value
//! less unrealized P&L; what the fills do not explain (deposits, funding payments) is an
//! opening balance, said in a note.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use chrono::{DateTime, Offset, TimeZone, Utc};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_core::{
    Account, AssetClass, Bar, Book, BookParts, Currency, Fill, Instrument, InstrumentKey, Interval,
    Mode, Quote, ReportedPosition, Side, TradableInstrument,
};

use crate::{AccountHealth, Broker, BrokerError, HealthStatus};

pub const MAINNET_URL: &str = "https://api.hyperliquid.xyz";
pub const TESTNET_URL: &str = "https://api.hyperliquid-testnet.xyz";

/// The exchange name instruments are keyed under.
pub const EXCHANGE: &str = "HYPERLIQUID";

/// `userFillsByTime` answers at most this many fills a page.
const FILLS_PAGE: usize = 2_000;
/// A bound on paging, so no loop can run away.
const MAX_PAGES: usize = 500;

#[derive(Debug, Clone)]
pub struct HyperliquidConfig {
    /// The config's name for the account.
    pub id: String,
    /// The wallet (`0x` and 40 hex digits).
    pub wallet: String,
    pub base_url: String,
    pub timeout: Duration,
}

/// One perp market, from `metaAndAssetCtxs`.
#[derive(Debug, Clone, PartialEq)]
pub struct PerpMarket {
    pub coin: String,
    pub mark: Decimal,
    pub mid: Option<Decimal>,
    pub oracle: Option<Decimal>,
    /// Hourly funding rate.
    pub funding: Decimal,
    pub open_interest: Decimal,
    pub max_leverage: u32,
    pub size_decimals: u32,
}

#[derive(Debug)]
pub struct HyperliquidBroker {
    config: HyperliquidConfig,
    client: reqwest::Client,
    /// The last book, kept for [`CACHE_FOR`]: the venue weighs every request against a
    /// per-minute budget.
    cache: tokio::sync::Mutex<Option<(Instant, Arc<Book>)>>,
}

/// How long a built book is served before the venue is asked again.
const CACHE_FOR: Duration = Duration::from_secs(30);

/// Whether `text` is a wallet address: `0x` and 40 hex digits.
pub fn is_wallet(text: &str) -> bool {
    text.len() == 42 && text.starts_with("0x") && text[2..].chars().all(|c| c.is_ascii_hexdigit())
}

fn dec(v: &Value, field: &str) -> Option<Decimal> {
    match v.get(field)? {
        Value::String(s) => s.trim().parse().ok(),
        Value::Number(n) => n.to_string().parse().ok(),
        _ => None,
    }
}

fn text<'a>(v: &'a Value, field: &str) -> Option<&'a str> {
    v.get(field).and_then(Value::as_str)
}

fn millis(v: &Value, field: &str) -> Option<DateTime<Utc>> {
    Utc.timestamp_millis_opt(v.get(field)?.as_i64()?).single()
}

/// `BTC`, `BTC-PERP`, `HYPERLIQUID:BTC` and `HYPERLIQUID:BTC-PERP` all name the BTC perp.
fn coin_of(symbol: &str) -> String {
    let bare = symbol.rsplit_once(':').map_or(symbol, |(_, s)| s).trim();
    bare.strip_suffix("-PERP").unwrap_or(bare).to_owned()
}

fn key_of(coin: &str) -> InstrumentKey {
    InstrumentKey::new(EXCHANGE, format!("{coin}-PERP"))
}

fn interval_text(interval: Interval) -> &'static str {
    match interval {
        Interval::M1 => "1m",
        Interval::M5 => "5m",
        Interval::M15 => "15m",
        Interval::H1 => "1h",
        Interval::D1 => "1d",
    }
}

impl HyperliquidBroker {
    /// # Errors
    /// The wallet is not an address, or the HTTP client cannot be built.
    pub fn new(config: HyperliquidConfig) -> Result<Self, BrokerError> {
        if !is_wallet(&config.wallet) {
            return Err(BrokerError::InvalidRequest {
                account: config.id.clone(),
                reason: format!(
                    "wallet {} is not an address (0x and 40 hex digits)",
                    tradedesk_core::error::quote(&config.wallet)
                ),
            });
        }
        let client = crate::http_client(&config.id, config.timeout)?;
        Ok(Self {
            config,
            client,
            cache: tokio::sync::Mutex::new(None),
        })
    }

    fn unavailable(&self, detail: String) -> BrokerError {
        BrokerError::Unavailable {
            account: self.config.id.clone(),
            detail,
            hint: format!(
                "check the network and that base_url ({}) is Hyperliquid's API (testnet: {TESTNET_URL})",
                self.config.base_url
            ),
        }
    }

    /// One `POST /info`.
    async fn info(&self, body: Value) -> Result<Value, BrokerError> {
        let url = format!("{}/info", self.config.base_url.trim_end_matches('/'));
        let response = self
            .client
            .post(&url)
            .json(&body)
            .send()
            .await
            .map_err(|e| {
                if e.is_timeout() {
                    BrokerError::Timeout {
                        account: self.config.id.clone(),
                        timeout: self.config.timeout,
                    }
                } else {
                    self.unavailable(format!("cannot reach {url}: {e}"))
                }
            })?;
        let status = response.status().as_u16();
        let raw = response.text().await.map_err(|e| {
            if e.is_timeout() {
                BrokerError::Timeout {
                    account: self.config.id.clone(),
                    timeout: self.config.timeout,
                }
            } else {
                self.unavailable(format!("reading the answer: {e}"))
            }
        })?;
        match status {
            200 => serde_json::from_str(&raw).map_err(|_| {
                self.unavailable(format!(
                    "{} answered something that is not JSON: {}",
                    text(&body, "type").unwrap_or("info"),
                    tradedesk_core::error::quote(&raw.chars().take(120).collect::<String>())
                ))
            }),
            429 => Err(BrokerError::RateLimited {
                account: self.config.id.clone(),
                retry_after: Some(Duration::from_secs(60)),
            }),
            400..=499 => Err(BrokerError::InvalidRequest {
                account: self.config.id.clone(),
                reason: format!(
                    "Hyperliquid refused {} (HTTP {status}): {}",
                    text(&body, "type").unwrap_or("the request"),
                    tradedesk_core::error::quote(&raw.chars().take(200).collect::<String>())
                ),
            }),
            _ => Err(self.unavailable(format!("Hyperliquid answered HTTP {status}"))),
        }
    }

    /// Every perp market, with its context.
    ///
    /// # Errors
    /// The venue cannot be reached or answers something else.
    pub async fn markets(&self) -> Result<Vec<PerpMarket>, BrokerError> {
        let v = self.info(json!({"type": "metaAndAssetCtxs"})).await?;
        let universe = v
            .get(0)
            .and_then(|m| m.get("universe"))
            .and_then(Value::as_array);
        let contexts = v.get(1).and_then(Value::as_array);
        let (Some(universe), Some(contexts)) = (universe, contexts) else {
            return Err(
                self.unavailable("metaAndAssetCtxs did not answer [meta, contexts]".to_owned())
            );
        };
        let mut out = Vec::with_capacity(universe.len());
        for (meta, ctx) in universe.iter().zip(contexts) {
            if meta.get("isDelisted").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            let (Some(coin), Some(mark)) = (text(meta, "name"), dec(ctx, "markPx")) else {
                continue;
            };
            out.push(PerpMarket {
                coin: coin.to_owned(),
                mark,
                mid: dec(ctx, "midPx"),
                oracle: dec(ctx, "oraclePx"),
                funding: dec(ctx, "funding").unwrap_or_default(),
                open_interest: dec(ctx, "openInterest").unwrap_or_default(),
                max_leverage: meta
                    .get("maxLeverage")
                    .and_then(Value::as_u64)
                    .and_then(|l| u32::try_from(l).ok())
                    .unwrap_or(1),
                size_decimals: meta
                    .get("szDecimals")
                    .and_then(Value::as_u64)
                    .and_then(|l| u32::try_from(l).ok())
                    .unwrap_or(0),
            });
        }
        Ok(out)
    }

    /// One market by coin (`BTC`, `BTC-PERP`, `HYPERLIQUID:BTC`).
    ///
    /// # Errors
    /// `UnknownSymbol` naming a few listed coins; the venue's failures.
    pub async fn market(&self, symbol: &str) -> Result<PerpMarket, BrokerError> {
        let coin = coin_of(symbol);
        let markets = self.markets().await?;
        let listed: Vec<String> = markets.iter().take(8).map(|m| m.coin.clone()).collect();
        markets
            .into_iter()
            .find(|m| m.coin.eq_ignore_ascii_case(&coin))
            .ok_or_else(|| BrokerError::UnknownSymbol {
                account: self.config.id.clone(),
                symbol: tradedesk_core::error::quote(&coin),
                known: format!("Hyperliquid perps such as {}", listed.join(", ")),
            })
    }

    /// The wallet's fills since `start`, oldest first, every page.
    async fn fills(&self, start: DateTime<Utc>) -> Result<Vec<Value>, BrokerError> {
        let mut out: Vec<Value> = Vec::new();
        let mut from = start.timestamp_millis();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..MAX_PAGES {
            let page = self
                .info(json!({
                    "type": "userFillsByTime",
                    "user": self.config.wallet,
                    "startTime": from,
                    "aggregateByTime": false,
                }))
                .await?;
            let Some(rows) = page.as_array() else {
                return Err(self.unavailable("userFillsByTime did not answer a list".to_owned()));
            };
            let full = rows.len() >= FILLS_PAGE;
            let mut last = from;
            for f in rows {
                let t = f.get("time").and_then(Value::as_i64).unwrap_or(from);
                last = last.max(t);
                // Pages overlap at their boundary instant: a fill is kept once, by tid.
                let id = f
                    .get("tid")
                    .map(Value::to_string)
                    .unwrap_or_else(|| format!("{}-{t}", text(f, "hash").unwrap_or("")));
                if seen.insert(id) {
                    out.push(f.clone());
                }
            }
            if !full || last == from {
                out.sort_by_key(|f| f.get("time").and_then(Value::as_i64).unwrap_or(0));
                return Ok(out);
            }
            from = last;
        }
        Err(BrokerError::InvalidRequest {
            account: self.config.id.clone(),
            reason: format!("more than {MAX_PAGES} pages of fills"),
        })
    }

    async fn build_book(&self) -> Result<Book, BrokerError> {
        let state = self
            .info(json!({"type": "clearinghouseState", "user": self.config.wallet}))
            .await?;
        let markets = self.markets().await?;
        // Hyperliquid keeps a wallet's fills from its start: asked from the epoch.
        let fills = self.fills(DateTime::<Utc>::UNIX_EPOCH).await?;
        let today = Utc::now().date_naive();
        let utc = Utc.fix();
        let mut instruments: Vec<Instrument> = Vec::new();
        let mut index = |coin: &str| -> u32 {
            let key = key_of(coin);
            if let Some(i) = instruments.iter().position(|x| x.key == key) {
                return u32::try_from(i).unwrap_or(u32::MAX);
            }
            instruments.push(Instrument {
                key,
                currency: Currency::USD,
                asset_class: AssetClass::Perp,
                multiplier: Decimal::ONE,
                name: Some(format!("{coin} perpetual")),
                sector: None,
                country: None,
            });
            u32::try_from(instruments.len() - 1).unwrap_or(u32::MAX)
        };
        let mut out_fills = Vec::with_capacity(fills.len());
        let mut other_fee_tokens = BTreeMap::new();
        for (seq, f) in fills.iter().enumerate() {
            let (Some(coin), Some(px), Some(sz), Some(t)) = (
                text(f, "coin"),
                dec(f, "px"),
                dec(f, "sz"),
                millis(f, "time"),
            ) else {
                return Err(self.unavailable(format!(
                    "a fill lacks coin, px, sz or time: {}",
                    tradedesk_core::error::quote(&f.to_string())
                )));
            };
            if coin.starts_with('@') || coin.contains('/') {
                // Spot fills: not perps, not in this book.
                continue;
            }
            let fee = dec(f, "fee").unwrap_or_default();
            let token = text(f, "feeToken").unwrap_or("USDC");
            if token != "USDC" {
                *other_fee_tokens.entry(token.to_owned()).or_insert(0u32) += 1;
            }
            let time = t.with_timezone(&utc);
            out_fills.push(Fill {
                id: f.get("tid").map_or_else(
                    || format!("{}-{seq}", text(f, "hash").unwrap_or("hl")),
                    |v| v.to_string().trim_matches('"').to_owned(),
                ),
                account: 0,
                instrument: index(coin),
                side: if text(f, "side") == Some("B") {
                    Side::Buy
                } else {
                    Side::Sell
                },
                quantity: sz.abs(),
                price: px,
                commission: fee,
                commission_currency: Currency::USD,
                commission_known: true,
                time,
                trade_date: time.date_naive(),
                seq: u32::try_from(seq).unwrap_or(u32::MAX),
                kind: tradedesk_core::FillKind::Trade,
            });
        }
        let mut marks = Vec::new();
        let mut reported = Vec::new();
        let mut unrealized = Decimal::ZERO;
        for p in state
            .get("assetPositions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let p = p.get("position").unwrap_or(p);
            let (Some(coin), Some(szi)) = (text(p, "coin"), dec(p, "szi")) else {
                continue;
            };
            let instrument = index(coin);
            reported.push(ReportedPosition {
                account: 0,
                instrument,
                quantity: szi,
            });
            unrealized += dec(p, "unrealizedPnl").unwrap_or_default();
        }
        for m in &markets {
            let key = key_of(&m.coin);
            if let Some(i) = instruments.iter().position(|x| x.key == key) {
                marks.push((u32::try_from(i).unwrap_or(u32::MAX), today, m.mark));
            }
        }
        let mut parts = BookParts {
            base_currency: Currency::USD,
            as_of: today,
            accounts: vec![self.account()],
            instruments,
            fills: out_fills,
            cash: Vec::new(),
            marks,
            fx_rates: Vec::new(),
            reported_positions: reported,
            corporate_actions: Vec::new(),
            notes: vec![format!(
                "{}: Hyperliquid amounts are USDC, counted as USD; funding payments are not fills, so realized P&L leaves them out (they are in the cash balance); the book's realized P&L is FIFO where Hyperliquid's own closedPnl averages cost",
                self.config.id
            )],
            unknown_specs: Vec::new(),
        };
        if fills.len() >= 10_000 {
            parts.notes.push(format!(
                "{}: Hyperliquid keeps a wallet's 10,000 most recent fills: older trades are not in this history",
                self.config.id
            ));
        }
        if !other_fee_tokens.is_empty() {
            parts.notes.push(format!(
                "{}: some fees were paid in other tokens ({}) and are counted as USD amounts",
                self.config.id,
                other_fee_tokens
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        // Cash: the account value less unrealized P&L; what the fills leave unexplained
        // (deposits, withdrawals, funding) is an opening balance.
        if let Some(value) = state
            .get("marginSummary")
            .and_then(|m| dec(m, "accountValue"))
        {
            crate::anchor_cash(
                &mut parts,
                &[(Currency::USD, value - unrealized)],
                "Hyperliquid (account value less unrealized P&L)",
                "(deposits, withdrawals, funding) the fills",
            );
        }
        Ok(Book::assemble(parts))
    }

    fn account(&self) -> Account {
        Account {
            id: self.config.id.clone(),
            broker: "hyperliquid".to_owned(),
            currency: Currency::USD,
            name: Some(format!(
                "Hyperliquid {}…{}",
                &self.config.wallet[..6],
                &self.config.wallet[self.config.wallet.len() - 4..]
            )),
            mode: Mode::Live,
        }
    }
}

#[async_trait]
impl Broker for HyperliquidBroker {
    fn accounts(&self) -> Vec<Account> {
        vec![self.account()]
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        let mut cache = self.cache.lock().await;
        if let Some((at, book)) = cache.as_ref()
            && at.elapsed() < CACHE_FOR
        {
            return Ok(Arc::clone(book));
        }
        let book = Arc::new(self.build_book().await?);
        *cache = Some((Instant::now(), Arc::clone(&book)));
        Ok(book)
    }

    fn generation(&self) -> u64 {
        crate::every(CACHE_FOR)
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let probe = self
            .info(json!({"type": "clearinghouseState", "user": self.config.wallet}))
            .await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, detail, hint) = match probe {
            Ok(state) => {
                let positions = state
                    .get("assetPositions")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len);
                let value = state
                    .get("marginSummary")
                    .and_then(|m| dec(m, "accountValue"))
                    .map_or_else(|| "?".to_owned(), |v| Currency::USD.round(v).to_string());
                (
                    HealthStatus::Ok,
                    format!(
                        "{} ({}): account value {value} USDC, {positions} position(s)",
                        self.config.base_url, self.config.wallet
                    ),
                    None,
                )
            }
            Err(BrokerError::RateLimited { .. }) => (
                HealthStatus::Degraded,
                "rate limited".to_owned(),
                Some(
                    "wait a minute: Hyperliquid weighs each request against a per-IP budget"
                        .to_owned(),
                ),
            ),
            Err(e) => crate::down(
                &e,
                Some("Hyperliquid accepted the connection but did not answer: retry later"),
                "check wallet and base_url",
            ),
        };
        vec![AccountHealth {
            account: self.config.id.clone(),
            broker: "hyperliquid".to_owned(),
            mode: Mode::Live,
            status,
            latency_ms: Some(latency_ms),
            detail,
            hint,
        }]
    }

    async fn instrument(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<TradableInstrument, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let m = self.market(symbol).await?;
        let step = Decimal::new(1, m.size_decimals.min(12));
        Ok(TradableInstrument {
            key: key_of(&m.coin),
            currency: Currency::USD,
            asset_class: AssetClass::Perp,
            multiplier: Decimal::ONE,
            lot_step: step,
            min_quantity: step,
            max_quantity: Decimal::from(1_000_000_000u64),
            tick: Decimal::new(1, 6),
            pip: None,
            margin_rate: Decimal::ONE / Decimal::from(m.max_leverage.max(1)),
            unit: "coins",
        })
    }

    async fn perp_market(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<crate::PerpMark, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let m = self.market(symbol).await?;
        Ok(crate::PerpMark {
            market: key_of(&m.coin).qualified(),
            mark: m.mark,
            max_leverage: m.max_leverage.max(1),
        })
    }

    async fn quote(&self, account: &str, symbol: &str) -> Result<Quote, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let coin = self.market(symbol).await?.coin;
        let book = self.info(json!({"type": "l2Book", "coin": coin})).await?;
        let best = |side: usize| {
            book.get("levels")
                .and_then(|l| l.get(side))
                .and_then(|l| l.get(0))
                .and_then(|level| dec(level, "px"))
        };
        let (Some(bid), Some(ask)) = (best(0), best(1)) else {
            return Err(self.unavailable(format!("the {coin} book has no bid or ask")));
        };
        Ok(Quote {
            key: key_of(&coin),
            currency: Currency::USD,
            bid,
            ask,
            time: millis(&book, "time").unwrap_or_else(Utc::now),
        })
    }

    async fn bars(
        &self,
        account: &str,
        symbol: &str,
        interval: Interval,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
    ) -> Result<Vec<Bar>, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let coin = self.market(symbol).await?.coin;
        let v = self
            .info(json!({"type": "candleSnapshot", "req": {
                "coin": coin,
                "interval": interval_text(interval),
                "startTime": start.timestamp_millis(),
                "endTime": end.timestamp_millis(),
            }}))
            .await?;
        let mut out = Vec::new();
        for c in v.as_array().into_iter().flatten() {
            let (Some(t), Some(o), Some(h), Some(l), Some(cl)) = (
                millis(c, "t"),
                dec(c, "o"),
                dec(c, "h"),
                dec(c, "l"),
                dec(c, "c"),
            ) else {
                continue;
            };
            if t < start || t > end {
                continue;
            }
            let f = |d: Decimal| d.to_string().parse::<f64>().unwrap_or(f64::NAN);
            out.push(Bar {
                time: if interval == Interval::D1 {
                    t.date_naive().to_string()
                } else {
                    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                },
                instant: t,
                open: f(o),
                high: f(h),
                low: f(l),
                close: f(cl),
                volume: dec(c, "v").map(f),
            });
        }
        out.sort_by_key(|b| b.instant);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wallets_and_coins_read_every_way_they_are_written() {
        assert!(is_wallet("0x0123456789abcdef0123456789ABCDEF01234567"));
        assert!(!is_wallet("0x0123"));
        assert!(!is_wallet("0x0123456789abcdef0123456789abcdef0123456g"));
        for s in ["BTC", "BTC-PERP", "HYPERLIQUID:BTC", "HYPERLIQUID:BTC-PERP"] {
            assert_eq!(coin_of(s), "BTC");
        }
        assert_eq!(key_of("ETH").qualified(), "HYPERLIQUID:ETH-PERP");
    }
}
