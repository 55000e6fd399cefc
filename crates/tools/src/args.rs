//! Tool arguments: typed, strict (an unknown name is an error), and every failure an
//! `invalid_argument` that names the argument, so the model can read what to fix.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tradedesk_core::{Currency, Error, Result};

/// Parses a call's `arguments` object into `T`.
///
/// # Errors
/// `invalid_argument` for a missing, unknown or ill-typed argument.
pub fn parse<T: DeserializeOwned + JsonSchema>(args: Value) -> Result<T> {
    let args = if args.is_null() {
        Value::Object(serde_json::Map::new())
    } else {
        args
    };
    serde_path_to_error::deserialize(args).map_err(|e| {
        let path = e.path().to_string();
        // serde quotes the offending value: keep the message short whatever was sent.
        let inner: String = e.into_inner().to_string().chars().take(200).collect();
        // serde names missing and unknown fields itself; an ill-typed value gets its path.
        let message =
            if path == "." || inner.contains("missing field") || inner.contains("unknown field") {
                inner
                    .replacen("missing field", "missing argument", 1)
                    .replacen("unknown field", "unknown argument", 1)
            } else {
                format!("{path}: {inner}")
            };
        let schema = schemars::schema_for!(T);
        let allowed: Vec<String> = schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default();
        let hint = if allowed.is_empty() {
            "this tool takes no arguments; call it with {}".to_owned()
        } else {
            format!(
                "allowed arguments: {}; see the tool's input schema for types",
                allowed.join(", ")
            )
        };
        Error::invalid_argument(message, hint)
    })
}

/// As [`parse`], for argument types that flatten a shared part (serde cannot refuse
/// unknown fields through `flatten`): every name must be a property of `T`'s schema.
///
/// # Errors
/// As [`parse`].
pub fn parse_flat<T: DeserializeOwned + JsonSchema>(args: Value) -> Result<T> {
    if let Some(obj) = args.as_object() {
        let schema = schemars::schema_for!(T);
        let known = schema.get("properties").and_then(Value::as_object);
        if let Some(unknown) = obj
            .keys()
            .find(|k| known.is_some_and(|props| !props.contains_key(k.as_str())))
        {
            let allowed: Vec<&String> = known.map(|p| p.keys().collect()).unwrap_or_default();
            return Err(Error::invalid_argument(
                format!("unknown argument {}", tradedesk_core::error::quote(unknown)),
                format!(
                    "allowed arguments: {}; see the tool's input schema for types",
                    allowed
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    parse(args)
}

/// A required number checked against its rule: `invalid_argument` naming the argument,
/// its value and the rule otherwise (NaN and infinities never pass).
///
/// # Errors
/// `invalid_argument` when `v` is not finite or breaks `ok`.
pub fn check_number(name: &str, v: f64, ok: impl Fn(f64) -> bool, rule: &str) -> Result<f64> {
    if v.is_finite() && ok(v) {
        Ok(v)
    } else {
        Err(Error::invalid_argument(
            format!("{name} is {v}: it must be {rule}"),
            format!("{name} must be {rule}: correct it and call again"),
        ))
    }
}

/// The report currency: the argument, or the default.
///
/// # Errors
/// `invalid_argument` naming `currency` when it is not an upper-case ISO 4217 code.
pub fn report_currency(arg: Option<&str>, default: Currency) -> Result<Currency> {
    match arg {
        None => Ok(default),
        Some(code) => Currency::new_checked(code)
            .map_err(|e| Error::invalid_argument(format!("currency: {}", e.message), e.hint)),
    }
}

/// The report currency of a call over `book`: as [`report_currency`], and a currency
/// named explicitly must be reachable. A currency no row is held in and no rate of the
/// book mentions is the error `no_fx_rate` (every figure would be left out); one the
/// rates mention but cannot reach from some row leaves that row out with a note
/// (docs/methodology/fx.md).
///
/// # Errors
/// `invalid_argument` for a bad code; `no_fx_rate` for an unreachable currency.
pub fn report_currency_in(book: &tradedesk_core::Book, arg: Option<&str>) -> Result<Currency> {
    let ccy = report_currency(arg, book.base_currency)?;
    let known = ccy == book.base_currency
        || book.accounts.iter().any(|a| a.currency == ccy)
        || book.instruments.iter().any(|i| i.currency == ccy)
        || book.cash.iter().any(|c| c.currency == ccy)
        || book.fx.currencies().contains(&ccy);
    if known {
        return Ok(ccy);
    }
    let mut with_rates: Vec<&str> = book.fx.currencies().iter().map(|c| c.code()).collect();
    with_rates.push(book.base_currency.code());
    with_rates.sort_unstable();
    with_rates.dedup();
    Err(Error::new(
        tradedesk_core::ErrorCode::NoFxRate,
        format!(
            "currency: the book has no rate at all into {ccy}, so no figure can be reported in it"
        ),
        format!(
            "ask in one of {} (or omit currency for the base currency), or add {ccy} rates to the fx_file, or set fx_source = \"ecb\" in tradedesk.toml",
            with_rates.join(", ")
        ),
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CurrencyArgs {
    /// Report currency (upper-case ISO 4217 code, e.g. USD, MYR). Default: the base currency.
    pub currency: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PositionsArgs {
    /// Only this account id (see get_accounts).
    pub account: Option<String>,
    /// Only accounts at this broker (e.g. ibkr, moomoo).
    pub broker: Option<String>,
    /// Only this instrument: bare (AAPL, 1155) or qualified (BURSA:1155).
    pub symbol: Option<String>,
    /// Report currency (upper-case ISO 4217 code). Default: the base currency.
    pub currency: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SideArg {
    Buy,
    Sell,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TradeHistoryArgs {
    /// First trade date, YYYY-MM-DD, inclusive.
    pub start: String,
    /// Last trade date, YYYY-MM-DD, inclusive.
    pub end: String,
    /// Only this account id (see get_accounts).
    pub account: Option<String>,
    /// Only accounts at this broker (e.g. ibkr, moomoo).
    pub broker: Option<String>,
    /// Bare (AAPL, 1155) or qualified (BURSA:1155).
    pub symbol: Option<String>,
    /// Only buys or only sells.
    pub side: Option<SideArg>,
    /// Fills to return, newest first: 1..=1000, default 100.
    pub limit: Option<i64>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    #[default]
    Symbol,
    Account,
    Broker,
    Month,
    None,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RealizedPnlArgs {
    /// First closing trade date, YYYY-MM-DD, inclusive.
    pub start: String,
    /// Last closing trade date, YYYY-MM-DD, inclusive.
    pub end: String,
    /// Only this account id (see get_accounts).
    pub account: Option<String>,
    /// Only accounts at this broker (e.g. ibkr, moomoo).
    pub broker: Option<String>,
    /// Bare (AAPL, 1155) or qualified (BURSA:1155).
    pub symbol: Option<String>,
    /// Report currency (upper-case ISO 4217 code). Default: the base currency.
    pub currency: Option<String>,
    /// Grouping of the closed lots: symbol (default), account, broker, month (YYYY-MM of
    /// the closing date) or none.
    pub group_by: Option<GroupBy>,
    /// Also list the closed lots, a page at a time. Default: false.
    pub include_lots: Option<bool>,
    /// Lots per page: 1..=1000, default 1000.
    pub lots_limit: Option<i64>,
    /// The previous answer's next_cursor, for the next page of lots.
    pub cursor: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum ExposureBy {
    Sector,
    Currency,
    Broker,
    Account,
    AssetClass,
    Country,
    Symbol,
}

#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    #[default]
    Gross,
    Net,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExposureArgs {
    /// The dimension to bucket positions by.
    pub by: ExposureBy,
    /// gross (default): absolute notionals; net: signed notionals.
    pub basis: Option<Basis>,
    /// Report currency (upper-case ISO 4217 code). Default: the base currency.
    pub currency: Option<String>,
}
