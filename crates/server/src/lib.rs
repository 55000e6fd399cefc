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
/// # Errors
/// The transport's error when the session cannot start.
pub async fn serve_stdio(
    server: TradedeskServer,
    out: StdioOut,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use rmcp::ServiceExt;
    let running = server.serve((tokio::io::stdin(), out)).await?;
    running.waiting().await?;
    Ok(())
}
