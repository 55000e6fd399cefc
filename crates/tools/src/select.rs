//! The `account`, `broker` and `symbol` filters: resolved against the book, combined with
//! AND; an unknown name is an error, never an empty answer.

use tradedesk_core::error::quote;
use tradedesk_core::{AccountIdx, Book, Error, ErrorCode, InstrumentIdx, InstrumentKey, Result};

#[derive(Debug, Clone)]
pub struct Selection {
    accounts: Vec<bool>,
    pub instrument: Option<InstrumentIdx>,
}

impl Selection {
    pub fn account(&self, idx: AccountIdx) -> bool {
        self.accounts.get(idx as usize).copied().unwrap_or(false)
    }

    pub fn matches(&self, account: AccountIdx, instrument: InstrumentIdx) -> bool {
        self.account(account) && self.instrument.is_none_or(|i| i == instrument)
    }
}

/// Resolves the filters as a tool's arguments carry them.
///
/// # Errors
/// As [`select`].
pub fn select_owned(
    book: &Book,
    account: &Option<String>,
    broker: &Option<String>,
    symbol: &Option<String>,
) -> Result<Selection> {
    select(
        book,
        account.as_deref(),
        broker.as_deref(),
        symbol.as_deref(),
    )
}

/// Resolves the filters.
///
/// # Errors
/// `unknown_account`, `unknown_broker`, `unknown_symbol`, or `invalid_argument` for an
/// ambiguous bare symbol.
pub fn select(
    book: &Book,
    account: Option<&str>,
    broker: Option<&str>,
    symbol: Option<&str>,
) -> Result<Selection> {
    if let Some(id) = account
        && book.account_index(id).is_none()
    {
        let known: Vec<&str> = book.accounts.iter().map(|a| a.id.as_str()).collect();
        return Err(Error::new(
            ErrorCode::UnknownAccount,
            format!("account: no account {}", quote(id)),
            format!("accounts are {}; get_accounts lists them", known.join(", ")),
        ));
    }
    if let Some(name) = broker
        && !book.accounts.iter().any(|a| a.broker == name)
    {
        let mut known: Vec<&str> = book.accounts.iter().map(|a| a.broker.as_str()).collect();
        known.sort_unstable();
        known.dedup();
        return Err(Error::new(
            ErrorCode::UnknownBroker,
            format!("broker: no configured account is at broker {}", quote(name)),
            format!(
                "configured brokers are {} (lower-case names)",
                known.join(", ")
            ),
        ));
    }
    let accounts = book
        .accounts
        .iter()
        .map(|a| account.is_none_or(|id| a.id == id) && broker.is_none_or(|b| a.broker == b))
        .collect();
    let instrument = symbol.map(|s| resolve_symbol(book, s)).transpose()?;
    Ok(Selection {
        accounts,
        instrument,
    })
}

/// `AAPL` or `NASDAQ:AAPL` to an instrument of the book.
///
/// # Errors
/// `unknown_symbol`, or `invalid_argument` when a bare symbol names several instruments.
pub fn resolve_symbol(book: &Book, text: &str) -> Result<InstrumentIdx> {
    let text = text.trim();
    if let Some((exchange, symbol)) = text.split_once(':') {
        let key = InstrumentKey::new(exchange.to_ascii_uppercase(), symbol);
        let found = book.instrument_index(&key).or_else(|| {
            book.instruments
                .iter()
                .position(|i| {
                    i.key.exchange.eq_ignore_ascii_case(exchange)
                        && i.key.symbol.eq_ignore_ascii_case(symbol)
                })
                .and_then(|i| InstrumentIdx::try_from(i).ok())
        });
        return found.ok_or_else(|| unknown_symbol(book, text));
    }
    let matches: Vec<&InstrumentKey> = book
        .instruments
        .iter()
        .map(|i| &i.key)
        .filter(|k| k.symbol.eq_ignore_ascii_case(text))
        .collect();
    match matches.as_slice() {
        [] => Err(unknown_symbol(book, text)),
        [one] => book
            .instrument_index(one)
            .ok_or_else(|| unknown_symbol(book, text)),
        several => {
            let mut names: Vec<String> = several.iter().map(|k| k.qualified()).collect();
            names.sort();
            Err(Error::invalid_argument(
                format!(
                    "symbol: {} matches several instruments: {}",
                    quote(text),
                    names.join(", ")
                ),
                format!("qualify it as EXCHANGE:SYMBOL, e.g. {}", names[0]),
            ))
        }
    }
}

fn unknown_symbol(book: &Book, text: &str) -> Error {
    let bursa = book.instruments.iter().any(|i| i.key.exchange == "BURSA");
    let looks_like_name = text.chars().any(|c| c.is_ascii_alphabetic()) && bursa;
    let mut hint =
        String::from("use a symbol the book holds or traded (get_positions, get_trade_history)");
    if looks_like_name {
        hint.push_str("; Bursa symbols are numeric codes such as 1155 (Maybank), not names");
    }
    Error::new(
        ErrorCode::UnknownSymbol,
        format!(
            "symbol: no instrument {} in the configured accounts",
            quote(text)
        ),
        hint,
    )
}
