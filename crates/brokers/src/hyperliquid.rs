//! Hyperliquid, read-only: its public `POST /info` endpoint (mainnet, testnet, or any
//! base URL), for one wallet.
//!
//! * **Markets:** `metaAndAssetCtxs` (mark, funding, open interest, max leverage per
//!   perp), `allMids`, `l2Book` for a quote's bid and ask, `candleSnapshot` for bars.
//! * **The wallet:** `clearinghouseState` (positions with entry, liquidation price and
//!   leverage, the margin summary) and `userFillsByTime` (fills with their fees, paged by
//!   time until an empty answer: the venue answers at most 2,000, and 500 for time
//!   ranges, in either order; see `FillPager`).
//!
//! Perps are margin-settled in the book: a fill moves only its fee, a close credits its
//! gross P&L. Amounts are in USDC, counted as USD. Cash is anchored to the account value
//! less unrealized P&L; what the fills do not explain (deposits, funding payments) is an
//! opening balance, said in a note. Positions the fills kept (the 10,000 most recent) do
//! not explain are opened before them at Hyperliquid's own average entry (see
//! `held_before`), with a note (README, Hyperliquid; `docs/dev/dwx-hyperliquid-facts.md`).

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

use crate::calendar::Market;
use crate::{AccountHealth, Broker, BrokerError, HealthStatus};

mod search;
mod snapshots;

pub const MAINNET_URL: &str = "https://api.hyperliquid.xyz";
pub const TESTNET_URL: &str = "https://api.hyperliquid-testnet.xyz";

/// The exchange name instruments are keyed under.
pub const EXCHANGE: &str = "HYPERLIQUID";

/// The markets a Hyperliquid account trades: its perpetuals.
pub const MARKETS: [Market; 1] = [Market::Hyperliquid];

/// A bound on paging, so no loop can run away: Hyperliquid keeps a wallet's 10,000 most
/// recent fills, which is 20 pages of 500 (the smallest page it is known to answer),
/// each read about twice (once new, once at its edge).
const MAX_PAGES: usize = 200;

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
    /// `isDelisted` in the universe: listed, no longer traded.
    pub delisted: bool,
}

#[derive(Debug)]
pub struct HyperliquidBroker {
    config: HyperliquidConfig,
    client: reqwest::Client,
    /// The last book, kept for [`CACHE_FOR`]: the venue weighs every request against a
    /// per-minute budget.
    cache: tokio::sync::Mutex<Option<(Instant, Arc<Book>)>>,
    /// The perp universe `search_instruments` reads (see `search`).
    meta: search::MetaCache,
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

/// A position a coin's fills start from: held before the oldest fill read (Hyperliquid
/// keeps a wallet's 10,000 most recent fills).
#[derive(Debug, Clone, PartialEq)]
struct HeldBefore {
    coin: String,
    /// Signed, the first fill's `startPosition`.
    size: Decimal,
    /// Hyperliquid's own average entry price of it, where its answers give one.
    entry: Option<Decimal>,
}

/// What each coin's fills (oldest first, one coin's in the order made) say was held
/// before them, and at what average entry. The entry comes from Hyperliquid's own
/// figures: the first fill that reduces the position has an average-cost `closedPnl`, so
/// `entry = px - closedPnl / closed` (a short: `px + closedPnl / closed`); failing that, a
/// position still held and only ever added to has the clearinghouse's `entryPx`. Fills
/// that add before either are taken back out of that average.
fn held_before(fills: &[Value], now: &BTreeMap<String, (Decimal, Decimal)>) -> Vec<HeldBefore> {
    let mut by_coin: BTreeMap<&str, Vec<&Value>> = BTreeMap::new();
    for f in fills {
        if let Some(coin) = text(f, "coin") {
            by_coin.entry(coin).or_default().push(f);
        }
    }
    let mut out = Vec::new();
    for (coin, rows) in by_coin {
        let Some(start) = rows.first().and_then(|f| dec(f, "startPosition")) else {
            continue;
        };
        if start.is_zero() {
            continue;
        }
        let signed = |f: &Value| {
            let sz = dec(f, "sz").unwrap_or_default().abs();
            if text(f, "side") == Some("B") {
                sz
            } else {
                -sz
            }
        };
        let mut pos = start;
        let (mut added, mut added_value) = (Decimal::ZERO, Decimal::ZERO);
        let mut blended = None;
        for f in &rows {
            let q = signed(f);
            let px = dec(f, "px").unwrap_or_default();
            if q.is_sign_positive() == pos.is_sign_positive() {
                added += q.abs();
                added_value += q.abs() * px;
                pos += q;
                continue;
            }
            let closed = q.abs().min(pos.abs());
            blended = dec(f, "closedPnl")
                .filter(|_| !closed.is_zero())
                .and_then(|pnl| pnl.checked_div(closed))
                .map(|per| {
                    if pos.is_sign_positive() {
                        px - per
                    } else {
                        px + per
                    }
                });
            break;
        }
        if blended.is_none()
            && let Some((szi, entry)) = now.get(coin)
            && *szi == pos
        {
            blended = Some(*entry);
        }
        let entry = blended
            .and_then(|b| (b * (start.abs() + added) - added_value).checked_div(start.abs()))
            .map(|e| e.round_dp(12).normalize())
            .filter(|e| e.is_sign_positive() && !e.is_zero());
        out.push(HeldBefore {
            coin: coin.to_owned(),
            size: start,
            entry,
        });
    }
    out
}

/// What makes one fill itself: its `tid` where the venue sends one; otherwise (older
/// answers) every field it carries, since the partial fills of one order share `hash`,
/// `oid` and `time` and differ only in `px`, `sz`, `startPosition`, `closedPnl`, ...
fn fill_identity(f: &Value) -> String {
    match f.get("tid") {
        Some(tid) if !tid.is_null() => format!("tid:{tid}"),
        _ => {
            let mut out = String::new();
            canonical(f, &mut out);
            out
        }
    }
}

/// `v` as JSON text with every object's keys in order, so the same fill reads the same
/// whatever order the venue writes its fields in.
fn canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(x) = map.get(k) {
                    canonical(x, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// How `userFillsByTime` is read page by page. The venue answers at most 2,000 fills a
/// request (its docs also say 500 for time ranges), in an order it chooses, with
/// `startTime` and `endTime` both inclusive. So the pager asks again from the last
/// instant it was given (the cap may have cut that instant), keeps only the fills it has
/// not had (by [`fill_identity`], counted, so two identical fills of one answer both
/// stay), steps past an instant once an answer brings nothing new, and stops at the first
/// empty answer. A venue that answers newest first has the window's end moved instead.
#[derive(Debug)]
struct FillPager {
    from: i64,
    to: Option<i64>,
    /// Learnt from the first answer spanning two instants.
    newest_first: Option<bool>,
    seen: std::collections::HashMap<String, usize>,
    out: Vec<Value>,
    done: bool,
}

impl FillPager {
    fn new(from: i64) -> Self {
        Self {
            from,
            to: None,
            newest_first: None,
            seen: std::collections::HashMap::new(),
            out: Vec::new(),
            done: false,
        }
    }

    /// The next request's `startTime` and `endTime` (none: now), or `None` when done.
    fn window(&self) -> Option<(i64, Option<i64>)> {
        (!self.done).then_some((self.from, self.to))
    }

    /// Takes one answer. A fill without a time is answered back.
    fn take<'a>(&mut self, rows: &'a [Value]) -> Result<(), &'a Value> {
        let (Some(first), Some(last)) = (rows.first(), rows.last()) else {
            self.done = true;
            return Ok(());
        };
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for f in rows {
            let t = f.get("time").and_then(Value::as_i64).ok_or(f)?;
            lo = lo.min(t);
            hi = hi.max(t);
        }
        let time = |f: &Value| f.get("time").and_then(Value::as_i64).unwrap_or(0);
        if self.newest_first.is_none() && time(first) != time(last) {
            self.newest_first = Some(time(first) > time(last));
        }
        let mut in_answer: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        let mut fresh = false;
        for f in rows {
            let id = fill_identity(f);
            let n = in_answer.entry(id.clone()).or_default();
            *n += 1;
            let had = self.seen.entry(id).or_default();
            if *n > *had {
                *had = *n;
                self.out.push(f.clone());
                fresh = true;
            }
        }
        let before = (self.from, self.to);
        if self.newest_first == Some(true) {
            // The newest fills of the window came: what is left is older.
            let end = if fresh { lo } else { lo.saturating_sub(1) };
            let end = self.to.map_or(end, |to| to.min(end));
            if end < self.from {
                self.done = true;
            }
            self.to = Some(end);
        } else {
            let start = if fresh { hi } else { hi.saturating_add(1) };
            self.from = self.from.max(start);
            if self.to.is_some_and(|to| self.from > to) {
                self.done = true;
            }
        }
        // A venue that ignores the window: nothing more will come.
        if !fresh && before == (self.from, self.to) {
            self.done = true;
        }
        Ok(())
    }

    /// Every fill once, oldest first; fills of one instant in the order the venue gave.
    fn finish(mut self) -> Vec<Value> {
        self.out
            .sort_by_key(|f| f.get("time").and_then(Value::as_i64).unwrap_or(0));
        self.out
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
            meta: search::MetaCache::default(),
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
        let mut all = self.all_markets().await?;
        all.retain(|m| !m.delisted);
        Ok(all)
    }

    /// Every perp market of the universe, delisted ones included (flagged).
    ///
    /// # Errors
    /// The venue cannot be reached or answers something else.
    pub async fn all_markets(&self) -> Result<Vec<PerpMarket>, BrokerError> {
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
            let delisted = meta.get("isDelisted").and_then(Value::as_bool) == Some(true);
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
                delisted,
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

    /// The wallet's fills since `start`, oldest first, every page (see `FillPager`).
    async fn fills(&self, start: DateTime<Utc>) -> Result<Vec<Value>, BrokerError> {
        let mut pager = FillPager::new(start.timestamp_millis());
        for _ in 0..MAX_PAGES {
            let Some((from, to)) = pager.window() else {
                return Ok(pager.finish());
            };
            let mut body = json!({
                "type": "userFillsByTime",
                "user": self.config.wallet,
                "startTime": from,
                "aggregateByTime": false,
            });
            if let Some(to) = to {
                body["endTime"] = json!(to);
            }
            let page = self.info(body).await?;
            let Some(rows) = page.as_array() else {
                return Err(self.unavailable("userFillsByTime did not answer a list".to_owned()));
            };
            if let Err(f) = pager.take(rows) {
                return Err(self.unavailable(format!(
                    "a fill has no time: {}",
                    tradedesk_core::error::quote(&f.to_string())
                )));
            }
        }
        Err(BrokerError::InvalidRequest {
            account: self.config.id.clone(),
            reason: format!(
                "userFillsByTime kept answering new fills after {MAX_PAGES} pages: the wallet's history is read in pages of 500 to 2,000 fills, and Hyperliquid keeps 10,000 of them; retry later"
            ),
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
        // Without a `tid`, a fill is named by its order's hash and its place among that
        // order's fills.
        let mut per_hash: BTreeMap<&str, u32> = BTreeMap::new();
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
                id: match f.get("tid") {
                    Some(v) if !v.is_null() => v.to_string().trim_matches('"').to_owned(),
                    _ => {
                        let hash = text(f, "hash").unwrap_or("hl");
                        let n = per_hash.entry(hash).or_default();
                        *n += 1;
                        format!("{hash}-{n}")
                    }
                }
                .into(),
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
                position: 0,
            });
        }
        let mut marks = Vec::new();
        let mut reported = Vec::new();
        let mut unrealized = Decimal::ZERO;
        // Per coin: the size held now and the clearinghouse's entry price.
        let mut now: BTreeMap<String, (Decimal, Decimal)> = BTreeMap::new();
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
            if let Some(entry) = dec(p, "entryPx").filter(|e| e.is_sign_positive()) {
                now.insert(coin.to_owned(), (szi, entry));
            }
            unrealized += dec(p, "unrealizedPnl").unwrap_or_default();
        }
        // Positions older than the fills read (Hyperliquid keeps the 10,000 most recent):
        // what the clearinghouse holds (a coin it does not list is flat) less what the
        // fills add up to is opened before the coin's first fill, at Hyperliquid's own
        // average entry of it (see `held_before`), else the clearinghouse's entryPx.
        let entries: BTreeMap<String, HeldBefore> = held_before(&fills, &now)
            .into_iter()
            .map(|h| (h.coin.clone(), h))
            .collect();
        let mut implied: BTreeMap<u32, Decimal> = BTreeMap::new();
        let mut first_fill: BTreeMap<u32, chrono::DateTime<chrono::FixedOffset>> = BTreeMap::new();
        for f in &out_fills {
            *implied.entry(f.instrument).or_default() += match f.side {
                Side::Buy => f.quantity,
                Side::Sell => -f.quantity,
            };
            let t = first_fill.entry(f.instrument).or_insert(f.time);
            *t = (*t).min(f.time);
        }
        let held_now: BTreeMap<u32, Decimal> = reported
            .iter()
            .map(|r| (r.instrument, r.quantity))
            .collect();
        let coins: Vec<(u32, String)> = implied
            .keys()
            .chain(held_now.keys())
            .copied()
            .collect::<std::collections::BTreeSet<u32>>()
            .into_iter()
            .filter_map(|i| {
                instruments
                    .get(i as usize)
                    .map(|x| (i, coin_of(&x.key.symbol)))
            })
            .collect();
        let earliest = out_fills.iter().map(|f| f.time).min();
        let mut opened_before = Vec::new();
        let mut unknown_entry = Vec::new();
        for (instrument, coin) in coins {
            let size = held_now.get(&instrument).copied().unwrap_or_default()
                - implied.get(&instrument).copied().unwrap_or_default();
            if size.is_zero() {
                continue;
            }
            let symbol = key_of(&coin).symbol;
            let entry = entries
                .get(&coin)
                .and_then(|h| h.entry)
                .or_else(|| now.get(&coin).map(|(_, e)| *e));
            let Some(entry) = entry else {
                unknown_entry.push(format!("{symbol} {size}"));
                continue;
            };
            opened_before.push(format!("{symbol} {size} at {entry}"));
            let at = first_fill
                .get(&instrument)
                .copied()
                .or(earliest)
                .unwrap_or_else(|| Utc::now().fixed_offset())
                - chrono::Duration::milliseconds(1);
            let seq = u32::try_from(out_fills.len()).unwrap_or(u32::MAX);
            out_fills.push(
                tradedesk_core::MadeFill {
                    id: format!("opening-{}", key_of(&coin).qualified()),
                    account: 0,
                    instrument,
                    side: if size.is_sign_positive() {
                        Side::Buy
                    } else {
                        Side::Sell
                    },
                    quantity: size.abs(),
                    price: entry,
                    currency: Currency::USD,
                    time: at,
                    kind: tradedesk_core::FillKind::Opening,
                    commission_known: false,
                    seq,
                }
                .into(),
            );
        }
        // The clearinghouse lists every open position: a coin with fills it does not
        // list is flat, which the reconciliation checks the fills against.
        for i in implied.keys() {
            if !held_now.contains_key(i) {
                reported.push(ReportedPosition {
                    account: 0,
                    instrument: *i,
                    quantity: Decimal::ZERO,
                });
            }
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
            tickets: Vec::new(),
            margin_modes: Vec::new(),
        };
        if !opened_before.is_empty() {
            parts.notes.push(format!(
                "{}: the clearinghouse's positions are not what the fills read add up to, so positions were held before them (Hyperliquid keeps a wallet's 10,000 most recent fills): {} opened before their first fill at Hyperliquid's own average entry price (from its closedPnl, else the clearinghouse's entryPx), fees unknown; P&L on these lots is against Hyperliquid's average cost, not a FIFO of fills read",
                self.config.id,
                opened_before.join(", ")
            ));
        }
        if !unknown_entry.is_empty() {
            parts.notes.push(format!(
                "{}: the clearinghouse and the fills read disagree on {} and Hyperliquid's answers give no entry price for the difference: no lots are opened for it, and the reconciliation shows it",
                self.config.id,
                unknown_entry.join(", ")
            ));
        }
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

    fn offers_perps(&self) -> bool {
        true
    }

    fn markets(&self, _account: &str) -> Vec<Market> {
        MARKETS.to_vec()
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

    /// `metaAndAssetCtxs`: every market of the universe, delisted ones flagged closed.
    /// `funding` is Hyperliquid's hourly rate; `openInterest` is in coins; the size
    /// step is `10^-szDecimals`.
    async fn perp_markets(&self, account: &str) -> Result<crate::PerpListings, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let markets = self.all_markets().await?;
        let listed = markets
            .into_iter()
            .map(|m| crate::PerpListing {
                market: key_of(&m.coin).qualified(),
                mark: m.mark,
                oracle: m.oracle,
                funding_rate: Some(m.funding),
                funding_period_hours: Some(1),
                open_interest: Some(m.open_interest),
                max_leverage: m.max_leverage.max(1),
                size_step: Decimal::new(1, m.size_decimals.min(12)),
                open: !m.delisted,
                name: m.coin,
            })
            .collect();
        Ok(crate::PerpListings {
            markets: listed,
            notes: vec![format!(
                "{}: Hyperliquid's funding is paid every hour; it also refuses an order worth less than 10 USDC, whatever its size",
                self.config.id
            )],
        })
    }

    /// `recentTrades` for one coin: the venue's latest prints (`side` B is a taker buy,
    /// A a taker sell), newest first.
    async fn recent_trades(&self, account: &str, symbol: &str) -> Result<crate::Tape, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let coin = self.market(symbol).await?.coin;
        let v = self
            .info(json!({"type": "recentTrades", "coin": coin}))
            .await?;
        let Some(rows) = v.as_array() else {
            return Err(self.unavailable("recentTrades did not answer a list".to_owned()));
        };
        let mut trades = Vec::with_capacity(rows.len());
        let mut skipped = 0usize;
        for t in rows {
            let side = match text(t, "side") {
                Some("B") => Some(Side::Buy),
                Some("A") => Some(Side::Sell),
                _ => None,
            };
            let (Some(price), Some(size), Some(side), Some(time)) =
                (dec(t, "px"), dec(t, "sz"), side, millis(t, "time"))
            else {
                skipped += 1;
                continue;
            };
            trades.push(crate::TapeTrade {
                price,
                size,
                side,
                time,
                id: t
                    .get("tid")
                    .filter(|v| !v.is_null())
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned)),
            });
        }
        trades.sort_by_key(|t| std::cmp::Reverse(t.time));
        let mut notes = Vec::new();
        if skipped > 0 {
            notes.push(format!(
                "{}: {skipped} of Hyperliquid's trades lacked a price, size, side or time and are left out",
                self.config.id
            ));
        }
        Ok(crate::Tape {
            market: key_of(&coin).qualified(),
            trades,
            notes,
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

    /// Every perp's context in one `metaAndAssetCtxs` (`snapshots.rs`).
    async fn market_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<crate::MarketSnapshots, BrokerError> {
        self.read_snapshots(account, symbols).await
    }

    /// The perp universe from `meta` (`search`).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        self.search(account, query).await
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

    /// A fill as the 2023 answers write it: no `tid`.
    fn legacy(time: i64, px: &str, sz: &str, start: &str) -> Value {
        json!({"coin": "SUI", "px": px, "sz": sz, "side": "A", "time": time,
            "startPosition": start, "dir": "Close Long", "closedPnl": "0.0",
            "hash": "0xabc", "oid": 7, "crossed": true, "fee": "0.0"})
    }

    /// Serves `all` (oldest first) as a venue capped at `cap` would, until the pager is
    /// done; answers what it kept and the windows asked.
    fn page_through(all: &[Value], cap: usize, newest_first: bool) -> (Vec<Value>, usize) {
        let mut pager = FillPager::new(0);
        let mut asked = 0;
        while let Some((from, to)) = pager.window() {
            asked += 1;
            assert!(asked < 1_000, "the pager does not stop");
            let mut rows: Vec<Value> = all
                .iter()
                .filter(|f| {
                    let t = f["time"].as_i64().unwrap_or(0);
                    t >= from && to.is_none_or(|to| t <= to)
                })
                .cloned()
                .collect();
            if newest_first {
                rows.sort_by_key(|f| std::cmp::Reverse(f["time"].as_i64().unwrap_or(0)));
            }
            rows.truncate(cap);
            pager.take(&rows).unwrap_or_else(|f| panic!("{f}"));
        }
        (pager.finish(), asked)
    }

    #[test]
    fn partial_fills_of_one_order_are_each_a_fill() {
        // One order's fills: one hash, one time; two alike but for startPosition.
        let a = legacy(5, "1.3189", "142.7", "4623.5");
        let b = legacy(5, "1.3167", "3749.1", "4480.8");
        let c = legacy(5, "1.3167", "100.0", "731.7");
        let d = legacy(5, "1.3167", "100.0", "631.7");
        assert_ne!(fill_identity(&a), fill_identity(&b));
        assert_ne!(fill_identity(&c), fill_identity(&d));
        // Field order does not matter; a tid decides where there is one.
        let mut reordered = serde_json::Map::new();
        for (k, v) in a.as_object().into_iter().flatten().rev() {
            reordered.insert(k.clone(), v.clone());
        }
        assert_eq!(fill_identity(&a), fill_identity(&Value::Object(reordered)));
        let mut with_tid = a.clone();
        with_tid["tid"] = json!(42);
        let mut other = b.clone();
        other["tid"] = json!(42);
        assert_eq!(fill_identity(&with_tid), fill_identity(&other));
        let (kept, _) = page_through(&[a, b, c, d], 2_000, false);
        assert_eq!(kept.len(), 4);
    }

    #[test]
    fn pages_below_the_cap_and_cut_instants_lose_nothing_and_repeat_nothing() {
        // 50 instants of 3 fills; two fills of instant 20 are alike in every field.
        let mut all = Vec::new();
        for t in 0..50i64 {
            for k in 0..3 {
                let sz = if t == 20 && k > 0 {
                    "1"
                } else {
                    ["1", "2", "3"][k]
                };
                all.push(legacy(1_000 + t, "1.5", sz, "0"));
            }
        }
        for (cap, newest_first) in [
            (7, false),
            (7, true),
            (3, false),
            (2_000, false),
            (500, true),
        ] {
            let (kept, asked) = page_through(&all, cap, newest_first);
            assert_eq!(kept.len(), 150, "cap {cap}, newest first {newest_first}");
            let times: Vec<i64> = kept
                .iter()
                .map(|f| f["time"].as_i64().unwrap_or(0))
                .collect();
            assert!(times.windows(2).all(|w| w[0] <= w[1]), "oldest first");
            assert!(asked <= 2 * 150 / cap + 4, "cap {cap}: {asked} requests");
        }
        // An empty wallet: one request.
        assert_eq!(page_through(&[], 500, false), (Vec::new(), 1));
    }

    #[test]
    fn positions_before_the_fills_take_the_venues_average_entry() {
        let fill = |coin: &str, side: &str, sz: &str, px: &str, start: &str, pnl: &str| {
            json!({"coin": coin, "side": side, "sz": sz, "px": px, "startPosition": start,
                "closedPnl": pnl, "time": 1})
        };
        let fills = [
            // A short of 4 at an average 10 (10 - 9.5 = 0.5 a unit on 2 closed: 1.0).
            fill("A", "B", "2", "9.5", "-4", "1.0"),
            // A long of 1 at 100, added to at 130 (average 115), out at 120: 5.0.
            fill("B", "B", "1", "130", "1", "0.0"),
            fill("B", "A", "2", "120", "2", "10.0"),
            // A long of 3 only added to: the clearinghouse's entry 12 over 5 units, the
            // addition of 2 at 15 taken out: (60 - 30) / 3 = 10.
            fill("C", "B", "2", "15", "3", "0.0"),
            // Nothing before.
            fill("D", "B", "2", "15", "0", "0.0"),
            // Held before, never reduced, not held now: no entry.
            fill("E", "A", "1", "15", "-2", "0.0"),
        ];
        let now = BTreeMap::from([("C".to_owned(), (Decimal::from(5), Decimal::from(12)))]);
        let held = held_before(&fills, &now);
        let entry = |coin: &str| {
            held.iter()
                .find(|h| h.coin == coin)
                .map(|h| (h.size, h.entry))
        };
        assert_eq!(
            entry("A"),
            Some((Decimal::from(-4), Some(Decimal::from(10))))
        );
        assert_eq!(entry("B"), Some((Decimal::ONE, Some(Decimal::from(100)))));
        assert_eq!(
            entry("C"),
            Some((Decimal::from(3), Some(Decimal::from(10))))
        );
        assert_eq!(entry("D"), None);
        assert_eq!(entry("E"), Some((Decimal::from(-2), None)));
    }
}
