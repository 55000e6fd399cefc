//! Price bars from a local CSV file: the path policy that decides which files may be
//! read, a strict row-by-row parser whose errors name a line and a rule but never echo
//! the file's content, and the downsampling that keeps the first and last bar.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use chrono::{DateTime, NaiveDate, NaiveTime, Utc};
use tradedesk_core::error::quote;
use tradedesk_core::{Error, Result};

pub use tradedesk_core::Bar;

/// Largest CSV file read, in bytes (256 MiB: a million rows of minute bars with RFC 3339
/// times is about 75 MiB); bigger files are refused before reading.
pub const MAX_FILE_BYTES: u64 = 256 * 1024 * 1024;

/// Longest path string accepted, in characters.
pub const MAX_PATH_CHARS: usize = 4096;

/// The bars of one source, with the symbol and interval they are for.
#[derive(Debug, Clone, PartialEq)]
pub struct BarSeries {
    /// The symbol (for a CSV file, its stem).
    pub symbol: String,
    /// The bar interval when the source states one (never for a CSV file).
    pub interval: Option<String>,
    /// The bars, in strictly increasing time order.
    pub bars: Vec<Bar>,
}

const FIX_FILE_HINT: &str = "fix the CSV file: header date|time,open,high,low,close[,volume], one bar per line in time order";

/// Whether the file's times are calendar dates or RFC 3339 timestamps (never both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeKind {
    Date,
    Timestamp,
}

/// Where each needed column sits in a row, and how many cells a row has.
#[derive(Debug)]
pub(crate) struct Columns {
    pub(crate) time: usize,
    pub(crate) open: usize,
    pub(crate) high: usize,
    pub(crate) low: usize,
    pub(crate) close: usize,
    pub(crate) volume: Option<usize>,
    pub(crate) width: usize,
}

fn line_error(name: &str, line: usize, problem: &str) -> Error {
    Error::invalid_argument(
        format!("{} line {line}: {problem}", quote(name)),
        FIX_FILE_HINT,
    )
}

fn no_rows(name: &str) -> Error {
    Error::invalid_argument(
        format!(
            "{}: no rows (the file is empty or has only a header)",
            quote(name)
        ),
        FIX_FILE_HINT,
    )
}

/// Reads the header (line 1) into column positions.
pub(crate) fn parse_header(name: &str, header: &str) -> Result<Columns> {
    if header.contains('"') {
        return Err(line_error(name, 1, "quoted fields are not supported"));
    }
    let names: Vec<String> = header
        .split(',')
        .map(|cell| cell.trim().to_ascii_lowercase())
        .collect();
    let find = |wanted: &str| -> Result<Option<usize>> {
        let mut found = None;
        for (i, cell) in names.iter().enumerate() {
            if cell == wanted {
                if found.is_some() {
                    return Err(line_error(
                        name,
                        1,
                        &format!("header names column `{wanted}` twice"),
                    ));
                }
                found = Some(i);
            }
        }
        Ok(found)
    };
    let required = |wanted: &str| -> Result<usize> {
        find(wanted)?
            .ok_or_else(|| line_error(name, 1, &format!("header has no `{wanted}` column")))
    };
    let time = match (find("date")?, find("time")?) {
        (Some(i), None) | (None, Some(i)) => i,
        (Some(_), Some(_)) => {
            return Err(line_error(
                name,
                1,
                "header names both `date` and `time`; keep one",
            ));
        }
        (None, None) => {
            return Err(line_error(name, 1, "header has no `date` or `time` column"));
        }
    };
    Ok(Columns {
        time,
        open: required("open")?,
        high: required("high")?,
        low: required("low")?,
        close: required("close")?,
        volume: find("volume")?,
        width: names.len(),
    })
}

/// True for exactly `DDDD-DD-DD` (ASCII digits); anything else is tried as RFC 3339.
fn looks_like_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 10
        && bytes.iter().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                *b == b'-'
            } else {
                b.is_ascii_digit()
            }
        })
}

/// Parses a time cell into its kind and instant; `None` when it is neither form.
pub(crate) fn parse_time(text: &str) -> Option<(TimeKind, DateTime<Utc>)> {
    if looks_like_date(text) {
        let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
        Some((TimeKind::Date, date.and_time(NaiveTime::MIN).and_utc()))
    } else {
        let stamp = DateTime::parse_from_rfc3339(text).ok()?;
        Some((TimeKind::Timestamp, stamp.with_timezone(&Utc)))
    }
}

/// Parses a price cell: finite and strictly positive.
fn parse_price(name: &str, line: usize, column: &str, text: &str) -> Result<f64> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(_) => Err(line_error(
            name,
            line,
            &format!("column `{column}` must be a finite number above 0"),
        )),
        Err(_) => Err(line_error(
            name,
            line,
            &format!("column `{column}` is not a number"),
        )),
    }
}

/// Parses a volume cell: empty is no volume, otherwise finite and not negative.
fn parse_volume(name: &str, line: usize, text: &str) -> Result<Option<f64>> {
    if text.is_empty() {
        return Ok(None);
    }
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        Ok(_) => Err(line_error(
            name,
            line,
            "column `volume` must be a finite number, 0 or above",
        )),
        Err(_) => Err(line_error(name, line, "column `volume` is not a number")),
    }
}

/// Checks that high and low bound the bar.
fn check_range(name: &str, line: usize, bar: &Bar) -> Result<()> {
    let rules = [
        (bar.high >= bar.open, "`high` is below `open`"),
        (bar.high >= bar.close, "`high` is below `close`"),
        (bar.high >= bar.low, "`high` is below `low`"),
        (bar.low <= bar.open, "`low` is above `open`"),
        (bar.low <= bar.close, "`low` is above `close`"),
    ];
    match rules.iter().find(|(ok, _)| !ok) {
        Some((_, problem)) => Err(line_error(name, line, problem)),
        None => Ok(()),
    }
}

/// Parses CSV text into bars, refusing the first malformed line; `name` is used in
/// error messages only.
///
/// # Errors
/// `invalid_argument` naming the line (the header is line 1) and the rule broken, or
/// "no rows" for an empty or header-only file. Messages never quote cell contents.
pub fn parse_csv(name: &str, text: &str) -> Result<Vec<Bar>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let lines: Vec<&str> = text
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l))
        .collect();
    let is_blank = |l: &str| l.trim().is_empty();
    // Blank lines at the end are allowed; everything up to the last non-blank line counts.
    let Some(last) = lines.iter().rposition(|l| !is_blank(l)) else {
        return Err(no_rows(name));
    };
    let lines = lines.get(..=last).unwrap_or_default();
    let Some((header, rows)) = lines.split_first() else {
        return Err(no_rows(name));
    };
    let columns = parse_header(name, header)?;
    if rows.is_empty() {
        return Err(no_rows(name));
    }

    let mut bars: Vec<Bar> = Vec::with_capacity(rows.len());
    let mut kind: Option<TimeKind> = None;
    // One buffer of cells for every row.
    let mut cells: Vec<&str> = Vec::with_capacity(columns.width);
    for (i, row) in rows.iter().enumerate() {
        let line = i + 2;
        if is_blank(row) {
            return Err(line_error(name, line, "blank line before the last row"));
        }
        if row.as_bytes().contains(&b'"') {
            return Err(line_error(name, line, "quoted fields are not supported"));
        }
        cells.clear();
        // Split at each comma byte: cheaper than a char search per short cell, and a
        // comma is one byte in UTF-8, so every cut is on a character boundary.
        let mut start = 0;
        for (i, byte) in row.bytes().enumerate() {
            if byte == b',' {
                cells.push(row[start..i].trim());
                start = i + 1;
            }
        }
        cells.push(row[start..].trim());
        if cells.len() != columns.width {
            return Err(line_error(
                name,
                line,
                &format!(
                    "has {} columns, the header has {}",
                    cells.len(),
                    columns.width
                ),
            ));
        }
        let cell = |i: usize| cells.get(i).copied().unwrap_or_default();

        let time = cell(columns.time);
        let Some((this_kind, instant)) = parse_time(time) else {
            return Err(line_error(
                name,
                line,
                "time is not an ISO date (YYYY-MM-DD) or an RFC 3339 timestamp",
            ));
        };
        match kind {
            None => kind = Some(this_kind),
            Some(k) if k != this_kind => {
                return Err(line_error(
                    name,
                    line,
                    "mixes dates and timestamps; use one form for the whole file",
                ));
            }
            Some(_) => {}
        }
        if let Some(prev) = bars.last()
            && instant <= prev.instant
        {
            return Err(line_error(
                name,
                line,
                "time is not after the previous row's; rows must be in strictly increasing time order",
            ));
        }

        let bar = Bar {
            time: time.to_owned(),
            instant,
            open: parse_price(name, line, "open", cell(columns.open))?,
            high: parse_price(name, line, "high", cell(columns.high))?,
            low: parse_price(name, line, "low", cell(columns.low))?,
            close: parse_price(name, line, "close", cell(columns.close))?,
            volume: match columns.volume {
                Some(v) => parse_volume(name, line, cell(v))?,
                None => None,
            },
        };
        check_range(name, line, &bar)?;
        bars.push(bar);
    }
    Ok(bars)
}

/// Reads a bar CSV file whose path has already passed [`resolve_path`]; the symbol is the
/// file's stem and the interval is unknown.
///
/// # Errors
/// `invalid_argument` when the file is missing, bigger than [`MAX_FILE_BYTES`], not
/// UTF-8, or malformed (see [`parse_csv`]).
pub fn read_csv(path: &Path) -> Result<BarSeries> {
    let name = file_name(path);
    let bars = parse_csv(&name, &decode(&name, read_file(path, &name)?)?)?;
    Ok(BarSeries {
        symbol: symbol_of(path, name),
        interval: None,
        bars,
    })
}

/// The name a file's errors call it by: its file name.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.to_string_lossy().into_owned())
}

/// A CSV file's symbol: its stem (else its `name`).
pub(crate) fn symbol_of(path: &Path, name: String) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or(name)
}

/// The bytes of a bar file, refused when missing, not a regular file or bigger than
/// [`MAX_FILE_BYTES`]; `name` is used in error messages only.
pub(crate) fn read_file(path: &Path, name: &str) -> Result<Vec<u8>> {
    let cannot_read = |why: &str| {
        Error::invalid_argument(
            format!("cannot read {}: {why}", quote(name)),
            "check that the file exists and is readable",
        )
    };
    let too_big = || {
        Error::invalid_argument(
            format!(
                "{} is bigger than the {} MiB limit",
                quote(name),
                MAX_FILE_BYTES / (1024 * 1024)
            ),
            "split the file or downsample it before reading",
        )
    };
    let meta = std::fs::metadata(path).map_err(|e| cannot_read(&e.kind().to_string()))?;
    if !meta.is_file() {
        return Err(cannot_read("not a regular file"));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big());
    }
    let file = File::open(path).map_err(|e| cannot_read(&e.kind().to_string()))?;
    // The file may grow between the size check and the read: never take more than the
    // limit. Sized at once (one byte more, to see the end), so no reallocation copies it.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0).saturating_add(1));
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| cannot_read(&e.kind().to_string()))?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > MAX_FILE_BYTES {
        return Err(too_big());
    }
    Ok(bytes)
}

/// A bar file's bytes as text, refused when not UTF-8.
pub(crate) fn decode(name: &str, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|_| {
        Error::invalid_argument(format!("{} is not UTF-8 text", quote(name)), FIX_FILE_HINT)
    })
}

/// Decides whether a caller may read `path`: `None` is the local user (any existing
/// file), `Some(dirs)` allows only files inside one of `dirs`, checked before any read.
///
/// # Errors
/// `invalid_argument` for an over-long or empty path, a missing path or one that is not
/// a file, or (restricted) a path outside every data dir or no data dirs configured.
pub fn resolve_path(path: &str, data_dirs: Option<&[PathBuf]>) -> Result<PathBuf> {
    if path.chars().count() > MAX_PATH_CHARS {
        return Err(Error::invalid_argument(
            format!("path is longer than {MAX_PATH_CHARS} characters"),
            "give a shorter path to the CSV file",
        ));
    }
    if path.is_empty() {
        return Err(Error::invalid_argument(
            "path is empty",
            "give the path to a CSV file",
        ));
    }
    let not_a_file = || {
        Error::invalid_argument(
            format!("{} is not a file", quote(path)),
            "give the path to a CSV file, not a directory",
        )
    };
    match data_dirs {
        None => {
            let meta = std::fs::metadata(path).map_err(|_| {
                Error::invalid_argument(
                    format!("no file at {}", quote(path)),
                    "check the path; a relative path is taken from the server's working directory",
                )
            })?;
            if !meta.is_file() {
                return Err(not_a_file());
            }
            Ok(std::fs::canonicalize(path).unwrap_or_else(|_| PathBuf::from(path)))
        }
        Some([]) => Err(Error::invalid_argument(
            format!("cannot read {}: no data_dirs are configured", quote(path)),
            "configure `data_dirs` in tradedesk.toml to allow reading files",
        )),
        Some(dirs) => {
            // A path that does not resolve gets the same answer as one outside, so the
            // answer says nothing about files outside the data dirs.
            let outside = || {
                Error::invalid_argument(
                    format!("{} is outside data_dirs or does not exist", quote(path)),
                    "put the file under one of the configured data_dirs",
                )
            };
            let real = std::fs::canonicalize(path).map_err(|_| outside())?;
            let inside = dirs
                .iter()
                .filter_map(|d| std::fs::canonicalize(d).ok())
                .any(|d| real.starts_with(&d));
            if !inside {
                return Err(outside());
            }
            let meta = std::fs::metadata(&real).map_err(|_| outside())?;
            if !meta.is_file() {
                return Err(not_a_file());
            }
            Ok(real)
        }
    }
}

/// `max_rows` is 0 (all rows) or at least 2.
///
/// # Errors
/// `invalid_argument` for 1.
pub fn check_max_rows(max_rows: usize) -> Result<()> {
    if max_rows == 1 {
        return Err(Error::invalid_argument(
            "max_rows must be 0 (all rows) or at least 2",
            "pass max_rows 0 for every row, or 2 or more to keep the first and last",
        ));
    }
    Ok(())
}

/// Indices to return and the stride. Errors when max_rows == 1.
///
/// `max_rows` 0 means all rows. Otherwise, when `total > max_rows`, the stride is
/// `ceil((total - 1) / (max_rows - 1))` and the indices are `0, stride, 2*stride, ...`
/// below `total - 1`, then `total - 1`: first and last always kept, never more than
/// `max_rows`.
///
/// # Errors
/// `invalid_argument` when `max_rows` is 1.
pub fn sample_indices(total: usize, max_rows: usize) -> Result<(Vec<usize>, usize)> {
    check_max_rows(max_rows)?;
    if max_rows == 0 || total <= max_rows {
        return Ok(((0..total).collect(), 1));
    }
    let last = total - 1;
    let stride = last.div_ceil(max_rows - 1);
    let mut indices: Vec<usize> = (0..last).step_by(stride).collect();
    indices.push(last);
    Ok((indices, stride))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::float_arithmetic)]

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    const HEADER: &str = "date,open,high,low,close,volume";

    fn msg(err: &Error) -> String {
        format!("{} | {}", err.message, err.hint)
    }

    struct OkCase {
        name: &'static str,
        text: &'static str,
        times: &'static [&'static str],
        volumes: &'static [Option<f64>],
    }

    #[test]
    fn parses_good_files() {
        let cases = [
            OkCase {
                name: "dates with volume",
                text: "date,open,high,low,close,volume\n2024-01-02,10,12,9,11,1000\n2024-01-03,11,11.5,10.5,11,0\n",
                times: &["2024-01-02", "2024-01-03"],
                volumes: &[Some(1000.0), Some(0.0)],
            },
            OkCase {
                name: "rfc3339 timestamps",
                text: "time,open,high,low,close\n2024-01-02T14:30:00Z,1,2,0.5,1.5\n2024-01-02T10:31:00-04:00,1.5,1.5,1.5,1.5",
                times: &["2024-01-02T14:30:00Z", "2024-01-02T10:31:00-04:00"],
                volumes: &[None, None],
            },
            OkCase {
                name: "volume column absent",
                text: "Date,Open,High,Low,Close\n2024-01-02,10,12,9,11\n",
                times: &["2024-01-02"],
                volumes: &[None],
            },
            OkCase {
                name: "empty volume cell is null",
                text: "date,open,high,low,close,volume\n2024-01-02,10,12,9,11,\n2024-01-03,10,12,9,11,5\n",
                times: &["2024-01-02", "2024-01-03"],
                volumes: &[None, Some(5.0)],
            },
            OkCase {
                name: "BOM, CRLF and blank trailing lines",
                text: "\u{feff}date,open,high,low,close,volume\r\n2024-01-02,10,12,9,11,7\r\n2024-01-03,10,12,9,11,8\r\n\r\n\r\n",
                times: &["2024-01-02", "2024-01-03"],
                volumes: &[Some(7.0), Some(8.0)],
            },
            OkCase {
                name: "columns in any order, case-insensitive, extras ignored",
                text: "note,CLOSE,Volume,LOW,time,High,open\nx,11,3,9,2024-01-02,12,10\ny,11,,9,2024-01-03,12,10\n",
                times: &["2024-01-02", "2024-01-03"],
                volumes: &[Some(3.0), None],
            },
        ];
        for case in cases {
            let bars = parse_csv("t.csv", case.text)
                .unwrap_or_else(|e| panic!("{}: {}", case.name, msg(&e)));
            let times: Vec<&str> = bars.iter().map(|b| b.time.as_str()).collect();
            assert_eq!(times, case.times, "{}", case.name);
            let volumes: Vec<Option<f64>> = bars.iter().map(|b| b.volume).collect();
            assert_eq!(volumes, case.volumes, "{}", case.name);
        }
    }

    #[test]
    fn values_and_instants() {
        let bars = parse_csv(
            "t.csv",
            "date,open,high,low,close\n2024-01-02,10,12.5,9,11\n",
        )
        .unwrap();
        let bar = &bars[0];
        assert_eq!(
            (bar.open, bar.high, bar.low, bar.close),
            (10.0, 12.5, 9.0, 11.0)
        );
        assert_eq!(bar.instant.to_rfc3339(), "2024-01-02T00:00:00+00:00");

        let bars = parse_csv(
            "t.csv",
            "time,open,high,low,close\n2024-01-02T10:31:00-04:00,1,1,1,1\n",
        )
        .unwrap();
        assert_eq!(bars[0].instant.to_rfc3339(), "2024-01-02T14:31:00+00:00");
        assert_eq!(bars[0].time, "2024-01-02T10:31:00-04:00");
    }

    struct BadCase {
        name: &'static str,
        text: String,
        /// The line the error must name; `None` for "no rows".
        line: Option<usize>,
        /// A piece of the rule the message must state.
        rule: &'static str,
    }

    fn bad(name: &'static str, rows: &[&str], line: usize, rule: &'static str) -> BadCase {
        let mut text = String::from(HEADER);
        for row in rows {
            text.push('\n');
            text.push_str(row);
        }
        text.push('\n');
        BadCase {
            name,
            text,
            line: Some(line),
            rule,
        }
    }

    const GOOD: &str = "2024-01-02,10,12,9,11,100";

    fn bad_cases() -> Vec<BadCase> {
        vec![
            bad(
                "open not a number",
                &[GOOD, "2024-01-03,SECRETVALUE,12,9,11,1"],
                3,
                "`open` is not a number",
            ),
            bad(
                "high not a number",
                &["2024-01-03,10,SECRETVALUE,9,11,1"],
                2,
                "`high` is not a number",
            ),
            bad(
                "low not a number",
                &[
                    GOOD,
                    GOOD.replace("01-02", "01-03").as_str(),
                    "2024-01-04,10,12,SECRETVALUE,11,1",
                ],
                4,
                "`low` is not a number",
            ),
            bad(
                "close not a number",
                &["2024-01-03,10,12,9,SECRETVALUE,1"],
                2,
                "`close` is not a number",
            ),
            bad(
                "close empty",
                &["2024-01-03,10,12,9,,1"],
                2,
                "`close` is not a number",
            ),
            bad(
                "open zero",
                &["2024-01-03,0,12,9,11,1"],
                2,
                "`open` must be a finite number above 0",
            ),
            bad(
                "low negative",
                &["2024-01-03,10,12,-9,11,1"],
                2,
                "`low` must be a finite number above 0",
            ),
            bad(
                "high infinite",
                &["2024-01-03,10,inf,9,11,1"],
                2,
                "`high` must be a finite number above 0",
            ),
            bad(
                "close NaN",
                &["2024-01-03,10,12,9,NaN,1"],
                2,
                "`close` must be a finite number above 0",
            ),
            bad(
                "high below open",
                &["2024-01-03,13,12,9,11,1"],
                2,
                "`high` is below `open`",
            ),
            bad(
                "high below close",
                &["2024-01-03,10,12,9,13,1"],
                2,
                "`high` is below `close`",
            ),
            bad(
                "low above open",
                &["2024-01-03,10,12,10.5,11,1"],
                2,
                "`low` is above `open`",
            ),
            bad(
                "low above close",
                &["2024-01-03,11,12,10.5,10,1"],
                2,
                "`low` is above `close`",
            ),
            bad(
                "volume negative",
                &[GOOD, "2024-01-03,10,12,9,11,-1"],
                3,
                "`volume` must be a finite number, 0 or above",
            ),
            bad(
                "volume infinite",
                &["2024-01-03,10,12,9,11,inf"],
                2,
                "`volume` must be a finite number, 0 or above",
            ),
            bad(
                "volume not a number",
                &["2024-01-03,10,12,9,11,SECRETVALUE"],
                2,
                "`volume` is not a number",
            ),
            bad(
                "too few columns",
                &[GOOD, "2024-01-03,10,12,9,11"],
                3,
                "has 5 columns, the header has 6",
            ),
            bad(
                "too many columns",
                &["2024-01-03,10,12,9,11,1,SECRETVALUE"],
                2,
                "has 7 columns, the header has 6",
            ),
            bad(
                "bad time",
                &["SECRETVALUE,10,12,9,11,1"],
                2,
                "not an ISO date",
            ),
            bad(
                "impossible date",
                &["2024-02-30,10,12,9,11,1"],
                2,
                "not an ISO date",
            ),
            bad("equal time", &[GOOD, GOOD], 3, "strictly increasing"),
            bad(
                "decreasing time",
                &[GOOD, "2024-01-01,10,12,9,11,1"],
                3,
                "strictly increasing",
            ),
            bad(
                "mixed kinds",
                &[GOOD, "2024-01-03T00:00:00Z,10,12,9,11,1"],
                3,
                "mixes dates and timestamps",
            ),
            bad(
                "quote in row",
                &[GOOD, "2024-01-03,\"SECRETVALUE\",12,9,11,1"],
                3,
                "quoted fields are not supported",
            ),
            bad(
                "blank line in the middle",
                &[GOOD, "", "2024-01-04,10,12,9,11,1"],
                3,
                "blank line",
            ),
            BadCase {
                name: "header missing close",
                text: "date,open,high,low,SECRETVALUE\n2024-01-02,1,1,1,1\n".into(),
                line: Some(1),
                rule: "no `close` column",
            },
            BadCase {
                name: "header missing time",
                text: "open,high,low,close\n1,1,1,1\n".into(),
                line: Some(1),
                rule: "no `date` or `time` column",
            },
            BadCase {
                name: "header with both date and time",
                text: "date,time,open,high,low,close\n2024-01-02,x,1,1,1,1\n".into(),
                line: Some(1),
                rule: "both `date` and `time`",
            },
            BadCase {
                name: "header duplicate column",
                text: "date,open,high,low,close,Open\n2024-01-02,1,1,1,1,1\n".into(),
                line: Some(1),
                rule: "`open` twice",
            },
            BadCase {
                name: "header quoted",
                text: "\"date\",open,high,low,close\n2024-01-02,1,1,1,1\n".into(),
                line: Some(1),
                rule: "quoted fields are not supported",
            },
            BadCase {
                name: "empty file",
                text: String::new(),
                line: None,
                rule: "no rows",
            },
            BadCase {
                name: "blank file",
                text: "\u{feff}\r\n\n  \n".into(),
                line: None,
                rule: "no rows",
            },
            BadCase {
                name: "header only",
                text: "date,open,high,low,close\r\n\r\n".into(),
                line: None,
                rule: "no rows",
            },
        ]
    }

    #[test]
    fn refuses_malformed_files_with_line_and_rule() {
        for case in bad_cases() {
            let err = match parse_csv("PRICES.csv", &case.text) {
                Ok(bars) => panic!("{}: accepted {} bars", case.name, bars.len()),
                Err(e) => e,
            };
            let text = msg(&err);
            assert!(text.contains("'PRICES.csv'"), "{}: {text}", case.name);
            assert!(text.contains(case.rule), "{}: {text}", case.name);
            if let Some(line) = case.line {
                assert!(
                    err.message.contains(&format!("line {line}:")),
                    "{}: {text}",
                    case.name
                );
            }
            assert!(
                !text.contains("SECRET"),
                "{}: leaks a cell: {text}",
                case.name
            );
            assert!(
                !text.contains("2024-"),
                "{}: leaks a cell: {text}",
                case.name
            );
        }
    }

    #[test]
    fn crlf_line_numbers_match_lf() {
        let text = "date,open,high,low,close\r\n2024-01-02,1,1,1,1\r\n2024-01-03,1,0.5,1,1\r\n";
        let err = parse_csv("x.csv", text).unwrap_err();
        assert!(err.message.contains("line 3:"), "{}", err.message);
    }

    // -- sample_indices --------------------------------------------------------------

    struct SampleCase {
        total: usize,
        max_rows: usize,
        indices: Vec<usize>,
        stride: usize,
    }

    #[test]
    fn sample_indices_table() {
        let all = |n: usize| (0..n).collect::<Vec<_>>();
        let cases = [
            SampleCase {
                total: 0,
                max_rows: 0,
                indices: vec![],
                stride: 1,
            },
            SampleCase {
                total: 0,
                max_rows: 2,
                indices: vec![],
                stride: 1,
            },
            SampleCase {
                total: 1,
                max_rows: 0,
                indices: vec![0],
                stride: 1,
            },
            SampleCase {
                total: 1,
                max_rows: 2,
                indices: vec![0],
                stride: 1,
            },
            SampleCase {
                total: 2,
                max_rows: 2,
                indices: vec![0, 1],
                stride: 1,
            },
            SampleCase {
                total: 2,
                max_rows: 5,
                indices: vec![0, 1],
                stride: 1,
            },
            SampleCase {
                total: 10,
                max_rows: 0,
                indices: all(10),
                stride: 1,
            },
            SampleCase {
                total: 10,
                max_rows: 10,
                indices: all(10),
                stride: 1,
            },
            SampleCase {
                total: 10,
                max_rows: 50,
                indices: all(10),
                stride: 1,
            },
            SampleCase {
                total: 10,
                max_rows: 2,
                indices: vec![0, 9],
                stride: 9,
            },
            SampleCase {
                total: 10,
                max_rows: 3,
                indices: vec![0, 5, 9],
                stride: 5,
            },
            SampleCase {
                total: 10,
                max_rows: 4,
                indices: vec![0, 3, 6, 9],
                stride: 3,
            },
            SampleCase {
                total: 10,
                max_rows: 5,
                indices: vec![0, 3, 6, 9],
                stride: 3,
            },
            SampleCase {
                total: 10,
                max_rows: 9,
                indices: vec![0, 2, 4, 6, 8, 9],
                stride: 2,
            },
        ];
        for c in cases {
            let got = sample_indices(c.total, c.max_rows).unwrap();
            assert_eq!(
                got,
                (c.indices, c.stride),
                "total {} max_rows {}",
                c.total,
                c.max_rows
            );
        }
    }

    #[test]
    fn sample_indices_refuses_one() {
        for total in [0, 1, 10] {
            let err = sample_indices(total, 1).unwrap_err();
            assert!(err.message.contains("max_rows"), "{}", err.message);
        }
    }

    #[test]
    fn sample_indices_contract() {
        for total in 1..300usize {
            for max_rows in 2..50usize {
                let (idx, stride) = sample_indices(total, max_rows).unwrap();
                assert_eq!(idx.first(), Some(&0), "{total}/{max_rows}");
                assert_eq!(idx.last(), Some(&(total - 1)), "{total}/{max_rows}");
                assert!(idx.len() <= max_rows, "{total}/{max_rows}");
                assert!(idx.windows(2).all(|w| w[0] < w[1]), "{total}/{max_rows}");
                if total <= max_rows {
                    assert_eq!(stride, 1);
                    assert_eq!(idx.len(), total);
                } else {
                    let expected = (total - 1).div_ceil(max_rows - 1);
                    assert_eq!(stride, expected, "{total}/{max_rows}");
                    let body: Vec<usize> = (0..total - 1).step_by(stride).collect();
                    assert_eq!(&idx[..idx.len() - 1], body.as_slice(), "{total}/{max_rows}");
                }
            }
        }
    }

    // -- files and paths -------------------------------------------------------------

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> Self {
            static COUNTER: AtomicUsize = AtomicUsize::new(0);
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir()
                .join(format!("tradedesk-bars-{}-{n}-{tag}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Self(dir)
        }

        fn write(&self, name: &str, text: &str) -> PathBuf {
            let path = self.0.join(name);
            std::fs::write(&path, text).unwrap();
            path
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn s(p: &Path) -> &str {
        p.to_str().unwrap()
    }

    #[test]
    fn read_csv_names_series_by_stem() {
        let dir = TempDir::new("read");
        let path = dir.write("AAPL.csv", "date,open,high,low,close\n2024-01-02,1,2,1,2\n");
        let series = read_csv(&path).unwrap();
        assert_eq!(series.symbol, "AAPL");
        assert_eq!(series.interval, None);
        assert_eq!(series.bars.len(), 1);

        let empty = dir.write("EMPTY.csv", "");
        let err = read_csv(&empty).unwrap_err();
        assert!(err.message.contains("'EMPTY.csv'") && err.message.contains("no rows"));

        let missing = read_csv(&dir.0.join("nope.csv")).unwrap_err();
        assert!(
            missing.message.contains("cannot read"),
            "{}",
            missing.message
        );

        let binary = dir.0.join("bin.csv");
        std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
        assert!(read_csv(&binary).unwrap_err().message.contains("not UTF-8"));
    }

    #[test]
    fn read_csv_refuses_big_files() {
        let dir = TempDir::new("big");
        let path = dir.0.join("big.csv");
        let file = File::create(&path).unwrap();
        // Sparse where supported: the size is what matters, not the content.
        file.set_len(MAX_FILE_BYTES + 1).unwrap();
        drop(file);
        let err = read_csv(&path).unwrap_err();
        assert!(err.message.contains("256 MiB"), "{}", err.message);
    }

    #[test]
    fn resolve_path_unrestricted() {
        let dir = TempDir::new("free");
        let path = dir.write("A.csv", "x");
        assert_eq!(
            resolve_path(s(&path), None).unwrap(),
            std::fs::canonicalize(&path).unwrap()
        );
        let err = resolve_path(s(&dir.0.join("missing.csv")), None).unwrap_err();
        assert!(err.message.contains("no file at"), "{}", err.message);
        let err = resolve_path(s(&dir.0), None).unwrap_err();
        assert!(err.message.contains("not a file"), "{}", err.message);
        let err = resolve_path("", None).unwrap_err();
        assert!(err.message.contains("empty"), "{}", err.message);
        let long = "a".repeat(MAX_PATH_CHARS + 1);
        let err = resolve_path(&long, None).unwrap_err();
        assert!(err.message.contains("longer than 4096"), "{}", err.message);
        assert!(!err.message.contains(&long));
    }

    #[test]
    fn resolve_path_restricted() {
        let data = TempDir::new("data");
        let other = TempDir::new("other");
        let inside = data.write("IN.csv", "x");
        std::fs::create_dir(data.0.join("sub")).unwrap();
        let nested = data.write("sub/NESTED.csv", "x");
        let outside = other.write("OUT.csv", "x");
        let dirs = vec![other.0.join("not-there"), data.0.clone()];

        assert_eq!(
            resolve_path(s(&inside), Some(&dirs)).unwrap(),
            std::fs::canonicalize(&inside).unwrap()
        );
        assert_eq!(
            resolve_path(s(&nested), Some(&dirs)).unwrap(),
            std::fs::canonicalize(&nested).unwrap()
        );

        let refused = [
            s(&outside).to_owned(),
            // `..` that climbs out of the data dir.
            format!(
                "{}/../{}",
                s(&data.0),
                other
                    .0
                    .join("OUT.csv")
                    .strip_prefix(std::env::temp_dir())
                    .map(|p| p.to_string_lossy().into_owned())
                    .unwrap()
            ),
            // A missing file outside gets the same answer as an existing one.
            s(&other.0.join("missing.csv")).to_owned(),
        ];
        for path in &refused {
            let err = resolve_path(path, Some(&dirs)).unwrap_err();
            assert!(
                err.message.contains("outside data_dirs"),
                "{path}: {}",
                err.message
            );
            assert_eq!(
                err.hint,
                "put the file under one of the configured data_dirs"
            );
        }

        let err = resolve_path(s(&data.0), Some(&dirs)).unwrap_err();
        assert!(err.message.contains("not a file"), "{}", err.message);

        let err = resolve_path(s(&inside), Some(&[])).unwrap_err();
        assert!(err.hint.contains("data_dirs") && err.hint.contains("tradedesk.toml"));
    }

    #[cfg(unix)]
    #[test]
    fn resolve_path_refuses_symlink_out_of_data_dir() {
        let data = TempDir::new("link-data");
        let other = TempDir::new("link-other");
        let target = other.write("SECRET.csv", "x");
        let link = data.0.join("LINK.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let dirs = vec![data.0.clone()];
        let err = resolve_path(s(&link), Some(&dirs)).unwrap_err();
        assert!(err.message.contains("outside data_dirs"), "{}", err.message);
    }
}
