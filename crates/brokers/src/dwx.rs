//! MetaTrader 4 and 5 through the DWXConnect file bridge: an EA in the terminal reads
//! command files and writes the account, its orders, quotes, history and messages as
//! JSON files in `MQL4/Files/DWX` (or `MQL5/Files/DWX`).
//!
//! * **Commands** are `<:ID|COMMAND|CONTENT:>` in the lowest free of 50 slots
//!   (`DWX_Commands_N.txt`), written under a temporary name and linked into place, so the
//!   EA never reads half a command and a slot is never overwritten. The first command
//!   resets the EA's id memory, as the EA forgets nothing else.
//! * **Reads** (`DWX_Orders.txt`, `DWX_Market_Data.txt`, `DWX_Historic_Trades.txt`,
//!   `DWX_Messages.txt`): UTF-8 or UTF-16 with a BOM; an empty, torn or unparsable file
//!   is read again on the next poll. `DWX_Orders.txt` is the EA's heartbeat: the EA
//!   rewrites it at least every second, so an old one means the EA is not running.
//! * **Orders** carry the account's magic number and, at the start of their comment, a
//!   tag made from the client order id (`td` and 8 hex digits of its SHA-256), so a retry
//!   after a timeout finds the order instead of sending it again. Brokers rewrite
//!   comments (on SL/TP hits, partial closes), so the fallback is a new ticket with the
//!   same symbol, lots, side and magic that was not there before the send.
//! * **Closes** are `CLOSE_ORDER` on the symbol's tickets, oldest first (an opposite
//!   order would open a hedge on MT4), and SL/TP changes are `MODIFY_ORDER` on each.
//!
//! Times in the files are the broker's server time: `server_time_zone` says which zone
//! that is (UTC unless configured). Prices come with 5 decimals and lots with 2, as the
//! EA writes them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use chrono::{DateTime, NaiveDateTime, Offset, TimeZone, Utc};
use rust_decimal::Decimal;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tradedesk_core::{
    Account, AssetClass, Book, BookParts, CashEntry, CashKind, Currency, Fill, FxQuote, Instrument,
    InstrumentKey, MarginMode, Mode, OrderRecord, OrderRequest, OrderStatus, OrderType, Quote,
    ReportedPosition, Side, TimeInForce, TradableInstrument, UnknownSpec,
};

use crate::calendar::Market;
use crate::zones;
use crate::{AccountHealth, Broker, BrokerError, HealthStatus, OrderFilter, OrderRef, Placed};

mod search;
mod snapshots;

/// Command slots the EA scans.
const SLOTS: usize = 50;
/// How often files are polled while waiting.
const POLL: Duration = Duration::from_millis(20);
/// The EA rewrites `DWX_Orders.txt` at least every second: older than this, it is not running.
const STALE_AFTER: Duration = Duration::from_secs(5);
/// MetaTrader's comment length.
pub const COMMENT_MAX: usize = 31;

/// The markets a MetaTrader account trades here: FX.
pub const MARKETS: [Market; 1] = [Market::Fx];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Mt4,
    Mt5,
}

impl Platform {
    fn name(self) -> &'static str {
        match self {
            Self::Mt4 => "MT4",
            Self::Mt5 => "MT5",
        }
    }
}

#[derive(Debug, Clone)]
pub struct DwxConfig {
    /// The config's name for the account.
    pub id: String,
    /// The terminal's `MQL4/Files` or `MQL5/Files` folder (the EA's files are in `DWX/`).
    pub files: PathBuf,
    pub platform: Platform,
    /// The magic number tradedesk's orders carry.
    pub magic: i64,
    /// A demo account (paper) or a real one (live).
    pub live: bool,
    /// The broker's server time zone (IANA name), for the times in the files.
    pub server_time_zone: Option<String>,
    pub history_days: u32,
    pub timeout: Duration,
    /// Contract size and profit currency per symbol (as the terminal's Specification
    /// window shows them): the EA's files do not carry them.
    pub symbols: BTreeMap<String, SymbolSpec>,
    /// MT5: whether the account hedges or nets, as the config states it (the EA does
    /// not write it); MT4 always hedges.
    pub margin_mode: Option<MarginMode>,
    /// Lot step, minimum and maximum per symbol, as the terminal's Specification window
    /// shows them: the EA's files do not carry them.
    pub lots: BTreeMap<String, LotRules>,
}

/// What the config states of a symbol's volumes; each `None` where it states nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LotRules {
    pub step: Option<Decimal>,
    pub min: Option<Decimal>,
    pub max: Option<Decimal>,
}

/// The finest lot the EA carries: it rounds an order's lots to `lotSizeDigits` (2 in the
/// stock EA) and writes every ticket's lots with two decimals
/// (docs/dev/dwx-hyperliquid-facts.md, A.2 and A.3).
const EA_LOT: Decimal = Decimal::from_parts(1, 0, 0, false, 2);

/// What the config states of one symbol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolSpec {
    /// Units of the underlying in one lot (100,000 for an FX pair, 100 for XBRUSD, 1 for
    /// GER40 at 1 EUR a point).
    pub contract_size: Decimal,
    /// The currency the symbol's profit is paid in (EUR for GER40); absent: a pair's
    /// quote currency, USD for gold and silver, else the account's.
    pub profit_currency: Option<Currency>,
}

/// A symbol's class, contract size, profit currency, pip and tick, and what of them is
/// assumed (with the fix).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Resolved {
    class: AssetClass,
    multiplier: Decimal,
    currency: Currency,
    pip: Option<Decimal>,
    tick: Decimal,
    assumed: Option<(String, String)>,
}

/// The config's spec for a symbol: by its exact name, else case-insensitively.
fn configured<'a, T>(symbols: &'a BTreeMap<String, T>, symbol: &str) -> Option<&'a T> {
    symbols.get(symbol).or_else(|| {
        symbols
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(symbol))
            .map(|(_, v)| v)
    })
}

/// A symbol's spec: the config's, else the conventions of [`instrument_of`] for FX
/// pairs and metals; any other symbol (a CFD) has a contract size and profit currency
/// nobody stated, so the contract size its closed trades' own P&L implies (in the
/// account's currency), else 1, is assumed and listed (docs/methodology/instruments.md).
fn resolve(
    symbol: &str,
    account_currency: Currency,
    symbols: &BTreeMap<String, SymbolSpec>,
    implied: Option<&Inferred>,
) -> Resolved {
    let (class, multiplier, currency, pip, tick) = instrument_of(symbol, account_currency);
    if let Some(spec) = configured(symbols, symbol) {
        let currency = spec.profit_currency.unwrap_or(currency);
        let assumed = (class == AssetClass::Cfd && spec.profit_currency.is_none()).then(|| {
            (
                format!(
                    "the config states no profit_currency for {symbol}: the account's {} assumed",
                    account_currency.code()
                ),
                format!(
                    "add profit_currency under [accounts.symbols.\"{symbol}\"] in tradedesk.toml"
                ),
            )
        });
        return Resolved {
            class,
            multiplier: spec.contract_size,
            currency,
            pip,
            tick,
            assumed,
        };
    }
    if class != AssetClass::Cfd {
        return Resolved {
            class,
            multiplier,
            currency,
            pip,
            tick,
            assumed: None,
        };
    }
    let fix = format!(
        "add contract_size and profit_currency under [accounts.symbols.\"{symbol}\"] in tradedesk.toml, as the terminal's Specification window shows them"
    );
    let ccy = account_currency.code();
    let (multiplier, currency, detail) = match implied {
        Some(k) => (
            k.multiplier,
            k.currency,
            format!(
                "the DWXConnect EA writes no contract size or profit currency: {}",
                k.detail
            ),
        ),
        None => (
            Decimal::ONE,
            currency,
            format!(
                "the DWXConnect EA writes no contract size or profit currency: 1 a lot, in {ccy}, is assumed"
            ),
        ),
    };
    Resolved {
        class,
        multiplier,
        currency,
        pip,
        tick,
        assumed: Some((detail, fix)),
    }
}

/// What the terminal's own figures say of a symbol nobody stated: its contract size and
/// the currency its profit is paid in, and how that was found (for the note).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Inferred {
    multiplier: Decimal,
    currency: Currency,
    detail: String,
}

/// A closed trade's own figures: MT4's history order, or MT5's closing deal with the
/// price the position it closes was opened at (its `entry_in` deals in the history,
/// else the open ticket's price). What contract sizes and conversions are read from.
#[derive(Debug, Clone, PartialEq)]
struct ClosedTrade {
    symbol: String,
    /// When it closed, in the server's time text.
    closed: String,
    /// `None`: an MT5 deal closing a position opened before the history read, of which
    /// nothing is open any more.
    open: Option<Decimal>,
    close: Decimal,
    lots: Decimal,
    /// The trade's side: 1 for a buy closed by a sell, -1 for a sell.
    sign: Decimal,
    /// The profit in the account's currency, swap and commission apart, as the EA wrote it.
    pnl: Decimal,
    /// The MT5 deal's history key (the closing fill's id).
    deal: Option<String>,
}

impl ClosedTrade {
    /// Account currency per point per lot: `pnl / ((close − open) × lots)` by side.
    fn per_point(&self) -> Option<(Decimal, Decimal)> {
        let moved = (self.close - self.open?) * self.lots * self.sign;
        if moved.is_zero() || self.pnl.is_zero() {
            return None;
        }
        self.pnl.checked_div(moved).map(|k| (moved.abs(), k))
    }
}

/// The closed trades of a history read (see [`ClosedTrade`]). MT5's deals are walked in
/// time order, a long and a short book per symbol (a hedging account holds both); a
/// closing deal closes from the book of the other side at its average price.
fn closed_trades(
    platform: Platform,
    rows: &[(String, Value)],
    tickets: &[Ticket],
) -> (Vec<ClosedTrade>, BTreeMap<String, Decimal>) {
    let side_sign = |kind: &str| match kind {
        "buy" => Some(Decimal::ONE),
        "sell" => Some(Decimal::NEGATIVE_ONE),
        _ => None,
    };
    if platform == Platform::Mt4 {
        let trades = rows
            .iter()
            .filter_map(|(_, h)| {
                Some(ClosedTrade {
                    symbol: text(h, "symbol"),
                    closed: text(h, "close_time"),
                    open: Some(dec(h, "open_price")?),
                    close: dec(h, "close_price")?,
                    lots: dec(h, "lots")?,
                    sign: side_sign(&text(h, "type"))?,
                    pnl: dec(h, "pnl").unwrap_or_default(),
                    deal: None,
                })
            })
            .collect();
        return (trades, BTreeMap::new());
    }
    let mut deals: Vec<(&String, &Value)> = rows
        .iter()
        .filter(|(_, h)| side_sign(&text(h, "type")).is_some())
        .map(|(k, h)| (k, h))
        .collect();
    deals.sort_by(|a, b| {
        text(a.1, "deal_time")
            .cmp(&text(b.1, "deal_time"))
            .then(a.0.len().cmp(&b.0.len()))
            .then(a.0.cmp(b.0))
    });
    // (symbol, side) -> (lots, average price) of what the read deals opened, and the
    // entry deals still open with their lots and commission.
    let mut books: BTreeMap<(String, bool), (Decimal, Decimal)> = BTreeMap::new();
    let mut entries: BTreeMap<(String, bool), Vec<OpenEntry>> = BTreeMap::new();
    let mut moves: BTreeMap<String, Decimal> = BTreeMap::new();
    let mut out = Vec::new();
    for (key, h) in deals {
        let (Some(sign), Some(price), Some(lots)) = (
            side_sign(&text(h, "type")),
            dec(h, "deal_price"),
            dec(h, "lots"),
        ) else {
            continue;
        };
        let symbol = text(h, "symbol");
        let buy = sign.is_sign_positive();
        let entry = text(h, "entry");
        let mut open_lots = lots;
        if matches!(entry.as_str(), "entry_out" | "entry_out_by" | "in_out") {
            let book = books.entry((symbol.clone(), !buy)).or_default();
            let from_book = if entry == "in_out" {
                book.0
            } else {
                lots.min(book.0)
            };
            let ticket = tickets
                .iter()
                .find(|t| t.is_position() && t.symbol == symbol && (t.side() == Side::Buy) != buy);
            let closed_lots = if entry == "in_out" { book.0 } else { lots };
            let rest = closed_lots - from_book;
            let open = match (from_book.is_zero(), rest.is_zero(), ticket) {
                (false, true, _) => Some(book.1),
                (true, _, Some(t)) => Some(t.open_price),
                (false, false, Some(t)) => {
                    Some((book.1 * from_book + t.open_price * rest) / closed_lots)
                }
                _ => None,
            };
            book.0 -= from_book;
            // The entry deals' commission moves with the lots to the deal that closes
            // them: converted on the closing day, as the trade's profit is.
            let mut need = from_book;
            let queue = entries.entry((symbol.clone(), !buy)).or_default();
            while need > Decimal::ZERO && !queue.is_empty() {
                let (entry_key, left, commission) = &mut queue[0];
                let take = need.min(*left);
                let share = if take == *left {
                    *commission
                } else {
                    (*commission * take / *left).round_dp(2)
                };
                *moves.entry(entry_key.clone()).or_default() -= share;
                *moves.entry(key.clone()).or_default() += share;
                *commission -= share;
                *left -= take;
                need -= take;
                if left.is_zero() {
                    queue.remove(0);
                }
            }
            if !closed_lots.is_zero() {
                out.push(ClosedTrade {
                    symbol: symbol.clone(),
                    closed: text(h, "deal_time"),
                    open,
                    close: price,
                    lots: closed_lots,
                    sign: -sign,
                    pnl: dec(h, "pnl").unwrap_or_default(),
                    deal: Some(key.clone()),
                });
            }
            if entry != "in_out" {
                continue;
            }
            open_lots = lots - closed_lots;
        } else if entry != "entry_in" {
            continue;
        }
        if open_lots > Decimal::ZERO {
            let commission = dec(h, "commission").unwrap_or_default();
            let share = if open_lots == lots {
                commission
            } else {
                (commission * open_lots / lots).round_dp(2)
            };
            entries
                .entry((symbol.clone(), buy))
                .or_default()
                .push((key.clone(), open_lots, share));
            let book = books.entry((symbol, buy)).or_default();
            let total = book.0 + open_lots;
            book.1 = (book.1 * book.0 + price * open_lots) / total;
            book.0 = total;
        }
    }
    (out, moves)
}

/// An MT5 entry deal still open: its key, lots and the commission not yet moved.
type OpenEntry = (String, Decimal, Decimal);

/// Account currency per point per lot that an open ticket's own `pnl` implies at the
/// terminal's price it closes at (bid for a buy, ask for a sell), per symbol, from the
/// ticket that moved most, with its points times lots.
fn open_per_point(
    tickets: &[Ticket],
    prices: &BTreeMap<String, (Decimal, Decimal)>,
) -> BTreeMap<String, (Decimal, Decimal)> {
    let mut best: BTreeMap<String, (Decimal, Decimal)> = BTreeMap::new();
    for t in tickets.iter().filter(|t| t.is_position()) {
        let Some(&(bid, ask)) = prices.get(&t.symbol) else {
            continue;
        };
        let (price, sign) = match t.side() {
            Side::Buy => (bid, Decimal::ONE),
            Side::Sell => (ask, Decimal::NEGATIVE_ONE),
        };
        let moved = (price - t.open_price) * t.lots * sign;
        if moved.is_zero() || t.pnl.is_zero() {
            continue;
        }
        let Some(k) = t.pnl.checked_div(moved) else {
            continue;
        };
        let e = best.entry(t.symbol.clone()).or_insert((Decimal::ZERO, k));
        if moved.abs() > e.0 {
            *e = (moved.abs(), k);
        }
    }
    best
}

/// Per symbol, the per-point figure (account currency a point a lot) the closed trades
/// agree on within 1%, from the trade that moved most.
fn closed_per_point(trades: &[ClosedTrade]) -> BTreeMap<String, Decimal> {
    let mut by_symbol: BTreeMap<&String, Vec<(Decimal, Decimal)>> = BTreeMap::new();
    for t in trades {
        if let Some(k) = t.per_point() {
            by_symbol.entry(&t.symbol).or_default().push(k);
        }
    }
    by_symbol
        .into_iter()
        .filter_map(|(symbol, ks)| {
            let (_, best) = ks.iter().copied().max_by_key(|(m, _)| *m)?;
            let tolerance = best / Decimal::ONE_HUNDRED;
            (best.is_sign_positive() && ks.iter().all(|(_, k)| (*k - best).abs() <= tolerance))
                .then(|| (symbol.clone(), best.round_dp(4).normalize()))
        })
        .collect()
}

/// Currencies a CFD's profit may be paid in, tried against the terminal's quotes when a
/// symbol's own figures show it is not the account's.
const PROFIT_CANDIDATES: [&str; 8] = ["EUR", "GBP", "JPY", "CHF", "AUD", "CAD", "NZD", "HKD"];

/// `x` as a round contract size (1, 2, 2.5 or 5 times a power of ten) when it is one
/// within 0.5%.
fn round_size(x: Decimal) -> Option<Decimal> {
    if !x.is_sign_positive() || x.is_zero() {
        return None;
    }
    let mut scale = Decimal::new(1, 4);
    while scale <= Decimal::from(10_000_000) {
        for m in [
            Decimal::ONE,
            Decimal::TWO,
            Decimal::new(25, 1),
            Decimal::from(5),
        ] {
            let n = m * scale;
            if ((x - n).abs() / n) <= Decimal::new(5, 3) {
                return Some(n.normalize());
            }
        }
        scale *= Decimal::TEN;
    }
    None
}

/// The symbols whose figures show a profit currency other than the account's: a closed
/// trade's per-point figure and the open tickets' differ by more than the rounding of
/// their cents and 0.1% (a rate moved between them).
fn moving_rate_symbols(
    trades: &[ClosedTrade],
    open: &BTreeMap<String, (Decimal, Decimal)>,
) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let cent = Decimal::new(1, 2);
    for (symbol, (moved_now, k_now)) in open {
        let off = trades
            .iter()
            .filter(|t| &t.symbol == symbol)
            .filter_map(ClosedTrade::per_point)
            .any(|(moved, k)| {
                let rounding = cent / moved + cent / *moved_now;
                (k - *k_now).abs() > rounding + k_now.abs() / Decimal::ONE_THOUSAND
            });
        if off {
            out.insert(symbol.clone());
        }
    }
    out
}

/// Per symbol that is neither an FX pair nor a metal and that the config does not state,
/// what the terminal's own figures imply (docs/methodology/instruments.md):
/// * when the open tickets' and the closed trades' per-point figures agree (see
///   [`moving_rate_symbols`]; closed trades alone within 1%), that figure is the contract
///   size in the account's currency (the open tickets' first);
/// * when they disagree, the profit is paid in another currency whose rate moved: the
///   candidate currency whose quote (`rates`, into the account's) turns the open tickets'
///   figure into a round contract size is taken, with that size;
/// * else the open tickets' figure, in the account's currency, with a note that the
///   closed trades do not agree with it.
fn infer_specs(
    trades: &[ClosedTrade],
    open: &BTreeMap<String, (Decimal, Decimal)>,
    rates: &BTreeMap<Currency, Decimal>,
    account: Currency,
) -> BTreeMap<String, Inferred> {
    let ccy = account.code();
    let mut symbols: BTreeSet<&String> = open.keys().collect();
    symbols.extend(trades.iter().map(|t| &t.symbol));
    let moving = moving_rate_symbols(trades, open);
    let mut out = BTreeMap::new();
    for symbol in symbols {
        if instrument_of(symbol, account).0 != AssetClass::Cfd {
            continue;
        }
        let ks: Vec<(Decimal, Decimal)> = trades
            .iter()
            .filter(|t| &t.symbol == symbol)
            .filter_map(ClosedTrade::per_point)
            .collect();
        let closed_best = ks.iter().copied().max_by_key(|(m, _)| *m).map(|(_, k)| k);
        let inferred = match (open.get(symbol).map(|(_, k)| *k), closed_best) {
            (Some(k_now), _) if moving.contains(symbol) => {
                let found = rates
                    .iter()
                    .filter(|(c, _)| **c != account)
                    .find_map(|(c, rate)| Some((*c, round_size(k_now.checked_div(*rate)?)?)));
                match found {
                    Some((c, size)) => Inferred {
                        multiplier: size,
                        currency: c,
                        detail: format!(
                            "{size} {c} a point a lot is assumed: the open ticket's own profit ({} {ccy} a point a lot) at the terminal's {c}{ccy} quote; the closed trades' own profit gives the rates of their closing dates",
                            k_now.round_dp(4).normalize()
                        ),
                    },
                    None => Inferred {
                        multiplier: k_now.round_dp(4).normalize(),
                        currency: account,
                        detail: format!(
                            "{} {ccy} a point a lot, what the open ticket's own profit implies, is assumed; the closed trades' own profit implies other figures, so the profit is paid in a currency the terminal's quotes did not identify",
                            k_now.round_dp(4).normalize()
                        ),
                    },
                }
            }
            (Some(k_now), _) if k_now.is_sign_positive() => Inferred {
                multiplier: k_now.round_dp(4).normalize(),
                currency: account,
                detail: format!(
                    "{} {ccy} a point a lot, what the open ticket's own profit implies, is assumed",
                    k_now.round_dp(4).normalize()
                ),
            },
            (_, Some(best)) if best.is_sign_positive() => {
                let tolerance = best / Decimal::ONE_HUNDRED;
                if !ks.iter().all(|(_, k)| (*k - best).abs() <= tolerance) {
                    continue;
                }
                let k = best.round_dp(4).normalize();
                Inferred {
                    multiplier: k,
                    currency: account,
                    detail: format!(
                        "{k} {ccy} a point a lot, what the closed trades' own P&L imply, is assumed"
                    ),
                }
            }
            _ => continue,
        };
        out.insert(symbol.clone(), inferred);
    }
    out
}

/// An open position or pending order, as `DWX_Orders.txt` has it.
#[derive(Debug, Clone, PartialEq)]
struct Ticket {
    ticket: String,
    magic: i64,
    symbol: String,
    lots: Decimal,
    kind: String,
    open_price: Decimal,
    open_time: String,
    sl: Decimal,
    tp: Decimal,
    /// The profit so far in the account's currency, swap and commission apart.
    pnl: Decimal,
    commission: Decimal,
    swap: Decimal,
    comment: String,
}

impl Ticket {
    fn is_position(&self) -> bool {
        matches!(self.kind.as_str(), "buy" | "sell")
    }

    fn side(&self) -> Side {
        if self.kind.starts_with("buy") {
            Side::Buy
        } else {
            Side::Sell
        }
    }
}

#[derive(Debug, Clone)]
struct AccountInfo {
    name: String,
    number: String,
    currency: Currency,
    /// Each `None` where the EA's `account_info` does not write it: never a made-up 0 or 1.
    leverage: Option<Decimal>,
    balance: Option<Decimal>,
    equity: Option<Decimal>,
    free_margin: Option<Decimal>,
}

/// What a send left to look for, while this process lives.
#[derive(Debug, Clone)]
struct Sent {
    symbol: String,
    lots: Decimal,
    side: Side,
    magic: i64,
    before: BTreeSet<String>,
    /// The command file, until the EA takes it, and its text.
    slot: PathBuf,
    body: String,
}

#[derive(Debug)]
pub struct DwxBroker {
    config: DwxConfig,
    /// The account's figures as the EA wrote them with the last snapshot.
    reported: std::sync::Mutex<Option<AccountInfo>>,
    next_id: AtomicI64,
    /// One command conversation at a time: messages and new tickets are then ours.
    writing: Mutex<bool>,
    subscribed: Mutex<BTreeSet<String>>,
    sent: std::sync::Mutex<BTreeMap<String, Sent>>,
}

fn dec(v: &Value, field: &str) -> Option<Decimal> {
    match v.get(field)? {
        Value::Number(n) => n.to_string().parse().ok(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn text(v: &Value, field: &str) -> String {
    match v.get(field) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// Windows-1252's characters for the bytes 0x80 to 0x9F (where it differs from Latin-1;
/// its five unassigned bytes are kept as the C1 controls).
const CP1252_HIGH: [char; 32] = [
    '\u{20ac}', '\u{81}', '\u{201a}', '\u{192}', '\u{201e}', '\u{2026}', '\u{2020}', '\u{2021}',
    '\u{2c6}', '\u{2030}', '\u{160}', '\u{2039}', '\u{152}', '\u{8d}', '\u{17d}', '\u{8f}',
    '\u{90}', '\u{2018}', '\u{2019}', '\u{201c}', '\u{201d}', '\u{2022}', '\u{2013}', '\u{2014}',
    '\u{2dc}', '\u{2122}', '\u{161}', '\u{203a}', '\u{153}', '\u{9d}', '\u{17e}', '\u{178}',
];

/// An ANSI file (MT5's `FILE_ANSI`, on a Western Windows code page 1252): each byte one
/// character.
fn ansi(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| match b {
            0x80..=0x9F => CP1252_HIGH[usize::from(b - 0x80)],
            _ => char::from(b),
        })
        .collect()
}

/// UTF-8, or UTF-16LE (with a BOM, or recognizable by its zero bytes), as MT4 may write,
/// or ANSI (what is not UTF-8), as MT5's EA writes.
fn decode(bytes: &[u8]) -> Option<String> {
    let utf16 = |b: &[u8]| {
        let units: Vec<u16> = b
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16(&units).ok()
    };
    match bytes {
        [0xFF, 0xFE, rest @ ..] => utf16(rest),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        [_, 0, ..] => utf16(bytes),
        _ => Some(std::str::from_utf8(bytes).map_or_else(|_| ansi(bytes), ToOwned::to_owned)),
    }
}

/// What reading one of the EA's files found.
#[derive(Debug)]
enum Read {
    /// Missing or empty: read again on the next poll.
    NotYet,
    /// Not the EA's JSON (torn, or broken), with the file and what is wrong.
    Bad(String),
    Json(Value),
}

/// The EA's JSON. The EA builds its files with format strings and inserts every string
/// (comments, the account name, message descriptions) raw: a `\` is the character itself,
/// and a `"` inside a string is one too unless what follows can only follow a closing
/// quote in the EA's files (`:`, `}`, `]`, the end, or `,` then the next key's `"`). The
/// strings are escaped accordingly before the text is parsed as JSON; what still fails is
/// named with its position and the text there.
fn parse_ea(text: &str) -> Result<Value, String> {
    let escaped = escape_raw_strings(text);
    serde_json::from_str(&escaped).map_err(|e| {
        let line = escaped
            .lines()
            .nth(e.line().saturating_sub(1))
            .unwrap_or("");
        let chars: Vec<char> = line.chars().collect();
        let at = e.column().saturating_sub(1).min(chars.len());
        let near: String = chars[at.saturating_sub(30)..(at + 30).min(chars.len())]
            .iter()
            .collect();
        format!("not the JSON the DWX EA writes ({e}), near `{near}`")
    })
}

/// The EA's text with its raw strings escaped as JSON wants them (see [`parse_ea`]).
fn escape_raw_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let next_non_space = |from: usize| (from..chars.len()).find(|&j| !chars[j].is_whitespace());
    let closes = |after: usize| match next_non_space(after) {
        None => true,
        Some(j) => match chars[j] {
            ':' | '}' | ']' => true,
            ',' => next_non_space(j + 1).is_none_or(|k| matches!(chars[k], '"' | '{' | '[')),
            _ => false,
        },
    };
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_string = false;
    for (i, &c) in chars.iter().enumerate() {
        if !in_string {
            in_string = c == '"';
            out.push(c);
            continue;
        }
        match c {
            '"' if closes(i + 1) => {
                in_string = false;
                out.push('"');
            }
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// The tag that starts an order's comment: `td` and 8 hex digits of the client order
/// id's SHA-256.
pub fn tag_of(client_order_id: &str) -> String {
    let digest = Sha256::digest(client_order_id.as_bytes());
    let hex: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    format!("td{hex}")
}

/// Whether a comment starts with a tag ([`tag_of`]'s shape), whichever order's.
fn is_tag(comment: &str) -> bool {
    comment.get(..10).is_some_and(|head| {
        head.starts_with("td") && head.bytes().skip(2).all(|b| b.is_ascii_hexdigit())
    })
}

/// The comment an order is sent with: the tag, then what fits of the user's comment
/// (characters the file format cannot carry removed). The second value says what was
/// changed, if anything.
pub fn comment_for(client_order_id: &str, user: Option<&str>) -> (String, Option<String>) {
    let tag = tag_of(client_order_id);
    let Some(user) = user.filter(|u| !u.trim().is_empty()) else {
        return (tag, None);
    };
    let clean: String = user
        .chars()
        .filter(|c| c.is_ascii() && !matches!(c, ',' | '|' | '"' | '\\' | '\n' | '\r'))
        .collect();
    let room = COMMENT_MAX - tag.len() - 1;
    let kept: String = clean.chars().take(room).collect();
    let mut said = Vec::new();
    if clean.len() != user.len() {
        said.push(
            "characters MetaTrader's files cannot carry (, | \" \\ and non-ASCII) were removed",
        );
    }
    if kept.len() < clean.len() {
        said.push("it was shortened to fit MetaTrader's 31 characters after the order's tag");
    }
    let note = (!said.is_empty()).then(|| format!("the comment was changed: {}", said.join("; ")));
    (format!("{tag} {kept}"), note)
}

/// The currency pair a MetaTrader symbol names (`EURUSD`, `USDJPY.r`): its first six
/// letters, two ISO currencies. Metals (`XAU…`, `XAG…`) are not pairs.
fn pair_of(symbol: &str) -> Option<(Currency, Currency)> {
    let core = core_of(symbol);
    if core.len() != 6 || core.starts_with("XA") {
        return None;
    }
    Some((
        Currency::new_checked(&core[..3]).ok()?,
        Currency::new_checked(&core[3..]).ok()?,
    ))
}

/// The rates closed trades imply: a trade whose instrument pays its profit in another
/// currency than the account's, with `pnl` (the profit in the account's currency, swap
/// and commission apart) over `(close − open) × lots × contract size` (the profit in the
/// instrument's currency), dated its closing day. The first trade of a currency and date
/// gives the rate.
fn closed_trade_rates(
    trades: &[ClosedTrade],
    parts: &BookParts,
    date_of: impl Fn(&str) -> Option<chrono::NaiveDate>,
) -> Vec<FxQuote> {
    let account = parts.base_currency;
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for t in trades {
        let Some(open) = t.open else {
            continue;
        };
        let Some(inst) = parts.instruments.iter().find(|i| i.key.symbol == t.symbol) else {
            continue;
        };
        if inst.currency == account || t.pnl.is_zero() {
            continue;
        }
        let Some(date) = date_of(&t.closed) else {
            continue;
        };
        let gross = (t.close - open)
            .checked_mul(t.lots)
            .and_then(|v| v.checked_mul(inst.multiplier))
            .and_then(|v| v.checked_mul(t.sign));
        let Some(rate) = gross
            .filter(|g| !g.is_zero())
            .and_then(|g| t.pnl.checked_div(g))
            .map(|r| r.round_dp(10).normalize())
            .filter(|r| r.is_sign_positive() && !r.is_zero())
        else {
            continue;
        };
        if seen.insert((inst.currency.code(), date)) {
            out.push(FxQuote {
                base: inst.currency,
                quote: account,
                rate,
                date,
            });
        }
    }
    out
}

/// For each currency `instruments` are paid in other than `account`, the two names of
/// its pair with `account` (`GBPUSD`, `USDGBP`), decorated like the book's own pairs
/// (`EURGBP.m` gives `GBPUSD.m`): the terminal quotes one of them.
fn conversion_symbols(instruments: &[Instrument], account: Currency) -> Vec<[String; 2]> {
    let (prefix, suffix) = decoration(instruments.iter().map(|i| i.key.symbol.clone()));
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for i in instruments {
        let c = i.currency;
        if c == account || !seen.insert(c.code()) {
            continue;
        }
        out.push([
            format!("{prefix}{c}{account}{suffix}"),
            format!("{prefix}{account}{c}{suffix}"),
        ]);
    }
    out
}

/// The prefix and suffix the broker decorates its FX pairs with (`EURGBP.m`: `""`,
/// `".m"`), from the first pair among `symbols`.
fn decoration(symbols: impl Iterator<Item = String>) -> (String, String) {
    symbols
        .filter_map(|symbol| {
            pair_of(&symbol)?;
            let start = symbol.find(|c: char| c.is_ascii_alphabetic())?;
            let core = symbol.get(start..start + 6)?;
            core.chars()
                .all(|c| c.is_ascii_alphabetic())
                .then(|| (symbol[..start].to_owned(), symbol[start + 6..].to_owned()))
        })
        .next()
        .unwrap_or_default()
}

/// A symbol's first six letters, upper-case, without a broker's prefix or suffix
/// (`#XAUUSD.m` is `XAUUSD`).
fn core_of(symbol: &str) -> String {
    symbol
        .chars()
        .filter(char::is_ascii_alphabetic)
        .take(6)
        .map(|c| c.to_ascii_uppercase())
        .collect()
}

/// The instrument a MetaTrader symbol is: an FX pair (100,000 a lot), gold (100 oz),
/// silver (5,000 oz), or a CFD (1 a lot, in the account's currency).
fn instrument_of(
    symbol: &str,
    account_currency: Currency,
) -> (AssetClass, Decimal, Currency, Option<Decimal>, Decimal) {
    let core = core_of(symbol);
    if core.starts_with("XAU") {
        return (
            AssetClass::Fx,
            Decimal::from(100),
            Currency::USD,
            Some(Decimal::new(1, 2)),
            Decimal::new(1, 2),
        );
    }
    if core.starts_with("XAG") {
        return (
            AssetClass::Fx,
            Decimal::from(5_000),
            Currency::USD,
            Some(Decimal::new(1, 3)),
            Decimal::new(1, 3),
        );
    }
    if let Some((_, quote)) = pair_of(symbol) {
        let pip = if quote.code() == "JPY" {
            Decimal::new(1, 2)
        } else {
            Decimal::new(1, 4)
        };
        return (
            AssetClass::Fx,
            Decimal::from(100_000),
            quote,
            Some(pip),
            pip / Decimal::TEN,
        );
    }
    (
        AssetClass::Cfd,
        Decimal::ONE,
        account_currency,
        None,
        Decimal::new(1, 2),
    )
}

fn exchange_of(class: AssetClass) -> &'static str {
    if class == AssetClass::Fx { "FX" } else { "CFD" }
}

/// A book being made: instruments by symbol, and fills.
struct Draft {
    currency: Currency,
    instruments: Vec<Instrument>,
    fills: Vec<Fill>,
    /// The config's symbol specs, what the terminal's figures imply of the others, and
    /// the per-point figures the closed trades agree on.
    symbols: BTreeMap<String, SymbolSpec>,
    implied: BTreeMap<String, Inferred>,
    closed_k: BTreeMap<String, Decimal>,
    unknown_specs: Vec<UnknownSpec>,
}

impl Draft {
    /// The price a position of `sign` (1 long, -1 short) was opened at, as the profit
    /// of its close of `lots` at `close` implies (in the account's currency: the
    /// instrument's own, or a pair's quote over a base that is the account's).
    fn implied_open(
        &mut self,
        symbol: &str,
        lots: Decimal,
        close: Decimal,
        sign: Decimal,
        pnl: Decimal,
    ) -> Option<Decimal> {
        let index = self.index(symbol) as usize;
        let inst = &self.instruments[index];
        let gross = if inst.currency == self.currency {
            Some(pnl)
        } else if pair_of(symbol)
            .is_some_and(|(base, quote)| base == self.currency && quote == inst.currency)
        {
            Some(pnl * close)
        } else {
            None
        };
        gross
            .and_then(|g| g.checked_div(lots * inst.multiplier))
            .map(|per_unit| (close - sign * per_unit).round_dp(8))
            .filter(|p| p.is_sign_positive() && !p.is_zero())
    }

    /// Configured symbols, paid in the account's currency, whose closed trades' own P&L
    /// implies another contract size than the config states (beyond 1%).
    fn disagreements(&self, account: &str) -> Vec<String> {
        self.instruments
            .iter()
            .filter(|i| i.currency == self.currency)
            .filter_map(|i| {
                let symbol = &i.key.symbol;
                configured(&self.symbols, symbol)?;
                let k = *self.closed_k.get(symbol)?;
                let off = (k - i.multiplier).abs() > i.multiplier / Decimal::ONE_HUNDRED;
                off.then(|| {
                    format!(
                        "{account}: the config's contract_size for {symbol} is {} but its closed trades' own P&L imply {k} {} a point a lot: check [accounts.symbols.\"{symbol}\"] against the terminal's Specification window",
                        i.multiplier.normalize(),
                        self.currency.code()
                    )
                })
            })
            .collect()
    }

    fn index(&mut self, symbol: &str) -> u32 {
        let r = resolve(
            symbol,
            self.currency,
            &self.symbols,
            self.implied.get(symbol),
        );
        let key = InstrumentKey::new(exchange_of(r.class), symbol);
        if let Some(i) = self.instruments.iter().position(|x| x.key == key) {
            return u32::try_from(i).unwrap_or(u32::MAX);
        }
        let idx = u32::try_from(self.instruments.len()).unwrap_or(u32::MAX);
        if let Some((detail, fix)) = r.assumed {
            self.unknown_specs.push(UnknownSpec {
                instrument: idx,
                detail,
                fix,
            });
        }
        self.instruments.push(Instrument {
            key,
            currency: r.currency,
            asset_class: r.class,
            multiplier: r.multiplier,
            name: None,
            sector: None,
            country: None,
        });
        idx
    }

    #[allow(clippy::too_many_arguments)]
    fn fill(
        &mut self,
        id: String,
        symbol: &str,
        side: Side,
        lots: Decimal,
        price: Decimal,
        at: DateTime<Utc>,
        commission: Decimal,
    ) {
        let instrument = self.index(symbol);

        let time = at.with_timezone(&Utc.fix());
        let seq = u32::try_from(self.fills.len()).unwrap_or(u32::MAX);
        self.fills.push(Fill {
            id: id.into(),
            account: 0,
            instrument,
            side,
            quantity: lots.abs(),
            price,
            // Commission and swap come in the account's currency.
            commission: commission.abs(),
            commission_currency: self.currency,
            commission_known: true,
            time,
            trade_date: time.date_naive(),
            seq,
            kind: tradedesk_core::FillKind::Trade,
            position: 0,
        });
    }
}

impl DwxBroker {
    pub fn new(config: DwxConfig) -> Self {
        Self {
            config,
            reported: std::sync::Mutex::new(None),
            next_id: AtomicI64::new(0),
            writing: Mutex::new(false),
            subscribed: Mutex::new(BTreeSet::new()),
            sent: std::sync::Mutex::new(BTreeMap::new()),
        }
    }

    fn dir(&self) -> PathBuf {
        self.config.files.join("DWX")
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir().join(name)
    }

    fn install_hint(&self) -> String {
        format!(
            "install DWXConnect's EA (github.com/darwinex/dwxconnect, mql/DWX_Server_{0}.mq{1}) in the terminal's {0} Experts folder, attach it to one chart with AutoTrading on, and point path at that terminal's MQL{1}/Files folder (now {2})",
            self.config.platform.name(),
            if self.config.platform == Platform::Mt4 {
                "4"
            } else {
                "5"
            },
            self.config.files.display()
        )
    }

    fn unavailable(&self, detail: String) -> BrokerError {
        BrokerError::Unavailable {
            account: self.config.id.clone(),
            detail,
            hint: self.install_hint(),
        }
    }

    fn timeout(&self) -> BrokerError {
        BrokerError::Timeout {
            account: self.config.id.clone(),
            timeout: self.config.timeout,
        }
    }

    fn zone(&self) -> Option<&'static zones::Tz> {
        self.config
            .server_time_zone
            .as_deref()
            .and_then(zones::named)
    }

    /// A server time (`YYYY.MM.DD HH:MM:SS`) as an instant.
    fn server_instant(&self, text: &str) -> Option<DateTime<Utc>> {
        let naive = NaiveDateTime::parse_from_str(text.trim(), "%Y.%m.%d %H:%M:%S")
            .or_else(|_| NaiveDateTime::parse_from_str(text.trim(), "%Y.%m.%d %H:%M"))
            .ok()?;
        match self.zone() {
            Some(z) => zones::resolve(naive, z),
            None => Some(Utc.from_utc_datetime(&naive)),
        }
    }

    /// A file's JSON, or `None` while it is missing, empty, torn or not JSON yet.
    async fn read_json(&self, name: &str) -> Option<Value> {
        match self.read_file(name).await {
            Read::Json(v) => Some(v),
            Read::NotYet | Read::Bad(_) => None,
        }
    }

    /// A file as the EA writes it (strings raw, see [`parse_ea`]): its JSON, nothing yet
    /// (missing or empty), or what makes it unreadable.
    async fn read_file(&self, name: &str) -> Read {
        let path = self.file(name);
        let Ok(bytes) = tokio::fs::read(&path).await else {
            return Read::NotYet;
        };
        let Some(text) = decode(&bytes) else {
            return Read::Bad(format!(
                "{} is neither UTF-8, ANSI nor UTF-16 text",
                path.display()
            ));
        };
        let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        if text.is_empty() {
            return Read::NotYet;
        }
        match parse_ea(text) {
            Ok(v) => Read::Json(v),
            Err(what) => Read::Bad(format!("{} cannot be read: {what}", path.display())),
        }
    }

    /// The error for a file that stayed unreadable for the whole wait: it names the file
    /// and what is wrong in it, and is no stopped EA.
    fn unreadable(&self, detail: String) -> BrokerError {
        BrokerError::Unavailable {
            account: self.config.id.clone(),
            detail,
            hint: "the EA is running but wrote a file tradedesk cannot parse: look at the text near the position named (often a ticket's comment or the account name) and change it in the terminal, or report the file's text".to_owned(),
        }
    }

    /// `DWX_Orders.txt`, checked fresh: the EA's heartbeat.
    async fn orders_file(&self) -> Result<Value, BrokerError> {
        let path = self.file("DWX_Orders.txt");
        if !self.config.files.is_dir() {
            return Err(
                self.unavailable(format!("{} is not a folder", self.config.files.display()))
            );
        }
        let deadline = Instant::now() + self.config.timeout;
        // The EA rewrites the file every second: missing for most of one, it is not running.
        let missing_by = Instant::now() + self.config.timeout.min(Duration::from_millis(900));
        loop {
            let age = tokio::fs::metadata(&path)
                .await
                .ok()
                .and_then(|m| m.modified().ok())
                .map(|t| SystemTime::now().duration_since(t).unwrap_or_default());
            match age {
                None if Instant::now() >= missing_by => {
                    return Err(self.unavailable(format!(
                        "{} does not exist: the DWX EA is not running",
                        path.display()
                    )));
                }
                Some(age) if age > STALE_AFTER => {
                    return Err(self.unavailable(format!(
                        "the DWX EA last wrote {} {} s ago (it rewrites it every second): the EA or the terminal is stopped",
                        path.display(),
                        age.as_secs()
                    )));
                }
                Some(_) => {
                    match self.read_file("DWX_Orders.txt").await {
                        Read::Json(v) => return Ok(v),
                        Read::Bad(what) if Instant::now() >= deadline => {
                            return Err(self.unreadable(what));
                        }
                        _ => {}
                    }
                    if Instant::now() >= deadline {
                        return Err(self.timeout());
                    }
                }
                None => {}
            }
            tokio::time::sleep(POLL).await;
        }
    }

    fn account_info(&self, orders: &Value) -> Result<AccountInfo, BrokerError> {
        let info = orders
            .get("account_info")
            .ok_or_else(|| self.unavailable("DWX_Orders.txt has no account_info".to_owned()))?;
        let currency = Currency::new_checked(&text(info, "currency")).map_err(|_| {
            self.unavailable(format!(
                "the account currency {} is not an ISO code",
                tradedesk_core::error::quote(&text(info, "currency"))
            ))
        })?;
        Ok(AccountInfo {
            name: text(info, "name"),
            number: text(info, "number"),
            currency,
            leverage: dec(info, "leverage").filter(|l| *l > Decimal::ZERO),
            balance: dec(info, "balance"),
            equity: dec(info, "equity"),
            free_margin: dec(info, "free_margin"),
        })
    }

    fn tickets(orders: &Value) -> Vec<Ticket> {
        let mut out: Vec<Ticket> = orders
            .get("orders")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(ticket, o)| Ticket {
                ticket: ticket.clone(),
                magic: o.get("magic").and_then(Value::as_i64).unwrap_or(0),
                symbol: text(o, "symbol"),
                lots: dec(o, "lots").unwrap_or_default(),
                kind: text(o, "type"),
                open_price: dec(o, "open_price").unwrap_or_default(),
                open_time: text(o, "open_time"),
                sl: dec(o, "SL").unwrap_or_default(),
                tp: dec(o, "TP").unwrap_or_default(),
                pnl: dec(o, "pnl").unwrap_or_default(),
                commission: dec(o, "commission").unwrap_or_default(),
                swap: dec(o, "swap").unwrap_or_default(),
                comment: text(o, "comment"),
            })
            .collect();
        out.sort_by(|a, b| a.open_time.cmp(&b.open_time).then(a.ticket.cmp(&b.ticket)));
        out
    }

    /// The highest message key so far: later keys are answers to what is sent next.
    async fn message_mark(&self) -> u64 {
        self.read_json("DWX_Messages.txt")
            .await
            .and_then(|v| {
                v.as_object()
                    .map(|o| o.keys().filter_map(|k| k.parse().ok()).max())
            })
            .flatten()
            .unwrap_or(0)
    }

    /// ERROR messages after `mark`: (error_type, description).
    async fn errors_after(&self, mark: u64) -> Vec<(String, String)> {
        let Some(v) = self.read_json("DWX_Messages.txt").await else {
            return Vec::new();
        };
        let mut rows: Vec<(u64, (String, String))> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(k, m)| Some((k.parse::<u64>().ok()?, m)))
            .filter(|(k, m)| *k > mark && m.get("type").and_then(Value::as_str) == Some("ERROR"))
            .map(|(k, m)| (k, (text(m, "error_type"), text(m, "description"))))
            .collect();
        rows.sort_by_key(|(k, _)| *k);
        rows.into_iter().map(|(_, e)| e).collect()
    }

    /// Writes one command into the lowest free slot, atomically and never over another.
    async fn write_command(
        &self,
        command: &str,
        content: &str,
    ) -> Result<(PathBuf, String), BrokerError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) % 100_000 + 1;
        let body = format!("<:{id}|{command}|{content}:>");
        let dir = self.dir();
        let deadline = Instant::now() + self.config.timeout;
        loop {
            for slot in 0..SLOTS {
                let target = dir.join(format!("DWX_Commands_{slot}.txt"));
                if target.exists() {
                    continue;
                }
                let temp = dir.join(format!(".tradedesk-{}-{id}.tmp", std::process::id()));
                tokio::fs::write(&temp, &body).await.map_err(|e| {
                    self.unavailable(format!("cannot write a command in {}: {e}", dir.display()))
                })?;
                // A hard link fails if the slot was taken meanwhile: never two commands
                // in one slot, never half a command read.
                let linked = tokio::fs::hard_link(&temp, &target).await;
                let _ = tokio::fs::remove_file(&temp).await;
                match linked {
                    Ok(()) => return Ok((target, body)),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => {
                        return Err(self.unavailable(format!(
                            "cannot place a command in {}: {e}",
                            target.display()
                        )));
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(self.unavailable(format!(
                    "all {SLOTS} command slots in {} stay full: the EA is not reading commands",
                    dir.display()
                )));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the EA has taken every command file (it deletes each as it reads).
    async fn wait_taken(&self, deadline: Instant) -> bool {
        loop {
            let pending = (0..SLOTS).any(|s| self.file(&format!("DWX_Commands_{s}.txt")).exists());
            if !pending {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Sends a command, resetting the EA's id memory first in this process's life.
    async fn command(&self, command: &str, content: &str) -> Result<(), BrokerError> {
        let mut reset = self.writing.lock().await;
        self.send_locked(&mut reset, command, content)
            .await
            .map(|_| ())
    }

    /// Writes a command (after the reset, the first time); answers where it lies until
    /// the EA takes it, and its text. An EA that takes nothing within the timeout is
    /// `Timeout` (a hung EA), and nothing of this command was written then.
    async fn send_locked(
        &self,
        reset: &mut bool,
        command: &str,
        content: &str,
    ) -> Result<(PathBuf, String), BrokerError> {
        self.orders_file().await?;
        if !*reset {
            self.next_id.store(0, Ordering::Relaxed);
            let (slot, _) = self.write_command("RESET_COMMAND_IDS", "").await?;
            if !self.wait_taken(Instant::now() + self.config.timeout).await {
                // Withdrawn, so an EA that wakes later does not act on a stale command.
                let _ = tokio::fs::remove_file(slot).await;
                return Err(self.timeout());
            }
            *reset = true;
        }
        self.write_command(command, content).await
    }

    /// A write's send: a hung EA means the order was never sent, which is `Unavailable`
    /// (provably not placed), not an uncertain outcome.
    async fn send_write(
        &self,
        reset: &mut bool,
        command: &str,
        content: &str,
    ) -> Result<(PathBuf, String), BrokerError> {
        self.send_locked(reset, command, content)
            .await
            .map_err(|e| match e {
                // Provably not placed: nothing of it was written.
                BrokerError::Timeout { .. } => BrokerError::Rejected {
                    account: self.config.id.clone(),
                    reason: format!(
                        "not sent: the DWX EA took no command within {} ms (is it attached to a chart, with AutoTrading on?)",
                        self.config.timeout.as_millis()
                    ),
                    order_id: None,
                },
                other => other,
            })
    }

    fn record(&self, t: &Ticket, cid: &str, status: OrderStatus) -> OrderRecord {
        let (class, ..) = instrument_of(&t.symbol, Currency::USD);
        let created = self.server_instant(&t.open_time).unwrap_or_else(Utc::now);
        let pending = !t.is_position();
        OrderRecord {
            order_id: t.ticket.clone(),
            client_order_id: cid.to_owned(),
            account: self.config.id.clone(),
            key: InstrumentKey::new(exchange_of(class), &t.symbol),
            side: t.side(),
            order_type: if t.kind.ends_with("limit") {
                OrderType::Limit
            } else if t.kind.ends_with("stop") {
                OrderType::Stop
            } else {
                OrderType::Market
            },
            quantity: t.lots,
            filled_quantity: if pending { Decimal::ZERO } else { t.lots },
            average_price: (!pending).then_some(t.open_price),
            limit_price: (pending && t.kind.ends_with("limit")).then_some(t.open_price),
            stop_price: (pending && t.kind.ends_with("stop")).then_some(t.open_price),
            time_in_force: TimeInForce::Gtc,
            stop_loss: (!t.sl.is_zero()).then_some(t.sl),
            take_profit: (!t.tp.is_zero()).then_some(t.tp),
            status,
            mode: self.mode(),
            comment: Some(t.comment.clone()),
            reason: None,
            created,
            updated: Utc::now(),
        }
    }

    /// How the account holds positions: MT4 always hedges; MT5 as the config says.
    fn margin_mode(&self) -> Option<MarginMode> {
        match self.config.platform {
            Platform::Mt4 => Some(MarginMode::Hedging),
            Platform::Mt5 => self.config.margin_mode,
        }
    }

    /// MT5 hedging: gives each position its own FIFO queue ([`Fill::position`]), as
    /// MT4's tickets have. Every `entry_in` deal opens a position: an open ticket's when
    /// its symbol, side, time and price are the deal's. A closing deal closes one
    /// position of its symbol on the other side: the one whose price its own profit
    /// implies, else the oldest with lots left to close; one opened before the history
    /// read is an open ticket no deal opened, else the implied opening fill of the
    /// deal. Each open ticket no deal opened gets its opening fill here, at its own
    /// price and with the lots closed from it since. Answers how many it opened.
    fn hedging_positions(
        &self,
        draft: &mut Draft,
        rows: &[(String, Value)],
        tickets: &[&Ticket],
        before_history: Option<DateTime<chrono::FixedOffset>>,
    ) -> usize {
        struct Held {
            symbol: String,
            long: bool,
            price: Option<Decimal>,
            /// Lots the history may still close of it.
            closable: Decimal,
            /// An open ticket no deal opened: its lots, and the lots closed from it.
            ticket: Option<(usize, Decimal)>,
        }
        let mut deals: Vec<&(String, Value)> = rows
            .iter()
            .filter(|(_, h)| matches!(text(h, "type").as_str(), "buy" | "sell"))
            .collect();
        deals.sort_by(|a, b| {
            text(&a.1, "deal_time")
                .cmp(&text(&b.1, "deal_time"))
                .then(a.0.len().cmp(&b.0.len()))
                .then(a.0.cmp(&b.0))
        });
        let mut held: Vec<Held> = Vec::new();
        let mut of_deal: BTreeMap<String, usize> = BTreeMap::new();
        let mut matched = vec![false; tickets.len()];
        for (key, h) in deals {
            let (Some(price), Some(lots)) = (dec(h, "deal_price"), dec(h, "lots")) else {
                continue;
            };
            let symbol = text(h, "symbol");
            let buy = text(h, "type") == "buy";
            match text(h, "entry").as_str() {
                "entry_in" => {
                    let time = text(h, "deal_time");
                    let ticket = tickets.iter().enumerate().position(|(i, t)| {
                        !matched[i]
                            && t.symbol == symbol
                            && (t.side() == Side::Buy) == buy
                            && t.open_time.trim() == time.trim()
                            && t.open_price == price
                            && t.lots <= lots
                    });
                    let open_lots = ticket.map_or(Decimal::ZERO, |i| tickets[i].lots);
                    if let Some(i) = ticket {
                        matched[i] = true;
                    }
                    of_deal.insert(key.clone(), held.len());
                    held.push(Held {
                        symbol,
                        long: buy,
                        price: Some(price),
                        closable: lots - open_lots,
                        ticket: None,
                    });
                }
                "entry_out" | "entry_out_by" => {
                    // A sell closes a long position.
                    let long = !buy;
                    let sign = if long {
                        Decimal::ONE
                    } else {
                        Decimal::NEGATIVE_ONE
                    };
                    let pnl = dec(h, "pnl").unwrap_or_default();
                    let implied = draft.implied_open(&symbol, lots, price, sign, pnl);
                    let nearest = |candidates: Vec<usize>, held: &[Held]| {
                        candidates.into_iter().min_by_key(|&i| {
                            implied
                                .zip(held[i].price)
                                .map_or(Decimal::ZERO, |(p, q)| (p - q).abs())
                        })
                    };
                    let open: Vec<usize> = (0..held.len())
                        .filter(|&i| {
                            held[i].symbol == symbol
                                && held[i].long == long
                                && held[i].ticket.is_none()
                                && held[i].closable >= lots
                        })
                        .collect();
                    let chosen = nearest(open, &held).or_else(|| {
                        // Opened before the read: an open ticket no deal opened.
                        let older: Vec<usize> = (0..held.len())
                            .filter(|&i| {
                                held[i].symbol == symbol
                                    && held[i].long == long
                                    && held[i].ticket.is_some()
                            })
                            .collect();
                        nearest(older, &held)
                    });
                    let chosen = chosen.or_else(|| {
                        let free = tickets.iter().enumerate().position(|(i, t)| {
                            !matched[i] && t.symbol == symbol && (t.side() == Side::Buy) == long
                        })?;
                        matched[free] = true;
                        held.push(Held {
                            symbol: symbol.clone(),
                            long,
                            price: Some(tickets[free].open_price),
                            closable: Decimal::ZERO,
                            ticket: Some((free, Decimal::ZERO)),
                        });
                        Some(held.len() - 1)
                    });
                    let i = chosen.unwrap_or_else(|| {
                        // Opened and closed out of the read's sight: its own position,
                        // which the deal's implied opening fill opens.
                        held.push(Held {
                            symbol: symbol.clone(),
                            long,
                            price: None,
                            closable: Decimal::ZERO,
                            ticket: None,
                        });
                        held.len() - 1
                    });
                    let h = &mut held[i];
                    match &mut h.ticket {
                        Some((_, closed)) => *closed += lots,
                        None => h.closable = (h.closable - lots).max(Decimal::ZERO),
                    }
                    of_deal.insert(key.clone(), i);
                }
                _ => {}
            }
        }
        // The open tickets no deal opened, each its own position.
        for (i, _) in tickets.iter().enumerate().filter(|(i, _)| !matched[*i]) {
            held.push(Held {
                symbol: tickets[i].symbol.clone(),
                long: tickets[i].side() == Side::Buy,
                price: Some(tickets[i].open_price),
                closable: Decimal::ZERO,
                ticket: Some((i, Decimal::ZERO)),
            });
        }
        let mut opened = 0;
        for (p, h) in held.iter().enumerate() {
            let Some((i, closed)) = h.ticket else {
                continue;
            };
            let t = tickets[i];
            let at = self
                .server_instant(&t.open_time)
                .into_iter()
                .chain(before_history.map(|t| t.with_timezone(&Utc)))
                .min()
                .unwrap_or_else(Utc::now);
            let instrument = draft.index(&t.symbol);
            let currency = draft.instruments[instrument as usize].currency;
            let seq = u32::try_from(draft.fills.len()).unwrap_or(u32::MAX);
            let mut fill: Fill = tradedesk_core::MadeFill {
                id: format!("opening-ticket-{}", t.ticket),
                account: 0,
                instrument,
                side: t.side(),
                quantity: t.lots + closed,
                price: t.open_price,
                currency,
                time: at.with_timezone(&Utc.fix()),
                kind: tradedesk_core::FillKind::Opening,
                commission_known: true,
                seq,
            }
            .into();
            fill.position = u32::try_from(p + 1).unwrap_or(u32::MAX);
            draft.fills.push(fill);
            opened += 1;
        }
        for f in &mut draft.fills {
            let key = f.id.strip_prefix("opening-").unwrap_or(&f.id);
            if let Some(p) = of_deal.get(key) {
                f.position = u32::try_from(p + 1).unwrap_or(u32::MAX);
            }
        }
        opened
    }

    /// An EA or terminal refusal of an order's lots, with how to have tradedesk check
    /// them before sending (the EA does not write a symbol's volumes).
    fn with_lot_fix(&self, symbol: &str, reason: String) -> String {
        let lots = reason.starts_with("OPEN_ORDER_LOTSIZE")
            || reason.to_ascii_lowercase().contains("volume");
        if !lots {
            return reason;
        }
        if reason.starts_with("OPEN_ORDER_LOTSIZE_TOO_LARGE") {
            return format!(
                "{reason} (MaximumLotSize is an input of the EA, 0.01 in the stock EA: raise it in the EA's inputs on the chart)"
            );
        }
        format!(
            "{reason} (the terminal's volume rules for {symbol}: add lot_step, min_lots and max_lots under [accounts.symbols.\"{symbol}\"] in tradedesk.toml, as its Specification window shows them, and tradedesk checks them before sending)"
        )
    }

    /// The EA's `account_info` as the last snapshot read it, for this account.
    fn last_info(&self, account: &str) -> Option<AccountInfo> {
        if account != self.config.id {
            return None;
        }
        self.reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn mode(&self) -> Mode {
        if self.config.live {
            Mode::Live
        } else {
            Mode::Paper
        }
    }

    /// The ticket a client order id names: by its tag in the comment, else (while this
    /// process remembers the send) a new ticket with its symbol, lots, side and magic.
    fn find_in(&self, tickets: &[Ticket], cid: &str) -> Option<Ticket> {
        let tag = tag_of(cid);
        let sent = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(cid)
            .cloned();
        // The account's magic, or the one this order was sent with.
        let magic = sent.as_ref().map_or(self.config.magic, |s| s.magic);
        if let Some(t) = tickets.iter().find(|t| {
            (t.magic == self.config.magic || t.magic == magic) && t.comment.starts_with(&tag)
        }) {
            return Some(t.clone());
        }
        let sent = sent?;
        tickets
            .iter()
            .find(|t| {
                // A ticket tagged for another order is that order's, never this one's.
                let foreign = is_tag(&t.comment) && !t.comment.starts_with(&tag);
                !foreign
                    && t.magic == sent.magic
                    && !sent.before.contains(&t.ticket)
                    && t.symbol == sent.symbol
                    && t.lots == sent.lots
                    && t.side() == sent.side
            })
            .cloned()
    }

    /// Closed trades of the last `days` days, as the EA answers `GET_HISTORIC_TRADES`.
    async fn history(&self, days: u32) -> Result<Value, BrokerError> {
        let mut reset = self.writing.lock().await;
        // A stale answer from an earlier session must not be read as this one's.
        let _ = tokio::fs::remove_file(self.file("DWX_Historic_Trades.txt")).await;
        self.send_locked(&mut reset, "GET_HISTORIC_TRADES", &days.max(1).to_string())
            .await?;
        let deadline = Instant::now() + self.config.timeout;
        loop {
            match self.read_file("DWX_Historic_Trades.txt").await {
                Read::Json(v) => return Ok(v),
                Read::Bad(what) if Instant::now() >= deadline => {
                    return Err(self.unreadable(what));
                }
                _ => {}
            }
            if Instant::now() >= deadline {
                return Err(self.timeout());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Subscribes to `symbols` (added to those already subscribed) and waits for their
    /// bid and ask, until `deadline`.
    async fn prices(
        &self,
        symbols: &[String],
        deadline: Instant,
    ) -> Result<BTreeMap<String, (Decimal, Decimal)>, BrokerError> {
        self.prices_with(symbols, &[], deadline).await
    }

    /// As [`Self::prices`], also asking for `either` groups of which one symbol is enough
    /// (a pair named either way round: the terminal has one of them).
    async fn prices_with(
        &self,
        symbols: &[String],
        either: &[[String; 2]],
        deadline: Instant,
    ) -> Result<BTreeMap<String, (Decimal, Decimal)>, BrokerError> {
        let required: BTreeSet<String> = symbols.iter().cloned().collect();
        let wanted: BTreeSet<String> = required
            .iter()
            .cloned()
            .chain(either.iter().flatten().cloned())
            .collect();
        {
            let mut subscribed = self.subscribed.lock().await;
            if !wanted.is_subset(&subscribed) {
                subscribed.extend(wanted.iter().cloned());
                let list = subscribed.iter().cloned().collect::<Vec<_>>().join(",");
                self.command("SUBSCRIBE_SYMBOLS", &list).await?;
            }
        }
        let grace = Instant::now() + Duration::from_millis(500);
        let mut resent = false;
        loop {
            let data = self.read_json("DWX_Market_Data.txt").await;
            let got: BTreeMap<String, (Decimal, Decimal)> = wanted
                .iter()
                .filter_map(|s| {
                    let q = data.as_ref()?.get(s)?;
                    Some((s.clone(), (dec(q, "bid")?, dec(q, "ask")?)))
                })
                .collect();
            // A pair the terminal does not quote is not waited for past the grace.
            let complete = required.iter().all(|s| got.contains_key(s))
                && (Instant::now() >= grace
                    || either
                        .iter()
                        .all(|group| group.iter().any(|s| got.contains_key(s))));
            if complete || Instant::now() >= deadline {
                return Ok(got);
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
            }
            tokio::time::sleep(POLL).await;
        }
    }

    async fn build_book(&self) -> Result<Book, BrokerError> {
        let orders = self.orders_file().await?;
        let info = self.account_info(&orders)?;
        *self
            .reported
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(info.clone());
        let tickets = Self::tickets(&orders);
        let history = self.history(self.config.history_days).await?;
        let currency = info.currency;
        let utc = Utc.fix();
        let today = Utc::now().date_naive();
        let rows: Vec<(String, Value)> = history
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // The open symbols' prices first: the open tickets' own profit at them says what
        // a point of a symbol nobody stated is worth.
        let open_symbols: Vec<String> = tickets
            .iter()
            .filter(|t| t.is_position())
            .map(|t| t.symbol.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let wait = Instant::now() + self.config.timeout.min(Duration::from_secs(2));
        let mut prices = if open_symbols.is_empty() {
            BTreeMap::new()
        } else {
            self.prices_with(&open_symbols, &[], wait).await?
        };
        let (trades, commission_moves) = closed_trades(self.config.platform, &rows, &tickets);
        let unstated = |symbol: &str| configured(&self.config.symbols, symbol).is_none();
        let open_k: BTreeMap<String, (Decimal, Decimal)> = open_per_point(&tickets, &prices)
            .into_iter()
            .filter(|(symbol, _)| unstated(symbol))
            .collect();
        let mut rates: BTreeMap<Currency, Decimal> = BTreeMap::new();
        let moving: Vec<String> = moving_rate_symbols(&trades, &open_k)
            .into_iter()
            .filter(|symbol| instrument_of(symbol, currency).0 == AssetClass::Cfd)
            .collect();
        if !moving.is_empty() {
            // A profit currency other than the account's: the terminal's quotes of the
            // candidates say which (docs/methodology/instruments.md).
            let (prefix, suffix) = decoration(
                rows.iter()
                    .map(|(_, h)| text(h, "symbol"))
                    .chain(open_symbols.iter().cloned()),
            );
            let candidates: Vec<Currency> = PROFIT_CANDIDATES
                .iter()
                .filter_map(|c| Currency::new_checked(c).ok())
                .filter(|c| *c != currency)
                .collect();
            let groups: Vec<[String; 2]> = candidates
                .iter()
                .map(|c| {
                    [
                        format!("{prefix}{c}{currency}{suffix}"),
                        format!("{prefix}{currency}{c}{suffix}"),
                    ]
                })
                .collect();
            let wait = Instant::now() + self.config.timeout.min(Duration::from_secs(2));
            let got = self.prices_with(&[], &groups, wait).await?;
            for (c, [direct, inverse]) in candidates.iter().zip(&groups) {
                let mid = |s: &String| got.get(s).map(|(b, a)| (b + a) / Decimal::TWO);
                if let Some(m) = mid(direct).filter(|m| !m.is_zero()) {
                    rates.insert(*c, m);
                } else if let Some(m) = mid(inverse).filter(|m| !m.is_zero()) {
                    rates.insert(*c, Decimal::ONE / m);
                }
            }
            prices.extend(got);
        }
        let implied: BTreeMap<String, Inferred> = infer_specs(&trades, &open_k, &rates, currency)
            .into_iter()
            .filter(|(symbol, _)| unstated(symbol))
            .collect();
        let mut draft = Draft {
            currency,
            instruments: Vec::new(),
            fills: Vec::new(),
            symbols: self.config.symbols.clone(),
            implied,
            closed_k: closed_per_point(&trades),
            unknown_specs: Vec::new(),
        };
        let mut cash: Vec<CashEntry> = Vec::new();
        let mut unreadable = 0usize;
        for (ticket, h) in &rows {
            let kind = text(h, "type");
            let symbol = text(h, "symbol");
            let pnl = dec(h, "pnl").unwrap_or_default();
            let swap = dec(h, "swap").unwrap_or_default();
            let commission = dec(h, "commission").unwrap_or_default();
            match self.config.platform {
                Platform::Mt4 => {
                    if !matches!(kind.as_str(), "buy" | "sell") {
                        if kind == "unknown" && symbol.is_empty() && !pnl.is_zero() {
                            // A balance operation: deposits and withdrawals.
                            if let Some(at) = self.server_instant(&text(h, "open_time")) {
                                cash.push(CashEntry {
                                    account: 0,
                                    kind: if pnl.is_sign_positive() {
                                        CashKind::Deposit
                                    } else {
                                        CashKind::Withdrawal
                                    },
                                    amount: pnl,
                                    currency,
                                    time: at.with_timezone(&utc),
                                });
                            }
                        }
                        continue; // deleted pending orders
                    }
                    let (
                        Some(opened),
                        Some(closed),
                        Some(open_price),
                        Some(close_price),
                        Some(lots),
                    ) = (
                        self.server_instant(&text(h, "open_time")),
                        self.server_instant(&text(h, "close_time")),
                        dec(h, "open_price"),
                        dec(h, "close_price"),
                        dec(h, "lots"),
                    )
                    else {
                        unreadable += 1;
                        continue;
                    };
                    let side = if kind == "buy" { Side::Buy } else { Side::Sell };
                    let other = if side == Side::Buy {
                        Side::Sell
                    } else {
                        Side::Buy
                    };
                    // The trade's commission is booked on its close: converted (for a
                    // symbol paid in another currency) on the day its profit is.
                    draft.fill(
                        format!("{ticket}-open"),
                        &symbol,
                        side,
                        lots,
                        open_price,
                        opened,
                        Decimal::ZERO,
                    );
                    draft.fill(
                        format!("{ticket}-close"),
                        &symbol,
                        other,
                        lots,
                        close_price,
                        closed,
                        commission,
                    );
                    if !swap.is_zero() {
                        cash.push(CashEntry {
                            account: 0,
                            kind: CashKind::Interest,
                            amount: swap,
                            currency,
                            time: closed.with_timezone(&utc),
                        });
                    }
                }
                Platform::Mt5 => {
                    let Some(at) = self.server_instant(&text(h, "deal_time")) else {
                        unreadable += 1;
                        continue;
                    };
                    match kind.as_str() {
                        "buy" | "sell" => {
                            let (Some(price), Some(lots)) = (dec(h, "deal_price"), dec(h, "lots"))
                            else {
                                unreadable += 1;
                                continue;
                            };
                            let side = if kind == "buy" { Side::Buy } else { Side::Sell };
                            let moved = commission_moves.get(ticket).copied().unwrap_or_default();
                            draft.fill(
                                ticket.clone(),
                                &symbol,
                                side,
                                lots,
                                price,
                                at,
                                commission + moved,
                            );
                            // A closing deal closes and never opens the other way; an
                            // `in_out` reverses, which a trade does.
                            if matches!(text(h, "entry").as_str(), "entry_out" | "entry_out_by")
                                && let Some(f) = draft.fills.last_mut()
                            {
                                f.kind = tradedesk_core::FillKind::Close;
                            }
                            if !swap.is_zero() {
                                cash.push(CashEntry {
                                    account: 0,
                                    kind: CashKind::Interest,
                                    amount: swap,
                                    currency,
                                    time: at.with_timezone(&utc),
                                });
                            }
                        }
                        "balance" | "credit" | "bonus" if !pnl.is_zero() => cash.push(CashEntry {
                            account: 0,
                            kind: if pnl.is_sign_positive() {
                                CashKind::Deposit
                            } else {
                                CashKind::Withdrawal
                            },
                            amount: pnl,
                            currency,
                            time: at.with_timezone(&utc),
                        }),
                        "commission" | "charge" if !pnl.is_zero() => cash.push(CashEntry {
                            account: 0,
                            kind: CashKind::Fee,
                            amount: pnl,
                            currency,
                            time: at.with_timezone(&utc),
                        }),
                        "interest" | "correction" if !pnl.is_zero() => cash.push(CashEntry {
                            account: 0,
                            kind: CashKind::Interest,
                            amount: pnl,
                            currency,
                            time: at.with_timezone(&utc),
                        }),
                        _ => {}
                    }
                }
            }
        }
        // Open positions: what the history does not already open (on MT4 none of them;
        // on MT5 those opened before the history's window) gets its opening fill.
        let positions: Vec<&Ticket> = tickets.iter().filter(|t| t.is_position()).collect();
        let mut reported: BTreeMap<String, Decimal> = BTreeMap::new();
        for t in &positions {
            *reported.entry(t.symbol.clone()).or_default() += match t.side() {
                Side::Buy => t.lots,
                Side::Sell => -t.lots,
            };
        }
        // MT4's history holds closed trades only: each open ticket is opened here, exactly.
        // MT5's deals open what they cover; what they leave unexplained (a position older
        // than the window, even partly closed inside it) is opened per symbol below.
        for t in positions
            .iter()
            .filter(|_| self.config.platform == Platform::Mt4)
        {
            let at = self.server_instant(&t.open_time).unwrap_or_else(Utc::now);
            draft.fill(
                format!("{}-open", t.ticket),
                &t.symbol,
                t.side(),
                t.lots,
                t.open_price,
                at,
                t.commission,
            );
        }
        // MT5: a position opened before the history read and closed inside it, of which
        // nothing is open: it opens, before the history, at the price its closing deal's
        // own profit implies, so its P&L is the terminal's.
        let before_history = draft
            .fills
            .iter()
            .map(|f| f.time)
            .min()
            .map(|t| t - chrono::Duration::seconds(1));
        let mut implied_opens = Vec::new();
        for t in trades.iter().filter(|t| t.open.is_none()) {
            let (Some(deal), Some(at)) = (&t.deal, before_history) else {
                continue;
            };
            let index = draft.index(&t.symbol) as usize;
            let Some(open) = draft.implied_open(&t.symbol, t.lots, t.close, t.sign, t.pnl) else {
                continue;
            };
            let inst = &draft.instruments[index];
            let seq = u32::try_from(draft.fills.len()).unwrap_or(u32::MAX);
            draft.fills.push(
                tradedesk_core::MadeFill {
                    id: format!("opening-{deal}"),
                    account: 0,
                    instrument: u32::try_from(index).unwrap_or(u32::MAX),
                    side: if t.sign.is_sign_positive() {
                        Side::Buy
                    } else {
                        Side::Sell
                    },
                    quantity: t.lots,
                    price: open,
                    currency: inst.currency,
                    time: at,
                    kind: tradedesk_core::FillKind::Opening,
                    commission_known: true,
                    seq,
                }
                .into(),
            );
            implied_opens.push(format!("{} {} lots", t.symbol, t.lots.normalize()));
        }
        // Marks: the open symbols' bid/ask mid, from the EA's market data.
        // The terminal's own cross quotes: each currency the instruments are paid in
        // other than the account's, against the account's (docs/methodology/fx.md).
        for symbol in &open_symbols {
            draft.index(symbol); // the reported positions name them anyway
        }
        let conversions: Vec<[String; 2]> = conversion_symbols(&draft.instruments, currency)
            .into_iter()
            .filter(|group| !group.iter().any(|s| prices.contains_key(s)))
            .collect();
        if !conversions.is_empty() {
            let wait = Instant::now() + self.config.timeout.min(Duration::from_secs(2));
            let got = self.prices_with(&open_symbols, &conversions, wait).await?;
            prices.extend(got);
        }
        let mut marks = Vec::new();
        let mut fx_rates = Vec::new();
        for (symbol, (bid, ask)) in &prices {
            let mid = (bid + ask) / Decimal::TWO;
            if reported.contains_key(symbol) {
                let instrument = draft.index(symbol);
                marks.push((instrument, today, mid));
            }
            if let Some((base, quote)) = pair_of(symbol) {
                fx_rates.push(FxQuote {
                    base,
                    quote,
                    rate: mid,
                    date: today,
                });
            }
        }
        let reported_positions: Vec<ReportedPosition> = reported
            .iter()
            .map(|(symbol, qty)| ReportedPosition {
                account: 0,
                instrument: draft.index(symbol),
                quantity: *qty,
            })
            .collect();
        let mut notes = vec![format!(
            "{}: MetaTrader history of the last {} days (history_days); times read as {} server time",
            self.config.id,
            self.config.history_days,
            self.config
                .server_time_zone
                .as_deref()
                .unwrap_or("UTC (set server_time_zone to the broker's)")
        )];
        if !implied_opens.is_empty() {
            notes.push(format!(
                "{}: {} opened before the history read and closed inside it: opened at the price each closing deal's own profit implies",
                self.config.id,
                implied_opens.join(", ")
            ));
        }
        if unreadable > 0 {
            notes.push(format!("{}: {unreadable} history row(s) had no readable time, price or lots and were left out", self.config.id));
        }
        let missing: Vec<&String> = open_symbols
            .iter()
            .filter(|s| !prices.contains_key(*s))
            .collect();
        if !missing.is_empty() {
            notes.push(format!(
                "{}: no price from the EA for {} within the wait: unmarked",
                self.config.id,
                missing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        notes.extend(draft.disagreements(&self.config.id));
        // Each open ticket as the terminal lists it, under its symbol.
        let open_tickets: Vec<tradedesk_core::BrokerTicket> = positions
            .iter()
            .map(|t| tradedesk_core::BrokerTicket {
                account: 0,
                instrument: draft.index(&t.symbol),
                ticket: t.ticket.clone(),
                side: t.side(),
                quantity: t.lots,
                open_price: t.open_price,
                open_time: self
                    .server_instant(&t.open_time)
                    .map(|i| i.with_timezone(&utc)),
                stop_loss: (!t.sl.is_zero()).then_some(t.sl),
                take_profit: (!t.tp.is_zero()).then_some(t.tp),
                swap: t.swap,
                commission: t.commission,
                profit: t.pnl,
                magic: Some(t.magic),
                comment: t.comment.clone(),
            })
            .collect();
        let margin_mode = self.margin_mode();
        match (self.config.platform, margin_mode) {
            (Platform::Mt4, _) => {
                // A hedging account: each ticket is its own position, its partial closes
                // matched within it and never against another ticket.
                let mut ids: BTreeMap<String, u32> = BTreeMap::new();
                for f in &mut draft.fills {
                    if let Some(t) = f
                        .id
                        .strip_suffix("-open")
                        .or_else(|| f.id.strip_suffix("-close"))
                    {
                        let next = u32::try_from(ids.len() + 1).unwrap_or(u32::MAX);
                        f.position = *ids.entry(t.to_owned()).or_insert(next);
                    }
                }
            }
            (Platform::Mt5, Some(MarginMode::Hedging)) => {
                let opened = self.hedging_positions(&mut draft, &rows, &positions, before_history);
                if opened > 0 {
                    notes.push(format!(
                        "{}: {opened} open ticket(s) opened before the history read: each opened at its own open price, before the history",
                        self.config.id
                    ));
                }
                notes.push(format!(
                    "{}: a hedging MT5 account: each ticket is its own position; the EA's deals name no position, so each closing deal is matched to the open position of its symbol and side whose price its own profit implies (else the oldest)",
                    self.config.id
                ));
            }
            (Platform::Mt5, Some(MarginMode::Netting)) => {}
            (Platform::Mt5, None) => notes.push(format!(
                "{}: whether this MT5 account hedges or nets is not known (the EA does not write it): positions are netted per symbol; set margin_mode = \"hedging\" or \"netting\" in the account's config, as the terminal shows it",
                self.config.id
            )),
        }
        let mut parts = BookParts {
            base_currency: currency,
            as_of: today,
            accounts: vec![self.account(currency, Some(&info))],
            instruments: draft.instruments,
            fills: draft.fills,
            cash,
            marks,
            fx_rates,
            reported_positions,
            corporate_actions: Vec::new(),
            notes,
            unknown_specs: draft.unknown_specs,
            tickets: open_tickets,
            margin_modes: margin_mode.map(|m| (0, m)).into_iter().collect(),
        };
        // MetaTrader keeps one balance, in the account's currency: each trade's P&L is
        // converted at its close. The ledger books a pair's P&L in its quote currency, so
        // other currencies are brought to zero and the account's balance is anchored.
        if self.config.platform == Platform::Mt5 {
            let mut cost: BTreeMap<u32, (Decimal, Decimal)> = BTreeMap::new();
            for t in &positions {
                if let Some(i) = parts
                    .instruments
                    .iter()
                    .position(|x| x.key.symbol == t.symbol)
                {
                    let e = cost
                        .entry(u32::try_from(i).unwrap_or(u32::MAX))
                        .or_default();
                    e.0 += t.open_price * t.lots;
                    e.1 += t.lots;
                }
            }
            let cost = cost
                .into_iter()
                .filter(|(_, (_, lots))| !lots.is_zero())
                .map(|(i, (value, lots))| (i, value / lots))
                .collect();
            let opened = crate::open_unexplained(&mut parts, &cost);
            if !opened.is_empty() {
                parts.notes.push(format!(
                    "{}: {} was held before the history read: opened at the tickets' open prices",
                    self.config.id,
                    opened.join(", ")
                ));
            }
        }
        // A pair's fills price it on their own dates: the rates that bring its quote
        // currency's P&L and the account's commissions together.
        let mut dated: Vec<FxQuote> = Vec::new();
        for f in &parts.fills {
            let inst = &parts.instruments[f.instrument as usize];
            if let Some((base, _)) = pair_of(&inst.key.symbol) {
                dated.push(FxQuote {
                    base,
                    quote: inst.currency,
                    rate: f.price,
                    date: f.trade_date,
                });
            }
        }
        // The closed trades' own rates (below) stand for their currency and day: a
        // fill's price of the same day would convert a commission one way and the lot
        // back the other.
        let implied = closed_trade_rates(&trades, &parts, |t| {
            self.server_instant(t).map(|i| i.date_naive())
        });
        let covered: BTreeSet<(&'static str, chrono::NaiveDate)> =
            implied.iter().map(|q| (q.base.code(), q.date)).collect();
        dated.retain(|q| {
            !covered.contains(&(q.base.code(), q.date))
                && !covered.contains(&(q.quote.code(), q.date))
        });
        parts.fx_rates.extend(dated);
        // The EA writes each closed trade's profit in the account's currency: over the
        // profit in the instrument's currency it is the terminal's own rate on the
        // closing date.
        {
            if !implied.is_empty() {
                parts.notes.push(format!(
                    "{}: {} rate(s) into {} implied by closed trades' own profit (the terminal's conversion on their closing dates)",
                    self.config.id,
                    implied.len(),
                    currency.code()
                ));
            }
            parts.fx_rates.extend(implied);
        }
        let probe = Book::assemble(parts.clone());
        let replayed = tradedesk_core::ledger::replay(&probe, |_, _| {});
        if let Err(e) = &replayed {
            parts.notes.push(format!(
                "{}: the history cannot be replayed in {} ({}): cash is not anchored to the balance",
                self.config.id,
                currency.code(),
                e.message
            ));
        }
        if let Ok(mut ledger) = replayed {
            let mut converted = false;
            for ((account, ccy), amount) in &mut ledger.cash {
                if *account != 0 || *ccy == currency || amount.is_zero() {
                    continue;
                }
                converted = true;
                parts.cash.push(CashEntry {
                    account: 0,
                    kind: if amount.is_sign_positive() {
                        CashKind::Withdrawal
                    } else {
                        CashKind::Deposit
                    },
                    amount: -*amount,
                    currency: *ccy,
                    time: Utc::now().with_timezone(&utc),
                });
                // What the ledger holds once the conversion is booked.
                *amount = Decimal::ZERO;
            }
            if converted {
                parts.notes.push(format!(
                    "{}: MetaTrader converts each trade's P&L into {}; the book shows the conversions as cash movements out of the quote currencies",
                    self.config.id,
                    currency.code()
                ));
            }
            // The replay above, with the conversions booked, is the cash the history
            // implies: no second replay.
            if let Some(balance) = info.balance {
                crate::anchor_cash_to(
                    &mut parts,
                    &[(currency, balance)],
                    &ledger.cash,
                    "MetaTrader",
                    "the history read",
                );
            } else {
                parts.notes.push(format!(
                    "{}: the EA's account_info writes no balance, so cash is what the history read implies, not the terminal's balance",
                    self.config.id
                ));
            }
        }
        Ok(Book::assemble(parts))
    }

    fn account(&self, currency: Currency, info: Option<&AccountInfo>) -> Account {
        Account {
            id: self.config.id.clone(),
            broker: "metatrader".to_owned(),
            currency,
            name: Some(match info {
                Some(i) => format!("{} {} ({})", self.config.platform.name(), i.number, i.name),
                None => format!("{} via DWXConnect", self.config.platform.name()),
            }),
            mode: self.mode(),
        }
    }

    /// Waits for `check` on the orders file to give an answer, or an ERROR message after
    /// `mark` whose type starts with `errors`.
    async fn await_outcome<T>(
        &self,
        mark: u64,
        errors: &str,
        check: impl Fn(&[Ticket]) -> Option<T>,
    ) -> Result<Result<T, String>, BrokerError> {
        let deadline = Instant::now() + self.config.timeout;
        loop {
            if let Some(v) = self.read_json("DWX_Orders.txt").await
                && let Some(found) = check(&Self::tickets(&v))
            {
                return Ok(Ok(found));
            }
            if let Some((kind, description)) = self
                .errors_after(mark)
                .await
                .into_iter()
                .find(|(k, _)| k.starts_with(errors))
            {
                return Ok(Err(format!("{kind}: {description}")));
            }
            if Instant::now() >= deadline {
                return Err(self.timeout());
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A close: `CLOSE_ORDER` on the symbol's positions of the other side, oldest first,
    /// until `quantity` lots are closed.
    async fn close(&self, order: &OrderRequest) -> Result<Placed, BrokerError> {
        let mut reset = self.writing.lock().await;
        let tickets = Self::tickets(&self.orders_file().await?);
        let closing: Vec<Ticket> = tickets
            .into_iter()
            .filter(|t| {
                t.is_position() && t.symbol == order.key.symbol && t.side() != order.terms.side
            })
            .filter(|t| order.terms.ticket.as_ref().is_none_or(|o| &t.ticket == o))
            .collect();
        if closing.is_empty() {
            return Err(BrokerError::Rejected {
                account: self.config.id.clone(),
                reason: match &order.terms.ticket {
                    Some(o) => format!("no open {} ticket {o} to close", order.key.symbol),
                    None => format!("no open {} position to close", order.key.symbol),
                },
                order_id: None,
            });
        }
        if let Some(t) = closing
            .first()
            .filter(|t| order.terms.ticket.is_some() && order.quantity > t.lots)
        {
            return Err(BrokerError::InvalidRequest {
                account: self.config.id.clone(),
                reason: format!(
                    "{} lots to close, ticket {} has {}",
                    order.quantity.normalize(),
                    t.ticket,
                    t.lots.normalize()
                ),
            });
        }
        let mut left = order.quantity;
        let mut closed = Vec::new();
        for t in &closing {
            if left <= Decimal::ZERO {
                break;
            }
            let lots = left.min(t.lots);
            let mark = self.message_mark().await;
            let content = if lots == t.lots {
                format!("{},0", t.ticket)
            } else {
                format!("{},{}", t.ticket, lots.normalize())
            };
            self.send_write(&mut reset, "CLOSE_ORDER", &content).await?;
            let before = t.lots;
            let ticket = t.ticket.clone();
            let outcome = self
                .await_outcome(mark, "CLOSE_ORDER", |now| {
                    let still = now
                        .iter()
                        .find(|x| x.ticket == ticket)
                        .map_or(Decimal::ZERO, |x| x.lots);
                    (still < before).then_some(())
                })
                .await
                .map_err(|e| match e {
                    BrokerError::Timeout { .. } => BrokerError::Uncertain {
                        account: self.config.id.clone(),
                        detail: format!("the EA has not confirmed closing ticket {}", t.ticket),
                    },
                    other => other,
                })?;
            if let Err(reason) = outcome {
                if closed.is_empty() {
                    return Err(BrokerError::Rejected {
                        account: self.config.id.clone(),
                        reason,
                        order_id: Some(t.ticket.clone()),
                    });
                }
                return Err(BrokerError::Uncertain {
                    account: self.config.id.clone(),
                    detail: format!("closed ticket(s) {} but then: {reason}", closed.join(", ")),
                });
            }
            closed.push(t.ticket.clone());
            left -= lots;
        }
        let first = &closing[0];
        let mut record = self.record(first, &order.client_order_id, OrderStatus::Filled);
        record.side = order.terms.side;
        record.quantity = order.quantity - left.max(Decimal::ZERO);
        record.filled_quantity = record.quantity;
        record.average_price = None;
        Ok(Placed {
            order: record,
            message: format!(
                "closed ticket(s) {} on {}",
                closed.join(", "),
                self.config.platform.name()
            ),
        })
    }
}

#[async_trait]
impl Broker for DwxBroker {
    fn takes_magic(&self) -> bool {
        true
    }

    fn markets(&self, _account: &str) -> Vec<Market> {
        MARKETS.to_vec()
    }

    fn accounts(&self) -> Vec<Account> {
        vec![self.account(Currency::USD, None)]
    }

    fn reported_equity(&self, account: &str) -> Option<(Currency, Decimal)> {
        let info = self.last_info(account)?;
        info.equity.map(|e| (info.currency, e))
    }

    /// The EA's `account_info`: free margin and leverage as written; margin used is
    /// equity less free margin and the margin level equity over it in percent, as
    /// MetaTrader defines both (docs/methodology/trading.md, "Margin").
    fn reported_margin(&self, account: &str) -> Option<crate::AccountMargin> {
        let info = self.last_info(account)?;
        let used = info.equity.zip(info.free_margin).map(|(e, f)| e - f);
        let level = info
            .equity
            .zip(used)
            .filter(|(_, u)| *u > Decimal::ZERO)
            .and_then(|(e, u)| e.checked_div(u))
            .and_then(|r| r.checked_mul(Decimal::ONE_HUNDRED));
        Some(crate::AccountMargin {
            currency: info.currency,
            margin_used: used,
            free_margin: info.free_margin,
            margin_level: level,
            leverage: info.leverage,
            buying_power: None,
            maintenance_margin: None,
        })
    }

    fn instrument_notes(&self, account: &str, symbol: &str) -> Vec<String> {
        if account != self.config.id {
            return Vec::new();
        }
        let symbol = bare_symbol(symbol).trim();
        let rules = configured(&self.config.lots, symbol)
            .cloned()
            .unwrap_or_default();
        let mut unstated = Vec::new();
        if rules.step.is_none() {
            unstated.push(format!(
                "its lot step ({} is checked, the finest lot the EA carries)",
                EA_LOT
            ));
        }
        if rules.min.is_none() && rules.step.is_none() {
            unstated.push(format!("its minimum ({EA_LOT} is checked)"));
        }
        if rules.max.is_none() {
            unstated.push("its maximum (none is checked)".to_owned());
        }
        if unstated.is_empty() {
            return Vec::new();
        }
        vec![format!(
            "{symbol}: the DWXConnect EA does not write {}; the terminal refuses lots off the symbol's own step or outside its limits; to check them before sending, add lot_step, min_lots and max_lots under [accounts.symbols.\"{symbol}\"] in tradedesk.toml, as the terminal's Specification window shows them",
            unstated.join(", ")
        )]
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        self.build_book().await.map(Arc::new)
    }

    fn generation(&self) -> u64 {
        u64::try_from(Utc::now().timestamp()).unwrap_or(0)
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let probe = async {
            let orders = self.orders_file().await?;
            self.account_info(&orders)
                .map(|i| (i, Self::tickets(&orders).len()))
        }
        .await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, detail, hint) = match probe {
            Ok((i, n)) => (
                HealthStatus::Ok,
                format!(
                    "{} account {} ({}), {} {}, balance {}, equity {}, free margin {}, leverage {}, {n} open ticket(s), EA files in {}",
                    self.config.platform.name(),
                    i.number,
                    i.name,
                    if self.config.live { "live" } else { "demo" },
                    i.currency.code(),
                    written(i.balance.map(|b| i.currency.round(b))),
                    written(i.equity.map(|e| i.currency.round(e))),
                    written(i.free_margin.map(|f| i.currency.round(f))),
                    written(i.leverage.map(|l| format!("1:{l}"))),
                    self.dir().display()
                ),
                None,
            ),
            Err(e) => crate::down(&e, None, &self.install_hint()),
        };
        vec![AccountHealth {
            account: self.config.id.clone(),
            broker: "metatrader".to_owned(),
            mode: self.mode(),
            status,
            latency_ms: Some(latency_ms),
            detail,
            hint,
        }]
    }

    fn trading_modes(&self, account: &str) -> Vec<Mode> {
        if account == self.config.id {
            vec![self.mode()]
        } else {
            Vec::new()
        }
    }

    async fn instrument(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<TradableInstrument, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let symbol = bare_symbol(symbol).trim();
        let info = self.account_info(&self.orders_file().await?)?;
        let r = resolve(symbol, info.currency, &self.config.symbols, None);
        if let Some((detail, fix)) = r.assumed {
            return Err(BrokerError::UnknownSymbol {
                account: self.config.id.clone(),
                symbol: tradedesk_core::error::quote(symbol),
                known: format!(
                    "symbols whose contract size and profit currency are known ({detail}; {fix})"
                ),
            });
        }
        let Resolved {
            class,
            multiplier,
            currency,
            pip,
            tick,
            ..
        } = r;
        // The config's volumes, else the finest lot the EA carries and no maximum: the
        // terminal refuses what is off the symbol's own step or limits
        // (`instrument_notes` says so with every order).
        let rules = configured(&self.config.lots, symbol)
            .cloned()
            .unwrap_or_default();
        let lot_step = rules.step.unwrap_or(EA_LOT);
        Ok(TradableInstrument {
            key: InstrumentKey::new(exchange_of(class), symbol),
            currency,
            asset_class: class,
            multiplier,
            lot_step,
            min_quantity: rules.min.unwrap_or(lot_step),
            max_quantity: rules.max.unwrap_or(Decimal::MAX),
            tick,
            pip,
            // Without the account's leverage the order is taken as fully funded (rate 1),
            // the rate that never lets an order past the margin check it would fail.
            margin_rate: info
                .leverage
                .map_or(Decimal::ONE, |l| Decimal::ONE / l.max(Decimal::ONE)),
            unit: "lots",
        })
    }

    async fn quote(&self, account: &str, symbol: &str) -> Result<Quote, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let symbol = bare_symbol(symbol).trim().to_owned();
        let mark = self.message_mark().await;
        let deadline = Instant::now() + self.config.timeout;
        let prices = self.prices(std::slice::from_ref(&symbol), deadline).await?;
        let Some((bid, ask)) = prices.get(&symbol).copied() else {
            let errors = self.errors_after(mark).await;
            if errors.iter().any(|(k, d)| {
                (k == "GET_BID_ASK" || k == "SUBSCRIBE_SYMBOL") && d.contains(&symbol)
            }) {
                return Err(BrokerError::UnknownSymbol {
                    account: self.config.id.clone(),
                    symbol: tradedesk_core::error::quote(&symbol),
                    known: "symbols in the terminal's Market Watch, named as the broker names them (EURUSD, XAUUSD, US500.cash, ...)".to_owned(),
                });
            }
            return Err(self.timeout());
        };
        let class = instrument_of(&symbol, Currency::USD).0;
        let currency = resolve(
            &symbol,
            self.account_info(&self.orders_file().await?)?.currency,
            &self.config.symbols,
            None,
        )
        .currency;
        Ok(Quote {
            key: InstrumentKey::new(exchange_of(class), &symbol),
            currency,
            bid,
            ask,
            time: Utc::now(),
        })
    }

    async fn orders(
        &self,
        account: Option<&str>,
        filter: OrderFilter,
    ) -> Result<Vec<OrderRecord>, BrokerError> {
        if let Some(a) = account {
            crate::check_served(&self.config.id, a)?;
        }
        if filter == OrderFilter::Closed {
            return Ok(Vec::new());
        }
        let tickets = Self::tickets(&self.orders_file().await?);
        Ok(tickets
            .iter()
            .rev()
            .filter(|t| !t.is_position())
            .map(|t| self.record(t, "", OrderStatus::Accepted))
            .collect())
    }

    async fn find_order(
        &self,
        account: &str,
        client_order_id: &str,
    ) -> Result<Option<OrderRecord>, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        // A command the EA has not taken yet is withdrawn: then it provably never runs.
        let untaken = self
            .sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(client_order_id)
            .map(|s| (s.slot.clone(), s.body.clone()));
        if let Some((slot, body)) = untaken {
            let _writing = self.writing.lock().await;
            if tokio::fs::read_to_string(&slot).await.ok().as_deref() == Some(body.as_str())
                && tokio::fs::remove_file(&slot).await.is_ok()
            {
                return Ok(None);
            }
        }
        let tickets = Self::tickets(&self.orders_file().await?);
        if let Some(t) = self.find_in(&tickets, client_order_id) {
            let status = if t.is_position() {
                OrderStatus::Filled
            } else {
                OrderStatus::Accepted
            };
            return Ok(Some(self.record(&t, client_order_id, status)));
        }
        // Already closed: the recent history, by tag.
        let history = self.history(2).await?;
        let tag = tag_of(client_order_id);
        for (ticket, h) in history.as_object().into_iter().flatten() {
            if h.get("magic").and_then(Value::as_i64) == Some(self.config.magic)
                && text(h, "comment").starts_with(&tag)
            {
                let t = Ticket {
                    ticket: ticket.clone(),
                    magic: self.config.magic,
                    symbol: text(h, "symbol"),
                    lots: dec(h, "lots").unwrap_or_default(),
                    kind: text(h, "type"),
                    open_price: dec(h, "open_price")
                        .or_else(|| dec(h, "deal_price"))
                        .unwrap_or_default(),
                    open_time: {
                        let o = text(h, "open_time");
                        if o.is_empty() {
                            text(h, "deal_time")
                        } else {
                            o
                        }
                    },
                    sl: Decimal::ZERO,
                    tp: Decimal::ZERO,
                    pnl: dec(h, "pnl").unwrap_or_default(),
                    commission: Decimal::ZERO,
                    swap: Decimal::ZERO,
                    comment: text(h, "comment"),
                };
                let status = if t.is_position() {
                    OrderStatus::Filled
                } else {
                    OrderStatus::Cancelled
                };
                return Ok(Some(self.record(&t, client_order_id, status)));
            }
        }
        Ok(None)
    }

    async fn place(&self, order: &OrderRequest) -> Result<Placed, BrokerError> {
        crate::check_served(&self.config.id, &order.terms.account)?;
        if order.reduce_only && order.terms.order_type == OrderType::Market {
            return self.close(order).await;
        }
        let kind = match (order.terms.order_type, order.terms.side) {
            (OrderType::Market, Side::Buy) => "buy",
            (OrderType::Market, Side::Sell) => "sell",
            (OrderType::Limit, Side::Buy) => "buylimit",
            (OrderType::Limit, Side::Sell) => "selllimit",
            (OrderType::Stop, Side::Buy) => "buystop",
            (OrderType::Stop, Side::Sell) => "sellstop",
            (OrderType::StopLimit, _) => {
                return Err(BrokerError::InvalidRequest {
                    account: self.config.id.clone(),
                    reason: "MetaTrader through DWXConnect has no stop-limit orders: use a stop or a limit".to_owned(),
                });
            }
        };
        let price = match order.terms.order_type {
            OrderType::Market => Decimal::ZERO,
            OrderType::Limit => order.terms.limit_price.unwrap_or_default(),
            _ => order.terms.stop_price.unwrap_or_default(),
        };
        let expiration = match (order.terms.order_type, order.terms.time_in_force) {
            (OrderType::Market, _) | (_, TimeInForce::Gtc) => 0,
            (_, TimeInForce::Day) => {
                // The end of the broker's day, as MetaTrader counts it (server wall clock).
                let local = zones::at(Utc::now(), self.zone()).date_naive();
                local
                    .and_hms_opt(23, 59, 59)
                    .map_or(0, |t| t.and_utc().timestamp())
            }
            (_, tif) => {
                return Err(BrokerError::InvalidRequest {
                    account: self.config.id.clone(),
                    reason: format!(
                        "MetaTrader pending orders take day or gtc, not {}",
                        tif.as_str()
                    ),
                });
            }
        };
        let (comment, changed) =
            comment_for(&order.client_order_id, order.terms.comment.as_deref());
        // The order's own magic number, else the account's.
        let magic = order.terms.magic.unwrap_or(self.config.magic);
        let lots = order.quantity.round_dp(2);
        let content = format!(
            "{},{kind},{},{},{},{},{},{comment},{expiration}",
            order.key.symbol,
            lots.normalize(),
            price.normalize(),
            order.terms.stop_loss.unwrap_or_default().normalize(),
            order.terms.take_profit.unwrap_or_default().normalize(),
            magic,
        );
        let mut reset = self.writing.lock().await;
        let before: BTreeSet<String> = Self::tickets(&self.orders_file().await?)
            .into_iter()
            .map(|t| t.ticket)
            .collect();
        let mark = self.message_mark().await;
        let (slot, body) = self.send_write(&mut reset, "OPEN_ORDER", &content).await?;
        self.sent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(
                order.client_order_id.clone(),
                Sent {
                    symbol: order.key.symbol.clone(),
                    lots,
                    side: order.terms.side,
                    magic,
                    before,
                    slot,
                    body,
                },
            );
        let cid = order.client_order_id.clone();
        let outcome = self
            .await_outcome(mark, "OPEN_ORDER", |tickets| self.find_in(tickets, &cid))
            .await
            .map_err(|e| match e {
                BrokerError::Timeout { .. } => BrokerError::Uncertain {
                    account: self.config.id.clone(),
                    detail:
                        "the EA took the order but no ticket or error appeared within the timeout"
                            .to_owned(),
                },
                other => other,
            })?;
        match outcome {
            Ok(t) => {
                let status = if t.is_position() {
                    OrderStatus::Filled
                } else {
                    OrderStatus::Accepted
                };
                let mut message = format!(
                    "{} ticket {} ({} {} lots {})",
                    self.config.platform.name(),
                    t.ticket,
                    t.kind,
                    t.lots,
                    t.symbol
                );
                if let Some(c) = changed {
                    message.push_str("; ");
                    message.push_str(&c);
                }
                Ok(Placed {
                    order: self.record(&t, &order.client_order_id, status),
                    message,
                })
            }
            Err(reason) => Err(BrokerError::Rejected {
                account: self.config.id.clone(),
                reason: self.with_lot_fix(&order.key.symbol, reason),
                order_id: None,
            }),
        }
    }

    async fn cancel(
        &self,
        account: &str,
        order: &OrderRef,
    ) -> Result<(OrderRecord, bool), BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let tickets = Self::tickets(&self.orders_file().await?);
        let (target, cid) = match order {
            OrderRef::OrderId(id) => (
                tickets.iter().find(|t| &t.ticket == id).cloned(),
                String::new(),
            ),
            OrderRef::ClientOrderId(c) => (self.find_in(&tickets, c), c.clone()),
        };
        let Some(t) = target else {
            return Err(BrokerError::UnknownOrder {
                account: self.config.id.clone(),
                reference: match order {
                    OrderRef::OrderId(id) | OrderRef::ClientOrderId(id) => id.clone(),
                },
            });
        };
        if t.is_position() {
            // Filled already: nothing to cancel (close_position closes it).
            return Ok((self.record(&t, &cid, OrderStatus::Filled), false));
        }
        let mut reset = self.writing.lock().await;
        let mark = self.message_mark().await;
        self.send_write(&mut reset, "CLOSE_ORDER", &format!("{},0", t.ticket))
            .await?;
        let ticket = t.ticket.clone();
        let outcome = self
            .await_outcome(mark, "CLOSE_ORDER", |now| {
                (!now.iter().any(|x| x.ticket == ticket)).then_some(())
            })
            .await?;
        match outcome {
            Ok(()) => Ok((self.record(&t, &cid, OrderStatus::Cancelled), true)),
            Err(reason) => Err(BrokerError::Rejected {
                account: self.config.id.clone(),
                reason,
                order_id: Some(t.ticket.clone()),
            }),
        }
    }

    async fn position_levels(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let symbol = bare_symbol(symbol);
        let tickets = Self::tickets(&self.orders_file().await?);
        let t = tickets
            .iter()
            .find(|t| t.is_position() && t.symbol == symbol);
        Ok(t.map_or((None, None), |t| {
            (
                (!t.sl.is_zero()).then_some(t.sl),
                (!t.tp.is_zero()).then_some(t.tp),
            )
        }))
    }

    async fn modify_position(
        &self,
        account: &str,
        symbol: &str,
        stop_loss: Option<Decimal>,
        take_profit: Option<Decimal>,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        crate::check_served(&self.config.id, account)?;
        self.modify_where(bare_symbol(symbol), None, stop_loss, take_profit)
            .await
    }

    async fn modify_ticket(
        &self,
        account: &str,
        symbol: &str,
        ticket: &str,
        stop_loss: Option<Decimal>,
        take_profit: Option<Decimal>,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        crate::check_served(&self.config.id, account)?;
        self.modify_where(bare_symbol(symbol), Some(ticket), stop_loss, take_profit)
            .await
    }

    /// The bid and ask the EA writes for subscribed symbols (`snapshots.rs`).
    async fn market_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<crate::MarketSnapshots, BrokerError> {
        self.read_snapshots(account, symbols).await
    }

    /// The symbols the EA and the config know (`search`).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        self.search(account, query).await
    }

    /// The configured `server_time_zone`: DWXConnect's EA writes neither the server's
    /// zone nor any symbol's trading sessions (`get_market_hours` says so).
    fn server_time_zone(&self, account: &str) -> Option<String> {
        (account == self.config.id)
            .then(|| self.config.server_time_zone.clone())
            .flatten()
    }
}

impl DwxBroker {
    /// `MODIFY_ORDER` on the symbol's open tickets (or the one named), each keeping the
    /// level not given.
    async fn modify_where(
        &self,
        symbol: &str,
        only: Option<&str>,
        stop_loss: Option<Decimal>,
        take_profit: Option<Decimal>,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        let mut reset = self.writing.lock().await;
        let tickets: Vec<Ticket> = Self::tickets(&self.orders_file().await?)
            .into_iter()
            .filter(|t| t.is_position() && t.symbol == symbol)
            .filter(|t| only.is_none_or(|o| t.ticket == o))
            .collect();
        if tickets.is_empty() {
            return Err(BrokerError::Rejected {
                account: self.config.id.clone(),
                reason: match only {
                    Some(o) => format!("no open {symbol} ticket {o}"),
                    None => format!("no open {symbol} position"),
                },
                order_id: None,
            });
        }
        let mut last = (None, None);
        for (n, t) in tickets.iter().enumerate() {
            let sl = stop_loss.unwrap_or(t.sl);
            let tp = take_profit.unwrap_or(t.tp);
            let mark = self.message_mark().await;
            self.send_write(
                &mut reset,
                "MODIFY_ORDER",
                &format!("{},0,{},{},0", t.ticket, sl.normalize(), tp.normalize()),
            )
            .await?;
            let ticket = t.ticket.clone();
            let outcome = self
                .await_outcome(mark, "MODIFY_ORDER", |now| {
                    now.iter()
                        .find(|x| x.ticket == ticket)
                        .filter(|x| x.sl == sl && x.tp == tp)
                        .map(|_| ())
                })
                .await?;
            if let Err(reason) = outcome {
                return Err(if n == 0 {
                    BrokerError::Rejected {
                        account: self.config.id.clone(),
                        reason,
                        order_id: Some(t.ticket.clone()),
                    }
                } else {
                    BrokerError::Uncertain {
                        account: self.config.id.clone(),
                        detail: format!("{n} ticket(s) moved, then ticket {}: {reason}", t.ticket),
                    }
                });
            }
            last = ((!sl.is_zero()).then_some(sl), (!tp.is_zero()).then_some(tp));
        }
        Ok(last)
    }
}

/// Whether `name` is a time zone this build knows (IANA names and their links).
pub fn is_time_zone(name: &str) -> bool {
    zones::named(name).is_some()
}

/// The `MQL4/Files` or `MQL5/Files` folder's platform, from its path.
pub fn platform_of(path: &Path) -> Platform {
    if path
        .components()
        .any(|c| c.as_os_str().eq_ignore_ascii_case("MQL5"))
    {
        Platform::Mt5
    } else {
        Platform::Mt4
    }
}

/// A figure of the EA's `account_info` for the health line, or what it lacks.
fn written<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "not written by the EA".to_owned(), |d| d.to_string())
}

/// The terminal's own name of a symbol the tools may give qualified (`MT4:XAUUSD`).
fn bare_symbol(symbol: &str) -> &str {
    symbol.rsplit_once(':').map_or(symbol, |(_, s)| s)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn comments_carry_the_tag_first_and_fit_31_characters() {
        let (c, note) = comment_for("order-1", None);
        assert_eq!(c, tag_of("order-1"));
        assert_eq!(c.len(), 10);
        assert!(note.is_none());
        let (c, note) = comment_for("order-1", Some("swing, long | \"big\" position idea"));
        assert!(c.len() <= COMMENT_MAX, "{c}");
        assert!(c.starts_with(&tag_of("order-1")));
        assert!(!c.contains(',') && !c.contains('|') && !c.contains('"'));
        let note = note.unwrap();
        assert!(
            note.contains("removed") && note.contains("shortened"),
            "{note}"
        );
        assert_ne!(tag_of("a"), tag_of("b"));
    }

    #[test]
    fn symbols_are_pairs_metals_or_cfds() {
        let (class, mult, ccy, pip, _) = instrument_of("USDJPY", Currency::USD);
        assert_eq!(
            (class, mult, ccy.code(), pip),
            (
                AssetClass::Fx,
                Decimal::from(100_000),
                "JPY",
                Some(Decimal::new(1, 2))
            )
        );
        let (class, mult, ..) = instrument_of("XAUUSD", Currency::USD);
        assert_eq!((class, mult), (AssetClass::Fx, Decimal::from(100)));
        let (class, mult, ccy, ..) =
            instrument_of("US500.cash", Currency::new_checked("EUR").unwrap());
        assert_eq!(
            (class, mult, ccy.code()),
            (AssetClass::Cfd, Decimal::ONE, "EUR")
        );
        assert_eq!(instrument_of("EURUSD.r", Currency::USD).0, AssetClass::Fx);
        // A broker's prefix does not hide gold or silver.
        assert_eq!(
            instrument_of("#XAUUSD", Currency::USD).1,
            Decimal::from(100)
        );
        assert_eq!(
            instrument_of(".xagusd", Currency::USD).1,
            Decimal::from(5_000)
        );
        // Tags are recognised by shape, and a multi-byte comment never panics.
        assert!(is_tag(&tag_of("abc")));
        assert!(!is_tag("td12é45678 hedge"));
        assert!(!is_tag("td12"));
    }

    #[test]
    fn raw_quotes_and_backslashes_in_strings_are_read_as_the_ea_wrote_them() {
        let text = r#"{"account_info": {"name": "O\'Brien \ Co", "currency": "USD"}, "orders": {"7": {"comment": "say "hi" C:\new\temp", "lots": 0.10}, "8": {"comment": "ends "quoted"", "lots": 1.00}, "9": {"comment": "a, "b" c", "lots": 2.00}}}"#;
        let v = parse_ea(text).unwrap();
        assert_eq!(v["account_info"]["name"], "O\\'Brien \\ Co");
        assert_eq!(v["orders"]["7"]["comment"], r#"say "hi" C:\new\temp"#);
        assert_eq!(v["orders"]["7"]["lots"], 0.10);
        assert_eq!(v["orders"]["8"]["comment"], r#"ends "quoted""#);
        assert_eq!(v["orders"]["9"]["comment"], r#"a, "b" c"#);
        // What cannot be the EA's text is named with the text near the fault.
        let e = parse_ea(r#"{"orders": {"7": {"comment": "x", "y"}}}"#).unwrap_err();
        assert!(e.contains("near `") && e.contains("\"y\""), "{e}");
        assert!(parse_ea("{\"a\": 1").is_err());
    }

    #[test]
    fn files_decode_from_utf8_and_utf16() {
        assert_eq!(decode(b"{\"a\": 1}").unwrap(), "{\"a\": 1}");
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain("{}".encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(decode(&utf16).unwrap(), "{}");
        // ANSI: "café €5" in code page 1252.
        assert_eq!(decode(b"caf\xe9 \x805").unwrap(), "caf\u{e9} \u{20ac}5");
        assert_eq!(decode("café".as_bytes()).unwrap(), "café");
        assert_eq!(platform_of(Path::new("/x/MQL5/Files")), Platform::Mt5);
        assert_eq!(platform_of(Path::new("/x/MQL4/Files")), Platform::Mt4);
    }
}
