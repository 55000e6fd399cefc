//! The `[[accounts]]` entries of `tradedesk.toml`: one config type per adapter, each
//! turning its keys into a connected [`Broker`].
//!
//! An entry is tagged by its `broker` key (`broker = "alpaca"`); the other keys belong to
//! that adapter alone, and an unknown one is an error naming it and the account. A new
//! broker adds its config type in a module here, a variant to [`AccountConfig`] and its
//! name to [`AccountConfig::NAMES`]; nothing outside this crate changes. The keys are
//! documented in the README's "Connecting brokers".

mod alpaca;
mod book;
mod hyperliquid;
mod ibkr;
mod metatrader;
mod moomoo;
mod sim;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use tradedesk_core::{Book, Error, ErrorCode, Result};
use tradedesk_store::Store;

use crate::sim::{Clock, WallClock};
use crate::{BookBroker, Broker};

pub use alpaca::AlpacaAccount;
pub use book::{BookAccount, BookLoad, open_book};
pub use hyperliquid::HyperliquidAccount;
pub use ibkr::{DEFAULT_TWS_CLIENT_ID, FlexConfig, IbkrAccount};
pub use metatrader::{MetaTraderAccount, SymbolConfig};
pub use moomoo::MoomooAccount;
pub use sim::{SimAccount, sim_clock};

/// The bound on one broker call when neither the account (`timeout_ms`) nor the config
/// (`broker_timeout_ms`) gives one, in milliseconds.
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

/// The per-call bound: the account's own `timeout_ms`, else the config's
/// `broker_timeout_ms`, else [`DEFAULT_TIMEOUT_MS`]; never zero.
#[must_use]
pub fn call_timeout(own_ms: Option<u64>, default_ms: Option<u64>) -> Duration {
    Duration::from_millis(own_ms.or(default_ms).unwrap_or(DEFAULT_TIMEOUT_MS).max(1))
}

/// One `[[accounts]]` entry, by its `broker` key.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "broker", remote = "Self")]
pub enum AccountConfig {
    /// A tradedesk-book/1 file.
    #[serde(rename = "book")]
    Book(BookAccount),
    /// The embedded paper exchange.
    #[serde(rename = "sim")]
    Sim(SimAccount),
    /// Interactive Brokers: TWS / IB Gateway and/or an Activity Flex statement.
    #[serde(rename = "ibkr")]
    Ibkr(IbkrAccount),
    #[serde(rename = "alpaca")]
    Alpaca(AlpacaAccount),
    /// moomoo / Futu through OpenD (`broker = "moomoo"` or `"futu"`).
    #[serde(rename = "moomoo", alias = "futu")]
    Moomoo(MoomooAccount),
    /// MetaTrader through the DWXConnect EA; the folder says MT4 or MT5.
    #[serde(rename = "metatrader")]
    MetaTrader(MetaTraderAccount),
    #[serde(rename = "mt4")]
    Mt4(MetaTraderAccount),
    #[serde(rename = "mt5")]
    Mt5(MetaTraderAccount),
    #[serde(rename = "hyperliquid")]
    Hyperliquid(HyperliquidAccount),
    /// A broker this build has no adapter for: refused when the accounts are opened.
    #[serde(skip)]
    Unsupported { id: String, broker: String },
}

impl<'de> Deserialize<'de> for AccountConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let table = toml::Table::deserialize(deserializer)?;
        let id = table
            .get("id")
            .and_then(toml::Value::as_str)
            .map(str::to_owned);
        let broker = match table.get("broker") {
            None => return Err(D::Error::missing_field("broker")),
            Some(toml::Value::String(name)) => name.clone(),
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "broker is {other}: it must be a broker's name, e.g. broker = \"book\""
                )));
            }
        };
        if !Self::NAMES.contains(&broker.as_str()) {
            let id = id.ok_or_else(|| D::Error::missing_field("id"))?;
            return Ok(Self::Unsupported { id, broker });
        }
        Self::deserialize(toml::Value::Table(table)).map_err(|e| {
            let who = id.map_or_else(String::new, |id| format!("account '{id}' "));
            D::Error::custom(format!("{who}(broker = \"{broker}\"): {}", e.message()))
        })
    }
}

impl AccountConfig {
    /// Every `broker` name this build reads.
    pub const NAMES: &'static [&'static str] = &[
        "book",
        "sim",
        "ibkr",
        "alpaca",
        "moomoo",
        "futu",
        "metatrader",
        "mt4",
        "mt5",
        "hyperliquid",
    ];

    /// The entry's `id`.
    #[must_use]
    pub fn id(&self) -> &str {
        match self {
            Self::Book(a) => &a.id,
            Self::Sim(a) => &a.id,
            Self::Ibkr(a) => &a.id,
            Self::Alpaca(a) => &a.id,
            Self::Moomoo(a) => &a.id,
            Self::MetaTrader(a) | Self::Mt4(a) | Self::Mt5(a) => &a.id,
            Self::Hyperliquid(a) => &a.id,
            Self::Unsupported { id, .. } => id,
        }
    }

    /// `live = true`: the account may trade live (with `mode: "live"` on each call).
    #[must_use]
    pub fn live(&self) -> bool {
        let live = match self {
            Self::Book(a) => a.live,
            Self::Sim(a) => a.live,
            Self::Ibkr(a) => a.live,
            Self::Alpaca(a) => a.live,
            Self::Moomoo(a) => a.live,
            Self::MetaTrader(a) | Self::Mt4(a) | Self::Mt5(a) => a.live,
            Self::Hyperliquid(a) => a.live,
            Self::Unsupported { .. } => None,
        };
        live == Some(true)
    }

    /// The entry's file paths, for making relative ones relative to the config's folder.
    pub fn paths_mut(&mut self) -> Vec<&mut PathBuf> {
        match self {
            Self::Book(a) => a.path.iter_mut().collect(),
            Self::Ibkr(a) => a.flex.iter_mut().flat_map(|f| f.path.iter_mut()).collect(),
            Self::MetaTrader(a) | Self::Mt4(a) | Self::Mt5(a) => a.path.iter_mut().collect(),
            Self::Sim(_)
            | Self::Alpaca(_)
            | Self::Moomoo(_)
            | Self::Hyperliquid(_)
            | Self::Unsupported { .. } => Vec::new(),
        }
    }

    /// Opens the entry's broker into `opened`.
    ///
    /// # Errors
    /// `invalid_argument` naming the account and the key that is wrong or missing;
    /// `invalid_book` for a book file that fails validation; `not_supported` for a broker
    /// this build has no adapter for.
    pub fn open(&self, setup: &Setup<'_>, opened: &mut Opened) -> Result<()> {
        match self {
            Self::Book(a) => a.open(setup, opened),
            Self::Sim(a) => a.open(setup, opened),
            Self::Ibkr(a) => opened.add(a.connect(setup)?),
            Self::Alpaca(a) => opened.add(a.connect(setup)?),
            Self::Moomoo(a) => opened.add(a.connect(setup)?),
            Self::MetaTrader(a) => opened.add(a.connect(setup, None)?),
            Self::Mt4(a) => opened.add(a.connect(setup, Some(crate::dwx::Platform::Mt4))?),
            Self::Mt5(a) => opened.add(a.connect(setup, Some(crate::dwx::Platform::Mt5))?),
            Self::Hyperliquid(a) => opened.add(a.connect(setup)?),
            Self::Unsupported { id, broker } => Err(Error::new(
                ErrorCode::NotSupported,
                format!(
                    "accounts[{}] ({id}): broker '{broker}' is not available in this build",
                    setup.index
                ),
                "this build has `book` accounts (a tradedesk-book/1 file), `sim` (the embedded paper exchange), `alpaca`, `ibkr`, `moomoo`, `metatrader` and `hyperliquid`",
            )),
        }
    }
}

/// What opening an account may use besides its own keys.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// The entry's place in `[[accounts]]`, for messages.
    pub index: usize,
    /// The config's `broker_timeout_ms`.
    pub timeout_ms: Option<u64>,
    /// The state directory (the sim's ledger, OpenD's history cache).
    pub state_dir: &'a Path,
    pub store: &'a Arc<Store>,
    /// When book files are read.
    pub book_load: BookLoad,
}

impl Setup<'_> {
    /// `accounts[i] (id)`, how messages name the account.
    #[must_use]
    pub fn what(&self, id: &str) -> String {
        format!("accounts[{}] ({id})", self.index)
    }

    /// The account's per-call bound (the rule is [`call_timeout`]).
    #[must_use]
    pub fn timeout(&self, own_ms: Option<u64>) -> Duration {
        call_timeout(own_ms, self.timeout_ms)
    }
}

/// A broker and the accounts of it to serve (`None`: all of its own).
pub type Served = (Arc<dyn Broker>, Option<Vec<String>>);

/// The brokers the entries opened so far.
#[derive(Debug)]
pub struct Opened {
    brokers: Vec<Arc<dyn Broker>>,
    /// Book files, each read once for every account that names it.
    books: Vec<(PathBuf, Arc<BookBroker>, Vec<String>)>,
    /// The sims' clock: wall time until an entry freezes it (`clock = ...`).
    clock: Arc<dyn Clock>,
    /// The demo book the sims price from, read once.
    demo: Option<Book>,
}

impl Default for Opened {
    fn default() -> Self {
        Self {
            brokers: Vec::new(),
            books: Vec::new(),
            clock: Arc::new(WallClock),
            demo: None,
        }
    }
}

impl Opened {
    fn add(&mut self, broker: Arc<dyn Broker>) -> Result<()> {
        self.brokers.push(broker);
        Ok(())
    }

    /// The clock the sims (and the trading guard) run on.
    #[must_use]
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::clone(&self.clock)
    }

    /// Every broker with the accounts it serves (`None`: all of its own), the book files
    /// last; and the clock.
    #[must_use]
    pub fn finish(self) -> (Vec<Served>, Arc<dyn Clock>) {
        let mut out: Vec<Served> = self.brokers.into_iter().map(|b| (b, None)).collect();
        for (_, broker, ids) in self.books {
            out.push((broker, Some(ids)));
        }
        (out, self.clock)
    }
}

/// `invalid_argument` for a config key.
pub(crate) fn config_error(message: String, hint: &str) -> Error {
    Error::new(ErrorCode::InvalidArgument, message, hint)
}

/// A number in the config: an integer, a float or a decimal string, read as a decimal.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum ConfigNumber {
    Int(i64),
    Float(f64),
    Text(String),
}

impl ConfigNumber {
    /// The number as written (a float by its shortest digits).
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Self::Int(i) => i.to_string(),
            Self::Float(f) => f.to_string(),
            Self::Text(t) => t.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Entries {
        accounts: Vec<AccountConfig>,
    }

    fn parse(text: &str) -> std::result::Result<Vec<AccountConfig>, String> {
        toml::from_str::<Entries>(text)
            .map(|e| e.accounts)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn every_name_reads_into_its_adapter() {
        for name in AccountConfig::NAMES {
            let text = format!("[[accounts]]\nid = \"x\"\nbroker = \"{name}\"\n");
            let accounts = parse(&text).unwrap();
            assert!(
                !matches!(accounts[0], AccountConfig::Unsupported { .. }),
                "{name}"
            );
            assert_eq!(accounts[0].id(), "x");
        }
        let accounts = parse("[[accounts]]\nid = \"x\"\nbroker = \"etrade\"\n").unwrap();
        assert_eq!(
            accounts[0],
            AccountConfig::Unsupported {
                id: "x".into(),
                broker: "etrade".into()
            }
        );
    }

    #[test]
    fn an_unknown_key_is_named_with_the_account() {
        let e = parse("[[accounts]]\nid = \"MY-1\"\nbroker = \"book\"\npth = \"b.json\"\n")
            .unwrap_err();
        assert!(e.contains("unknown field `pth`"), "{e}");
        assert!(e.contains("account 'MY-1'"), "{e}");
        // A key of another adapter is unknown here too.
        let e = parse("[[accounts]]\nid = \"S\"\nbroker = \"sim\"\nport = 7497\n").unwrap_err();
        assert!(e.contains("unknown field `port`"), "{e}");
        let e = parse("[[accounts]]\nid = \"S\"\n").unwrap_err();
        assert!(e.contains("missing field `broker`"), "{e}");
    }

    #[test]
    fn the_timeout_is_the_accounts_then_the_configs_then_ten_seconds() {
        assert_eq!(call_timeout(Some(5), Some(7)), Duration::from_millis(5));
        assert_eq!(call_timeout(None, Some(7)), Duration::from_millis(7));
        assert_eq!(call_timeout(None, None), Duration::from_secs(10));
        assert_eq!(call_timeout(Some(0), None), Duration::from_millis(1));
    }
}
