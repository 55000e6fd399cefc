//! `search_instruments` on the sim: its instrument table (the demo's stocks and ETFs, the
//! FX pairs, gold and the perp), each with the rules its orders are held to.

use rust_decimal::Decimal;
use rust_decimal::prelude::ToPrimitive;
use tradedesk_core::AssetClass;

use super::SimBroker;
use crate::BrokerError;
use crate::search::{InstrumentMatches, InstrumentQuery, ListedInstrument, TradingRules};

impl SimBroker {
    /// Every instrument of the sim's universe that matches, with the rules `place_order`
    /// holds it to: Bursa's tick is the one for the price it trades at now.
    pub(super) fn search(
        &self,
        account: &str,
        query: &InstrumentQuery,
    ) -> Result<InstrumentMatches, BrokerError> {
        self.check_account(account)?;
        let now = self.clock.now();
        let listed: Vec<ListedInstrument> = self
            .universe
            .iter()
            .map(|inst| {
                let spec = &inst.spec;
                let (bid, ask) = inst.bid_ask(self.config.seed, now);
                let bursa = spec.key.exchange == "BURSA";
                let leveraged = spec.margin_rate < Decimal::ONE && !spec.margin_rate.is_zero();
                ListedInstrument {
                    key: spec.key.clone(),
                    venue_symbol: None,
                    name: inst.instrument.name.clone(),
                    currency: Some(spec.currency.code().to_owned()),
                    asset_class: spec.asset_class,
                    tradable: Some(true),
                    rules: TradingRules {
                        min_quantity: Some(spec.min_quantity),
                        lot_step: Some(spec.lot_step),
                        lot_size: bursa.then_some(spec.lot_step),
                        tick: Some(inst.tick_at((bid + ask) / Decimal::TWO)),
                        multiplier: Some(spec.multiplier),
                        unit: Some(spec.unit),
                        fractionable: Some(spec.lot_step < Decimal::ONE),
                        shortable: Some(true),
                        easy_to_borrow: None,
                        marginable: Some(leveraged),
                        max_leverage: leveraged
                            .then(|| (Decimal::ONE / spec.margin_rate).floor().to_u32())
                            .flatten(),
                        only_isolated: (spec.asset_class == AssetClass::Perp).then_some(false),
                    },
                }
            })
            .collect();
        Ok(InstrumentMatches {
            found: query.select(&listed),
            source: "the sim's instrument table".to_owned(),
            notes: Vec::new(),
        })
    }
}
