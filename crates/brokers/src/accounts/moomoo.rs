//! `broker = "moomoo"` (or `"futu"`): an account read through OpenD.

use std::sync::Arc;

use serde::Deserialize;
use tradedesk_core::Result;

use super::{Setup, config_error};
use crate::Broker;
use crate::futu::{DEFAULT_PORT, FutuMarket, OpenDBroker, OpenDConfig};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoomooAccount {
    pub id: String,
    pub live: Option<bool>,
    /// `live` (default) or `paper` (a simulated HK or US account).
    pub mode: Option<String>,
    /// The market read (`MY` Bursa Malaysia, `HK`, `US`).
    pub market: Option<String>,
    /// OpenD's account id, when the login has several.
    pub account: Option<String>,
    /// How many days of history are read (default 365).
    pub history_days: Option<u32>,
    /// OpenD's socket (default 127.0.0.1:11111).
    pub host: Option<String>,
    pub port: Option<u16>,
    /// Per-call bound for this account's network calls, in milliseconds.
    pub timeout_ms: Option<u64>,
}

impl MoomooAccount {
    /// # Errors
    /// `invalid_argument` for a bad market, mode, account id or history length.
    pub fn connect(&self, setup: &Setup<'_>) -> Result<Arc<dyn Broker>> {
        let what = setup.what(&self.id);
        let market = FutuMarket::parse(self.market.as_deref().unwrap_or("MY")).map_err(|m| {
            config_error(
                format!("{what}: {m}"),
                "market = \"MY\" for Bursa Malaysia, \"HK\" or \"US\"",
            )
        })?;
        let simulate = match self.mode.as_deref() {
            None | Some("live") => false,
            Some("paper") if market == FutuMarket::My => {
                return Err(config_error(
                    format!("{what}: Bursa Malaysia has no simulated (paper) accounts at moomoo"),
                    "remove mode = \"paper\": Bursa is read from the live account",
                ));
            }
            Some("paper") => true,
            Some(other) => {
                return Err(config_error(
                    format!("{what}: mode '{other}' is neither live nor paper"),
                    "write mode = \"live\" (default) or mode = \"paper\" (a simulated HK or US account)",
                ));
            }
        };
        let acc_id = match &self.account {
            None => None,
            Some(text) => Some(text.trim().parse::<u64>().map_err(|_| {
                config_error(
                    format!("{what}: account '{text}' is not an OpenD account id"),
                    "write the account id as digits, as OpenD's account list shows it",
                )
            })?),
        };
        let history_days = self.history_days.unwrap_or(365);
        // OpenD answers 10 history queries per 30 s, in windows of 90 days.
        if !(1..=810).contains(&history_days) {
            return Err(config_error(
                format!(
                    "{what}: history_days {history_days} is outside 1 to 810 (OpenD answers 9 windows of 90 days per read)"
                ),
                "give the days of fills to read, such as 365",
            ));
        }
        Ok(Arc::new(OpenDBroker::new(OpenDConfig {
            id: self.id.clone(),
            host: self.host.clone().unwrap_or_else(|| "127.0.0.1".to_owned()),
            port: self.port.unwrap_or(DEFAULT_PORT),
            acc_id,
            market,
            simulate,
            history_days,
            state_dir: Some(setup.state_dir.to_path_buf()),
            timeout: setup.timeout(self.timeout_ms),
        })))
    }
}
