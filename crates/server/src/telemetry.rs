//! One JSON line per tool call, to a file (never stdout): how a wrong answer is traced to
//! the tool chosen or to the tool's output.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tradedesk_tools::ToolOutput;

/// Argument names whose values never reach the log.
const SECRET_HINTS: [&str; 6] = [
    "token",
    "secret",
    "password",
    "key",
    "authorization",
    "signature",
];
const SUMMARY_CHARS: usize = 300;
/// Argument strings and names are cut to this length in the log.
const ARGUMENT_CHARS: usize = 200;
/// A record's arguments beyond this size are replaced by a note, so one call can never
/// write much: every line stays a few KiB.
const ARGUMENTS_BYTES: usize = 2048;

#[derive(Debug)]
pub struct Telemetry {
    path: PathBuf,
    file: Mutex<File>,
}

#[derive(Debug)]
pub struct CallRecord<'a> {
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub latency: Duration,
    pub output: &'a ToolOutput,
    pub protocol_version: Option<String>,
    pub client: Option<String>,
}

/// A copy of `value` with every secret-looking field replaced and long strings cut.
pub fn redact(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let lower = k.to_ascii_lowercase();
                    let secret = SECRET_HINTS.iter().any(|h| lower.contains(h));
                    (
                        k.clone(),
                        if secret {
                            json!("[redacted]")
                        } else {
                            redact(v)
                        },
                    )
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        Value::String(text) if text.chars().count() > ARGUMENT_CHARS => {
            let mut short: String = text.chars().take(ARGUMENT_CHARS).collect();
            short.push('…');
            Value::String(short)
        }
        other => other.clone(),
    }
}

fn bounded(arguments: Value) -> Value {
    let size = arguments.to_string().len();
    if size <= ARGUMENTS_BYTES {
        return arguments;
    }
    json!({"truncated": true, "bytes": size})
}

impl Telemetry {
    /// Opens (creating folders and file) the log for appending.
    ///
    /// # Errors
    /// The I/O error, for the caller to report with the path.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            // Arguments name accounts and symbols: readable by the owner only.
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options.open(path)?;
        Ok(Self {
            path: path.to_owned(),
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one line; a failure to write never fails the call it describes.
    pub fn record(&self, r: &CallRecord<'_>) {
        let structured = &r.output.structured;
        let summary: String = r.output.summary.chars().take(SUMMARY_CHARS).collect();
        let line = json!({
            "time": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "tool": r.tool,
            "arguments": bounded(redact(r.arguments)),
            "latency_us": u64::try_from(r.latency.as_micros()).unwrap_or(u64::MAX),
            "status": structured.get("status").cloned().unwrap_or(Value::Null),
            "error_code": structured.pointer("/error/code").cloned().unwrap_or(Value::Null),
            "summary": summary,
            "protocol_version": r.protocol_version,
            "client": r.client.as_deref().map(|c| c.chars().take(ARGUMENT_CHARS).collect::<String>()),
        });
        let mut file = self
            .file
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = writeln!(file, "{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_at_any_depth() {
        let v = json!({"account": "U1", "api_key": "abc", "nested": {"Token": "x", "keep": 1}, "list": [{"password": "p"}]});
        let r = redact(&v);
        assert_eq!(r["account"], "U1");
        assert_eq!(r["api_key"], "[redacted]");
        assert_eq!(r["nested"]["Token"], "[redacted]");
        assert_eq!(r["nested"]["keep"], 1);
        assert_eq!(r["list"][0]["password"], "[redacted]");
        let huge = json!({"x".repeat(5000): 1, "y": "z".repeat(10_000)});
        let r = bounded(redact(&huge));
        assert!(r.to_string().len() <= ARGUMENTS_BYTES, "{r}");
    }
}
