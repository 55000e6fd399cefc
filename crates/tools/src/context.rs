//! What every tool runs against: the configured brokers, the base currency, the sector
//! map, and the merged book they produce.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::OnceCell;
use tradedesk_brokers::{AccountHealth, Broker, HealthStatus};
use tradedesk_core::ledger::{self, Ledger};
use tradedesk_core::{Book, Currency, Error, ErrorCode, FxQuote, Result, SectorMap};

use crate::merge::merge_books;

/// A broker named by its accounts, for messages (never its `Debug` form, which could
/// carry its whole book or its configuration).
fn account_names(broker: &dyn Broker) -> String {
    broker
        .accounts()
        .iter()
        .map(|a| a.id.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The tool context: shared by every call, cheap to clone through an `Arc`.
#[derive(Debug)]
pub struct ToolContext {
    brokers: Vec<Arc<dyn Broker>>,
    /// Account ids to serve, per broker (None = every account it has).
    selections: Vec<Option<Vec<String>>>,
    base_currency: Option<Currency>,
    pub sectors: SectorMap,
    pub version: String,
    pub broker_timeout: Duration,
    /// Rates from the config's `fx_file`, added to every book's.
    extra_fx: Vec<FxQuote>,
    book: OnceCell<Arc<Book>>,
    /// The book replayed once: open lots and cash, for every tool that values holdings.
    ledger: OnceCell<Arc<Ledger>>,
}

impl ToolContext {
    pub fn new(version: impl Into<String>) -> Self {
        Self {
            brokers: Vec::new(),
            selections: Vec::new(),
            base_currency: None,
            sectors: SectorMap::default(),
            version: version.into(),
            broker_timeout: Duration::from_secs(10),
            extra_fx: Vec::new(),
            book: OnceCell::new(),
            ledger: OnceCell::new(),
        }
    }

    /// Adds a broker, serving only `accounts` of it when given.
    #[must_use]
    pub fn with_broker(mut self, broker: Arc<dyn Broker>, accounts: Option<Vec<String>>) -> Self {
        self.brokers.push(broker);
        self.selections.push(accounts);
        self
    }

    /// The report currency when a call names none (else the first book's).
    #[must_use]
    pub fn with_base_currency(mut self, currency: Currency) -> Self {
        self.base_currency = Some(currency);
        self
    }

    #[must_use]
    pub fn with_fx(mut self, quotes: Vec<FxQuote>) -> Self {
        self.extra_fx = quotes;
        self
    }

    #[must_use]
    pub fn with_sectors(mut self, sectors: SectorMap) -> Self {
        self.sectors = sectors;
        self
    }

    /// The merged book of every configured account, built once.
    ///
    /// # Errors
    /// `broker_unavailable` / `broker_timeout` from an adapter, or `invalid_argument` when
    /// two sources disagree about an instrument.
    pub async fn book(&self) -> Result<Arc<Book>> {
        self.book
            .get_or_try_init(|| async {
                let mut parts = Vec::with_capacity(self.brokers.len());
                for (broker, selection) in self.brokers.iter().zip(&self.selections) {
                    let snapshot = tokio::time::timeout(self.broker_timeout, broker.snapshot())
                        .await
                        .map_err(|_| {
                            Error::new(
                                ErrorCode::BrokerTimeout,
                                format!(
                                    "accounts {} did not answer within {:?}",
                                    account_names(broker.as_ref()),
                                    self.broker_timeout
                                ),
                                "check get_server_health, then retry",
                            )
                        })?
                        .map_err(Error::from)?;
                    parts.push((snapshot, selection.clone()));
                }
                if parts.len() == 1
                    && parts[0].1.is_none()
                    && self.base_currency.is_none()
                    && self.extra_fx.is_empty()
                {
                    return Ok(Arc::clone(&parts[0].0));
                }
                merge_books(&parts, self.base_currency, &self.extra_fx).map(Arc::new)
            })
            .await
            .cloned()
    }

    /// The merged book replayed once (open lots and implied cash), shared by every call
    /// that values holdings. Realized P&L replays on its own: it needs the closed lots,
    /// which are never stored.
    ///
    /// # Errors
    /// As [`ToolContext::book`], or the replay's `no_fx_rate` / `internal`.
    pub async fn ledger(&self) -> Result<(Arc<Book>, Arc<Ledger>)> {
        let book = self.book().await?;
        let ledger = self
            .ledger
            .get_or_try_init(|| async { ledger::replay(&book, |_, _| {}).map(Arc::new) })
            .await?
            .clone();
        Ok((book, ledger))
    }

    /// Probes every broker, each bounded by the broker timeout.
    pub async fn health(&self) -> Vec<AccountHealth> {
        let mut out = Vec::new();
        for (broker, selection) in self.brokers.iter().zip(&self.selections) {
            let served = |account: &str| {
                selection
                    .as_ref()
                    .is_none_or(|ids| ids.iter().any(|id| id == account))
            };
            match tokio::time::timeout(self.broker_timeout, broker.health()).await {
                Ok(rows) => out.extend(rows.into_iter().filter(|r| served(&r.account))),
                Err(_) => out.extend(broker.accounts().into_iter().filter(|a| served(&a.id)).map(
                    |a| AccountHealth {
                        account: a.id,
                        broker: a.broker,
                        mode: a.mode,
                        status: HealthStatus::Down,
                        latency_ms: None,
                        detail: format!("no answer within {:?}", self.broker_timeout),
                        hint: Some("check that the gateway is running and reachable".to_owned()),
                    },
                )),
            }
        }
        out
    }
}
