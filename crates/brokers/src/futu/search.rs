//! `search_instruments` on OpenD: `Qot_GetStaticInfo` (3202) lists a market's securities
//! of one type, with their names, board lots and delisting flags
//! (docs/dev/futu-opend-facts.md, section 15). Each (market, type) list is kept for
//! [`STATIC_FOR`]: it changes with listings, not with prices.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rust_decimal::Decimal;
use tradedesk_core::AssetClass;

use super::{FutuMarket, OpenDBroker, proto};
use crate::BrokerError;
use crate::search::{InstrumentMatches, InstrumentQuery, ListedInstrument, TradingRules};

/// How long a market's static list is searched before OpenD is asked again.
pub(super) const STATIC_FOR: Duration = Duration::from_secs(3600);

/// The lists read, by (QotMarket, SecurityType), and when.
pub(super) type StaticCache = tokio::sync::Mutex<BTreeMap<(i32, i32), (Instant, Arc<StaticList>)>>;

/// One market's securities of one type, and the rows that could not be read.
#[derive(Debug)]
pub(super) struct StaticList {
    listed: Vec<ListedInstrument>,
    skipped: usize,
}

/// The security types searched for an asset class, or why none is.
fn types_for(class: Option<AssetClass>) -> Result<Vec<i32>, &'static str> {
    use proto::security_type as t;
    match class {
        None => Ok(vec![t::EQUITY, t::TRUST]),
        Some(AssetClass::Equity) => Ok(vec![t::EQUITY]),
        Some(AssetClass::Etf | AssetClass::Fund) => Ok(vec![t::TRUST]),
        Some(AssetClass::Bond) => Ok(vec![t::BOND]),
        Some(AssetClass::Future) => Ok(vec![t::FUTURE]),
        Some(AssetClass::Option) => Err(
            "OpenD lists options by their underlying, not in a market's static list: search the underlying",
        ),
        Some(_) => Err(
            "OpenD lists stocks, ETFs and trusts, bonds, warrants, options and futures: ask for equity, etf, bond or future",
        ),
    }
}

fn class_of(sec_type: i32) -> Option<AssetClass> {
    use proto::security_type as t;
    Some(match sec_type {
        t::EQUITY => AssetClass::Equity,
        t::TRUST => AssetClass::Etf,
        t::BOND => AssetClass::Bond,
        t::FUTURE => AssetClass::Future,
        t::DRVT => AssetClass::Option,
        _ => return None,
    })
}

/// OpenD's market prefix of a code (`HK.00700`).
fn prefix(qot_market: i32) -> &'static str {
    match qot_market {
        proto::qot_market::MY => "MY",
        proto::qot_market::HK => "HK",
        _ => "US",
    }
}

/// One static-info row as a listed instrument; `None` for a row without a code or of a
/// type tradedesk does not model (warrants, indexes, plates).
fn listed_of(info: &proto::SecurityStaticInfo) -> Option<ListedInstrument> {
    let basic = info.basic.as_ref()?;
    let security = basic.security.as_ref()?;
    let code = security.code.as_deref().filter(|c| !c.trim().is_empty())?;
    let class = class_of(basic.sec_type?)?;
    let (key, currency) = OpenDBroker::key_of(security);
    let lot = basic.lot_size.filter(|l| *l > 0).map(Decimal::from);
    // For futures and options OpenD's lotSize is the contract multiplier.
    let derivative = matches!(class, AssetClass::Future | AssetClass::Option);
    Some(ListedInstrument {
        key,
        venue_symbol: Some(format!(
            "{}.{code}",
            prefix(security.market.unwrap_or_default())
        )),
        name: basic.name.clone().filter(|n| !n.trim().is_empty()),
        currency: Some(currency.code().to_owned()),
        asset_class: class,
        tradable: basic.delisting.map(|d| !d).or(Some(true)),
        rules: TradingRules {
            min_quantity: if derivative { Some(Decimal::ONE) } else { lot },
            lot_step: if derivative { Some(Decimal::ONE) } else { lot },
            lot_size: if derivative { None } else { lot },
            tick: None,
            multiplier: if derivative { lot } else { Some(Decimal::ONE) },
            unit: Some(if derivative { "contracts" } else { "shares" }),
            ..TradingRules::default()
        },
    })
}

impl OpenDBroker {
    /// One market's static list of one type, from the cache or OpenD.
    async fn static_list(
        &self,
        market: i32,
        sec_type: i32,
    ) -> Result<Arc<StaticList>, BrokerError> {
        if let Some((at, list)) = self.statics.lock().await.get(&(market, sec_type))
            && at.elapsed() < STATIC_FOR
        {
            return Ok(Arc::clone(list));
        }
        let resp: proto::GetStaticInfoResponse = self
            .with_conn(move |me, conn| {
                Box::pin(async move {
                    me.call(
                        conn,
                        proto::GET_STATIC_INFO,
                        &proto::GetStaticInfoRequest {
                            c2s: Some(proto::GetStaticInfoC2s {
                                market: Some(market),
                                sec_type: Some(sec_type),
                                security_list: Vec::new(),
                            }),
                        },
                    )
                    .await
                })
            })
            .await?;
        let rows = resp.s2c.map(|s| s.static_info_list).unwrap_or_default();
        let listed: Vec<ListedInstrument> = rows.iter().filter_map(listed_of).collect();
        let list = Arc::new(StaticList {
            skipped: rows.len() - listed.len(),
            listed,
        });
        self.statics
            .lock()
            .await
            .insert((market, sec_type), (Instant::now(), Arc::clone(&list)));
        Ok(list)
    }

    pub(super) async fn search(
        &self,
        account: &str,
        query: &InstrumentQuery,
    ) -> Result<InstrumentMatches, BrokerError> {
        crate::check_served(&self.config.id, account)?;
        // An exchange in the query picks the market (BURSA:, HKEX:, US: or NASDAQ:);
        // the listing keys US securities under US, so the exchange is not matched again.
        let market = match query.exchange.as_deref() {
            Some(e) => self.security(&format!("{e}:x")).market,
            None => None,
        }
        .unwrap_or(match self.config.market {
            FutuMarket::My => proto::qot_market::MY,
            FutuMarket::Hk => proto::qot_market::HK,
            FutuMarket::Us => proto::qot_market::US,
        });
        let mut wanted = query.clone();
        wanted.exchange = None;
        let mut notes = Vec::new();
        let types = match types_for(query.asset_class) {
            Ok(t) => t,
            Err(why) => {
                notes.push(format!("{account}: {why}"));
                Vec::new()
            }
        };
        let mut found = Vec::new();
        let mut skipped = 0;
        for sec_type in types {
            let list = self.static_list(market, sec_type).await?;
            skipped += list.skipped;
            found.extend(wanted.select(list.listed.iter()));
        }
        if skipped > 0 {
            notes.push(format!(
                "{account}: {skipped} of OpenD's static rows had no code or a type tradedesk does not model and are left out"
            ));
        }
        notes.push(format!(
            "{account}: OpenD's static list gives no tick size (get_quote reads it from the snapshot), and no shortable or marginable flags"
        ));
        Ok(InstrumentMatches {
            found,
            source: format!(
                "OpenD's {} static list (Qot_GetStaticInfo: stocks and ETFs unless asset_class says otherwise), read at most once an hour",
                prefix(market)
            ),
            notes,
        })
    }
}
