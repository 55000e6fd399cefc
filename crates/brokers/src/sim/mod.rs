//! `sim`: an embedded paper exchange that needs nothing outside the binary.
//!
//! Quotes come from the deterministic price process in [`market`]; orders rest, trigger
//! and fill against that path as the clock moves (each call first catches the book up to
//! now, minute by minute); fills pay each market's fees; stop-loss and take-profit
//! levels sit on the position, as MetaTrader keeps them, and close it when the path
//! crosses them. Orders, fills and levels live in the SQLite store, so the ledger
//! survives restarts, and its fills feed the portfolio tools through [`Broker::snapshot`].

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chrono::{DateTime, Duration, FixedOffset, Offset, SecondsFormat, Utc};
use rust_decimal::Decimal;
use tradedesk_core::ledger::replay;
use tradedesk_core::{
    Account, AssetClass, Bar, Book, BookParts, CashEntry, CashKind, Currency, Fill, FxQuote,
    Interval, Mode, OrderRecord, OrderRequest, OrderStatus, OrderTerms, OrderType, Quote, Side,
    TimeInForce, TradableInstrument,
};
use tradedesk_store::rusqlite::{OptionalExtension, Transaction, params};
use tradedesk_store::{Store, StoreError, sql};

use crate::{AccountHealth, Broker, BrokerError, HealthStatus, OrderFilter, OrderRef, Placed};

mod chain;
pub mod market;
mod news;
mod search;
mod snapshots;
mod tables;
pub use news::DEMO_NEWS_SOURCE;

use market::{SimInstrument, day_end, universe};
use tables::{FillRow, OrderRow};

/// Where the sim's time comes from: wall time when serving, a hand-set clock in tests.
pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to.
#[derive(Debug)]
pub struct ManualClock(Mutex<DateTime<Utc>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Mutex::new(start))
    }

    pub fn set(&self, t: DateTime<Utc>) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = t;
    }

    pub fn advance(&self, by: Duration) {
        let mut t = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *t += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One sim account's settings (`[[accounts]] broker = "sim"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    pub account: String,
    pub currency: Currency,
    /// Deposited when the account is first used.
    pub initial_cash: Decimal,
    pub seed: u64,
}

impl SimConfig {
    pub fn new(account: impl Into<String>) -> Self {
        Self {
            account: account.into(),
            currency: Currency::new("USD"),
            initial_cash: Decimal::from(100_000),
            seed: 42,
        }
    }
}

/// The longest stretch of path a catch-up walks minute by minute; an older gap (a server
/// stopped for months) is walked from this far back only.
const MAX_CATCH_UP: Duration = Duration::days(31);
const STEP: Duration = Duration::minutes(1);
/// The most bars one request may ask the process for.
pub const MAX_BARS: i64 = 20_000;

/// The markets the sim's universe is drawn from: US and Bursa stocks, and perpetuals.
pub const MARKETS: [crate::calendar::Market; 3] = [
    crate::calendar::Market::Nyse,
    crate::calendar::Market::Bursa,
    crate::calendar::Market::Perp,
];

#[derive(Debug)]
pub struct SimBroker {
    config: SimConfig,
    universe: Vec<SimInstrument>,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
    /// Bumped on every commit by this process.
    writes: AtomicU64,
    /// Whether the sim's tables are declared on the store (see [`SimBroker::new`]).
    tables: AtomicBool,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_time(text: &str) -> Result<DateTime<Utc>, StoreError> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| StoreError::Corrupt(format!("time '{text}' in the sim ledger")))
}

fn parse_dec(text: &str) -> Result<Decimal, StoreError> {
    Decimal::from_str(text)
        .map_err(|_| StoreError::Corrupt(format!("number '{text}' in the sim ledger")))
}

fn opt_dec(text: Option<&str>) -> Result<Option<Decimal>, StoreError> {
    text.map(parse_dec).transpose()
}

fn side_of(text: &str) -> Result<Side, StoreError> {
    match text {
        "buy" => Ok(Side::Buy),
        "sell" => Ok(Side::Sell),
        other => Err(StoreError::Corrupt(format!(
            "side '{other}' in the sim ledger"
        ))),
    }
}

fn mode_of(text: &str) -> Mode {
    if text == "live" {
        Mode::Live
    } else {
        Mode::Paper
    }
}

/// An order row with the two flags only the sim keeps.
#[derive(Debug, Clone)]
struct SimOrder {
    record: OrderRecord,
    triggered: bool,
    reduce_only: bool,
}

fn store_err(account: &str, e: &StoreError) -> BrokerError {
    BrokerError::Unavailable {
        account: account.to_owned(),
        detail: e.to_string(),
        hint: "the sim's state store failed; check that the state directory is writable".to_owned(),
    }
}

/// A fill as the ledger keeps it.
#[derive(Debug, Clone)]
struct SimFill {
    fill_id: String,
    key: tradedesk_core::InstrumentKey,
    side: Side,
    quantity: Decimal,
    price: Decimal,
    commission: Decimal,
    commission_currency: Currency,
    time: DateTime<Utc>,
    seq: u32,
}

impl SimBroker {
    /// A sim account on `store`, with instruments taken from the demo book `demo`.
    ///
    /// The sim's tables are declared on the store here, so they exist as soon as a sim is
    /// configured; should that fail (a read-only or locked state directory), the first
    /// call declares them again and answers with the store's error.
    pub fn new(config: SimConfig, demo: &Book, store: Arc<Store>, clock: Arc<dyn Clock>) -> Self {
        let tables = AtomicBool::new(store.declare(tables::SCHEMA).is_ok());
        Self {
            config,
            universe: universe(demo),
            store,
            clock,
            writes: AtomicU64::new(0),
            tables,
        }
    }

    /// Declares the sim's tables on the store unless already done.
    fn declared(&self) -> Result<&Store, StoreError> {
        if !self.tables.load(Ordering::Acquire) {
            self.store.declare(tables::SCHEMA)?;
            self.tables.store(true, Ordering::Release);
        }
        Ok(&self.store)
    }

    /// A read on the store, over the sim's tables.
    fn read<T>(
        &self,
        f: impl FnOnce(&tradedesk_store::rusqlite::Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.declared()?.read(f)
    }

    /// One transaction on the store, over the sim's tables.
    fn tx<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.declared()?.tx(f)
    }

    pub fn account_id(&self) -> &str {
        &self.config.account
    }

    pub fn universe(&self) -> &[SimInstrument] {
        &self.universe
    }

    fn err(&self, e: &StoreError) -> BrokerError {
        store_err(&self.config.account, e)
    }

    fn check_account(&self, account: &str) -> Result<(), BrokerError> {
        crate::check_served(&self.config.account, account)
    }

    /// Finds an instrument by `EXCHANGE:SYMBOL` or a bare symbol (case-insensitive).
    pub fn find(&self, symbol: &str) -> Result<&SimInstrument, BrokerError> {
        let wanted = symbol.trim().to_ascii_uppercase();
        let hit = if let Some((exchange, sym)) = wanted.split_once(':') {
            self.universe
                .iter()
                .find(|i| i.spec.key.exchange == exchange && i.spec.key.symbol == sym)
        } else {
            let mut hits = self.universe.iter().filter(|i| i.spec.key.symbol == wanted);
            match (hits.next(), hits.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        };
        hit.ok_or_else(|| BrokerError::UnknownSymbol {
            account: self.config.account.clone(),
            symbol: tradedesk_core::error::quote(symbol),
            known: self
                .universe
                .iter()
                .map(|i| i.spec.key.symbol.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }

    /// A perpetual's mark (its mid) at `t` and the most leverage its margin rate allows.
    fn perp_mark_of(&self, inst: &SimInstrument, t: DateTime<Utc>) -> (Decimal, u32) {
        let q = self.quote_of(inst, t);
        let max_leverage = Decimal::ONE
            .checked_div(inst.spec.margin_rate)
            .and_then(|l| rust_decimal::prelude::ToPrimitive::to_u32(&l.floor()))
            .unwrap_or(1)
            .max(1);
        ((q.bid + q.ask) / Decimal::TWO, max_leverage)
    }

    fn quote_of(&self, inst: &SimInstrument, t: DateTime<Utc>) -> Quote {
        let (bid, ask) = inst.bid_ask(self.config.seed, t);
        Quote {
            key: inst.spec.key.clone(),
            currency: inst.spec.currency,
            bid,
            ask,
            time: t,
        }
    }

    fn ensure_account(&self, tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        tx.execute(
            "INSERT OR IGNORE INTO sim_accounts (account, currency, initial_cash, created, last_tick, next_seq)
             VALUES (?1, ?2, ?3, ?4, ?4, 1)",
            params![
                self.config.account,
                self.config.currency.code(),
                self.config.initial_cash.to_string(),
                rfc3339(now)
            ],
        )
        .map_err(sql)?;
        Ok(())
    }

    fn next_seq(&self, tx: &Transaction<'_>) -> Result<i64, StoreError> {
        tx.query_row(
            "UPDATE sim_accounts SET next_seq = next_seq + 1 WHERE account = ?1 RETURNING next_seq - 1",
            params![self.config.account],
            |r| r.get(0),
        )
        .map_err(sql)
    }

    fn load_orders(
        &self,
        tx: &tradedesk_store::rusqlite::Connection,
        clause: &str,
        args: &[&dyn tradedesk_store::rusqlite::ToSql],
    ) -> Result<Vec<SimOrder>, StoreError> {
        let mut stmt = tx
            .prepare_cached(&format!("SELECT * FROM sim_orders WHERE {clause}"))
            .map_err(sql)?;
        let rows = stmt.query_map(args, OrderRow::read).map_err(sql)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(sql)?.decode()?);
        }
        Ok(out)
    }

    fn load_fills(
        &self,
        conn: &tradedesk_store::rusqlite::Connection,
    ) -> Result<Vec<SimFill>, StoreError> {
        let mut stmt = conn
            .prepare_cached("SELECT * FROM sim_fills WHERE account = ?1 ORDER BY seq")
            .map_err(sql)?;
        let rows = stmt
            .query_map(params![self.config.account], FillRow::read)
            .map_err(sql)?;
        let mut out = Vec::new();
        for row in rows {
            out.push(row.map_err(sql)?.decode()?);
        }
        Ok(out)
    }

    /// Signed quantity held per instrument.
    fn positions(fills: &[SimFill]) -> BTreeMap<tradedesk_core::InstrumentKey, Decimal> {
        let mut out = BTreeMap::new();
        for f in fills {
            let q = out.entry(f.key.clone()).or_insert(Decimal::ZERO);
            match f.side {
                Side::Buy => *q += f.quantity,
                Side::Sell => *q -= f.quantity,
            }
        }
        out.retain(|_, q| !q.is_zero());
        out
    }

    fn account_created(
        &self,
        conn: &tradedesk_store::rusqlite::Connection,
    ) -> Result<Option<DateTime<Utc>>, StoreError> {
        conn.query_row(
            "SELECT created FROM sim_accounts WHERE account = ?1",
            params![self.config.account],
            |r| r.get::<_, String>(0),
        )
        .optional()
        .map_err(sql)?
        .as_deref()
        .map(parse_time)
        .transpose()
    }

    /// `1 from = rate to`, from the sim's own FX quotes (mids), crossing through USD.
    fn fx_rate(&self, from: Currency, to: Currency, t: DateTime<Utc>) -> Option<Decimal> {
        if from == to {
            return Some(Decimal::ONE);
        }
        let usd = Currency::new("USD");
        let to_usd = |c: Currency| -> Option<Decimal> {
            if c == usd {
                return Some(Decimal::ONE);
            }
            let mid = |sym: &str| {
                self.universe
                    .iter()
                    .find(|i| i.spec.key.exchange == "FX" && i.spec.key.symbol == sym)
                    .map(|i| {
                        let (b, a) = i.bid_ask(self.config.seed, t);
                        (b + a) / Decimal::TWO
                    })
            };
            mid(&format!("{}USD", c.code()))
                .or_else(|| mid(&format!("USD{}", c.code())).map(|m| Decimal::ONE / m))
        };
        Some(to_usd(from)? / to_usd(to)?)
    }

    /// The sim's book at `t`: its fills, the initial deposit, marks at the mids of
    /// everything it traded, and FX for every currency it holds.
    fn book_at(
        &self,
        conn: &tradedesk_store::rusqlite::Connection,
        t: DateTime<Utc>,
    ) -> Result<Book, StoreError> {
        let fills = self.load_fills(conn)?;
        self.book_of(conn, &fills, t)
    }

    /// The book of fills already read.
    fn book_of(
        &self,
        conn: &tradedesk_store::rusqlite::Connection,
        fills: &[SimFill],
        t: DateTime<Utc>,
    ) -> Result<Book, StoreError> {
        let created = self.account_created(conn)?.unwrap_or(t);
        let mut instruments: Vec<tradedesk_core::Instrument> = Vec::new();
        let mut index = |key: &tradedesk_core::InstrumentKey| -> u32 {
            if let Some(i) = instruments.iter().position(|x| &x.key == key) {
                return u32::try_from(i).unwrap_or(u32::MAX);
            }
            if let Some(sim) = self.universe.iter().find(|s| &s.spec.key == key) {
                instruments.push(sim.instrument.clone());
            }
            u32::try_from(instruments.len().saturating_sub(1)).unwrap_or(u32::MAX)
        };
        let utc: FixedOffset = Utc.fix();
        let mut book_fills = Vec::with_capacity(fills.len());
        for f in fills {
            let instrument = index(&f.key);
            book_fills.push(Fill {
                id: f.fill_id.as_str().into(),
                account: 0,
                instrument,
                side: f.side,
                quantity: f.quantity,
                price: f.price,
                commission: f.commission,
                commission_currency: f.commission_currency,
                commission_known: true,
                time: f.time.with_timezone(&utc),
                trade_date: f.time.date_naive(),
                seq: f.seq,
                kind: tradedesk_core::FillKind::Trade,
                position: 0,
            });
        }
        let today = t.date_naive();
        let marks = instruments
            .iter()
            .enumerate()
            .filter_map(|(i, inst)| {
                let sim = self.universe.iter().find(|s| s.spec.key == inst.key)?;
                let (bid, ask) = sim.bid_ask(self.config.seed, t);
                Some((u32::try_from(i).ok()?, today, (bid + ask) / Decimal::TWO))
            })
            .collect();
        let mut currencies: Vec<Currency> = instruments.iter().map(|i| i.currency).collect();
        currencies.extend(fills.iter().map(|f| f.commission_currency));
        currencies.sort_by_key(|c| c.code());
        currencies.dedup();
        let fx_rates = currencies
            .into_iter()
            .filter(|c| *c != self.config.currency)
            .filter_map(|c| {
                Some(FxQuote {
                    base: c,
                    quote: self.config.currency,
                    rate: self.fx_rate(c, self.config.currency, t)?.round_dp(10),
                    date: today,
                })
            })
            .collect();
        Ok(Book::assemble(BookParts {
            base_currency: self.config.currency,
            as_of: today,
            accounts: vec![self.account()],
            instruments,
            fills: book_fills,
            cash: vec![CashEntry {
                account: 0,
                kind: CashKind::Deposit,
                amount: self.config.initial_cash,
                currency: self.config.currency,
                time: created.with_timezone(&utc),
            }],
            marks,
            fx_rates,
            reported_positions: Vec::new(),
            corporate_actions: Vec::new(),
            notes: Vec::new(),
            unknown_specs: Vec::new(),
            tickets: Vec::new(),
            margin_modes: Vec::new(),
        }))
    }

    fn account(&self) -> Account {
        Account {
            id: self.config.account.clone(),
            broker: "sim".to_owned(),
            currency: self.config.currency,
            name: Some("Paper exchange (simulated, embedded)".to_owned()),
            mode: Mode::Paper,
        }
    }

    /// Equity and margin in use, in the account currency, at `t`.
    fn margin_state(
        &self,
        conn: &tradedesk_store::rusqlite::Connection,
        fills: &[SimFill],
        t: DateTime<Utc>,
    ) -> Result<(Decimal, Decimal), String> {
        let book = self.book_of(conn, fills, t).map_err(|e| e.to_string())?;
        let ledger = replay(&book, |_, _| {}).map_err(|e| e.message)?;
        let acct = self.config.currency;
        let mut equity = Decimal::ZERO;
        for ((_, ccy), amount) in &ledger.cash {
            equity += *amount * self.fx_rate(*ccy, acct, t).ok_or("no FX rate")?;
        }
        let mut used = Decimal::ZERO;
        for (_, idx, lots) in ledger.fifo.open_positions() {
            let inst = book.instrument(idx);
            let sim = self
                .universe
                .iter()
                .find(|s| s.spec.key == inst.key)
                .ok_or("instrument left the universe")?;
            let (bid, ask) = sim.bid_ask(self.config.seed, t);
            let mid = (bid + ask) / Decimal::TWO;
            let rate = self.fx_rate(inst.currency, acct, t).ok_or("no FX rate")?;
            let qty = lots.signed_quantity();
            if inst.asset_class.is_margin_settled() {
                for lot in lots.lots() {
                    let per_unit = if qty.is_sign_negative() {
                        lot.price - mid
                    } else {
                        mid - lot.price
                    };
                    equity += per_unit * lot.quantity * inst.multiplier * rate;
                }
            } else {
                equity += qty * mid * inst.multiplier * rate;
            }
            used += qty.abs() * mid * inst.multiplier * sim.spec.margin_rate * rate;
        }
        Ok((equity, used))
    }

    /// Fills an order in full at `price`, after the margin check; records the fill and
    /// moves the position's levels.
    fn execute(
        &self,
        tx: &Transaction<'_>,
        order: &mut SimOrder,
        inst: &SimInstrument,
        price: Decimal,
        t: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let fills = self.load_fills(tx)?;
        let held = Self::positions(&fills)
            .get(&inst.spec.key)
            .copied()
            .unwrap_or_default();
        let signed = match order.record.side {
            Side::Buy => Decimal::ONE,
            Side::Sell => Decimal::NEGATIVE_ONE,
        };
        let mut quantity = order.record.quantity;
        if order.reduce_only {
            let closable = if (held * signed).is_sign_negative() {
                held.abs()
            } else {
                Decimal::ZERO
            };
            if closable.is_zero() {
                return self.finish(
                    tx,
                    order,
                    OrderStatus::Cancelled,
                    Some("nothing left to close: the position is already flat".to_owned()),
                    t,
                );
            }
            quantity = quantity.min(closable);
        }
        // Only the part that opens or adds to a position needs margin.
        let after = held + signed * quantity;
        let opening = if after.is_zero() {
            Decimal::ZERO
        } else if held.is_zero() || held.is_sign_positive() == after.is_sign_positive() {
            (after.abs() - held.abs()).max(Decimal::ZERO)
        } else {
            after.abs()
        };
        if !opening.is_zero() {
            let Some(rate) = self.fx_rate(inst.spec.currency, self.config.currency, t) else {
                let reason = format!(
                    "no {}/{} rate to check margin",
                    inst.spec.currency.code(),
                    self.config.currency.code()
                );
                return self.finish(tx, order, OrderStatus::Rejected, Some(reason), t);
            };
            let commission = inst.commission(quantity, price);
            let required = (opening * price * inst.spec.multiplier * inst.spec.margin_rate
                + commission)
                * rate;
            match self.margin_state(tx, &fills, t) {
                Ok((equity, used)) if equity - used >= required => {}
                Ok((equity, used)) => {
                    let ccy = self.config.currency;
                    let reason = format!(
                        "insufficient {}: needs {} {}, free {} {}",
                        if inst.spec.margin_rate == Decimal::ONE {
                            "cash"
                        } else {
                            "margin"
                        },
                        ccy.round(required),
                        ccy.code(),
                        ccy.round(equity - used),
                        ccy.code()
                    );
                    return self.finish(tx, order, OrderStatus::Rejected, Some(reason), t);
                }
                Err(reason) => {
                    return self.finish(tx, order, OrderStatus::Rejected, Some(reason), t);
                }
            }
        }
        let seq = self.next_seq(tx)?;
        let commission = inst.commission(quantity, price);
        FillRow {
            fill_id: format!("{}-F{seq}", self.config.account),
            order_id: order.record.order_id.clone(),
            account: self.config.account.clone(),
            exchange: inst.spec.key.exchange.clone(),
            symbol: inst.spec.key.symbol.clone(),
            side: order.record.side.as_str().to_owned(),
            quantity: quantity.normalize().to_string(),
            price: price.normalize().to_string(),
            commission: commission.to_string(),
            commission_currency: inst.spec.currency.code().to_owned(),
            time: rfc3339(t),
            seq,
        }
        .insert(tx)
        .map_err(sql)?;
        order.record.filled_quantity = quantity;
        order.record.average_price = Some(price);
        // Levels live on the position: an order's SL/TP replace them; a flat position
        // has none, and a position flipped through zero keeps none of the old side's.
        let flipped = !held.is_zero() && !after.is_zero() && (held * after).is_sign_negative();
        if after.is_zero() || flipped {
            tx.execute(
                "DELETE FROM sim_brackets WHERE account = ?1 AND exchange = ?2 AND symbol = ?3",
                params![
                    self.config.account,
                    inst.spec.key.exchange,
                    inst.spec.key.symbol
                ],
            )
            .map_err(sql)?;
        }
        if !after.is_zero()
            && (order.record.stop_loss.is_some() || order.record.take_profit.is_some())
        {
            tx.execute(
                "INSERT INTO sim_brackets (account, exchange, symbol, stop_loss, take_profit)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (account, exchange, symbol) DO UPDATE SET
                     stop_loss = COALESCE(excluded.stop_loss, stop_loss),
                     take_profit = COALESCE(excluded.take_profit, take_profit)",
                params![
                    self.config.account,
                    inst.spec.key.exchange,
                    inst.spec.key.symbol,
                    order.record.stop_loss.map(|d| d.to_string()),
                    order.record.take_profit.map(|d| d.to_string())
                ],
            )
            .map_err(sql)?;
        }
        self.finish(tx, order, OrderStatus::Filled, None, t)
    }

    fn finish(
        &self,
        tx: &Transaction<'_>,
        order: &mut SimOrder,
        status: OrderStatus,
        reason: Option<String>,
        t: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        order.record.status = status;
        order.record.reason = reason;
        order.record.updated = t;
        tx.execute(
            "UPDATE sim_orders SET status = ?2, reason = ?3, filled_quantity = ?4,
                 average_price = ?5, triggered = ?6, updated = ?7
             WHERE order_id = ?1",
            params![
                order.record.order_id,
                status.as_str(),
                order.record.reason,
                order.record.filled_quantity.normalize().to_string(),
                order
                    .record
                    .average_price
                    .map(|p| p.normalize().to_string()),
                i64::from(order.triggered),
                rfc3339(t)
            ],
        )
        .map_err(sql)?;
        Ok(())
    }

    /// Works one open order against the quote at `t`. `placing` is true on the call that
    /// submits it (when ioc and fok orders that cannot fill are cancelled).
    fn work(
        &self,
        tx: &Transaction<'_>,
        order: &mut SimOrder,
        t: DateTime<Utc>,
        placing: bool,
    ) -> Result<(), StoreError> {
        if !order.record.status.is_open() || t < order.record.created {
            return Ok(());
        }
        let Some(inst) = self
            .universe
            .iter()
            .find(|i| i.spec.key == order.record.key)
        else {
            return self.finish(
                tx,
                order,
                OrderStatus::Cancelled,
                Some("the instrument is no longer traded".to_owned()),
                t,
            );
        };
        if order.record.time_in_force == TimeInForce::Day && t >= day_end(order.record.created) {
            return self.finish(
                tx,
                order,
                OrderStatus::Expired,
                Some("day order lapsed at the end of its UTC day".to_owned()),
                t,
            );
        }
        let (bid, ask) = inst.bid_ask(self.config.seed, t);
        let side = order.record.side;
        let touch = match side {
            Side::Buy => ask,
            Side::Sell => bid,
        };
        let crosses_up = |level: Decimal| match side {
            Side::Buy => touch >= level,
            Side::Sell => touch <= level,
        };
        let within_limit = |limit: Decimal| match side {
            Side::Buy => touch <= limit,
            Side::Sell => touch >= limit,
        };
        if order.record.order_type.needs_stop()
            && !order.triggered
            && order.record.stop_price.is_some_and(crosses_up)
        {
            order.triggered = true;
        }
        let fillable = match order.record.order_type {
            OrderType::Market => true,
            OrderType::Limit => order.record.limit_price.is_some_and(within_limit),
            OrderType::Stop => order.triggered,
            OrderType::StopLimit => {
                order.triggered && order.record.limit_price.is_some_and(within_limit)
            }
        };
        if fillable {
            return self.execute(tx, order, inst, touch, t);
        }
        if placing
            && matches!(
                order.record.time_in_force,
                TimeInForce::Ioc | TimeInForce::Fok
            )
        {
            return self.finish(
                tx,
                order,
                OrderStatus::Cancelled,
                Some(format!(
                    "{} order could not fill on arrival",
                    order.record.time_in_force.as_str()
                )),
                t,
            );
        }
        if order.triggered {
            self.finish(tx, order, OrderStatus::Accepted, None, t)?;
        }
        Ok(())
    }

    fn insert_order(&self, tx: &Transaction<'_>, order: &SimOrder) -> Result<(), StoreError> {
        OrderRow::of(order).insert(tx).map_err(sql)?;
        Ok(())
    }

    /// Checks the positions' stop-loss and take-profit levels against the quote at `t`,
    /// closing a position whose level the path crossed.
    fn check_levels(
        &self,
        tx: &Transaction<'_>,
        t: DateTime<Utc>,
        held: &mut Option<(i64, BTreeMap<tradedesk_core::InstrumentKey, Decimal>)>,
    ) -> Result<(), StoreError> {
        let levels: Vec<(String, String, Option<String>, Option<String>)> = {
            let mut stmt = tx
                .prepare_cached(
                    "SELECT exchange, symbol, stop_loss, take_profit FROM sim_brackets WHERE account = ?1",
                )
                .map_err(sql)?;
            let rows = stmt
                .query_map(params![self.config.account], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
                })
                .map_err(sql)?;
            rows.collect::<Result<_, _>>().map_err(sql)?
        };
        if levels.is_empty() {
            return Ok(());
        }
        // Positions only change with a fill: re-read them only when the count moved.
        let fills: i64 = tx
            .query_row(
                "SELECT COUNT(*) FROM sim_fills WHERE account = ?1",
                params![self.config.account],
                |r| r.get(0),
            )
            .map_err(sql)?;
        if held.as_ref().is_none_or(|(count, _)| *count != fills) {
            *held = Some((fills, Self::positions(&self.load_fills(tx)?)));
        }
        let positions = held.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
        for (exchange, symbol, sl, tp) in levels {
            let key = tradedesk_core::InstrumentKey::new(exchange, symbol);
            let Some(&held) = positions.get(&key) else {
                continue;
            };
            let Some(inst) = self.universe.iter().find(|i| i.spec.key == key) else {
                continue;
            };
            let (bid, ask) = inst.bid_ask(self.config.seed, t);
            let (sl, tp) = (opt_dec(sl.as_deref())?, opt_dec(tp.as_deref())?);
            let long = held.is_sign_positive();
            let exit = if long { bid } else { ask };
            let hit = if sl.is_some_and(|l| if long { exit <= l } else { exit >= l }) {
                Some("stop_loss")
            } else if tp.is_some_and(|l| if long { exit >= l } else { exit <= l }) {
                Some("take_profit")
            } else {
                None
            };
            if let Some(which) = hit {
                let seq = self.next_seq(tx)?;
                // The sim's own close of the whole position, at the market.
                let close = OrderRequest {
                    terms: OrderTerms {
                        time_in_force: TimeInForce::Gtc,
                        comment: Some(which.to_owned()),
                        ..OrderTerms::market(
                            self.config.account.clone(),
                            if long { Side::Sell } else { Side::Buy },
                            Mode::Paper,
                        )
                    },
                    key: key.clone(),
                    quantity: held.abs(),
                    // '#' never appears in a caller's id, so these cannot collide.
                    client_order_id: format!("#{which}-{seq}"),
                    reduce_only: true,
                };
                let mut order = SimOrder {
                    record: OrderRecord::accepted(
                        &close,
                        format!("{}-{seq}", self.config.account),
                        t,
                    ),
                    triggered: false,
                    reduce_only: close.reduce_only,
                };
                self.insert_order(tx, &order)?;
                self.execute(tx, &mut order, inst, exit, t)?;
            }
        }
        Ok(())
    }

    /// Walks the path from the last processed minute to `now`, working open orders and
    /// position levels at each minute.
    fn advance(&self, now: DateTime<Utc>) -> Result<(), StoreError> {
        // Most calls find nothing to work: answer them with a read, no write at all.
        let pending = self.read(|c| {
            c.query_row(
                "SELECT last_tick,
                        EXISTS (SELECT 1 FROM sim_orders WHERE account = ?1 AND status = 'accepted')
                         OR EXISTS (SELECT 1 FROM sim_brackets WHERE account = ?1)
                 FROM sim_accounts WHERE account = ?1",
                params![self.config.account],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)),
            )
            .optional()
            .map_err(sql)
        })?;
        match pending {
            None => return self.tx(|tx| self.ensure_account(tx, now)),
            Some((_, false)) => return Ok(()),
            Some((last, true)) if now <= parse_time(&last)? => return Ok(()),
            Some(_) => {}
        }
        self.tx(|tx| {
            let last: String = tx
                .query_row(
                    "SELECT last_tick FROM sim_accounts WHERE account = ?1",
                    params![self.config.account],
                    |r| r.get(0),
                )
                .map_err(sql)?;
            let last = parse_time(&last)?;
            if now <= last {
                return Ok(());
            }
            let mut t = last.max(now - MAX_CATCH_UP);
            let mut held = None;
            loop {
                t = (t + STEP).min(now);
                let mut open = self.load_orders(
                    tx,
                    "account = ?1 AND status = 'accepted' ORDER BY created, order_id",
                    &[&self.config.account],
                )?;
                for order in &mut open {
                    self.work(tx, order, t, false)?;
                }
                self.check_levels(tx, t, &mut held)?;
                if t >= now {
                    break;
                }
            }
            self.mark_tick(tx, now)?;
            self.writes.fetch_add(1, Ordering::Relaxed);
            Ok(())
        })
    }

    /// Records that the path has been worked up to `now`. Every write that adds work
    /// (an order, a level) calls it, so a later catch-up never works a minute before
    /// the work existed.
    fn mark_tick(&self, tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<(), StoreError> {
        tx.execute(
            "UPDATE sim_accounts SET last_tick = ?2 WHERE account = ?1",
            params![self.config.account, rfc3339(now)],
        )
        .map_err(sql)?;
        Ok(())
    }

    fn caught_up(&self) -> Result<DateTime<Utc>, BrokerError> {
        let now = self.clock.now();
        self.advance(now).map_err(|e| self.err(&e))?;
        Ok(now)
    }

    /// Mid-price bars of the process.
    #[allow(clippy::float_arithmetic, clippy::cast_precision_loss)]
    fn make_bars(
        &self,
        inst: &SimInstrument,
        interval: Interval,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<Vec<Bar>, BrokerError> {
        let len = interval.seconds();
        let first = start.timestamp().div_euclid(len) * len
            + if start.timestamp().rem_euclid(len) == 0 {
                0
            } else {
                len
            };
        // Only completed bars: one still forming would change under the caller.
        let last_start = end.min(now - Duration::seconds(len)).timestamp();
        let count = if last_start < first {
            0
        } else {
            (last_start - first) / len + 1
        };
        if count > MAX_BARS {
            return Err(BrokerError::InvalidRequest {
                account: self.config.account.clone(),
                reason: format!(
                    "{count} {} bars in that range; the sim serves at most {MAX_BARS} per request",
                    interval.as_str()
                ),
            });
        }
        let samples = (len / 60).clamp(4, 96);
        let mut bars = Vec::new();
        let mut s = first;
        while s <= last_start {
            let at = |secs: i64| DateTime::from_timestamp(secs, 0).unwrap_or(now);
            let open = inst.mid_f64(self.config.seed, at(s));
            let close = inst.mid_f64(self.config.seed, at(s + len));
            let (mut high, mut low) = (open.max(close), open.min(close));
            for k in 1..samples {
                let p = inst.mid_f64(self.config.seed, at(s + len * k / samples));
                high = high.max(p);
                low = low.min(p);
            }
            let dp = inst.spec.tick.scale();
            let round = |x: f64| {
                let m = 10_f64.powi(i32::try_from(dp).unwrap_or(2));
                (x * m).round() / m
            };
            let volume_seed = market_volume(self.config.seed, s);
            let time = at(s);
            bars.push(Bar {
                time: if interval == Interval::D1 {
                    time.date_naive().to_string()
                } else {
                    time.to_rfc3339_opts(SecondsFormat::Secs, true)
                },
                instant: time,
                open: round(open),
                high: round(high),
                low: round(low),
                close: round(close),
                volume: Some((volume_seed * len as f64 / 60.0).round()),
            });
            s += len;
        }
        Ok(bars)
    }
}

#[allow(clippy::float_arithmetic, clippy::cast_precision_loss)]
fn market_volume(seed: u64, s: i64) -> f64 {
    let h = (seed ^ s.cast_unsigned()).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    1_000.0 + ((h >> 40) as f64 % 9_000.0)
}

#[async_trait]
impl Broker for SimBroker {
    fn accounts(&self) -> Vec<Account> {
        vec![self.account()]
    }

    fn markets(&self, _account: &str) -> Vec<crate::calendar::Market> {
        MARKETS.to_vec()
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        let now = self.caught_up()?;
        self.read(|conn| self.book_at(conn, now))
            .map(Arc::new)
            .map_err(|e| self.err(&e))
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let probe = self.read(|conn| {
            conn.query_row(
                "SELECT COUNT(*) FROM sim_orders WHERE account = ?1",
                params![self.config.account],
                |r| r.get::<_, i64>(0),
            )
            .map_err(sql)
        });
        let (status, detail, hint) = match probe {
            Ok(n) => (
                HealthStatus::Ok,
                format!("embedded paper exchange; {n} order(s) on record"),
                None,
            ),
            Err(e) => (
                HealthStatus::Down,
                e.to_string(),
                Some("check that the state directory is writable".to_owned()),
            ),
        };
        vec![AccountHealth {
            account: self.config.account.clone(),
            broker: "sim".to_owned(),
            mode: Mode::Paper,
            status,
            // In-process, like a book: there is no gateway to time.
            latency_ms: Some(0),
            detail,
            hint,
        }]
    }

    fn generation(&self) -> u64 {
        let minute = u64::try_from(self.clock.now().timestamp() / 60).unwrap_or(0);
        let version = self
            .store
            .read(|c| {
                c.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
                    .map_err(sql)
            })
            .unwrap_or(0);
        minute
            .wrapping_mul(1_000_003)
            .wrapping_add(self.writes.load(Ordering::Relaxed).wrapping_mul(7919))
            .wrapping_add(version.cast_unsigned())
    }

    fn trading_modes(&self, account: &str) -> Vec<Mode> {
        if account == self.config.account {
            vec![Mode::Paper]
        } else {
            Vec::new()
        }
    }

    async fn instrument(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<TradableInstrument, BrokerError> {
        self.check_account(account)?;
        let inst = self.find(symbol)?;
        let mut spec = inst.spec.clone();
        // Bursa's tick depends on the price band the stock trades in now.
        let (bid, ask) = inst.bid_ask(self.config.seed, self.clock.now());
        spec.tick = inst.tick_at((bid + ask) / Decimal::TWO);
        Ok(spec)
    }

    fn estimate_commission(
        &self,
        _account: &str,
        instrument: &TradableInstrument,
        quantity: Decimal,
        price: Decimal,
    ) -> Option<Decimal> {
        self.universe
            .iter()
            .find(|i| i.spec.key == instrument.key)
            // A price written on an order can be absurd: no estimate rather than overflow.
            .filter(|i| {
                quantity
                    .checked_mul(price)
                    .and_then(|v| v.checked_mul(i.spec.multiplier))
                    .and_then(|v| v.checked_mul(Decimal::from(100)))
                    .is_some()
            })
            .map(|i| i.commission(quantity, price))
    }

    async fn quote(&self, account: &str, symbol: &str) -> Result<Quote, BrokerError> {
        self.check_account(account)?;
        let inst = self.find(symbol)?;
        Ok(self.quote_of(inst, self.clock.now()))
    }

    /// The sim's perps: the mark is the mid, the maximum leverage 1 / margin rate.
    async fn perp_market(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<crate::PerpMark, BrokerError> {
        self.check_account(account)?;
        let inst = self.find(symbol)?;
        if inst.spec.asset_class != AssetClass::Perp {
            return Err(BrokerError::UnknownSymbol {
                account: account.to_owned(),
                symbol: inst.spec.key.qualified(),
                known: "perpetuals such as PERP:BTC-PERP (this symbol is not a perpetual)"
                    .to_owned(),
            });
        }
        let (mark, max_leverage) = self.perp_mark_of(inst, self.clock.now());
        Ok(crate::PerpMark {
            market: inst.spec.key.qualified(),
            mark,
            max_leverage,
        })
    }

    /// The sim's one perp, BTC-PERP: its mark is the mid; it has no oracle and no other
    /// traders (so no open interest), and charges no funding.
    async fn perp_markets(&self, account: &str) -> Result<crate::PerpListings, BrokerError> {
        self.check_account(account)?;
        let now = self.clock.now();
        let markets = self
            .universe
            .iter()
            .filter(|i| i.spec.asset_class == AssetClass::Perp)
            .map(|inst| {
                let (mark, max_leverage) = self.perp_mark_of(inst, now);
                crate::PerpListing {
                    market: inst.spec.key.qualified(),
                    name: inst.spec.key.symbol.clone(),
                    mark,
                    oracle: None,
                    funding_rate: Some(Decimal::ZERO),
                    funding_period_hours: None,
                    open_interest: None,
                    max_leverage,
                    size_step: inst.spec.lot_step,
                    open: true,
                }
            })
            .collect();
        Ok(crate::PerpListings {
            markets,
            notes: vec![format!(
                "{account}: the sim's perps charge no funding (rate 0) and have no oracle price and no open interest (it has no other traders): those are left out"
            )],
        })
    }

    /// The sim's tape of a market: a deterministic print every few seconds at the bid or
    /// the ask of its price process (see `SimInstrument::tape`).
    async fn recent_trades(&self, account: &str, symbol: &str) -> Result<crate::Tape, BrokerError> {
        self.check_account(account)?;
        let inst = self.find(symbol)?;
        let trades = inst
            .tape(self.config.seed, self.clock.now(), 100)
            .into_iter()
            .map(|p| {
                let (bid, ask) = inst.bid_ask(self.config.seed, p.time);
                crate::TapeTrade {
                    price: if p.buy { ask } else { bid },
                    size: inst.spec.lot_step * Decimal::from(p.lots),
                    side: if p.buy {
                        tradedesk_core::Side::Buy
                    } else {
                        tradedesk_core::Side::Sell
                    },
                    time: p.time,
                    id: None,
                }
            })
            .collect();
        Ok(crate::Tape {
            market: inst.spec.key.qualified(),
            trades,
            notes: vec![format!(
                "{account}: the sim's tape is simulated: a print every {} seconds at its bid or ask, like its prices",
                market::TAPE_EVERY_SECONDS
            )],
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
        self.check_account(account)?;
        let inst = self.find(symbol)?;
        self.make_bars(inst, interval, start, end, self.clock.now())
    }

    async fn orders(
        &self,
        account: Option<&str>,
        filter: OrderFilter,
    ) -> Result<Vec<OrderRecord>, BrokerError> {
        if let Some(a) = account {
            self.check_account(a)?;
        }
        self.caught_up()?;
        let clause = match filter {
            OrderFilter::Open => "account = ?1 AND status = 'accepted'",
            OrderFilter::Closed => "account = ?1 AND status != 'accepted'",
            OrderFilter::All => "account = ?1",
        };
        self.read(|c| {
            self.load_orders(
                c,
                &format!("{clause} ORDER BY created DESC, order_id DESC"),
                &[&self.config.account],
            )
        })
        .map(|orders| orders.into_iter().map(|o| o.record).collect())
        .map_err(|e| self.err(&e))
    }

    async fn find_order(
        &self,
        account: &str,
        client_order_id: &str,
    ) -> Result<Option<OrderRecord>, BrokerError> {
        self.check_account(account)?;
        self.caught_up()?;
        self.read(|c| {
            self.load_orders(
                c,
                "account = ?1 AND client_order_id = ?2",
                &[&self.config.account, &client_order_id],
            )
        })
        .map(|mut orders| orders.pop().map(|o| o.record))
        .map_err(|e| self.err(&e))
    }

    async fn place(&self, request: &OrderRequest) -> Result<Placed, BrokerError> {
        self.check_account(&request.terms.account)?;
        let inst = self.find(&request.key.qualified())?;
        let now = self.caught_up()?;
        let order = self
            .store
            .tx(|tx| {
                self.ensure_account(tx, now)?;
                let existing = self.load_orders(
                    tx,
                    "account = ?1 AND client_order_id = ?2",
                    &[&self.config.account, &request.client_order_id],
                )?;
                if let Some(found) = existing.into_iter().next() {
                    return Ok(Err(found.record));
                }
                let seq = self.next_seq(tx)?;
                let mut order = SimOrder {
                    // On the sim's own spelling of the instrument; the sim trades paper.
                    record: OrderRecord {
                        key: inst.spec.key.clone(),
                        mode: Mode::Paper,
                        ..OrderRecord::accepted(
                            request,
                            format!("{}-{seq}", self.config.account),
                            now,
                        )
                    },
                    triggered: false,
                    reduce_only: request.reduce_only,
                };
                self.mark_tick(tx, now)?;
                self.insert_order(tx, &order)?;
                self.work(tx, &mut order, now, true)?;
                Ok::<_, StoreError>(Ok(order.record))
            })
            .map_err(|e| self.err(&e))?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        let order = order.map_err(|existing| BrokerError::Rejected {
            account: request.terms.account.clone(),
            reason: format!(
                "client order id already used by order {}",
                existing.order_id
            ),
            order_id: Some(existing.order_id),
        })?;
        let message = match order.status {
            OrderStatus::Filled => format!(
                "filled {} {} at {}",
                order.filled_quantity.normalize(),
                order.key.symbol,
                order.average_price.unwrap_or_default()
            ),
            OrderStatus::Accepted => "accepted: working at the paper exchange".to_owned(),
            OrderStatus::Rejected => {
                return Err(BrokerError::Rejected {
                    account: request.terms.account.clone(),
                    reason: order.reason.unwrap_or_else(|| "rejected".to_owned()),
                    order_id: Some(order.order_id),
                });
            }
            OrderStatus::Cancelled | OrderStatus::Expired => {
                return Err(BrokerError::Rejected {
                    account: request.terms.account.clone(),
                    reason: order
                        .reason
                        .unwrap_or_else(|| "cancelled on arrival".to_owned()),
                    order_id: Some(order.order_id),
                });
            }
        };
        Ok(Placed { order, message })
    }

    async fn cancel(
        &self,
        account: &str,
        reference: &OrderRef,
    ) -> Result<(OrderRecord, bool), BrokerError> {
        self.check_account(account)?;
        let now = self.caught_up()?;
        let (clause, value) = match reference {
            OrderRef::OrderId(id) => ("account = ?1 AND order_id = ?2", id),
            OrderRef::ClientOrderId(id) => ("account = ?1 AND client_order_id = ?2", id),
        };
        let result = self
            .store
            .tx(|tx| {
                let Some(mut order) = self
                    .load_orders(tx, clause, &[&self.config.account, value])?
                    .pop()
                else {
                    return Ok(Err(()));
                };
                if !order.record.status.is_open() {
                    return Ok(Ok((order.record, false)));
                }
                self.finish(
                    tx,
                    &mut order,
                    OrderStatus::Cancelled,
                    Some("cancelled by request".to_owned()),
                    now,
                )?;
                Ok::<_, StoreError>(Ok((order.record, true)))
            })
            .map_err(|e| self.err(&e))?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        result.map_err(|()| BrokerError::UnknownOrder {
            account: account.to_owned(),
            reference: tradedesk_core::error::quote(value),
        })
    }

    async fn position_levels(
        &self,
        account: &str,
        symbol: &str,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        self.check_account(account)?;
        self.levels(symbol)
    }

    async fn modify_position(
        &self,
        account: &str,
        symbol: &str,
        stop_loss: Option<Decimal>,
        take_profit: Option<Decimal>,
    ) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        self.check_account(account)?;
        let inst = self.find(symbol)?;
        self.caught_up()?;
        let result = self
            .store
            .tx(|tx| {
                let held = Self::positions(&self.load_fills(tx)?)
                    .get(&inst.spec.key)
                    .copied()
                    .unwrap_or_default();
                if held.is_zero() {
                    return Ok(None);
                }
                self.mark_tick(tx, self.clock.now())?;
                let levels = tx
                    .query_row(
                        "INSERT INTO sim_brackets (account, exchange, symbol, stop_loss, take_profit)
                         VALUES (?1, ?2, ?3, ?4, ?5)
                         ON CONFLICT (account, exchange, symbol) DO UPDATE SET
                             stop_loss = COALESCE(excluded.stop_loss, stop_loss),
                             take_profit = COALESCE(excluded.take_profit, take_profit)
                         RETURNING stop_loss, take_profit",
                        params![
                            self.config.account,
                            inst.spec.key.exchange,
                            inst.spec.key.symbol,
                            stop_loss.map(|d| d.to_string()),
                            take_profit.map(|d| d.to_string())
                        ],
                        |r| Ok((r.get::<_, Option<String>>(0)?, r.get::<_, Option<String>>(1)?)),
                    )
                    .map_err(sql)?;
                Ok::<_, StoreError>(Some((opt_dec(levels.0.as_deref())?, opt_dec(levels.1.as_deref())?)))
            })
            .map_err(|e| self.err(&e))?;
        self.writes.fetch_add(1, Ordering::Relaxed);
        result.ok_or_else(|| BrokerError::Rejected {
            account: account.to_owned(),
            reason: format!("no open position in {}", inst.spec.key),
            order_id: None,
        })
    }

    /// Every symbol from the sim's own price process (`snapshots.rs`).
    async fn market_snapshots(
        &self,
        account: &str,
        symbols: &[String],
    ) -> Result<crate::MarketSnapshots, BrokerError> {
        self.read_snapshots(account, symbols)
    }

    /// A simulated chain from the sim's own quote (`chain.rs`).
    async fn option_chain(
        &self,
        account: &str,
        query: &crate::option_chain::ChainQuery,
    ) -> Result<crate::option_chain::OptionChain, BrokerError> {
        self.read_option_chain(account, query)
    }

    /// The sim's instrument table (`search`).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        self.search(account, query)
    }

    async fn news(
        &self,
        account: &str,
        query: &crate::news::NewsQuery,
    ) -> Result<crate::news::NewsPage, BrokerError> {
        self.check_account(account)?;
        Ok(news::demo_news(account, self.clock.now(), query))
    }
}

/// Open position levels (stop-loss, take-profit) per instrument: for `get_positions`
/// style reporting and the tools' checks.
impl SimBroker {
    /// The levels on a position, if any.
    ///
    /// # Errors
    /// The store failed.
    pub fn levels(&self, symbol: &str) -> Result<(Option<Decimal>, Option<Decimal>), BrokerError> {
        let inst = self.find(symbol)?;
        self.read(|c| {
            let row: Option<(Option<String>, Option<String>)> = c
                .query_row(
                    "SELECT stop_loss, take_profit FROM sim_brackets
                         WHERE account = ?1 AND exchange = ?2 AND symbol = ?3",
                    params![
                        self.config.account,
                        inst.spec.key.exchange,
                        inst.spec.key.symbol
                    ],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()
                .map_err(sql)?;
            match row {
                Some((sl, tp)) => Ok((opt_dec(sl.as_deref())?, opt_dec(tp.as_deref())?)),
                None => Ok((None, None)),
            }
        })
        .map_err(|e: StoreError| self.err(&e))
    }

    /// The signed quantity held in an instrument.
    ///
    /// # Errors
    /// The store failed.
    pub fn position(&self, symbol: &str) -> Result<Decimal, BrokerError> {
        let inst = self.find(symbol)?;
        self.read(|c| self.load_fills(c))
            .map(|fills| {
                Self::positions(&fills)
                    .get(&inst.spec.key)
                    .copied()
                    .unwrap_or_default()
            })
            .map_err(|e| self.err(&e))
    }
}

/// Whether an asset class is quoted in pips (FX and metals).
pub fn quoted_in_pips(class: AssetClass) -> bool {
    matches!(class, AssetClass::Fx | AssetClass::Cfd)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use chrono::TimeZone;
    use rust_decimal_macros::dec;

    use super::*;
    use crate::demo::demo_book;

    fn sim() -> (SimBroker, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(
            Utc.with_ymd_and_hms(2026, 11, 30, 15, 0, 0).unwrap(),
        ));
        let broker = SimBroker::new(
            SimConfig::new("SIM"),
            &demo_book().unwrap(),
            Arc::new(Store::in_memory().unwrap()),
            Arc::clone(&clock) as Arc<dyn Clock>,
        );
        (broker, clock)
    }

    fn request(id: &str, symbol: &str, side: Side, quantity: Decimal) -> OrderRequest {
        let (exchange, bare) = symbol.split_once(':').unwrap();
        OrderRequest {
            terms: tradedesk_core::OrderTerms {
                time_in_force: TimeInForce::Gtc,
                ..tradedesk_core::OrderTerms::market("SIM", side, Mode::Paper)
            },
            key: tradedesk_core::InstrumentKey::new(exchange, bare),
            quantity,
            client_order_id: id.into(),
            reduce_only: false,
        }
    }

    /// Moves the clock an hour at a time until the order leaves `accepted`.
    async fn until_done(sim: &SimBroker, clock: &ManualClock, id: &str) -> OrderRecord {
        for _ in 0..24 * 60 {
            clock.advance(Duration::hours(1));
            let o = sim.find_order("SIM", id).await.unwrap().unwrap();
            if o.status != OrderStatus::Accepted {
                return o;
            }
        }
        panic!("{id} never left accepted");
    }

    #[tokio::test]
    async fn stops_trigger_at_the_touch_and_stop_limits_then_wait_for_their_limit() {
        let (sim, clock) = sim();
        let q = sim.quote("SIM", "EURUSD").await.unwrap();
        // TC1: a buy stop 15 pips over the ask fills at the first ask at or over it.
        let mut stop = request("stop-1", "FX:EURUSD", Side::Buy, dec!(0.1));
        stop.terms.order_type = OrderType::Stop;
        stop.terms.stop_price = Some(q.ask + dec!(0.0015));
        let placed = sim.place(&stop).await.unwrap();
        assert_eq!(placed.order.status, OrderStatus::Accepted);
        let done = until_done(&sim, &clock, "stop-1").await;
        assert_eq!(done.status, OrderStatus::Filled);
        assert!(done.average_price.unwrap() >= q.ask + dec!(0.0015));
        // TC2: a sell stop-limit: triggered at the stop, filled only at the limit or better.
        let q = sim.quote("SIM", "EURUSD").await.unwrap();
        let mut sl = request("stoplimit-1", "FX:EURUSD", Side::Sell, dec!(0.1));
        sl.terms.order_type = OrderType::StopLimit;
        sl.terms.stop_price = Some(q.bid - dec!(0.0010));
        sl.terms.limit_price = Some(q.bid - dec!(0.0012));
        sim.place(&sl).await.unwrap();
        let done = until_done(&sim, &clock, "stoplimit-1").await;
        assert_eq!(done.status, OrderStatus::Filled);
        assert!(done.average_price.unwrap() >= q.bid - dec!(0.0012));
        // TC3: a fok limit that cannot fill now is cancelled, never left working.
        let mut fok = request("fok-1", "FX:EURUSD", Side::Buy, dec!(0.1));
        fok.terms.order_type = OrderType::Limit;
        fok.terms.time_in_force = TimeInForce::Fok;
        fok.terms.limit_price = Some(dec!(0.5));
        let err = sim.place(&fok).await.unwrap_err();
        assert!(
            matches!(
                err,
                BrokerError::Rejected {
                    order_id: Some(_),
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[tokio::test]
    async fn a_flip_drops_the_old_sides_levels() {
        let (sim, _clock) = sim();
        let q = sim.quote("SIM", "NASDAQ:AAPL").await.unwrap();
        let mut long = request("long", "NASDAQ:AAPL", Side::Buy, dec!(10));
        long.terms.take_profit = Some((q.ask + dec!(20)).round());
        sim.place(&long).await.unwrap();
        assert!(sim.levels("AAPL").unwrap().1.is_some());
        let mut flip = request("flip", "NASDAQ:AAPL", Side::Sell, dec!(20));
        flip.terms.stop_loss = Some((q.bid + dec!(30)).round());
        sim.place(&flip).await.unwrap();
        let (sl, tp) = sim.levels("AAPL").unwrap();
        assert_eq!((sl, tp), (flip.terms.stop_loss, None));
        assert_eq!(sim.position("AAPL").unwrap(), dec!(-10));
    }

    #[tokio::test]
    async fn the_sims_own_orders_never_take_a_callers_id() {
        let (sim, clock) = sim();
        let q = sim.quote("SIM", "NASDAQ:AAPL").await.unwrap();
        // A caller may use any id of letters, digits and -_.: — the sim's own use '#'.
        sim.place(&request("take_profit-3", "NASDAQ:AAPL", Side::Buy, dec!(1)))
            .await
            .unwrap();
        let mut buy = request("b", "NASDAQ:AAPL", Side::Buy, dec!(1));
        buy.terms.take_profit = Some(q.ask + dec!(0.05));
        buy.terms.stop_loss = Some(q.ask - dec!(0.05));
        sim.place(&buy).await.unwrap();
        for _ in 0..48 {
            clock.advance(Duration::hours(1));
            sim.orders(Some("SIM"), OrderFilter::Open).await.unwrap();
            if sim.position("AAPL").unwrap().is_zero() {
                break;
            }
        }
        assert!(sim.position("AAPL").unwrap().is_zero());
        let all = sim.orders(Some("SIM"), OrderFilter::All).await.unwrap();
        assert!(
            all.iter().any(|o| o.client_order_id.starts_with('#')),
            "{all:?}"
        );
    }

    #[tokio::test]
    async fn a_resting_order_is_never_worked_at_a_minute_before_it_existed() {
        let (sim, clock) = sim();
        // The account is first touched at 15:00; the order arrives three days later.
        sim.quote("SIM", "EURUSD").await.unwrap();
        sim.orders(Some("SIM"), OrderFilter::All).await.unwrap();
        clock.advance(Duration::days(3));
        let q = sim.quote("SIM", "EURUSD").await.unwrap();
        let mut limit = request("late", "FX:EURUSD", Side::Buy, dec!(0.1));
        limit.terms.order_type = OrderType::Limit;
        limit.terms.limit_price = Some(q.ask - dec!(0.0005));
        let placed = sim.place(&limit).await.unwrap();
        clock.advance(Duration::minutes(1));
        let o = sim.find_order("SIM", "late").await.unwrap().unwrap();
        assert!(o.updated >= placed.order.created, "{o:?}");
    }
}
