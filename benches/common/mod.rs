//! A generated history for the benchmarks: `n` fills over 100 instruments (80 in USD, 20
//! in MYR with daily FX rates), two accounts, a deterministic random walk that keeps each
//! position within bounds, so open lots stay few while the history grows.

use chrono::{DateTime, Duration, FixedOffset, NaiveDate};
use rust_decimal::Decimal;
use tradedesk_core::{
    Account, AssetClass, Book, CashEntry, CashKind, Currency, Fill, FxQuote, FxTable, Instrument,
    InstrumentKey, Marks, Mode, Side,
};

pub(crate) const INSTRUMENTS: u32 = 100;

/// A small deterministic generator (64-bit LCG, high bits).
pub(crate) struct Lcg(u64);

impl Lcg {
    pub(crate) fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        u32::try_from(self.0 >> 33).unwrap_or(0)
    }
}

pub(crate) fn generate(n: usize) -> Book {
    let mut rng = Lcg(42);
    let accounts = vec![
        Account {
            id: "US".into(),
            broker: "ibkr".into(),
            currency: Currency::USD,
            name: None,
            mode: Mode::Book,
        },
        Account {
            id: "MY".into(),
            broker: "moomoo".into(),
            currency: Currency::MYR,
            name: None,
            mode: Mode::Book,
        },
    ];
    let instruments: Vec<Instrument> = (0..INSTRUMENTS)
        .map(|i| Instrument {
            key: InstrumentKey::new(if i < 80 { "NASDAQ" } else { "BURSA" }, format!("S{i:03}")),
            currency: if i < 80 { Currency::USD } else { Currency::MYR },
            asset_class: if i % 10 == 9 {
                AssetClass::Future
            } else {
                AssetClass::Equity
            },
            multiplier: if i % 10 == 9 {
                Decimal::from(5)
            } else {
                Decimal::ONE
            },
            name: None,
            sector: Some("Financials"),
            country: None,
        })
        .collect();
    let start: DateTime<FixedOffset> =
        DateTime::parse_from_rfc3339("2022-01-03T09:30:00-05:00").unwrap_or_default();
    let mut position = vec![0i64; INSTRUMENTS as usize];
    let mut price = vec![10_000i64; INSTRUMENTS as usize]; // cents
    let mut fills = Vec::with_capacity(n);
    for k in 0..n {
        let i = rng.next() % INSTRUMENTS;
        let slot = i as usize;
        let qty = i64::from(rng.next() % 100 + 1);
        // Lean against the position so it stays within +-1000.
        let buy = if position[slot] > 1000 {
            false
        } else if position[slot] < -1000 {
            true
        } else {
            rng.next().is_multiple_of(2)
        };
        position[slot] += if buy { qty } else { -qty };
        price[slot] = (price[slot] + i64::from(rng.next() % 201) - 100).max(100);
        let time = start + Duration::seconds(i64::try_from(k).unwrap_or(0) * 120);
        fills.push(Fill {
            id: format!("F{k}").into(),
            account: u32::from(i >= 80),
            instrument: i,
            side: if buy { Side::Buy } else { Side::Sell },
            quantity: Decimal::from(qty),
            price: Decimal::new(price[slot], 2),
            commission: Decimal::new(100, 2),
            commission_currency: instruments[slot].currency,
            commission_known: true,
            trade_date: time.date_naive(),
            time,
            seq: u32::try_from(k).unwrap_or(u32::MAX),
            kind: tradedesk_core::FillKind::Trade,
            position: 0,
        });
    }
    let first = start.date_naive();
    let last = fills.last().map_or(first, |f| f.trade_date);
    let days = (last - first).num_days() + 1;
    let fx = (0..days).map(|d| FxQuote {
        base: Currency::USD,
        quote: Currency::MYR,
        rate: Decimal::new(44_000 + (d % 500), 4),
        date: first + Duration::days(d),
    });
    let marks = (0..INSTRUMENTS).map(|i| (i, last, Decimal::new(price[i as usize], 2)));
    let cash = vec![
        CashEntry {
            account: 0,
            kind: CashKind::Deposit,
            amount: Decimal::from(10_000_000),
            currency: Currency::USD,
            time: start,
        },
        CashEntry {
            account: 1,
            kind: CashKind::Deposit,
            amount: Decimal::from(10_000_000),
            currency: Currency::MYR,
            time: start,
        },
    ];
    Book {
        base_currency: Currency::USD,
        as_of: last,
        accounts,
        marks: Marks::new(instruments.len(), marks),
        instruments,
        fills,
        cash,
        fx: FxTable::new(Currency::USD, fx),
        reported_positions: Vec::new(),
        corporate_actions: Vec::new(),
        action_fills: Vec::new(),
        notes: Vec::new(),
        unknown_specs: Vec::new(),
        tickets: Vec::new(),
        margin_modes: Vec::new(),
    }
}

/// The whole history as one range.
pub(crate) fn full_range(book: &Book) -> (NaiveDate, NaiveDate) {
    (book.fills[0].trade_date, book.as_of)
}

/// The book as `tradedesk-book/1` JSON, for the loading benchmark.
#[allow(dead_code)] // the memory bench does not load JSON
pub(crate) fn to_json(book: &Book) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(book.fills.len() * 220);
    s.push_str(r#"{"format":"tradedesk-book/1","base_currency":"USD","as_of":""#);
    let _ = write!(s, "{}", book.as_of);
    s.push_str(r#"","accounts":[{"id":"US","broker":"ibkr","currency":"USD"},{"id":"MY","broker":"moomoo","currency":"MYR"}],"instruments":["#);
    for (k, i) in book.instruments.iter().enumerate() {
        let _ = write!(
            s,
            r#"{}{{"exchange":"{}","symbol":"{}","currency":"{}","asset_class":"{}","multiplier":"{}"}}"#,
            if k > 0 { "," } else { "" },
            i.key.exchange,
            i.key.symbol,
            i.currency,
            i.asset_class.as_str(),
            i.multiplier
        );
    }
    s.push_str(r#"],"fills":["#);
    for (k, f) in book.fills.iter().enumerate() {
        let inst = &book.instruments[f.instrument as usize];
        let _ = write!(
            s,
            r#"{}{{"id":"{}","account":"{}","exchange":"{}","symbol":"{}","side":"{}","quantity":"{}","price":"{}","commission":"{}","time":"{}"}}"#,
            if k > 0 { "," } else { "" },
            f.id,
            book.accounts[f.account as usize].id,
            inst.key.exchange,
            inst.key.symbol,
            f.side.as_str(),
            f.quantity,
            f.price,
            f.commission,
            f.time.to_rfc3339()
        );
    }
    s.push_str("]}");
    s
}

/// Adds `count` splits to the book, spread over its history: 2-for-1 and 1-for-2 in turn
/// on the US account's stocks, so prices and quantities stay in range.
#[allow(dead_code)]
pub(crate) fn with_splits(book: &mut Book, count: u32) {
    use tradedesk_core::{ActionKind, CorporateAction};
    let (first, last) = full_range(book);
    let days = (last - first).num_days().max(1);
    let stocks: Vec<u32> = (0..80).filter(|i| i % 10 != 9).collect();
    for k in 0..count {
        let instrument = stocks[k as usize % stocks.len()];
        let round = k as usize / stocks.len();
        let (new, old) = if round.is_multiple_of(2) {
            (2, 1)
        } else {
            (1, 2)
        };
        book.corporate_actions.push(CorporateAction {
            id: format!("split-{k}"),
            account: 0,
            instrument,
            date: first + Duration::days(i64::from(k) * days / i64::from(count.max(1))),
            kind: ActionKind::Split {
                new: Decimal::from(new),
                old: Decimal::from(old),
            },
        });
    }
    book.corporate_actions.sort_by_key(|a| a.date);
    book.action_fills = vec![None; book.corporate_actions.len()];
}
