//! The sim's news: a handful of headlines invented for the demo, so `get_news` answers on
//! a fresh machine. They are not news: each headline starts with `[DEMO]`, the source is
//! the demo's, the page says `demo`, and a note repeats it. Their times are set back from
//! the sim's clock, so "the latest news" stays the latest whenever the demo runs.

use chrono::{DateTime, Duration, Utc};

use crate::news::{NewsArticle, NewsPage, NewsQuery};

/// The source every demo headline names.
pub const DEMO_NEWS_SOURCE: &str = "tradedesk demo (synthetic)";

/// Minutes before the sim's clock, the symbols (`EXCHANGE:SYMBOL`), the headline and the
/// summary of each demo article, newest first.
const HEADLINES: [(i64, &[&str], &str, &str); 6] = [
    (
        40,
        &["NASDAQ:AAPL"],
        "[DEMO] Apple suppliers report steady holiday-quarter orders",
        "Invented for tradedesk's demo, not news: a supplier survey sees Apple's holiday-quarter orders in line with last year.",
    ),
    (
        130,
        &["NASDAQ:NVDA", "NASDAQ:MSFT"],
        "[DEMO] Chip and cloud names lead a quiet session",
        "Invented for tradedesk's demo, not news: semiconductor and cloud software shares rise while the wider market is flat.",
    ),
    (
        310,
        &["BURSA:1155"],
        "[DEMO] Malayan Banking declares an interim dividend",
        "Invented for tradedesk's demo, not news: the bank's board declares an interim dividend payable next month.",
    ),
    (
        545,
        &["FX:EURUSD"],
        "[DEMO] Euro edges up against the dollar before inflation data",
        "Invented for tradedesk's demo, not news: EURUSD firms as traders wait for the euro area's flash inflation figures.",
    ),
    (
        1_210,
        &["FX:XAUUSD"],
        "[DEMO] Gold holds near its highs as yields ease",
        "Invented for tradedesk's demo, not news: spot gold steadies while Treasury yields slip.",
    ),
    (
        1_830,
        &["PERP:BTC-PERP"],
        "[DEMO] Bitcoin perpetual funding turns flat after a volatile weekend",
        "Invented for tradedesk's demo, not news: funding on the BTC perpetual settles near zero as open interest falls.",
    ),
];

/// Whether an article's `EXCHANGE:SYMBOL` is the one asked (bare or qualified).
fn names(symbol: &str, asked: &str) -> bool {
    let asked = asked.trim().to_ascii_uppercase();
    if asked.contains(':') {
        symbol == asked
    } else {
        symbol.rsplit_once(':').map_or(symbol, |(_, s)| s) == asked
    }
}

/// The demo headlines the query asks for, as of the sim's clock `now`.
pub(crate) fn demo_news(account: &str, now: DateTime<Utc>, q: &NewsQuery) -> NewsPage {
    let mut articles: Vec<NewsArticle> = HEADLINES
        .iter()
        .enumerate()
        .map(|(i, (minutes, symbols, headline, summary))| {
            let at = now - Duration::minutes(*minutes);
            NewsArticle {
                id: format!("demo-{}", i + 1),
                headline: (*headline).to_owned(),
                source: DEMO_NEWS_SOURCE.to_owned(),
                author: None,
                created: at,
                updated: None,
                symbols: symbols.iter().map(|s| (*s).to_owned()).collect(),
                summary: Some((*summary).to_owned()),
                url: None,
                meta: Vec::new(),
            }
        })
        .filter(|a| {
            q.symbols.is_empty()
                || a.symbols
                    .iter()
                    .any(|s| q.symbols.iter().any(|asked| names(s, asked)))
        })
        .filter(|a| q.start.is_none_or(|s| a.created >= s) && q.end.is_none_or(|e| a.created <= e))
        .collect();
    let more = articles.len() > q.limit;
    articles.truncate(q.limit);
    NewsPage {
        articles,
        more,
        demo: true,
        notes: vec![format!(
            "{account}: demo headlines invented for tradedesk's demo (the sim), not news; configure an Alpaca account for real news"
        )],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(symbols: &[&str], limit: usize) -> NewsQuery {
        NewsQuery {
            symbols: symbols.iter().map(|s| (*s).to_owned()).collect(),
            start: None,
            end: None,
            limit,
        }
    }

    #[test]
    fn demo_headlines_are_marked_filtered_and_newest_first() {
        let now = DateTime::parse_from_rfc3339("2026-11-30T15:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .unwrap_or_default();
        let all = demo_news("SIM", now, &query(&[], 10));
        assert_eq!(all.articles.len(), HEADLINES.len());
        assert!(all.demo && !all.more);
        assert!(
            all.articles
                .iter()
                .all(|a| a.headline.starts_with("[DEMO]"))
        );
        assert!(all.articles.windows(2).all(|w| w[0].created > w[1].created));
        let aapl = demo_news("SIM", now, &query(&["nasdaq:aapl"], 10));
        assert_eq!(aapl.articles.len(), 1);
        let bare = demo_news("SIM", now, &query(&["1155"], 10));
        assert_eq!(bare.articles[0].symbols, ["BURSA:1155"]);
        let capped = demo_news("SIM", now, &query(&[], 2));
        assert_eq!(capped.articles.len(), 2);
        assert!(capped.more);
    }
}
