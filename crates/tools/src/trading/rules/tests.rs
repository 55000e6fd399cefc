//! Every guard at its boundary, both sides, over plain facts: no sim, no SQLite, no
//! JSON. Each row starts from one order that passes everything (a market buy of 10 AAPL
//! at an ask of 100 USD, valued at 1000 USD: exactly the default per-order limit), changes
//! one thing, and names the rule and the verdict it must get.

use std::path::Path;

use chrono::{TimeZone, Utc};
use rust_decimal::Decimal;
use rust_decimal_macros::dec;
use tradedesk_core::instrument::AssetClass;
use tradedesk_core::{
    Currency, ErrorCode, InstrumentKey, Mode, Order, OrderType, Quote, Side, TradableInstrument,
};

use super::super::facts::{Day, Exposure, Facts, Margin, Reread, TicketFact};
use super::super::orders::idempotency_fingerprint;
use super::{Policy, Rule, check, reservation};

/// An order, its facts and the policy: what one row changes.
struct Case {
    order: Order,
    facts: Facts,
    policy: Policy,
}

fn key() -> InstrumentKey {
    InstrumentKey::new("NASDAQ", "AAPL")
}

fn base_case() -> Case {
    let inst = TradableInstrument {
        key: key(),
        currency: Currency::USD,
        asset_class: AssetClass::Equity,
        multiplier: Decimal::ONE,
        lot_step: Decimal::ONE,
        min_quantity: Decimal::ONE,
        max_quantity: Decimal::MAX,
        tick: dec!(0.01),
        pip: None,
        margin_rate: Decimal::ONE,
        unit: "shares",
    };
    let quote = Quote {
        key: key(),
        currency: Currency::USD,
        bid: dec!(99.9),
        ask: dec!(100),
        time: Utc.with_ymd_and_hms(2026, 1, 5, 15, 0, 0).unwrap(),
    };
    Case {
        order: Order::market("sim", "AAPL", Side::Buy, dec!(10), Mode::Paper),
        facts: Facts {
            inst,
            quote: Some(quote),
            prior: None,
            ticket: None,
            account_broker: "sim".to_owned(),
            takes_magic: false,
            held_here: Decimal::ZERO,
            base: Currency::USD,
            rate: Some(Decimal::ONE),
            kill_switch: false,
            day: Day::default(),
            exposure: Some(Exposure {
                total: dec!(100000),
                ..Exposure::default()
            }),
            margin: None,
            commission: None,
            notes: Vec::new(),
        },
        policy: Policy::defaults(Path::new("/state")),
    }
}

fn limit(c: &mut Case, price: Decimal) {
    c.order.terms.order_type = OrderType::Limit;
    c.order.terms.limit_price = Some(price);
}

fn sell(c: &mut Case) {
    c.order.terms.side = Side::Sell;
}

/// The account already holds 10 long: a sell of 10 only reduces it.
fn reducing(c: &mut Case) {
    sell(c);
    c.facts.held_here = dec!(10);
}

fn margin(available: Decimal, to_account: Option<Decimal>) -> Margin {
    Margin {
        currency: Currency::USD,
        available,
        what: "free margin",
        rate: Decimal::ONE,
        to_account,
    }
}

type Row = (&'static str, Rule, bool, fn(&mut Case));

/// (what the row is, the rule, whether it passes, the change).
const ROWS: &[Row] = &[
    ("the base order", Rule::QuantityOrNotional, true, |_| {}),
    ("both given", Rule::QuantityOrNotional, false, |c| {
        c.order.notional = Some(dec!(500));
    }),
    ("neither given", Rule::QuantityOrNotional, false, |c| {
        c.order.quantity = None;
    }),
    ("notional alone", Rule::QuantityOrNotional, true, |c| {
        c.order.quantity = None;
        c.order.notional = Some(dec!(500));
    }),
    ("the smallest quantity", Rule::QuantityPositive, true, |c| {
        c.order.quantity = Some(dec!(0.01));
        c.facts.inst.lot_step = dec!(0.01);
        c.facts.inst.min_quantity = dec!(0.01);
    }),
    ("quantity zero", Rule::QuantityPositive, false, |c| {
        c.order.quantity = Some(Decimal::ZERO);
    }),
    ("notional zero", Rule::QuantityPositive, false, |c| {
        c.order.quantity = None;
        c.order.notional = Some(Decimal::ZERO);
    }),
    ("on the step", Rule::LotStep, true, |c| {
        c.facts.inst.lot_step = dec!(5);
        c.facts.inst.min_quantity = dec!(5);
    }),
    ("off the step", Rule::LotStep, false, |c| {
        c.order.quantity = Some(dec!(10.5));
    }),
    ("at the minimum", Rule::MinQuantity, true, |c| {
        c.facts.inst.min_quantity = dec!(10);
    }),
    ("under the minimum", Rule::MinQuantity, false, |c| {
        c.facts.inst.min_quantity = dec!(11);
    }),
    ("at the maximum", Rule::MaxQuantity, true, |c| {
        c.facts.inst.max_quantity = dec!(10);
    }),
    ("over the maximum", Rule::MaxQuantity, false, |c| {
        c.facts.inst.max_quantity = dec!(9);
    }),
    ("limit with its price", Rule::PricesMatchType, true, |c| {
        limit(c, dec!(99));
    }),
    ("limit without a price", Rule::PricesMatchType, false, |c| {
        c.order.terms.order_type = OrderType::Limit;
    }),
    (
        "market with a limit price",
        Rule::PricesMatchType,
        false,
        |c| {
            c.order.terms.limit_price = Some(dec!(99));
        },
    ),
    (
        "stop without a stop price",
        Rule::PricesMatchType,
        false,
        |c| {
            c.order.terms.order_type = OrderType::Stop;
        },
    ),
    ("the smallest price", Rule::PricePositive, true, |c| {
        limit(c, dec!(0.01));
    }),
    ("a stop-loss of zero", Rule::PricePositive, false, |c| {
        c.order.terms.stop_loss = Some(Decimal::ZERO);
    }),
    ("on the tick", Rule::TickSize, true, |c| {
        limit(c, dec!(100.01));
    }),
    ("off the tick", Rule::TickSize, false, |c| {
        limit(c, dec!(100.005));
    }),
    ("buy: sl under tp", Rule::SlAboveTp, true, |c| {
        c.order.terms.stop_loss = Some(dec!(90));
        c.order.terms.take_profit = Some(dec!(110));
    }),
    ("buy: sl at tp", Rule::SlAboveTp, false, |c| {
        c.order.terms.stop_loss = Some(dec!(110));
        c.order.terms.take_profit = Some(dec!(110));
    }),
    ("sell: sl over tp", Rule::SlBelowTp, true, |c| {
        sell(c);
        c.order.terms.stop_loss = Some(dec!(110));
        c.order.terms.take_profit = Some(dec!(90));
    }),
    ("sell: sl at tp", Rule::SlBelowTp, false, |c| {
        sell(c);
        c.order.terms.stop_loss = Some(dec!(90));
        c.order.terms.take_profit = Some(dec!(90));
    }),
    (
        "buy: sl a tick under the ask",
        Rule::SlAbovePrice,
        true,
        |c| {
            c.order.terms.stop_loss = Some(dec!(99.99));
        },
    ),
    ("buy: sl at the ask", Rule::SlAbovePrice, false, |c| {
        c.order.terms.stop_loss = Some(dec!(100));
    }),
    (
        "buy: sl at the limit, not the ask",
        Rule::SlAbovePrice,
        false,
        |c| {
            limit(c, dec!(95));
            c.order.terms.stop_loss = Some(dec!(95));
        },
    ),
    (
        "sell: sl a tick over the bid",
        Rule::SlBelowPrice,
        true,
        |c| {
            sell(c);
            c.order.terms.stop_loss = Some(dec!(99.91));
        },
    ),
    ("sell: sl at the bid", Rule::SlBelowPrice, false, |c| {
        sell(c);
        c.order.terms.stop_loss = Some(dec!(99.9));
    }),
    (
        "buy: tp a tick over the ask",
        Rule::TpBelowPrice,
        true,
        |c| {
            c.order.terms.take_profit = Some(dec!(100.01));
        },
    ),
    ("buy: tp at the ask", Rule::TpBelowPrice, false, |c| {
        c.order.terms.take_profit = Some(dec!(100));
    }),
    (
        "sell: tp a tick under the bid",
        Rule::TpAbovePrice,
        true,
        |c| {
            sell(c);
            c.order.terms.take_profit = Some(dec!(99.89));
        },
    ),
    ("sell: tp at the bid", Rule::TpAbovePrice, false, |c| {
        sell(c);
        c.order.terms.take_profit = Some(dec!(99.9));
    }),
    ("31 characters", Rule::CommentLength, true, |c| {
        c.order.terms.comment = Some("é".repeat(31));
    }),
    ("32 characters", Rule::CommentLength, false, |c| {
        c.order.terms.comment = Some("a".repeat(32));
    }),
    ("64 characters", Rule::ClientOrderIdFormat, true, |c| {
        c.order.client_order_id = Some(format!("a-_.:{}", "9".repeat(59)));
    }),
    ("65 characters", Rule::ClientOrderIdFormat, false, |c| {
        c.order.client_order_id = Some("a".repeat(65));
    }),
    ("a space", Rule::ClientOrderIdFormat, false, |c| {
        c.order.client_order_id = Some("a b".to_owned());
    }),
    ("an empty id", Rule::ClientOrderIdFormat, false, |c| {
        c.order.client_order_id = Some(String::new());
    }),
    ("a new id", Rule::ClientOrderIdReused, true, |c| {
        c.order.client_order_id = Some("abc".to_owned());
    }),
    (
        "the same order again",
        Rule::ClientOrderIdReused,
        true,
        |c| {
            c.order.client_order_id = Some("abc".to_owned());
            c.facts.prior = Some((idempotency_fingerprint(&c.order, &key()), None));
        },
    ),
    (
        "another order's id",
        Rule::ClientOrderIdReused,
        false,
        |c| {
            c.order.client_order_id = Some("abc".to_owned());
            c.facts.prior = Some(("another".to_owned(), Some("o-1".to_owned())));
        },
    ),
    ("an open ticket", Rule::TicketFound, true, |c| {
        sell(c);
        c.order.terms.ticket = Some("7".to_owned());
        c.facts.ticket = Some(TicketFact::Open {
            side: Side::Buy,
            quantity: dec!(10),
        });
    }),
    ("no such ticket", Rule::TicketFound, false, |c| {
        c.order.terms.ticket = Some("7".to_owned());
        c.facts.ticket = Some(TicketFact::Missing);
    }),
    ("another symbol's ticket", Rule::TicketFound, false, |c| {
        c.order.terms.ticket = Some("7".to_owned());
        c.facts.ticket = Some(TicketFact::OtherSymbol("MSFT".to_owned()));
    }),
    (
        "a market close of a ticket",
        Rule::TicketCloseOnly,
        true,
        |c| {
            c.order.terms.ticket = Some("7".to_owned());
            c.facts.ticket = Some(TicketFact::Missing);
        },
    ),
    (
        "a limit order on a ticket",
        Rule::TicketCloseOnly,
        false,
        |c| {
            limit(c, dec!(99));
            c.order.terms.ticket = Some("7".to_owned());
            c.facts.ticket = Some(TicketFact::Missing);
        },
    ),
    ("a buy on a sell ticket", Rule::TicketSide, true, |c| {
        c.order.terms.ticket = Some("7".to_owned());
        c.facts.ticket = Some(TicketFact::Open {
            side: Side::Sell,
            quantity: dec!(10),
        });
    }),
    ("a buy on a buy ticket", Rule::TicketSide, false, |c| {
        c.order.terms.ticket = Some("7".to_owned());
        c.facts.ticket = Some(TicketFact::Open {
            side: Side::Buy,
            quantity: dec!(10),
        });
    }),
    ("all of the ticket", Rule::CloseExceedsTicket, true, |c| {
        c.order.terms.ticket = Some("7".to_owned());
        c.facts.ticket = Some(TicketFact::Open {
            side: Side::Sell,
            quantity: dec!(10),
        });
    }),
    (
        "more than the ticket",
        Rule::CloseExceedsTicket,
        false,
        |c| {
            c.order.terms.ticket = Some("7".to_owned());
            c.facts.ticket = Some(TicketFact::Open {
                side: Side::Sell,
                quantity: dec!(9.99),
            });
        },
    ),
    ("magic on MetaTrader", Rule::MagicSupported, true, |c| {
        c.order.terms.magic = Some(7);
        c.facts.account_broker = "metatrader".to_owned();
        c.facts.takes_magic = true;
    }),
    ("magic elsewhere", Rule::MagicSupported, false, |c| {
        c.order.terms.magic = Some(7);
    }),
    ("no lists", Rule::SymbolAllowed, true, |_| {}),
    (
        "on allow_symbols, qualified",
        Rule::SymbolAllowed,
        true,
        |c| {
            c.policy.allow_symbols = vec![" nasdaq:aapl ".to_owned()];
        },
    ),
    ("not on allow_symbols", Rule::SymbolAllowed, false, |c| {
        c.policy.allow_symbols = vec!["MSFT".to_owned()];
    }),
    ("on deny_symbols", Rule::SymbolAllowed, false, |c| {
        c.policy.deny_symbols = vec!["aapl".to_owned()];
    }),
    (
        "denied, but only reducing",
        Rule::SymbolAllowed,
        true,
        |c| {
            c.policy.deny_symbols = vec!["AAPL".to_owned()];
            reducing(c);
        },
    ),
    ("off", Rule::KillSwitch, true, |_| {}),
    ("on", Rule::KillSwitch, false, |c| {
        c.facts.kill_switch = true;
    }),
    ("on, but only reducing", Rule::KillSwitch, true, |c| {
        c.facts.kill_switch = true;
        reducing(c);
    }),
    ("on, selling more than held", Rule::KillSwitch, false, |c| {
        c.facts.kill_switch = true;
        sell(c);
        c.facts.held_here = dec!(9);
    }),
    (
        "on, a limit order against the position",
        Rule::KillSwitch,
        false,
        |c| {
            c.facts.kill_switch = true;
            reducing(c);
            limit(c, dec!(101));
        },
    ),
    ("on, a close", Rule::KillSwitch, true, |c| {
        c.facts.kill_switch = true;
        c.order.reduce_only = true;
    }),
    ("a quote and a rate", Rule::PriceAvailable, true, |_| {}),
    ("no quote", Rule::PriceAvailable, false, |c| {
        c.facts.quote = None;
    }),
    ("no rate", Rule::PriceAvailable, false, |c| {
        c.facts.rate = None;
    }),
    ("at the limit", Rule::MaxOrderNotional, true, |_| {}),
    (
        "over the limit by a cent",
        Rule::MaxOrderNotional,
        false,
        |c| {
            c.policy.max_order_notional = dec!(999.99);
        },
    ),
    (
        "over the limit by less than rounding",
        Rule::MaxOrderNotional,
        false,
        |c| {
            c.facts.rate = Some(dec!(1.000001));
        },
    ),
    ("too large to value", Rule::MaxOrderNotional, false, |c| {
        c.order.quantity = Some(Decimal::MAX);
    }),
    (
        "over the limit, but only reducing",
        Rule::MaxOrderNotional,
        true,
        |c| {
            c.policy.max_order_notional = dec!(1);
            reducing(c);
        },
    ),
    (
        "the day reaches the limit",
        Rule::MaxDailyNotional,
        true,
        |c| {
            c.facts.day.sum = dec!(4000);
        },
    ),
    (
        "the day passes the limit",
        Rule::MaxDailyNotional,
        false,
        |c| {
            c.facts.day.sum = dec!(4000.01);
        },
    ),
    (
        "the day passes the limit, only reducing",
        Rule::MaxDailyNotional,
        true,
        |c| {
            c.facts.day.sum = dec!(4999);
            reducing(c);
        },
    ),
    (
        "the 50th order of the day",
        Rule::MaxOrdersPerDay,
        true,
        |c| {
            c.facts.day.count = 49;
        },
    ),
    (
        "the 51st order of the day",
        Rule::MaxOrdersPerDay,
        false,
        |c| {
            c.facts.day.count = 50;
        },
    ),
    (
        "the 51st, only reducing",
        Rule::MaxOrdersPerDay,
        true,
        |c| {
            c.facts.day.count = 50;
            reducing(c);
        },
    ),
    ("at 25 %", Rule::MaxPositionWeight, true, |c| {
        c.facts.exposure = Some(Exposure {
            total: dec!(4000),
            ..Exposure::default()
        });
    }),
    ("over 25 %", Rule::MaxPositionWeight, false, |c| {
        c.facts.exposure = Some(Exposure {
            total: dec!(3999.99),
            ..Exposure::default()
        });
    }),
    (
        "held and working count",
        Rule::MaxPositionWeight,
        false,
        |c| {
            c.facts.exposure = Some(Exposure {
                total: dec!(8000),
                held: dec!(600),
                working: dec!(400.01),
                ..Exposure::default()
            });
        },
    ),
    (
        "a short position offsets a buy",
        Rule::MaxPositionWeight,
        true,
        |c| {
            c.facts.exposure = Some(Exposure {
                total: dec!(4000),
                held: dec!(-1000),
                ..Exposure::default()
            });
        },
    ),
    (
        "an order in flight the same way",
        Rule::MaxPositionWeight,
        false,
        |c| {
            c.facts.exposure = Some(Exposure {
                total: dec!(4000),
                unseen: vec![dec!(0.01)],
                ..Exposure::default()
            });
        },
    ),
    (
        "an order in flight the other way",
        Rule::MaxPositionWeight,
        true,
        |c| {
            c.facts.exposure = Some(Exposure {
                total: dec!(4000),
                unseen: vec![dec!(-500)],
                ..Exposure::default()
            });
        },
    ),
    (
        "a portfolio worth nothing",
        Rule::MaxPositionWeight,
        false,
        |c| {
            c.facts.exposure = Some(Exposure::default());
        },
    ),
    (
        "an account that did not answer",
        Rule::MaxPositionWeight,
        false,
        |c| {
            c.facts.exposure = Some(Exposure {
                total: dec!(100000),
                unknown: vec!["tws".to_owned()],
                ..Exposure::default()
            });
        },
    ),
    (
        "not read, but only reducing",
        Rule::MaxPositionWeight,
        true,
        |c| {
            c.facts.exposure = None;
            reducing(c);
        },
    ),
    ("margin covers it exactly", Rule::FreeMargin, true, |c| {
        c.facts.margin = Some(margin(dec!(1000), Some(Decimal::ONE)));
    }),
    ("margin short by a cent", Rule::FreeMargin, false, |c| {
        c.facts.margin = Some(margin(dec!(999.99), Some(Decimal::ONE)));
    }),
    (
        "at 1:30, a thirtieth is needed",
        Rule::FreeMargin,
        true,
        |c| {
            let mut m = margin(dec!(34), Some(Decimal::ONE));
            m.rate = Decimal::ONE / dec!(30);
            c.facts.margin = Some(m);
        },
    ),
    (
        "converted into the account's currency",
        Rule::FreeMargin,
        false,
        |c| {
            c.facts.margin = Some(margin(dec!(1000), Some(dec!(1.01))));
        },
    ),
    (
        "no rate to the account's currency",
        Rule::FreeMargin,
        false,
        |c| {
            c.facts.margin = Some(margin(dec!(1_000_000), None));
        },
    ),
    ("short, but only reducing", Rule::FreeMargin, true, |c| {
        c.facts.margin = Some(margin(Decimal::ZERO, None));
        reducing(c);
    }),
];

/// The verdict `rule` got, and every failing rule, for the row's case.
fn verdict(change: fn(&mut Case), rule: Rule) -> (Option<bool>, Vec<&'static str>) {
    let mut case = base_case();
    change(&mut case);
    let eval = check(&case.order, &case.facts, &case.policy);
    let failing = eval
        .checks
        .iter()
        .filter(|c| !c.passed)
        .map(|c| c.rule.name())
        .collect();
    let got = eval
        .checks
        .iter()
        .filter(|c| c.rule == rule)
        .map(|c| c.passed)
        .reduce(|a, b| a && b);
    (got, failing)
}

#[test]
fn the_base_order_passes_every_rule() {
    let case = base_case();
    let eval = check(&case.order, &case.facts, &case.policy);
    assert!(eval.allowed(), "{:#?}", eval.checks);
    assert_eq!(eval.notional_base, Some(dec!(1000)));
    let checked = eval.checked.as_ref().unwrap();
    assert!(!checked.reduces());
    assert!(checked.weight().is_some());
}

#[test]
fn every_rule_at_its_boundary() {
    let mut wrong = Vec::new();
    for (what, rule, passes, change) in ROWS {
        let (got, failing) = verdict(*change, *rule);
        if got != Some(*passes) {
            wrong.push(format!(
                "{}: {what}: wanted {}, got {got:?} (failing: {failing:?})",
                rule.name(),
                if *passes { "pass" } else { "fail" },
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A checked order, the only kind a request is made of, is had exactly when every rule
/// passed: never from a row where its rule fails.
#[test]
fn a_checked_order_only_when_every_rule_passed() {
    let mut wrong = Vec::new();
    for (what, rule, passes, change) in ROWS {
        let mut case = base_case();
        change(&mut case);
        let eval = check(&case.order, &case.facts, &case.policy);
        let checked = eval.checked.is_some();
        if checked != eval.allowed() || (checked && !*passes) {
            wrong.push(format!(
                "{}: {what}: checked {checked}, allowed {}",
                rule.name(),
                eval.allowed()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_request_is_the_checked_orders_terms_unchanged() {
    let mut case = base_case();
    limit(&mut case, dec!(100));
    case.order.terms.take_profit = Some(dec!(110));
    case.order.terms.comment = Some("why".to_owned());
    let eval = check(&case.order, &case.facts, &case.policy);
    let checked = eval.checked.as_ref().unwrap();
    assert_eq!(
        (checked.quantity(), checked.value(), checked.notional_base()),
        (dec!(10), dec!(1000), dec!(1000))
    );
    let r = checked.request("td-1".to_owned());
    assert_eq!(r.terms, case.order.terms);
    assert_eq!(
        (r.key, r.quantity, r.client_order_id.as_str(), r.reduce_only),
        (key(), dec!(10), "td-1", false)
    );
    // An order that only reduces is sent as one.
    let mut case = base_case();
    reducing(&mut case);
    let eval = check(&case.order, &case.facts, &case.policy);
    let r = eval.checked.as_ref().unwrap().request("td-2".to_owned());
    assert!(r.reduce_only);
}

/// The rules `check` runs: each has a row that passes and one that fails. The others
/// (`close_exceeds_position`, `ticket_required`, `sl_or_tp_required`, `no_position`,
/// `order_reference`) are `close_position`'s, `modify_position`'s and `cancel_order`'s:
/// `pure_tool_rules` below tests the first four; `order_reference` (exactly one of two
/// ids) is tested through `cancel_order` in tests/trading.rs.
#[test]
fn every_checked_rule_has_a_row_each_way() {
    let tool_only = [
        Rule::CloseExceedsPosition,
        Rule::TicketRequired,
        Rule::SlOrTpRequired,
        Rule::NoPosition,
        Rule::OrderReference,
    ];
    let missing: Vec<String> = Rule::ALL
        .iter()
        .filter(|r| !tool_only.contains(*r))
        .flat_map(|r| {
            [true, false]
                .into_iter()
                .filter(move |side| !ROWS.iter().any(|(_, rule, p, _)| rule == r && *p == *side))
                .map(move |side| {
                    format!("{} {}", r.name(), if side { "passing" } else { "failing" })
                })
        })
        .collect();
    assert!(missing.is_empty(), "no row for: {missing:?}");
}

#[test]
fn the_order_of_the_checks_is_the_documented_one() {
    let mut case = base_case();
    limit(&mut case, dec!(100));
    case.order.terms.stop_loss = Some(dec!(90));
    case.order.terms.take_profit = Some(dec!(110));
    case.order.terms.comment = Some("c".to_owned());
    case.order.client_order_id = Some("id-1".to_owned());
    case.facts.margin = Some(margin(dec!(5000), Some(Decimal::ONE)));
    let eval = check(&case.order, &case.facts, &case.policy);
    let names: Vec<&str> = eval.checks.iter().map(|c| c.rule.name()).collect();
    assert_eq!(
        names,
        [
            "quantity_or_notional",
            "quantity_positive",
            "prices_match_type",
            "price_positive",
            "tick_size",
            "lot_step",
            "min_quantity",
            "max_quantity",
            "sl_above_tp",
            "sl_above_price",
            "tp_below_price",
            "comment_length",
            "client_order_id_format",
            "client_order_id_reused",
            "symbol_allowed",
            "kill_switch",
            "price_available",
            "max_order_notional",
            "max_daily_notional",
            "max_position_weight",
            "max_orders_per_day",
            "free_margin",
        ]
    );
}

#[test]
fn a_notional_is_sized_down_to_the_lot_step() {
    let mut case = base_case();
    case.order.quantity = None;
    case.order.notional = Some(dec!(1055));
    case.facts.inst.lot_step = dec!(0.5);
    let eval = check(&case.order, &case.facts, &case.policy);
    assert_eq!(eval.quantity, Some(dec!(10.5)));
    // Valued at its notional, not at the rounded quantity.
    assert_eq!(eval.notional, Some(dec!(1055)));
    assert!(eval.checks.iter().all(|c| c.rule != Rule::LotStep));
    assert!(eval.notes.iter().any(|n| n.contains("rounded down")));
    assert_eq!(
        eval.first_failure().map(|f| f.rule),
        Some(Rule::MaxOrderNotional)
    );
}

#[test]
fn the_valuation_price_is_the_highest_written() {
    let mut case = base_case();
    case.order.terms.order_type = OrderType::StopLimit;
    case.order.terms.limit_price = Some(dec!(101));
    case.order.terms.stop_price = Some(dec!(102));
    case.order.quantity = Some(dec!(9));
    let eval = check(&case.order, &case.facts, &case.policy);
    assert_eq!(eval.price, Some(dec!(102)));
    assert_eq!(eval.notional_base, Some(dec!(918)));
}

#[test]
fn names_codes_and_hints() {
    let mut names: Vec<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
    assert!(
        names
            .iter()
            .all(|n| { !n.is_empty() && n.chars().all(|c| c.is_ascii_lowercase() || c == '_') })
    );
    let count = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), count, "two rules share a name");
    assert!(Rule::ALL.iter().all(|r| !r.hint().is_empty()));
    for (rule, code) in [
        (Rule::LotStep, ErrorCode::InvalidQuantity),
        (Rule::CloseExceedsTicket, ErrorCode::InvalidQuantity),
        (Rule::TickSize, ErrorCode::InvalidOrder),
        (Rule::SymbolAllowed, ErrorCode::SymbolNotAllowed),
        (Rule::KillSwitch, ErrorCode::KillSwitch),
        (Rule::PriceAvailable, ErrorCode::PriceUnavailable),
        (Rule::MaxPositionWeight, ErrorCode::LimitExceeded),
        (Rule::FreeMargin, ErrorCode::LimitExceeded),
    ] {
        assert_eq!(rule.code(), code, "{}", rule.name());
    }
    let e = Rule::LotStep.error("10.5 shares in steps of 1");
    assert_eq!(e.rule, Some("lot_step"));
    assert_eq!(e.message, "lot_step: 10.5 shares in steps of 1");
    assert_eq!(e.hint, Rule::LotStep.hint());
}

// ---- The reservation ----

fn reread(case: &Case) -> Reread {
    Reread {
        kill_switch: case.facts.kill_switch,
        day: case.facts.day,
        unseen: case
            .facts
            .exposure
            .as_ref()
            .map(|e| e.unseen.clone())
            .unwrap_or_default(),
        margin: case.facts.margin.clone(),
    }
}

type ReserveRow = (&'static str, Option<Rule>, fn(&mut Reread));

const RESERVE_ROWS: &[ReserveRow] = &[
    ("nothing changed", None, |_| {}),
    ("the kill switch went on", Some(Rule::KillSwitch), |r| {
        r.kill_switch = true;
    }),
    ("the day filled up to the limit", None, |r| {
        r.day.sum = dec!(4000);
    }),
    (
        "the day went past the limit",
        Some(Rule::MaxDailyNotional),
        |r| {
            r.day.sum = dec!(4000.01);
        },
    ),
    ("the 50th order", None, |r| r.day.count = 49),
    ("the 51st order", Some(Rule::MaxOrdersPerDay), |r| {
        r.day.count = 50;
    }),
    ("an order in flight reached 25 %", None, |r| {
        r.unseen = vec![dec!(24000)];
    }),
    (
        "an order in flight passed 25 %",
        Some(Rule::MaxPositionWeight),
        |r| {
            r.unseen = vec![dec!(24000.01)];
        },
    ),
    ("the margin shrank to the order", None, |r| {
        r.margin = Some(margin(dec!(1000), Some(Decimal::ONE)));
    }),
    ("the margin shrank below it", Some(Rule::FreeMargin), |r| {
        r.margin = Some(margin(dec!(999.99), Some(Decimal::ONE)));
    }),
    (
        "the kill switch first, then the limits",
        Some(Rule::KillSwitch),
        |r| {
            r.kill_switch = true;
            r.day.count = 50;
        },
    ),
];

#[test]
fn the_reservation_decides_its_rules_again() {
    let mut case = base_case();
    case.facts.margin = Some(margin(dec!(5000), Some(Decimal::ONE)));
    let eval = check(&case.order, &case.facts, &case.policy);
    assert!(eval.allowed());
    let checked = eval.checked.as_ref().unwrap();
    let mut wrong = Vec::new();
    for (what, want, change) in RESERVE_ROWS {
        let mut again = reread(&case);
        change(&mut again);
        let got = reservation(checked, &case.facts, &again, &case.policy)
            .err()
            .map(|f| f.rule);
        if got != *want {
            wrong.push(format!("{what}: wanted {want:?}, got {got:?}"));
        }
        // The reservation's verdict is the evaluation's over the same facts.
        if let Some(rule) = got {
            let mut facts = case.facts.clone();
            facts.kill_switch = again.kill_switch;
            facts.day = again.day;
            facts.margin.clone_from(&again.margin);
            if let Some(e) = &mut facts.exposure {
                e.unseen.clone_from(&again.unseen);
            }
            let later = check(&case.order, &facts, &case.policy);
            if !later.checks.iter().any(|c| c.rule == rule && !c.passed) {
                wrong.push(format!("{what}: the evaluation passes {}", rule.name()));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_reducing_order_passes_the_reservation_whatever_changed() {
    let mut case = base_case();
    reducing(&mut case);
    case.facts.margin = Some(margin(dec!(5000), Some(Decimal::ONE)));
    let eval = check(&case.order, &case.facts, &case.policy);
    assert!(eval.allowed());
    let checked = eval.checked.as_ref().unwrap();
    assert!(checked.reduces());
    let again = Reread {
        kill_switch: true,
        day: Day {
            sum: dec!(1_000_000),
            count: 1000,
        },
        unseen: vec![dec!(-1_000_000)],
        margin: Some(margin(Decimal::ZERO, None)),
    };
    assert_eq!(
        reservation(checked, &case.facts, &again, &case.policy),
        Ok(())
    );
}

#[test]
fn the_reservation_runs_exactly_the_reserved_rules() {
    let reserved: Vec<Rule> = Rule::ALL.iter().copied().filter(|r| r.reserved()).collect();
    assert_eq!(
        reserved,
        [
            Rule::KillSwitch,
            Rule::MaxDailyNotional,
            Rule::MaxPositionWeight,
            Rule::MaxOrdersPerDay,
            Rule::FreeMargin,
        ]
    );
    // Each refuses at the reservation (the rows above), and nothing else can.
    for rule in reserved {
        assert!(
            RESERVE_ROWS.iter().any(|(_, r, _)| *r == Some(rule)),
            "{} has no reservation row",
            rule.name()
        );
    }
}

#[test]
fn pure_tool_rules() {
    let k = key();
    let fail = |c: super::Check| c.failure().map(|f| f.rule);
    // no_position
    assert_eq!(fail(super::position_held("a", &k, dec!(0.01))), None);
    assert_eq!(
        fail(super::position_held("a", &k, Decimal::ZERO)),
        Some(Rule::NoPosition)
    );
    // close_exceeds_position / close_exceeds_ticket, at the open quantity and past it
    let close = |held, q, t| super::close_quantity("a", &k, held, q, t).map_err(|f| f.rule);
    assert_eq!(close(dec!(-10), None, None), Ok(dec!(10)));
    assert_eq!(close(dec!(10), Some(dec!(10)), None), Ok(dec!(10)));
    assert_eq!(
        close(dec!(10), Some(dec!(10.01)), None),
        Err(Rule::CloseExceedsPosition)
    );
    assert_eq!(close(dec!(2), Some(dec!(2)), Some("7")), Ok(dec!(2)));
    assert_eq!(
        close(dec!(2), Some(dec!(2.01)), Some("7")),
        Err(Rule::CloseExceedsTicket)
    );
    assert_eq!(close(Decimal::ZERO, None, None), Err(Rule::NoPosition));
    // sl_or_tp_required
    assert_eq!(fail(super::levels_given(Some(dec!(1)), None)), None);
    assert_eq!(fail(super::levels_given(None, Some(dec!(1)))), None);
    assert_eq!(
        fail(super::levels_given(None, None)),
        Some(Rule::SlOrTpRequired)
    );
    // ticket_required
    let buy = ("1", Side::Buy, dec!(1));
    let buy2 = ("2", Side::Buy, dec!(2));
    let sold = ("3", Side::Sell, dec!(1));
    assert_eq!(fail(super::one_way("a", &k, "close_position", &[])), None);
    assert_eq!(
        fail(super::one_way("a", &k, "close_position", &[buy, buy2])),
        None
    );
    let both = super::one_way("a", &k, "modify_position", &[buy, sold]);
    assert_eq!(both.failure().map(|f| f.rule), Some(Rule::TicketRequired));
    assert!(
        both.detail.contains("1 (buy 1), 3 (sell 1)"),
        "{}",
        both.detail
    );
}

/// docs/methodology/trading.md lists every rule with its code, where it is decided and
/// its hint, exactly as the code has them.
#[test]
fn the_methodology_table_is_the_rules() {
    let page = include_str!("../../../../../docs/methodology/trading.md");
    for rule in Rule::ALL {
        let code = serde_json::to_value(rule.code()).unwrap();
        let decided = if rule.reserved() {
            "evaluation and reservation"
        } else {
            ""
        };
        let row = page
            .lines()
            .find(|l| l.starts_with(&format!("| `{}` |", rule.name())))
            .unwrap_or_else(|| panic!("no row for {}", rule.name()));
        let cells: Vec<&str> = row.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(
            cells.get(1).copied(),
            Some(format!("`{}`", code.as_str().unwrap()).as_str()),
            "{row}"
        );
        if !decided.is_empty() {
            assert_eq!(cells.get(2).copied(), Some(decided), "{row}");
        } else {
            assert_ne!(
                cells.get(2).copied(),
                Some("evaluation and reservation"),
                "{row}"
            );
        }
        assert_eq!(cells.get(3).copied(), Some(rule.hint()), "{row}");
    }
}
