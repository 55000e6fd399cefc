//! docs/tools.md is generated from the registry; this fails when it is stale.
//! Refresh with `cargo run -- tools --markdown > docs/tools.md` (or UPDATE_GOLDEN=1).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tradedesk_tools::config::{State, docs_context};
use tradedesk_tools::docs::tools_markdown;

#[test]
fn docs_tools_md_matches_the_registry() {
    let state_dir = tempfile::tempdir().unwrap();
    let state = State::open(state_dir.path()).unwrap();
    let ctx = docs_context(env!("CARGO_PKG_VERSION"), &state).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let generated = rt.block_on(tools_markdown(&ctx));
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/tools.md");
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "docs/tools.md is stale: run `cargo run -- tools --markdown > docs/tools.md` (or UPDATE_GOLDEN=1 cargo test --test docs)"
    );
}
