//! `tradedesk.toml`: base currency, accounts, sectors and FX files.
//!
//! Strict: an unknown key is an error naming it, so a typo never silently changes what
//! the server reads. Relative paths are relative to the config file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::Deserialize;
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::sim::{Clock, ManualClock, SimBroker, SimConfig, WallClock};
use tradedesk_brokers::{BookBroker, parse_fx_file};
use tradedesk_core::{Currency, Error, ErrorCode, Result, SectorMap};
use tradedesk_store::Store;
use tradedesk_store::tokens::TokenKey;

use crate::context::ToolContext;
use crate::toolset::Toolsets;
use crate::trading::{Trading, TradingSettings, store_error};

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub base_currency: Option<String>,
    #[serde(default)]
    pub accounts: Vec<AccountConfig>,
    pub sectors_file: Option<PathBuf>,
    pub fx_file: Option<PathBuf>,
    /// A reference-rate source used after the fx_file and the brokers' own rates: "ecb".
    pub fx_source: Option<String>,
    /// Where the reference rates are fetched from (default: the ECB's eurofxref-hist.xml).
    pub fx_url: Option<String>,
    /// Per-call bound on a broker, in milliseconds.
    pub broker_timeout_ms: Option<u64>,
    pub http: Option<HttpConfig>,
    pub telemetry: Option<TelemetryConfig>,
    pub trading: Option<TradingConfig>,
    /// Folders CSV bar files may be read from over HTTP.
    pub data_dirs: Option<Vec<PathBuf>>,
    pub tools: Option<ToolsConfig>,
}

/// `[tools]`: which toolsets are listed and served (docs/tools.md, "Toolsets").
#[derive(Debug, Clone, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Toolset names; absent: all of them.
    pub enabled: Option<Vec<String>>,
}

impl Config {
    /// The toolsets `[tools] enabled` names (all when absent).
    ///
    /// # Errors
    /// `invalid_argument` naming an unknown toolset and the valid ones.
    pub fn toolsets(&self) -> Result<Toolsets> {
        match self.tools.as_ref().and_then(|t| t.enabled.as_ref()) {
            None => Ok(Toolsets::ALL),
            Some(names) => Toolsets::from_names(names.iter().map(String::as_str), "tools.enabled"),
        }
    }
}

/// A number in the config: an integer, a float or a decimal string, read as a decimal.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ConfigNumber {
    Int(i64),
    Float(f64),
    Text(String),
}

impl ConfigNumber {
    /// The number as written (a float by its shortest digits).
    fn text(&self) -> String {
        match self {
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Text(t) => t.clone(),
        }
    }

    fn decimal(&self, key: &str) -> Result<Decimal> {
        let text = self.text();
        text.parse::<Decimal>()
            .ok()
            .filter(|d| !d.is_sign_negative())
            .ok_or_else(|| {
                config_error(
                    format!("trading.{key}: '{text}' is not a non-negative number"),
                    "write a plain number, e.g. 1000",
                )
            })
    }
}

/// `[trading]` (docs/methodology/trading.md).
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TradingConfig {
    pub enabled: Option<bool>,
    pub confirm_paper: Option<bool>,
    pub confirm_live: Option<bool>,
    pub max_order_notional: Option<ConfigNumber>,
    pub max_daily_notional: Option<ConfigNumber>,
    pub max_position_weight_pct: Option<ConfigNumber>,
    pub max_orders_per_day: Option<u32>,
    pub allow_symbols: Option<Vec<String>>,
    pub deny_symbols: Option<Vec<String>>,
    pub kill_switch_file: Option<PathBuf>,
    pub token_ttl_seconds: Option<u32>,
}

/// `[http]`: the Streamable HTTP transport's guards.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    pub allowed_hosts: Option<Vec<String>>,
    pub allowed_origins: Option<Vec<String>>,
    pub cors_origins: Option<Vec<String>>,
    pub rate_limit_per_minute: Option<u32>,
}

/// `[telemetry]`: one JSON line per tool call.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    pub enabled: Option<bool>,
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    pub id: String,
    pub broker: String,
    /// `book`: the book file holding this account.
    pub path: Option<PathBuf>,
    /// May trade live (with `mode: "live"` on each call).
    pub live: Option<bool>,
    /// `alpaca`: `paper` (default) or `live`, the host to use; `live` needs `live = true`.
    pub mode: Option<String>,
    /// `sim`: the price process's seed.
    pub seed: Option<u64>,
    /// `sim`: the account currency (default USD).
    pub currency: Option<String>,
    /// `sim`: the cash deposited when the account is first used (default 100000).
    pub cash: Option<u64>,
    /// `sim`: freezes the clock at this RFC 3339 instant (tests and reproducible demos).
    pub clock: Option<String>,
    /// `alpaca`: the trading host (default: Alpaca's paper or live host).
    pub base_url: Option<String>,
    /// `alpaca`: the market-data host.
    pub data_url: Option<String>,
    /// `alpaca`: the environment variables holding the key and secret (default
    /// `APCA_API_KEY_ID` / `APCA_API_SECRET_KEY`).
    pub key_env: Option<String>,
    pub secret_env: Option<String>,
    /// Per-call bound for this account's network calls, in milliseconds.
    pub timeout_ms: Option<u64>,
    /// `ibkr`: the account number (one of a statement's or a gateway's accounts).
    pub account: Option<String>,
    /// `ibkr`: the full history, from an Activity Flex statement.
    pub flex: Option<FlexConfig>,
    /// `ibkr`: the TWS / IB Gateway socket (host default 127.0.0.1, port default 7497)
    /// and the API client id tradedesk connects with.
    pub host: Option<String>,
    pub port: Option<u16>,
    pub client_id: Option<i32>,
    /// `moomoo`: the market read (`MY` Bursa Malaysia, `HK`, `US`).
    pub market: Option<String>,
    /// `moomoo`, `metatrader`: how many days of history are read (default 365).
    pub history_days: Option<u32>,
    /// `metatrader`: the magic number tradedesk's orders carry (default 730001).
    pub magic: Option<i64>,
    /// `metatrader`: the broker's server time zone (IANA name), for the EA's times.
    pub server_time_zone: Option<String>,
    /// `metatrader`: contract size, profit currency and volumes per symbol, as the
    /// terminal's Specification window shows them (the DWXConnect EA does not write
    /// them): `[accounts.symbols."GER40"] contract_size = 1, profit_currency = "EUR",
    /// lot_step = 0.1, min_lots = 0.1, max_lots = 50`.
    pub symbols: Option<BTreeMap<String, SymbolConfig>>,
    /// `metatrader` (MT5): "hedging" (each ticket its own position) or "netting" (one
    /// position per symbol), as the terminal's account shows it; MT4 is always hedging.
    pub margin_mode: Option<String>,
}

/// One symbol's spec under a `metatrader` account's `symbols`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SymbolConfig {
    /// Units in one lot: a number, or a decimal string.
    pub contract_size: Option<toml::Value>,
    /// The ISO 4217 currency profit is paid in.
    pub profit_currency: Option<String>,
    /// The symbol's volume step, minimum and maximum, in lots (numbers or decimal
    /// strings).
    pub lot_step: Option<toml::Value>,
    pub min_lots: Option<toml::Value>,
    pub max_lots: Option<toml::Value>,
}

/// A positive number from the config: an integer, a float or a decimal string.
fn positive_number(v: &toml::Value) -> Option<Decimal> {
    match v {
        toml::Value::Integer(n) => Some(Decimal::from(*n)),
        toml::Value::Float(f) => Decimal::from_str(&f.to_string()).ok(),
        toml::Value::String(t) => Decimal::from_str(t.trim()).ok(),
        _ => None,
    }
    .filter(|d| d.is_sign_positive() && !d.is_zero())
}

/// A `metatrader` account's volumes per symbol, checked: each a positive number, the
/// minimum at most the maximum, and both whole multiples of the step.
fn lot_rules(
    i: usize,
    account: &AccountConfig,
) -> Result<BTreeMap<String, tradedesk_brokers::dwx::LotRules>> {
    let mut out = BTreeMap::new();
    for (symbol, spec) in account.symbols.iter().flatten() {
        let what = format!("accounts[{i}] ({}): symbols.\"{symbol}\"", account.id);
        let read = |key: &str, v: &Option<toml::Value>| -> Result<Option<Decimal>> {
            v.as_ref()
                .map(|v| {
                    positive_number(v).ok_or_else(|| {
                        config_error(
                            format!("{what}.{key} is {v}: it must be a number of lots > 0"),
                            "write the volume the terminal's Specification window shows, e.g. lot_step = 0.01, min_lots = 0.01, max_lots = 50",
                        )
                    })
                })
                .transpose()
        };
        let rules = tradedesk_brokers::dwx::LotRules {
            step: read("lot_step", &spec.lot_step)?,
            min: read("min_lots", &spec.min_lots)?,
            max: read("max_lots", &spec.max_lots)?,
        };
        if let (Some(min), Some(max)) = (rules.min, rules.max)
            && min > max
        {
            return Err(config_error(
                format!("{what}: min_lots {min} is above max_lots {max}"),
                "write the minimum and maximum volume as the Specification window shows them",
            ));
        }
        if let Some(step) = rules.step {
            for (key, v) in [("min_lots", rules.min), ("max_lots", rules.max)] {
                if let Some(v) = v
                    && !(v % step).is_zero()
                {
                    return Err(config_error(
                        format!("{what}: {key} {v} is not a whole multiple of lot_step {step}"),
                        "check the volumes against the Specification window: the minimum and maximum are whole steps",
                    ));
                }
            }
        }
        if rules != tradedesk_brokers::dwx::LotRules::default() {
            out.insert(symbol.clone(), rules);
        }
    }
    Ok(out)
}

/// A `metatrader` account's `symbols`, checked: each contract size a positive number and
/// each profit currency an ISO code.
fn symbol_specs(
    i: usize,
    account: &AccountConfig,
) -> Result<BTreeMap<String, tradedesk_brokers::dwx::SymbolSpec>> {
    let mut out = BTreeMap::new();
    for (symbol, spec) in account.symbols.iter().flatten() {
        let what = format!("accounts[{i}] ({}): symbols.\"{symbol}\"", account.id);
        let Some(contract_size) = &spec.contract_size else {
            if spec.profit_currency.is_some() {
                return Err(config_error(
                    format!("{what} has a profit_currency but no contract_size"),
                    "write the contract size the terminal's Specification window shows beside it, e.g. contract_size = 1",
                ));
            }
            if spec.lot_step.is_none() && spec.min_lots.is_none() && spec.max_lots.is_none() {
                return Err(config_error(
                    format!("{what} states nothing"),
                    "write contract_size and profit_currency, or lot_step, min_lots and max_lots, as the Specification window shows them (or remove the section)",
                ));
            }
            continue; // volumes only
        };
        let size = positive_number(contract_size).ok_or_else(|| {
            config_error(
                format!("{what}.contract_size is {contract_size}: it must be a number > 0"),
                "write the contract size the terminal's Specification window shows, e.g. contract_size = 100",
            )
        })?;
        let profit_currency = spec
            .profit_currency
            .as_deref()
            .map(|c| {
                Currency::new_checked(c).map_err(|e| {
                    config_error(
                        format!("{what}.profit_currency: {}", e.message),
                        "write the profit currency the Specification window shows, e.g. profit_currency = \"EUR\"",
                    )
                })
            })
            .transpose()?;
        out.insert(
            symbol.clone(),
            tradedesk_brokers::dwx::SymbolSpec {
                contract_size: size,
                profit_currency,
            },
        );
    }
    Ok(out)
}

/// `flex` of an `ibkr` account: a downloaded statement, or the Flex Web Service.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FlexConfig {
    /// A downloaded Activity Flex statement (XML).
    pub path: Option<PathBuf>,
    /// The Activity Flex Query's id, for the Flex Web Service.
    pub query_id: Option<String>,
    /// The environment variable holding the Flex Web Service token.
    pub token_env: Option<String>,
    /// The service's address (tests; default IBKR's).
    pub url: Option<String>,
    /// The share of the parent's cost basis each spin-off, rights issue or dividend in
    /// kind gives its new instrument, by the new instrument's symbol (`{ "SOLV" = "0.25" }`),
    /// where the statement does not show it (docs/methodology/corporate-actions.md).
    pub cost_fractions: Option<std::collections::BTreeMap<String, ConfigNumber>>,
}

/// The client id tradedesk gives TWS unless the config names one (each API connection
/// to one TWS needs its own).
const DEFAULT_TWS_CLIENT_ID: i32 = 7_301;

/// The Flex statement source of an `ibkr` account.
fn ibkr_flex(
    i: usize,
    account: &AccountConfig,
    flex: &FlexConfig,
    timeout: std::time::Duration,
) -> Result<tradedesk_brokers::ibkr::IbkrFlexBroker> {
    let source = match (&flex.path, &flex.query_id) {
        (Some(path), None) => tradedesk_brokers::ibkr::FlexSource::File(path.clone()),
        (None, Some(query_id)) => {
            let var = flex
                .token_env
                .clone()
                .unwrap_or_else(|| "IBKR_FLEX_TOKEN".to_owned());
            let token = std::env::var(&var).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                config_error(
                    format!("accounts[{i}] ({}): the environment variable {var} is not set", account.id),
                    "export the Flex Web Service token (Client Portal: Reporting > Flex Queries), or name another variable with flex.token_env",
                )
            })?;
            tradedesk_brokers::ibkr::FlexSource::Service {
                url: flex
                    .url
                    .clone()
                    .unwrap_or_else(|| tradedesk_brokers::ibkr::FLEX_SERVICE_URL.to_owned()),
                query_id: query_id.clone(),
                token,
            }
        }
        _ => {
            return Err(config_error(
                format!(
                    "accounts[{i}] ({}): flex needs exactly one of path and query_id",
                    account.id
                ),
                "flex = { path = \"statement.xml\" } for a downloaded statement, or { query_id = \"…\" } for the Flex Web Service",
            ));
        }
    };
    let mut options = tradedesk_brokers::flex::FlexOptions::default();
    for (symbol, value) in flex.cost_fractions.iter().flatten() {
        let text = value.text();
        let fraction =
            tradedesk_brokers::flex::parse_cost_fraction(symbol, &text).map_err(|message| {
                config_error(
                    format!("accounts[{i}] ({}): flex.{message}", account.id),
                    "cost_fractions = { \"SOLV\" = \"0.25\" }: the share IBKR gave the new instrument (the Cost Basis of both in the Open Positions right after the action)",
                )
            })?;
        options.cost_fractions.insert(symbol.clone(), fraction);
    }
    tradedesk_brokers::ibkr::IbkrFlexBroker::new(
        account.id.clone(),
        account.account.clone(),
        source,
        timeout,
    )
    .map(|broker| broker.with_options(options))
    .map_err(Error::from)
}

fn config_error(message: String, hint: &str) -> Error {
    Error::new(ErrorCode::InvalidArgument, message, hint)
}

impl Config {
    /// Reads and checks a config file; relative paths become relative to its folder.
    ///
    /// # Errors
    /// `invalid_argument` naming the file, the key and what is expected.
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            config_error(
                format!("{}: cannot read the config: {e}", path.display()),
                "check the --config path",
            )
        })?;
        let mut config: Self = toml::from_str(&text).map_err(|e| {
            config_error(
                format!("{}: {}", path.display(), e.to_string().trim()),
                "the README's sections \"Your own history\", \"Connecting brokers\" and \"Trading\" list the keys tradedesk.toml takes",
            )
        })?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        config.sectors_file.as_mut().map(resolve);
        if let Some(path) = config.telemetry.as_mut().and_then(|t| t.path.as_mut()) {
            resolve(path);
        }
        config.fx_file.as_mut().map(resolve);
        if let Some(dirs) = config.data_dirs.as_mut() {
            dirs.iter_mut().for_each(resolve);
        }
        if let Some(path) = config
            .trading
            .as_mut()
            .and_then(|t| t.kill_switch_file.as_mut())
        {
            resolve(path);
        }
        config
            .toolsets()
            .map_err(|e| config_error(format!("{}: {}", path.display(), e.message), &e.hint))?;
        for account in &mut config.accounts {
            account.path.as_mut().map(resolve);
            if let Some(path) = account.flex.as_mut().and_then(|f| f.path.as_mut()) {
                resolve(path);
            }
        }
        Ok(config)
    }
}

/// The reference-rate source `fx_source` names, cached in the state directory.
///
/// # Errors
/// `invalid_argument` for an unknown source, an `fx_url` without one, or a URL that is
/// not http(s).
fn reference_fx(
    config: &Config,
    state: &State,
) -> Result<Option<Arc<tradedesk_brokers::ecb::EcbSource>>> {
    let source = match config.fx_source.as_deref() {
        None => {
            if config.fx_url.is_some() {
                return Err(config_error(
                    "fx_url is set but fx_source is not".to_owned(),
                    "add fx_source = \"ecb\" (fx_url overrides where its rates are fetched from), or remove fx_url",
                ));
            }
            return Ok(None);
        }
        Some(s) => s,
    };
    if source != "ecb" {
        return Err(config_error(
            format!("fx_source '{source}' is not a known rate source"),
            "write fx_source = \"ecb\" (the European Central Bank's daily reference rates), or remove it",
        ));
    }
    let url = config
        .fx_url
        .as_deref()
        .unwrap_or(tradedesk_brokers::ecb::ECB_HIST_URL);
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err(config_error(
            format!("fx_url '{url}' is not an http(s) URL"),
            "write the URL of an ECB eurofxref file, e.g. https://www.ecb.europa.eu/stats/eurofxref/eurofxref-hist.xml",
        ));
    }
    let timeout =
        std::time::Duration::from_millis(config.broker_timeout_ms.unwrap_or(10_000).max(1));
    tradedesk_brokers::ecb::EcbSource::new(url, &state.dir, timeout)
        .map(|s| Some(Arc::new(s)))
        .map_err(Error::internal)
}

/// The context for the embedded demo (no configuration at all).
///
/// # Errors
/// Only if the shipped demo is broken.
pub fn demo_context(version: &str) -> Result<ToolContext> {
    let book = demo_book().map_err(|e| Error::internal(e.to_string()))?;
    Ok(ToolContext::new(version).with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book)), None))
}

/// The id of the demo's paper account.
pub const DEMO_SIM_ACCOUNT: &str = "SIM-PAPER";

/// The durable state of a state directory, opened once per process.
#[derive(Debug, Clone)]
pub struct State {
    pub dir: PathBuf,
    pub store: Arc<Store>,
}

impl State {
    /// Opens (creating) the state directory's database.
    ///
    /// # Errors
    /// `internal` naming the directory when it cannot be created or opened.
    pub fn open(dir: &Path) -> Result<Self> {
        let store = Store::open(dir).map_err(|e| {
            let hint = if e.is_busy() {
                "another tradedesk process is holding it; retry when it has finished, or stop it (its state directory is shared on purpose: orders and limits are counted across processes)"
            } else {
                "pass --state-dir with a writable folder, or fix the permissions"
            };
            Error::new(
                ErrorCode::Internal,
                format!("cannot open the state directory: {e}"),
                hint,
            )
        })?;
        Ok(Self {
            dir: dir.to_path_buf(),
            store: Arc::new(store),
        })
    }
}

fn sim_clock(text: Option<&str>, id: &str) -> Result<Arc<dyn Clock>> {
    match text {
        None => Ok(Arc::new(WallClock)),
        Some(t) => {
            let at = chrono::DateTime::parse_from_rfc3339(t).map_err(|_| {
                config_error(
                    format!("accounts ({id}): clock '{t}' is not an RFC 3339 time"),
                    "write it like 2026-11-30T15:00:00Z, or remove clock for wall time",
                )
            })?;
            Ok(Arc::new(ManualClock::new(at.with_timezone(&chrono::Utc))))
        }
    }
}

/// The trading guards for a context, from `[trading]` (defaults when absent).
///
/// # Errors
/// A bad number in `[trading]`, or the token key cannot be read or made.
pub fn trading_for(
    config: Option<&TradingConfig>,
    live_accounts: Vec<String>,
    state: &State,
    clock: Arc<dyn Clock>,
) -> Result<Trading> {
    let mut settings = TradingSettings::defaults(&state.dir);
    settings.live_accounts = live_accounts;
    if let Some(t) = config {
        let set_bool = |v: Option<bool>, d: bool| v.unwrap_or(d);
        settings.enabled = set_bool(t.enabled, settings.enabled);
        settings.confirm_paper = set_bool(t.confirm_paper, settings.confirm_paper);
        settings.confirm_live = set_bool(t.confirm_live, settings.confirm_live);
        if let Some(n) = &t.max_order_notional {
            settings.max_order_notional = n.decimal("max_order_notional")?;
        }
        if let Some(n) = &t.max_daily_notional {
            settings.max_daily_notional = n.decimal("max_daily_notional")?;
        }
        if let Some(n) = &t.max_position_weight_pct {
            settings.max_position_weight_pct = n.decimal("max_position_weight_pct")?;
        }
        if let Some(n) = t.max_orders_per_day {
            settings.max_orders_per_day = n;
        }
        if let Some(list) = &t.allow_symbols {
            settings.allow_symbols.clone_from(list);
        }
        if let Some(list) = &t.deny_symbols {
            settings.deny_symbols.clone_from(list);
        }
        if let Some(path) = &t.kill_switch_file
            && !path.as_os_str().is_empty()
        {
            settings.kill_switch_file.clone_from(path);
        }
        if let Some(ttl) = t.token_ttl_seconds {
            settings.token_ttl_seconds = i64::from(ttl.max(1));
        }
    }
    let key = TokenKey::load_or_create(&state.dir).map_err(|e| store_error(&e))?;
    Ok(Trading::new(settings, Arc::clone(&state.store), key, clock))
}

/// No configuration: the demo book plus the `SIM-PAPER` paper account, with trading
/// off.
///
/// # Errors
/// The state directory cannot be opened.
pub fn default_context(version: &str, state: &State) -> Result<ToolContext> {
    let book = demo_book().map_err(|e| Error::internal(e.to_string()))?;
    let clock: Arc<dyn Clock> = Arc::new(WallClock);
    let sim = SimBroker::new(
        SimConfig::new(DEMO_SIM_ACCOUNT),
        &book,
        Arc::clone(&state.store),
        Arc::clone(&clock),
    );
    let trading = trading_for(None, Vec::new(), state, clock)?;
    Ok(ToolContext::new(version)
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book)), None)
        .with_broker(Arc::new(sim), None)
        .with_trading(Arc::new(trading))
        .with_column_files(&state.dir))
}

/// The instant the documentation's examples run at.
pub const DOCS_CLOCK: &str = "2026-11-30T15:00:00Z";

/// The demo with trading on and the sim's clock frozen at [`DOCS_CLOCK`]: what
/// `docs/tools.md`'s examples run on, the same on every machine.
///
/// # Errors
/// The state directory cannot be opened.
pub fn docs_context(version: &str, state: &State) -> Result<ToolContext> {
    let book = demo_book().map_err(|e| Error::internal(e.to_string()))?;
    let clock = sim_clock(Some(DOCS_CLOCK), DEMO_SIM_ACCOUNT)?;
    let sim = SimBroker::new(
        SimConfig::new(DEMO_SIM_ACCOUNT),
        &book,
        Arc::clone(&state.store),
        Arc::clone(&clock),
    );
    let enabled = TradingConfig {
        enabled: Some(true),
        ..TradingConfig::default()
    };
    let trading = trading_for(Some(&enabled), Vec::new(), state, clock)?;
    Ok(ToolContext::new(version)
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book)), None)
        .with_broker(Arc::new(sim), None)
        .with_trading(Arc::new(trading)))
}

/// When a book file is read: before the context is made (a command that answers once),
/// or in the background while the server already answers (`serve`: `initialize` and
/// `tools/list` never wait for a book; the first call that needs it does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BookLoad {
    Now,
    Background,
}

/// Opens a book file; a broken one is `invalid_book` with every path and rule (at once,
/// or from the first snapshot when read in the background).
fn open_book(path: &Path, load: BookLoad) -> Result<BookBroker> {
    if load == BookLoad::Background {
        return Ok(BookBroker::background(path));
    }
    BookBroker::open(path).map_err(|e| {
        Error::new(
            ErrorCode::InvalidBook,
            e.to_string(),
            "fix the file at the JSON path named, then retry",
        )
    })
}

/// The context serving every account of one book file (`--book PATH`), the book read as
/// `load` says.
///
/// # Errors
/// `invalid_book` with the file's first broken rule (when read now).
pub fn book_context_with(version: &str, path: &Path, load: BookLoad) -> Result<ToolContext> {
    let broker = open_book(path, load)?;
    Ok(ToolContext::new(version).with_broker(Arc::new(broker), None))
}

/// The context a config describes.
///
/// # Errors
/// `not_supported` for a broker this build has no adapter for; `invalid_argument` for a
/// missing path or a bad sectors/FX file; `invalid_book` for a book that fails validation.
pub fn config_context(version: &str, config: &Config, state: &State) -> Result<ToolContext> {
    config_context_with(version, config, state, BookLoad::Now)
}

/// As [`config_context`], the book files read as `load` says.
///
/// # Errors
/// As [`config_context`] (a book read in the background fails its first snapshot instead).
pub fn config_context_with(
    version: &str,
    config: &Config,
    state: &State,
    load: BookLoad,
) -> Result<ToolContext> {
    let mut ctx = ToolContext::new(version).with_column_files(&state.dir);
    let mut clock: Arc<dyn Clock> = Arc::new(WallClock);
    let mut live_accounts = Vec::new();
    let mut demo: Option<tradedesk_core::Book> = None;
    if let Some(code) = &config.base_currency {
        ctx = ctx.with_base_currency(
            Currency::new_checked(code)
                .map_err(|e| config_error(format!("base_currency: {}", e.message), &e.hint))?,
        );
    }
    if let Some(ms) = config.broker_timeout_ms {
        ctx.broker_timeout = std::time::Duration::from_millis(ms.max(1));
    }
    if config.accounts.is_empty() {
        return Err(config_error(
            "the config lists no [[accounts]]".to_owned(),
            "add an [[accounts]] entry (id, broker = \"book\", path), or run without --config for the demo",
        ));
    }
    let mut opened: Vec<(PathBuf, Arc<BookBroker>, Vec<String>)> = Vec::new();
    for (i, account) in config.accounts.iter().enumerate() {
        if config.accounts[..i].iter().any(|a| a.id == account.id) {
            return Err(config_error(
                format!("accounts[{i}]: the id '{}' is used twice", account.id),
                "give every [[accounts]] entry its own id",
            ));
        }
        if account.live == Some(true) {
            live_accounts.push(account.id.clone());
        }
        match account.broker.as_str() {
            "book" => {
                let path = account.path.clone().ok_or_else(|| {
                    config_error(
                        format!(
                            "accounts[{i}] ({}): a book account needs `path`",
                            account.id
                        ),
                        "set path to the book file",
                    )
                })?;
                if let Some(entry) = opened.iter_mut().find(|(p, _, _)| *p == path) {
                    entry.2.push(account.id.clone());
                } else {
                    let broker = open_book(&path, load)?;
                    opened.push((path, Arc::new(broker), vec![account.id.clone()]));
                }
            }
            "sim" => {
                if account.live == Some(true) {
                    return Err(config_error(
                        format!(
                            "accounts[{i}] ({}): a sim account has no live side",
                            account.id
                        ),
                        "remove live = true; the sim is paper only",
                    ));
                }
                let mut sim = SimConfig::new(account.id.clone());
                if let Some(seed) = account.seed {
                    sim.seed = seed;
                }
                if let Some(code) = &account.currency {
                    if !["USD", "EUR", "GBP", "JPY", "MYR"].contains(&code.as_str()) {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): the sim has no rates for currency '{code}'",
                                account.id
                            ),
                            "use USD, EUR, GBP, JPY or MYR",
                        ));
                    }
                    sim.currency = Currency::new_checked(code).map_err(|e| {
                        config_error(
                            format!("accounts[{i}] ({}): currency: {}", account.id, e.message),
                            &e.hint,
                        )
                    })?;
                }
                if let Some(cash) = account.cash {
                    sim.initial_cash = Decimal::from(cash);
                }
                if account.clock.is_some() {
                    clock = sim_clock(account.clock.as_deref(), &account.id)?;
                }
                if demo.is_none() {
                    demo = Some(demo_book().map_err(|e| Error::internal(e.to_string()))?);
                }
                let book = demo
                    .as_ref()
                    .ok_or_else(|| Error::internal("demo book missing"))?;
                let broker =
                    SimBroker::new(sim, book, Arc::clone(&state.store), Arc::clone(&clock));
                ctx = ctx.with_broker(Arc::new(broker), None);
            }
            "ibkr" => {
                let timeout = std::time::Duration::from_millis(
                    account
                        .timeout_ms
                        .or(config.broker_timeout_ms)
                        .unwrap_or(10_000)
                        .max(1),
                );
                let socket = account.host.is_some() || account.port.is_some();
                if !socket && account.flex.is_none() {
                    return Err(config_error(
                        format!(
                            "accounts[{i}] ({}): an ibkr account needs TWS / IB Gateway (host, port) or a flex statement, or both",
                            account.id
                        ),
                        "add port = 7497 (TWS paper; 7496 live, IB Gateway 4002 paper / 4001 live) for positions and recent executions, and flex = { path = \"statement.xml\" } for the full history",
                    ));
                }
                let flex = match &account.flex {
                    Some(flex) => Some(ibkr_flex(i, account, flex, timeout)?),
                    None => None,
                };
                let broker: Arc<dyn tradedesk_brokers::Broker> = if socket {
                    Arc::new(tradedesk_brokers::tws::TwsBroker::new(
                        tradedesk_brokers::tws::TwsConfig {
                            id: account.id.clone(),
                            host: account
                                .host
                                .clone()
                                .unwrap_or_else(|| "127.0.0.1".to_owned()),
                            port: account.port.unwrap_or(7497),
                            client_id: account.client_id.unwrap_or(DEFAULT_TWS_CLIENT_ID),
                            account: account.account.clone(),
                            timeout,
                        },
                        flex,
                    ))
                } else {
                    match flex {
                        Some(f) => Arc::new(f),
                        None => return Err(Error::internal("ibkr account without a source")),
                    }
                };
                ctx = ctx.with_broker(broker, None);
            }
            "alpaca" => {
                let env = |name: &Option<String>, default: &str| {
                    let var = name.clone().unwrap_or_else(|| default.to_owned());
                    std::env::var(&var).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                        config_error(
                            format!("accounts[{i}] ({}): the environment variable {var} is not set", account.id),
                            "export the Alpaca key and secret (APCA_API_KEY_ID, APCA_API_SECRET_KEY), or name other variables with key_env / secret_env",
                        )
                    })
                };
                let live = match account.mode.as_deref() {
                    None => account.live == Some(true),
                    Some("paper") => false,
                    Some("live") if account.live == Some(true) => true,
                    Some("live") => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): mode = \"live\" needs live = true",
                                account.id
                            ),
                            "add live = true to the account to allow live trading, or use mode = \"paper\"",
                        ));
                    }
                    Some(other) => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): mode '{other}' is neither paper nor live",
                                account.id
                            ),
                            "write mode = \"paper\" or mode = \"live\"",
                        ));
                    }
                };
                let alpaca = tradedesk_brokers::alpaca::AlpacaConfig {
                    account: account.id.clone(),
                    live,
                    base_url: account.base_url.clone().unwrap_or_else(|| {
                        if live {
                            tradedesk_brokers::alpaca::AlpacaConfig::LIVE_URL
                        } else {
                            tradedesk_brokers::alpaca::AlpacaConfig::PAPER_URL
                        }
                        .to_owned()
                    }),
                    data_url: account.data_url.clone().unwrap_or_else(|| {
                        tradedesk_brokers::alpaca::AlpacaConfig::DATA_URL.to_owned()
                    }),
                    key: env(&account.key_env, "APCA_API_KEY_ID")?,
                    secret: env(&account.secret_env, "APCA_API_SECRET_KEY")?,
                    timeout: std::time::Duration::from_millis(
                        account
                            .timeout_ms
                            .or(config.broker_timeout_ms)
                            .unwrap_or(10_000)
                            .max(1),
                    ),
                };
                let broker =
                    tradedesk_brokers::alpaca::AlpacaBroker::new(alpaca).map_err(Error::from)?;
                ctx = ctx.with_broker(Arc::new(broker), None);
            }
            "moomoo" | "futu" => {
                let market = tradedesk_brokers::futu::FutuMarket::parse(
                    account.market.as_deref().unwrap_or("MY"),
                )
                .map_err(|m| {
                    config_error(
                        format!("accounts[{i}] ({}): {m}", account.id),
                        "market = \"MY\" for Bursa Malaysia, \"HK\" or \"US\"",
                    )
                })?;
                let simulate = match account.mode.as_deref() {
                    None | Some("live") => false,
                    Some("paper") if market == tradedesk_brokers::futu::FutuMarket::My => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): Bursa Malaysia has no simulated (paper) accounts at moomoo",
                                account.id
                            ),
                            "remove mode = \"paper\": Bursa is read from the live account",
                        ));
                    }
                    Some("paper") => true,
                    Some(other) => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): mode '{other}' is neither live nor paper",
                                account.id
                            ),
                            "write mode = \"live\" (default) or mode = \"paper\" (a simulated HK or US account)",
                        ));
                    }
                };
                let acc_id = match &account.account {
                    None => None,
                    Some(text) => Some(text.trim().parse::<u64>().map_err(|_| {
                        config_error(
                            format!(
                                "accounts[{i}] ({}): account '{text}' is not an OpenD account id",
                                account.id
                            ),
                            "write the account id as digits, as OpenD's account list shows it",
                        )
                    })?),
                };
                let history_days = account.history_days.unwrap_or(365);
                // OpenD answers 10 history queries per 30 s, in windows of 90 days.
                if !(1..=810).contains(&history_days) {
                    return Err(config_error(
                        format!(
                            "accounts[{i}] ({}): history_days {history_days} is outside 1 to 810 (OpenD answers 9 windows of 90 days per read)",
                            account.id
                        ),
                        "give the days of fills to read, such as 365",
                    ));
                }
                let broker = tradedesk_brokers::futu::OpenDBroker::new(
                    tradedesk_brokers::futu::OpenDConfig {
                        id: account.id.clone(),
                        host: account
                            .host
                            .clone()
                            .unwrap_or_else(|| "127.0.0.1".to_owned()),
                        port: account
                            .port
                            .unwrap_or(tradedesk_brokers::futu::DEFAULT_PORT),
                        acc_id,
                        market,
                        simulate,
                        history_days,
                        state_dir: Some(state.dir.clone()),
                        timeout: std::time::Duration::from_millis(
                            account
                                .timeout_ms
                                .or(config.broker_timeout_ms)
                                .unwrap_or(10_000)
                                .max(1),
                        ),
                    },
                );
                ctx = ctx.with_broker(Arc::new(broker), None);
            }
            "metatrader" | "mt4" | "mt5" => {
                let files = account.path.clone().ok_or_else(|| {
                    config_error(
                        format!(
                            "accounts[{i}] ({}): a metatrader account needs path, the terminal's MQL4/Files (or MQL5/Files) folder",
                            account.id
                        ),
                        "in the terminal: File > Open Data Folder, then MQL4 > Files; put that folder's path in path",
                    )
                })?;
                let platform = match account.broker.as_str() {
                    "mt4" => tradedesk_brokers::dwx::Platform::Mt4,
                    "mt5" => tradedesk_brokers::dwx::Platform::Mt5,
                    _ => tradedesk_brokers::dwx::platform_of(&files),
                };
                let live = match account.mode.as_deref() {
                    None | Some("paper") => false,
                    Some("live") if account.live == Some(true) => true,
                    Some("live") => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): mode = \"live\" needs live = true",
                                account.id
                            ),
                            "add live = true for a real-money MetaTrader account, or keep mode = \"paper\" for a demo account",
                        ));
                    }
                    Some(other) => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): mode '{other}' is neither paper nor live",
                                account.id
                            ),
                            "write mode = \"paper\" (a demo account) or mode = \"live\"",
                        ));
                    }
                };
                if let Some(zone) = &account.server_time_zone
                    && !tradedesk_brokers::dwx::is_time_zone(zone)
                {
                    return Err(config_error(
                        format!(
                            "accounts[{i}] ({}): server_time_zone '{zone}' is not a time zone name",
                            account.id
                        ),
                        "write an IANA name such as \"Europe/Athens\" (many brokers run their servers on it) or \"UTC\"",
                    ));
                }
                let symbols = symbol_specs(i, account)?;
                let lots = lot_rules(i, account)?;
                let margin_mode = match (platform, account.margin_mode.as_deref()) {
                    (_, None) => None,
                    (_, Some("hedging")) => Some(tradedesk_core::MarginMode::Hedging),
                    (tradedesk_brokers::dwx::Platform::Mt5, Some("netting")) => {
                        Some(tradedesk_core::MarginMode::Netting)
                    }
                    (tradedesk_brokers::dwx::Platform::Mt4, Some("netting")) => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): margin_mode = \"netting\" on MT4, which only hedges",
                                account.id
                            ),
                            "remove margin_mode (MT4 accounts are hedging), or point path at an MT5 terminal's MQL5/Files",
                        ));
                    }
                    (_, Some(other)) => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): margin_mode '{other}' is neither hedging nor netting",
                                account.id
                            ),
                            "write margin_mode = \"hedging\" or \"netting\", as the MT5 terminal's account shows it (Toolbox > Trade: a hedging account lists several positions per symbol)",
                        ));
                    }
                };
                let broker =
                    tradedesk_brokers::dwx::DwxBroker::new(tradedesk_brokers::dwx::DwxConfig {
                        id: account.id.clone(),
                        files,
                        platform,
                        magic: account.magic.unwrap_or(730_001),
                        live,
                        server_time_zone: account.server_time_zone.clone(),
                        history_days: account.history_days.unwrap_or(365).clamp(1, 3_650),
                        timeout: std::time::Duration::from_millis(
                            account
                                .timeout_ms
                                .or(config.broker_timeout_ms)
                                .unwrap_or(10_000)
                                .max(1),
                        ),
                        symbols,
                        margin_mode,
                        lots,
                    });
                ctx = ctx.with_broker(Arc::new(broker), None);
            }
            "hyperliquid" => {
                let wallet = account.account.clone().ok_or_else(|| {
                    config_error(
                        format!(
                            "accounts[{i}] ({}): a hyperliquid account needs its wallet address",
                            account.id
                        ),
                        "add account = \"0x…\" (the wallet's public address; no key is needed to read)",
                    )
                })?;
                if !tradedesk_brokers::hyperliquid::is_wallet(&wallet) {
                    return Err(config_error(
                        format!(
                            "accounts[{i}] ({}): account '{wallet}' is not a wallet address",
                            account.id
                        ),
                        "write the address as 0x and 40 hex digits",
                    ));
                }
                let base_url = match (&account.base_url, account.mode.as_deref()) {
                    (Some(url), _) => url.clone(),
                    (None, None | Some("mainnet")) => {
                        tradedesk_brokers::hyperliquid::MAINNET_URL.to_owned()
                    }
                    (None, Some("testnet")) => {
                        tradedesk_brokers::hyperliquid::TESTNET_URL.to_owned()
                    }
                    (None, Some(other)) => {
                        return Err(config_error(
                            format!(
                                "accounts[{i}] ({}): mode '{other}' is neither mainnet nor testnet",
                                account.id
                            ),
                            "write mode = \"mainnet\" (default) or mode = \"testnet\"",
                        ));
                    }
                };
                let broker = tradedesk_brokers::hyperliquid::HyperliquidBroker::new(
                    tradedesk_brokers::hyperliquid::HyperliquidConfig {
                        id: account.id.clone(),
                        wallet,
                        base_url,
                        timeout: std::time::Duration::from_millis(
                            account
                                .timeout_ms
                                .or(config.broker_timeout_ms)
                                .unwrap_or(10_000)
                                .max(1),
                        ),
                    },
                )
                .map_err(Error::from)?;
                ctx = ctx.with_broker(Arc::new(broker), None);
            }
            other => {
                return Err(Error::new(
                    ErrorCode::NotSupported,
                    format!(
                        "accounts[{i}] ({}): broker '{other}' is not available in this build",
                        account.id
                    ),
                    "this build has `book` accounts (a tradedesk-book/1 file), `sim` (the embedded paper exchange), `alpaca`, `ibkr`, `moomoo`, `metatrader` and `hyperliquid`",
                ));
            }
        }
    }
    for (_, broker, ids) in opened {
        ctx = ctx.with_broker(broker, Some(ids));
    }
    if let Some(path) = &config.sectors_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            config_error(
                format!("sectors_file {}: {e}", path.display()),
                "point sectors_file at a readable JSON file",
            )
        })?;
        ctx = ctx.with_sectors(SectorMap::parse(&path.display().to_string(), &text)?);
    }
    if let Some(path) = &config.fx_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            config_error(
                format!("fx_file {}: {e}", path.display()),
                "point fx_file at a readable book-format file",
            )
        })?;
        let quotes = parse_fx_file(&path.display().to_string(), &text).map_err(|e| {
            Error::new(
                ErrorCode::InvalidBook,
                e.to_string(),
                "fix the fx_rates entry at the JSON path named",
            )
        })?;
        ctx = ctx.with_fx(quotes);
    }
    if let Some(source) = reference_fx(config, state)? {
        ctx = ctx.with_reference_fx(source);
    }
    if let Some(dirs) = &config.data_dirs {
        ctx.configured_data_dirs.clone_from(dirs);
    }
    let trading = trading_for(config.trading.as_ref(), live_accounts, state, clock)?;
    Ok(ctx
        .with_trading(Arc::new(trading))
        .with_toolsets(config.toolsets()?))
}
