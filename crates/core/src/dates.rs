//! Strict `YYYY-MM-DD` dates and inclusive date ranges. Relative phrases ("last
//! quarter", "today") are refused: the model resolves them, we never guess.

use chrono::NaiveDate;

use crate::error::{Error, ErrorCode, Result, quote};

const ABSOLUTE_HINT: &str = "dates must be absolute YYYY-MM-DD (e.g. 2026-01-31); resolve relative \
     phrases such as 'last quarter' or 'this year' to calendar dates yourself";

/// Parses a calendar date written exactly as `YYYY-MM-DD`.
///
/// # Errors
/// `invalid_date` naming `field` when the text is not such a date.
pub fn parse_date(field: &str, text: &str) -> Result<NaiveDate> {
    let b = text.as_bytes();
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    let parsed = if shaped {
        NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()
    } else {
        None
    };
    parsed.ok_or_else(|| {
        let what = if shaped {
            "is not a calendar date"
        } else {
            "is not a YYYY-MM-DD date"
        };
        Error::new(
            ErrorCode::InvalidDate,
            format!("{field}: {} {what}", quote(text)),
            ABSOLUTE_HINT,
        )
    })
}

/// An inclusive range of calendar dates, `start <= end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DateRange {
    pub start: NaiveDate,
    pub end: NaiveDate,
}

impl DateRange {
    /// # Errors
    /// `invalid_date_range` when `end` is before `start`.
    pub fn new_checked(start: NaiveDate, end: NaiveDate) -> Result<Self> {
        if end < start {
            return Err(Error::new(
                ErrorCode::InvalidDateRange,
                format!("end {end} is before start {start}"),
                "give start <= end; both ends are inclusive (a single day is start = end)",
            ));
        }
        Ok(Self { start, end })
    }

    /// Parses both ends strictly.
    ///
    /// # Errors
    /// `invalid_date` for a malformed end, `invalid_date_range` for a reversed range.
    pub fn parse(start: &str, end: &str) -> Result<Self> {
        Self::new_checked(parse_date("start", start)?, parse_date("end", end)?)
    }

    pub fn contains(&self, date: NaiveDate) -> bool {
        self.start <= date && date <= self.end
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct TestCase {
        text: &'static str,
        ok: bool,
    }

    #[test]
    fn only_strict_calendar_dates_parse() {
        let cases = [
            TestCase {
                text: "2026-01-31",
                ok: true,
            },
            TestCase {
                text: "2024-02-29",
                ok: true,
            }, // TC2: leap day
            TestCase {
                text: "2025-02-29",
                ok: false,
            }, // TC3: not a leap year
            TestCase {
                text: "2026-13-01",
                ok: false,
            },
            TestCase {
                text: "2026-1-31",
                ok: false,
            },
            TestCase {
                text: "2026/01/31",
                ok: false,
            },
            TestCase {
                text: " 2026-01-31",
                ok: false,
            },
            TestCase {
                text: "2026-01-31T00:00:00Z",
                ok: false,
            },
            TestCase {
                text: "last quarter",
                ok: false,
            },
            TestCase {
                text: "today",
                ok: false,
            },
            TestCase {
                text: "+2026-01-3",
                ok: false,
            },
            TestCase {
                text: "",
                ok: false,
            },
        ];
        for case in cases {
            let got = parse_date("start", case.text);
            assert_eq!(got.is_ok(), case.ok, "{:?}", case.text);
            if let Err(e) = got {
                assert_eq!(e.code, ErrorCode::InvalidDate);
                assert!(e.message.starts_with("start:"), "{}", e.message);
                assert!(e.hint.contains("YYYY-MM-DD"));
            }
        }
    }

    #[test]
    fn ranges_are_inclusive_and_ordered() {
        let r = DateRange::parse("2026-01-01", "2026-01-01").unwrap();
        assert!(r.contains(r.start));
        let r = DateRange::parse("2026-01-01", "2026-03-31").unwrap();
        assert!(r.contains(NaiveDate::from_ymd_opt(2026, 3, 31).unwrap()));
        assert!(!r.contains(NaiveDate::from_ymd_opt(2026, 4, 1).unwrap()));
        let e = DateRange::parse("2026-02-01", "2026-01-01").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidDateRange);
        let e = DateRange::parse("2026-02-01", "last week").unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidDate);
        assert!(e.message.starts_with("end:"));
    }
}
