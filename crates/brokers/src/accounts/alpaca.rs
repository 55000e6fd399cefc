//! `broker = "alpaca"`: Alpaca's trading and market-data hosts.

use std::sync::Arc;

use serde::Deserialize;
use tradedesk_core::{Error, Result};

use super::{Setup, config_error};
use crate::Broker;
use crate::alpaca::{AlpacaBroker, AlpacaConfig};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlpacaAccount {
    pub id: String,
    /// May trade live; `mode = "live"` needs it.
    pub live: Option<bool>,
    /// `paper` (default) or `live`, the host to use.
    pub mode: Option<String>,
    /// The trading host (default: Alpaca's paper or live host).
    pub base_url: Option<String>,
    /// The market-data host.
    pub data_url: Option<String>,
    /// The environment variables holding the key and secret (default `APCA_API_KEY_ID` /
    /// `APCA_API_SECRET_KEY`).
    pub key_env: Option<String>,
    pub secret_env: Option<String>,
    /// Per-call bound for this account's network calls, in milliseconds.
    pub timeout_ms: Option<u64>,
}

impl AlpacaAccount {
    /// # Errors
    /// `invalid_argument` for a bad `mode` or an unset key variable.
    pub fn connect(&self, setup: &Setup<'_>) -> Result<Arc<dyn Broker>> {
        let what = setup.what(&self.id);
        let env = |name: &Option<String>, default: &str| {
            let var = name.clone().unwrap_or_else(|| default.to_owned());
            std::env::var(&var).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                config_error(
                    format!("{what}: the environment variable {var} is not set"),
                    "export the Alpaca key and secret (APCA_API_KEY_ID, APCA_API_SECRET_KEY), or name other variables with key_env / secret_env",
                )
            })
        };
        let live = match self.mode.as_deref() {
            None => self.live == Some(true),
            Some("paper") => false,
            Some("live") if self.live == Some(true) => true,
            Some("live") => {
                return Err(config_error(
                    format!("{what}: mode = \"live\" needs live = true"),
                    "add live = true to the account to allow live trading, or use mode = \"paper\"",
                ));
            }
            Some(other) => {
                return Err(config_error(
                    format!("{what}: mode '{other}' is neither paper nor live"),
                    "write mode = \"paper\" or mode = \"live\"",
                ));
            }
        };
        let config = AlpacaConfig {
            account: self.id.clone(),
            live,
            base_url: self.base_url.clone().unwrap_or_else(|| {
                if live {
                    AlpacaConfig::LIVE_URL
                } else {
                    AlpacaConfig::PAPER_URL
                }
                .to_owned()
            }),
            data_url: self
                .data_url
                .clone()
                .unwrap_or_else(|| AlpacaConfig::DATA_URL.to_owned()),
            key: env(&self.key_env, "APCA_API_KEY_ID")?,
            secret: env(&self.secret_env, "APCA_API_SECRET_KEY")?,
            timeout: setup.timeout(self.timeout_ms),
        };
        Ok(Arc::new(AlpacaBroker::new(config).map_err(Error::from)?))
    }
}
