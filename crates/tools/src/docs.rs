//! `docs/tools.md`, generated from the registry's list of tools so it can never drift from what clients
//! are served: each tool's description, arguments, result fields, annotations and an
//! example on the embedded demo.

use std::fmt::Write;

use serde_json::{Value, json};

use crate::context::ToolContext;
use crate::registry::{call, tools};
use crate::toolset::Toolset;

fn type_of(schema: &Value) -> String {
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" \\| ");
    }
    match schema.get("type") {
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .filter(|t| *t != "null")
            .collect::<Vec<_>>()
            .join(", "),
        _ => schema
            .get("anyOf")
            .or_else(|| schema.get("oneOf"))
            .and_then(Value::as_array)
            .map(|alts| {
                alts.iter()
                    .map(
                        |alt| match alt.get("properties").and_then(Value::as_object) {
                            // An object alternative by its keys: `{csv}`, `{symbol, account, ...}`.
                            Some(props) => format!(
                                "{{{}}}",
                                props
                                    .keys()
                                    .map(String::as_str)
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            None => type_of(alt),
                        },
                    )
                    .filter(|t| !t.is_empty() && t != "null")
                    .collect::<Vec<_>>()
                    .join(" \\| ")
            })
            .unwrap_or_default(),
    }
}

fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    let reference = schema
        .get("$ref")
        .or_else(|| {
            schema
                .get("anyOf")
                .and_then(|a| a.get(0))
                .and_then(|s| s.get("$ref"))
        })
        .and_then(Value::as_str);
    match reference.and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => root.pointer(&format!("/$defs/{name}")).unwrap_or(schema),
        None => schema,
    }
}

/// Lists an object schema's properties, and the fields of arrays and objects inside it.
fn fields(out: &mut String, root: &Value, schema: &Value, depth: usize) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, field) in props {
        if depth == 0 && (name == "status" || name == "error") {
            continue;
        }
        let field = resolve(root, field);
        let description = field
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .replace('\n', " ");
        let _ = writeln!(
            out,
            "{}- `{name}` ({}){}",
            "  ".repeat(depth),
            type_of(field),
            if description.is_empty() {
                String::new()
            } else {
                format!(": {description}")
            }
        );
        let inner = field
            .get("items")
            .map_or(field, |items| resolve(root, items));
        if depth < 2 && inner.get("properties").is_some() {
            fields(out, root, inner, depth + 1);
        }
    }
}

/// How the book tools answer while an account's source is down.
const UNAVAILABLE: &str = "\n## Accounts that do not answer\n\n\
The server answers `initialize` and `tools/list` before any broker is asked. The tools that read the \
accounts (`get_accounts`, `get_positions`, `get_trade_history`, `get_realized_pnl`, \
`get_portfolio_summary`, `get_exposure`, `get_performance`, `analyze_trades`, `get_server_health`) answer \
over the accounts that answer. An account whose source does not answer (a gateway down, refusing, or \
silent past its timeout) is left out of every figure and total, and the result then carries \
`unavailable_accounts`, one entry per account left out:\n\n\
- `account`, `broker`, `mode`: which account.\n\
- `code`, `message`, `hint`: the error it answers (`broker_unavailable`, `broker_timeout`, ...) and what to do.\n\
- `since`: when it stopped answering (RFC 3339, UTC).\n\n\
The first entry of `notes` then begins `partial answer:` and names them, so a partial answer never reads as \
a complete one. The field is absent when every account answered. A call whose `account` names a down \
account, or whose `broker` matches only down accounts, answers that account's error instead; when no \
account answers, every one of these tools answers the first one's error. A down account is retried in the \
background and served again once it answers, without a restart; `get_server_health` lists its state.\n";

/// The toolsets and the tools in each.
fn toolsets(out: &mut String) {
    out.push_str(
        "\n## Toolsets\n\nA client that needs only some tools can be served only those, so its model \
         reads a shorter tool list (docs/benchmarks.md has each toolset's size): \
         `[tools] enabled = [\"portfolio\", \"research\"]` in tradedesk.toml, or \
         `--tools portfolio,research` on the command line (the flag beats the config). Default: all. \
         A tool outside them is not listed, and a call to it answers `tool_not_enabled` naming \
         its toolset; an unknown name is a config error naming the valid ones. \
         `get_server_health` belongs to none and is always served.\n\n\
         Tools are listed without output schemas by default: every result is the same with or \
         without them (`structuredContent`, and the same JSON in the text block), Claude Code \
         and VS Code give the model `structuredContent` either way, and the list is less than \
         half its size without them. `[tools] output_schemas = true` or `--output-schemas true` \
         lists each tool's output schema, for a client that checks `structuredContent` against \
         it (the official SDKs do): the same fields, types, enums, bounds and required lists as \
         the result fields below, without their descriptions. A client of a protocol before \
         2025-06-18, which has no output schemas, never gets them.\n\n\
         | toolset | tools | for |\n| --- | --- | --- |\n",
    );
    for set in Toolset::ALL {
        let names: Vec<String> = tools()
            .iter()
            .filter(|t| t.toolset == Some(set))
            .map(|t| format!("`{}`", t.name))
            .collect();
        let _ = writeln!(
            out,
            "| `{set}` | {} | {} |",
            names.join(", "),
            set.summary()
        );
    }
}

/// The rules every tool's arguments follow.
const ARGUMENTS: &str = "\n## Arguments\n\n\
A call's `arguments` is a JSON object: `{}` for a tool that takes none, or left out, which is the \
same. `\"arguments\": null` or any other value that is not an object is the JSON-RPC error `-32602` \
(invalid params), and nothing runs. Each tool's input schema is the contract, checked before the \
tool reads anything: a value of a type its schema does not allow is the error `invalid_argument` \
naming the argument's path, the type wanted and the value sent, e.g. \
`quantity: expected a number or null, got the string \"1_0\"`. So a number is a JSON number, never \
a string (`\"10\"`, `\"1_0\"` and `\"1e0\"` are refused; the number `1e0` is 1); a string is never a \
number; null is accepted only where the schema allows it (an optional argument can always be left \
out instead); an integer is an integer literal. A decimal arrives with the digits it is written with \
up to 15 significant digits (a JSON number is read as the shortest digits of its nearest double, \
never through float arithmetic). An unknown or missing argument is \
`invalid_argument` too, with the allowed names in the hint; values are then checked against each \
tool's own rules (ranges, dates, symbols), each error naming the argument and the rule.\n";

/// The MetaTrader connector specification's three requests as tool calls (the demo has
/// no MetaTrader account; tests/metatrader.rs runs them on a hedging account).
const METATRADER: &str = "\n## MetaTrader: tickets, margin and the three requests\n\n\
On a MetaTrader account `get_accounts` gives the terminal's `broker_equity`, `free_margin`, \
`margin_used`, `margin_level`, `leverage` and `margin_mode`; on a hedging account each ticket is \
its own position, listed under its symbol's row in `get_positions` (`tickets`: ticket, side, lots, \
open price and time, SL, TP, swap, commission, profit, magic, comment). The write tools take \
`ticket`; orders take `magic`. The guards refuse an order whose margin is above the terminal's free \
margin (`free_margin`) and lots off the symbol's configured step, minimum or maximum \
(`lot_step`, `min_quantity`, `max_quantity`).\n\n\
1. \"Check equity and buy 0.1 lots of XAUUSD\": `get_accounts '{}'`, then \
`place_order '{\"account\": \"mt4-demo\", \"symbol\": \"XAUUSD\", \"side\": \"buy\", \"quantity\": 0.1}'`.\n\
2. \"Set SL/TP on the gold position\": `get_positions '{\"symbol\": \"XAUUSD\"}'` for its tickets, then \
`modify_position '{\"account\": \"mt4-demo\", \"symbol\": \"XAUUSD\", \"ticket\": \"910\", \"stop_loss\": 1990, \"take_profit\": 2030}'` \
(a symbol held both ways needs the ticket: `ticket_required`).\n\
3. \"Close all profitable gold positions\": `get_positions '{\"symbol\": \"XAUUSD\"}'`, then for each \
ticket whose `profit` is above zero `close_position '{\"account\": \"mt4-demo\", \"symbol\": \"XAUUSD\", \"ticket\": \"910\"}'`.\n";

/// The whole document. Examples run on the context given (the demo, in the docs test).
pub async fn tools_markdown(ctx: &ToolContext) -> String {
    let mut out = String::from(
        "# Tools\n\nGenerated from the tool registry by `tradedesk tools --markdown`; a test fails when this \
         file is stale. Every result carries `\"status\": \"ok\"` or `\"status\": \"error\"` with `error.code`, \
         `error.message` and `error.hint`. Examples run on the embedded demo book, with trading switched on \
         and the sim's clock at 2026-11-30T15:00:00Z. The write tools are listed only while `[trading] enabled = true`.\n",
    );
    toolsets(&mut out);
    out.push_str(ARGUMENTS);
    out.push_str(UNAVAILABLE);
    out.push_str(METATRADER);
    for spec in tools() {
        let _ = write!(
            out,
            "\n## `{}`: {}\n\n{}\n\n",
            spec.name, spec.title, spec.description
        );
        let _ = writeln!(
            out,
            "Toolset: {}.\n",
            spec.toolset.map_or_else(
                || "none (always served)".to_owned(),
                |set| format!("`{set}`")
            )
        );
        let a = spec.annotations();
        let _ = writeln!(
            out,
            "Annotations: `readOnlyHint: {}`, `destructiveHint: {}`, `idempotentHint: {}`, `openWorldHint: {}`.\n",
            a.read_only, a.destructive, a.idempotent, a.open_world
        );
        let required: Vec<&str> = spec
            .input_schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let props = spec
            .input_schema
            .get("properties")
            .and_then(Value::as_object);
        match props.filter(|p| !p.is_empty()) {
            None => out.push_str("Arguments: none.\n"),
            Some(props) => {
                out.push_str(
                    "| argument | type | required | meaning |\n| --- | --- | --- | --- |\n",
                );
                for (name, schema) in props {
                    let schema = resolve(&spec.input_schema, schema);
                    let description = schema
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default();
                    let _ = writeln!(
                        out,
                        "| `{name}` | {} | {} | {} |",
                        type_of(schema),
                        if required.contains(&name.as_str()) {
                            "yes"
                        } else {
                            "no"
                        },
                        description.replace('\n', " ")
                    );
                }
            }
        }
        out.push_str("\nResult fields:\n\n");
        fields(&mut out, &spec.output_schema, &spec.output_schema, 0);
        let args = spec.example();
        let _ = write!(
            out,
            "\nExample: `tradedesk call {} '{}'`\n\n",
            spec.name, args
        );
        if let Ok(mut result) = call(ctx, spec.name, args).await {
            // A token is random: the example shows its shape, not its value.
            if let Some(token) = result.structured.get_mut("confirmation_token")
                && token.is_string()
            {
                *token = json!("v1.<id>.<expires>.<mac>");
            }
            let text = serde_json::to_string_pretty(&result.structured).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let shown = lines
                .iter()
                .take(40)
                .copied()
                .collect::<Vec<_>>()
                .join("\n");
            let _ = write!(
                out,
                "```json\n{shown}\n{}```\n",
                if lines.len() > 40 { "…\n" } else { "" }
            );
        }
    }
    out
}
