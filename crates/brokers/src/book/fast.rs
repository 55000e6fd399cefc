//! The typed first pass over a book file (docs/methodology/book-format.md).
//!
//! serde reads the text straight into rows of borrowed strings, and each fill is checked
//! and made into the book's fill as it is read: no JSON tree of the fills, no string
//! allocated but the fill's own id, accounts and instruments interned as the fills name
//! them and resolved once at the end. The rules are the validator's own functions
//! (`super::decimal_rule`, `super::side_rule`, ...); the small sections that refer to
//! the rest (accounts, instruments, reported and opening positions, corporate actions)
//! go through the validator itself. The pass names nothing: at the first broken rule,
//! or at a form it leaves to the validator (a key given twice, an escaped symbol), it
//! gives up and `super::parse_book` runs the path-naming validator, which is the
//! reference. A book this pass accepts is one the validator accepts, and the same book.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::marker::PhantomData;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json_borrow::Value;
use tradedesk_core::{
    AccountIdx, Book, BookParts, CashEntry, Currency, Fill, FillKind, FxQuote, InstrumentIdx,
};

use super::{
    FORMAT, NON_NEGATIVE, POSITIVE, Refs, Validator, cash_kind_rule, cash_sign_rule,
    commission_known_rule, currency_rule, date_rule, decimal_rule, fill_id_rule, opening_note,
    side_rule, text_rule, time_rule,
};

/// The book when every rule holds; `None` at the first fault.
pub(super) fn book(text: &str) -> Option<Book> {
    let Obj(top) = serde_json::from_str::<Obj<Top<'_>>>(text).ok()?;
    if top.format != FORMAT {
        return None;
    }
    let base_currency = currency_rule(text_rule(top.base_currency).ok()?).ok()?;
    let as_of = date_rule("as_of", text_rule(top.as_of).ok()?).ok()?;
    let mut v = Validator::default();
    let accounts = v.accounts(&top.accounts.0);
    let (instruments, unknown_specs) = v.instruments(&top.instruments.0);
    if !v.issues.is_empty() {
        return None;
    }
    let index = super::Index::new(&accounts, &instruments);
    let refs = index.refs(&accounts, &instruments);
    let mut fills = top.fills.resolve(&refs)?;
    let cash = cash(top.cash.unwrap_or_default(), &refs)?;
    let marks = marks(top.marks.unwrap_or_default(), &refs)?;
    let fx_rates = fx_rates(top.fx_rates.unwrap_or_default())?;
    let reported_positions = v.reported(slice(top.reported_positions.as_ref()), &refs);
    let opening = v.opening_positions(slice(top.opening_positions.as_ref()), &refs, &marks);
    let notes: Vec<String> = opening_note(&opening).into_iter().collect();
    fills.extend(opening);
    let corporate_actions =
        v.corporate_actions(slice(top.corporate_actions.as_ref()), &refs, &fills);
    if !v.issues.is_empty() {
        return None;
    }
    drop(refs);
    drop(index);
    Some(Book::assemble(BookParts {
        base_currency,
        as_of,
        accounts,
        instruments,
        fills,
        cash,
        marks,
        fx_rates,
        reported_positions,
        corporate_actions,
        notes,
        unknown_specs,
        tickets: Vec::new(),
        margin_modes: Vec::new(),
    }))
}

fn slice<'s, 'a>(items: Option<&'s Items<'a>>) -> &'s [Value<'a>] {
    items.map_or(&[], |i| i.0.as_slice())
}

/// The top level: every section the format has, and no other key.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Top<'a> {
    format: &'a str,
    base_currency: &'a str,
    as_of: &'a str,
    #[serde(borrow)]
    accounts: Items<'a>,
    #[serde(borrow)]
    instruments: Items<'a>,
    #[serde(borrow)]
    fills: Fills<'a>,
    #[serde(borrow, default)]
    cash: Option<Vec<Obj<CashRow<'a>>>>,
    #[serde(borrow, default)]
    marks: Option<Vec<Obj<MarkRow<'a>>>>,
    #[serde(borrow, default)]
    fx_rates: Option<Vec<Obj<FxRow<'a>>>>,
    #[serde(borrow, default)]
    reported_positions: Option<Items<'a>>,
    #[serde(borrow, default)]
    opening_positions: Option<Items<'a>>,
    #[serde(borrow, default)]
    corporate_actions: Option<Items<'a>>,
}

/// A section the validator reads as it stands: an array of JSON values.
struct Items<'a>(Vec<Value<'a>>);

impl<'de: 'a, 'a> Deserialize<'de> for Items<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let items: Vec<Value<'de>> = Vec::deserialize(deserializer)?;
        Ok(Self(items))
    }
}

/// A row read only from a JSON object: serde would also take a struct from an array of
/// its fields in order, which the format does not allow.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Only<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for Only<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        deserializer.deserialize_map(Only(PhantomData)).map(Obj)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FillRow<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    account: &'a str,
    exchange: &'a str,
    symbol: &'a str,
    side: &'a str,
    quantity: &'a str,
    price: &'a str,
    #[serde(borrow)]
    commission: Option<&'a str>,
    #[serde(borrow)]
    commission_currency: Option<&'a str>,
    commission_known: Option<bool>,
    time: &'a str,
    closes: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CashRow<'a> {
    account: &'a str,
    kind: &'a str,
    amount: &'a str,
    currency: &'a str,
    time: &'a str,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MarkRow<'a> {
    exchange: &'a str,
    symbol: &'a str,
    price: &'a str,
    date: &'a str,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FxRow<'a> {
    base: &'a str,
    quote: &'a str,
    rate: &'a str,
    date: &'a str,
}

/// The fills as read: each checked and made as it comes, its `account` and
/// `instrument` numbering the names in [`Interned`] until [`Fills::resolve`].
struct Fills<'a> {
    fills: Vec<Fill>,
    accounts: Interned<&'a str>,
    instruments: Interned<(&'a str, &'a str)>,
    /// One bit per fill: it states no `commission_currency` (its instrument's applies).
    unstated: Vec<u64>,
    /// Each fill's id hashed while the text is at hand, to find an id given twice
    /// without going back to every fill's id.
    id_hashes: Vec<u64>,
}

impl<'a> Fills<'a> {
    /// One fill, every rule of `Validator::fills` in turn; `None` at the first broken.
    /// A new rule on a fill is one more line here (and in `Validator::fills`).
    fn fill(&mut self, row: FillRow<'a>) -> Option<Fill> {
        let seq = u32::try_from(self.fills.len()).unwrap_or(u32::MAX);
        text_rule(&row.id).ok()?;
        fill_id_rule(&row.id).ok()?;
        self.id_hashes
            .push(Quick::default().hash_one(row.id.as_ref()));
        let account = self.accounts.intern(text_rule(row.account).ok()?)?;
        let instrument = self
            .instruments
            .intern((text_rule(row.exchange).ok()?, text_rule(row.symbol).ok()?))?;
        let side = side_rule(text_rule(row.side).ok()?).ok()?;
        let quantity = decimal_rule(row.quantity, Some(POSITIVE)).ok()?;
        let price = decimal_rule(row.price, Some(NON_NEGATIVE)).ok()?;
        let commission = match row.commission {
            Some(text) => decimal_rule(text, Some(NON_NEGATIVE)).ok()?,
            None => Decimal::ZERO,
        };
        let commission_known = row.commission_known.unwrap_or(true);
        commission_known_rule(commission_known, &commission).ok()?;
        let commission_currency = match row.commission_currency {
            Some(text) => Some(currency_rule(text_rule(text).ok()?).ok()?),
            None => None,
        };
        let time = time_rule(text_rule(row.time).ok()?).ok()?;
        if commission_currency.is_none() {
            let word = self.fills.len() / 64;
            if self.unstated.len() <= word {
                self.unstated.resize(word + 1, 0);
            }
            self.unstated[word] |= 1 << (self.fills.len() % 64);
        }
        Some(Fill {
            id: row.id.into_owned(),
            account,
            instrument,
            side,
            quantity,
            price,
            commission,
            // Set in `resolve` when the fill states none.
            commission_currency: commission_currency.unwrap_or(Currency::USD),
            commission_known,
            trade_date: time.date_naive(),
            time,
            seq,
            kind: if row.closes.unwrap_or(false) {
                FillKind::Close
            } else {
                FillKind::Trade
            },
            position: 0,
        })
    }

    /// The fills with their accounts and instruments found in the book's lists, the
    /// instrument's currency where a fill states no commission currency, and every id
    /// once; `None` for an unknown account or instrument or an id given twice.
    fn resolve(self, refs: &Refs<'_>) -> Option<Vec<Fill>> {
        let accounts: Vec<AccountIdx> = self
            .accounts
            .keys
            .iter()
            .map(|id| refs.accounts.get(id).copied())
            .collect::<Option<_>>()?;
        let instruments: Vec<InstrumentIdx> = self
            .instruments
            .keys
            .iter()
            .map(|key| refs.instruments.get(key).copied())
            .collect::<Option<_>>()?;
        let mut fills = self.fills;
        for (i, fill) in fills.iter_mut().enumerate() {
            fill.account = *accounts.get(fill.account as usize)?;
            fill.instrument = *instruments.get(fill.instrument as usize)?;
            // The engine's bound on one row's value (tradedesk_core::bounds): past it, the
            // validator names the row and the bound.
            let multiplier = refs
                .instrument_list
                .get(fill.instrument as usize)?
                .multiplier;
            let value = fill
                .quantity
                .checked_mul(fill.price)?
                .checked_mul(multiplier)?;
            if value > tradedesk_core::bounds::max_notional() {
                return None;
            }
            if self
                .unstated
                .get(i / 64)
                .is_some_and(|w| w & (1 << (i % 64)) != 0)
            {
                fill.commission_currency =
                    refs.instrument_list.get(fill.instrument as usize)?.currency;
            }
        }
        // Sorted, equal ids sit side by side. Two ids with the same hash are left to the
        // validator, which tells an id given twice from a collision.
        let mut hashes = self.id_hashes;
        hashes.sort_unstable();
        if hashes.windows(2).any(|pair| pair[0] == pair[1]) {
            return None;
        }
        Some(fills)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Fills<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Rows<'a>(PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for Rows<'a> {
            type Value = Fills<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of fills")
            }
            fn visit_seq<S: SeqAccess<'de>>(self, mut seq: S) -> Result<Fills<'a>, S::Error> {
                let mut out = Fills {
                    fills: Vec::with_capacity(seq.size_hint().unwrap_or(0)),
                    accounts: Interned::default(),
                    instruments: Interned::default(),
                    unstated: Vec::new(),
                    id_hashes: Vec::new(),
                };
                while let Some(Obj(row)) = seq.next_element::<Obj<FillRow<'a>>>()? {
                    let fill = out
                        .fill(row)
                        .ok_or_else(|| de::Error::custom("a rule is broken"))?;
                    out.fills.push(fill);
                }
                Ok(out)
            }
        }
        deserializer.deserialize_seq(Rows(PhantomData))
    }
}

fn cash(rows: Vec<Obj<CashRow<'_>>>, refs: &Refs<'_>) -> Option<Vec<CashEntry>> {
    rows.into_iter()
        .map(|Obj(row)| {
            let account = *refs.accounts.get(text_rule(row.account).ok()?)?;
            let kind = cash_kind_rule(text_rule(row.kind).ok()?).ok()?;
            let amount = decimal_rule(row.amount, None).ok()?;
            cash_sign_rule(kind, &amount).ok()?;
            let currency = currency_rule(text_rule(row.currency).ok()?).ok()?;
            let time = time_rule(text_rule(row.time).ok()?).ok()?;
            Some(CashEntry {
                account,
                kind,
                amount,
                currency,
                time,
            })
        })
        .collect()
}

fn marks(
    rows: Vec<Obj<MarkRow<'_>>>,
    refs: &Refs<'_>,
) -> Option<Vec<(InstrumentIdx, NaiveDate, Decimal)>> {
    let mut seen: HashSet<(InstrumentIdx, NaiveDate), Quick> = HashSet::default();
    rows.into_iter()
        .map(|Obj(row)| {
            let key = (text_rule(row.exchange).ok()?, text_rule(row.symbol).ok()?);
            let instrument = *refs.instruments.get(&key)?;
            let price = decimal_rule(row.price, Some(NON_NEGATIVE)).ok()?;
            let date = date_rule("date", text_rule(row.date).ok()?).ok()?;
            seen.insert((instrument, date))
                .then_some((instrument, date, price))
        })
        .collect()
}

fn fx_rates(rows: Vec<Obj<FxRow<'_>>>) -> Option<Vec<FxQuote>> {
    let mut seen: HashSet<(Currency, Currency, NaiveDate), Quick> = HashSet::default();
    rows.into_iter()
        .map(|Obj(row)| {
            let base = currency_rule(text_rule(row.base).ok()?).ok()?;
            let quote = currency_rule(text_rule(row.quote).ok()?).ok()?;
            let rate = decimal_rule(row.rate, Some(POSITIVE)).ok()?;
            if rate < tradedesk_core::bounds::min_rate()
                || rate > tradedesk_core::bounds::max_rate()
            {
                return None;
            }
            let date = date_rule("date", text_rule(row.date).ok()?).ok()?;
            (base != quote && seen.insert((base, quote, date))).then_some(FxQuote {
                base,
                quote,
                rate,
                date,
            })
        })
        .collect()
}

/// Names numbered in the order first seen.
struct Interned<K> {
    keys: Vec<K>,
    index: HashMap<K, u32, Quick>,
}

impl<K> Default for Interned<K> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            index: HashMap::default(),
        }
    }
}

impl<K: Copy + Eq + Hash> Interned<K> {
    fn intern(&mut self, key: K) -> Option<u32> {
        if let Some(n) = self.index.get(&key) {
            return Some(*n);
        }
        let n = u32::try_from(self.keys.len()).ok()?;
        self.keys.push(key);
        self.index.insert(key, n);
        Some(n)
    }
}

/// A quick hash for the loader's own tables (the book is the owner's file, so no
/// adversary picks its keys): eight bytes a step, multiply and rotate.
type Quick = BuildHasherDefault<QuickHasher>;

#[derive(Default)]
struct QuickHasher(u64);

impl QuickHasher {
    /// A folded multiply: the full 128-bit product, its halves xor-ed, so every bit of
    /// the word reaches the low bits the table indexes by.
    #[allow(clippy::cast_possible_truncation)] // the halves of the product, on purpose
    fn add(&mut self, word: u64) {
        let product = u128::from(self.0 ^ word) * u128::from(0x9e37_79b9_7f4a_7c15_u64);
        self.0 = (product as u64) ^ ((product >> 64) as u64);
    }
}

impl Hasher for QuickHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            // Byte by byte: a copy of a few bytes would be a call to memcpy.
            let word = rest
                .iter()
                .rev()
                .fold(0u64, |word, b| (word << 8) | u64::from(*b));
            self.add(word);
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}
