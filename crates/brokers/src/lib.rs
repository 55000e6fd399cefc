//! The broker seam: the [`Broker`] trait and its adapters.
//!
//! Only this crate knows a vendor API exists. Each adapter maps its venue's data into
//! the normalized [`tradedesk_core::Book`] types, in one place.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;
use tradedesk_core::{Account, Book, Error, ErrorCode, Mode};

pub mod book;
pub mod demo;

pub use book::{BookBroker, BookError, BookIssue, load_book, parse_book, parse_fx_file};

/// Why a broker call failed. Transient failures (`Unavailable`, `Timeout`,
/// `RateLimited`) are told apart from rejections (`Rejected`, `InvalidRequest`) and from
/// `Uncertain` (a write whose outcome is unknown and must be looked up, never retried).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BrokerError {
    #[error("{account}: cannot connect: {detail}")]
    Unavailable {
        account: String,
        detail: String,
        hint: String,
    },
    #[error("{account}: no answer within {timeout:?}")]
    Timeout { account: String, timeout: Duration },
    #[error("{account}: rate limited")]
    RateLimited {
        account: String,
        retry_after: Option<Duration>,
    },
    #[error("{account}: rejected: {reason}")]
    Rejected { account: String, reason: String },
    #[error("{account}: invalid request: {reason}")]
    InvalidRequest { account: String, reason: String },
    #[error("{account}: outcome unknown: {detail}")]
    Uncertain { account: String, detail: String },
    #[error("{account}: {capability} is not supported by this broker")]
    Unsupported {
        account: String,
        capability: &'static str,
    },
}

impl From<BrokerError> for Error {
    fn from(e: BrokerError) -> Self {
        let message = e.to_string();
        match e {
            BrokerError::Unavailable { hint, .. } => Error::new(
                ErrorCode::BrokerUnavailable,
                message,
                format!("{hint}; get_server_health shows every gateway's state"),
            ),
            BrokerError::Timeout { .. } => Error::new(
                ErrorCode::BrokerTimeout,
                message,
                "the gateway accepted the connection but did not answer; retry later or check get_server_health",
            ),
            BrokerError::RateLimited { retry_after, .. } => Error::new(
                ErrorCode::BrokerUnavailable,
                message,
                match retry_after {
                    Some(d) => format!("retry after {} seconds", d.as_secs().max(1)),
                    None => "retry in a minute".to_owned(),
                },
            ),
            BrokerError::Rejected { .. } | BrokerError::InvalidRequest { .. } => {
                Error::invalid_argument(
                    message,
                    "the broker refused the request as given; change it rather than retrying",
                )
            }
            BrokerError::Uncertain { .. } => Error::new(
                ErrorCode::BrokerTimeout,
                message,
                "do not resubmit: look the order up by its client order id first",
            ),
            BrokerError::Unsupported { .. } => Error::new(
                ErrorCode::NotSupported,
                message,
                "this broker does not offer that; use another account",
            ),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthStatus {
    Ok,
    Degraded,
    Down,
}

/// One account's state as `get_server_health` reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccountHealth {
    pub account: String,
    pub broker: String,
    pub mode: Mode,
    pub status: HealthStatus,
    pub latency_ms: Option<u64>,
    pub detail: String,
    pub hint: Option<String>,
}

/// The read side of a broker. (The write side arrives with trading; a capability an
/// adapter lacks answers [`BrokerError::Unsupported`], never a silent success.)
#[async_trait]
pub trait Broker: Send + Sync + fmt::Debug {
    /// The accounts this adapter serves, without contacting the venue.
    fn accounts(&self) -> Vec<Account>;

    /// Accounts, instruments, fills, cash, marks, FX and reported positions, normalized.
    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError>;

    /// A bounded-time probe of each account.
    async fn health(&self) -> Vec<AccountHealth>;
}
