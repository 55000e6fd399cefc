//! What every tool runs against: the configured brokers, the base currency, the sector
//! map, and the merged book they produce.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Mutex;
use tradedesk_brokers::ecb::EcbSource;
use tradedesk_brokers::{AccountHealth, Broker, HealthStatus};
use tradedesk_core::ledger::{self, Ledger};
use tradedesk_core::{Book, Currency, Error, ErrorCode, FxQuote, Result, SectorMap};

use crate::merge::merge_books;
use crate::trading::Trading;

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
    /// Rates from the config's `fx_file`, added to every book's (and beating them).
    extra_fx: Vec<FxQuote>,
    /// The reference-rate source (`fx_source = "ecb"`), used after the brokers' rates.
    reference_fx: Option<Arc<EcbSource>>,
    /// The merged book and its replay (open lots and cash), kept until a broker's
    /// generation moves (a paper fill, a new minute of sim marks).
    cache: Mutex<Option<Cached>>,
    /// Order guards and durable state; `None` when no account can trade.
    pub trading: Option<Arc<Trading>>,
    /// Where CSV bar files may be read from: `None` for the local user (stdio, CLI),
    /// the configured `data_dirs` over HTTP.
    pub data_dirs: Option<Vec<PathBuf>>,
    /// `data_dirs` from the config, applied when serving HTTP.
    pub configured_data_dirs: Vec<PathBuf>,
    /// Backtests still running (or done and not yet fetched).
    pub runs: Arc<crate::research::RunRegistry>,
}

#[derive(Debug)]
struct Cached {
    generation: u64,
    book: Arc<Book>,
    ledger: Option<Arc<Ledger>>,
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
            reference_fx: None,
            cache: Mutex::new(None),
            trading: None,
            data_dirs: None,
            configured_data_dirs: Vec::new(),
            runs: Arc::default(),
        }
    }

    #[must_use]
    pub fn with_trading(mut self, trading: Arc<Trading>) -> Self {
        self.trading = Some(trading);
        self
    }

    /// Whether the write tools are served.
    pub fn trading_enabled(&self) -> bool {
        self.trading.as_ref().is_some_and(|t| t.settings.enabled)
    }

    /// The broker serving `account`, if any.
    pub fn broker_for(&self, account: &str) -> Option<Arc<dyn Broker>> {
        self.brokers
            .iter()
            .zip(&self.selections)
            .find(|(broker, selection)| {
                broker.accounts().iter().any(|a| a.id == account)
                    && selection
                        .as_ref()
                        .is_none_or(|ids| ids.iter().any(|id| id == account))
            })
            .map(|(broker, _)| Arc::clone(broker))
    }

    /// Every served account id with its broker.
    pub fn served_accounts(&self) -> Vec<(tradedesk_core::Account, Arc<dyn Broker>)> {
        let mut out = Vec::new();
        for (broker, selection) in self.brokers.iter().zip(&self.selections) {
            for account in broker.accounts() {
                if selection
                    .as_ref()
                    .is_none_or(|ids| ids.contains(&account.id))
                {
                    out.push((account, Arc::clone(broker)));
                }
            }
        }
        out
    }

    fn generation(&self) -> u64 {
        self.brokers.iter().fold(0_u64, |acc, b| {
            acc.wrapping_mul(31).wrapping_add(b.generation())
        })
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

    /// Reference rates (the ECB's), used where neither the fx_file nor a broker has one.
    #[must_use]
    pub fn with_reference_fx(mut self, source: Arc<EcbSource>) -> Self {
        self.reference_fx = Some(source);
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
        let generation = self.generation();
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_ref()
            && cached.generation == generation
        {
            return Ok(Arc::clone(&cached.book));
        }
        let book = self.build_book().await?;
        *cache = Some(Cached {
            generation,
            book: Arc::clone(&book),
            ledger: None,
        });
        Ok(book)
    }

    async fn build_book(&self) -> Result<Arc<Book>> {
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
        let reference = match &self.reference_fx {
            Some(source) => Some(source.rates().await),
            None => None,
        };
        if parts.len() == 1
            && parts[0].1.is_none()
            && self.base_currency.is_none()
            && self.extra_fx.is_empty()
            && reference.is_none()
        {
            return Ok(Arc::clone(&parts[0].0));
        }
        let reference_quotes: &[FxQuote] = reference.as_ref().map_or(&[], |r| r.quotes.as_slice());
        let mut book = merge_books(&parts, self.base_currency, &self.extra_fx, reference_quotes)?;
        if let Some(r) = reference {
            book.notes.extend(r.notes);
        }
        Ok(Arc::new(book))
    }

    /// The merged book replayed once (open lots and implied cash), shared by every call
    /// that values holdings. Realized P&L replays on its own: it needs the closed lots,
    /// which are never stored.
    ///
    /// # Errors
    /// As [`ToolContext::book`], or the replay's `internal` (a commission without a rate
    /// is noted, never an error).
    pub async fn ledger(&self) -> Result<(Arc<Book>, Arc<Ledger>)> {
        let book = self.book().await?;
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_mut()
            && Arc::ptr_eq(&cached.book, &book)
        {
            if let Some(ledger) = &cached.ledger {
                return Ok((book, Arc::clone(ledger)));
            }
            let ledger = Arc::new(ledger::replay(&book, |_, _| {})?);
            cached.ledger = Some(Arc::clone(&ledger));
            return Ok((book, ledger));
        }
        let ledger = Arc::new(ledger::replay(&book, |_, _| {})?);
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
