//! Streamable HTTP on `/mcp`, behind guards checked in this order: Host allow-list (403),
//! Origin allow-list (403), bearer token (401, with a per-IP lockout after repeated
//! failures that never blocks a valid token), per-client rate limit (429 with
//! `Retry-After` and JSON-RPC -32029), body cap (413), strict JSON (400, -32700). A plain
//! `GET /mcp` describes the server. The MCP exchange itself is rmcp's, for both protocol
//! eras: 2026-07-28 stateless requests and legacy 2025-11-25 .. 2024-11-05 clients.
//!
//! Connections are held to the bounds in docs/http.md: a first request head within
//! [`HEAD_TIMEOUT`] of accept, keep-alive connections closed after [`IDLE_TIMEOUT`] with
//! no request, and at most [`MAX_CONNECTIONS`] open, idle ones giving way to newcomers
//! (see `connections`).

mod connections;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::IntoResponse;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::handler::TradedeskServer;

/// Request bodies above this are refused with 413.
pub const BODY_LIMIT: usize = 64 * 1024;
/// Failed authentications from one client within the failure window before it is locked out.
const LOCKOUT_FAILURES: u32 = 10;
const LOCKOUT: Duration = Duration::from_secs(300);
/// Failed authentications are counted over this window.
const FAILURE_WINDOW: Duration = Duration::from_secs(600);
/// A request body must arrive within this.
const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// A connection's first request head (line and headers) must be complete within this of
/// its accept.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(10);
/// A keep-alive connection with no request in flight for this long is closed; its next
/// request head must be complete by then.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Open connections at most. At the cap a newcomer takes the slot of the connection idle
/// longest; when every one has a request in flight, the newcomer is answered 503.
pub const MAX_CONNECTIONS: usize = 512;
/// After a shutdown signal, requests in flight get this long to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// Shortest bearer token accepted.
const MIN_TOKEN_CHARS: usize = 16;

#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Required when binding beyond loopback.
    pub token: Option<String>,
    /// Host names (without port) the server answers to.
    pub allowed_hosts: Vec<String>,
    /// Origins a browser page may call from: `scheme://host:port`, `:*` for any port.
    pub allowed_origins: Vec<String>,
    /// Origins granted CORS headers; empty = CORS off.
    pub cors_origins: Vec<String>,
    /// Requests per minute per client IP; 0 = unlimited.
    pub rate_limit_per_minute: u32,
    /// Open connections at most ([`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// From accept to a complete first request head ([`HEAD_TIMEOUT`]).
    pub head_timeout: Duration,
    /// A keep-alive connection with no request in flight ([`IDLE_TIMEOUT`]).
    pub idle_timeout: Duration,
}

impl HttpOptions {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            token: None,
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            allowed_origins: vec![
                "http://localhost:*".into(),
                "http://127.0.0.1:*".into(),
                "https://localhost:*".into(),
                "https://127.0.0.1:*".into(),
            ],
            cors_origins: Vec::new(),
            rate_limit_per_minute: 60,
            max_connections: MAX_CONNECTIONS,
            head_timeout: HEAD_TIMEOUT,
            idle_timeout: IDLE_TIMEOUT,
        }
    }

    /// Refuses an unauthenticated server reachable beyond this machine.
    ///
    /// # Errors
    /// A message saying what to set.
    pub fn check(&self) -> Result<(), String> {
        if !self.addr.ip().is_loopback() && self.token.as_deref().is_none_or(str::is_empty) {
            return Err(format!(
                "refusing to listen on {} without a token: anyone who can reach it could read the accounts. \
                 Set TRADEDESK_HTTP_TOKEN, or bind 127.0.0.1",
                self.addr
            ));
        }
        if self
            .token
            .as_deref()
            .is_some_and(|t| t.len() < MIN_TOKEN_CHARS)
        {
            return Err(format!(
                "TRADEDESK_HTTP_TOKEN is shorter than {MIN_TOKEN_CHARS} characters: use a long random one, e.g. `openssl rand -hex 32`"
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
struct Client {
    window_start: Option<Instant>,
    requests: u32,
    failures: u32,
    failures_start: Option<Instant>,
    locked_until: Option<Instant>,
}

#[derive(Debug)]
struct Guard {
    options: HttpOptions,
    clients: Mutex<HashMap<IpAddr, Client>>,
    description: Value,
}

/// A JSON-RPC error with `"id": null`, as every guard answers.
fn error_body(code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": code, "message": message}}).to_string()
}

fn json_rpc_error(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        error_body(code, message),
    )
        .into_response()
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, the port all digits: `[::1]evil` and
/// `localhost:notaport` are not hosts.
fn well_formed_authority(authority: &str) -> bool {
    let digits = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    match authority.strip_prefix('[') {
        Some(rest) => rest.split_once(']').is_some_and(|(_, after)| {
            after.is_empty() || after.strip_prefix(':').is_some_and(digits)
        }),
        None => authority
            .rsplit_once(':')
            .is_none_or(|(_, port)| digits(port)),
    }
}

/// The Host header, parsed as an authority, against the allow-list: an entry without a
/// port allows any port, an entry with one (`example.com:8080`) only that port.
fn host_allowed(headers: &HeaderMap, allowed: &[String]) -> bool {
    let Some(authority) = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
        .filter(|a| !a.as_str().contains('@') && well_formed_authority(a.as_str()))
    else {
        return false;
    };
    let bare = |h: &str| h.trim_start_matches('[').trim_end_matches(']').to_owned();
    let (host, port) = (bare(authority.host()), authority.port_u16());
    allowed.iter().any(|entry| {
        let (name, entry_port) = match entry.parse::<axum::http::uri::Authority>() {
            Ok(a) => (bare(a.host()), a.port_u16()),
            Err(_) => (bare(entry), None),
        };
        name.eq_ignore_ascii_case(&host) && entry_port.is_none_or(|p| Some(p) == port)
    })
}

fn origin_matches(origin: &str, pattern: &str) -> bool {
    match pattern.strip_suffix(":*") {
        Some(base) => {
            origin.eq_ignore_ascii_case(base)
                || origin
                    .get(..base.len())
                    .is_some_and(|head| head.eq_ignore_ascii_case(base))
                    && origin[base.len()..]
                        .strip_prefix(':')
                        .is_some_and(|port| port.bytes().all(|b| b.is_ascii_digit()))
        }
        None => origin.eq_ignore_ascii_case(pattern),
    }
}

fn token_of(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
}

/// Clients tracked before idle ones are dropped.
const MAX_CLIENTS: usize = 10_000;

/// Drops clients with nothing left to remember once the table is large, so it is bounded
/// by the clients active in the last minutes, not by every address ever seen.
fn sweep(clients: &mut HashMap<IpAddr, Client>, now: Instant) {
    if clients.len() < MAX_CLIENTS {
        return;
    }
    let recent =
        |t: Option<Instant>, window: Duration| t.is_some_and(|t| now.duration_since(t) < window);
    clients.retain(|_, c| {
        recent(c.window_start, Duration::from_secs(60))
            || recent(c.failures_start, FAILURE_WINDOW)
            || c.locked_until.is_some_and(|t| t > now)
    });
}

/// The key a client is counted under: its address, or its /64 for IPv6, where one host
/// commonly holds a whole prefix.
fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_none() => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        other => other,
    }
}

impl Guard {
    /// Compares digests in constant time, so neither the content nor the length of the
    /// token leaks through timing.
    fn valid_token(&self, headers: &HeaderMap) -> Option<bool> {
        let expected = self.options.token.as_deref()?;
        let given = token_of(headers).unwrap_or_default();
        let (a, b) = (
            Sha256::digest(given.as_bytes()),
            Sha256::digest(expected.as_bytes()),
        );
        Some(bool::from(a.as_slice().ct_eq(b.as_slice())))
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Client>> {
        // Nothing under the lock can panic; should it ever be poisoned, keep enforcing.
        self.clients
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts a request against the client's minute; `Some(wait)` when over the limit.
    fn rate_limited(&self, ip: IpAddr, now: Instant) -> Option<Duration> {
        let limit = self.options.rate_limit_per_minute;
        if limit == 0 {
            return None;
        }
        let mut clients = self.clients();
        sweep(&mut clients, now);
        let c = clients.entry(ip).or_default();
        let start = *c.window_start.get_or_insert(now);
        if now.duration_since(start) >= Duration::from_secs(60) {
            c.window_start = Some(now);
            c.requests = 0;
        }
        c.requests = c.requests.saturating_add(1);
        (c.requests > limit).then(|| {
            Duration::from_secs(60)
                .saturating_sub(now.duration_since(start))
                .max(Duration::from_secs(1))
        })
    }

    fn lockout_left(&self, ip: IpAddr, now: Instant) -> Duration {
        self.clients()
            .get(&ip)
            .and_then(|c| c.locked_until)
            .map_or(Duration::ZERO, |t| t.saturating_duration_since(now))
    }

    fn locked_out(&self, ip: IpAddr, now: Instant) -> bool {
        self.clients()
            .get(&ip)
            .and_then(|c| c.locked_until)
            .is_some_and(|t| t > now)
    }

    fn record_failure(&self, ip: IpAddr, now: Instant) {
        let mut clients = self.clients();
        sweep(&mut clients, now);
        let c = clients.entry(ip).or_default();
        let start = *c.failures_start.get_or_insert(now);
        if now.duration_since(start) >= FAILURE_WINDOW {
            c.failures_start = Some(now);
            c.failures = 0;
        }
        c.failures = c.failures.saturating_add(1);
        if c.failures >= LOCKOUT_FAILURES {
            c.locked_until = Some(now + LOCKOUT);
        }
    }

    fn cors_origin(&self, headers: &HeaderMap) -> Option<HeaderValue> {
        let origin = headers.get(header::ORIGIN)?;
        let text = origin.to_str().ok()?;
        self.options
            .cors_origins
            .iter()
            .any(|p| origin_matches(text, p))
            .then(|| origin.clone())
    }
}

async fn guard(
    State(guard): State<Arc<Guard>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: Request<Body>,
    next: Next,
) -> Response<Body> {
    let now = Instant::now();
    let headers = request.headers().clone();
    if !host_allowed(&headers, &guard.options.allowed_hosts) {
        return json_rpc_error(StatusCode::FORBIDDEN, -32600, "Host not allowed");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let text = origin.to_str().unwrap_or_default();
        let allowed = guard
            .options
            .allowed_origins
            .iter()
            .chain(&guard.options.cors_origins);
        if !allowed.clone().any(|p| origin_matches(text, p)) {
            return json_rpc_error(StatusCode::FORBIDDEN, -32600, "Origin not allowed");
        }
    }
    let cors = guard.cors_origin(&headers);
    if request.method() == Method::OPTIONS {
        return with_cors(StatusCode::NO_CONTENT.into_response(), cors);
    }
    let ip = client_key(peer.ip());
    match guard.valid_token(&headers) {
        Some(true) => {}
        Some(false) => {
            if guard.locked_out(ip, now) {
                let mut response = json_rpc_error(
                    StatusCode::TOO_MANY_REQUESTS,
                    -32029,
                    "too many failed authentications; try later",
                );
                let left = guard.lockout_left(ip, now).as_secs().max(1);
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(left));
                return with_cors(response, cors);
            }
            guard.record_failure(ip, now);
            let mut response = json_rpc_error(
                StatusCode::UNAUTHORIZED,
                -32001,
                "missing or wrong bearer token",
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return with_cors(response, cors);
        }
        None => {}
    }
    if let Some(wait) = guard.rate_limited(ip, now) {
        let mut response = json_rpc_error(
            StatusCode::TOO_MANY_REQUESTS,
            -32029,
            "rate limit exceeded; retry later",
        );
        if let Ok(v) = HeaderValue::from_str(&wait.as_secs().to_string()) {
            response.headers_mut().insert(header::RETRY_AFTER, v);
        }
        return with_cors(response, cors);
    }
    let response = match *request.method() {
        Method::GET if !accepts_sse(&headers) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            guard.description.to_string(),
        )
            .into_response(),
        Method::POST => match strict_body(request).await {
            Ok(request) => next.run(request).await,
            Err(response) => response,
        },
        _ => next.run(request).await,
    };
    with_cors(response, cors)
}

fn accepts_sse(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

fn with_cors(mut response: Response<Body>, origin: Option<HeaderValue>) -> Response<Body> {
    if let Some(origin) = origin {
        let h = response.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, DELETE, OPTIONS"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static(
                "content-type, accept, authorization, x-api-key, mcp-protocol-version, mcp-session-id, mcp-method, mcp-name",
            ),
        );
        h.insert(
            header::ACCESS_CONTROL_EXPOSE_HEADERS,
            HeaderValue::from_static("mcp-session-id"),
        );
    }
    response
}

/// Reads the body within the cap and refuses anything that is not strict JSON.
async fn strict_body(request: Request<Body>) -> Result<Request<Body>, Response<Body>> {
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > BODY_LIMIT) {
        return Err(json_rpc_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            -32600,
            "request body over 64 KiB",
        ));
    }
    let (parts, body) = request.into_parts();
    let bytes: Bytes = tokio::time::timeout(BODY_TIMEOUT, to_bytes(body, BODY_LIMIT))
        .await
        .map_err(|_| {
            json_rpc_error(
                StatusCode::REQUEST_TIMEOUT,
                -32600,
                "request body not received in time",
            )
        })?
        .map_err(|_| {
            json_rpc_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                -32600,
                "request body over 64 KiB",
            )
        })?;
    let Ok(value) = serde_json::from_slice::<Value>(&bytes) else {
        return Err(json_rpc_error(
            StatusCode::BAD_REQUEST,
            -32700,
            "parse error: the body is not strict JSON",
        ));
    };
    // JSON that is not a JSON-RPC message is a 400 with -32600, as stdio answers it; a
    // tools/call whose arguments are not an object, -32602 (a request's error: 200).
    if let Some((id, code, message)) = crate::refusal(&value) {
        let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
        let status = if code == -32600 {
            StatusCode::BAD_REQUEST
        } else {
            StatusCode::OK
        };
        return Err((
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response());
    }
    if let Some(response) = removed_method(&parts.headers, &value) {
        return Err(response);
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// Methods the 2026-07-28 revision removed: on that protocol they are unknown methods
/// (404, -32601) whatever headers came with them, never a header error.
const REMOVED_IN_2026: &[&str] = &["resources/subscribe", "resources/unsubscribe"];

fn removed_method(headers: &HeaderMap, value: &Value) -> Option<Response<Body>> {
    let method = value.get("method")?.as_str()?;
    if !REMOVED_IN_2026.contains(&method) {
        return None;
    }
    let by_header = headers
        .get("mcp-protocol-version")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "2026-07-28");
    let by_meta = value
        .pointer("/params/_meta/io.modelcontextprotocol~1protocolVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| v == "2026-07-28");
    if !(by_header || by_meta) {
        return None;
    }
    let body = json!({"jsonrpc": "2.0", "id": value.get("id").cloned().unwrap_or(Value::Null),
    "error": {"code": -32601, "message": format!(
        "unknown method '{method}': protocol 2026-07-28 has no resource subscriptions; read the resource again when you need it"
    )}});
    Some(
        (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
    )
}

/// `/mcp` behind the guards for any handler. `sessions` keeps legacy (pre-2026) clients
/// in sessions with SSE streams, which server-to-client requests (sampling, elicitation)
/// need; tradedesk itself answers every legacy request statelessly in plain JSON.
pub fn router_with<H: rmcp::ServerHandler + Clone>(
    server: H,
    options: HttpOptions,
    sessions: bool,
) -> Router {
    let description = json!({
        "name": "tradedesk",
        "version": env!("CARGO_PKG_VERSION"),
        "description": "MCP server for brokerage accounts: positions, trade history, FIFO realized P&L, exposure, reconciliation, in one currency",
        "endpoint": "/mcp",
        "transport": "streamable-http",
        "protocol_versions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"],
        "tools": tradedesk_tools::tools().iter().map(|t| t.name).collect::<Vec<_>>(),
        "auth": if options.token.is_some() { "bearer" } else { "none (loopback only)" },
    });
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(sessions)
        .with_json_response(!sessions)
        .with_allowed_hosts(options.allowed_hosts.clone())
        .with_allowed_origins(
            options
                .allowed_origins
                .iter()
                .chain(&options.cors_origins)
                .cloned(),
        )
        .with_max_request_body_bytes(BODY_LIMIT);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let guard = Arc::new(Guard {
        options,
        clients: Mutex::new(HashMap::new()),
        description,
    });
    Router::new()
        .nest_service("/mcp", service)
        .layer(middleware::from_fn_with_state(guard, self::guard))
}

/// Serves until `shutdown` resolves, then finishes the requests in flight.
///
/// # Errors
/// A refusal from [`HttpOptions::check`], or the bind error.
pub async fn serve_http(
    server: TradedeskServer,
    options: HttpOptions,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    serve_http_with(server, options, false, on_bound, shutdown).await
}

/// [`serve_http`] for any handler (see [`router_with`]).
///
/// # Errors
/// As [`serve_http`].
pub async fn serve_http_with<H: rmcp::ServerHandler + Clone>(
    server: H,
    options: HttpOptions,
    sessions: bool,
    on_bound: impl FnOnce(SocketAddr),
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    options.check()?;
    let addr = options.addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let bound = listener.local_addr().map_err(|e| e.to_string())?;
    on_bound(bound);
    let limits = connections::Limits {
        max_connections: options.max_connections,
        head_timeout: options.head_timeout,
        idle_timeout: options.idle_timeout,
    };
    let app = router_with(server, options, sessions);
    let slots = connections::Slots::new(limits.max_connections);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder =
        hyper_util::server::conn::auto::Builder::new(hyper_util::rt::TokioExecutor::new());
    // The serving task bounds every head, from accept or from the end of the last
    // response. hyper's own head timer is off: it starts only once the protocol sniffing
    // has seen a first byte, and it would cut keep-alive connections at the head timeout.
    builder
        .http1()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(None);
    let shutdown = shutdown;
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                // Out of file descriptors or similar: back off instead of spinning.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Some(slot) = slots.admit(Instant::now()) else {
            slots.refuse(stream);
            continue;
        };
        let app = app.clone();
        let connection = Arc::clone(&slot.connection);
        let service = tower::service_fn(move |request: Request<hyper::body::Incoming>| {
            let in_flight = connection.begin();
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            let response = tower::ServiceExt::oneshot(app.clone(), request);
            async move {
                let response = response.await?;
                Ok::<_, std::convert::Infallible>(
                    response.map(|body| connections::Tracked::body(body, in_flight)),
                )
            }
        });
        let serving = builder
            .serve_connection_with_upgrades(
                hyper_util::rt::TokioIo::new(stream),
                hyper_util::service::TowerToHyperService::new(service),
            )
            .into_owned();
        let serving = graceful.watch(serving);
        tokio::spawn(async move {
            tokio::pin!(serving);
            loop {
                let deadline = match slot.connection.next(&limits, Instant::now()) {
                    // Dropping the connection closes it; nothing is in flight.
                    connections::Next::Close => break,
                    connections::Next::Serve(deadline) => deadline,
                };
                let until = async {
                    match deadline {
                        Some(at) => tokio::time::sleep_until(at.into()).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    _ = &mut serving => break,
                    () = slot.connection.changed() => {},
                    () = until => {},
                }
            }
            drop(slot);
        });
    }
    // Requests in flight may finish; a connection that never does must not keep the
    // process alive past the grace period.
    tokio::select! {
        () = graceful.shutdown() => {},
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {},
    }
    Ok(())
}

/// A future that resolves on SIGINT or SIGTERM. The handlers are installed when this is
/// called (inside the runtime), not when the future is first polled, so a signal that
/// arrives while the server is still binding is not lost.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate()).ok();
        let interrupt = signal(SignalKind::interrupt()).ok();
        async move {
            tokio::select! {
                () = recv(term) => {},
                () = recv(interrupt) => {},
            }
        }
    }
    #[cfg(not(unix))]
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            // No handler could be installed: never shut down by mistake.
            std::future::pending::<()>().await;
        }
    }
}

/// Waits for a signal; forever when its handler could not be installed.
#[cfg(unix)]
async fn recv(signal: Option<tokio::signal::unix::Signal>) {
    match signal {
        Some(mut s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn hosts_are_parsed_as_authorities() {
        let allowed: Vec<String> = ["localhost", "127.0.0.1", "::1", "example.com:8080"]
            .map(String::from)
            .to_vec();
        for (value, ok) in [
            ("localhost:8765", true),
            ("LOCALHOST", true),
            ("127.0.0.1:1", true),
            ("[::1]:8765", true),
            ("example.com:8080", true),
            ("example.com:8081", false),
            ("example.com", false),
            ("[::1]evil", false),
            ("localhost:notaport", false),
            ("user@localhost", false),
            ("localhost.evil.com", false),
            ("evil.example", false),
        ] {
            assert_eq!(host_allowed(&host(value), &allowed), ok, "{value}");
        }
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
    }

    #[test]
    fn origins_match_scheme_host_and_port() {
        for (origin, pattern, ok) in [
            ("http://localhost:3000", "http://localhost:*", true),
            ("http://localhost", "http://localhost:*", true),
            ("http://localhost.evil.com", "http://localhost:*", false),
            ("http://localhost:80@evil.com", "http://localhost:*", false),
            ("https://localhost:3000", "http://localhost:*", false),
            ("https://app.example.com", "https://app.example.com", true),
        ] {
            assert_eq!(origin_matches(origin, pattern), ok, "{origin} vs {pattern}");
        }
    }

    #[test]
    fn ipv6_clients_count_per_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        let v4: IpAddr = "10.0.0.1".parse().unwrap();
        assert_eq!(client_key(v4), v4);
    }
}
