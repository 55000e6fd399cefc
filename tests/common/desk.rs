//! What the market-data tests share: a tool call, a context over one broker with its
//! timeout, and each adapter pointed at its fake on loopback.

#![allow(dead_code, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use serde_json::Value;
use tradedesk_brokers::Broker;
use tradedesk_brokers::alpaca::{AlpacaBroker, AlpacaConfig};
use tradedesk_brokers::demo::demo_book;
use tradedesk_brokers::futu::{FutuMarket, OpenDBroker, OpenDConfig};
use tradedesk_brokers::sim::{Clock, ManualClock, SimBroker, SimConfig};
use tradedesk_brokers::tws::{TwsBroker, TwsConfig};
use tradedesk_tools::config::State;
use tradedesk_tools::{ToolContext, call};

/// The key and secret every Alpaca fake of these tests is started with.
pub const KEY: &str = "PKTESTKEY";
pub const SECRET: &str = "test-secret";

/// A tool's structured answer (an unknown tool or non-object arguments panic).
pub async fn tool(ctx: &ToolContext, name: &str, args: Value) -> Value {
    call(ctx, name, args).await.unwrap().structured
}

/// `get_option_chain`'s structured answer to these arguments.
pub async fn ask_chain(ctx: &ToolContext, args: Value) -> Value {
    tool(ctx, "get_option_chain", args).await
}

/// A context serving one broker, its calls cut off at `timeout`.
pub fn ctx_of(broker: Arc<dyn Broker>, timeout: Duration) -> ToolContext {
    let mut ctx = ToolContext::new("test").with_broker(broker, None);
    ctx.broker_timeout = timeout;
    ctx
}

/// A paper Alpaca account `ALPACA` whose trading and data hosts are both the fake.
pub fn alpaca(url: &str, timeout: Duration) -> Arc<dyn Broker> {
    Arc::new(
        AlpacaBroker::new(AlpacaConfig {
            account: "ALPACA".into(),
            live: false,
            base_url: url.into(),
            data_url: url.into(),
            key: KEY.into(),
            secret: SECRET.into(),
            timeout,
        })
        .unwrap(),
    )
}

/// A TWS account `ibkr` on the fake's port (client id 7, the gateway's only account).
pub fn tws(port: u16, timeout: Duration) -> Arc<dyn Broker> {
    Arc::new(TwsBroker::new(
        TwsConfig {
            id: "ibkr".into(),
            host: "127.0.0.1".into(),
            port,
            client_id: 7,
            account: None,
            timeout,
        },
        None,
    ))
}

/// A live moomoo MY account `MOOMOO-MY` on the OpenD fake's port (no state directory).
pub fn opend(port: u16, timeout: Duration) -> Arc<dyn Broker> {
    Arc::new(OpenDBroker::new(opend_config(port, timeout)))
}

/// The configuration `opend` serves, for tests that change a field of it.
pub fn opend_config(port: u16, timeout: Duration) -> OpenDConfig {
    OpenDConfig {
        id: "MOOMOO-MY".into(),
        host: "127.0.0.1".into(),
        port,
        acc_id: None,
        market: FutuMarket::My,
        simulate: false,
        history_days: 365,
        timeout,
        state_dir: None,
    }
}

/// The sim `SIM` over the demo book, its state in `dir` and its clock stopped at `millis`
/// (UTC milliseconds).
pub fn sim_at(dir: &tempfile::TempDir, millis: i64) -> Arc<dyn Broker> {
    let state = State::open(dir.path()).unwrap();
    let clock = Arc::new(ManualClock::new(Utc.timestamp_millis_opt(millis).unwrap()));
    Arc::new(SimBroker::new(
        SimConfig::new("SIM"),
        &demo_book().unwrap(),
        Arc::clone(&state.store),
        clock as Arc<dyn Clock>,
    ))
}

/// The contract of a `get_option_chain` answer with this symbol (panics, showing the
/// answer, when there is none).
pub fn chain_contract<'a>(r: &'a Value, symbol: &str) -> &'a Value {
    r["contracts"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}"))
        .iter()
        .find(|c| c["symbol"] == symbol)
        .unwrap_or_else(|| panic!("no {symbol}: {r:#}"))
}

/// A JSON number as f64 (panics on anything else).
pub fn num_of(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// A `get_option_chain` answer's strikes, contract by contract, in its order.
pub fn chain_strikes(r: &Value) -> Vec<f64> {
    r["contracts"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}"))
        .iter()
        .map(|c| num_of(&c["strike"]))
        .collect()
}

/// An answer's notes, one a line.
pub fn notes_of(r: &Value) -> String {
    r["notes"]
        .as_array()
        .unwrap_or_else(|| panic!("{r:#}"))
        .iter()
        .map(|n| n.as_str().unwrap_or_else(|| panic!("{n}")))
        .collect::<Vec<_>>()
        .join("\n")
}
