//! One type per tool: its name, description, annotations, typed arguments and result
//! (the schemas clients see are derived from them), how it runs, its summary line and its
//! documentation example. The registry lists every tool once (`crate::registry::ALL`);
//! the MCP handler, the CLI and the docs generator read that list, so a tool that is
//! listed always has its code (docs/README.md, "A new tool, or a change to one").

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tradedesk_core::ledger::Ledger;
use tradedesk_core::{Book, Error, Result};

use crate::args;
use crate::context::{DownList, ToolContext};
use crate::schema::{input_schema, output_schema};
use crate::toolset::Toolset;
use crate::trading::orders::Confirmer;
use crate::unavailable::{self, Down};

/// How a tool reads its data, which decides what the call path does around it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Brokers, files or nothing: the tool runs as it is.
    Live,
    /// The served book and its FIFO ledger: read (with the accounts down left out)
    /// before the arguments are parsed; the tool's answer is partial when accounts are
    /// left out, an unknown account or symbol while accounts are down says so in its
    /// hint, and a panic is an `internal` error result.
    Ledger,
}

/// What clients are told about a tool, besides its schemas.
#[derive(Debug, Clone, Copy)]
pub struct Meta {
    pub name: &'static str,
    pub title: &'static str,
    pub description: &'static str,
    /// `None` for the one tool always served (get_server_health).
    pub toolset: Option<Toolset>,
    pub read_only: bool,
    /// Listed and served only while trading is enabled.
    pub needs_trading: bool,
    /// Answers text that outsiders wrote (the open world's, quoted).
    pub open_world: bool,
    pub reads: Reads,
    /// The result may leave down accounts out: its schema carries
    /// `unavailable_accounts`.
    pub partial: bool,
    /// The arguments flatten a shared part: unknown names are refused by the schema's
    /// property list (`args::parse_flat`).
    pub flat_args: bool,
}

impl Meta {
    /// A read tool that asks brokers, files or nothing.
    pub const fn live(
        name: &'static str,
        title: &'static str,
        toolset: Toolset,
        description: &'static str,
    ) -> Self {
        Self {
            name,
            title,
            description,
            toolset: Some(toolset),
            read_only: true,
            needs_trading: false,
            open_world: false,
            reads: Reads::Live,
            partial: false,
            flat_args: false,
        }
    }

    /// The one tool served whatever the toolsets (get_server_health).
    pub const fn served_always(
        name: &'static str,
        title: &'static str,
        description: &'static str,
    ) -> Self {
        Self {
            toolset: None,
            ..Self::live(name, title, Toolset::Portfolio, description)
        }
    }

    /// A portfolio tool over the served book and its ledger ([`Reads::Ledger`]).
    pub const fn book(name: &'static str, title: &'static str, description: &'static str) -> Self {
        Self {
            reads: Reads::Ledger,
            partial: true,
            ..Self::live(name, title, Toolset::Portfolio, description)
        }
    }

    /// Served only while trading is enabled.
    pub const fn trading(self) -> Self {
        Self {
            needs_trading: true,
            ..self
        }
    }

    /// A write tool: not read-only, and served only while trading is enabled.
    pub const fn writes(self) -> Self {
        Self {
            read_only: false,
            ..self.trading()
        }
    }

    /// Its result may leave down accounts out ([`Meta::partial`]).
    pub const fn partial(self) -> Self {
        Self {
            partial: true,
            ..self
        }
    }

    pub const fn open_world(self) -> Self {
        Self {
            open_world: true,
            ..self
        }
    }

    pub const fn flat_args(self) -> Self {
        Self {
            flat_args: true,
            ..self
        }
    }
}

/// A tool. Implement it on a unit struct in the tool's module and add that struct to
/// the registry's list.
pub trait Tool: Send + Sync + 'static {
    /// The arguments; the input schema is derived from this type.
    type Args: DeserializeOwned + JsonSchema + Send;
    /// The result; the output schema is derived from this type.
    type Output: Serialize + JsonSchema + Send;

    const META: Meta;

    /// Runs the tool on checked, parsed arguments.
    fn run(
        call: &mut Call<'_>,
        args: Self::Args,
    ) -> impl Future<Output = Result<Self::Output>> + Send;

    /// The short text beside the structured result, for the model.
    fn summary(out: &Self::Output) -> String;

    /// The arguments of its example in docs/tools.md, run on the demo.
    fn example() -> Value {
        json!({})
    }
}

/// One call in progress: the context, the caller's hooks, and what the call has read.
pub struct Call<'a> {
    pub ctx: &'a ToolContext,
    /// Asks the human to confirm an order, where the transport can.
    pub confirmer: Option<&'a dyn Confirmer>,
    /// Reports how far a long computation has come (a share from 0 to 1).
    pub progress: Option<&'a (dyn Fn(f64) + Send + Sync)>,
    /// The call's `account` and `broker` arguments, which decide which down accounts an
    /// answer leaves out.
    account: Option<String>,
    broker: Option<String>,
    ledger: Option<(Arc<Book>, Arc<Ledger>)>,
    down: Option<DownList>,
    left_out: Vec<Down>,
    images: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Call<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("account", &self.account)
            .field("broker", &self.broker)
            .field("book_read", &self.ledger.is_some())
            .field("left_out", &self.left_out.len())
            .finish_non_exhaustive()
    }
}

impl<'a> Call<'a> {
    pub(crate) fn new(
        ctx: &'a ToolContext,
        confirmer: Option<&'a dyn Confirmer>,
        progress: Option<&'a (dyn Fn(f64) + Send + Sync)>,
        arguments: &Value,
    ) -> Self {
        let filter = |key: &str| {
            arguments
                .get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        Self {
            ctx,
            confirmer,
            progress,
            account: filter("account"),
            broker: filter("broker"),
            ledger: None,
            down: None,
            left_out: Vec::new(),
            images: Vec::new(),
        }
    }

    /// The served book and its ledger, read once per call. The accounts down that the
    /// call's `account` / `broker` would have covered are left out of the answer (and
    /// named in it).
    ///
    /// # Errors
    /// The book's or the replay's error, or the down account's own error when the call
    /// needs only down accounts.
    pub async fn ledger(&mut self) -> Result<(Arc<Book>, Arc<Ledger>)> {
        if let Some((book, ledger)) = &self.ledger {
            return Ok((Arc::clone(book), Arc::clone(ledger)));
        }
        let (served, down) = self.ctx.served_ledger().await;
        let (book, ledger) = served?;
        let left_out = unavailable::relevant(
            &down,
            &book,
            self.account.as_deref(),
            self.broker.as_deref(),
        )?;
        self.left_out = left_out.into_iter().cloned().collect();
        self.down = Some(down);
        self.ledger = Some((Arc::clone(&book), Arc::clone(&ledger)));
        Ok((book, ledger))
    }

    /// The served book (no ledger), leaving out the down accounts that `account` would
    /// have covered.
    ///
    /// # Errors
    /// As [`Call::ledger`].
    pub async fn book_for(&mut self, account: Option<&str>) -> Result<Arc<Book>> {
        let (served, down) = self.ctx.served().await;
        let book = served?;
        let left_out = unavailable::relevant(&down, &book, account, None)?;
        self.left_out = left_out.into_iter().cloned().collect();
        Ok(book)
    }

    /// Names accounts the answer leaves out.
    pub fn leave_out(&mut self, down: impl IntoIterator<Item = Down>) {
        self.left_out.extend(down);
    }

    /// Adds a PNG image beside the result (shown only with an ok answer).
    pub fn attach_images(&mut self, png: impl IntoIterator<Item = Vec<u8>>) {
        self.images.extend(png);
    }
}

/// A tool with its types erased, as the registry lists it.
pub trait ErasedTool: Send + Sync {
    fn meta(&self) -> Meta;
    /// The input and output schemas as derived, before they are compacted for clients.
    fn schemas(&self) -> (Value, Value);
    fn example(&self) -> Value;
    /// Parses the arguments and runs the tool (the registry has checked the toolset,
    /// trading and the argument types).
    fn dispatch<'a>(
        &'a self,
        call: &'a mut Call<'_>,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>>;
}

impl std::fmt::Debug for dyn ErasedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.meta().name)
    }
}

impl<T: Tool> ErasedTool for T {
    fn meta(&self) -> Meta {
        T::META
    }

    fn schemas(&self) -> (Value, Value) {
        let output = output_schema::<T::Output>();
        let output = if T::META.partial {
            unavailable::with_field(output)
        } else {
            output
        };
        (input_schema::<T::Args>(), output)
    }

    fn example(&self) -> Value {
        T::example()
    }

    fn dispatch<'a>(
        &'a self,
        call: &'a mut Call<'_>,
        arguments: Value,
    ) -> Pin<Box<dyn Future<Output = ToolOutput> + Send + 'a>> {
        Box::pin(async move {
            let ledger = T::META.reads == Reads::Ledger;
            if ledger && let Err(e) = call.ledger().await {
                return error_output(&e);
            }
            let parsed = if T::META.flat_args {
                args::parse_flat::<T::Args>(arguments)
            } else {
                args::parse::<T::Args>(arguments)
            };
            let result = match parsed {
                Err(e) => Err(e),
                // Tools over the book are pure functions of it; should one ever panic,
                // the caller gets an `internal` error result and the server stays up.
                Ok(a) if ledger => {
                    CatchUnwind(Box::pin(T::run(call, a)))
                        .await
                        .unwrap_or_else(|_| {
                            Err(Error::internal(format!(
                                "{} failed unexpectedly; the server is still running",
                                T::META.name
                            )))
                        })
                }
                Ok(a) => T::run(call, a).await,
            };
            let mut out = output(result, T::summary);
            if !out.is_error {
                out.images = std::mem::take(&mut call.images);
            }
            let left_out: Vec<&Down> = call.left_out.iter().collect();
            let out = partial(out, &left_out);
            match (&call.down, ledger) {
                (Some(down), true) => unknown_while_down(out, down),
                _ => out,
            }
        })
    }
}

/// Polls a future, turning a panic into an `Err` (as `catch_unwind` does for a closure).
struct CatchUnwind<F: Future>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = std::thread::Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Err(panic) => Poll::Ready(Err(panic)),
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

/// Wraps a result: `{"status": "ok", ...}` or `{"status": "error", "error": {...}}`.
pub(crate) fn output<T: Serialize>(
    result: Result<T>,
    summary: impl FnOnce(&T) -> String,
) -> ToolOutput {
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

pub(crate) fn error_output(e: &Error) -> ToolOutput {
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
pub(crate) fn notes_suffix(notes: &[String]) -> String {
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

/// An analytic figure in a summary: four decimals, or n/a.
pub(crate) fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.4}"))
}

/// Marks an ok answer over the accounts that answered as partial, naming those left out.
pub(crate) fn partial(mut out: ToolOutput, left_out: &[&Down]) -> ToolOutput {
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
