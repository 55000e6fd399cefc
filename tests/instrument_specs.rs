//! Instrument specs from the broker, end to end: a non-1 multiplier or contract size goes
//! from the fill to the lot, its realized P&L, the position's value and the exposure; where
//! the broker states none, the answers say so and get_server_health lists the instrument
//! (docs/methodology/instruments.md).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic,
    clippy::print_stdout
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_brokers::alpaca::{AlpacaBroker, AlpacaConfig};
use tradedesk_brokers::dwx::{DwxBroker, DwxConfig, SymbolSpec};
use tradedesk_core::Currency;
use tradedesk_tools::{ToolContext, call};

mod common;

use common::dwx_fake::{EaClosed, EaOrder, EaState, FakeEa, Platform, SymbolSpec as EaSpec};
use common::opend_fake::build;
use common::opend_fake::{OpenDFake, OpenDState};
use common::opend_pb as pb;
use common::tws_fake::{
    FakeTws, TwsAccountValue, TwsContract, TwsExecution, TwsPortfolioItem, TwsState,
};
use tradedesk_brokers::futu::{FutuMarket, OpenDBroker, OpenDConfig};
use tradedesk_brokers::ibkr::{FlexSource, IbkrFlexBroker};
use tradedesk_brokers::tws::{TwsBroker, TwsConfig};

fn dec(v: &Value) -> Decimal {
    let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
    Decimal::from_str(&text).unwrap_or_else(|_| panic!("not a number: {v}"))
}

fn d(text: &str) -> Decimal {
    Decimal::from_str(text).unwrap()
}

async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    let out = call(ctx, name, args.clone()).await.unwrap().structured;
    assert_eq!(out["status"], "ok", "{name} {args}: {out}");
    out
}

fn find<'a>(items: &'a Value, field: &str, value: &str) -> &'a Value {
    items
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i[field] == value)
        .unwrap_or_else(|| panic!("no {field}={value} in {items}"))
}

// ---------------------------------------------------------------------------------------
// Alpaca: a loopback server answering what Alpaca answers, from bodies on disk.

/// Bodies by path (`/v2/account`, ...), the asset body every `/v2/assets/{symbol}` gets
/// with its symbol replaced (as the recorded datasets are meant to be served), and the
/// option contracts `/v2/options/contracts/{symbol}` knows (404 otherwise, as Alpaca
/// answers for a contract it does not list).
#[derive(Clone, Default)]
struct Replay {
    bodies: BTreeMap<String, Value>,
    asset: Value,
    contracts: BTreeMap<String, Value>,
}

async fn answer(State(r): State<Arc<Replay>>, req: Request) -> Response {
    let path = req.uri().path().to_owned();
    let json = |status: StatusCode, body: &Value| {
        (
            status,
            [("content-type", "application/json")],
            body.to_string(),
        )
            .into_response()
    };
    let not_found = json!({"code": 40410000, "message": "not found"});
    if let Some(body) = r.bodies.get(&path) {
        return json(StatusCode::OK, body);
    }
    if let Some(symbol) = path.strip_prefix("/v2/options/contracts/") {
        return match r.contracts.get(symbol) {
            Some(c) => json(StatusCode::OK, c),
            None => json(StatusCode::NOT_FOUND, &not_found),
        };
    }
    if let Some(symbol) = path.strip_prefix("/v2/assets/") {
        let mut asset = r.asset.clone();
        asset["symbol"] = json!(symbol);
        return json(StatusCode::OK, &asset);
    }
    json(StatusCode::NOT_FOUND, &not_found)
}

async fn serve(replay: Replay) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().fallback(answer).with_state(Arc::new(replay));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

fn alpaca_ctx(url: &str) -> ToolContext {
    let config = AlpacaConfig {
        account: "ALPACA".into(),
        live: false,
        base_url: url.into(),
        data_url: url.into(),
        key: "PKTEST".into(),
        secret: "secret".into(),
        timeout: Duration::from_secs(10),
    };
    ToolContext::new("test").with_broker(Arc::new(AlpacaBroker::new(config).unwrap()), None)
}

fn realworld(dataset: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/realworld/alpaca")
        .join(dataset);
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "skipped: {} is not there (recorded Alpaca bodies)",
            dir.display()
        );
        None
    }
}

fn read(dir: &Path, file: &str) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alpaca_option_round_trip_on_the_recorded_bodies_realizes_ten_dollars_a_contract() {
    let Some(dir) = realworld("data_edge") else {
        return;
    };
    let mut replay = Replay {
        asset: read(&dir, "asset.json"),
        ..Replay::default()
    };
    for (path, file) in [
        ("/v2/account", "account.json"),
        ("/v2/positions", "positions.json"),
        ("/v2/account/activities", "activities.json"),
    ] {
        replay.bodies.insert(path.to_owned(), read(&dir, file));
    }
    let url = serve(replay).await;
    let ctx = alpaca_ctx(&url);
    // Bought 2 at 0.06, sold 1 at 0.16 on 2024-01-24: (0.16 - 0.06) x 1 x 100.
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2024-01-24", "end": "2024-01-24", "include_lots": true, "symbol": "AAPL240126P00050000"}),
    )
    .await;
    assert_eq!(dec(&r["net_pnl"]), d("10.00"), "{r}");
    assert_eq!(r["lots"][0]["exchange"], "OPRA");
    assert_eq!(dec(&r["lots"][0]["quantity"]), d("1"));
    assert_eq!(dec(&r["lots"][0]["gross_pnl"]), d("10.00"));
    // The open contract: Alpaca's own market_value 7 = 1 x 0.07 x 100, cost_basis 6,
    // unrealized_pl 1; the recorded bodies have no contract lookup, so the multiplier
    // is the one the position's figures imply, and a note says so.
    let p = tool(
        &ctx,
        "get_positions",
        json!({"symbol": "AAPL240126P00050000"}),
    )
    .await;
    let option = find(&p["positions"], "symbol", "AAPL240126P00050000");
    assert_eq!(option["asset_class"], "option");
    assert_eq!(dec(&option["quantity"]), d("1"));
    assert_eq!(dec(&option["market_price"]), d("0.07"));
    assert_eq!(dec(&option["market_value"]), d("7"));
    assert_eq!(dec(&option["notional"]), d("7"));
    assert_eq!(dec(&option["cost_basis"]), d("6"));
    assert_eq!(dec(&option["unrealized_pnl"]), d("1"));
    assert!(
        p["notes"]
            .to_string()
            .contains("market_value / (qty x current_price)"),
        "{}",
        p["notes"]
    );
    let e = tool(&ctx, "get_exposure", json!({"by": "asset_class"})).await;
    assert_eq!(dec(&find(&e["buckets"], "key", "option")["value"]), d("7"));
    let h = tool(&ctx, "get_server_health", json!({})).await;
    assert!(h.get("unknown_specs").is_none(), "{h}");
}

/// The project's own Alpaca bodies, in the documented shapes: a standard SPY call whose
/// contract lookup states its multiplier, and an adjusted contract it does not list.
fn own_alpaca() -> Replay {
    let fill = |id: &str, symbol: &str, side: &str, qty: &str, price: &str, at: &str| {
        json!({
            "activity_type": "FILL", "id": id, "transaction_time": at, "type": "fill",
            "price": price, "qty": qty, "side": side, "symbol": symbol,
            "leaves_qty": "0", "cum_qty": qty, "order_id": format!("order-{id}"),
            "order_status": "filled"
        })
    };
    let contract = json!({
        "id": "6e58f870-fe73-4583-81e4-b9a37892c36f", "symbol": "SPY250620C00550000",
        "name": "SPY Jun 20 2025 550 Call", "status": "active", "tradable": true,
        "expiration_date": "2025-06-20", "root_symbol": "SPY", "underlying_symbol": "SPY",
        "underlying_asset_id": "b28f4066-5c6d-479b-a2af-85dc1a8f16fb", "type": "call",
        "style": "american", "strike_price": "550", "multiplier": "100", "size": "100",
        "open_interest": "237", "open_interest_date": "2025-06-02",
        "close_price": "2.05", "close_price_date": "2025-06-02"
    });
    let mut r = Replay {
        asset: json!({
            "id": "b28f4066-5c6d-479b-a2af-85dc1a8f16fb", "class": "us_equity", "exchange": "ARCA",
            "symbol": "SPY", "name": "SPDR S&P 500 ETF Trust", "status": "active", "tradable": true,
            "marginable": true, "shortable": true, "easy_to_borrow": true, "fractionable": true
        }),
        ..Replay::default()
    };
    r.contracts.insert("SPY250620C00550000".into(), contract);
    r.bodies.insert(
        "/v2/account".into(),
        json!({"id": "a1", "account_number": "PA1", "status": "ACTIVE", "currency": "USD",
               "cash": "10000", "portfolio_value": "10000", "equity": "10000",
               "buying_power": "10000"}),
    );
    r.bodies.insert(
        "/v2/positions".into(),
        json!([{
            "asset_id": "6e58f870-fe73-4583-81e4-b9a37892c36f", "symbol": "SPY250620C00550000",
            "exchange": "", "asset_class": "us_option", "avg_entry_price": "1.25", "qty": "2",
            "side": "long", "market_value": "410", "cost_basis": "250", "unrealized_pl": "160",
            "unrealized_plpc": "0.64", "current_price": "2.05", "lastday_price": "1.95",
            "change_today": "0.0513"
        }]),
    );
    r.bodies.insert(
        "/v2/account/activities".into(),
        json!([
            fill(
                "20250602100000000::1",
                "SPY250620C00550000",
                "buy",
                "5",
                "1.25",
                "2025-06-02T14:00:00Z"
            ),
            fill(
                "20250603100000000::2",
                "SPY250620C00550000",
                "sell",
                "3",
                "2.05",
                "2025-06-03T14:00:00Z"
            ),
            fill(
                "20250604100000000::3",
                "AAPL1250620C00150000",
                "buy",
                "1",
                "3.10",
                "2025-06-04T14:00:00Z"
            ),
            fill(
                "20250605100000000::4",
                "AAPL1250620C00150000",
                "sell",
                "1",
                "3.40",
                "2025-06-05T14:00:00Z"
            ),
        ]),
    );
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alpaca_options_take_the_contracts_multiplier_and_an_unstated_one_is_listed() {
    let url = serve(own_alpaca()).await;
    let ctx = alpaca_ctx(&url);
    // 3 contracts closed: (2.05 - 1.25) x 3 x 100 = 240.00; the adjusted AAPL1 call, that
    // the lookup does not list: (3.40 - 3.10) x 1 x 100 assumed = 30.00, with a note.
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2025-06-01", "end": "2025-06-30"}),
    )
    .await;
    assert_eq!(
        dec(&find(&r["groups"], "key", "OPRA:SPY250620C00550000")["net_pnl"]),
        d("240.00")
    );
    assert_eq!(
        dec(&find(&r["groups"], "key", "OPRA:AAPL1250620C00150000")["net_pnl"]),
        d("30.00")
    );
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("OPRA:AAPL1250620C00150000: Alpaca stated no multiplier"),
        "{notes}"
    );
    assert!(!notes.contains("OPRA:SPY250620C00550000:"), "{notes}");
    // 2 open: value 2 x 2.05 x 100 = 410, Alpaca's market_value; cost 250.
    let p = tool(&ctx, "get_positions", json!({})).await;
    let spy = find(&p["positions"], "symbol", "SPY250620C00550000");
    assert_eq!(dec(&spy["market_value"]), d("410"));
    assert_eq!(dec(&spy["cost_basis"]), d("250"));
    assert_eq!(dec(&p["total_market_value"]), d("410"));
    let e = tool(&ctx, "get_exposure", json!({"by": "asset_class"})).await;
    assert_eq!(dec(&e["gross_total"]), d("410"));
    let h = tool(&ctx, "get_server_health", json!({})).await;
    let unknown = h["unknown_specs"].as_array().unwrap();
    assert_eq!(unknown.len(), 1, "{h}");
    assert_eq!(unknown[0]["symbol"], "AAPL1250620C00150000");
    assert_eq!(unknown[0]["asset_class"], "option");
    assert_eq!(dec(&unknown[0]["multiplier_assumed"]), d("100"));
    assert!(
        unknown[0]["fix"]
            .as_str()
            .unwrap()
            .contains("/v2/options/contracts/")
    );
}

// ---------------------------------------------------------------------------------------
// MetaTrader: a USD account on MT4 whose terminal holds GER40 (1 EUR a point), XBRUSD
// (100 barrels a lot) and UK100 (1 GBP a point, which the config does not state).

fn closed(
    ticket: u64,
    symbol: &str,
    lots: f64,
    times: (&str, &str),
    prices: (f64, f64),
    pnl: f64,
) -> EaClosed {
    EaClosed {
        ticket,
        magic: 0,
        symbol: symbol.into(),
        lots,
        kind: "buy".into(),
        open_time: times.0.into(),
        close_time: times.1.into(),
        open_price: prices.0,
        close_price: prices.1,
        sl: 0.0,
        tp: 0.0,
        pnl,
        commission: 0.0,
        swap: 0.0,
        comment: String::new(),
    }
}

fn open(ticket: u64, symbol: &str, lots: f64, at: &str, price: f64, pnl: f64) -> EaOrder {
    EaOrder {
        ticket,
        magic: 0,
        symbol: symbol.into(),
        lots,
        kind: "buy".into(),
        open_price: price,
        open_time: at.into(),
        sl: 0.0,
        tp: 0.0,
        pnl,
        commission: 0.0,
        swap: 0.0,
        comment: String::new(),
    }
}

/// The terminal's figures, worked by hand: pnl is points x lots x contract size x the
/// profit currency's rate into USD (EURUSD 1.09 on the 24th, 1.0845 now; GBPUSD 1.27).
fn cfd_terminal() -> EaState {
    let mut s = EaState {
        platform: Platform::Mt4,
        currency: "USD".into(),
        balance: 10_204.40,
        equity: 10_420.67,
        ..EaState::default()
    };
    for (symbol, contract_size, tick_size, profit_to_account) in [
        ("GER40", 1.0, 0.01, 1.0845),
        ("XBRUSD", 100.0, 0.01, 1.0),
        ("UK100", 1.0, 1.0, 1.27),
    ] {
        s.specs.insert(
            symbol.into(),
            EaSpec {
                contract_size,
                tick_size,
                profit_to_account,
            },
        );
    }
    s.closed = vec![
        closed(
            801,
            "EURUSD",
            0.10,
            ("2026.11.23 10:00:00", "2026.11.24 10:00:00"),
            (1.085, 1.09),
            50.0,
        ),
        // 100 points x 1 lot x 1 EUR x 1.09.
        closed(
            802,
            "GER40",
            1.0,
            ("2026.11.24 11:00:00", "2026.11.24 15:00:00"),
            (18_000.0, 18_100.0),
            109.0,
        ),
        // 0.20 x 1 lot x 100 barrels.
        closed(
            803,
            "XBRUSD",
            1.0,
            ("2026.11.25 10:00:00", "2026.11.25 12:00:00"),
            (75.0, 75.2),
            20.0,
        ),
        // 10 points x 2 lots x 1 GBP x 1.27.
        closed(
            804,
            "UK100",
            2.0,
            ("2026.11.25 10:00:00", "2026.11.25 12:00:00"),
            (8_000.0, 8_010.0),
            25.4,
        ),
    ];
    // 199 points x 1 EUR x 1.0845 = 215.82; 0.0045 x 1,000 = 4.50 (EURUSD 0.01 lot).
    s.orders = vec![
        open(900, "GER40", 1.0, "2026.11.26 10:00:00", 18_000.0, 215.82),
        open(901, "EURUSD", 0.01, "2026.11.26 10:00:00", 1.08, 4.5),
    ];
    s.prices.insert("GER40".into(), (18_199.0, 18_199.0));
    s.prices.insert("EURUSD".into(), (1.0845, 1.0845));
    s
}

fn mt_ctx(files: &Path, xbrusd: &str) -> ToolContext {
    let mut symbols = BTreeMap::new();
    symbols.insert(
        "GER40".to_owned(),
        SymbolSpec {
            contract_size: d("1"),
            profit_currency: Some(Currency::new_checked("EUR").unwrap()),
        },
    );
    symbols.insert(
        "XBRUSD".to_owned(),
        SymbolSpec {
            contract_size: d(xbrusd),
            profit_currency: Some(Currency::USD),
        },
    );
    let config = DwxConfig {
        id: "MT".into(),
        files: files.to_path_buf(),
        platform: tradedesk_brokers::dwx::Platform::Mt4,
        magic: 730_001,
        live: false,
        server_time_zone: Some("UTC".into()),
        history_days: 30,
        timeout: Duration::from_secs(10),
        symbols,
        margin_mode: None,
        lots: BTreeMap::new(),
    };
    ToolContext::new("test").with_broker(Arc::new(DwxBroker::new(config)), None)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metatrader_cfds_take_the_contract_size_and_profit_currency_and_an_unstated_one_is_listed()
{
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("MQL4/Files");
    std::fs::create_dir_all(&files).unwrap();
    let _ea = FakeEa::start(&files, cfd_terminal());
    let ctx = mt_ctx(&files, "100");
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-11-01", "end": "2026-11-30", "currency": "USD", "include_lots": true}),
    )
    .await;
    let group = |key: &str| dec(&find(&r["groups"], "key", key)["net_pnl"]);
    // Each equals the terminal's own pnl for the trade.
    assert_eq!(group("FX:EURUSD"), d("50.00"), "{r}");
    assert_eq!(group("CFD:GER40"), d("109.00"), "{r}");
    assert_eq!(group("CFD:XBRUSD"), d("20.00"), "{r}");
    assert_eq!(group("CFD:UK100"), d("25.40"), "{r}");
    let ger = find(&r["lots"], "symbol", "GER40");
    assert_eq!(ger["instrument_currency"], "EUR");
    assert_eq!(dec(&ger["gross_pnl"]), d("100.00"));
    assert_eq!(dec(&ger["fx_rate"]), d("1.09"));
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("CFD:UK100: the DWXConnect EA writes no contract size"),
        "{notes}"
    );
    assert!(notes.contains("1.27 USD a point a lot"), "{notes}");
    assert!(!notes.contains("CFD:GER40:"), "{notes}");
    // XBRUSD's stated 100 agrees with its trade's own pnl: nothing to say.
    assert!(!notes.contains("the config's contract_size"), "{notes}");

    // The open GER40: 199 points, 199 EUR, 215.82 USD as the terminal shows.
    let p = tool(&ctx, "get_positions", json!({"currency": "USD"})).await;
    let ger = find(&p["positions"], "symbol", "GER40");
    assert_eq!(ger["instrument_currency"], "EUR");
    assert_eq!(dec(&ger["unrealized_pnl"]), d("199"));
    assert_eq!(dec(&ger["unrealized_pnl_converted"]), d("215.82"));
    assert_eq!(dec(&ger["notional"]), d("18199"));
    // 18,199 EUR x 1.0845.
    assert_eq!(dec(&ger["notional_converted"]), d("19736.82"));
    let e = tool(
        &ctx,
        "get_exposure",
        json!({"by": "symbol", "currency": "USD"}),
    )
    .await;
    assert_eq!(
        dec(&find(&e["buckets"], "key", "CFD:GER40")["value"]),
        d("19736.82")
    );

    let h = tool(&ctx, "get_server_health", json!({})).await;
    let unknown = h["unknown_specs"].as_array().unwrap();
    assert_eq!(unknown.len(), 1, "{h}");
    assert_eq!(unknown[0]["symbol"], "UK100");
    assert_eq!(dec(&unknown[0]["multiplier_assumed"]), d("1.27"));
    assert_eq!(unknown[0]["currency_assumed"], "USD");
    assert!(
        unknown[0]["fix"]
            .as_str()
            .unwrap()
            .contains("contract_size and profit_currency")
    );

    // A config that states 1,000 barrels where the terminal books 100: said, with both.
    let wrong = mt_ctx(&files, "1000");
    let p = tool(&wrong, "get_positions", json!({})).await;
    assert!(
        p["notes"].to_string().contains(
            "the config's contract_size for XBRUSD is 1000 but its closed trades' own P&L imply 100 USD a point a lot"
        ),
        "{}",
        p["notes"]
    );
}

// ---------------------------------------------------------------------------------------
// IBKR through TWS: an option whose contract states 100, a future TWS sends without a
// multiplier but whose portfolio line states it, and one nobody states.

const IB: &str = "U7654321";

fn ib_contract(
    con_id: i32,
    symbol: &str,
    sec_type: &str,
    local: &str,
    multiplier: Option<f64>,
) -> TwsContract {
    TwsContract {
        con_id,
        symbol: symbol.into(),
        sec_type: sec_type.into(),
        exchange: "SMART".into(),
        primary_exchange: String::new(),
        currency: "USD".into(),
        local_symbol: local.into(),
        multiplier,
    }
}

fn ib_fill(
    contract: &TwsContract,
    id: &str,
    time: &str,
    side: &str,
    qty: &str,
    price: f64,
) -> TwsExecution {
    TwsExecution {
        account: IB.into(),
        contract: contract.clone(),
        exec_id: id.into(),
        order_id: 0,
        perm_id: 9_001,
        time: time.into(),
        exchange: "CBOE".into(),
        side: side.into(),
        shares: qty.into(),
        price,
        commission: Some((0.0, "USD".to_owned())),
        client_id: None,
    }
}

fn ib_holding(
    contract: &TwsContract,
    position: &str,
    price: f64,
    value: f64,
    cost: f64,
) -> TwsPortfolioItem {
    TwsPortfolioItem {
        account: IB.into(),
        contract: contract.clone(),
        position: position.into(),
        market_price: price,
        market_value: value,
        average_cost: cost,
        unrealized_pnl: 0.0,
        realized_pnl: 0.0,
    }
}

fn ib_value(key: &str, value: &str, currency: &str) -> TwsAccountValue {
    TwsAccountValue {
        account: IB.into(),
        key: key.into(),
        value: value.into(),
        currency: currency.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tws_multipliers_come_from_the_contract_or_the_portfolio_and_an_unstated_one_is_listed() {
    let call = ib_contract(700, "AAPL", "OPT", "AAPL  261218C00250000", Some(100.0));
    let mes = ib_contract(800, "MES", "FUT", "MESZ6", None);
    let m2k = ib_contract(900, "M2K", "FUT", "M2KZ6", None);
    let state = TwsState {
        accounts: vec![IB.into()],
        account_values: vec![
            ib_value("NetLiquidation", "50000.00", "USD"),
            ib_value("CashBalance", "50000.00", "USD"),
            ib_value("CashBalance", "50000.00", "BASE"),
            ib_value("ExchangeRate", "1.00", "USD"),
        ],
        portfolio: vec![
            // TWS quotes average cost per contract: 1.25 x 100.
            ib_holding(&call, "1", 2.10, 210.0, 125.0),
            // -1 x 6900.50 x 5: the multiplier TWS's contract left out.
            ib_holding(&mes, "-1", 6_900.50, -34_502.5, 34_251.25),
        ],
        executions: vec![
            ib_fill(
                &call,
                "0000d4.6901.01.01",
                "20261127 10:00:00 US/Eastern",
                "BOT",
                "2",
                1.25,
            ),
            ib_fill(
                &call,
                "0000d4.6902.01.01",
                "20261127 11:00:00 US/Eastern",
                "SLD",
                "1",
                2.05,
            ),
            ib_fill(
                &mes,
                "0000d4.6903.01.01",
                "20261127 12:00:00 US/Eastern",
                "SLD",
                "1",
                6_850.25,
            ),
            ib_fill(
                &m2k,
                "0000d4.6904.01.01",
                "20261127 13:00:00 US/Eastern",
                "BOT",
                "1",
                2_400.0,
            ),
            ib_fill(
                &m2k,
                "0000d4.6905.01.01",
                "20261127 14:00:00 US/Eastern",
                "SLD",
                "1",
                2_410.0,
            ),
        ],
        ..TwsState::default()
    };
    let fake = FakeTws::start(state).await.unwrap();
    let config = TwsConfig {
        id: "ibkr".into(),
        host: "127.0.0.1".into(),
        port: fake.port(),
        client_id: 7,
        account: Some(IB.into()),
        timeout: Duration::from_secs(10),
    };
    let mut ctx =
        ToolContext::new("test").with_broker(Arc::new(TwsBroker::new(config, None)), None);
    ctx.broker_timeout = Duration::from_secs(30);
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-11-01", "end": "2026-11-30", "include_lots": true}),
    )
    .await;
    let lot = |symbol: &str| find(&r["lots"], "symbol", symbol).clone();
    // (2.05 - 1.25) x 1 x 100.
    assert_eq!(
        dec(&lot("AAPL  261218C00250000")["net_pnl"]),
        d("80.00"),
        "{r}"
    );
    // (2410 - 2400) x 1 x the 1 assumed, said in a note.
    assert_eq!(dec(&lot("M2KZ6")["net_pnl"]), d("10.00"), "{r}");
    let notes = r["notes"].to_string();
    assert!(notes.contains("M2KZ6: TWS sent this future"), "{notes}");
    let p = tool(&ctx, "get_positions", json!({})).await;
    let opt = find(&p["positions"], "symbol", "AAPL  261218C00250000");
    assert_eq!(dec(&opt["market_value"]), d("210"));
    assert_eq!(dec(&opt["cost_basis"]), d("125"));
    let fut = find(&p["positions"], "symbol", "MESZ6");
    // Margin-settled: the value is the gross unrealized P&L, (6850.25 - 6900.50) x 5.
    assert_eq!(dec(&fut["notional"]), d("-34502.5"));
    assert_eq!(dec(&fut["market_value"]), d("-251.25"));
    assert!(
        p["notes"]
            .to_string()
            .contains("is taken from its portfolio line"),
        "{}",
        p["notes"]
    );
    let e = tool(&ctx, "get_exposure", json!({"by": "asset_class"})).await;
    assert_eq!(
        dec(&find(&e["buckets"], "key", "future")["value"]),
        d("34502.50")
    );
    let h = tool(&ctx, "get_server_health", json!({})).await;
    let unknown = h["unknown_specs"].as_array().unwrap();
    assert_eq!(unknown.len(), 1, "{h}");
    assert_eq!(unknown[0]["symbol"], "M2KZ6");
    drop(fake);
}

// ---------------------------------------------------------------------------------------
// IBKR Activity Flex: the statement's multiplier on each row.

fn flex_ctx(path: PathBuf) -> ToolContext {
    let broker = IbkrFlexBroker::new(
        "ibkr",
        Some("U1234567".into()),
        FlexSource::File(path),
        Duration::from_secs(5),
    )
    .unwrap();
    ToolContext::new("test").with_broker(Arc::new(broker), None)
}

fn flex_fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/flex/ibkr-flex-two-accounts.xml")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flex_options_and_futures_carry_the_statements_multiplier_to_ibkrs_own_figures() {
    let ctx = flex_ctx(flex_fixture());
    // AAPL 17OCT25 220 C: 1 bought at 6.15, sold at 9.80, x 100, less 0.65 + 0.66:
    // the statement's own fifoPnlRealized of 363.69.
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2025-10-10", "end": "2025-10-10", "include_lots": true}),
    )
    .await;
    let lot = find(&r["lots"], "symbol", "AAPL  251017C00220000");
    assert_eq!(dec(&lot["gross_pnl"]), d("365.00"), "{r}");
    assert_eq!(dec(&lot["net_pnl"]), d("363.69"), "{r}");
    // MESH6, 2 long at 6712.25 x 5, marked 6905.75: positionValue 69057.5 and
    // fifoPnlUnrealized 1933.76 (1935 less the 1.24 opening commission), as the statement says.
    let p = tool(&ctx, "get_positions", json!({"symbol": "MESH6"})).await;
    let mes = find(&p["positions"], "symbol", "MESH6");
    assert_eq!(dec(&mes["notional"]), d("69057.5"));
    assert_eq!(dec(&mes["unrealized_pnl"]), d("1933.76"));
    let e = tool(&ctx, "get_exposure", json!({"by": "asset_class"})).await;
    assert_eq!(
        dec(&find(&e["buckets"], "key", "future")["value"]),
        d("69057.5")
    );
    let h = tool(&ctx, "get_server_health", json!({})).await;
    assert!(h.get("unknown_specs").is_none(), "{h}");

    // The same statement with the future's multiplier left out: 1 is assumed, and said.
    let text = std::fs::read_to_string(flex_fixture()).unwrap();
    let stripped = text.replace(r#"listingExchange="CME" underlyingConid="11004968" underlyingSymbol="ES" multiplier="5""#, r#"listingExchange="CME" underlyingConid="11004968" underlyingSymbol="ES""#)
        .replace(r#"listingExchange="CME" multiplier="5""#, r#"listingExchange="CME""#);
    assert!(!stripped.contains(r#"multiplier="5""#));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("statement.xml");
    std::fs::write(&path, stripped).unwrap();
    let ctx = flex_ctx(path);
    let p = tool(&ctx, "get_positions", json!({"symbol": "MESH6"})).await;
    assert!(
        p["notes"]
            .to_string()
            .contains("CME:MESH6: the book states no multiplier for this future: 1 assumed"),
        "{}",
        p["notes"]
    );
    let h = tool(&ctx, "get_server_health", json!({})).await;
    assert_eq!(h["unknown_specs"][0]["symbol"], "MESH6", "{h}");
}

// ---------------------------------------------------------------------------------------
// Moomoo / Futu OpenD: a US options account. OpenD's fills state no contract size; the
// position's val / (qty x price) does, and a US option without a position is the
// standard 100-share contract, said in a note.

const FUTU_ACC: u64 = 281_235;

fn futu_fill(id: u64, code: &str, side: i32, qty: f64, price: f64, at: &str) -> pb::OrderFill {
    let mut f = build::fill(id, &format!("O{id}"), code, build::US, side, qty, price, at);
    f.name = code.to_owned();
    f
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn futu_options_take_the_contract_size_their_position_states() {
    let mut s = OpenDState {
        accounts: vec![build::account(
            pb::TRD_ENV_REAL,
            FUTU_ACC,
            pb::TRD_MARKET_US,
            "1002",
        )],
        ..OpenDState::default()
    };
    s.funds.insert(
        (FUTU_ACC, pb::CURRENCY_USD),
        build::funds(
            pb::CURRENCY_USD,
            10_000.0,
            7.0,
            &[(pb::CURRENCY_USD, 10_000.0)],
        ),
    );
    let mut put = build::position("AAPL261218P50000", build::US, 1.0, 0.07);
    put.name = "AAPL 261218 50.00P".to_owned();
    put.val = 7.0;
    put.pl_val = 1.0;
    put.average_cost_price = Some(0.06);
    s.positions.insert(FUTU_ACC, vec![put]);
    s.fills.insert(
        FUTU_ACC,
        vec![
            futu_fill(1, "AAPL261218P50000", 1, 2.0, 0.06, "2026-11-24 09:45:00"),
            futu_fill(2, "AAPL261218P50000", 2, 1.0, 0.16, "2026-11-24 10:30:00"),
            futu_fill(3, "TSLA261218C250000", 1, 1.0, 1.00, "2026-11-25 09:45:00"),
            futu_fill(4, "TSLA261218C250000", 2, 1.0, 1.50, "2026-11-25 10:30:00"),
        ],
    );
    s.fees.insert("O1".to_owned(), 0.0);
    s.fees.insert("O2".to_owned(), 0.0);
    s.fees.insert("O3".to_owned(), 0.0);
    s.fees.insert("O4".to_owned(), 0.0);
    // A snapshot without the option's extra data: no contract size to trade it by.
    let mut snap = build::snapshot(pb::QOT_MARKET_US, "AAPL261218P50000", 0.06, 0.08);
    snap.basic.r#type = 8;
    snap.basic.lot_size = 1;
    s.snapshots
        .insert((pb::QOT_MARKET_US, "AAPL261218P50000".to_owned()), snap);
    let fake = OpenDFake::start(s).await;
    let config = OpenDConfig {
        id: "MOOMOO-US".into(),
        host: "127.0.0.1".into(),
        port: fake.port,
        acc_id: None,
        market: FutuMarket::Us,
        simulate: false,
        history_days: 365,
        timeout: Duration::from_secs(10),
        state_dir: None,
    };
    let broker = Arc::new(OpenDBroker::new(config));
    let mut ctx = ToolContext::new("test").with_broker(broker.clone(), None);
    ctx.broker_timeout = Duration::from_secs(10);
    let refused = match tradedesk_brokers::Broker::instrument(
        &*broker,
        "MOOMOO-US",
        "AAPL261218P50000",
    )
    .await
    {
        Err(tradedesk_brokers::BrokerError::UnknownSymbol { known, .. }) => known,
        other => panic!("{other:?}"),
    };
    assert!(refused.contains("contract size"), "{refused}");
    let r = tool(
        &ctx,
        "get_realized_pnl",
        json!({"start": "2026-11-01", "end": "2026-11-30"}),
    )
    .await;
    // (0.16 - 0.06) x 1 x 100 and (1.50 - 1.00) x 1 x 100.
    assert_eq!(
        dec(&find(&r["groups"], "key", "US:AAPL261218P50000")["net_pnl"]),
        d("10.00"),
        "{r}"
    );
    assert_eq!(
        dec(&find(&r["groups"], "key", "US:TSLA261218C250000")["net_pnl"]),
        d("50.00"),
        "{r}"
    );
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("the standard contract of 100 shares is used"),
        "{notes}"
    );
    let p = tool(&ctx, "get_positions", json!({})).await;
    let put = find(&p["positions"], "symbol", "AAPL261218P50000");
    assert_eq!(put["asset_class"], "option");
    // OpenD's val: 1 x 0.07 x 100.
    assert_eq!(dec(&put["market_value"]), d("7"));
    assert_eq!(dec(&put["cost_basis"]), d("6"));
    let e = tool(&ctx, "get_exposure", json!({"by": "asset_class"})).await;
    assert_eq!(dec(&find(&e["buckets"], "key", "option")["value"]), d("7"));
    drop(fake);
}

#[test]
fn a_metatrader_config_states_symbol_specs_and_a_bad_one_names_the_key() {
    use tradedesk_tools::config::{Config, State, config_context};
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("MQL4/Files");
    std::fs::create_dir_all(&files).unwrap();
    let state = State::open(&dir.path().join("state")).unwrap();
    let write = |symbols: &str| {
        let path = dir.path().join("tradedesk.toml");
        std::fs::write(
            &path,
            format!(
                "[[accounts]]\nid = \"MT\"\nbroker = \"metatrader\"\npath = {:?}\n{symbols}",
                files.display().to_string()
            ),
        )
        .unwrap();
        Config::load(&path).and_then(|c| config_context("test", &c, &state).map(|_| ()))
    };
    write(
        "[accounts.symbols.\"GER40\"]\ncontract_size = 1\nprofit_currency = \"EUR\"\n[accounts.symbols.XBRUSD]\ncontract_size = \"100\"\n",
    )
    .unwrap();
    let e = write("[accounts.symbols.GER40]\ncontract_size = 0\n").unwrap_err();
    assert!(
        e.message
            .contains("symbols.\"GER40\".contract_size is 0: it must be a number > 0"),
        "{}",
        e.message
    );
    let e = write("[accounts.symbols.GER40]\ncontract_size = 1\nprofit_currency = \"euro\"\n")
        .unwrap_err();
    assert!(
        e.message.contains("symbols.\"GER40\".profit_currency"),
        "{}",
        e.message
    );
}

#[test]
fn a_metatrader_margin_mode_is_hedging_or_netting_and_mt4_only_hedges() {
    use tradedesk_tools::config::{Config, State, config_context};
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(&dir.path().join("state")).unwrap();
    let write = |folder: &str, extra: &str| {
        let files = dir.path().join(folder);
        std::fs::create_dir_all(&files).unwrap();
        let path = dir.path().join("tradedesk.toml");
        std::fs::write(
            &path,
            format!(
                "[[accounts]]\nid = \"MT\"\nbroker = \"metatrader\"\npath = {:?}\n{extra}",
                files.display().to_string()
            ),
        )
        .unwrap();
        Config::load(&path).and_then(|c| config_context("test", &c, &state).map(|_| ()))
    };
    write("MQL5/Files", "margin_mode = \"netting\"\n").unwrap();
    write("MQL5/Files", "margin_mode = \"hedging\"\n").unwrap();
    write("MQL4/Files", "margin_mode = \"hedging\"\n").unwrap();
    let e = write("MQL4/Files", "margin_mode = \"netting\"\n").unwrap_err();
    assert!(e.message.contains("netting\" on MT4"), "{}", e.message);
    let e = write("MQL5/Files", "margin_mode = \"hedge\"\n").unwrap_err();
    assert!(
        e.message
            .contains("margin_mode 'hedge' is neither hedging nor netting"),
        "{}",
        e.message
    );
}

#[test]
fn a_metatrader_symbols_volumes_are_positive_whole_steps_and_may_stand_alone() {
    use tradedesk_tools::config::{Config, State, config_context};
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(&dir.path().join("state")).unwrap();
    let files = dir.path().join("MQL4/Files");
    std::fs::create_dir_all(&files).unwrap();
    let write = |symbols: &str| {
        let path = dir.path().join("tradedesk.toml");
        std::fs::write(
            &path,
            format!(
                "[[accounts]]\nid = \"MT\"\nbroker = \"metatrader\"\npath = {:?}\n{symbols}",
                files.display().to_string()
            ),
        )
        .unwrap();
        Config::load(&path).and_then(|c| config_context("test", &c, &state).map(|_| ()))
    };
    // Volumes alone (a pair's contract size is known), or beside a CFD's spec.
    write("[accounts.symbols.XAUUSD]\nlot_step = 0.01\nmin_lots = 0.01\nmax_lots = 50\n").unwrap();
    write(
        "[accounts.symbols.GER40]\ncontract_size = 1\nprofit_currency = \"EUR\"\nlot_step = \"0.1\"\nmax_lots = 20\n",
    )
    .unwrap();
    let e = write("[accounts.symbols.XAUUSD]\nlot_step = 0\n").unwrap_err();
    assert!(
        e.message
            .contains("symbols.\"XAUUSD\".lot_step is 0: it must be a number of lots > 0"),
        "{}",
        e.message
    );
    let e = write("[accounts.symbols.XAUUSD]\nmin_lots = 5\nmax_lots = 1\n").unwrap_err();
    assert!(
        e.message.contains("min_lots 5 is above max_lots 1"),
        "{}",
        e.message
    );
    let e = write("[accounts.symbols.GER40]\nlot_step = 0.1\nmax_lots = 2.05\n").unwrap_err();
    assert!(
        e.message
            .contains("max_lots 2.05 is not a whole multiple of lot_step 0.1"),
        "{}",
        e.message
    );
    let e = write("[accounts.symbols.GER40]\nprofit_currency = \"EUR\"\n").unwrap_err();
    assert!(
        e.message
            .contains("has a profit_currency but no contract_size"),
        "{}",
        e.message
    );
    let e = write("[accounts.symbols.GER40]\n").unwrap_err();
    assert!(e.message.contains("states nothing"), "{}", e.message);
}
