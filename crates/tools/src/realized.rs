//! get_realized_pnl: closed lots of a FIFO replay over the full history, selected by
//! their closing trade date and converted at that date's rate.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::NaiveDate;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;
use tradedesk_core::ledger;
use tradedesk_core::{Book, ClosedLot, Currency, DateRange, Fill, Result};

use crate::args::GroupBy;
use crate::num::Num;
use crate::select::Selection;

#[derive(Debug, Serialize, JsonSchema)]
pub struct PnlGroup {
    pub key: String,
    pub net_pnl: Num,
    pub gross_pnl: Num,
    pub commissions: Num,
    pub lot_count: u32,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Extreme {
    /// The closing fill.
    pub fill_id: String,
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub close_date: String,
    /// Total net P&L of the lots this fill closed (report currency).
    pub net_pnl: Num,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct LotOut {
    pub account: String,
    pub broker: String,
    pub exchange: String,
    pub symbol: String,
    /// Side of the lot: long | short.
    pub side: String,
    pub quantity: Num,
    pub open_date: String,
    pub close_date: String,
    pub open_price: Num,
    pub close_price: Num,
    pub instrument_currency: String,
    pub gross_pnl: Num,
    pub commissions: Num,
    pub net_pnl: Num,
    /// Instrument currency -> report currency, on the closing trade date.
    pub fx_rate: Num,
    pub net_pnl_converted: Num,
    pub open_fill_id: String,
    pub close_fill_id: String,
    pub commission_known: bool,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct RealizedPnlResult {
    pub currency: String,
    pub start: String,
    pub end: String,
    pub net_pnl: Num,
    pub gross_pnl: Num,
    pub commissions: Num,
    pub lot_count: u32,
    pub groups: Vec<PnlGroup>,
    pub biggest_gain: Option<Extreme>,
    pub biggest_loss: Option<Extreme>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lots: Option<Vec<LotOut>>,
    pub notes: Vec<String>,
}

/// Lots listed at most, when asked for.
pub const MAX_LOTS: usize = 1000;

#[derive(Default, Clone, Copy)]
struct Sums {
    net: Decimal,
    gross: Decimal,
    commissions: Decimal,
    lots: u32,
}

impl Sums {
    fn add(&mut self, net: Decimal, gross: Decimal) {
        self.net += net;
        self.gross += gross;
        self.commissions += gross - net;
        self.lots += 1;
    }
}

/// Per-closing-fill total, the unit of "biggest gain / loss".
struct FillTotal {
    fill: usize,
    net: Decimal,
}

/// Keeps the highest positive and lowest negative per-fill totals; ties keep the earlier.
fn finish(t: FillTotal, best: &mut Option<FillTotal>, worst: &mut Option<FillTotal>) {
    if t.net > Decimal::ZERO && best.as_ref().is_none_or(|b| t.net > b.net) {
        *best = Some(FillTotal {
            fill: t.fill,
            net: t.net,
        });
    }
    if t.net < Decimal::ZERO && worst.as_ref().is_none_or(|w| t.net < w.net) {
        *worst = Some(t);
    }
}

/// Rates by (currency, date), looked up once each.
struct RateCache<'a> {
    book: &'a Book,
    to: Currency,
    cache: HashMap<(Currency, NaiveDate), Decimal>,
}

impl RateCache<'_> {
    fn rate(&mut self, from: Currency, on: NaiveDate) -> Result<Decimal> {
        if from == self.to {
            return Ok(Decimal::ONE);
        }
        if let Some(r) = self.cache.get(&(from, on)) {
            return Ok(*r);
        }
        let r = self.book.fx.rate(from, self.to, on)?.rate;
        self.cache.insert((from, on), r);
        Ok(r)
    }
}

/// One closed lot valued in the report currency, rounded once.
struct Valued {
    rate: Decimal,
    net: Decimal,
    gross: Decimal,
}

fn value_lot(
    rates: &mut RateCache<'_>,
    book: &Book,
    lot: &ClosedLot,
    to: Currency,
) -> Result<Valued> {
    let ccy = book.instrument(lot.instrument).currency;
    let rate = rates.rate(ccy, lot.close_date)?;
    let net = to.round(
        lot.net_pnl
            .checked_mul(rate)
            .ok_or_else(|| tradedesk_core::Error::internal("overflow"))?,
    );
    let gross = to.round(
        lot.gross_pnl
            .checked_mul(rate)
            .ok_or_else(|| tradedesk_core::Error::internal("overflow"))?,
    );
    Ok(Valued { rate, net, gross })
}

#[derive(Debug, Clone, Copy)]
pub struct RealizedQuery {
    pub range: DateRange,
    pub currency: Currency,
    pub group_by: GroupBy,
    pub include_lots: bool,
}

#[allow(clippy::too_many_lines)]
pub fn get_realized_pnl(
    book: &Book,
    sel: &Selection,
    q: &RealizedQuery,
) -> Result<RealizedPnlResult> {
    let to = q.currency;
    let mut rates = RateCache {
        book,
        to,
        cache: HashMap::new(),
    };
    let mut total = Sums::default();
    let mut groups: BTreeMap<String, Sums> = BTreeMap::new();
    let mut lots: Vec<LotOut> = Vec::new();
    let mut lots_dropped = 0u32;
    let mut gross_of_fees: BTreeSet<String> = BTreeSet::new();
    let mut current: Option<FillTotal> = None;
    let mut best: Option<FillTotal> = None;
    let mut worst: Option<FillTotal> = None;
    let mut failure = None;
    let fills: &[Fill] = &book.fills;

    ledger::replay(book, |_, lot| {
        if failure.is_some()
            || !q.range.contains(lot.close_date)
            || !sel.matches(lot.account, lot.instrument)
        {
            return;
        }
        let valued = match value_lot(&mut rates, book, lot, to) {
            Ok(v) => v,
            Err(e) => {
                failure = Some(e);
                return;
            }
        };
        total.add(valued.net, valued.gross);
        let inst = book.instrument(lot.instrument);
        let account = book.account(lot.account);
        let key = match q.group_by {
            GroupBy::Symbol => Some(inst.key.qualified()),
            GroupBy::Account => Some(account.id.clone()),
            GroupBy::Broker => Some(account.broker.clone()),
            GroupBy::Month => Some(lot.close_date.format("%Y-%m").to_string()),
            GroupBy::None => None,
        };
        if let Some(key) = key {
            groups.entry(key).or_default().add(valued.net, valued.gross);
        }
        if !lot.commission_known {
            gross_of_fees.insert(inst.key.qualified());
        }
        let close = lot.close_fill as usize;
        match current.as_mut() {
            Some(t) if t.fill == close => t.net += valued.net,
            _ => {
                if let Some(done) = current.replace(FillTotal {
                    fill: close,
                    net: valued.net,
                }) {
                    finish(done, &mut best, &mut worst);
                }
            }
        }
        if q.include_lots {
            if lots.len() >= MAX_LOTS {
                lots_dropped += 1;
                return;
            }
            let ccy = inst.currency;
            lots.push(LotOut {
                account: account.id.clone(),
                broker: account.broker.clone(),
                exchange: inst.key.exchange.clone(),
                symbol: inst.key.symbol.clone(),
                side: lot.side.as_str().to_owned(),
                quantity: Num(lot.quantity),
                open_date: lot.open_date.to_string(),
                close_date: lot.close_date.to_string(),
                open_price: Num(lot.open_price),
                close_price: Num(lot.close_price),
                instrument_currency: ccy.code().to_owned(),
                gross_pnl: Num(ccy.round(lot.gross_pnl)),
                commissions: Num(ccy.round(lot.gross_pnl) - ccy.round(lot.net_pnl)),
                net_pnl: Num(ccy.round(lot.net_pnl)),
                fx_rate: Num(valued.rate.normalize()),
                net_pnl_converted: Num(valued.net),
                open_fill_id: fills[lot.open_fill as usize].id.clone(),
                close_fill_id: fills[close].id.clone(),
                commission_known: lot.commission_known,
            });
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(done) = current.take() {
        finish(done, &mut best, &mut worst);
    }
    let extreme = |t: Option<FillTotal>| {
        t.map(|t| {
            let f = &fills[t.fill];
            let inst = book.instrument(f.instrument);
            Extreme {
                fill_id: f.id.clone(),
                account: book.account(f.account).id.clone(),
                exchange: inst.key.exchange.clone(),
                symbol: inst.key.symbol.clone(),
                close_date: f.trade_date.to_string(),
                net_pnl: Num(t.net),
            }
        })
    };

    let mut notes = Vec::new();
    if total.lots == 0 {
        notes.push(format!(
            "no lots were closed between {} and {} under these filters: realized P&L is a true zero, not missing data",
            q.range.start, q.range.end
        ));
    }
    if !gross_of_fees.is_empty() {
        notes.push(format!(
            "P&L is gross of fees for {}: the broker reports no commissions for these fills",
            gross_of_fees.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if lots_dropped > 0 {
        notes.push(format!(
            "lots lists the first {MAX_LOTS} closed lots; {lots_dropped} more are in the totals but not listed (narrow the dates or filters)"
        ));
    }
    notes.push(
        "realized P&L covers closed lots only; dividends, interest and fees are cash, not P&L"
            .to_owned(),
    );
    Ok(RealizedPnlResult {
        currency: to.code().to_owned(),
        start: q.range.start.to_string(),
        end: q.range.end.to_string(),
        net_pnl: Num(total.net),
        gross_pnl: Num(total.gross),
        commissions: Num(total.commissions),
        lot_count: total.lots,
        groups: groups
            .into_iter()
            .map(|(key, s)| PnlGroup {
                key,
                net_pnl: Num(s.net),
                gross_pnl: Num(s.gross),
                commissions: Num(s.commissions),
                lot_count: s.lots,
            })
            .collect(),
        biggest_gain: extreme(best),
        biggest_loss: extreme(worst),
        lots: q.include_lots.then_some(lots),
        notes,
    })
}
