//! `get_market_hours` (docs/tools.md, "get_market_hours"): whether a market is open, its
//! regular session in the exchange's time zone and in UTC, the next open and close, and
//! the holidays and half days ahead; `source` says where the answer came from.
//!
//! * **The broker's own calendar first:** for NYSE and NASDAQ, when an Alpaca account is
//!   configured, Alpaca's clock and calendar answer (a weekday missing from its calendar
//!   is a holiday, a day with an earlier close a half day); if Alpaca does not answer, the
//!   exchange calendar does, with a note.
//! * **Exchange calendars:** sessions and holiday tables come from the `exchange-hours`
//!   crate, never from a list written here; where it has no holiday table for a market
//!   (Bursa Malaysia) or its table ends, the answer says the holidays are not known rather
//!   than showing an ordinary day as certain.
//! * **FX (MetaTrader):** DWXConnect's EA writes no symbol sessions, so FX is answered by
//!   the market's convention, 24 hours five days a week, Sunday 17:00 to Friday 17:00 New
//!   York time, shown in the terminal's server time zone, and said not to come from the
//!   broker.
//! * Crypto and perps trade around the clock.

use std::sync::Arc;

use chrono::{DateTime, Datelike, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use exchange_hours::{DateCoverage, Exchange, ExchangeCalendar, HolidayKind, SessionKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{Error, ErrorCode, Result};

use tradedesk_brokers::Broker;
use tradedesk_brokers::calendar::{Market as Venue, VenueCalendar};

use crate::context::ToolContext;
use crate::marketdata::bounded;
use crate::tool::{Call, Meta, Tool, notes_suffix};

/// How far ahead holidays and half days are listed.
pub const HOLIDAYS_AHEAD_DAYS: i64 = 60;

/// The markets `market` takes, for hints.
pub const MARKETS: &str =
    "NYSE, NASDAQ, HKEX, BURSA (or XNYS, XNAS, XHKG, XKLS), FX, CRYPTO, HYPERLIQUID, PERP";

/// Where an answer came from, for `source`.
pub const EXCHANGE_CALENDAR: &str = "exchange calendar (exchange-hours crate)";
pub const AROUND_THE_CLOCK: &str = "around the clock (no calendar needed)";
pub const FX_CONVENTION: &str =
    "FX market convention, not from the broker (DWXConnect's EA writes no symbol sessions)";

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MarketHoursArgs {
    /// NYSE, NASDAQ, HKEX, BURSA, FX, CRYPTO, HYPERLIQUID or PERP; or give account.
    pub market: Option<String>,
    /// The markets this account trades (a Hyperliquid, Alpaca, Moomoo, MetaTrader or sim
    /// account).
    pub account: Option<String>,
    /// YYYY-MM-DD: that day's session (default: now, at the server's clock).
    pub date: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Instant {
    /// In the exchange's time zone, with its offset.
    pub local: String,
    pub utc: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Session {
    pub open: Instant,
    pub close: Instant,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct HolidayRow {
    pub date: String,
    /// closed, early_close, late_open or late_open_and_early_close.
    pub kind: &'static str,
    /// The day's sessions, for a half day.
    pub sessions: Vec<Session>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MarketHours {
    pub market: String,
    /// The broker's own calendar (Alpaca), the exchange calendar, or a convention.
    pub source: String,
    /// IANA time zone.
    pub time_zone: String,
    /// True for markets that trade around the clock.
    pub always_open: bool,
    /// Open now (regular session), at `as_of`.
    pub open_now: bool,
    /// The regular sessions of `date`, or of today in the exchange's time zone.
    pub sessions: Vec<Session>,
    /// The next regular open after `as_of` (after `date`'s sessions when given).
    pub next_open: Option<Instant>,
    /// The next regular close, as next_open.
    pub next_close: Option<Instant>,
    /// `date`'s extended session, where the broker gives it.
    pub extended: Option<Session>,
    /// Closed days and half days in the next 60 days (from `date`); empty when unknown.
    pub holidays_ahead: Vec<HolidayRow>,
    /// Whether the holidays of that span are known; false: a holiday shows as an
    /// ordinary day.
    pub holidays_known: bool,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MarketHoursResult {
    /// RFC 3339, UTC: the instant answered for.
    pub as_of: String,
    pub date: Option<String>,
    pub markets: Vec<MarketHours>,
}

/// How a market's hours are answered.
#[derive(Debug, Clone, Copy)]
enum Market {
    Exchange(&'static str, Exchange),
    AroundTheClock(&'static str),
    Fx,
}

impl Market {
    fn of(venue: Venue) -> Self {
        match venue {
            Venue::Nyse => Self::Exchange("NYSE", Exchange::Nyse),
            Venue::Nasdaq => Self::Exchange("NASDAQ", Exchange::Nasdaq),
            Venue::Hkex => Self::Exchange("HKEX", Exchange::Hkex),
            Venue::Bursa => Self::Exchange("BURSA", Exchange::BursaMalaysia),
            Venue::Fx => Self::Fx,
            Venue::Crypto => Self::AroundTheClock("CRYPTO"),
            Venue::Hyperliquid => Self::AroundTheClock("HYPERLIQUID"),
            Venue::Perp => Self::AroundTheClock("PERP"),
        }
    }
}

fn parse_market(text: &str) -> Option<Venue> {
    Some(match text.trim().to_ascii_uppercase().as_str() {
        "NYSE" | "XNYS" | "US" => Venue::Nyse,
        "NASDAQ" | "XNAS" => Venue::Nasdaq,
        "HKEX" | "XHKG" | "SEHK" | "HK" => Venue::Hkex,
        "BURSA" | "XKLS" | "MYX" => Venue::Bursa,
        "FX" | "FOREX" => Venue::Fx,
        "CRYPTO" => Venue::Crypto,
        "HYPERLIQUID" => Venue::Hyperliquid,
        "PERP" | "PERPS" => Venue::Perp,
        _ => return None,
    })
}

fn instant(t: DateTime<Utc>, tz: Tz) -> Instant {
    Instant {
        local: t
            .with_timezone(&tz)
            .to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        utc: t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    }
}

fn session(w: (DateTime<Utc>, DateTime<Utc>), tz: Tz) -> Session {
    Session {
        open: instant(w.0, tz),
        close: instant(w.1, tz),
    }
}

fn calendar_error(market: &str, e: &impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::NotSupported,
        format!("{market}'s hours are not known for that date: {e}"),
        "ask for a date from 2010 on; the exchange calendar (exchange-hours) refuses dates it has no sourced hours for",
    )
}

fn midnight(tz: Tz, date: NaiveDate) -> DateTime<Utc> {
    let naive = date.and_hms_opt(0, 0, 0).unwrap_or_default();
    tz.from_local_datetime(&naive)
        .earliest()
        .map_or_else(|| naive.and_utc(), |t| t.with_timezone(&Utc))
}

/// Every regular session opening on the local `date` (Bursa's and HKEX's days have two).
fn sessions_on(
    cal: ExchangeCalendar,
    tz: Tz,
    date: NaiveDate,
    market: &str,
) -> Result<Vec<(DateTime<Utc>, DateTime<Utc>)>> {
    let mut out = Vec::new();
    let mut after = midnight(tz, date) - Duration::seconds(1);
    // A day has at most a few sessions: bounded so no loop can run away.
    for _ in 0..8 {
        let next = cal
            .next_session_after_with(after, SessionKind::Regular)
            .map_err(|e| calendar_error(market, &e))?;
        match next {
            Some((open, close)) if open.with_timezone(&tz).date_naive() == date => {
                out.push((open, close));
                after = close;
            }
            _ => break,
        }
    }
    Ok(out)
}

fn exchange_hours(
    name: &str,
    exchange: Exchange,
    now: DateTime<Utc>,
    date: Option<NaiveDate>,
) -> Result<MarketHours> {
    let strict = ExchangeCalendar::new(exchange);
    let cal = strict.with_last_known_week();
    let tz = cal.tz();
    let mut notes = Vec::new();
    let open_now = cal
        .is_open_with(now, SessionKind::Regular)
        .map_err(|e| calendar_error(name, &e))?;
    let day = date.unwrap_or_else(|| now.with_timezone(&tz).date_naive());
    let sessions = sessions_on(cal, tz, day, name)?;
    if sessions.is_empty() {
        notes.push(format!("{name} has no regular session on {day}"));
    } else if sessions.len() == 1 && matches!(exchange, Exchange::Hkex) {
        // Checked on exchange-hours 1.3: its HKEX day is one session, 09:30 to 16:00.
        notes.push(format!(
            "{name}'s day is given as one session: the calendar tradedesk uses (exchange-hours) does not model the securities market's midday break (12:00 to 13:00 Hong Kong time), when open_now still reads true"
        ));
    }
    // The next open after now, or after the asked day.
    let after = match date {
        Some(d) => sessions
            .last()
            .map_or_else(|| midnight(tz, d + Duration::days(1)), |(_, close)| *close),
        None => now,
    };
    let mut next_open = None;
    // The session open now is the day's (the calendar's next session starts after it).
    let mut next_close = sessions
        .iter()
        .find(|(open, close)| *open <= after && *close > after)
        .map(|(_, close)| instant(*close, tz));
    let mut from = after;
    for _ in 0..8 {
        let Some((open, close)) = cal
            .next_session_after_with(from, SessionKind::Regular)
            .map_err(|e| calendar_error(name, &e))?
        else {
            break;
        };
        if next_close.is_none() && close > after {
            next_close = Some(instant(close, tz));
        }
        if open > after {
            next_open = Some(instant(open, tz));
            break;
        }
        from = close;
    }
    // Holidays ahead, and whether the calendar knows them for the whole span.
    let coverage = strict.coverage();
    let mut holidays = Vec::new();
    let mut known = true;
    for offset in 0..HOLIDAYS_AHEAD_DAYS {
        let d = day + Duration::days(offset);
        if !matches!(coverage.coverage_on(d), DateCoverage::Covered) {
            known = false;
            continue;
        }
        let Some(h) = strict.holiday_on(d) else {
            continue;
        };
        let kind = match h.kind() {
            HolidayKind::Closed => "closed",
            HolidayKind::EarlyClose { .. } => "early_close",
            HolidayKind::LateOpen { .. } => "late_open",
            _ => "late_open_and_early_close",
        };
        let s = if kind == "closed" {
            Vec::new()
        } else {
            sessions_on(cal, tz, d, name)?
                .into_iter()
                .map(|w| session(w, tz))
                .collect()
        };
        holidays.push(HolidayRow {
            date: d.to_string(),
            kind,
            sessions: s,
        });
    }
    let last = day + Duration::days(HOLIDAYS_AHEAD_DAYS - 1);
    if !known {
        notes.push(match strict.holiday_coverage() {
            None => format!(
                "{name}'s holidays are not known: the exchange calendar tradedesk uses (exchange-hours) has {name}'s weekly hours but no holiday table, so a holiday in {day}..{last} shows as an ordinary day; check the exchange's own calendar"
            ),
            Some(c) => format!(
                "{name}'s holidays are known only up to {}: from then to {last} a holiday shows as an ordinary day",
                c.last()
            ),
        });
    }
    Ok(MarketHours {
        market: name.to_owned(),
        source: EXCHANGE_CALENDAR.to_owned(),
        time_zone: tz.name().to_owned(),
        always_open: false,
        open_now,
        sessions: sessions.into_iter().map(|w| session(w, tz)).collect(),
        next_open,
        next_close,
        extended: None,
        holidays_ahead: holidays,
        holidays_known: known,
        notes,
    })
}

fn around_the_clock(name: &str) -> MarketHours {
    MarketHours {
        market: name.to_owned(),
        source: AROUND_THE_CLOCK.to_owned(),
        time_zone: "UTC".to_owned(),
        always_open: true,
        open_now: true,
        sessions: Vec::new(),
        next_open: None,
        next_close: None,
        extended: None,
        holidays_ahead: Vec::new(),
        holidays_known: true,
        notes: vec![format!(
            "{name} trades around the clock, every day of the year: it has no session, close or holiday"
        )],
    }
}

/// How `date`'s local time of day at `t` reads, for telling half days from ordinary ones.
fn local_time(t: DateTime<Utc>, tz: Tz) -> chrono::NaiveTime {
    t.with_timezone(&tz).time()
}

/// The most common value, for the ordinary open and close of a calendar's days.
fn usual<T: Ord + Copy>(values: impl Iterator<Item = T>) -> Option<T> {
    let mut counts = std::collections::BTreeMap::new();
    for v in values {
        *counts.entry(v).or_insert(0usize) += 1;
    }
    counts.into_iter().max_by_key(|(_, n)| *n).map(|(v, _)| v)
}

/// A US market's hours from the broker's own clock and calendar (Alpaca's): open now and
/// the next open and close from its clock (after `date`'s session from its calendar when
/// given); a weekday of the span missing from the calendar is closed, a day opening later
/// or closing earlier than usual a half day; past the calendar's end, holidays are not
/// known.
fn broker_hours(
    name: &str,
    cal: &VenueCalendar,
    now: DateTime<Utc>,
    date: Option<NaiveDate>,
) -> MarketHours {
    let tz: Tz = cal
        .time_zone
        .parse()
        .unwrap_or(chrono_tz::America::New_York);
    let mut notes = cal.notes.clone();
    let day = date.unwrap_or_else(|| now.with_timezone(&tz).date_naive());
    let on = |d: NaiveDate| cal.days.iter().find(|v| v.date == d);
    let today = on(day);
    let sessions: Vec<Session> = today
        .map(|v| session((v.open, v.close), tz))
        .into_iter()
        .collect();
    if sessions.is_empty() {
        notes.push(format!("{name} has no regular session on {day}"));
    }
    let (next_open, next_close) = match date {
        None => (
            Some(instant(cal.clock.next_open, tz)),
            Some(instant(cal.clock.next_close, tz)),
        ),
        Some(d) => {
            let next = cal.days.iter().find(|v| v.date > d);
            (
                next.map(|v| instant(v.open, tz)),
                today.or(next).map(|v| instant(v.close, tz)),
            )
        }
    };
    let opens = usual(cal.days.iter().map(|v| local_time(v.open, tz)));
    let closes = usual(cal.days.iter().map(|v| local_time(v.close, tz)));
    let last = day + Duration::days(HOLIDAYS_AHEAD_DAYS - 1);
    let mut holidays = Vec::new();
    for offset in 0..HOLIDAYS_AHEAD_DAYS {
        let d = day + Duration::days(offset);
        if d > cal.known_until {
            break;
        }
        let kind = match on(d) {
            None if matches!(d.weekday(), chrono::Weekday::Sat | chrono::Weekday::Sun) => {
                continue;
            }
            None => "closed",
            Some(v) => {
                let late = opens.is_some_and(|o| local_time(v.open, tz) > o);
                let early = closes.is_some_and(|c| local_time(v.close, tz) < c);
                match (late, early) {
                    (false, false) => continue,
                    (false, true) => "early_close",
                    (true, false) => "late_open",
                    (true, true) => "late_open_and_early_close",
                }
            }
        };
        holidays.push(HolidayRow {
            date: d.to_string(),
            kind,
            sessions: on(d)
                .map(|v| session((v.open, v.close), tz))
                .into_iter()
                .collect(),
        });
    }
    let known = cal.known_until >= last;
    if !known {
        notes.push(format!(
            "{name}'s holidays are known only up to {}: the broker's calendar ends there, so from then to {last} a holiday shows as an ordinary day",
            cal.known_until
        ));
    }
    if (cal.clock.at - now).num_seconds().abs() > 60 {
        notes.push(format!(
            "open_now is the broker's clock at {}",
            cal.clock
                .at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ));
    }
    MarketHours {
        market: name.to_owned(),
        source: cal.source.clone(),
        time_zone: tz.name().to_owned(),
        always_open: false,
        open_now: cal.clock.is_open,
        sessions,
        next_open,
        next_close,
        extended: today.and_then(|v| v.extended).map(|w| session(w, tz)),
        holidays_ahead: holidays,
        holidays_known: known,
        notes,
    }
}

/// The FX week by convention: from Sunday 17:00 to Friday 17:00 New York time, the week
/// that opens on or before `t`'s Sunday (a Sunday before 17:00 belongs to the week before).
fn fx_week(t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let ny = chrono_tz::America::New_York;
    let at = |d: NaiveDate| {
        let naive = d.and_hms_opt(17, 0, 0).unwrap_or_default();
        ny.from_local_datetime(&naive)
            .earliest()
            .map_or_else(|| naive.and_utc(), |x| x.with_timezone(&Utc))
    };
    let local = t.with_timezone(&ny).date_naive();
    let mut sunday = local - Duration::days(i64::from(local.weekday().num_days_from_sunday()));
    if at(sunday) > t {
        sunday -= Duration::days(7);
    }
    (at(sunday), at(sunday + Duration::days(5)))
}

/// FX by convention (MetaTrader): 24 hours, five days a week, shown in the terminal's
/// server time zone (`zone`: the account's `server_time_zone`), never said to come from
/// the broker.
fn fx_hours(now: DateTime<Utc>, date: Option<NaiveDate>, zone: Option<&str>) -> MarketHours {
    let mut notes = Vec::new();
    let parsed: Option<Tz> = zone.and_then(|z| z.parse().ok());
    let tz = parsed.unwrap_or(chrono_tz::UTC);
    let day = date.unwrap_or_else(|| now.with_timezone(&tz).date_naive());
    let (from, to) = (midnight(tz, day), midnight(tz, day + Duration::days(1)));
    // The weeks around the day: the one open at its start and the one opening in it.
    let mut sessions = Vec::new();
    for probe in [from, to - Duration::seconds(1)] {
        let w = fx_week(probe);
        if w.0 < to && w.1 > from && !sessions.contains(&w) {
            sessions.push(w);
        }
    }
    if sessions.is_empty() {
        notes.push(format!("FX has no session on {day} (a weekend)"));
    }
    let after = match date {
        Some(_) => sessions.last().map_or(to, |w| w.1),
        None => now,
    };
    // The week that opened last (fx_week never answers one opening after its instant),
    // and the one after it.
    let current = fx_week(after);
    let next = fx_week(current.0 + Duration::days(8));
    let next_open = next.0;
    let next_close = if current.1 > after { current.1 } else { next.1 };
    let (open, close) = fx_week(now);
    notes.push("FX trades 24 hours, five days a week, by the market's convention: from Sunday 17:00 New York time (22:00 UTC in the northern winter, 21:00 in summer) to Friday 17:00; this is not from the broker, whose own sessions, daily breaks and holiday closures (Christmas Day, New Year's Day) may differ: its terminal's Specification window shows them".to_owned());
    notes.push("DWXConnect's EA writes no symbol sessions: metals, index and other CFDs keep shorter sessions with daily breaks, and some brokers quote crypto CFDs at weekends".to_owned());
    notes.push(match (zone, parsed) {
        (Some(_), Some(_)) => format!(
            "local times are the terminal's server time ({}, the account's server_time_zone)",
            tz.name()
        ),
        (Some(z), None) => format!(
            "server_time_zone {} is not an IANA zone tradedesk knows: local times in UTC",
            quoted(z)
        ),
        (None, _) => "local times in UTC: set the account's server_time_zone to show the terminal's server time".to_owned(),
    });
    MarketHours {
        market: "FX".to_owned(),
        source: FX_CONVENTION.to_owned(),
        time_zone: tz.name().to_owned(),
        always_open: false,
        open_now: now >= open && now < close,
        sessions: sessions.into_iter().map(|w| session(w, tz)).collect(),
        next_open: Some(instant(next_open, tz)),
        next_close: Some(instant(next_close, tz)),
        extended: None,
        holidays_ahead: Vec::new(),
        holidays_known: false,
        notes,
    }
}

/// The account whose broker keeps its own calendar of `venue` (Alpaca's, of the US
/// markets): the one named, else the first configured.
fn calendar_for(
    ctx: &ToolContext,
    named: Option<&tradedesk_core::Account>,
    venue: Venue,
) -> Option<(String, Arc<dyn Broker>)> {
    match named {
        Some(acc) => ctx
            .broker_for(&acc.id)
            .filter(|b| b.keeps_calendar(venue))
            .map(|b| (acc.id.clone(), b)),
        None => ctx
            .served_accounts()
            .into_iter()
            .find(|(_, b)| b.keeps_calendar(venue))
            .map(|(acc, b)| (acc.id, b)),
    }
}

/// The server zone FX times are shown in (MetaTrader's server time): the named account's
/// broker's, else that of the first configured account trading FX whose broker keeps one.
fn fx_zone(ctx: &ToolContext, named: Option<&tradedesk_core::Account>) -> Option<String> {
    match named {
        Some(acc) => ctx
            .broker_for(&acc.id)
            .and_then(|b| b.server_time_zone(&acc.id)),
        None => ctx
            .served_accounts()
            .into_iter()
            .filter(|(acc, b)| b.markets(&acc.id).contains(&Venue::Fx))
            .find_map(|(acc, b)| b.server_time_zone(&acc.id)),
    }
}

/// A US market's hours: the broker's own calendar where an account whose broker keeps one
/// is configured (Alpaca), else (or when it does not answer) the exchange calendar.
async fn us_hours(
    ctx: &ToolContext,
    (name, exchange, venue): (&str, Exchange, Venue),
    named: Option<&tradedesk_core::Account>,
    now: DateTime<Utc>,
    date: Option<NaiveDate>,
) -> Result<MarketHours> {
    let Some((id, broker)) = calendar_for(ctx, named, venue) else {
        return exchange_hours(name, exchange, now, date);
    };
    let day = date.unwrap_or_else(|| {
        now.with_timezone(&chrono_tz::America::New_York)
            .date_naive()
    });
    // A week past the span, so the next open after it and a closed last day are known.
    let to = day + Duration::days(HOLIDAYS_AHEAD_DAYS + 7);
    match bounded(ctx, &id, broker.market_calendar(&id, day, to)).await {
        Ok(cal) => Ok(broker_hours(name, &cal, now, date)),
        Err(e) => {
            let mut hours = exchange_hours(name, exchange, now, date)?;
            hours.notes.insert(
                0,
                format!("{id}'s market clock and calendar did not answer ({e}): the exchange calendar answers instead"),
            );
            Ok(hours)
        }
    }
}

/// `get_market_hours`.
///
/// # Errors
/// `invalid_argument` for no or both of `market` and `account`, an unknown market or a
/// date that is not YYYY-MM-DD; `unknown_account`; `not_supported` for an account whose
/// markets are not known here, or a date the calendar has no hours for.
pub async fn get_market_hours(ctx: &ToolContext, a: &MarketHoursArgs) -> Result<MarketHoursResult> {
    let mut named = None;
    let markets = match (&a.market, &a.account) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid_argument(
                "both market and account are given",
                "give market (such as NYSE) or account, not both",
            ));
        }
        (None, None) => {
            return Err(Error::invalid_argument(
                "missing market (or account)",
                format!(
                    "give market, one of {MARKETS}, or an account to read the markets it trades"
                ),
            ));
        }
        (Some(m), None) => vec![parse_market(m).ok_or_else(|| {
            Error::invalid_argument(
                format!(
                    "market: {} is not a market tradedesk knows the hours of",
                    quoted(m)
                ),
                format!("give one of {MARKETS}"),
            )
        })?],
        (None, Some(id)) => {
            let (account, broker) = ctx
                .served_accounts()
                .into_iter()
                .find(|(acc, _)| acc.id == *id)
                .ok_or_else(|| {
                    Error::new(
                        ErrorCode::UnknownAccount,
                        format!("no account {}", quoted(id)),
                        "get_accounts lists the accounts",
                    )
                })?;
            named = Some(account.clone());
            let venues = broker.markets(&account.id);
            if venues.is_empty() {
                return Err(Error::new(
                    ErrorCode::NotSupported,
                    format!(
                        "the markets account {} trades ({} broker) are not known here",
                        quoted(id),
                        account.broker
                    ),
                    format!(
                        "give market instead, one of {MARKETS}; accounts of Hyperliquid, Alpaca, Moomoo, MetaTrader and the sim map to their markets"
                    ),
                ));
            }
            venues
        }
    };
    let date = a
        .date
        .as_deref()
        .map(|t| {
            NaiveDate::parse_from_str(t, "%Y-%m-%d").map_err(|_| {
                Error::new(
                    ErrorCode::InvalidDate,
                    format!("date: {} is not YYYY-MM-DD", quoted(t)),
                    "write the date as 2026-12-24",
                )
            })
        })
        .transpose()?;
    let now = ctx.trading.as_ref().map_or_else(Utc::now, |t| t.now());
    let mut answers = Vec::new();
    for venue in markets {
        answers.push(match Market::of(venue) {
            Market::Exchange(name, ex @ (Exchange::Nyse | Exchange::Nasdaq)) => {
                us_hours(ctx, (name, ex, venue), named.as_ref(), now, date).await?
            }
            Market::Exchange(name, ex) => exchange_hours(name, ex, now, date)?,
            Market::AroundTheClock(name) => around_the_clock(name),
            Market::Fx => fx_hours(now, date, fx_zone(ctx, named.as_ref()).as_deref()),
        });
    }
    let markets = answers;
    Ok(MarketHoursResult {
        as_of: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        date: date.map(|d| d.to_string()),
        markets,
    })
}

/// get_market_hours.
#[derive(Debug)]
pub struct GetMarketHours;

impl Tool for GetMarketHours {
    type Args = MarketHoursArgs;
    type Output = MarketHoursResult;
    const META: Meta = Meta::live(
        "get_market_hours",
        "Market hours",
        crate::toolset::Toolset::MarketData,
        "Whether a market (NYSE, NASDAQ, HKEX, BURSA; crypto and perps trade \
                around the clock) or an account's markets are open now, the regular session in \
                the exchange's time zone and UTC, the next open, and the closed days and half \
                days of the next 60 days; says plainly where a market's holidays are not known.",
    );

    async fn run(call: &mut Call<'_>, a: MarketHoursArgs) -> Result<MarketHoursResult> {
        get_market_hours(call.ctx, &a).await
    }

    fn summary(r: &MarketHoursResult) -> String {
        let each: Vec<String> = r
            .markets
            .iter()
            .map(|m| {
                format!(
                    "{} {}{} (from {})",
                    m.market,
                    if m.open_now { "open" } else { "closed" },
                    m.next_open
                        .as_ref()
                        .map(|n| format!(", next open {}", n.local))
                        .unwrap_or_default(),
                    m.source
                )
            })
            .collect();
        let notes: Vec<String> = r.markets.iter().flat_map(|m| m.notes.clone()).collect();
        format!(
            "At {}: {}.{}",
            r.as_of,
            each.join("; "),
            notes_suffix(&notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"market": "NYSE"})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> Option<&'static str> {
        parse_market(text).map(|venue| match Market::of(venue) {
            Market::Exchange(name, _) | Market::AroundTheClock(name) => name,
            Market::Fx => "FX",
        })
    }

    #[test]
    fn a_market_is_read_by_its_name_or_code_in_any_case() {
        let cases = [
            ("NYSE", "NYSE"),
            ("us", "NYSE"),
            ("xnas", "NASDAQ"),
            ("SEHK", "HKEX"),
            ("MYX", "BURSA"),
            ("forex", "FX"),
            ("crypto", "CRYPTO"),
            ("Hyperliquid", "HYPERLIQUID"),
            ("perps", "PERP"),
        ];
        for (text, want) in cases {
            assert_eq!(name(text), Some(want), "{text}");
        }
        assert_eq!(name("LSE"), None);
    }
}
