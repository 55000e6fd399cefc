//! Golden files: every tool's result on the embedded demo, and the tool list itself, so
//! any change to a figure or to the public contract shows in review.
//! Refresh with `UPDATE_GOLDEN=1 cargo test --test golden`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::path::PathBuf;

#[path = "common/cli.rs"]
mod cli;
use cli::tradedesk;

use serde_json::{Value, json};
use tradedesk_tools::config::demo_context;
use tradedesk_tools::{call, tools};

fn golden(name: &str, actual: &Value) -> Option<String> {
    let text = format!("{}\n", serde_json::to_string_pretty(actual).unwrap());
    golden_text(&format!("{name}.json"), &text)
}

/// `text` against the file `tests/golden/{file}`, byte for byte: `None` when they are
/// the same (or when UPDATE_GOLDEN=1 writes it), else what differs.
fn golden_text(file: &str, text: &str) -> Option<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        return None;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing: run UPDATE_GOLDEN=1 cargo test --test golden",
            path.display()
        )
    });
    (expected != text).then(|| {
        format!(
            "{file}: result differs from {} (UPDATE_GOLDEN=1 to accept)",
            path.display()
        )
    })
}

/// `tradedesk import flex` on each of our own Flex statements writes the same book file,
/// byte for byte, as the one pinned here (the file the import wrote before its rows
/// were typed, checked against that binary when the goldens were made).
#[test]
fn import_flex_writes_the_golden_book_of_each_fixture_statement() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flex");
    let runs: [(&str, &[&str]); 4] = [
        ("ibkr-flex-two-accounts", &[]),
        ("ibkr-flex-iso-dates", &[]),
        ("ibkr-flex-corporate-actions", &[]),
        (
            "ibkr-flex-corporate-actions",
            &["--cost-fraction", "GENV=0.3"],
        ),
    ];
    let mut diffs = Vec::new();
    for (stem, extra) in runs {
        let out = dir.path().join(format!("{stem}.json"));
        let (xml, out_s) = (
            fixtures.join(format!("{stem}.xml")),
            out.display().to_string(),
        );
        let mut argv = vec![
            "import",
            "flex",
            xml.to_str().unwrap(),
            "--out",
            &out_s,
            "--force",
        ];
        argv.extend(extra);
        let run = tradedesk(&argv);
        assert!(
            run.status.success(),
            "{stem} {extra:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let name = if extra.is_empty() {
            format!("import_flex_{stem}.json")
        } else {
            format!("import_flex_{stem}_cost_fraction.json")
        };
        diffs.extend(golden_text(&name, &std::fs::read_to_string(&out).unwrap()));
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

#[test]
fn every_tool_result_on_the_demo_matches_its_golden_file() {
    let calls: [(&str, &str, Value); 16] = [
        ("get_accounts", "get_accounts", json!({})),
        (
            "get_accounts_myr",
            "get_accounts",
            json!({"currency": "MYR"}),
        ),
        ("get_positions", "get_positions", json!({})),
        (
            "get_positions_moomoo_myr",
            "get_positions",
            json!({"broker": "moomoo", "currency": "MYR"}),
        ),
        (
            "get_trade_history_2026",
            "get_trade_history",
            json!({"start": "2026-01-01", "end": "2026-11-27"}),
        ),
        (
            "get_trade_history_limit",
            "get_trade_history",
            json!({"start": "2023-01-01", "end": "2026-11-27", "limit": 5, "side": "sell"}),
        ),
        (
            "get_realized_pnl_all_lots",
            "get_realized_pnl",
            json!({"start": "2023-01-01", "end": "2026-11-27", "include_lots": true}),
        ),
        (
            "get_realized_pnl_2026_month",
            "get_realized_pnl",
            json!({"start": "2026-01-01", "end": "2026-11-27", "group_by": "month"}),
        ),
        (
            "get_realized_pnl_zero",
            "get_realized_pnl",
            json!({"start": "2026-06-01", "end": "2026-06-30"}),
        ),
        ("get_portfolio_summary", "get_portfolio_summary", json!({})),
        (
            "get_portfolio_summary_myr",
            "get_portfolio_summary",
            json!({"currency": "MYR"}),
        ),
        (
            "get_exposure_sector",
            "get_exposure",
            json!({"by": "sector"}),
        ),
        (
            "get_exposure_symbol_net",
            "get_exposure",
            json!({"by": "symbol", "basis": "net"}),
        ),
        (
            "get_exposure_country",
            "get_exposure",
            json!({"by": "country"}),
        ),
        ("get_server_health", "get_server_health", json!({})),
        (
            "error_relative_date",
            "get_realized_pnl",
            json!({"start": "last quarter", "end": "2026-11-27"}),
        ),
    ];
    let ctx = demo_context("golden").unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut diffs = Vec::new();
    for (name, tool, args) in calls {
        let mut result = rt.block_on(call(&ctx, tool, args)).unwrap().structured;
        if tool == "get_server_health" {
            // Latency is measured, not fixed.
            for b in result["brokers"].as_array_mut().unwrap() {
                b["latency_ms"] = json!(0);
            }
        }
        diffs.extend(golden(name, &result));
    }
    let list: Vec<Value> = tools()
        .iter()
        .map(|t| {
            json!({"name": t.name, "title": t.title, "description": t.description, "readOnly": t.read_only,
                   "inputSchema": t.input_schema, "outputSchema": t.output_schema})
        })
        .collect();
    diffs.extend(golden("tools_list", &Value::Array(list)));
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}

/// The market data tools on the demo's sim (its clock fixed, as in docs/tools.md), the
/// answers of an account whose broker has no perps, no snapshots, no option chains and no news, and an
/// instrument search over the demo's sim and book accounts.
#[test]
fn the_market_data_tools_on_the_demo_match_their_golden_files() {
    let dir = tempfile::tempdir().unwrap();
    let state = tradedesk_tools::config::State::open(dir.path()).unwrap();
    let ctx = tradedesk_tools::config::docs_context("golden", &state).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let calls = [
        ("list_markets_sim", "list_markets", json!({})),
        (
            "get_recent_trades_sim",
            "get_recent_trades",
            json!({"market": "BTC-PERP", "limit": 5}),
        ),
        (
            "get_market_hours_sim",
            "get_market_hours",
            json!({"account": "SIM-PAPER"}),
        ),
        (
            "list_markets_not_supported",
            "list_markets",
            json!({"account": "IBKR-DEMO"}),
        ),
        (
            "get_snapshots_sim",
            "get_snapshots",
            json!({"account": "SIM-PAPER", "symbols": ["AAPL", "EURUSD", "BTC-PERP", "BURSA:1155", "NOPE"]}),
        ),
        (
            "get_snapshots_not_supported",
            "get_snapshots",
            json!({"account": "IBKR-DEMO", "symbols": ["AAPL"]}),
        ),
        (
            "search_instruments_demo",
            "search_instruments",
            json!({"query": "ma", "limit": 6}),
        ),
        (
            "search_instruments_bad_class",
            "search_instruments",
            json!({"query": "ma", "asset_class": "stock"}),
        ),
        (
            "get_option_chain_sim",
            "get_option_chain",
            json!({"underlying": "AAPL", "account": "SIM-PAPER", "strikes_around": 2}),
        ),
        (
            "get_option_chain_not_supported",
            "get_option_chain",
            json!({"underlying": "AAPL", "account": "IBKR-DEMO"}),
        ),
        ("get_news_sim", "get_news", json!({"limit": 3})),
        (
            "get_news_not_supported",
            "get_news",
            json!({"account": "IBKR-DEMO"}),
        ),
    ];
    let mut diffs = Vec::new();
    for (name, tool, args) in calls {
        let result = rt.block_on(call(&ctx, tool, args)).unwrap().structured;
        diffs.extend(golden(name, &result));
    }
    assert!(diffs.is_empty(), "{}", diffs.join("\n"));
}
