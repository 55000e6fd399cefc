//! tradedesk's MCP server: one handler over the tool registry, served on stdio (a client
//! spawns the binary) and on Streamable HTTP (hardened: see [`http`]).

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod content;
pub mod handler;
pub mod http;
pub mod telemetry;

pub use handler::TradedeskServer;

/// Serves one client on stdin/stdout until it disconnects. Nothing but JSON-RPC is written
/// to stdout.
///
/// # Errors
/// The transport's error when the session cannot start.
pub async fn serve_stdio(
    server: TradedeskServer,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use rmcp::ServiceExt;
    let running = server.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
