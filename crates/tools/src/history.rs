//! get_trade_history.

use schemars::JsonSchema;
use serde::Serialize;
use tradedesk_core::{Book, DateRange, Error, Result, Side};

use crate::args::{SideArg, TradeHistoryArgs};
use crate::num::Num;
use crate::select::{Selection, select_owned};
use crate::tool::{Call, Meta, Tool, notes_suffix};

#[derive(Debug, Serialize, JsonSchema)]
pub struct FillOut {
    pub id: String,
    pub account: String,
    pub broker: String,
    pub exchange: String,
    pub symbol: String,
    pub side: String,
    pub quantity: Num,
    pub price: Num,
    /// null when the broker reports none.
    pub commission: Option<Num>,
    pub commission_currency: String,
    pub commission_known: bool,
    /// RFC 3339 with the fill's own offset.
    pub time: String,
    /// Calendar date of `time` in its own offset.
    pub trade_date: String,
    pub instrument_currency: String,
    /// Absent for an execution; `opening`: a position held when the history starts (at
    /// the broker's cost, no cash moved); `action`: a corporate action or option event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// quantity x price x multiplier (instrument currency).
    pub notional: Num,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct TradeHistoryResult {
    pub start: String,
    pub end: String,
    pub count: u32,
    pub total_count: u32,
    pub truncated: bool,
    /// Newest first.
    pub fills: Vec<FillOut>,
    pub notes: Vec<String>,
}

pub const DEFAULT_LIMIT: i64 = 100;
pub const MAX_LIMIT: i64 = 1000;

/// Checks `limit` (1..=1000, not clamped).
///
/// # Errors
/// `invalid_argument` naming `limit`.
pub fn check_limit(limit: Option<i64>) -> Result<usize> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(Error::invalid_argument(
            format!("limit: {limit} is outside 1..={MAX_LIMIT}"),
            format!(
                "give a limit from 1 to {MAX_LIMIT}, and narrow the dates or filters to see more"
            ),
        ));
    }
    usize::try_from(limit).map_err(|_| Error::internal("limit"))
}

pub fn get_trade_history(
    book: &Book,
    range: DateRange,
    sel: &Selection,
    side: Option<SideArg>,
    limit: usize,
) -> Result<TradeHistoryResult> {
    let side = side.map(Side::from);
    let matching = book.fills.iter().rev().filter(|f| {
        range.contains(f.trade_date)
            && sel.matches(f.account, f.instrument)
            && side.is_none_or(|s| f.side == s)
    });
    let mut fills = Vec::new();
    let mut total = 0u32;
    let mut unknown_commission = 0u32;
    for f in matching {
        total += 1;
        if fills.len() >= limit {
            continue;
        }
        let inst = book.instrument(f.instrument);
        let account = book.account(f.account);
        if !f.commission_known {
            unknown_commission += 1;
        }
        let notional = f
            .quantity
            .checked_mul(f.price)
            .and_then(|n| n.checked_mul(inst.multiplier))
            .ok_or_else(|| {
                tradedesk_core::bounds::too_large(format!("the notional of fill {}", f.id))
            })?;
        fills.push(FillOut {
            id: f.id.to_string(),
            account: account.id.clone(),
            broker: account.broker.clone(),
            exchange: inst.key.exchange.clone(),
            symbol: inst.key.symbol.clone(),
            side: f.side.as_str().to_owned(),
            quantity: Num(f.quantity),
            price: Num(f.price),
            commission: f.commission_known.then_some(Num(f.commission)),
            commission_currency: f.commission_currency.code().to_owned(),
            commission_known: f.commission_known,
            kind: matches!(
                f.kind,
                tradedesk_core::FillKind::Opening
                    | tradedesk_core::FillKind::Action
                    | tradedesk_core::FillKind::TransferOut
            )
            .then(|| f.kind.as_str().to_owned()),
            time: f.time.to_rfc3339(),
            trade_date: f.trade_date.to_string(),
            instrument_currency: inst.currency.code().to_owned(),
            notional: Num(inst.currency.round(notional)),
        });
    }
    let count = u32::try_from(fills.len()).unwrap_or(u32::MAX);
    let mut notes = Vec::new();
    if total > count {
        notes.push(format!(
            "showing the newest {count} of {total} fills; narrow the dates or filters, or raise limit (at most {MAX_LIMIT})"
        ));
    }
    if unknown_commission > 0 {
        notes.push(format!(
            "{unknown_commission} fill(s) carry no commission from the broker (commission null): their P&L is gross of fees"
        ));
    }
    if total == 0 {
        notes.push("no fills match in this period: a real answer, not missing data".to_owned());
    }
    notes.extend(book.notes.iter().cloned());
    Ok(TradeHistoryResult {
        start: range.start.to_string(),
        end: range.end.to_string(),
        count,
        total_count: total,
        truncated: total > count,
        fills,
        notes,
    })
}

/// get_trade_history.
#[derive(Debug)]
pub struct GetTradeHistory;

impl Tool for GetTradeHistory {
    type Args = TradeHistoryArgs;
    type Output = TradeHistoryResult;
    const META: Meta = Meta::book(
        "get_trade_history",
        "Trade history",
        "Fills between two trade dates (each fill's in its own time zone), \
                newest first, filtered by account, broker, symbol or side; total_count and \
                truncated tell when more matched.",
    );

    async fn run(call: &mut Call<'_>, a: TradeHistoryArgs) -> Result<TradeHistoryResult> {
        let (book, _) = call.ledger().await?;
        let range = DateRange::parse(&a.start, &a.end)?;
        let limit = check_limit(a.limit)?;
        let sel = select_owned(&book, &a.account, &a.broker, &a.symbol)?;
        get_trade_history(&book, range, &sel, a.side, limit)
    }

    fn summary(r: &TradeHistoryResult) -> String {
        format!(
            "{} of {} fill(s) from {} to {}, newest first.{}",
            r.count,
            r.total_count,
            r.start,
            r.end,
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"start": "2026-10-01", "end": "2026-11-27", "limit": 2})
    }
}
