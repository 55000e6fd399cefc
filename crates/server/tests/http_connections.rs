//! The connection bounds of the HTTP transport (docs/http.md, "Connections") over real
//! loopback sockets, with the cap and timeouts lowered so each test runs in seconds. The
//! server is the real serve loop, in process; the clients are plain blocking sockets.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;
use tradedesk_server::http::{HttpOptions, serve_http_with};

/// A handler with nothing but the defaults: these tests are about connections.
#[derive(Debug, Clone)]
struct Nop;

impl rmcp::ServerHandler for Nop {}

/// What proves a call cannot hang; never a measure of speed.
const BOUND: Duration = Duration::from_secs(30);

struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn start(tune: impl FnOnce(&mut HttpOptions)) -> Server {
    let mut options = HttpOptions::new("127.0.0.1:0".parse().unwrap());
    options.rate_limit_per_minute = 0;
    tune(&mut options);
    let (bound_tx, bound_rx) = std::sync::mpsc::channel();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime
            .block_on(serve_http_with(
                Nop,
                options,
                false,
                move |addr| bound_tx.send(addr).unwrap(),
                async move {
                    let _ = stopped.await;
                },
            ))
            .unwrap();
        // Connections the test left open must not hold the thread.
        runtime.shutdown_timeout(Duration::from_secs(1));
    });
    let addr = bound_rx.recv_timeout(BOUND).unwrap();
    Server {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    }
}

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(BOUND)).unwrap();
    stream
}

struct Reply {
    status: u16,
    headers: String,
    body: String,
}

/// Reads one response (its body by Content-Length), leaving the connection open; status
/// 0 when the server closed without answering.
fn read_reply(stream: &mut TcpStream) -> Reply {
    let mut raw = Vec::new();
    let mut byte = [0_u8; 1];
    while !raw.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => raw.push(byte[0]),
            Ok(_) | Err(_) => break,
        }
    }
    let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = vec![0_u8; length];
    if stream.read_exact(&mut body).is_err() {
        body.clear();
    }
    Reply {
        status,
        headers: head,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// `GET /mcp` (the server's description) on a new connection.
fn get(addr: SocketAddr) -> Reply {
    let mut stream = connect(addr);
    let head = format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    if stream.write_all(head.as_bytes()).is_err() {
        return Reply {
            status: 0,
            headers: String::new(),
            body: String::new(),
        };
    }
    read_reply(&mut stream)
}

/// Whether the server closes `stream` (end of stream or reset) within [`BOUND`], reading
/// and discarding whatever comes first.
fn closed_by_server(stream: &mut TcpStream) -> bool {
    let started = Instant::now();
    let mut buf = [0_u8; 1024];
    while started.elapsed() < BOUND {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

#[test]
fn silent_connections_past_the_cap_neither_starve_clients_nor_stay_open() {
    let s = start(|o| {
        o.max_connections = 8;
        o.head_timeout = Duration::from_secs(2);
    });
    let mut silent: Vec<TcpStream> = (0..12).map(|_| connect(s.addr)).collect();
    for _ in 0..5 {
        let reply = get(s.addr);
        assert_eq!(reply.status, 200, "a valid client was not served");
        assert_eq!(
            serde_json::from_str::<Value>(&reply.body).unwrap()["name"],
            "tradedesk"
        );
    }
    // Those not evicted for the clients are closed at the head deadline, counted from
    // accept although they never sent a byte.
    for (i, stream) in silent.iter_mut().enumerate() {
        assert!(
            closed_by_server(stream),
            "silent connection {i} was never closed"
        );
    }
}

#[test]
fn a_byte_by_byte_client_does_not_stall_a_valid_one() {
    let s = start(|o| {
        o.max_connections = 4;
        o.head_timeout = Duration::from_secs(60);
    });
    let stop = Arc::new(AtomicBool::new(false));
    let tricklers: Vec<_> = (0..4)
        .map(|_| {
            let mut stream = connect(s.addr);
            let (stop, written) = (Arc::clone(&stop), Arc::new(AtomicUsize::new(0)));
            let (counter, addr) = (Arc::clone(&written), s.addr);
            let thread = std::thread::spawn(move || {
                let head = format!("GET /mcp HTTP/1.1\r\nHost: {addr}\r\nX-Pad: ");
                for byte in head.bytes().chain(std::iter::repeat(b'a')) {
                    if stop.load(Ordering::Relaxed) || stream.write_all(&[byte]).is_err() {
                        return;
                    }
                    counter.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
            (thread, written)
        })
        .collect();
    let reply = get(s.addr);
    assert_eq!(reply.status, 200, "the valid client was not served");
    // It was served while the others went on trickling: it did not wait them out.
    let before: Vec<usize> = tricklers
        .iter()
        .map(|(_, w)| w.load(Ordering::Relaxed))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let still = tricklers
        .iter()
        .zip(&before)
        .filter(|((_, w), b)| w.load(Ordering::Relaxed) > **b)
        .count();
    assert!(still >= 1, "no client was still trickling");
    stop.store(true, Ordering::Relaxed);
    for (t, _) in tricklers {
        t.join().unwrap();
    }
}

#[test]
fn an_idle_keep_alive_connection_is_closed_after_the_idle_bound() {
    let s = start(|o| o.idle_timeout = Duration::from_secs(1));
    let mut stream = connect(s.addr);
    let head = format!("GET /mcp HTTP/1.1\r\nHost: {}\r\n\r\n", s.addr);
    stream.write_all(head.as_bytes()).unwrap();
    let reply = read_reply(&mut stream);
    assert_eq!(reply.status, 200);
    assert!(
        !reply.headers.contains("connection: close"),
        "{}",
        reply.headers
    );
    assert!(
        closed_by_server(&mut stream),
        "the idle connection was kept open"
    );
}

const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

/// A POST head for [`LIST`] whose body is still to come.
fn post_head(addr: SocketAddr, expect_continue: bool) -> String {
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n\
         Content-Length: {}\r\n{}\r\n",
        LIST.len(),
        if expect_continue {
            "Expect: 100-continue\r\n"
        } else {
            ""
        }
    )
}

#[test]
fn a_slow_request_body_is_not_cut_by_the_head_or_idle_bound() {
    let s = start(|o| {
        o.head_timeout = Duration::from_secs(1);
        o.idle_timeout = Duration::from_secs(1);
    });
    let mut stream = connect(s.addr);
    stream
        .write_all(post_head(s.addr, false).as_bytes())
        .unwrap();
    // Past both bounds, within the body timeout: the request is in flight.
    std::thread::sleep(Duration::from_millis(2500));
    stream.write_all(LIST.as_bytes()).unwrap();
    let reply = read_reply(&mut stream);
    assert_eq!(reply.status, 200, "{}{}", reply.headers, reply.body);
    assert_eq!(serde_json::from_str::<Value>(&reply.body).unwrap()["id"], 1);
}

#[test]
fn over_the_cap_with_every_slot_busy_a_newcomer_reads_503() {
    let s = start(|o| o.max_connections = 2);
    // Two requests in flight, their bodies not sent yet; `100 Continue` proves the server
    // has their heads.
    let mut busy: Vec<TcpStream> = (0..2)
        .map(|_| {
            let mut stream = connect(s.addr);
            stream
                .write_all(post_head(s.addr, true).as_bytes())
                .unwrap();
            let reply = read_reply(&mut stream);
            assert_eq!(reply.status, 100, "{}", reply.headers);
            stream
        })
        .collect();
    let refused = get(s.addr);
    assert_eq!(refused.status, 503, "{}", refused.headers);
    assert!(
        refused.headers.contains("retry-after: 1"),
        "{}",
        refused.headers
    );
    let error: Value = serde_json::from_str(&refused.body).unwrap();
    assert_eq!(error["jsonrpc"], "2.0");
    assert_eq!(error["error"]["code"], -32029);
    // The busy ones were not cut for the newcomer.
    for stream in &mut busy {
        stream.write_all(LIST.as_bytes()).unwrap();
        assert_eq!(read_reply(stream).status, 200);
    }
}
