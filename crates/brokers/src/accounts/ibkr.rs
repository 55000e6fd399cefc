//! `broker = "ibkr"`: TWS / IB Gateway for positions and recent executions, an Activity
//! Flex statement for the full history, or both.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tradedesk_core::{Error, Result};

use super::{ConfigNumber, Setup, config_error};
use crate::Broker;
use crate::flex::{FlexOptions, parse_cost_fraction};
use crate::ibkr::{FLEX_SERVICE_URL, FlexSource, IbkrFlexBroker};
use crate::tws::{TwsBroker, TwsConfig};

/// The client id tradedesk gives TWS unless the config names one (each API connection
/// to one TWS needs its own).
pub const DEFAULT_TWS_CLIENT_ID: i32 = 7_301;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IbkrAccount {
    pub id: String,
    pub live: Option<bool>,
    /// The account number (one of a statement's or a gateway's accounts).
    pub account: Option<String>,
    /// The full history, from an Activity Flex statement.
    pub flex: Option<FlexConfig>,
    /// The TWS / IB Gateway socket (host default 127.0.0.1, port default 7497) and the API
    /// client id tradedesk connects with.
    pub host: Option<String>,
    pub port: Option<u16>,
    pub client_id: Option<i32>,
    /// Per-call bound for this account's network calls, in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// `flex` of an `ibkr` account: a downloaded statement, or the Flex Web Service.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlexConfig {
    /// A downloaded Activity Flex statement (XML).
    pub path: Option<PathBuf>,
    /// The Activity Flex Query's id, for the Flex Web Service.
    pub query_id: Option<String>,
    /// The environment variable holding the Flex Web Service token.
    pub token_env: Option<String>,
    /// The service's address (tests; default IBKR's).
    pub url: Option<String>,
    /// The share of the parent's cost basis each spin-off, rights issue or dividend in
    /// kind gives its new instrument, by the new instrument's symbol (`{ "SOLV" = "0.25" }`),
    /// where the statement does not show it (docs/methodology/corporate-actions.md).
    pub cost_fractions: Option<BTreeMap<String, ConfigNumber>>,
}

impl IbkrAccount {
    /// The TWS broker (with the statement behind it, when both are configured), or the
    /// statement alone.
    ///
    /// # Errors
    /// `invalid_argument` for an account with neither source, or a bad `flex`.
    pub fn connect(&self, setup: &Setup<'_>) -> Result<Arc<dyn Broker>> {
        let what = setup.what(&self.id);
        let timeout = setup.timeout(self.timeout_ms);
        let socket = self.host.is_some() || self.port.is_some();
        if !socket && self.flex.is_none() {
            return Err(config_error(
                format!(
                    "{what}: an ibkr account needs TWS / IB Gateway (host, port) or a flex statement, or both"
                ),
                "add port = 7497 (TWS paper; 7496 live, IB Gateway 4002 paper / 4001 live) for positions and recent executions, and flex = { path = \"statement.xml\" } for the full history",
            ));
        }
        let flex = match &self.flex {
            Some(flex) => Some(self.flex_broker(&what, flex, timeout)?),
            None => None,
        };
        if socket {
            return Ok(Arc::new(TwsBroker::new(
                TwsConfig {
                    id: self.id.clone(),
                    host: self.host.clone().unwrap_or_else(|| "127.0.0.1".to_owned()),
                    port: self.port.unwrap_or(7497),
                    client_id: self.client_id.unwrap_or(DEFAULT_TWS_CLIENT_ID),
                    account: self.account.clone(),
                    timeout,
                },
                flex,
            )));
        }
        match flex {
            Some(f) => Ok(Arc::new(f)),
            None => Err(Error::internal("ibkr account without a source")),
        }
    }

    /// The Flex statement source.
    fn flex_broker(
        &self,
        what: &str,
        flex: &FlexConfig,
        timeout: Duration,
    ) -> Result<IbkrFlexBroker> {
        let source = match (&flex.path, &flex.query_id) {
            (Some(path), None) => FlexSource::File(path.clone()),
            (None, Some(query_id)) => {
                let var = flex
                    .token_env
                    .clone()
                    .unwrap_or_else(|| "IBKR_FLEX_TOKEN".to_owned());
                let token = std::env::var(&var).ok().filter(|v| !v.trim().is_empty()).ok_or_else(|| {
                    config_error(
                        format!("{what}: the environment variable {var} is not set"),
                        "export the Flex Web Service token (Client Portal: Reporting > Flex Queries), or name another variable with flex.token_env",
                    )
                })?;
                FlexSource::Service {
                    url: flex
                        .url
                        .clone()
                        .unwrap_or_else(|| FLEX_SERVICE_URL.to_owned()),
                    query_id: query_id.clone(),
                    token,
                }
            }
            _ => {
                return Err(config_error(
                    format!("{what}: flex needs exactly one of path and query_id"),
                    "flex = { path = \"statement.xml\" } for a downloaded statement, or { query_id = \"…\" } for the Flex Web Service",
                ));
            }
        };
        let mut options = FlexOptions::default();
        for (symbol, value) in flex.cost_fractions.iter().flatten() {
            let fraction = parse_cost_fraction(symbol, &value.text()).map_err(|message| {
                config_error(
                    format!("{what}: flex.{message}"),
                    "cost_fractions = { \"SOLV\" = \"0.25\" }: the share IBKR gave the new instrument (the Cost Basis of both in the Open Positions right after the action)",
                )
            })?;
            options.cost_fractions.insert(symbol.clone(), fraction);
        }
        IbkrFlexBroker::new(self.id.clone(), self.account.clone(), source, timeout)
            .map(|broker| broker.with_options(options))
            .map_err(Error::from)
    }
}
