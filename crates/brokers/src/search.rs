//! Instrument search (docs/tools.md, "search_instruments"): what an adapter answers
//! [`crate::Broker::search_instruments`] with, and the one rule by which a query matches
//! an instrument, so that every venue's answers rank alike.
//!
//! A query matches an instrument by its symbol (or the venue's own code for it) being
//! the query, else starting with it, else by every word of the query beginning a word of
//! the instrument's name. Symbols are compared upper-case and also without the
//! separators venues write differently (`BTC/USD`, `BTCUSD`; `BRK.B`, `BRKB`). A query
//! `EXCHANGE:SYMBOL` names the exchange as well.

use rust_decimal::Decimal;
use tradedesk_core::{AssetClass, Book, InstrumentKey};

/// How an instrument matched a query, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MatchKind {
    /// Its symbol (or the venue's own code for it) is the query.
    Symbol,
    /// Its symbol starts with the query.
    Prefix,
    /// Every word of the query begins a word of its name.
    Name,
    /// The broker's own search found it by a rule of its own (IBKR's matching symbols
    /// look at more than the symbol and the name tradedesk sees).
    Broker,
}

impl MatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Symbol => "symbol",
            Self::Prefix => "symbol_prefix",
            Self::Name => "name",
            Self::Broker => "broker",
        }
    }
}

/// What `search_instruments` asks of each account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstrumentQuery {
    /// The query as given, trimmed.
    pub text: String,
    /// The exchange named before a `:` (`NASDAQ:AA`), upper-case.
    pub exchange: Option<String>,
    /// The symbol part, upper-case (empty when the query has several words).
    pub symbol: String,
    /// The query's words, upper-case, split at anything not a letter or digit.
    pub words: Vec<String>,
    pub asset_class: Option<AssetClass>,
}

/// Upper-case, without the separators venues write differently.
fn compact(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, '/' | '-' | '.' | '_' | ' '))
        .flat_map(char::to_uppercase)
        .collect()
}

fn words_of(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_uppercase)
        .collect()
}

impl InstrumentQuery {
    pub fn new(text: &str, asset_class: Option<AssetClass>) -> Self {
        let text = text.trim().to_owned();
        let (exchange, rest) = match text.split_once(':') {
            Some((e, s)) if !e.trim().is_empty() && !e.contains(' ') => {
                (Some(e.trim().to_uppercase()), s.trim())
            }
            _ => (None, text.as_str()),
        };
        let symbol = if rest.contains(char::is_whitespace) {
            String::new()
        } else {
            rest.to_uppercase()
        };
        Self {
            words: words_of(rest),
            exchange,
            symbol,
            text,
            asset_class,
        }
    }

    /// The same query without its asset class (for a venue that cannot tell the
    /// classes apart, such as Alpaca's stocks and ETFs).
    #[must_use]
    pub fn any_class(&self) -> Self {
        Self {
            asset_class: None,
            ..self.clone()
        }
    }

    /// How a symbol, the venue's own code for it and a name match the query's text
    /// (exchange and asset class aside).
    pub fn match_text(
        &self,
        symbol: &str,
        venue: Option<&str>,
        name: Option<&str>,
    ) -> Option<MatchKind> {
        if !self.symbol.is_empty() {
            let wanted = compact(&self.symbol);
            let names: Vec<String> = std::iter::once(symbol)
                .chain(venue)
                .flat_map(|s| [s.to_uppercase(), compact(s)])
                .collect();
            if names.iter().any(|s| *s == self.symbol || *s == wanted) {
                return Some(MatchKind::Symbol);
            }
            if !wanted.is_empty()
                && names
                    .iter()
                    .any(|s| s.starts_with(&self.symbol) || s.starts_with(&wanted))
            {
                return Some(MatchKind::Prefix);
            }
        }
        let name_words = words_of(name?);
        (!self.words.is_empty()
            && self
                .words
                .iter()
                .all(|q| name_words.iter().any(|w| w.starts_with(q.as_str()))))
        .then_some(MatchKind::Name)
    }

    /// How an instrument matches the whole query (its exchange and asset class too).
    pub fn match_of(&self, inst: &ListedInstrument) -> Option<MatchKind> {
        if self.asset_class.is_some_and(|c| c != inst.asset_class) {
            return None;
        }
        if self
            .exchange
            .as_deref()
            .is_some_and(|e| !inst.key.exchange.eq_ignore_ascii_case(e))
        {
            return None;
        }
        self.match_text(
            &inst.key.symbol,
            inst.venue_symbol.as_deref(),
            inst.name.as_deref(),
        )
    }

    /// The instruments of `listed` that match, each with how.
    pub fn select<'a>(&self, listed: impl IntoIterator<Item = &'a ListedInstrument>) -> Vec<Found> {
        listed
            .into_iter()
            .filter_map(|i| {
                self.match_of(i).map(|matched| Found {
                    matched,
                    instrument: i.clone(),
                })
            })
            .collect()
    }
}

/// The trading rules a venue gives for an instrument; `None` where it gives none (never
/// a made-up figure).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TradingRules {
    /// The smallest quantity an order may have.
    pub min_quantity: Option<Decimal>,
    /// Quantities are whole multiples of this.
    pub lot_step: Option<Decimal>,
    /// The board lot: shares per lot where the exchange trades in lots (HKEX, Bursa).
    pub lot_size: Option<Decimal>,
    /// The price increment.
    pub tick: Option<Decimal>,
    /// Units per quantity of 1 (100 for a US option, 100,000 for an FX lot).
    pub multiplier: Option<Decimal>,
    /// What a quantity counts: `shares`, `lots`, `contracts`, `coins`.
    pub unit: Option<&'static str>,
    pub fractionable: Option<bool>,
    pub shortable: Option<bool>,
    pub easy_to_borrow: Option<bool>,
    pub marginable: Option<bool>,
    pub max_leverage: Option<u32>,
    /// Margined in isolation only (no cross margin).
    pub only_isolated: Option<bool>,
}

/// One instrument as a venue lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedInstrument {
    /// `EXCHANGE:SYMBOL`, as the adapter's quotes and orders take it.
    pub key: InstrumentKey,
    /// The venue's own code where it differs from the symbol (Futu's `HK.00700`,
    /// Hyperliquid's coin `BTC`, an IBKR contract id).
    pub venue_symbol: Option<String>,
    pub name: Option<String>,
    /// The currency it trades in (a crypto pair's quote currency, which may be a coin).
    pub currency: Option<String>,
    pub asset_class: AssetClass,
    /// Whether the venue lets the account trade it now; `None` where the source does not
    /// say (a book's instruments).
    pub tradable: Option<bool>,
    pub rules: TradingRules,
}

/// A listed instrument that matched, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub matched: MatchKind,
    pub instrument: ListedInstrument,
}

/// An account's answer to a search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstrumentMatches {
    pub found: Vec<Found>,
    /// What was searched, for the answer ("Alpaca's asset list (GET /v2/assets)").
    pub source: String,
    /// What the answer could not say.
    pub notes: Vec<String>,
}

/// The instruments `account` has traded or holds in `book`, those that match: what a
/// statement or book file knows (the venue's other instruments are not in it).
pub fn from_book(book: &Book, account: &str, query: &InstrumentQuery) -> InstrumentMatches {
    let source = "the account's own book: the instruments it has traded or holds".to_owned();
    let Some(idx) = book
        .accounts
        .iter()
        .position(|a| a.id == account)
        .and_then(|i| u32::try_from(i).ok())
    else {
        return InstrumentMatches {
            source,
            ..InstrumentMatches::default()
        };
    };
    let mut used: Vec<u32> = book
        .fills
        .iter()
        .filter(|f| f.account == idx)
        .map(|f| f.instrument)
        .chain(
            book.reported_positions
                .iter()
                .filter(|p| p.account == idx)
                .map(|p| p.instrument),
        )
        .collect();
    used.sort_unstable();
    used.dedup();
    let listed: Vec<ListedInstrument> = used
        .into_iter()
        .filter_map(|i| {
            let inst = book.instruments.get(usize::try_from(i).ok()?)?;
            let assumed = book.unknown_specs.iter().any(|u| u.instrument == i);
            Some(ListedInstrument {
                key: inst.key.clone(),
                venue_symbol: None,
                name: inst.name.clone(),
                currency: Some(inst.currency.code().to_owned()),
                asset_class: inst.asset_class,
                tradable: None,
                rules: TradingRules {
                    multiplier: (!assumed).then_some(inst.multiplier),
                    ..TradingRules::default()
                },
            })
        })
        .collect();
    let found = query.select(&listed);
    let notes = if found.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "{account}: searched the instruments of its own book (what it has traded or holds): its broker's other instruments are not in a statement; the book gives no trading rules but the contract size"
        )]
    };
    InstrumentMatches {
        found,
        source,
        notes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(exchange: &str, symbol: &str, name: Option<&str>) -> ListedInstrument {
        ListedInstrument {
            key: InstrumentKey::new(exchange, symbol),
            venue_symbol: None,
            name: name.map(str::to_owned),
            currency: Some("USD".to_owned()),
            asset_class: AssetClass::Equity,
            tradable: Some(true),
            rules: TradingRules::default(),
        }
    }

    #[test]
    fn symbol_then_prefix_then_name_words() {
        let apple = listed("NASDAQ", "AAPL", Some("Apple Inc. Common Stock"));
        let coke = listed("NYSE", "KO", Some("The Coca-Cola Company"));
        let q = InstrumentQuery::new("aapl", None);
        assert_eq!(q.match_of(&apple), Some(MatchKind::Symbol));
        assert_eq!(
            InstrumentQuery::new("AA", None).match_of(&apple),
            Some(MatchKind::Prefix)
        );
        assert_eq!(
            InstrumentQuery::new("apple", None).match_of(&apple),
            Some(MatchKind::Name)
        );
        assert_eq!(
            InstrumentQuery::new("coca cola", None).match_of(&coke),
            Some(MatchKind::Name)
        );
        assert_eq!(
            InstrumentQuery::new("cola pepsi", None).match_of(&coke),
            None
        );
        assert_eq!(
            InstrumentQuery::new("NYSE:KO", None).match_of(&coke),
            Some(MatchKind::Symbol)
        );
        assert_eq!(
            InstrumentQuery::new("NASDAQ:KO", None).match_of(&coke),
            None
        );
        assert_eq!(
            InstrumentQuery::new("ko", Some(AssetClass::Etf)).match_of(&coke),
            None
        );
    }

    #[test]
    fn separators_and_venue_codes_match_the_symbol() {
        let mut btc = listed("ALPACA", "BTC/USD", Some("Bitcoin / US Dollar"));
        btc.asset_class = AssetClass::Crypto;
        assert_eq!(
            InstrumentQuery::new("BTCUSD", None).match_of(&btc),
            Some(MatchKind::Symbol)
        );
        assert_eq!(
            InstrumentQuery::new("btc/usd", None).match_of(&btc),
            Some(MatchKind::Symbol)
        );
        let mut perp = listed("HYPERLIQUID", "BTC-PERP", None);
        perp.venue_symbol = Some("BTC".to_owned());
        assert_eq!(
            InstrumentQuery::new("btc", None).match_of(&perp),
            Some(MatchKind::Symbol)
        );
        assert_eq!(
            InstrumentQuery::new("BT", None).match_of(&perp),
            Some(MatchKind::Prefix)
        );
    }
}
