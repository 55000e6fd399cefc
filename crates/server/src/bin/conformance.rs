//! `tradedesk-conformance --http ADDR`: the conformance suite's fixture server on
//! tradedesk's HTTP transport. Prints `listening on http://ADDR/mcp` on stderr.
#![allow(clippy::print_stderr)]

use std::net::SocketAddr;
use std::process::ExitCode;

use tradedesk_server::conformance::ConformanceServer;
use tradedesk_server::http::{HttpOptions, serve_http_with, shutdown_signal};

fn main() -> ExitCode {
    let addr = std::env::args()
        .skip_while(|a| a != "--http")
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".to_owned());
    let Ok(addr) = addr.parse::<SocketAddr>() else {
        eprintln!("error: --http: '{addr}' is not an address such as 127.0.0.1:8766");
        return ExitCode::from(2);
    };
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("error: cannot start the runtime");
        return ExitCode::from(1);
    };
    let mut options = HttpOptions::new(addr);
    options.rate_limit_per_minute = 0;
    let result = runtime.block_on(async {
        let shutdown = shutdown_signal();
        serve_http_with(
            ConformanceServer,
            options,
            true,
            |bound| eprintln!("conformance fixtures listening on http://{bound}/mcp"),
            shutdown,
        )
        .await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}
