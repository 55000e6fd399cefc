//! Guarded order execution (docs/methodology/trading.md): settings, the durable state behind
//! the guards, and the tools in [`orders`].
//!
//! Every write passes, in order: trading enabled, the account's mode, the kill switch,
//! the order's own rules, the policy (lists, caps, weight, daily count), the
//! confirmation, then one transaction that decides the reservation's rules again
//! (the kill switch, the daily limits, the position weight, the free margin), redeems
//! the token, reserves the client order id and writes the audit entry, all before the
//! broker is called. The facts are read in [`facts`], the rules are pure, in [`rules`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use chrono::{DateTime, Local, Utc};
use rust_decimal::Decimal;
use serde_json::Value;
use tradedesk_brokers::sim::Clock;
use tradedesk_core::{Error, ErrorCode, Result};
use tradedesk_store::audit::{self, Entry};
use tradedesk_store::tokens::TokenKey;
use tradedesk_store::{Store, StoreError};

mod facts;
pub mod orders;
mod rules;
pub mod tools;

/// `[trading]`, checked and typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TradingSettings {
    pub enabled: bool,
    pub confirm_paper: bool,
    pub confirm_live: bool,
    pub max_order_notional: Decimal,
    pub max_daily_notional: Decimal,
    pub max_position_weight_pct: Decimal,
    pub max_orders_per_day: u32,
    pub allow_symbols: Vec<String>,
    pub deny_symbols: Vec<String>,
    pub kill_switch_file: PathBuf,
    pub token_ttl_seconds: i64,
    /// Accounts whose config says `live = true`.
    pub live_accounts: Vec<String>,
}

impl TradingSettings {
    /// The contract's defaults, with the kill switch in `state_dir`.
    pub fn defaults(state_dir: &Path) -> Self {
        Self {
            enabled: false,
            confirm_paper: false,
            confirm_live: true,
            max_order_notional: Decimal::from(1000),
            max_daily_notional: Decimal::from(5000),
            max_position_weight_pct: Decimal::from(25),
            max_orders_per_day: 50,
            allow_symbols: Vec::new(),
            deny_symbols: Vec::new(),
            kill_switch_file: state_dir.join("KILL"),
            token_ttl_seconds: 120,
            live_accounts: Vec::new(),
        }
    }
}

/// A pause injected at a named step of the order flow, so a test can kill the process
/// exactly there (`TRADEDESK_FAILPOINT=after_reserve` or `after_broker`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failpoint {
    AfterReserve,
    AfterBroker,
}

/// The guards' state: settings, the store, the token key and the clock.
#[derive(Debug)]
pub struct Trading {
    pub settings: TradingSettings,
    pub store: Arc<Store>,
    key: TokenKey,
    pub clock: Arc<dyn Clock>,
    failpoint: Option<Failpoint>,
    /// How long a failpoint holds (`TRADEDESK_FAILPOINT_PAUSE_MS`, default 30 s).
    failpoint_pause: std::time::Duration,
    /// One lock per (account, client order id): concurrent calls with one id wait for
    /// the first and then get its stored outcome.
    inflight: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Trading {
    pub fn new(
        settings: TradingSettings,
        store: Arc<Store>,
        key: TokenKey,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let failpoint = match std::env::var("TRADEDESK_FAILPOINT").as_deref() {
            Ok("after_reserve") => Some(Failpoint::AfterReserve),
            Ok("after_broker") => Some(Failpoint::AfterBroker),
            _ => None,
        };
        let failpoint_pause = std::env::var("TRADEDESK_FAILPOINT_PAUSE_MS")
            .ok()
            .and_then(|ms| ms.parse::<u64>().ok())
            .map_or(
                std::time::Duration::from_secs(30),
                std::time::Duration::from_millis,
            );
        Self {
            settings,
            store,
            key,
            clock,
            failpoint,
            failpoint_pause,
            inflight: std::sync::Mutex::new(HashMap::new()),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// The calendar day (server time zone) an order submitted now counts against.
    pub fn today(&self) -> String {
        self.now().with_timezone(&Local).date_naive().to_string()
    }

    /// Whether the kill switch is on: any entry at its path (a file, a folder, a symlink,
    /// even one whose target is gone) is on, and a path that cannot be checked counts as
    /// on; only a path that is certainly absent is off.
    pub fn kill_switch_on(&self) -> bool {
        kill_switch_at(&self.settings.kill_switch_file)
    }

    fn key(&self) -> &TokenKey {
        &self.key
    }

    async fn pause_at(&self, point: Failpoint) {
        if self.failpoint == Some(point) {
            tokio::time::sleep(self.failpoint_pause).await;
        }
    }

    fn key_lock(&self, account: &str, client_order_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self
            .inflight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // Drop locks nobody holds, so the map stays as small as the calls in flight.
        map.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(
            map.entry(format!("{account}\u{1f}{client_order_id}"))
                .or_default(),
        )
    }

    /// Appends one audit entry in its own transaction.
    ///
    /// # Errors
    /// The store failed (the caller must not report success then).
    pub fn audit(
        &self,
        kind: &str,
        account: &str,
        client_order_id: &str,
        detail: &Value,
    ) -> Result<()> {
        let time = rfc3339(self.now());
        let detail = detail.to_string();
        self.store
            .tx::<_, ErrorWrap>(|tx| {
                audit::append(
                    tx,
                    &Entry {
                        time: &time,
                        kind,
                        account,
                        client_order_id,
                        detail: &detail,
                    },
                )?;
                Ok(())
            })
            .map_err(Error::from)
    }
}

pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A store failure as a tool error.
pub fn store_error(e: &StoreError) -> Error {
    Error::new(
        ErrorCode::Internal,
        format!("the state store failed: {e}"),
        "check that the state directory is writable and not full; nothing was sent to a broker unless the result says so",
    )
}

impl From<StoreError> for ErrorWrap {
    fn from(e: StoreError) -> Self {
        Self(store_error(&e))
    }
}

/// A tool error that can pass through [`Store::tx`].
#[derive(Debug)]
pub struct ErrorWrap(pub Error);

impl From<Error> for ErrorWrap {
    fn from(e: Error) -> Self {
        Self(e)
    }
}

impl From<ErrorWrap> for Error {
    fn from(e: ErrorWrap) -> Self {
        e.0
    }
}

/// Whether anything stands at `path` (not following a symlink), failing safe.
fn kill_switch_at(path: &std::path::Path) -> bool {
    match std::fs::symlink_metadata(path) {
        Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

#[cfg(test)]
mod kill_switch_tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn any_entry_at_the_path_stops_trading() {
        let dir = tempfile::tempdir().unwrap();
        let kill = dir.path().join("KILL");
        assert!(!super::kill_switch_at(&kill), "absent: off");
        std::fs::write(&kill, "").unwrap();
        assert!(super::kill_switch_at(&kill), "a file: on");
        std::fs::remove_file(&kill).unwrap();
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("gone"), &kill).unwrap();
            assert!(super::kill_switch_at(&kill), "a dangling symlink: on");
            std::fs::remove_file(&kill).unwrap();
        }
        std::fs::create_dir(&kill).unwrap();
        assert!(super::kill_switch_at(&kill), "a folder: on");
    }
}
