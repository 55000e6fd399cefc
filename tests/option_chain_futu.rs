//! `get_option_chain` against the OpenD fake (its own messages, from the futu-api SDK's
//! `.proto` field numbers): the expiries (`Qot_GetOptionExpirationDate`), one expiry's
//! contracts (`Qot_GetOptionChain`) and their snapshots, figures checked against what the
//! fake was given; OpenD's greeks as the broker's, tradedesk's Black-Scholes-Merton where
//! it sends none; Bursa and unknown underlyings named; OpenD's refusals, its request
//! limits and a silent OpenD surfacing as clear errors.

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
    opend,
};
use common::opend_fake::{OpenDFailure, OpenDFake, OpenDState, TOO_FREQUENT, build};
use common::opend_pb as pb;
use serde_json::json;
use tradedesk_tools::ToolContext;

/// The two expiries listed ahead (a week and two weeks from today) and one past.
fn expiries() -> (NaiveDate, NaiveDate, NaiveDate) {
    let today = Utc::now().date_naive();
    (
        today + chrono::Duration::days(7),
        today + chrono::Duration::days(14),
        today - chrono::Duration::days(3),
    )
}

fn ymd(d: NaiveDate) -> String {
    d.format("%Y-%m-%d").to_string()
}

/// OpenD's code of an option: root, YYMMDD, C or P, strike in thousandths.
fn code(root: &str, expiry: NaiveDate, right: i32, strike: f64) -> String {
    format!(
        "{root}{}{}{}",
        expiry.format("%y%m%d"),
        if right == pb::OPTION_TYPE_CALL {
            'C'
        } else {
            'P'
        },
        (strike * 1000.0).round()
    )
}

/// OpenD's IV (a percentage) and greeks of a contract: figures of the fake's own.
fn figures(right: i32, strike: f64) -> (f64, [f64; 5]) {
    let call = right == pb::OPTION_TYPE_CALL;
    let iv = 20.0 + (strike - 185.0).abs() * 0.3;
    let delta = if call { 0.55 } else { -0.45 } - (strike - 185.0) * 0.02;
    (iv, [delta, 0.031, 0.118, -0.094, 0.027])
}

/// A chain of `underlying` expiring `expiry`: calls and puts at `strikes`, quoted from
/// `spot`, with OpenD's greeks except where `without` names (right, strike).
fn chain(
    s: &mut OpenDState,
    underlying: &pb::Security,
    root: &str,
    expiry: NaiveDate,
    strikes: &[f64],
    spot: f64,
    without: &[(i32, f64)],
) {
    let mut items = Vec::new();
    for &k in strikes {
        let mut item = pb::OptionItem::default();
        for right in [pb::OPTION_TYPE_CALL, pb::OPTION_TYPE_PUT] {
            let c = code(root, expiry, right, k);
            let info = build::option(underlying, &c, right, k, &ymd(expiry), 100);
            let intrinsic = if right == pb::OPTION_TYPE_CALL {
                (spot - k).max(0.0)
            } else {
                (k - spot).max(0.0)
            };
            let mid = intrinsic + 2.0;
            let (iv, greeks) = figures(right, k);
            let bare = without.contains(&(right, k));
            let snap = build::option_snapshot(
                underlying,
                &c,
                right,
                k,
                &ymd(expiry),
                (mid - 0.05, mid + 0.05, mid),
                1_000 + k as i64,
                5_000 + k as i32,
                (!bare).then_some(iv),
                (!bare).then_some(greeks),
                100,
            );
            s.snapshots.insert((underlying.market, c), snap);
            if right == pb::OPTION_TYPE_CALL {
                item.call = Some(info);
            } else {
                item.put = Some(info);
            }
        }
        items.push(item);
    }
    s.option_chains
        .entry((underlying.market, underlying.code.clone()))
        .or_default()
        .push(pb::OptionChain {
            strike_time: ymd(expiry),
            option: items,
            strike_timestamp: None,
        });
}

fn aapl() -> pb::Security {
    pb::Security {
        market: pb::QOT_MARKET_US,
        code: "AAPL".into(),
    }
}

fn tencent() -> pb::Security {
    pb::Security {
        market: pb::QOT_MARKET_HK,
        code: "00700".into(),
    }
}

const STRIKES: [f64; 6] = [175.0, 180.0, 185.0, 190.0, 195.0, 200.0];

fn state() -> OpenDState {
    let (near, far, past) = expiries();
    let mut s = OpenDState {
        accounts: vec![build::my_account()],
        snapshot_hk_limit: Some(20),
        ..OpenDState::default()
    };
    let mut under = build::snapshot(pb::QOT_MARKET_US, "AAPL", 187.40, 187.60);
    under.basic.cur_price = 187.50;
    s.snapshots
        .insert((pb::QOT_MARKET_US, "AAPL".into()), under);
    let date = |d: NaiveDate, n: i32| pb::OptionExpirationDate {
        strike_time: Some(ymd(d)),
        strike_timestamp: None,
        option_expiry_date_distance: n,
        cycle: None,
    };
    s.option_expiries.insert(
        (pb::QOT_MARKET_US, "AAPL".into()),
        vec![date(past, -3), date(far, 14), date(near, 7)],
    );
    chain(
        &mut s,
        &aapl(),
        "AAPL",
        near,
        &STRIKES,
        187.5,
        &[(pb::OPTION_TYPE_PUT, 190.0)],
    );
    chain(&mut s, &aapl(), "AAPL", far, &STRIKES, 187.5, &[]);
    // HK: Tencent, twelve strikes, so a window of six on each side needs two requests of
    // 20 codes (BMP rights).
    let hk_strikes: Vec<f64> = (0..12).map(|i| 360.0 + 5.0 * f64::from(i)).collect();
    let mut t = build::snapshot(pb::QOT_MARKET_HK, "00700", 388.0, 388.4);
    t.basic.cur_price = 388.2;
    s.snapshots.insert((pb::QOT_MARKET_HK, "00700".into()), t);
    s.option_expiries
        .insert((pb::QOT_MARKET_HK, "00700".into()), vec![date(far, 14)]);
    chain(&mut s, &tencent(), "TCH", far, &hk_strikes, 388.2, &[]);
    s
}

/// A context over the fake's `MOOMOO-MY`: 5 s for OpenD, 10 s for the call.
fn desk(fake: &OpenDFake) -> ToolContext {
    ctx_of(
        opend(fake.port, Duration::from_secs(5)),
        Duration::from_secs(10),
    )
}

fn asked(fake: &OpenDFake, proto_id: u32) -> usize {
    fake.snapshot()
        .requests
        .iter()
        .filter(|(id, _)| *id == proto_id)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opends_chain_carries_its_greeks_open_interest_and_multiplier() {
    let (near, far, _) = expiries();
    let fake = OpenDFake::start(state()).await;
    let ctx = desk(&fake);
    let r = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "MOOMOO-MY", "strikes_around": 2}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["underlying"], "US:AAPL");
    assert_eq!(r["currency"], "USD");
    assert_eq!(r["simulated"], false);
    assert_eq!(f(&r["underlying_price"]), 187.5);
    // The expired one is left out; soonest first.
    assert_eq!(r["expiries"], json!([ymd(near), ymd(far)]));
    assert_eq!(r["expiry"], ymd(near));
    // Two strikes at or below 187.5 and two above: 180, 185, 190, 195.
    assert_eq!(
        (
            r["strikes"].as_u64(),
            r["strikes_listed"].as_u64(),
            r["count"].as_u64()
        ),
        (Some(4), Some(4), Some(8)),
        "{r:#}"
    );
    assert_eq!(r["more"], true);
    assert!(
        notes(&r).contains("4 of the expiry's 6 strikes read"),
        "{r:#}"
    );
    let strikes = chain_strikes(&r);
    assert_eq!(
        strikes,
        [180.0, 180.0, 185.0, 185.0, 190.0, 190.0, 195.0, 195.0]
    );

    let symbol = format!("AAPL{}C00185000", near.format("%y%m%d"));
    let c = contract(&r, &symbol);
    assert_eq!(c["type"], "call");
    assert_eq!(c["expiry"], ymd(near));
    assert_eq!(f(&c["multiplier"]), 100.0);
    // Intrinsic 2.5 + 2: bid 4.45, ask 4.55, last 4.5.
    assert_eq!(
        (f(&c["bid"]), f(&c["ask"]), f(&c["mid"]), f(&c["last"])),
        (4.45, 4.55, 4.5, 4.5)
    );
    assert_eq!((f(&c["volume"]), f(&c["open_interest"])), (1185.0, 5185.0));
    // OpenD's 20% as 0.2, its greeks as sent.
    assert!((f(&c["implied_volatility"]) - 0.20).abs() < 1e-12, "{c:#}");
    assert_eq!(c["greeks_source"], "broker");
    assert_eq!(
        (
            f(&c["delta"]),
            f(&c["gamma"]),
            f(&c["vega"]),
            f(&c["theta"]),
            f(&c["rho"])
        ),
        (0.55, 0.031, 0.118, -0.094, 0.027)
    );
    assert!(c["bsm_inputs"].is_null());
    let put195 = contract(&r, &format!("AAPL{}P00195000", near.format("%y%m%d")));
    assert!((f(&put195["implied_volatility"]) - 0.23).abs() < 1e-9);
    assert!((f(&put195["delta"]) - (-0.45 - 0.2)).abs() < 1e-9);

    // The 190 put came without IV or greeks, and no rate is known: left out, said.
    let bare = contract(&r, &format!("AAPL{}P00190000", near.format("%y%m%d")));
    assert!(
        bare["greeks_source"].is_null() && bare["delta"].is_null(),
        "{bare:#}"
    );
    assert!(bare["implied_volatility"].is_null());
    assert_eq!(f(&bare["multiplier"]), 100.0);
    let n = notes(&r);
    assert!(n.contains("1 contract(s) came without greeks"), "{n}");
    assert!(n.contains("multipliers are OpenD's"), "{n}");
    assert!(n.contains("percentage"), "{n}");
    // One expiry list, one chain, the underlying's snapshot and one of the contracts'.
    assert_eq!(r["requests"], 4);
    let s = fake.snapshot();
    assert_eq!(s.chain_windows, vec![(ymd(near), ymd(near))]);
    assert_eq!(asked(&fake, pb::QOT_GET_OPTION_EXPIRATION_DATE), 1);
    assert_eq!(asked(&fake, pb::QOT_GET_OPTION_CHAIN), 1);
    assert_eq!(asked(&fake, pb::proto_id::QOT_GET_SECURITY_SNAPSHOT), 2);

    // With a rate, tradedesk solves the bare put from its mid and says with what.
    let r = ask_chain(
        &ctx,
        json!({"underlying": "US:AAPL", "account": "MOOMOO-MY", "strikes_around": 2, "rate": 0.04}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    let bare = contract(&r, &format!("AAPL{}P00190000", near.format("%y%m%d")));
    assert_eq!(bare["greeks_source"], "tradedesk_bsm", "{bare:#}");
    let inputs = &bare["bsm_inputs"];
    assert_eq!(inputs["price_from"], "mid");
    assert_eq!(f(&inputs["price"]), 4.5);
    assert_eq!(f(&inputs["underlying_price"]), 187.5);
    assert_eq!(
        (f(&inputs["rate"]), inputs["rate_source"].as_str()),
        (0.04, Some("argument"))
    );
    let iv = f(&bare["implied_volatility"]);
    assert!(iv > 0.05 && iv < 2.0, "{iv}");
    assert!(f(&bare["delta"]) < 0.0);
    // The others keep OpenD's own.
    assert_eq!(contract(&r, &symbol)["greeks_source"], "broker");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiry_is_picked_from_opends_list_and_hk_codes_go_twenty_a_request() {
    let (near, far, _) = expiries();
    let fake = OpenDFake::start(state()).await;
    let ctx = desk(&fake);
    let r = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "MOOMOO-MY", "expiry": ymd(far), "strikes_around": 1}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(r["expiry"], ymd(far));
    assert_eq!(r["count"], 4);
    // An expiry OpenD does not list is named with those it does.
    let e = ask_chain(
        &ctx,
        json!({"underlying": "AAPL", "account": "MOOMOO-MY", "expiry": "2031-01-17"}),
    )
    .await;
    assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("2031-01-17") && m.contains(&ymd(near)) && m.contains(&ymd(far)),
        "{m}"
    );

    // Tencent: 24 contracts in the window, at most 20 HK codes a request.
    let before = asked(&fake, pb::proto_id::QOT_GET_SECURITY_SNAPSHOT);
    let r = ask_chain(
        &ctx,
        json!({"underlying": "HKEX:00700", "account": "MOOMOO-MY", "strikes_around": 6}),
    )
    .await;
    assert_eq!(r["status"], "ok", "{r:#}");
    assert_eq!(
        (r["underlying"].as_str(), r["currency"].as_str()),
        (Some("HKEX:00700"), Some("HKD"))
    );
    assert_eq!(r["count"], 24);
    assert_eq!(
        asked(&fake, pb::proto_id::QOT_GET_SECURITY_SNAPSHOT) - before,
        3
    );
    let c = contract(&r, &format!("TCH{}C390000", far.format("%y%m%d")));
    assert_eq!(f(&c["multiplier"]), 100.0);
    assert_eq!(c["greeks_source"], "broker");
    assert!(notes(&r).contains("OpenD's own codes"), "{r:#}");
    assert_eq!(r["more"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bursa_and_unknown_underlyings_are_named_and_refusals_are_clear() {
    let fake = OpenDFake::start(state()).await;
    let ctx = desk(&fake);
    // Bursa: no options; nothing is asked of OpenD.
    for underlying in ["BURSA:1155", "1155"] {
        let e = ask_chain(
            &ctx,
            json!({"underlying": underlying, "account": "MOOMOO-MY"}),
        )
        .await;
        assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
        let m = e["error"]["message"].as_str().unwrap();
        assert!(
            m.contains("Bursa Malaysia lists no options") && m.contains("1155"),
            "{m}"
        );
    }
    assert_eq!(asked(&fake, pb::QOT_GET_OPTION_EXPIRATION_DATE), 0);
    // An underlying OpenD does not know.
    let e = ask_chain(&ctx, json!({"underlying": "ZZZZ", "account": "MOOMOO-MY"})).await;
    assert_eq!(e["error"]["code"], "unknown_symbol", "{e:#}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("ZZZZ"),
        "{e:#}"
    );
    assert!(
        e["error"]["hint"]
            .as_str()
            .unwrap()
            .contains("Unknown stock ZZZZ"),
        "{e:#}"
    );

    // OpenD refuses the chain: its message, the proto and the retType.
    fake.fail(OpenDFailure::RetType(
        pb::QOT_GET_OPTION_CHAIN,
        "Owner has no option chain".into(),
    ));
    let e = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "MOOMOO-MY"})).await;
    assert_eq!(e["error"]["code"], "invalid_argument", "{e:#}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("3209") && m.contains("Owner has no option chain"),
        "{m}"
    );
    // OpenD's own frequency refusal says the chain's limit, not the history's.
    fake.fail(OpenDFailure::RetType(
        pb::QOT_GET_OPTION_CHAIN,
        TOO_FREQUENT.into(),
    ));
    let e = ask_chain(&ctx, json!({"underlying": "AAPL", "account": "MOOMOO-MY"})).await;
    assert_eq!(e["error"]["code"], "broker_unavailable", "{e:#}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(m.contains("10 option-chain requests per 30 s"), "{m}");
    fake.fail(OpenDFailure::None);

    // A silent OpenD: cut off at the account's timeout, never hanging.
    let slow = ctx_of(
        opend(fake.port, Duration::from_millis(400)),
        Duration::from_secs(10),
    );
    fake.fail(OpenDFailure::Silent);
    let started = Instant::now();
    let e = ask_chain(&slow, json!({"underlying": "AAPL", "account": "MOOMOO-MY"})).await;
    assert_eq!(e["error"]["code"], "broker_timeout", "{e:#}");
    assert!(started.elapsed() < Duration::from_secs(8));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tradedesk_keeps_within_opends_request_limits() {
    let fake = OpenDFake::start(state()).await;
    let ctx = desk(&fake);
    let args = json!({"underlying": "AAPL", "account": "MOOMOO-MY", "strikes_around": 1});
    for i in 0..10 {
        let r = ask_chain(&ctx, args.clone()).await;
        assert_eq!(r["status"], "ok", "call {i}: {r:#}");
    }
    // The eleventh would pass OpenD's 10 per 30 s: refused here, not sent.
    let e = ask_chain(&ctx, args).await;
    assert_eq!(e["error"]["code"], "broker_unavailable", "{e:#}");
    let m = e["error"]["message"].as_str().unwrap();
    assert!(m.contains("per 30 s") && m.contains("did not send"), "{m}");
    assert!(
        e["error"]["hint"].as_str().unwrap().contains("retry in"),
        "{e:#}"
    );
    assert_eq!(asked(&fake, pb::QOT_GET_OPTION_CHAIN), 10);
    assert_eq!(fake.snapshot().too_frequent, 0);
}
