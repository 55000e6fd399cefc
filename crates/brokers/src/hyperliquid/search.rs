//! `search_instruments` on Hyperliquid: the perp universe of `{"type": "meta"}`
//! (docs/dev/dwx-hyperliquid-facts.md, B.7), kept for [`META_FOR`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_core::AssetClass;

use super::{HyperliquidBroker, key_of, text};
use crate::BrokerError;
use crate::search::{InstrumentMatches, InstrumentQuery, ListedInstrument, TradingRules};

/// How long the universe read from `meta` is searched before the venue is asked again.
pub(super) const META_FOR: Duration = Duration::from_secs(60);

/// The universe as last read, and when.
pub(super) type MetaCache = tokio::sync::Mutex<Option<(Instant, Arc<Universe>)>>;

/// The listed perps, and the rows that could not be read.
#[derive(Debug, Default)]
pub(super) struct Universe {
    listed: Vec<ListedInstrument>,
    skipped: usize,
}

fn universe_of(meta: &Value) -> Option<Universe> {
    let rows = meta.get("universe")?.as_array()?;
    let mut out = Universe::default();
    for row in rows {
        let (Some(coin), Some(decimals)) = (
            text(row, "name").filter(|n| !n.trim().is_empty()),
            row.get("szDecimals")
                .and_then(Value::as_u64)
                .and_then(|d| u32::try_from(d).ok())
                .filter(|d| *d <= 12),
        ) else {
            out.skipped += 1;
            continue;
        };
        let step = Decimal::new(1, decimals);
        let flag = |field: &str| row.get(field).and_then(Value::as_bool) == Some(true);
        // `onlyIsolated` is sent only when it holds; `marginMode` is its newer form.
        let isolated = flag("onlyIsolated")
            || matches!(text(row, "marginMode"), Some("strictIsolated" | "noCross"));
        out.listed.push(ListedInstrument {
            key: key_of(coin),
            venue_symbol: Some(coin.to_owned()),
            name: None,
            currency: Some("USD".to_owned()),
            asset_class: AssetClass::Perp,
            tradable: Some(!flag("isDelisted")),
            rules: TradingRules {
                min_quantity: Some(step),
                lot_step: Some(step),
                lot_size: None,
                tick: None,
                multiplier: Some(Decimal::ONE),
                unit: Some("coins"),
                fractionable: Some(decimals > 0),
                shortable: Some(true),
                easy_to_borrow: None,
                marginable: Some(true),
                max_leverage: row
                    .get("maxLeverage")
                    .and_then(Value::as_u64)
                    .and_then(|l| u32::try_from(l).ok())
                    .filter(|l| *l > 0),
                only_isolated: Some(isolated),
            },
        });
    }
    Some(out)
}

impl HyperliquidBroker {
    async fn universe(&self) -> Result<Arc<Universe>, BrokerError> {
        let mut cache = self.meta.lock().await;
        if let Some((at, u)) = cache.as_ref()
            && at.elapsed() < META_FOR
        {
            return Ok(Arc::clone(u));
        }
        let meta = self.info(json!({"type": "meta"})).await?;
        let u = Arc::new(
            universe_of(&meta)
                .ok_or_else(|| self.unavailable("meta did not answer a universe".to_owned()))?,
        );
        *cache = Some((Instant::now(), Arc::clone(&u)));
        Ok(u)
    }

    pub(super) async fn search(
        &self,
        account: &str,
        query: &InstrumentQuery,
    ) -> Result<InstrumentMatches, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let u = self.universe().await?;
        let mut notes = vec![format!(
            "{account}: Hyperliquid gives no tick: a perp's price takes at most 5 significant figures and 6 - szDecimals decimals; the size step is 10^-szDecimals; it names coins only (BTC), no longer names"
        )];
        if u.skipped > 0 {
            notes.push(format!(
                "{account}: {} of Hyperliquid's universe rows had no name or size decimals and are left out",
                u.skipped
            ));
        }
        Ok(InstrumentMatches {
            found: query.select(&u.listed),
            source: format!(
                "Hyperliquid's perp universe (meta), read at most once every {} s",
                META_FOR.as_secs()
            ),
            notes,
        })
    }
}
