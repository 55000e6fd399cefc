//! `get_news` through TWS / IB Gateway (docs/dev/ibkr-tws-facts.md, "News"): the news
//! providers the user subscribes to (`reqNewsProviders`), then one `reqHistoricalNews`
//! per symbol (its conId, every provider code joined by `+`, the window, a count),
//! answered by `historicalNews` rows (time, provider code, article id, headline) and a
//! `historicalNewsEnd`. IBKR gives headlines only: no summary, no link, no author. Some
//! providers start a headline with a `{A:…:L:…:K:…:C:…}` metadata block: it is taken off
//! the headline and kept as the article's metadata, keys and values as sent.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};

use super::TwsBroker;
use crate::BrokerError;
use crate::news::{NewsArticle, NewsPage, NewsQuery};

/// The most headlines one `reqHistoricalNews` asks for: IBKR allows 300, and `ibapi`
/// carries the count in a byte.
const PER_REQUEST_MAX: usize = 255;
/// The window read when `start` is not given: this long before the end.
const DEFAULT_DAYS: i64 = 30;

/// A headline without its leading `{key:value:…}` block, and the block's pairs. A
/// headline without one (or with a block that is not pairs) is kept whole.
pub(super) fn split_headline(raw: &str) -> (String, Vec<(String, String)>) {
    let trimmed = raw.trim_start();
    let Some(inner_end) = trimmed
        .strip_prefix('{')
        .and_then(|rest| rest.find('}').map(|i| (rest, i)))
    else {
        return (raw.to_owned(), Vec::new());
    };
    let (rest, end) = inner_end;
    let parts: Vec<&str> = rest[..end].split(':').collect();
    let keyed = parts.len().is_multiple_of(2)
        && parts
            .iter()
            .step_by(2)
            .all(|k| !k.is_empty() && k.chars().all(|c| c.is_ascii_alphabetic()));
    if !keyed {
        return (raw.to_owned(), Vec::new());
    }
    let pairs = parts
        .chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => Some(((*k).to_owned(), (*v).to_owned())),
            _ => None,
        })
        .collect();
    (rest[end + 1..].trim().to_owned(), pairs)
}

fn to_time(t: DateTime<Utc>) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::from_unix_timestamp(t.timestamp()).ok()
}

impl TwsBroker {
    /// The conId of a symbol: the account's own contract's, else IBKR's matching
    /// symbols' stock of exactly that ticker (on the exchange an `EXCHANGE:` prefix
    /// names, in USD without one).
    async fn con_id_of(&self, symbol: &str) -> Result<Option<i32>, BrokerError> {
        let contract = self.contract_for(symbol);
        if contract.contract_id != 0 {
            return Ok(Some(contract.contract_id));
        }
        let (exchange, bare) = symbol
            .split_once(':')
            .map_or((None, symbol), |(e, s)| (Some(e), s));
        let m = self.matching(bare).await?;
        let pick = m
            .listed
            .iter()
            .filter(|i| i.key.symbol.eq_ignore_ascii_case(bare))
            .filter(|i| match exchange {
                Some(e) => i.key.exchange.eq_ignore_ascii_case(e),
                None => i.currency.as_deref() == Some("USD"),
            })
            .find_map(|i| i.venue_symbol.as_deref()?.parse::<i32>().ok());
        Ok(pick)
    }

    pub(super) async fn read_news(
        &self,
        account: &str,
        q: &NewsQuery,
    ) -> Result<NewsPage, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let mut page = NewsPage::default();
        let timeout = self.config.timeout;
        let providers = self
            .with_session(|s| async move {
                match tokio::time::timeout(timeout, s.client.news_providers()).await {
                    Ok(Ok(p)) => Ok(p),
                    Ok(Err(e)) => Err(self.failure(&e, "listing news providers")),
                    Err(_) => Err(self.timeout()),
                }
            })
            .await?;
        let providers: Vec<(String, String)> = providers
            .into_iter()
            .filter(|p| !p.code.trim().is_empty())
            .map(|p| (p.code, p.name))
            .collect();
        if providers.is_empty() {
            page.notes.push(format!(
                "{account}: IBKR news needs a news subscription: TWS lists no news provider for this user (subscribe to a news feed in IBKR's Client Portal, then try again)"
            ));
            return Ok(page);
        }
        if q.symbols.is_empty() {
            page.notes.push(format!(
                "{account}: IBKR's historical news is read per contract: give symbols to read its headlines"
            ));
            return Ok(page);
        }
        let names: BTreeMap<&str, &str> = providers
            .iter()
            .map(|(c, n)| (c.as_str(), n.as_str()))
            .collect();
        let codes: Vec<&str> = providers.iter().map(|(c, _)| c.as_str()).collect();
        let end = q.end.unwrap_or_else(Utc::now);
        let start = q.start.unwrap_or(end - Duration::days(DEFAULT_DAYS));
        if q.start.is_none() {
            page.notes.push(format!(
                "{account}: IBKR's headlines from the {DEFAULT_DAYS} days before the end (no start given)"
            ));
        }
        let (Some(from), Some(to)) = (to_time(start), to_time(end)) else {
            return Err(BrokerError::InvalidRequest {
                account: account.to_owned(),
                reason: "the window is outside the dates TWS takes".to_owned(),
            });
        };
        let want = q.limit.clamp(1, PER_REQUEST_MAX);
        let count = u8::try_from(want).unwrap_or(u8::MAX);
        let mut untimed = 0usize;
        for symbol in &q.symbols {
            let Some(con_id) = self.con_id_of(symbol).await? else {
                page.notes.push(format!(
                    "{account}: {symbol}: IBKR lists no stock of that symbol (use EXCHANGE:SYMBOL for non-US stocks): no news read for it"
                ));
                continue;
            };
            let answer = self
                .with_session(|s| {
                    let codes = codes.clone();
                    async move {
                        let deadline = tokio::time::Instant::now() + timeout;
                        let sub = tokio::time::timeout_at(
                            deadline,
                            s.client.historical_news(con_id, &codes, from, to, count),
                        )
                        .await
                        .map_err(|_| self.timeout())?
                        .map_err(|e| self.failure(&e, "requesting news"))?;
                        let mut sub = sub;
                        self.read(&mut sub, deadline, |_| false, "reading news")
                            .await
                    }
                })
                .await;
            let rows = match answer {
                Ok(rows) => rows,
                Err(BrokerError::Timeout { .. }) => return Err(self.timeout()),
                Err(e) => {
                    page.notes.push(format!(
                        "{account}: {symbol} (conId {con_id}): no news: {e}"
                    ));
                    continue;
                }
            };
            // IBKR's own hasMore is lost inside ibapi (docs/dev/ibkr-tws-facts.md, "News"):
            // a full answer may have more behind it.
            if rows.len() >= want {
                page.more = true;
            }
            for row in rows {
                let Some(created) = DateTime::from_timestamp(row.time.unix_timestamp(), 0)
                    .filter(|t| t.timestamp() > 0)
                else {
                    untimed += 1;
                    continue;
                };
                let (headline, meta) = split_headline(&row.headline);
                if headline.is_empty() || row.article_id.is_empty() {
                    untimed += 1;
                    continue;
                }
                if page.articles.iter().any(|a| a.id == row.article_id) {
                    if let Some(a) = page.articles.iter_mut().find(|a| a.id == row.article_id)
                        && !a.symbols.contains(symbol)
                    {
                        a.symbols.push(symbol.clone());
                    }
                    continue;
                }
                let source = match names.get(row.provider_code.as_str()) {
                    Some(name) if !name.trim().is_empty() => {
                        format!("{} ({})", name.trim(), row.provider_code)
                    }
                    _ => row.provider_code.clone(),
                };
                page.articles.push(NewsArticle {
                    id: row.article_id,
                    headline,
                    source,
                    author: None,
                    created,
                    updated: None,
                    symbols: vec![symbol.clone()],
                    summary: None,
                    url: None,
                    meta,
                });
            }
        }
        page.articles.sort_by_key(|a| std::cmp::Reverse(a.created));
        if page.articles.len() > q.limit {
            page.articles.truncate(q.limit);
            page.more = true;
        }
        page.notes.push(format!(
            "{account}: IBKR's historical news gives headlines only: summary, link and author are null (not sent, not made up); the article body is IBKR's reqNewsArticle, not read. Providers asked: {}",
            codes.join("+")
        ));
        if untimed > 0 {
            page.notes.push(format!(
                "{account}: {untimed} of IBKR's headline(s) left out: no readable time, id or headline"
            ));
        }
        Ok(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metadata_block_is_taken_off_the_headline() {
        let (h, m) = split_headline("{A:800015:L:en:K:n/a:C:0.97}Apple beats estimates");
        assert_eq!(h, "Apple beats estimates");
        assert_eq!(
            m,
            [
                ("A".to_owned(), "800015".to_owned()),
                ("L".to_owned(), "en".to_owned()),
                ("K".to_owned(), "n/a".to_owned()),
                ("C".to_owned(), "0.97".to_owned())
            ]
        );
        let (h, m) = split_headline("{not pairs} stays");
        assert_eq!((h.as_str(), m.len()), ("{not pairs} stays", 0));
        let (h, m) = split_headline("Plain headline");
        assert_eq!((h.as_str(), m.len()), ("Plain headline", 0));
    }
}
