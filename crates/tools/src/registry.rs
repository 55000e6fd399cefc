//! The tool registry: the one list of tools, and the call path every transport (CLI,
//! MCP) serves them through. A tool is declared once, beside its code, as a
//! [`Tool`](crate::tool::Tool) (docs/README.md, "A new tool, or a change to one").

use serde_json::Value;
use tradedesk_core::Error;

use crate::args;
use crate::context::ToolContext;
use crate::schema::compact;
use crate::tool::{Call, ErasedTool, ToolOutput, error_output};
use crate::toolset::Toolset;
use crate::trading::orders::Confirmer;
use crate::{
    accounts, health, history, hours, journal, market, marketdata, news, options, performance,
    perps, positions, realized, research, search, snapshots, trading,
};

/// Every tool, in the order clients list them. A new tool is one line here.
pub static ALL: &[&dyn ErasedTool] = &[
    &accounts::GetAccounts,
    &positions::GetPositions,
    &history::GetTradeHistory,
    &realized::GetRealizedPnl,
    &accounts::GetPortfolioSummary,
    &positions::GetExposure,
    &health::GetServerHealth,
    &market::GetQuote,
    &market::GetBars,
    &marketdata::ListMarkets,
    &marketdata::GetRecentTrades,
    &snapshots::GetSnapshots,
    &crate::chain::GetOptionChain,
    &hours::GetMarketHours,
    &search::SearchInstruments,
    &news::GetNews,
    &research::Backtest,
    &research::FactorAnalysis,
    &research::DetectPatterns,
    &research::GetRunResult,
    &options::OptionPrice,
    &options::ImpliedVolatility,
    &options::OptionStrategy,
    &perps::QuoteOpenPosition,
    &perps::QuoteLeverageLadder,
    &perps::QuoteClosePosition,
    &performance::GetPerformance,
    &journal::AnalyzeTrades,
    &trading::tools::GetOrders,
    &trading::tools::PreviewOrder,
    &trading::tools::PlaceOrder,
    &trading::tools::ClosePosition,
    &trading::tools::ModifyPosition,
    &trading::tools::CancelOrder,
];

/// A tool as clients see it.
#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    pub read_only: bool,
    /// Listed and served only while trading is enabled.
    pub needs_trading: bool,
    /// The toolset that lists and serves it; `None` for the one tool always served
    /// (get_server_health).
    pub toolset: Option<Toolset>,
    pub input_schema: Value,
    pub output_schema: Value,
    /// The tool itself, which runs the calls.
    pub tool: &'static dyn ErasedTool,
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
    fn of(tool: &'static dyn ErasedTool) -> Self {
        let m = tool.meta();
        let (input_schema, output_schema) = tool.schemas();
        Self {
            name: m.name,
            title: m.title,
            description: m.description,
            read_only: m.read_only,
            needs_trading: m.needs_trading,
            toolset: m.toolset,
            input_schema,
            output_schema,
            tool,
        }
    }

    /// The arguments of the tool's example in docs/tools.md.
    pub fn example(&self) -> Value {
        self.tool.example()
    }

    /// Read tools change nothing, so they are idempotent and not destructive; no tool
    /// here reaches beyond the configured accounts, but `get_news` answers text that
    /// outsiders wrote (the open world's, quoted).
    pub fn annotations(&self) -> Annotations {
        Annotations {
            read_only: self.read_only,
            destructive: !self.read_only,
            idempotent: self.read_only,
            open_world: self.tool.meta().open_world,
        }
    }
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

/// Every tool as clients see it, in [`ALL`]'s order. Built once, on first use: generating
/// the schemas is far costlier than most tool calls.
pub fn tools() -> &'static [ToolSpec] {
    static SPECS: std::sync::OnceLock<Vec<ToolSpec>> = std::sync::OnceLock::new();
    SPECS.get_or_init(|| {
        let mut specs = raw_specs();
        for spec in &mut specs {
            compact(&mut spec.input_schema, true);
            compact(&mut spec.output_schema, false);
        }
        specs
    })
}

/// The specs with their schemas as derived, before compaction.
pub(crate) fn raw_specs() -> Vec<ToolSpec> {
    ALL.iter().copied().map(ToolSpec::of).collect()
}

/// The tools a context lists and serves: those of its toolsets (get_server_health
/// always), the write tools only while trading is enabled.
pub fn listed(ctx: &ToolContext) -> impl Iterator<Item = &'static ToolSpec> + '_ {
    tools().iter().filter(move |t| {
        (!t.needs_trading || ctx.trading_enabled())
            && t.toolset.is_none_or(|set| ctx.toolsets.contains(set))
    })
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
    let Some(spec) = tools().iter().find(|t| t.name == name) else {
        return Err(CallError::UnknownTool(name.to_owned()));
    };
    // `arguments` is an object (a transport turns an omitted one into `{}`): null is not.
    if !arguments.is_object() {
        return Err(CallError::ArgumentsNotObject);
    }
    Ok(dispatch(ctx, spec, arguments, confirmer, progress).await)
}

/// The checks every call passes (its toolset is served, trading is on for a write
/// tool, its arguments have the types its schema advertises), then the tool.
async fn dispatch(
    ctx: &ToolContext,
    spec: &ToolSpec,
    arguments: Value,
    confirmer: Option<&dyn Confirmer>,
    progress: Option<&(dyn Fn(f64) + Send + Sync)>,
) -> ToolOutput {
    let name = spec.name;
    if let Some(set) = spec.toolset
        && !ctx.toolsets.contains(set)
    {
        return error_output(&Error::new(
            tradedesk_core::ErrorCode::ToolNotEnabled,
            format!(
                "{name} is in the {set} toolset, which this server does not serve (it serves {})",
                ctx.toolsets.names().join(", ")
            ),
            format!(
                "the owner can add \"{set}\" to [tools] enabled in tradedesk.toml or to --tools; until then use the tools listed"
            ),
        ));
    }
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
    let mut call = Call::new(ctx, confirmer, progress, &arguments);
    spec.tool.dispatch(&mut call, arguments).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_but_health_has_a_toolset_and_write_tools_are_in_trading() {
        for spec in tools() {
            match spec.toolset {
                None => assert_eq!(spec.name, "get_server_health"),
                Some(set) => {
                    if spec.needs_trading {
                        assert_eq!(set, Toolset::Trading, "{}", spec.name);
                    }
                }
            }
        }
        for set in Toolset::ALL {
            assert!(
                tools().iter().any(|t| t.toolset == Some(set)),
                "{set} is empty"
            );
        }
    }
}
