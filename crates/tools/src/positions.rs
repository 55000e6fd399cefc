//! get_positions and get_exposure.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;
use tradedesk_core::instrument::{UNCLASSIFIED, UNKNOWN_COUNTRY};
use tradedesk_core::{Book, Result, SectorMap};

use crate::accounts::common_notes;
use crate::args::{Basis, ExposureArgs, ExposureBy, PositionsArgs, report_currency_in};
use crate::health::disagreement_note;
use crate::num::Num;
use crate::select::{Selection, select_owned};
use crate::tool::{Call, Meta, Tool, notes_suffix};
use crate::valuation::{Scope, Valuation, accumulate, pct, total, value_ledger};

#[derive(Debug, Serialize, JsonSchema)]
pub struct PositionOut {
    pub account: String,
    pub broker: String,
    pub exchange: String,
    pub symbol: String,
    pub name: Option<String>,
    pub asset_class: String,
    pub sector: String,
    pub country: String,
    pub instrument_currency: String,
    /// long | short
    pub side: String,
    /// Signed: negative for a short.
    pub quantity: Num,
    /// Quantity-weighted open price of the open lots, commissions excluded.
    pub avg_cost: Num,
    /// |quantity| x open price x multiplier plus unconsumed opening commissions (instrument currency).
    pub cost_basis: Num,
    pub market_price: Option<Num>,
    /// Date of the mark used.
    pub market_price_date: Option<String>,
    /// quantity x mark x multiplier, signed (instrument currency).
    pub notional: Option<Num>,
    pub notional_converted: Option<Num>,
    /// What it adds to the account's value: the notional (cash-settled) or the gross
    /// unrealized P&L (margin-settled), instrument currency.
    pub market_value: Option<Num>,
    pub market_value_converted: Option<Num>,
    pub unrealized_pnl: Option<Num>,
    pub unrealized_pnl_converted: Option<Num>,
    /// |notional_converted| over the sum of it across the listed, marked positions.
    pub weight_pct: Option<Num>,
    /// MetaTrader's open tickets in this row (hedging: each its own position).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tickets: Option<Vec<TicketOut>>,
}

/// An open ticket; money in the account's currency.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TicketOut {
    pub ticket: String,
    /// buy | sell
    pub side: &'static str,
    pub lots: Num,
    pub open_price: Num,
    pub open_time: Option<String>,
    pub stop_loss: Option<Num>,
    pub take_profit: Option<Num>,
    pub swap: Num,
    pub commission: Num,
    /// Floating, swap and commission apart.
    pub profit: Num,
    pub magic: Option<i64>,
    pub comment: String,
}

/// Sums two optional figures: unknown when either is.
fn add_opt(a: Option<Num>, b: Option<Num>) -> Option<Num> {
    Some(Num(a?.0 + b?.0))
}

/// Folds a second row of one (account, instrument, side) into the first: a hedging
/// account's tickets are positions of their own, shown under one row.
fn fold_into(row: &mut PositionOut, other: &PositionOut) {
    let (q1, q2) = (row.quantity.0.abs(), other.quantity.0.abs());
    let both = q1 + q2;
    if !both.is_zero() {
        row.avg_cost = Num((row.avg_cost.0 * q1 + other.avg_cost.0 * q2) / both);
    }
    row.quantity = Num(row.quantity.0 + other.quantity.0);
    row.cost_basis = Num(row.cost_basis.0 + other.cost_basis.0);
    row.notional = add_opt(row.notional.take(), other.notional);
    row.notional_converted = add_opt(row.notional_converted.take(), other.notional_converted);
    row.market_value = add_opt(row.market_value.take(), other.market_value);
    row.market_value_converted = add_opt(
        row.market_value_converted.take(),
        other.market_value_converted,
    );
    row.unrealized_pnl = add_opt(row.unrealized_pnl.take(), other.unrealized_pnl);
    row.unrealized_pnl_converted = add_opt(
        row.unrealized_pnl_converted.take(),
        other.unrealized_pnl_converted,
    );
}

fn ticket_out(t: &tradedesk_core::BrokerTicket) -> TicketOut {
    TicketOut {
        ticket: t.ticket.clone(),
        side: t.side.as_str(),
        lots: Num(t.quantity),
        open_price: Num(t.open_price),
        open_time: t.open_time.map(|at| at.to_rfc3339()),
        stop_loss: t.stop_loss.map(Num),
        take_profit: t.take_profit.map(Num),
        swap: Num(t.swap),
        commission: Num(t.commission),
        profit: Num(t.profit),
        magic: t.magic,
        comment: t.comment.clone(),
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct PositionsResult {
    pub currency: String,
    pub as_of: String,
    /// Signed sum of market_value_converted.
    pub total_market_value: Num,
    pub positions: Vec<PositionOut>,
    pub notes: Vec<String>,
}

pub fn get_positions(
    book: &Book,
    v: &Valuation,
    sectors: &SectorMap,
    sel: &Selection,
) -> Result<PositionsResult> {
    let listed: Vec<_> = v
        .positions
        .iter()
        .filter(|p| sel.matches(p.account, p.instrument))
        .collect();
    let gross = total(
        listed
            .iter()
            .filter_map(|p| p.marked.as_ref()?.notional_converted)
            .map(|n| n.abs()),
    )?;
    let mut positions: Vec<PositionOut> = Vec::with_capacity(listed.len());
    let mut rows: BTreeMap<(u32, u32, String), usize> = BTreeMap::new();
    let mut sum = Decimal::ZERO;
    for p in &listed {
        let inst = book.instrument(p.instrument);
        let account = book.account(p.account);
        let m = p.marked.as_ref();
        if let Some(value) = m.and_then(|m| m.market_value_converted) {
            accumulate(&mut sum, value)?;
        }
        let row = PositionOut {
            account: account.id.clone(),
            broker: account.broker.clone(),
            exchange: inst.key.exchange.clone(),
            symbol: inst.key.symbol.clone(),
            name: inst.name.clone(),
            asset_class: inst.asset_class.as_str().to_owned(),
            sector: sectors.sector_of(inst).to_owned(),
            country: inst
                .country
                .clone()
                .unwrap_or_else(|| UNKNOWN_COUNTRY.to_owned()),
            instrument_currency: inst.currency.code().to_owned(),
            side: p.side.as_str().to_owned(),
            quantity: Num(p.quantity),
            avg_cost: Num(p.avg_cost),
            cost_basis: Num(p.cost_basis),
            market_price: m.map(|m| Num(m.price)),
            market_price_date: m.map(|m| m.date.to_string()),
            notional: m.map(|m| Num(m.notional)),
            notional_converted: m.and_then(|m| m.notional_converted).map(Num),
            market_value: m.map(|m| Num(m.market_value)),
            market_value_converted: m.and_then(|m| m.market_value_converted).map(Num),
            unrealized_pnl: m.map(|m| Num(m.unrealized_pnl)),
            unrealized_pnl_converted: m.and_then(|m| m.unrealized_pnl_converted).map(Num),
            weight_pct: m
                .and_then(|m| m.notional_converted)
                .and_then(|n| pct(n.abs(), gross))
                .map(Num),
            tickets: None,
        };
        match rows.entry((p.account, p.instrument, row.side.clone())) {
            std::collections::btree_map::Entry::Occupied(e) => {
                fold_into(&mut positions[*e.get()], &row);
            }
            std::collections::btree_map::Entry::Vacant(e) => {
                e.insert(positions.len());
                positions.push(row);
            }
        }
    }
    for ((account, instrument, side), &i) in &rows {
        let long = side == "long";
        let tickets: Vec<TicketOut> = book
            .tickets
            .iter()
            .filter(|t| {
                t.account == *account
                    && t.instrument == *instrument
                    && (t.side == tradedesk_core::Side::Buy) == long
            })
            .map(ticket_out)
            .collect();
        let row = &mut positions[i];
        if !tickets.is_empty() {
            row.tickets = Some(tickets);
        }
        if let Some(n) = row.notional_converted {
            row.weight_pct = pct(n.0.abs(), gross).map(Num);
        }
    }
    let mut notes = Vec::new();
    common_notes(book, v, listed.iter().copied(), &mut notes);
    if positions.is_empty() {
        notes.push("no open positions match: every selected instrument is flat (a real answer, not missing data)".to_owned());
    }
    Ok(PositionsResult {
        currency: v.currency.code().to_owned(),
        as_of: v.as_of.to_string(),
        total_market_value: Num(sum),
        positions,
        notes,
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct Bucket {
    pub key: String,
    pub value: Num,
    /// value over the gross total, x 100.
    pub pct: Option<Num>,
    pub position_count: u32,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ExposureResult {
    pub by: String,
    pub basis: String,
    pub currency: String,
    /// Total under the chosen basis.
    pub total: Num,
    /// Sum of absolute notionals.
    pub gross_total: Num,
    pub buckets: Vec<Bucket>,
    pub notes: Vec<String>,
}

pub fn get_exposure(
    book: &Book,
    v: &Valuation,
    sectors: &SectorMap,
    by: ExposureBy,
    basis: Basis,
) -> Result<ExposureResult> {
    let mut buckets: BTreeMap<String, (Decimal, u32)> = BTreeMap::new();
    let (mut total, mut gross_total) = (Decimal::ZERO, Decimal::ZERO);
    for p in &v.positions {
        // Unmarked, or no rate into the report currency: left out (noted).
        let Some(notional_converted) = p.marked.as_ref().and_then(|m| m.notional_converted) else {
            continue;
        };
        let inst = book.instrument(p.instrument);
        let account = book.account(p.account);
        let key = match by {
            ExposureBy::Sector => sectors.sector_of(inst).to_owned(),
            ExposureBy::Currency => inst.currency.code().to_owned(),
            ExposureBy::Broker => account.broker.clone(),
            ExposureBy::Account => account.id.clone(),
            ExposureBy::AssetClass => inst.asset_class.as_str().to_owned(),
            ExposureBy::Country => inst
                .country
                .clone()
                .unwrap_or_else(|| UNKNOWN_COUNTRY.to_owned()),
            ExposureBy::Symbol => inst.key.qualified(),
        };
        let value = match basis {
            Basis::Gross => notional_converted.abs(),
            Basis::Net => notional_converted,
        };
        accumulate(&mut total, value)?;
        accumulate(&mut gross_total, notional_converted.abs())?;
        let slot = buckets.entry(key).or_default();
        accumulate(&mut slot.0, value)?;
        slot.1 += 1;
    }
    let mut rows: Vec<Bucket> = buckets
        .into_iter()
        .map(|(key, (value, count))| Bucket {
            key,
            pct: pct(value, gross_total).map(Num),
            value: Num(value),
            position_count: count,
        })
        .collect();
    rows.sort_by(|a, b| b.value.cmp(&a.value).then_with(|| a.key.cmp(&b.key)));
    let mut notes = Vec::new();
    common_notes(book, v, v.positions.iter(), &mut notes);
    notes.retain(|n| !n.starts_with("the broker reports no commissions"));
    if let Some(b) = rows
        .iter()
        .find(|b| b.key == UNCLASSIFIED && by == ExposureBy::Sector)
    {
        notes.push(format!(
            "{} position(s) have no sector and sit in the Unclassified bucket ({}% of gross); add them to the sectors_file to classify",
            b.position_count,
            b.pct.map_or_else(|| "-".to_owned(), |p| p.0.to_string())
        ));
    }
    if let Some(b) = rows
        .iter()
        .find(|b| b.key == UNKNOWN_COUNTRY && by == ExposureBy::Country)
    {
        notes.push(format!(
            "{} position(s) have no country and sit in the Unknown bucket",
            b.position_count
        ));
    }
    if basis == Basis::Net {
        notes.push("net basis: bucket pct are shares of the gross total, so they add up to the net total's share of gross, not to 100".to_owned());
    }
    Ok(ExposureResult {
        by: serde_json::to_value(by)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
        basis: match basis {
            Basis::Gross => "gross".to_owned(),
            Basis::Net => "net".to_owned(),
        },
        currency: v.currency.code().to_owned(),
        total: Num(total),
        gross_total: Num(gross_total),
        buckets: rows,
        notes,
    })
}

/// get_positions.
#[derive(Debug)]
pub struct GetPositions;

impl Tool for GetPositions {
    type Args = PositionsArgs;
    type Output = PositionsResult;
    const META: Meta = Meta::book(
        "get_positions",
        "Open positions",
        "Open positions from the FIFO lots of the fills: quantity, cost, mark, \
                market value, unrealized P&L and weight, in the instrument currency and the \
                report currency. A position without a mark has null values and is left out of \
                totals.",
    );

    async fn run(call: &mut Call<'_>, a: PositionsArgs) -> Result<PositionsResult> {
        let (book, ledger) = call.ledger().await?;
        let ccy = report_currency_in(&book, a.currency.as_deref())?;
        let sel = select_owned(&book, &a.account, &a.broker, &a.symbol)?;
        let scope = Scope {
            accounts: false,
            selection: Some(&sel),
        };
        let v = value_ledger(&book, &ledger, ccy, scope)?;
        let mut r = get_positions(&book, &v, &call.ctx.sectors, &sel)?;
        r.notes
            .extend(disagreement_note(&book, &ledger, |a, i| sel.matches(a, i)));
        Ok(r)
    }

    fn summary(r: &PositionsResult) -> String {
        format!(
            "{} open position(s) as of {}, market value {} {}.{}",
            r.positions.len(),
            r.as_of,
            r.total_market_value.0,
            r.currency,
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"broker": "moomoo", "currency": "MYR"})
    }
}

/// get_exposure.
#[derive(Debug)]
pub struct GetExposure;

impl Tool for GetExposure {
    type Args = ExposureArgs;
    type Output = ExposureResult;
    const META: Meta = Meta::book(
        "get_exposure",
        "Exposure breakdown",
        "Notional exposure of the open positions (cash excluded) in buckets of \
                one dimension, gross or net; pct is of the gross total; positions without a \
                sector are in Unclassified.",
    );

    async fn run(call: &mut Call<'_>, a: ExposureArgs) -> Result<ExposureResult> {
        let (book, ledger) = call.ledger().await?;
        let ccy = report_currency_in(&book, a.currency.as_deref())?;
        let v = value_ledger(&book, &ledger, ccy, Scope::POSITIONS)?;
        get_exposure(
            &book,
            &v,
            &call.ctx.sectors,
            a.by,
            a.basis.unwrap_or_default(),
        )
    }

    fn summary(r: &ExposureResult) -> String {
        let top: Vec<String> = r
            .buckets
            .iter()
            .take(5)
            .map(|b| {
                format!(
                    "{} {}%",
                    b.key,
                    b.pct.map_or_else(|| "-".to_owned(), |p| p.0.to_string())
                )
            })
            .collect();
        format!(
            "{} exposure by {} ({}): {}.{}",
            r.basis,
            r.by,
            r.currency,
            top.join(", "),
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"by": "sector"})
    }
}
