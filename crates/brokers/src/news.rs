//! News articles as a broker's news service gives them, for `get_news` (docs/tools.md,
//! "get_news"). The text is passed on as the provider sent it: the tool cleans it (markup
//! stripped, lengths capped) and marks it as quoted data, once, for every broker.

use chrono::{DateTime, Utc};

/// What `get_news` asks a broker for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewsQuery {
    /// Symbols as the caller wrote them (`AAPL`, `NASDAQ:AAPL`), upper-cased; empty: any.
    pub symbols: Vec<String>,
    /// Inclusive bounds on the article's time.
    pub start: Option<DateTime<Utc>>,
    pub end: Option<DateTime<Utc>>,
    /// At most this many articles, newest first.
    pub limit: usize,
}

/// One article. Its text is the provider's, unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewsArticle {
    /// The provider's id for it.
    pub id: String,
    pub headline: String,
    /// Where it came from (Benzinga), as the provider names it.
    pub source: String,
    pub author: Option<String>,
    /// When it was published.
    pub created: DateTime<Utc>,
    /// When it was last changed, where the provider says.
    pub updated: Option<DateTime<Utc>>,
    /// The symbols it names, as the provider writes them.
    pub symbols: Vec<String>,
    /// May hold HTML; `None` where the provider sent none (or an empty one).
    pub summary: Option<String>,
    /// The article's address, where the provider gives one.
    pub url: Option<String>,
    /// Metadata the provider wrote into the headline (IBKR's `{A:…:L:en:…}` prefix),
    /// keys and values as sent, taken off the headline; empty for most providers.
    pub meta: Vec<(String, String)>,
}

/// A broker's answer to a [`NewsQuery`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NewsPage {
    /// Newest first, at most the query's limit.
    pub articles: Vec<NewsArticle>,
    /// The provider has more articles for the query than were read.
    pub more: bool,
    /// Invented for the demo, not news (the sim's headlines).
    pub demo: bool,
    pub notes: Vec<String>,
}
