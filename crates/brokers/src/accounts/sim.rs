//! `broker = "sim"`: the embedded paper exchange.

use std::sync::Arc;

use rust_decimal::Decimal;
use serde::Deserialize;
use tradedesk_core::{Currency, Error, Result};

use super::{Opened, Setup, config_error};
use crate::demo::demo_book;
use crate::sim::{Clock, ManualClock, SimBroker, SimConfig, WallClock};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimAccount {
    pub id: String,
    /// Refused when true: the sim is paper only.
    pub live: Option<bool>,
    /// The price process's seed.
    pub seed: Option<u64>,
    /// The account currency (default USD).
    pub currency: Option<String>,
    /// The cash deposited when the account is first used (default 100000).
    pub cash: Option<u64>,
    /// Freezes the clock at this RFC 3339 instant (tests and reproducible demos).
    pub clock: Option<String>,
}

/// The currencies the sim has rates for.
const SIM_CURRENCIES: [&str; 5] = ["USD", "EUR", "GBP", "JPY", "MYR"];

/// Wall time, or frozen at an RFC 3339 instant.
///
/// # Errors
/// `invalid_argument` naming the account when the instant cannot be read.
pub fn sim_clock(text: Option<&str>, id: &str) -> Result<Arc<dyn Clock>> {
    match text {
        None => Ok(Arc::new(WallClock)),
        Some(t) => {
            let at = chrono::DateTime::parse_from_rfc3339(t).map_err(|_| {
                config_error(
                    format!("accounts ({id}): clock '{t}' is not an RFC 3339 time"),
                    "write it like 2026-11-30T15:00:00Z, or remove clock for wall time",
                )
            })?;
            Ok(Arc::new(ManualClock::new(at.with_timezone(&chrono::Utc))))
        }
    }
}

impl SimAccount {
    /// Opens the sim account; a `clock` here freezes the clock of this sim, the ones after
    /// it and the trading guard.
    pub(super) fn open(&self, setup: &Setup<'_>, opened: &mut Opened) -> Result<()> {
        let what = setup.what(&self.id);
        if self.live == Some(true) {
            return Err(config_error(
                format!("{what}: a sim account has no live side"),
                "remove live = true; the sim is paper only",
            ));
        }
        let mut sim = SimConfig::new(self.id.clone());
        if let Some(seed) = self.seed {
            sim.seed = seed;
        }
        if let Some(code) = &self.currency {
            if !SIM_CURRENCIES.contains(&code.as_str()) {
                return Err(config_error(
                    format!("{what}: the sim has no rates for currency '{code}'"),
                    "use USD, EUR, GBP, JPY or MYR",
                ));
            }
            sim.currency = Currency::new_checked(code)
                .map_err(|e| config_error(format!("{what}: currency: {}", e.message), &e.hint))?;
        }
        if let Some(cash) = self.cash {
            sim.initial_cash = Decimal::from(cash);
        }
        if self.clock.is_some() {
            opened.clock = sim_clock(self.clock.as_deref(), &self.id)?;
        }
        if opened.demo.is_none() {
            opened.demo = Some(demo_book().map_err(|e| Error::internal(e.to_string()))?);
        }
        let book = opened
            .demo
            .as_ref()
            .ok_or_else(|| Error::internal("demo book missing"))?;
        let broker = SimBroker::new(
            sim,
            book,
            Arc::clone(setup.store),
            Arc::clone(&opened.clock),
        );
        opened.add(Arc::new(broker))
    }
}
