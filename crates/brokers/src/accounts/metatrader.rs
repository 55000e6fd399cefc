//! `broker = "metatrader"` (or `"mt4"`, `"mt5"`): a terminal running the DWXConnect EA.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use rust_decimal::Decimal;
use serde::Deserialize;
use tradedesk_core::{Currency, MarginMode, Result};

use super::{Setup, config_error};
use crate::Broker;
use crate::dwx::{DwxBroker, DwxConfig, LotRules, Platform, SymbolSpec, is_time_zone, platform_of};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetaTraderAccount {
    pub id: String,
    /// A real-money account; `mode = "live"` needs it.
    pub live: Option<bool>,
    /// `paper` (default, a demo account) or `live`.
    pub mode: Option<String>,
    /// The terminal's `MQL4/Files` (or `MQL5/Files`) folder.
    pub path: Option<PathBuf>,
    /// The magic number tradedesk's orders carry (default 730001).
    pub magic: Option<i64>,
    /// The broker's server time zone (IANA name), for the EA's times.
    pub server_time_zone: Option<String>,
    /// How many days of history are read (default 365).
    pub history_days: Option<u32>,
    /// Contract size, profit currency and volumes per symbol, as the terminal's
    /// Specification window shows them (the DWXConnect EA does not write them):
    /// `[accounts.symbols."GER40"] contract_size = 1, profit_currency = "EUR",
    /// lot_step = 0.1, min_lots = 0.1, max_lots = 50`.
    pub symbols: Option<BTreeMap<String, SymbolConfig>>,
    /// MT5: "hedging" (each ticket its own position) or "netting" (one position per
    /// symbol), as the terminal's account shows it; MT4 is always hedging.
    pub margin_mode: Option<String>,
    /// Per-call bound for this account's file exchanges, in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// One symbol's spec under a `metatrader` account's `symbols`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SymbolConfig {
    /// Units in one lot: a number, or a decimal string.
    pub contract_size: Option<toml::Value>,
    /// The ISO 4217 currency profit is paid in.
    pub profit_currency: Option<String>,
    /// The symbol's volume step, minimum and maximum, in lots (numbers or decimal
    /// strings).
    pub lot_step: Option<toml::Value>,
    pub min_lots: Option<toml::Value>,
    pub max_lots: Option<toml::Value>,
}

/// A positive number from the config: an integer, a float or a decimal string.
fn positive_number(v: &toml::Value) -> Option<Decimal> {
    match v {
        toml::Value::Integer(n) => Some(Decimal::from(*n)),
        toml::Value::Float(f) => Decimal::from_str(&f.to_string()).ok(),
        toml::Value::String(t) => Decimal::from_str(t.trim()).ok(),
        _ => None,
    }
    .filter(|d| d.is_sign_positive() && !d.is_zero())
}

impl MetaTraderAccount {
    /// `platform`: MT4 or MT5 as the broker name says it (`mt4`, `mt5`), else the folder's.
    ///
    /// # Errors
    /// `invalid_argument` for a missing path, a bad mode, time zone, margin mode or
    /// symbol spec.
    pub fn connect(
        &self,
        setup: &Setup<'_>,
        platform: Option<Platform>,
    ) -> Result<Arc<dyn Broker>> {
        let what = setup.what(&self.id);
        let files = self.path.clone().ok_or_else(|| {
            config_error(
                format!(
                    "{what}: a metatrader account needs path, the terminal's MQL4/Files (or MQL5/Files) folder"
                ),
                "in the terminal: File > Open Data Folder, then MQL4 > Files; put that folder's path in path",
            )
        })?;
        let platform = platform.unwrap_or_else(|| platform_of(&files));
        let live = match self.mode.as_deref() {
            None | Some("paper") => false,
            Some("live") if self.live == Some(true) => true,
            Some("live") => {
                return Err(config_error(
                    format!("{what}: mode = \"live\" needs live = true"),
                    "add live = true for a real-money MetaTrader account, or keep mode = \"paper\" for a demo account",
                ));
            }
            Some(other) => {
                return Err(config_error(
                    format!("{what}: mode '{other}' is neither paper nor live"),
                    "write mode = \"paper\" (a demo account) or mode = \"live\"",
                ));
            }
        };
        if let Some(zone) = &self.server_time_zone
            && !is_time_zone(zone)
        {
            return Err(config_error(
                format!("{what}: server_time_zone '{zone}' is not a time zone name"),
                "write an IANA name such as \"Europe/Athens\" (many brokers run their servers on it) or \"UTC\"",
            ));
        }
        let symbols = self.symbol_specs(setup)?;
        let lots = self.lot_rules(setup)?;
        let margin_mode = match (platform, self.margin_mode.as_deref()) {
            (_, None) => None,
            (_, Some("hedging")) => Some(MarginMode::Hedging),
            (Platform::Mt5, Some("netting")) => Some(MarginMode::Netting),
            (Platform::Mt4, Some("netting")) => {
                return Err(config_error(
                    format!("{what}: margin_mode = \"netting\" on MT4, which only hedges"),
                    "remove margin_mode (MT4 accounts are hedging), or point path at an MT5 terminal's MQL5/Files",
                ));
            }
            (_, Some(other)) => {
                return Err(config_error(
                    format!("{what}: margin_mode '{other}' is neither hedging nor netting"),
                    "write margin_mode = \"hedging\" or \"netting\", as the MT5 terminal's account shows it (Toolbox > Trade: a hedging account lists several positions per symbol)",
                ));
            }
        };
        Ok(Arc::new(DwxBroker::new(DwxConfig {
            id: self.id.clone(),
            files,
            platform,
            magic: self.magic.unwrap_or(730_001),
            live,
            server_time_zone: self.server_time_zone.clone(),
            history_days: self.history_days.unwrap_or(365).clamp(1, 3_650),
            timeout: setup.timeout(self.timeout_ms),
            symbols,
            margin_mode,
            lots,
        })))
    }

    /// The volumes per symbol, checked: each a positive number, the minimum at most the
    /// maximum, and both whole multiples of the step.
    fn lot_rules(&self, setup: &Setup<'_>) -> Result<BTreeMap<String, LotRules>> {
        let mut out = BTreeMap::new();
        for (symbol, spec) in self.symbols.iter().flatten() {
            let what = format!("{}: symbols.\"{symbol}\"", setup.what(&self.id));
            let read = |key: &str, v: &Option<toml::Value>| -> Result<Option<Decimal>> {
                v.as_ref()
                    .map(|v| {
                        positive_number(v).ok_or_else(|| {
                            config_error(
                                format!("{what}.{key} is {v}: it must be a number of lots > 0"),
                                "write the volume the terminal's Specification window shows, e.g. lot_step = 0.01, min_lots = 0.01, max_lots = 50",
                            )
                        })
                    })
                    .transpose()
            };
            let rules = LotRules {
                step: read("lot_step", &spec.lot_step)?,
                min: read("min_lots", &spec.min_lots)?,
                max: read("max_lots", &spec.max_lots)?,
            };
            if let (Some(min), Some(max)) = (rules.min, rules.max)
                && min > max
            {
                return Err(config_error(
                    format!("{what}: min_lots {min} is above max_lots {max}"),
                    "write the minimum and maximum volume as the Specification window shows them",
                ));
            }
            if let Some(step) = rules.step {
                for (key, v) in [("min_lots", rules.min), ("max_lots", rules.max)] {
                    if let Some(v) = v
                        && !(v % step).is_zero()
                    {
                        return Err(config_error(
                            format!("{what}: {key} {v} is not a whole multiple of lot_step {step}"),
                            "check the volumes against the Specification window: the minimum and maximum are whole steps",
                        ));
                    }
                }
            }
            if rules != LotRules::default() {
                out.insert(symbol.clone(), rules);
            }
        }
        Ok(out)
    }

    /// The `symbols`, checked: each contract size a positive number and each profit
    /// currency an ISO code.
    fn symbol_specs(&self, setup: &Setup<'_>) -> Result<BTreeMap<String, SymbolSpec>> {
        let mut out = BTreeMap::new();
        for (symbol, spec) in self.symbols.iter().flatten() {
            let what = format!("{}: symbols.\"{symbol}\"", setup.what(&self.id));
            let Some(contract_size) = &spec.contract_size else {
                if spec.profit_currency.is_some() {
                    return Err(config_error(
                        format!("{what} has a profit_currency but no contract_size"),
                        "write the contract size the terminal's Specification window shows beside it, e.g. contract_size = 1",
                    ));
                }
                if spec.lot_step.is_none() && spec.min_lots.is_none() && spec.max_lots.is_none() {
                    return Err(config_error(
                        format!("{what} states nothing"),
                        "write contract_size and profit_currency, or lot_step, min_lots and max_lots, as the Specification window shows them (or remove the section)",
                    ));
                }
                continue; // volumes only
            };
            let size = positive_number(contract_size).ok_or_else(|| {
                config_error(
                    format!("{what}.contract_size is {contract_size}: it must be a number > 0"),
                    "write the contract size the terminal's Specification window shows, e.g. contract_size = 100",
                )
            })?;
            let profit_currency = spec
                .profit_currency
                .as_deref()
                .map(|c| {
                    Currency::new_checked(c).map_err(|e| {
                        config_error(
                            format!("{what}.profit_currency: {}", e.message),
                            "write the profit currency the Specification window shows, e.g. profit_currency = \"EUR\"",
                        )
                    })
                })
                .transpose()?;
            out.insert(
                symbol.clone(),
                SymbolSpec {
                    contract_size: size,
                    profit_currency,
                },
            );
        }
        Ok(out)
    }
}
