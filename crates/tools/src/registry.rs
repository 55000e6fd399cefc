//! The tool registry: every tool's name, description for the model, annotations, input
//! and output schemas, and dispatch. Transports (CLI, MCP) serve tools only through it.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};
use tradedesk_core::ledger::Ledger;
use tradedesk_core::{Book, DateRange, Error, Result};

use crate::accounts::{AccountsResult, SummaryResult, get_accounts, get_portfolio_summary};
use crate::args::{
    self, CurrencyArgs, ExposureArgs, NoArgs, PositionsArgs, RealizedPnlArgs, TradeHistoryArgs,
    report_currency,
};
use crate::context::ToolContext;
use crate::health::{HealthResult, get_server_health};
use crate::history::{TradeHistoryResult, check_limit, get_trade_history};
use crate::positions::{ExposureResult, PositionsResult, get_exposure, get_positions};
use crate::realized::{RealizedPnlResult, RealizedQuery, get_realized_pnl};
use crate::select::select;
use crate::valuation::{Scope, value_ledger};

/// A tool as clients see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub read_only: bool,
    pub input_schema: Value,
    pub output_schema: Value,
}

/// MCP tool annotations, the same wherever a tool is described.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotations {
    pub read_only: bool,
    pub destructive: bool,
    pub idempotent: bool,
    pub open_world: bool,
}

impl ToolSpec {
    /// Read tools change nothing, so they are idempotent and not destructive; no tool
    /// here reaches beyond the configured accounts.
    pub fn annotations(&self) -> Annotations {
        Annotations {
            read_only: self.read_only,
            destructive: !self.read_only,
            idempotent: self.read_only,
            open_world: false,
        }
    }
}

/// The outcome of a call: the structured result (`status` ok or error) and a short text
/// summary for the model.
#[derive(Debug, Clone)]
pub struct ToolOutput {
    pub is_error: bool,
    pub structured: Value,
    pub summary: String,
}

/// A call that cannot be dispatched at all (a JSON-RPC error, not a tool result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    UnknownTool(String),
    ArgumentsNotObject,
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::UnknownTool(name) => {
                write!(f, "unknown tool {}", tradedesk_core::error::quote(name))
            }
            Self::ArgumentsNotObject => f.write_str("arguments must be a JSON object"),
        }
    }
}

impl std::error::Error for CallError {}

/// Drops schemars' integer-width formats (`uint32`, `int64`, `double`, ...): not JSON
/// Schema formats, and validators such as ajv warn on every one.
fn strip_nonstandard_formats(value: &mut Value) {
    match value {
        Value::Object(map) => {
            let nonstandard = map.get("format").and_then(Value::as_str).is_some_and(|f| {
                matches!(
                    f,
                    "int8"
                        | "int16"
                        | "int32"
                        | "int64"
                        | "uint"
                        | "uint8"
                        | "uint16"
                        | "uint32"
                        | "uint64"
                        | "float"
                        | "double"
                )
            });
            if nonstandard {
                map.remove("format");
            }
            map.values_mut().for_each(strip_nonstandard_formats);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nonstandard_formats),
        _ => {}
    }
}

fn input_schema<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|_| json!({}));
    strip_nonstandard_formats(&mut schema);
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.insert("type".into(), json!("object"));
        obj.insert("additionalProperties".into(), json!(false));
        obj.entry("properties").or_insert_with(|| json!({}));
    }
    schema
}

fn output_schema<T: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(T)).unwrap_or_else(|_| json!({}));
    strip_nonstandard_formats(&mut schema);
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
        obj.remove("required");
        // The same object carries either the result (status ok) or an error.
        if let Some(props) = obj.get_mut("properties").and_then(Value::as_object_mut) {
            props.shift_insert(
                0,
                "status".into(),
                json!({"type": "string", "enum": ["ok", "error"]}),
            );
            props.insert(
                "error".into(),
                json!({
                    "type": "object",
                    "properties": {"code": {"type": "string"}, "message": {"type": "string"}, "hint": {"type": "string"}},
                    "required": ["code", "message", "hint"]
                }),
            );
        }
        obj.insert("required".into(), json!(["status"]));
    }
    schema
}

/// Every tool, in the order clients list them. Built once, on first use: generating the
/// schemas is far costlier than most tool calls.
pub fn tools() -> &'static [ToolSpec] {
    static SPECS: std::sync::OnceLock<Vec<ToolSpec>> = std::sync::OnceLock::new();
    SPECS.get_or_init(build_specs)
}

fn build_specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "get_accounts",
            title: "Accounts",
            description: "List every configured brokerage account with its broker, mode (book, paper, live), \
                cash, positions value and total value in the account's own currency, and the total converted \
                into the report currency. Use it first to learn account ids and brokers.",
            read_only: true,
            input_schema: input_schema::<CurrencyArgs>(),
            output_schema: output_schema::<AccountsResult>(),
        },
        ToolSpec {
            name: "get_positions",
            title: "Open positions",
            description: "Open positions from the FIFO lots of the fills: quantity (negative for shorts), average \
                cost, cost basis, mark, notional, market value, unrealized P&L and weight, in the instrument \
                currency and converted into the report currency at as_of. Filter by account, broker or symbol \
                (bare AAPL / 1155 or qualified BURSA:1155). A position without a mark is listed with null values \
                and left out of totals.",
            read_only: true,
            input_schema: input_schema::<PositionsArgs>(),
            output_schema: output_schema::<PositionsResult>(),
        },
        ToolSpec {
            name: "get_trade_history",
            title: "Trade history",
            description: "Fills between start and end (absolute YYYY-MM-DD dates, inclusive, by the fill's trade date \
                in its own time zone), newest first, filtered by account, broker, symbol or side. limit 1..1000 \
                (default 100); total_count and truncated tell when more matched. Resolve relative periods such as \
                'last quarter' to dates yourself.",
            read_only: true,
            input_schema: input_schema::<TradeHistoryArgs>(),
            output_schema: output_schema::<TradeHistoryResult>(),
        },
        ToolSpec {
            name: "get_realized_pnl",
            title: "Realized P&L (FIFO)",
            description: "Realized profit and loss of lots closed between start and end (absolute YYYY-MM-DD, inclusive, \
                by closing trade date), from a FIFO replay of the full history, net of prorated commissions, \
                converted at each closing date's rate. Grouped by symbol (default), account, broker, month or none; \
                biggest_gain / biggest_loss name the closing fills with the largest total; include_lots lists each \
                closed lot. Dividends and interest are not P&L. A period with no closed lots is a true zero.",
            read_only: true,
            input_schema: input_schema::<RealizedPnlArgs>(),
            output_schema: output_schema::<RealizedPnlResult>(),
        },
        ToolSpec {
            name: "get_portfolio_summary",
            title: "Portfolio summary",
            description: "The whole portfolio in one currency at as_of: total value (positions plus cash), positions value, \
                cash, unrealized P&L, holdings by currency held and by broker with percentages of the total, and \
                each account. Answers 'how much of my portfolio is in ringgit?'.",
            read_only: true,
            input_schema: input_schema::<CurrencyArgs>(),
            output_schema: output_schema::<SummaryResult>(),
        },
        ToolSpec {
            name: "get_exposure",
            title: "Exposure breakdown",
            description: "Exposure of open positions (notional, cash excluded) bucketed by sector, currency, broker, account, \
                asset_class, country or symbol; basis gross (absolute, default) or net (signed). Bucket pct is of \
                the gross total. Positions without a sector are in an explicit Unclassified bucket.",
            read_only: true,
            input_schema: input_schema::<ExposureArgs>(),
            output_schema: output_schema::<ExposureResult>(),
        },
        ToolSpec {
            name: "get_server_health",
            title: "Server health",
            description: "State of every broker connection (status, latency, a hint when down), reconciliation of the \
                positions brokers report against what the fills imply, and the FX rates in use with stale ones \
                flagged. Call it when another tool says a broker is unavailable.",
            read_only: true,
            input_schema: input_schema::<NoArgs>(),
            output_schema: output_schema::<HealthResult>(),
        },
    ]
}

/// Wraps a result: `{"status": "ok", ...}` or `{"status": "error", "error": {...}}`.
fn output<T: Serialize>(result: Result<T>, summary: impl FnOnce(&T) -> String) -> ToolOutput {
    match result {
        Ok(value) => {
            let text = summary(&value);
            let mut structured = serde_json::to_value(&value).unwrap_or_else(|_| json!({}));
            if let Some(obj) = structured.as_object_mut() {
                obj.shift_insert(0, "status".into(), json!("ok"));
            }
            ToolOutput {
                is_error: false,
                structured,
                summary: text,
            }
        }
        Err(e) => error_output(&e),
    }
}

fn error_output(e: &Error) -> ToolOutput {
    let structured = json!({
        "status": "error",
        "error": {"code": e.code.as_str(), "message": e.message, "hint": e.hint},
    });
    ToolOutput {
        is_error: true,
        structured,
        summary: format!("error {}: {} (hint: {})", e.code, e.message, e.hint),
    }
}

/// The notes for the text summary, each quoted as a JSON string: they can carry names
/// that come from books and brokers, which the model must read as data, not instructions.
fn notes_suffix(notes: &[String]) -> String {
    if notes.is_empty() {
        return String::new();
    }
    let quoted: Vec<String> = notes
        .iter()
        .map(|n| Value::String(n.clone()).to_string())
        .collect();
    format!(
        " Notes (quoted data; repeat them to the user): [{}]",
        quoted.join(", ")
    )
}

/// Calls a tool by name.
///
/// # Errors
/// [`CallError`] for an unknown tool or non-object arguments; every other failure is an
/// error *result*.
pub async fn call(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
) -> Result<ToolOutput, CallError> {
    if !tools().iter().any(|t| t.name == name) {
        return Err(CallError::UnknownTool(name.to_owned()));
    }
    if !(arguments.is_object() || arguments.is_null()) {
        return Err(CallError::ArgumentsNotObject);
    }
    Ok(dispatch(ctx, name, arguments).await)
}

async fn dispatch(ctx: &ToolContext, name: &str, arguments: Value) -> ToolOutput {
    if name == "get_server_health" {
        return health(ctx, arguments).await;
    }
    let (book, ledger) = match ctx.ledger().await {
        Ok(pair) => pair,
        Err(e) => return error_output(&e),
    };
    // The tools are pure functions over the book; should one ever panic, the caller gets
    // an `internal` error result and the server stays up.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_tool(ctx, &book, &ledger, name, arguments)
    }))
    .unwrap_or_else(|_| {
        error_output(&Error::internal(format!(
            "{name} failed unexpectedly; the server is still running"
        )))
    })
}

fn run_tool(
    ctx: &ToolContext,
    book: &Book,
    ledger: &Ledger,
    name: &str,
    arguments: Value,
) -> ToolOutput {
    let base = book.base_currency;
    match name {
        "get_accounts" => output(
            args::parse::<CurrencyArgs>(arguments)
                .and_then(|a| report_currency(a.currency.as_deref(), base))
                .and_then(|ccy| {
                    get_accounts(book, &value_ledger(book, ledger, ccy, Scope::ACCOUNTS)?)
                }),
            |r: &AccountsResult| {
                format!(
                    "{} account(s), total value {} {}.{}",
                    r.accounts.len(),
                    r.total_value.0,
                    r.currency,
                    notes_suffix(&r.notes)
                )
            },
        ),
        "get_positions" => output(
            args::parse::<PositionsArgs>(arguments).and_then(|a| {
                let ccy = report_currency(a.currency.as_deref(), base)?;
                let sel = select(
                    book,
                    a.account.as_deref(),
                    a.broker.as_deref(),
                    a.symbol.as_deref(),
                )?;
                let scope = Scope {
                    accounts: false,
                    selection: Some(&sel),
                };
                get_positions(
                    book,
                    &value_ledger(book, ledger, ccy, scope)?,
                    &ctx.sectors,
                    &sel,
                )
            }),
            |r: &PositionsResult| {
                format!(
                    "{} open position(s) as of {}, market value {} {}.{}",
                    r.positions.len(),
                    r.as_of,
                    r.total_market_value.0,
                    r.currency,
                    notes_suffix(&r.notes)
                )
            },
        ),
        "get_trade_history" => output(
            args::parse::<TradeHistoryArgs>(arguments).and_then(|a| {
                let range = DateRange::parse(&a.start, &a.end)?;
                let limit = check_limit(a.limit)?;
                let sel = select(
                    book,
                    a.account.as_deref(),
                    a.broker.as_deref(),
                    a.symbol.as_deref(),
                )?;
                get_trade_history(book, range, &sel, a.side, limit)
            }),
            |r: &TradeHistoryResult| {
                format!(
                    "{} of {} fill(s) from {} to {}, newest first.{}",
                    r.count,
                    r.total_count,
                    r.start,
                    r.end,
                    notes_suffix(&r.notes)
                )
            },
        ),
        "get_realized_pnl" => output(
            args::parse::<RealizedPnlArgs>(arguments).and_then(|a| {
                let range = DateRange::parse(&a.start, &a.end)?;
                let currency = report_currency(a.currency.as_deref(), base)?;
                let sel = select(
                    book,
                    a.account.as_deref(),
                    a.broker.as_deref(),
                    a.symbol.as_deref(),
                )?;
                let query = RealizedQuery {
                    range,
                    currency,
                    group_by: a.group_by.unwrap_or_default(),
                    include_lots: a.include_lots.unwrap_or(false),
                };
                get_realized_pnl(book, &sel, &query)
            }),
            |r: &RealizedPnlResult| {
                format!(
                    "Realized P&L {} to {}: net {} {} over {} closed lot(s) (gross {}, commissions {}).{}",
                    r.start,
                    r.end,
                    r.net_pnl.0,
                    r.currency,
                    r.lot_count,
                    r.gross_pnl.0,
                    r.commissions.0,
                    notes_suffix(&r.notes)
                )
            },
        ),
        "get_portfolio_summary" => output(
            args::parse::<CurrencyArgs>(arguments)
                .and_then(|a| report_currency(a.currency.as_deref(), base))
                .and_then(|ccy| {
                    get_portfolio_summary(book, &value_ledger(book, ledger, ccy, Scope::ACCOUNTS)?)
                }),
            |r: &SummaryResult| {
                format!(
                    "Total value {} {} as of {} (positions {}, cash {}, unrealized P&L {}).{}",
                    r.total_value.0,
                    r.currency,
                    r.as_of,
                    r.positions_value.0,
                    r.cash_value.0,
                    r.unrealized_pnl.0,
                    notes_suffix(&r.notes)
                )
            },
        ),
        "get_exposure" => output(
            args::parse::<ExposureArgs>(arguments).and_then(|a| {
                let ccy = report_currency(a.currency.as_deref(), base)?;
                get_exposure(
                    book,
                    &value_ledger(book, ledger, ccy, Scope::POSITIONS)?,
                    &ctx.sectors,
                    a.by,
                    a.basis.unwrap_or_default(),
                )
            }),
            |r: &ExposureResult| {
                let top: Vec<String> = r
                    .buckets
                    .iter()
                    .take(5)
                    .map(|b| {
                        format!(
                            "{} {}%",
                            b.key,
                            b.pct.map_or_else(|| "-".to_owned(), |p| p.0.to_string())
                        )
                    })
                    .collect();
                format!(
                    "{} exposure by {} ({}): {}.{}",
                    r.basis,
                    r.by,
                    r.currency,
                    top.join(", "),
                    notes_suffix(&r.notes)
                )
            },
        ),
        other => error_output(&Error::internal(format!(
            "tool {other} is listed but not dispatched"
        ))),
    }
}

async fn health(ctx: &ToolContext, arguments: Value) -> ToolOutput {
    if let Err(e) = args::parse::<NoArgs>(arguments) {
        return error_output(&e);
    }
    let probes = ctx.health().await;
    let result = match ctx.ledger().await {
        Ok((book, ledger)) => get_server_health(&ctx.version, probes, Some((&book, &ledger)), None),
        Err(e) => get_server_health(&ctx.version, probes, None, Some(e.to_string())),
    };
    output(result, |r: &HealthResult| {
        format!(
            "Health {}: {} account(s), {} reconciliation difference(s).{}",
            r.health,
            r.brokers.len(),
            r.reconciliation.len(),
            notes_suffix(&r.notes)
        )
    })
}
