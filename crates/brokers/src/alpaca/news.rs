//! Alpaca's news API (`GET /v1beta1/news` on the market-data host): articles about the
//! symbols asked (any when none), newest first, followed by `next_page_token` until the
//! limit is read. Only the headline, summary and metadata are asked for
//! (`include_content=false`): the article bodies are not read.

use chrono::SecondsFormat;
use serde_json::Value;

use super::{AlpacaBroker, text, time};
use crate::BrokerError;
use crate::news::{NewsArticle, NewsPage, NewsQuery};

/// The most articles one page of Alpaca's news API holds (its `limit` maximum).
const NEWS_PAGE_MAX: usize = 50;
/// Pages read for one query at most: a page shorter than asked is followed, not looped on.
const NEWS_PAGES: usize = 10;

/// An article of the answer; `None` without the fields an article must have (an id, a
/// headline and a time).
fn article(row: &Value) -> Option<NewsArticle> {
    let id = match row.get("id")? {
        Value::Number(n) => n.to_string(),
        Value::String(s) if !s.is_empty() => s.clone(),
        _ => return None,
    };
    let headline = text(row, "headline")?.to_owned();
    let created = time(row, "created_at")?;
    let given = |field: &str| {
        text(row, field)
            .filter(|s| !s.trim().is_empty())
            .map(str::to_owned)
    };
    Some(NewsArticle {
        id,
        headline,
        source: given("source").unwrap_or_else(|| "not stated".to_owned()),
        author: given("author"),
        created,
        updated: time(row, "updated_at"),
        symbols: row
            .get("symbols")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        summary: given("summary"),
        url: given("url"),
        meta: Vec::new(),
    })
}

impl AlpacaBroker {
    pub(super) async fn read_news(&self, q: &NewsQuery) -> Result<NewsPage, BrokerError> {
        let account = self.config.account.clone();
        let symbols: Vec<&str> = q
            .symbols
            .iter()
            .map(|s| s.rsplit_once(':').map_or(s.as_str(), |(_, bare)| bare))
            .collect();
        let mut page = NewsPage::default();
        let mut skipped = 0usize;
        let mut token: Option<String> = None;
        for _ in 0..NEWS_PAGES {
            let want = q
                .limit
                .saturating_sub(page.articles.len())
                .min(NEWS_PAGE_MAX);
            let mut query = vec![
                ("limit", want.max(1).to_string()),
                ("sort", "desc".to_owned()),
                ("include_content", "false".to_owned()),
            ];
            if !symbols.is_empty() {
                query.push(("symbols", symbols.join(",")));
            }
            if let Some(s) = q.start {
                query.push(("start", s.to_rfc3339_opts(SecondsFormat::Secs, true)));
            }
            if let Some(e) = q.end {
                query.push(("end", e.to_rfc3339_opts(SecondsFormat::Secs, true)));
            }
            if let Some(t) = &token {
                query.push(("page_token", t.clone()));
            }
            let (status, body) = self
                .send(
                    self.client.get(self.data("/v1beta1/news")).query(&query),
                    false,
                )
                .await?;
            let message = || {
                text(&body, "message")
                    .map_or_else(|| format!("HTTP {status}"), tradedesk_core::error::quote)
            };
            match status {
                200..=299 => {}
                400 | 422 => {
                    return Err(BrokerError::InvalidRequest {
                        account,
                        reason: format!("Alpaca's news API refused the query: {}", message()),
                    });
                }
                _ => {
                    return Err(
                        self.unavailable(format!("the news API answered {status} ({})", message()))
                    );
                }
            }
            let Some(rows) = body.get("news").and_then(Value::as_array) else {
                return Err(self.unavailable("the news answer has no news list".to_owned()));
            };
            for row in rows {
                match article(row) {
                    Some(a) => page.articles.push(a),
                    None => skipped += 1,
                }
            }
            token = text(&body, "next_page_token")
                .filter(|t| !t.is_empty())
                .map(str::to_owned);
            if page.articles.len() >= q.limit {
                page.more = token.is_some() || page.articles.len() > q.limit;
                page.articles.truncate(q.limit);
                break;
            }
            if token.is_none() || rows.is_empty() {
                break;
            }
        }
        if token.is_some() && page.articles.len() < q.limit {
            page.more = true;
            page.notes.push(format!(
                "{account}: Alpaca's news API had more pages than the {NEWS_PAGES} read"
            ));
        }
        if skipped > 0 {
            page.notes.push(format!(
                "{account}: {skipped} article(s) of Alpaca's answer left out: no id, headline or time"
            ));
        }
        // Newest first, whatever order the pages came in.
        page.articles.sort_by_key(|a| std::cmp::Reverse(a.created));
        Ok(page)
    }
}
