//! Interactive Brokers, from its Activity Flex statements: a local XML file, or the Flex
//! Web Service (`SendRequest` with the query id and token, then `GetStatement` with the
//! reference code it answers, retried while IBKR is still generating the statement).
//! The statement is the account's full history, which the TWS socket API cannot give
//! (it returns only days of executions).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use quick_xml::Reader;
use quick_xml::events::Event;
use tokio::sync::Mutex;
use tradedesk_core::{Account, Book, Mode};

use crate::flex::{FlexOptions, flex_to_book};
use crate::{AccountHealth, Broker, BrokerError, HealthStatus};

/// IBKR's Flex Web Service (version 3).
pub const FLEX_SERVICE_URL: &str =
    "https://ndcdyn.interactivebrokers.com/AccountManagement/FlexWebService";

/// Where a Flex statement comes from.
#[derive(Clone)]
pub enum FlexSource {
    File(PathBuf),
    Service {
        url: String,
        query_id: String,
        token: String,
    },
}

impl std::fmt::Debug for FlexSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(p) => write!(f, "File({})", p.display()),
            // Never the token.
            Self::Service { url, query_id, .. } => write!(f, "Service({url}, query {query_id})"),
        }
    }
}

/// An IBKR account served from its Flex statement.
#[derive(Debug)]
pub struct IbkrFlexBroker {
    /// The config's name for the account (`id`), and IBKR's account number.
    id: String,
    ibkr_account: Option<String>,
    source: FlexSource,
    timeout: Duration,
    client: reqwest::Client,
    /// The statement is a day's history: fetched once per process, then kept.
    cache: Mutex<Option<Arc<Book>>>,
    options: FlexOptions,
}

fn unavailable(id: &str, detail: String, hint: &str) -> BrokerError {
    BrokerError::Unavailable {
        account: id.to_owned(),
        detail,
        hint: hint.to_owned(),
    }
}

/// The few fields of a `FlexStatementResponse` the protocol needs.
#[derive(Debug, Default, PartialEq, Eq)]
struct ServiceAnswer {
    status: String,
    reference: Option<String>,
    url: Option<String>,
    error_code: Option<String>,
    error_message: Option<String>,
}

fn service_answer(xml: &str) -> Option<ServiceAnswer> {
    let mut reader = Reader::from_str(xml);
    let mut answer = ServiceAnswer::default();
    let mut current = String::new();
    let mut seen_root = false;
    loop {
        match reader.read_event().ok()? {
            Event::Start(e) => {
                let name = e.local_name().as_ref().to_owned();
                if name == "FlexStatementResponse" {
                    seen_root = true;
                }
                current = name;
            }
            Event::Text(t) => {
                let text = t.into_inner().trim().to_owned();
                match current.as_str() {
                    "Status" => answer.status = text,
                    "ReferenceCode" => answer.reference = Some(text),
                    "Url" => answer.url = Some(text),
                    "ErrorCode" => answer.error_code = Some(text),
                    "ErrorMessage" => answer.error_message = Some(text),
                    _ => {}
                }
            }
            Event::End(_) => current.clear(),
            Event::DocType(_) => return None,
            Event::Eof => break,
            _ => {}
        }
    }
    seen_root.then_some(answer)
}

impl IbkrFlexBroker {
    /// # Errors
    /// The HTTP client cannot be built.
    pub fn new(
        id: impl Into<String>,
        ibkr_account: Option<String>,
        source: FlexSource,
        timeout: Duration,
    ) -> Result<Self, BrokerError> {
        let id = id.into();
        let client = crate::http_client(&id, timeout)?;
        Ok(Self {
            id,
            ibkr_account,
            source,
            timeout,
            client,
            cache: Mutex::new(None),
            options: FlexOptions::default(),
        })
    }

    /// How the statement is read (time zone, account prefix, cost fractions).
    #[must_use]
    pub fn with_options(mut self, options: FlexOptions) -> Self {
        self.options = options;
        self
    }

    async fn get_text(&self, url: &str, query: &[(&str, &str)]) -> Result<String, BrokerError> {
        let response = self
            .client
            .get(url)
            .query(query)
            .send()
            .await
            .map_err(|e| {
                // The URL carries the token: never in a message.
                let e = e.without_url();
                if e.is_timeout() {
                    BrokerError::Timeout {
                        account: self.id.clone(),
                        timeout: self.timeout,
                    }
                } else {
                    unavailable(
                        &self.id,
                        format!("the Flex Web Service cannot be reached: {e}"),
                        "check the network, or point flex.path at a downloaded statement",
                    )
                }
            })?;
        if !response.status().is_success() {
            return Err(unavailable(
                &self.id,
                format!(
                    "the Flex Web Service answered HTTP {}",
                    response.status().as_u16()
                ),
                "retry later, or point flex.path at a downloaded statement",
            ));
        }
        response.text().await.map_err(|e| {
            unavailable(
                &self.id,
                format!("reading the Flex answer: {}", e.without_url()),
                "retry later",
            )
        })
    }

    /// The statement's XML, from the file or the service.
    async fn statement(&self) -> Result<String, BrokerError> {
        match &self.source {
            FlexSource::File(path) => tokio::fs::read_to_string(path).await.map_err(|e| {
                unavailable(
                    &self.id,
                    format!("{}: {e}", path.display()),
                    "point flex.path at an Activity Flex statement (XML) exported from Client Portal",
                )
            }),
            FlexSource::Service {
                url,
                query_id,
                token,
            } => {
                let base = url.trim_end_matches('/');
                let sent = self
                    .get_text(
                        &format!("{base}/SendRequest"),
                        &[("t", token), ("q", query_id), ("v", "3")],
                    )
                    .await?;
                let answer = service_answer(&sent).ok_or_else(|| {
                    unavailable(
                        &self.id,
                        "SendRequest did not answer a FlexStatementResponse".to_owned(),
                        "check flex.url",
                    )
                })?;
                let reference = match (answer.status.as_str(), &answer.reference) {
                    ("Success", Some(r)) => r.clone(),
                    _ => return Err(self.service_error(&answer)),
                };
                let statement_url = answer
                    .url
                    .clone()
                    .unwrap_or_else(|| format!("{base}/GetStatement"));
                // IBKR builds the statement asynchronously: 1019 means "not yet". The
                // whole fetch stays within the account's timeout.
                let deadline = Instant::now() + self.timeout.max(Duration::from_secs(1));
                let mut wait = Duration::from_millis(250);
                loop {
                    let text = self
                        .get_text(&statement_url, &[("t", token), ("q", &reference), ("v", "3")])
                        .await?;
                    if text.contains("<FlexQueryResponse") {
                        return Ok(text);
                    }
                    let answer = service_answer(&text).unwrap_or_default();
                    let pending = answer.error_code.as_deref() == Some("1019");
                    if !pending || Instant::now() + wait > deadline {
                        return Err(if pending {
                            BrokerError::Timeout {
                                account: self.id.clone(),
                                timeout: self.timeout,
                            }
                        } else {
                            self.service_error(&answer)
                        });
                    }
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    fn service_error(&self, answer: &ServiceAnswer) -> BrokerError {
        let code = answer.error_code.as_deref().unwrap_or("?");
        let hint = match code {
            "1012" | "1015" => {
                "the Flex token is invalid or expired: make a new one in Client Portal (Reporting > Flex Queries > Flex Web Service) and put it in the variable named by flex.token_env"
            }
            "1014" | "1020" => {
                "the query id is wrong: flex.query_id is the number of the Activity Flex Query"
            }
            "1018" => "IBKR limits requests: wait a minute",
            _ => "check flex.query_id and the token, or use a downloaded statement (flex.path)",
        };
        unavailable(
            &self.id,
            format!(
                "the Flex Web Service refused: {} (code {code})",
                tradedesk_core::error::quote(
                    answer.error_message.as_deref().unwrap_or("no message")
                )
            ),
            hint,
        )
    }

    async fn load(&self) -> Result<Arc<Book>, BrokerError> {
        let mut cache = self.cache.lock().await;
        if let Some(book) = cache.as_ref() {
            return Ok(Arc::clone(book));
        }
        let xml = self.statement().await?;
        let import = flex_to_book(&xml, &self.options).map_err(|e| {
            unavailable(
                &self.id,
                format!("the Flex statement: {e}"),
                "re-export the statement with the Trades section",
            )
        })?;
        let mut book = import.to_book(&self.id).map_err(|e| {
            unavailable(
                &self.id,
                format!("the Flex statement converts to an invalid book: {e}"),
                "report this statement's shape as a bug",
            )
        })?;
        // The config names the account: one of the statement's, under the config's id.
        let wanted = self.ibkr_account.as_deref().map(|a| format!("IBKR-{a}"));
        let keep = match &wanted {
            Some(w) => book
                .accounts
                .iter()
                .position(|a| &a.id == w)
                .ok_or_else(|| {
                    unavailable(
                        &self.id,
                        format!(
                            "the statement has no account {}",
                            w.trim_start_matches("IBKR-")
                        ),
                        "set account to one of the statement's accounts, or remove it",
                    )
                })?,
            None if book.accounts.len() == 1 => 0,
            None => {
                return Err(unavailable(
                    &self.id,
                    format!("the statement holds {} accounts", book.accounts.len()),
                    "set account = \"U…\" to pick one, or list one [[accounts]] entry per account",
                ));
            }
        };
        book.notes = import
            .notes
            .iter()
            .filter(|n| {
                // Each account's notes, and those about the whole statement.
                let other =
                    |a: &tradedesk_core::Account| a.id.trim_start_matches("IBKR-").to_owned();
                let others: Vec<String> = book
                    .accounts
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| *i != keep)
                    .map(|(_, a)| other(a))
                    .collect();
                !others.iter().any(|o| n.contains(o.as_str()))
            })
            .map(|n| format!("{}: {n}", self.id))
            .collect();
        book = keep_account(&book, keep, &self.id);
        let book = Arc::new(book);
        *cache = Some(Arc::clone(&book));
        Ok(book)
    }
}

/// The book of one of its accounts, renamed to the config's id.
fn keep_account(book: &Book, keep: usize, id: &str) -> Book {
    let keep_idx = u32::try_from(keep).unwrap_or(u32::MAX);
    let mut parts = book.to_parts();
    let mut account = book.accounts[keep].clone();
    account.id = id.to_owned();
    parts.base_currency = account.currency;
    parts.accounts = vec![account];
    parts.fills.retain(|f| f.account == keep_idx);
    parts.fills.iter_mut().for_each(|f| f.account = 0);
    parts.cash.retain(|c| c.account == keep_idx);
    parts.cash.iter_mut().for_each(|c| c.account = 0);
    parts.reported_positions.retain(|r| r.account == keep_idx);
    parts
        .reported_positions
        .iter_mut()
        .for_each(|r| r.account = 0);
    // The other accounts' corporate actions name accounts this book no longer has.
    parts.corporate_actions.retain(|a| a.account == keep_idx);
    parts
        .corporate_actions
        .iter_mut()
        .for_each(|a| a.account = 0);
    Book::assemble(parts)
}

#[async_trait]
impl Broker for IbkrFlexBroker {
    fn accounts(&self) -> Vec<Account> {
        vec![Account {
            id: self.id.clone(),
            broker: "ibkr".to_owned(),
            currency: tradedesk_core::Currency::USD,
            name: Some("Interactive Brokers (Flex statement)".to_owned()),
            mode: Mode::Book,
        }]
    }

    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        self.load().await
    }

    async fn health(&self) -> Vec<AccountHealth> {
        let started = Instant::now();
        let result = self.load().await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (status, detail, hint) = match result {
            Ok(book) => (
                HealthStatus::Ok,
                format!(
                    "Flex statement ({}), {} fill(s), as of {}",
                    match &self.source {
                        FlexSource::File(p) => p.display().to_string(),
                        FlexSource::Service { .. } => "Flex Web Service".to_owned(),
                    },
                    book.fills.len(),
                    book.as_of
                ),
                None,
            ),
            Err(e) => crate::down(&e, None, "retry later"),
        };
        vec![AccountHealth {
            account: self.id.clone(),
            broker: "ibkr".to_owned(),
            mode: Mode::Book,
            status,
            latency_ms: Some(latency_ms),
            detail,
            hint,
        }]
    }

    /// The instruments of the account's statement ([`crate::search::from_book`]).
    async fn search_instruments(
        &self,
        account: &str,
        query: &crate::search::InstrumentQuery,
    ) -> Result<crate::search::InstrumentMatches, BrokerError> {
        crate::check_served(&self.id, account)?;
        let book = self.load().await?;
        Ok(crate::search::from_book(&book, account, query))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_service_answers_are_read_field_by_field() {
        let ok = "<FlexStatementResponse timestamp='28 August, 2026 10:37 AM EDT'>\n<Status>Success</Status>\n<ReferenceCode>1234567890</ReferenceCode>\n<Url>https://example.invalid/GetStatement</Url>\n</FlexStatementResponse>";
        let a = service_answer(ok).unwrap();
        assert_eq!(a.status, "Success");
        assert_eq!(a.reference.as_deref(), Some("1234567890"));
        let fail = "<FlexStatementResponse><Status>Fail</Status><ErrorCode>1015</ErrorCode><ErrorMessage>Token is invalid.</ErrorMessage></FlexStatementResponse>";
        let a = service_answer(fail).unwrap();
        assert_eq!(a.error_code.as_deref(), Some("1015"));
        assert!(service_answer("<html>login</html>").is_none());
        assert!(service_answer("<!DOCTYPE x [<!ENTITY e 'x'>]><FlexStatementResponse/>").is_none());
    }
}
