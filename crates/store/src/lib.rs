//! Durable state in one SQLite file in the state directory: the idempotency store,
//! confirmation tokens, the hash-chained audit log and process leases, and the tables a
//! user of the store declares on its connection ([`Store::declare`]: the sim's ledger is
//! declared by the sim, in `tradedesk-brokers`).
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
pub mod lease;
pub mod tokens;

/// How long opening waits for another process that is creating or migrating the
/// database, and how long a transaction waits for another process's transaction.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);
/// The lock file that serializes creating and migrating the database.
const OPEN_LOCK: &str = "open.lock";

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
    /// Another process held the database for longer than [`LOCK_WAIT`].
    #[error(
        "state store {path}: another tradedesk process kept it locked for {seconds} s ({what}); gave up waiting"
    )]
    Busy {
        path: String,
        seconds: u64,
        what: &'static str,
    },
}

impl StoreError {
    /// Whether this is a wait that ran out (the fix is to retry or stop the other
    /// process), rather than a permission or disk problem.
    pub fn is_busy(&self) -> bool {
        match self {
            Self::Busy { .. } => true,
            Self::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
            ),
            _ => false,
        }
    }
}

/// The open database: one connection, serialized by a mutex (each transaction is short),
/// and this process's [`lease::Lease`], written on the orders it reserves.
#[derive(Debug)]
pub struct Store {
    conn: Mutex<Connection>,
    label: String,
    lease: lease::Lease,
}

/// The store's own tables.
const SCHEMA: &str = "
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
    ///
    /// Many processes may open one fresh directory at once: creating and migrating the
    /// database is serialized by a lock file, waited on for at most [`LOCK_WAIT`].
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        create_private_dir(dir)?;
        let path = dir.join(DB_FILE);
        let label = path.display().to_string();
        let _init = open_lock(dir, &label)?;
        let conn = Connection::open(&path).map_err(|source| StoreError::Sqlite {
            path: label.clone(),
            source,
        })?;
        Self::init(conn, label, lease::Lease::take(dir)?)
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
        Self::init(conn, label, lease::Lease::private()?)
    }

    fn init(conn: Connection, label: String, lease: lease::Lease) -> Result<Self, StoreError> {
        let wrap = |source| StoreError::Sqlite {
            path: label.clone(),
            source,
        };
        conn.busy_timeout(LOCK_WAIT).map_err(wrap)?;
        // WAL is a property of the file: set once, by whoever creates it.
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .map_err(wrap)?;
        if !mode.eq_ignore_ascii_case("wal") {
            conn.execute_batch("PRAGMA journal_mode = WAL;")
                .map_err(wrap)?;
        }
        conn.execute_batch("PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;")
            .map_err(wrap)?;
        conn.execute_batch(SCHEMA).map_err(wrap)?;
        migrate(&conn).map_err(wrap)?;
        Ok(Self {
            conn: Mutex::new(conn),
            label,
            lease,
        })
    }

    /// This process's lease (see [`lease`]).
    pub fn lease(&self) -> &lease::Lease {
        &self.lease
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

    /// Creates another crate's tables on this connection, in one transaction: `schema` is
    /// `CREATE TABLE IF NOT EXISTS` / `CREATE INDEX IF NOT EXISTS` statements, so declaring
    /// them again (another process, another account on the same store) changes nothing.
    ///
    /// # Errors
    /// SQLite refuses a statement, or the database stays locked past [`LOCK_WAIT`].
    pub fn declare(&self, schema: &str) -> Result<(), StoreError> {
        self.tx(|tx| tx.execute_batch(schema).map_err(|e| self.sqlite(e)))
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

/// Columns added after the first release, added to a database that lacks them.
const MIGRATIONS: &[(&str, &str, &str)] = &[
    // The lease of the process that reserved the order (see `lease`).
    ("idempotency", "owner", "TEXT"),
    // The instrument and the signed base-currency exposure the order adds, for the
    // limits that depend on other orders in flight.
    ("idempotency", "instrument", "TEXT"),
    ("idempotency", "exposure", "TEXT"),
    // The order in which outcomes were recorded (0 until settled).
    ("idempotency", "settle_seq", "INTEGER NOT NULL DEFAULT 0"),
];

fn migrate(conn: &Connection) -> Result<(), rusqlite::Error> {
    for (table, column, kind) in MIGRATIONS {
        let present: bool = conn.query_row(
            &format!("SELECT COUNT(*) FROM pragma_table_info('{table}') WHERE name = ?1"),
            [column],
            |r| r.get::<_, i64>(0).map(|n| n > 0),
        )?;
        if !present {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {kind};"))?;
        }
    }
    Ok(())
}

/// Holds the lock file that serializes creating and migrating the database, waiting for
/// another process at most [`LOCK_WAIT`].
fn open_lock(dir: &Path, label: &str) -> Result<std::fs::File, StoreError> {
    let path = dir.join(OPEN_LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|source| StoreError::Io {
            path: path.display().to_string(),
            source,
        })?;
    let deadline = std::time::Instant::now() + LOCK_WAIT;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::Busy {
                    path: label.to_owned(),
                    seconds: LOCK_WAIT.as_secs(),
                    what: "creating or upgrading the database",
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(StoreError::Io {
                    path: path.display().to_string(),
                    source,
                });
            }
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
