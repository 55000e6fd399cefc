//! `search_instruments` on Alpaca: its asset list, `GET /v2/assets?status=active&
//! asset_class=…` (docs/dev/alpaca-facts.md, "Assets"). The list is some 30,000 rows,
//! so each class's is read at most once every [`ASSETS_FOR`] and searched in memory.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use serde_json::Value;
use tradedesk_core::{AssetClass, InstrumentKey};

use super::{AlpacaBroker, dec, text};
use crate::BrokerError;
use crate::search::{InstrumentMatches, InstrumentQuery, ListedInstrument, TradingRules};

/// How long a class's asset list is searched before Alpaca is asked again.
pub(super) const ASSETS_FOR: Duration = Duration::from_secs(3600);

/// The quantity step of a fractionable stock: Alpaca takes fractional quantities to 9
/// decimal places (the step `instrument` uses too).
const FRACTION_STEP: Decimal = Decimal::from_parts(1, 0, 0, false, 9);

/// The lists read, by Alpaca's asset class, and when.
pub(super) type AssetCache = tokio::sync::Mutex<BTreeMap<&'static str, (Instant, Arc<Assets>)>>;

/// One class's active assets, and the rows that could not be read.
#[derive(Debug, Default)]
pub(super) struct Assets {
    listed: Vec<ListedInstrument>,
    skipped: usize,
}

/// Alpaca's classes to read for an asset class, or why none serves it.
fn classes_for(class: Option<AssetClass>) -> Result<&'static [&'static str], &'static str> {
    match class {
        None => Ok(&["us_equity", "crypto"]),
        Some(AssetClass::Equity | AssetClass::Etf | AssetClass::Fund) => Ok(&["us_equity"]),
        Some(AssetClass::Crypto) => Ok(&["crypto"]),
        Some(AssetClass::Option) => Err(
            "Alpaca's option contracts are not in its asset list (GET /v2/options/contracts lists them by underlying): search the underlying",
        ),
        Some(_) => Err("Alpaca lists US stocks and ETFs (us_equity) and crypto pairs"),
    }
}

fn flag(row: &Value, field: &str) -> Option<bool> {
    row.get(field).and_then(Value::as_bool)
}

/// One asset row; `None` for a row without a symbol or a class tradedesk reads.
fn listed_of(row: &Value) -> Option<ListedInstrument> {
    let symbol = text(row, "symbol").filter(|s| !s.trim().is_empty())?;
    let crypto = match text(row, "class")? {
        "us_equity" => false,
        "crypto" => true,
        _ => return None,
    };
    let exchange = text(row, "exchange").filter(|e| !e.trim().is_empty())?;
    let positive = |field: &str| dec(row, field).filter(|d| d.is_sign_positive() && !d.is_zero());
    let fractionable = flag(row, "fractionable");
    let step = positive("min_trade_increment").or(match fractionable {
        Some(true) => Some(FRACTION_STEP),
        Some(false) if !crypto => Some(Decimal::ONE),
        _ => None,
    });
    // `easy_to_borrow` is deprecated for `borrow_status`; either says it.
    let borrow = match text(row, "borrow_status") {
        Some("easy_to_borrow") => Some(true),
        Some("hard_to_borrow") => Some(false),
        _ => flag(row, "easy_to_borrow"),
    };
    Some(ListedInstrument {
        key: InstrumentKey::new(exchange, symbol),
        venue_symbol: None,
        name: text(row, "name")
            .filter(|n| !n.trim().is_empty())
            .map(str::to_owned),
        currency: if crypto {
            symbol.rsplit_once('/').map(|(_, q)| q.to_owned())
        } else {
            Some("USD".to_owned())
        },
        asset_class: if crypto {
            AssetClass::Crypto
        } else {
            AssetClass::Equity
        },
        tradable: flag(row, "tradable").map(|t| t && text(row, "status") != Some("inactive")),
        rules: TradingRules {
            min_quantity: positive("min_order_size").or(step),
            lot_step: step,
            lot_size: None,
            tick: positive("price_increment"),
            multiplier: Some(Decimal::ONE),
            unit: Some(if crypto { "coins" } else { "shares" }),
            fractionable,
            shortable: flag(row, "shortable"),
            easy_to_borrow: borrow,
            marginable: flag(row, "marginable"),
            max_leverage: None,
            only_isolated: None,
        },
    })
}

impl AlpacaBroker {
    /// One class's active assets, from the cache or Alpaca.
    async fn assets(&self, class: &'static str) -> Result<Arc<Assets>, BrokerError> {
        let mut cache = self.assets.lock().await;
        if let Some((at, list)) = cache.get(class)
            && at.elapsed() < ASSETS_FOR
        {
            return Ok(Arc::clone(list));
        }
        let body = self
            .get_ok(
                self.trading("/v2/assets"),
                &[
                    ("status", "active".to_owned()),
                    ("asset_class", class.to_owned()),
                ],
                true,
            )
            .await?;
        let rows = body.as_array().map(Vec::as_slice).unwrap_or_default();
        let listed: Vec<ListedInstrument> = rows.iter().filter_map(listed_of).collect();
        let list = Arc::new(Assets {
            skipped: rows.len() - listed.len(),
            listed,
        });
        cache.insert(class, (Instant::now(), Arc::clone(&list)));
        Ok(list)
    }

    pub(super) async fn search(
        &self,
        account: &str,
        query: &InstrumentQuery,
    ) -> Result<InstrumentMatches, BrokerError> {
        self.check_account(account)?;
        let mut notes = Vec::new();
        let classes = match classes_for(query.asset_class) {
            Ok(c) => c,
            Err(why) => {
                notes.push(format!("{account}: {why}"));
                &[]
            }
        };
        // Alpaca does not tell ETFs from stocks: both are us_equity.
        let wanted = match query.asset_class {
            Some(AssetClass::Etf | AssetClass::Fund) => {
                notes.push(format!(
                    "{account}: Alpaca does not tell ETFs and funds from stocks (both are us_equity): its us_equity assets are searched and listed as equity"
                ));
                let mut q = query.any_class();
                q.asset_class = Some(AssetClass::Equity);
                q
            }
            _ => query.clone(),
        };
        let mut found = Vec::new();
        let mut skipped = 0;
        for class in classes {
            let assets = self.assets(class).await?;
            skipped += assets.skipped;
            found.extend(wanted.select(assets.listed.iter()));
        }
        if skipped > 0 {
            notes.push(format!(
                "{account}: {skipped} of Alpaca's asset rows had no symbol, exchange or known class and are left out"
            ));
        }
        if found
            .iter()
            .any(|f| f.instrument.asset_class == AssetClass::Equity)
        {
            notes.push(format!(
                "{account}: Alpaca states no price increment for US stocks (tick null): Reg NMS quotes them in 0.01 at or above 1 USD and 0.0001 below"
            ));
        }
        Ok(InstrumentMatches {
            found,
            source: format!(
                "Alpaca's asset list (GET /v2/assets, status active), read at most once every {} minutes",
                ASSETS_FOR.as_secs() / 60
            ),
            notes,
        })
    }
}
