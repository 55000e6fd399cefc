//! The European Central Bank's euro foreign exchange reference rates, the reference
//! source behind `fx_source = "ecb"` (docs/methodology/fx.md).
//!
//! The ECB publishes them each TARGET working day around 16:00 CET as XML in a gesmes
//! envelope: `<Cube><Cube time="YYYY-MM-DD"><Cube currency="USD" rate="1.0843"/>...`,
//! each rate meaning `1 EUR = rate currency` on that day. `eurofxref-hist.xml` holds
//! every day since 1999, `eurofxref-hist-90d.xml` the last 90 days and
//! `eurofxref-daily.xml` the latest day; all three have this shape.
//!
//! The file is fetched over HTTPS and cached in the state directory; the cache is
//! used as is while it is less than a day old, and refetched after that. When a fetch
//! fails the cache (of any age) is used with a note, and with no cache the source gives
//! no rates and a note, never an error: the rows that needed them are then left out of
//! totals with a note of their own.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::NaiveDate;
use quick_xml::Reader;
use quick_xml::events::Event;
use rust_decimal::Decimal;
use tradedesk_core::{Currency, FxQuote};

/// The full history file.
pub const ECB_HIST_URL: &str = "https://www.ecb.europa.eu/stats/eurofxref/eurofxref-hist.xml";

/// Name of the cached copy inside the state directory.
pub const CACHE_FILE: &str = "fx-ecb-eurofxref.xml";

/// How long a fetched file is used before it is fetched again.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// After a failed fetch, how long before the next attempt (so a dead network does not
/// slow every call).
const RETRY_AFTER: Duration = Duration::from_secs(10 * 60);

/// Reads an ECB reference-rate file. Retired currencies the book does not know (the
/// ECB's history keeps CYP, EEK, ...) are skipped.
///
/// # Errors
/// A message naming what is wrong when the text is not an ECB eurofxref file.
pub fn parse_ecb(text: &str) -> Result<Vec<FxQuote>, String> {
    let eur = Currency::new("EUR");
    let mut reader = Reader::from_str(text);
    let mut day: Option<NaiveDate> = None;
    let mut days = 0usize;
    let mut out = Vec::new();
    loop {
        let element = match reader.read_event() {
            Ok(Event::Start(e) | Event::Empty(e)) => e,
            Ok(Event::Eof) => break,
            Ok(_) => continue,
            Err(e) => {
                return Err(format!(
                    "not readable XML at byte {}: {e}",
                    reader.error_position()
                ));
            }
        };
        if element.local_name().as_ref() != "Cube" {
            continue;
        }
        let (mut time, mut currency, mut rate) = (None, None, None);
        for attribute in element.attributes().flatten() {
            let value = attribute.value.trim().to_owned();
            match attribute.key.local_name().as_ref() {
                "time" => time = Some(value),
                "currency" => currency = Some(value),
                "rate" => rate = Some(value),
                _ => {}
            }
        }
        if let Some(time) = time {
            day = Some(
                NaiveDate::parse_from_str(&time, "%Y-%m-%d")
                    .map_err(|_| format!("<Cube time=\"{time}\"> is not a YYYY-MM-DD date"))?,
            );
            days += 1;
        }
        if let (Some(code), Some(rate)) = (currency, rate) {
            let Some(date) = day else {
                return Err(format!(
                    "<Cube currency=\"{code}\"> outside a dated <Cube time>"
                ));
            };
            let value: Decimal = rate
                .parse()
                .ok()
                .filter(|r: &Decimal| r.is_sign_positive() && !r.is_zero())
                .ok_or_else(|| {
                    format!("{code} rate '{rate}' on {date} is not a positive number")
                })?;
            let Ok(quote) = Currency::new_checked(&code) else {
                continue;
            };
            if quote == eur {
                continue;
            }
            out.push(FxQuote {
                base: eur,
                quote,
                rate: value,
                date,
            });
        }
    }
    if days == 0 {
        return Err("no <Cube time=\"...\"> element: this is not an ECB eurofxref file".to_owned());
    }
    Ok(out)
}

/// The ECB rates as a source gave them, with what the answers should say about them.
#[derive(Debug, Clone, Default)]
pub struct EcbRates {
    pub quotes: Arc<Vec<FxQuote>>,
    /// The latest day the file has rates for.
    pub latest: Option<NaiveDate>,
    /// Set when the rates are not fresh from the ECB (a failed fetch).
    pub notes: Vec<String>,
}

#[derive(Debug)]
struct Memo {
    checked: SystemTime,
    rates: EcbRates,
    /// Whether `checked` records a failed fetch (retried sooner).
    failed: bool,
}

/// The ECB source of one configuration: where to fetch, where to cache.
#[derive(Debug)]
pub struct EcbSource {
    url: String,
    cache: PathBuf,
    client: reqwest::Client,
    memo: Mutex<Option<Memo>>,
}

impl EcbSource {
    /// `url` (the ECB's by default) fetched within `timeout`, cached at
    /// `state_dir/`[`CACHE_FILE`].
    ///
    /// # Errors
    /// When the HTTP client cannot be built.
    pub fn new(url: &str, state_dir: &std::path::Path, timeout: Duration) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        Ok(Self {
            url: url.to_owned(),
            cache: state_dir.join(CACHE_FILE),
            client,
            memo: Mutex::new(None),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    fn remembered(&self, now: SystemTime) -> Option<EcbRates> {
        let memo = self.memo.lock().ok()?;
        let memo = memo.as_ref()?;
        let age = now.duration_since(memo.checked).unwrap_or_default();
        let limit = if memo.failed { RETRY_AFTER } else { MAX_AGE };
        (age < limit).then(|| memo.rates.clone())
    }

    fn remember(&self, now: SystemTime, rates: &EcbRates, failed: bool) {
        if let Ok(mut memo) = self.memo.lock() {
            *memo = Some(Memo {
                checked: now,
                rates: rates.clone(),
                failed,
            });
        }
    }

    /// The cached file's rates and its age, if it exists and reads.
    async fn cached(&self, now: SystemTime) -> Option<(EcbRates, Duration, SystemTime)> {
        let modified = tokio::fs::metadata(&self.cache)
            .await
            .ok()?
            .modified()
            .ok()?;
        let text = tokio::fs::read_to_string(&self.cache).await.ok()?;
        let quotes = parse_ecb(&text).ok()?;
        Some((
            rates_of(quotes),
            now.duration_since(modified).unwrap_or_default(),
            modified,
        ))
    }

    async fn fetch(&self) -> Result<String, String> {
        let response = self
            .client
            .get(&self.url)
            .send()
            .await
            .map_err(|e| format!("cannot fetch {}: {e}", self.url))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("{} answered HTTP {status}", self.url));
        }
        response
            .text()
            .await
            .map_err(|e| format!("cannot read {}: {e}", self.url))
    }

    /// The rates: remembered, else the cache while it is under a day old, else fetched
    /// (and cached), else the cache of any age with a note, else none with a note.
    pub async fn rates(&self) -> EcbRates {
        let now = SystemTime::now();
        if let Some(rates) = self.remembered(now) {
            return rates;
        }
        let cached = self.cached(now).await;
        if let Some((rates, age, _)) = &cached
            && *age < MAX_AGE
        {
            self.remember(now, rates, false);
            return rates.clone();
        }
        let problem = match self.fetch().await {
            Ok(text) => match parse_ecb(&text) {
                Ok(quotes) => {
                    let rates = rates_of(quotes);
                    // A cache that cannot be written only costs a refetch next time.
                    let tmp = self.cache.with_extension("xml.tmp");
                    if tokio::fs::write(&tmp, &text).await.is_ok() {
                        let _ = tokio::fs::rename(&tmp, &self.cache).await;
                    }
                    self.remember(now, &rates, false);
                    return rates;
                }
                Err(e) => format!("{} is not an ECB reference-rate file: {e}", self.url),
            },
            Err(e) => e,
        };
        let rates = match cached {
            Some((mut rates, _, modified)) => {
                let when =
                    chrono::DateTime::<chrono::Utc>::from(modified).format("%Y-%m-%d %H:%M UTC");
                rates.notes.push(format!(
                    "the ECB reference rates could not be refreshed ({problem}); using the copy cached on {when}{}",
                    rates
                        .latest
                        .map_or_else(String::new, |d| format!(", whose latest rates are of {d}"))
                ));
                rates
            }
            None => EcbRates {
                notes: vec![format!(
                    "the ECB reference rates are unavailable ({problem}) and nothing is cached in the state directory: conversions that needed them are left out; check the network or fx_url in tradedesk.toml"
                )],
                ..EcbRates::default()
            },
        };
        self.remember(now, &rates, true);
        rates
    }
}

fn rates_of(quotes: Vec<FxQuote>) -> EcbRates {
    EcbRates {
        latest: quotes.iter().map(|q| q.date).max(),
        quotes: Arc::new(quotes),
        notes: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rust_decimal_macros::dec;

    use super::*;

    const DAILY: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<gesmes:Envelope xmlns:gesmes="http://www.gesmes.org/xml/2002-08-01" xmlns="http://www.ecb.int/vocabulary/2002-08-01/eurofxref">
	<gesmes:subject>Reference rates</gesmes:subject>
	<gesmes:Sender>
		<gesmes:name>European Central Bank</gesmes:name>
	</gesmes:Sender>
	<Cube>
		<Cube time='2026-03-02'>
			<Cube currency='USD' rate='1.0843'/>
			<Cube currency='JPY' rate='162.05'/>
			<Cube currency='MYR' rate='4.9812'/>
		</Cube>
		<Cube time='2026-02-27'>
			<Cube currency='USD' rate='1.0801'/>
			<Cube currency='CYP' rate='0.5853'/>
		</Cube>
	</Cube>
</gesmes:Envelope>"#;

    #[test]
    fn reads_the_gesmes_envelope() {
        let quotes = parse_ecb(DAILY).unwrap();
        assert_eq!(quotes.len(), 4); // CYP is retired and skipped
        assert_eq!(
            quotes[0],
            FxQuote {
                base: Currency::new("EUR"),
                quote: Currency::USD,
                rate: dec!(1.0843),
                date: NaiveDate::from_ymd_opt(2026, 3, 2).unwrap(),
            }
        );
        assert_eq!(
            quotes[3].date,
            NaiveDate::from_ymd_opt(2026, 2, 27).unwrap()
        );
    }

    #[test]
    fn refuses_what_is_not_an_ecb_file() {
        let cases = [
            (
                "<html><body>Maintenance</body></html>",
                "not an ECB eurofxref file",
            ),
            (
                "<Cube><Cube time='2026-13-01'/></Cube>",
                "not a YYYY-MM-DD date",
            ),
            (
                "<Cube><Cube currency='USD' rate='1.1'/></Cube>",
                "outside a dated",
            ),
            (
                "<Cube><Cube time='2026-01-02'><Cube currency='USD' rate='-1'/></Cube></Cube>",
                "not a positive number",
            ),
        ];
        for (text, want) in cases {
            let err = parse_ecb(text).unwrap_err();
            assert!(err.contains(want), "{text}: {err}");
        }
    }
}
