//! The CLI as a user runs it: exit codes, stdout carrying only the result, and books and
//! configs refused with the path and the rule.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::path::{Path, PathBuf};

use serde_json::Value;

#[path = "common/cli.rs"]
mod cli;
use cli::{call_ok, stdout_json, tradedesk};

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/small-book.json")
}

#[test]
fn the_demo_answers_with_no_configuration() {
    let out = tradedesk(&["call", "get_portfolio_summary", "{}"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = stdout_json(&out);
    assert_eq!(v["status"], "ok");
    assert_eq!(v["currency"], "USD");
    assert!(out.stderr.is_empty());
    // Arguments default to {}.
    assert_eq!(tradedesk(&["call", "get_accounts"]).status.code(), Some(0));
}

#[test]
fn exit_codes_tell_ok_error_and_usage_apart() {
    let error = tradedesk(&[
        "call",
        "get_realized_pnl",
        r#"{"start": "last quarter", "end": "2026-01-01"}"#,
    ]);
    assert_eq!(error.status.code(), Some(1));
    assert_eq!(stdout_json(&error)["error"]["code"], "invalid_date");
    for usage in [
        vec!["call", "get_everything", "{}"],
        vec!["call", "get_accounts", "{not json"],
        vec!["call", "get_accounts", "[1, 2]"],
        vec!["call"],
        vec!["frobnicate"],
    ] {
        let out = tradedesk(&usage);
        assert_eq!(out.status.code(), Some(2), "{usage:?}");
        assert!(out.stdout.is_empty(), "{usage:?} printed to stdout");
        assert!(!out.stderr.is_empty());
    }
}

#[test]
fn a_book_file_is_served_instead_of_the_demo() {
    let book = fixture();
    let out = tradedesk(&[
        "--book",
        book.to_str().unwrap(),
        "call",
        "get_accounts",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let ids: Vec<String> = stdout_json(&out)["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["account"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, ["US-1", "MY-1"]);
}

#[test]
fn a_broken_book_is_refused_before_any_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken.json");
    let text = std::fs::read_to_string(fixture()).unwrap().replacen(
        "\"quantity\": \"120\"",
        "\"quantity\": \"0\"",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let out = tradedesk(&[
        "--book",
        path.to_str().unwrap(),
        "call",
        "get_accounts",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("fills[2].quantity: must be > 0"),
        "{stderr}"
    );
    assert!(stderr.contains("broken.json"), "{stderr}");
    let validate = tradedesk(&["validate", path.to_str().unwrap()]);
    assert_eq!(validate.status.code(), Some(1));
    let ok = tradedesk(&["validate", fixture().to_str().unwrap()]);
    assert_eq!(ok.status.code(), Some(0));
}

fn write_config(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("tradedesk.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_config_picks_accounts_base_currency_and_sectors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(fixture(), dir.path().join("book.json")).unwrap();
    std::fs::write(
        dir.path().join("sectors.json"),
        r#"{"CME:MES": "Financials"}"#,
    )
    .unwrap();
    let config = write_config(
        dir.path(),
        "base_currency = \"MYR\"\nsectors_file = \"sectors.json\"\n\n[[accounts]]\nid = \"MY-1\"\nbroker = \"book\"\npath = \"book.json\"\n",
    );
    let v = call_ok(
        &["--config", config.to_str().unwrap()],
        "get_accounts",
        "{}",
    );
    assert_eq!(v["currency"], "MYR");
    assert_eq!(v["accounts"].as_array().unwrap().len(), 1);
    assert_eq!(v["total_value"].as_f64(), Some(20620.0));

    let both = write_config(
        dir.path(),
        "sectors_file = \"sectors.json\"\n[[accounts]]\nid = \"US-1\"\nbroker = \"book\"\npath = \"book.json\"\n",
    );
    let v = call_ok(
        &["--config", both.to_str().unwrap()],
        "get_exposure",
        r#"{"by": "sector"}"#,
    );
    assert!(
        v["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|b| b["key"] != "Unclassified"),
        "{v}"
    );
}

#[test]
fn a_bad_config_is_refused_with_the_key_named() {
    let dir = tempfile::tempdir().unwrap();
    for (text, expect) in [
        ("base_curency = \"USD\"\n", "base_curency"),
        (
            "[[accounts]]\nid = \"x\"\nbroker = \"book\"\n",
            "needs `path`",
        ),
        (
            "[[accounts]]\nid = \"x\"\nbroker = \"book\"\npath = \"missing.json\"\n",
            "missing.json",
        ),
        (
            "[[accounts]]\nid = \"x\"\nbroker = \"etrade\"\n",
            "broker 'etrade'",
        ),
        (
            "base_currency = \"usd\"\n[[accounts]]\nid = \"x\"\nbroker = \"book\"\npath = \"b.json\"\n",
            "base_currency",
        ),
        (
            "[tools]\nenabled = [\"portfolio\", \"quotes\"]\n",
            "tools.enabled: unknown toolset 'quotes'",
        ),
        ("[tools]\nenable = [\"portfolio\"]\n", "enable"),
        // A key of another broker is unknown in this one's entry, named with the account.
        (
            "[[accounts]]\nid = \"x\"\nbroker = \"sim\"\npath = \"b.json\"\n",
            "account 'x' (broker = \"sim\"): unknown field `path`",
        ),
    ] {
        let config = write_config(dir.path(), text);
        let out = tradedesk(&[
            "--config",
            config.to_str().unwrap(),
            "call",
            "get_accounts",
            "{}",
        ]);
        assert_eq!(out.status.code(), Some(1), "{text}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expect), "{text}: {stderr}");
    }
    std::fs::copy(fixture(), dir.path().join("book.json")).unwrap();
    let config = write_config(
        dir.path(),
        "[[accounts]]\nid = \"NOPE\"\nbroker = \"book\"\npath = \"book.json\"\n",
    );
    let out = tradedesk(&[
        "--config",
        config.to_str().unwrap(),
        "call",
        "get_accounts",
        "{}",
    ]);
    assert_eq!(
        stdout_json(&out)["error"]["message"]
            .as_str()
            .map(|m| m.contains("NOPE")),
        Some(true)
    );
}

#[test]
fn tools_lists_every_tool() {
    let out = tradedesk(&["tools"]);
    let text = String::from_utf8_lossy(&out.stdout);
    for name in [
        "get_accounts",
        "get_positions",
        "get_trade_history",
        "get_realized_pnl",
        "get_portfolio_summary",
        "get_exposure",
        "get_server_health",
        "get_quote",
        "get_bars",
        "get_orders",
        "preview_order",
        "place_order",
        "close_position",
        "modify_position",
        "cancel_order",
        "get_market_hours",
        "list_markets",
        "get_recent_trades",
        "get_snapshots",
        "get_option_chain",
        "search_instruments",
        "get_news",
    ] {
        assert!(text.contains(name), "{name}");
    }
    let json = tradedesk(&["tools", "--json"]);
    assert_eq!(String::from_utf8_lossy(&json.stdout).lines().count(), 34);
}

#[test]
fn tools_flag_lists_and_serves_only_its_toolsets() {
    let json = tradedesk(&["--tools", "portfolio", "tools", "--json"]);
    let specs: Vec<Value> = String::from_utf8_lossy(&json.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(specs.len(), 9, "{specs:?}");
    for spec in &specs {
        let health = spec["name"] == "get_server_health";
        assert_eq!(
            spec["toolset"],
            if health {
                Value::Null
            } else {
                "portfolio".into()
            }
        );
    }
    let text = tradedesk(&["--tools", "options", "tools"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("option_price [options]"));
    // A tool outside them answers an error result naming its toolset (exit 1).
    let out = tradedesk(&["--tools", "portfolio", "call", "option_price", "{}"]);
    assert_eq!(out.status.code(), Some(1));
    let v = stdout_json(&out);
    assert_eq!(v["error"]["code"], "tool_not_enabled", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the options toolset"),
        "{v}"
    );
    call_ok(&["--tools", "portfolio"], "get_accounts", "{}");
    call_ok(&["--tools", "portfolio"], "get_server_health", "{}");
}

#[test]
fn accounts_from_two_book_files_merge_into_one_answer() {
    let dir = tempfile::tempdir().unwrap();
    let book: Value = serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    // Split the small book by account: each file keeps its own account's fills and cash,
    // and both carry every instrument, mark and rate.
    for (file, account) in [("us.json", "US-1"), ("my.json", "MY-1")] {
        let mut part = book.clone();
        let keep = |key: &str, part: &mut Value| {
            let items: Vec<Value> = book[key]
                .as_array()
                .unwrap()
                .iter()
                .filter(|i| i["account"] == account)
                .cloned()
                .collect();
            part[key] = Value::Array(items);
        };
        for key in ["fills", "cash", "reported_positions"] {
            keep(key, &mut part);
        }
        part["accounts"] = Value::Array(
            book["accounts"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|a| a["id"] == account)
                .cloned()
                .collect(),
        );
        std::fs::write(dir.path().join(file), part.to_string()).unwrap();
    }
    let config = write_config(
        dir.path(),
        "[[accounts]]\nid = \"US-1\"\nbroker = \"book\"\npath = \"us.json\"\n\n[[accounts]]\nid = \"MY-1\"\nbroker = \"book\"\npath = \"my.json\"\n",
    );
    let merged = call_ok(
        &["--config", config.to_str().unwrap()],
        "get_portfolio_summary",
        "{}",
    );
    let whole = call_ok(
        &["--book", fixture().to_str().unwrap()],
        "get_portfolio_summary",
        "{}",
    );
    for field in [
        "total_value",
        "positions_value",
        "cash_value",
        "unrealized_pnl",
    ] {
        assert_eq!(merged[field], whole[field], "{field}");
    }
    let pnl = call_ok(
        &["--config", config.to_str().unwrap()],
        "get_realized_pnl",
        r#"{"start": "2026-01-01", "end": "2026-03-31"}"#,
    );
    assert_eq!(pnl["net_pnl"].as_f64(), Some(2490.91));
}

#[test]
fn a_flex_statement_becomes_a_book_that_every_tool_reads() {
    let dir = tempfile::tempdir().unwrap();
    let xml = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/flex/ibkr-flex-two-accounts.xml");
    let out = dir.path().join("ibkr.json");
    let (xml, out_s) = (xml.to_str().unwrap(), out.to_str().unwrap());
    let run = tradedesk(&["import", "flex", xml, "--out", out_s]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(said.contains("10 fill(s) in 2 account(s)"), "{said}");
    // Never overwritten by accident.
    let again = tradedesk(&["import", "flex", xml, "--out", out_s]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("--force"));
    let history = call_ok(
        &["--book", out_s],
        "get_trade_history",
        r#"{"start": "2025-01-01", "end": "2025-12-31", "limit": 1000}"#,
    );
    assert_eq!(history["total_count"], 10);
    let positions = call_ok(&["--book", out_s], "get_positions", "{}");
    assert_eq!(positions["status"], "ok");
    let health = call_ok(&["--book", out_s], "get_server_health", "{}");
    assert_eq!(
        health["reconciliation"].as_array().map(Vec::len),
        Some(0),
        "{health:#}"
    );
    // Not a Flex statement: refused, naming what is wrong; nothing written.
    let bad = dir.path().join("bad.xml");
    std::fs::write(&bad, "<html><body>login</body></html>").unwrap();
    let refused = tradedesk(&[
        "import",
        "flex",
        bad.to_str().unwrap(),
        "--out",
        dir.path().join("bad.json").to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(!dir.path().join("bad.json").exists());
}

#[test]
fn import_flex_takes_an_offset_or_a_zone_for_the_statements_times() {
    let dir = tempfile::tempdir().unwrap();
    let xml = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/flex/ibkr-flex-two-accounts.xml");
    let xml = xml.to_str().unwrap();
    let out = dir.path().join("ibkr.json");
    let out_s = out.to_str().unwrap();
    // The fixture's first fill: 2025-02-03 10:02:11 in the statement's zone.
    let import = |zone: &[&str]| {
        let mut argv = vec!["import", "flex", xml, "--out", out_s, "--force"];
        argv.extend(zone);
        tradedesk(&argv)
    };
    for (zone, written) in [
        (&["--time-zone", "-04:00"][..], "2025-02-03T10:02:11-04:00"),
        (&["--time-zone=-04:00"][..], "2025-02-03T10:02:11-04:00"),
        (&["--time-zone", "+08:00"][..], "2025-02-03T10:02:11+08:00"),
        (
            &["--time-zone", "Asia/Kuala_Lumpur"][..],
            "2025-02-03T10:02:11+08:00",
        ),
        (
            &["--time-zone", "America/New_York"][..],
            "2025-02-03T10:02:11-05:00",
        ),
        (&[][..], "2025-02-03T10:02:11-05:00"),
    ] {
        let run = import(zone);
        assert_eq!(
            run.status.code(),
            Some(0),
            "{zone:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let book = std::fs::read_to_string(&out).unwrap();
        assert!(
            book.contains(written),
            "{zone:?}: {written} not in the book"
        );
    }
    // Refused, naming what was wrong and what to give instead.
    for (zone, says) in [
        ("Europe/London", "daylight saving"),
        (
            "Mars/Base",
            "'Mars/Base' is neither a time zone nor an offset",
        ),
        ("-4:00", "'-4:00' is neither"),
        ("--force", "is a flag"),
    ] {
        let run = import(&["--time-zone", zone]);
        assert_eq!(run.status.code(), Some(1), "{zone}");
        let err = String::from_utf8_lossy(&run.stderr);
        assert!(err.contains(says) && err.contains("hint:"), "{zone}: {err}");
    }
}

fn bounds_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bounds-book.json")
}

#[test]
fn validate_refuses_a_fill_the_engine_cannot_compute_naming_the_row_and_the_bound() {
    // Issue 15: 1,000,000,000 at 1,000,000,000,000 validated, then every portfolio tool
    // answered `internal`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.json");
    let mut book: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    book["fills"][0]["quantity"] = Value::from("1000000000");
    book["fills"][0]["price"] = Value::from("1000000000000");
    std::fs::write(&path, book.to_string()).unwrap();
    let validate = tradedesk(&["validate", path.to_str().unwrap()]);
    assert_eq!(validate.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&validate.stderr);
    assert!(stderr.contains("huge.json: book refused"), "{stderr}");
    assert!(
        stderr.contains("fills[0]: its value quantity x price x multiplier = 1000000000 x 1000000000000 x 1 = 1000000000000000000000 is larger than the supported 1e15"),
        "{stderr}"
    );
    // Served, it is refused before any tool runs: never an `internal` answer.
    let out = tradedesk(&[
        "--book",
        path.to_str().unwrap(),
        "call",
        "get_positions",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("larger than the supported 1e15"),
        "{stderr}"
    );
    assert!(!stderr.contains("internal"), "{stderr}");
}

#[test]
fn validate_replays_the_book_so_a_total_past_the_engine_is_refused_naming_its_row() {
    // Every value within the bounds, but a split of 1e12 for 1e-18 grows the lots past
    // what the engine holds: validate says so (as every tool would), naming the action.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("split.json");
    let mut book: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture()).unwrap()).unwrap();
    book["corporate_actions"] = serde_json::json!([{"id": "S1", "account": "US-1",
        "exchange": "NASDAQ", "symbol": "AAPL", "kind": "split", "date": "2026-01-10",
        "new_units": "1000000000000", "old_units": "0.000000000000000001"}]);
    std::fs::write(&path, book.to_string()).unwrap();
    let validate = tradedesk(&["validate", path.to_str().unwrap()]);
    assert_eq!(validate.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&validate.stderr);
    assert!(
        stderr.contains("split.json: book refused\n  corporate action S1: a value of the FIFO lots is too large to compute exactly"),
        "{stderr}"
    );
    let out = tradedesk(&[
        "--book",
        path.to_str().unwrap(),
        "call",
        "get_positions",
        "{}",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout_json(&out)["error"]["code"], "invalid_book");
}

#[test]
fn a_book_at_the_bounds_validates_and_every_portfolio_tool_answers() {
    let path = bounds_fixture();
    let book = path.to_str().unwrap();
    let validate = tradedesk(&["validate", book]);
    assert_eq!(
        validate.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&validate.stderr)
    );
    let range = r#""start": "2026-01-01", "end": "2026-03-31""#;
    for currency in ["USD", "MYR"] {
        let calls = [
            ("get_accounts", format!(r#"{{"currency": "{currency}"}}"#)),
            ("get_positions", format!(r#"{{"currency": "{currency}"}}"#)),
            (
                "get_portfolio_summary",
                format!(r#"{{"currency": "{currency}"}}"#),
            ),
            (
                "get_exposure",
                format!(r#"{{"by": "symbol", "currency": "{currency}"}}"#),
            ),
            (
                "get_exposure",
                format!(r#"{{"by": "currency", "basis": "net", "currency": "{currency}"}}"#),
            ),
            ("get_trade_history", format!("{{{range}, \"limit\": 1000}}")),
            (
                "get_realized_pnl",
                format!(r#"{{{range}, "currency": "{currency}", "include_lots": true}}"#),
            ),
            (
                "get_performance",
                format!(r#"{{{range}, "currency": "{currency}"}}"#),
            ),
            (
                "analyze_trades",
                format!(r#"{{{range}, "currency": "{currency}"}}"#),
            ),
            ("get_server_health", "{}".to_owned()),
        ];
        for (tool, args) in calls {
            let r = call_ok(&["--book", book], tool, &args);
            assert_eq!(r["status"], "ok", "{tool} {args}: {r}");
        }
    }
    // The figures are the exact ones: the odd multiplier's lot (whose digits overflowed
    // 128 bits in the engine's product before) realizes 0.5 x 1e-18 x 1000.000000000000000001.
    let pnl = call_ok(
        &["--book", book],
        "get_realized_pnl",
        &format!(r#"{{{range}, "symbol": "ODD", "include_lots": true}}"#),
    );
    assert_eq!(pnl["lots"].as_array().unwrap().len(), 1, "{pnl}");
    assert_eq!(pnl["net_pnl"].as_f64(), Some(0.0), "{pnl}");
    let positions = call_ok(&["--book", book], "get_positions", r#"{"symbol": "MANY"}"#);
    assert_eq!(positions["positions"][0]["quantity"].as_f64(), Some(6e11));
}
