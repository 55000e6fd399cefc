//! `broker = "hyperliquid"`: a wallet read from Hyperliquid's info endpoint.

use std::sync::Arc;

use serde::Deserialize;
use tradedesk_core::{Error, Result};

use super::{Setup, config_error};
use crate::Broker;
use crate::hyperliquid::{
    HyperliquidBroker, HyperliquidConfig, MAINNET_URL, TESTNET_URL, is_wallet,
};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HyperliquidAccount {
    pub id: String,
    pub live: Option<bool>,
    /// The wallet's public address (`0x` and 40 hex digits).
    pub account: Option<String>,
    /// The API host (default: mainnet's, or testnet's with `mode = "testnet"`).
    pub base_url: Option<String>,
    /// `mainnet` (default) or `testnet`.
    pub mode: Option<String>,
    /// Per-call bound for this account's network calls, in milliseconds.
    pub timeout_ms: Option<u64>,
}

impl HyperliquidAccount {
    /// # Errors
    /// `invalid_argument` for a missing or malformed wallet, or a bad `mode`.
    pub fn connect(&self, setup: &Setup<'_>) -> Result<Arc<dyn Broker>> {
        let what = setup.what(&self.id);
        let wallet = self.account.clone().ok_or_else(|| {
            config_error(
                format!("{what}: a hyperliquid account needs its wallet address"),
                "add account = \"0x…\" (the wallet's public address; no key is needed to read)",
            )
        })?;
        if !is_wallet(&wallet) {
            return Err(config_error(
                format!("{what}: account '{wallet}' is not a wallet address"),
                "write the address as 0x and 40 hex digits",
            ));
        }
        let base_url = match (&self.base_url, self.mode.as_deref()) {
            (Some(url), _) => url.clone(),
            (None, None | Some("mainnet")) => MAINNET_URL.to_owned(),
            (None, Some("testnet")) => TESTNET_URL.to_owned(),
            (None, Some(other)) => {
                return Err(config_error(
                    format!("{what}: mode '{other}' is neither mainnet nor testnet"),
                    "write mode = \"mainnet\" (default) or mode = \"testnet\"",
                ));
            }
        };
        let broker = HyperliquidBroker::new(HyperliquidConfig {
            id: self.id.clone(),
            wallet,
            base_url,
            timeout: setup.timeout(self.timeout_ms),
        })
        .map_err(Error::from)?;
        Ok(Arc::new(broker))
    }
}
