//! `tradedesk.toml`: base currency, accounts, sectors and FX files.
//!
//! Strict: an unknown key is an error naming it, so a typo never silently changes what
//! the server reads. Relative paths are relative to the config file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::Deserialize;
pub use tradedesk_brokers::accounts::{AccountConfig, BookLoad, ConfigNumber};
use tradedesk_brokers::accounts::{Opened, Setup, call_timeout, open_book, sim_clock};
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::sim::{Clock, SimBroker, SimConfig, WallClock};
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
    /// `true`: `tools/list` gives each tool its output schema (absent: none is listed).
    pub output_schemas: Option<bool>,
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

    /// Whether `tools/list` gives the output schemas (`[tools] output_schemas`, default
    /// false), if the config says.
    pub fn output_schemas(&self) -> Option<bool> {
        self.tools.as_ref().and_then(|t| t.output_schemas)
    }
}

/// A `[trading]` number, read as a non-negative decimal.
fn trading_decimal(n: &ConfigNumber, key: &str) -> Result<Decimal> {
    let text = n.text();
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
            account.paths_mut().into_iter().for_each(resolve);
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
    let timeout = call_timeout(None, config.broker_timeout_ms);
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
            settings.max_order_notional = trading_decimal(n, "max_order_notional")?;
        }
        if let Some(n) = &t.max_daily_notional {
            settings.max_daily_notional = trading_decimal(n, "max_daily_notional")?;
        }
        if let Some(n) = &t.max_position_weight_pct {
            settings.max_position_weight_pct = trading_decimal(n, "max_position_weight_pct")?;
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
    let mut live_accounts = Vec::new();
    if let Some(code) = &config.base_currency {
        ctx = ctx.with_base_currency(
            Currency::new_checked(code)
                .map_err(|e| config_error(format!("base_currency: {}", e.message), &e.hint))?,
        );
    }
    ctx.broker_timeout = call_timeout(None, config.broker_timeout_ms);
    if config.accounts.is_empty() {
        return Err(config_error(
            "the config lists no [[accounts]]".to_owned(),
            "add an [[accounts]] entry (id, broker = \"book\", path), or run without --config for the demo",
        ));
    }
    let mut opened = Opened::default();
    for (i, account) in config.accounts.iter().enumerate() {
        let id = account.id();
        if config.accounts[..i].iter().any(|a| a.id() == id) {
            return Err(config_error(
                format!("accounts[{i}]: the id '{id}' is used twice"),
                "give every [[accounts]] entry its own id",
            ));
        }
        if account.live() {
            live_accounts.push(id.to_owned());
        }
        let setup = Setup {
            index: i,
            timeout_ms: config.broker_timeout_ms,
            state_dir: &state.dir,
            store: &state.store,
            book_load: load,
        };
        account.open(&setup, &mut opened)?;
    }
    let (brokers, clock) = opened.finish();
    for (broker, ids) in brokers {
        ctx = ctx.with_broker(broker, ids);
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
