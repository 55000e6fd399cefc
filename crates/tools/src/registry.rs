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
    report_currency_in,
};
use crate::context::ToolContext;
use crate::health::{HealthResult, disagreement_note, get_server_health};
use crate::history::{TradeHistoryResult, check_limit, get_trade_history};
use crate::market::{BarsArgs, BarsResult, QuoteArgs, QuoteResult, get_bars, get_quote};
use crate::positions::{ExposureResult, PositionsResult, get_exposure, get_positions};
use crate::realized::{self, RealizedPnlResult, RealizedQuery, get_realized_pnl};
use crate::select::select;
use crate::trading::orders::{
    CancelArgs, CancelResult, CloseArgs, Confirmer, ModifyArgs, ModifyResult, OrdersArgs,
    OrdersResult, PlaceArgs, PlaceResult, PreviewArgs, PreviewResult, cancel_order, close_position,
    get_orders, modify_position, place_order, preview_order,
};
use crate::unavailable::{self, Down};
use crate::valuation::{Scope, value_ledger};
use tradedesk_brokers::HealthStatus;

/// A tool as clients see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub read_only: bool,
    /// Listed and served only while trading is enabled.
    pub needs_trading: bool,
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
    /// PNG images beside the result (a backtest's equity curve).
    pub images: Vec<Vec<u8>>,
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
                into the report currency. Use it first to learn account ids and brokers. An account whose gateway does not \
                answer is listed in unavailable_accounts with its error and left out of the totals.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<CurrencyArgs>(),
            output_schema: unavailable::with_field(output_schema::<AccountsResult>()),
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
            needs_trading: false,
            input_schema: input_schema::<PositionsArgs>(),
            output_schema: unavailable::with_field(output_schema::<PositionsResult>()),
        },
        ToolSpec {
            name: "get_trade_history",
            title: "Trade history",
            description: "Fills between start and end (absolute YYYY-MM-DD dates, inclusive, by the fill's trade date \
                in its own time zone), newest first, filtered by account, broker, symbol or side. limit 1..1000 \
                (default 100); total_count and truncated tell when more matched. Resolve relative periods such as \
                'last quarter' to dates yourself.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<TradeHistoryArgs>(),
            output_schema: unavailable::with_field(output_schema::<TradeHistoryResult>()),
        },
        ToolSpec {
            name: "get_realized_pnl",
            title: "Realized P&L (FIFO)",
            description: "Realized profit and loss of lots closed between start and end (absolute YYYY-MM-DD, inclusive, \
                by closing trade date), from a FIFO replay of the full history, net of prorated commissions, \
                converted at each closing date's rate. Grouped by symbol (default), account, broker, month or none; \
                biggest_gain / biggest_loss name the closing fills with the largest total; include_lots lists the \
                closed lots, lots_limit (max 1000) a page; pass next_cursor as cursor for the next page. \
                Dividends and interest are not P&L. A period with no closed lots is a true zero.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<RealizedPnlArgs>(),
            output_schema: unavailable::with_field(output_schema::<RealizedPnlResult>()),
        },
        ToolSpec {
            name: "get_portfolio_summary",
            title: "Portfolio summary",
            description: "The whole portfolio in one currency at as_of: total value (positions plus cash), positions value, \
                cash, unrealized P&L, holdings by currency held and by broker with percentages of the total, and \
                each account. Answers 'how much of my portfolio is in ringgit?'.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<CurrencyArgs>(),
            output_schema: unavailable::with_field(output_schema::<SummaryResult>()),
        },
        ToolSpec {
            name: "get_exposure",
            title: "Exposure breakdown",
            description: "Exposure of open positions (notional, cash excluded) bucketed by sector, currency, broker, account, \
                asset_class, country or symbol; basis gross (absolute, default) or net (signed). Bucket pct is of \
                the gross total. Positions without a sector are in an explicit Unclassified bucket.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<ExposureArgs>(),
            output_schema: unavailable::with_field(output_schema::<ExposureResult>()),
        },
        ToolSpec {
            name: "get_server_health",
            title: "Server health",
            description: "State of every broker connection (status, latency, a hint when down), reconciliation of the \
                positions brokers report against what the fills imply, and the FX rates in use with stale ones \
                flagged. Call it when another tool says a broker is unavailable.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<NoArgs>(),
            output_schema: unavailable::with_field(output_schema::<HealthResult>()),
        },
        ToolSpec {
            name: "get_quote",
            title: "Quote",
            description: "Current bid, ask, mid and spread of a symbol at an account that quotes (the demo's \
                SIM-PAPER quotes its US and Bursa stocks, EURUSD, GBPUSD, USDJPY, USDMYR, XAUUSD and BTC-PERP), \
                spread_pips for FX and metals, and the trading rules (lot step, minimum, tick, unit).",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<QuoteArgs>(),
            output_schema: output_schema::<QuoteResult>(),
        },
        ToolSpec {
            name: "get_bars",
            title: "Price bars",
            description: "OHLCV bars from an account's broker or the sim ({symbol, account, interval 1m|5m|15m|1h|1d, \
                start, end}) or from a CSV file ({csv: PATH}). Long series are thinned evenly to max_rows (default \
                250, 0 = all), always keeping the first and last bar; total, stride and truncated say how.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<BarsArgs>(),
            output_schema: output_schema::<BarsResult>(),
        },
        ToolSpec {
            name: "backtest",
            title: "Backtest a strategy",
            description: "Would this have worked? Runs entry/exit signals written in a small expression language over \
                bars (a CSV file or an account's broker): signals are evaluated on each bar's close and fill at the \
                next bar's open, so a signal can never use the bar it trades on. Language: numbers; open, high, low, \
                close, volume; sma(x,n), ema(x,n), rsi(x,n), atr(n), bb_upper(x,n,k), bb_lower(x,n,k), highest(x,n), \
                lowest(x,n), ret(x,n), shift(x,n), cross_above(a,b), cross_below(a,b); < <= > >= == !=; + - * /; and, \
                or, not; parentheses. Example entry: cross_above(sma(close, 10), sma(close, 30)). A bar where any \
                indicator in a condition has no value yet (its warm-up) never signals, whatever and, or and not join it \
                to. Fees and slippage in \
                basis points, long or short, whole or fractional units. Returns the metrics (return, CAGR, volatility, \
                Sharpe, Sortino, max drawdown, win rate, profit factor, exposure), the trades, any open position, and \
                the equity curve as an image. A run longer than wait_seconds answers a run_id for get_run_result.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::research::BacktestArgs>(),
            output_schema: output_schema::<crate::research::BacktestResult>(),
        },
        ToolSpec {
            name: "factor_analysis",
            title: "Factor analysis",
            description: "Does a factor predict returns across a universe? Evaluates a factor written in the backtest's \
                signal language (a series, e.g. ret(close, 20) or -rsi(close, 14)) over 3 or more bar sources on their \
                common dates, then reports the information coefficient (Pearson) and rank IC (Spearman) against \
                forward returns of `horizon` bars per cross-section, their mean, standard deviation and t-stat, the \
                hit rate (share of periods with IC > 0), and the mean forward return by factor quantile (5 by \
                default). The definitions are stated in the result.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::research::FactorArgs>(),
            output_schema: output_schema::<crate::research::FactorResult>(),
        },
        ToolSpec {
            name: "detect_patterns",
            title: "Candlestick and swing patterns",
            description: "Scans bars for candlestick patterns and swings: bullish/bearish engulfing (a body that \
                engulfs the previous opposite body), hammer / shooting star (a shadow at least twice the body, the \
                other shadow at most the body, after a 10-bar decline / rise), doji (body at most 10% of the range), \
                morning/evening star (a long body, a small one at most 30% of it, then a close beyond the first \
                body's midpoint), three white soldiers / black crows (three long bodies, each closing further and \
                opening inside the previous body), swing highs/lows (a high/low beyond the swing_window bars on \
                each side, confirmed that many bars later), and support/resistance levels where swings cluster \
                within level_tolerance_pct. Each hit comes with its bar time and the exact rule it matched.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::research::PatternsArgs>(),
            output_schema: output_schema::<crate::research::PatternsResult>(),
        },
        ToolSpec {
            name: "get_run_result",
            title: "A long run's result",
            description: "The result of a backtest that answered state running and a run_id: the full result once done \
                (as often as asked: kept for an hour after the run ends, the newest 32), else its progress.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::research::RunResultArgs>(),
            output_schema: output_schema::<crate::research::BacktestResult>(),
        },
        ToolSpec {
            name: "option_price",
            title: "Option price and greeks",
            description: "Price a European call or put with Black-Scholes-Merton (continuous dividend yield): price, \
                delta, gamma, vega (per 1 volatility point), theta (per calendar day), rho (per 1 rate point), d1, d2. \
                volatility, rate and dividend_yield are fractions (0.2 means 20%); time_years > 0.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::options::OptionPriceArgs>(),
            output_schema: output_schema::<crate::options::OptionPriceResult>(),
        },
        ToolSpec {
            name: "implied_volatility",
            title: "Implied volatility",
            description: "The Black-Scholes-Merton volatility that reprices a European option's price to within 1e-10 \
                relative, from a bracketed solver that converges deep in and out of the money. A price on or outside \
                the discounted no-arbitrage bounds is refused with the bound it broke.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::options::ImpliedVolArgs>(),
            output_schema: output_schema::<crate::options::ImpliedVolResult>(),
        },
        ToolSpec {
            name: "option_strategy",
            title: "Option strategy payoff",
            description: "What does this spread pay, and where do I break even? Multi-leg option strategies (calls, puts \
                and stock; signed quantities per share; premiums default to the model price): net premium, P&L at the \
                earliest expiry and now across a price range, breakevens solved as roots, max profit and max loss \
                (null when unbounded), probability of profit under the lognormal model, summed greeks, and the payoff \
                chart as an image.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::options::StrategyArgs>(),
            output_schema: output_schema::<crate::options::StrategyResult>(),
        },
        ToolSpec {
            name: "quote_open_position",
            title: "Quote a leveraged perp position",
            description: "How far can this perp move before I am liquidated? For an isolated-margin perpetual position \
                (margin x whole-number leverage at mark_price, or a market's live mark from Hyperliquid or the sim): \
                notional, size, bust price and its distance, validity, and net P&L after fees at price moves of \
                -10, -5, -1, +1, +5 and +10 percent.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::perps::OpenArgs>(),
            output_schema: output_schema::<crate::perps::OpenResult>(),
        },
        ToolSpec {
            name: "quote_leverage_ladder",
            title: "Leverage ladder",
            description: "Bust price and its distance for one isolated-margin perp position at leverage 1, 2, 3, 5, 10, \
                25, 50, 100, 250, 500 and 1000 below the maximum, plus the maximum, from mark_price or a market's live \
                mark and maximum leverage.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::perps::LadderArgs>(),
            output_schema: output_schema::<crate::perps::LadderResult>(),
        },
        ToolSpec {
            name: "quote_close_position",
            title: "Quote closing a perp position",
            description: "Raw P&L, fees (open and close) and net P&L of closing an isolated-margin perp position opened \
                at entry_price, at exit_price (default: the mark), and whether it was liquidated on the way (net P&L \
                is then -margin, never below).",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::perps::CloseArgs>(),
            output_schema: output_schema::<crate::perps::CloseResult>(),
        },
        ToolSpec {
            name: "get_performance",
            title: "Performance against a benchmark",
            description: "Did I beat the index? Time-weighted and money-weighted (XIRR) return of an account or the whole \
                book from start to end (YYYY-MM-DD, end not after as_of), from daily valuations with that day's marks \
                and FX and the deposits and withdrawals between, against an optional benchmark bar source; the method \
                is stated in the result.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::performance::PerformanceArgs>(),
            output_schema: unavailable::with_field(output_schema::<
                crate::performance::PerformanceResult,
            >()),
        },
        ToolSpec {
            name: "analyze_trades",
            title: "Trading habits",
            description: "What are my habits? Journal analytics over the trades (closing fills) that closed FIFO lots \
                between start and end: win rate, average win and loss, payoff ratio, profit factor, expectancy, \
                largest win and loss, holding days of winners and losers (losers held longer is the disposition \
                effect), streaks, and P&L by weekday and by holding period. Totals agree with get_realized_pnl.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<crate::journal::JournalArgs>(),
            output_schema: unavailable::with_field(output_schema::<crate::journal::JournalResult>()),
        },
        ToolSpec {
            name: "get_orders",
            title: "Orders",
            description: "Orders at the brokers, newest first: open (working, the default), closed (filled, cancelled, \
                expired, rejected) or all, with fills, prices, stop-loss / take-profit, status and mode. Use it to look \
                an order up by client_order_id after an uncertain outcome.",
            read_only: true,
            needs_trading: false,
            input_schema: input_schema::<OrdersArgs>(),
            output_schema: output_schema::<OrdersResult>(),
        },
        ToolSpec {
            name: "preview_order",
            title: "Preview an order",
            description: "Checks an order without sending it: the normalized order, its valuation (the highest of its \
                limit, its stop and the current quote, converted to the base currency), commission and margin, \
                and every validation and policy rule with passed/detail. When allowed it returns a single-use \
                confirmation_token (bound to these exact arguments) for place_order. Show the user the plan first.",
            read_only: true,
            needs_trading: true,
            input_schema: input_schema::<PreviewArgs>(),
            output_schema: output_schema::<PreviewResult>(),
        },
        ToolSpec {
            name: "place_order",
            title: "Place an order",
            description: "Sends an order (paper unless mode is live and the account allows it) after every server-side \
                guard. Pass the confirmation_token from preview_order with the same arguments when confirmation \
                is on. A retry with the same client_order_id returns the first outcome (replayed: true) and never \
                sends a second order. On an uncertain outcome, look the order up with get_orders; do not resend.",
            read_only: false,
            needs_trading: true,
            input_schema: input_schema::<PlaceArgs>(),
            output_schema: output_schema::<PlaceResult>(),
        },
        ToolSpec {
            name: "close_position",
            title: "Close a position",
            description: "Closes all (default) or part of an open position with a market order on the opposite side. \
                Allowed while the kill switch is on. Its confirmation_token comes from preview_order of the \
                equivalent market order (the opposite side, that quantity).",
            read_only: false,
            needs_trading: true,
            input_schema: input_schema::<CloseArgs>(),
            output_schema: output_schema::<PlaceResult>(),
        },
        ToolSpec {
            name: "modify_position",
            title: "Modify stop-loss / take-profit",
            description: "Sets the stop-loss and/or take-profit of an open position (at least one). For a long position \
                the stop-loss must be below the bid and the take-profit above it; for a short, the reverse.",
            read_only: false,
            needs_trading: true,
            input_schema: input_schema::<ModifyArgs>(),
            output_schema: output_schema::<ModifyResult>(),
        },
        ToolSpec {
            name: "cancel_order",
            title: "Cancel an order",
            description: "Cancels a working order by order_id or client_order_id (exactly one). Answers cancelled, or \
                not_cancellable when it already filled, expired or was cancelled. Allowed while the kill switch is on.",
            read_only: false,
            needs_trading: true,
            input_schema: input_schema::<CancelArgs>(),
            output_schema: output_schema::<CancelResult>(),
        },
    ]
}

/// The tools a context serves: the write tools only while trading is enabled.
pub fn listed(ctx: &ToolContext) -> impl Iterator<Item = &'static ToolSpec> + '_ {
    tools()
        .iter()
        .filter(move |t| !t.needs_trading || ctx.trading_enabled())
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
                images: Vec::new(),
            }
        }
        Err(e) => error_output(&e),
    }
}

fn error_output(e: &Error) -> ToolOutput {
    let structured = json!({"status": "error", "error": e});
    ToolOutput {
        is_error: true,
        structured,
        summary: format!("error {}: {} (hint: {})", e.code, e.message, e.hint),
        images: Vec::new(),
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
/// [`CallError`] for an unknown tool or arguments that are not a JSON object (null
/// included: a transport passes `{}` for arguments left out); every other failure is an
/// error *result*, an argument of a type the tool's input schema refuses included
/// (`invalid_argument`, see [`args::check_types`]).
pub async fn call(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
) -> Result<ToolOutput, CallError> {
    call_with(ctx, name, arguments, None).await
}

/// Calls a tool by name, with a way to ask the human to confirm an order.
///
/// # Errors
/// As [`call`]. A write tool while trading is off is a `trading_disabled` result.
pub async fn call_with(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
    confirmer: Option<&dyn Confirmer>,
) -> Result<ToolOutput, CallError> {
    call_with_progress(ctx, name, arguments, confirmer, None).await
}

/// Calls a tool by name, with a way to ask the human to confirm an order and a way to
/// report how far a long computation has come (a share from 0 to 1).
///
/// # Errors
/// As [`call`].
pub async fn call_with_progress(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
    confirmer: Option<&dyn Confirmer>,
    progress: Option<&(dyn Fn(f64) + Send + Sync)>,
) -> Result<ToolOutput, CallError> {
    if !tools().iter().any(|t| t.name == name) {
        return Err(CallError::UnknownTool(name.to_owned()));
    }
    // `arguments` is an object (a transport turns an omitted one into `{}`): null is not.
    if !arguments.is_object() {
        return Err(CallError::ArgumentsNotObject);
    }
    Ok(dispatch(ctx, name, arguments, confirmer, progress).await)
}

fn order_summary(r: &PlaceResult) -> String {
    format!(
        "{} order {} ({}): {}, filled {} at {}{}. {}",
        r.mode,
        r.order_id,
        r.client_order_id,
        r.outcome,
        r.filled_quantity.0,
        r.average_price
            .map_or_else(|| "-".to_owned(), |p| p.0.to_string()),
        if r.replayed {
            ", replayed from the first call"
        } else {
            ""
        },
        Value::String(r.message.clone())
    )
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.4}"))
}

/// A backtest's answer: the result, and its equity curve as an image.
fn finished(result: Result<crate::research::Finished>) -> ToolOutput {
    match result {
        Ok(f) => {
            let chart = f.chart;
            let mut out = output(
                Ok(f.result),
                |r: &crate::research::BacktestResult| match &r.report {
                    Some(rep) => format!(
                        "{}: {} bar(s) {} to {}; {} trade(s), total return {:.2}%, max drawdown {:.2}%, final equity {:.2}{}.{}",
                        r.symbol.as_deref().unwrap_or("?"),
                        rep.bars,
                        rep.start,
                        rep.end,
                        rep.trade_count,
                        rep.total_return_pct,
                        rep.max_drawdown_pct,
                        rep.final_equity,
                        rep.open_position
                            .as_ref()
                            .map(|_| ", a position still open")
                            .unwrap_or_default(),
                        notes_suffix(&rep.notes)
                    ),
                    None => format!(
                        "still running ({:.2} done): call get_run_result with run_id {}",
                        r.progress.unwrap_or(0.0),
                        Value::String(r.run_id.clone().unwrap_or_default())
                    ),
                },
            );
            out.images.extend(chart);
            out
        }
        Err(e) => error_output(&e),
    }
}

/// The research tools: computations that may run long, with progress.
async fn dispatch_research(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
    progress: Option<&(dyn Fn(f64) + Send + Sync)>,
) -> Option<ToolOutput> {
    Some(match name {
        "backtest" => match args::parse::<crate::research::BacktestArgs>(arguments) {
            Ok(a) => finished(crate::research::backtest(ctx, a, progress).await),
            Err(e) => error_output(&e),
        },
        "get_run_result" => match args::parse::<crate::research::RunResultArgs>(arguments) {
            Ok(a) => finished(crate::research::get_run_result(ctx, a).await),
            Err(e) => error_output(&e),
        },
        "factor_analysis" => match args::parse::<crate::research::FactorArgs>(arguments) {
            Ok(a) => output(
                crate::research::factor_analysis(ctx, a).await,
                |r: &crate::research::FactorResult| {
                    format!(
                        "{} over {} asset(s), {} cross-section(s), horizon {} bar(s): IC mean {}, rank IC mean {}, IC t-stat {}, hit rate {}%.{}",
                        Value::String(r.factor.clone()),
                        r.assets.len(),
                        r.stats.periods,
                        r.horizon,
                        fmt_opt(r.stats.ic_mean),
                        fmt_opt(r.stats.rank_ic_mean),
                        fmt_opt(r.stats.ic_t_stat),
                        fmt_opt(r.stats.hit_rate_pct),
                        notes_suffix(&r.notes)
                    )
                },
            ),
            Err(e) => error_output(&e),
        },
        "detect_patterns" => match args::parse::<crate::research::PatternsArgs>(arguments) {
            Ok(a) => output(
                crate::research::detect_patterns(ctx, a).await,
                |r: &crate::research::PatternsResult| {
                    format!(
                        "{}: {} pattern hit(s) in {} bar(s){}; {} support/resistance level(s).",
                        r.symbol,
                        r.hit_count,
                        r.bars,
                        if r.truncated {
                            " (the most recent listed)"
                        } else {
                            ""
                        },
                        r.levels.len()
                    )
                },
            ),
            Err(e) => error_output(&e),
        },
        "option_price" => match args::parse::<crate::options::OptionPriceArgs>(arguments) {
            Ok(a) => output(
                crate::options::option_price(&a),
                |r: &crate::options::OptionPriceResult| {
                    format!(
                        "price {:.6}, delta {:.6}, gamma {:.6}, vega {:.6} per point, theta {:.6} per day, rho {:.6} per point.",
                        r.price, r.delta, r.gamma, r.vega, r.theta, r.rho
                    )
                },
            ),
            Err(e) => error_output(&e),
        },
        "implied_volatility" => match args::parse::<crate::options::ImpliedVolArgs>(arguments) {
            Ok(a) => output(
                crate::options::implied_volatility(&a),
                crate::options::ImpliedVolResult::summary,
            ),
            Err(e) => error_output(&e),
        },
        "option_strategy" => match args::parse::<crate::options::StrategyArgs>(arguments) {
            Ok(a) => match crate::options::option_strategy(&a) {
                Ok((result, chart)) => {
                    let mut out = output(Ok(result), crate::options::StrategyResult::summary);
                    out.images.extend(chart);
                    out
                }
                Err(e) => error_output(&e),
            },
            Err(e) => error_output(&e),
        },
        "quote_open_position" => match args::parse_flat::<crate::perps::OpenArgs>(arguments) {
            Ok(a) => output(
                crate::perps::quote_open_position(ctx, a).await,
                |r: &crate::perps::OpenResult| {
                    format!(
                        "{} {}x: notional {}, size {}, bust price {} ({:.4}% away){}.",
                        r.side,
                        r.leverage,
                        r.notional,
                        r.size,
                        r.bust_price,
                        r.bust_distance_pct,
                        r.invalid_reason
                            .as_ref()
                            .map(|w| format!("; NOT valid: {w}"))
                            .unwrap_or_default()
                    )
                },
            ),
            Err(e) => error_output(&e),
        },
        "quote_leverage_ladder" => match args::parse_flat::<crate::perps::LadderArgs>(arguments) {
            Ok(a) => output(
                crate::perps::quote_leverage_ladder(ctx, a).await,
                |r: &crate::perps::LadderResult| {
                    let steps: Vec<String> = r
                        .steps
                        .iter()
                        .map(|s| {
                            format!(
                                "{}x bust {} ({:.2}%)",
                                s.leverage, s.bust_price, s.bust_distance_pct
                            )
                        })
                        .collect();
                    format!("{} at {}: {}.", r.side, r.mark_price, steps.join(", "))
                },
            ),
            Err(e) => error_output(&e),
        },
        "quote_close_position" => match args::parse_flat::<crate::perps::CloseArgs>(arguments) {
            Ok(a) => output(
                crate::perps::quote_close_position(ctx, a).await,
                |r: &crate::perps::CloseResult| {
                    format!(
                        "{} {}x from {} to {}: raw P&L {}, fees {}, net P&L {}{}.",
                        r.side,
                        r.leverage,
                        r.entry_price,
                        r.exit_price,
                        r.raw_pnl,
                        r.fees,
                        r.net_pnl,
                        if r.liquidated { " (liquidated)" } else { "" }
                    )
                },
            ),
            Err(e) => error_output(&e),
        },
        "get_performance" => performance(ctx, arguments).await,
        _ => return None,
    })
}

/// get_performance: the book, then daily valuations and the benchmark.
async fn performance(ctx: &ToolContext, arguments: Value) -> ToolOutput {
    let a = match args::parse::<crate::performance::PerformanceArgs>(arguments) {
        Ok(a) => a,
        Err(e) => return error_output(&e),
    };
    let (served, down) = ctx.served().await;
    let book = match served {
        Ok(b) => b,
        Err(e) => return error_output(&e),
    };
    let filters = serde_json::json!({"account": a.account});
    let left_out = match unavailable::relevant(&down, &book, &filters) {
        Ok(left_out) => left_out,
        Err(e) => return error_output(&e),
    };
    let prepared = report_currency_in(&book, a.currency.as_deref())
        .and_then(|ccy| Ok((ccy, select(&book, a.account.as_deref(), None, None)?)));
    let result = match prepared {
        Ok((ccy, sel)) => crate::performance::get_performance(ctx, &book, &sel, &a, ccy).await,
        Err(e) => Err(e),
    };
    let out = output(result, |r: &crate::performance::PerformanceResult| {
        format!(
            "{} to {} ({}): value {} -> {} {}, net flows {}; TWR {}%, MWR {}% a year{}.{}",
            r.start,
            r.end,
            r.account.as_deref().unwrap_or("whole book"),
            r.start_value.0,
            r.end_value.0,
            r.currency,
            r.net_flows.0,
            fmt_opt(r.twr_pct),
            fmt_opt(r.mwr_pct),
            r.benchmark_return_pct
                .map(|b| format!(", benchmark {b:.4}%"))
                .unwrap_or_default(),
            notes_suffix(&r.notes)
        )
    });
    partial(out, &left_out)
}

/// The market and trading tools: they talk to brokers, so they run outside the book
/// path.
async fn dispatch_live(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
    confirmer: Option<&dyn Confirmer>,
) -> Option<ToolOutput> {
    Some(match name {
        "get_quote" => match args::parse::<QuoteArgs>(arguments) {
            Ok(a) => output(get_quote(ctx, a).await, |r: &QuoteResult| {
                format!(
                    "{}:{} bid {} ask {} spread {}{} {} at {}.",
                    r.exchange,
                    r.symbol,
                    r.bid.0,
                    r.ask.0,
                    r.spread.0,
                    r.spread_pips
                        .map(|p| format!(" ({} pips)", p.0))
                        .unwrap_or_default(),
                    r.currency,
                    r.time
                )
            }),
            Err(e) => error_output(&e),
        },
        "get_bars" => match args::parse::<BarsArgs>(arguments) {
            Ok(a) => output(get_bars(ctx, a).await, |r: &BarsResult| {
                format!(
                    "{} of {} bar(s) of {} (stride {}).",
                    r.count, r.total, r.symbol, r.stride
                )
            }),
            Err(e) => error_output(&e),
        },
        "get_orders" => match args::parse::<OrdersArgs>(arguments) {
            Ok(a) => output(get_orders(ctx, a).await, |r: &OrdersResult| {
                format!("{} order(s).{}", r.count, notes_suffix(&r.notes))
            }),
            Err(e) => error_output(&e),
        },
        "preview_order" => match args::parse::<PreviewArgs>(arguments) {
            Ok(a) => output(preview_order(ctx, a).await, |r: &PreviewResult| {
                let failed: Vec<&str> = r
                    .checks
                    .iter()
                    .filter(|c| !c.passed)
                    .map(|c| c.rule)
                    .collect();
                if r.allowed {
                    format!(
                        "{} order allowed: valued at {} {}; confirmation_token valid until {}.{}",
                        r.mode,
                        r.estimate
                            .notional_base
                            .map_or_else(|| "-".to_owned(), |n| n.0.to_string()),
                        r.estimate.base_currency,
                        r.expires_at.as_deref().unwrap_or("-"),
                        notes_suffix(&r.notes)
                    )
                } else {
                    format!(
                        "{} order NOT allowed; failed rules: {}.{}",
                        r.mode,
                        failed.join(", "),
                        notes_suffix(&r.notes)
                    )
                }
            }),
            Err(e) => error_output(&e),
        },
        "place_order" => match args::parse::<PlaceArgs>(arguments) {
            Ok(a) => output(place_order(ctx, a, confirmer).await, order_summary),
            Err(e) => error_output(&e),
        },
        "close_position" => match args::parse::<CloseArgs>(arguments) {
            Ok(a) => output(close_position(ctx, a, confirmer).await, order_summary),
            Err(e) => error_output(&e),
        },
        "modify_position" => match args::parse::<ModifyArgs>(arguments) {
            Ok(a) => output(modify_position(ctx, a).await, |r: &ModifyResult| {
                format!(
                    "{} {}: stop-loss {}, take-profit {}.",
                    r.mode,
                    r.symbol,
                    r.stop_loss
                        .map_or_else(|| "none".to_owned(), |n| n.0.to_string()),
                    r.take_profit
                        .map_or_else(|| "none".to_owned(), |n| n.0.to_string())
                )
            }),
            Err(e) => error_output(&e),
        },
        "cancel_order" => match args::parse::<CancelArgs>(arguments) {
            Ok(a) => output(cancel_order(ctx, a).await, |r: &CancelResult| {
                format!("{} order {}: {}.", r.mode, r.order_id, r.outcome)
            }),
            Err(e) => error_output(&e),
        },
        _ => return None,
    })
}

async fn dispatch(
    ctx: &ToolContext,
    name: &str,
    arguments: Value,
    confirmer: Option<&dyn Confirmer>,
    progress: Option<&(dyn Fn(f64) + Send + Sync)>,
) -> ToolOutput {
    let Some(spec) = tools().iter().find(|t| t.name == name) else {
        return error_output(&Error::internal(format!("tool {name} is not listed")));
    };
    if spec.needs_trading && !ctx.trading_enabled() {
        return error_output(&Error::new(
            tradedesk_core::ErrorCode::TradingDisabled,
            format!("{name} is a write tool and trading is switched off on this server"),
            "the owner can switch it on with [trading] enabled = true in tradedesk.toml; until then only the read tools work",
        ));
    }
    // Every tool refuses what its advertised schema refuses, before any parsing.
    if let Err(e) = args::check_types(&spec.input_schema, &arguments) {
        return error_output(&e);
    }
    if name == "get_server_health" {
        return health(ctx, arguments).await;
    }
    if let Some(out) = dispatch_research(ctx, name, arguments.clone(), progress).await {
        return out;
    }
    if let Some(out) = dispatch_live(ctx, name, arguments.clone(), confirmer).await {
        return out;
    }
    let (served, down) = ctx.served_ledger().await;
    let (book, ledger) = match served {
        Ok(pair) => pair,
        Err(e) => return error_output(&e),
    };
    let left_out = match unavailable::relevant(&down, &book, &arguments) {
        Ok(left_out) => left_out,
        Err(e) => return error_output(&e),
    };
    // The tools are pure functions over the book; should one ever panic, the caller gets
    // an `internal` error result and the server stays up.
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_tool(ctx, &book, &ledger, name, arguments)
    }))
    .unwrap_or_else(|_| {
        error_output(&Error::internal(format!(
            "{name} failed unexpectedly; the server is still running"
        )))
    });
    unknown_while_down(partial(out, &left_out), &down)
}

/// Marks an ok answer over the accounts that answered as partial, naming those left out.
fn partial(mut out: ToolOutput, left_out: &[&Down]) -> ToolOutput {
    if !out.is_error {
        let suffix = unavailable::annotate(&mut out.structured, left_out);
        out.summary.push_str(&suffix);
    }
    out
}

/// An unknown account or symbol while accounts are down may be one of theirs: the hint
/// says so.
fn unknown_while_down(mut out: ToolOutput, down: &[Down]) -> ToolOutput {
    let code = out.structured["error"]["code"].as_str().unwrap_or_default();
    if out.is_error && !down.is_empty() && (code == "unknown_symbol" || code == "unknown_account") {
        let ids: Vec<&str> = down.iter().map(|d| d.row.account.as_str()).collect();
        let extra = if ids.len() == 1 {
            format!(
                "; {} did not answer, so what it holds is not known until it answers again (get_server_health)",
                ids[0]
            )
        } else {
            format!(
                "; {} did not answer, so what they hold is not known until they answer again (get_server_health)",
                ids.join(", ")
            )
        };
        if let Some(hint) = out.structured["error"]["hint"].as_str() {
            let hint = format!("{hint}{extra}");
            out.summary = format!(
                "{} (hint: {hint})",
                out.summary.split(" (hint: ").next().unwrap_or_default()
            );
            out.structured["error"]["hint"] = Value::String(hint);
        }
    }
    out
}

fn run_tool(
    ctx: &ToolContext,
    book: &Book,
    ledger: &Ledger,
    name: &str,
    arguments: Value,
) -> ToolOutput {
    match name {
        "get_accounts" => output(
            args::parse::<CurrencyArgs>(arguments)
                .and_then(|a| report_currency_in(book, a.currency.as_deref()))
                .and_then(|ccy| {
                    get_accounts(book, &value_ledger(book, ledger, ccy, Scope::ACCOUNTS)?)
                })
                .map(|mut r| {
                    r.notes.extend(disagreement_note(book, ledger, |_, _| true));
                    r
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
                let ccy = report_currency_in(book, a.currency.as_deref())?;
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
                let mut r = get_positions(
                    book,
                    &value_ledger(book, ledger, ccy, scope)?,
                    &ctx.sectors,
                    &sel,
                )?;
                r.notes
                    .extend(disagreement_note(book, ledger, |a, i| sel.matches(a, i)));
                Ok(r)
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
                let currency = report_currency_in(book, a.currency.as_deref())?;
                let sel = select(
                    book,
                    a.account.as_deref(),
                    a.broker.as_deref(),
                    a.symbol.as_deref(),
                )?;
                let paging = a.lots_limit.is_some() || a.cursor.is_some();
                if paging && a.include_lots == Some(false) {
                    return Err(Error::invalid_argument(
                        "lots_limit and cursor page the lots, but include_lots is false",
                        "set include_lots to true (or leave it out) to page the lots, or drop lots_limit and cursor",
                    ));
                }
                let limit = match a.lots_limit {
                    None => realized::MAX_LOTS,
                    Some(n) => usize::try_from(n)
                        .ok()
                        .filter(|n| (1..=realized::MAX_LOTS).contains(n))
                        .ok_or_else(|| {
                            Error::invalid_argument(
                                format!("lots_limit is {n}: it must be 1..={}", realized::MAX_LOTS),
                                format!(
                                    "pass a lots_limit from 1 to {}, and page with cursor",
                                    realized::MAX_LOTS
                                ),
                            )
                        })?,
                };
                let fingerprint = realized::query_fingerprint(&[
                    &a.start,
                    &a.end,
                    a.account.as_deref().unwrap_or(""),
                    a.broker.as_deref().unwrap_or(""),
                    a.symbol.as_deref().unwrap_or(""),
                    currency.code(),
                ]);
                let page = match a.cursor.as_deref() {
                    None => realized::LotPage {
                        limit,
                        ..realized::LotPage::FIRST
                    },
                    Some(c) => realized::parse_cursor(c, limit, fingerprint)?,
                };
                let query = RealizedQuery {
                    range,
                    currency,
                    group_by: a.group_by.unwrap_or_default(),
                    include_lots: a.include_lots.unwrap_or(paging),
                    page,
                    fingerprint,
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
                .and_then(|a| report_currency_in(book, a.currency.as_deref()))
                .and_then(|ccy| {
                    get_portfolio_summary(book, &value_ledger(book, ledger, ccy, Scope::ACCOUNTS)?)
                })
                .map(|mut r| {
                    r.notes.extend(disagreement_note(book, ledger, |_, _| true));
                    r
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
                let ccy = report_currency_in(book, a.currency.as_deref())?;
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
        "analyze_trades" => output(
            args::parse::<crate::journal::JournalArgs>(arguments).and_then(|a| {
                let range = DateRange::parse(&a.start, &a.end)?;
                let currency = report_currency_in(book, a.currency.as_deref())?;
                let sel = select(
                    book,
                    a.account.as_deref(),
                    a.broker.as_deref(),
                    a.symbol.as_deref(),
                )?;
                crate::journal::analyze_trades(book, &sel, range, currency)
            }),
            |r: &crate::journal::JournalResult| {
                format!(
                    "{} trade(s) {} to {}: net {} {}, win rate {}%, profit factor {}, winners held {} day(s) and losers {} on average.{}",
                    r.trade_count,
                    r.start,
                    r.end,
                    r.net_pnl.0,
                    r.currency,
                    fmt_opt(r.win_rate_pct),
                    fmt_opt(r.profit_factor),
                    fmt_opt(r.average_holding_days_winners),
                    fmt_opt(r.average_holding_days_losers),
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
    let (mut probes, (served, down)) = tokio::join!(ctx.health(), ctx.served_ledger());
    // A gateway that answers its probe while its account's data could not be read.
    for d in down.iter() {
        if let Some(p) = probes
            .iter_mut()
            .find(|p| p.account == d.row.account && p.status == HealthStatus::Ok)
        {
            p.status = HealthStatus::Degraded;
            p.detail = format!(
                "{}; but its account data could not be read: {}",
                p.detail, d.row.message
            );
            p.hint = Some(d.row.hint.clone());
        }
    }
    let result = match served {
        Ok((book, ledger)) => get_server_health(&ctx.version, probes, Some((&book, &ledger)), None),
        Err(e) => get_server_health(&ctx.version, probes, None, Some(e.to_string())),
    }
    .map(|mut r| {
        if let Some(trading) = &ctx.trading {
            r.trading = Some(crate::health::trading_health(trading, &mut r.notes));
        }
        r
    });
    let out = output(result, |r: &HealthResult| {
        format!(
            "Health {}: {} account(s), {} reconciliation difference(s).{}",
            r.health,
            r.brokers.len(),
            r.reconciliation.len(),
            notes_suffix(&r.notes)
        )
    });
    let left_out: Vec<&Down> = down.iter().collect();
    partial(out, &left_out)
}
