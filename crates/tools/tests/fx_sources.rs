//! Where rates come from, in order (docs/methodology/fx.md): the config's fx_file, then
//! the rates the broker reports (the book's fx_rates), then the ECB's reference rates
//! (`fx_source = "ecb"`), fetched from a loopback fake serving the ECB's file format and
//! cached in the state directory.
//!
//! The book: a MYR account with MYR 10,000.00, USD 110.00 and GBP 84.00 of cash.
//! - fx_file: EUR/USD 1.10 on 2026-03-02;
//! - broker: EUR/MYR 5.00 and EUR/USD 1.09 on 2026-03-02;
//! - ECB: EUR/USD 1.08, EUR/GBP 0.84, EUR/MYR 4.98 on 2026-03-02.
//!
//! USD -> MYR crosses EUR: 110 / 1.10 (the fx_file beats the broker's 1.09 and the ECB's
//! 1.08) x 5.00 (the broker beats the ECB's 4.98) = 500.00. GBP -> MYR: 84 / 0.84 (only
//! the ECB has it) x 5.00 = 500.00. Total 11,000.00.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tradedesk_tools::call;
use tradedesk_tools::config::{Config, State, config_context};

const ECB_XML: &str = include_str!("../../../tests/fixtures/fx/eurofxref-hist.xml");
const BOOK: &str = include_str!("../../../tests/fixtures/fx/three-sources-book.json");
const FX_FILE: &str = include_str!("../../../tests/fixtures/fx/fx-file.json");
const CACHE: &str = "fx-ecb-eurofxref.xml";

/// A loopback HTTP server answering every request with `status` and `body`.
struct Fake {
    port: u16,
    hits: Arc<AtomicUsize>,
}

fn fake(status: u16, body: &'static str) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&hits);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            counter.fetch_add(1, Ordering::SeqCst);
            let reason = if status == 200 {
                "OK"
            } else {
                "Service Unavailable"
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status} {reason}\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Fake { port, hits }
}

/// A port nothing listens on.
fn dead_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

fn setup(dir: &Path, port: u16) -> Config {
    std::fs::write(dir.join("book.json"), BOOK).unwrap();
    std::fs::write(dir.join("fx.json"), FX_FILE).unwrap();
    let toml = format!(
        r#"fx_file = "fx.json"
fx_source = "ecb"
fx_url = "http://127.0.0.1:{port}/stats/eurofxref/eurofxref-hist.xml"
broker_timeout_ms = 5000

[[accounts]]
id = "MY-1"
broker = "book"
path = "book.json"
"#
    );
    std::fs::write(dir.join("tradedesk.toml"), toml).unwrap();
    Config::load(&dir.join("tradedesk.toml")).unwrap()
}

fn accounts(config: &Config, state_dir: &Path) -> Value {
    let state = State::open(state_dir).unwrap();
    let ctx = config_context("test", config, &state).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let r = rt
        .block_on(call(&ctx, "get_accounts", json!({})))
        .unwrap()
        .structured;
    assert_eq!(r["status"], "ok", "{r}");
    r
}

fn notes(r: &Value) -> Vec<String> {
    r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap().to_owned())
        .collect()
}

fn age_cache(state_dir: &Path, by: Duration) {
    let file = std::fs::File::options()
        .write(true)
        .open(state_dir.join(CACHE))
        .unwrap();
    file.set_modified(SystemTime::now() - by).unwrap();
}

#[test]
fn fx_file_beats_the_broker_which_beats_the_ecb_and_the_fetch_is_cached_for_a_day() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let server = fake(200, ECB_XML);
    let config = setup(dir.path(), server.port);

    let r = accounts(&config, state.path());
    assert_eq!(r["total_value"], json!(11000.0), "{r}");
    assert_eq!(r["accounts"][0]["cash"], json!(11000.0));
    assert!(
        !notes(&r).iter().any(|n| n.contains("rate")),
        "{:?}",
        notes(&r)
    );
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    let cached = std::fs::read_to_string(state.path().join(CACHE)).unwrap();
    assert_eq!(cached, ECB_XML);

    // Another process on the same state directory, within the day: no new fetch.
    let again = accounts(&config, state.path());
    assert_eq!(again["total_value"], json!(11000.0));
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);

    // A day later the file is fetched again.
    age_cache(state.path(), Duration::from_secs(25 * 3600));
    let later = accounts(&config, state.path());
    assert_eq!(later["total_value"], json!(11000.0));
    assert_eq!(server.hits.load(Ordering::SeqCst), 2);
}

#[test]
fn a_failed_fetch_falls_back_to_the_cache_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let server = fake(503, "<html>maintenance</html>");
    let config = setup(dir.path(), server.port);
    std::fs::write(state.path().join(CACHE), ECB_XML).unwrap();
    age_cache(state.path(), Duration::from_secs(3 * 24 * 3600));

    let r = accounts(&config, state.path());
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    assert_eq!(r["total_value"], json!(11000.0));
    let all = notes(&r);
    let note = all
        .iter()
        .find(|n| n.contains("could not be refreshed"))
        .unwrap_or_else(|| panic!("{all:?}"));
    assert!(note.contains("HTTP 503"), "{note}");
    assert!(note.contains("latest rates are of 2026-03-02"), "{note}");
}

#[test]
fn without_a_cache_an_unreachable_ecb_leaves_only_the_rows_it_was_needed_for_out() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let config = setup(dir.path(), dead_port());

    let r = accounts(&config, state.path());
    // USD still converts (fx_file EUR/USD with the broker's EUR/MYR); GBP has no rate.
    assert_eq!(r["total_value"], json!(10500.0), "{r}");
    let all = notes(&r);
    assert!(
        all.iter()
            .any(|n| n.contains("ECB reference rates are unavailable")),
        "{all:?}"
    );
    assert!(
        all.iter()
            .any(|n| n.starts_with("no GBP/MYR rate") && n.contains("cash GBP 84.00 in MY-1")),
        "{all:?}"
    );
    assert!(!state.path().join(CACHE).exists());
}

#[test]
fn fx_source_and_fx_url_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let state = State::open(state.path()).unwrap();
    let cases = [
        (
            "fx_source = \"oanda\"\n",
            "fx_source 'oanda' is not a known rate source",
        ),
        (
            "fx_url = \"https://example.invalid/x.xml\"\n",
            "fx_url is set but fx_source is not",
        ),
        (
            "fx_source = \"ecb\"\nfx_url = \"ftp://x/y.xml\"\n",
            "is not an http(s) URL",
        ),
    ];
    std::fs::write(dir.path().join("book.json"), BOOK).unwrap();
    let account = "[[accounts]]\nid = \"MY-1\"\nbroker = \"book\"\npath = \"book.json\"\n";
    for (toml, want) in cases {
        std::fs::write(dir.path().join("t.toml"), format!("{toml}\n{account}")).unwrap();
        let config = Config::load(&dir.path().join("t.toml")).unwrap();
        let err = config_context("test", &config, &state).unwrap_err();
        assert!(err.message.contains(want), "{toml}: {}", err.message);
        assert!(!err.hint.is_empty());
    }
}

/// A Flex statement without a Conversion Rates section: only the rows' fxRateToBase give
/// EUR/USD. SAP: 10 bought @200 (commission EUR 2), 4 sold @230 (EUR 2) on 2025-06-20
/// at fxRateToBase 1.1012:
/// gross 4 x 30 = 120.00 EUR, commissions 2 x 4/10 + 2 = 2.80, net 117.20 EUR
/// = 129.06 USD (117.20 x 1.1012 = 129.06064). The 6 still held are marked at 235 on
/// 2025-06-30, at that day's 1.1050: 1,410.00 EUR = 1,558.05 USD.
#[test]
fn a_flex_statement_whose_only_rates_are_fx_rate_to_base_answers_in_the_base_currency() {
    const FLEX: &str = include_str!("../../../tests/fixtures/fx/flex-rates-from-rows.xml");
    let dir = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("statement.xml"), FLEX).unwrap();
    std::fs::write(
        dir.path().join("tradedesk.toml"),
        "[[accounts]]\nid = \"U7000001\"\nbroker = \"ibkr\"\nflex = { path = \"statement.xml\" }\n",
    )
    .unwrap();
    let config = Config::load(&dir.path().join("tradedesk.toml")).unwrap();
    let state = State::open(state.path()).unwrap();
    let ctx = config_context("test", &config, &state).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = |tool: &str, args: Value| {
        let r = rt.block_on(call(&ctx, tool, args)).unwrap().structured;
        assert_eq!(r["status"], "ok", "{tool}: {r}");
        r
    };
    let realized = run(
        "get_realized_pnl",
        json!({"start": "2025-01-01", "end": "2025-06-30"}),
    );
    assert_eq!(realized["currency"], "USD");
    assert_eq!(realized["net_pnl"], json!(129.06), "{realized}");
    let positions = run("get_positions", json!({}));
    let sap = &positions["positions"][0];
    assert_eq!(sap["market_value"], json!(1410.0));
    assert_eq!(sap["market_value_converted"], json!(1558.05), "{positions}");
    assert!(
        !notes(&positions).iter().any(|n| n.starts_with("no ")),
        "{:?}",
        notes(&positions)
    );
    for tool in ["get_accounts", "get_portfolio_summary"] {
        let r = run(tool, json!({}));
        assert!(
            !notes(&r).iter().any(|n| n.starts_with("no EUR/USD")),
            "{r}"
        );
    }
}
