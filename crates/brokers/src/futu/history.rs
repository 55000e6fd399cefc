//! What is read of an OpenD account's history, kept in the state directory so that every
//! tradedesk process sharing it reads OpenD's history once, and the request budget OpenD
//! enforces on history queries (10 per 30 seconds per account, per query kind), counted
//! across those processes (the README's Moomoo section says what this means for a user).
//!
//! * **The cache** (`opend/history-<acc>-<env>-<market>.bin`) holds the fills (or, for a
//!   simulated account, the orders) and fees read, the exchange-time window they cover and
//!   when they were read. A read within [`super::CACHE_FOR`] of the last is served from it
//!   whole; a later one asks OpenD again only from a day before the cached window's end.
//! * **The budget** (`opend/budget-<acc>.txt`) is one line per history query sent in the
//!   last 30 s (`<proto id> <unix ms>`), read and written under an exclusive file lock.
//!   A query the budget has no room for is not sent: the call is refused, saying so and
//!   when to retry.
//!
//! * **A budget file that cannot be opened or locked** never blocks a read: the query is
//!   sent uncounted and the problem is kept ([`Store::budget_problem`]) for the book's
//!   notes and the health.
//! * **The clock** ([`Clock`]) is the system's; a test moves a manual one instead of
//!   sleeping past [`WINDOW`] or the cache's 30 s.
//!
//! Without a state directory both live in this process only.

use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prost::Message;

use super::proto;

/// OpenD's limit: history queries of one kind per account in [`WINDOW`].
pub const LIMIT: usize = 10;
/// OpenD's limit's window.
pub const WINDOW: Duration = Duration::from_secs(30);

/// One read of an account's history, as kept.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Cached {
    /// Which account, environment and market this is (a file of another is ignored).
    #[prost(string, tag = "1")]
    pub key: String,
    /// When it was read from OpenD (Unix ms).
    #[prost(int64, tag = "2")]
    pub read_at_ms: i64,
    /// The window read, exchange wall clock `YYYY-MM-DD HH:MM:SS`.
    #[prost(string, tag = "3")]
    pub begin: String,
    #[prost(string, tag = "4")]
    pub end: String,
    #[prost(message, repeated, tag = "5")]
    pub fills: Vec<proto::OrderFill>,
    #[prost(message, repeated, tag = "6")]
    pub orders: Vec<proto::Order>,
    /// Fees OpenD gave, by order.
    #[prost(message, repeated, tag = "7")]
    pub fees: Vec<proto::OrderFee>,
}

/// Without a state directory: the cached read, and the queries sent (proto id, Unix ms).
type Memory = (Option<Cached>, Vec<(u32, i64)>);

fn system_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// What time it is (Unix ms): the system clock, or a test's own.
#[derive(Clone)]
pub struct Clock(Arc<dyn Fn() -> i64 + Send + Sync>);

impl Clock {
    pub fn system() -> Self {
        Self(Arc::new(system_ms))
    }

    /// A clock that reads `now` (Unix ms) whenever asked: a test moves it.
    pub fn manual(now: Arc<AtomicI64>) -> Self {
        Self(Arc::new(move || now.load(Ordering::SeqCst)))
    }

    pub fn now_ms(&self) -> i64 {
        (self.0)()
    }
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Clock({})", self.now_ms())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

/// The history cache and request budget of one account.
#[derive(Debug)]
pub struct Store {
    dir: Option<PathBuf>,
    acc: u64,
    key: String,
    memory: Mutex<Memory>,
    clock: Clock,
    /// Why the budget file could not be used at its last use (queries were then sent
    /// uncounted).
    budget_problem: Mutex<Option<String>>,
}

/// Why a history query was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spent {
    pub proto_id: u32,
    /// Queries of that kind in the last 30 s.
    pub used: usize,
    pub retry_in: Duration,
    /// Where the budget is counted (`None`: this process).
    pub file: Option<PathBuf>,
}

impl Store {
    pub fn new(dir: Option<&Path>, acc: u64, simulate: bool, market: &str) -> Self {
        let env = if simulate { "simulated" } else { "real" };
        Self {
            dir: dir.map(|d| d.join("opend")),
            acc,
            key: format!("{acc} {env} {market}"),
            memory: Mutex::new((None, Vec::new())),
            clock: Clock::system(),
            budget_problem: Mutex::new(None),
        }
    }

    /// The same store, reading time from `clock`.
    #[must_use]
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Why the budget file could not be used when last asked (`None`: it could).
    pub fn budget_problem(&self) -> Option<String> {
        self.budget_problem.lock().ok().and_then(|p| p.clone())
    }

    pub fn key(&self) -> &str {
        &self.key
    }

    fn cache_path(&self) -> Option<PathBuf> {
        let name = self.key.replace(' ', "-");
        self.dir
            .as_ref()
            .map(|d| d.join(format!("history-{name}.bin")))
    }

    fn budget_path(&self) -> Option<PathBuf> {
        self.dir
            .as_ref()
            .map(|d| d.join(format!("budget-{}.txt", self.acc)))
    }

    /// The cached read, if there is one for this account.
    pub fn load(&self) -> Option<Cached> {
        let cached = match self.cache_path() {
            Some(path) => {
                let bytes = std::fs::read(path).ok()?;
                Cached::decode(bytes.as_slice()).ok()?
            }
            None => self.memory.lock().ok()?.0.clone()?,
        };
        (cached.key == self.key).then_some(cached)
    }

    /// Keeps `cached` (written whole, then renamed into place: a reader never sees half).
    ///
    /// # Errors
    /// The state directory cannot be written.
    pub fn save(&self, cached: &Cached) -> std::io::Result<()> {
        match self.cache_path() {
            Some(path) => {
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir)?;
                }
                let tmp = path.with_extension(format!("tmp{}", std::process::id()));
                std::fs::write(&tmp, cached.encode_to_vec())?;
                std::fs::rename(&tmp, &path)
            }
            None => {
                if let Ok(mut m) = self.memory.lock() {
                    m.0 = Some(cached.clone());
                }
                Ok(())
            }
        }
    }

    /// The age of a read made at `read_at_ms`.
    pub fn age(&self, read_at_ms: i64) -> Duration {
        Duration::from_millis(u64::try_from(self.now_ms().saturating_sub(read_at_ms)).unwrap_or(0))
    }

    /// Now, by this store's clock (Unix ms).
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Takes one query of `proto_id` from the budget, or says why not.
    pub fn take(&self, proto_id: u32) -> Result<(), Spent> {
        let now = self.now_ms();
        let window = i64::try_from(WINDOW.as_millis()).unwrap_or(30_000);
        let decide = |seen: &mut Vec<(u32, i64)>| -> Result<(), Spent> {
            seen.retain(|(_, at)| now - *at < window && *at <= now);
            let mine: Vec<i64> = seen
                .iter()
                .filter(|(p, _)| *p == proto_id)
                .map(|(_, at)| *at)
                .collect();
            if mine.len() >= LIMIT {
                let oldest = mine.iter().min().copied().unwrap_or(now);
                return Err(Spent {
                    proto_id,
                    used: mine.len(),
                    retry_in: Duration::from_millis(
                        u64::try_from(oldest + window - now).unwrap_or(0),
                    ),
                    file: self.budget_path(),
                });
            }
            seen.push((proto_id, now));
            Ok(())
        };
        let Some(path) = self.budget_path() else {
            let mut m = self.memory.lock().map_err(|_| Spent {
                proto_id,
                used: 0,
                retry_in: WINDOW,
                file: None,
            })?;
            return decide(&mut m.1);
        };
        // A budget file that cannot be used never blocks a read: OpenD's own refusal is
        // then the guard, and the problem is kept for the book's notes and the health.
        let mut file = match open_locked(&path) {
            Ok(file) => {
                if let Ok(mut p) = self.budget_problem.lock() {
                    *p = None;
                }
                file
            }
            Err(e) => {
                if let Ok(mut p) = self.budget_problem.lock() {
                    *p = Some(format!(
                        "the request budget file {} cannot be opened or locked ({e}): history queries are sent without counting OpenD's 10 per 30 s across processes, so OpenD's own refusal is the guard",
                        path.display()
                    ));
                }
                return Ok(());
            }
        };
        let mut text = String::new();
        let _ = file.read_to_string(&mut text);
        let mut seen: Vec<(u32, i64)> = text
            .lines()
            .filter_map(|l| {
                let (p, at) = l.split_once(' ')?;
                Some((p.parse().ok()?, at.trim().parse().ok()?))
            })
            .collect();
        let verdict = decide(&mut seen);
        let body: String = seen.iter().map(|(p, at)| format!("{p} {at}\n")).collect();
        let _ = file
            .seek(SeekFrom::Start(0))
            .and_then(|_| file.set_len(0))
            .and_then(|()| file.write_all(body.as_bytes()));
        let _ = file.unlock();
        verdict
    }

    /// Holds the cache's lock (other processes reading this account's history wait) until
    /// the guard drops; `None` without a state directory or when the lock cannot be had
    /// within `wait`.
    pub async fn exclusive(&self, wait: Duration) -> Option<std::fs::File> {
        let path = self.cache_path()?.with_extension("lock");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).ok()?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .ok()?;
        let started = std::time::Instant::now();
        loop {
            match file.try_lock() {
                Ok(()) => return Some(file),
                Err(std::fs::TryLockError::WouldBlock) if started.elapsed() < wait => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => return None,
            }
        }
    }
}

fn open_locked(path: &Path) -> std::io::Result<std::fs::File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)?;
    file.lock()?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_budget_is_shared_through_the_state_directory() {
        let dir = tempfile::tempdir().unwrap();
        let one = Store::new(Some(dir.path()), 7, false, "MY");
        let two = Store::new(Some(dir.path()), 7, false, "MY");
        for i in 0..LIMIT {
            let by = if i % 2 == 0 { &one } else { &two };
            assert!(by.take(2222).is_ok(), "query {i}");
        }
        let spent = two.take(2222).unwrap_err();
        assert_eq!((spent.proto_id, spent.used), (2222, LIMIT));
        assert!(spent.retry_in <= WINDOW && spent.retry_in > Duration::ZERO);
        // Another kind of query has its own budget; another account too.
        assert!(one.take(2225).is_ok());
        assert!(
            Store::new(Some(dir.path()), 8, false, "MY")
                .take(2222)
                .is_ok()
        );
    }

    #[test]
    fn a_cached_read_is_seen_by_another_store_of_the_same_account_only() {
        let dir = tempfile::tempdir().unwrap();
        let one = Store::new(Some(dir.path()), 7, false, "MY");
        let cached = Cached {
            key: one.key().to_owned(),
            read_at_ms: 5,
            begin: "2026-01-01 00:00:00".to_owned(),
            end: "2026-11-30 10:00:00".to_owned(),
            ..Cached::default()
        };
        one.save(&cached).unwrap();
        assert_eq!(
            Store::new(Some(dir.path()), 7, false, "MY").load(),
            Some(cached)
        );
        assert_eq!(Store::new(Some(dir.path()), 7, true, "MY").load(), None);
        assert_eq!(Store::new(None, 7, false, "MY").load(), None);
    }
}
