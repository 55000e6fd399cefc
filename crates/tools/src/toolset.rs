//! Toolsets: the named groups of tools a server lists and serves, picked with
//! `[tools] enabled` in tradedesk.toml or `--tools` (docs/tools.md, "Toolsets").
//! `get_server_health` belongs to none: it is always served.

use tradedesk_core::{Error, Result};

/// A group of tools a client can ask for by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Toolset {
    Portfolio,
    Market,
    Research,
    Options,
    Perps,
    Trading,
    MarketData,
}

impl Toolset {
    /// Every toolset, in the order they are documented.
    pub const ALL: [Self; 7] = [
        Self::Portfolio,
        Self::Market,
        Self::Research,
        Self::Options,
        Self::Perps,
        Self::Trading,
        Self::MarketData,
    ];

    /// The name in the config and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Portfolio => "portfolio",
            Self::Market => "market",
            Self::Research => "research",
            Self::Options => "options",
            Self::Perps => "perps",
            Self::Trading => "trading",
            Self::MarketData => "marketdata",
        }
    }

    /// What the toolset is for, one line (docs/tools.md).
    pub fn summary(self) -> &'static str {
        match self {
            Self::Portfolio => {
                "the accounts from their fills: balances, positions, trade history, realized P&L, summary, exposure, performance, trading habits"
            }
            Self::Market => "quotes and price bars from a broker or a CSV file",
            Self::Research => "backtests, factor analysis and chart patterns over bars",
            Self::Options => "option pricing, implied volatility and multi-leg payoffs",
            Self::Perps => {
                "leveraged perpetual positions: liquidation, leverage ladder, closing P&L"
            }
            Self::Trading => {
                "orders at the brokers; the order tools are listed only while [trading] enabled = true"
            }
            Self::MarketData => {
                "venue-wide market data: instrument search, market hours and holidays, news, several symbols' snapshots at once, option chains with greeks, the perps venues' markets (mark, funding, open interest) and their latest trades"
            }
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

impl std::fmt::Display for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The toolsets a server serves. Default: all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Toolsets(u8);

impl Default for Toolsets {
    fn default() -> Self {
        Self::ALL
    }
}

impl Toolsets {
    pub const ALL: Self = Self((1 << Toolset::ALL.len()) - 1);

    fn bit(t: Toolset) -> u8 {
        1 << (t as u8)
    }

    pub fn contains(self, t: Toolset) -> bool {
        self.0 & Self::bit(t) != 0
    }

    /// The names served, in documented order.
    pub fn names(self) -> Vec<&'static str> {
        Toolset::ALL
            .into_iter()
            .filter(|t| self.contains(*t))
            .map(Toolset::name)
            .collect()
    }

    /// The valid names, for error hints.
    pub fn valid_names() -> String {
        Self::ALL.names().join(", ")
    }

    /// Toolsets from names; `origin` says where they were written (`tools.enabled`,
    /// `--tools`) for the error.
    ///
    /// # Errors
    /// `invalid_argument` for an unknown name (naming the valid ones) or an empty list.
    pub fn from_names<'a>(names: impl IntoIterator<Item = &'a str>, origin: &str) -> Result<Self> {
        let mut bits = 0;
        for name in names {
            let t = Toolset::parse(name).ok_or_else(|| {
                Error::invalid_argument(
                    format!(
                        "{origin}: unknown toolset {}",
                        tradedesk_core::error::quote(name)
                    ),
                    format!(
                        "toolsets are {} (get_server_health is always served)",
                        Self::valid_names()
                    ),
                )
            })?;
            bits |= Self::bit(t);
        }
        if bits == 0 {
            return Err(Error::invalid_argument(
                format!("{origin}: no toolset named"),
                format!(
                    "name at least one of {}, or leave it out to serve them all",
                    Self::valid_names()
                ),
            ));
        }
        Ok(Self(bits))
    }

    /// Toolsets from a comma-separated list (`--tools portfolio,research`).
    ///
    /// # Errors
    /// As [`Toolsets::from_names`].
    pub fn from_list(list: &str, origin: &str) -> Result<Self> {
        Self::from_names(
            list.split(',').map(str::trim).filter(|s| !s.is_empty()),
            origin,
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn names_round_trip_and_lists_parse() {
        for t in Toolset::ALL {
            assert_eq!(Toolset::parse(t.name()), Some(t));
        }
        let set = Toolsets::from_list(" portfolio, research ,", "--tools").unwrap();
        assert_eq!(set.names(), ["portfolio", "research"]);
        assert!(!set.contains(Toolset::Trading));
        assert_eq!(Toolsets::default(), Toolsets::ALL);
        assert_eq!(Toolsets::ALL.names().len(), Toolset::ALL.len());
    }

    #[test]
    fn an_unknown_or_empty_list_is_refused_naming_the_valid_ones() {
        let e = Toolsets::from_list("portfolio,quotes", "--tools").unwrap_err();
        assert!(
            e.message.contains("--tools") && e.message.contains("quotes"),
            "{e}"
        );
        assert!(
            e.hint
                .contains("portfolio, market, research, options, perps, trading, marketdata"),
            "{e}"
        );
        let e = Toolsets::from_names([], "tools.enabled").unwrap_err();
        assert!(e.message.contains("no toolset"), "{e}");
    }
}
