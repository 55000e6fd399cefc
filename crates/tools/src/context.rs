//! What every tool runs against: the configured brokers, the base currency, the sector
//! map, and the merged book they produce.
//!
//! A source that does not answer never fails the others: the merged book is built from
//! the sources that answered, the rest are listed as [`Down`] with their error, and each
//! down source is retried in the background until it answers again (docs/tools.md,
//! "Accounts that do not answer"). Nothing here talks to a broker until a tool asks.

use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex, MutexGuard, PoisonError, Weak};
use std::time::Duration;

use chrono::{SecondsFormat, Utc};
use tokio::sync::{Mutex, Notify};
use tradedesk_brokers::ecb::EcbSource;
use tradedesk_brokers::{AccountHealth, Broker, HealthStatus};
use tradedesk_core::ledger::{self, Ledger};
use tradedesk_core::{Book, Currency, Error, ErrorCode, FxQuote, Result, SectorMap};

use crate::merge::merge_books;
use crate::toolset::Toolsets;
use crate::trading::Trading;
use crate::unavailable::{Down, UnavailableAccount};

/// The first retry of a down source, after this; each further one waits twice as long,
/// up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(15);

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

fn timeout_error(broker: &dyn Broker, timeout: Duration) -> Error {
    Error::new(
        ErrorCode::BrokerTimeout,
        format!(
            "accounts {} did not answer within {timeout:?}",
            account_names(broker)
        ),
        "the gateway accepted the connection but did not answer; it is retried in the background: check get_server_health, then retry",
    )
}

/// One configured source: a broker, the accounts of it served, and what is known of it.
#[derive(Debug)]
struct Source {
    broker: Arc<dyn Broker>,
    /// Account ids to serve (None = every account it has).
    selection: Option<Vec<String>>,
    state: Arc<StdMutex<SourceState>>,
    /// Wakes the background retry early (a health probe saw the gateway answer).
    wake: Arc<Notify>,
}

impl Source {
    fn serves(&self, account: &str) -> bool {
        self.selection
            .as_ref()
            .is_none_or(|ids| ids.iter().any(|id| id == account))
    }

    fn state(&self) -> MutexGuard<'_, SourceState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The served accounts of a down source, as answers list them.
    fn down_rows(&self, failure: &Failure) -> Vec<Down> {
        self.broker
            .accounts()
            .into_iter()
            .filter(|a| self.serves(&a.id))
            .map(|a| Down {
                row: UnavailableAccount {
                    account: a.id,
                    broker: a.broker,
                    mode: a.mode.as_str().to_owned(),
                    code: failure.error.code.to_string(),
                    message: failure.error.message.clone(),
                    hint: failure.error.hint.clone(),
                    since: failure.since.clone(),
                },
                error: failure.error.clone(),
            })
            .collect()
    }
}

#[derive(Debug, Clone)]
struct Failure {
    error: Error,
    /// RFC 3339, UTC: when the source stopped answering.
    since: String,
}

#[derive(Debug, Default)]
struct SourceState {
    /// Moves whenever what the source contributes changes.
    version: u64,
    /// The last snapshot and the broker generation it was read at, while it answers.
    good: Option<(u64, Arc<Book>)>,
    /// The last snapshot's base currency, kept while the source is down.
    base: Option<Currency>,
    failure: Option<Failure>,
    /// A background retry is running.
    retrying: bool,
}

impl SourceState {
    fn up(&mut self, generation: u64, book: Arc<Book>) {
        self.base = Some(book.base_currency);
        self.good = Some((generation, book));
        self.failure = None;
        self.version = self.version.wrapping_add(1);
    }

    fn fail(&mut self, error: Error) {
        let since = match &self.failure {
            Some(f) if f.error == error => return,
            Some(f) => f.since.clone(),
            None => Utc::now().to_rfc3339_opts(SecondsFormat::Secs, true),
        };
        self.good = None;
        self.failure = Some(Failure { error, since });
        self.version = self.version.wrapping_add(1);
    }
}

/// Reads a down source again and again, waiting longer each time, until it answers or
/// the context is gone.
async fn retry(
    broker: Arc<dyn Broker>,
    state: Weak<StdMutex<SourceState>>,
    wake: Arc<Notify>,
    timeout: Duration,
) {
    let mut delay = RETRY_FIRST;
    loop {
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            () = wake.notified() => {}
        }
        if state.strong_count() == 0 {
            return;
        }
        let generation = broker.generation();
        let outcome = tokio::time::timeout(timeout, broker.snapshot()).await;
        let Some(state) = state.upgrade() else {
            return;
        };
        let mut st = state.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok(Ok(book)) => {
                st.up(generation, book);
                st.retrying = false;
                return;
            }
            Ok(Err(e)) => st.fail(Error::from(e)),
            Err(_) => st.fail(timeout_error(broker.as_ref(), timeout)),
        }
        delay = (delay * 2).min(RETRY_MAX);
    }
}

/// The tool context: shared by every call, cheap to clone through an `Arc`.
#[derive(Debug)]
pub struct ToolContext {
    sources: Vec<Source>,
    base_currency: Option<Currency>,
    pub sectors: SectorMap,
    pub version: String,
    pub broker_timeout: Duration,
    /// Rates from the config's `fx_file`, added to every book's (and beating them).
    extra_fx: Vec<FxQuote>,
    /// The reference-rate source (`fx_source = "ecb"`), used after the brokers' rates.
    reference_fx: Option<Arc<EcbSource>>,
    /// The merged book and its replay (open lots and cash), kept until a source's
    /// snapshot changes (a paper fill, a new minute of sim marks, a source going down or
    /// coming back).
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
    /// The toolsets listed and served (`[tools] enabled`, `--tools`); default all.
    pub toolsets: Toolsets,
    /// Whether `tools/list` gives each tool its output schema (`[tools] output_schemas`,
    /// `--output-schemas`); default no. Clients of protocols before 2025-06-18 never get
    /// them (docs/tools.md, "Toolsets").
    pub output_schemas: bool,
    /// Bar files already parsed, kept while unchanged (crate::bar_table).
    pub bar_cache: crate::bar_table::BarCache,
}

#[derive(Debug)]
struct Cached {
    /// Each source's state version when this was built.
    key: Vec<u64>,
    book: Arc<Book>,
    ledger: Option<Arc<Ledger>>,
    down: Arc<Vec<Down>>,
}

/// The down accounts beside an answer's book.
pub type DownList = Arc<Vec<Down>>;

impl ToolContext {
    pub fn new(version: impl Into<String>) -> Self {
        Self {
            sources: Vec::new(),
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
            toolsets: Toolsets::ALL,
            output_schemas: false,
            bar_cache: crate::bar_table::BarCache::default(),
        }
    }

    #[must_use]
    pub fn with_trading(mut self, trading: Arc<Trading>) -> Self {
        self.trading = Some(trading);
        self
    }

    /// Keeps parsed bar files as column files in the state directory
    /// ([`crate::bar_table::COLUMN_DIR`]), so a new process reads them back instead of
    /// parsing them again (docs/methodology/research.md, "Bar sources").
    #[must_use]
    pub fn with_column_files(mut self, state_dir: &std::path::Path) -> Self {
        self.bar_cache.set_column_dir(
            state_dir.join(crate::bar_table::COLUMN_DIR),
            crate::bar_table::DISK_BYTES,
        );
        self
    }

    /// Serves only these toolsets (get_server_health is always served).
    #[must_use]
    pub fn with_toolsets(mut self, toolsets: Toolsets) -> Self {
        self.toolsets = toolsets;
        self
    }

    /// Lists the tools with or without their output schemas.
    #[must_use]
    pub fn with_output_schemas(mut self, listed: bool) -> Self {
        self.output_schemas = listed;
        self
    }

    /// Whether the write tools are served.
    pub fn trading_enabled(&self) -> bool {
        self.trading.as_ref().is_some_and(|t| t.settings.enabled)
    }

    /// The equity an account's broker itself reports for it, in the broker's currency
    /// (`None` where it reports none).
    pub fn reported_equity(
        &self,
        account: &str,
    ) -> Option<(tradedesk_core::Currency, rust_decimal::Decimal)> {
        self.broker_for(account)
            .and_then(|b| b.reported_equity(account))
    }

    /// The margin figures an account's broker itself reports for it (`None` where it
    /// reports none).
    pub fn reported_margin(&self, account: &str) -> Option<tradedesk_brokers::AccountMargin> {
        self.broker_for(account)
            .and_then(|b| b.reported_margin(account))
    }

    /// The broker serving `account`, if any.
    pub fn broker_for(&self, account: &str) -> Option<Arc<dyn Broker>> {
        self.sources
            .iter()
            .find(|s| s.broker.accounts().iter().any(|a| a.id == account) && s.serves(account))
            .map(|s| Arc::clone(&s.broker))
    }

    /// Every served account id with its broker.
    pub fn served_accounts(&self) -> Vec<(tradedesk_core::Account, Arc<dyn Broker>)> {
        let mut out = Vec::new();
        for source in &self.sources {
            for account in source.broker.accounts() {
                if source.serves(&account.id) {
                    out.push((account, Arc::clone(&source.broker)));
                }
            }
        }
        out
    }

    /// Adds a broker, serving only `accounts` of it when given.
    #[must_use]
    pub fn with_broker(mut self, broker: Arc<dyn Broker>, accounts: Option<Vec<String>>) -> Self {
        self.sources.push(Source {
            broker,
            selection: accounts,
            state: Arc::default(),
            wake: Arc::new(Notify::new()),
        });
        self
    }

    /// The report currency when a call names none (else the first book's).
    #[must_use]
    pub fn with_base_currency(mut self, currency: Currency) -> Self {
        self.base_currency = Some(currency);
        self
    }

    /// The base currency as far as it is known without asking any broker: the
    /// configured one, else the first source's (a book file's, or the last snapshot's).
    pub fn known_base_currency(&self) -> Option<Currency> {
        self.base_currency.or_else(|| {
            let first = self.sources.first()?;
            let known = first.state().base;
            known.or_else(|| first.broker.base_currency())
        })
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

    /// The merged book of every account that answers, built once per change.
    ///
    /// # Errors
    /// The error of the first account when no account answers (`broker_unavailable`,
    /// `broker_timeout`, ...), or `invalid_argument` when two sources disagree about an
    /// instrument.
    pub async fn book(&self) -> Result<Arc<Book>> {
        self.served().await.0
    }

    /// The merged book of the accounts that answer, and the accounts that do not (each
    /// with its error). Every source whose snapshot is out of date is read at once,
    /// concurrently, each bounded by the broker timeout; a source already down is never
    /// waited for (it is retried in the background).
    ///
    /// # Errors
    /// As [`ToolContext::book`]; the down accounts are listed either way.
    pub async fn served(&self) -> (Result<Arc<Book>>, DownList) {
        let mut cache = self.cache.lock().await;
        self.refresh(None).await;
        let mut key = Vec::with_capacity(self.sources.len());
        let mut parts = Vec::with_capacity(self.sources.len());
        let mut down = Vec::new();
        let mut first_base = None;
        for (i, source) in self.sources.iter().enumerate() {
            let st = source.state();
            key.push(st.version);
            if i == 0 {
                first_base = st.base.or_else(|| source.broker.base_currency());
            }
            if let Some((_, book)) = &st.good {
                parts.push((Arc::clone(book), source.selection.clone()));
            } else if let Some(failure) = &st.failure {
                down.extend(source.down_rows(failure));
            }
        }
        if let Some(cached) = cache.as_ref()
            && cached.key == key
        {
            return (Ok(Arc::clone(&cached.book)), Arc::clone(&cached.down));
        }
        // A book file that breaks the format is refused whole, as it is at start when read
        // at once: no answer leaves its accounts out quietly.
        if let Some(error) = self.refused_book() {
            *cache = None;
            return (Err(error), Arc::new(down));
        }
        let down = Arc::new(down);
        if parts.is_empty()
            && let Some(first) = down.first()
        {
            let mut error = first.error.clone();
            let others: Vec<&str> = down
                .iter()
                .skip(1)
                .map(|d| d.row.account.as_str())
                .filter(|id| *id != first.row.account)
                .collect();
            if !others.is_empty() {
                error.message = format!(
                    "{}; no configured account answers (also down: {})",
                    error.message,
                    others.join(", ")
                );
            }
            *cache = None;
            return (Err(error), down);
        }
        let reference = match &self.reference_fx {
            Some(source) => Some(source.rates().await),
            None => None,
        };
        let built = if self.sources.len() == 1
            && parts.len() == 1
            && parts[0].1.is_none()
            && self.base_currency.is_none()
            && self.extra_fx.is_empty()
            && reference.is_none()
        {
            Ok(Arc::clone(&parts[0].0))
        } else {
            let base = self.base_currency.or(first_base);
            let reference_quotes: &[FxQuote] =
                reference.as_ref().map_or(&[], |r| r.quotes.as_slice());
            merge_books(&parts, base, &self.extra_fx, reference_quotes).map(|mut book| {
                if let Some(r) = &reference {
                    book.notes.extend(r.notes.iter().cloned());
                }
                if base.is_none() && !down.is_empty() {
                    book.notes.push(format!(
                        "the report currency is {}, the first answering account's: the first configured account has not answered yet; set base_currency in tradedesk.toml to fix it",
                        book.base_currency
                    ));
                }
                Arc::new(book)
            })
        };
        match built {
            Ok(book) => {
                *cache = Some(Cached {
                    key,
                    book: Arc::clone(&book),
                    ledger: None,
                    down: Arc::clone(&down),
                });
                (Ok(book), down)
            }
            Err(e) => (Err(e), down),
        }
    }

    /// One account's own source, read if out of date (bounded by the broker timeout),
    /// without waiting for any other source: what a close or a reducing order needs, so
    /// getting out never depends on another broker (docs/methodology/trading.md).
    ///
    /// # Errors
    /// `unknown_account`, or the source's own failure.
    pub async fn account_book(&self, account: &str) -> Result<Arc<Book>> {
        let Some(i) = self
            .sources
            .iter()
            .position(|s| s.serves(account) && s.broker.accounts().iter().any(|a| a.id == account))
        else {
            if let Some(error) = self.refused_book() {
                return Err(error);
            }
            return Err(Error::new(
                ErrorCode::UnknownAccount,
                format!(
                    "no configured account is called {}",
                    tradedesk_core::error::quote(account)
                ),
                "call get_accounts for the ids this server serves",
            ));
        };
        self.refresh(Some(i)).await;
        let st = self.sources[i].state();
        match (&st.good, &st.failure) {
            (Some((_, book)), _) => Ok(Arc::clone(book)),
            (None, Some(failure)) => Err(failure.error.clone()),
            (None, None) => Err(Error::internal(format!(
                "account {account} has not been read yet"
            ))),
        }
    }

    /// The report currency: `base_currency` from the config, else `book`'s.
    pub fn base_currency_or(&self, book: &Book) -> Currency {
        self.base_currency.unwrap_or(book.base_currency)
    }

    /// The error of the first source whose book file was refused (`invalid_book`), as
    /// last read: a file read in the background fails its first snapshot this way.
    pub fn refused_book(&self) -> Option<Error> {
        self.sources.iter().find_map(|s| {
            s.state()
                .failure
                .as_ref()
                .filter(|f| f.error.code == ErrorCode::InvalidBook)
                .map(|f| f.error.clone())
        })
    }

    /// The served accounts whose sources are down now (as last read; nothing is read).
    pub fn down_accounts(&self) -> Vec<String> {
        self.sources
            .iter()
            .filter(|s| s.state().failure.is_some())
            .flat_map(|s| {
                s.broker
                    .accounts()
                    .into_iter()
                    .filter(|a| s.serves(&a.id))
                    .map(|a| a.id)
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// Reads every source whose snapshot is out of date (or only source `only`),
    /// concurrently, each bounded by the broker timeout; starts the background retry of
    /// every source that is down.
    async fn refresh(&self, only: Option<usize>) {
        let mut reads = tokio::task::JoinSet::new();
        let mut ids = std::collections::HashMap::new();
        for (i, source) in self.sources.iter().enumerate() {
            if only.is_some_and(|o| o != i) {
                continue;
            }
            let generation = source.broker.generation();
            let stale = {
                let mut st = source.state();
                if st.failure.is_some() {
                    self.start_retry(source, &mut st);
                    false
                } else {
                    st.good.as_ref().is_none_or(|(g, _)| *g != generation)
                }
            };
            if stale {
                let broker = Arc::clone(&source.broker);
                let timeout = self.broker_timeout;
                let handle = reads
                    .spawn(async move { tokio::time::timeout(timeout, broker.snapshot()).await });
                ids.insert(handle.id(), (i, generation));
            }
        }
        while let Some(joined) = reads.join_next_with_id().await {
            let (id, outcome) = match joined {
                Ok((id, outcome)) => (id, Some(outcome)),
                Err(e) => (e.id(), None),
            };
            let Some(&(i, generation)) = ids.get(&id) else {
                continue;
            };
            let source = &self.sources[i];
            let mut st = source.state();
            match outcome {
                Some(Ok(Ok(book))) => st.up(generation, book),
                Some(Ok(Err(e))) => st.fail(Error::from(e)),
                Some(Err(_)) => st.fail(timeout_error(source.broker.as_ref(), self.broker_timeout)),
                None => st.fail(Error::internal(format!(
                    "reading accounts {} failed unexpectedly",
                    account_names(source.broker.as_ref())
                ))),
            }
            if st.failure.is_some() {
                self.start_retry(source, &mut st);
            }
        }
    }

    fn start_retry(&self, source: &Source, st: &mut SourceState) {
        // A refused book file answers the same every time: it is read once.
        let refused = st
            .failure
            .as_ref()
            .is_some_and(|f| f.error.code == ErrorCode::InvalidBook);
        if st.retrying || refused {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        st.retrying = true;
        runtime.spawn(retry(
            Arc::clone(&source.broker),
            Arc::downgrade(&source.state),
            Arc::clone(&source.wake),
            self.broker_timeout,
        ));
    }

    /// Reads every source once, so the first tool call finds them read: what `serve`
    /// starts beside the transport, never before it.
    pub async fn warm_up(&self) {
        let _ = self.served().await;
    }

    /// The merged book replayed once (open lots and implied cash), shared by every call
    /// that values holdings. Realized P&L replays on its own: it needs the closed lots,
    /// which are never stored.
    ///
    /// # Errors
    /// As [`ToolContext::book`], or the replay's `internal` (a commission without a rate
    /// is noted, never an error).
    pub async fn ledger(&self) -> Result<(Arc<Book>, Arc<Ledger>)> {
        self.served_ledger().await.0
    }

    /// As [`ToolContext::ledger`], with the accounts left out.
    ///
    /// # Errors
    /// As [`ToolContext::ledger`]; the down accounts are listed either way.
    pub async fn served_ledger(&self) -> (Result<(Arc<Book>, Arc<Ledger>)>, DownList) {
        let (book, down) = self.served().await;
        let book = match book {
            Ok(b) => b,
            Err(e) => return (Err(e), down),
        };
        let mut cache = self.cache.lock().await;
        if let Some(cached) = cache.as_mut()
            && Arc::ptr_eq(&cached.book, &book)
        {
            if let Some(ledger) = &cached.ledger {
                return (Ok((book, Arc::clone(ledger))), down);
            }
            return match ledger::replay(&book, |_, _| {}) {
                Ok(ledger) => {
                    let ledger = Arc::new(ledger);
                    cached.ledger = Some(Arc::clone(&ledger));
                    (Ok((book, ledger)), down)
                }
                Err(e) => (Err(e), down),
            };
        }
        drop(cache);
        (
            ledger::replay(&book, |_, _| {}).map(|l| (book, Arc::new(l))),
            down,
        )
    }

    /// Probes every broker at once, each bounded by the broker timeout. A source that
    /// is down but whose probe answers is retried at once.
    pub async fn health(&self) -> Vec<AccountHealth> {
        let mut probes = tokio::task::JoinSet::new();
        let mut ids = std::collections::HashMap::new();
        for (i, source) in self.sources.iter().enumerate() {
            let broker = Arc::clone(&source.broker);
            let timeout = self.broker_timeout;
            let handle =
                probes.spawn(async move { tokio::time::timeout(timeout, broker.health()).await });
            ids.insert(handle.id(), i);
        }
        let mut answers: Vec<Option<Vec<AccountHealth>>> = vec![None; self.sources.len()];
        while let Some(joined) = probes.join_next_with_id().await {
            if let Ok((id, Ok(rows))) = joined
                && let Some(&i) = ids.get(&id)
            {
                answers[i] = Some(rows);
            }
        }
        let mut out = Vec::new();
        for (source, answer) in self.sources.iter().zip(answers) {
            match answer {
                Some(rows) => {
                    let answered = rows.iter().any(|r| r.status != HealthStatus::Down);
                    if answered && source.state().failure.is_some() {
                        source.wake.notify_one();
                    }
                    out.extend(rows.into_iter().filter(|r| source.serves(&r.account)));
                }
                None => out.extend(
                    source
                        .broker
                        .accounts()
                        .into_iter()
                        .filter(|a| source.serves(&a.id))
                        .map(|a| AccountHealth {
                            account: a.id,
                            broker: a.broker,
                            mode: a.mode,
                            status: HealthStatus::Down,
                            latency_ms: None,
                            detail: format!("no answer within {:?}", self.broker_timeout),
                            hint: Some(
                                "check that the gateway is running and reachable".to_owned(),
                            ),
                        }),
                ),
            }
        }
        out
    }
}
