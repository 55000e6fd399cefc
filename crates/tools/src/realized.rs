//! get_realized_pnl: closed lots of a FIFO replay over the full history, selected by
//! their closing trade date and converted at that date's rate.

use std::collections::{BTreeMap, BTreeSet};

use chrono::Datelike;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;
use tradedesk_core::ledger;
use tradedesk_core::{Book, ClosedLot, Currency, DateRange, ErrorCode, Fill, Fixed, Result};

use crate::args::{GroupBy, RealizedPnlArgs, report_currency_in};
use crate::num::Num;
use crate::rates::Rates;
use crate::select::{Selection, select_owned};
use crate::tool::{Call, Meta, Tool, notes_suffix};

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
    /// Pass as `cursor` with the same other arguments for the next page; absent on the
    /// last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    pub notes: Vec<String>,
}

/// Lots listed per page at most, and by default.
pub const MAX_LOTS: usize = 1000;

/// Which closed lots to list: `limit` of them from the `offset`-th (0-based) of the
/// period's lots in replay order. A page from a cursor also carries what the cursor was
/// made for, checked against the query before listing anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LotPage {
    pub offset: usize,
    pub limit: usize,
    /// The period's lot count and query fingerprint when the cursor was made.
    pub made_for: Option<(u32, u64)>,
}

impl LotPage {
    pub const FIRST: Self = Self {
        offset: 0,
        limit: MAX_LOTS,
        made_for: None,
    };
}

/// A fingerprint of everything a lot page depends on but the page itself: the period,
/// the filters and the report currency (FNV-1a, stable across runs and builds).
pub fn query_fingerprint(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain(std::iter::once(0x1f)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

fn encode_cursor(offset: usize, count: u32, fingerprint: u64) -> String {
    format!("lots-{offset}-{count}-{fingerprint:016x}")
}

fn bad_cursor(cursor: &str, why: &str) -> tradedesk_core::Error {
    tradedesk_core::Error::invalid_argument(
        format!(
            "cursor {} {why}",
            tradedesk_core::error::quote(&cursor.chars().take(80).collect::<String>())
        ),
        "pass next_cursor exactly as the previous get_realized_pnl answer gave it, with the same start, end, account, broker, symbol and currency; or leave cursor out to list from the first lot",
    )
}

/// Reads a cursor this tool returned into the page it names.
///
/// # Errors
/// `invalid_argument` naming the cursor when it is not one this tool made for a query
/// with this fingerprint.
pub fn parse_cursor(cursor: &str, limit: usize, fingerprint: u64) -> Result<LotPage> {
    let fields: Vec<&str> = cursor.split('-').collect();
    let [tag, offset, count, fp_text] = fields.as_slice() else {
        return Err(bad_cursor(
            cursor,
            "is not a cursor get_realized_pnl returned",
        ));
    };
    let (Ok(offset), Ok(count), Ok(fp)) = (
        offset.parse::<usize>(),
        count.parse::<u32>(),
        u64::from_str_radix(fp_text, 16),
    ) else {
        return Err(bad_cursor(
            cursor,
            "is not a cursor get_realized_pnl returned",
        ));
    };
    if *tag != "lots" || fp_text.len() != 16 || offset == 0 || offset >= count as usize {
        return Err(bad_cursor(
            cursor,
            "is not a cursor get_realized_pnl returned",
        ));
    }
    if fp != fingerprint {
        return Err(bad_cursor(
            cursor,
            "was made for another period, filter or currency",
        ));
    }
    Ok(LotPage {
        offset,
        limit,
        made_for: Some((count, fp)),
    })
}

/// Sums in the report currency's minor unit (an integer count of cents, say).
#[derive(Default, Clone, Copy)]
struct Sums {
    net: i128,
    gross: i128,
    lots: u32,
}

impl Sums {
    fn add(&mut self, v: &Valued) {
        self.net += v.net;
        self.gross += v.gross;
        self.lots += 1;
    }
}

/// Per-closing-fill total, the unit of "biggest gain / loss".
#[derive(Clone, Copy)]
struct FillTotal {
    fill: usize,
    net: i128,
}

/// Keeps the highest positive and lowest negative per-fill totals; ties keep the earlier.
fn finish(t: FillTotal, best: &mut Option<FillTotal>, worst: &mut Option<FillTotal>) {
    if t.net > 0 && best.is_none_or(|b| t.net > b.net) {
        *best = Some(t);
    }
    if t.net < 0 && worst.is_none_or(|w| t.net < w.net) {
        *worst = Some(t);
    }
}

/// One closed lot valued: each figure rounded once, held as an integer of minor units.
pub(crate) struct Valued {
    pub(crate) rate: Decimal,
    /// In the report currency.
    pub(crate) net: i128,
    pub(crate) gross: i128,
    /// In the instrument currency: `net_ccy = gross_ccy - commissions_ccy`.
    pub(crate) net_ccy: i128,
    pub(crate) gross_ccy: i128,
    pub(crate) commissions_ccy: i128,
}

/// `round(before + share) - round(before)` at `dp` places: shares of one total rounded
/// this way, one after the other, add up to the total rounded.
fn cumulative(before: Fixed, share: Fixed, dp: u32) -> i128 {
    Fixed(before.0.saturating_add(share.0)).round_to(dp) - before.round_to(dp)
}

/// Values closed lots in replay order, rounding so that rows add up to what the fills
/// say (`docs/methodology/realized-pnl.md`): the net P&L of the lots one fill closes adds
/// up to that trade's net rounded once (the figure a broker states per closing trade), a
/// fill's commission shares add up to the fill's commission, and each row's gross is its
/// net plus its commissions.
pub(crate) struct LotValuer<'b> {
    pub(crate) rates: Rates<'b>,
    to: Currency,
    book: &'b Book,
    /// The closing fill of the lots seen since the last reset, with their exact sums and
    /// what has been handed out of them, rounded.
    fill: Option<u32>,
    gross: Fixed,
    net: Fixed,
    net_ccy_done: i128,
    gross_done: i128,
    net_done: i128,
}

impl<'b> LotValuer<'b> {
    pub(crate) fn new(book: &'b Book, to: Currency) -> Self {
        Self {
            rates: Rates::new(book),
            to,
            book,
            fill: None,
            gross: Fixed::ZERO,
            net: Fixed::ZERO,
            net_ccy_done: 0,
            gross_done: 0,
            net_done: 0,
        }
    }

    /// Values the next closed lot (lots of one closing fill come one after another).
    ///
    /// # Errors
    /// `no_fx_rate` when the instrument currency cannot be converted on the closing date.
    pub(crate) fn value(&mut self, lot: &ClosedLot) -> Result<Valued> {
        if self.fill != Some(lot.close_fill) {
            self.fill = Some(lot.close_fill);
            self.gross = Fixed::ZERO;
            self.net = Fixed::ZERO;
            self.net_ccy_done = 0;
            self.gross_done = 0;
            self.net_done = 0;
        }
        let overflow = || tradedesk_core::bounds::too_large("the realized P&L of a closing fill");
        self.gross = self.gross.checked_add(lot.gross_pnl).ok_or_else(overflow)?;
        self.net = self.net.checked_add(lot.net_pnl).ok_or_else(overflow)?;
        let ccy = self.book.instrument(lot.instrument).currency;
        let cdp = ccy.minor_units();
        let net_ccy = self.net.round_to(cdp) - self.net_ccy_done;
        self.net_ccy_done += net_ccy;
        let commissions_ccy = cumulative(lot.open_commission_before, lot.open_commission, cdp)
            + cumulative(lot.close_commission_before, lot.close_commission, cdp);
        let gross_ccy = net_ccy + commissions_ccy;
        if ccy == self.to {
            return Ok(Valued {
                rate: Decimal::ONE,
                net: net_ccy,
                gross: gross_ccy,
                net_ccy,
                gross_ccy,
                commissions_ccy,
            });
        }
        let dp = self.to.minor_units();
        let rate = self.rates.rate(ccy, self.to, lot.close_date)?;
        // Converted, gross and net are each rounded once from their exact sums (the
        // commissions in the report currency are the difference).
        let gross = rate.apply_rounded(self.gross, dp)? - self.gross_done;
        self.gross_done += gross;
        let net = rate.apply_rounded(self.net, dp)? - self.net_done;
        self.net_done += net;
        Ok(Valued {
            rate: rate.rate,
            net,
            gross,
            net_ccy,
            gross_ccy,
            commissions_ccy,
        })
    }
}

/// Group sums in a dense vector: keys are small indices, or months counted from the
/// range's first month.
struct GroupSums {
    base: u64,
    sums: Vec<Option<Sums>>,
    spill: BTreeMap<u64, Sums>,
}

impl GroupSums {
    fn new(q: &RealizedQuery) -> Self {
        let base = match q.group_by {
            GroupBy::Month => u64::try_from(q.range.start.year()).unwrap_or(0) * 12,
            _ => 0,
        };
        Self {
            base,
            sums: Vec::new(),
            spill: BTreeMap::new(),
        }
    }

    fn add(&mut self, key: u64, v: &Valued) {
        match key
            .checked_sub(self.base)
            .and_then(|k| usize::try_from(k).ok())
            .filter(|k| *k < 1 << 16)
        {
            Some(k) => {
                if k >= self.sums.len() {
                    self.sums.resize(k + 1, None);
                }
                self.sums[k].get_or_insert_with(Sums::default).add(v);
            }
            None => self.spill.entry(key).or_default().add(v),
        }
    }

    /// Every group with lots, in no particular order (the caller sorts by label).
    fn into_groups(self) -> impl Iterator<Item = (u64, Sums)> {
        let base = self.base;
        let dense = self
            .sums
            .into_iter()
            .enumerate()
            .filter_map(move |(k, s)| Some((base + k as u64, s?)));
        dense.chain(self.spill)
    }
}

#[derive(Debug, Clone, Copy)]
pub struct RealizedQuery {
    pub range: DateRange,
    pub currency: Currency,
    pub group_by: GroupBy,
    pub include_lots: bool,
    /// The lots to list when `include_lots`.
    pub page: LotPage,
    /// See [`query_fingerprint`]: what a returned cursor is bound to.
    pub fingerprint: u64,
}

/// A group's key while aggregating: an index, or a month number, never a string.
fn group_key(book: &Book, brokers: &[&str], group_by: GroupBy, lot: &ClosedLot) -> Option<u64> {
    match group_by {
        GroupBy::Symbol => Some(u64::from(lot.instrument)),
        GroupBy::Account => Some(u64::from(lot.account)),
        GroupBy::Broker => {
            let name = book.account(lot.account).broker.as_str();
            brokers
                .iter()
                .position(|b| *b == name)
                .and_then(|i| u64::try_from(i).ok())
        }
        GroupBy::Month => {
            let (y, m) = (lot.close_date.year(), lot.close_date.month0());
            u64::try_from(y).ok().map(|y| y * 12 + u64::from(m))
        }
        GroupBy::None => None,
    }
}

fn group_label(book: &Book, brokers: &[&str], group_by: GroupBy, key: u64) -> String {
    let idx = u32::try_from(key).unwrap_or(u32::MAX);
    match group_by {
        GroupBy::Symbol => book.instrument(idx).key.qualified(),
        GroupBy::Account => book.account(idx).id.clone(),
        GroupBy::Broker => brokers
            .get(idx as usize)
            .map(|b| (*b).to_owned())
            .unwrap_or_default(),
        GroupBy::Month => format!("{:04}-{:02}", key / 12, key % 12 + 1),
        GroupBy::None => String::new(),
    }
}

#[allow(clippy::too_many_lines)]
pub fn get_realized_pnl(
    book: &Book,
    sel: &Selection,
    q: &RealizedQuery,
) -> Result<RealizedPnlResult> {
    let to = q.currency;
    let dp = to.minor_units();
    let money = |v: i128| crate::num::minor(v, dp);
    let mut brokers: Vec<&str> = book.accounts.iter().map(|a| a.broker.as_str()).collect();
    brokers.sort_unstable();
    brokers.dedup();
    // Staleness is not noted here: a book quoted monthly would flag most closing dates.
    let mut valuer = LotValuer::new(book, to);
    let mut total = Sums::default();
    let mut groups = GroupSums::new(q);
    let mut lots: Vec<LotOut> = Vec::new();
    let mut lots_seen = 0usize;
    let mut assumed_specs: BTreeSet<u32> = BTreeSet::new();
    let mut gross_of_fees: BTreeSet<u32> = BTreeSet::new();
    let mut current: Option<FillTotal> = None;
    let mut best: Option<FillTotal> = None;
    let mut worst: Option<FillTotal> = None;
    let mut failure = None;
    let mut no_rate_lots = 0u32;
    let fills: &[Fill] = &book.fills;

    let replayed = ledger::replay_lots(book, |_, lot| {
        if failure.is_some()
            || !q.range.contains(lot.close_date)
            || !sel.matches(lot.account, lot.instrument)
        {
            return;
        }
        let valued = match valuer.value(lot) {
            Ok(v) => v,
            // Left out of every total, with a note naming the pair (docs/methodology/fx.md).
            Err(e) if e.code == ErrorCode::NoFxRate => {
                no_rate_lots += 1;
                return;
            }
            Err(e) => {
                failure = Some(tradedesk_core::bounds::at(e, || {
                    format!("fill {}", book.fills[lot.close_fill as usize].id)
                }));
                return;
            }
        };
        total.add(&valued);
        if let Some(key) = group_key(book, &brokers, q.group_by, lot) {
            groups.add(key, &valued);
        }
        if !lot.commission_known {
            gross_of_fees.insert(lot.instrument);
        }
        if book.unknown_spec(lot.instrument).is_some() {
            assumed_specs.insert(lot.instrument);
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
            let index = lots_seen;
            lots_seen += 1;
            if index < q.page.offset || lots.len() >= q.page.limit {
                return;
            }
            let inst = book.instrument(lot.instrument);
            let account = book.account(lot.account);
            let ccy = inst.currency;
            let cdp = ccy.minor_units();
            let in_ccy = |v: i128| crate::num::minor(v, cdp);
            let figures = in_ccy(valued.gross_ccy).and_then(|gross| {
                Ok((
                    gross,
                    in_ccy(valued.commissions_ccy)?,
                    in_ccy(valued.net_ccy)?,
                    money(valued.net)?,
                ))
            });
            let (gross_pnl, commissions, net_pnl, net_pnl_converted) = match figures {
                Ok(f) => f,
                Err(e) => {
                    failure = Some(tradedesk_core::bounds::at(e, || {
                        format!("fill {}", book.fills[lot.close_fill as usize].id)
                    }));
                    return;
                }
            };
            lots.push(LotOut {
                account: account.id.clone(),
                broker: account.broker.clone(),
                exchange: inst.key.exchange.clone(),
                symbol: inst.key.symbol.clone(),
                side: lot.side.as_str().to_owned(),
                quantity: Num(lot.quantity()),
                open_date: lot.open_date.to_string(),
                close_date: lot.close_date.to_string(),
                open_price: Num(lot.open_price),
                close_price: Num(lot.close_price),
                instrument_currency: ccy.code().to_owned(),
                gross_pnl,
                commissions,
                net_pnl,
                fx_rate: Num(valued.rate.normalize()),
                net_pnl_converted,
                open_fill_id: fills[lot.open_fill as usize].id.to_string(),
                close_fill_id: fills[close].id.to_string(),
                commission_known: lot.commission_known,
            });
        }
    })?;
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some((count, _)) = q.page.made_for
        && count != total.lots
    {
        return Err(tradedesk_core::Error::invalid_argument(
            format!(
                "cursor was made when the period had {count} closed lots; it now has {} (the account's history changed since)",
                total.lots
            ),
            "list again from the first lot: call without cursor",
        ));
    }
    let next = q.page.offset.saturating_add(lots.len());
    let next_cursor = (q.include_lots && next < lots_seen && !lots.is_empty())
        .then(|| encode_cursor(next, total.lots, q.fingerprint));
    if let Some(done) = current.take() {
        finish(done, &mut best, &mut worst);
    }
    let extreme = |t: Option<FillTotal>| -> Result<Option<Extreme>> {
        t.map(|t| {
            let f = &fills[t.fill];
            let inst = book.instrument(f.instrument);
            Ok(Extreme {
                fill_id: f.id.to_string(),
                account: book.account(f.account).id.clone(),
                exchange: inst.key.exchange.clone(),
                symbol: inst.key.symbol.clone(),
                close_date: f.trade_date.to_string(),
                net_pnl: money(t.net)?,
            })
        })
        .transpose()
    };

    let mut notes = Vec::new();
    if total.lots == 0 {
        notes.push(format!(
            "no lots were closed between {} and {} under these filters: realized P&L is a true zero, not missing data",
            q.range.start, q.range.end
        ));
    }
    if !gross_of_fees.is_empty() {
        let mut names: Vec<String> = gross_of_fees
            .iter()
            .map(|i| book.instrument(*i).key.qualified())
            .collect();
        names.sort();
        notes.push(format!(
            "P&L is gross of fees for {}: the broker reports no commissions for these fills",
            names.join(", ")
        ));
    }
    if no_rate_lots > 0 {
        valuer.rates.missing.notes(
            &format!("{no_rate_lots} closed lot(s) (priced on their closing dates)"),
            &mut notes,
        );
    }
    crate::valuation::commission_notes(book, &replayed.unconverted_commissions, &mut notes);
    if q.include_lots && (q.page.offset > 0 || next_cursor.is_some()) {
        notes.push(format!(
            "lots lists closed lots {} to {} of {}, in closing order; the totals count them all{}",
            (q.page.offset + 1).min(next),
            next,
            total.lots,
            if next_cursor.is_some() {
                "; pass next_cursor as cursor for the next page"
            } else {
                " (last page)"
            }
        ));
    }
    notes.extend(
        assumed_specs
            .iter()
            .filter_map(|i| crate::accounts::spec_note(book, *i)),
    );
    for u in &replayed.unmatched_closes {
        let f = &fills[u.fill as usize];
        if q.range.contains(f.trade_date) && sel.matches(f.account, f.instrument) {
            notes.push(format!(
                "fill {} closed {} {} that no fill of the history opened: its P&L is not counted (state the position held at the start as an opening position)",
                f.id,
                u.quantity.normalize(),
                book.instrument(f.instrument).key
            ));
        }
    }
    notes.extend(replayed.notes.iter().cloned());
    notes.push(
        "realized P&L covers closed lots only; dividends, interest and fees are cash, not P&L"
            .to_owned(),
    );
    notes.extend(book.notes.iter().cloned());
    let mut groups: Vec<PnlGroup> = groups
        .into_groups()
        .map(|(key, s)| {
            Ok(PnlGroup {
                key: group_label(book, &brokers, q.group_by, key),
                net_pnl: money(s.net)?,
                gross_pnl: money(s.gross)?,
                commissions: money(s.gross - s.net)?,
                lot_count: s.lots,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    groups.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(RealizedPnlResult {
        currency: to.code().to_owned(),
        start: q.range.start.to_string(),
        end: q.range.end.to_string(),
        net_pnl: money(total.net)?,
        gross_pnl: money(total.gross)?,
        commissions: money(total.gross - total.net)?,
        lot_count: total.lots,
        groups,
        biggest_gain: extreme(best)?,
        biggest_loss: extreme(worst)?,
        lots: q.include_lots.then_some(lots),
        next_cursor,
        notes,
    })
}

/// The query a call's arguments ask for: its lot paging checked against its filters.
fn realized_query(
    a: &RealizedPnlArgs,
    range: DateRange,
    currency: Currency,
) -> Result<RealizedQuery> {
    let paging = a.lots_limit.is_some() || a.cursor.is_some();
    if paging && a.include_lots == Some(false) {
        return Err(tradedesk_core::Error::invalid_argument(
            "lots_limit and cursor page the lots, but include_lots is false",
            "set include_lots to true (or leave it out) to page the lots, or drop lots_limit and cursor",
        ));
    }
    let limit = match a.lots_limit {
        None => MAX_LOTS,
        Some(n) => usize::try_from(n)
            .ok()
            .filter(|n| (1..=MAX_LOTS).contains(n))
            .ok_or_else(|| {
                tradedesk_core::Error::invalid_argument(
                    format!("lots_limit is {n}: it must be 1..={MAX_LOTS}"),
                    format!("pass a lots_limit from 1 to {MAX_LOTS}, and page with cursor"),
                )
            })?,
    };
    let fingerprint = query_fingerprint(&[
        &a.start,
        &a.end,
        a.account.as_deref().unwrap_or(""),
        a.broker.as_deref().unwrap_or(""),
        a.symbol.as_deref().unwrap_or(""),
        currency.code(),
    ]);
    let page = match a.cursor.as_deref() {
        None => LotPage {
            limit,
            ..LotPage::FIRST
        },
        Some(c) => parse_cursor(c, limit, fingerprint)?,
    };
    Ok(RealizedQuery {
        range,
        currency,
        group_by: a.group_by.unwrap_or_default(),
        include_lots: a.include_lots.unwrap_or(paging),
        page,
        fingerprint,
    })
}

/// get_realized_pnl.
#[derive(Debug)]
pub struct GetRealizedPnl;

impl Tool for GetRealizedPnl {
    type Args = RealizedPnlArgs;
    type Output = RealizedPnlResult;
    const META: Meta = Meta::book(
        "get_realized_pnl",
        "Realized P&L (FIFO)",
        "Realized P&L of the lots closed between two dates: a FIFO replay of the \
                full history, net of prorated commissions, each lot converted at its closing \
                date's rate, grouped as asked; biggest_gain / biggest_loss name the closing \
                fills; the lots can be listed a page at a time. Dividends and interest are not \
                P&L; no closed lots is a true zero.",
    );

    async fn run(call: &mut Call<'_>, a: RealizedPnlArgs) -> Result<RealizedPnlResult> {
        let (book, _) = call.ledger().await?;
        let range = DateRange::parse(&a.start, &a.end)?;
        let currency = report_currency_in(&book, a.currency.as_deref())?;
        let sel = select_owned(&book, &a.account, &a.broker, &a.symbol)?;
        let query = realized_query(&a, range, currency)?;
        get_realized_pnl(&book, &sel, &query)
    }

    fn summary(r: &RealizedPnlResult) -> String {
        format!(
            "Realized P&L {} to {}: net {} {} over {} closed lot(s) (gross {}, commissions {}).{}",
            r.start,
            r.end,
            r.net_pnl.0,
            r.currency,
            r.lot_count,
            r.gross_pnl.0,
            r.commissions.0,
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"start": "2026-01-01", "end": "2026-11-27", "group_by": "month"})
    }
}
