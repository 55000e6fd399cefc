//! Exchange time zones: brokers write wall-clock times in an exchange's or a gateway's
//! zone, and a fill's trade date is the exchange's calendar date.

use chrono::{DateTime, Datelike, FixedOffset, NaiveDateTime, Offset, Timelike, Utc};
use time_tz::{OffsetDateTimeExt, PrimitiveDateTimeExt};

pub(crate) use time_tz::Tz;

/// A zone by IANA name (or a backward link such as `US/Eastern`).
pub(crate) fn named(name: &str) -> Option<&'static Tz> {
    time_tz::timezones::get_by_name(name)
}

/// The zone of an exchange's sessions, by its trading currency.
pub(crate) fn of_currency(currency: &str) -> Option<&'static Tz> {
    named(match currency {
        "USD" => "America/New_York",
        "CAD" => "America/Toronto",
        "MYR" => "Asia/Kuala_Lumpur",
        "HKD" => "Asia/Hong_Kong",
        "CNH" | "CNY" => "Asia/Shanghai",
        "JPY" => "Asia/Tokyo",
        "SGD" => "Asia/Singapore",
        "AUD" => "Australia/Sydney",
        "EUR" => "Europe/Berlin",
        "GBP" => "Europe/London",
        "CHF" => "Europe/Zurich",
        _ => return None,
    })
}

/// The instant a wall-clock reading in `zone` names; in a repeated hour, the earlier.
pub(crate) fn resolve(local: NaiveDateTime, zone: &Tz) -> Option<DateTime<Utc>> {
    let date = time::Date::from_calendar_date(
        local.year(),
        time::Month::try_from(u8::try_from(local.month()).ok()?).ok()?,
        u8::try_from(local.day()).ok()?,
    )
    .ok()?;
    let clock = time::Time::from_hms(
        u8::try_from(local.hour()).ok()?,
        u8::try_from(local.minute()).ok()?,
        u8::try_from(local.second()).ok()?,
    )
    .ok()?;
    let instant = match time::PrimitiveDateTime::new(date, clock).assume_timezone(zone) {
        time_tz::OffsetResult::Some(t) | time_tz::OffsetResult::Ambiguous(t, _) => t,
        time_tz::OffsetResult::None => return None,
    };
    DateTime::from_timestamp(instant.unix_timestamp(), local.nanosecond())
}

/// `instant` in `zone`'s offset at that moment (UTC where no zone is known).
pub(crate) fn at(instant: DateTime<Utc>, zone: Option<&Tz>) -> DateTime<FixedOffset> {
    let offset = zone
        .and_then(|tz| {
            time::OffsetDateTime::from_unix_timestamp(instant.timestamp())
                .ok()
                .map(|t| t.to_timezone(tz).offset().whole_seconds())
        })
        .and_then(FixedOffset::east_opt)
        .unwrap_or_else(|| Utc.fix());
    instant.with_timezone(&offset)
}

/// What an IANA zone name means for a reader that takes one fixed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SteadyOffset {
    /// The zone has kept this offset from 1990 to 2037 (no daylight saving).
    Fixed(FixedOffset),
    /// The zone's offset changes (daylight saving, or a change of law).
    Changes,
    /// No zone of that name.
    Unknown,
}

/// Whether `name` (an IANA zone such as `Asia/Kuala_Lumpur`) keeps one offset, sampled
/// twice a month from 1990 through 2037.
pub fn steady_offset(name: &str) -> SteadyOffset {
    let Some(zone) = named(name) else {
        return SteadyOffset::Unknown;
    };
    let mut seen: Option<i32> = None;
    for year in 1990..=2037 {
        for month in 1..=12_u8 {
            for day in [1_u8, 15] {
                let Ok(month) = time::Month::try_from(month) else {
                    return SteadyOffset::Changes;
                };
                let Ok(date) = time::Date::from_calendar_date(year, month, day) else {
                    return SteadyOffset::Changes;
                };
                let offset = date
                    .midnight()
                    .assume_utc()
                    .to_timezone(zone)
                    .offset()
                    .whole_seconds();
                match seen {
                    Some(s) if s != offset => return SteadyOffset::Changes,
                    _ => seen = Some(offset),
                }
            }
        }
    }
    seen.and_then(FixedOffset::east_opt)
        .map_or(SteadyOffset::Changes, SteadyOffset::Fixed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn steady_zones_have_one_offset_and_others_say_they_change() {
        assert_eq!(
            steady_offset("Asia/Kuala_Lumpur"),
            SteadyOffset::Fixed(FixedOffset::east_opt(8 * 3600).unwrap())
        );
        assert_eq!(
            steady_offset("Asia/Tokyo"),
            SteadyOffset::Fixed(FixedOffset::east_opt(9 * 3600).unwrap())
        );
        assert_eq!(steady_offset("Europe/London"), SteadyOffset::Changes);
        assert_eq!(steady_offset("Nowhere/Land"), SteadyOffset::Unknown);
    }
}
