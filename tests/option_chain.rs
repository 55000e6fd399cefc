//! `get_option_chain` against the Alpaca fake (its chain snapshots and contract list in
//! Alpaca's shapes, unkind on demand) and the sim: figures checked against what the fake
//! was given, tradedesk's Black-Scholes-Merton greeks only where the broker sends none
//! and every input is known, `not_supported` elsewhere, a late venue cut off at
//! `broker_timeout`, and `option_strategy` legs picked from a chain.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

mod common;

use std::time::Duration;

use chrono::{Datelike, NaiveDate, Utc, Weekday};
use common::alpaca_fake::{AlpacaFake, Failure, FakeOption};
use common::desk::{
    KEY, SECRET, alpaca, ask_chain, chain_contract as contract, chain_strikes, ctx_of, num_of as f,
    sim_at, tool,
};
use serde_json::{Value, json};
use tradedesk_tools::ToolContext;
use tradedesk_tools::config::State;

/// 2026-11-30 15:00:00 UTC, in milliseconds (a Monday).
const T: i64 = 1_796_050_800_000;

// -- the sim --------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sims_chain_is_simulated_deterministic_and_solved_by_tradedesk() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx_of(sim_at(&dir, T), Duration::from_secs(10));
    let args = json!({"underlying": "AAPL", "account": "SIM", "strikes_around": 3});
    let r = ask_chain(&ctx, args.clone()).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["simulated"], true);
    assert_eq!(r["underlying"], "NASDAQ:AAPL");
    // The nearest Friday after Monday 2026-11-30, then seven more.
    assert_eq!(r["expiry"], "2026-12-04");
    assert_eq!(r["expiries"].as_array().unwrap().len(), 8);
    assert_eq!(r["expiries"][7], "2027-01-22");
    assert_eq!(
        (r["strikes"].as_u64(), r["count"].as_u64()),
        (Some(6), Some(12))
    );
    assert_eq!(
        r["more"], true,
        "the sim lists more strikes than 3 each side"
    );
    // The underlying is the mid of the sim's quote.
    let q = tool(
        &ctx,
        "get_quote",
        json!({"account": "SIM", "symbol": "AAPL"}),
    )
    .await;
    let spot = f(&r["underlying_price"]);
    assert!((spot - (f(&q["bid"]) + f(&q["ask"])) / 2.0).abs() < 1e-9);
    let strikes = chain_strikes(&r);
    assert_eq!(strikes.iter().filter(|k| **k <= spot).count(), 6);
    for c in r["contracts"].as_array().unwrap() {
        assert_eq!(c["greeks_source"], "tradedesk_bsm", "{c:#}");
        assert_eq!(f(&c["multiplier"]), 100.0);
        let i = &c["bsm_inputs"];
        assert_eq!(
            (i["rate"].as_f64(), i["rate_source"].as_str()),
            (Some(0.04), Some("venue"))
        );
        assert_eq!(i["underlying_price"], r["underlying_price"]);
        assert_eq!(i["price_from"], "mid");
        assert!((f(&i["price"]) - f(&c["mid"])).abs() < 1e-9);
        assert!((f(&c["mid"]) - (f(&c["bid"]) + f(&c["ask"])) / 2.0).abs() < 1e-9);
        // Four days and six hours to 16:00 New York (21:00 UTC) on Friday.
        assert!((f(&i["time_years"]) - (4.0 + 6.0 / 24.0) / 365.0).abs() < 1e-9);
        // The solved volatility reprices the mid through option_price.
        let p = tool(
            &ctx,
            "option_price",
            json!({"type": c["type"], "spot": spot, "strike": c["strike"],
                   "volatility": c["implied_volatility"], "rate": 0.04,
                   "time_years": i["time_years"]}),
        )
        .await;
        assert!(
            (f(&p["price"]) - f(&i["price"])).abs() < 1e-6,
            "{c:#} {p:#}"
        );
        assert!((f(&p["delta"]) - f(&c["delta"])).abs() < 1e-9);
        assert!((f(&p["theta"]) - f(&c["theta"])).abs() < 1e-9);
    }
    // The same moment answers the same chain.
    let again = ask_chain(&ctx, args).await;
    assert_eq!(again["contracts"], r["contracts"]);
    // Another expiry, and one the sim does not list.
    let later = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "SIM", "expiry": "2026-12-11", "strikes_around": 1}),
    )
    .await;
    assert_eq!(
        (later["expiry"].as_str(), later["count"].as_u64()),
        (Some("2026-12-11"), Some(4))
    );
    let e = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "SIM", "expiry": "2026-12-05"}),
    )
    .await;
    assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-12-11"),
        "{e:#}"
    );
    let fx = ask_chain(&ctx, json!({"underlying": "EURUSD", "account": "SIM"})).await;
    assert!(
        fx["error"]["message"]
            .as_str()
            .unwrap()
            .contains("US stocks and ETFs"),
        "{fx:#}"
    );
    // A rate given is used instead of the venue's.
    let r5 = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "SIM", "strikes_around": 1, "rate": 0.05}),
    )
    .await;
    assert_eq!(r5["contracts"][0]["bsm_inputs"]["rate_source"], "argument");
    assert_eq!(r5["contracts"][0]["bsm_inputs"]["rate"], 0.05);
}

/// Christmas 2026 and New Year's Day 2027 fall on Fridays, when NYSE is closed: those
/// weeks expire on the Thursday before (OCC's rule), read from the exchange calendar
/// `get_market_hours` uses, the half day of Christmas Eve closing at 13:00.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holiday_friday_expires_on_the_trading_day_before() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx_of(sim_at(&dir, T), Duration::from_secs(10));
    let chain = |expiry: Option<&str>| {
        let mut args = json!({"underlying": "AAPL", "account": "SIM", "strikes_around": 1});
        if let Some(e) = expiry {
            args["expiry"] = json!(e);
        }
        ask_chain(&ctx, args)
    };
    let r = chain(None).await;
    let expiries: Vec<&str> = r["expiries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        expiries,
        [
            "2026-12-04",
            "2026-12-11",
            "2026-12-18",
            "2026-12-24",
            "2026-12-31",
            "2027-01-08",
            "2027-01-15",
            "2027-01-22"
        ]
    );
    // The calendar says both are holidays.
    let hours = tool(
        &ctx,
        "get_market_hours",
        json!({"market": "NYSE", "date": "2026-12-24"}),
    )
    .await;
    let holidays = hours["markets"][0]["holidays_ahead"].as_array().unwrap();
    let kind = |d: &str| {
        holidays
            .iter()
            .find(|h| h["date"] == d)
            .map(|h| h["kind"].as_str().unwrap())
    };
    assert_eq!(kind("2026-12-24"), Some("early_close"), "{hours:#}");
    assert_eq!(kind("2026-12-25"), Some("closed"));
    assert_eq!(kind("2027-01-01"), Some("closed"));
    // Christmas Eve's contracts close with its half day: 13:00 New York, 18:00 UTC, which
    // is 24 days and 3 hours after 2026-11-30 15:00 UTC.
    let eve = chain(Some("2026-12-24")).await;
    assert_eq!(eve["expiry"], "2026-12-24", "{eve:#}");
    let c = &eve["contracts"][0];
    assert!(
        c["symbol"].as_str().unwrap().starts_with("AAPL261224"),
        "{c:#}"
    );
    let years = f(&c["bsm_inputs"]["time_years"]);
    assert!(
        (years - (24.0 + 3.0 / 24.0) / 365.0).abs() < 1e-9,
        "{years}"
    );
    // New Year's Eve closes at 16:00 New York (21:00 UTC).
    let nye = chain(Some("2026-12-31")).await;
    let years = f(&nye["contracts"][0]["bsm_inputs"]["time_years"]);
    assert!(
        (years - (31.0 + 6.0 / 24.0) / 365.0).abs() < 1e-9,
        "{years}"
    );
    // The holiday itself is not an expiry, and the error names the day before.
    let e = chain(Some("2026-12-25")).await;
    assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("2026-12-24"),
        "{e:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn option_strategy_takes_legs_from_the_sims_chain() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx_of(sim_at(&dir, T), Duration::from_secs(10));
    let chain = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "SIM", "strikes_around": 2}),
    )
    .await;
    let calls: Vec<&Value> = chain["contracts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "call")
        .collect();
    let (long, short) = (calls[1], calls[2]);
    let s = tool(
        &ctx,
        "option_strategy",
        json!({"account": "SIM", "rate": 0.04, "points": 5, "legs": [
            {"contract": long["symbol"], "quantity": 1},
            {"contract": short["symbol"], "quantity": -1}]}),
    )
    .await;
    assert_eq!(s["status"], "ok", "{s:#}");
    // One contract each, 100 shares a contract, at the chain's mids.
    let net = 100.0 * (f(&long["mid"]) - f(&short["mid"]));
    assert!((f(&s["net_premium"]) - net).abs() < 1e-6, "{s:#}");
    let width = 100.0 * (f(&short["strike"]) - f(&long["strike"]));
    assert!((f(&s["max_profit"]) - (width - net)).abs() < 1e-6, "{s:#}");
    assert!((f(&s["max_loss"]) + net).abs() < 1e-6, "{s:#}");
    let delta = 100.0 * (f(&long["delta"]) - f(&short["delta"]));
    assert!((f(&s["greeks"]["delta"]) - delta).abs() < 1e-6, "{s:#}");
    let notes = s["notes"].to_string();
    assert!(
        notes.contains("x 100 shares") && notes.contains("simulated"),
        "{notes}"
    );
    // The same strategy with explicit legs in shares answers the same.
    let explicit = tool(
        &ctx,
        "option_strategy",
        json!({"spot": chain["underlying_price"], "rate": 0.04, "points": 5, "legs": [
            {"type": "call", "strike": long["strike"], "quantity": 100, "premium": long["mid"],
             "volatility": long["implied_volatility"], "time_years": long["bsm_inputs"]["time_years"]},
            {"type": "call", "strike": short["strike"], "quantity": -100, "premium": short["mid"],
             "volatility": short["implied_volatility"], "time_years": short["bsm_inputs"]["time_years"]}]}),
    )
    .await;
    assert!((f(&explicit["net_premium"]) - f(&s["net_premium"])).abs() < 1e-9);
    assert_eq!(explicit["breakevens"], s["breakevens"]);
    // A contract leg without an account, or one the chain does not hold.
    let e = tool(
        &ctx,
        "option_strategy",
        json!({"rate": 0.04, "legs": [{"contract": long["symbol"], "quantity": 1}]}),
    )
    .await;
    assert!(
        e["error"]["hint"].as_str().unwrap().contains("account"),
        "{e:#}"
    );
    let e = tool(
        &ctx,
        "option_strategy",
        json!({"account": "SIM", "rate": 0.04, "legs": [{"contract": "AAPL261204C09990000", "quantity": 1}]}),
    )
    .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no such contract"),
        "{e:#}"
    );
}

// -- Alpaca ---------------------------------------------------------------------------

/// The first Friday at least two days ahead, and the one after.
fn fridays() -> (NaiveDate, NaiveDate) {
    let mut d = Utc::now().date_naive() + chrono::Duration::days(2);
    while d.weekday() != Weekday::Fri {
        d += chrono::Duration::days(1);
    }
    (d, d + chrono::Duration::days(7))
}

fn occ(expiry: NaiveDate, right: char, strike: u32) -> String {
    format!("AAPL{}{right}{:08}", expiry.format("%y%m%d"), strike * 1000)
}

/// AAPL at 280 (its last trade), five strikes on two expiries: the near one with
/// quotes, Alpaca's greeks and open interest, except the 285 put (a quote, no greeks)
/// and the 290 put (nothing at all).
/// A context over the fake's paper `ALPACA`: 5 s for the venue, 15 s for the call.
fn desk(fake: &AlpacaFake) -> ToolContext {
    ctx_of(
        alpaca(&fake.url, Duration::from_secs(5)),
        Duration::from_secs(15),
    )
}

fn seeded(fake: &AlpacaFake) -> (NaiveDate, NaiveDate) {
    fake.set_price("AAPL", "280.00", "280.10");
    let (near, far) = fridays();
    for expiry in [near, far] {
        for strike in [270, 275, 280, 285, 290] {
            for right in ['C', 'P'] {
                let mut o = FakeOption::new(&occ(expiry, right, strike));
                let s = f64::from(strike);
                let call = right == 'C';
                if !(right == 'P' && strike == 290) {
                    let intrinsic = if call {
                        (280.0 - s).max(0.0)
                    } else {
                        (s - 280.0).max(0.0)
                    };
                    o.bid = Some(Box::leak(
                        format!("{:.2}", intrinsic + 2.0).into_boxed_str(),
                    ));
                    o.ask = Some(Box::leak(
                        format!("{:.2}", intrinsic + 2.2).into_boxed_str(),
                    ));
                    o.last = Some(Box::leak(
                        format!("{:.2}", intrinsic + 2.1).into_boxed_str(),
                    ));
                    o.volume = Some(u64::from(strike));
                    o.open_interest = Some(Box::leak(format!("{}", strike * 10).into_boxed_str()));
                    o.open_interest_date = Some("2026-11-27");
                }
                if o.bid.is_some() && !(right == 'P' && strike == 285) {
                    o.implied_volatility = Some(0.25 + s / 10_000.0);
                    o.greeks = Some([if call { 0.5 } else { -0.5 }, 0.03, -0.2, 0.15, 0.04]);
                }
                fake.list_option(o);
            }
        }
    }
    (near, far)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpacas_chain_carries_its_greeks_open_interest_and_multiplier() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let (near, far) = seeded(&fake);
    let ctx = desk(&fake);
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ALPACA", "strikes_around": 1}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["simulated"], false);
    assert_eq!(
        r["expiry"],
        near.to_string(),
        "the nearest expiry by default"
    );
    assert_eq!(r["expiries"], json!([near.to_string(), far.to_string()]));
    assert_eq!(f(&r["underlying_price"]), 280.0);
    assert_eq!(r["underlying_price_source"], "the latest IEX trade");
    // One strike at or below 280 and one above: 280 and 285.
    assert_eq!(r["count"], 4, "{r:#}");
    assert_eq!(
        r["strikes_listed"], 2,
        "Alpaca was asked for the window only"
    );
    let asked = fake.requests();
    let chain_req: Vec<&String> = asked
        .iter()
        .filter(|q| q.contains("/v1beta1/options/snapshots/AAPL"))
        .collect();
    assert_eq!(chain_req.len(), 1, "{asked:?}");
    assert!(
        chain_req[0].contains(&format!("expiration_date={near}"))
            && chain_req[0].contains("strike_price_gte=280")
            && chain_req[0].contains("strike_price_lte=285"),
        "{chain_req:?}"
    );
    let listed: Vec<&String> = asked
        .iter()
        .filter(|q| q.contains("/v2/options/contracts"))
        .collect();
    assert!(
        listed[0].contains("expiration_date_lte="),
        "Alpaca's default is the next weekend: {listed:?}"
    );
    assert_eq!(r["requests"], 3, "stock snapshot, contract list, chain");
    // The 280 call: every figure as the fake sent it.
    let c = contract(&r, &occ(near, 'C', 280));
    assert_eq!(
        (&c["type"], &c["strike"], &c["multiplier"]),
        (&json!("call"), &json!(280.0), &json!(100.0))
    );
    assert_eq!(
        (&c["bid"], &c["ask"], &c["last"]),
        (&json!(2.0), &json!(2.2), &json!(2.1))
    );
    assert_eq!(c["mid"], 2.1);
    assert_eq!(f(&c["volume"]), 280.0);
    assert_eq!(
        (&c["open_interest"], &c["open_interest_date"]),
        (&json!(2800.0), &json!("2026-11-27"))
    );
    assert!((f(&c["implied_volatility"]) - 0.278).abs() < 1e-12);
    assert_eq!(
        [&c["delta"], &c["gamma"], &c["theta"], &c["vega"], &c["rho"]],
        [
            &json!(0.5),
            &json!(0.03),
            &json!(-0.2),
            &json!(0.15),
            &json!(0.04)
        ]
    );
    assert_eq!(c["greeks_source"], "broker");
    assert!(c["bsm_inputs"].is_null());
    assert!(
        c["last_time"]
            .as_str()
            .unwrap()
            .starts_with("2026-11-30T20:41:07.5")
    );
    // The 285 put has a quote but no greeks, and no rate was given: left out, said so.
    let p = contract(&r, &occ(near, 'P', 285));
    assert_eq!((&p["bid"], &p["ask"]), (&json!(7.0), &json!(7.2)));
    assert!(
        p["greeks_source"].is_null() && p["delta"].is_null() && p["implied_volatility"].is_null()
    );
    assert!(r["notes"].to_string().contains("give rate"), "{r:#}");

    // With a rate, tradedesk solves the 285 put from its mid.
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ALPACA", "strikes_around": 1, "rate": 0.04}),
    )
    .await;
    let p = contract(&r, &occ(near, 'P', 285));
    assert_eq!(p["greeks_source"], "tradedesk_bsm", "{p:#}");
    let i = &p["bsm_inputs"];
    assert_eq!(
        (i["price"].as_f64(), i["price_from"].as_str()),
        (Some(7.1), Some("mid"))
    );
    assert_eq!(
        (i["rate"].as_f64(), i["rate_source"].as_str()),
        (Some(0.04), Some("argument"))
    );
    assert_eq!(
        (i["underlying_price"].as_f64(), i["dividend_yield"].as_f64()),
        (Some(280.0), Some(0.0))
    );
    let years = f(&i["time_years"]);
    assert!(years > 0.0 && years < 10.0 / 365.0, "{i:#}");
    let back = tool(
        &ctx,
        "option_price",
        json!({"type": "put", "spot": 280, "strike": 285, "volatility": p["implied_volatility"],
               "rate": 0.04, "time_years": years}),
    )
    .await;
    assert!((f(&back["price"]) - 7.1).abs() < 1e-6, "{back:#}");
    // Broker greeks are never replaced.
    assert_eq!(
        contract(&r, &occ(near, 'C', 280))["greeks_source"],
        "broker"
    );

    // The far expiry, every strike: the 290 put is listed without a quote.
    let r = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "ALPACA", "expiry": far.to_string(), "strikes_around": 50}),
    )
    .await;
    assert_eq!(
        (r["count"].as_u64(), r["more"].as_bool()),
        (Some(10), Some(false)),
        "{r:#}"
    );
    let bare = contract(&r, &occ(far, 'P', 290));
    assert!(bare["bid"].is_null() && bare["greeks_source"].is_null());
    assert_eq!(f(&bare["multiplier"]), 100.0);
    // An expiry Alpaca does not list is refused, naming those it does.
    let e = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ALPACA", "expiry": "2031-01-17"}),
    )
    .await;
    assert_eq!(e["error"]["code"], "invalid_argument");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&near.to_string()),
        "{e:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpacas_pages_are_followed_and_a_refused_contract_list_is_noted() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let (near, _) = seeded(&fake);
    fake.cap_chain_pages(3);
    let ctx = desk(&fake);
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ALPACA", "strikes_around": 5}),
    )
    .await;
    assert_eq!(r["count"], 10, "{r:#}");
    // 20 contracts listed over pages of 3 (7), 10 snapshots (4), and the stock snapshot.
    assert_eq!(r["requests"], 12, "{r:#}");
    assert_eq!(
        contract(&r, &occ(near, 'C', 270))["open_interest"].as_f64(),
        Some(2700.0)
    );

    fake.refuse_contracts();
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ALPACA", "strikes_around": 5}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(
        r["expiry"],
        near.to_string(),
        "the nearest in the snapshots"
    );
    let c = contract(&r, &occ(near, 'C', 270));
    assert!(c["open_interest"].is_null(), "{c:#}");
    assert_eq!(
        f(&c["multiplier"]),
        100.0,
        "the OCC standard, said in a note"
    );
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("open interest is null") && notes.contains("OCC standard 100"),
        "{notes}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpaca_strategy_legs_use_its_iv_and_a_late_venue_times_out() {
    let fake = AlpacaFake::start(KEY, SECRET).await;
    let (near, _) = seeded(&fake);
    let ctx = desk(&fake);
    let s = tool(
        &ctx,
        "option_strategy",
        json!({"account": "ALPACA", "rate": 0.04, "points": 5, "legs": [
            {"contract": occ(near, 'C', 280), "quantity": 2}]}),
    )
    .await;
    assert_eq!(s["status"], "ok", "{s:#}");
    assert!(
        (f(&s["net_premium"]) - 2.0 * 100.0 * 2.1).abs() < 1e-9,
        "{s:#}"
    );
    assert!(
        s["notes"]
            .to_string()
            .contains("the broker's implied volatility"),
        "{s:#}"
    );
    // A chain leg's type is the chain's: giving one too is refused.
    let e = tool(
        &ctx,
        "option_strategy",
        json!({"account": "ALPACA", "rate": 0.04, "legs": [
            {"contract": occ(near, 'C', 280), "type": "put", "quantity": 1}]}),
    )
    .await;
    assert_eq!(e["error"]["code"], "invalid_argument");

    let ctx = ctx_of(
        alpaca(&fake.url, Duration::from_secs(30)),
        Duration::from_millis(700),
    );
    fake.fail_next(Failure::Hang);
    let e = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "ALPACA"})).await;
    assert_eq!(e["error"]["code"], "broker_timeout", "{e:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_brokers_answer_not_supported_naming_those_that_serve_chains() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    let ctx = tradedesk_tools::config::docs_context("test", &state).unwrap();
    let e = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "IBKR-DEMO"})).await;
    assert_eq!(e["error"]["code"], "not_supported", "{e:#}");
    let hint = e["error"]["hint"].as_str().unwrap();
    assert!(
        hint.contains("Alpaca") && hint.contains("SIM-PAPER"),
        "{hint}"
    );
    let e = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "NOPE"})).await;
    assert_eq!(e["error"]["code"], "unknown_account", "{e:#}");
}
