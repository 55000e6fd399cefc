//! Rows that add up to what the fills say: a fill's commission shared among the lots it
//! opens or closes adds up to the fill's commission, the lots one fill closes add up to
//! that trade's P&L rounded once, and each row's net is its gross less its commissions
//! (`docs/methodology/realized-pnl.md`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_brokers::{BookBroker, parse_book};
use tradedesk_tools::{ToolContext, call};

fn realized(fills: &[Value], currency: &str) -> Value {
    let book = json!({
        "format": "tradedesk-book/1", "base_currency": "USD", "as_of": "2026-03-31",
        "accounts": [{"id": "A", "broker": "ibkr", "currency": "USD"}],
        "instruments": [{"exchange": "X", "symbol": "S", "currency": "USD", "asset_class": "equity"}],
        "fills": fills,
        "fx_rates": [{"base": "EUR", "quote": "USD", "rate": "1.1", "date": "2026-01-01"}]
    });
    let book = parse_book("rounding", &book.to_string()).unwrap();
    let ctx = ToolContext::new("test").with_broker(Arc::new(BookBroker::new("r", book)), None);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let out = rt
        .block_on(call(
            &ctx,
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2026-03-31", "include_lots": true, "currency": currency}),
        ))
        .unwrap()
        .structured;
    assert_eq!(out["status"], "ok", "{out}");
    out
}

fn fill(id: &str, side: &str, quantity: &str, price: &str, commission: &str, day: u32) -> Value {
    json!({"id": id, "account": "A", "exchange": "X", "symbol": "S", "side": side,
           "quantity": quantity, "price": price, "commission": commission,
           "time": format!("2026-01-{day:02}T15:00:00Z")})
}

fn cents(v: &Value) -> i64 {
    let d = Decimal::from_str_exact(&v.as_f64().unwrap().to_string()).unwrap();
    i64::try_from((d * Decimal::ONE_HUNDRED).round().mantissa()).unwrap()
}

fn column(out: &Value, field: &str) -> Vec<i64> {
    out["lots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| cents(&l[field]))
        .collect()
}

#[test]
fn a_commission_shared_over_three_closes_adds_up_to_the_commission() {
    // 3 bought with a 1.00 commission, sold one at a time without commission: the
    // shares are 0.333..., each rounded alone would give 0.99 in all.
    let out = realized(
        &[
            fill("b", "buy", "3", "10", "1.00", 2),
            fill("s1", "sell", "1", "11", "0", 3),
            fill("s2", "sell", "1", "11", "0", 4),
            fill("s3", "sell", "1", "11", "0", 5),
        ],
        "USD",
    );
    let commissions = column(&out, "commissions");
    assert_eq!(commissions.iter().sum::<i64>(), 100, "{commissions:?}");
    assert_eq!(commissions, [33, 34, 33]);
    let (gross, net) = (column(&out, "gross_pnl"), column(&out, "net_pnl"));
    for i in 0..3 {
        assert_eq!(net[i], gross[i] - commissions[i], "lot {i}");
    }
    assert_eq!(cents(&out["commissions"]), 100);
    // Each sale's own net, 0.666..., is rounded once (0.67): the figure a broker states
    // per closing trade. The gross of the middle row carries the commission's rounding.
    assert_eq!(net, [67, 67, 67]);
    assert_eq!(gross, [100, 101, 100]);
    assert_eq!(cents(&out["net_pnl"]), 201);
}

#[test]
fn thirteen_lots_of_one_trade_add_up_to_the_trade() {
    // 13 buys of one share at 10.003, one sell of 13 at 10.00: each lot is -0.003, which
    // rounds to -0.00 alone, while the trade lost 0.039, that is 0.04.
    let mut fills: Vec<Value> = (0..13)
        .map(|i| fill(&format!("b{i}"), "buy", "1", "10.003", "0", 2 + i))
        .collect();
    fills.push(fill("s", "sell", "13", "10.00", "0", 20));
    for currency in ["USD", "EUR"] {
        let out = realized(&fills, currency);
        let net = column(&out, "net_pnl");
        assert_eq!(net.iter().sum::<i64>(), -4, "{currency}: {net:?}");
        // In EUR: 0.039 USD / 1.1 = 0.03545..., so 0.04 rounded once.
        assert_eq!(cents(&out["net_pnl"]), -4, "{currency}");
        let converted = column(&out, "net_pnl_converted");
        assert_eq!(
            converted.iter().sum::<i64>(),
            cents(&out["net_pnl"]),
            "{currency}"
        );
        assert_eq!(
            cents(&out["biggest_loss"]["net_pnl"]),
            cents(&out["net_pnl"])
        );
    }
}
