//! `search_instruments` on MetaTrader: the DWXConnect EA writes no symbol list and has
//! no command for one (docs/dev/dwx-hyperliquid-facts.md, A.2), so the symbols searched
//! are those the account is known to have: its open orders' and positions' symbols
//! (`DWX_Orders.txt`), the symbols the config specifies, and those subscribed and
//! quoted (`DWX_Market_Data.txt`). Each carries the spec `place_order` would use.

use std::collections::BTreeSet;

use rust_decimal::Decimal;
use serde_json::Value;
use tradedesk_core::InstrumentKey;

use super::{DwxBroker, exchange_of, resolve, text};
use crate::BrokerError;
use crate::search::{InstrumentMatches, InstrumentQuery, ListedInstrument, TradingRules};

impl DwxBroker {
    pub(super) async fn search(
        &self,
        account: &str,
        query: &InstrumentQuery,
    ) -> Result<InstrumentMatches, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        let orders = self.orders_file().await?;
        let info = self.account_info(&orders)?;
        let mut symbols: BTreeSet<String> = orders
            .get("orders")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(_, o)| text(o, "symbol"))
            .collect();
        symbols.extend(self.config.symbols.keys().cloned());
        symbols.extend(self.subscribed.lock().await.iter().cloned());
        if let Some(Value::Object(quoted)) = self.read_json("DWX_Market_Data.txt").await {
            symbols.extend(quoted.keys().cloned());
        }
        symbols.retain(|s| !s.trim().is_empty());
        let mut assumed = Vec::new();
        let listed: Vec<ListedInstrument> = symbols
            .iter()
            .map(|symbol| {
                let r = resolve(symbol, info.currency, &self.config.symbols, None);
                if r.assumed.is_some() {
                    assumed.push(symbol.clone());
                }
                ListedInstrument {
                    key: InstrumentKey::new(exchange_of(r.class), symbol),
                    venue_symbol: None,
                    name: None,
                    currency: Some(r.currency.code().to_owned()),
                    asset_class: r.class,
                    tradable: None,
                    rules: TradingRules {
                        // The EA writes lots with 2 decimals: 0.01 is the step it keeps.
                        min_quantity: Some(Decimal::new(1, 2)),
                        lot_step: Some(Decimal::new(1, 2)),
                        lot_size: None,
                        tick: Some(r.tick),
                        multiplier: r.assumed.is_none().then_some(r.multiplier),
                        unit: Some("lots"),
                        ..TradingRules::default()
                    },
                }
            })
            .collect();
        let found = query.select(&listed);
        let mut notes = vec![format!(
            "{account}: the DWXConnect EA writes no symbol list: searched are the symbols of the account's open orders and positions, the config's [accounts.symbols] and those subscribed; another symbol in the terminal's Market Watch still trades: name it to get_quote"
        )];
        let shown: Vec<&String> = assumed
            .iter()
            .filter(|s| found.iter().any(|f| &f.instrument.key.symbol == *s))
            .collect();
        if !shown.is_empty() {
            notes.push(format!(
                "{account}: the contract size of {} is not known (null): add contract_size and profit_currency under [accounts.symbols.\"SYMBOL\"] in tradedesk.toml",
                shown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        Ok(InstrumentMatches {
            found,
            source: "the symbols the DWXConnect EA and the config know of this account".to_owned(),
            notes,
        })
    }
}
