//! Running the `tradedesk` binary as a user does: `tradedesk ... call TOOL ARGS` with a
//! state directory of the tests' own (never the user's), its exit code and its stdout.
//! Included by path (`#[path = "common/cli.rs"]`) from the tests that run the binary.

#![allow(dead_code, unreachable_pub)]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

/// The state directory every CLI test shares: never the user's own.
pub fn state_home() -> &'static Path {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

pub fn tradedesk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tradedesk"))
        .args(args)
        .env("XDG_STATE_HOME", state_home())
        .output()
        .unwrap()
}

/// `tradedesk SOURCE... call TOOL ARGS`, which must succeed; its result.
pub fn call_ok(source: &[&str], tool: &str, args: &str) -> Value {
    let mut argv = source.to_vec();
    argv.extend(["call", tool, args]);
    let out = tradedesk(&argv);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{argv:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout_json(&out)
}

pub fn stdout_json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}
