//! The `tradedesk` binary: the CLI over the tool registry, and the MCP server (`serve`).
// The CLI's job is to print results: stdout carries the result, stderr the diagnostics.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use serde_json::Value;
use tradedesk_brokers::load_book;
use tradedesk_server::http::{HttpOptions, serve_http, shutdown_signal};
use tradedesk_server::telemetry::Telemetry;
use tradedesk_server::{TradedeskServer, claim_stdout, serve_stdio};
use tradedesk_tools::config::{
    BookLoad, Config, State, book_context_with, config_context_with, default_context, docs_context,
};
use tradedesk_tools::{CallError, ToolContext, Toolsets, call, tools};

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
    /// Where state lives (the sim ledger, idempotency keys, tokens, the audit log,
    /// telemetry); default $XDG_STATE_HOME/tradedesk or ~/.local/state/tradedesk.
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// List and serve only these toolsets, comma-separated: portfolio, market, research,
    /// options, perps, trading, marketdata (get_server_health is always served). Beats [tools]
    /// enabled in the config; default: all.
    #[arg(long, global = true, value_name = "LIST", value_parser = parse_toolsets)]
    tools: Option<Toolsets>,
    /// List each tool with its output schema (true) or without (false, the default:
    /// the list is then less than half its size, and results are the same). Beats
    /// [tools] output_schemas in the config.
    #[arg(long, global = true, value_name = "BOOL")]
    output_schemas: Option<bool>,
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
        /// Print docs/tools.md (descriptions, arguments, result fields, examples on the demo).
        #[arg(long, conflicts_with = "json")]
        markdown: bool,
    },
    /// Run the MCP server: stdio by default (for Claude Desktop and other clients that
    /// spawn it), or Streamable HTTP on /mcp with --http.
    Serve {
        /// Serve HTTP on this address instead of stdio (default 127.0.0.1:8765).
        #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:8765")]
        http: Option<String>,
        /// Write no telemetry.
        #[arg(long)]
        no_telemetry: bool,
    },
    /// Validate a book file and print what it holds (exit 1 with path and rule if broken).
    Validate {
        /// The tradedesk-book/1 file.
        path: PathBuf,
    },
    /// The audit log of every order attempt and outcome.
    Audit {
        #[command(subcommand)]
        action: AuditAction,
    },
    /// Check each configured account and print what to fix (exit 0 only when all answer).
    Doctor,
    /// Turn a broker's statement into a book file.
    Import {
        #[command(subcommand)]
        source: ImportSource,
    },
}

#[derive(Debug, Subcommand)]
enum ImportSource {
    /// An IBKR Activity Flex statement (XML, with the Trades section): its full history.
    Flex {
        /// The Flex statement.
        file: PathBuf,
        /// Where to write the book (refused if it exists, unless --force).
        #[arg(long, value_name = "BOOK.json")]
        out: PathBuf,
        /// The statement's time zone (the Flex Query's setting): America/New_York
        /// (default), UTC, an offset such as -04:00 or +08:00, or an IANA zone without
        /// daylight saving such as Asia/Kuala_Lumpur.
        // A leading `-` is an offset here, not a flag (`--time-zone -04:00`).
        #[arg(
            long,
            default_value = "America/New_York",
            value_name = "ZONE",
            allow_hyphen_values = true
        )]
        time_zone: String,
        /// The share of the parent's cost basis a spin-off, rights issue or dividend in
        /// kind gives the new instrument, where the statement does not show it:
        /// SYMBOL=FRACTION (the new instrument's symbol), repeatable.
        #[arg(long = "cost-fraction", value_name = "SYMBOL=FRACTION")]
        cost_fractions: Vec<String>,
        /// Replace an existing output file.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Debug, Subcommand)]
enum AuditAction {
    /// Walk the hash chain: exit 0 when intact, 1 naming the first entry that breaks it.
    Verify,
}

fn parse_toolsets(list: &str) -> Result<Toolsets, String> {
    Toolsets::from_list(list, "--tools").map_err(|e| format!("{}; {}", e.message, e.hint))
}

/// The toolsets served: `--tools`, else the config's `[tools] enabled`, else all.
fn toolsets(cli: &Cli, config: Option<&Config>) -> Result<Toolsets, String> {
    match (cli.tools, config) {
        (Some(t), _) => Ok(t),
        (None, Some(c)) => c
            .toolsets()
            .map_err(|e| format!("{}\nhint: {}", e.message, e.hint)),
        (None, None) => Ok(Toolsets::ALL),
    }
}

fn load_config(cli: &Cli) -> Result<Option<Config>, String> {
    match (&cli.book, &cli.config) {
        (None, Some(path)) => Config::load(path)
            .map(Some)
            .map_err(|e| format!("{}\nhint: {}", e.message, e.hint)),
        _ => Ok(None),
    }
}

/// The context of a command that answers once: book files are read before it is made,
/// so a broken one is refused before any tool runs.
fn context(cli: &Cli, config: Option<&Config>) -> Result<ToolContext, String> {
    context_with(cli, config, BookLoad::Now)
}

fn context_with(cli: &Cli, config: Option<&Config>, load: BookLoad) -> Result<ToolContext, String> {
    let open_state = || {
        let dir = state_dir(cli.state_dir.as_ref()).ok_or_else(|| {
            tradedesk_core::Error::invalid_argument(
                "no state directory: HOME and XDG_STATE_HOME are unset",
                "pass --state-dir DIR",
            )
        })?;
        State::open(&dir)
    };
    let result = match (&cli.book, config) {
        (Some(path), _) => book_context_with(VERSION, path, load),
        (None, Some(config)) => {
            open_state().and_then(|state| config_context_with(VERSION, config, &state, load))
        }
        (None, None) => open_state().and_then(|state| default_context(VERSION, &state)),
    };
    let ctx = result.map_err(|e| format!("{}\nhint: {}", e.message, e.hint))?;
    let output_schemas = cli
        .output_schemas
        .or_else(|| config.and_then(Config::output_schemas))
        .unwrap_or(false);
    Ok(ctx
        .with_toolsets(toolsets(cli, config)?)
        .with_output_schemas(output_schemas))
}

fn state_dir(explicit: Option<&PathBuf>) -> Option<PathBuf> {
    explicit
        .cloned()
        .or_else(tradedesk_store::default_state_dir)
}

fn audit_verify(cli: &Cli) -> ExitCode {
    let Some(dir) = state_dir(cli.state_dir.as_ref()) else {
        eprintln!("error: no state directory\nhint: pass --state-dir DIR");
        return ExitCode::from(2);
    };
    if !dir.join(tradedesk_store::DB_FILE).exists() {
        eprintln!(
            "error: no audit log in {}\nhint: pass the --state-dir the server uses",
            dir.display()
        );
        return ExitCode::from(1);
    }
    let verdict = tradedesk_store::Store::open(&dir)
        .and_then(|store| store.read(tradedesk_store::audit::verify));
    match verdict {
        Ok(tradedesk_store::audit::Verdict::Intact { entries }) => {
            println!("audit chain intact: {entries} entries in {}", dir.display());
            ExitCode::SUCCESS
        }
        Ok(tradedesk_store::audit::Verdict::Broken { seq, reason }) => {
            println!("audit chain BROKEN at entry {seq}: {reason}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

/// The zone `--time-zone` names: what the Flex reader knows (America/New_York with its
/// daylight saving, UTC, a fixed offset), or an IANA zone that keeps one offset.
fn flex_time_zone(text: &str) -> Result<tradedesk_brokers::flex::FlexTimeZone, (String, String)> {
    use tradedesk_brokers::SteadyOffset;
    use tradedesk_brokers::flex::FlexTimeZone;
    if let Ok(zone) = FlexTimeZone::parse(text) {
        return Ok(zone);
    }
    let name = text.trim();
    let usual = "give America/New_York, UTC, an offset such as -04:00 or +08:00, or an IANA zone without daylight saving such as Asia/Kuala_Lumpur";
    match tradedesk_brokers::steady_offset(name) {
        SteadyOffset::Fixed(offset) => Ok(FlexTimeZone::Fixed(offset)),
        SteadyOffset::Changes => Err((
            format!(
                "--time-zone: {name} changes its offset (daylight saving), and the Flex reader applies daylight saving only for America/New_York"
            ),
            "set the Flex Query's time zone to America/New_York or UTC and export it again, or give the one offset every time in the statement uses, such as +01:00".to_owned(),
        )),
        SteadyOffset::Unknown if name.starts_with("--") => Err((
            format!("--time-zone needs a zone, and '{name}' is a flag"),
            usual.to_owned(),
        )),
        SteadyOffset::Unknown => Err((
            format!("--time-zone: '{name}' is neither a time zone nor an offset (±HH:MM)"),
            usual.to_owned(),
        )),
    }
}

fn import_flex(
    file: &Path,
    out: &Path,
    time_zone: &str,
    cost_fractions: &[String],
    force: bool,
) -> ExitCode {
    use tradedesk_brokers::flex::{FlexOptions, MAX_FLEX_BYTES, flex_to_book};
    let fail = |message: String, hint: &str| {
        eprintln!("error: {message}\nhint: {hint}");
        ExitCode::from(1)
    };
    let zone = match flex_time_zone(time_zone) {
        Ok(z) => z,
        Err((message, hint)) => return fail(message, &hint),
    };
    if out.exists() && !force {
        return fail(
            format!("{} exists", out.display()),
            "pass --force to replace it, or choose another --out",
        );
    }
    match std::fs::metadata(file) {
        Ok(m) if m.len() > MAX_FLEX_BYTES as u64 => {
            return fail(
                format!(
                    "{} is larger than {} MiB",
                    file.display(),
                    MAX_FLEX_BYTES >> 20
                ),
                "export a shorter period",
            );
        }
        Err(e) => return fail(format!("{}: {e}", file.display()), "check the path"),
        Ok(_) => {}
    }
    let xml = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => {
            return fail(
                format!("{}: {e}", file.display()),
                "the statement must be UTF-8 XML",
            );
        }
    };
    let mut options = FlexOptions {
        time_zone: zone,
        ..FlexOptions::default()
    };
    for given in cost_fractions {
        let Some((symbol, text)) = given.split_once('=') else {
            return fail(
                format!("--cost-fraction {given}: not SYMBOL=FRACTION"),
                "give the new instrument's symbol and its share of the parent's cost, such as --cost-fraction SOLV=0.25",
            );
        };
        match tradedesk_brokers::flex::parse_cost_fraction(symbol.trim(), text) {
            Ok(f) => {
                options.cost_fractions.insert(symbol.trim().to_owned(), f);
            }
            Err(message) => {
                return fail(format!("--{message}"), "such as --cost-fraction SOLV=0.25");
            }
        }
    }
    let import = match flex_to_book(&xml, &options) {
        Ok(i) => i,
        Err(e) => {
            return fail(
                format!("{}: {e}", file.display()),
                "fix or re-export the statement",
            );
        }
    };
    let text = match serde_json::to_string_pretty(&import.rows) {
        Ok(t) => t,
        Err(e) => return fail(e.to_string(), "this is a bug in tradedesk"),
    };
    // The book must pass the same strict validation as any book before it is written.
    let checked = match tradedesk_brokers::parse_book(&out.display().to_string(), &text) {
        Ok(book) => book,
        Err(e) => {
            return fail(
                format!("the converted book is invalid: {e}"),
                "report this statement's shape as a bug",
            );
        }
    };
    // Written whole or not at all: a temporary file beside the target, then a rename.
    let tmp = out.with_extension("json.tmp");
    if let Err(e) = std::fs::write(&tmp, text.as_bytes()).and_then(|()| std::fs::rename(&tmp, out))
    {
        let _ = std::fs::remove_file(&tmp);
        return fail(
            format!("{}: {e}", out.display()),
            "check that the folder is writable",
        );
    }
    println!(
        "{}: {} fill(s) in {} account(s), as of {} ({} row(s) skipped)",
        out.display(),
        import.fills,
        checked.accounts.len(),
        checked.as_of,
        import.skipped
    );
    for note in &import.notes {
        println!("note: {note}");
    }
    ExitCode::SUCCESS
}

fn doctor(cli: &Cli) -> ExitCode {
    let ctx = match load_config(cli).and_then(|config| context(cli, config.as_ref())) {
        Ok(ctx) => ctx,
        Err(message) => {
            println!("config: FAILED\n  {message}");
            return ExitCode::from(1);
        }
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        eprintln!("error: cannot start the runtime");
        return ExitCode::from(1);
    };
    let rows = runtime.block_on(ctx.health());
    let mut all_ok = true;
    for row in &rows {
        let ok = row.status == tradedesk_brokers::HealthStatus::Ok;
        all_ok &= ok;
        println!(
            "{} ({}, {}): {} - {}",
            row.account,
            row.broker,
            row.mode.as_str(),
            if ok { "ok" } else { "FAILED" },
            row.detail
        );
        if let Some(hint) = &row.hint {
            println!("  fix: {hint}");
        }
    }
    if let Some(trading) = &ctx.trading {
        let s = &trading.settings;
        println!(
            "trading: {}{}",
            if s.enabled { "enabled" } else { "off" },
            if trading.kill_switch_on() {
                " (KILL SWITCH ON)"
            } else {
                ""
            }
        );
        if s.enabled && !s.confirm_live {
            println!("  warning: confirm_live = false: live orders need no confirmation");
        }
    }
    if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn serve(cli: &Cli, http: Option<&str>, no_telemetry: bool) -> Result<(), String> {
    let state = cli.state_dir.as_ref();
    let config = load_config(cli)?;
    // Book files are read in the background: `initialize` and `tools/list` answer at
    // once whatever their size, and the first call that needs a book waits for it.
    let mut ctx = context_with(cli, config.as_ref(), BookLoad::Background)?;
    if http.is_some() {
        // Over HTTP the caller may be remote: CSV files only from the configured folders.
        ctx.data_dirs = Some(ctx.configured_data_dirs.clone());
    }
    if let Some(trading) = &ctx.trading
        && trading.settings.enabled
    {
        eprintln!(
            "tradedesk: trading is ENABLED (max {} per order, {} per day){}",
            trading.settings.max_order_notional,
            trading.settings.max_daily_notional,
            if trading.settings.confirm_live {
                ""
            } else {
                "; warning: confirm_live = false"
            }
        );
    }
    let ctx = Arc::new(ctx);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the runtime: {e}"))?;
    runtime.block_on(async move {
        // Nothing waits for a broker before the transport serves: a gateway that is down
        // or silent must not keep `initialize` from answering. The accounts are read once
        // in the background (the first call finds them read), and orders an earlier run
        // left unresolved are looked up the same way.
        let background = Arc::clone(&ctx);
        tokio::spawn(async move {
            background.warm_up().await;
            // A book file read in the background that breaks the format: said at start,
            // as it would have been had it been read first, and in every answer that
            // needs it.
            if let Some(e) = background.refused_book() {
                eprintln!("error: {}\nhint: {}", e.message, e.hint);
            }
            match tradedesk_tools::trading::orders::recover(&background).await {
                Ok(0) => {}
                Ok(n) => {
                    eprintln!("tradedesk: resolved {n} order(s) left unresolved by an earlier run");
                }
                Err(e) => eprintln!("warning: could not resolve earlier orders: {}", e.message),
            }
        });
        let base_currency = ctx.known_base_currency();
        let telemetry_config = config
            .as_ref()
            .and_then(|c| c.telemetry.clone())
            .unwrap_or_default();
        let telemetry = if no_telemetry || telemetry_config.enabled == Some(false) {
            None
        } else {
            let path = telemetry_config
                .path
                .clone()
                .or_else(|| state_dir(state).map(|d| d.join("telemetry.jsonl")));
            path.and_then(|p| match Telemetry::open(&p) {
                Ok(t) => Some(Arc::new(t)),
                Err(e) => {
                    eprintln!("warning: telemetry off: cannot open {}: {e}", p.display());
                    None
                }
            })
        };
        let server = TradedeskServer::new(
            Arc::clone(&ctx),
            telemetry,
            base_currency.as_ref().map(|c| c.code()),
        );
        match http {
            None => {
                let out = claim_stdout().map_err(|e| format!("cannot claim stdout: {e}"))?;
                if std::env::var("TRADEDESK_FAILPOINT").as_deref() == Ok("stray_print") {
                    // Tests: what a library printing to stdout would do mid-session.
                    let _ = writeln!(std::io::stdout(), "a stray line a library printed");
                }
                serve_stdio(server, out)
                    .await
                    .map_err(|e| format!("stdio session failed: {e}"))
            }
            Some(addr) => {
                let addr: SocketAddr = addr.parse().map_err(|_| {
                    format!("--http: '{addr}' is not an address such as 127.0.0.1:8765")
                })?;
                let mut options = HttpOptions::new(addr);
                options.token = std::env::var("TRADEDESK_HTTP_TOKEN")
                    .ok()
                    .filter(|t| !t.is_empty());
                if let Some(h) = config.as_ref().and_then(|c| c.http.clone()) {
                    if let Some(v) = h.allowed_hosts {
                        options.allowed_hosts = v;
                    }
                    if let Some(v) = h.allowed_origins {
                        options.allowed_origins = v;
                    }
                    if let Some(v) = h.cors_origins {
                        options.cors_origins = v;
                    }
                    if let Some(v) = h.rate_limit_per_minute {
                        options.rate_limit_per_minute = v;
                    }
                }
                // The same lists from the environment (comma-separated), for `--book` and
                // for deployments that configure by environment; they override the config.
                let list = |name: &str| {
                    std::env::var(name).ok().map(|v| {
                        v.split(',')
                            .map(str::trim)
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned)
                            .collect::<Vec<_>>()
                    })
                };
                if let Some(v) = list("TRADEDESK_ALLOWED_HOSTS") {
                    options.allowed_hosts = v;
                }
                if let Some(v) = list("TRADEDESK_ALLOWED_ORIGINS") {
                    options.allowed_origins = v;
                }
                if let Some(v) = list("TRADEDESK_CORS_ORIGINS") {
                    options.cors_origins = v;
                }
                if let Ok(v) = std::env::var("TRADEDESK_RATE_LIMIT") {
                    options.rate_limit_per_minute = v.parse().map_err(|_| {
                        format!(
                            "TRADEDESK_RATE_LIMIT: '{v}' is not a number of requests per minute"
                        )
                    })?;
                }
                let shutdown = shutdown_signal();
                serve_http(
                    server,
                    options,
                    |bound| eprintln!("tradedesk {VERSION} listening on http://{bound}/mcp"),
                    shutdown,
                )
                .await
            }
        }
    })
}

fn print_json(value: &Value) -> ExitCode {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{text}").is_err() {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}

/// Libraries' log records (the IBKR client's among them), on stderr: never stdout, which
/// the stdio transport owns. `TRADEDESK_LOG` sets the level (error, warn, info, debug;
/// default warn).
#[derive(Debug)]
struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            eprintln!(
                "tradedesk: {} {}: {}",
                record.level(),
                record.target(),
                record.args()
            );
        }
    }

    fn flush(&self) {}
}

static STDERR_LOG: StderrLog = StderrLog;

fn init_log() {
    let level = match std::env::var("TRADEDESK_LOG").ok().as_deref() {
        Some("off") => log::LevelFilter::Off,
        Some("error") => log::LevelFilter::Error,
        Some("info") => log::LevelFilter::Info,
        Some("debug") => log::LevelFilter::Debug,
        Some("trace") => log::LevelFilter::Trace,
        _ => log::LevelFilter::Warn,
    };
    if log::set_logger(&STDERR_LOG).is_ok() {
        log::set_max_level(level);
    }
}

fn main() -> ExitCode {
    init_log();
    let cli = Cli::parse();
    match &cli.command {
        Command::Tools { markdown: true, .. } => {
            // The examples trade on a throwaway paper account, never the user's.
            let scratch =
                std::env::temp_dir().join(format!("tradedesk-docs-{}", std::process::id()));
            let ctx = match State::open(&scratch).and_then(|state| docs_context(VERSION, &state)) {
                Ok(ctx) => ctx,
                Err(e) => {
                    eprintln!("error: {}", e.message);
                    return ExitCode::from(1);
                }
            };
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => {
                    let text = rt.block_on(tradedesk_tools::docs::tools_markdown(&ctx));
                    let _ = std::fs::remove_dir_all(&scratch);
                    print!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("error: cannot start the runtime: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Tools { json, .. } => {
            let served = match load_config(&cli).and_then(|c| toolsets(&cli, c.as_ref())) {
                Ok(t) => t,
                Err(message) => {
                    eprintln!("error: {message}");
                    return ExitCode::from(1);
                }
            };
            // Written line by line, stopping quietly when the reader goes away
            // (`tradedesk tools | head -1`): println! would panic on the closed pipe.
            let mut out = std::io::stdout().lock();
            let listed = tools()
                .iter()
                .filter(|t| t.toolset.is_none_or(|set| served.contains(set)));
            for t in listed {
                let toolset = t.toolset.map_or("always served", |set| set.name());
                let written = if *json {
                    let spec = serde_json::json!({
                        "name": t.name, "title": t.title, "description": t.description,
                        "toolset": t.toolset.map(|set| set.name()),
                        "annotations": {
                            "readOnlyHint": t.annotations().read_only,
                            "destructiveHint": t.annotations().destructive,
                            "idempotentHint": t.annotations().idempotent,
                            "openWorldHint": t.annotations().open_world,
                        },
                        "inputSchema": t.input_schema, "outputSchema": t.output_schema,
                    });
                    writeln!(out, "{spec}")
                } else if t.annotations().read_only {
                    writeln!(out, "{} [{toolset}]\n    {}\n", t.name, t.description)
                } else {
                    writeln!(
                        out,
                        "{} [{toolset}] (an order tool: served only while trading is on, [trading] enabled = true)\n    {}\n",
                        t.name, t.description
                    )
                };
                if written.is_err() {
                    break;
                }
            }
            ExitCode::SUCCESS
        }
        Command::Audit {
            action: AuditAction::Verify,
        } => audit_verify(&cli),
        Command::Doctor => doctor(&cli),
        Command::Import {
            source:
                ImportSource::Flex {
                    file,
                    out,
                    time_zone,
                    cost_fractions,
                    force,
                },
        } => import_flex(file, out, time_zone, cost_fractions, *force),
        Command::Serve { http, no_telemetry } => {
            match serve(&cli, http.as_deref(), *no_telemetry) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("error: {message}");
                    ExitCode::from(1)
                }
            }
        }
        Command::Validate { path } => match load_book(path) {
            // The rows are within the bounds; the totals the engine sums from them (lots,
            // cash, corporate actions) are checked by replaying them once
            // (docs/methodology/book-format.md, "Bounds").
            Ok(book) if let Err(e) = tradedesk_core::ledger::replay(&book, |_, _| {}) => {
                eprintln!(
                    "{}: book refused\n  {}\n  hint: {}",
                    path.display(),
                    e.message,
                    e.hint
                );
                ExitCode::from(1)
            }
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
            let ctx = match load_config(&cli).and_then(|config| context(&cli, config.as_ref())) {
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
                    if let Some(down) = output
                        .structured
                        .get(tradedesk_tools::unavailable::FIELD)
                        .and_then(Value::as_array)
                    {
                        let ids: Vec<&str> = down
                            .iter()
                            .filter_map(|d| d.get("account").and_then(Value::as_str))
                            .collect();
                        eprintln!(
                            "warning: partial answer: {} did not answer and {} left out (see unavailable_accounts)",
                            ids.join(", "),
                            if ids.len() == 1 { "is" } else { "are" }
                        );
                    }
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
