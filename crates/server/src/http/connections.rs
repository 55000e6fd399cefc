//! Connection slots for the HTTP server (the rules are in docs/http.md, "Connections").
//!
//! Every accepted connection takes one of `max_connections` slots. A connection with no
//! request in flight, one that has not sent its first request head yet, or a keep-alive
//! one between requests, is *idle*: it is closed when it has been idle past its bound
//! (the head timeout counted from accept for the first request, the idle timeout after
//! that), and when the slots are full a newcomer takes the slot of the connection idle
//! longest (one still waiting for its first request before any keep-alive one). Only
//! when every slot has a request in flight is the newcomer refused, with a 503.
//!
//! A request is in flight from the moment its head is parsed until its response body
//! has been written or dropped, so a slow request body (bounded by the body timeout) or
//! a long SSE stream is never cut by these bounds.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::Notify;

/// How long a refused newcomer gets to take its 503, and then to close its side.
const REFUSAL_WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// Refusals being written at once; past this a newcomer is closed without an answer,
/// so a flood cannot make the refusals themselves unbounded.
const MAX_REFUSALS: usize = 64;
/// What a refused newcomer is told to wait, in seconds.
const REFUSAL_RETRY_AFTER: u64 = 1;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing under these locks can panic; should one be poisoned, keep counting.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The bounds a connection is held to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_connections: usize,
    pub(super) head_timeout: Duration,
    pub(super) idle_timeout: Duration,
}

#[derive(Debug)]
struct State {
    in_flight: usize,
    /// Accept, or the end of the last response.
    idle_since: Instant,
    /// Whether a request head has ever been read: the idle timeout replaces the head
    /// timeout from then on.
    served: bool,
    closing: bool,
}

/// One open connection, as its serving task and the slot table see it.
#[derive(Debug)]
pub(super) struct Connection {
    state: Mutex<State>,
    wake: Notify,
}

/// What the serving task does next.
pub(super) enum Next {
    /// Close the connection now.
    Close,
    /// Serve until this instant (`None`: until woken), then ask again.
    Serve(Option<Instant>),
}

impl Connection {
    fn new(accepted: Instant) -> Self {
        Self {
            state: Mutex::new(State {
                in_flight: 0,
                idle_since: accepted,
                served: false,
                closing: false,
            }),
            wake: Notify::new(),
        }
    }

    /// Resolves when the connection's state has changed (a request began or ended, or it
    /// was evicted); a change before the call is not lost.
    pub(super) async fn changed(&self) {
        self.wake.notified().await;
    }

    pub(super) fn next(&self, limits: &Limits, now: Instant) -> Next {
        let mut s = lock(&self.state);
        if s.closing {
            return Next::Close;
        }
        if s.in_flight > 0 {
            return Next::Serve(None);
        }
        let bound = if s.served {
            limits.idle_timeout
        } else {
            limits.head_timeout
        };
        let deadline = s.idle_since + bound;
        if now >= deadline {
            s.closing = true;
            Next::Close
        } else {
            Next::Serve(Some(deadline))
        }
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        {
            let mut s = lock(&self.state);
            s.in_flight += 1;
            s.served = true;
        }
        self.wake.notify_one();
        InFlight(Arc::clone(self))
    }

    /// Closes the connection if it is idle; `false` when a request is in flight.
    fn evict(&self) -> bool {
        let mut s = lock(&self.state);
        if s.in_flight > 0 || s.closing {
            return false;
        }
        s.closing = true;
        drop(s);
        self.wake.notify_one();
        true
    }

    /// When idle, how it ranks for eviction: waiting for a first request before
    /// keep-alive, then idle longest first.
    fn idle_rank(&self) -> Option<(bool, Instant)> {
        let s = lock(&self.state);
        (s.in_flight == 0 && !s.closing).then_some((s.served, s.idle_since))
    }
}

/// A request in flight on its connection.
#[derive(Debug)]
pub(super) struct InFlight(Arc<Connection>);

impl Drop for InFlight {
    fn drop(&mut self) {
        {
            let mut s = lock(&self.0.state);
            s.in_flight = s.in_flight.saturating_sub(1);
            if s.in_flight == 0 {
                s.idle_since = Instant::now();
            }
        }
        self.0.wake.notify_one();
    }
}

/// A response body that keeps its request in flight until it is written or dropped.
#[derive(Debug)]
pub(super) struct Tracked {
    inner: Body,
    _in_flight: InFlight,
}

impl Tracked {
    pub(super) fn body(inner: Body, in_flight: InFlight) -> Body {
        Body::new(Self {
            inner,
            _in_flight: in_flight,
        })
    }
}

impl hyper::body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The open connections, at most `max_connections`.
#[derive(Debug)]
pub(super) struct Slots {
    max: usize,
    open: Mutex<(u64, HashMap<u64, Arc<Connection>>)>,
    refusals: Arc<tokio::sync::Semaphore>,
}

/// A slot held by a serving task; dropping it frees the slot.
#[derive(Debug)]
pub(super) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    pub(super) connection: Arc<Connection>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        lock(&self.slots.open).1.remove(&self.id);
    }
}

impl Slots {
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max: max.max(1),
            open: Mutex::new((0, HashMap::new())),
            refusals: Arc::new(tokio::sync::Semaphore::new(MAX_REFUSALS)),
        })
    }

    /// A slot for a connection accepted at `now`: a free one, else the slot of the
    /// connection idle longest, which is closed; `None` when every slot has a request
    /// in flight.
    pub(super) fn admit(self: &Arc<Self>, now: Instant) -> Option<Slot> {
        let mut guard = lock(&self.open);
        let (next_id, open) = &mut *guard;
        if open.len() >= self.max {
            let mut idle: Vec<_> = open
                .iter()
                .filter_map(|(id, c)| c.idle_rank().map(|rank| (rank, *id)))
                .collect();
            idle.sort_unstable();
            // A connection whose request began since it was ranked is passed over.
            let evicted = idle
                .into_iter()
                .find(|(_, id)| open.get(id).is_some_and(|c| c.evict()))?;
            open.remove(&evicted.1);
        }
        let id = *next_id;
        *next_id += 1;
        let connection = Arc::new(Connection::new(now));
        open.insert(id, Arc::clone(&connection));
        Some(Slot {
            slots: Arc::clone(self),
            id,
            connection,
        })
    }

    /// Answers a newcomer that found every slot busy with a 503, off the accept loop.
    pub(super) fn refuse(&self, stream: TcpStream) {
        let Ok(permit) = Arc::clone(&self.refusals).try_acquire_owned() else {
            return;
        };
        tokio::spawn(async move {
            answer_busy(stream).await;
            drop(permit);
        });
    }
}

fn busy_response() -> String {
    let body = super::error_body(
        -32029,
        "server busy: too many open connections; retry later",
    );
    format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nRetry-After: {REFUSAL_RETRY_AFTER}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

async fn answer_busy(mut stream: TcpStream) {
    let written = tokio::time::timeout(
        REFUSAL_WRITE_TIMEOUT,
        stream.write_all(busy_response().as_bytes()),
    )
    .await;
    if !matches!(written, Ok(Ok(()))) {
        return;
    }
    let _ = stream.shutdown().await;
    // Reads what the client sent before closing: closing with unread bytes would reset
    // the connection, and a reset can discard the answer before the client reads it.
    let _ = tokio::time::timeout(REFUSAL_WRITE_TIMEOUT, async {
        let mut sink = [0_u8; 4096];
        while matches!(stream.read(&mut sink).await, Ok(n) if n > 0) {}
    })
    .await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const LIMITS: Limits = Limits {
        max_connections: 2,
        head_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
    };

    #[test]
    fn the_head_timeout_runs_from_accept_and_the_idle_timeout_after_a_request() {
        let t0 = Instant::now();
        let c = Arc::new(Connection::new(t0));
        assert!(
            matches!(c.next(&LIMITS, t0), Next::Serve(Some(d)) if d == t0 + LIMITS.head_timeout)
        );
        let request = c.begin();
        assert!(matches!(
            c.next(&LIMITS, t0 + Duration::from_secs(600)),
            Next::Serve(None)
        ));
        drop(request);
        let later = Instant::now() + Duration::from_secs(5);
        assert!(matches!(c.next(&LIMITS, later), Next::Serve(Some(_))));
        assert!(matches!(
            c.next(&LIMITS, later + LIMITS.idle_timeout),
            Next::Close
        ));
    }

    #[test]
    fn the_cap_evicts_the_longest_idle_and_refuses_only_when_all_are_busy() {
        let slots = Slots::new(LIMITS.max_connections);
        let t0 = Instant::now();
        let keep_alive = slots.admit(t0).unwrap();
        drop(keep_alive.connection.begin());
        let silent = slots.admit(t0 + Duration::from_secs(1)).unwrap();
        // Full: the connection still waiting for its first request goes first, though
        // the keep-alive one has been idle longer.
        let busy = slots.admit(t0 + Duration::from_secs(2)).unwrap();
        assert!(matches!(silent.connection.next(&LIMITS, t0), Next::Close));
        assert!(matches!(
            keep_alive.connection.next(&LIMITS, t0),
            Next::Serve(_)
        ));
        let _request = busy.connection.begin();
        let last = slots.admit(t0 + Duration::from_secs(3)).unwrap();
        assert!(matches!(
            keep_alive.connection.next(&LIMITS, t0),
            Next::Close
        ));
        let _request2 = last.connection.begin();
        assert!(slots.admit(t0 + Duration::from_secs(4)).is_none());
        drop(silent);
        drop(keep_alive);
        assert!(slots.admit(t0 + Duration::from_secs(5)).is_none());
    }
}
