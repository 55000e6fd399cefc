//! `get_market_hours` (docs/tools.md, "get_market_hours"): whether a market is open, its
//! regular session in the exchange's time zone and in UTC, the next open, and the
//! holidays and half days ahead. Exchange sessions and holiday tables come from the
//! `exchange-hours` crate, never from a list written here; where it has no holiday
//! table for a market (Bursa Malaysia) or its table ends, the answer says the holidays
//! are not known rather than showing an ordinary day as certain. Crypto and perps trade
//! around the clock.

use chrono::{DateTime, Duration, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use exchange_hours::{DateCoverage, Exchange, ExchangeCalendar, HolidayKind, SessionKind};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{Error, ErrorCode, Result};

use crate::context::ToolContext;

/// How far ahead holidays and half days are listed.
pub const HOLIDAYS_AHEAD_DAYS: i64 = 60;

/// The markets `market` takes, for hints.
pub const MARKETS: &str =
    "NYSE, NASDAQ, HKEX, BURSA (or XNYS, XNAS, XHKG, XKLS), CRYPTO, HYPERLIQUID, PERP";

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MarketHoursArgs {
    /// NYSE, NASDAQ, HKEX, BURSA, CRYPTO, HYPERLIQUID or PERP; or give account.
    pub market: Option<String>,
    /// The markets this account trades (a Hyperliquid, Alpaca, Moomoo or sim account).
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

#[derive(Debug, Clone, Copy)]
enum Market {
    Exchange(&'static str, Exchange),
    AroundTheClock(&'static str),
}

fn parse_market(text: &str) -> Option<Market> {
    Some(match text.trim().to_ascii_uppercase().as_str() {
        "NYSE" | "XNYS" | "US" => Market::Exchange("NYSE", Exchange::Nyse),
        "NASDAQ" | "XNAS" => Market::Exchange("NASDAQ", Exchange::Nasdaq),
        "HKEX" | "XHKG" | "SEHK" | "HK" => Market::Exchange("HKEX", Exchange::Hkex),
        "BURSA" | "XKLS" | "MYX" => Market::Exchange("BURSA", Exchange::BursaMalaysia),
        "CRYPTO" => Market::AroundTheClock("CRYPTO"),
        "HYPERLIQUID" => Market::AroundTheClock("HYPERLIQUID"),
        "PERP" | "PERPS" => Market::AroundTheClock("PERP"),
        _ => return None,
    })
}

/// The markets an account trades, by its broker (a Moomoo account reads one market, which
/// its currency names: MYR Bursa, HKD Hong Kong, USD the US).
fn markets_of(account: &tradedesk_core::Account) -> Option<Vec<Market>> {
    let m = |s: &str| parse_market(s);
    let names: &[&str] = match (account.broker.as_str(), account.currency.code()) {
        ("hyperliquid", _) => &["HYPERLIQUID"],
        ("alpaca", _) => &["NYSE"],
        ("moomoo", "MYR") => &["BURSA"],
        ("moomoo", "HKD") => &["HKEX"],
        ("moomoo", "USD") => &["NYSE"],
        ("sim", _) => &["NYSE", "BURSA", "PERP"],
        _ => return None,
    };
    names.iter().map(|n| m(n)).collect()
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
    let mut from = after;
    for _ in 0..8 {
        match cal
            .next_session_after_with(from, SessionKind::Regular)
            .map_err(|e| calendar_error(name, &e))?
        {
            Some((open, close)) if open <= after => from = close,
            Some((open, _)) => {
                next_open = Some(instant(open, tz));
                break;
            }
            None => break,
        }
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
        time_zone: tz.name().to_owned(),
        always_open: false,
        open_now,
        sessions: sessions.into_iter().map(|w| session(w, tz)).collect(),
        next_open,
        holidays_ahead: holidays,
        holidays_known: known,
        notes,
    })
}

fn around_the_clock(name: &str) -> MarketHours {
    MarketHours {
        market: name.to_owned(),
        time_zone: "UTC".to_owned(),
        always_open: true,
        open_now: true,
        sessions: Vec::new(),
        next_open: None,
        holidays_ahead: Vec::new(),
        holidays_known: true,
        notes: vec![format!(
            "{name} trades around the clock, every day of the year: it has no session, close or holiday"
        )],
    }
}

/// `get_market_hours`.
///
/// # Errors
/// `invalid_argument` for no or both of `market` and `account`, an unknown market or a
/// date that is not YYYY-MM-DD; `unknown_account`; `not_supported` for an account whose
/// markets are not known here, or a date the calendar has no hours for.
pub fn get_market_hours(ctx: &ToolContext, a: &MarketHoursArgs) -> Result<MarketHoursResult> {
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
            let (account, _) = ctx
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
            markets_of(&account).ok_or_else(|| {
                Error::new(
                    ErrorCode::NotSupported,
                    format!(
                        "the markets account {} trades ({} broker) are not known here",
                        quoted(id),
                        account.broker
                    ),
                    format!("give market instead, one of {MARKETS}; accounts of Hyperliquid, Alpaca, Moomoo and the sim map to their markets"),
                )
            })?
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
    let markets = markets
        .into_iter()
        .map(|m| match m {
            Market::Exchange(name, ex) => exchange_hours(name, ex, now, date),
            Market::AroundTheClock(name) => Ok(around_the_clock(name)),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(MarketHoursResult {
        as_of: now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        date: date.map(|d| d.to_string()),
        markets,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tradedesk_core::{Account, Currency, Mode};

    fn names(broker: &str, currency: &str) -> Option<Vec<&'static str>> {
        let account = Account {
            id: "a".to_owned(),
            broker: broker.to_owned(),
            currency: Currency::new(currency),
            name: None,
            mode: Mode::Live,
        };
        markets_of(&account).map(|ms| {
            ms.into_iter()
                .map(|m| match m {
                    Market::Exchange(name, _) | Market::AroundTheClock(name) => name,
                })
                .collect()
        })
    }

    #[test]
    fn a_moomoo_account_reads_the_market_its_currency_names() {
        assert_eq!(names("moomoo", "MYR"), Some(vec!["BURSA"]));
        assert_eq!(names("moomoo", "HKD"), Some(vec!["HKEX"]));
        assert_eq!(names("moomoo", "USD"), Some(vec!["NYSE"]));
        assert_eq!(names("moomoo", "SGD"), None);
        assert_eq!(names("alpaca", "USD"), Some(vec!["NYSE"]));
        assert_eq!(names("ibkr", "USD"), None);
    }
}
