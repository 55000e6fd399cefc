//! `get_market_hours` on the demo (the sim's clock at Monday 2026-11-30 15:00 UTC, 10:00
//! in New York): sessions in the exchange's zone and UTC, the next open, holidays and half
//! days from the exchange-hours calendar, and plain words where a market's holidays are
//! not known. Alpaca's clock and calendar (its fake) answer for the US market where an
//! Alpaca account is configured; MetaTrader's FX week is the market's convention.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{NaiveDate, TimeZone, Utc};
use common::alpaca_fake::{AlpacaFake, Failure};
use common::desk::{KEY, SECRET, alpaca};
use common::dwx_fake::{EaState, FakeEa};
use serde_json::{Value, json};
use tradedesk_brokers::Broker;
use tradedesk_brokers::dwx::{DwxBroker, DwxConfig, Platform};
use tradedesk_tools::call;
use tradedesk_tools::config::{State, docs_context};

async fn hours(args: Value) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    let ctx = docs_context("test", &state).unwrap();
    call(&ctx, "get_market_hours", args)
        .await
        .unwrap()
        .structured
}

#[tokio::test]
async fn nyse_now_is_open_with_its_session_next_open_and_holidays_ahead() {
    let r = hours(json!({"market": "NYSE"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["as_of"], "2026-11-30T15:00:00Z");
    let m = &r["markets"][0];
    assert_eq!(m["market"], "NYSE");
    assert_eq!(m["time_zone"], "America/New_York");
    assert_eq!(m["open_now"], true);
    assert_eq!(
        m["sessions"][0]["open"]["local"],
        "2026-11-30T09:30:00-05:00"
    );
    assert_eq!(m["sessions"][0]["open"]["utc"], "2026-11-30T14:30:00Z");
    assert_eq!(m["sessions"][0]["close"]["utc"], "2026-11-30T21:00:00Z");
    assert_eq!(m["next_open"]["utc"], "2026-12-01T14:30:00Z");
    assert_eq!(m["next_close"]["utc"], "2026-11-30T21:00:00Z");
    assert_eq!(m["source"], "exchange calendar (exchange-hours crate)");
    assert_eq!(m["holidays_known"], true);
    let days: Vec<(&str, &str)> = m["holidays_ahead"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["date"].as_str().unwrap(), h["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        &days[..3],
        [
            ("2026-12-24", "early_close"),
            ("2026-12-25", "closed"),
            ("2027-01-01", "closed")
        ]
    );
    let eve = &m["holidays_ahead"][0]["sessions"][0];
    assert_eq!(eve["close"]["local"], "2026-12-24T13:00:00-05:00");
    assert_eq!(eve["close"]["utc"], "2026-12-24T18:00:00Z");
}

#[tokio::test]
async fn a_holiday_has_no_session_and_the_next_open_is_the_half_day_after() {
    let r = hours(json!({"market": "XNYS", "date": "2026-11-26"})).await;
    let m = &r["markets"][0];
    assert_eq!(r["date"], "2026-11-26");
    assert_eq!(m["sessions"], json!([]), "{r:#}");
    assert!(
        m["notes"][0]
            .as_str()
            .unwrap()
            .contains("no regular session on 2026-11-26")
    );
    assert_eq!(m["next_open"]["local"], "2026-11-27T09:30:00-05:00");
    assert_eq!(m["holidays_ahead"][0]["date"], "2026-11-26");
    assert_eq!(m["holidays_ahead"][0]["kind"], "closed");
    assert_eq!(m["holidays_ahead"][1]["kind"], "early_close");
    assert_eq!(
        m["holidays_ahead"][1]["sessions"][0]["close"]["utc"],
        "2026-11-27T18:00:00Z"
    );
}

#[tokio::test]
async fn bursas_holidays_are_said_to_be_unknown_not_shown_as_ordinary_days() {
    let r = hours(json!({"market": "BURSA"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["time_zone"], "Asia/Kuala_Lumpur");
    // 23:00 in Kuala Lumpur.
    assert_eq!(m["open_now"], false, "{r:#}");
    // Two sessions a day, around the lunch break.
    assert_eq!(m["sessions"].as_array().unwrap().len(), 2, "{r:#}");
    assert_eq!(
        m["sessions"][0]["open"]["local"],
        "2026-11-30T09:00:00+08:00"
    );
    assert_eq!(m["next_open"]["utc"], "2026-12-01T01:00:00Z");
    assert_eq!(m["holidays_known"], false);
    assert_eq!(m["holidays_ahead"], json!([]));
    let note = m["notes"][0].as_str().unwrap();
    assert!(
        note.contains("holidays are not known") && note.contains("ordinary day"),
        "{note}"
    );

    // NASDAQ's table ends at 2026-12-31: known up to there, said so past it.
    let r = hours(json!({"market": "NASDAQ", "date": "2026-12-10"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["holidays_known"], false, "{r:#}");
    assert!(
        m["notes"][0]
            .as_str()
            .unwrap()
            .contains("known only up to 2026-12-31"),
        "{r:#}"
    );
    assert_eq!(m["holidays_ahead"][0]["date"], "2026-12-24");
}

#[tokio::test]
async fn perps_trade_around_the_clock_and_an_account_reads_its_markets() {
    let r = hours(json!({"market": "hyperliquid"})).await;
    let m = &r["markets"][0];
    assert_eq!(
        (m["always_open"].as_bool(), m["open_now"].as_bool()),
        (Some(true), Some(true))
    );
    assert_eq!(m["next_open"], Value::Null);
    let r = hours(json!({"account": "SIM-PAPER"})).await;
    let names: Vec<&str> = r["markets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["market"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["NYSE", "BURSA", "PERP"], "{r:#}");
}

#[tokio::test]
async fn bad_arguments_say_what_to_give() {
    let r = hours(json!({"account": "IBKR-DEMO"})).await;
    assert_eq!(r["error"]["code"], "not_supported", "{r:#}");
    assert!(r["error"]["hint"].as_str().unwrap().contains("NYSE"));
    let r = hours(json!({"market": "LSE"})).await;
    assert_eq!(r["error"]["code"], "invalid_argument", "{r:#}");
    assert!(r["error"]["hint"].as_str().unwrap().contains("BURSA"));
    let r = hours(json!({})).await;
    assert_eq!(r["error"]["code"], "invalid_argument", "{r:#}");
    let r = hours(json!({"market": "NYSE", "account": "SIM-PAPER"})).await;
    assert_eq!(r["error"]["code"], "invalid_argument", "{r:#}");
    let r = hours(json!({"market": "NYSE", "date": "24/12/2026"})).await;
    assert_eq!(r["error"]["code"], "invalid_date", "{r:#}");
    let r = hours(json!({"account": "NOPE"})).await;
    assert_eq!(r["error"]["code"], "unknown_account", "{r:#}");
}

/// The calendar gives HKEX's day as one session; the answer says the midday break is not
/// modelled rather than letting open_now read true over it unsaid.
#[tokio::test]
async fn hkex_says_its_midday_break_is_not_modelled() {
    let r = hours(json!({"market": "HKEX", "date": "2026-12-03"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["time_zone"], "Asia/Hong_Kong", "{r:#}");
    assert_eq!(m["sessions"].as_array().unwrap().len(), 1, "{r:#}");
    assert!(
        m["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n.as_str().unwrap().contains("midday break (12:00 to 13:00")),
        "{r:#}"
    );
}

// ---------------------------------------------------------------------------------------
// The broker's own calendar (Alpaca's fake) and MetaTrader's FX week

/// The demo (its clock at 2026-11-30 15:00 UTC) with more brokers; the directory must
/// outlive the context.
fn demo_with(brokers: Vec<Arc<dyn Broker>>) -> (tradedesk_tools::ToolContext, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    let mut ctx = docs_context("test", &state).unwrap();
    for b in brokers {
        ctx = ctx.with_broker(b, None);
    }
    (ctx, dir)
}

async fn ask(ctx: &tradedesk_tools::ToolContext, args: Value) -> Value {
    call(ctx, "get_market_hours", args)
        .await
        .unwrap()
        .structured
}

fn day(y: i32, m: u32, d: u32) -> NaiveDate {
    NaiveDate::from_ymd_opt(y, m, d).unwrap()
}

/// The fake's calendar has a closed day exchange-hours does not (2026-12-31) and lacks
/// one it has (Martin Luther King Day, 2027-01-18): the answer follows Alpaca's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpacas_clock_and_calendar_answer_for_the_us_market() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    fake.set_now(Utc.with_ymd_and_hms(2026, 11, 30, 15, 0, 0).unwrap());
    fake.close_day(day(2026, 12, 31));
    let (ctx, _dir) = demo_with(vec![alpaca(&fake.url, Duration::from_secs(5))]);
    let r = ask(&ctx, json!({"market": "NYSE"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let m = &r["markets"][0];
    assert_eq!(
        m["source"], "Alpaca (ALPACA): GET /v2/clock and GET /v2/calendar",
        "{r:#}"
    );
    assert_eq!(m["time_zone"], "America/New_York");
    assert_eq!(m["open_now"], true);
    assert_eq!(
        m["sessions"][0]["open"]["local"],
        "2026-11-30T09:30:00-05:00"
    );
    assert_eq!(m["sessions"][0]["close"]["utc"], "2026-11-30T21:00:00Z");
    assert_eq!(m["next_close"]["utc"], "2026-11-30T21:00:00Z");
    assert_eq!(m["next_open"]["utc"], "2026-12-01T14:30:00Z");
    assert_eq!(m["extended"]["open"]["local"], "2026-11-30T04:00:00-05:00");
    assert_eq!(m["extended"]["close"]["utc"], "2026-12-01T01:00:00Z");
    assert_eq!(m["holidays_known"], true);
    let days: Vec<(&str, &str)> = m["holidays_ahead"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["date"].as_str().unwrap(), h["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        days,
        [
            ("2026-12-24", "early_close"),
            ("2026-12-25", "closed"),
            ("2026-12-31", "closed"),
            ("2027-01-01", "closed")
        ]
    );
    assert_eq!(
        m["holidays_ahead"][0]["sessions"][0]["close"]["utc"],
        "2026-12-24T18:00:00Z"
    );
    assert!(
        fake.requests()
            .iter()
            .any(|q| q.starts_with("GET /v2/calendar?start=2026-11-30&end=2027-02-05")),
        "{:?}",
        fake.requests()
    );

    // Thanksgiving: no session; the half day after it is the next open and close.
    let r = ask(&ctx, json!({"market": "NASDAQ", "date": "2026-11-26"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["sessions"], json!([]), "{r:#}");
    assert!(
        m["notes"]
            .to_string()
            .contains("no regular session on 2026-11-26")
    );
    assert_eq!(m["next_open"]["utc"], "2026-11-27T14:30:00Z");
    assert_eq!(m["next_close"]["utc"], "2026-11-27T18:00:00Z");
    assert_eq!(m["holidays_ahead"][0]["kind"], "closed");
    assert_eq!(m["holidays_ahead"][1]["kind"], "early_close");

    // Past the end of Alpaca's calendar (2029), holidays are not known.
    let r = ask(&ctx, json!({"market": "NYSE", "date": "2029-12-10"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["holidays_known"], false, "{r:#}");
    assert!(
        m["notes"]
            .to_string()
            .contains("known only up to 2029-12-31"),
        "{r:#}"
    );

    // The account's markets: the US from Alpaca, and crypto around the clock.
    let r = ask(&ctx, json!({"account": "ALPACA"})).await;
    let names: Vec<(&str, &str)> = r["markets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["market"].as_str().unwrap(), m["source"].as_str().unwrap()))
        .collect();
    assert_eq!(names[0].0, "NYSE");
    assert!(names[0].1.starts_with("Alpaca"), "{r:#}");
    assert_eq!(names[1].0, "CRYPTO");
    // Other markets keep the exchange calendar.
    let r = ask(&ctx, json!({"market": "HKEX"})).await;
    assert_eq!(
        r["markets"][0]["source"],
        "exchange calendar (exchange-hours crate)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_alpacas_answer_the_exchange_calendar_answers_and_says_so() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    fake.fail_next(Failure::ServerError);
    let (ctx, _dir) = demo_with(vec![alpaca(&fake.url, Duration::from_secs(5))]);
    let r = ask(&ctx, json!({"market": "NYSE"})).await;
    let m = &r["markets"][0];
    assert_eq!(
        m["source"], "exchange calendar (exchange-hours crate)",
        "{r:#}"
    );
    assert!(
        m["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("ALPACA's market clock and calendar did not answer"),
        "{r:#}"
    );
    // The crate's figures, as without Alpaca.
    assert_eq!(m["next_open"]["utc"], "2026-12-01T14:30:00Z");
    assert_eq!(m["holidays_ahead"][0]["date"], "2026-12-24");
}

/// DWXConnect's EA writes no symbol sessions (its files hold none): FX is answered by the
/// market's convention, in the terminal's server time, and said not to be the broker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metatraders_fx_week_is_the_convention_in_server_time_not_the_brokers() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("MQL5/Files");
    std::fs::create_dir_all(&files).unwrap();
    let _ea = FakeEa::start(&files, EaState::default());
    let mt: Arc<dyn Broker> = Arc::new(DwxBroker::new(DwxConfig {
        id: "MT".into(),
        files: files.clone(),
        platform: Platform::Mt5,
        magic: 7,
        live: false,
        server_time_zone: Some("Europe/Athens".into()),
        history_days: 30,
        timeout: Duration::from_secs(5),
        symbols: std::collections::BTreeMap::new(),
        margin_mode: None,
        lots: std::collections::BTreeMap::new(),
    }));
    let (ctx, _state) = demo_with(vec![mt]);
    let r = ask(&ctx, json!({"account": "MT"})).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let m = &r["markets"][0];
    assert_eq!(m["market"], "FX");
    assert!(
        m["source"]
            .as_str()
            .unwrap()
            .contains("not from the broker"),
        "{r:#}"
    );
    assert_eq!(m["time_zone"], "Europe/Athens");
    // Monday 15:00 UTC: open since Sunday 17:00 New York (22:00 UTC, midnight in Athens).
    assert_eq!(m["open_now"], true);
    assert_eq!(m["sessions"][0]["open"]["utc"], "2026-11-29T22:00:00Z");
    assert_eq!(
        m["sessions"][0]["open"]["local"],
        "2026-11-30T00:00:00+02:00"
    );
    assert_eq!(m["next_close"]["utc"], "2026-12-04T22:00:00Z");
    assert_eq!(m["next_open"]["utc"], "2026-12-06T22:00:00Z");
    assert_eq!(m["holidays_known"], false);
    let notes = m["notes"].to_string();
    assert!(notes.contains("writes no symbol sessions"), "{notes}");
    assert!(notes.contains("Europe/Athens"), "{notes}");
    // Summer: New York's daylight time moves the week to 21:00 UTC.
    let r = ask(&ctx, json!({"market": "FX", "date": "2026-07-01"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["time_zone"], "Europe/Athens", "{r:#}");
    assert_eq!(m["sessions"][0]["open"]["utc"], "2026-06-28T21:00:00Z");
    assert_eq!(
        m["sessions"][0]["open"]["local"],
        "2026-06-29T00:00:00+03:00"
    );
    assert_eq!(m["next_open"]["utc"], "2026-07-05T21:00:00Z");
    // A Saturday has no session.
    let r = ask(&ctx, json!({"market": "FX", "date": "2026-12-05"})).await;
    let m = &r["markets"][0];
    assert_eq!(m["sessions"], json!([]), "{r:#}");
    assert_eq!(m["next_open"]["utc"], "2026-12-06T22:00:00Z");
    // What the EA wrote holds no sessions to read.
    std::thread::sleep(Duration::from_millis(100));
    for entry in std::fs::read_dir(files.join("DWX")).unwrap() {
        let text = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&text).to_lowercase();
        assert!(!text.contains("session"), "{text}");
    }
}
