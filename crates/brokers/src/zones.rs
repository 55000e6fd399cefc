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
