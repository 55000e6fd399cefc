//! The `book` adapter: loads a `tradedesk-book/1` file with strict validation.
//!
//! A file that breaks any rule of `docs/methodology/book-format.md` is refused whole, with the JSON path
//! and the rule (`fills[12].quantity: must be > 0`); nothing is ever half-loaded.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;
use chrono::{DateTime, FixedOffset, NaiveDate};
use rust_decimal::Decimal;
use serde_json_borrow::{ObjectAsVec as Map, Value};
use tradedesk_core::bounds;
use tradedesk_core::instrument::gics_sector;
use tradedesk_core::{
    Account, AccountIdx, ActionKind, AssetClass, Book, BookParts, CashEntry, CashKind,
    CorporateAction, Currency, Fill, FillKind, FillRef, FxQuote, Instrument, InstrumentIdx,
    InstrumentKey, MadeFill, Mode, ReportedPosition, Side, UnknownSpec,
};

use crate::calendar::Market;
use crate::{AccountHealth, Broker, BrokerError, HealthStatus};

mod fast;
mod rows;

pub use rows::{
    AccountRow, BookRows, CashRow, FillRow, FormatLine, FxRow, InstrumentRow, KeyedRow, MarkRow,
    PositionRow,
};

pub const FORMAT: &str = "tradedesk-book/1";

/// One broken rule: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookIssue {
    pub path: String,
    pub rule: String,
}

impl fmt::Display for BookIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.rule)
    }
}

/// A book refused whole: every issue found (up to a cap), first one first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BookError {
    pub source: String,
    pub issues: Vec<BookIssue>,
}

const MAX_ISSUES: usize = 20;

impl fmt::Display for BookError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: book refused", self.source)?;
        for issue in &self.issues {
            write!(f, "\n  {issue}")?;
        }
        if self.issues.len() >= MAX_ISSUES {
            write!(f, "\n  (further issues not listed)")?;
        }
        Ok(())
    }
}

impl std::error::Error for BookError {}

impl BookError {
    /// The first issue, `path: rule`.
    pub fn first(&self) -> String {
        self.issues
            .first()
            .map_or_else(|| "unknown problem".to_owned(), ToString::to_string)
    }
}

/// Reads and validates a book file.
///
/// # Errors
/// A [`BookError`] naming the file, and each broken rule with its JSON path.
pub fn load_book(path: &Path) -> Result<Book, BookError> {
    let source = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| BookError {
        source: source.clone(),
        issues: vec![BookIssue {
            path: "$".to_owned(),
            rule: format!("cannot read the file: {e}"),
        }],
    })?;
    parse_book(&source, &text)
}

/// Parses and validates a book's JSON text.
///
/// A typed first pass reads the text straight into the book, checking every rule as it
/// goes; only when it meets a broken rule (or a form it does not read, such as an
/// escaped symbol) does the path-naming validator run, which then names every fault
/// (see [`parse_book_validating`]). Either way the book, or the refusal, is the same.
///
/// # Errors
/// A [`BookError`] with each broken rule and its JSON path.
pub fn parse_book(source: &str, text: &str) -> Result<Book, BookError> {
    match fast::book(text) {
        Some(book) => Ok(book),
        None => parse_book_validating(source, text),
    }
}

/// The typed first pass alone: the book when every rule holds, `None` at the first
/// fault or at a form it leaves to the validator. What [`parse_book`] tries first;
/// public so tests can hold it against [`parse_book_validating`].
pub fn parse_book_fast(text: &str) -> Option<Book> {
    fast::book(text)
}

/// The path-naming validator alone: walks a JSON tree of the text so each broken rule
/// is reported with its path (`fills[12].price: must be >= 0`). The reference the
/// typed pass of [`parse_book`] is held to.
///
/// # Errors
/// A [`BookError`] with each broken rule and its JSON path.
pub fn parse_book_validating(source: &str, text: &str) -> Result<Book, BookError> {
    let fail = |issues| BookError {
        source: source.to_owned(),
        issues,
    };
    let value: Value<'_> = serde_json::from_str(text).map_err(|e| {
        fail(vec![BookIssue {
            path: "$".to_owned(),
            rule: format!(
                "not valid JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ),
        }])
    })?;
    let mut v = Validator::default();
    let book = v.book(&value);
    match book {
        Some(book) if v.issues.is_empty() => Ok(book),
        _ => Err(fail(v.issues)),
    }
}

/// Validates a book given as typed rows (an adapter's own, such as the Flex import's)
/// and assembles it: the same rules as [`parse_book`] on the file the rows serialize
/// to, with no JSON text between. As for a file, a typed first pass builds the book
/// straight from the rows, checking every rule as it goes; only when it meets a broken
/// rule does the path-naming validator run ([`assemble_rows_validating`]), so the
/// refusal names the same issues at the same paths, in the same order.
///
/// # Errors
/// A [`BookError`] with each broken rule and its path.
pub fn assemble_rows(source: &str, rows: &BookRows) -> Result<Book, BookError> {
    match fast::rows_book(rows) {
        Some(book) => Ok(book),
        None => assemble_rows_validating(source, rows),
    }
}

/// The typed first pass over rows alone: the book when every rule holds, `None` at the
/// first fault. What [`assemble_rows`] tries first; public so tests can hold it against
/// [`assemble_rows_validating`].
#[must_use]
pub fn assemble_rows_fast(rows: &BookRows) -> Option<Book> {
    fast::rows_book(rows)
}

/// The path-naming validator over typed rows alone: each broken rule reported with its
/// path (`fills[12].price: must be >= 0`). The reference the typed pass of
/// [`assemble_rows`] is held to.
///
/// # Errors
/// A [`BookError`] with each broken rule and its path.
pub fn assemble_rows_validating(source: &str, rows: &BookRows) -> Result<Book, BookError> {
    let mut v = Validator::default();
    match v.assemble(rows) {
        Some(book) if v.issues.is_empty() => Ok(book),
        _ => Err(BookError {
            source: source.to_owned(),
            issues: v.issues,
        }),
    }
}

/// Everything a book holds, as text that two equal books write alike (for tests that
/// hold two ways of building a book against each other).
#[cfg(test)]
pub(crate) fn fingerprint(book: &Book) -> String {
    format!(
        "{}\n{:?}",
        write_book(book),
        (
            &book.accounts,
            &book.instruments,
            &book.fills,
            &book.cash,
            &book.reported_positions,
            &book.corporate_actions,
            &book.action_fills,
            &book.notes,
            &book.unknown_specs,
        )
    )
}

/// One field of an item as the rules see it: absent (or JSON `null`), text, a flag, or
/// anything else (a number, an array, an object), which no rule accepts where it wants
/// text or a flag.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    Absent,
    Str(&'a str),
    Bool(bool),
    Other,
}

/// An item's fields by name: an object of a JSON tree, or a typed row.
trait Fields {
    fn field(&self, key: &str) -> Field<'_>;
    /// The keys as written, for the unknown- and repeated-key rules (a typed row has
    /// only its own fields, each once, and lists none).
    fn keys(&self) -> impl Iterator<Item = &str>;
}

/// One item of a section: its fields when it is an object.
trait Item {
    type Obj: Fields + ?Sized;
    fn object(&self) -> Option<&Self::Obj>;
}

/// A book's top-level fields and its sections, each taken when the validator reaches
/// it (a JSON tree's section names its own fault there: missing, not an array).
trait Sections: Fields {
    type Account: Item;
    type Instrument: Item;
    type Fill: Item;
    type Cash: Item;
    type Mark: Item;
    type Fx: Item;
    type Position: Item;
    type Opening: Item;
    type Action: Item;
    fn accounts(&self, v: &mut Validator) -> &[Self::Account];
    fn instruments(&self, v: &mut Validator) -> &[Self::Instrument];
    fn fills(&self, v: &mut Validator) -> &[Self::Fill];
    fn cash(&self, v: &mut Validator) -> &[Self::Cash];
    fn marks(&self, v: &mut Validator) -> &[Self::Mark];
    fn fx_rates(&self, v: &mut Validator) -> &[Self::Fx];
    fn reported_positions(&self, v: &mut Validator) -> &[Self::Position];
    fn opening_positions(&self, v: &mut Validator) -> &[Self::Opening];
    fn corporate_actions(&self, v: &mut Validator) -> &[Self::Action];
}

impl Fields for Map<'_> {
    fn field(&self, key: &str) -> Field<'_> {
        match self.get(key) {
            None | Some(Value::Null) => Field::Absent,
            Some(Value::Str(s)) => Field::Str(s),
            Some(Value::Bool(b)) => Field::Bool(*b),
            Some(_) => Field::Other,
        }
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        Map::keys(self)
    }
}

impl<'v> Item for Value<'v> {
    type Obj = Map<'v>;
    fn object(&self) -> Option<&Map<'v>> {
        self.as_object()
    }
}

/// The top-level object of a book file's JSON tree.
struct Tree<'a, 'v>(&'a Map<'v>);

impl Fields for Tree<'_, '_> {
    fn field(&self, key: &str) -> Field<'_> {
        self.0.field(key)
    }

    fn keys(&self) -> impl Iterator<Item = &str> {
        Map::keys(self.0)
    }
}

/// Each section of a file: its array, the fault named when it is missing or not one.
macro_rules! tree_sections {
    ($($name:ident: $key:literal, $required:literal;)*) => {$(
        fn $name(&self, v: &mut Validator) -> &[Value<'v>] {
            v.array(self.0, $key, $required)
        }
    )*};
}

impl<'v> Sections for Tree<'_, 'v> {
    type Account = Value<'v>;
    type Instrument = Value<'v>;
    type Fill = Value<'v>;
    type Cash = Value<'v>;
    type Mark = Value<'v>;
    type Fx = Value<'v>;
    type Position = Value<'v>;
    type Opening = Value<'v>;
    type Action = Value<'v>;
    tree_sections! {
        accounts: "accounts", true;
        instruments: "instruments", true;
        fills: "fills", true;
        cash: "cash", false;
        marks: "marks", false;
        fx_rates: "fx_rates", false;
        reported_positions: "reported_positions", false;
        opening_positions: "opening_positions", false;
        corporate_actions: "corporate_actions", false;
    }
}

/// Reads the `fx_rates` of a book-format file that may hold nothing else (the config's
/// `fx_file`): the format line and every rate are validated as in a book.
///
/// # Errors
/// A [`BookError`] with each broken rule and its JSON path.
pub fn parse_fx_file(source: &str, text: &str) -> Result<Vec<FxQuote>, BookError> {
    let fail = |issues| BookError {
        source: source.to_owned(),
        issues,
    };
    let value: Value<'_> = serde_json::from_str(text).map_err(|e| {
        fail(vec![BookIssue {
            path: "$".to_owned(),
            rule: format!("not valid JSON: {e}"),
        }])
    })?;
    let mut v = Validator::default();
    let quotes = v
        .object(&At::ROOT, &value, &TOP_LEVEL)
        .map(|top| {
            if top.get("format").and_then(Value::as_str) != Some(FORMAT) {
                v.issue("format", format!("must be exactly \"{FORMAT}\""));
            }
            let items = v.array(top, "fx_rates", true);
            v.fx_rates(items)
        })
        .unwrap_or_default();
    if v.issues.is_empty() {
        Ok(quotes)
    } else {
        Err(fail(v.issues))
    }
}

const TOP_LEVEL: [&str; 12] = [
    "format",
    "base_currency",
    "as_of",
    "accounts",
    "instruments",
    "fills",
    "cash",
    "marks",
    "fx_rates",
    "reported_positions",
    "opening_positions",
    "corporate_actions",
];

/// Where an item sits in the file (`fills[12]`), formatted only when an issue is found.
#[derive(Debug, Clone, Copy)]
struct At {
    section: &'static str,
    index: Option<usize>,
}

impl At {
    const ROOT: Self = Self {
        section: "$",
        index: None,
    };

    fn item(section: &'static str, index: usize) -> Self {
        Self {
            section,
            index: Some(index),
        }
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.index {
            Some(i) => write!(f, "{}[{i}]", self.section),
            None => f.write_str(self.section),
        }
    }
}

impl From<&At> for String {
    fn from(at: &At) -> Self {
        at.to_string()
    }
}

impl From<At> for String {
    fn from(at: At) -> Self {
        at.to_string()
    }
}

/// Decimal places any value may have (the FIFO engine is exact to 18).
const MAX_PLACES: u32 = bounds::MAX_PLACES;

/// A rule on a decimal's value, and how the rule reads in an error.
type Check = (fn(&Decimal) -> bool, &'static str);

#[derive(Default)]
struct Validator {
    issues: Vec<BookIssue>,
}

const DECIMAL_RULE: &str = "must be a decimal string such as \"150.25\" (JSON numbers are refused so no value passes through binary floating point)";

// `> 0` and `>= 0` read off the sign and zero flags (a decimal comparison rescales).
const POSITIVE: Check = (|d| d.is_sign_positive() && !d.is_zero(), "must be > 0");
const NON_NEGATIVE: Check = (|d| d.is_sign_positive() || d.is_zero(), "must be >= 0");

// The rules on a field's text, each one function that both passes call: the validator
// turns an `Err` into an issue at the field's path, the typed pass stops at it (and the
// validator then names it). A new rule is one more function here, called in both
// (`Validator::fills` and `fast::Fills::fill` for a fill's).

/// Text that is not only spaces.
fn text_rule(s: &str) -> Result<&str, &'static str> {
    // A visible ASCII first character is not space: no need to trim.
    if s.as_bytes().first().is_some_and(u8::is_ascii_graphic) {
        return Ok(s);
    }
    if s.trim().is_empty() {
        Err("must not be empty")
    } else {
        Ok(s)
    }
}

fn currency_rule(text: &str) -> Result<Currency, String> {
    Currency::new_checked(text)
        .map_err(|_| format!("'{text}' is not an upper-case ISO 4217 currency code"))
}

fn date_rule(key: &str, text: &str) -> Result<NaiveDate, String> {
    tradedesk_core::parse_date(key, text)
        .map_err(|_| format!("'{text}' is not a YYYY-MM-DD calendar date"))
}

fn time_rule(text: &str) -> Result<DateTime<FixedOffset>, String> {
    DateTime::parse_from_rfc3339(text).map_err(|_| {
        format!(
            "'{text}' is not an RFC 3339 time with an offset, such as 2024-03-04T10:15:00-05:00"
        )
    })
}

/// A decimal string's value; `check` states the rule on the value (e.g. "must be > 0").
fn decimal_rule(text: &str, check: Option<Check>) -> Result<Decimal, String> {
    let Some(value) = parse_decimal(text) else {
        return Err(format!("'{text}' {DECIMAL_RULE}"));
    };
    // Bounds that keep every row and total far inside exact decimal and fixed-point
    // arithmetic: no real price, quantity or amount comes near them.
    if value.scale() > MAX_PLACES {
        return Err(format!(
            "'{text}' has more than {MAX_PLACES} decimal places"
        ));
    }
    // The engine's bounds (tradedesk_core::bounds). Digits before the point at most
    // the bound's are under it without a comparison.
    let int_digits = text
        .bytes()
        .skip_while(|b| *b == b'-' || *b == b'0')
        .take_while(u8::is_ascii_digit)
        .count();
    if int_digits > bounds::VALUE_DIGITS as usize && value.abs() > bounds::max_value() {
        return Err(format!(
            "'{text}' is larger than the supported 1e{} in size",
            bounds::VALUE_DIGITS
        ));
    }
    if let Some((ok, rule)) = check
        && !ok(&value)
    {
        return Err(rule.to_owned());
    }
    Ok(value)
}

/// A fill's `id`: the prefixes of the fills tradedesk makes are kept for them.
fn fill_id_rule(id: &str) -> Result<(), String> {
    if id.starts_with("action:") || id.starts_with("opening:") {
        return Err(format!(
            "'{id}': ids starting action: or opening: are kept for the fills tradedesk makes"
        ));
    }
    Ok(())
}

fn side_rule(side: &str) -> Result<Side, String> {
    match side {
        "buy" => Ok(Side::Buy),
        "sell" => Ok(Side::Sell),
        other => Err(format!("'{other}' must be buy or sell")),
    }
}

/// A fill's `commission` beside `commission_known`.
fn commission_known_rule(known: bool, commission: &Decimal) -> Result<(), &'static str> {
    if !known && !commission.is_zero() {
        return Err("must be absent or \"0\" when commission_known is false");
    }
    Ok(())
}

fn cash_kind_rule(kind: &str) -> Result<CashKind, String> {
    CashKind::parse(kind).ok_or_else(|| {
        format!("'{kind}' must be one of deposit, withdrawal, dividend, interest, fee, tax")
    })
}

/// A cash entry's sign, as seen by the account.
fn cash_sign_rule(kind: CashKind, amount: &Decimal) -> Result<(), &'static str> {
    match kind {
        CashKind::Deposit | CashKind::Dividend if *amount <= Decimal::ZERO => {
            Err("must be > 0 (deposits and dividends are positive as seen by the account)")
        }
        CashKind::Withdrawal | CashKind::Fee if *amount >= Decimal::ZERO => {
            Err("must be < 0 (withdrawals and fees are negative as seen by the account)")
        }
        _ => Ok(()),
    }
}

/// The note a book with opening positions carries.
fn opening_note(opening: &[Fill]) -> Option<String> {
    let first = opening.iter().map(|f| f.trade_date).min()?;
    Some(format!(
        "the history starts mid-life: positions held on {first} open at the cost the book states (opening_positions), so P&L before then is the broker's figure, not tradedesk's"
    ))
}

impl Validator {
    fn issue(&mut self, path: impl Into<String>, rule: impl Into<String>) {
        if self.issues.len() < MAX_ISSUES {
            self.issues.push(BookIssue {
                path: path.into(),
                rule: rule.into(),
            });
        }
    }

    /// An object with only the allowed keys.
    fn object<'a, I: Item>(
        &mut self,
        path: &At,
        value: &'a I,
        allowed: &[&str],
    ) -> Option<&'a I::Obj> {
        let Some(map) = value.object() else {
            self.issue(path, "must be an object");
            return None;
        };
        for (i, key) in map.keys().enumerate() {
            if map.keys().take(i).any(|earlier| earlier == key) {
                self.issue(format!("{path}.{key}"), "appears twice in the same object");
            }
            if !allowed.contains(&key) {
                self.issue(
                    format!("{path}.{key}"),
                    format!("unknown field (allowed: {})", allowed.join(", ")),
                );
            }
        }
        Some(map)
    }

    fn string<'a, M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &'a M,
        key: &str,
        required: bool,
    ) -> Option<&'a str> {
        match map.field(key) {
            Field::Absent => {
                if required {
                    self.issue(format!("{path}.{key}"), "is required");
                }
                None
            }
            Field::Str(s) => match text_rule(s) {
                Ok(s) => Some(s),
                Err(rule) => {
                    self.issue(format!("{path}.{key}"), rule);
                    None
                }
            },
            Field::Bool(_) | Field::Other => {
                self.issue(format!("{path}.{key}"), "must be a string");
                None
            }
        }
    }

    fn currency<M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &M,
        key: &str,
        required: bool,
    ) -> Option<Currency> {
        let text = self.string(path, map, key, required)?;
        self.field(path, key, currency_rule(text))
    }

    /// A rule's verdict on a field: its value, or the issue at `path.key`.
    fn field<T>(
        &mut self,
        path: &At,
        key: &str,
        verdict: Result<T, impl Into<String>>,
    ) -> Option<T> {
        match verdict {
            Ok(value) => Some(value),
            Err(rule) => {
                self.issue(format!("{path}.{key}"), rule);
                None
            }
        }
    }

    fn date<M: Fields + ?Sized>(&mut self, path: &At, map: &M, key: &str) -> Option<NaiveDate> {
        let text = self.string(path, map, key, true)?;
        self.field(path, key, date_rule(key, text))
    }

    fn time<M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &M,
        key: &str,
    ) -> Option<DateTime<FixedOffset>> {
        let text = self.string(path, map, key, true)?;
        self.field(path, key, time_rule(text))
    }

    /// A decimal string; `check` states the rule on its value (e.g. "must be > 0").
    fn decimal<M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &M,
        key: &str,
        required: bool,
        check: Option<Check>,
    ) -> Option<Decimal> {
        let text = match map.field(key) {
            Field::Absent => {
                if required {
                    self.issue(format!("{path}.{key}"), "is required");
                }
                return None;
            }
            Field::Str(s) => s,
            Field::Bool(_) | Field::Other => {
                self.issue(format!("{path}.{key}"), DECIMAL_RULE);
                return None;
            }
        };
        self.field(path, key, decimal_rule(text, check))
    }

    /// A row's value, `quantity x price x multiplier`, within the engine's bound on one
    /// row's value (so its lots, its cash and its P&L compute exactly, with room for
    /// totals); `fields` names the row's quantity and price fields.
    fn row_value(
        &mut self,
        path: &At,
        fields: (&str, &str),
        (quantity, price, multiplier): (Decimal, Decimal, Decimal),
    ) -> bool {
        let value = quantity
            .abs()
            .checked_mul(price)
            .and_then(|v| v.checked_mul(multiplier));
        if value.is_some_and(|v| v <= bounds::max_notional()) {
            return true;
        }
        let shown = value.map_or_else(
            || "more than 7.9e28".to_owned(),
            |v| v.normalize().to_string(),
        );
        self.issue(
            path,
            format!(
                "its value {} x {} x multiplier = {} x {} x {} = {shown} is larger than the supported 1e{} \
                 (the engine holds values exactly up to about 1.7e20, leaving room to sum {} rows at the bound)",
                fields.0,
                fields.1,
                quantity.normalize(),
                price.normalize(),
                multiplier.normalize(),
                bounds::NOTIONAL_DIGITS,
                bounds::HEADROOM_ROWS
            ),
        );
        false
    }

    fn array<'a, 'v>(&mut self, map: &'a Map<'v>, key: &str, required: bool) -> &'a [Value<'v>] {
        match map.get(key) {
            Some(Value::Array(items)) => items,
            None | Some(Value::Null) if !required => &[],
            None | Some(Value::Null) => {
                self.issue(key, "is required (an array, possibly empty)");
                &[]
            }
            Some(_) => {
                self.issue(key, "must be an array");
                &[]
            }
        }
    }

    fn book(&mut self, value: &Value<'_>) -> Option<Book> {
        let top = self.object(&At::ROOT, value, &TOP_LEVEL)?;
        match top.get("format") {
            Some(Value::Str(f)) if f == FORMAT => {}
            Some(Value::Str(f)) => self.issue(
                "format",
                format!("must be exactly \"{FORMAT}\", found \"{f}\""),
            ),
            None => self.issue("format", format!("is required: \"{FORMAT}\"")),
            Some(_) => self.issue("format", format!("must be the string \"{FORMAT}\"")),
        }
        self.assemble(&Tree(top))
    }

    /// The book of a source's sections, each taken when its turn comes (so the issues
    /// read in the order of the file).
    fn assemble<S: Sections>(&mut self, top: &S) -> Option<Book> {
        let base_currency = self.currency(&At::ROOT, top, "base_currency", true);
        let as_of = self.date(&At::ROOT, top, "as_of");
        // Paths of top-level fields read better without the `$.` prefix.
        for issue in &mut self.issues {
            if let Some(rest) = issue.path.strip_prefix("$.") {
                issue.path = rest.to_owned();
            }
        }

        let accounts = {
            let items = top.accounts(self);
            self.accounts(items)
        };
        let (instruments, unknown_specs) = {
            let items = top.instruments(self);
            self.instruments(items)
        };
        let index = Index::new(&accounts, &instruments);
        let refs = index.refs(&accounts, &instruments);

        let fills = {
            let items = top.fills(self);
            self.fills(items, &refs)
        };
        let cash = {
            let items = top.cash(self);
            self.cash(items, &refs)
        };
        let marks = {
            let items = top.marks(self);
            self.marks(items, &refs)
        };
        let fx = {
            let items = top.fx_rates(self);
            self.fx_rates(items)
        };
        let reported_positions = {
            let items = top.reported_positions(self);
            self.reported(items, &refs)
        };
        let mut fills = fills;
        let mut notes = Vec::new();
        let opening = {
            let items = top.opening_positions(self);
            self.opening_positions(items, &refs, &marks)
        };
        notes.extend(opening_note(&opening));
        fills.extend(opening);
        let corporate_actions = {
            let items = top.corporate_actions(self);
            self.corporate_actions(items, &refs, &fills)
        };

        if !self.issues.is_empty() {
            return None;
        }
        Some(Book::assemble(BookParts {
            base_currency: base_currency?,
            as_of: as_of?,
            accounts,
            instruments,
            fills,
            cash,
            marks,
            fx_rates: fx,
            reported_positions,
            corporate_actions,
            notes,
            unknown_specs,
            tickets: Vec::new(),
            margin_modes: Vec::new(),
        }))
    }

    fn accounts<T: Item>(&mut self, items: &[T]) -> Vec<Account> {
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("accounts", i);
            let Some(map) = self.object(&path, item, &["id", "broker", "currency", "name"]) else {
                continue;
            };
            let id = self.string(&path, map, "id", true);
            let broker = self.string(&path, map, "broker", true);
            let currency = self.currency(&path, map, "currency", true);
            let name = self.string(&path, map, "name", false);
            if let Some(b) = broker
                && !b
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
            {
                self.issue(
                    format!("{path}.broker"),
                    format!("'{b}' must be a lower-case vendor name such as ibkr, moomoo, alpaca"),
                );
            }
            if let Some(id) = id
                && let Some(first) = seen.insert(id.to_owned(), i)
            {
                self.issue(
                    format!("{path}.id"),
                    format!("duplicate account id '{id}' (first at accounts[{first}])"),
                );
            }
            if let (Some(id), Some(broker), Some(currency)) = (id, broker, currency) {
                out.push(Account {
                    id: id.to_owned(),
                    broker: broker.to_owned(),
                    currency,
                    name: name.map(str::to_owned),
                    mode: Mode::Book,
                });
            }
        }
        out
    }

    /// The instruments, and those of them whose contract size is assumed: an option,
    /// future or CFD that states no multiplier.
    fn instruments<T: Item>(&mut self, items: &[T]) -> (Vec<Instrument>, Vec<UnknownSpec>) {
        let mut seen: HashMap<InstrumentKey, usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        let mut unknown = Vec::new();
        let classes: Vec<&str> = AssetClass::ALL.iter().map(|c| c.as_str()).collect();
        for (i, item) in items.iter().enumerate() {
            let path = At::item("instruments", i);
            let Some(map) = self.object(
                &path,
                item,
                &[
                    "symbol",
                    "exchange",
                    "currency",
                    "asset_class",
                    "multiplier",
                    "name",
                    "sector",
                    "country",
                ],
            ) else {
                continue;
            };
            let symbol = self.string(&path, map, "symbol", true);
            let exchange = self.string(&path, map, "exchange", true);
            if let Some(e) = exchange.filter(|e| e.contains(':')) {
                self.issue(
                    format!("{path}.exchange"),
                    format!("'{e}' must not contain ':'"),
                );
            }
            let currency = self.currency(&path, map, "currency", true);
            let asset_class = self.string(&path, map, "asset_class", true).and_then(|c| {
                let parsed = AssetClass::parse(c);
                if parsed.is_none() {
                    self.issue(
                        format!("{path}.asset_class"),
                        format!("'{c}' must be one of {}", classes.join(", ")),
                    );
                }
                parsed
            });
            let stated = self.decimal(
                &path,
                map,
                "multiplier",
                false,
                Some((|d| *d > Decimal::ZERO, "must be > 0")),
            );
            let multiplier = stated.unwrap_or(Decimal::ONE);
            let name = self.string(&path, map, "name", false);
            let sector = self.string(&path, map, "sector", false).and_then(|s| {
                let parsed = gics_sector(s);
                if parsed.is_none() {
                    self.issue(
                        format!("{path}.sector"),
                        format!("'{s}' must be one of the eleven GICS sector names, or absent for Unclassified"),
                    );
                }
                parsed
            });
            let country = self.string(&path, map, "country", false);
            if let Some(c) =
                country.filter(|c| c.len() != 2 || !c.chars().all(|ch| ch.is_ascii_uppercase()))
            {
                self.issue(
                    format!("{path}.country"),
                    format!("'{c}' must be an ISO 3166 alpha-2 code such as US, MY"),
                );
            }
            let (Some(symbol), Some(exchange), Some(currency), Some(asset_class)) =
                (symbol, exchange, currency, asset_class)
            else {
                continue;
            };
            let key = InstrumentKey::new(exchange, symbol);
            if let Some(first) = seen.insert(key.clone(), i) {
                self.issue(
                    path,
                    format!("duplicate instrument {key} (first at instruments[{first}])"),
                );
                continue;
            }
            if stated.is_none()
                && matches!(
                    asset_class,
                    AssetClass::Option | AssetClass::Future | AssetClass::Cfd
                )
                && let Ok(instrument) = InstrumentIdx::try_from(out.len())
            {
                unknown.push(UnknownSpec {
                    instrument,
                    detail: format!(
                        "the book states no multiplier for this {}: 1 assumed",
                        asset_class.as_str()
                    ),
                    fix: format!("state {path}.multiplier (units per contract)"),
                });
            }
            out.push(Instrument {
                key,
                currency,
                asset_class,
                multiplier,
                name: name.map(str::to_owned),
                sector,
                country: country.map(str::to_owned),
            });
        }
        (out, unknown)
    }

    fn account_ref<M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &M,
        refs: &Refs<'_>,
    ) -> Option<AccountIdx> {
        let id = self.string(path, map, "account", true)?;
        let found = refs.accounts.get(id).copied();
        if found.is_none() {
            let mut known: Vec<&&str> = refs.accounts.keys().collect();
            known.sort();
            self.issue(
                format!("{path}.account"),
                format!("unknown account '{id}' (accounts: {known:?})"),
            );
        }
        found
    }

    fn instrument_ref<M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &M,
        refs: &Refs<'_>,
    ) -> Option<InstrumentIdx> {
        let exchange = self.string(path, map, "exchange", true);
        let symbol = self.string(path, map, "symbol", true);
        let (exchange, symbol) = (exchange?, symbol?);
        let found = refs.instruments.get(&(exchange, symbol)).copied();
        if found.is_none() {
            self.issue(
                format!("{path}.symbol"),
                format!("instrument {exchange}:{symbol} is not listed in instruments"),
            );
        }
        found
    }

    fn fills<T: Item>(&mut self, items: &[T], refs: &Refs<'_>) -> Vec<Fill> {
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(items.len());
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("fills", i);
            let Some(map) = self.object(
                &path,
                item,
                &[
                    "id",
                    "account",
                    "exchange",
                    "symbol",
                    "side",
                    "quantity",
                    "price",
                    "commission",
                    "commission_currency",
                    "commission_known",
                    "time",
                    "closes",
                ],
            ) else {
                continue;
            };
            let id = self.string(&path, map, "id", true);
            if let Some(Err(rule)) = id.map(fill_id_rule) {
                self.issue(format!("{path}.id"), rule);
            }
            let closes = match map.field("closes") {
                Field::Absent => false,
                Field::Bool(b) => b,
                Field::Str(_) | Field::Other => {
                    self.issue(format!("{path}.closes"), "must be true or false");
                    false
                }
            };
            if let Some(id) = id
                && let Some(first) = seen.insert(id, i)
            {
                self.issue(
                    format!("{path}.id"),
                    format!("duplicate fill id '{id}' (first at fills[{first}])"),
                );
            }
            let account = self.account_ref(&path, map, refs);
            let instrument = self.instrument_ref(&path, map, refs);
            let side = self
                .string(&path, map, "side", true)
                .and_then(|s| self.field(&path, "side", side_rule(s)));
            let quantity = self.decimal(&path, map, "quantity", true, Some(POSITIVE));
            let price = self.decimal(&path, map, "price", true, Some(NON_NEGATIVE));
            let commission = self
                .decimal(&path, map, "commission", false, Some(NON_NEGATIVE))
                .unwrap_or(Decimal::ZERO);
            let commission_known = match map.field("commission_known") {
                Field::Absent => true,
                Field::Bool(b) => b,
                Field::Str(_) | Field::Other => {
                    self.issue(format!("{path}.commission_known"), "must be true or false");
                    true
                }
            };
            if let Err(rule) = commission_known_rule(commission_known, &commission) {
                self.issue(format!("{path}.commission"), rule);
            }
            let commission_currency = self.currency(&path, map, "commission_currency", false);
            let time = self.time(&path, map, "time");
            let seq = u32::try_from(i).unwrap_or(u32::MAX);
            let (
                Some(id),
                Some(account),
                Some(instrument),
                Some(side),
                Some(quantity),
                Some(price),
                Some(time),
            ) = (id, account, instrument, side, quantity, price, time)
            else {
                continue;
            };
            let multiplier = refs.instrument_list[instrument as usize].multiplier;
            if !self.row_value(&path, ("quantity", "price"), (quantity, price, multiplier)) {
                continue;
            }
            out.push(Fill {
                id: id.into(),
                account,
                instrument,
                side,
                quantity,
                price,
                commission,
                commission_currency: commission_currency
                    .unwrap_or(refs.instrument_list[instrument as usize].currency),
                commission_known,
                trade_date: time.date_naive(),
                time,
                seq,
                kind: if closes {
                    FillKind::Close
                } else {
                    FillKind::Trade
                },
                position: 0,
            });
        }
        out
    }

    /// Positions held when the history starts, as fills of kind [`FillKind::Opening`]
    /// (sequenced before every fill of the book).
    fn opening_positions<T: Item>(
        &mut self,
        items: &[T],
        refs: &Refs<'_>,
        marks: &[(InstrumentIdx, NaiveDate, Decimal)],
    ) -> Vec<Fill> {
        let mut seen: HashMap<(AccountIdx, InstrumentIdx), usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("opening_positions", i);
            let Some(map) = self.object(
                &path,
                item,
                &["account", "exchange", "symbol", "quantity", "cost", "date"],
            ) else {
                continue;
            };
            let account = self.account_ref(&path, map, refs);
            let instrument = self.instrument_ref(&path, map, refs);
            let quantity = self.decimal(
                &path,
                map,
                "quantity",
                true,
                Some((
                    |d| !d.is_zero(),
                    "must not be 0 (signed: negative for a short)",
                )),
            );
            let cost = self.decimal(
                &path,
                map,
                "cost",
                false,
                Some((
                    |d| *d >= Decimal::ZERO,
                    "must be >= 0 (the average cost per unit)",
                )),
            );
            let date = self.date(&path, map, "date");
            let (Some(account), Some(instrument), Some(quantity), Some(date)) =
                (account, instrument, quantity, date)
            else {
                continue;
            };
            if let Some(first) = seen.insert((account, instrument), i) {
                self.issue(
                    path,
                    format!("duplicate opening position for the same account and instrument (first at opening_positions[{first}])"),
                );
                continue;
            }
            let inst = &refs.instrument_list[instrument as usize];
            let mark = || {
                let of = marks.iter().filter(|(m, _, _)| *m == instrument);
                of.clone()
                    .filter(|(_, d, _)| *d <= date)
                    .max_by_key(|(_, d, _)| *d)
                    .or_else(|| of.min_by_key(|(_, d, _)| *d))
                    .map(|(_, _, p)| *p)
            };
            let (price, known) = match cost {
                Some(c) => (c, true),
                None => match mark() {
                    Some(p) => (p, false),
                    None => {
                        self.issue(
                            format!("{path}.cost"),
                            format!(
                                "is required: the book has no mark of {} to open the position at",
                                inst.key
                            ),
                        );
                        continue;
                    }
                },
            };
            let field = if known { "cost" } else { "mark" };
            if !self.row_value(
                &path,
                ("quantity", field),
                (quantity, price, inst.multiplier),
            ) {
                continue;
            }
            let time = date
                .and_time(chrono::NaiveTime::MIN)
                .and_utc()
                .fixed_offset();
            out.push(
                MadeFill {
                    id: format!(
                        "opening:{}:{}",
                        refs.account_ids[account as usize], inst.key
                    ),
                    account,
                    instrument,
                    side: if quantity.is_sign_positive() {
                        Side::Buy
                    } else {
                        Side::Sell
                    },
                    quantity: quantity.abs(),
                    price,
                    currency: inst.currency,
                    time,
                    kind: FillKind::Opening,
                    commission_known: known,
                    seq: 0,
                }
                .into(),
            );
        }
        out
    }

    /// The instrument named by `exchange_key` / `symbol_key` (a corporate action's target).
    fn target_ref<M: Fields + ?Sized>(
        &mut self,
        path: &At,
        map: &M,
        refs: &Refs<'_>,
        (exchange_key, symbol_key): (&str, &str),
    ) -> Option<InstrumentIdx> {
        let exchange = self.string(path, map, exchange_key, true);
        let symbol = self.string(path, map, symbol_key, true);
        let (exchange, symbol) = (exchange?, symbol?);
        let found = refs.instruments.get(&(exchange, symbol)).copied();
        if found.is_none() {
            self.issue(
                format!("{path}.{symbol_key}"),
                format!("instrument {exchange}:{symbol} is not listed in instruments"),
            );
        }
        found
    }

    fn corporate_actions<T: Item>(
        &mut self,
        items: &[T],
        refs: &Refs<'_>,
        fills: &[Fill],
    ) -> Vec<CorporateAction> {
        const KINDS: &str = "split, stock_merger, symbol_change, cash_merger, spin_off, cash_in_lieu, expiry, exercise, assignment";
        const COMMON: [&str; 6] = ["id", "account", "exchange", "symbol", "kind", "date"];
        let (positive, non_negative) = (POSITIVE, NON_NEGATIVE);
        // Only a book with actions needs its fills by id (an exercise names its trade).
        let fill_ids: HashMap<&str, &Fill> = if items.is_empty() {
            HashMap::new()
        } else {
            fills.iter().map(|f| (f.id.as_str(), f)).collect()
        };
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("corporate_actions", i);
            let kind_name = item.object().and_then(|m| match m.field("kind") {
                Field::Str(kind) => Some(kind),
                _ => None,
            });
            let extra: &[&str] = match kind_name {
                Some("split") => &["new_units", "old_units"],
                Some("stock_merger") => {
                    &["target_exchange", "target_symbol", "new_units", "old_units"]
                }
                Some("symbol_change") => &["target_exchange", "target_symbol"],
                Some("cash_merger") => &["cash_per_unit", "quantity"],
                Some("spin_off") => &[
                    "target_exchange",
                    "target_symbol",
                    "new_units",
                    "old_units",
                    "cost_fraction",
                ],
                Some("cash_in_lieu") => &["quantity", "amount"],
                Some("expiry") => &["quantity"],
                Some("exercise" | "assignment") => &["quantity", "fill"],
                Some(other) => {
                    self.issue(
                        format!("{path}.kind"),
                        format!("'{other}' must be one of {KINDS}"),
                    );
                    continue;
                }
                None => {
                    self.issue(
                        format!("{path}.kind"),
                        format!("is required: one of {KINDS}"),
                    );
                    continue;
                }
            };
            let allowed: Vec<&str> = COMMON.iter().chain(extra).copied().collect();
            let Some(map) = self.object(&path, item, &allowed) else {
                continue;
            };
            let id = self.string(&path, map, "id", true);
            if let Some(id) = id
                && let Some(first) = seen.insert(id, i)
            {
                self.issue(
                    format!("{path}.id"),
                    format!(
                        "duplicate corporate action id '{id}' (first at corporate_actions[{first}])"
                    ),
                );
            }
            let account = self.account_ref(&path, map, refs);
            let instrument = self.instrument_ref(&path, map, refs);
            let date = self.date(&path, map, "date");
            let ratio = |v: &mut Self| {
                let new = v.decimal(&path, map, "new_units", true, Some(positive));
                let old = v.decimal(&path, map, "old_units", true, Some(positive));
                new.zip(old)
            };
            let kind = match kind_name.unwrap_or_default() {
                "split" => ratio(self).map(|(new, old)| ActionKind::Split { new, old }),
                "stock_merger" => {
                    let into =
                        self.target_ref(&path, map, refs, ("target_exchange", "target_symbol"));
                    let r = ratio(self);
                    into.zip(r)
                        .map(|(into, (new, old))| ActionKind::StockMerger { into, new, old })
                }
                "symbol_change" => self
                    .target_ref(&path, map, refs, ("target_exchange", "target_symbol"))
                    .map(|into| ActionKind::SymbolChange { into }),
                "cash_merger" => {
                    let cash = self.decimal(&path, map, "cash_per_unit", true, Some(non_negative));
                    let quantity = self.decimal(&path, map, "quantity", false, Some(positive));
                    cash.map(|cash_per_unit| ActionKind::CashMerger {
                        cash_per_unit,
                        quantity,
                    })
                }
                "spin_off" => {
                    let child =
                        self.target_ref(&path, map, refs, ("target_exchange", "target_symbol"));
                    let r = ratio(self);
                    let fraction = self.decimal(
                        &path,
                        map,
                        "cost_fraction",
                        true,
                        Some((
                            |d| *d >= Decimal::ZERO && *d <= Decimal::ONE,
                            "must be from 0 to 1 (the share of the cost basis the new shares take)",
                        )),
                    );
                    match (child, r, fraction) {
                        (Some(child), Some((new, old)), Some(cost_fraction)) => {
                            Some(ActionKind::SpinOff {
                                child,
                                new,
                                old,
                                cost_fraction,
                            })
                        }
                        _ => None,
                    }
                }
                "cash_in_lieu" => {
                    let quantity = self.decimal(&path, map, "quantity", true, Some(positive));
                    let amount = self.decimal(&path, map, "amount", true, Some(non_negative));
                    quantity
                        .zip(amount)
                        .map(|(quantity, amount)| ActionKind::CashInLieu { quantity, amount })
                }
                "expiry" => {
                    let quantity = self.decimal(&path, map, "quantity", false, Some(positive));
                    Some(ActionKind::Expiry { quantity })
                }
                assigned => {
                    let quantity = self.decimal(&path, map, "quantity", false, Some(positive));
                    let fill = self.string(&path, map, "fill", true).and_then(|f| {
                        let Some(found) = fill_ids.get(f) else {
                            self.issue(format!("{path}.fill"), format!("no fill has the id '{f}' (the stock trade the option delivered)"));
                            return None;
                        };
                        if account.is_some_and(|a| a != found.account)
                            || instrument.is_some_and(|i| i == found.instrument)
                        {
                            self.issue(format!("{path}.fill"), format!("'{f}' must be a trade of the same account in the underlying, not in the option"));
                            return None;
                        }
                        if date.is_some_and(|d| found.trade_date < d) {
                            self.issue(format!("{path}.fill"), format!("'{f}' is dated before the action: the delivered trade is on or after the action's date"));
                            return None;
                        }
                        Some(FillRef::new(f))
                    });
                    fill.map(|fill| {
                        if assigned == "exercise" {
                            ActionKind::Exercise { quantity, fill }
                        } else {
                            ActionKind::Assignment { quantity, fill }
                        }
                    })
                }
            };
            if let (Some(instrument), Some(kind)) = (instrument, &kind) {
                let class = refs.instrument_list[instrument as usize].asset_class;
                let option_event = matches!(
                    kind,
                    ActionKind::Expiry { .. }
                        | ActionKind::Exercise { .. }
                        | ActionKind::Assignment { .. }
                );
                if option_event && class != AssetClass::Option {
                    self.issue(
                        format!("{path}.kind"),
                        format!(
                            "'{}' applies to an option, and {} is {}",
                            kind.as_str(),
                            refs.instrument_list[instrument as usize].key,
                            class.as_str()
                        ),
                    );
                }
                if let ActionKind::StockMerger { into, .. }
                | ActionKind::SymbolChange { into }
                | ActionKind::SpinOff { child: into, .. } = kind
                    && *into == instrument
                {
                    self.issue(
                        format!("{path}.target_symbol"),
                        "must name another instrument than the action's own",
                    );
                }
            }
            if let (Some(id), Some(account), Some(instrument), Some(date), Some(kind)) =
                (id, account, instrument, date, kind)
            {
                out.push(CorporateAction {
                    id: id.to_owned(),
                    account,
                    instrument,
                    date,
                    kind,
                });
            }
        }
        out
    }

    fn cash<T: Item>(&mut self, items: &[T], refs: &Refs<'_>) -> Vec<CashEntry> {
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("cash", i);
            let Some(map) = self.object(
                &path,
                item,
                &["account", "kind", "amount", "currency", "time"],
            ) else {
                continue;
            };
            let account = self.account_ref(&path, map, refs);
            let kind = self
                .string(&path, map, "kind", true)
                .and_then(|k| self.field(&path, "kind", cash_kind_rule(k)));
            let amount = self.decimal(&path, map, "amount", true, None);
            if let (Some(kind), Some(amount)) = (kind, amount)
                && let Err(rule) = cash_sign_rule(kind, &amount)
            {
                self.issue(format!("{path}.amount"), rule);
            }
            let currency = self.currency(&path, map, "currency", true);
            let time = self.time(&path, map, "time");
            if let (Some(account), Some(kind), Some(amount), Some(currency), Some(time)) =
                (account, kind, amount, currency, time)
            {
                out.push(CashEntry {
                    account,
                    kind,
                    amount,
                    currency,
                    time,
                });
            }
        }
        out
    }

    fn marks<T: Item>(
        &mut self,
        items: &[T],
        refs: &Refs<'_>,
    ) -> Vec<(InstrumentIdx, NaiveDate, Decimal)> {
        let mut seen: HashMap<(InstrumentIdx, NaiveDate), usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("marks", i);
            let Some(map) = self.object(&path, item, &["exchange", "symbol", "price", "date"])
            else {
                continue;
            };
            let instrument = self.instrument_ref(&path, map, refs);
            let price = self.decimal(&path, map, "price", true, Some(NON_NEGATIVE));
            let date = self.date(&path, map, "date");
            if let (Some(instrument), Some(price), Some(date)) = (instrument, price, date) {
                if let Some(first) = seen.insert((instrument, date), i) {
                    self.issue(path, format!("duplicate mark for the same instrument and date (first at marks[{first}])"));
                    continue;
                }
                out.push((instrument, date, price));
            }
        }
        out
    }

    fn fx_rates<T: Item>(&mut self, items: &[T]) -> Vec<FxQuote> {
        let mut seen: HashMap<(Currency, Currency, NaiveDate), usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("fx_rates", i);
            let Some(map) = self.object(&path, item, &["base", "quote", "rate", "date"]) else {
                continue;
            };
            let base = self.currency(&path, map, "base", true);
            let quote = self.currency(&path, map, "quote", true);
            let rate = self.decimal(&path, map, "rate", true, Some(POSITIVE));
            let date = self.date(&path, map, "date");
            let (Some(base), Some(quote), Some(rate), Some(date)) = (base, quote, rate, date)
            else {
                continue;
            };
            if base == quote {
                self.issue(format!("{path}.quote"), "must differ from base");
                continue;
            }
            if rate < bounds::min_rate() || rate > bounds::max_rate() {
                self.issue(
                    format!("{path}.rate"),
                    format!(
                        "'{}' is outside the supported 1e-{d} to 1e{d}: a rate and its inverse (which a conversion the other way multiplies by) must each be at most 1e{d}",
                        rate.normalize(),
                        d = bounds::RATE_DIGITS
                    ),
                );
                continue;
            }
            if let Some(first) = seen.insert((base, quote, date), i) {
                self.issue(
                    path,
                    format!("duplicate {base}/{quote} rate on {date} (first at fx_rates[{first}])"),
                );
                continue;
            }
            out.push(FxQuote {
                base,
                quote,
                rate,
                date,
            });
        }
        out
    }

    fn reported<T: Item>(&mut self, items: &[T], refs: &Refs<'_>) -> Vec<ReportedPosition> {
        let mut seen: HashMap<(AccountIdx, InstrumentIdx), usize> = HashMap::new();
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let path = At::item("reported_positions", i);
            let Some(map) =
                self.object(&path, item, &["account", "exchange", "symbol", "quantity"])
            else {
                continue;
            };
            let account = self.account_ref(&path, map, refs);
            let instrument = self.instrument_ref(&path, map, refs);
            let quantity = self.decimal(&path, map, "quantity", true, None);
            if let (Some(account), Some(instrument), Some(quantity)) =
                (account, instrument, quantity)
            {
                if let Some(first) = seen.insert((account, instrument), i) {
                    self.issue(path, format!("duplicate position for the same account and instrument (first at reported_positions[{first}])"));
                    continue;
                }
                out.push(ReportedPosition {
                    account,
                    instrument,
                    quantity,
                });
            }
        }
        out
    }
}

struct Refs<'a> {
    accounts: &'a HashMap<&'a str, AccountIdx>,
    account_ids: Vec<&'a str>,
    instruments: &'a HashMap<(&'a str, &'a str), InstrumentIdx>,
    instrument_list: &'a [Instrument],
}

/// The accounts by id and the instruments by exchange and symbol, which every other
/// section refers to.
struct Index<'a> {
    accounts: HashMap<&'a str, AccountIdx>,
    instruments: HashMap<(&'a str, &'a str), InstrumentIdx>,
}

impl<'a> Index<'a> {
    fn new(accounts: &'a [Account], instruments: &'a [Instrument]) -> Self {
        Self {
            accounts: accounts
                .iter()
                .enumerate()
                .filter_map(|(i, a)| Some((a.id.as_str(), AccountIdx::try_from(i).ok()?)))
                .collect(),
            instruments: instruments
                .iter()
                .enumerate()
                .filter_map(|(i, inst)| {
                    let key = (inst.key.exchange.as_str(), inst.key.symbol.as_str());
                    Some((key, InstrumentIdx::try_from(i).ok()?))
                })
                .collect(),
        }
    }

    fn refs(&'a self, accounts: &'a [Account], instruments: &'a [Instrument]) -> Refs<'a> {
        Refs {
            account_ids: accounts.iter().map(|a| a.id.as_str()).collect(),
            accounts: &self.accounts,
            instruments: &self.instruments,
            instrument_list: instruments,
        }
    }
}

/// A plain decimal: optional `-`, digits, optional `.digits`. No exponent, sign `+`,
/// spaces or thousands separators.
fn parse_decimal(text: &str) -> Option<Decimal> {
    if let Some(value) = small_decimal(text) {
        return Some(value);
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, "0"));
    let plain = !int.is_empty()
        && !frac.is_empty()
        && int.bytes().all(|b| b.is_ascii_digit())
        && frac.bytes().all(|b| b.is_ascii_digit());
    if !plain {
        return None;
    }
    Decimal::from_str_exact(text)
        .or_else(|_| Decimal::from_str(text))
        .ok()
}

/// A plain non-negative decimal of at most 18 digits, read digit by digit: the value and
/// the scale `Decimal::from_str_exact` gives, without its general parser. `None` for
/// anything else, which the general parser then reads.
fn small_decimal(text: &str) -> Option<Decimal> {
    let mut mantissa: i64 = 0;
    let mut digits = 0u32;
    // Digits after the point, once there is one.
    let mut places: Option<u32> = None;
    for &b in text.as_bytes() {
        if b.is_ascii_digit() {
            if digits == 18 {
                return None;
            }
            mantissa = mantissa * 10 + i64::from(b - b'0');
            digits += 1;
            if let Some(p) = places.as_mut() {
                *p += 1;
            }
        } else if b == b'.' && places.is_none() && digits > 0 {
            places = Some(0);
        } else {
            return None;
        }
    }
    match places {
        Some(0) => None,
        _ if digits == 0 => None,
        p => Decimal::try_new(mantissa, p.unwrap_or(0)).ok(),
    }
}

/// Writes a book as a `tradedesk-book/1` file that [`parse_book`] reads back to the same
/// book: positions held at the start as `opening_positions`, the fills made for corporate
/// actions left out (they are made again from `corporate_actions`).
pub fn write_book(book: &Book) -> String {
    use serde_json::{Map as JsonMap, Value as Json, json};
    let text = |d: &Decimal| Json::String(d.to_string());
    let inst = |i: InstrumentIdx| &book.instruments[i as usize].key;
    let place = |m: &mut JsonMap<String, Json>, key: &InstrumentKey, prefix: &str| {
        m.insert(format!("{prefix}exchange"), key.exchange.clone().into());
        m.insert(format!("{prefix}symbol"), key.symbol.clone().into());
    };
    let accounts: Vec<Json> = book
        .accounts
        .iter()
        .map(|a| {
            let mut m = JsonMap::new();
            m.insert("id".into(), a.id.clone().into());
            m.insert("broker".into(), a.broker.clone().into());
            m.insert("currency".into(), a.currency.code().into());
            if let Some(name) = &a.name {
                m.insert("name".into(), name.clone().into());
            }
            Json::Object(m)
        })
        .collect();
    let instruments: Vec<Json> = book
        .instruments
        .iter()
        .map(|i| {
            let mut m = JsonMap::new();
            place(&mut m, &i.key, "");
            m.insert("currency".into(), i.currency.code().into());
            m.insert("asset_class".into(), i.asset_class.as_str().into());
            m.insert("multiplier".into(), text(&i.multiplier));
            for (key, value) in [("name", &i.name), ("country", &i.country)] {
                if let Some(v) = value {
                    m.insert(key.into(), v.clone().into());
                }
            }
            if let Some(sector) = i.sector {
                m.insert("sector".into(), sector.into());
            }
            Json::Object(m)
        })
        .collect();
    let account_id = |a: AccountIdx| book.accounts[a as usize].id.clone();
    let mut fills = Vec::new();
    let mut opening = Vec::new();
    for f in &book.fills {
        let mut m = JsonMap::new();
        match f.kind {
            // A transfer out is made by a broker adapter: a book file has no entry for it.
            FillKind::Action | FillKind::TransferOut => continue,
            FillKind::Opening => {
                m.insert("account".into(), account_id(f.account).into());
                place(&mut m, inst(f.instrument), "");
                let signed = match f.side {
                    Side::Buy => f.quantity,
                    Side::Sell => -f.quantity,
                };
                m.insert("quantity".into(), text(&signed));
                if f.commission_known {
                    m.insert("cost".into(), text(&f.price));
                }
                m.insert("date".into(), f.trade_date.to_string().into());
                opening.push(Json::Object(m));
                continue;
            }
            FillKind::Trade | FillKind::Close => {}
        }
        m.insert("id".into(), f.id.to_string().into());
        m.insert("account".into(), account_id(f.account).into());
        place(&mut m, inst(f.instrument), "");
        m.insert("side".into(), f.side.as_str().into());
        m.insert("quantity".into(), text(&f.quantity));
        m.insert("price".into(), text(&f.price));
        m.insert("commission".into(), text(&f.commission));
        m.insert(
            "commission_currency".into(),
            f.commission_currency.code().into(),
        );
        m.insert("commission_known".into(), f.commission_known.into());
        m.insert("time".into(), f.time.to_rfc3339().into());
        if f.kind == FillKind::Close {
            m.insert("closes".into(), true.into());
        }
        fills.push(Json::Object(m));
    }
    let cash: Vec<Json> = book
        .cash
        .iter()
        .map(|c| {
            let kind = match c.kind {
                CashKind::Deposit => "deposit",
                CashKind::Withdrawal => "withdrawal",
                CashKind::Dividend => "dividend",
                CashKind::Interest => "interest",
                CashKind::Fee => "fee",
                CashKind::Tax => "tax",
            };
            json!({"account": account_id(c.account), "kind": kind, "amount": text(&c.amount),
                   "currency": c.currency.code(), "time": c.time.to_rfc3339()})
        })
        .collect();
    let mut marks = Vec::new();
    for (i, instrument) in book.instruments.iter().enumerate() {
        let Ok(idx) = InstrumentIdx::try_from(i) else {
            continue;
        };
        for (date, price) in book.marks.series(idx) {
            marks.push(
                json!({"exchange": instrument.key.exchange, "symbol": instrument.key.symbol,
                              "price": text(price), "date": date.to_string()}),
            );
        }
    }
    let mut quotes = book.fx.all_quotes();
    quotes.sort_by(|a, b| {
        (a.base.code(), a.quote.code(), a.date).cmp(&(b.base.code(), b.quote.code(), b.date))
    });
    let fx: Vec<Json> = quotes
        .iter()
        .map(|q| json!({"base": q.base.code(), "quote": q.quote.code(), "rate": text(&q.rate), "date": q.date.to_string()}))
        .collect();
    let reported: Vec<Json> = book
        .reported_positions
        .iter()
        .map(|r| {
            let key = inst(r.instrument);
            json!({"account": account_id(r.account), "exchange": key.exchange, "symbol": key.symbol,
                   "quantity": text(&r.quantity)})
        })
        .collect();
    let actions: Vec<Json> = book
        .corporate_actions
        .iter()
        .map(|a| {
            let mut m = JsonMap::new();
            m.insert("id".into(), a.id.clone().into());
            m.insert("account".into(), account_id(a.account).into());
            place(&mut m, inst(a.instrument), "");
            m.insert("kind".into(), a.kind.as_str().into());
            m.insert("date".into(), a.date.to_string().into());
            let ratio = |m: &mut JsonMap<String, Json>, new: &Decimal, old: &Decimal| {
                m.insert("new_units".into(), text(new));
                m.insert("old_units".into(), text(old));
            };
            match &a.kind {
                ActionKind::Split { new, old } => ratio(&mut m, new, old),
                ActionKind::StockMerger { into, new, old } => {
                    place(&mut m, inst(*into), "target_");
                    ratio(&mut m, new, old);
                }
                ActionKind::SymbolChange { into } => place(&mut m, inst(*into), "target_"),
                ActionKind::CashMerger {
                    cash_per_unit,
                    quantity,
                } => {
                    m.insert("cash_per_unit".into(), text(cash_per_unit));
                    if let Some(q) = quantity {
                        m.insert("quantity".into(), text(q));
                    }
                }
                ActionKind::SpinOff {
                    child,
                    new,
                    old,
                    cost_fraction,
                } => {
                    place(&mut m, inst(*child), "target_");
                    ratio(&mut m, new, old);
                    m.insert("cost_fraction".into(), text(cost_fraction));
                }
                ActionKind::CashInLieu { quantity, amount } => {
                    m.insert("quantity".into(), text(quantity));
                    m.insert("amount".into(), text(amount));
                }
                ActionKind::Expiry { quantity } => {
                    if let Some(q) = quantity {
                        m.insert("quantity".into(), text(q));
                    }
                }
                ActionKind::Exercise { quantity, fill }
                | ActionKind::Assignment { quantity, fill } => {
                    if let Some(q) = quantity {
                        m.insert("quantity".into(), text(q));
                    }
                    m.insert("fill".into(), fill.id.clone().into());
                }
            }
            Json::Object(m)
        })
        .collect();
    let out = json!({
        "format": FORMAT,
        "base_currency": book.base_currency.code(),
        "as_of": book.as_of.to_string(),
        "accounts": accounts,
        "instruments": instruments,
        "opening_positions": opening,
        "fills": fills,
        "cash": cash,
        "marks": marks,
        "fx_rates": fx,
        "reported_positions": reported,
        "corporate_actions": actions,
    });
    serde_json::to_string_pretty(&out).unwrap_or_default()
}

/// A broker whose accounts come from a book file (or the embedded demo).
#[derive(Debug)]
pub struct BookBroker {
    label: String,
    book: Source,
}

#[derive(Debug)]
enum Source {
    Ready(Arc<Book>),
    /// Being read on a thread of its own (see [`BookBroker::background`]).
    Loading(Arc<Pending>),
}

/// A book file being read in the background, and what came of it.
#[derive(Debug)]
struct Pending {
    /// The base currency as the head of the file states it, until the file is read.
    head_base: Option<Currency>,
    done: std::sync::Mutex<Option<Result<Arc<Book>, BookError>>>,
    /// Wakes the threads waiting in [`Pending::wait_blocking`].
    finished: std::sync::Condvar,
    /// Wakes the tasks waiting in [`Pending::wait`].
    notify: tokio::sync::Notify,
}

impl Pending {
    fn peek(&self) -> Option<Result<Arc<Book>, BookError>> {
        self.done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn finish(&self, outcome: Result<Arc<Book>, BookError>) {
        *self
            .done
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(outcome);
        self.finished.notify_all();
        self.notify.notify_waiters();
    }

    async fn wait(&self) -> Result<Arc<Book>, BookError> {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(outcome) = self.peek() {
                return outcome;
            }
            notified.await;
        }
    }

    /// For the broker's synchronous methods: on a multi-threaded runtime the worker is
    /// handed over while it waits, so the transport keeps answering.
    fn wait_blocking(&self) -> Result<Arc<Book>, BookError> {
        let wait = || {
            let mut done = self
                .done
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            loop {
                if let Some(outcome) = done.as_ref() {
                    return outcome.clone();
                }
                done = self
                    .finished
                    .wait(done)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
    }
}

impl BookBroker {
    pub fn new(label: impl Into<String>, book: Book) -> Self {
        Self {
            label: label.into(),
            book: Source::Ready(Arc::new(book)),
        }
    }

    /// Loads a book file.
    ///
    /// # Errors
    /// The file's [`BookError`].
    pub fn open(path: &Path) -> Result<Self, BookError> {
        Ok(Self::new(path.display().to_string(), load_book(path)?))
    }

    /// Starts reading a book file on a thread of its own and returns at once: what the
    /// server serves from, so `initialize` never waits for a book however long. The
    /// first snapshot waits for the file; a broken file is that snapshot's error (and
    /// every later one's). The base currency is read from the head of the file
    /// meanwhile, for the server's instructions.
    pub fn background(path: &Path) -> Self {
        let pending = Arc::new(Pending {
            head_base: head_base_currency(path),
            done: std::sync::Mutex::new(None),
            finished: std::sync::Condvar::new(),
            notify: tokio::sync::Notify::new(),
        });
        let load = {
            let pending = Arc::clone(&pending);
            let path = path.to_path_buf();
            move || pending.finish(load_book(&path).map(Arc::new))
        };
        if let Err(e) = std::thread::Builder::new()
            .name("tradedesk-book".to_owned())
            .spawn(load)
        {
            pending.finish(Err(BookError {
                source: path.display().to_string(),
                issues: vec![BookIssue {
                    path: "$".to_owned(),
                    rule: format!("cannot start reading the file: {e}"),
                }],
            }));
        }
        Self {
            label: path.display().to_string(),
            book: Source::Loading(pending),
        }
    }

    /// The book, once read (waiting for a file still being read).
    ///
    /// # Errors
    /// The file's [`BookError`].
    pub async fn book(&self) -> Result<Arc<Book>, BookError> {
        match &self.book {
            Source::Ready(book) => Ok(Arc::clone(book)),
            Source::Loading(pending) => pending.wait().await,
        }
    }

    fn book_blocking(&self) -> Result<Arc<Book>, BookError> {
        match &self.book {
            Source::Ready(book) => Ok(Arc::clone(book)),
            Source::Loading(pending) => pending.wait_blocking(),
        }
    }
}

/// The `base_currency` of a book file as its first 64 KiB state it (every writer of
/// the format puts it near the top), without reading the rest; `None` when it is not
/// there or not a currency.
fn head_base_currency(path: &Path) -> Option<Currency> {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};
    use std::io::Read;

    struct Find<'f>(&'f mut Option<Currency>);
    impl<'de> Visitor<'de> for Find<'_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a book")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "base_currency" {
                    let text = map.next_value::<std::borrow::Cow<'de, str>>()?;
                    *self.0 = text_rule(&text).ok().and_then(|t| currency_rule(t).ok());
                    return Ok(());
                }
                map.next_value::<IgnoredAny>()?;
            }
            Ok(())
        }
    }

    // Only a plain file: opening a pipe would wait for its writer.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let mut head = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(64 * 1024).read_to_end(&mut head))
        .ok()?;
    let mut found = None;
    // The head stops mid-file: the error at its end is expected, what was found stands.
    let _ = serde_json::Deserializer::from_slice(&head).deserialize_map(Find(&mut found));
    found
}

/// The markets of a book account whose file names `broker`: what the live adapter of that
/// broker answers (a Moomoo account, the one market its currency names); none for a
/// broker whose markets are not known here.
fn recorded_markets(broker: &str, currency: tradedesk_core::Currency) -> Vec<Market> {
    match broker {
        "hyperliquid" => crate::hyperliquid::MARKETS.to_vec(),
        "alpaca" => crate::alpaca::MARKETS.to_vec(),
        "metatrader" => crate::dwx::MARKETS.to_vec(),
        "moomoo" => crate::calendar::market_of_currency(currency),
        "sim" => crate::sim::MARKETS.to_vec(),
        _ => Vec::new(),
    }
}

#[async_trait]
impl Broker for BookBroker {
    fn accounts(&self) -> Vec<Account> {
        self.book_blocking()
            .map(|book| book.accounts.clone())
            .unwrap_or_default()
    }

    /// A book account trades what a live account of the broker its file names does.
    fn markets(&self, account: &str) -> Vec<Market> {
        self.accounts()
            .into_iter()
            .find(|a| a.id == account)
            .map(|a| recorded_markets(&a.broker, a.currency))
            .unwrap_or_default()
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        self.book().await.map_err(BrokerError::InvalidBook)
    }

    fn base_currency(&self) -> Option<tradedesk_core::Currency> {
        match &self.book {
            Source::Ready(book) => Some(book.base_currency),
            Source::Loading(pending) => match pending.peek() {
                Some(Ok(book)) => Some(book.base_currency),
                _ => pending.head_base,
            },
        }
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let book = match self.book().await {
            Ok(book) => book,
            Err(e) => {
                return vec![AccountHealth {
                    account: self.label.clone(),
                    broker: "book".to_owned(),
                    mode: Mode::Book,
                    status: HealthStatus::Down,
                    latency_ms: None,
                    detail: format!("{}: book refused: {}", self.label, e.first()),
                    hint: Some(BOOK_FIX.to_owned()),
                }];
            }
        };
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        book.accounts
            .iter()
            .map(|a| AccountHealth {
                account: a.id.clone(),
                broker: a.broker.clone(),
                mode: Mode::Book,
                status: HealthStatus::Ok,
                latency_ms: Some(latency_ms),
                detail: format!("{}, as of {}", self.label, book.as_of),
                hint: None,
            })
            .collect()
    }

    /// The instruments the account's own book knows ([`crate::search::from_book`]).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        let book = self.book().await.map_err(BrokerError::InvalidBook)?;
        if !book.accounts.iter().any(|a| a.id == account) {
            return Err(BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: format!("{} holds no such account", self.label),
            });
        }
        Ok(crate::search::from_book(&book, account, query))
    }
}

/// How to get past a refused book file.
pub const BOOK_FIX: &str = "fix the file at the JSON path named, then restart the server";

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_book_account_trades_the_markets_of_the_broker_its_file_names() {
        let of =
            |broker: &str, ccy: &str| recorded_markets(broker, tradedesk_core::Currency::new(ccy));
        assert_eq!(of("moomoo", "MYR"), [Market::Bursa]);
        assert_eq!(of("moomoo", "HKD"), [Market::Hkex]);
        assert_eq!(of("moomoo", "USD"), [Market::Nyse]);
        assert_eq!(of("moomoo", "SGD"), []);
        assert_eq!(of("alpaca", "USD"), [Market::Nyse, Market::Crypto]);
        assert_eq!(of("metatrader", "USD"), [Market::Fx]);
        assert_eq!(of("hyperliquid", "USD"), [Market::Hyperliquid]);
        assert_eq!(
            of("sim", "USD"),
            [Market::Nyse, Market::Bursa, Market::Perp]
        );
        assert_eq!(of("ibkr", "USD"), []);
    }

    proptest! {
        /// The digit-by-digit reading gives what the general parser gives, scale and all.
        #[test]
        fn small_decimals_read_as_the_general_parser_reads_them(
            text in "-?[0-9]{0,20}(\\.[0-9]{0,20})?|[0-9.]{1,6}|[0-9]{1,3}\\.[0-9]{1,3}[a-z ]?",
        ) {
            if let Some(fast) = small_decimal(&text) {
                let general = Decimal::from_str_exact(&text).unwrap();
                prop_assert_eq!(fast, general);
                prop_assert_eq!(fast.scale(), general.scale());
                prop_assert_eq!(fast.to_string(), general.to_string());
                prop_assert_eq!(fast.is_sign_negative(), general.is_sign_negative());
            }
        }
    }

    #[test]
    fn small_decimals_keep_their_scale() {
        for text in [
            "0",
            "0.000",
            "007.50",
            "150.25",
            "999999999999999999",
            "0.00000000000000001",
        ] {
            let fast = small_decimal(text).unwrap();
            assert_eq!(
                fast.to_string(),
                Decimal::from_str_exact(text).unwrap().to_string()
            );
        }
        for text in [
            "",
            ".",
            "5.",
            ".5",
            "-1",
            "1.2.3",
            "1e5",
            "+1",
            "1 ",
            "1234567890123456789",
        ] {
            assert_eq!(small_decimal(text), None, "{text}");
        }
    }
}
