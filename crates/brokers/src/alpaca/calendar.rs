//! Alpaca's market clock and calendar for the US stock market (trading host):
//! `GET /v2/clock` (`timestamp`, `is_open`, `next_open`, `next_close`, each with New York's
//! offset) and `GET /v2/calendar?start=&end=` (one row per trading day: `date`, `open` and
//! `close` as `HH:MM`, `session_open` and `session_close` as `HHMM`, New York time). A
//! weekday missing from the calendar is a day the market is closed; an early close is a
//! row with an earlier `close`. Alpaca's calendar runs to the end of 2029.

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde_json::Value;

use super::{AlpacaBroker, text, time};
use crate::BrokerError;
use crate::calendar::{VenueCalendar, VenueClock, VenueDay};

/// The zone of Alpaca's calendar times.
const US_MARKET_ZONE: &str = "America/New_York";

/// `date` at a New York wall-clock time written `HH:MM` or `HHMM`.
fn at(date: NaiveDate, hhmm: &str) -> Option<DateTime<Utc>> {
    let digits: String = hhmm.chars().filter(char::is_ascii_digit).collect();
    if digits.len() != 4 {
        return None;
    }
    let clock = NaiveTime::parse_from_str(&digits, "%H%M").ok()?;
    crate::zones::resolve(
        NaiveDateTime::new(date, clock),
        crate::zones::named(US_MARKET_ZONE)?,
    )
}

fn day(row: &Value) -> Option<VenueDay> {
    let date = NaiveDate::parse_from_str(text(row, "date")?, "%Y-%m-%d").ok()?;
    let open = at(date, text(row, "open")?)?;
    let close = at(date, text(row, "close")?)?;
    let extended = match (text(row, "session_open"), text(row, "session_close")) {
        (Some(o), Some(c)) => at(date, o).zip(at(date, c)),
        _ => None,
    };
    Some(VenueDay {
        date,
        open,
        close,
        extended,
    })
}

impl AlpacaBroker {
    pub(super) async fn read_calendar(
        &self,
        from: NaiveDate,
        to: NaiveDate,
    ) -> Result<VenueCalendar, BrokerError> {
        let clock = self.get_ok(self.trading("/v2/clock"), &[], false).await?;
        let field = |name: &str| {
            time(&clock, name)
                .ok_or_else(|| self.unavailable(format!("the clock answer has no {name}")))
        };
        let clock = VenueClock {
            at: field("timestamp")?,
            is_open: clock
                .get("is_open")
                .and_then(Value::as_bool)
                .ok_or_else(|| self.unavailable("the clock answer has no is_open".to_owned()))?,
            next_open: field("next_open")?,
            next_close: field("next_close")?,
        };
        let rows = self
            .get_ok(
                self.trading("/v2/calendar"),
                &[("start", from.to_string()), ("end", to.to_string())],
                true,
            )
            .await?;
        let mut days = Vec::new();
        let mut notes = Vec::new();
        let mut skipped = 0usize;
        for row in rows.as_array().into_iter().flatten() {
            match day(row) {
                Some(d) if (from..=to).contains(&d.date) => days.push(d),
                Some(_) => {}
                None => skipped += 1,
            }
        }
        days.sort_by_key(|d| d.date);
        days.dedup_by_key(|d| d.date);
        if skipped > 0 {
            notes.push(format!(
                "{}: {skipped} day(s) of Alpaca's calendar left out: no date, open or close",
                self.config.account
            ));
        }
        // Days past the last one given are not known: Alpaca's calendar ends (2029).
        let known_until = days
            .last()
            .map_or_else(|| from.pred_opt().unwrap_or(from), |d| d.date);
        Ok(VenueCalendar {
            source: format!(
                "Alpaca ({}): GET /v2/clock and GET /v2/calendar",
                self.config.account
            ),
            time_zone: US_MARKET_ZONE.to_owned(),
            clock,
            days,
            known_until,
            notes,
        })
    }
}
