//! Tool arguments: typed, strict (an unknown name is an error), and every failure an
//! `invalid_argument` that names the argument, so the model can read what to fix.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tradedesk_core::{Currency, Error, Result};

/// Checks a call's `arguments` against the input schema the tool advertises, before
/// anything deserializes them: a value of a type the schema refuses (a string where it
/// says number, a number where it says string, null where null is not allowed, ...) is
/// `invalid_argument` naming the argument's path, the type wanted and the value sent.
/// The registry runs it on every call with the very schema `tools/list` serves, so what
/// a tool accepts can never drift from what it advertises (docs/tools.md, "Arguments").
/// Only types are checked here; which names are allowed or required, enum values and
/// ranges are each tool's own rules, stated in its errors.
///
/// # Errors
/// `invalid_argument` for the first value (in document order) of a refused type.
pub fn check_types(schema: &Value, args: &Value) -> Result<()> {
    if !args.is_object() {
        return Err(Error::invalid_argument(
            format!("arguments: expected an object, got {}", describe(args)),
            "send arguments as a JSON object, {} for a tool that takes none, or leave it out",
        ));
    }
    match mismatch(schema, schema, args, "", 0) {
        None => Ok(()),
        Some(m) => Err(m.into_error()),
    }
}

/// A value whose type the schema refuses.
#[derive(Debug)]
struct Mismatch {
    path: String,
    /// The JSON types the schema allows there, in its order.
    wanted: Vec<&'static str>,
    got: String,
    /// The value is null and the argument may simply be left out.
    omittable_null: bool,
    got_string: bool,
}

impl Mismatch {
    fn into_error(self) -> Error {
        let wanted = self
            .wanted
            .iter()
            .map(|t| article(t))
            .collect::<Vec<_>>()
            .join(" or ");
        let message = format!("{}: expected {wanted}, got {}", self.path, self.got);
        let numeric = self
            .wanted
            .iter()
            .any(|t| *t == "number" || *t == "integer");
        let hint = if self.omittable_null {
            format!(
                "leave {} out to take its default, or send {wanted}; see the tool's input schema for every argument's type",
                self.path
            )
        } else if numeric && self.got_string {
            format!(
                "send {} as a JSON number such as 10 or 0.5, not as a string; see the tool's input schema for every argument's type",
                self.path
            )
        } else {
            format!(
                "send {} as {wanted}; see the tool's input schema for every argument's type",
                self.path
            )
        };
        Error::invalid_argument(message, hint)
    }
}

fn article(json_type: &str) -> String {
    match json_type {
        "null" => "null".to_owned(),
        "integer" | "object" | "array" => format!("an {json_type}"),
        t => format!("a {t}"),
    }
}

/// The value as an error names it: its type, and a scalar's text (cut short).
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {}", cut(&n.to_string())),
        Value::String(s) => format!("the string {}", Value::String(cut(s))),
        Value::Array(_) => "an array".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

fn cut(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(tradedesk_core::error::QUOTE_CHARS)
        .collect();
    if text
        .chars()
        .nth(tradedesk_core::error::QUOTE_CHARS)
        .is_some()
    {
        out.push('…');
    }
    out
}

fn type_matches(json_type: &str, value: &Value) -> bool {
    match json_type {
        "null" => value.is_null(),
        "boolean" => value.is_boolean(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        // JSON Schema's integer; serde reads integers only from integer literals.
        "integer" => value.is_i64() || value.is_u64(),
        _ => true,
    }
}

fn json_type(name: &str) -> Option<&'static str> {
    [
        "null", "boolean", "object", "array", "string", "number", "integer",
    ]
    .into_iter()
    .find(|t| *t == name)
}

/// `schema` with its `$ref`s followed.
fn resolve<'a>(root: &'a Value, schema: &'a Value, depth: usize) -> &'a Value {
    let mut at = schema;
    for _ in depth..MAX_SCHEMA_DEPTH {
        match at
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/$defs/"))
            .and_then(|name| root.get("$defs").and_then(|d| d.get(name)))
        {
            Some(target) => at = target,
            None => break,
        }
    }
    at
}

/// Whether an object `value` names only properties `schema` declares (or the schema
/// allows others); true for any other value.
fn declares_keys(schema: &Value, value: &Value) -> bool {
    let Some(map) = value.as_object() else {
        return true;
    };
    if schema.get("additionalProperties") != Some(&Value::Bool(false)) {
        return true;
    }
    let props = schema.get("properties").and_then(Value::as_object);
    map.keys().all(|k| props.is_some_and(|p| p.contains_key(k)))
}

/// Schemas nest this deep at most (refs included) before the check stops descending.
const MAX_SCHEMA_DEPTH: usize = 32;

/// The first value under `value` whose type `schema` refuses. `root` holds `$defs`.
fn mismatch(
    root: &Value,
    schema: &Value,
    value: &Value,
    path: &str,
    depth: usize,
) -> Option<Mismatch> {
    if depth > MAX_SCHEMA_DEPTH {
        return None;
    }
    if let Some(target) = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix("#/$defs/"))
        .and_then(|name| root.get("$defs").and_then(|d| d.get(name)))
        && let Some(m) = mismatch(root, target, value, path, depth + 1)
    {
        return Some(m);
    }
    let wanted: Vec<&'static str> = match schema.get("type") {
        Some(Value::String(t)) => json_type(t).into_iter().collect(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter_map(json_type)
            .collect(),
        _ => Vec::new(),
    };
    if !wanted.is_empty() && !wanted.iter().any(|t| type_matches(t, value)) {
        return Some(Mismatch {
            path: path.to_owned(),
            wanted,
            got: describe(value),
            omittable_null: false,
            got_string: value.is_string(),
        });
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = schema.get(key).and_then(Value::as_array) {
            // (whether the branch declares every key of an object value, its mismatch)
            let results: Vec<(bool, Option<Mismatch>)> = branches
                .iter()
                .map(|b| {
                    let fits = declares_keys(resolve(root, b, depth), value);
                    (fits, mismatch(root, b, value, path, depth + 1))
                })
                .collect();
            if results.iter().any(|(fits, m)| *fits && m.is_none()) {
                continue;
            }
            let any_fits = results.iter().any(|(fits, _)| *fits);
            if !any_fits && results.iter().any(|(_, m)| m.is_none()) {
                // No branch knows every key: serde names the unknown one.
                continue;
            }
            // A branch of the value's own shape that fails deeper says most; else every
            // branch refused the value itself: name all they allow.
            let mut found: Vec<Mismatch> = results
                .into_iter()
                .filter(|(fits, _)| *fits || !any_fits)
                .filter_map(|(_, m)| m)
                .collect();
            if let Some(i) = found.iter().position(|m| m.path != path) {
                return Some(found.swap_remove(i));
            }
            let mut wanted: Vec<&'static str> = Vec::new();
            for t in found.iter().flat_map(|m| m.wanted.iter()) {
                if !wanted.contains(t) {
                    wanted.push(t);
                }
            }
            if !wanted.is_empty() {
                return Some(Mismatch {
                    path: path.to_owned(),
                    wanted,
                    got: describe(value),
                    omittable_null: false,
                    got_string: value.is_string(),
                });
            }
        }
    }
    if let Some(all) = schema.get("allOf").and_then(Value::as_array) {
        for branch in all {
            if let Some(m) = mismatch(root, branch, value, path, depth + 1) {
                return Some(m);
            }
        }
    }
    match value {
        Value::Object(map) => {
            let props = schema.get("properties").and_then(Value::as_object)?;
            let required = schema.get("required").and_then(Value::as_array);
            for (key, item) in map {
                let Some(sub) = props.get(key) else {
                    continue;
                };
                let at = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                if let Some(mut m) = mismatch(root, sub, item, &at, depth + 1) {
                    let optional =
                        !required.is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key)));
                    m.omittable_null = m.path == at && item.is_null() && optional;
                    return Some(m);
                }
            }
            None
        }
        Value::Array(items) => {
            let item_schema = schema.get("items").filter(|s| s.is_object())?;
            items.iter().enumerate().find_map(|(i, item)| {
                mismatch(root, item_schema, item, &format!("{path}[{i}]"), depth + 1)
            })
        }
        _ => None,
    }
}

/// Parses a call's `arguments` object into `T` (the registry has checked their types
/// against the advertised schema with [`check_types`]).
///
/// # Errors
/// `invalid_argument` for a missing, unknown or ill-typed argument.
pub fn parse<T: DeserializeOwned + JsonSchema>(args: Value) -> Result<T> {
    if !args.is_object() {
        return Err(Error::invalid_argument(
            format!("arguments: expected an object, got {}", describe(&args)),
            "send arguments as a JSON object, {} for a tool that takes none, or leave it out",
        ));
    }
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

// A trade's side, as every tool takes it (`buy` or `sell`): core's `Side` derives no
// schema, so the tools share this one. (Plain comments: a doc comment would become the
// schema's description.)
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum SideArg {
    Buy,
    Sell,
}

impl From<SideArg> for tradedesk_core::Side {
    fn from(s: SideArg) -> Self {
        match s {
            SideArg::Buy => Self::Buy,
            SideArg::Sell => Self::Sell,
        }
    }
}

// A leveraged position's side, as the perps tools take it (`long` or `short`).
#[derive(Debug, Clone, Copy, Deserialize, Serialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum PositionSideArg {
    Long,
    Short,
}

impl From<PositionSideArg> for tradedesk_research::perps::Side {
    fn from(s: PositionSideArg) -> Self {
        match s {
            PositionSideArg::Long => Self::Long,
            PositionSideArg::Short => Self::Short,
        }
    }
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
