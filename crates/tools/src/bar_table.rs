//! Bars from a CSV file as a backtest reads them: columns of numbers with the times as
//! instants, read in one pass over the file's bytes, and kept in memory for the next call
//! on the same unchanged file (docs/benchmarks.md, "The whole tool call").
//!
//! [`crate::bars::parse_csv`] stays the definition of a bar file. The reader here takes a
//! file only when each of its rows is of a form it reads exactly as `parse_csv` does
//! (a row it is not sure of is read by `parse_csv`'s own rules, a cell at a time); at
//! anything that would be an error it stops, and `parse_csv` reads the whole file, so
//! every error, its line and its words included, is the one `parse_csv` gives.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use tradedesk_core::{Bar, Result};
use tradedesk_research::backtest::{self, Times};
use tradedesk_research::expr::{Expr, Field};

use crate::bars::{self, TimeKind};
use crate::context::ToolContext;
use crate::market::{BarSource, CsvSource, load_bars};
use crate::research::BarColumns;

mod column_file;

pub use column_file::{COLUMN_DIR, DISK_BYTES};

/// The number columns a caller needs beside the instants, the opens and the closes, which
/// every table has: a table read from a column file for a backtest holds only the
/// columns its rules read (the others empty), so a new process reads half the file for
/// a rule on closes (docs/benchmarks.md, "The whole tool call").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Needs {
    pub high: bool,
    pub low: bool,
    pub volume: bool,
}

impl Needs {
    /// Every column.
    pub const ALL: Self = Self {
        high: true,
        low: true,
        volume: true,
    };

    /// The columns that `rules` read.
    pub fn of<'a>(rules: impl IntoIterator<Item = &'a Expr>) -> Self {
        rules.into_iter().fold(Self::default(), |needs, rule| Self {
            high: needs.high || rule.reads(Field::High),
            low: needs.low || rule.reads(Field::Low),
            volume: needs.volume || rule.reads(Field::Volume),
        })
    }

    /// Whether a table holding `self` holds every column of `other`.
    fn covers(self, other: Self) -> bool {
        (self.high || !other.high) && (self.low || !other.low) && (self.volume || !other.volume)
    }

    /// The columns of both.
    fn and(self, other: Self) -> Self {
        Self {
            high: self.high || other.high,
            low: self.low || other.low,
            volume: self.volume || other.volume,
        }
    }
}

/// How a table gives each bar's time back exactly as its source wrote it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeText {
    /// Every time is a date, `YYYY-MM-DD`: written again from the instant.
    Dates,
    /// Every time is `YYYY-MM-DDTHH:MM:SS` then `Z`, `+HH:MM` or `-HH:MM`: written again
    /// from the instant and the bar's suffix ([`Z_SUFFIX`], [`MINUS_ZERO_SUFFIX`], else
    /// the offset in minutes).
    Stamps(Vec<i16>),
    /// Any other form: each bar's text, one after another, and where each ends.
    Kept { text: String, ends: Vec<usize> },
}

/// The suffix code of a time ending in `Z`.
pub const Z_SUFFIX: i16 = i16::MIN;
/// The suffix code of a time ending in `-00:00` (written back as it was, not `+00:00`).
pub const MINUS_ZERO_SUFFIX: i16 = i16::MIN + 1;

/// A source's bars as columns, with their times.
#[derive(Debug, Clone)]
pub struct BarTable {
    /// The numbers; a bar without volume has `NaN` there. `instant` is in whole seconds.
    pub columns: BarColumns,
    pub times: TimeText,
    /// Whether any bar has a volume.
    pub has_volume: bool,
}

impl BarTable {
    /// How many bars.
    pub fn len(&self) -> usize {
        self.columns.instant.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The table of bars already parsed (a broker's, or a file `parse_csv` read).
    pub fn from_bars(bars: &[Bar]) -> Self {
        let mut text = String::with_capacity(bars.iter().map(|b| b.time.len()).sum());
        let mut ends = Vec::with_capacity(bars.len());
        for b in bars {
            text.push_str(&b.time);
            ends.push(text.len());
        }
        Self {
            columns: BarColumns::of(bars),
            times: TimeText::Kept { text, ends },
            has_volume: bars.iter().any(|b| b.volume.is_some()),
        }
    }

    /// Bytes of memory the table holds (what the cache counts).
    pub fn bytes(&self) -> usize {
        let c = &self.columns;
        let numbers = c.instant.capacity()
            + c.open.capacity()
            + c.high.capacity()
            + c.low.capacity()
            + c.close.capacity()
            + c.volume.capacity();
        let times = match &self.times {
            TimeText::Dates => 0,
            TimeText::Stamps(codes) => codes.capacity() * 2,
            TimeText::Kept { text, ends } => text.capacity() + ends.capacity() * 8,
        };
        numbers * 8 + times + std::mem::size_of::<Self>()
    }
}

impl Times for BarTable {
    fn count(&self) -> usize {
        self.len()
    }

    fn time(&self, i: usize) -> String {
        time_text(&self.times, &self.columns.instant, i)
    }
}

/// The time of bar `i`, as its source wrote it.
fn time_text(times: &TimeText, instant: &[i64], i: usize) -> String {
    let Some(&secs) = instant.get(i) else {
        return String::new();
    };
    match times {
        TimeText::Dates => {
            let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
            format!("{y:04}-{m:02}-{d:02}")
        }
        TimeText::Stamps(codes) => stamp_text(secs, codes.get(i).copied().unwrap_or(Z_SUFFIX)),
        TimeText::Kept { text, ends } => {
            let start = match i {
                0 => 0,
                _ => ends.get(i - 1).copied().unwrap_or(0),
            };
            let end = ends.get(i).copied().unwrap_or(start);
            text.get(start..end).unwrap_or_default().to_owned()
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS` and the suffix of `code`, for the instant `secs`.
fn stamp_text(secs: i64, code: i16) -> String {
    let minutes = match code {
        Z_SUFFIX | MINUS_ZERO_SUFFIX => 0,
        c => i64::from(c),
    };
    let local = secs + minutes * 60;
    let (y, mo, d) = civil_from_days(local.div_euclid(86_400));
    let of_day = local.rem_euclid(86_400);
    let (h, mi, s) = (of_day / 3_600, of_day / 60 % 60, of_day % 60);
    let suffix = match code {
        Z_SUFFIX => "Z".to_owned(),
        MINUS_ZERO_SUFFIX => "-00:00".to_owned(),
        c => {
            let sign = if c < 0 { '-' } else { '+' };
            let a = i64::from(c).abs();
            format!("{sign}{:02}:{:02}", a / 60, a % 60)
        }
    };
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{suffix}")
}

// ---------------------------------------------------------------------------------------
// Calendar arithmetic (proleptic Gregorian, as chrono's).

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to a date (month 1 to 12, a day the month has).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let march_based = (m + 9) % 12;
    let day_of_year = (153 * march_based + 2) / 5 + d - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date `days` after 1970-01-01: (year, month, day).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_based = (5 * day_of_year + 2) / 153;
    let d = day_of_year - (153 * march_based + 2) / 5 + 1;
    let m = if march_based < 10 {
        march_based + 3
    } else {
        march_based - 9
    };
    let y = year_of_era + era * 400;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

// ---------------------------------------------------------------------------------------
// Cells on bytes.

/// What `str::trim` takes off an ASCII cell: tab, line feed, vertical tab, form feed,
/// carriage return and space.
fn is_space(b: u8) -> bool {
    b == b' ' || (0x09..=0x0d).contains(&b)
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s
        && is_space(*first)
    {
        s = rest;
    }
    while let [rest @ .., last] = s
        && is_space(*last)
    {
        s = rest;
    }
    s
}

fn digit(s: &[u8], at: usize) -> Option<i64> {
    let b = *s.get(at)?;
    b.is_ascii_digit().then(|| i64::from(b - b'0'))
}

fn two(s: &[u8], at: usize) -> Option<i64> {
    Some(digit(s, at)? * 10 + digit(s, at + 1)?)
}

/// A time cell read on bytes: the forms `parse_csv` reads most, for which this gives
/// exactly its answer; `None` for every other text (then `parse_csv`'s rule decides).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FastTime {
    kind: TimeKind,
    secs: i64,
    /// [`Z_SUFFIX`], [`MINUS_ZERO_SUFFIX`] or the offset in minutes; 0 for a date.
    suffix: i16,
}

/// The days of a valid `YYYY-MM-DD` at the start of `s`.
fn date_days(s: &[u8]) -> Option<i64> {
    if s.get(4) != Some(&b'-') || s.get(7) != Some(&b'-') {
        return None;
    }
    let y = two(s, 0)? * 100 + two(s, 2)?;
    let m = two(s, 5)?;
    let d = two(s, 8)?;
    ((1..=12).contains(&m) && d >= 1 && d <= days_in_month(y, m)).then(|| days_from_civil(y, m, d))
}

/// The last date read and its days: the rows of one day share it.
type DayMemo = Option<([u8; 10], i64)>;

/// [`date_days`], remembering the last date.
fn memo_days(s: &[u8], memo: &mut DayMemo) -> Option<i64> {
    let key: [u8; 10] = s.get(..10)?.try_into().ok()?;
    if let Some((k, days)) = memo
        && *k == key
    {
        return Some(*days);
    }
    let days = date_days(&key)?;
    *memo = Some((key, days));
    Some(days)
}

/// `s` exactly: `YYYY-MM-DD`, or `YYYY-MM-DDTHH:MM:SS` then `Z` or `±HH:MM` (an upper
/// case `T` and `Z`, no fraction, second 59 at most, offset up to 23:59).
#[cfg(test)]
fn fast_time(s: &[u8]) -> Option<FastTime> {
    fast_time_memo(s, &mut None)
}

/// [`fast_time`], with the last date remembered in `memo`.
fn fast_time_memo(s: &[u8], memo: &mut DayMemo) -> Option<FastTime> {
    match s.len() {
        10 => Some(FastTime {
            kind: TimeKind::Date,
            secs: memo_days(s, memo)? * 86_400,
            suffix: 0,
        }),
        20 | 25 => {
            if s.get(10) != Some(&b'T') || s.get(13) != Some(&b':') || s.get(16) != Some(&b':') {
                return None;
            }
            let days = memo_days(s, memo)?;
            let (h, mi, sec) = (two(s, 11)?, two(s, 14)?, two(s, 17)?);
            if h > 23 || mi > 59 || sec > 59 {
                return None;
            }
            let local = days * 86_400 + h * 3_600 + mi * 60 + sec;
            let (secs, suffix) = if s.len() == 20 {
                if s.get(19) != Some(&b'Z') {
                    return None;
                }
                (local, Z_SUFFIX)
            } else {
                let sign = match s.get(19) {
                    Some(b'+') => 1,
                    Some(b'-') => -1,
                    _ => return None,
                };
                if s.get(22) != Some(&b':') {
                    return None;
                }
                let (oh, om) = (two(s, 20)?, two(s, 23)?);
                if oh > 23 || om > 59 {
                    return None;
                }
                let minutes = sign * (oh * 60 + om);
                let suffix = if sign < 0 && minutes == 0 {
                    MINUS_ZERO_SUFFIX
                } else {
                    i16::try_from(minutes).ok()?
                };
                (local - minutes * 60, suffix)
            };
            Some(FastTime {
                kind: TimeKind::Timestamp,
                secs,
                suffix,
            })
        }
        _ => None,
    }
}

/// A number at the start of `s` that begins with a digit or a point (`12`, `12.5`, `12.`,
/// `.5`, `1.5e3`: no sign, no `inf` or `nan`): its value, as `str::parse::<f64>` gives it
/// (both round exactly), and its length; `None` when `s` does not start so.
fn fast_number(s: &[u8]) -> Option<(f64, usize)> {
    let first = *s.first()?;
    if !(first.is_ascii_digit() || first == b'.') {
        return None;
    }
    fast_float2::parse_partial::<f64, _>(s).ok()
}

/// A price as `parse_csv` takes it: finite and above 0.
fn price_ok(v: f64) -> Option<f64> {
    (v.is_finite() && v > 0.0).then_some(v)
}

/// A volume as `parse_csv` takes it: finite and 0 or above.
fn volume_ok(v: f64) -> Option<f64> {
    (v.is_finite() && v >= 0.0).then_some(v)
}

/// What a column is, for the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Time,
    Open,
    High,
    Low,
    Close,
    Volume,
    Other,
}

/// One bar's cells as they are read.
#[derive(Debug, Clone, Copy)]
struct Row {
    time: Option<FastTime>,
    nanos: u32,
    prices: [f64; 4],
    volume: Option<f64>,
}

/// The reader's state over a file's rows.
struct Reader {
    columns: BarColumns,
    times: TimeText,
    has_volume: bool,
    kind: Option<TimeKind>,
    last: Option<(i64, u32)>,
    day: DayMemo,
}

impl Reader {
    /// From `at`, the end of the cell that begins there (a comma, a line feed or the end),
    /// or `None` at a quote or a byte outside ASCII (`parse_csv` then decides).
    fn cell_end(rows: &[u8], at: usize) -> Option<usize> {
        let rest = rows.get(at..)?;
        let mut end = rest.len();
        for (i, &b) in rest.iter().enumerate() {
            if b == b',' || b == b'\n' {
                end = i;
                break;
            }
            if b == b'"' || !b.is_ascii() {
                return None;
            }
        }
        Some(at + end)
    }

    /// Where the next row begins when a row's last cell ends at `at` (a line feed, a
    /// carriage return and line feed, or the end of the rows, alone or after a carriage
    /// return); `None` otherwise.
    fn line_end(rows: &[u8], at: usize) -> Option<usize> {
        let n = rows.len();
        match rows.get(at..)? {
            [] | [b'\r'] => Some(n),
            [b'\n', ..] => Some(at + 1),
            [b'\r', b'\n', ..] => Some(at + 2),
            _ => None,
        }
    }

    /// After a cell ending at `end`: where the next cell (or row) begins, or `None` when
    /// the row has too many or too few cells there.
    fn after(rows: &[u8], end: usize, last: bool) -> Option<usize> {
        if last {
            Self::line_end(rows, end)
        } else {
            (rows.get(end) == Some(&b',')).then_some(end + 1)
        }
    }

    /// Switches to keeping every time's text, writing those of the bars so far.
    fn keep_texts(&mut self) {
        if matches!(self.times, TimeText::Kept { .. }) {
            return;
        }
        let instant = &self.columns.instant;
        let mut text = String::new();
        let mut ends = Vec::with_capacity(instant.capacity());
        for i in 0..instant.len() {
            text.push_str(&time_text(&self.times, instant, i));
            ends.push(text.len());
        }
        self.times = TimeText::Kept { text, ends };
    }

    /// At the first bar, how the times are kept: as dates, or as stamps with their
    /// suffixes (a later bar of another form keeps the texts instead).
    fn decide(&mut self, t: FastTime) {
        if self.columns.instant.is_empty() && !matches!(self.times, TimeText::Kept { .. }) {
            self.times = match t.kind {
                TimeKind::Date => TimeText::Dates,
                TimeKind::Timestamp => {
                    TimeText::Stamps(Vec::with_capacity(self.columns.instant.capacity()))
                }
            };
        }
    }

    /// Reads the time cell at `at`; answers the row so far and where the cell ends.
    fn time_cell(&mut self, rows: &[u8], at: usize, last: bool, row: &mut Row) -> Option<usize> {
        // The common forms, with the separator right after.
        for len in [20, 25, 10] {
            if let Some(cell) = rows.get(at..at + len)
                && let Some(t) = fast_time_memo(cell, &mut self.day)
                && let Some(next) = Self::after(rows, at + len, last)
            {
                row.time = Some(t);
                self.decide(t);
                self.push_text(cell)?;
                return Some(next);
            }
        }
        // Any other: the cell trimmed, read as parse_csv reads it.
        let end = Self::cell_end(rows, at)?;
        let next = Self::after(rows, end, last)?;
        let cell = trim(rows.get(at..end)?);
        if let Some(t) = fast_time_memo(cell, &mut self.day) {
            row.time = Some(t);
            self.decide(t);
        } else {
            let (kind, instant) = bars::parse_time(std::str::from_utf8(cell).ok()?)?;
            row.time = Some(FastTime {
                kind,
                secs: instant.timestamp(),
                suffix: 0,
            });
            row.nanos = instant.timestamp_subsec_nanos();
            self.keep_texts();
        }
        self.push_text(cell)?;
        Some(next)
    }

    /// In [`TimeText::Kept`], adds a bar's time text.
    fn push_text(&mut self, cell: &[u8]) -> Option<()> {
        if let TimeText::Kept { text, ends } = &mut self.times {
            text.push_str(std::str::from_utf8(cell).ok()?);
            ends.push(text.len());
        }
        Some(())
    }

    /// Reads a number cell at `at`: its value (`None` for an empty cell) and where the
    /// cell ends.
    fn number_cell(rows: &[u8], at: usize, last: bool) -> Option<(Option<f64>, usize)> {
        if let Some((v, len)) = fast_number(rows.get(at..)?)
            && let Some(next) = Self::after(rows, at + len, last)
        {
            return Some((Some(v), next));
        }
        let end = Self::cell_end(rows, at)?;
        let next = Self::after(rows, end, last)?;
        let cell = trim(rows.get(at..end)?);
        if cell.is_empty() {
            return Some((None, next));
        }
        let v = std::str::from_utf8(cell).ok()?.parse::<f64>().ok()?;
        Some((Some(v), next))
    }

    /// Reads the row at `at`; answers where the next begins.
    fn row(&mut self, rows: &[u8], at: usize, roles: &[Role]) -> Option<usize> {
        let mut row = Row {
            time: None,
            nanos: 0,
            prices: [0.0; 4],
            volume: None,
        };
        let mut p = at;
        let width = roles.len();
        for (k, &role) in roles.iter().enumerate() {
            let last = k + 1 == width;
            p = match role {
                Role::Time => self.time_cell(rows, p, last, &mut row)?,
                Role::Other => {
                    let end = Self::cell_end(rows, p)?;
                    Self::after(rows, end, last)?
                }
                Role::Volume => {
                    let (v, next) = Self::number_cell(rows, p, last)?;
                    row.volume = match v {
                        Some(v) => Some(volume_ok(v)?),
                        None => None,
                    };
                    next
                }
                Role::Open | Role::High | Role::Low | Role::Close => {
                    let (v, next) = Self::number_cell(rows, p, last)?;
                    let slot = match role {
                        Role::Open => 0,
                        Role::High => 1,
                        Role::Low => 2,
                        _ => 3,
                    };
                    row.prices[slot] = price_ok(v?)?;
                    next
                }
            };
        }
        let t = row.time?;
        if *self.kind.get_or_insert(t.kind) != t.kind {
            return None;
        }
        if self.last.is_some_and(|prev| (t.secs, row.nanos) <= prev) {
            return None;
        }
        self.last = Some((t.secs, row.nanos));
        let [open, high, low, close] = row.prices;
        if !(high >= open && high >= close && high >= low && low <= open && low <= close) {
            return None;
        }
        let c = &mut self.columns;
        c.instant.push(t.secs);
        c.open.push(open);
        c.high.push(high);
        c.low.push(low);
        c.close.push(close);
        c.volume.push(row.volume.unwrap_or(f64::NAN));
        self.has_volume |= row.volume.is_some();
        if let TimeText::Stamps(codes) = &mut self.times {
            codes.push(t.suffix);
        }
        Some(p)
    }
}

const BOM: &[u8] = b"\xef\xbb\xbf";

/// From `at`, where the next line begins when the line there is blank (nothing but
/// white space); `None` when it is not.
fn blank_line(rows: &[u8], at: usize) -> Option<usize> {
    for (i, &b) in rows.get(at..)?.iter().enumerate() {
        if b == b'\n' {
            return Some(at + i + 1);
        }
        if !is_space(b) {
            return None;
        }
    }
    Some(rows.len())
}

/// The fast reader over a file given a block at a time, each block ending where a line
/// ends (the last at the end of the file). Every step answers `None` at anything that
/// needs `parse_csv` (every malformed file among them).
struct Stream<'n> {
    name: &'n str,
    /// The file's length, to make room for its rows at once.
    size: usize,
    /// The header's columns, once read.
    roles: Option<Vec<Role>>,
    reader: Reader,
    /// A blank line was seen: from there on only blank lines may follow (the end of the
    /// file).
    blank: bool,
}

impl<'n> Stream<'n> {
    fn new(name: &'n str, size: usize) -> Self {
        Self {
            name,
            size,
            roles: None,
            reader: Reader {
                columns: BarColumns {
                    instant: Vec::new(),
                    open: Vec::new(),
                    high: Vec::new(),
                    low: Vec::new(),
                    close: Vec::new(),
                    volume: Vec::new(),
                    bars_per_year: 0.0,
                },
                times: TimeText::Dates,
                has_volume: false,
                kind: None,
                last: None,
                day: None,
            },
            blank: false,
        }
    }

    /// Reads the header (the first line of the first block) and makes room for the rows.
    fn header(&mut self, block: &[u8]) -> Option<usize> {
        let start = if block.starts_with(BOM) { BOM.len() } else { 0 };
        let end = start + block.get(start..)?.iter().position(|&c| c == b'\n')?;
        let header = block.get(start..end)?;
        let header = header.strip_suffix(b"\r".as_slice()).unwrap_or(header);
        if !header.is_ascii() {
            return None;
        }
        let columns = bars::parse_header(self.name, std::str::from_utf8(header).ok()?).ok()?;
        let mut roles = vec![Role::Other; columns.width];
        let mut set = |i: usize, role: Role| roles.get_mut(i).map(|r| *r = role);
        set(columns.time, Role::Time)?;
        set(columns.open, Role::Open)?;
        set(columns.high, Role::High)?;
        set(columns.low, Role::Low)?;
        set(columns.close, Role::Close)?;
        if let Some(v) = columns.volume {
            set(v, Role::Volume)?;
        }
        self.roles = Some(roles);
        // Room for the rows, from the first one's length (a little more: rows vary).
        let rest = block.get(end + 1..).unwrap_or_default();
        let first = rest
            .iter()
            .position(|&c| c == b'\n')
            .unwrap_or(rest.len())
            .max(8)
            + 1;
        let rows = self.size.saturating_sub(end + 1);
        let room = rows / first + rows / first / 16 + 16;
        let c = &mut self.reader.columns;
        for col in [
            &mut c.open,
            &mut c.high,
            &mut c.low,
            &mut c.close,
            &mut c.volume,
        ] {
            col.reserve_exact(room);
        }
        c.instant.reserve_exact(room);
        Some(end + 1)
    }

    /// Reads the lines of `block`.
    fn feed(&mut self, block: &[u8]) -> Option<()> {
        let mut p = match self.roles {
            None => self.header(block)?,
            Some(_) => 0,
        };
        let roles = self.roles.take()?;
        while p < block.len() {
            if let Some(next) = blank_line(block, p) {
                self.blank = true;
                p = next;
                continue;
            }
            if self.blank {
                return None;
            }
            p = self.reader.row(block, p, &roles)?;
        }
        self.roles = Some(roles);
        Some(())
    }

    /// The table, once every block is read.
    fn finish(self) -> Option<BarTable> {
        let Reader {
            mut columns,
            times,
            has_volume,
            ..
        } = self.reader;
        if columns.instant.is_empty() {
            return None;
        }
        columns.bars_per_year = backtest::bars_per_year(&columns.instant);
        Some(BarTable {
            columns,
            times,
            has_volume,
        })
    }
}

/// The fast reader over bytes in memory.
fn fast(name: &str, bytes: &[u8]) -> Option<BarTable> {
    let mut stream = Stream::new(name, bytes.len());
    stream.feed(bytes)?;
    stream.finish()
}

/// Bytes read from a file at a time (a block stays in the processor's cache, and no
/// buffer the size of the file is made).
const BLOCK: usize = 256 * 1024;

/// The fast reader over the file at `path`, read `block` bytes at a time (more for a
/// longer line); `None` when the file needs `parse_csv`, or reading it failed
/// (`read_csv`'s reading then says why).
fn fast_file(name: &str, path: &Path, block: usize) -> Option<BarTable> {
    use std::io::Read as _;
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > bars::MAX_FILE_BYTES {
        return None;
    }
    let mut file = std::fs::File::open(path).ok()?;
    let mut stream = Stream::new(name, usize::try_from(meta.len()).ok()?);
    let mut buf = vec![0u8; block.max(1)];
    let (mut filled, mut total, mut eof) = (0usize, 0u64, false);
    loop {
        while !eof && filled < buf.len() {
            match file.read(buf.get_mut(filled..)?) {
                Ok(0) => eof = true,
                Ok(n) => {
                    filled += n;
                    total += u64::try_from(n).ok()?;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        if total > bars::MAX_FILE_BYTES {
            return None;
        }
        // The block's complete lines (at the end of the file, all that is left).
        let upto = if eof {
            filled
        } else if let Some(i) = buf.get(..filled)?.iter().rposition(|&c| c == b'\n') {
            i + 1
        } else {
            // A line longer than the buffer.
            buf.resize(buf.len() * 2, 0);
            continue;
        };
        stream.feed(buf.get(..upto)?)?;
        buf.copy_within(upto..filled, 0);
        filled -= upto;
        if eof {
            break;
        }
    }
    stream.finish()
}

/// Reads the bar file at `path` into a table: the same bars, and the same errors, as
/// [`crate::bars::read_csv`] gives.
///
/// # Errors
/// As [`crate::bars::read_csv`].
pub fn read_table(path: &Path) -> Result<BarTable> {
    let name = bars::file_name(path);
    if let Some(table) = fast_file(&name, path, BLOCK) {
        return Ok(table);
    }
    let text = bars::decode(&name, bars::read_file(path, &name)?)?;
    Ok(BarTable::from_bars(&bars::parse_csv(&name, &text)?))
}

/// Parses a bar file's bytes into a table: the same bars, and the same errors, as
/// [`crate::bars::read_csv`] gives for these bytes; `name` is used in error messages only.
///
/// # Errors
/// `invalid_argument`: not UTF-8, or malformed (see [`crate::bars::parse_csv`]).
pub fn parse_table(name: &str, bytes: Vec<u8>) -> Result<BarTable> {
    if let Some(table) = fast(name, &bytes) {
        return Ok(table);
    }
    let text = bars::decode(name, bytes)?;
    Ok(BarTable::from_bars(&bars::parse_csv(name, &text)?))
}

// ---------------------------------------------------------------------------------------
// The cache.

/// The most memory the cache of parsed files holds, in bytes (256 MiB: five files of a
/// million bars); the least recently used tables go first.
pub const CACHE_BYTES: usize = 256 * 1024 * 1024;

/// How long a file must have gone unchanged before its table is kept: a file written
/// less than this long ago could be written again within its clock's tick (2 s on FAT)
/// and keep the same length and times.
pub const SETTLE: Duration = Duration::from_secs(2);

/// What identifies a file's content without reading it: its path, its identity on the
/// disk, its length and its times (the change time moves at every write, and cannot
/// be set back).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileKey {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
    #[cfg(unix)]
    id: (u64, u64, i64, i64),
}

impl FileKey {
    fn of(path: &Path) -> Option<Self> {
        let meta = std::fs::metadata(path).ok()?;
        Some(Self {
            path: path.to_path_buf(),
            len: meta.len(),
            modified: meta.modified().ok(),
            #[cfg(unix)]
            id: {
                use std::os::unix::fs::MetadataExt as _;
                (meta.dev(), meta.ino(), meta.ctime(), meta.ctime_nsec())
            },
        })
    }

    /// Whether the file has been left alone for `settle` (its times are that old).
    fn settled(&self, settle: Duration) -> bool {
        let now = SystemTime::now();
        let old = |t: SystemTime| now.duration_since(t).is_ok_and(|age| age >= settle);
        #[cfg(unix)]
        let changed = u64::try_from(self.id.2)
            .ok()
            .zip(u32::try_from(self.id.3).ok())
            .map(|(s, n)| SystemTime::UNIX_EPOCH + Duration::new(s, n));
        #[cfg(not(unix))]
        let changed = self.modified;
        self.modified.is_some_and(old) && changed.is_some_and(old)
    }
}

#[derive(Debug)]
struct Entry {
    key: FileKey,
    table: Arc<BarTable>,
    /// The columns the table holds (one read from a column file may hold only some).
    has: Needs,
    bytes: usize,
    used: u64,
}

#[derive(Debug, Default)]
struct Entries {
    list: Vec<Entry>,
    bytes: usize,
    tick: u64,
    parsed: u64,
    from_disk: u64,
}

/// Where parsed files are kept on disk, and how much room they may take.
#[derive(Debug, Clone)]
struct ColumnDir {
    dir: PathBuf,
    cap_bytes: u64,
}

/// Tables of bar files already read, kept while the file is unchanged (same path, disk
/// identity, length, modification and change times), so a server answering repeated
/// backtests on one file reads it once. Bounded in bytes; a file changed less than
/// [`SETTLE`] ago, or while it was read, is read again at each call; errors are never
/// kept. With a column directory (beside the server's state), each parsed file is also
/// kept there as a binary column file that a new process reads instead of parsing the
/// text again, under the same rules (see `column_file`).
#[derive(Debug)]
pub struct BarCache {
    entries: Mutex<Entries>,
    cap_bytes: usize,
    settle: Duration,
    columns: Option<ColumnDir>,
}

impl Default for BarCache {
    fn default() -> Self {
        Self::new(CACHE_BYTES, SETTLE)
    }
}

impl BarCache {
    pub fn new(cap_bytes: usize, settle: Duration) -> Self {
        Self {
            entries: Mutex::default(),
            cap_bytes,
            settle,
            columns: None,
        }
    }

    /// Keeps parsed files on disk in `dir` too (made when first needed), at most
    /// `cap_bytes` of them, the least recently used removed first ([`DISK_BYTES`] is the
    /// server's).
    pub fn set_column_dir(&mut self, dir: PathBuf, cap_bytes: u64) {
        self.columns = Some(ColumnDir { dir, cap_bytes });
    }

    /// The directory of column files, if any.
    pub fn column_dir(&self) -> Option<&Path> {
        self.columns.as_ref().map(|c| c.dir.as_path())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The table of the bar file at `path` (one [`crate::bars::resolve_path`] allowed),
    /// every column of it.
    ///
    /// # Errors
    /// As [`crate::bars::read_csv`].
    pub fn load(&self, path: &Path) -> Result<Arc<BarTable>> {
        self.load_for(path, Needs::ALL)
    }

    /// As [`Self::load`], but a table read from a column file may hold only the columns
    /// in `needs` beside the instants, opens and closes: the others may be empty.
    ///
    /// # Errors
    /// As [`crate::bars::read_csv`].
    pub fn load_for(&self, path: &Path, needs: Needs) -> Result<Arc<BarTable>> {
        let before = FileKey::of(path);
        let mut wanted = needs;
        if let Some(key) = &before {
            let mut e = self.lock();
            e.tick += 1;
            let tick = e.tick;
            if let Some(hit) = e.list.iter_mut().find(|x| x.key == *key) {
                if hit.has.covers(needs) {
                    hit.used = tick;
                    return Ok(Arc::clone(&hit.table));
                }
                // Kept without a column asked for now: read again, with the ones it had.
                wanted = hit.has.and(needs);
            }
        }
        // A column file an earlier process wrote for exactly this version of the file.
        if let (Some(key), Some(columns)) = (&before, &self.columns)
            && key.settled(self.settle)
            && let Some(table) = column_file::read(&columns.dir, key, wanted)
            && FileKey::of(path).as_ref() == Some(key)
        {
            let table = Arc::new(table);
            let mut e = self.lock();
            e.from_disk += 1;
            e.list.retain(|x| x.key.path != path);
            self.keep(&mut e, key.clone(), Arc::clone(&table), wanted);
            e.bytes = e.list.iter().map(|x| x.bytes).sum();
            return Ok(table);
        }
        self.lock().parsed += 1;
        let table = Arc::new(read_table(path)?);
        let mut settled = None;
        {
            let mut e = self.lock();
            // Whatever was kept for this path is of an older version of the file.
            e.list.retain(|x| x.key.path != path);
            if let Some(key) = before
                && FileKey::of(path).as_ref() == Some(&key)
                && key.settled(self.settle)
            {
                self.keep(&mut e, key.clone(), Arc::clone(&table), Needs::ALL);
                settled = Some(key);
            }
            e.bytes = e.list.iter().map(|x| x.bytes).sum();
        }
        // Best effort: a directory that cannot be written only means the next process
        // parses the file again.
        if let (Some(key), Some(columns)) = (settled, &self.columns) {
            column_file::write(&columns.dir, &key, &table, columns.cap_bytes);
        }
        Ok(table)
    }

    fn keep(&self, e: &mut Entries, key: FileKey, table: Arc<BarTable>, has: Needs) {
        let bytes = table.bytes();
        if bytes > self.cap_bytes {
            return;
        }
        // The least recently used go first, until the new one fits.
        while e.list.iter().map(|x| x.bytes).sum::<usize>() + bytes > self.cap_bytes {
            let Some(oldest) = e
                .list
                .iter()
                .enumerate()
                .min_by_key(|(_, x)| x.used)
                .map(|(i, _)| i)
            else {
                break;
            };
            e.list.swap_remove(oldest);
        }
        e.tick += 1;
        let used = e.tick;
        e.list.push(Entry {
            key,
            table,
            has,
            bytes,
            used,
        });
    }

    /// How many times a file was read to be parsed (each call the cache did not answer).
    pub fn parsed(&self) -> u64 {
        self.lock().parsed
    }

    /// How many times a table was read from a column file (each call the memory cache
    /// did not answer, and the column file did).
    pub fn from_column_files(&self) -> u64 {
        self.lock().from_disk
    }

    /// Bytes the kept tables hold.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Forgets every kept table.
    pub fn clear(&self) {
        let mut e = self.lock();
        e.list.clear();
        e.bytes = 0;
    }
}

/// A source's bars as a table, with the symbol they are for: a CSV file through the
/// context's cache (holding at least the columns in `needs`, see [`Needs`]), a broker's
/// bars as [`load_bars`] gives them.
///
/// # Errors
/// As [`load_bars`].
pub async fn load_table(
    ctx: &ToolContext,
    source: &BarSource,
    needs: Needs,
) -> Result<(String, Arc<BarTable>)> {
    match source {
        BarSource::Csv(CsvSource { csv }) => {
            let path = bars::resolve_path(csv, ctx.data_dirs.as_deref())?;
            let table = ctx.bar_cache.load_for(&path, needs)?;
            Ok((bars::symbol_of(&path, bars::file_name(&path)), table))
        }
        BarSource::Broker(_) => {
            let series = load_bars(ctx, source).await?;
            Ok((series.symbol, Arc::new(BarTable::from_bars(&series.bars))))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::float_arithmetic,
        clippy::cast_possible_truncation
    )]

    use std::fmt::Write as _;

    use super::*;

    /// A seeded xorshift: the same cases on every run.
    pub(super) struct Rng(pub(super) u64);

    impl Rng {
        pub(super) fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub(super) fn below(&mut self, n: usize) -> usize {
            usize::try_from(self.next() % n as u64).unwrap()
        }

        pub(super) fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
            from[self.below(from.len())]
        }
    }

    /// The table holds exactly these bars: the columns bit for bit, the time texts.
    fn assert_like_bars(case: &str, table: &BarTable, bars: &[Bar]) {
        let want = BarColumns::of(bars);
        let got = &table.columns;
        assert_eq!(got.instant, want.instant, "{case}");
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        for (g, w, col) in [
            (&got.open, &want.open, "open"),
            (&got.high, &want.high, "high"),
            (&got.low, &want.low, "low"),
            (&got.close, &want.close, "close"),
            (&got.volume, &want.volume, "volume"),
        ] {
            assert_eq!(bits(g), bits(w), "{case}: {col}");
        }
        assert_eq!(
            got.bars_per_year.to_bits(),
            want.bars_per_year.to_bits(),
            "{case}"
        );
        assert_eq!(table.len(), bars.len(), "{case}");
        for (i, b) in bars.iter().enumerate() {
            assert_eq!(table.time(i), b.time, "{case}: bar {i}");
        }
        assert_eq!(
            table.has_volume,
            bars.iter().any(|b| b.volume.is_some()),
            "{case}"
        );
    }

    /// `parse_table` gives exactly what `read_csv` gives for the same bytes: the same
    /// columns bit for bit, the same time texts, or the same error.
    fn same_as_parse_csv(case: &str, bytes: &[u8]) -> Option<BarTable> {
        let name = "PRICES.csv";
        let new = parse_table(name, bytes.to_vec());
        let old = bars::decode(name, bytes.to_vec()).and_then(|t| bars::parse_csv(name, &t));
        match (new, old) {
            (Ok(table), Ok(bars)) => {
                assert_like_bars(case, &table, &bars);
                Some(table)
            }
            (Err(a), Err(b)) => {
                assert_eq!(
                    (a.code, &a.message, &a.hint),
                    (b.code, &b.message, &b.hint),
                    "{case}"
                );
                None
            }
            (a, b) => panic!(
                "{case}: parse_table {:?}, parse_csv {:?}\n{}",
                a.map(|t| t.len()),
                b.map(|b| b.len()),
                String::from_utf8_lossy(bytes)
            ),
        }
    }

    /// A price as files write them: integers, points, long fractions, exponents, signs.
    fn price(rng: &mut Rng, base: f64) -> String {
        match rng.below(12) {
            0 => format!("{}", base.round().max(1.0)),
            1 => format!("{base:.2}"),
            2 => format!("{base:.0}."),
            3 => format!("{:e}", base),
            4 => format!("+{base}"),
            5 => format!("{base:.30}"),
            6 => format!(" {base} "),
            7 => format!("{base:.17}"),
            8 => {
                let s = format!("{base}");
                s.trim_start_matches('0').to_owned()
            }
            _ => format!("{base}"),
        }
    }

    /// A time as files write them, `i` steps after a start; `form` picks the writing.
    fn time(i: i64, form: usize) -> String {
        let start = 1_600_000_000 + i * 3_600;
        let at = chrono::DateTime::from_timestamp(start, 0).unwrap();
        let day = chrono::DateTime::from_timestamp(946_684_800 + i * 86_400, 0).unwrap();
        match form {
            0 => day.format("%Y-%m-%d").to_string(),
            1 => at.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
            2 => at
                .with_timezone(&chrono::FixedOffset::west_opt(4 * 3_600).unwrap())
                .to_rfc3339(),
            // Offsets that change (as a local exchange time does at daylight saving).
            3 => {
                let off = if i % 7 < 3 {
                    -4 * 3_600
                } else {
                    5 * 3_600 + 1_800
                };
                at.with_timezone(&chrono::FixedOffset::east_opt(off).unwrap())
                    .to_rfc3339()
            }
            4 => format!("{}.250Z", at.format("%Y-%m-%dT%H:%M:%S")),
            5 => at.format("%Y-%m-%d %H:%M:%S+00:00").to_string(),
            6 => at.format("%Y-%m-%dt%H:%M:%Sz").to_string(),
            7 => at.format("%Y-%m-%dT%H:%M:%S-00:00").to_string(),
            _ => format!(" {} ", at.format("%Y-%m-%dT%H:%M:%SZ")),
        }
    }

    pub(super) const HEADERS: &[&str] = &[
        "time,open,high,low,close,volume",
        "Date,Open,High,Low,Close,Volume",
        " date , open , high , low , close ",
        "close,volume,low,high,open,time",
        "symbol,time,open,high,low,close,volume,note",
        "time,open,high,low,close,VOLUME",
    ];

    /// A generated file: a header, rows of a seeded walk, and the file's habits.
    pub(super) fn file(rng: &mut Rng, rows: usize, form: usize, header: &str) -> String {
        let names: Vec<String> = header
            .split(',')
            .map(|c| c.trim().to_ascii_lowercase())
            .collect();
        let crlf = rng.below(3) == 0;
        let nl = if crlf { "\r\n" } else { "\n" };
        let mut text = String::new();
        if rng.below(4) == 0 {
            text.push('\u{feff}');
        }
        text.push_str(header);
        text.push_str(nl);
        let mut p = 100.0_f64;
        let plain = rng.below(2) == 0;
        for i in 0..rows {
            let u = (rng.next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            let open = p;
            p *= 1.0 + u * 0.02;
            let (high, low) = (open.max(p) * 1.001, open.min(p) * 0.999);
            let write = |rng: &mut Rng, v: f64| {
                if plain { format!("{v}") } else { price(rng, v) }
            };
            let cells: Vec<String> = names
                .iter()
                .map(|n| match n.as_str() {
                    "time" | "date" => time(i64::try_from(i).unwrap(), form),
                    "open" => write(rng, open),
                    "high" => write(rng, high),
                    "low" => write(rng, low),
                    "close" => write(rng, p),
                    "volume" => match rng.below(8) {
                        0 => String::new(),
                        1 => "0".to_owned(),
                        2 => "1.5e3".to_owned(),
                        _ => format!("{}", rng.below(100_000)),
                    },
                    _ => "x y".to_owned(),
                })
                .collect();
            text.push_str(&cells.join(","));
            text.push_str(nl);
        }
        for _ in 0..rng.below(3) {
            text.push_str(rng.pick(&["", " ", "\t", "\r"]));
            text.push_str(nl);
        }
        text
    }

    /// Breaks one row (or the layout) of a good file, as real files go wrong.
    pub(super) fn spoil(rng: &mut Rng, text: &str) -> String {
        let mut lines: Vec<String> = text.split('\n').map(str::to_owned).collect();
        let rows = lines.len().saturating_sub(2).max(1);
        let at = 1 + rng.below(rows);
        let line = lines[at].clone();
        let cells: Vec<&str> = line.split(',').collect();
        let k = rng.below(cells.len().max(1));
        let replace = |with: &str| {
            let mut c: Vec<String> = cells.iter().map(|c| (*c).to_owned()).collect();
            if let Some(cell) = c.get_mut(k) {
                *cell = with.to_owned();
            }
            c.join(",")
        };
        lines[at] = match rng.below(14) {
            0 => replace("SECRET"),
            1 => replace(""),
            2 => replace("-1"),
            3 => replace("inf"),
            4 => replace("NaN"),
            5 => replace("\"1\""),
            6 => replace("1\u{a0}"),
            7 => format!("{line},1"),
            8 => cells[..cells.len().saturating_sub(1)].join(","),
            9 => String::new(),
            10 => replace("2024-02-30"),
            11 => replace("0"),
            12 => lines[at.saturating_sub(1).max(1)].clone(),
            _ => replace("1e400"),
        };
        lines.join("\n")
    }

    #[test]
    fn generated_files_read_exactly_as_parse_csv_reads_them() {
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        let (mut good, mut fast_ones) = (0, 0);
        for case in 0..600 {
            let form = rng.below(9);
            let header = rng.pick(HEADERS);
            let rows = 1 + rng.below(40);
            let text = file(&mut rng, rows, form, header);
            let label = format!("case {case} (form {form}, {header:?})");
            if same_as_parse_csv(&label, text.as_bytes()).is_some() {
                good += 1;
            }
            if fast("x.csv", text.as_bytes()).is_some() {
                fast_ones += 1;
            }
            let bad = spoil(&mut rng, &text);
            same_as_parse_csv(&format!("{label}, spoiled"), bad.as_bytes());
        }
        // Every file these habits make that parse_csv takes, the fast reader takes.
        assert!(good > 250, "{good}");
        assert_eq!(fast_ones, good);
    }

    /// The same table bit for bit (or both none).
    pub(super) fn assert_same_tables(case: &str, a: Option<&BarTable>, b: Option<&BarTable>) {
        let (Some(a), Some(b)) = (a, b) else {
            assert_eq!(a.is_some(), b.is_some(), "{case}");
            return;
        };
        let bits = |t: &BarTable| {
            let c = &t.columns;
            let mut v: Vec<u64> = c.instant.iter().map(|&x| x.cast_unsigned()).collect();
            for col in [&c.open, &c.high, &c.low, &c.close, &c.volume] {
                v.extend(col.iter().map(|x| x.to_bits()));
            }
            v.push(c.bars_per_year.to_bits());
            v
        };
        assert_eq!(bits(a), bits(b), "{case}");
        assert_eq!(a.times, b.times, "{case}");
        assert_eq!(a.has_volume, b.has_volume, "{case}");
    }

    #[test]
    fn a_file_read_a_block_at_a_time_reads_as_in_one_piece() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("PRICES.csv");
        let mut rng = Rng(0x0bad_cafe_f00d_beef);
        let mut texts: Vec<String> = (0..60)
            .map(|_| {
                let form = rng.below(9);
                let header = rng.pick(HEADERS);
                let rows = 1 + rng.below(30);
                file(&mut rng, rows, form, header)
            })
            .collect();
        let spoiled: Vec<String> = texts.iter().map(|t| spoil(&mut rng, t)).collect();
        texts.extend(spoiled);
        texts.push("date,open,high,low,close\n2024-01-02,1,1,1,1\n\n\n".to_owned());
        texts.push(format!(
            "date,open,high,low,close,note\n2024-01-02,1,1,1,1,{}\n",
            "x".repeat(5_000)
        ));
        for (i, text) in texts.iter().enumerate() {
            std::fs::write(&path, text).unwrap();
            let whole = fast("PRICES.csv", text.as_bytes());
            for block in [1, 2, 3, 7, 16, 61, 100, 4_096, BLOCK] {
                let read = fast_file("PRICES.csv", &path, block);
                assert_same_tables(
                    &format!("text {i}, block {block}"),
                    read.as_ref(),
                    whole.as_ref(),
                );
            }
            // And read_table answers what read_csv answers.
            match (read_table(&path), bars::read_csv(&path)) {
                (Ok(t), Ok(series)) => assert_like_bars(&format!("text {i}"), &t, &series.bars),
                (Err(a), Err(b)) => assert_eq!((a.message, a.hint), (b.message, b.hint)),
                (a, b) => panic!(
                    "text {i}: {:?} / {:?}",
                    a.map(|t| t.len()),
                    b.map(|s| s.bars.len())
                ),
            }
        }
    }

    #[test]
    fn edge_cases_read_exactly_as_parse_csv_reads_them() {
        let cases: &[&str] = &[
            "",
            "\u{feff}",
            "\n\n",
            "time,open,high,low,close\n",
            "time,open,high,low,close\r\n\r\n  \r\n",
            "time,open,high,low,close",
            "\u{feff}date,open,high,low,close,volume\r\n2024-01-02,10,12,9,11,7\r\n2024-01-03,10,12,9,11,8\r\n\r\n\r\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\r",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\r\r\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1 \n2024-01-03,1,1,1,1\t\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\n\n2024-01-03,1,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\n \u{a0}\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\n\u{a0}\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\u{a0}\n",
            "date,open,high,low,close\n\u{2003}2024-01-02,1,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1,\n",
            "date,open,high,low,close\n2024-01-02,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,1,2,0.5,1\n2024-01-02,1,2,0.5,1\n",
            "date,open,high,low,close\n2024-01-03,1,2,0.5,1\n2024-01-02,1,2,0.5,1\n",
            "date,open,high,low,close\n2024-01-02,1,2,0.5,1\n2024-01-03T00:00:00Z,1,2,0.5,1\n",
            "time,open,high,low,close\n2024-01-03T00:00:00Z,1,2,0.5,1\n2024-01-04,1,2,0.5,1\n",
            "date,open,high,low,close\n0000-01-01,1,1,1,1\n9999-12-31,1,1,1,1\n",
            "date,open,high,low,close\n2024-02-29,1,1,1,1\n2023-02-29,1,1,1,1\n",
            "date,open,high,low,close\n1900-02-29,1,1,1,1\n",
            "date,open,high,low,close\n2000-02-29,1,1,1,1\n2000-13-01,1,1,1,1\n",
            "date,open,high,low,close\n2000-00-10,1,1,1,1\n",
            "date,open,high,low,close\n2000-01-00,1,1,1,1\n",
            "date,open,high,low,close\n2000-1-01,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T23:59:59Z,1,1,1,1\n2024-01-02T24:00:00Z,1,1,1,1\n",
            "time,open,high,low,close\n2016-12-31T23:59:60Z,1,1,1,1\n2017-01-01T00:00:00Z,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00+23:59,1,1,1,1\n2024-01-02T10:00:00-23:59,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00+24:00,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00+05:60,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00.5Z,1,1,1,1\n2024-01-02T10:00:00.75Z,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00.5Z,1,1,1,1\n2024-01-02T10:00:00.5Z,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00Z,1,1,1,1\n2024-01-02T10:00:00.000000001Z,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00Z,1,1,1,1\n2024-01-02T05:00:00-05:00,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00Z,1,1,1,1\n2024-01-02T05:00:01-05:00,1,1,1,1\n2024-01-02T10:00:02+00:00,1,1,1,1\n2024-01-02T10:00:03-00:00,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00UTC,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00 Z,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00:00+0500,1,1,1,1\n",
            "time,open,high,low,close\n2024-01-02T10:00Z,1,1,1,1\n",
            "time,open,high,low,close\n+2024-01-02T10:00:00Z,1,1,1,1\n",
            "date,open,high,low,close,volume\n2024-01-02,1,1,1,1,\n2024-01-03,1,1,1,1, \n",
            "date,open,high,low,close,volume\n2024-01-02,1,1,1,1,-0\n2024-01-03,1,1,1,1,0.0\n",
            "date,open,high,low,close,volume\n2024-01-02,1,1,1,1,-1\n",
            "date,open,high,low,close,volume\n2024-01-02,1,1,1,1,nan\n",
            "date,open,high,low,close,volume\n2024-01-02,1,1,1,1,Infinity\n",
            "date,open,high,low,close\n2024-01-02,.5,.5,.5,.5\n2024-01-03,5.,5.,5.,5.\n",
            "date,open,high,low,close\n2024-01-02,.,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,1..2,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,1e0,1E+0,1e-0,+1\n",
            "date,open,high,low,close\n2024-01-02,0,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001,1,0.0000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000001,1\n",
            "date,open,high,low,close\n2024-01-02,9007199254740993,9007199254740993,9007199254740993,9007199254740993\n",
            "date,open,high,low,close\n2024-01-02,1797693134862315708145274237317043567981000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000,1e308,1e308,1e308\n",
            "date,open,high,low,close\n2024-01-02,1,0.5,1,1\n",
            "date,open,high,low,close\n2024-01-02,1,1,2,1\n",
            "date,open,high,low,close\n2024-01-02,1,2,1,3\n",
            "date,open,high,low,close\n2024-01-02,1,2,1.5,1\n",
            "date,open,high,low,close\n\"2024-01-02\",1,1,1,1\n",
            "\"date\",open,high,low,close\n2024-01-02,1,1,1,1\n",
            "date,open,high,low\n2024-01-02,1,1,1\n",
            "date,time,open,high,low,close\n2024-01-02,x,1,1,1,1\n",
            "date,open,high,low,close,open\n2024-01-02,1,1,1,1,1\n",
            "d\u{e9}te,date,open,high,low,close\n\u{e9},2024-01-02,1,1,1,1\n",
            "date,open,high,low,close\n2024-01-02,1,1,1,1\n2024-01-03,1,1,1,1\u{0}\n",
            "date,open,high,low,close\n2024-01-02\u{b},1,1,1,1\n2024-01-03,\u{c}1,1,1,1\n",
            "date,open,high,low,close,\n2024-01-02,1,1,1,1,\n",
            ",date,open,high,low,close\n,2024-01-02,1,1,1,1\n",
        ];
        for (i, text) in cases.iter().enumerate() {
            same_as_parse_csv(&format!("edge case {i}: {text:?}"), text.as_bytes());
        }
        // Not UTF-8: the same error as read_csv's.
        same_as_parse_csv(
            "not UTF-8",
            b"date,open,high,low,close\n2024-01-02,1,1,1,\xff\n",
        );
        same_as_parse_csv("not UTF-8 header", b"dat\xe9,open,high,low,close\n");
    }

    #[test]
    fn the_common_forms_take_the_fast_reader() {
        let cases = [
            "date,open,high,low,close,volume\n2024-01-02,10,12,9,11,1000\n2024-01-03,11,11.5,10.5,11,\n",
            "time,open,high,low,close\r\n2024-01-02T14:30:00Z,1,2,0.5,1.5\r\n2024-01-02T14:31:00Z,1.5,1.5,1.5,1.5\r\n\r\n",
            "\u{feff}time,open,high,low,close\n2024-01-02T10:30:00-04:00,1,2,0.5,1.5\n2024-01-03T10:30:00-05:00,1,2,0.5,1.5\n2024-01-03T16:30:00-00:00,1,2,0.5,1.5\n2024-01-03T17:30:00+00:00,1,2,0.5,1.5",
            "symbol,Time,Open,High,Low,Close,note\nX, 2024-01-02T14:30:00Z ,1 , 2,0.5,1.5,a b\n",
        ];
        for text in cases {
            assert!(fast("x.csv", text.as_bytes()).is_some(), "{text:?}");
            let table = same_as_parse_csv(text, text.as_bytes()).unwrap();
            assert!(!matches!(table.times, TimeText::Kept { .. }), "{text:?}");
        }
        // Fractional seconds are read too, keeping the texts.
        let text = "time,open,high,low,close\n2024-01-02T14:30:00Z,1,1,1,1\n2024-01-02T14:30:00.5Z,1,1,1,1\n";
        assert!(fast("x.csv", text.as_bytes()).is_some());
        let table = same_as_parse_csv(text, text.as_bytes()).unwrap();
        assert!(matches!(table.times, TimeText::Kept { .. }));
    }

    #[test]
    fn numbers_read_as_str_parse_reads_them() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut texts: Vec<String> = [
            "0",
            "1",
            "1.",
            ".5",
            "0.1",
            "0.3",
            "9007199254740993",
            "9007199254740992.5",
            "2.2250738585072011",
            "179769313486231570000",
            "4.9406564584124654",
            "123456789012345678901234567890",
            "0.000000000000000000000000000001",
            "1.7976931348623157",
            "0.99999999999999999999999999999",
            "1.e5",
            ".5e3",
            "5.E-3",
            "1e400",
            "1e-400",
            "0e99999999999999999999",
            "1e-99999999999999999999",
            "2.4703282292062328e-324",
            "2.4703282292062327e-324",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        for _ in 0..20_000 {
            let int = rng.below(25);
            let frac = rng.below(25);
            let mut s = String::new();
            for _ in 0..int {
                s.push(char::from(b'0' + u8::try_from(rng.below(10)).unwrap()));
            }
            if frac > 0 || rng.below(2) == 0 {
                s.push('.');
            }
            for _ in 0..frac {
                s.push(char::from(b'0' + u8::try_from(rng.below(10)).unwrap()));
            }
            if rng.below(4) == 0 {
                let e = rng.pick(&["e", "E", "e+", "e-", "E-"]);
                let _ = write!(s, "{e}{}", rng.below(400));
            }
            texts.push(s);
            let v = f64::from_bits(rng.next() >> 2);
            if v.is_finite() {
                texts.push(format!("{}", v.abs()));
                texts.push(format!("{:e}", v.abs()));
            }
        }
        for long in [310, 330, 400, 800] {
            texts.push(format!("0.{}1", "0".repeat(long)));
            texts.push(format!("{}.5", "9".repeat(long)));
        }
        for s in &texts {
            let std = s.parse::<f64>();
            match fast_number(s.as_bytes()) {
                Some((v, len)) if len == s.len() => {
                    assert_eq!(Ok(v.to_bits()), std.map(f64::to_bits), "{s}");
                }
                Some(_) => panic!("{s}: read in part"),
                None => assert!(std.is_err(), "{s}: not read, str::parse reads it"),
            }
        }
    }

    #[test]
    fn times_read_as_chrono_reads_them_and_are_written_back_the_same() {
        // Every day of years 0 to 9999 goes to its number and back; chrono agrees.
        let epoch = chrono::NaiveDate::from_ymd_opt(1970, 1, 1).unwrap();
        for days in days_from_civil(0, 1, 1)..=days_from_civil(9_999, 12, 31) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            if days % 97 == 0 {
                let date = epoch + chrono::Duration::days(days);
                let text = date.format("%Y-%m-%d").to_string();
                assert_eq!(format!("{y:04}-{m:02}-{d:02}"), text);
            }
        }
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut memo = None;
        for _ in 0..50_000 {
            // Often the same date as the last one, as rows are.
            let y = if rng.below(2) == 0 {
                2024
            } else {
                rng.below(10_000)
            };
            let parts = [
                rng.below(14),
                rng.below(33),
                rng.below(26),
                rng.below(62),
                rng.below(62),
                rng.below(26),
                rng.below(62),
            ];
            let [mo, d, h, mi, s, oh, om] = parts;
            let sign = rng.pick(&["+", "-"]);
            let text = match rng.below(3) {
                0 => format!("{y:04}-{mo:02}-{d:02}"),
                1 => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"),
                _ => format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{sign}{oh:02}:{om:02}"),
            };
            let want = bars::parse_time(&text);
            // Remembering the last date changes nothing.
            assert_eq!(
                fast_time_memo(text.as_bytes(), &mut memo),
                fast_time(text.as_bytes()),
                "{text}"
            );
            match fast_time(text.as_bytes()) {
                Some(t) => {
                    let (kind, instant) = want.unwrap_or_else(|| panic!("{text}: chrono refuses"));
                    assert_eq!((t.kind, t.secs), (kind, instant.timestamp()), "{text}");
                    assert_eq!(instant.timestamp_subsec_nanos(), 0, "{text}");
                    let again = match kind {
                        TimeKind::Date => time_text(&TimeText::Dates, &[t.secs], 0),
                        TimeKind::Timestamp => stamp_text(t.secs, t.suffix),
                    };
                    assert_eq!(again, text);
                }
                // Refused here: a leap second, an hour 24, a bad date (chrono's to judge).
                None => assert!(
                    want.is_none() || s == 60 || oh > 23 || om > 59,
                    "{text}: refused, chrono reads it"
                ),
            }
        }
    }

    // -- the cache -------------------------------------------------------------------

    pub(super) fn bars_text(close: f64, rows: usize) -> String {
        let mut text = "date,open,high,low,close\n".to_owned();
        for i in 0..rows {
            let _ = writeln!(
                text,
                "{},{close},{close},{close},{close}",
                super::tests::day(i)
            );
        }
        text
    }

    fn day(i: usize) -> String {
        let d = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap()
            + chrono::Duration::days(i64::try_from(i).unwrap());
        d.format("%Y-%m-%d").to_string()
    }

    /// Settled after this in the tests (a real cache waits [`SETTLE`]).
    pub(super) const TEST_SETTLE: Duration = Duration::from_millis(100);

    pub(super) fn settle() {
        std::thread::sleep(TEST_SETTLE * 2);
    }

    #[test]
    fn an_unchanged_file_is_parsed_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("A.csv");
        std::fs::write(&path, bars_text(1.0, 3)).unwrap();
        settle();
        let cache = BarCache::new(CACHE_BYTES, TEST_SETTLE);
        let first = cache.load(&path).unwrap();
        let again = cache.load(&path).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(cache.parsed(), 1);
        assert_eq!(cache.bytes(), first.bytes());
        cache.clear();
        let _ = cache.load(&path).unwrap();
        assert_eq!(cache.parsed(), 2);
    }

    #[test]
    fn a_changed_file_is_never_served_from_the_cache() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("A.csv");
        std::fs::write(&path, bars_text(1.0, 3)).unwrap();
        settle();
        let cache = BarCache::new(CACHE_BYTES, TEST_SETTLE);
        assert_eq!(cache.load(&path).unwrap().columns.close, [1.0; 3]);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();

        // The same length, and the modification time set back: still read again.
        std::fs::write(&path, bars_text(2.0, 3)).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().modified().unwrap(),
            modified
        );
        assert_eq!(cache.load(&path).unwrap().columns.close, [2.0; 3]);
        // Written less than the settling time ago: not kept, read at every call.
        assert_eq!(cache.load(&path).unwrap().columns.close, [2.0; 3]);
        assert_eq!(cache.parsed(), 3);

        // Another length; then replaced by another file under the same name.
        settle();
        std::fs::write(&path, bars_text(3.0, 4)).unwrap();
        assert_eq!(cache.load(&path).unwrap().columns.close, [3.0; 4]);
        let other = dir.path().join("B.csv");
        std::fs::write(&other, bars_text(4.0, 4)).unwrap();
        std::fs::rename(&other, &path).unwrap();
        assert_eq!(cache.load(&path).unwrap().columns.close, [4.0; 4]);
        // A file that turned bad answers its error, whatever was kept before.
        settle();
        let _ = cache.load(&path).unwrap();
        let _ = cache.load(&path).unwrap();
        let parsed = cache.parsed();
        std::fs::write(&path, "date,open,high,low,close\n2024-01-02,1,0.5,1,1\n").unwrap();
        let err = cache.load(&path).unwrap_err();
        assert!(err.message.contains("line 2"), "{err}");
        assert_eq!(cache.parsed(), parsed + 1);
    }

    #[test]
    fn the_cache_holds_at_most_its_bytes_and_drops_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let paths: Vec<PathBuf> = ["A", "B", "C"]
            .iter()
            .map(|n| {
                let path = dir.path().join(format!("{n}.csv"));
                std::fs::write(&path, bars_text(1.0, 100)).unwrap();
                path
            })
            .collect();
        settle();
        let one = parse_table("A.csv", std::fs::read(&paths[0]).unwrap())
            .unwrap()
            .bytes();
        // Room for two tables.
        let cache = BarCache::new(one * 2 + one / 2, TEST_SETTLE);
        let _ = cache.load(&paths[0]).unwrap();
        let _ = cache.load(&paths[1]).unwrap();
        let _ = cache.load(&paths[0]).unwrap();
        assert_eq!(cache.parsed(), 2);
        // C pushes out B, the least recently used.
        let _ = cache.load(&paths[2]).unwrap();
        assert!(cache.bytes() <= one * 2 + one / 2);
        let _ = cache.load(&paths[0]).unwrap();
        assert_eq!(cache.parsed(), 3);
        let _ = cache.load(&paths[1]).unwrap();
        assert_eq!(cache.parsed(), 4);
        // A table bigger than the whole cache is never kept.
        let tiny = BarCache::new(one / 2, TEST_SETTLE);
        let _ = tiny.load(&paths[0]).unwrap();
        let _ = tiny.load(&paths[0]).unwrap();
        assert_eq!((tiny.parsed(), tiny.bytes()), (2, 0));
    }
}

#[cfg(test)]
mod column_file_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::tests::{
        HEADERS, Rng, TEST_SETTLE, assert_same_tables, bars_text, file, settle, spoil,
    };
    use super::*;

    /// A cache as a new process makes it: nothing in memory, column files in `dir`.
    fn fresh(dir: &Path) -> BarCache {
        let mut cache = BarCache::new(CACHE_BYTES, TEST_SETTLE);
        cache.set_column_dir(dir.to_path_buf(), DISK_BYTES);
        cache
    }

    /// The table and the time texts the same bit for bit.
    fn assert_same(case: &str, a: &BarTable, b: &BarTable) {
        assert_same_tables(case, Some(a), Some(b));
        for i in 0..a.len() {
            assert_eq!(a.time(i), b.time(i), "{case}: bar {i}");
        }
    }

    #[test]
    fn a_column_file_gives_back_the_parsed_table_bit_for_bit() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let cols = state.path().join(COLUMN_DIR);
        let mut rng = Rng(0x5eed_c01f_11e5_0001);
        let mut paths = Vec::new();
        for case in 0..160 {
            let form = rng.below(9);
            let header = rng.pick(HEADERS);
            let rows = 1 + rng.below(60);
            let mut text = file(&mut rng, rows, form, header);
            if case % 4 == 3 {
                text = spoil(&mut rng, &text);
            }
            let path = data.path().join(format!("F{case}.csv"));
            std::fs::write(&path, &text).unwrap();
            paths.push(path);
        }
        // A bigger one, past a block of the column file.
        let big = data.path().join("BIG.csv");
        std::fs::write(&big, file(&mut rng, 40_000, 1, HEADERS[0])).unwrap();
        paths.push(big);
        settle();
        let (mut kinds, mut errors) = ([0; 3], 0);
        for (i, path) in paths.iter().enumerate() {
            let case = format!("file {i}");
            let first = fresh(&cols);
            let parsed = match first.load(path) {
                Ok(t) => t,
                Err(e) => {
                    // An error is never kept, on disk either.
                    errors += 1;
                    assert!(!column_file::file_for(&cols, path).exists(), "{case}");
                    let again = fresh(&cols).load(path).unwrap_err();
                    assert_eq!((e.message, e.hint), (again.message, again.hint), "{case}");
                    continue;
                }
            };
            assert_eq!(
                (first.parsed(), first.from_column_files()),
                (1, 0),
                "{case}"
            );
            kinds[match parsed.times {
                TimeText::Dates => 0,
                TimeText::Stamps(_) => 1,
                TimeText::Kept { .. } => 2,
            }] += 1;
            // A new process reads the column file, not the CSV.
            let second = fresh(&cols);
            let read = second.load(path).unwrap();
            assert_eq!(
                (second.parsed(), second.from_column_files()),
                (0, 1),
                "{case}"
            );
            assert_same(&case, &read, &parsed);
            assert_same(&case, &read, &read_table(path).unwrap());
            // And keeps it in memory.
            assert!(Arc::ptr_eq(&read, &second.load(path).unwrap()));
        }
        assert!(kinds.iter().all(|&k| k > 5), "{kinds:?}");
        assert!(errors > 10, "{errors}");
    }

    /// The columns every table has the same bit for bit, with the times.
    fn assert_same_core(case: &str, a: &BarTable, b: &BarTable) {
        let (x, y) = (&a.columns, &b.columns);
        assert_eq!(x.instant, y.instant, "{case}");
        for (p, q) in [(&x.open, &y.open), (&x.close, &y.close)] {
            let bits = |c: &[f64]| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(p), bits(q), "{case}");
        }
        assert_eq!(
            x.bars_per_year.to_bits(),
            y.bars_per_year.to_bits(),
            "{case}"
        );
        assert_eq!((&a.times, a.has_volume), (&b.times, b.has_volume), "{case}");
    }

    /// Where the column `i` (instants, open, high, low, close, volume) of a column file
    /// starts, for the source `path` of `bars` bars.
    fn column_at(path: &Path, bars: usize, i: usize) -> usize {
        let path_len = path.as_os_str().as_encoded_bytes().len();
        128 + path_len.next_multiple_of(32) + 64 + i * (bars * 8).next_multiple_of(32)
    }

    #[test]
    fn the_needs_of_rules_are_the_columns_they_read() {
        let of = |rules: &[&str]| {
            let rules: Vec<Expr> = rules
                .iter()
                .map(|r| tradedesk_research::expr::parse_condition(r).unwrap())
                .collect();
            Needs::of(&rules)
        };
        let none = Needs::default();
        assert_eq!(of(&["cross_above(sma(close, 10), sma(close, 30))"]), none);
        assert_eq!(of(&["open > close", "close < shift(open, 2)"]), none);
        let high = Needs { high: true, ..none };
        assert_eq!(of(&["close > highest(high, 20)"]), high);
        assert_eq!(of(&["close > 1", "high > 2"]), high);
        let range = Needs {
            high: true,
            low: true,
            ..none
        };
        assert_eq!(of(&["atr(14) > 1"]), range);
        assert_eq!(
            of(&["low < 1", "volume > sma(volume, 5)", "high > 2"]),
            Needs::ALL
        );
        assert!(Needs::ALL.covers(high) && high.covers(none) && !high.covers(range));
        assert_eq!(high.and(Needs { low: true, ..none }), range);
    }

    #[test]
    fn a_column_file_is_read_only_as_far_as_the_rules_need() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let cols = state.path().join(COLUMN_DIR);
        let mut rng = Rng(0x5eed_c01f_11e5_0003);
        let path = data.path().join("A.csv");
        let want = loop {
            std::fs::write(&path, file(&mut rng, 20_000, 1, HEADERS[0])).unwrap();
            if read_table(&path).is_ok() {
                settle();
                break fresh(&cols).load(&path).unwrap();
            }
        };
        let cache = fresh(&cols);
        let part = cache.load_for(&path, Needs::default()).unwrap();
        assert_eq!((cache.parsed(), cache.from_column_files()), (0, 1));
        assert_same_core("the closes only", &part, &want);
        let c = &part.columns;
        assert!(c.high.is_empty() && c.low.is_empty() && c.volume.is_empty());
        // A backtest on it is the backtest on the whole table.
        let rule = tradedesk_research::expr::parse_condition("close > sma(close, 5)").unwrap();
        let exit = tradedesk_research::expr::parse_condition("close < open").unwrap();
        let settings = tradedesk_research::backtest::Settings::default();
        let run = |table: &BarTable| {
            let progress = std::sync::atomic::AtomicU64::new(0);
            let done = crate::research::compute(
                "A",
                table,
                &rule,
                Some(&exit),
                &settings,
                &progress,
                false,
            );
            serde_json::to_value(&done.result).unwrap()
        };
        assert_eq!(run(&part), run(&want));
        // Asked again for as much: the memory cache answers.
        assert!(Arc::ptr_eq(
            &part,
            &cache.load_for(&path, Needs::default()).unwrap()
        ));
        // Asked for the highs: read again, with them.
        let high = Needs {
            high: true,
            ..Needs::default()
        };
        let with_high = cache.load_for(&path, high).unwrap();
        assert_eq!((cache.parsed(), cache.from_column_files()), (0, 2));
        assert_same_core("with the highs", &with_high, &want);
        let bits = |c: &[f64]| c.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&with_high.columns.high), bits(&want.columns.high));
        assert!(with_high.columns.low.is_empty());
        // The lows as well: read again, keeping the highs.
        let range = Needs { low: true, ..high };
        let with_range = cache
            .load_for(
                &path,
                Needs {
                    low: true,
                    ..Needs::default()
                },
            )
            .unwrap();
        assert_eq!(cache.from_column_files(), 3);
        assert!(Arc::ptr_eq(
            &with_range,
            &cache.load_for(&path, range).unwrap()
        ));
        assert_eq!(bits(&with_range.columns.high), bits(&want.columns.high));
        assert_eq!(bits(&with_range.columns.low), bits(&want.columns.low));
        // Everything: the whole table, as parsed; then any smaller ask is answered by it.
        let all = cache.load(&path).unwrap();
        assert_eq!((cache.parsed(), cache.from_column_files()), (0, 4));
        assert_same("all", &all, &want);
        assert!(Arc::ptr_eq(&all, &cache.load_for(&path, high).unwrap()));
    }

    #[test]
    fn a_spoilt_column_is_found_when_it_is_read() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let cols = state.path().join(COLUMN_DIR);
        let mut rng = Rng(0x5eed_c01f_11e5_0004);
        let path = data.path().join("A.csv");
        // A file that reads without an error.
        let want = loop {
            std::fs::write(&path, file(&mut rng, 5_000, 1, HEADERS[0])).unwrap();
            if read_table(&path).is_ok() {
                settle();
                break fresh(&cols).load(&path).unwrap();
            }
        };
        let bars = want.len();
        let at = column_file::file_for(&cols, &path);
        let good = std::fs::read(&at).unwrap();
        // Each column spoilt in its middle, and the first and last byte of the column.
        for i in 0..6 {
            for byte in [0, bars * 4, bars * 8 - 1] {
                let case = format!("column {i}, byte {byte}");
                let mut bytes = good.clone();
                bytes[column_at(&path, bars, i) + byte] ^= 0x10;
                std::fs::write(&at, &bytes).unwrap();
                // Read for rules on closes: a spoilt high, low or volume is not read.
                let cache = fresh(&cols);
                let part = cache.load_for(&path, Needs::default()).unwrap();
                assert_same_core(&case, &part, &want);
                let not_read = matches!(i, 2 | 3 | 5);
                assert_eq!(
                    (cache.parsed(), cache.from_column_files()),
                    if not_read { (0, 1) } else { (1, 0) },
                    "{case}"
                );
                if not_read {
                    // The whole table: the spoilt column is found, the source parsed and
                    // the file written good again.
                    let cache = fresh(&cols);
                    assert_same(&case, &cache.load(&path).unwrap(), &want);
                    assert_eq!(
                        (cache.parsed(), cache.from_column_files()),
                        (1, 0),
                        "{case}"
                    );
                }
                assert_eq!(std::fs::read(&at).unwrap(), good, "{case}");
            }
        }
    }

    #[test]
    fn a_changed_renamed_or_truncated_source_is_parsed_again() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let cols = state.path().join(COLUMN_DIR);
        let path = data.path().join("A.csv");
        std::fs::write(&path, bars_text(1.0, 50)).unwrap();
        settle();
        let _ = fresh(&cols).load(&path).unwrap();
        let cache = fresh(&cols);
        assert_eq!(cache.load(&path).unwrap().columns.close, [1.0; 50]);
        assert_eq!(cache.from_column_files(), 1);

        // The same length, and the modification time set back.
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::fs::write(&path, bars_text(2.0, 50)).unwrap();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(modified)
            .unwrap();
        settle();
        let cache = fresh(&cols);
        assert_eq!(cache.load(&path).unwrap().columns.close, [2.0; 50]);
        assert_eq!((cache.parsed(), cache.from_column_files()), (1, 0));
        // That parse wrote the new version's file.
        let cache = fresh(&cols);
        assert_eq!(cache.load(&path).unwrap().columns.close, [2.0; 50]);
        assert_eq!(cache.from_column_files(), 1);

        // Renamed: the file under its new name is parsed; another file renamed over the
        // old name is parsed too.
        let moved = data.path().join("B.csv");
        std::fs::rename(&path, &moved).unwrap();
        let other = data.path().join("C.csv");
        std::fs::write(&other, bars_text(3.0, 50)).unwrap();
        std::fs::rename(&other, &path).unwrap();
        settle();
        let cache = fresh(&cols);
        assert_eq!(cache.load(&moved).unwrap().columns.close, [2.0; 50]);
        assert_eq!(cache.load(&path).unwrap().columns.close, [3.0; 50]);
        assert_eq!((cache.parsed(), cache.from_column_files()), (2, 0));

        // Cut short: parsed again (its last rows gone), or its error.
        let _ = fresh(&cols).load(&path).unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        let text = bars_text(3.0, 50);
        let cut = text
            .lines()
            .take(21)
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        std::fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut.len() as u64)
            .unwrap();
        assert!((cut.len() as u64) < len);
        settle();
        let cache = fresh(&cols);
        assert_eq!(cache.load(&path).unwrap().columns.close, [3.0; 20]);
        assert_eq!(cache.parsed(), 1);
        std::fs::write(&path, "date,open,high,low,close\n2024-01-02,1,0.5,1,1\n").unwrap();
        settle();
        let err = fresh(&cols).load(&path).unwrap_err();
        assert!(err.message.contains("line 2"), "{err}");
    }

    #[test]
    fn a_spoilt_column_file_is_ignored_and_written_again() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let cols = state.path().join(COLUMN_DIR);
        let mut rng = Rng(0x0dd_ba11_5eed_0002);
        // Files of changing offsets (suffix codes to keep), that read without an error.
        let mut good_file = |path: &Path| loop {
            std::fs::write(path, file(&mut rng, 3_000, 3, HEADERS[0])).unwrap();
            if read_table(path).is_ok() {
                break;
            }
        };
        let path = data.path().join("A.csv");
        good_file(&path);
        let other = data.path().join("B.csv");
        good_file(&other);
        settle();
        let want = read_table(&path).unwrap();
        let _ = fresh(&cols).load(&path).unwrap();
        let _ = fresh(&cols).load(&other).unwrap();
        let at = column_file::file_for(&cols, &path);
        let good = std::fs::read(&at).unwrap();
        let n = good.len();
        let mut spoilt: Vec<(String, Vec<u8>)> = vec![
            ("empty".into(), Vec::new()),
            ("the header only".into(), good[..128].to_vec()),
            ("one byte short".into(), good[..n - 1].to_vec()),
            ("one byte more".into(), [good.as_slice(), &[0]].concat()),
            ("32 bytes more".into(), [good.as_slice(), &[0; 32]].concat()),
            (
                "another file's".into(),
                std::fs::read(column_file::file_for(&cols, &other)).unwrap(),
            ),
            (
                "not a column file".into(),
                b"date,open,high,low,close\n".to_vec(),
            ),
        ];
        for at in [
            0,
            7,
            8,
            16,
            23,
            24,
            40,
            56,
            64,
            72,
            80,
            127,
            128,
            200,
            n / 2,
            n - 40,
            n - 1,
        ] {
            for bit in [0, 7] {
                let mut bytes = good.clone();
                bytes[at] ^= 1 << bit;
                spoilt.push((format!("bit {bit} of byte {at} flipped"), bytes));
            }
        }
        for (case, bytes) in &spoilt {
            std::fs::write(&at, bytes).unwrap();
            let cache = fresh(&cols);
            let table = cache.load(&path).unwrap();
            assert_eq!(
                (cache.parsed(), cache.from_column_files()),
                (1, 0),
                "{case}"
            );
            assert_same(case, &table, &want);
            // The parse wrote a good file again.
            assert_eq!(std::fs::read(&at).unwrap(), good, "{case}");
        }
        // A directory where the file should be: parsed, and no error.
        std::fs::remove_file(&at).unwrap();
        std::fs::create_dir(&at).unwrap();
        let cache = fresh(&cols);
        assert_same("a directory", &cache.load(&path).unwrap(), &want);
        assert_eq!(cache.parsed(), 1);
    }

    #[test]
    fn an_unwritable_state_dir_still_answers() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let path = data.path().join("A.csv");
        std::fs::write(&path, bars_text(1.0, 30)).unwrap();
        settle();
        // The column directory cannot be made (a file stands where its parent should be).
        let blocked = state.path().join("file");
        std::fs::write(&blocked, "x").unwrap();
        let cols = blocked.join(COLUMN_DIR);
        for _ in 0..2 {
            let cache = fresh(&cols);
            assert_eq!(cache.load(&path).unwrap().columns.close, [1.0; 30]);
            assert_eq!(cache.parsed(), 1);
        }
        // A directory without write permission (only when permissions apply: not as root).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let ro = state.path().join("read-only");
            std::fs::create_dir(&ro).unwrap();
            std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
            let cache = fresh(&ro);
            assert_eq!(cache.load(&path).unwrap().columns.close, [1.0; 30]);
            let writable = std::fs::write(ro.join("probe"), "x").is_ok();
            if !writable {
                assert_eq!(std::fs::read_dir(&ro).unwrap().count(), 0);
            }
            std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        // With no column directory at all, as before.
        let cache = BarCache::new(CACHE_BYTES, TEST_SETTLE);
        assert_eq!(cache.load(&path).unwrap().columns.close, [1.0; 30]);
    }

    #[test]
    fn column_files_stay_within_their_room() {
        let data = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let cols = state.path().join(COLUMN_DIR);
        let paths: Vec<PathBuf> = ["A", "B", "C"]
            .iter()
            .map(|n| {
                let path = data.path().join(format!("{n}.csv"));
                std::fs::write(&path, bars_text(1.0, 200)).unwrap();
                path
            })
            .collect();
        settle();
        let mut probe = fresh(&cols);
        let _ = probe.load(&paths[0]).unwrap();
        let one = std::fs::metadata(column_file::file_for(&cols, &paths[0]))
            .unwrap()
            .len();
        // A temporary file left by a process that stopped while writing, long ago.
        let stale = cols.join(".0123456789abcdef.1-0.tmp");
        std::fs::write(&stale, "x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&stale)
            .unwrap()
            .set_modified(SystemTime::now() - Duration::from_secs(7_200))
            .unwrap();
        // Room for two files: A, then B, then A used again, then C pushes B out.
        let cap = one * 2 + one / 2;
        let kept = |cache: &mut BarCache| {
            cache.set_column_dir(cols.clone(), cap);
        };
        for p in [&paths[0], &paths[1]] {
            std::thread::sleep(Duration::from_millis(20));
            kept(&mut probe);
            let _ = fresh(&cols).load(p).unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
        let mut again = fresh(&cols);
        kept(&mut again);
        let _ = again.load(&paths[0]).unwrap();
        assert_eq!(again.from_column_files(), 1);
        std::thread::sleep(Duration::from_millis(20));
        let mut c = fresh(&cols);
        kept(&mut c);
        let _ = c.load(&paths[2]).unwrap();
        let on_disk = |p: &Path| column_file::file_for(&cols, p).exists();
        assert!(on_disk(&paths[0]) && !on_disk(&paths[1]) && on_disk(&paths[2]));
        assert!(!stale.exists());
        let total: u64 = std::fs::read_dir(&cols)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();
        assert!(total <= cap, "{total} > {cap}");
        // A file bigger than the whole room is never written.
        let tiny_dir = state.path().join("tiny");
        let mut tiny = fresh(&tiny_dir);
        tiny.set_column_dir(tiny_dir.clone(), one / 2);
        let _ = tiny.load(&paths[0]).unwrap();
        assert!(!column_file::file_for(&tiny_dir, &paths[0]).exists());
    }
}
