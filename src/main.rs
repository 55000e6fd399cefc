//! The `tradedesk` binary: the CLI over the tool registry (and, later, the MCP server).
// The CLI's job is to print results: stdout carries the result, stderr the diagnostics.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use serde_json::Value;
use tradedesk_brokers::load_book;
use tradedesk_tools::config::{Config, book_context, config_context, demo_context};
use tradedesk_tools::{CallError, ToolContext, call, tools};

const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Debug, Parser)]
#[command(
    name = "tradedesk",
    version,
    about = "Brokerage accounts for LLMs: one currency, every figure traced to its fills."
)]
struct Cli {
    /// Serve the accounts of one tradedesk-book/1 file instead of the embedded demo.
    #[arg(long, global = true, value_name = "PATH", conflicts_with = "config")]
    book: Option<PathBuf>,
    /// Read tradedesk.toml (base currency, accounts).
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Call a tool and print its structured result as JSON (exit 0 ok, 1 error, 2 usage).
    Call {
        /// Tool name, e.g. get_portfolio_summary (see `tradedesk tools`).
        tool: String,
        /// Arguments as a JSON object.
        #[arg(default_value = "{}")]
        arguments: String,
    },
    /// List the tools and their descriptions.
    Tools {
        /// Print the full specs (schemas, annotations) as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate a book file and print what it holds (exit 1 with path and rule if broken).
    Validate {
        /// The tradedesk-book/1 file.
        path: PathBuf,
    },
}

fn context(cli: &Cli) -> Result<ToolContext, String> {
    let result = match (&cli.book, &cli.config) {
        (Some(path), _) => book_context(VERSION, path),
        (None, Some(path)) => Config::load(path).and_then(|c| config_context(VERSION, &c)),
        (None, None) => demo_context(VERSION),
    };
    result.map_err(|e| format!("{}\nhint: {}", e.message, e.hint))
}

fn print_json(value: &Value) -> ExitCode {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").is_err() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match &cli.command {
        Command::Tools { json } => {
            for t in tools() {
                if *json {
                    let spec = serde_json::json!({
                        "name": t.name, "title": t.title, "description": t.description,
                        "annotations": {"readOnlyHint": t.read_only},
                        "inputSchema": t.input_schema, "outputSchema": t.output_schema,
                    });
                    println!("{spec}");
                } else {
                    println!("{}\n    {}\n", t.name, t.description);
                }
            }
            ExitCode::SUCCESS
        }
        Command::Validate { path } => match load_book(path) {
            Ok(book) => {
                println!(
                    "{}: ok ({} accounts, {} instruments, {} fills, {} cash entries, as of {})",
                    path.display(),
                    book.accounts.len(),
                    book.instruments.len(),
                    book.fills.len(),
                    book.cash.len(),
                    book.as_of
                );
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        },
        Command::Call { tool, arguments } => {
            let arguments: Value = match serde_json::from_str(arguments) {
                Ok(v) => v,
                Err(e) => {
                    eprintln!(
                        "error: arguments are not valid JSON: {e}\nhint: pass a JSON object, e.g. '{{\"currency\": \"MYR\"}}'"
                    );
                    return ExitCode::from(2);
                }
            };
            let ctx = match context(&cli) {
                Ok(ctx) => ctx,
                Err(message) => {
                    eprintln!("error: {message}");
                    return ExitCode::from(1);
                }
            };
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("error: cannot start the runtime: {e}");
                    return ExitCode::from(1);
                }
            };
            match runtime.block_on(call(&ctx, tool, arguments)) {
                Ok(output) => {
                    let code = print_json(&output.structured);
                    if output.is_error {
                        ExitCode::from(1)
                    } else {
                        code
                    }
                }
                Err(CallError::UnknownTool(name)) => {
                    let names: Vec<&str> = tools().iter().map(|t| t.name).collect();
                    eprintln!(
                        "error: unknown tool '{name}'\nhint: tools are {}",
                        names.join(", ")
                    );
                    ExitCode::from(2)
                }
                Err(CallError::ArgumentsNotObject) => {
                    eprintln!(
                        "error: arguments must be a JSON object\nhint: e.g. '{{\"currency\": \"MYR\"}}'"
                    );
                    ExitCode::from(2)
                }
            }
        }
    }
}
