//! Durable state in one SQLite file in the state directory: the sim's ledger, the
//! idempotency store, confirmation tokens and the hash-chained audit log.
//!
//! Every change is one transaction (`BEGIN IMMEDIATE`, WAL, `synchronous = FULL`), so a
//! process killed at any instant leaves each table as it was before or after a whole
//! step, never between.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

pub use rusqlite;
use rusqlite::{Connection, Transaction, TransactionBehavior};

pub mod audit;
pub mod idempotency;
pub mod tokens;

/// The database file inside the state directory.
pub const DB_FILE: &str = "tradedesk.sqlite3";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("state store {path}: {source}")]
    Sqlite {
        path: String,
        #[source]
        source: rusqlite::Error,
    },
    #[error("state directory {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A row that breaks an invariant the code relies on (hand-edited or corrupted).
    #[error("state store: {0}")]
    Corrupt(String),
}

/// The open database: one connection, serialized by a mutex (each transaction is short).
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    label: String,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS sim_accounts (
    account TEXT PRIMARY KEY, currency TEXT NOT NULL, initial_cash TEXT NOT NULL,
    created TEXT NOT NULL, last_tick TEXT NOT NULL, next_seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sim_orders (
    order_id TEXT PRIMARY KEY, account TEXT NOT NULL, client_order_id TEXT NOT NULL,
    exchange TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL, type TEXT NOT NULL,
    quantity TEXT NOT NULL, filled_quantity TEXT NOT NULL, average_price TEXT,
    limit_price TEXT, stop_price TEXT, tif TEXT NOT NULL, stop_loss TEXT, take_profit TEXT,
    status TEXT NOT NULL, mode TEXT NOT NULL, comment TEXT, reason TEXT, triggered INTEGER NOT NULL,
    reduce_only INTEGER NOT NULL, created TEXT NOT NULL, updated TEXT NOT NULL,
    UNIQUE (account, client_order_id));
CREATE TABLE IF NOT EXISTS sim_fills (
    fill_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, account TEXT NOT NULL,
    exchange TEXT NOT NULL, symbol TEXT NOT NULL, side TEXT NOT NULL, quantity TEXT NOT NULL,
    price TEXT NOT NULL, commission TEXT NOT NULL, commission_currency TEXT NOT NULL,
    time TEXT NOT NULL, seq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS sim_brackets (
    account TEXT NOT NULL, exchange TEXT NOT NULL, symbol TEXT NOT NULL,
    stop_loss TEXT, take_profit TEXT, PRIMARY KEY (account, exchange, symbol));
CREATE TABLE IF NOT EXISTS idempotency (
    account TEXT NOT NULL, client_order_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
    state TEXT NOT NULL, order_id TEXT, day TEXT NOT NULL, notional_base TEXT NOT NULL,
    outcome TEXT, created TEXT NOT NULL, updated TEXT NOT NULL,
    PRIMARY KEY (account, client_order_id));
CREATE TABLE IF NOT EXISTS tokens (
    token_id TEXT PRIMARY KEY, account TEXT NOT NULL, fingerprint TEXT NOT NULL,
    expires INTEGER NOT NULL, used TEXT);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY, time TEXT NOT NULL, kind TEXT NOT NULL, account TEXT NOT NULL,
    client_order_id TEXT NOT NULL, detail TEXT NOT NULL, prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS tokens_by_expiry ON tokens (expires);
CREATE INDEX IF NOT EXISTS idempotency_by_day ON idempotency (day);
CREATE INDEX IF NOT EXISTS idempotency_by_state ON idempotency (state);
CREATE INDEX IF NOT EXISTS sim_orders_by_status ON sim_orders (account, status);
CREATE INDEX IF NOT EXISTS sim_fills_by_account ON sim_fills (account, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
    BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
";

impl Store {
    /// Opens (creating if needed) the database in `dir`, which is created owner-only.
    ///
    /// # Errors
    /// The directory cannot be created or the database cannot be opened or migrated.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        create_private_dir(dir)?;
        let path = dir.join(DB_FILE);
        let label = path.display().to_string();
        let conn = Connection::open(&path).map_err(|source| StoreError::Sqlite {
            path: label.clone(),
            source,
        })?;
        Self::init(conn, label)
    }

    /// A private in-memory database (tests and benchmarks).
    ///
    /// # Errors
    /// Only if SQLite cannot allocate.
    pub fn in_memory() -> Result<Self, StoreError> {
        let label = ":memory:".to_owned();
        let conn = Connection::open_in_memory().map_err(|source| StoreError::Sqlite {
            path: label.clone(),
            source,
        })?;
        Self::init(conn, label)
    }

    fn init(conn: Connection, label: String) -> Result<Self, StoreError> {
        let wrap = |source| StoreError::Sqlite {
            path: label.clone(),
            source,
        };
        conn.busy_timeout(Duration::from_secs(10)).map_err(wrap)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;",
        )
        .map_err(wrap)?;
        conn.execute_batch(SCHEMA).map_err(wrap)?;
        Ok(Self {
            conn: Mutex::new(conn),
            label,
        })
    }

    /// Where the database lives, for messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic inside a transaction rolled it back; the connection is still sound.
        self.conn
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` in one immediate transaction, committed only when it returns `Ok`.
    ///
    /// # Errors
    /// Whatever `f` returns, or SQLite's failure to begin or commit.
    pub fn tx<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        let mut conn = self.lock();
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self.sqlite(e))?;
        let value = f(&tx)?;
        tx.commit().map_err(|e| self.sqlite(e))?;
        Ok(value)
    }

    /// Runs a read on the connection (no transaction of its own).
    ///
    /// # Errors
    /// Whatever `f` returns.
    pub fn read<T, E: From<StoreError>>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, E>,
    ) -> Result<T, E> {
        f(&self.lock())
    }

    /// Wraps a SQLite error with the database's path.
    pub fn sqlite(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.label.clone(),
            source,
        }
    }
}

/// Wraps a SQLite error where no `Store` is at hand (inside a transaction closure).
pub fn sql(source: rusqlite::Error) -> StoreError {
    StoreError::Sqlite {
        path: DB_FILE.to_owned(),
        source,
    }
}

/// Creates `dir` (and parents), owner-only on Unix.
///
/// # Errors
/// The directory cannot be created.
pub fn create_private_dir(dir: &Path) -> Result<(), StoreError> {
    let io = |source| StoreError::Io {
        path: dir.display().to_string(),
        source,
    };
    if dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(io)
}

/// The default state directory: `$XDG_STATE_HOME/tradedesk`, else
/// `~/.local/state/tradedesk`.
pub fn default_state_dir() -> Option<PathBuf> {
    if let Some(xdg) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(xdg).join("tradedesk"));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".local/state/tradedesk"))
}

/// Lower-case hex of a SHA-256 digest.
pub fn sha256_hex(parts: &[&[u8]]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part);
    }
    hex(&hasher.finalize())
}

/// Lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}
