//! Instruments keyed by (exchange, symbol), their asset classes and sectors.

use std::collections::HashMap;
use std::fmt;

use rust_decimal::Decimal;
use serde::Serialize;

use crate::currency::Currency;
use crate::error::{Error, ErrorCode, Result};

/// Our name for an instrument: `EXCHANGE:SYMBOL` (an exchange never contains `:`).
/// Venue identifiers (IBKR conids, Futu `MY.1155`, MetaTrader `XAUUSD.r`) are mapped to
/// this key inside each broker adapter.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstrumentKey {
    pub exchange: String,
    pub symbol: String,
}

impl InstrumentKey {
    pub fn new(exchange: impl Into<String>, symbol: impl Into<String>) -> Self {
        Self {
            exchange: exchange.into(),
            symbol: symbol.into(),
        }
    }

    /// The qualified form used as a key in groups and buckets.
    pub fn qualified(&self) -> String {
        format!("{}:{}", self.exchange, self.symbol)
    }
}

impl fmt::Display for InstrumentKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.exchange, self.symbol)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AssetClass {
    Equity,
    Etf,
    Option,
    Future,
    Fx,
    Cfd,
    Crypto,
    Perp,
    Bond,
    Fund,
}

impl AssetClass {
    pub const ALL: [Self; 10] = [
        Self::Equity,
        Self::Etf,
        Self::Option,
        Self::Future,
        Self::Fx,
        Self::Cfd,
        Self::Crypto,
        Self::Perp,
        Self::Bond,
        Self::Fund,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Equity => "equity",
            Self::Etf => "etf",
            Self::Option => "option",
            Self::Future => "future",
            Self::Fx => "fx",
            Self::Cfd => "cfd",
            Self::Crypto => "crypto",
            Self::Perp => "perp",
            Self::Bond => "bond",
            Self::Fund => "fund",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }

    /// Settled by margin: a fill moves no cash but its commission; a closed lot credits its
    /// gross P&L; an open position adds its gross unrealized P&L to the account's value.
    pub fn is_margin_settled(self) -> bool {
        matches!(self, Self::Future | Self::Cfd | Self::Perp | Self::Fx)
    }
}

/// The eleven GICS sectors; `None` in an instrument means `Unclassified`.
pub const GICS_SECTORS: [&str; 11] = [
    "Communication Services",
    "Consumer Discretionary",
    "Consumer Staples",
    "Energy",
    "Financials",
    "Health Care",
    "Industrials",
    "Information Technology",
    "Materials",
    "Real Estate",
    "Utilities",
];

pub const UNCLASSIFIED: &str = "Unclassified";
pub const UNKNOWN_COUNTRY: &str = "Unknown";

/// Returns the canonical sector name, or `None` when `name` is not a GICS sector.
pub fn gics_sector(name: &str) -> Option<&'static str> {
    GICS_SECTORS.iter().copied().find(|s| *s == name)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instrument {
    pub key: InstrumentKey,
    pub currency: Currency,
    pub asset_class: AssetClass,
    pub multiplier: Decimal,
    pub name: Option<String>,
    pub sector: Option<&'static str>,
    pub country: Option<String>,
}

/// A curated sector map keyed `EXCHANGE:SYMBOL`, consulted for instruments that carry no
/// sector of their own. File format: a JSON object `{"BURSA:1155": "Financials", ...}`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SectorMap {
    sectors: HashMap<InstrumentKey, &'static str>,
}

impl SectorMap {
    /// Parses the map file's text; `source` names the file in errors.
    ///
    /// # Errors
    /// `invalid_argument` naming the entry that is not `EXCHANGE:SYMBOL` -> GICS sector.
    pub fn parse(source: &str, text: &str) -> Result<Self> {
        let bad = |msg: String| {
            Error::new(
                ErrorCode::InvalidArgument,
                format!("{source}: {msg}"),
                format!(
                    "the sectors file is a JSON object mapping \"EXCHANGE:SYMBOL\" to one of: {}",
                    GICS_SECTORS.join(", ")
                ),
            )
        };
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("not valid JSON ({e})")))?;
        let object = value
            .as_object()
            .ok_or_else(|| bad("must be a JSON object".to_owned()))?;
        let mut sectors = HashMap::with_capacity(object.len());
        for (key, sector) in object {
            let (exchange, symbol) = key
                .split_once(':')
                .filter(|(e, s)| !e.is_empty() && !s.is_empty() && !s.contains(':'))
                .ok_or_else(|| bad(format!("key '{key}' is not EXCHANGE:SYMBOL")))?;
            let name = sector
                .as_str()
                .and_then(gics_sector)
                .ok_or_else(|| bad(format!("'{key}': {sector} is not a GICS sector name")))?;
            sectors.insert(InstrumentKey::new(exchange, symbol), name);
        }
        Ok(Self { sectors })
    }

    pub fn get(&self, key: &InstrumentKey) -> Option<&'static str> {
        self.sectors.get(key).copied()
    }

    pub fn len(&self) -> usize {
        self.sectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sectors.is_empty()
    }

    /// The instrument's own sector, else the map's, else `Unclassified`.
    pub fn sector_of(&self, instrument: &Instrument) -> &'static str {
        instrument
            .sector
            .or_else(|| self.get(&instrument.key))
            .unwrap_or(UNCLASSIFIED)
    }
}

#[cfg(test)]
mod tests {
    use rust_decimal_macros::dec;

    use super::*;

    fn instrument(sector: Option<&'static str>) -> Instrument {
        Instrument {
            key: InstrumentKey::new("BURSA", "1155"),
            currency: Currency::MYR,
            asset_class: AssetClass::Equity,
            multiplier: dec!(1),
            name: None,
            sector,
            country: None,
        }
    }

    #[test]
    fn sector_comes_from_instrument_then_map_then_unclassified() {
        let map = SectorMap::parse("s.json", r#"{"BURSA:1155": "Financials"}"#).unwrap();
        assert_eq!(map.sector_of(&instrument(Some("Utilities"))), "Utilities");
        assert_eq!(map.sector_of(&instrument(None)), "Financials");
        assert_eq!(
            SectorMap::default().sector_of(&instrument(None)),
            UNCLASSIFIED
        );
    }

    #[test]
    fn a_bad_sector_map_names_the_entry() {
        let e = SectorMap::parse("s.json", r#"{"1155": "Financials"}"#).unwrap_err();
        assert!(
            e.message.contains("'1155' is not EXCHANGE:SYMBOL"),
            "{}",
            e.message
        );
        let e = SectorMap::parse("s.json", r#"{"BURSA:1155": "Banks"}"#).unwrap_err();
        assert!(e.message.contains("not a GICS sector"), "{}", e.message);
        assert!(SectorMap::parse("s.json", "[]").is_err());
    }

    #[test]
    fn margin_settled_classes() {
        let margin: Vec<_> = AssetClass::ALL
            .into_iter()
            .filter(|c| c.is_margin_settled())
            .collect();
        assert_eq!(
            margin,
            [
                AssetClass::Future,
                AssetClass::Fx,
                AssetClass::Cfd,
                AssetClass::Perp
            ]
        );
        assert_eq!(AssetClass::parse("etf"), Some(AssetClass::Etf));
        assert_eq!(AssetClass::parse("stock"), None);
    }
}
