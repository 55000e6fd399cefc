//! Every rule of docs/methodology/book-format.md: a valid book loads; each broken one is refused whole
//! with the JSON path and the rule.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use serde_json::{Value, json};
use tradedesk_brokers::{load_book, parse_book};

const SMALL: &str = include_str!("../../../tests/fixtures/small-book.json");

fn small() -> Value {
    serde_json::from_str(SMALL).unwrap()
}

/// Applies `edit` to the small book and returns the refusal's issues as `path: rule`.
fn refuse(edit: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut book = small();
    edit(&mut book);
    let err =
        parse_book("test.json", &book.to_string()).expect_err("the edited book must be refused");
    err.issues.iter().map(ToString::to_string).collect()
}

struct TestCase {
    name: &'static str,
    edit: fn(&mut Value),
    /// Expected start of the first issue: `path: rule...`.
    expect: &'static str,
}

#[test]
fn the_small_fixture_and_the_demo_load() {
    let book = parse_book("small", SMALL).unwrap();
    assert_eq!(book.accounts.len(), 2);
    assert_eq!(book.fills.len(), 7);
    // Replay order is by instant: the Bursa fill at 00:30+08:00 on Jan 2 is Jan 1 16:30 UTC.
    assert_eq!(book.fills[0].id, "M1");
    assert_eq!(book.fills[0].trade_date.to_string(), "2026-01-02");
    let demo = tradedesk_brokers::demo::demo_book().unwrap();
    assert!(demo.fills.len() >= 7);
}

#[test]
fn broken_books_are_refused_with_path_and_rule() {
    let cases = [
        TestCase {
            name: "format",
            edit: |b| b["format"] = json!("tradedesk-book/2"),
            expect: "format: must be exactly \"tradedesk-book/1\"",
        },
        TestCase {
            name: "missing format",
            edit: |b| {
                b.as_object_mut().unwrap().remove("format");
            },
            expect: "format: is required",
        },
        TestCase {
            name: "unknown top-level",
            edit: |b| b["extra"] = json!(1),
            expect: "extra: unknown field",
        },
        TestCase {
            name: "base currency",
            edit: |b| b["base_currency"] = json!("usd"),
            expect: "base_currency: 'usd' is not an upper-case ISO 4217",
        },
        TestCase {
            name: "as_of",
            edit: |b| b["as_of"] = json!("2026-02-30"),
            expect: "as_of: '2026-02-30' is not a YYYY-MM-DD",
        },
        TestCase {
            name: "too many places",
            edit: |b| b["fills"][0]["price"] = json!("1.0000000000000000001"),
            expect: "fills[0].price: '1.0000000000000000001' has more than 18 decimal places",
        },
        TestCase {
            name: "absurd size",
            edit: |b| b["marks"][0]["price"] = json!("50000000000000000000000000000"),
            expect: "marks[0].price: '50000000000000000000000000000' is larger than the supported 1e12",
        },
        TestCase {
            name: "duplicate account",
            edit: |b| b["accounts"][1]["id"] = json!("US-1"),
            expect: "accounts[1].id: duplicate account id 'US-1' (first at accounts[0])",
        },
        TestCase {
            name: "broker case",
            edit: |b| b["accounts"][0]["broker"] = json!("IBKR"),
            expect: "accounts[0].broker: 'IBKR' must be a lower-case",
        },
        TestCase {
            name: "exchange colon",
            edit: |b| b["instruments"][0]["exchange"] = json!("NAS:DAQ"),
            expect: "instruments[0].exchange: 'NAS:DAQ' must not contain ':'",
        },
        TestCase {
            name: "asset class",
            edit: |b| b["instruments"][0]["asset_class"] = json!("stock"),
            expect: "instruments[0].asset_class: 'stock' must be one of",
        },
        TestCase {
            name: "sector",
            edit: |b| b["instruments"][0]["sector"] = json!("Tech"),
            expect: "instruments[0].sector: 'Tech' must be one of the eleven GICS",
        },
        TestCase {
            name: "country",
            edit: |b| b["instruments"][0]["country"] = json!("USA"),
            expect: "instruments[0].country: 'USA' must be an ISO 3166 alpha-2",
        },
        TestCase {
            name: "multiplier",
            edit: |b| b["instruments"][1]["multiplier"] = json!("0"),
            expect: "instruments[1].multiplier: must be > 0",
        },
        TestCase {
            name: "duplicate instrument",
            edit: |b| b["instruments"][1] = b["instruments"][0].clone(),
            expect: "instruments[1]: duplicate instrument NASDAQ:AAPL",
        },
        TestCase {
            name: "quantity zero",
            edit: |b| b["fills"][2]["quantity"] = json!("0"),
            expect: "fills[2].quantity: must be > 0",
        },
        TestCase {
            name: "quantity negative",
            edit: |b| b["fills"][2]["quantity"] = json!("-5"),
            expect: "fills[2].quantity: must be > 0",
        },
        TestCase {
            name: "quantity number",
            edit: |b| b["fills"][2]["quantity"] = json!(5),
            expect: "fills[2].quantity: must be a decimal string",
        },
        TestCase {
            name: "quantity exponent",
            edit: |b| b["fills"][2]["quantity"] = json!("1e3"),
            expect: "fills[2].quantity: '1e3' must be a decimal string",
        },
        TestCase {
            name: "price negative",
            edit: |b| b["fills"][0]["price"] = json!("-1"),
            expect: "fills[0].price: must be >= 0",
        },
        TestCase {
            name: "commission negative",
            edit: |b| b["fills"][0]["commission"] = json!("-1.00"),
            expect: "fills[0].commission: must be >= 0",
        },
        TestCase {
            name: "unknown commission with a figure",
            edit: |b| b["fills"][5]["commission"] = json!("3.00"),
            expect: "fills[5].commission: must be absent or \"0\" when commission_known is false",
        },
        TestCase {
            name: "side",
            edit: |b| b["fills"][0]["side"] = json!("long"),
            expect: "fills[0].side: 'long' must be buy or sell",
        },
        TestCase {
            name: "time without offset",
            edit: |b| b["fills"][0]["time"] = json!("2026-01-05T10:00:00"),
            expect: "fills[0].time: '2026-01-05T10:00:00' is not an RFC 3339 time with an offset",
        },
        TestCase {
            name: "unknown account",
            edit: |b| b["fills"][0]["account"] = json!("NOPE"),
            expect: "fills[0].account: unknown account 'NOPE'",
        },
        TestCase {
            name: "unknown instrument",
            edit: |b| b["fills"][0]["symbol"] = json!("MSFT"),
            expect: "fills[0].symbol: instrument NASDAQ:MSFT is not listed in instruments",
        },
        TestCase {
            name: "duplicate fill id",
            edit: |b| b["fills"][1]["id"] = json!("A1"),
            expect: "fills[1].id: duplicate fill id 'A1' (first at fills[0])",
        },
        TestCase {
            name: "unknown fill field",
            edit: |b| b["fills"][0]["fee"] = json!("1"),
            expect: "fills[0].fee: unknown field",
        },
        TestCase {
            name: "cash kind",
            edit: |b| b["cash"][0]["kind"] = json!("transfer"),
            expect: "cash[0].kind: 'transfer' must be one of",
        },
        TestCase {
            name: "deposit sign",
            edit: |b| b["cash"][0]["amount"] = json!("-5"),
            expect: "cash[0].amount: must be > 0",
        },
        TestCase {
            name: "fee sign",
            edit: |b| {
                b["cash"][0]["kind"] = json!("fee");
            },
            expect: "cash[0].amount: must be < 0",
        },
        TestCase {
            name: "mark date",
            edit: |b| b["marks"][0]["date"] = json!("31/03/2026"),
            expect: "marks[0].date: '31/03/2026' is not a YYYY-MM-DD",
        },
        TestCase {
            name: "duplicate mark",
            edit: |b| b["marks"][1] = b["marks"][0].clone(),
            expect: "marks[1]: duplicate mark",
        },
        TestCase {
            name: "fx rate zero",
            edit: |b| b["fx_rates"][0]["rate"] = json!("0"),
            expect: "fx_rates[0].rate: must be > 0",
        },
        TestCase {
            name: "fx same currency",
            edit: |b| b["fx_rates"][0]["quote"] = json!("USD"),
            expect: "fx_rates[0].quote: must differ from base",
        },
        TestCase {
            name: "fx duplicate",
            edit: |b| b["fx_rates"][1]["date"] = json!("2026-01-01"),
            expect: "fx_rates[1]: duplicate USD/MYR rate on 2026-01-01",
        },
        TestCase {
            name: "a fill worth more than the engine computes (issue 15)",
            edit: |b| {
                b["fills"][0]["quantity"] = json!("1000000000");
                b["fills"][0]["price"] = json!("1000000000000");
            },
            expect: "fills[0]: its value quantity x price x multiplier = 1000000000 x 1000000000000 x 1 = 1000000000000000000000 is larger than the supported 1e15",
        },
        TestCase {
            name: "the multiplier counts in a fill's value",
            edit: |b| {
                b["fills"][3]["quantity"] = json!("1000");
                b["fills"][3]["price"] = json!("1000000000000");
            },
            expect: "fills[3]: its value quantity x price x multiplier = 1000 x 1000000000000 x 5 = 5000000000000000 is larger than the supported 1e15",
        },
        TestCase {
            name: "an opening position worth more than the engine computes",
            edit: |b| {
                b["opening_positions"] = json!([{"account": "US-1", "exchange": "NASDAQ", "symbol": "AAPL",
                    "quantity": "-1000000", "cost": "1000000000000", "date": "2025-12-31"}]);
            },
            expect: "opening_positions[0]: its value quantity x cost x multiplier = -1000000 x 1000000000000 x 1 = 1000000000000000000 is larger than the supported 1e15",
        },
        TestCase {
            name: "a rate whose inverse is past the bound",
            edit: |b| b["fx_rates"][0]["rate"] = json!("0.000000009"),
            expect: "fx_rates[0].rate: '0.000000009' is outside the supported 1e-8 to 1e8",
        },
        TestCase {
            name: "a rate past the bound",
            edit: |b| b["fx_rates"][0]["rate"] = json!("100000000.5"),
            expect: "fx_rates[0].rate: '100000000.5' is outside the supported 1e-8 to 1e8",
        },
        TestCase {
            name: "reported account",
            edit: |b| b["reported_positions"][0]["account"] = json!("X"),
            expect: "reported_positions[0].account: unknown account 'X'",
        },
        TestCase {
            name: "fills not an array",
            edit: |b| b["fills"] = json!({}),
            expect: "fills: must be an array",
        },
        TestCase {
            name: "fill not an object",
            edit: |b| b["fills"][0] = json!("A1"),
            expect: "fills[0]: must be an object",
        },
    ];
    for case in cases {
        let issues = refuse(case.edit);
        assert!(
            issues.first().is_some_and(|i| i.starts_with(case.expect)),
            "{}: expected '{}', got {issues:?}",
            case.name,
            case.expect
        );
    }
}

#[test]
fn values_at_the_bounds_load() {
    let mut book = small();
    // 1e15 exactly, at 18 places, and rates at both ends of the range.
    book["fills"][0]["quantity"] = json!("1000");
    book["fills"][0]["price"] = json!("1000000000000");
    book["fills"][1]["quantity"] = json!("0.000000000000000001");
    book["fills"][1]["price"] = json!("999999999999.999999");
    book["fills"][3]["quantity"] = json!("200000000000");
    book["fills"][3]["price"] = json!("1000");
    book["fx_rates"][0]["rate"] = json!("0.00000001");
    book["fx_rates"][1]["rate"] = json!("100000000");
    let loaded = parse_book("bounds.json", &book.to_string()).unwrap();
    assert_eq!(loaded.fills.len(), 7);
}

#[test]
fn a_book_without_accounts_loads_empty() {
    let mut book = small();
    for key in ["accounts", "fills", "cash", "reported_positions"] {
        book[key] = json!([]);
    }
    let parsed = parse_book("x", &book.to_string()).unwrap();
    assert!(parsed.accounts.is_empty());
}

#[test]
fn every_issue_is_reported_not_only_the_first() {
    let issues = refuse(|b| {
        b["fills"][0]["quantity"] = json!("0");
        b["fills"][3]["price"] = json!("abc");
    });
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(issues[1].starts_with("fills[3].price"));
}

#[test]
fn a_key_given_twice_is_refused() {
    let text = SMALL.replacen(
        "\"quantity\": \"100\",",
        "\"quantity\": \"100\", \"quantity\": \"5\",",
        1,
    );
    assert_ne!(text, SMALL);
    let err = parse_book("x.json", &text).unwrap_err();
    assert_eq!(
        err.issues[0].to_string(),
        "fills[0].quantity: appears twice in the same object"
    );
}

#[test]
fn escaped_strings_load() {
    let text = SMALL.replacen("Small US account", "Small \\u0055S \\\"account\\\"", 1);
    let book = parse_book("x.json", &text).unwrap();
    assert_eq!(
        book.accounts[0].name.as_deref(),
        Some("Small US \"account\"")
    );
}

#[test]
fn malformed_json_names_line_and_column() {
    let err = parse_book("x.json", "{\n  \"format\": ,\n}").unwrap_err();
    assert_eq!(err.issues[0].path, "$");
    assert!(
        err.issues[0].rule.contains("line 2"),
        "{}",
        err.issues[0].rule
    );
}

#[test]
fn optional_sections_may_be_absent_and_defaults_apply() {
    let mut book = small();
    for key in ["cash", "marks", "fx_rates", "reported_positions"] {
        book.as_object_mut().unwrap().remove(key);
    }
    book["fills"][0]
        .as_object_mut()
        .unwrap()
        .remove("commission");
    let parsed = parse_book("x", &book.to_string()).unwrap();
    let a1 = parsed.fills.iter().find(|f| f.id == "A1").unwrap();
    assert!(a1.commission.is_zero());
    assert_eq!(a1.commission_currency.code(), "USD");
    assert!(a1.commission_known);
    assert!(parsed.cash.is_empty());
}

#[test]
fn a_missing_file_is_an_error_naming_it() {
    let err = load_book(std::path::Path::new("/nonexistent/book.json")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/book.json"));
    assert!(err.to_string().contains("cannot read the file"));
}

#[test]
fn a_derivative_without_a_multiplier_is_an_unknown_spec_not_a_silent_one() {
    let book = parse_book("small", SMALL).unwrap();
    assert!(book.unknown_specs.is_empty(), "{:?}", book.unknown_specs);
    // MES (instruments[1]) without its multiplier: read at 1, and listed.
    let mut edited = small();
    edited["instruments"][1]
        .as_object_mut()
        .unwrap()
        .remove("multiplier");
    // An equity without one is 1, as the format says.
    edited["instruments"][0]
        .as_object_mut()
        .unwrap()
        .remove("multiplier");
    let parsed = parse_book("x", &edited.to_string()).unwrap();
    assert_eq!(parsed.unknown_specs.len(), 1, "{:?}", parsed.unknown_specs);
    let u = &parsed.unknown_specs[0];
    assert_eq!(parsed.instrument(u.instrument).key.symbol, "MES");
    assert_eq!(
        parsed.instrument(u.instrument).multiplier,
        rust_decimal::Decimal::ONE
    );
    assert!(
        u.detail.contains("no multiplier for this future"),
        "{}",
        u.detail
    );
    assert!(u.fix.contains("instruments[1].multiplier"), "{}", u.fix);
}
