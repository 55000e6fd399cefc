//! tradedesk's MCP server: one handler over the tool registry, served on stdio (a client
//! spawns the binary) and on Streamable HTTP (hardened: see [`http`]).

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod content;
pub mod handler;
pub mod http;
pub mod telemetry;

pub use handler::TradedeskServer;

/// Where the stdio transport writes: the process's stdout, claimed for JSON-RPC alone.
#[cfg(unix)]
pub type StdioOut = tokio::fs::File;
#[cfg(not(unix))]
pub type StdioOut = tokio::io::Stdout;

/// Claims stdout for the JSON-RPC stream: the transport gets a duplicate of the
/// process's stdout, and file descriptor 1 itself is pointed at stderr, so whatever else
/// prints (a broker library, a C library) lands on stderr instead of corrupting the
/// stream.
///
/// # Errors
/// The descriptors cannot be duplicated.
#[cfg(unix)]
pub fn claim_stdout() -> std::io::Result<StdioOut> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let mut held = stdout.lock();
    held.flush()?;
    let own = held.as_fd().try_clone_to_owned()?;
    rustix::stdio::dup2_stdout(std::io::stderr().as_fd())?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(own)))
}

/// Claims stdout for the JSON-RPC stream (elsewhere than unix: stdout as it is).
///
/// # Errors
/// None here; the signature matches the unix one.
#[cfg(not(unix))]
pub fn claim_stdout() -> std::io::Result<StdioOut> {
    Ok(tokio::io::stdout())
}

/// Serves one client on stdin and `out` (from [`claim_stdout`]) until it disconnects.
///
/// Every line is checked before the MCP session reads it: a line that is not JSON is
/// answered `-32700` and one that is JSON but not a JSON-RPC message `-32600` (with
/// `"id": null` when no id can be read), as HTTP answers the same bodies, so a client
/// never waits for an answer that cannot come.
///
/// # Errors
/// The transport's error when the session cannot start.
pub async fn serve_stdio(
    server: TradedeskServer,
    out: StdioOut,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use rmcp::ServiceExt;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    const PIPE: usize = 1 << 16;
    let (mut to_session, session_in) = tokio::io::duplex(PIPE);
    let (session_out, from_session) = tokio::io::duplex(PIPE);
    let (refusals, mut refused) = tokio::sync::mpsc::unbounded_channel::<String>();
    let reader = tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).split(b'\n');
        while let Ok(Some(line)) = lines.next_segment().await {
            let text = line.trim_ascii();
            if text.is_empty() {
                continue;
            }
            match check_line(text) {
                None => {
                    if to_session.write_all(text).await.is_err()
                        || to_session.write_all(b"\n").await.is_err()
                    {
                        break;
                    }
                }
                Some(answer) => {
                    let _ = refusals.send(answer);
                }
            }
        }
        // Dropping the pipe ends the session, as the end of stdin does.
    });
    let writer = tokio::spawn(async move {
        let mut out = out;
        let mut answers = BufReader::new(from_session).split(b'\n');
        let (mut open, mut refusing) = (true, true);
        loop {
            let line = tokio::select! {
                answer = answers.next_segment(), if open => match answer {
                    Ok(Some(line)) => line,
                    _ => { open = false; continue; }
                },
                refusal = refused.recv(), if refusing => match refusal {
                    Some(text) => text.into_bytes(),
                    None => { refusing = false; continue; }
                },
                else => break,
            };
            if out.write_all(&line).await.is_err()
                || out.write_all(b"\n").await.is_err()
                || out.flush().await.is_err()
            {
                break;
            }
        }
    });
    let running = server.serve((session_in, session_out)).await?;
    running.waiting().await?;
    reader.abort();
    let _ = writer.await;
    Ok(())
}

/// `None` for a line the session may read; otherwise the JSON-RPC error answering it.
fn check_line(line: &[u8]) -> Option<String> {
    use serde_json::{Value, json};
    let answer = |id: Value, code: i64, message: String| {
        Some(
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
                .to_string(),
        )
    };
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return answer(
                Value::Null,
                -32700,
                format!("parse error: the line is not valid JSON ({e})"),
            );
        }
    };
    let (id, code, message) = refusal(&value)?;
    answer(id, code, message)
}

/// Why a JSON value is refused before the session reads it, with the id and the JSON-RPC
/// code to answer with: not a JSON-RPC message (`-32600`), or a `tools/call` whose
/// `arguments` is there but not an object (`-32602`). The session cannot tell
/// `"arguments": null` from arguments left out, so null is refused here, where it can.
pub(crate) fn refusal(value: &serde_json::Value) -> Option<(serde_json::Value, i64, String)> {
    if let Some((id, message)) = not_a_message(value) {
        return Some((id, -32600, message));
    }
    let (id, message) = arguments_not_object(value)?;
    Some((id, -32602, message))
}

/// A `tools/call` request whose `params.arguments` is present but not a JSON object (MCP:
/// `arguments` is an optional object), with the id to answer with.
fn arguments_not_object(value: &serde_json::Value) -> Option<(serde_json::Value, String)> {
    use serde_json::Value;
    let object = value.as_object()?;
    if object.get("method").and_then(Value::as_str) != Some("tools/call") {
        return None;
    }
    let arguments = object.get("params")?.get("arguments")?;
    let got = match arguments {
        Value::Object(_) => return None,
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    };
    let id = object.get("id").cloned().unwrap_or(Value::Null);
    Some((
        id,
        format!(
            "invalid params: tools/call arguments must be a JSON object, not {got}; send {{}} or leave arguments out for a tool that takes none"
        ),
    ))
}

/// Why a JSON value is not a JSON-RPC 2.0 message (with the id to answer with: the
/// message's own when it is a string or a number, else null), or `None` when it is one.
/// A non-empty array (a batch) is left to the session.
pub(crate) fn not_a_message(value: &serde_json::Value) -> Option<(serde_json::Value, String)> {
    use serde_json::Value;
    let invalid = |id: Value, why: &str| Some((id, format!("invalid request: {why}")));
    let object = match value {
        Value::Object(o) => o,
        Value::Array(items) if !items.is_empty() => return None,
        Value::Array(_) => return invalid(Value::Null, "an empty batch"),
        _ => return invalid(Value::Null, "a JSON-RPC message is an object"),
    };
    let id = match object.get("id") {
        None => None,
        Some(v @ (Value::String(_) | Value::Number(_))) => Some(v.clone()),
        Some(_) => return invalid(Value::Null, "id must be a string or a number"),
    };
    let id_or_null = || id.clone().unwrap_or(Value::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid(id_or_null(), "jsonrpc must be \"2.0\"");
    }
    match object.get("method") {
        Some(Value::String(_)) => match object.get("params") {
            None | Some(Value::Object(_)) => None,
            Some(_) => invalid(id_or_null(), "params must be an object"),
        },
        Some(_) => invalid(id_or_null(), "method must be a string"),
        None if id.is_some() && (object.contains_key("result") || object.contains_key("error")) => {
            None
        }
        None => invalid(id_or_null(), "a request needs a method"),
    }
}
