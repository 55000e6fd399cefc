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
/// to stdout: the transport writes to a duplicate of the process's stdout, and file
/// descriptor 1 itself is pointed at stderr, so whatever else prints (a broker library, a
/// C library) lands on stderr instead of corrupting the stream.
///
/// # Errors
/// The transport's error when the session cannot start.
pub async fn serve_stdio(
    server: TradedeskServer,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    use rmcp::ServiceExt;
    #[cfg(unix)]
    let running = server.serve((tokio::io::stdin(), claim_stdout()?)).await?;
    #[cfg(not(unix))]
    let running = server.serve(rmcp::transport::stdio()).await?;
    if std::env::var("TRADEDESK_FAILPOINT").as_deref() == Ok("stray_print") {
        // Tests: what a library printing to stdout would do mid-session.
        #[allow(clippy::print_stdout)]
        {
            println!("a stray line a library printed");
        }
    }
    running.waiting().await?;
    Ok(())
}

/// The process's stdout, for the JSON-RPC stream alone; fd 1 becomes a copy of stderr.
#[cfg(unix)]
fn claim_stdout() -> std::io::Result<tokio::fs::File> {
    use std::io::Write;
    use std::os::fd::AsFd;
    let stdout = std::io::stdout();
    let mut held = stdout.lock();
    held.flush()?;
    let own = held.as_fd().try_clone_to_owned()?;
    rustix::stdio::dup2_stdout(std::io::stderr().as_fd())?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(own)))
}
