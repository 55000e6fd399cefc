//! Resources (the methodology, readable before answering) and prompts (what a client can
//! offer its user), plus the excerpt rule for echoing untrusted text.

use rmcp::model::{
    ErrorData, GetPromptResult, Prompt, PromptArgument, PromptMessage, ReadResourceResult,
    Resource, ResourceContents, Role,
};
use serde_json::{Map, Value};
use tradedesk_core::parse_date;

pub use tradedesk_core::error::quote as excerpt;

struct Doc {
    uri: &'static str,
    name: &'static str,
    description: &'static str,
    text: &'static str,
}

const DOCS: [Doc; 10] = [
    Doc {
        uri: "tradedesk://methodology/conventions",
        name: "Conventions every tool follows",
        description: "Result and error shape, every error code, arguments, dates, filters, symbols, rounding, notes and partial answers",
        text: include_str!("../../../docs/methodology/conventions.md"),
    },
    Doc {
        uri: "tradedesk://methodology/realized-pnl",
        name: "Realized P&L methodology",
        description: "FIFO matching, commission proration, closing trade dates, conversion and rounding of closed lots",
        text: include_str!("../../../docs/methodology/realized-pnl.md"),
    },
    Doc {
        uri: "tradedesk://methodology/instruments",
        name: "Instrument specs methodology",
        description: "Multipliers, contract sizes and profit currencies per broker, and what answers say when one is not known",
        text: include_str!("../../../docs/methodology/instruments.md"),
    },
    Doc {
        uri: "tradedesk://methodology/fx",
        name: "FX conversion methodology",
        description: "Where rates come from (fx_file, brokers, ECB), which rate is used for which figure, inverse and crossed quotes, rows left out without a rate",
        text: include_str!("../../../docs/methodology/fx.md"),
    },
    Doc {
        uri: "tradedesk://methodology/exposure",
        name: "Exposure and valuation methodology",
        description: "Notional, market value, margin-settled classes, buckets, cash",
        text: include_str!("../../../docs/methodology/exposure.md"),
    },
    Doc {
        uri: "tradedesk://methodology/corporate-actions",
        name: "Corporate actions methodology",
        description: "Splits, mergers, tenders, spin-offs, option expiry, exercise and assignment, and positions held before the history starts",
        text: include_str!("../../../docs/methodology/corporate-actions.md"),
    },
    Doc {
        uri: "tradedesk://methodology/reconciliation",
        name: "Reconciliation methodology",
        description: "Broker-reported positions against the positions the fills imply",
        text: include_str!("../../../docs/methodology/reconciliation.md"),
    },
    Doc {
        uri: "tradedesk://methodology/trading",
        name: "Trading methodology",
        description: "The paper exchange (prices, matching, fees, margin) and every guard an order passes: valuation, limits, tokens, idempotency, audit",
        text: include_str!("../../../docs/methodology/trading.md"),
    },
    Doc {
        uri: "tradedesk://methodology/research",
        name: "Research methodology",
        description: "Bar sources and downsampling, backtest fills and metrics, the signal language, option greeks' units, perpetuals' liquidation, performance (TWR, MWR) and trading habits",
        text: include_str!("../../../docs/methodology/research.md"),
    },
    Doc {
        uri: "tradedesk://book-format",
        name: "Book format",
        description: "The tradedesk-book/1 file: a brokerage history as JSON",
        text: include_str!("../../../docs/methodology/book-format.md"),
    },
];

pub fn resources() -> Vec<Resource> {
    DOCS.iter()
        .map(|d| {
            Resource::new(d.uri, d.name)
                .with_description(d.description)
                .with_mime_type("text/markdown")
        })
        .collect()
}

pub fn read(uri: &str) -> Option<ReadResourceResult> {
    let doc = DOCS.iter().find(|d| d.uri == uri)?;
    Some(ReadResourceResult::new(vec![
        ResourceContents::text(doc.text, doc.uri).with_mime_type("text/markdown"),
    ]))
}

fn arg(name: &str, description: &str, required: bool) -> PromptArgument {
    PromptArgument::new(name)
        .with_description(description)
        .with_required(required)
}

pub fn prompts() -> Vec<Prompt> {
    vec![
        Prompt::new(
            "portfolio_review",
            Some(
                "Review the whole portfolio: value, currency and sector concentration, open risks, reconciliation",
            ),
            Some(vec![arg(
                "currency",
                "Report currency, e.g. USD or MYR (optional)",
                false,
            )]),
        ),
        Prompt::new(
            "period_performance",
            Some("Report realized P&L and trading activity over a period given as absolute dates"),
            Some(vec![
                arg("start", "First day, YYYY-MM-DD", true),
                arg("end", "Last day, YYYY-MM-DD", true),
                arg("currency", "Report currency (optional)", false),
            ]),
        ),
        Prompt::new(
            "pre_trade_checklist",
            Some("Check an intended trade against the current book before acting on it"),
            Some(vec![
                arg(
                    "symbol",
                    "The instrument, bare (AAPL, 1155) or qualified (BURSA:1155)",
                    true,
                ),
                arg("side", "buy or sell (optional)", false),
            ]),
        ),
    ]
}

fn string_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn required<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ErrorData> {
    string_arg(args, name)
        .ok_or_else(|| ErrorData::invalid_params(format!("missing prompt argument `{name}`"), None))
}

/// The currency clause of a prompt, checked as a tool would check it.
fn currency_clause(args: &Map<String, Value>) -> Result<String, ErrorData> {
    match string_arg(args, "currency") {
        None => Ok(String::new()),
        Some(c) => tradedesk_core::Currency::new_checked(c)
            .map(|c| format!(" Report every figure in {c} (pass \"currency\": \"{c}\")."))
            .map_err(|e| ErrorData::invalid_params(format!("currency: {}", e.message), None)),
    }
}

pub fn prompt(name: &str, args: &Map<String, Value>) -> Result<GetPromptResult, ErrorData> {
    let text = match name {
        "portfolio_review" => format!(
            "Review my portfolio.{} Call get_portfolio_summary for value, cash and the split by currency and \
             broker; get_exposure by sector and by currency for concentration (say what is Unclassified); \
             get_positions for the largest positions and unrealized P&L; get_server_health for reconciliation \
             differences and stale FX rates. Repeat every note the tools return. Do not suggest trades.",
            currency_clause(args)?
        ),
        "period_performance" => {
            let (start, end) = (required(args, "start")?, required(args, "end")?);
            for (field, value) in [("start", start), ("end", end)] {
                parse_date(field, value).map_err(|e| {
                    ErrorData::invalid_params(format!("{} ({})", e.message, e.hint), None)
                })?;
            }
            format!(
                "Report my trading performance from {start} to {end} inclusive.{} Call get_realized_pnl with \
                 start {start} and end {end}, grouped by month and then by symbol; name the biggest gain and the \
                 biggest loss; call get_trade_history for the same dates to count trades. State whether any P&L \
                 is gross of fees, and say plainly if nothing was closed in the period.",
                currency_clause(args)?
            )
        }
        "pre_trade_checklist" => {
            let symbol = required(args, "symbol")?;
            let well_formed = symbol.len() <= 40
                && symbol
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".:-_/".contains(c));
            if !well_formed {
                return Err(ErrorData::invalid_params(
                    format!(
                        "symbol {} is not a symbol such as AAPL, 1155 or BURSA:1155",
                        excerpt(symbol)
                    ),
                    None,
                ));
            }
            let side = match string_arg(args, "side") {
                None => "trade",
                Some("buy") => "buy",
                Some("sell") => "sell",
                Some(other) => {
                    return Err(ErrorData::invalid_params(
                        format!("side {} must be buy or sell", excerpt(other)),
                        None,
                    ));
                }
            };
            format!(
                "Before I {side} {symbol}: call get_positions with symbol {symbol} for what I hold, get_exposure by \
                 sector and by currency to show the concentration this adds to, get_realized_pnl for this year \
                 with symbol {symbol} for my record in it, get_quote for the current price, and get_server_health \
                 to be sure the data is current. Summarize the risks. If trading is switched on, preview_order the \
                 trade (it changes nothing) and show me every check; place it only after I say so."
            )
        }
        other => {
            return Err(ErrorData::invalid_params(
                format!("unknown prompt {}; prompts/list names them", excerpt(other)),
                None,
            ));
        }
    };
    Ok(GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        text,
    )]))
}
