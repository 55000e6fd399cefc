//! `tradedesk.toml`: base currency, accounts, sectors and FX files.
//!
//! Strict: an unknown key is an error naming it, so a typo never silently changes what
//! the server reads. Relative paths are relative to the config file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::{BookBroker, parse_fx_file};
use tradedesk_core::{Currency, Error, ErrorCode, Result, SectorMap};

use crate::context::ToolContext;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub base_currency: Option<String>,
    #[serde(default)]
    pub accounts: Vec<AccountConfig>,
    pub sectors_file: Option<PathBuf>,
    pub fx_file: Option<PathBuf>,
    /// Per-call bound on a broker, in milliseconds.
    pub broker_timeout_ms: Option<u64>,
    pub http: Option<HttpConfig>,
    pub telemetry: Option<TelemetryConfig>,
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

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AccountConfig {
    pub id: String,
    pub broker: String,
    /// `book`: the book file holding this account.
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
                "see DESIGN.md's Configuration section for the keys tradedesk.toml takes",
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
        for account in &mut config.accounts {
            account.path.as_mut().map(resolve);
        }
        Ok(config)
    }
}

/// The context for the embedded demo (no configuration at all).
///
/// # Errors
/// Only if the shipped demo is broken.
pub fn demo_context(version: &str) -> Result<ToolContext> {
    let book = demo_book().map_err(|e| Error::internal(e.to_string()))?;
    Ok(ToolContext::new(version).with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book)), None))
}

/// Opens a book file; a broken one is `invalid_book` with every path and rule.
fn open_book(path: &Path) -> Result<BookBroker> {
    BookBroker::open(path).map_err(|e| {
        Error::new(
            ErrorCode::InvalidBook,
            e.to_string(),
            "fix the file at the JSON path named, then retry",
        )
    })
}

/// The context serving every account of one book file (`--book PATH`).
///
/// # Errors
/// `invalid_book` with the file's first broken rule.
pub fn book_context(version: &str, path: &Path) -> Result<ToolContext> {
    let broker = open_book(path)?;
    Ok(ToolContext::new(version).with_broker(Arc::new(broker), None))
}

/// The context a config describes.
///
/// # Errors
/// `not_supported` for a broker this build has no adapter for; `invalid_argument` for a
/// missing path or a bad sectors/FX file; `invalid_book` for a book that fails validation.
pub fn config_context(version: &str, config: &Config) -> Result<ToolContext> {
    let mut ctx = ToolContext::new(version);
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
                    let broker = open_book(&path)?;
                    opened.push((path, Arc::new(broker), vec![account.id.clone()]));
                }
            }
            other => {
                return Err(Error::new(
                    ErrorCode::NotSupported,
                    format!(
                        "accounts[{i}] ({}): broker '{other}' is not available in this build",
                        account.id
                    ),
                    "this build reads `book` accounts (a tradedesk-book/1 file); export the account's history to a book file",
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
    Ok(ctx)
}
