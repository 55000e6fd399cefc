//! `get_option_chain` against the TWS fake (tests/common/tws_fake.rs): IBKR's option
//! parameters (one answer per exchange), the expiry's contract details and one streaming
//! market-data request per contract with its model computation and open interest,
//! figures checked against what the fake was given; the strike window and the contract
//! cap; unkind on demand: a contract that never answers, no market-data subscription,
//! delayed data, a missing end marker, an unknown underlying.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    clippy::cast_possible_truncation
)]

mod common;

use std::time::{Duration, Instant};

use chrono::{NaiveDate, Utc};
use common::desk::{
    ask_chain, chain_contract as contract, chain_strikes, ctx_of, notes_of as notes, num_of as f,
    tws,
};
use common::tws_fake::{
    FakeTws, TwsComputation, TwsContract, TwsOption, TwsOptionParams, TwsQuote, TwsState,
};
use serde_json::{Value, json};
use tradedesk_tools::ToolContext;

const AAPL: i32 = 265_598;

/// Two expiries ahead and one already past, from today (the adapter reads the clock).
fn expiries() -> (NaiveDate, NaiveDate, NaiveDate) {
    let today = Utc::now().date_naive();
    (
        today - chrono::Days::new(3),
        today + chrono::Days::new(10),
        today + chrono::Days::new(38),
    )
}

fn ib(d: NaiveDate) -> String {
    d.format("%Y%m%d").to_string()
}

/// The compact OCC symbol the chain shows.
fn occ(d: NaiveDate, right: char, strike: f64) -> String {
    format!(
        "AAPL{}{right}{:08}",
        d.format("%y%m%d"),
        (strike * 1000.0).round() as i64
    )
}

/// The fake's figures for one contract: bid, ask and the model's computation follow
/// from the strike, so a test can work each out by hand.
fn option(d: NaiveDate, right: char, strike: f64, con_id: i32) -> TwsOption {
    let distance = (strike - 200.0).abs();
    let bid = 1.0 + (20.0 - distance.min(19.0)) / 4.0;
    TwsOption {
        con_id,
        symbol: "AAPL".into(),
        expiry: ib(d),
        strike,
        right: right.to_string(),
        multiplier: Some(100.0),
        trading_class: "AAPL".into(),
        currency: "USD".into(),
        local_symbol: format!(
            "AAPL  {}{right}{:08}",
            d.format("%y%m%d"),
            (strike * 1000.0).round() as i64
        ),
        bid,
        ask: bid + 0.1,
        last: bid + 0.05,
        volume: format!("{}", 100 + con_id % 1000),
        open_interest: format!("{}", 5000 + con_id % 1000),
        computation: Some(TwsComputation {
            implied_vol: 0.25 + strike / 10_000.0,
            delta: if right == 'C' { 0.5 } else { -0.5 },
            opt_price: bid + 0.05,
            pv_dividend: 0.12,
            gamma: 0.03,
            vega: 0.21,
            theta: -0.08,
            und_price: 200.0,
        }),
        ..TwsOption::default()
    }
}

/// AAPL at 200 with options on SMART, CBOE and a SMART adjusted class: the near expiry
/// has strikes 185 to 215 by 5, the far one 40 strikes from 160 by 2.5.
/// A context over the fake's `ibkr`, 5 s for the gateway and for the call.
fn desk(fake: &FakeTws) -> ToolContext {
    let timeout = Duration::from_secs(5);
    ctx_of(tws(fake.port(), timeout), timeout)
}

fn state() -> TwsState {
    let (past, near, far) = expiries();
    let mut s = TwsState::default();
    s.contract_details.insert(
        "AAPL".into(),
        TwsContract {
            con_id: AAPL,
            symbol: "AAPL".into(),
            sec_type: "STK".into(),
            exchange: "SMART".into(),
            primary_exchange: "NASDAQ".into(),
            currency: "USD".into(),
            ..TwsContract::default()
        },
    );
    s.contract_details.insert(
        "NOOPT".into(),
        TwsContract {
            con_id: 999,
            symbol: "NOOPT".into(),
            sec_type: "STK".into(),
            exchange: "SMART".into(),
            primary_exchange: "NYSE".into(),
            currency: "USD".into(),
            ..TwsContract::default()
        },
    );
    s.quotes.insert(
        "AAPL".into(),
        TwsQuote {
            bid: 199.9,
            ask: 200.1,
            last: 200.0,
            bid_size: "300".into(),
            ask_size: "200".into(),
        },
    );
    let near_strikes: Vec<f64> = (0..7).map(|k| 185.0 + 5.0 * f64::from(k)).collect();
    let far_strikes: Vec<f64> = (0..40).map(|k| 160.0 + 2.5 * f64::from(k)).collect();
    let mut union: Vec<f64> = near_strikes.iter().chain(&far_strikes).copied().collect();
    union.sort_by(f64::total_cmp);
    union.dedup();
    let dates = vec![ib(past), ib(near), ib(far)];
    let params = |exchange: &str, class: &str, multiplier: &str| TwsOptionParams {
        exchange: exchange.into(),
        trading_class: class.into(),
        multiplier: multiplier.into(),
        expirations: dates.clone(),
        strikes: union.clone(),
    };
    s.option_params.insert(
        AAPL,
        vec![
            params("CBOE", "AAPL", "100"),
            params("SMART", "2AAPL", "150"),
            params("SMART", "AAPL", "100"),
            params("AMEX", "AAPL", "100"),
        ],
    );
    let mut id = 700_000;
    for (d, strikes) in [(near, &near_strikes), (far, &far_strikes)] {
        for k in strikes {
            for right in ['C', 'P'] {
                id += 1;
                s.options.push(option(d, right, *k, id));
            }
        }
    }
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ibkrs_chain_carries_its_expiries_strikes_multiplier_quotes_and_model_greeks() {
    let (_, near, far) = expiries();
    let fake = FakeTws::start(state()).await.unwrap();
    let ctx = desk(&fake);
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ibkr", "strikes_around": 2}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["underlying"], "NASDAQ:AAPL");
    assert_eq!(r["currency"], "USD");
    assert_eq!(f(&r["underlying_price"]), 200.0);
    assert_eq!(r["underlying_price_source"], "TWS last trade");
    assert_eq!(r["simulated"], false);
    // The expiry already past is not listed; the nearest is the default.
    assert_eq!(r["expiries"], json!([near.to_string(), far.to_string()]));
    assert_eq!(r["expiry"], near.to_string());
    // Two strikes at or below 200 and two above, of the expiry's own seven.
    assert_eq!(
        (
            r["strikes"].as_u64(),
            r["strikes_listed"].as_u64(),
            r["count"].as_u64()
        ),
        (Some(4), Some(4), Some(8)),
        "{r:#}"
    );
    let strikes = chain_strikes(&r);
    assert_eq!(
        strikes,
        [195.0, 195.0, 200.0, 200.0, 205.0, 205.0, 210.0, 210.0]
    );

    let given = option(near, 'C', 200.0, 0);
    let model = given.computation.unwrap();
    let c = contract(&r, &occ(near, 'C', 200.0));
    assert_eq!(c["type"], "call");
    assert_eq!(c["expiry"], near.to_string());
    assert_eq!(f(&c["multiplier"]), 100.0);
    assert_eq!(f(&c["bid"]), given.bid);
    assert_eq!(f(&c["ask"]), given.ask);
    assert!((f(&c["mid"]) - (given.bid + given.ask) / 2.0).abs() < 1e-9);
    assert_eq!(f(&c["last"]), given.last);
    // The model's computation (13), not the bid's (10), which the fake sends first.
    assert!(
        (f(&c["implied_volatility"]) - model.implied_vol).abs() < 1e-12,
        "{c:#}"
    );
    assert_eq!(
        (
            f(&c["delta"]),
            f(&c["gamma"]),
            f(&c["vega"]),
            f(&c["theta"])
        ),
        (0.5, 0.03, 0.21, -0.08)
    );
    assert_eq!(c["rho"], Value::Null, "IBKR computes no rho");
    assert_eq!(c["greeks_source"], "broker");
    assert_eq!(c["bsm_inputs"], Value::Null);
    let p = contract(&r, &occ(near, 'P', 200.0));
    assert_eq!(p["type"], "put");
    assert_eq!(f(&p["delta"]), -0.5);
    // Volume and open interest as the fake sent them, the put's from tick 28.
    let sent = |sym: &str| {
        let st = fake.snapshot();
        st.options
            .iter()
            .find(|o| o.local_symbol.split_whitespace().collect::<String>() == sym)
            .cloned()
            .unwrap()
    };
    let call_sent = sent(&occ(near, 'C', 200.0));
    let put_sent = sent(&occ(near, 'P', 200.0));
    let num = |text: &str| text.parse::<f64>().unwrap();
    assert_eq!(f(&c["volume"]), num(&call_sent.volume));
    assert_eq!(f(&c["open_interest"]), num(&call_sent.open_interest));
    assert_eq!(f(&p["open_interest"]), num(&put_sent.open_interest));
    assert_ne!(call_sent.open_interest, put_sent.open_interest);

    let n = notes(&r);
    assert!(n.contains("SMART AAPL, multiplier 100"), "{n}");
    assert!(
        n.contains("CBOE (AAPL)") && n.contains("SMART (2AAPL)"),
        "{n}"
    );
    assert!(n.contains("IBKR computes no rho"), "{n}");
    // 4 setup requests and one per contract.
    assert_eq!(r["requests"], 12);

    let st = fake.snapshot();
    assert_eq!(
        st.option_param_requests,
        vec![("AAPL".to_owned(), "STK".to_owned(), AAPL, String::new())]
    );
    assert!(
        st.contract_queries
            .contains(&format!("OPT AAPL {}", ib(near))),
        "{:?}",
        st.contract_queries
    );
    assert_eq!(st.option_market_data.len(), 8);
    for (local, generic, snapshot) in &st.option_market_data {
        assert_eq!((generic.as_str(), *snapshot), ("101", false), "{local}");
    }

    // Another expiry by name; one IBKR does not list is refused naming those it does.
    let r = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "ibkr", "expiry": far.to_string(), "strikes_around": 1}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["expiry"], far.to_string());
    let strikes = chain_strikes(&r);
    assert_eq!(strikes, [200.0, 200.0, 202.5, 202.5]);
    let wrong = near + chrono::Days::new(1);
    let e = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ibkr", "expiry": wrong.to_string()}),
    )
    .await;
    assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&wrong.to_string()) && message.contains(&near.to_string()),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contracts_past_the_cap_are_left_out_with_a_note() {
    let (_, _, far) = expiries();
    let fake = FakeTws::start(state()).await.unwrap();
    let timeout = Duration::from_secs(8);
    let ctx = ctx_of(tws(fake.port(), timeout), timeout);
    let r = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "ibkr", "expiry": far.to_string(), "strikes_around": 50}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    // 40 strikes, 80 contracts: market data for the 60 nearest 200 only.
    assert_eq!(r["count"], 60, "{r:#}");
    assert_eq!(r["more"], true);
    let n = notes(&r);
    assert!(
        n.contains("80 contracts are in the window") && n.contains("60 nearest"),
        "{n}"
    );
    assert_eq!(fake.snapshot().option_market_data.len(), 60);
    let strikes = chain_strikes(&r);
    // 30 strikes around 200: 162.5 and 165 ... the farthest are gone.
    assert!(
        !strikes.contains(&160.0) && !strikes.contains(&257.5),
        "{strikes:?}"
    );
    assert!(
        strikes.contains(&200.0) && strikes.contains(&225.0),
        "{strikes:?}"
    );
    for c in r["contracts"].as_array().unwrap() {
        assert_eq!(c["greeks_source"], "broker", "{c:#}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silence_no_subscription_delayed_data_and_a_missing_end_are_noted_not_failing() {
    let (_, near, _) = expiries();
    let mut s = state();
    s.option_params_end = false;
    for o in &mut s.options {
        let code = o.local_symbol.split_whitespace().collect::<String>();
        if code == occ(near, 'C', 205.0) {
            o.silent = true;
        } else if code == occ(near, 'P', 205.0) {
            o.error = Some((354, "Requested market data is not subscribed.".to_owned()));
        } else if code == occ(near, 'C', 195.0) {
            o.delayed = true;
        }
    }
    let fake = FakeTws::start(s).await.unwrap();
    let timeout = Duration::from_secs(3);
    let ctx = ctx_of(tws(fake.port(), timeout), timeout);
    let started = Instant::now();
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "ibkr", "strikes_around": 2}),
    )
    .await;
    // A generous bound: the call cannot hang on the silent contract.
    assert!(started.elapsed() < Duration::from_secs(20));
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["count"], 8, "{r:#}");
    let silent = contract(&r, &occ(near, 'C', 205.0));
    assert_eq!(
        (silent["bid"].clone(), silent["greeks_source"].clone()),
        (Value::Null, Value::Null)
    );
    let refused = contract(&r, &occ(near, 'P', 205.0));
    assert_eq!(refused["bid"], Value::Null);
    let late = contract(&r, &occ(near, 'C', 195.0));
    assert_eq!(
        f(&late["bid"]),
        option(near, 'C', 195.0, 0).bid,
        "delayed ticks are read"
    );
    assert_eq!(late["greeks_source"], "broker");
    let fine = contract(&r, &occ(near, 'C', 200.0));
    assert_eq!(fine["greeks_source"], "broker");
    let n = notes(&r);
    assert!(n.contains("sent no end to its option parameters"), "{n}");
    assert!(
        n.contains("sent no market data within") && n.contains(&occ(near, 'C', 205.0)),
        "{n}"
    );
    assert!(
        n.contains("no market-data subscription for 1 contract(s) (TWS error 354")
            && n.contains(&occ(near, 'P', 205.0)),
        "{n}"
    );
    assert!(
        n.contains("delayed data") && n.contains(&occ(near, 'C', 195.0)),
        "{n}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prices_without_a_computation_get_tradedesks_greeks_only_with_a_rate() {
    let (_, near, _) = expiries();
    let mut s = state();
    for o in &mut s.options {
        o.computation = None;
    }
    let fake = FakeTws::start(s).await.unwrap();
    let ctx = desk(&fake);
    let args = json!({"underlying": "AAPL", "account": "ibkr", "strikes_around": 1});
    let r = ask_chain(&ctx, args.clone()).await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let c = contract(&r, &occ(near, 'C', 200.0));
    assert_eq!(
        (c["delta"].clone(), c["greeks_source"].clone()),
        (Value::Null, Value::Null)
    );
    let n = notes(&r);
    assert!(
        n.contains("no rate is known") && n.contains("IBKR states no rate"),
        "{n}"
    );

    let mut with_rate = args;
    with_rate["rate"] = json!(0.04);
    let r = ask_chain(&ctx, with_rate).await;
    let c = contract(&r, &occ(near, 'C', 200.0));
    assert_eq!(c["greeks_source"], "tradedesk_bsm", "{c:#}");
    let inputs = &c["bsm_inputs"];
    assert_eq!(
        (f(&inputs["rate"]), inputs["rate_source"].clone()),
        (0.04, json!("argument"))
    );
    assert_eq!(inputs["price_from"], "mid");
    assert_eq!(f(&inputs["underlying_price"]), 200.0);
    assert!(f(&c["delta"]) > 0.0 && f(&c["delta"]) < 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_underlying_or_one_without_options_is_named() {
    let fake = FakeTws::start(state()).await.unwrap();
    let ctx = desk(&fake);
    let e = ask_chain(&ctx, json!({"underlying": "NOPE", "account": "ibkr"})).await;
    assert_eq!(e["error"]["code"], "unknown_symbol", "{e:#}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("NOPE"),
        "{e:#}"
    );
    let e = ask_chain(&ctx, json!({"underlying": "NOOPT", "account": "ibkr"})).await;
    assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("IBKR lists no options on NYSE:NOOPT"),
        "{e:#}"
    );
}
