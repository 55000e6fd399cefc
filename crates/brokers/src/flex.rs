//! Import of an IBKR **Activity Flex** statement (XML) into a tradedesk book
//! (`tradedesk-book/1`).
//!
//! [`flex_to_book`] reads the whole statement (one `<FlexQueryResponse>` holding one
//! `<FlexStatement>` per account) and returns the book as typed rows
//! ([`crate::book::BookRows`]), with notes on every choice it had to make.
//! [`FlexImport::to_book`] hands the rows to the book loader's validator, which checks
//! them by the rules of a book file and assembles the `Book` (no JSON text between);
//! [`FlexImport::to_json`] writes the same rows as the `tradedesk-book/1` file that
//! `tradedesk import-flex` saves. It refuses, with a [`FlexError`] that names the
//! element, its position, the attribute and a hint, any row it cannot map faithfully;
//! it never returns a half-imported book.
//!
//! Decimal text is carried exactly: values are kept as text and never pass through
//! binary floating point. Only what the book format requires is normalised (a signed
//! quantity made positive with its side, a paid commission made positive, a leading
//! `+` or leading zeros dropped).
//!
//! # Mapping rules
//!
//! * **Accounts**: one per account id (the `accountId` of each row, else of its
//!   `<FlexStatement>`), written `"{account_prefix}{accountId}"` (default prefix
//!   `IBKR-`), broker `ibkr`. The currency is the `currency` of `<AccountInformation>`;
//!   without it, the most common currency of the account's trades (a note says so);
//!   without trades either, an error. The name is `<AccountInformation name>`, else
//!   `acctAlias`, else absent.
//! * **Instruments** are keyed by (exchange, symbol), one per `conid`: the exchange is
//!   `listingExchange`, else the `listingExchange` of another row with the same `conid`,
//!   else `IBKR` (never the venue an execution was routed to, nor a BookTrade's `--`),
//!   with a note; the symbol is the latest one IBKR gave the `conid` (a contract renamed
//!   `GCM.OLD` by a split is one instrument under that name), else the row's own
//!   (trimmed; option and future symbols keep their inner spaces); rows without a
//!   `conid` get a loud note. The
//!   asset class follows `assetCategory`: `STK` is `equity`
//!   (`etf` when `subCategory` is `ETF`), `OPT` and `FOP` `option`, `FUT` `future`,
//!   `CASH` `fx`, `CFD` `cfd`, `BOND` and `BILL` `bond`, `FUND` `fund`, `CRYPTO`
//!   `crypto`; any other category is an error naming the row. The multiplier is
//!   `multiplier`; absent, empty or `0` it is left out of the book, which takes 1 and,
//!   for an option, future or CFD, lists the instrument as an unknown spec (see
//!   docs/methodology/instruments.md); the name is `description`.
//! * **Fills** come from the `<Trades>` section (see *Level of detail* below): `id` is
//!   `ibExecID`, else `tradeID`; `side` is `buySell`, else the sign of `quantity`;
//!   `quantity` its absolute value; `price` is `tradePrice`; `commission` is the
//!   absolute value of a paid (negative) `ibCommission`, in `ibCommissionCurrency`
//!   (else the trade currency); `time` is `dateTime`. A positive `ibCommission` (a
//!   rebate) leaves the commission at `0` and becomes a cash entry of kind `interest`.
//!   Paid `taxes` (stamp duty, transaction taxes) add to the commission when it is in
//!   the trade currency, else they are a cash `fee` in the trade currency.
//!   A row whose `buySell` ends in `(Ca.)` is a cancellation: it is never a fill, and
//!   the trade it cancels is left out too when it can be identified
//!   ([`FlexOptions::drop_cancelled_originals`]).
//! * **Cash** comes from `<CashTransactions>` (`DETAIL` rows): `Deposits/Withdrawals`
//!   is a `deposit` or a `withdrawal` by its sign; `Dividends` and `Payment In Lieu Of
//!   Dividends` are `dividend`; `Other Fees`, `Broker Fees`, `Advisor Fees`, `Broker
//!   Interest Paid` and `Commission Adjustments` are `fee`; `Broker Interest Received`
//!   and bond interest are `interest`; withholding of every kind is `tax` (withheld
//!   negative, refunded positive); a type tradedesk does not know is left out with a
//!   note. Amounts keep their sign as seen by the account.
//!   Since the book requires dividends > 0 and fees < 0, a negative dividend (a
//!   reversal) is recorded as a `fee` and a positive fee-type row (a refund) as
//!   `interest`, each with a note.
//! * **Corporate actions** come from `<CorporateActions>`: see
//!   [`Builder::corporate_actions`] for how IBKR's rows become the book's actions, and
//!   docs/methodology/corporate-actions.md for the rules (spin-off cost fractions from
//!   [`FlexOptions::cost_fractions`] or the Open Positions, stock-and-cash mergers).
//!   Two `conid`s with one symbol on one exchange are two instruments, the later named
//!   `SYMBOL (conid N)`.
//!   An option's exercise, assignment or expiry (a price-0 trade row coded `Ex`, `A`
//!   or `Ep`) is the book's action of that kind, linked to the delivered stock trade
//!   ([`Builder::option_event`]), never a fill.
//! * **Marks and reported positions** come from `<OpenPositions>` (`markPrice` at
//!   `reportDate`; `position` signed as IBKR reports it).
//! * **FX rates** come from `<ConversionRates>` (`1 fromCurrency = rate toCurrency` on
//!   `reportDate`); IBKR's `-1` placeholder for a missing rate is skipped.
//! * **`as_of`** is the latest `toDate` of the statements and `reportDate` of the open
//!   positions and conversion rates; **`base_currency`** is the first account's currency.
//!
//! # Level of detail
//!
//! Only rows whose `levelOfDetail` is `EXECUTION` are fills (a `<Trade>` without the
//! attribute counts as an execution, an `<Order>` as an order). `ORDER`,
//! `SYMBOL_SUMMARY`, `ASSET_SUMMARY` and `CLOSED_LOT` rows are skipped; a statement that
//! has no execution rows but has order rows uses its order rows as fills (their id is
//! `ibExecID`, else `tradeID`, else `ibOrderID`), with a note.
//!
//! # Times
//!
//! Flex times are wall-clock times in the zone configured on the query, usually US
//! Eastern. [`FlexTimeZone::NewYork`] (the default) applies the US daylight-saving rule
//! (from 2007: second Sunday of March 02:00 to first Sunday of November 02:00 is
//! `-04:00`, otherwise `-05:00`; before 2007: first Sunday of April to last Sunday of
//! October). A fixed offset can be given instead. A date without a time is taken as
//! 00:00 of that date.

use std::collections::HashMap;
use std::fmt;

use crate::book::{
    AccountRow, BookError, BookRows, CashRow, FillRow, FormatLine, FxRow, InstrumentRow, KeyedRow,
    MarkRow, PositionRow,
};
use chrono::{
    Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, SecondsFormat, TimeZone, Weekday,
};
use quick_xml::events::{BytesStart, Event};
use quick_xml::{Reader, XmlVersion};
use rust_decimal::Decimal;

/// The largest statement [`flex_to_book`] accepts: 256 MiB of XML.
pub const MAX_FLEX_BYTES: usize = 256 * 1024 * 1024;

/// The book format written.
/// The broker name written on every account.
const BROKER: &str = "ibkr";
/// At most this many characters of an attribute value appear in a message.
const MAX_SHOWN: usize = 64;
/// Deeper nesting than this is not a Flex statement.
const MAX_DEPTH: usize = 64;
/// The book format refuses more decimal places than this.
const MAX_PLACES: u32 = tradedesk_core::bounds::MAX_PLACES;
/// The book format refuses magnitudes above 10^this.
const MAX_MAGNITUDE_DIGITS: u32 = tradedesk_core::bounds::VALUE_DIGITS;
/// The hint given for an unreadable date or time.
const DATE_HINT: &str = "set the Flex Query's date format to yyyyMMdd (or yyyy-MM-dd) and its time format to HHmmss (or HH:mm:ss)";
/// The hint given for an unreadable number.
const DECIMAL_HINT: &str =
    "numbers must be plain decimals such as -1.25 (no exponent, spaces or thousands separators)";

// ---------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------

/// The time zone the Flex Query writes its times in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FlexTimeZone {
    /// `America/New_York` (US Eastern), with the US daylight-saving rule applied:
    /// `-04:00` from the second Sunday of March 02:00 to the first Sunday of November
    /// 02:00 local time (from 2007; before 2007, first Sunday of April to last Sunday of
    /// October), `-05:00` otherwise. An ambiguous time in the repeated hour of November
    /// is read as the first (daylight) one; a time in the skipped hour of March as
    /// daylight time.
    #[default]
    NewYork,
    /// A fixed offset from UTC, for a query configured in a zone without daylight
    /// saving (or to override the rule).
    Fixed(FixedOffset),
}

impl FlexTimeZone {
    /// Parses `America/New_York` (also `US/Eastern`, `EST5EDT`), `UTC`/`Z`, or a fixed
    /// offset written `+HH:MM` / `-HH:MM`.
    ///
    /// # Errors
    ///
    /// Any other text, or an offset of 24 hours or more.
    pub fn parse(text: &str) -> Result<Self, FlexError> {
        let t = text.trim();
        let bad = || {
            FlexError::new(
                "the time zone option",
                None,
                format!("{} is not a supported time zone", shown(t)),
                "give America/New_York, UTC, or a fixed offset such as -05:00 or +08:00",
            )
        };
        match t {
            "America/New_York" | "US/Eastern" | "EST5EDT" => return Ok(Self::NewYork),
            "UTC" | "Z" | "GMT" | "Etc/UTC" => {
                return FixedOffset::east_opt(0).map(Self::Fixed).ok_or_else(bad);
            }
            _ => {}
        }
        let (sign, rest) = if let Some(r) = t.strip_prefix('+') {
            (1, r)
        } else if let Some(r) = t.strip_prefix('-') {
            (-1, r)
        } else {
            return Err(bad());
        };
        let (h, m) = rest.split_once(':').ok_or_else(bad)?;
        let two_digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
        if !two_digits(h) || !two_digits(m) {
            return Err(bad());
        }
        let hours: i32 = h.parse().map_err(|_| bad())?;
        let minutes: i32 = m.parse().map_err(|_| bad())?;
        if hours > 23 || minutes > 59 {
            return Err(bad());
        }
        FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60))
            .map(Self::Fixed)
            .ok_or_else(bad)
    }

    /// The offset in force at a local wall-clock time.
    fn offset_at(self, local: NaiveDateTime) -> Option<FixedOffset> {
        match self {
            Self::Fixed(offset) => Some(offset),
            Self::NewYork => {
                let hours = if us_eastern_daylight(local) { 4 } else { 5 };
                FixedOffset::west_opt(hours * 3600)
            }
        }
    }

    /// How the zone is named in notes.
    fn describe(self) -> String {
        match self {
            Self::NewYork => {
                "America/New_York (US daylight-saving rule applied: -04:00 in summer, -05:00 in winter)".to_owned()
            }
            Self::Fixed(offset) => format!("the fixed offset {offset} (no daylight saving)"),
        }
    }
}

/// How [`flex_to_book`] maps a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlexOptions {
    /// The zone the Flex Query writes its times in (default: `America/New_York`).
    pub time_zone: FlexTimeZone,
    /// Put before each IBKR account id to make the book's account id (default `IBKR-`,
    /// so `U1234567` becomes `IBKR-U1234567`).
    pub account_prefix: String,
    /// When a cancellation row (`buySell` ending in `(Ca.)`) names the trade it cancels
    /// (`origTradeID`, or failing that a single trade of the same account, instrument,
    /// quantity, price and trade date), leave that trade out too (default `true`). The
    /// cancellation row itself is never a fill.
    pub drop_cancelled_originals: bool,
    /// The share (0 to 1) of the parent's cost basis that a spin-off, rights issue or
    /// dividend in kind gives the new instrument, by the new instrument's symbol as IBKR
    /// writes it on the corporate-action row. IBKR's row does not state it; without an
    /// entry it is taken from the statement's Open Positions where they show it, else the
    /// action is left out with a note (docs/methodology/corporate-actions.md).
    pub cost_fractions: std::collections::BTreeMap<String, Decimal>,
}

impl Default for FlexOptions {
    fn default() -> Self {
        Self {
            time_zone: FlexTimeZone::NewYork,
            account_prefix: "IBKR-".to_owned(),
            drop_cancelled_originals: true,
            cost_fractions: std::collections::BTreeMap::new(),
        }
    }
}

/// Reads a cost fraction given for [`FlexOptions::cost_fractions`] (`0.25`): a decimal
/// from 0 to 1.
///
/// # Errors
/// A message naming the symbol, the value and the rule.
pub fn parse_cost_fraction(symbol: &str, text: &str) -> Result<Decimal, String> {
    let value = text
        .trim()
        .parse::<Decimal>()
        .ok()
        .or_else(|| Decimal::from_scientific(text.trim()).ok());
    match value {
        Some(v) if v >= Decimal::ZERO && v <= Decimal::ONE => Ok(v.normalize()),
        _ => Err(format!(
            "cost fraction {} for {}: must be a decimal from 0 to 1 (the share of the parent's cost basis the new instrument takes, such as 0.25)",
            shown(text),
            shown(symbol)
        )),
    }
}

/// What [`flex_to_book`] made of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlexImport {
    /// The book as typed rows: what [`FlexImport::to_book`] validates and assembles, and
    /// what [`FlexImport::to_json`] writes as the `tradedesk-book/1` file.
    pub rows: BookRows,
    /// Every choice the import made that a reader of the book should know about
    /// (skipped rows, re-classified cash, inferred currencies, the time zone used).
    pub notes: Vec<String>,
    /// How many fills the book holds.
    pub fills: usize,
    /// How many rows of the statement were left out (non-execution trade rows,
    /// cancellations and the trades they cancel, summary rows, zero amounts, duplicates,
    /// placeholder rates); the notes say which and why.
    pub skipped: usize,
}

/// Why a statement could not be imported: where (the element, its position and line),
/// which attribute, what is wrong, and a hint. At most 64 characters of any attribute
/// value are ever shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlexError {
    location: String,
    attribute: Option<String>,
    problem: String,
    hint: String,
}

impl FlexError {
    fn new(
        location: impl Into<String>,
        attribute: Option<&str>,
        problem: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        Self {
            location: location.into(),
            attribute: attribute.map(str::to_owned),
            problem: problem.into(),
            hint: hint.into(),
        }
    }

    /// Where the problem is, e.g. `the 3rd <Trade> of account U1234567 (line 14)`.
    #[must_use]
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The attribute at fault, when one is.
    #[must_use]
    pub fn attribute(&self) -> Option<&str> {
        self.attribute.as_deref()
    }

    /// What is wrong.
    #[must_use]
    pub fn problem(&self) -> &str {
        &self.problem
    }

    /// What to do about it.
    #[must_use]
    pub fn hint(&self) -> &str {
        &self.hint
    }
}

impl fmt::Display for FlexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.location)?;
        if let Some(attribute) = &self.attribute {
            write!(f, ", attribute {attribute}")?;
        }
        write!(f, ": {} (hint: {})", self.problem, self.hint)
    }
}

impl std::error::Error for FlexError {}

impl FlexImport {
    /// The book: the rows checked by the rules of a book file (docs/methodology/book-format.md)
    /// and assembled, with no JSON text between; a refusal names the same paths as the
    /// file [`FlexImport::to_json`] writes would. `source` names the book in a refusal.
    ///
    /// # Errors
    /// A [`BookError`] when a row breaks a rule of the book format.
    pub fn to_book(&self, source: &str) -> Result<tradedesk_core::Book, BookError> {
        crate::book::assemble_rows(source, &self.rows)
    }

    /// The `tradedesk-book/1` document of the same rows (what `tradedesk import-flex`
    /// writes).
    #[must_use]
    pub fn to_json(&self) -> serde_json::Value {
        // Rows of strings and flags always serialize.
        serde_json::to_value(&self.rows).unwrap_or_default()
    }
}

/// Converts an IBKR Activity Flex statement (the XML a Flex Query returns) into a
/// `tradedesk-book/1` document. The module documentation states every mapping rule.
///
/// # Errors
///
/// A [`FlexError`] when the input is larger than [`MAX_FLEX_BYTES`], is not well-formed
/// XML, has a DOCTYPE or an entity other than the five XML ones, is not a
/// `FlexQueryResponse`, or has a row that cannot be mapped (a missing id, an unknown
/// asset category or cash type, an unreadable number or date, ...).
pub fn flex_to_book(xml: &str, options: &FlexOptions) -> Result<FlexImport, FlexError> {
    check_size(xml.len(), MAX_FLEX_BYTES)?;
    let document = read_document(xml)?;
    let mut builder = Builder::new(options);
    builder.run(&document)?;
    builder.finish(&document)
}

// ---------------------------------------------------------------------------------
// Small helpers: shown values, ordinals, decimals, dates
// ---------------------------------------------------------------------------------

fn check_size(len: usize, limit: usize) -> Result<(), FlexError> {
    if len > limit {
        return Err(FlexError::new(
            "the input",
            None,
            format!("{len} bytes, more than the {limit} bytes accepted"),
            "split the history into several Flex statements (for example one per year)",
        ));
    }
    Ok(())
}

/// A value for a message: quoted, and cut to [`MAX_SHOWN`] characters.
fn shown(value: &str) -> String {
    format!("'{}'", cut(value))
}

/// A value cut to [`MAX_SHOWN`] characters (with `…` when cut).
fn cut(value: &str) -> String {
    let mut out: String = value
        .chars()
        .take(MAX_SHOWN)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if value.chars().nth(MAX_SHOWN).is_some() {
        out.push('…');
    }
    out
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// An exact decimal as the statement writes it (`rust_decimal` keeps the scale, so
/// `1.50` stays `1.50`), held to the book's bounds: at most 18 decimal places and a
/// magnitude of at most 1e12.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dec(Decimal);

impl Dec {
    const ONE: Self = Self(Decimal::ONE);
    const ZERO: Self = Self(Decimal::ZERO);

    fn within_bounds(value: Decimal) -> Option<Self> {
        (value.scale() <= MAX_PLACES
            && value.abs() <= Decimal::from(10_i64.pow(MAX_MAGNITUDE_DIGITS)))
        .then_some(Self(value))
    }

    /// Parses `[+-]digits[.digits]` (also `.5` and `5.`): no exponent, no separators.
    fn parse(text: &str) -> Result<Self, &'static str> {
        let body = text.strip_prefix(['-', '+']).unwrap_or(text);
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() && frac.is_empty() {
            return Err("is not a number");
        }
        if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err("is not a plain decimal number");
        }
        if frac.len() > MAX_PLACES as usize {
            return Err("has more than 18 decimal places");
        }
        // `5.` is `5`, `.5` is `0.5`; the sign is the text's.
        let canonical = format!(
            "{}{}{}{frac}",
            if text.starts_with('-') { "-" } else { "" },
            if int.is_empty() { "0" } else { int },
            if frac.is_empty() { "" } else { "." }
        );
        let value =
            Decimal::from_str_exact(&canonical).map_err(|_| "is larger than the supported 1e12")?;
        Self::within_bounds(value).ok_or("is larger than the supported 1e12")
    }

    fn is_zero(self) -> bool {
        self.0.is_zero()
    }

    fn is_negative(self) -> bool {
        self.0.is_sign_negative() && !self.0.is_zero()
    }

    fn abs(self) -> Self {
        Self(self.0.abs())
    }

    fn checked_add(self, other: Self) -> Option<Self> {
        self.0.checked_add(other.0).and_then(Self::within_bounds)
    }

    fn same_value(self, other: Self) -> bool {
        self.0 == other.0
    }
}

impl fmt::Display for Dec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The option event a trade row records, by its codes (`notes`, `code`: `;`-separated)
/// at a price of 0: `Ex` (and `AEx`, an automatic exercise) an exercise, `A` an
/// assignment, `Ep` an expiry.
fn option_event(row: &Row) -> Option<&'static str> {
    let option = row
        .get("assetCategory")
        .is_some_and(|c| asset_class(c, row.get("subCategory")) == Some("option"));
    let at_zero = row
        .get("tradePrice")
        .and_then(|p| Dec::parse(p).ok())
        .is_some_and(Dec::is_zero);
    if !option || !at_zero {
        return None;
    }
    match event_code(row) {
        Some("Ex") => Some("exercise"),
        Some("A") => Some("assignment"),
        Some("Ep") => Some("expiry"),
        _ => None,
    }
}

/// The option-event code among a row's `notes` and `code`, if any.
fn event_code(row: &Row) -> Option<&'static str> {
    let codes = [row.get("notes"), row.get("code")];
    let has = |wanted: &[&str]| {
        codes
            .iter()
            .flatten()
            .any(|text| text.split(';').map(str::trim).any(|c| wanted.contains(&c)))
    };
    if has(&["Ex", "AEx"]) {
        Some("Ex")
    } else if has(&["A"]) {
        Some("A")
    } else if has(&["Ep"]) {
        Some("Ep")
    } else {
        None
    }
}

/// A row's date for ordering names: `tradeDate`, else `reportDate`, else the date of
/// `dateTime`.
fn row_date(row: &Row) -> Option<NaiveDate> {
    ["tradeDate", "reportDate", "dateTime"]
        .iter()
        .find_map(|a| {
            let text = row.get(a)?;
            parse_flex_date(text)
                .or_else(|| text.get(..8).and_then(parse_flex_date))
                .or_else(|| text.get(..10).and_then(parse_flex_date))
        })
}

/// The `n FOR m` of a description such as `GCM(CA38501D2041) SPLIT 1 FOR 25 (...)`:
/// (new units, old units), both positive whole numbers.
fn split_ratio(upper: &str) -> Option<(u64, u64)> {
    let rest = upper.split("SPLIT ").nth(1)?;
    let mut words = rest.split_whitespace();
    let new = words.next()?.parse::<u64>().ok()?;
    (words.next()? == "FOR").then_some(())?;
    let old = words
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse::<u64>()
        .ok()?;
    (new > 0 && old > 0).then_some((new, old))
}

/// The first `n FOR m` of a description (`SPINOFF  1 FOR 10`, `STOCK DIVIDEND 1 FOR 20`,
/// `592 FOR 1000 AND USD 4.24`): (n, m), both positive.
fn ratio_in(upper: &str) -> Option<(Decimal, Decimal)> {
    let words: Vec<&str> = upper.split_whitespace().collect();
    words.windows(3).find_map(|w| {
        let [n, word, m] = w else {
            return None;
        };
        if *word != "FOR" {
            return None;
        }
        let number = |t: &str| {
            t.trim_matches(|c: char| !c.is_ascii_digit() && c != '.')
                .parse::<Decimal>()
                .ok()
                .filter(|d| *d > Decimal::ZERO)
        };
        Some((number(n)?, number(m)?))
    })
}

/// The holding a corporate action's description starts with: `PARENT(ISIN) ...` gives
/// (`PARENT`, `ISIN`).
fn description_head(description: &str) -> Option<(&str, &str)> {
    let open = description.find('(')?;
    let close = open + description.get(open..)?.find(')')?;
    let symbol = description.get(..open)?.trim();
    let isin = description.get(open + 1..close)?.trim();
    (!symbol.is_empty() && !isin.is_empty() && !isin.contains(' ')).then_some((symbol, isin))
}

/// Whether a one-row corporate action that only delivers units is one paid on a holding:
/// by IBKR's type code (`SO` spin-off, `CO` contract spin-off, `RI` rights issue, `DI`
/// dividend rights issue, `SD` stock dividend, `HI` choice dividend issue, `PI` purchase
/// issue), or, on statements without the code, by its description.
fn is_delivery(code: Option<&str>, upper: &str) -> bool {
    match code {
        Some("SO" | "CO" | "RI" | "DI" | "SD" | "HI" | "PI") => true,
        Some(c) if !c.is_empty() => false,
        _ => [
            "SPINOFF",
            "SPIN-OFF",
            "STOCK DIVIDEND",
            "RIGHTS ISSUE",
            "SUBSCRIBABLE RIGHTS",
            "BONUS ISSUE",
        ]
        .iter()
        .any(|w| upper.contains(w)),
    }
}

/// A stock-and-cash merger's two rows, for [`Builder::stock_and_cash`].
struct StockAndCash<'a> {
    from: &'a (String, String),
    old: Dec,
    to: &'a (String, String),
    new: Dec,
    cash: Dec,
    out_row: &'a Row,
    in_row: &'a Row,
}

/// A delivery of new units, for [`Builder::delivery`].
struct Delivery<'a> {
    to: &'a (String, String),
    quantity: Dec,
    row: &'a Row,
    description: &'a str,
    code: Option<&'a str>,
}

/// `YYYYMMDD` or `YYYY-MM-DD`.
fn parse_flex_date(text: &str) -> Option<NaiveDate> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (y, m, d) = match text.len() {
        8 if digits(text) => (text.get(0..4)?, text.get(4..6)?, text.get(6..8)?),
        10 => {
            let mut parts = text.split('-');
            let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
            if parts.next().is_some() || y.len() != 4 || m.len() != 2 || d.len() != 2 {
                return None;
            }
            (y, m, d)
        }
        _ => return None,
    };
    if !digits(y) || !digits(m) || !digits(d) {
        return None;
    }
    NaiveDate::from_ymd_opt(y.parse().ok()?, m.parse().ok()?, d.parse().ok()?)
}

/// `HHmmss`, `HH:mm:ss`, `HHmm` or `HH:mm`.
fn parse_flex_time(text: &str) -> Option<NaiveTime> {
    let digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
    let parts: Vec<&str> = if text.contains(':') {
        text.split(':').collect()
    } else {
        match text.len() {
            6 => vec![text.get(0..2)?, text.get(2..4)?, text.get(4..6)?],
            4 => vec![text.get(0..2)?, text.get(2..4)?],
            _ => return None,
        }
    };
    if parts.len() < 2 || parts.len() > 3 || !parts.iter().all(|p| digits(p)) {
        return None;
    }
    let h = parts.first()?.parse().ok()?;
    let m = parts.get(1)?.parse().ok()?;
    let s = match parts.get(2) {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    NaiveTime::from_hms_opt(h, m, s)
}

/// A Flex date-time in any of the spellings a query can be set to write:
/// `20250314;103512`, `2025-03-14;10:35:12`, `20250314 103512`, `2025-03-14, 10:35:12`,
/// or a date alone (read as 00:00).
fn parse_flex_datetime(text: &str) -> Option<NaiveDateTime> {
    let (date, time) = match text.find([';', ' ', ',', 'T']) {
        Some(i) => (
            text.get(..i)?,
            text.get(i + 1..)?.trim_start_matches([',', ' ']),
        ),
        None => (text, ""),
    };
    let date = parse_flex_date(date)?;
    let time = if time.is_empty() {
        NaiveTime::MIN
    } else {
        parse_flex_time(time)?
    };
    Some(date.and_time(time))
}

/// Whether a New York wall-clock time is in daylight-saving time (see
/// [`FlexTimeZone::NewYork`]).
pub(crate) fn us_eastern_daylight(local: NaiveDateTime) -> bool {
    let year = local.year();
    let (start, end) = if year >= 2007 {
        (
            NaiveDate::from_weekday_of_month_opt(year, 3, Weekday::Sun, 2),
            NaiveDate::from_weekday_of_month_opt(year, 11, Weekday::Sun, 1),
        )
    } else {
        (
            NaiveDate::from_weekday_of_month_opt(year, 4, Weekday::Sun, 1),
            NaiveDate::from_weekday_of_month_opt(year, 10, Weekday::Sun, 5)
                .or_else(|| NaiveDate::from_weekday_of_month_opt(year, 10, Weekday::Sun, 4)),
        )
    };
    let at_two = |d: Option<NaiveDate>| d.and_then(|d| d.and_hms_opt(2, 0, 0));
    match (at_two(start), at_two(end)) {
        (Some(start), Some(end)) => local >= start && local < end,
        _ => false,
    }
}

/// A date-time and the offset of the zone abbreviation that ends it, if one does
/// (`EDT`, `EST`, `CET`, ...); an unknown abbreviation is left on (and refused).
fn split_zone(text: &str) -> (&str, Option<FixedOffset>) {
    const ZONES: [(&str, i32); 18] = [
        ("EST", -5),
        ("EDT", -4),
        ("CST", -6),
        ("CDT", -5),
        ("MST", -7),
        ("MDT", -6),
        ("PST", -8),
        ("PDT", -7),
        ("GMT", 0),
        ("UTC", 0),
        ("BST", 1),
        ("CET", 1),
        ("CEST", 2),
        ("HKT", 8),
        ("SGT", 8),
        ("MYT", 8),
        ("JST", 9),
        ("AEST", 10),
    ];
    let Some((head, zone)) = text.trim_end().rsplit_once(' ') else {
        return (text, None);
    };
    match ZONES.iter().find(|(name, _)| *name == zone) {
        Some((_, hours)) => (head, FixedOffset::east_opt(hours * 3600)),
        None => (text, None),
    }
}

fn rfc3339(local: NaiveDateTime, zone: FlexTimeZone) -> Option<String> {
    let offset = zone.offset_at(local)?;
    let time = offset.from_local_datetime(&local).single()?;
    Some(time.to_rfc3339_opts(SecondsFormat::Secs, false))
}

fn is_currency_code(text: &str) -> bool {
    text.len() == 3 && text.bytes().all(|b| b.is_ascii_uppercase())
}

// ---------------------------------------------------------------------------------
// Reading the XML
// ---------------------------------------------------------------------------------

/// One element of interest, with its attributes (values unescaped and trimmed).
#[derive(Debug, Clone)]
struct Row {
    element: String,
    /// 1-based position among the elements of the same name in its statement.
    ordinal: usize,
    /// The `accountId` of the enclosing statement (for messages).
    statement_account: String,
    line: usize,
    attrs: Vec<(String, String)>,
}

impl Row {
    /// The value of an attribute; an empty value counts as absent.
    fn get(&self, key: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn location(&self) -> String {
        let account = if self.statement_account.is_empty() {
            "(no accountId)".to_owned()
        } else {
            cut(&self.statement_account)
        };
        if self.element == "FlexStatement" {
            format!(
                "the {} <FlexStatement> (account {account}, line {})",
                ordinal(self.ordinal),
                self.line
            )
        } else {
            format!(
                "the {} <{}> of account {account} (line {})",
                ordinal(self.ordinal),
                self.element,
                self.line
            )
        }
    }

    fn error(
        &self,
        attribute: &str,
        problem: impl Into<String>,
        hint: impl Into<String>,
    ) -> FlexError {
        FlexError::new(self.location(), Some(attribute), problem, hint)
    }

    fn required(&self, attribute: &str, hint: &str) -> Result<&str, FlexError> {
        self.get(attribute)
            .ok_or_else(|| self.error(attribute, "is missing or empty", hint))
    }

    fn decimal(&self, attribute: &str) -> Result<Option<Dec>, FlexError> {
        self.get(attribute)
            .map(|text| {
                Dec::parse(text).map_err(|why| {
                    self.error(attribute, format!("{} {why}", shown(text)), DECIMAL_HINT)
                })
            })
            .transpose()
    }

    fn required_decimal(&self, attribute: &str) -> Result<Dec, FlexError> {
        self.decimal(attribute)?.ok_or_else(|| {
            self.error(
                attribute,
                "is missing or empty",
                "include this field in the Flex Query's section",
            )
        })
    }

    fn currency(&self, attribute: &str) -> Result<Option<&str>, FlexError> {
        match self.get(attribute) {
            None => Ok(None),
            Some(code) if is_currency_code(code) => Ok(Some(code)),
            Some(code) => Err(self.error(
                attribute,
                format!("{} is not an ISO 4217 currency code", shown(code)),
                "currency codes are three upper-case letters such as USD, EUR",
            )),
        }
    }

    fn date(&self, attribute: &str) -> Result<Option<NaiveDate>, FlexError> {
        self.get(attribute)
            .map(|text| {
                parse_flex_date(text).ok_or_else(|| {
                    self.error(
                        attribute,
                        format!("{} is not a date (20250314 or 2025-03-14)", shown(text)),
                        DATE_HINT,
                    )
                })
            })
            .transpose()
    }

    /// The first of `attributes` present, read as a date-time (a date alone is 00:00),
    /// written as RFC 3339 with the zone's offset; with the date it falls on.
    fn time(
        &self,
        attributes: &[&str],
        zone: FlexTimeZone,
    ) -> Result<(String, NaiveDate), FlexError> {
        let Some((attribute, text)) = attributes.iter().find_map(|a| self.get(a).map(|v| (*a, v)))
        else {
            let first = attributes.first().copied().unwrap_or("dateTime");
            return Err(self.error(
                first,
                format!(
                    "is missing (and so are {})",
                    attributes.get(1..).unwrap_or_default().join(", ")
                ),
                "include Date/Time in the Flex Query's section",
            ));
        };
        let bad = || {
            self.error(
                attribute,
                format!(
                    "{} is not a date-time IBKR writes (20250314;103512, 2025-03-14;10:35:12 or 20250314 103512)",
                    shown(text)
                ),
                DATE_HINT,
            )
        };
        // A zone abbreviation after the time (`2025-04-25;10:19:55 EDT`, as some Flex
        // settings write it) states the offset itself.
        let (bare, stated) = split_zone(text);
        let local = parse_flex_datetime(bare).ok_or_else(bad)?;
        let time = match stated {
            Some(offset) => offset
                .from_local_datetime(&local)
                .single()
                .map(|t| t.to_rfc3339_opts(SecondsFormat::Secs, false)),
            None => rfc3339(local, zone),
        }
        .ok_or_else(bad)?;
        Ok((time, local.date()))
    }
}

/// One `<FlexStatement>` and the rows read from it.
#[derive(Debug, Clone)]
struct Statement {
    header: Row,
    info: Vec<Row>,
    trades: Vec<Row>,
    cash: Vec<Row>,
    positions: Vec<Row>,
    rates: Vec<Row>,
    actions: Vec<Row>,
    counts: HashMap<String, usize>,
    /// The sections of the statement tradedesk does not read (`StmtFunds`, ...), in order.
    unread: Vec<String>,
}

impl Statement {
    fn account(&self) -> &str {
        self.header.get("accountId").unwrap_or("")
    }
}

#[derive(Debug, Default)]
struct Document {
    statements: Vec<Statement>,
}

/// Turns byte offsets into 1-based line numbers (offsets must not go backwards much;
/// it rescans from the start when they do).
#[derive(Debug)]
struct Lines<'a> {
    text: &'a [u8],
    offset: usize,
    line: usize,
}

impl<'a> Lines<'a> {
    /// quick-xml counts offsets after a byte-order mark, so the text is taken without it.
    fn new(text: &'a str) -> Self {
        Self {
            text: text.strip_prefix('\u{feff}').unwrap_or(text).as_bytes(),
            offset: 0,
            line: 1,
        }
    }

    fn at(&mut self, offset: u64) -> usize {
        let offset = usize::try_from(offset)
            .unwrap_or(self.text.len())
            .min(self.text.len());
        if offset < self.offset {
            self.offset = 0;
            self.line = 1;
        }
        let newlines = self
            .text
            .get(self.offset..offset)
            .map_or(0, |s| s.iter().fold(0, |n, b| n + usize::from(*b == b'\n')));
        self.line += newlines;
        self.offset = offset;
        self.line
    }
}

fn xml_error(what: &str, line: usize) -> FlexError {
    FlexError::new(
        format!("line {line}"),
        None,
        format!("not well-formed XML: {}", cut(what)),
        "the file may be truncated or damaged; download the Flex statement again (as XML)",
    )
}

fn not_flex(problem: impl Into<String>) -> FlexError {
    FlexError::new(
        "the document",
        None,
        problem,
        "give the XML of an Activity Flex Query (Reports > Flex Queries, format XML)",
    )
}

/// Reads the elements the import uses. Refuses a DOCTYPE, any entity reference other
/// than the five XML ones and character references, a root other than
/// `<FlexQueryResponse>`, and a truncated document.
fn read_document(xml: &str) -> Result<Document, FlexError> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let mut lines = Lines::new(xml);
    let mut stack: Vec<String> = Vec::new();
    let mut doc = Document::default();
    let mut current: Option<usize> = None;
    let mut root_seen = false;
    loop {
        let start = reader.buffer_position();
        let event = match reader.read_event() {
            Ok(event) => event,
            Err(e) => {
                let line = lines.at(reader.error_position());
                return Err(xml_error(&e.to_string(), line));
            }
        };
        match event {
            Event::DocType(_) => {
                return Err(FlexError::new(
                    format!("line {}", lines.at(start)),
                    None,
                    "the document has a DOCTYPE declaration, which is refused (it could define entities)",
                    "a Flex statement has no DOCTYPE: give the XML exactly as IBKR sent it",
                ));
            }
            Event::GeneralRef(reference) => {
                let predefined = matches!(&*reference, "lt" | "gt" | "amp" | "apos" | "quot");
                if !predefined && !reference.is_char_ref() {
                    return Err(FlexError::new(
                        format!("line {}", lines.at(start)),
                        None,
                        format!("the entity reference &{}; is refused", cut(&reference)),
                        "only the five XML entities (&lt; &gt; &amp; &apos; &quot;) and character references are accepted",
                    ));
                }
            }
            Event::Start(element) => {
                let line = lines.at(start);
                let name = open_element(
                    &mut doc,
                    &mut current,
                    &stack,
                    &mut root_seen,
                    &element,
                    line,
                )?;
                if stack.len() >= MAX_DEPTH {
                    return Err(not_flex(format!(
                        "elements are nested more than {MAX_DEPTH} deep at line {line}"
                    )));
                }
                stack.push(name);
            }
            Event::Empty(element) => {
                let line = lines.at(start);
                let name = open_element(
                    &mut doc,
                    &mut current,
                    &stack,
                    &mut root_seen,
                    &element,
                    line,
                )?;
                if name == "FlexStatement" {
                    current = None;
                }
            }
            Event::End(_) => {
                if stack.pop().as_deref() == Some("FlexStatement") {
                    current = None;
                }
            }
            Event::Eof => break,
            Event::Text(_)
            | Event::CData(_)
            | Event::Comment(_)
            | Event::Decl(_)
            | Event::PI(_) => {}
        }
    }
    if let Some(open) = stack.last() {
        return Err(xml_error(
            &format!("the document ends inside <{}>", cut(open)),
            lines.at(u64::MAX),
        ));
    }
    if !root_seen {
        return Err(not_flex(
            "not an IBKR Flex statement: no XML element found (a CSV or text Flex export is not accepted)",
        ));
    }
    if doc.statements.is_empty() {
        return Err(not_flex(
            "no <FlexStatement>: the Flex Query returned no account",
        ));
    }
    Ok(doc)
}

fn attributes_of(
    element: &BytesStart<'_>,
    name: &str,
    line: usize,
) -> Result<Vec<(String, String)>, FlexError> {
    let at = || format!("the <{}> at line {line}", cut(name));
    let mut out = Vec::new();
    for attribute in element.attributes() {
        let attribute = attribute.map_err(|e| {
            FlexError::new(
                at(),
                None,
                format!("an attribute is malformed: {}", cut(&e.to_string())),
                "the file may be damaged; download the Flex statement again",
            )
        })?;
        let key = attribute.key.local_name().as_ref().to_owned();
        let value = attribute
            .normalized_value(XmlVersion::Implicit1_0)
            .map_err(|e| {
                FlexError::new(
                    at(),
                    Some(&key),
                    format!("the value cannot be read: {}", cut(&e.to_string())),
                    "only the five XML entities (&lt; &gt; &amp; &apos; &quot;) and character references are accepted",
                )
            })?;
        out.push((key, value.trim().to_owned()));
    }
    Ok(out)
}

/// Handles an opening (or empty) element: checks the root, opens statements, and keeps
/// the rows of the sections the import reads. Returns the element's local name.
fn open_element(
    doc: &mut Document,
    current: &mut Option<usize>,
    stack: &[String],
    root_seen: &mut bool,
    element: &BytesStart<'_>,
    line: usize,
) -> Result<String, FlexError> {
    let name = element.local_name().as_ref().to_owned();
    let Some(parent) = stack.last() else {
        if *root_seen {
            return Err(not_flex(format!(
                "a second root element <{}> at line {line}",
                cut(&name)
            )));
        }
        *root_seen = true;
        return check_root(element, &name, line).map(|()| name);
    };
    if name == "FlexStatement" {
        if current.is_some() {
            return Err(not_flex(format!(
                "a <FlexStatement> inside another at line {line}"
            )));
        }
        let attrs = attributes_of(element, &name, line)?;
        let account = attrs
            .iter()
            .find(|(k, _)| k == "accountId")
            .map(|(_, v)| v.clone())
            .unwrap_or_default();
        doc.statements.push(Statement {
            header: Row {
                element: name.clone(),
                ordinal: doc.statements.len() + 1,
                statement_account: account,
                line,
                attrs,
            },
            info: Vec::new(),
            trades: Vec::new(),
            cash: Vec::new(),
            positions: Vec::new(),
            rates: Vec::new(),
            actions: Vec::new(),
            counts: HashMap::new(),
            unread: Vec::new(),
        });
        *current = Some(doc.statements.len() - 1);
        return Ok(name);
    }
    let Some(statement) = current.and_then(|i| doc.statements.get_mut(i)) else {
        return Ok(name);
    };
    let section = match (parent.as_str(), name.as_str()) {
        (_, "AccountInformation") => Section::Info,
        ("Trades", _) => Section::Trades,
        ("CashTransactions", "CashTransaction") => Section::Cash,
        ("OpenPositions", "OpenPosition") => Section::Positions,
        ("ConversionRates", "ConversionRate") => Section::Rates,
        ("CorporateActions", "CorporateAction") => Section::Actions,
        ("FlexStatement", section) => {
            if !matches!(
                section,
                "Trades"
                    | "CashTransactions"
                    | "OpenPositions"
                    | "ConversionRates"
                    | "CorporateActions"
            ) && !statement.unread.contains(&name)
            {
                statement.unread.push(name.clone());
            }
            return Ok(name);
        }
        _ => return Ok(name),
    };
    let count = statement.counts.entry(name.clone()).or_insert(0);
    *count += 1;
    let row = Row {
        element: name.clone(),
        ordinal: *count,
        statement_account: statement.account().to_owned(),
        line,
        attrs: attributes_of(element, &name, line)?,
    };
    match section {
        Section::Info => statement.info.push(row),
        Section::Trades => statement.trades.push(row),
        Section::Cash => statement.cash.push(row),
        Section::Positions => statement.positions.push(row),
        Section::Rates => statement.rates.push(row),
        Section::Actions => statement.actions.push(row),
    }
    Ok(name)
}

#[derive(Debug, Clone, Copy)]
enum Section {
    Info,
    Trades,
    Cash,
    Positions,
    Rates,
    Actions,
}

fn check_root(element: &BytesStart<'_>, name: &str, line: usize) -> Result<(), FlexError> {
    match name {
        "FlexQueryResponse" => {}
        "FlexStatementResponse" => {
            return Err(not_flex(
                "a <FlexStatementResponse> (the Flex Web Service's status or error reply), not a statement",
            ));
        }
        other => {
            return Err(not_flex(format!(
                "not an IBKR Flex statement: the root element is <{}>, not <FlexQueryResponse>",
                cut(other)
            )));
        }
    }
    let attrs = attributes_of(element, name, line)?;
    if let Some((_, kind)) = attrs.iter().find(|(k, _)| k == "type")
        && !kind.is_empty()
        && kind != "AF"
    {
        return Err(FlexError::new(
            format!("the <FlexQueryResponse> (line {line})"),
            Some("type"),
            format!("{} is not an Activity Flex Query (type AF)", shown(kind)),
            "run an Activity Flex Query; Trade Confirmation Flex Queries are not supported",
        ));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------
// Mapping
// ---------------------------------------------------------------------------------

/// The book's asset class for an IBKR `assetCategory` (and `subCategory`):
/// `STK` → `equity` (`etf` when `subCategory` is `ETF`), `OPT` and `FOP` (options on
/// futures) → `option`, `FUT` → `future`, `CASH` → `fx`, `CFD` → `cfd`, `BOND` and
/// `BILL` → `bond`, `FUND` → `fund`, `CRYPTO` → `crypto`; and, modelled on the nearest
/// class (each with a note, see [`modelled_as`]): `WAR` (warrants), `IOPT` (structured
/// products), `FSFOP` and `FSOPT` → `option`, `FXCFD` → `cfd`, `CMDTY` (spot metals) →
/// `equity`. Anything else is left out, row by row, with a note.
fn asset_class(category: &str, sub_category: Option<&str>) -> Option<&'static str> {
    Some(match category.to_ascii_uppercase().as_str() {
        "STK" if sub_category.is_some_and(|s| s.eq_ignore_ascii_case("ETF")) => "etf",
        "STK" => "equity",
        "OPT" | "FOP" | "WAR" | "IOPT" | "FSFOP" | "FSOPT" => "option",
        "FUT" => "future",
        "CASH" => "fx",
        "CFD" | "FXCFD" => "cfd",
        "BOND" | "BILL" => "bond",
        "FUND" => "fund",
        "CRYPTO" => "crypto",
        "CMDTY" => "equity",
        _ => return None,
    })
}

/// How a category the book has no class of its own for is modelled, for the note.
fn modelled_as(category: &str) -> Option<&'static str> {
    Some(match category.to_ascii_uppercase().as_str() {
        "WAR" => {
            "warrants (WAR) are modelled as options: priced per unit times their multiplier, closed at expiry"
        }
        "IOPT" => {
            "structured products (IOPT) are modelled as options: priced per unit times their multiplier"
        }
        "FSFOP" | "FSOPT" => "futures-style options (FSFOP, FSOPT) are modelled as options",
        "FXCFD" => {
            "forex CFDs (FXCFD) are modelled as CFDs: margin-settled, no cash moves on a trade"
        }
        "CMDTY" => {
            "spot commodities (CMDTY) are modelled as holdings bought and sold for cash, like shares"
        }
        _ => return None,
    })
}

const ASSET_HINT: &str = "supported asset categories: STK, OPT, FOP, FSFOP, FSOPT, WAR, IOPT, FUT, CASH, CFD, FXCFD, BOND, BILL, FUND, CRYPTO, CMDTY";

/// What a `<CashTransaction type>` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CashCategory {
    /// `Deposits/Withdrawals`: a deposit when positive, a withdrawal when negative.
    Transfer,
    /// `Dividends`, `Payment In Lieu Of Dividends`.
    Dividend,
    /// `Other Fees`, `Broker Fees`, `Advisor Fees`, `Broker Interest Paid`,
    /// `Commission Adjustments`: a fee when negative, a refund of one when positive.
    Fee,
    /// `Broker Interest Received`, `Bond Interest Received`, `Bond Interest Paid`,
    /// `Bond Interest`: interest either way (accrued interest paid on a bond bought is
    /// negative).
    Interest,
    /// `Withholding Tax`, `871(m) Withholding`, `Withholding @ 20%` ...: tax withheld when
    /// negative, refunded when positive.
    Tax,
    /// `Price Adjustments`: a correction of a trade's price, cash either way.
    Adjustment,
}

/// The category of a cash transaction type (case and spacing around `/` and `&` are
/// not significant).
fn cash_category(kind: &str) -> Option<CashCategory> {
    let key: String = kind
        .to_ascii_lowercase()
        .replace('&', "/")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" / ", "/");
    Some(match key.as_str() {
        "deposits/withdrawals" | "deposits" | "withdrawals" | "electronic fund transfers" => {
            CashCategory::Transfer
        }
        "dividends" | "payment in lieu of dividends" => CashCategory::Dividend,
        "other fees"
        | "fees"
        | "broker interest paid"
        | "commission adjustments"
        | "advisor fees"
        | "broker fees" => CashCategory::Fee,
        "broker interest received"
        | "bond interest received"
        | "bond interest paid"
        | "bond interest" => CashCategory::Interest,
        "price adjustments" => CashCategory::Adjustment,
        k if k.contains("withholding") => CashCategory::Tax,
        _ => return None,
    })
}

const CASH_HINT: &str = "known types: Deposits/Withdrawals, Dividends, Payment In Lieu Of Dividends, Withholding Tax (and other withholding), Broker Interest Received, Broker Interest Paid, Bond Interest Received/Paid, Other Fees, Broker Fees, Advisor Fees, Commission Adjustments, Price Adjustments";

#[derive(Debug, Clone)]
struct AccountDraft {
    raw: String,
    currency: Option<String>,
    name: Option<String>,
    /// Trade currencies and how often each was seen, in order of first sight.
    trade_currencies: Vec<(String, usize)>,
    /// The same for cash and corporate-action rows: the account's currency when it has
    /// no trades and no Account Information.
    other_currencies: Vec<(String, usize)>,
    /// The statement header of the account, for messages.
    location: String,
    /// Sections of its statements tradedesk does not read, for the message when nothing
    /// it reads is there.
    unread: Vec<String>,
}

#[derive(Debug, Clone)]
struct InstrumentDraft {
    exchange: String,
    symbol: String,
    currency: String,
    asset_class: &'static str,
    multiplier: Dec,
    /// False when the row gave no multiplier (absent, empty or 0): 1 is then assumed,
    /// which the book lists as an unknown spec for an option, future or CFD.
    multiplier_stated: bool,
    name: Option<String>,
    location: String,
}

#[derive(Debug, Clone)]
struct FillDraft {
    row: FillRow,
    account: usize,
    key: (String, String),
    trade_id: Option<String>,
    trade_date: NaiveDate,
    quantity: Dec,
    price: Dec,
    location: String,
    cancelled: bool,
}

#[derive(Debug, Clone)]
struct Cancellation {
    account: usize,
    key: Option<(String, String)>,
    orig_trade_id: Option<String>,
    quantity: Option<Dec>,
    price: Option<Dec>,
    trade_date: Option<NaiveDate>,
    location: String,
}

/// Cost bases of the Open Positions: (account, instrument) to (report date, statement
/// line, cost).
type PositionCosts = HashMap<(usize, (String, String)), (NaiveDate, usize, Dec)>;

/// Positions of one statement keyed by (account, exchange, symbol), in order.
type PositionSums = Vec<((usize, String, String), Dec, String)>;

#[derive(Debug)]
struct Builder<'o> {
    options: &'o FlexOptions,
    notes: Vec<String>,
    skips: Vec<(String, usize)>,
    skipped: usize,
    accounts: Vec<AccountDraft>,
    instruments: Vec<InstrumentDraft>,
    instrument_index: HashMap<(String, String), usize>,
    conid_exchange: HashMap<String, String>,
    /// Per `conid`: the symbol IBKR gave it last (by date), which names its instrument
    /// whatever it was called on each row (`GCM` before a split renamed it `GCM.OLD`).
    conid_symbol: HashMap<String, (NaiveDate, String)>,
    /// Rows that carried no `conid`, and none for which a listing exchange was found.
    rows_without_conid: usize,
    rows_without_listing: usize,
    actions: Vec<KeyedRow>,
    action_keys: std::collections::HashSet<String>,
    /// Per (account, instrument): the cost basis IBKR states in the latest Open Positions
    /// (`costBasisMoney`): its report date, the statement's line, and the cost.
    position_cost: PositionCosts,
    /// `conid` of each ISIN (`isin`, else `securityID`) the statement names.
    isin_conid: HashMap<String, String>,
    /// The instrument key each `conid` was registered under.
    conid_key: HashMap<String, (String, String)>,
    fills: Vec<FillDraft>,
    fill_ids: HashMap<String, usize>,
    cancellations: Vec<Cancellation>,
    cash: Vec<CashRow>,
    cash_ids: HashMap<(usize, String), usize>,
    marks: Vec<MarkRow>,
    mark_index: HashMap<(String, String, NaiveDate), Dec>,
    positions: Vec<PositionRow>,
    /// Per account: the date of the statement its positions were taken from (several
    /// statements of one account: the latest one's positions stand).
    positions_as_of: HashMap<usize, Option<NaiveDate>>,
    fx: Vec<FxRow>,
    fx_index: HashMap<(String, String, NaiveDate), Dec>,
    /// `fxRateToBase` of trade, cash and position rows: (account, currency, date, rate).
    base_rates: Vec<(usize, String, NaiveDate, Dec)>,
    as_of: Option<NaiveDate>,
    latest_activity: Option<NaiveDate>,
    has_fx_trades: bool,
    has_bonds: bool,
    has_timed_rows: bool,
}

impl<'o> Builder<'o> {
    fn new(options: &'o FlexOptions) -> Self {
        Self {
            options,
            notes: Vec::new(),
            skips: Vec::new(),
            skipped: 0,
            accounts: Vec::new(),
            instruments: Vec::new(),
            instrument_index: HashMap::new(),
            conid_exchange: HashMap::new(),
            conid_symbol: HashMap::new(),
            rows_without_conid: 0,
            rows_without_listing: 0,
            actions: Vec::new(),
            action_keys: std::collections::HashSet::new(),
            position_cost: HashMap::new(),
            isin_conid: HashMap::new(),
            conid_key: HashMap::new(),
            fills: Vec::new(),
            fill_ids: HashMap::new(),
            cancellations: Vec::new(),
            cash: Vec::new(),
            cash_ids: HashMap::new(),
            marks: Vec::new(),
            mark_index: HashMap::new(),
            positions: Vec::new(),
            positions_as_of: HashMap::new(),
            fx: Vec::new(),
            fx_index: HashMap::new(),
            base_rates: Vec::new(),
            as_of: None,
            latest_activity: None,
            has_fx_trades: false,
            has_bonds: false,
            has_timed_rows: false,
        }
    }

    /// Counts a left-out row under a reason (the notes list each reason once, with
    /// its count).
    fn skip(&mut self, reason: String) {
        self.skipped += 1;
        match self.skips.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.skips.push((reason, 1)),
        }
    }

    fn later(slot: &mut Option<NaiveDate>, date: NaiveDate) {
        if slot.is_none_or(|d| date > d) {
            *slot = Some(date);
        }
    }

    fn run(&mut self, doc: &Document) -> Result<(), FlexError> {
        for statement in &doc.statements {
            for row in statement
                .trades
                .iter()
                .chain(&statement.positions)
                .chain(&statement.actions)
            {
                if let (Some(conid), Some(isin)) =
                    (row.get("conid"), row.get("isin").or(row.get("securityID")))
                {
                    self.isin_conid
                        .entry(isin.to_owned())
                        .or_insert_with(|| conid.to_owned());
                }
                if let (Some(conid), Some(exchange)) =
                    (row.get("conid"), row.get("listingExchange"))
                {
                    self.conid_exchange
                        .entry(conid.to_owned())
                        .or_insert_with(|| exchange.to_owned());
                }
                if let (Some(conid), Some(symbol), Some(date)) =
                    (row.get("conid"), row.get("symbol"), row_date(row))
                {
                    let symbol = symbol.trim();
                    match self.conid_symbol.get_mut(conid) {
                        Some((seen, name)) if date >= *seen => {
                            *seen = date;
                            symbol.clone_into(name);
                        }
                        Some(_) => {}
                        None => {
                            self.conid_symbol
                                .insert(conid.to_owned(), (date, symbol.to_owned()));
                        }
                    }
                }
            }
        }
        self.disambiguate_conids(doc);
        for statement in &doc.statements {
            self.statement(statement)?;
        }
        for statement in &doc.statements {
            self.trades(statement)?;
        }
        self.resolve_cancellations();
        for statement in &doc.statements {
            self.position_costs(statement)?;
        }
        for statement in &doc.statements {
            self.corporate_actions(statement)?;
        }
        for statement in &doc.statements {
            for row in &statement.cash {
                self.cash_row(row, statement)?;
            }
        }
        for statement in &doc.statements {
            self.open_positions(statement)?;
        }
        for statement in &doc.statements {
            for row in &statement.rates {
                self.rate(row, statement)?;
            }
        }
        for statement in &doc.statements {
            for row in statement
                .trades
                .iter()
                .chain(&statement.cash)
                .chain(&statement.positions)
            {
                self.base_rate(row, statement)?;
            }
        }
        Ok(())
    }

    /// Two contracts (`conid`s) IBKR gives one symbol on one listing exchange (a stock
    /// and its convertible bond, an old and a new line): each is its own instrument. The
    /// first one met keeps the symbol; each other is named `SYMBOL (conid N)`, with a
    /// note. Rows without a `conid` keep their symbol.
    fn disambiguate_conids(&mut self, doc: &Document) {
        let mut order: Vec<&str> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for statement in &doc.statements {
            for row in statement
                .trades
                .iter()
                .chain(&statement.actions)
                .chain(&statement.positions)
            {
                if let Some(conid) = row.get("conid")
                    && seen.insert(conid)
                {
                    order.push(conid);
                }
            }
        }
        let mut owner: HashMap<(String, String), &str> = HashMap::new();
        let mut renamed: Vec<(String, String, String)> = Vec::new();
        for conid in order {
            let Some((date, symbol)) = self.conid_symbol.get(conid).cloned() else {
                continue;
            };
            let exchange = self
                .conid_exchange
                .get(conid)
                .cloned()
                .unwrap_or_else(|| "IBKR".to_owned());
            match owner.get(&(exchange.clone(), symbol.clone())) {
                None => {
                    owner.insert((exchange, symbol), conid);
                }
                Some(first) => {
                    let label = format!("{symbol} (conid {conid})");
                    renamed.push((
                        format!("{exchange}:{symbol}"),
                        (*first).to_owned(),
                        label.clone(),
                    ));
                    self.conid_symbol.insert(conid.to_owned(), (date, label));
                }
            }
        }
        for (key, first, label) in renamed {
            self.notes.push(format!(
                "{} is the symbol of more than one contract: conid {} keeps it, and another contract is named {}",
                shown(&key),
                shown(&first),
                shown(&label)
            ));
        }
    }

    /// A row's `fxRateToBase` (`1 currency = fxRateToBase` of the account's currency on
    /// the row's date: `tradeDate`, else `reportDate`, else the date of `dateTime`, else
    /// the statement's `toDate`), kept to be used as that date's rate where the
    /// Conversion Rates section gives none (see [`Builder::rates_from_rows`]). A row
    /// without a readable rate or date is passed over: its own section reads it.
    fn base_rate(&mut self, row: &Row, statement: &Statement) -> Result<(), FlexError> {
        let (Some(currency), Some(Ok(rate))) = (
            row.get("currency").filter(|c| is_currency_code(c)),
            row.get("fxRateToBase").map(Dec::parse),
        ) else {
            return Ok(());
        };
        if rate.is_negative() || rate.is_zero() {
            return Ok(());
        }
        let date = ["tradeDate", "reportDate", "dateTime"]
            .iter()
            .find_map(|a| {
                let text = row.get(a)?;
                parse_flex_date(text)
                    .or_else(|| text.get(..8).and_then(parse_flex_date))
                    .or_else(|| text.get(..10).and_then(parse_flex_date))
            })
            .or(statement.header.date("toDate").ok().flatten());
        let Some(date) = date else {
            return Ok(());
        };
        let currency = currency.to_owned();
        let account = self.account_of(row, statement)?;
        self.base_rates.push((account, currency, date, rate));
        Ok(())
    }

    /// The `fxRateToBase` rates for the pairs and dates the Conversion Rates section does
    /// not cover (one per account currency, currency and date: the first read), as
    /// `fx_rates` entries; `currencies` are the accounts' settled currencies.
    fn rates_from_rows(&mut self, currencies: &[Option<String>]) -> usize {
        let mut seen: std::collections::HashSet<(String, String, NaiveDate)> =
            std::collections::HashSet::new();
        let mut added = 0;
        for (account, currency, date, rate) in std::mem::take(&mut self.base_rates) {
            let Some(Some(base)) = currencies.get(account) else {
                continue;
            };
            if currency == *base
                || self
                    .fx_index
                    .contains_key(&(currency.clone(), base.clone(), date))
                || self
                    .fx_index
                    .contains_key(&(base.clone(), currency.clone(), date))
                || !seen.insert((currency.clone(), base.clone(), date))
            {
                continue;
            }
            self.fx.push(FxRow {
                base: currency,
                quote: base.clone(),
                rate: rate.to_string(),
                date: date.to_string(),
            });
            added += 1;
        }
        added
    }

    /// The account index of a row: its own `accountId`, else its statement's.
    fn account_of(&mut self, row: &Row, statement: &Statement) -> Result<usize, FlexError> {
        let raw = match row.get("accountId").filter(|a| *a != "-") {
            Some(a) => a,
            None if !statement.account().is_empty() => statement.account(),
            None => {
                return Err(row.error(
                    "accountId",
                    "is missing here and on the enclosing <FlexStatement>",
                    "include Account ID in the Flex Query",
                ));
            }
        };
        Ok(self.account_index(raw, &statement.header.location()))
    }

    fn account_index(&mut self, raw: &str, location: &str) -> usize {
        if let Some(i) = self.accounts.iter().position(|a| a.raw == raw) {
            return i;
        }
        self.accounts.push(AccountDraft {
            raw: raw.to_owned(),
            currency: None,
            name: None,
            trade_currencies: Vec::new(),
            other_currencies: Vec::new(),
            location: location.to_owned(),
            unread: Vec::new(),
        });
        self.accounts.len() - 1
    }

    /// The statement header (account, period, `as_of`) and its `<AccountInformation>`.
    fn statement(&mut self, statement: &Statement) -> Result<(), FlexError> {
        let header = &statement.header;
        let from = header.date("fromDate")?;
        let to = header.date("toDate")?;
        if let Some(to) = to {
            Self::later(&mut self.as_of, to);
        }
        if !statement.account().is_empty() {
            let index = self.account_index(statement.account(), &header.location());
            if let Some(draft) = self.accounts.get_mut(index) {
                for section in &statement.unread {
                    if !draft.unread.contains(section) {
                        draft.unread.push(section.clone());
                    }
                }
            }
            if let Some(from) = from {
                self.notes.push(format!(
                    "account {}: the statement starts on {from}; positions and cash held before then are not in the book (compare reported_positions with the positions the fills imply)",
                    cut(statement.account())
                ));
            }
        }
        for row in &statement.info {
            let account = self.account_of(row, statement)?;
            let currency = row.currency("currency")?.map(str::to_owned);
            let name = row
                .get("name")
                .or_else(|| row.get("acctAlias"))
                .map(str::to_owned);
            if let Some(draft) = self.accounts.get_mut(account) {
                if draft.currency.is_none() {
                    draft.currency = currency;
                }
                if draft.name.is_none() {
                    draft.name = name;
                }
            }
        }
        Ok(())
    }

    /// The instrument of a trade or position row, registered (or checked against the
    /// one already registered under the same key). Returns its key.
    /// Whether the row's `assetCategory` is one the book cannot model: the row is then
    /// left out, counted and named in a note, never a refusal of the statement.
    fn unknown_category(&mut self, row: &Row, element: &str) -> bool {
        let Some(category) = row.get("assetCategory") else {
            return false;
        };
        if asset_class(category, row.get("subCategory")).is_some() {
            return false;
        }
        let note = format!(
            "{element} rows of asset category {} were left out: tradedesk has no model for it, so the positions and cash of those instruments are not in the book ({ASSET_HINT})",
            shown(category)
        );
        if !self.notes.contains(&note) {
            self.notes.push(note);
        }
        self.skip(format!(
            "{element} rows of asset category {}",
            cut(category)
        ));
        true
    }

    fn instrument(&mut self, row: &Row) -> Result<(String, String), FlexError> {
        if row.get("conid").is_none() {
            self.rows_without_conid += 1;
        }
        if row.get("listingExchange").is_none()
            && row
                .get("conid")
                .is_none_or(|c| !self.conid_exchange.contains_key(c))
        {
            self.rows_without_listing += 1;
        }
        let spec = self.instrument_spec(row)?;
        if let Some(note) = row.get("assetCategory").and_then(modelled_as) {
            let note = note.to_owned();
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
        let key = (spec.exchange.clone(), spec.symbol.clone());
        if let Some(conid) = row.get("conid") {
            self.conid_key
                .entry(conid.to_owned())
                .or_insert_with(|| key.clone());
        }
        if let Some(&i) = self.instrument_index.get(&key) {
            let Some(known) = self.instruments.get_mut(i) else {
                return Ok(key);
            };
            let conflict = |attribute: &str, first: &str, now: &str| {
                row.error(
                    attribute,
                    format!(
                        "instrument {}:{} is {} here but was {} at {}",
                        cut(&key.0),
                        cut(&key.1),
                        shown(now),
                        shown(first),
                        known.location
                    ),
                    "one (exchange, symbol) must keep one currency, asset class and multiplier",
                )
            };
            if known.currency != spec.currency {
                return Err(conflict("currency", &known.currency, &spec.currency));
            }
            if known.asset_class != spec.asset_class {
                return Err(conflict(
                    "assetCategory",
                    known.asset_class,
                    spec.asset_class,
                ));
            }
            if !known.multiplier_stated && spec.multiplier_stated {
                known.multiplier = spec.multiplier;
                known.multiplier_stated = true;
            }
            if spec.multiplier_stated && !known.multiplier.same_value(spec.multiplier) {
                return Err(conflict(
                    "multiplier",
                    &known.multiplier.to_string(),
                    &spec.multiplier.to_string(),
                ));
            }
            if known.name.is_none() {
                known.name = spec.name;
            }
            return Ok(key);
        }
        if let Some(conid) = row.get("conid") {
            self.conid_exchange
                .entry(conid.to_owned())
                .or_insert_with(|| spec.exchange.clone());
        }
        self.has_fx_trades |= spec.asset_class == "fx";
        self.has_bonds |= spec.asset_class == "bond";
        self.instrument_index
            .insert(key.clone(), self.instruments.len());
        self.instruments.push(spec);
        Ok(key)
    }

    fn instrument_spec(&self, row: &Row) -> Result<InstrumentDraft, FlexError> {
        let category = row.required("assetCategory", ASSET_HINT)?;
        let asset_class = asset_class(category, row.get("subCategory")).ok_or_else(|| {
            row.error(
                "assetCategory",
                format!("{} is not a supported asset category", shown(category)),
                ASSET_HINT,
            )
        })?;
        let symbol = row.required("symbol", "include Symbol in the Flex Query")?;
        // One contract, one instrument: named by its conid's latest symbol.
        let symbol = row
            .get("conid")
            .and_then(|c| self.conid_symbol.get(c))
            .map_or(symbol, |(_, s)| s.as_str());
        // Never the execution venue (`exchange`, `--` on a BookTrade): that would make
        // one stock an instrument per venue it was routed to.
        let (exchange, attribute) = if let Some(e) = row.get("listingExchange") {
            (e.to_owned(), "listingExchange")
        } else if let Some(e) = row.get("conid").and_then(|c| self.conid_exchange.get(c)) {
            (e.clone(), "listingExchange")
        } else {
            ("IBKR".to_owned(), "listingExchange")
        };
        if exchange.contains(':') {
            return Err(row.error(
                attribute,
                format!(
                    "{} contains ':', which a book exchange may not",
                    shown(&exchange)
                ),
                "exchanges are names such as NASDAQ, NYSE, CME",
            ));
        }
        let currency = row.currency("currency")?.ok_or_else(|| {
            row.error(
                "currency",
                "is missing or empty",
                "include Currency in the Flex Query",
            )
        })?;
        let stated = row.decimal("multiplier")?;
        let multiplier_stated = stated.is_some_and(|m| !m.is_zero());
        let multiplier = match stated {
            None => Dec::ONE,
            Some(m) if m.is_zero() => Dec::ONE,
            Some(m) if m.is_negative() => {
                return Err(row.error(
                    "multiplier",
                    format!("{} must be > 0", shown(&m.to_string())),
                    DECIMAL_HINT,
                ));
            }
            Some(m) => m,
        };
        Ok(InstrumentDraft {
            exchange,
            symbol: symbol.to_owned(),
            currency: currency.to_owned(),
            asset_class,
            multiplier,
            multiplier_stated,
            name: row.get("description").map(str::to_owned),
            location: row.location(),
        })
    }

    /// The `<Trades>` rows of one statement: see the module's *Level of detail*.
    fn trades(&mut self, statement: &Statement) -> Result<(), FlexError> {
        let level = |row: &Row| -> String {
            row.get("levelOfDetail").map_or_else(
                || match row.element.as_str() {
                    "Trade" => "EXECUTION".to_owned(),
                    "Order" => "ORDER".to_owned(),
                    other => other.to_ascii_uppercase(),
                },
                str::to_ascii_uppercase,
            )
        };
        let has_executions = statement.trades.iter().any(|r| level(r) == "EXECUTION");
        let has_orders = statement.trades.iter().any(|r| level(r) == "ORDER");
        let wanted = if has_executions { "EXECUTION" } else { "ORDER" };
        if !has_executions && has_orders {
            self.notes.push(format!(
                "account {}: the Trades section has no EXECUTION rows, so its ORDER rows were imported as fills (one fill per order, at its average price)",
                cut(statement.account())
            ));
        }
        for row in &statement.trades {
            let row_level = level(row);
            if row_level == wanted {
                self.fill(row, statement, wanted == "ORDER")?;
            } else {
                self.skip(format!(
                    "account {}: <{}> rows with levelOfDetail {} (only {wanted} rows are fills)",
                    cut(statement.account()),
                    cut(&row.element),
                    cut(&row_level)
                ));
            }
        }
        Ok(())
    }

    /// One fill from a trade row:
    ///
    /// * `id` = `ibExecID`, else `tradeID` (for order rows used as fills, else
    ///   `ibOrderID`); none is an error. A repeated id whose
    ///   fill is identical is skipped (overlapping statements); otherwise an error.
    /// * `side` from `buySell` (`BUY`/`SELL`), else from the sign of `quantity`. A
    ///   `buySell` ending in `(Ca.)` is a cancellation: never a fill (see
    ///   [`FlexOptions::drop_cancelled_originals`]).
    /// * `quantity` = |`quantity`| (zero is an error); `price` = `tradePrice` (>= 0).
    /// * `commission` = |`ibCommission`| when IBKR reports it paid (negative) or zero;
    ///   absent is `0`. A positive `ibCommission` is a rebate: the book allows neither a
    ///   negative commission nor a positive fee, so the fill's commission is `0` and the
    ///   rebate becomes a cash entry of kind `interest` (the only kind whose sign is
    ///   free) with a positive amount, and a note. `commission_currency` = `ibCommissionCurrency`, else `currency`.
    /// * `time` = `dateTime` (else `tradeDate` + `tradeTime`, else `tradeDate` at 00:00),
    ///   in the configured zone.
    fn fill(
        &mut self,
        row: &Row,
        statement: &Statement,
        order_level: bool,
    ) -> Result<(), FlexError> {
        let account = self.account_of(row, statement)?;
        if self.unknown_category(row, "<Trade>") {
            return Ok(());
        }
        if let Some(kind) = option_event(row) {
            let buy_sell = row.get("buySell").map(str::to_ascii_uppercase);
            if !buy_sell.as_deref().is_some_and(|b| b.contains("(CA")) {
                return self.option_event(row, statement, account, kind);
            }
        }
        let buy_sell = row.get("buySell").map(str::to_ascii_uppercase);
        if buy_sell.as_deref().is_some_and(|b| b.contains("(CA")) {
            self.cancellation(row, account);
            return Ok(());
        }
        let quantity = row.required_decimal("quantity")?;
        if quantity.is_zero() {
            return Err(row.error(
                "quantity",
                "is zero, and a fill needs a quantity > 0",
                "a zero-quantity trade row is not an execution; check the row in the statement",
            ));
        }
        let side = self.fill_side(row, buy_sell.as_deref(), quantity)?;
        let price = row.required_decimal("tradePrice")?;
        if price.is_negative() {
            return Err(row.error(
                "tradePrice",
                format!(
                    "{} is negative, and a fill's price must be >= 0",
                    shown(&price.to_string())
                ),
                "negative-price trades (some spreads and futures) cannot be held in a book",
            ));
        }
        // FracShare rows have neither ibExecID nor tradeID; their transactionID is set.
        let id = row
            .get("ibExecID")
            .or_else(|| row.get("tradeID"))
            .or_else(|| row.get("transactionID"))
            .or_else(|| order_level.then(|| row.get("ibOrderID")).flatten())
            .ok_or_else(|| {
                row.error(
                    "ibExecID",
                    if order_level {
                        "is missing, and so are tradeID, transactionID and ibOrderID: the fill has no id"
                    } else {
                        "is missing, and so are tradeID and transactionID: the fill has no id"
                    },
                    "include IB Execution ID (or Trade ID) in the Flex Query's Trades section",
                )
            })?;
        let (mut time, local_date) = self.fill_time(row)?;
        let trade_date = row.date("tradeDate")?.unwrap_or(local_date);
        if trade_date != local_date {
            // The exchange's trade date (Tokyo's morning is New York's evening before):
            // the same instant, written in an offset whose calendar date is that day.
            match on_trade_date(&time, trade_date) {
                Some(t) => time = t,
                None => self.notes.push(format!(
                    "{}: tradeDate {trade_date} is not a date the fill's time falls on in any time zone; the fill is dated {local_date}",
                    row.location()
                )),
            }
        }
        let key = self.instrument(row)?;
        let currency = row.currency("currency")?.unwrap_or_default().to_owned();
        let commission_currency = row
            .currency("ibCommissionCurrency")?
            .map_or_else(|| currency.clone(), str::to_owned);
        let raw_commission = row.decimal("ibCommission")?.unwrap_or(Dec::ZERO);
        let mut commission = if raw_commission.is_negative() || raw_commission.is_zero() {
            raw_commission.abs()
        } else {
            self.rebate(row, account, raw_commission, &commission_currency, &time);
            Dec::ZERO
        };
        // Transaction taxes (stamp duty, FTT) are a cost of the trade, in the trade's
        // currency: part of its commission when that is the same currency, else a fee.
        let taxes = row.decimal("taxes")?.unwrap_or(Dec::ZERO);
        if taxes.is_negative() {
            if commission_currency == currency {
                commission = commission.checked_add(taxes.abs()).ok_or_else(|| {
                    row.error(
                        "taxes",
                        "is too large to add to the commission",
                        "check the statement",
                    )
                })?;
            } else {
                self.cash.push(CashRow {
                    account: self.account_id(account),
                    kind: "fee".to_owned(),
                    amount: taxes.to_string(),
                    currency: currency.clone(),
                    time: time.clone(),
                });
                self.notes.push(format!(
                    "{}: taxes {} {currency} are in another currency than the commission, so they are a fee in cash (realized P&L is gross of them)",
                    row.location(),
                    taxes
                ));
            }
        }
        // `C` alone: the execution only closes (a `C;O` flips), so a position older than
        // the statement's period never turns its close into a phantom opposite position.
        let closes = row
            .get("openCloseIndicator")
            .is_some_and(|o| o.trim().eq_ignore_ascii_case("C"));
        let fill = FillRow {
            id: id.to_owned(),
            account: self.account_id(account),
            exchange: key.0.clone(),
            symbol: key.1.clone(),
            side: side.to_owned(),
            quantity: quantity.abs().to_string(),
            price: price.to_string(),
            commission: Some(commission.to_string()),
            commission_currency: Some(commission_currency),
            commission_known: None,
            time,
            closes: closes.then_some(true),
        };
        if self.is_repeat(row, id, &fill)? {
            return Ok(());
        }
        self.has_timed_rows = true;
        Self::later(&mut self.latest_activity, local_date);
        if let Some(draft) = self.accounts.get_mut(account) {
            match draft
                .trade_currencies
                .iter_mut()
                .find(|(c, _)| *c == currency)
            {
                Some((_, n)) => *n += 1,
                None => draft.trade_currencies.push((currency, 1)),
            }
        }
        self.fill_ids.insert(id.to_owned(), self.fills.len());
        self.fills.push(FillDraft {
            row: fill,
            account,
            key,
            trade_id: row.get("tradeID").map(str::to_owned),
            trade_date,
            quantity: quantity.abs(),
            price,
            location: row.location(),
            cancelled: false,
        });
        Ok(())
    }

    /// The side of a fill: `buySell`, else the sign of `quantity`. A quantity whose
    /// sign disagrees with `buySell` keeps the `buySell` side, with a note.
    fn fill_side(
        &mut self,
        row: &Row,
        buy_sell: Option<&str>,
        quantity: Dec,
    ) -> Result<&'static str, FlexError> {
        let side = match buy_sell {
            Some("SELL") => "sell",
            Some("BUY") => "buy",
            None => {
                if quantity.is_negative() {
                    "sell"
                } else {
                    "buy"
                }
            }
            Some(other) => {
                return Err(row.error(
                    "buySell",
                    format!("{} is not BUY, SELL or a (Ca.) cancellation", shown(other)),
                    "include Buy/Sell in the Flex Query",
                ));
            }
        };
        if (side == "buy") == quantity.is_negative() {
            self.notes.push(format!(
                "{}: buySell says {side} but quantity is {}; the side was taken from buySell",
                row.location(),
                shown(&quantity.to_string())
            ));
        }
        Ok(side)
    }

    /// The time of a fill: `dateTime`, else `tradeDate` + `tradeTime`, else `tradeDate`
    /// at 00:00; with the local date it falls on.
    fn fill_time(&self, row: &Row) -> Result<(String, NaiveDate), FlexError> {
        match (
            row.get("dateTime"),
            row.get("tradeDate"),
            row.get("tradeTime"),
        ) {
            (None, Some(date), Some(time)) => {
                let joined = Row {
                    attrs: vec![("dateTime".to_owned(), format!("{date};{time}"))],
                    ..row.clone()
                };
                joined.time(&["dateTime"], self.options.time_zone)
            }
            _ => row.time(&["dateTime", "tradeDate"], self.options.time_zone),
        }
    }

    /// Whether a fill id was seen before: `Ok(true)` (the row is skipped) when the
    /// earlier fill is identical, an error when it differs.
    fn is_repeat(&mut self, row: &Row, id: &str, fill: &FillRow) -> Result<bool, FlexError> {
        let Some(earlier) = self.fill_ids.get(id).and_then(|&i| self.fills.get(i)) else {
            return Ok(false);
        };
        if earlier.row == *fill {
            let account = &fill.account;
            self.skip(format!(
                "account {}: trade rows repeating an earlier execution id with identical content (overlapping statements)",
                cut(account)
            ));
            return Ok(true);
        }
        Err(row.error(
            if row.get("ibExecID").is_some() {
                "ibExecID"
            } else {
                "tradeID"
            },
            format!(
                "{} was already used by {} for a different fill",
                shown(id),
                earlier.location
            ),
            "each execution must have its own id; check for an edited or merged statement",
        ))
    }

    fn account_id(&self, account: usize) -> String {
        let raw = self.accounts.get(account).map_or("", |a| a.raw.as_str());
        format!("{}{raw}", self.options.account_prefix)
    }

    /// A positive `ibCommission`: recorded as cash (kind `interest`, positive).
    fn rebate(&mut self, row: &Row, account: usize, amount: Dec, currency: &str, time: &str) {
        self.cash.push(CashRow {
            account: self.account_id(account),
            kind: "interest".to_owned(),
            amount: amount.to_string(),
            currency: currency.to_owned(),
            time: time.to_owned(),
        });
        self.notes.push(format!(
            "{}: ibCommission {} {currency} is a rebate (positive); the book allows no negative commission or positive fee, so the fill's commission is 0 and the rebate is a cash entry of kind interest",
            row.location(),
            amount
        ));
    }

    fn cancellation(&mut self, row: &Row, account: usize) {
        let key = self
            .instrument_spec(row)
            .ok()
            .map(|spec| (spec.exchange, spec.symbol));
        let trade_date = row.get("tradeDate").and_then(parse_flex_date).or_else(|| {
            row.get("dateTime")
                .and_then(parse_flex_datetime)
                .map(|t| t.date())
        });
        self.cancellations.push(Cancellation {
            account,
            key,
            orig_trade_id: row.get("origTradeID").map(str::to_owned),
            quantity: row
                .get("quantity")
                .and_then(|q| Dec::parse(q).ok())
                .map(Dec::abs),
            price: row.get("tradePrice").and_then(|p| Dec::parse(p).ok()),
            trade_date,
            location: row.location(),
        });
    }

    /// Each cancellation row is left out; with `drop_cancelled_originals`, so is the
    /// trade it names by `origTradeID`, or else the single trade of the same account,
    /// instrument, quantity, price and trade date.
    fn resolve_cancellations(&mut self) {
        let cancellations = std::mem::take(&mut self.cancellations);
        for c in &cancellations {
            self.skipped += 1;
            if !self.options.drop_cancelled_originals {
                self.notes.push(format!(
                    "{}: a (Ca.) cancellation row, left out; the trade it cancels (if in this statement) was kept, as the options ask",
                    c.location
                ));
                continue;
            }
            let by_id = c.orig_trade_id.as_deref().and_then(|id| {
                self.fills.iter().position(|f| {
                    !f.cancelled && f.account == c.account && f.trade_id.as_deref() == Some(id)
                })
            });
            let target = by_id.or_else(|| {
                let (key, quantity, price, date) =
                    (c.key.as_ref()?, c.quantity?, c.price?, c.trade_date?);
                let mut candidates = self.fills.iter().enumerate().filter(|(_, f)| {
                    !f.cancelled
                        && f.account == c.account
                        && f.key == *key
                        && f.quantity.same_value(quantity)
                        && f.price.same_value(price)
                        && f.trade_date == date
                });
                let first = candidates.next().map(|(i, _)| i);
                if candidates.next().is_some() {
                    None
                } else {
                    first
                }
            });
            match target.and_then(|i| self.fills.get_mut(i)) {
                Some(original) => {
                    original.cancelled = true;
                    self.skipped += 1;
                    self.notes.push(format!(
                        "{}: a (Ca.) cancellation row; it and the trade it cancels ({}) were both left out",
                        c.location, original.location
                    ));
                }
                None => self.notes.push(format!(
                    "{}: a (Ca.) cancellation row, left out; the trade it cancels is not in this statement (or could not be identified), so nothing else changed",
                    c.location
                )),
            }
        }
    }

    /// One cash transaction. Rows whose `levelOfDetail` is not `DETAIL` (summaries) and
    /// `BASE_SUMMARY` rows are skipped, as are zero amounts and repeats of a
    /// `transactionID`. The kind follows the type (see `CashCategory`) and the amount
    /// keeps its sign as seen by the account, which the book requires to agree with
    /// the kind (deposits and dividends > 0, withdrawals and fees < 0):
    /// `Deposits/Withdrawals` is a deposit when positive and a withdrawal when
    /// negative; a negative dividend (a reversal) is recorded as a `fee`, and a
    /// positive fee-type row (a refund or credit) as `interest` (the only kind whose
    /// sign is free), each with a note.
    fn count_other_currency(&mut self, account: usize, currency: &str) {
        if let Some(draft) = self.accounts.get_mut(account) {
            match draft
                .other_currencies
                .iter_mut()
                .find(|(c, _)| c == currency)
            {
                Some((_, n)) => *n += 1,
                None => draft.other_currencies.push((currency.to_owned(), 1)),
            }
        }
    }

    /// An option's exercise, assignment or expiry, written by IBKR as a trade at price 0
    /// (`notes` or `code` `Ex`, `A`, `Ep`): the book's `exercise`, `assignment` or
    /// `expiry` action, not a fill, so the premium goes where IBKR puts it (into the
    /// delivered stock's cost for an exercise or assignment, realized at expiry). The
    /// delivered stock is the trade of the same account and time in the underlying
    /// (`underlyingConid`, else `underlyingSymbol`) carrying the same code, whose units
    /// are the contracts times the multiplier; without one the action has no `fill` and
    /// a note says so.
    fn option_event(
        &mut self,
        row: &Row,
        statement: &Statement,
        account: usize,
        kind: &'static str,
    ) -> Result<(), FlexError> {
        let quantity = row.required_decimal("quantity")?.abs();
        let key = self.instrument(row)?;
        let (_, date) = self.fill_time(row)?;
        let date = row.date("tradeDate")?.unwrap_or(date);
        let id = row
            .get("tradeID")
            .or_else(|| row.get("transactionID"))
            .or_else(|| row.get("ibExecID"))
            .map_or_else(
                || format!("{kind}-{}-{}", cut(statement.account()), row.line),
                |id| format!("{kind}-{id}"),
            );
        if !self.action_keys.insert(format!("option\u{1f}{}", id)) {
            self.skip("option events repeated by an overlapping statement".to_owned());
            return Ok(());
        }
        let mut action = KeyedRow::new();
        action.insert("id", id);
        action.insert("account", self.account_id(account));
        action.insert("exchange", key.0);
        action.insert("symbol", key.1);
        action.insert("kind", kind);
        action.insert("date", date.to_string());
        action.insert("quantity", quantity.to_string());
        if kind != "expiry" {
            let multiplier = row.decimal("multiplier")?.unwrap_or(Dec::ONE);
            let units = quantity.0.checked_mul(multiplier.0);
            let code = event_code(row);
            let same_account = row.get("accountId").unwrap_or(statement.account());
            let delivered = statement.trades.iter().find(|t| {
                t.get("assetCategory")
                    .is_some_and(|c| !matches!(asset_class(c, None), Some("option")))
                    && t.get("accountId").unwrap_or(statement.account()) == same_account
                    && match (row.get("underlyingConid"), t.get("conid")) {
                        (Some(u), Some(c)) => u == c,
                        _ => {
                            row.get("underlyingSymbol").map(str::trim)
                                == t.get("symbol").map(str::trim)
                        }
                    }
                    && (t.get("dateTime") == row.get("dateTime") && row.get("dateTime").is_some()
                        || t.get("tradeDate").is_some()
                            && t.get("tradeDate") == row.get("tradeDate"))
                    && event_code(t) == code
                    && t.get("quantity")
                        .and_then(|q| Dec::parse(q).ok())
                        .zip(units)
                        .is_some_and(|(q, u)| q.abs().0 == u)
            });
            match delivered.and_then(|t| {
                t.get("ibExecID")
                    .or_else(|| t.get("tradeID"))
                    .or_else(|| t.get("transactionID"))
            }) {
                Some(fill) => {
                    action.insert("fill", fill);
                }
                None => self.notes.push(format!(
                    "{}: the {kind} of {quantity} contract(s) names no delivered stock trade in the statement; the premium is left on the option (realized as if at 0)",
                    row.location()
                )),
            }
        }
        self.actions.push(action);
        Ok(())
    }

    /// `<CorporateActions>`: IBKR writes each action as the rows it changes, one per
    /// instrument: what left the account (a negative `quantity`), what came in (a
    /// positive one) and the cash paid (`proceeds`). The rows of one action share its
    /// `actionID`, else its time and the part of the `description` before the last
    /// ` (` (which names each row's own instrument). An action becomes, in the book's
    /// model (docs/methodology/corporate-actions.md):
    ///
    /// * one instrument out and another in (a reverse split into a new contract, a
    ///   tender into a temporary line, a merger for shares, a renaming): a
    ///   `stock_merger` at the units IBKR states (new / old), the cost carried over;
    /// * one instrument out for cash (`proceeds`), or for nothing when IBKR says it
    ///   was delisted worthless: a `cash_merger` at proceeds / units;
    /// * units added to the same instrument with "SPLIT n FOR m" in the description: a
    ///   `split` n for m.
    ///
    /// Any other shape (a spin-off, rights, a stock dividend, stock and cash at once) is
    /// left out with a note naming the rows: the positions it changes will differ from
    /// IBKR's until the book states it by hand.
    fn corporate_actions(&mut self, statement: &Statement) -> Result<(), FlexError> {
        let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
        for row in &statement.actions {
            if let Some(level) = row.get("levelOfDetail")
                && !level.eq_ignore_ascii_case("DETAIL")
            {
                self.skip(format!(
                    "account {}: <CorporateAction> rows with levelOfDetail {} (only DETAIL rows are actions)",
                    cut(statement.account()),
                    cut(&level.to_ascii_uppercase())
                ));
                continue;
            }
            if self.unknown_category(row, "<CorporateAction>") {
                continue;
            }
            let account = row.get("accountId").unwrap_or(statement.account());
            let key = match row.get("actionID") {
                Some(id) => format!("{account}\u{1f}id\u{1f}{id}"),
                None => {
                    let description = row.get("description").unwrap_or("");
                    let head = description
                        .rfind(" (")
                        .map_or(description, |i| description.get(..i).unwrap_or(description));
                    format!(
                        "{account}\u{1f}{}\u{1f}{}",
                        row.get("dateTime").or(row.get("reportDate")).unwrap_or(""),
                        head.trim()
                    )
                }
            };
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, rows)) => rows.push(row),
                None => groups.push((key, vec![row])),
            }
        }
        for (key, rows) in groups {
            // The same action in two overlapping statements is one action.
            if !self.action_keys.insert(key) {
                self.skip(format!(
                    "account {}: corporate actions repeated by an overlapping statement",
                    cut(statement.account())
                ));
                continue;
            }
            self.corporate_action(&rows, statement)?;
        }
        Ok(())
    }

    fn corporate_action(&mut self, rows: &[&Row], statement: &Statement) -> Result<(), FlexError> {
        let Some(first) = rows.first() else {
            return Ok(());
        };
        let account = self.account_of(first, statement)?;
        let mut outs = Vec::new();
        let mut ins = Vec::new();
        let mut proceeds = Dec::ZERO;
        for row in rows {
            let quantity = row.required_decimal("quantity")?;
            let key = self.instrument(row)?;
            if let Some(currency) = row.currency("currency")? {
                let currency = currency.to_owned();
                self.count_other_currency(account, &currency);
            }
            if let Some(p) = row.decimal("proceeds")? {
                proceeds = proceeds.checked_add(p).ok_or_else(|| {
                    row.error(
                        "proceeds",
                        "the action's proceeds add up past 1e12",
                        DECIMAL_HINT,
                    )
                })?;
            }
            if quantity.is_negative() {
                outs.push((key, quantity.abs(), *row));
            } else if !quantity.is_zero() {
                ins.push((key, quantity, *row));
            }
        }
        let (_, date) = first.time(&["dateTime", "reportDate"], self.options.time_zone)?;
        self.has_timed_rows = true;
        Self::later(&mut self.latest_activity, date);
        let description = first.get("description").unwrap_or("").to_owned();
        let upper = description.to_ascii_uppercase();
        let code = first.get("type").map(|t| t.trim().to_ascii_uppercase());
        let id = first
            .get("actionID")
            .or(first.get("transactionID"))
            .map_or_else(
                || {
                    format!(
                        "ca-{}-{}-{}",
                        cut(statement.account()),
                        first.line,
                        self.actions.len() + 1
                    )
                },
                |id| format!("ca-{id}"),
            );
        let mut action = KeyedRow::new();
        action.insert("id", id);
        action.insert("account", self.account_id(account));
        action.insert("date", date.to_string());
        let left_out = |why: &str| {
            format!(
                "{}: corporate action {} ({} row(s)) was left out: {why}; the positions it changes will differ from IBKR's (state it in the book's corporate_actions to fix them)",
                first.location(),
                shown(&description),
                rows.len()
            )
        };
        match (outs.as_slice(), ins.as_slice()) {
            ([(from, old, out_row)], [(to, new, in_row)])
                if from != to && !proceeds.is_zero() && !proceeds.is_negative() =>
            {
                let merger = StockAndCash {
                    from,
                    old: *old,
                    to,
                    new: *new,
                    cash: proceeds,
                    out_row,
                    in_row,
                };
                return self.stock_and_cash(action, &merger, rows.len());
            }
            ([(from, old, _)], [(to, new, _)]) if from != to && proceeds.is_zero() => {
                action.insert("exchange", from.0.clone());
                action.insert("symbol", from.1.clone());
                action.insert("kind", "stock_merger");
                action.insert("target_exchange", to.0.clone());
                action.insert("target_symbol", to.1.clone());
                action.insert("new_units", new.to_string());
                action.insert("old_units", old.to_string());
            }
            ([(from, old, _)], []) if !proceeds.is_negative() => {
                let worthless = upper.contains("WORTHLESS")
                    || upper.contains("DELIST")
                    || upper.contains("EXPIRE DIVIDEND RIGHT")
                    || code.as_deref().is_some_and(|t| t == "DW" || t == "ED");
                if proceeds.is_zero() && !worthless {
                    self.notes.push(left_out(
                        "it takes the units out for nothing and the statement has no row of what they became",
                    ));
                    self.skip("corporate actions of a shape tradedesk cannot model".to_owned());
                    return Ok(());
                }
                let per_unit = proceeds
                    .0
                    .checked_div(old.0)
                    .map(|d| d.round_dp(MAX_PLACES).normalize())
                    .unwrap_or_default();
                action.insert("exchange", from.0.clone());
                action.insert("symbol", from.1.clone());
                action.insert("kind", "cash_merger");
                action.insert("cash_per_unit", per_unit.to_string());
                action.insert("quantity", old.to_string());
            }
            ([], [(to, _, _)]) if split_ratio(&upper).is_some() => {
                let Some((new, old)) = split_ratio(&upper) else {
                    return Ok(());
                };
                action.insert("exchange", to.0.clone());
                action.insert("symbol", to.1.clone());
                action.insert("kind", "split");
                action.insert("new_units", new.to_string());
                action.insert("old_units", old.to_string());
            }
            ([], [(to, quantity, row)]) if is_delivery(code.as_deref(), &upper) => {
                let delivery = Delivery {
                    to,
                    quantity: *quantity,
                    row,
                    description: &description,
                    code: code.as_deref(),
                };
                return self.delivery(action, &delivery, account, date);
            }
            _ => {
                self.notes.push(left_out(
                    "its rows are not one instrument exchanged for another, for cash, or a split stated as n FOR m",
                ));
                self.skip("corporate actions of a shape tradedesk cannot model".to_owned());
                return Ok(());
            }
        }
        self.actions.push(action);
        Ok(())
    }

    /// New units delivered against a holding (one row, positive quantity, no row taking
    /// units out): a stock dividend or bonus issue of the same instrument is a split of
    /// (m + n) for m; new units of another instrument (a spin-off, rights, a dividend in
    /// kind) are a `spin_off` of n for m held, whose cost fraction comes from
    /// [`FlexOptions::cost_fractions`], else from the Open Positions
    /// ([`Builder::stated_cost_fraction`]), else the action is left out with a note.
    fn delivery(
        &mut self,
        mut action: KeyedRow,
        d: &Delivery<'_>,
        account: usize,
        date: NaiveDate,
    ) -> Result<(), FlexError> {
        let upper = d.description.to_ascii_uppercase();
        // The codes `is_delivery` lets through, else the description's words.
        let what = match d.code {
            Some("SO" | "CO") => "spin-off",
            Some("RI" | "DI") => "rights issue",
            Some("SD") => "stock dividend",
            Some("HI") => "choice dividend",
            _ if upper.contains("SPINOFF") => "spin-off",
            _ if upper.contains("RIGHTS") => "rights issue",
            _ => "stock dividend",
        };
        let left_out = |why: String| {
            format!(
                "{}: {what} {} was left out: {why}; the positions it changes will differ from IBKR's",
                d.row.location(),
                shown(d.description),
            )
        };
        let Some((n, m)) = ratio_in(&upper) else {
            self.notes.push(left_out(
                "its description states no ratio (n FOR m held); state it in the book's corporate_actions".to_owned(),
            ));
            self.skip("corporate actions of a shape tradedesk cannot model".to_owned());
            return Ok(());
        };
        let head = description_head(d.description);
        let same = head.is_some_and(|(symbol, isin)| {
            d.row.get("isin").or(d.row.get("securityID")) == Some(isin)
                || (d.to.1 == symbol && !self.isin_conid.contains_key(isin))
                || self.parent_key(symbol, isin).as_ref() == Some(d.to)
        });
        if same {
            // Bonus shares of the holding itself: n more for every m, cost spread over all.
            let Some(total) = m.checked_add(n) else {
                return Ok(());
            };
            action.insert("exchange", d.to.0.clone());
            action.insert("symbol", d.to.1.clone());
            action.insert("kind", "split");
            action.insert("new_units", total.normalize().to_string());
            action.insert("old_units", m.normalize().to_string());
            self.actions.push(action);
            return Ok(());
        }
        let Some((parent_symbol, isin)) = head else {
            self.notes.push(left_out(
                "its description does not name the holding it was paid on (PARENT(ISIN) ...)"
                    .to_owned(),
            ));
            self.skip("corporate actions of a shape tradedesk cannot model".to_owned());
            return Ok(());
        };
        let Some(parent) = self.parent_key(parent_symbol, isin) else {
            self.notes.push(left_out(format!(
                "the statement has no row of the holding it was paid on ({})",
                shown(parent_symbol)
            )));
            self.skip("corporate actions of a shape tradedesk cannot model".to_owned());
            return Ok(());
        };
        let raw_symbol = d.row.get("symbol").map_or(d.to.1.as_str(), str::trim);
        let configured = self
            .options
            .cost_fractions
            .get(raw_symbol)
            .or_else(|| self.options.cost_fractions.get(&d.to.1))
            .copied();
        let fraction = if let Some(f) = configured {
            if let Some((stated, why)) = self.stated_cost_fraction(account, &parent, d.to, date)
                && stated != f
            {
                self.notes.push(format!(
                    "{}: {what} {}: the configured cost fraction {f} for {} differs from the {stated} the statement implies ({why}); the configured one was used",
                    d.row.location(),
                    shown(d.description),
                    shown(raw_symbol)
                ));
            }
            f
        } else if let Some((stated, why)) = self.stated_cost_fraction(account, &parent, d.to, date)
        {
            self.notes.push(format!(
                "{}: {what} {}: {} takes {stated} of {}'s cost basis, as the statement's Open Positions imply ({why})",
                d.row.location(),
                shown(d.description),
                shown(&d.to.1),
                shown(&parent.1)
            ));
            stated
        } else {
            self.notes.push(left_out(format!(
                "IBKR's row does not say what share of {}'s cost basis the {} units of {} take, and the statement's Open Positions do not show it (both held, with costBasisMoney, untraded since the action); give it as cost_fractions = {{ \"{}\" = \"0.25\" }} in the account's flex entry of tradedesk.toml (or --cost-fraction {}=0.25 to tradedesk import flex), the share IBKR applied: the Cost Basis of both in the Open Positions of the Activity Statement right after the action, or the issuer's Form 8937",
                shown(&parent.1),
                d.quantity,
                shown(&d.to.1),
                raw_symbol,
                raw_symbol
            )));
            self.skip("corporate actions without a cost fraction".to_owned());
            return Ok(());
        };
        action.insert("exchange", parent.0.clone());
        action.insert("symbol", parent.1.clone());
        action.insert("kind", "spin_off");
        action.insert("target_exchange", d.to.0.clone());
        action.insert("target_symbol", d.to.1.clone());
        action.insert("new_units", n.normalize().to_string());
        action.insert("old_units", m.normalize().to_string());
        action.insert("cost_fraction", fraction.normalize().to_string());
        self.actions.push(action);
        Ok(())
    }

    /// The instrument a description's head names: by its ISIN's `conid`, else the one
    /// instrument of that symbol.
    fn parent_key(&self, symbol: &str, isin: &str) -> Option<(String, String)> {
        if let Some(key) = self
            .isin_conid
            .get(isin)
            .and_then(|c| self.conid_key.get(c))
        {
            return Some(key.clone());
        }
        let mut named = self.instruments.iter().filter(|i| i.symbol == symbol);
        match (named.next(), named.next()) {
            (Some(i), None) => Some((i.exchange.clone(), i.symbol.clone())),
            _ => None,
        }
    }

    /// The share of the parent's cost the new instrument took, as the statement's latest
    /// Open Positions show it: child cost / (parent cost + child cost), when both are held
    /// on or after the action's date with a cost basis and neither was traded since.
    fn stated_cost_fraction(
        &self,
        account: usize,
        parent: &(String, String),
        child: &(String, String),
        date: NaiveDate,
    ) -> Option<(Decimal, String)> {
        let (p_date, _, p_cost) = self.position_cost.get(&(account, parent.clone()))?;
        let (c_date, _, c_cost) = self.position_cost.get(&(account, child.clone()))?;
        if *p_date < date || *c_date < date || p_cost.is_negative() || c_cost.is_negative() {
            return None;
        }
        let traded = self.fills.iter().any(|f| {
            f.account == account
                && !f.cancelled
                && f.trade_date >= date
                && (f.key == *parent || f.key == *child)
        });
        if traded {
            return None;
        }
        let total = p_cost.checked_add(*c_cost)?;
        let fraction = c_cost
            .0
            .checked_div(total.0)?
            .round_dp(MAX_PLACES)
            .normalize();
        Some((
            fraction,
            format!(
                "costBasisMoney {} of {} and {} of {} on {}",
                c_cost,
                cut(&child.1),
                p_cost,
                cut(&parent.1),
                (*p_date).min(*c_date)
            ),
        ))
    }

    /// A stock-and-cash merger (the holding becomes `new` units of another instrument and
    /// cash): the cash part is realized and the rest of the cost carried to the new units.
    /// The cash takes the share of the cost that it is of the deal's value (cash / (cash +
    /// the new units' `value` IBKR's row states)): a `spin_off` of the holding into a
    /// line `SYMBOL (cash part)` with that cost fraction, closed by a `cash_merger` at the
    /// cash per unit, then a `stock_merger` of the holding. Without a stated value the
    /// cash is left out with a note.
    fn stock_and_cash(
        &mut self,
        mut action: KeyedRow,
        m: &StockAndCash<'_>,
        rows: usize,
    ) -> Result<(), FlexError> {
        let id = action.get("id").unwrap_or("ca").to_owned();
        let value = m
            .in_row
            .decimal("value")?
            .filter(|v| !v.is_negative() && !v.is_zero());
        let stated = m
            .out_row
            .get("fifoPnlRealized")
            .and_then(|v| Dec::parse(v).ok());
        let currency = m.out_row.get("currency").unwrap_or("");
        let description = m.out_row.get("description").unwrap_or("");
        let per_unit = m
            .cash
            .0
            .checked_div(m.old.0)
            .map(|d| d.round_dp(MAX_PLACES).normalize())
            .unwrap_or_default();
        let stock = |action: &mut KeyedRow| {
            action.insert("exchange", m.from.0.clone());
            action.insert("symbol", m.from.1.clone());
            action.insert("kind", "stock_merger");
            action.insert("target_exchange", m.to.0.clone());
            action.insert("target_symbol", m.to.1.clone());
            action.insert("new_units", m.new.to_string());
            action.insert("old_units", m.old.to_string());
        };
        let ibkr = stated.map_or_else(String::new, |r| {
            format!("; IBKR's row states fifoPnlRealized {r}")
        });
        let Some(value) = value else {
            stock(&mut action);
            self.actions.push(action);
            self.notes.push(format!(
                "{}: stock-and-cash merger {} ({rows} row(s)): the {} units of {} became {} of {}, cost carried whole; the {currency} {} in cash was left out (IBKR's row for {} states no value to share the cost between the cash and the new units), so cash and realized P&L differ from IBKR's{ibkr}",
                m.out_row.location(),
                shown(description),
                m.old,
                shown(&m.from.1),
                m.new,
                shown(&m.to.1),
                m.cash,
                shown(&m.to.1),
            ));
            return Ok(());
        };
        let Some(deal) = m.cash.checked_add(value) else {
            return Ok(());
        };
        let fraction = m
            .cash
            .0
            .checked_div(deal.0)
            .map(|d| d.round_dp(MAX_PLACES).normalize())
            .unwrap_or_default();
        let part = (m.from.0.clone(), format!("{} (cash part)", m.from.1));
        if !self.instrument_index.contains_key(&part)
            && let Some(from) = self
                .instrument_index
                .get(m.from)
                .and_then(|&i| self.instruments.get(i))
                .cloned()
        {
            let draft = InstrumentDraft {
                symbol: part.1.clone(),
                name: Some(format!(
                    "the cash part of {}'s stock-and-cash merger",
                    from.symbol
                )),
                ..from
            };
            self.instrument_index
                .insert(part.clone(), self.instruments.len());
            self.instruments.push(draft);
        }
        let base = |suffix: &str| {
            let mut a = action.clone();
            a.insert("id", format!("{id}{suffix}"));
            a
        };
        let mut split = base("-cash-part");
        split.insert("exchange", m.from.0.clone());
        split.insert("symbol", m.from.1.clone());
        split.insert("kind", "spin_off");
        split.insert("target_exchange", part.0.clone());
        split.insert("target_symbol", part.1.clone());
        split.insert("new_units", "1");
        split.insert("old_units", "1");
        split.insert("cost_fraction", fraction.to_string());
        let mut paid = base("-cash");
        paid.insert("exchange", part.0.clone());
        paid.insert("symbol", part.1.clone());
        paid.insert("kind", "cash_merger");
        paid.insert("cash_per_unit", per_unit.to_string());
        stock(&mut action);
        self.actions.push(split);
        self.actions.push(paid);
        self.actions.push(action);
        self.notes.push(format!(
            "{}: stock-and-cash merger {}: the {} units of {} became {} of {} and {currency} {} in cash; the cash was realized against {fraction} of the holding's cost (cash / (cash + the value {} IBKR's row gives the new units)), the rest of the cost carried to {}{ibkr} (docs/methodology/corporate-actions.md)",
            m.out_row.location(),
            shown(description),
            m.old,
            shown(&m.from.1),
            m.new,
            shown(&m.to.1),
            m.cash,
            value,
            shown(&m.to.1),
        ));
        Ok(())
    }

    /// The cost basis of each holding in the statement's Open Positions
    /// (`costBasisMoney`), kept per account and instrument from the latest report date,
    /// for [`Builder::stated_cost_fraction`]. Rows without it are passed over.
    fn position_costs(&mut self, statement: &Statement) -> Result<(), FlexError> {
        let has_summary = statement.positions.iter().any(|r| {
            r.get("levelOfDetail")
                .is_none_or(|l| l.eq_ignore_ascii_case("SUMMARY"))
        });
        let statement_date = statement.header.date("toDate")?;
        for row in &statement.positions {
            let summary = row
                .get("levelOfDetail")
                .is_none_or(|l| l.eq_ignore_ascii_case("SUMMARY"));
            if summary != has_summary
                || row
                    .get("assetCategory")
                    .is_none_or(|c| asset_class(c, row.get("subCategory")).is_none())
            {
                continue;
            }
            let (Some(Ok(cost)), Some(date)) = (
                row.get("costBasisMoney").map(Dec::parse),
                row.date("reportDate")?.or(statement_date),
            ) else {
                continue;
            };
            let account = self.account_of(row, statement)?;
            let spec = self.instrument_spec(row)?;
            let slot = (account, (spec.exchange, spec.symbol));
            let line = statement.header.line;
            match self.position_cost.get_mut(&slot) {
                Some((d, l, total)) if *d == date && *l == line && !summary => {
                    if let Some(sum) = total.checked_add(cost) {
                        *total = sum;
                    }
                }
                Some((d, _, _)) if *d >= date => {}
                _ => {
                    self.position_cost.insert(slot, (date, line, cost));
                }
            }
        }
        Ok(())
    }

    fn cash_row(&mut self, row: &Row, statement: &Statement) -> Result<(), FlexError> {
        let statement_account = cut(statement.account());
        if let Some(level) = row.get("levelOfDetail")
            && !level.eq_ignore_ascii_case("DETAIL")
        {
            self.skip(format!(
                "account {statement_account}: <CashTransaction> rows with levelOfDetail {} (only DETAIL rows are entries)",
                cut(&level.to_ascii_uppercase())
            ));
            return Ok(());
        }
        if row.get("currency") == Some("BASE_SUMMARY") {
            self.skip(format!(
                "account {statement_account}: BASE_SUMMARY <CashTransaction> rows"
            ));
            return Ok(());
        }
        let account = self.account_of(row, statement)?;
        let kind_text = row.required("type", CASH_HINT)?;
        let amount = row.required_decimal("amount")?;
        let Some(category) = cash_category(kind_text) else {
            // Never a whole-statement refusal: the row is left out, loudly, with what it
            // moved, so the cash it misses can be reconciled by hand.
            self.notes.push(format!(
                "{}: cash transaction type {} is not one tradedesk knows; the row ({} {}) was left out of the cash, so the account's cash differs from IBKR's by that amount ({CASH_HINT})",
                row.location(),
                shown(kind_text),
                amount,
                row.get("currency").map(cut).unwrap_or_default()
            ));
            self.skip(format!(
                "account {statement_account}: cash transactions of a type tradedesk does not know"
            ));
            return Ok(());
        };
        let currency = row
            .currency("currency")?
            .ok_or_else(|| {
                row.error(
                    "currency",
                    "is missing or empty",
                    "include Currency in the Flex Query",
                )
            })?
            .to_owned();
        let (time, date) = row.time(
            &["dateTime", "reportDate", "settleDate"],
            self.options.time_zone,
        )?;
        self.count_other_currency(account, &currency);
        if amount.is_zero() {
            self.skip(format!(
                "account {statement_account}: cash transactions of amount 0"
            ));
            return Ok(());
        }
        if let Some(id) = row.get("transactionID") {
            if self.cash_ids.contains_key(&(account, id.to_owned())) {
                self.skip(format!(
                    "account {statement_account}: cash transactions repeating an earlier transactionID (overlapping statements)"
                ));
                return Ok(());
            }
            self.cash_ids
                .insert((account, id.to_owned()), self.cash.len());
        }
        let kind = match (category, amount.is_negative()) {
            (CashCategory::Transfer, false) => "deposit",
            (CashCategory::Transfer, true) => "withdrawal",
            (CashCategory::Dividend, false) => "dividend",
            (CashCategory::Dividend, true) => {
                self.notes.push(format!(
                    "{}: a negative {} (a reversal) was recorded as a fee, since the book requires dividends > 0",
                    row.location(),
                    shown(kind_text)
                ));
                "fee"
            }
            (CashCategory::Fee, true) => "fee",
            (CashCategory::Fee, false) => {
                self.notes.push(format!(
                    "{}: a positive {} (a refund or credit) was recorded as interest, since the book requires fees < 0",
                    row.location(),
                    shown(kind_text)
                ));
                "interest"
            }
            (CashCategory::Interest, _) => "interest",
            // Withholding and its refunds are tax either way, never interest.
            (CashCategory::Tax, _) => "tax",
            (CashCategory::Adjustment, true) => "fee",
            (CashCategory::Adjustment, false) => "interest",
        };
        self.has_timed_rows = true;
        Self::later(&mut self.latest_activity, date);
        self.cash.push(CashRow {
            account: self.account_id(account),
            kind: kind.to_owned(),
            amount: amount.to_string(),
            currency: currency.to_owned(),
            time,
        });
        Ok(())
    }

    /// `<OpenPositions>`: each row gives a mark (`markPrice` on `reportDate`, else on
    /// the statement's `toDate`) and a reported position (`position`, signed). When a
    /// statement has `SUMMARY` rows its `LOT` rows are skipped; when it has only `LOT`
    /// rows, their positions are added up per instrument. A negative mark is skipped
    /// with a note (the book requires marks >= 0); a repeated mark for the same
    /// instrument and date is kept once (a note says when two differ).
    fn open_positions(&mut self, statement: &Statement) -> Result<(), FlexError> {
        let level = |row: &Row| {
            row.get("levelOfDetail")
                .map_or_else(|| "SUMMARY".to_owned(), str::to_ascii_uppercase)
        };
        let has_summary = statement.positions.iter().any(|r| level(r) == "SUMMARY");
        let wanted = if has_summary { "SUMMARY" } else { "LOT" };
        let statement_date = statement.header.date("toDate")?;
        let mut sums: PositionSums = Vec::new();
        for row in &statement.positions {
            let row_level = level(row);
            if row_level != wanted {
                self.skip(format!(
                    "account {}: <OpenPosition> rows with levelOfDetail {} (the {wanted} rows were used)",
                    cut(statement.account()),
                    cut(&row_level)
                ));
                continue;
            }
            let account = self.account_of(row, statement)?;
            if self.unknown_category(row, "<OpenPosition>") {
                continue;
            }
            let key = self.instrument(row)?;
            let position = row.required_decimal("position")?;
            let date = match row.date("reportDate")? {
                Some(d) => Some(d),
                None => statement_date,
            };
            if let Some(price) = row.decimal("markPrice")? {
                let date = date.ok_or_else(|| {
                    row.error(
                        "reportDate",
                        "is missing, and the statement has no toDate: the mark has no date",
                        "include Report Date in the Open Positions section",
                    )
                })?;
                Self::later(&mut self.as_of, date);
                self.mark(row, &key, price, date);
            }
            let slot = (account, key.0.clone(), key.1.clone());
            match sums.iter_mut().find(|(k, _, _)| *k == slot) {
                None => sums.push((slot, position, row.location())),
                Some((_, total, first)) => {
                    if wanted == "SUMMARY" {
                        return Err(row.error(
                            "symbol",
                            format!(
                                "a second SUMMARY position for {}:{} (first at {first})",
                                cut(&key.0),
                                cut(&key.1)
                            ),
                            "an account holds one net position per instrument; give one Open Positions summary per account",
                        ));
                    }
                    *total = total.checked_add(position).ok_or_else(|| {
                        row.error(
                            "position",
                            "the lots add up to more than 1e12",
                            DECIMAL_HINT,
                        )
                    })?;
                }
            }
        }
        // Several statements of one account (one a day, or years merged): the positions of
        // the latest statement are what the account holds; an older one's are set aside.
        let mut accounts: Vec<usize> = sums.iter().map(|((a, _, _), _, _)| *a).collect();
        accounts.dedup();
        let mut stale = Vec::new();
        for account in accounts {
            match self.positions_as_of.get(&account) {
                Some(seen) if *seen > statement_date => {
                    stale.push(account);
                    self.skip(format!(
                        "account {}: <OpenPosition> rows of an older statement (the latest statement's positions were used)",
                        cut(statement.account())
                    ));
                }
                Some(_) => {
                    let id = self.account_id(account);
                    self.positions.retain(|p| p.account != id);
                    self.positions_as_of.insert(account, statement_date);
                }
                None => {
                    self.positions_as_of.insert(account, statement_date);
                }
            }
        }
        for ((account, exchange, symbol), quantity, _) in sums {
            if stale.contains(&account) {
                continue;
            }
            self.positions.push(PositionRow {
                account: self.account_id(account),
                exchange,
                symbol,
                quantity: quantity.to_string(),
            });
        }
        Ok(())
    }

    fn mark(&mut self, row: &Row, key: &(String, String), price: Dec, date: NaiveDate) {
        if price.is_negative() {
            self.notes.push(format!(
                "{}: markPrice {} is negative and was left out (the book requires marks >= 0)",
                row.location(),
                price
            ));
            return;
        }
        let slot = (key.0.clone(), key.1.clone(), date);
        if let Some(first) = self.mark_index.get(&slot) {
            if !first.same_value(price) {
                self.notes.push(format!(
                    "{}: markPrice {price} for {}:{} on {date} differs from the {first} read earlier; the first was kept",
                    row.location(),
                    cut(&key.0),
                    cut(&key.1)
                ));
            }
            return;
        }
        self.mark_index.insert(slot, price);
        self.marks.push(MarkRow {
            exchange: key.0.clone(),
            symbol: key.1.clone(),
            price: price.to_string(),
            date: date.to_string(),
        });
    }

    /// One `<ConversionRate>`: `1 fromCurrency = rate toCurrency` on `reportDate`
    /// (else the statement's `toDate`). A rate <= 0 (IBKR writes `-1` when it has
    /// none) or between a currency and itself is skipped; a repeat is kept once.
    fn rate(&mut self, row: &Row, statement: &Statement) -> Result<(), FlexError> {
        let hint = "include From/To Currency in the Conversion Rates section";
        let base = row
            .currency("fromCurrency")?
            .ok_or_else(|| row.error("fromCurrency", "is missing or empty", hint))?
            .to_owned();
        let quote = row
            .currency("toCurrency")?
            .ok_or_else(|| row.error("toCurrency", "is missing or empty", hint))?
            .to_owned();
        let rate = row.required_decimal("rate")?;
        let date = match row.date("reportDate")? {
            Some(d) => d,
            None => statement.header.date("toDate")?.ok_or_else(|| {
                row.error(
                    "reportDate",
                    "is missing, and the statement has no toDate",
                    "include Report Date in the Conversion Rates section",
                )
            })?,
        };
        if rate.is_negative() || rate.is_zero() {
            self.skip(
                "<ConversionRate> rows without a rate (IBKR writes -1 when it has none)".to_owned(),
            );
            return Ok(());
        }
        if base == quote {
            self.skip("<ConversionRate> rows between a currency and itself".to_owned());
            return Ok(());
        }
        Self::later(&mut self.as_of, date);
        let slot = (base.clone(), quote.clone(), date);
        if let Some(first) = self.fx_index.get(&slot) {
            if !first.same_value(rate) {
                self.notes.push(format!(
                    "{}: {base}/{quote} rate {rate} on {date} differs from the {first} read earlier; the first was kept",
                    row.location()
                ));
            }
            self.skip(
                "<ConversionRate> rows repeating a rate already read (each statement lists them)"
                    .to_owned(),
            );
            return Ok(());
        }
        self.fx_index.insert(slot, rate);
        self.fx.push(FxRow {
            base: base.to_owned(),
            quote: quote.to_owned(),
            rate: rate.to_string(),
            date: date.to_string(),
        });
        Ok(())
    }

    /// An account of the book. Its currency is `<AccountInformation currency>`, else
    /// the most common currency of its trades (the first seen on a tie), else an error.
    fn account_row(&mut self, index: usize) -> Result<Option<AccountRow>, FlexError> {
        let Some(draft) = self.accounts.get(index) else {
            return Ok(None);
        };
        let currency = if let Some(c) = &draft.currency {
            c.clone()
        } else {
            let (seen, rows) = if draft.trade_currencies.is_empty() {
                (&draft.other_currencies, "cash and corporate-action rows")
            } else {
                (&draft.trade_currencies, "trades")
            };
            let mut best: Option<&(String, usize)> = None;
            for entry in seen {
                if best.is_none_or(|b| entry.1 > b.1) {
                    best = Some(entry);
                }
            }
            let Some((currency, _)) = best else {
                if !draft.unread.is_empty() {
                    return Err(FlexError::new(
                        draft.location.clone(),
                        None,
                        format!(
                            "account {} has none of the sections tradedesk reads, only {} (not read: {}), so neither its history nor its currency can be known",
                            cut(&draft.raw),
                            draft
                                .unread
                                .iter()
                                .map(|s| format!("<{}>", cut(s)))
                                .collect::<Vec<_>>()
                                .join(", "),
                            if draft.unread.iter().any(|s| s == "StmtFunds") {
                                "the Statement of Funds is a cash ledger in the base currency, not the executions of the Trades section"
                            } else {
                                "tradedesk reads Account Information, Trades, Open Positions, Cash Transactions, Corporate Actions and Conversion Rates"
                            }
                        ),
                        "make the Activity Flex Query select Account Information (with Currency), Trades (Executions), Open Positions, Cash Transactions and Corporate Actions (the README's IBKR section lists the fields), then run it again",
                    ));
                }
                return Err(FlexError::new(
                    draft.location.clone(),
                    Some("currency"),
                    format!(
                        "account {} has no <AccountInformation currency> and no trades, cash or corporate actions to infer its currency from",
                        cut(&draft.raw)
                    ),
                    "include the Account Information section (with Currency) in the Flex Query",
                ));
            };
            self.notes.push(format!(
                "account {}: no <AccountInformation currency>, so its currency was taken as {currency}, the most common currency of its {rows}",
                cut(&draft.raw)
            ));
            currency.clone()
        };
        Ok(Some(AccountRow {
            id: format!("{}{}", self.options.account_prefix, draft.raw),
            broker: BROKER.to_owned(),
            currency,
            name: draft.name.clone(),
        }))
    }

    /// Settles each account's currency, `as_of` and `base_currency`, and writes the book.
    fn finish(mut self, doc: &Document) -> Result<FlexImport, FlexError> {
        let mut accounts = Vec::with_capacity(self.accounts.len());
        for i in 0..self.accounts.len() {
            accounts.extend(self.account_row(i)?);
        }
        let currencies: Vec<Option<String>> =
            accounts.iter().map(|a| Some(a.currency.clone())).collect();
        let from_rows = self.rates_from_rows(&currencies);
        if from_rows > 0 {
            self.notes.push(format!(
                "{from_rows} rate(s) were taken from the rows' fxRateToBase (IBKR's rate into the account's currency on the row's date), for the dates and currencies the Conversion Rates section does not cover"
            ));
        }
        let base_currency = accounts
            .first()
            .map(|a| a.currency.clone())
            .ok_or_else(|| {
                let location = doc
                    .statements
                    .first()
                    .map_or_else(|| "the document".to_owned(), |s| s.header.location());
                FlexError::new(
                    location,
                    Some("accountId"),
                    "no statement names an account",
                    "include Account ID in the Flex Query",
                )
            })?;
        let as_of = self.as_of.or(self.latest_activity).ok_or_else(|| {
            let location = doc
                .statements
                .first()
                .map_or_else(|| "the document".to_owned(), |s| s.header.location());
            FlexError::new(
                location,
                Some("toDate"),
                "the statement has no toDate, open positions, rates or dated rows to take as_of from",
                "give the statement as IBKR sent it (the <FlexStatement> carries toDate)",
            )
        })?;
        if self.has_timed_rows {
            self.notes.push(format!(
                "times were read as {}; set the time zone option if the Flex Query is configured otherwise",
                self.options.time_zone.describe()
            ));
        }
        if self.has_fx_trades {
            self.notes.push(
                "currency conversions (assetCategory CASH) were imported as fx instruments, which the book treats as margin-settled: a conversion moves no cash in the book, and the converted amount shows as an fx position".to_owned(),
            );
        }
        if self.has_bonds {
            self.notes.push(
                "bonds were imported: IBKR quotes bond prices in percent of face value while the book values quantity x price x multiplier, so check each bond's multiplier".to_owned(),
            );
        }
        let unstated: Vec<String> = self
            .instruments
            .iter()
            .filter(|i| {
                !i.multiplier_stated && matches!(i.asset_class, "option" | "future" | "cfd")
            })
            .map(|i| format!("{}:{}", i.exchange, i.symbol))
            .collect();
        if !unstated.is_empty() {
            self.notes.push(format!(
                "the statement gives no multiplier for {}: 1 is assumed; add the Multiplier field to the Flex Query's Trades and Open Positions sections",
                unstated.join(", ")
            ));
        }
        if self.rows_without_conid > 0 {
            self.notes.push(format!(
                "IMPORTANT: {} row(s) carry no conid, so instruments are told apart by symbol and listing exchange alone: a contract IBKR renames (a split into a new contract, a merger, a tender) is then two instruments, and two listings of one symbol may be one; add Conid (and Listing Exchange) to every section of the Flex Query",
                self.rows_without_conid
            ));
        }
        if self.rows_without_listing > 0 {
            self.notes.push(format!(
                "{} row(s) have no listing exchange (neither listingExchange nor another row of the same conid): their instruments are keyed under exchange IBKR, never under the venue each execution was routed to; add Listing Exchange to the Flex Query",
                self.rows_without_listing
            ));
        }
        for (reason, count) in std::mem::take(&mut self.skips) {
            self.notes.push(format!("skipped {count}: {reason}"));
        }
        let fills: Vec<FillRow> = self
            .fills
            .into_iter()
            .filter(|f| !f.cancelled)
            .map(|f| f.row)
            .collect();
        let instruments: Vec<InstrumentRow> =
            self.instruments.into_iter().map(instrument_row).collect();
        let fill_count = fills.len();
        Ok(FlexImport {
            rows: BookRows {
                format: FormatLine,
                base_currency,
                as_of: as_of.to_string(),
                accounts,
                instruments,
                fills,
                cash: self.cash,
                marks: self.marks,
                fx_rates: self.fx,
                reported_positions: self.positions,
                corporate_actions: self.actions,
            },
            notes: self.notes,
            fills: fill_count,
            skipped: self.skipped,
        })
    }
}

fn instrument_row(instrument: InstrumentDraft) -> InstrumentRow {
    // A derivative's stated 1 is written, so the book can tell it from an absent one.
    let derivative = matches!(instrument.asset_class, "option" | "future" | "cfd");
    let multiplier = (!instrument.multiplier.same_value(Dec::ONE)
        || (derivative && instrument.multiplier_stated))
        .then(|| instrument.multiplier.to_string());
    InstrumentRow {
        symbol: instrument.symbol,
        exchange: instrument.exchange,
        currency: instrument.currency,
        asset_class: instrument.asset_class.to_owned(),
        multiplier,
        name: instrument.name,
        sector: None,
        country: None,
    }
}

/// `time` (RFC 3339) re-written in the UTC offset nearest its own whose calendar date is
/// `date`, if there is one (offsets run from -12:00 to +14:00).
fn on_trade_date(time: &str, date: NaiveDate) -> Option<String> {
    let instant = chrono::DateTime::parse_from_rfc3339(time).ok()?;
    let own = instant.offset().local_minus_utc() / 3600;
    let mut hours: Vec<i32> = (-12..=14).collect();
    hours.sort_by_key(|h| (h - own).abs());
    hours.into_iter().find_map(|h| {
        let offset = chrono::FixedOffset::east_opt(h * 3600)?;
        let local = instant.with_timezone(&offset);
        (local.date_naive() == date).then(|| local.to_rfc3339())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    #![allow(clippy::too_many_lines)]

    use super::*;
    use crate::book::fingerprint;
    use serde_json::Value;

    /// Two accounts, every section, every row kind the import handles.
    const TWO_ACCOUNTS: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<FlexQueryResponse queryName="tradedesk-test" type="AF">
<FlexStatements count="2">
<FlexStatement accountId="U1111111" fromDate="20250101" toDate="20251231" period="LastYear" whenGenerated="20260102;083000">
<AccountInformation accountId="U1111111" acctAlias="" currency="USD" name="Test Trader One" accountType="Individual"/>
<Trades>
<Trade accountId="U1111111" currency="USD" fxRateToBase="1" assetCategory="STK" symbol="AAPL" description="APPLE INC" conid="265598" listingExchange="NASDAQ" exchange="ISLAND" multiplier="1" tradeID="101" ibExecID="0001.A" ibOrderID="9001" dateTime="20250307;155900" tradeDate="20250307" quantity="100" tradePrice="239.07" ibCommission="-1.00" ibCommissionCurrency="USD" buySell="BUY" openCloseIndicator="O" levelOfDetail="EXECUTION" transactionType="ExchTrade"/>
<Order accountId="U1111111" currency="USD" assetCategory="STK" symbol="AAPL" description="APPLE INC" conid="265598" listingExchange="NASDAQ" multiplier="1" ibOrderID="9001" dateTime="20250307;155900" quantity="100" tradePrice="239.07" ibCommission="-1.00" buySell="BUY" levelOfDetail="ORDER"/>
<Trade accountId="U1111111" currency="USD" assetCategory="STK" symbol="AAPL" description="APPLE INC" conid="265598" listingExchange="" exchange="ARCA" multiplier="1" tradeID="102" ibExecID="0001.B" dateTime="2025-03-10;09:30:00" tradeDate="20250310" quantity="-40" tradePrice="227.480" ibCommission="-1.0512" ibCommissionCurrency="USD" buySell="SELL" levelOfDetail="EXECUTION"/>
<Trade accountId="U1111111" currency="USD" assetCategory="OPT" symbol="AAPL  251219C00200000 " description="AAPL 19DEC25 200 C" conid="7777" listingExchange="" exchange="CBOE" multiplier="100" tradeID="103" ibExecID="0001.C" dateTime="20251031 153000" tradeDate="20251031" quantity="2" tradePrice="12.35" ibCommission="-1.3" ibCommissionCurrency="USD" buySell="BUY" putCall="C" strike="200" expiry="20251219" levelOfDetail="EXECUTION"/>
<Trade accountId="U1111111" currency="USD" assetCategory="OPT" symbol="AAPL  251219C00200000" description="AAPL 19DEC25 200 C" conid="7777" exchange="BOX" multiplier="100" tradeID="104" ibExecID="0001.D" dateTime="20251103;100000" tradeDate="20251103" quantity="-2" tradePrice="15.10" ibCommission="-1.3" ibCommissionCurrency="USD" buySell="SELL" levelOfDetail="EXECUTION"/>
<Trade accountId="U1111111" currency="USD" assetCategory="STK" symbol="MSFT" description="MICROSOFT CORP" conid="272093" listingExchange="NASDAQ" multiplier="1" tradeID="105" ibExecID="0001.E" dateTime="20250415;110000" tradeDate="20250415" quantity="10" tradePrice="400" ibCommission="-1" ibCommissionCurrency="USD" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U1111111" currency="USD" assetCategory="STK" symbol="MSFT" description="MICROSOFT CORP" conid="272093" listingExchange="NASDAQ" multiplier="1" tradeID="106" ibExecID="0001.F" dateTime="20250415;110500" tradeDate="20250415" quantity="-10" tradePrice="400" ibCommission="1" ibCommissionCurrency="USD" buySell="SELL (Ca.)" origTradeID="105" levelOfDetail="EXECUTION"/>
<Trade accountId="U1111111" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" quantity="60" tradePrice="0" levelOfDetail="SYMBOL_SUMMARY"/>
<Trade accountId="U1111111" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" quantity="-40" tradePrice="239.07" levelOfDetail="CLOSED_LOT"/>
</Trades>
<CashTransactions>
<CashTransaction accountId="U1111111" currency="USD" type="Deposits/Withdrawals" description="CASH RECEIPTS" dateTime="20250102" amount="50000" transactionID="c1" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Deposits/Withdrawals" description="DISBURSEMENT" dateTime="20250601;120000" amount="-2500.00" transactionID="c2" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Dividends" description="AAPL CASH DIVIDEND USD 0.25" dateTime="20250515;202000" amount="25.00" transactionID="c3" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Withholding Tax" description="AAPL US TAX" dateTime="20250515;202000" amount="-3.75" transactionID="c4" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Broker Interest Received" dateTime="20250603" amount="12.34" transactionID="c5" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Broker Interest Paid" dateTime="20250603" amount="-4.56" transactionID="c6" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Other Fees" dateTime="20250701" amount="-10.00" transactionID="c7" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Commission Adjustments" dateTime="20250702" amount="-0.25" transactionID="c8" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Payment In Lieu Of Dividends" dateTime="20250815" amount="5.00" transactionID="c9" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Withholding Tax" description="TAX REFUND" dateTime="20250816" amount="1.00" transactionID="c10" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Dividends" description="REVERSAL" dateTime="20250817" amount="-25.00" transactionID="c11" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Dividends" dateTime="20250818" amount="0" transactionID="c12" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Deposits/Withdrawals" dateTime="20250102" amount="50000" transactionID="c1" levelOfDetail="DETAIL"/>
<CashTransaction accountId="U1111111" currency="USD" type="Dividends" amount="30.00" levelOfDetail="SUMMARY"/>
</CashTransactions>
<OpenPositions>
<OpenPosition accountId="U1111111" currency="USD" assetCategory="STK" symbol="AAPL" description="APPLE INC" conid="265598" listingExchange="NASDAQ" multiplier="1" reportDate="20251231" position="60" markPrice="250.42" levelOfDetail="SUMMARY"/>
<OpenPosition accountId="U1111111" currency="USD" assetCategory="STK" symbol="AAPL" conid="265598" listingExchange="NASDAQ" reportDate="20251231" position="60" markPrice="250.42" levelOfDetail="LOT"/>
</OpenPositions>
<ConversionRates>
<ConversionRate reportDate="20251231" fromCurrency="EUR" toCurrency="USD" rate="1.1745"/>
<ConversionRate reportDate="20251231" fromCurrency="GBP" toCurrency="USD" rate="-1"/>
</ConversionRates>
</FlexStatement>
<FlexStatement accountId="U2222222" fromDate="2025-01-01" toDate="2025-12-31" period="LastYear" whenGenerated="20260102;083000">
<AccountInformation accountId="U2222222" currency="EUR" name="Test Trader Two"/>
<Trades>
<Trade accountId="U2222222" currency="EUR" assetCategory="STK" symbol="SAP" description="SAP SE" conid="14204" listingExchange="IBIS" multiplier="1" tradeID="201" ibExecID="0002.A" dateTime="2025-06-02;09:15:00" quantity="20" tradePrice="262.15" ibCommission="-3.00" ibCommissionCurrency="EUR" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U2222222" currency="USD" assetCategory="STK" symbol="MSFT" description="MICROSOFT CORP" conid="272093" listingExchange="NASDAQ" multiplier="1" tradeID="202" ibExecID="0002.B" dateTime="20250702;101500" quantity="5" tradePrice="460.36" ibCommission="-1.7" ibCommissionCurrency="EUR" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U2222222" currency="USD" assetCategory="STK" subCategory="ETF" symbol="CSPX" description="ISHARES CORE S&amp;P 500" conid="75961307" listingExchange="LSEETF" multiplier="1" tradeID="203" ibExecID="0002.C" dateTime="20250703;101500" quantity="3" tradePrice="655.20" ibCommission="-1.5" ibCommissionCurrency="EUR" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U2222222" currency="USD" assetCategory="FUT" symbol="MESZ5" description="MES 19DEC25" conid="730283085" listingExchange="CME" multiplier="5" tradeID="204" ibExecID="0002.D" dateTime="20251117;140000" quantity="-1" tradePrice="6850.25" ibCommission="-0.62" ibCommissionCurrency="USD" buySell="SELL" levelOfDetail="EXECUTION"/>
<Trade accountId="U2222222" currency="EUR" assetCategory="STK" symbol="SAP" description="SAP SE" conid="14204" listingExchange="IBIS" multiplier="1" tradeID="205" ibExecID="0002.E" dateTime="20250904;100000" quantity="-5" tradePrice="240.00" ibCommission="0.18" ibCommissionCurrency="EUR" buySell="SELL" levelOfDetail="EXECUTION"/>
</Trades>
<CashTransactions>
<CashTransaction accountId="U2222222" currency="EUR" type="Deposits &amp; Withdrawals" dateTime="20250520" amount="10000" levelOfDetail="DETAIL"/>
</CashTransactions>
<OpenPositions>
<OpenPosition accountId="U2222222" currency="EUR" assetCategory="STK" symbol="SAP" description="SAP SE" conid="14204" listingExchange="IBIS" multiplier="1" reportDate="20251231" position="10" markPrice="208.40" levelOfDetail="LOT"/>
<OpenPosition accountId="U2222222" currency="EUR" assetCategory="STK" symbol="SAP" description="SAP SE" conid="14204" listingExchange="IBIS" multiplier="1" reportDate="20251231" position="5" markPrice="208.40" levelOfDetail="LOT"/>
<OpenPosition accountId="U2222222" currency="USD" assetCategory="FUT" symbol="MESZ5" conid="730283085" listingExchange="CME" multiplier="5" reportDate="20251231" position="-1" markPrice="6901.50" levelOfDetail="LOT"/>
</OpenPositions>
<ConversionRates>
<ConversionRate reportDate="20251231" fromCurrency="EUR" toCurrency="USD" rate="1.1745"/>
<ConversionRate reportDate="20251231" fromCurrency="USD" toCurrency="EUR" rate="0.85143"/>
</ConversionRates>
</FlexStatement>
</FlexStatements>
</FlexQueryResponse>
"#;

    /// An import with its book as the JSON document the rows write, for the tables to
    /// read field by field.
    struct Imported {
        book: Value,
        notes: Vec<String>,
        fills: usize,
        skipped: usize,
    }

    fn json(import: FlexImport) -> Imported {
        // The typed assembly and the file's loader agree on every import of these tests.
        let text = import.to_json().to_string();
        match (
            import.to_book("flex"),
            crate::book::parse_book("flex", &text),
        ) {
            (Ok(typed), Ok(loaded)) => assert_eq!(
                fingerprint(&typed),
                fingerprint(&loaded),
                "the rows and their file give different books"
            ),
            (typed, loaded) => assert_eq!(typed.err(), loaded.err()),
        }
        // The typed first pass and the path-naming validator over the rows agree too.
        assert_eq!(
            crate::book::assemble_rows_fast(&import.rows).map(|b| fingerprint(&b)),
            crate::book::assemble_rows_validating("flex", &import.rows)
                .ok()
                .map(|b| fingerprint(&b)),
            "the fast pass and the validator give different books"
        );
        Imported {
            book: import.to_json(),
            notes: import.notes,
            fills: import.fills,
            skipped: import.skipped,
        }
    }

    fn import(xml: &str) -> Imported {
        json(
            flex_to_book(xml, &FlexOptions::default())
                .unwrap_or_else(|e| panic!("import failed: {e}")),
        )
    }

    fn refuse(xml: &str) -> FlexError {
        match flex_to_book(xml, &FlexOptions::default()) {
            Ok(i) => panic!("expected an error, got a book: {}", i.to_json()),
            Err(e) => e,
        }
    }

    fn section<'a>(book: &'a Value, name: &str) -> &'a Vec<Value> {
        book.get(name).and_then(Value::as_array).unwrap()
    }

    fn by<'a>(book: &'a Value, name: &str, key: &str, value: &str) -> &'a Value {
        section(book, name)
            .iter()
            .find(|v| v.get(key).and_then(Value::as_str) == Some(value))
            .unwrap_or_else(|| panic!("no {name} with {key} = {value}"))
    }

    fn s<'a>(v: &'a Value, key: &str) -> &'a str {
        v.get(key)
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no {key} in {v}"))
    }

    /// A statement with one account (USD) and the given rows in its Trades section.
    fn with_trades(rows: &str) -> String {
        format!(
            r#"<FlexQueryResponse type="AF"><FlexStatements count="1">
<FlexStatement accountId="U1" fromDate="20250101" toDate="20251231">
<AccountInformation accountId="U1" currency="USD"/>
<Trades>
{rows}
</Trades>
</FlexStatement></FlexStatements></FlexQueryResponse>"#
        )
    }

    /// A statement with one account (USD) and one extra section.
    fn with_section(section: &str) -> String {
        format!(
            r#"<FlexQueryResponse type="AF"><FlexStatements count="1">
<FlexStatement accountId="U1" fromDate="20250101" toDate="20251231">
<AccountInformation accountId="U1" currency="USD"/>
{section}
</FlexStatement></FlexStatements></FlexQueryResponse>"#
        )
    }

    const GOOD_TRADE: &str = r#"accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="1" ibExecID="E1" dateTime="20250314;103512" quantity="10" tradePrice="100" ibCommission="-1" buySell="BUY" levelOfDetail="EXECUTION""#;

    fn trade(attrs: &str) -> String {
        with_trades(&format!("<Trade {attrs}/>"))
    }

    #[test]
    fn fx_rate_to_base_is_the_rate_of_its_date_where_conversion_rates_give_none() {
        // A EUR stock bought and sold in a USD account, no Conversion Rates section;
        // a EUR dividend; a second trade the same day repeating the rate.
        let rows = r#"<Trade accountId="U1" currency="EUR" fxRateToBase="1.0843" assetCategory="STK" symbol="SAP" listingExchange="IBIS" tradeID="1" ibExecID="E1" dateTime="20250314;103512" tradeDate="20250314" quantity="10" tradePrice="200" ibCommission="-1" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U1" currency="EUR" fxRateToBase="1.0843" assetCategory="STK" symbol="SAP" listingExchange="IBIS" tradeID="2" ibExecID="E2" dateTime="20250314;113512" tradeDate="20250314" quantity="5" tradePrice="201" ibCommission="-1" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U1" currency="EUR" fxRateToBase="1.1012" assetCategory="STK" symbol="SAP" listingExchange="IBIS" tradeID="3" ibExecID="E3" dateTime="20250620;103512" tradeDate="20250620" quantity="-15" tradePrice="210" ibCommission="-1" buySell="SELL" levelOfDetail="EXECUTION"/>
<Trade accountId="U1" currency="USD" fxRateToBase="1" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="4" ibExecID="E4" dateTime="20250620;103512" tradeDate="20250620" quantity="1" tradePrice="200" ibCommission="-1" buySell="BUY" levelOfDetail="EXECUTION"/>"#;
        let imported = import(&with_trades(rows));
        let rates = section(&imported.book, "fx_rates");
        assert_eq!(
            rates,
            &vec![
                serde_json::json!({"base": "EUR", "quote": "USD", "rate": "1.0843", "date": "2025-03-14"}),
                serde_json::json!({"base": "EUR", "quote": "USD", "rate": "1.1012", "date": "2025-06-20"}),
            ]
        );
        assert!(
            imported
                .notes
                .iter()
                .any(|n| n.starts_with("2 rate(s) were taken from the rows' fxRateToBase")),
            "{:?}",
            imported.notes
        );
        // A Conversion Rates row for the date wins; the other date still comes from the rows.
        let with_rates = with_trades(rows).replace(
            "</Trades>",
            r#"</Trades><ConversionRates><ConversionRate reportDate="20250620" fromCurrency="EUR" toCurrency="USD" rate="1.1000"/></ConversionRates>"#,
        );
        let imported = import(&with_rates);
        let rates = section(&imported.book, "fx_rates");
        assert_eq!(rates.len(), 2, "{rates:?}");
        assert!(rates.contains(&serde_json::json!({"base": "EUR", "quote": "USD", "rate": "1.1000", "date": "2025-06-20"})));
        assert!(rates.contains(&serde_json::json!({"base": "EUR", "quote": "USD", "rate": "1.0843", "date": "2025-03-14"})));
    }

    #[test]
    fn rows_as_ibkr_writes_them_import() {
        // A zone abbreviation after the time; a FracShare row with only a transactionID.
        let rows = r#"<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="1" ibExecID="E1" dateTime="2025-04-25;10:19:55 EDT" quantity="10" tradePrice="100" ibCommission="-1" buySell="BUY" levelOfDetail="EXECUTION"/>
<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" transactionID="T77" dateTime="2025-12-01;10:00:00 EST" quantity="0.25" tradePrice="110" ibCommission="0" buySell="BUY" levelOfDetail="EXECUTION"/>"#;
        let imported = import(&with_trades(rows));
        let fills = section(&imported.book, "fills");
        assert_eq!(s(&fills[0], "time"), "2025-04-25T10:19:55-04:00");
        assert_eq!(s(&fills[1], "time"), "2025-12-01T10:00:00-05:00");
        assert!(s(&fills[1], "id").contains("T77"), "{:?}", fills[1]);
    }

    #[test]
    fn several_statements_of_one_account_take_the_latest_positions() {
        let statement = |from: &str, to: &str, quantity: &str| {
            format!(
                r#"<FlexStatement accountId="U1" fromDate="{from}" toDate="{to}">
<AccountInformation accountId="U1" currency="USD"/>
<OpenPositions><OpenPosition accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" position="{quantity}" markPrice="100" levelOfDetail="SUMMARY"/></OpenPositions>
</FlexStatement>"#
            )
        };
        // The later statement first in the file: its positions still stand.
        let xml = format!(
            r#"<FlexQueryResponse type="AF"><FlexStatements count="2">{}{}</FlexStatements></FlexQueryResponse>"#,
            statement("20250701", "20251231", "30"),
            statement("20250101", "20250630", "10")
        );
        let imported = import(&xml);
        let positions = section(&imported.book, "reported_positions");
        assert_eq!(positions.len(), 1, "{positions:?}");
        assert_eq!(s(&positions[0], "quantity"), "30");
    }

    #[test]
    fn a_closing_execution_without_its_opening_opens_nothing() {
        // The statement's period starts after the 10 AAPL were bought: the sale says `C`.
        let rows = r#"<Trade accountId="U1" currency="USD" fxRateToBase="1" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="1" ibExecID="E1" dateTime="20250314;103512" tradeDate="20250314" quantity="-10" tradePrice="200" ibCommission="-1" buySell="SELL" openCloseIndicator="C" levelOfDetail="EXECUTION"/>
<Trade accountId="U1" currency="USD" fxRateToBase="1" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="2" ibExecID="E2" dateTime="20250315;103512" tradeDate="20250315" quantity="-5" tradePrice="201" ibCommission="-1" buySell="SELL" openCloseIndicator="O" levelOfDetail="EXECUTION"/>"#;
        let imported = import(&with_trades(rows));
        let fills = section(&imported.book, "fills");
        assert_eq!(fills[0].get("closes"), Some(&Value::Bool(true)));
        assert_eq!(fills[1].get("closes"), None);
        let book = crate::book::parse_book("flex", &imported.book.to_string()).unwrap();
        let ledger = tradedesk_core::ledger::replay(&book, |_, _| {}).unwrap();
        // The closing sale found nothing to close and opened nothing; the opening one is a
        // real short of 5.
        assert_eq!(ledger.unmatched_closes.len(), 1);
        assert_eq!(ledger.unmatched_closes[0].quantity, Decimal::from(10));
        let open: Vec<Decimal> = ledger
            .fifo
            .open_positions()
            .map(|(_, _, q)| q.signed_quantity())
            .collect();
        assert_eq!(open, [Decimal::from(-5)]);
    }

    #[test]
    fn a_fill_is_dated_by_its_exchanges_trade_date() {
        // TC1: Tokyo, 10:00 on 14 March is 21:00 New York time on the 13th: the fill
        // keeps its instant and takes the exchange's date.
        let tokyo = GOOD_TRADE
            .replace(
                r#"dateTime="20250314;103512""#,
                r#"dateTime="20250313;210000""#,
            )
            .replace(r#"levelOfDetail"#, r#"tradeDate="20250314" levelOfDetail"#);
        let book = import(&trade(&tokyo)).book;
        let time = s(by(&book, "fills", "id", "E1"), "time").to_owned();
        let parsed = chrono::DateTime::parse_from_rfc3339(&time).unwrap();
        assert_eq!(parsed.date_naive().to_string(), "2025-03-14", "{time}");
        let expected = chrono::DateTime::parse_from_rfc3339("2025-03-14T01:00:00Z").unwrap();
        assert_eq!(parsed, expected);
        assert_eq!(
            on_trade_date(
                "2025-03-13T21:00:00-04:00",
                NaiveDate::from_ymd_opt(2025, 3, 20).unwrap()
            ),
            None
        );
    }

    #[test]
    fn transaction_taxes_are_a_cost_of_the_trade() {
        // TC1: stamp duty in the commission's currency adds to the commission.
        let book = import(&trade(&format!(r#"{GOOD_TRADE} taxes="-0.50""#))).book;
        assert_eq!(s(by(&book, "fills", "id", "E1"), "commission"), "1.50");
        // TC2: taxes in another currency than the commission are a fee in cash.
        let other = GOOD_TRADE.replace(
            r#"ibCommission="-1""#,
            r#"ibCommission="-1" ibCommissionCurrency="EUR""#,
        );
        let import = import(&trade(&format!(r#"{other} taxes="-0.25""#)));
        assert_eq!(s(by(&import.book, "fills", "id", "E1"), "commission"), "1");
        let fee = by(&import.book, "cash", "kind", "fee");
        assert_eq!((s(fee, "amount"), s(fee, "currency")), ("-0.25", "USD"));
        assert!(import.notes.iter().any(|n| n.contains("taxes")));
    }

    fn replaced(attr: &str, value: Option<&str>) -> String {
        let mut out = Vec::new();
        for part in GOOD_TRADE.split("\" ") {
            let part = part.trim_end_matches('"');
            let (k, _) = part.split_once("=\"").unwrap();
            if k == attr {
                if let Some(v) = value {
                    out.push(format!("{k}=\"{v}\""));
                }
            } else {
                out.push(format!("{part}\""));
            }
        }
        if let Some(v) = value
            && !out.iter().any(|p| p.starts_with(&format!("{attr}=")))
        {
            out.push(format!("{attr}=\"{v}\""));
        }
        trade(&out.join(" "))
    }

    #[test]
    fn two_accounts_summary() {
        let import = import(TWO_ACCOUNTS);
        let book = &import.book;
        assert_eq!(s(book, "format"), "tradedesk-book/1");
        assert_eq!(s(book, "base_currency"), "USD");
        assert_eq!(s(book, "as_of"), "2025-12-31");
        let keys: Vec<&String> = book.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "format",
                "base_currency",
                "as_of",
                "accounts",
                "instruments",
                "fills",
                "cash",
                "marks",
                "fx_rates",
                "reported_positions"
            ]
        );
        let accounts = section(book, "accounts");
        assert_eq!(accounts.len(), 2);
        assert_eq!(
            accounts[0],
            serde_json::json!({"id": "IBKR-U1111111", "broker": "ibkr", "currency": "USD", "name": "Test Trader One"})
        );
        assert_eq!(s(&accounts[1], "currency"), "EUR");
        // 4 + 5 execution rows, less the cancelled MSFT buy of account 1.
        assert_eq!(import.fills, 9);
        assert_eq!(section(book, "fills").len(), 9);
        // Order, summary, closed lot; cancellation and its original; zero cash, repeated
        // transactionID, SUMMARY cash; LOT position; -1 rate; repeated EUR/USD rate.
        assert_eq!(import.skipped, 11, "notes: {:#?}", import.notes);
        assert!(
            import
                .notes
                .iter()
                .any(|n| n.contains("(Ca.) cancellation") && n.contains("both left out"))
        );
        assert!(import.notes.iter().any(|n| n.contains("America/New_York")));
        assert!(
            import
                .notes
                .iter()
                .any(|n| n.contains("statement starts on 2025-01-01"))
        );
    }

    #[test]
    fn fills_table() {
        let import = import(TWO_ACCOUNTS);
        let book = &import.book;
        // id, account, exchange, symbol, side, quantity, price, commission, commission ccy, time
        let table = [
            (
                "0001.A",
                "IBKR-U1111111",
                "NASDAQ",
                "AAPL",
                "buy",
                "100",
                "239.07",
                "1.00",
                "USD",
                "2025-03-07T15:59:00-05:00",
            ),
            // no listingExchange on the row: taken from another row of the same conid
            (
                "0001.B",
                "IBKR-U1111111",
                "NASDAQ",
                "AAPL",
                "sell",
                "40",
                "227.480",
                "1.0512",
                "USD",
                "2025-03-10T09:30:00-04:00",
            ),
            (
                "0001.C",
                "IBKR-U1111111",
                "IBKR",
                "AAPL  251219C00200000",
                "buy",
                "2",
                "12.35",
                "1.3",
                "USD",
                "2025-10-31T15:30:00-04:00",
            ),
            // no listing exchange anywhere for this conid: IBKR, never the venue (CBOE, BOX)
            (
                "0001.D",
                "IBKR-U1111111",
                "IBKR",
                "AAPL  251219C00200000",
                "sell",
                "2",
                "15.10",
                "1.3",
                "USD",
                "2025-11-03T10:00:00-05:00",
            ),
            (
                "0002.A",
                "IBKR-U2222222",
                "IBIS",
                "SAP",
                "buy",
                "20",
                "262.15",
                "3.00",
                "EUR",
                "2025-06-02T09:15:00-04:00",
            ),
            (
                "0002.B",
                "IBKR-U2222222",
                "NASDAQ",
                "MSFT",
                "buy",
                "5",
                "460.36",
                "1.7",
                "EUR",
                "2025-07-02T10:15:00-04:00",
            ),
            (
                "0002.C",
                "IBKR-U2222222",
                "LSEETF",
                "CSPX",
                "buy",
                "3",
                "655.20",
                "1.5",
                "EUR",
                "2025-07-03T10:15:00-04:00",
            ),
            (
                "0002.D",
                "IBKR-U2222222",
                "CME",
                "MESZ5",
                "sell",
                "1",
                "6850.25",
                "0.62",
                "USD",
                "2025-11-17T14:00:00-05:00",
            ),
            (
                "0002.E",
                "IBKR-U2222222",
                "IBIS",
                "SAP",
                "sell",
                "5",
                "240.00",
                "0",
                "EUR",
                "2025-09-04T10:00:00-04:00",
            ),
        ];
        for (id, account, exchange, symbol, side, quantity, price, commission, ccy, time) in table {
            let fill = by(book, "fills", "id", id);
            let expected = serde_json::json!({
                "id": id, "account": account, "exchange": exchange, "symbol": symbol, "side": side,
                "quantity": quantity, "price": price, "commission": commission,
                "commission_currency": ccy, "time": time
            });
            assert_eq!(fill, &expected, "fill {id}");
        }
        assert!(
            section(book, "fills")
                .iter()
                .all(|f| s(f, "id") != "0001.E" && s(f, "id") != "0001.F")
        );
    }

    #[test]
    fn instruments_table() {
        let book = import(TWO_ACCOUNTS).book;
        let instruments = section(&book, "instruments");
        assert_eq!(instruments.len(), 6, "{instruments:#?}");
        // symbol, exchange, currency, class, multiplier (None = absent, i.e. 1), name
        let table = [
            ("AAPL", "NASDAQ", "USD", "equity", None, "APPLE INC"),
            (
                "AAPL  251219C00200000",
                "IBKR",
                "USD",
                "option",
                Some("100"),
                "AAPL 19DEC25 200 C",
            ),
            ("MSFT", "NASDAQ", "USD", "equity", None, "MICROSOFT CORP"),
            ("SAP", "IBIS", "EUR", "equity", None, "SAP SE"),
            ("CSPX", "LSEETF", "USD", "etf", None, "ISHARES CORE S&P 500"),
            ("MESZ5", "CME", "USD", "future", Some("5"), "MES 19DEC25"),
        ];
        for (symbol, exchange, currency, class, multiplier, name) in table {
            let i = by(&book, "instruments", "symbol", symbol);
            assert_eq!(s(i, "exchange"), exchange, "{symbol}");
            assert_eq!(s(i, "currency"), currency, "{symbol}");
            assert_eq!(s(i, "asset_class"), class, "{symbol}");
            assert_eq!(
                i.get("multiplier").and_then(Value::as_str),
                multiplier,
                "{symbol}"
            );
            assert_eq!(s(i, "name"), name, "{symbol}");
        }
    }

    #[test]
    fn cash_table() {
        let import = import(TWO_ACCOUNTS);
        let cash = section(&import.book, "cash");
        let got: Vec<(&str, &str, &str, &str, &str)> = cash
            .iter()
            .map(|c| {
                (
                    s(c, "account"),
                    s(c, "kind"),
                    s(c, "amount"),
                    s(c, "currency"),
                    s(c, "time"),
                )
            })
            .collect();
        let rebate = (
            "IBKR-U2222222",
            "interest",
            "0.18",
            "EUR",
            "2025-09-04T10:00:00-04:00",
        );
        let expected = vec![
            rebate,
            (
                "IBKR-U1111111",
                "deposit",
                "50000",
                "USD",
                "2025-01-02T00:00:00-05:00",
            ),
            (
                "IBKR-U1111111",
                "withdrawal",
                "-2500.00",
                "USD",
                "2025-06-01T12:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "dividend",
                "25.00",
                "USD",
                "2025-05-15T20:20:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "tax",
                "-3.75",
                "USD",
                "2025-05-15T20:20:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "interest",
                "12.34",
                "USD",
                "2025-06-03T00:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "fee",
                "-4.56",
                "USD",
                "2025-06-03T00:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "fee",
                "-10.00",
                "USD",
                "2025-07-01T00:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "fee",
                "-0.25",
                "USD",
                "2025-07-02T00:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "dividend",
                "5.00",
                "USD",
                "2025-08-15T00:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "tax",
                "1.00",
                "USD",
                "2025-08-16T00:00:00-04:00",
            ),
            (
                "IBKR-U1111111",
                "fee",
                "-25.00",
                "USD",
                "2025-08-17T00:00:00-04:00",
            ),
            (
                "IBKR-U2222222",
                "deposit",
                "10000",
                "EUR",
                "2025-05-20T00:00:00-04:00",
            ),
        ];
        assert_eq!(got, expected);
        for phrase in [
            "rebate",
            "recorded as a fee",
            "amount 0",
            "transactionID",
            "levelOfDetail SUMMARY",
        ] {
            assert!(
                import.notes.iter().any(|n| n.contains(phrase)),
                "no note with {phrase}: {:#?}",
                import.notes
            );
        }
    }

    #[test]
    fn marks_positions_and_rates() {
        let book = import(TWO_ACCOUNTS).book;
        assert_eq!(
            section(&book, "marks"),
            &vec![
                serde_json::json!({"exchange": "NASDAQ", "symbol": "AAPL", "price": "250.42", "date": "2025-12-31"}),
                serde_json::json!({"exchange": "IBIS", "symbol": "SAP", "price": "208.40", "date": "2025-12-31"}),
                serde_json::json!({"exchange": "CME", "symbol": "MESZ5", "price": "6901.50", "date": "2025-12-31"}),
            ]
        );
        assert_eq!(
            section(&book, "reported_positions"),
            &vec![
                serde_json::json!({"account": "IBKR-U1111111", "exchange": "NASDAQ", "symbol": "AAPL", "quantity": "60"}),
                serde_json::json!({"account": "IBKR-U2222222", "exchange": "IBIS", "symbol": "SAP", "quantity": "15"}),
                serde_json::json!({"account": "IBKR-U2222222", "exchange": "CME", "symbol": "MESZ5", "quantity": "-1"}),
            ]
        );
        assert_eq!(
            section(&book, "fx_rates"),
            &vec![
                serde_json::json!({"base": "EUR", "quote": "USD", "rate": "1.1745", "date": "2025-12-31"}),
                serde_json::json!({"base": "USD", "quote": "EUR", "rate": "0.85143", "date": "2025-12-31"}),
            ]
        );
    }

    #[test]
    fn times_table() {
        let ny = FlexTimeZone::NewYork;
        let kl = FlexTimeZone::parse("+08:00").unwrap();
        let table = [
            // the three spellings, and more
            ("20250314;103512", ny, "2025-03-14T10:35:12-04:00"),
            ("2025-03-14;10:35:12", ny, "2025-03-14T10:35:12-04:00"),
            ("20250314 103512", ny, "2025-03-14T10:35:12-04:00"),
            ("2025-03-14, 10:35:12", ny, "2025-03-14T10:35:12-04:00"),
            ("20250314", ny, "2025-03-14T00:00:00-04:00"),
            ("20250314;1035", ny, "2025-03-14T10:35:00-04:00"),
            // spring 2025: DST from Sunday 9 March 02:00
            ("20250308;235959", ny, "2025-03-08T23:59:59-05:00"),
            ("20250309;015959", ny, "2025-03-09T01:59:59-05:00"),
            ("20250309;030000", ny, "2025-03-09T03:00:00-04:00"),
            // autumn 2025: DST until Sunday 2 November 02:00 (01:30 is read as daylight)
            ("20251102;013000", ny, "2025-11-02T01:30:00-04:00"),
            ("20251102;020000", ny, "2025-11-02T02:00:00-05:00"),
            ("20251231;235959", ny, "2025-12-31T23:59:59-05:00"),
            ("20250101;000000", ny, "2025-01-01T00:00:00-05:00"),
            // before 2007: first Sunday of April to last Sunday of October
            ("20060401;120000", ny, "2006-04-01T12:00:00-05:00"),
            ("20060402;030000", ny, "2006-04-02T03:00:00-04:00"),
            ("20061029;013000", ny, "2006-10-29T01:30:00-04:00"),
            ("20061030;120000", ny, "2006-10-30T12:00:00-05:00"),
            ("20070311;030000", ny, "2007-03-11T03:00:00-04:00"),
            // a fixed offset applies no rule
            ("20250714;103512", kl, "2025-07-14T10:35:12+08:00"),
            ("20250114;103512", kl, "2025-01-14T10:35:12+08:00"),
        ];
        for (text, zone, expected) in table {
            let local = parse_flex_datetime(text).unwrap_or_else(|| panic!("{text} unread"));
            assert_eq!(rfc3339(local, zone).as_deref(), Some(expected), "{text}");
        }
        for bad in [
            "03/14/2025",
            "2025-3-14",
            "20251314;103512",
            "20250314;256000",
            "20250314;10:35:12 EST",
            "",
            "2025031",
            "20250314;",
        ] {
            let parsed = parse_flex_datetime(bad);
            assert!(
                parsed.is_none() || bad == "20250314;",
                "{bad} should be refused, got {parsed:?}"
            );
        }
    }

    #[test]
    fn fill_times_through_the_import() {
        let xml = with_trades(
            &[
                GOOD_TRADE
                    .replace("20250314;103512", "2025-01-10;09:30:00")
                    .replace("E1", "E2"),
                GOOD_TRADE
                    .replace("20250314;103512", "20250710 093000")
                    .replace("E1", "E3"),
                GOOD_TRADE
                    .replace(
                        r#"dateTime="20250314;103512""#,
                        r#"tradeDate="20251201" tradeTime="153000""#,
                    )
                    .replace("E1", "E4"),
                GOOD_TRADE
                    .replace(r#"dateTime="20250314;103512""#, r#"tradeDate="20251202""#)
                    .replace("E1", "E5"),
            ]
            .map(|a| format!("<Trade {a}/>"))
            .join("\n"),
        );
        let book = import(&xml).book;
        for (id, time) in [
            ("E2", "2025-01-10T09:30:00-05:00"),
            ("E3", "2025-07-10T09:30:00-04:00"),
            ("E4", "2025-12-01T15:30:00-05:00"),
            ("E5", "2025-12-02T00:00:00-05:00"),
        ] {
            assert_eq!(s(by(&book, "fills", "id", id), "time"), time, "{id}");
        }
        let options = FlexOptions {
            time_zone: FlexTimeZone::parse("-05:00").unwrap(),
            ..FlexOptions::default()
        };
        let fixed = json(flex_to_book(&xml, &options).unwrap());
        assert_eq!(
            s(by(&fixed.book, "fills", "id", "E3"), "time"),
            "2025-07-10T09:30:00-05:00"
        );
        assert!(
            fixed
                .notes
                .iter()
                .any(|n| n.contains("fixed offset -05:00"))
        );
    }

    #[test]
    fn time_zone_option_table() {
        let table = [
            ("America/New_York", Some(FlexTimeZone::NewYork)),
            ("US/Eastern", Some(FlexTimeZone::NewYork)),
            ("UTC", FixedOffset::east_opt(0).map(FlexTimeZone::Fixed)),
            (
                "+08:00",
                FixedOffset::east_opt(8 * 3600).map(FlexTimeZone::Fixed),
            ),
            (
                "-05:00",
                FixedOffset::west_opt(5 * 3600).map(FlexTimeZone::Fixed),
            ),
            (
                "+05:30",
                FixedOffset::east_opt(5 * 3600 + 1800).map(FlexTimeZone::Fixed),
            ),
            ("Europe/London", None),
            ("+24:00", None),
            ("0500", None),
            ("-5:00", None),
        ];
        for (text, expected) in table {
            assert_eq!(FlexTimeZone::parse(text).ok(), expected, "{text}");
        }
        assert_eq!(FlexOptions::default().time_zone, FlexTimeZone::NewYork);
    }

    #[test]
    fn decimals_table() {
        let table = [
            ("100", Some("100")),
            ("-40", Some("-40")),
            ("227.480", Some("227.480")),
            ("+5", Some("5")),
            (".5", Some("0.5")),
            ("5.", Some("5")),
            ("-0.00", Some("0.00")),
            ("007.10", Some("7.10")),
            ("1000000000000", Some("1000000000000")),
            ("0.000000000000000001", Some("0.000000000000000001")),
            ("1000000000000.01", None),
            ("0.0000000000000000001", None),
            ("1e3", None),
            ("1,234.5", None),
            ("12 000", None),
            ("", None),
            ("-", None),
            (".", None),
            ("--1", None),
            ("NaN", None),
        ];
        for (text, expected) in table {
            assert_eq!(
                Dec::parse(text).ok().map(|d| d.to_string()).as_deref(),
                expected,
                "{text}"
            );
        }
        let a = Dec::parse("10").unwrap();
        let b = Dec::parse("5.25").unwrap();
        assert_eq!(a.checked_add(b).unwrap().to_string(), "15.25");
        assert!(
            Dec::parse("100")
                .unwrap()
                .same_value(Dec::parse("100.00").unwrap())
        );
        assert!(
            !Dec::parse("100")
                .unwrap()
                .same_value(Dec::parse("10").unwrap())
        );
    }

    #[test]
    fn cash_kinds_table() {
        // type, amount, expected (kind, amount) or None when skipped
        let table = [
            ("Deposits/Withdrawals", "100", Some(("deposit", "100"))),
            ("Deposits/Withdrawals", "-100", Some(("withdrawal", "-100"))),
            ("Deposits & Withdrawals", "7.5", Some(("deposit", "7.5"))),
            ("Dividends", "3.20", Some(("dividend", "3.20"))),
            ("Dividends", "-3.20", Some(("fee", "-3.20"))),
            (
                "Payment In Lieu Of Dividends",
                "1.10",
                Some(("dividend", "1.10")),
            ),
            // Withholding and its refunds are tax, never interest.
            ("Withholding Tax", "-0.48", Some(("tax", "-0.48"))),
            ("Withholding Tax", "0.48", Some(("tax", "0.48"))),
            ("871(m) Withholding", "-1.10", Some(("tax", "-1.10"))),
            ("Bond Interest", "-4.20", Some(("interest", "-4.20"))),
            ("Price Adjustments", "-0.02", Some(("fee", "-0.02"))),
            ("Price Adjustments", "0.02", Some(("interest", "0.02"))),
            // A type nobody knows is left out with a note, never a refusal.
            ("Cash Receipts From Mars", "5.00", None),
            (
                "Broker Interest Received",
                "2.01",
                Some(("interest", "2.01")),
            ),
            (
                "Broker Interest Received",
                "-0.01",
                Some(("interest", "-0.01")),
            ),
            ("Broker Interest Paid", "-9.99", Some(("fee", "-9.99"))),
            ("Other Fees", "-10", Some(("fee", "-10"))),
            ("Advisor Fees", "-25", Some(("fee", "-25"))),
            ("Other Fees", "10", Some(("interest", "10"))),
            ("Commission Adjustments", "-0.35", Some(("fee", "-0.35"))),
            ("Commission Adjustments", "0.35", Some(("interest", "0.35"))),
            (
                "Bond Interest Received",
                "12.50",
                Some(("interest", "12.50")),
            ),
            ("Dividends", "0.00", None),
        ];
        for (kind, amount, expected) in table {
            let xml = with_section(&format!(
                r#"<CashTransactions><CashTransaction accountId="U1" currency="USD" type="{}" dateTime="20250314;103512" amount="{amount}" levelOfDetail="DETAIL"/></CashTransactions>"#,
                kind.replace('&', "&amp;")
            ));
            let import = import(&xml);
            let cash = section(&import.book, "cash");
            match expected {
                None => {
                    assert!(cash.is_empty(), "{kind} {amount}");
                    assert_eq!(import.skipped, 1);
                }
                Some((k, a)) => {
                    assert_eq!(cash.len(), 1, "{kind} {amount}");
                    assert_eq!(
                        (s(&cash[0], "kind"), s(&cash[0], "amount")),
                        (k, a),
                        "{kind} {amount}"
                    );
                    assert_eq!(s(&cash[0], "time"), "2025-03-14T10:35:12-04:00");
                }
            }
        }
    }

    #[test]
    fn order_rows_used_only_without_executions() {
        let order = r#"<Order accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="77" ibOrderID="555" dateTime="20250314;103512" quantity="-10" tradePrice="100" ibCommission="-1" levelOfDetail="ORDER"/>"#;
        let summary = r#"<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" quantity="-10" tradePrice="100" levelOfDetail="SYMBOL_SUMMARY"/>"#;
        let only_orders = import(&with_trades(&format!("{order}\n{summary}")));
        assert_eq!(only_orders.fills, 1);
        assert_eq!(only_orders.skipped, 1);
        let fill = &section(&only_orders.book, "fills")[0];
        assert_eq!(
            (s(fill, "id"), s(fill, "side"), s(fill, "quantity")),
            ("77", "sell", "10")
        );
        assert!(
            only_orders
                .notes
                .iter()
                .any(|n| n.contains("ORDER rows were imported as fills"))
        );

        let both = import(&with_trades(&format!(
            "<Trade {GOOD_TRADE}/>\n{order}\n{summary}"
        )));
        assert_eq!(both.fills, 1);
        assert_eq!(both.skipped, 2);
        assert_eq!(s(&section(&both.book, "fills")[0], "id"), "E1");
        assert!(both.notes.iter().any(|n| n.contains("levelOfDetail ORDER")));

        // An order row used as a fill may have only its order id.
        let bare = order.replace(r#"tradeID="77" "#, "");
        let by_order_id = import(&with_trades(&bare));
        assert_eq!(s(&section(&by_order_id.book, "fills")[0], "id"), "555");
        let no_id = refuse(&with_trades(&bare.replace(r#"ibOrderID="555" "#, "")));
        assert_eq!(no_id.attribute(), Some("ibExecID"));
        assert!(
            no_id.problem().contains("transactionID and ibOrderID"),
            "{no_id}"
        );
    }

    #[test]
    fn cancellations() {
        let original = GOOD_TRADE.replace(r#"tradeID="1""#, r#"tradeID="500""#);
        let cancel_by_id = r#"<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="501" ibExecID="E9" origTradeID="500" dateTime="20250314;110000" quantity="-10" tradePrice="100" ibCommission="1" buySell="SELL (Ca.)" levelOfDetail="EXECUTION"/>"#;
        let cancel_unlinked = r#"<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="501" ibExecID="E9" dateTime="20250314;110000" tradeDate="20250314" quantity="-10" tradePrice="100.00" buySell="SELL (Ca.)" levelOfDetail="EXECUTION"/>"#;
        let elsewhere = r#"<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" tradeID="501" ibExecID="E9" origTradeID="123" dateTime="20250314;110000" quantity="-10" tradePrice="99" buySell="BUY (Ca.)" levelOfDetail="EXECUTION"/>"#;
        // rows, options.drop_cancelled_originals, fills, skipped, note
        let table = [
            (cancel_by_id, true, 0, 2, "both left out"),
            (cancel_unlinked, true, 0, 2, "both left out"),
            (elsewhere, true, 1, 1, "not in this statement"),
            (cancel_by_id, false, 1, 1, "was kept"),
        ];
        for (row, drop, fills, skipped, note) in table {
            let xml = with_trades(&format!("<Trade {original}/>\n{row}"));
            let options = FlexOptions {
                drop_cancelled_originals: drop,
                ..FlexOptions::default()
            };
            let import = json(flex_to_book(&xml, &options).unwrap());
            assert_eq!((import.fills, import.skipped), (fills, skipped), "{row}");
            assert!(
                import.notes.iter().any(|n| n.contains(note)),
                "{note}: {:#?}",
                import.notes
            );
        }
    }

    #[test]
    fn account_currency_from_trades_and_repeated_rows() {
        let xml = r#"<FlexQueryResponse type="AF"><FlexStatements count="1">
<FlexStatement accountId="U9" toDate="20251231"><Trades>
<Trade accountId="U9" currency="EUR" assetCategory="STK" symbol="SAP" listingExchange="IBIS" ibExecID="X1" dateTime="20250314;103512" quantity="1" tradePrice="200" buySell="BUY"/>
<Trade accountId="U9" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" ibExecID="X2" dateTime="20250314;103512" quantity="1" tradePrice="200" buySell="BUY"/>
<Trade accountId="U9" currency="EUR" assetCategory="STK" symbol="SAP" listingExchange="IBIS" ibExecID="X3" dateTime="20250315;103512" quantity="1" tradePrice="201" buySell="BUY"/>
<Trade accountId="U9" currency="EUR" assetCategory="STK" symbol="SAP" listingExchange="IBIS" ibExecID="X3" dateTime="20250315;103512" quantity="1" tradePrice="201" buySell="BUY"/>
</Trades></FlexStatement></FlexStatements></FlexQueryResponse>"#;
        let import = import(xml);
        assert_eq!(s(&section(&import.book, "accounts")[0], "currency"), "EUR");
        assert_eq!(s(&import.book, "base_currency"), "EUR");
        assert_eq!((import.fills, import.skipped), (3, 1));
        // no commission attribute: 0 in the trade currency
        let fill = by(&import.book, "fills", "id", "X2");
        assert_eq!(
            (s(fill, "commission"), s(fill, "commission_currency")),
            ("0", "USD")
        );
        assert!(
            import
                .notes
                .iter()
                .any(|n| n.contains("most common currency"))
        );
        assert!(
            import
                .notes
                .iter()
                .any(|n| n.contains("repeating an earlier execution id"))
        );
    }

    #[test]
    fn an_account_with_no_trades_takes_its_currency_from_its_cash_and_actions() {
        let xml = r#"<FlexQueryResponse type="AF"><FlexStatements><FlexStatement accountId="U7" fromDate="20250101" toDate="20251231">
<CashTransactions><CashTransaction accountId="U7" currency="CAD" type="Deposits/Withdrawals" dateTime="20250102" amount="100" levelOfDetail="DETAIL"/></CashTransactions>
<CorporateActions><CorporateAction accountId="U7" currency="CAD" assetCategory="STK" symbol="X" conid="9" description="X DELISTED WORTHLESS" dateTime="20250301;000000" quantity="-5" proceeds="0" levelOfDetail="DETAIL"/></CorporateActions>
</FlexStatement></FlexStatements></FlexQueryResponse>"#;
        let import = import(xml);
        assert_eq!(s(&section(&import.book, "accounts")[0], "currency"), "CAD");
        assert!(
            import
                .notes
                .iter()
                .any(|n| n.contains("most common currency of its cash and corporate-action rows")),
            "{:#?}",
            import.notes
        );
    }

    /// Each symbol's open position after replaying the book (zero positions left out).
    fn held_by_symbol(book: &tradedesk_core::Book) -> HashMap<String, Decimal> {
        let ledger = tradedesk_core::ledger::replay(book, |_, _| {}).unwrap();
        ledger
            .fifo
            .open_positions()
            .map(|(_, i, lots)| {
                (
                    book.instrument(i).key.symbol.clone(),
                    lots.signed_quantity(),
                )
            })
            .filter(|(_, q)| !q.is_zero())
            .collect()
    }

    /// Exercise, assignment and expiry, as IBKR writes them in the Trades section (a
    /// price-0 option row with the code, and the delivered stock at the strike): the
    /// book's actions, linked to the stock trade, so the option leaves no position and
    /// realizes what IBKR says (0 on an exercise or assignment, the premium at expiry).
    #[test]
    fn option_events_from_the_trades_section_are_actions() {
        let row = |id: &str,
                   category: &str,
                   symbol: &str,
                   date: &str,
                   quantity: &str,
                   price: &str,
                   notes: &str| {
            let option = category == "OPT";
            format!(
                r#"<Trade accountId="U1" currency="USD" assetCategory="{category}" symbol="{symbol}" conid="c-{symbol}" listingExchange="CBOE" underlyingSymbol="{}" multiplier="{}" strike="50" tradeID="{id}" tradeDate="{date}" dateTime="{date};162000" quantity="{quantity}" tradePrice="{price}" ibCommission="{}" buySell="{}" notes="{notes}" levelOfDetail="EXECUTION"/>"#,
                if option { "ORCL" } else { "" },
                if option { "100" } else { "1" },
                if price == "0" { "0" } else { "-1" },
                if quantity.starts_with('-') {
                    "SELL"
                } else {
                    "BUY"
                }
            )
        };
        let xml = with_section(&format!(
            "<Trades>{}{}{}{}{}{}</Trades>",
            // A put sold for 0.50, assigned: 100 ORCL bought at 50.
            row(
                "1",
                "OPT",
                "ORCL  250620P00050000",
                "20250102",
                "-1",
                "0.50",
                ""
            ),
            row(
                "2",
                "OPT",
                "ORCL  250620P00050000",
                "20250620",
                "1",
                "0",
                "A"
            ),
            row("3", "STK", "ORCL", "20250620", "100", "50", "A"),
            // A call bought for 1.20, expired worthless.
            row(
                "4",
                "OPT",
                "ORCL  250620C00060000",
                "20250102",
                "1",
                "1.20",
                ""
            ),
            row(
                "5",
                "OPT",
                "ORCL  250620C00060000",
                "20250620",
                "-1",
                "0",
                "Ep"
            ),
            // A price-0 option row without a code stays a trade.
            row(
                "6",
                "OPT",
                "ORCL  250620C00070000",
                "20250103",
                "1",
                "0",
                ""
            ),
        ));
        let import = import(&xml);
        let actions = section(&import.book, "corporate_actions");
        let kinds: Vec<(&str, &str)> = actions
            .iter()
            .map(|a| {
                (
                    s(a, "kind"),
                    a.get("fill").and_then(Value::as_str).unwrap_or("-"),
                )
            })
            .collect();
        assert_eq!(kinds, [("assignment", "3"), ("expiry", "-")]);
        assert_eq!(import.fills, 4, "the two event rows are not fills");
        let book = crate::parse_book("events", &import.book.to_string()).unwrap();
        let held = held_by_symbol(&book);
        assert_eq!(held.get("ORCL"), Some(&Decimal::from(100)), "{held:?}");
        assert!(!held.contains_key("ORCL  250620P00050000"), "{held:?}");
        assert!(!held.contains_key("ORCL  250620C00060000"), "{held:?}");
        assert_eq!(held.get("ORCL  250620C00070000"), Some(&Decimal::ONE));
    }

    /// IBKR's shapes of a corporate action (the project's own rows, written as IBKR
    /// writes them: no `type` on older statements, one row per instrument changed):
    /// each becomes the book's action and leaves the positions IBKR's rows add up to.
    #[test]
    fn corporate_actions_leave_the_positions_ibkr_states() {
        let trade = |id: &str,
                     conid: &str,
                     symbol: &str,
                     date: &str,
                     quantity: &str,
                     price: &str| {
            format!(
                r#"<Trade accountId="U1" currency="USD" assetCategory="STK" symbol="{symbol}" conid="{conid}" listingExchange="NYSE" tradeID="{id}" dateTime="{date};100000" quantity="{quantity}" tradePrice="{price}" ibCommission="-1" buySell="{}" levelOfDetail="EXECUTION"/>"#,
                if quantity.starts_with('-') {
                    "SELL"
                } else {
                    "BUY"
                }
            )
        };
        let action = |conid: &str,
                      symbol: &str,
                      date: &str,
                      description: &str,
                      quantity: &str,
                      proceeds: &str| {
            format!(
                r#"<CorporateAction accountId="U1" currency="USD" assetCategory="STK" symbol="{symbol}" conid="{conid}" description="{description}" dateTime="{date};202500" reportDate="{date}" quantity="{quantity}" proceeds="{proceeds}" value="0" amount="0" levelOfDetail="DETAIL"/>"#
            )
        };
        let xml = with_section(&format!(
            "<Trades>{}{}{}{}{}</Trades><CorporateActions>{}{}{}{}{}{}{}{}</CorporateActions>",
            trade("1", "100", "OLDCO", "20250102", "1000", "2"),
            trade("2", "200", "TENDR", "20250102", "300", "10"),
            trade("3", "300", "SPLT", "20250102", "50", "40"),
            trade("4", "400", "GONE", "20250102", "20", "5"),
            trade("5", "500", "PARENT", "20250102", "10", "100"),
            // A reverse split into a new contract: the old one renamed OLDCO.OLD.
            action(
                "100",
                "OLDCO.OLD",
                "20250301",
                "OLDCO(US0000000001) SPLIT 1 FOR 25 (OLDCO.OLD, OLD CO, US0000000001)",
                "-1000",
                "0"
            ),
            action(
                "101",
                "OLDCO",
                "20250301",
                "OLDCO(US0000000001) SPLIT 1 FOR 25 (OLDCO, OLD CO, US0000000002)",
                "40",
                "0"
            ),
            // A tender into a temporary line, then that line merged for cash.
            action(
                "200",
                "TENDR",
                "20250401",
                "TENDR(US0000000003) TENDERED TO US0000000004 1 FOR 1 (TENDR, T CO, US0000000003)",
                "-300",
                "0"
            ),
            action(
                "201",
                "TENDR.TEN",
                "20250401",
                "TENDR(US0000000003) TENDERED TO US0000000004 1 FOR 1 (TENDR.TEN, T CO - TENDER, US0000000004)",
                "300",
                "0"
            ),
            action(
                "201",
                "TENDR.TEN",
                "20250601",
                "TENDR.TEN(US0000000004) MERGED(Voluntary Offer Allocation) FOR USD 12.50 PER SHARE (TENDR.TEN, T CO - TENDER, US0000000004)",
                "-300",
                "3750"
            ),
            // A forward split on the same contract: only the new units are written.
            action(
                "300",
                "SPLT",
                "20250501",
                "SPLT(US0000000005) SPLIT 2 FOR 1 (SPLT, S CO, US0000000005)",
                "50",
                "0"
            ),
            // Delisted worthless.
            action(
                "400",
                "GONE",
                "20250701",
                "GONE(US0000000006) DELISTED WORTHLESS (GONE, G CO, US0000000006)",
                "-20",
                "0"
            ),
            // A spin-off with no cost fraction given or shown: left out, with a note.
            action(
                "600",
                "CHILD",
                "20250801",
                "PARENT(US0000000007) SPINOFF 1 FOR 10 (CHILD, C CO, US0000000008)",
                "1",
                "0"
            ),
        ));
        let import = import(&xml);
        let book = crate::parse_book("ca", &import.book.to_string())
            .unwrap_or_else(|e| panic!("{e}: {:#}", import.book));
        let held = held_by_symbol(&book);
        let d = |v: i64| Decimal::from(v);
        assert_eq!(held.get("OLDCO"), Some(&d(40)), "{held:?}");
        assert_eq!(held.get("SPLT"), Some(&d(100)), "{held:?}");
        assert_eq!(held.get("PARENT"), Some(&d(10)), "{held:?}");
        for gone in ["OLDCO.OLD", "TENDR", "TENDR.TEN", "GONE"] {
            assert!(!held.contains_key(gone), "{gone}: {held:?}");
        }
        // The contract renamed by the split is one instrument under its latest name.
        let named = |symbol: &str| {
            section(&import.book, "instruments")
                .iter()
                .filter(|i| s(i, "symbol") == symbol)
                .count()
        };
        assert_eq!((named("OLDCO.OLD"), named("OLDCO")), (1, 1));
        assert_eq!(section(&import.book, "corporate_actions").len(), 5);
        assert!(
            import
                .notes
                .iter()
                .any(|n| n.contains("SPINOFF") && n.contains("left out")),
            "{:#?}",
            import.notes
        );
    }

    /// A statement of only a section tradedesk does not read (a Statement of Funds, its
    /// rows in the base currency) is refused naming that section and the sections to
    /// select, never a bare "no currency".
    #[test]
    fn a_statement_of_only_unread_sections_names_the_sections_to_select() {
        let xml = r#"<FlexQueryResponse queryName="funds" type="AF"><FlexStatements count="1">
<FlexStatement accountId="U9" fromDate="20240101" toDate="20241231" period="LastYear" whenGenerated="20250101;080000">
<StmtFunds>
<StatementOfFundsLine accountId="U9" currency="EUR" fxRateToBase="1" assetCategory="STK" symbol="SAP" conid="14204" reportDate="20240301" date="20240301" activityCode="BUY" activityDescription="Buy 10 SAP SE" tradeID="1" buySell="BUY" tradeQuantity="10" tradePrice="180" tradeGross="-1800" tradeCommission="-3" debit="-1803" amount="-1803" balance="-1803" levelOfDetail="BaseCurrency"/>
</StmtFunds>
</FlexStatement></FlexStatements></FlexQueryResponse>"#;
        let e = refuse(xml).to_string();
        for part in [
            "account U9 has none of the sections tradedesk reads, only <StmtFunds>",
            "Statement of Funds",
            "select Account Information (with Currency), Trades (Executions)",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }
    }

    #[test]
    fn every_asset_category_is_modelled_or_left_out_with_a_note() {
        for (category, class, note) in [
            (
                "WAR",
                Some("option"),
                "warrants (WAR) are modelled as options",
            ),
            ("IOPT", Some("option"), "structured products (IOPT)"),
            ("FXCFD", Some("cfd"), "forex CFDs (FXCFD)"),
            ("CMDTY", Some("equity"), "spot commodities (CMDTY)"),
            ("FSFOP", Some("option"), "futures-style options"),
            ("ZZZ", None, "asset category 'ZZZ' were left out"),
        ] {
            let import = import(&replaced("assetCategory", Some(category)));
            let instruments = section(&import.book, "instruments");
            match class {
                Some(class) => {
                    assert_eq!(s(&instruments[0], "asset_class"), class, "{category}");
                    assert_eq!(import.fills, 1, "{category}");
                }
                None => {
                    assert!(instruments.is_empty(), "{category}");
                    assert_eq!((import.fills, import.skipped), (0, 1), "{category}");
                }
            }
            assert!(
                import.notes.iter().any(|n| n.contains(note)),
                "{category}: {:#?}",
                import.notes
            );
        }
    }

    /// Every malformed input: (document, words the location must hold, attribute,
    /// words the problem must hold).
    #[test]
    fn errors_table() {
        let table: Vec<(String, &str, Option<&str>, &str)> = vec![
            (replaced("ibExecID", None).replace(r#"tradeID="1" "#, ""), "1st <Trade> of account U1", Some("ibExecID"), "and so are tradeID and transactionID"),
            (replaced("assetCategory", None), "<Trade>", Some("assetCategory"), "missing"),
            (replaced("tradePrice", Some("1,234.5")), "1st <Trade> of account U1", Some("tradePrice"), "'1,234.5' is not a plain decimal"),
            (replaced("quantity", Some("1e3")), "<Trade>", Some("quantity"), "'1e3'"),
            (replaced("quantity", Some("0")), "<Trade>", Some("quantity"), "is zero"),
            (replaced("quantity", Some("10000000000000")), "<Trade>", Some("quantity"), "1e12"),
            (replaced("ibCommission", Some("abc")), "<Trade>", Some("ibCommission"), "'abc'"),
            (replaced("tradePrice", Some("-1")), "<Trade>", Some("tradePrice"), "negative"),
            (replaced("dateTime", Some("03/14/2025 10:35")), "1st <Trade> of account U1", Some("dateTime"), "'03/14/2025 10:35' is not a date-time"),
            (replaced("dateTime", Some("20250230;103512")), "<Trade>", Some("dateTime"), "is not a date-time"),
            (replaced("dateTime", None), "<Trade>", Some("dateTime"), "missing"),
            (replaced("currency", Some("usd")), "<Trade>", Some("currency"), "ISO 4217"),
            (replaced("buySell", Some("HOLD")), "<Trade>", Some("buySell"), "'HOLD'"),
            (replaced("symbol", None), "<Trade>", Some("symbol"), "missing"),
            (replaced("listingExchange", Some("NYSE:ARCA")), "<Trade>", Some("listingExchange"), "':'"),
            (replaced("multiplier", Some("-100")), "<Trade>", Some("multiplier"), "must be > 0"),
            (replaced("description", Some("&evil;")), "<Trade> at line 5", Some("description"), "cannot be read"),
            (
                with_trades(&format!("<Trade {GOOD_TRADE}/>\n<Trade {}/>", GOOD_TRADE.replace(r#"tradePrice="100""#, r#"tradePrice="101""#))),
                "2nd <Trade> of account U1 (line 6)",
                Some("ibExecID"),
                "already used by the 1st <Trade>",
            ),
            (
                with_trades(&format!("<Trade {GOOD_TRADE}/>\n<Trade {}/>", GOOD_TRADE.replace("E1", "E2").replace(r#"currency="USD""#, r#"currency="EUR""#))),
                "2nd <Trade>",
                Some("currency"),
                "instrument NASDAQ:AAPL",
            ),
            (
                with_section(r#"<CashTransactions><CashTransaction accountId="U1" currency="USD" type="Dividends" dateTime="20250314" amount="1.2.3"/></CashTransactions>"#),
                "1st <CashTransaction> of account U1",
                Some("amount"),
                "'1.2.3'",
            ),
            (
                with_section(r#"<CashTransactions><CashTransaction accountId="U1" currency="USD" type="Dividends" amount="1"/></CashTransactions>"#),
                "<CashTransaction>",
                Some("dateTime"),
                "reportDate, settleDate",
            ),
            (
                with_section(r#"<OpenPositions><OpenPosition accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" reportDate="20251231" position="10" markPrice="n/a"/></OpenPositions>"#),
                "1st <OpenPosition> of account U1",
                Some("markPrice"),
                "'n/a'",
            ),
            (
                with_section(r#"<OpenPositions><OpenPosition accountId="U1" currency="USD" assetCategory="STK" symbol="AAPL" listingExchange="NASDAQ" reportDate="2025-13-31" position="10" markPrice="1"/></OpenPositions>"#),
                "<OpenPosition>",
                Some("reportDate"),
                "'2025-13-31' is not a date",
            ),
            (
                with_section(r#"<ConversionRates><ConversionRate reportDate="20251231" fromCurrency="EUR" toCurrency="USD" rate="1.1x"/></ConversionRates>"#),
                "1st <ConversionRate> of account U1",
                Some("rate"),
                "'1.1x'",
            ),
            (
                r#"<FlexQueryResponse type="AF"><FlexStatements><FlexStatement accountId="U1" toDate="2025/12/31"></FlexStatement></FlexStatements></FlexQueryResponse>"#.to_owned(),
                "1st <FlexStatement> (account U1, line 1)",
                Some("toDate"),
                "is not a date",
            ),
            (
                r#"<FlexQueryResponse type="AF"><FlexStatements><FlexStatement accountId="U1" toDate="20251231"/></FlexStatements></FlexQueryResponse>"#.to_owned(),
                "1st <FlexStatement> (account U1",
                Some("currency"),
                "no trades, cash or corporate actions to infer",
            ),
            ("<html><body/></html>".to_owned(), "the document", None, "root element is <html>"),
            ("date,symbol\n2025-01-01,AAPL\n".to_owned(), "the document", None, "no XML element"),
            (String::new(), "the document", None, "no XML element"),
            (
                "<FlexStatementResponse timestamp=\"x\"><Status>Fail</Status></FlexStatementResponse>".to_owned(),
                "the document",
                None,
                "FlexStatementResponse",
            ),
            (
                r#"<FlexQueryResponse type="TCF"><FlexStatements/></FlexQueryResponse>"#.to_owned(),
                "<FlexQueryResponse>",
                Some("type"),
                "'TCF' is not an Activity Flex Query",
            ),
            (r#"<FlexQueryResponse type="AF"><FlexStatements/></FlexQueryResponse>"#.to_owned(), "the document", None, "no <FlexStatement>"),
            (
                "<?xml version=\"1.0\"?>\n<!DOCTYPE FlexQueryResponse [<!ENTITY big \"aaaa\">]>\n<FlexQueryResponse type=\"AF\"/>".to_owned(),
                "line 2",
                None,
                "DOCTYPE",
            ),
            (
                "<FlexQueryResponse type=\"AF\"><FlexStatements>&big;</FlexStatements></FlexQueryResponse>".to_owned(),
                "line 1",
                None,
                "&big; is refused",
            ),
            (
                with_trades(&format!("<Trade {GOOD_TRADE}/>")).replace("</FlexStatement></FlexStatements></FlexQueryResponse>", ""),
                "line",
                None,
                "not well-formed XML",
            ),
            (
                "<FlexQueryResponse type=\"AF\">\n<FlexStatements>\n</FlexStatement>\n</FlexQueryResponse>".to_owned(),
                "line 3",
                None,
                "not well-formed XML",
            ),
            (
                format!("\u{feff}{}", replaced("tradePrice", Some("x"))),
                "1st <Trade> of account U1 (line 5)",
                Some("tradePrice"),
                "'x'",
            ),
            (
                format!("<FlexQueryResponse>{}", "<a>".repeat(70)),
                "the document",
                None,
                "nested more than 64 deep",
            ),
            (
                "<FlexQueryResponse type=\"AF\"/><FlexQueryResponse type=\"AF\"/>".to_owned(),
                "the document",
                None,
                "second root",
            ),
        ];
        for (xml, location, attribute, problem) in &table {
            let e = refuse(xml);
            let message = e.to_string();
            assert!(
                e.location().contains(location),
                "location of {message:?} lacks {location:?}"
            );
            assert_eq!(e.attribute(), *attribute, "{message}");
            assert!(
                e.problem().contains(problem),
                "problem of {message:?} lacks {problem:?}"
            );
            assert!(!e.hint().is_empty(), "{message}");
            assert!(message.contains("(hint: "), "{message}");
            assert!(
                !message.contains(&"X".repeat(65)),
                "a value longer than 64 characters was echoed: {message}"
            );
        }
    }

    #[test]
    fn size_limit() {
        assert!(check_size(MAX_FLEX_BYTES, MAX_FLEX_BYTES).is_ok());
        let e = check_size(MAX_FLEX_BYTES + 1, MAX_FLEX_BYTES).unwrap_err();
        assert!(e.problem().contains("more than the 268435456 bytes"), "{e}");
    }

    #[test]
    fn shown_values_are_cut() {
        assert_eq!(shown("abc"), "'abc'");
        let cut64 = shown(&"y".repeat(64));
        assert_eq!(cut64.len(), 66);
        let long = shown(&"z".repeat(65));
        assert!(long.ends_with("…'") && long.chars().filter(|c| *c == 'z').count() == 64);
        assert_eq!(ordinal(1), "1st");
        assert_eq!(ordinal(2), "2nd");
        assert_eq!(ordinal(3), "3rd");
        assert_eq!(ordinal(11), "11th");
        assert_eq!(ordinal(22), "22nd");
        assert_eq!(ordinal(113), "113th");
    }

    #[test]
    fn character_references_and_predefined_entities_are_read() {
        let xml = with_trades(&format!(
            "<Trade {}/>",
            GOOD_TRADE.replace(
                r#"symbol="AAPL""#,
                r#"symbol="A&amp;B" description="&#x41;&lt;&#66;""#
            )
        ));
        let book = import(&xml).book;
        let i = &section(&book, "instruments")[0];
        assert_eq!((s(i, "symbol"), s(i, "name")), ("A&B", "A<B"));
    }

    #[test]
    fn account_prefix_option() {
        let options = FlexOptions {
            account_prefix: String::new(),
            ..FlexOptions::default()
        };
        let import = json(flex_to_book(&trade(GOOD_TRADE), &options).unwrap());
        assert_eq!(s(&section(&import.book, "accounts")[0], "id"), "U1");
        assert_eq!(s(&section(&import.book, "fills")[0], "account"), "U1");
    }
}
