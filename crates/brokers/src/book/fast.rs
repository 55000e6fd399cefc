//! The typed first pass over a book file (docs/methodology/book-format.md).
//!
//! `scan` reads the fills straight from the bytes into rows of borrowed strings (on two
//! threads for a large file), and each fill is checked and made into the book's fill as
//! it is read: no JSON tree of the fills, no string allocated but the fill's own id,
//! accounts and instruments interned as the fills name them and resolved once at the
//! end. The other sections are small: serde_json reads each from its own text. The rules are the validator's own functions
//! (`super::decimal_rule`, `super::side_rule`, ...); the small sections that refer to
//! the rest (accounts, instruments, reported and opening positions, corporate actions)
//! go through the validator itself. The pass names nothing: at the first broken rule,
//! or at a form it leaves to the validator (a key given twice, an escaped symbol), it
//! gives up and `super::parse_book` runs the path-naming validator, which is the
//! reference. A book this pass accepts is one the validator accepts, and the same book.
//!
//! `rows_book` is the same pass over typed rows (`super::BookRows`, the Flex import's):
//! each fill through the same `Fills::fill`, the other sections through the same
//! functions as a file's (`finish`), the rows' strings borrowed; at a fault
//! `super::assemble_rows` runs the path-naming validator over the rows.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::marker::PhantomData;

use chrono::{DateTime, FixedOffset, NaiveDate};
use rust_decimal::Decimal;
use serde::Deserialize;
use serde::de::value::MapAccessDeserializer;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json_borrow::Value;
use tradedesk_core::{
    AccountIdx, Book, BookParts, CashEntry, Currency, Fill, FillId, FillKind, FxQuote,
    InstrumentIdx,
};

use super::rows::{self, BookRows, KeyedRow};
use super::{
    FORMAT, Item, NON_NEGATIVE, POSITIVE, Refs, Validator, cash_kind_rule, cash_sign_rule,
    commission_known_rule, currency_rule, date_rule, decimal_rule, fill_id_rule, opening_note,
    side_rule, text_rule, time_rule,
};

mod scan;

/// The book when every rule holds; `None` at the first fault.
pub(super) fn book(text: &str) -> Option<Book> {
    let scan::Top { sections, fills } = scan::top(text)?;
    let [
        format,
        base_currency,
        as_of,
        accounts,
        instruments,
        cash_rows,
        mark_rows,
        fx_rows,
        reported_positions,
        opening_positions,
        corporate_actions,
    ] = sections;
    if serde_json::from_str::<&str>(format?).ok()? != FORMAT {
        return None;
    }
    let base_currency =
        currency_rule(text_rule(serde_json::from_str::<&str>(base_currency?).ok()?).ok()?).ok()?;
    let as_of = date_rule(
        "as_of",
        text_rule(serde_json::from_str::<&str>(as_of?).ok()?).ok()?,
    )
    .ok()?;
    let accounts_items = items(accounts?)?;
    let instrument_items = items(instruments?)?;
    let reported_items = section::<Value<'_>>(reported_positions)?;
    let opening_items = section::<Value<'_>>(opening_positions)?;
    let action_items = section::<Value<'_>>(corporate_actions)?;
    finish(Parts {
        base_currency,
        as_of,
        accounts: &accounts_items,
        instruments: &instrument_items,
        fills,
        cash: unwrap_objects(section::<Obj<CashRow<'_>>>(cash_rows)?),
        marks: unwrap_objects(section::<Obj<MarkRow<'_>>>(mark_rows)?),
        fx_rates: unwrap_objects(section::<Obj<FxRow<'_>>>(fx_rows)?),
        reported_positions: &reported_items,
        opening_positions: &opening_items,
        corporate_actions: &action_items,
    })
}

/// The book of typed rows (an adapter's, such as the Flex import's) when every rule
/// holds; `None` at the first fault, where `super::assemble_rows` runs the path-naming
/// validator. The same rule functions as for a file, each fill through
/// [`Fills::fill`]; the rows' strings are borrowed, not copied.
pub(super) fn rows_book(rows: &BookRows) -> Option<Book> {
    let base_currency = currency_rule(text_rule(&rows.base_currency).ok()?).ok()?;
    let as_of = date_rule("as_of", text_rule(&rows.as_of).ok()?).ok()?;
    let mut fills = Fills::with_capacity(rows.fills.len());
    for row in &rows.fills {
        let fill = fills.fill(&FillRow::typed(row))?;
        fills.fills.push(fill);
    }
    // `Fills::resolve` walks each part's hashes sorted.
    fills.id_hashes.sort_unstable();
    let opening: &[KeyedRow] = &[];
    finish(Parts {
        base_currency,
        as_of,
        accounts: &rows.accounts,
        instruments: &rows.instruments,
        fills: vec![fills],
        cash: rows
            .cash
            .iter()
            .map(|r| CashRow {
                account: &r.account,
                kind: &r.kind,
                amount: &r.amount,
                currency: &r.currency,
                time: &r.time,
            })
            .collect(),
        marks: rows
            .marks
            .iter()
            .map(|r| MarkRow {
                exchange: &r.exchange,
                symbol: &r.symbol,
                price: &r.price,
                date: &r.date,
            })
            .collect(),
        fx_rates: rows
            .fx_rates
            .iter()
            .map(|r| FxRow {
                base: &r.base,
                quote: &r.quote,
                rate: &r.rate,
                date: &r.date,
            })
            .collect(),
        reported_positions: &rows.reported_positions,
        opening_positions: opening,
        corporate_actions: &rows.corporate_actions,
    })
}

/// A book's sections as the typed pass has read them, from a file or from typed rows:
/// the head checked, the fills checked and made (not yet resolved), the small sections
/// that refer to the rest still as items for the validator.
struct Parts<'p, 'a, A, I, P, O, C> {
    base_currency: Currency,
    as_of: NaiveDate,
    accounts: &'p [A],
    instruments: &'p [I],
    fills: Vec<Fills<'a>>,
    cash: Vec<CashRow<'a>>,
    marks: Vec<MarkRow<'a>>,
    fx_rates: Vec<FxRow<'a>>,
    reported_positions: &'p [P],
    opening_positions: &'p [O],
    corporate_actions: &'p [C],
}

/// The book of the parts when every rule holds across sections (each reference
/// resolved, each id once); `None` at the first fault.
fn finish<A: Item, I: Item, P: Item, O: Item, C: Item>(
    parts: Parts<'_, '_, A, I, P, O, C>,
) -> Option<Book> {
    let mut v = Validator::default();
    let accounts = v.accounts(parts.accounts);
    let (instruments, unknown_specs) = v.instruments(parts.instruments);
    if !v.issues.is_empty() {
        return None;
    }
    let index = super::Index::new(&accounts, &instruments);
    let refs = index.refs(&accounts, &instruments);
    let mut fills = Fills::resolve(parts.fills, &refs)?;
    let cash = cash(parts.cash, &refs)?;
    let marks = marks(parts.marks, &refs)?;
    let fx_rates = fx_rates(parts.fx_rates)?;
    let reported_positions = v.reported(parts.reported_positions, &refs);
    let opening = v.opening_positions(parts.opening_positions, &refs, &marks);
    let notes: Vec<String> = opening_note(&opening).into_iter().collect();
    fills.extend(opening);
    let corporate_actions = v.corporate_actions(parts.corporate_actions, &refs, &fills);
    if !v.issues.is_empty() {
        return None;
    }
    drop(refs);
    drop(index);
    Some(Book::assemble(BookParts {
        base_currency: parts.base_currency,
        as_of: parts.as_of,
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

/// Rows read only from JSON objects, as rows.
fn unwrap_objects<T>(rows: Vec<Obj<T>>) -> Vec<T> {
    rows.into_iter().map(|Obj(row)| row).collect()
}

/// A required section the validator reads as it stands: an array of JSON values.
fn items(text: &str) -> Option<Vec<Value<'_>>> {
    serde_json::from_str(text).ok()
}

/// An optional section of typed rows (or of JSON values): absent or `null` is empty.
fn section<'a, T: Deserialize<'a>>(text: Option<&'a str>) -> Option<Vec<T>> {
    let Some(text) = text else {
        return Some(Vec::new());
    };
    let rows: Option<Vec<T>> = serde_json::from_str(text).ok()?;
    Some(rows.unwrap_or_default())
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

/// A fill's fields as `scan::row` reads them: the keys of `Validator::fills`.
struct FillRow<'a> {
    id: Cow<'a, str>,
    /// `account`, and `exchange` with `symbol`, as integers when short (`scan::pack`).
    account_key: Option<u128>,
    instrument_key: Option<(u128, u128)>,
    account: &'a str,
    exchange: &'a str,
    symbol: &'a str,
    side: &'a str,
    quantity: &'a str,
    price: &'a str,
    commission: Option<&'a str>,
    commission_currency: Option<&'a str>,
    commission_known: Option<bool>,
    time: &'a str,
    closes: Option<bool>,
}

impl<'a> FillRow<'a> {
    /// A typed row's fields as the scan reads them (no packed keys: each name is
    /// interned by its text).
    fn typed(row: &'a rows::FillRow) -> Self {
        Self {
            id: Cow::Borrowed(&row.id),
            account_key: None,
            instrument_key: None,
            account: &row.account,
            exchange: &row.exchange,
            symbol: &row.symbol,
            side: &row.side,
            quantity: &row.quantity,
            price: &row.price,
            commission: row.commission.as_deref(),
            commission_currency: row.commission_currency.as_deref(),
            commission_known: row.commission_known,
            time: &row.time,
            closes: row.closes,
        }
    }
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
    accounts: Interned<&'a str, u128>,
    instruments: Interned<(&'a str, &'a str), (u128, u128)>,
    /// One bit per fill: it states no `commission_currency` (its instrument's applies).
    unstated: Vec<u64>,
    /// Each fill's id hashed while the text is at hand, to find an id given twice
    /// without going back to every fill's id.
    id_hashes: Vec<u64>,
    /// The date of the last time read by `fast_time`, by its text.
    last_date: Option<([u8; 10], NaiveDate)>,
}

impl<'a> Fills<'a> {
    /// One fill, every rule of `Validator::fills` in turn; `None` at the first broken.
    /// A new rule on a fill is one more line here (and in `Validator::fills`).
    fn fill(&mut self, row: &FillRow<'a>) -> Option<Fill> {
        // Numbered in the whole file by `resolve_part`.
        let seq = 0;
        text_rule(&row.id).ok()?;
        fill_id_rule(&row.id).ok()?;
        self.id_hashes
            .push(Quick::default().hash_one(row.id.as_ref()));
        let account = self
            .accounts
            .intern_packed(row.account_key, text_rule(row.account).ok()?)?;
        let instrument = self.instruments.intern_packed(
            row.instrument_key,
            (text_rule(row.exchange).ok()?, text_rule(row.symbol).ok()?),
        )?;
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
        let time = match fast_time(row.time, &mut self.last_date) {
            Some(time) => time,
            None => time_rule(text_rule(row.time).ok()?).ok()?,
        };
        if commission_currency.is_none() {
            let word = self.fills.len() / 64;
            if self.unstated.len() <= word {
                self.unstated.resize(word + 1, 0);
            }
            self.unstated[word] |= 1 << (self.fills.len() % 64);
        }
        Some(Fill {
            // Kept in the fill when short (`FillId`): no allocation of its own.
            id: FillId::from(row.id.as_ref()),
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

    /// An empty part with room for `capacity` fills.
    fn with_capacity(capacity: usize) -> Self {
        Self {
            fills: Vec::with_capacity(capacity),
            accounts: Interned::default(),
            instruments: Interned::default(),
            unstated: Vec::new(),
            id_hashes: Vec::with_capacity(capacity),
            last_date: None,
        }
    }

    /// Room for `more` fills beside those read.
    fn reserve(&mut self, more: usize) {
        self.fills.reserve_exact(more);
        self.id_hashes.reserve_exact(more);
    }

    /// The fills of every part, in file order, with their accounts and instruments found
    /// in the book's lists, the instrument's currency where a fill states no commission
    /// currency, and every id once; `None` for an unknown account or instrument or an
    /// id given twice.
    fn resolve(parts: Vec<Self>, refs: &Refs<'_>) -> Option<Vec<Fill>> {
        let mut fills: Vec<Fill> = Vec::new();
        // Each part's hashes, sorted on its own thread (`scan::rows`).
        let mut hashes: Vec<Vec<u64>> = Vec::with_capacity(parts.len());
        for part in parts {
            let offset = fills.len();
            let (mut part_fills, part_hashes) = part.resolve_part(refs, offset)?;
            if fills.is_empty() {
                // The first part's vector has room for the whole array (`scan::rows`).
                fills = part_fills;
            } else {
                fills.append(&mut part_fills);
            }
            hashes.push(part_hashes);
        }
        // Sorted, equal ids sit side by side. Two ids with the same hash are left to the
        // validator, which tells an id given twice from a collision.
        if !distinct(&hashes) {
            return None;
        }
        Some(fills)
    }

    /// One part's fills resolved, numbered in file order from `offset`; and its ids'
    /// hashes.
    fn resolve_part(self, refs: &Refs<'_>, offset: usize) -> Option<(Vec<Fill>, Vec<u64>)> {
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
        // 10^NOTIONAL_DIGITS as an integer: a value whose digits, read as an integer,
        // are under it is under the bound without a decimal product.
        let bound = tradedesk_core::bounds::max_notional()
            .mantissa()
            .unsigned_abs();
        let small = |d: &Decimal| {
            let m = d.mantissa().unsigned_abs();
            (m < 1 << 40).then_some(m)
        };
        let mut fills = self.fills;
        for (i, fill) in fills.iter_mut().enumerate() {
            fill.seq = u32::try_from(offset + i).unwrap_or(u32::MAX);
            fill.account = *accounts.get(fill.account as usize)?;
            fill.instrument = *instruments.get(fill.instrument as usize)?;
            // The engine's bound on one row's value (tradedesk_core::bounds): past it, the
            // validator names the row and the bound.
            let multiplier = refs
                .instrument_list
                .get(fill.instrument as usize)?
                .multiplier;
            let digits = small(&fill.quantity)
                .zip(small(&fill.price))
                .zip(small(&multiplier))
                .map(|((q, p), m)| q * p * m);
            if digits.is_none_or(|d| d > bound) {
                let value = fill
                    .quantity
                    .checked_mul(fill.price)?
                    .checked_mul(multiplier)?;
                if value > tradedesk_core::bounds::max_notional() {
                    return None;
                }
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
        Some((fills, self.id_hashes))
    }
}

/// Whether no value is in two places of these sorted lists (nor twice in one): a walk
/// of the lists side by side, smallest first.
fn distinct(lists: &[Vec<u64>]) -> bool {
    if lists
        .iter()
        .any(|list| list.windows(2).any(|pair| pair[0] >= pair[1]))
    {
        return false;
    }
    match lists {
        [] | [_] => true,
        [a, b] => {
            let (mut i, mut j) = (0, 0);
            while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
                match x.cmp(y) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Greater => j += 1,
                    std::cmp::Ordering::Equal => return false,
                }
            }
            true
        }
        more => {
            let mut all: Vec<u64> = more.concat();
            all.sort_unstable();
            all.windows(2).all(|pair| pair[0] != pair[1])
        }
    }
}

/// The common forms of an RFC 3339 time, `YYYY-MM-DDTHH:MM:SS` then `Z` or `+HH:MM` /
/// `-HH:MM`, read at their fixed places: the instant and offset chrono's
/// `parse_from_rfc3339` gives. `None` for every other text (a fraction, a leap second,
/// a lower-case `t`, `-00:00`, anything out of range), which `time_rule` then reads.
/// The date is kept from the last time when its text is the same.
fn fast_time(
    text: &str,
    memo: &mut Option<([u8; 10], NaiveDate)>,
) -> Option<DateTime<FixedOffset>> {
    let b = text.as_bytes();
    let two = |at: usize| -> Option<u32> {
        let (hi, lo) = (
            b.get(at)?.wrapping_sub(b'0'),
            b.get(at + 1)?.wrapping_sub(b'0'),
        );
        (hi < 10 && lo < 10).then_some(u32::from(hi) * 10 + u32::from(lo))
    };
    let offset = match (b.len(), b.get(19)) {
        (20, Some(b'Z')) => 0,
        (25, Some(sign @ (b'+' | b'-'))) => {
            let (h, m) = (two(20)?, two(23)?);
            if b.get(22) != Some(&b':') || h > 23 || m > 59 || (*sign == b'-' && h == 0 && m == 0) {
                return None;
            }
            let secs = i32::try_from(h * 3600 + m * 60).ok()?;
            if *sign == b'-' { -secs } else { secs }
        }
        _ => return None,
    };
    let punctuation = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if punctuation.iter().any(|(at, c)| b.get(*at) != Some(c)) {
        return None;
    }
    let head: [u8; 10] = b.get(..10)?.try_into().ok()?;
    let date = match memo {
        Some((text, date)) if *text == head => *date,
        _ => {
            let year = i32::try_from(two(0)? * 100 + two(2)?).ok()?;
            let date = NaiveDate::from_ymd_opt(year, two(5)?, two(8)?)?;
            *memo = Some((head, date));
            date
        }
    };
    let (hour, minute, second) = (two(11)?, two(14)?, two(17)?);
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let local = date.and_hms_opt(hour, minute, second)?;
    local
        .and_local_timezone(FixedOffset::east_opt(offset)?)
        .single()
}

fn cash(rows: Vec<CashRow<'_>>, refs: &Refs<'_>) -> Option<Vec<CashEntry>> {
    rows.into_iter()
        .map(|row| {
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
    rows: Vec<MarkRow<'_>>,
    refs: &Refs<'_>,
) -> Option<Vec<(InstrumentIdx, NaiveDate, Decimal)>> {
    let mut seen: HashSet<(InstrumentIdx, NaiveDate), Quick> = HashSet::default();
    rows.into_iter()
        .map(|row| {
            let key = (text_rule(row.exchange).ok()?, text_rule(row.symbol).ok()?);
            let instrument = *refs.instruments.get(&key)?;
            let price = decimal_rule(row.price, Some(NON_NEGATIVE)).ok()?;
            let date = date_rule("date", text_rule(row.date).ok()?).ok()?;
            seen.insert((instrument, date))
                .then_some((instrument, date, price))
        })
        .collect()
}

fn fx_rates(rows: Vec<FxRow<'_>>) -> Option<Vec<FxQuote>> {
    let mut seen: HashSet<(Currency, Currency, NaiveDate), Quick> = HashSet::default();
    rows.into_iter()
        .map(|row| {
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

/// Names numbered in the order first seen, looked up by their packed form `P` when
/// they have one (`scan::pack`: integers, compared without `memcmp`), else by the name.
/// A name is numbered once however it is looked up: a packed form not yet seen is
/// numbered by the name.
struct Interned<K, P> {
    keys: Vec<K>,
    index: HashMap<K, u32, Quick>,
    packed: HashMap<P, u32, Quick>,
}

impl<K, P> Default for Interned<K, P> {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            index: HashMap::default(),
            packed: HashMap::default(),
        }
    }
}

impl<K: Copy + Eq + Hash, P: Copy + Eq + Hash> Interned<K, P> {
    fn intern(&mut self, key: K) -> Option<u32> {
        if let Some(n) = self.index.get(&key) {
            return Some(*n);
        }
        let n = u32::try_from(self.keys.len()).ok()?;
        self.keys.push(key);
        self.index.insert(key, n);
        Some(n)
    }

    fn intern_packed(&mut self, packed: Option<P>, key: K) -> Option<u32> {
        let Some(packed) = packed else {
            return self.intern(key);
        };
        if let Some(n) = self.packed.get(&packed) {
            return Some(*n);
        }
        let n = self.intern(key)?;
        self.packed.insert(packed, n);
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

    #[allow(clippy::cast_possible_truncation)] // the two halves, on purpose
    fn write_u128(&mut self, n: u128) {
        self.add(n as u64);
        self.add((n >> 64) as u64);
    }

    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// `fast_time` reads a time as chrono does, or leaves it to chrono.
    #[test]
    fn fast_times_are_chronos_times() {
        let mut texts: Vec<String> = Vec::new();
        let dates = [
            "2024-02-29",
            "2023-02-29",
            "2025-12-31",
            "0000-01-01",
            "9999-12-31",
            "2025-13-01",
            "2025-00-10",
            "2025-04-31",
            "2025-04-00",
            "2O25-01-01",
            "2025/01/01",
        ];
        let clocks = [
            "00:00:00", "23:59:59", "24:00:00", "12:60:00", "12:00:60", "1a:00:00",
        ];
        let zones = [
            "Z",
            "z",
            "+00:00",
            "-00:00",
            "+05:30",
            "-05:00",
            "+23:59",
            "+24:00",
            "-12:60",
            "+0530",
            "",
            ".5Z",
            ".123456789+08:00",
            " ",
        ];
        for date in dates {
            for clock in clocks {
                for zone in zones {
                    for sep in ["T", "t", " "] {
                        texts.push(format!("{date}{sep}{clock}{zone}"));
                    }
                }
            }
        }
        let mut memo = None;
        let mut fast = 0;
        // Twice over, so the date memo is read both fresh and kept.
        for text in texts.iter().chain(texts.iter()) {
            let chrono = DateTime::parse_from_rfc3339(text).ok();
            if let Some(time) = fast_time(text, &mut memo) {
                fast += 1;
                let chrono = chrono.unwrap_or_else(|| panic!("{text}: chrono refuses it"));
                assert_eq!(format!("{time:?}"), format!("{chrono:?}"), "{text}");
                assert_eq!(time.offset(), chrono.offset(), "{text}");
            }
        }
        assert_eq!(fast, 80);
    }
}
