//! get_accounts and get_portfolio_summary.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;
use tradedesk_core::fx::fix_hint;
use tradedesk_core::{AccountIdx, Book, Currency, InstrumentIdx, Result};

use crate::args::{CurrencyArgs, report_currency_in};
use crate::num::Num;
use crate::tool::{Call, Meta, Tool, notes_suffix};
use crate::valuation::{PositionRow, Scope, Valuation, accumulate, pct, total, value_ledger};

#[derive(Debug, Serialize, JsonSchema)]
pub struct AccountRow {
    pub account: String,
    pub broker: String,
    pub name: Option<String>,
    pub account_currency: String,
    /// book | paper | live
    pub mode: String,
    /// Account currency; null when the book has no cash entries for the account.
    pub cash: Option<Num>,
    /// Account currency: the sum of the positions' market values.
    pub positions_value: Num,
    /// Account currency: cash plus positions_value (positions_value alone when cash is null).
    pub total_value: Num,
    /// total_value in the report currency (each row converted from its own currency).
    pub total_value_converted: Num,
    /// Account currency: the equity the broker itself reports for the account (Alpaca's
    /// `equity`, MetaTrader's), beside tradedesk's own total_value; the trading guards
    /// value the account at it. Null where the broker reports none (a book file, most
    /// adapters).
    pub broker_equity: Option<Num>,
    /// Account currency, as the broker reports it (MetaTrader: equity - free margin);
    /// this and the figures below are null where the broker does not state them.
    pub margin_used: Option<Num>,
    /// Account currency (MetaTrader); the guards' free_margin rule weighs orders on it.
    pub free_margin: Option<Num>,
    /// Percent: equity / margin_used (MetaTrader).
    pub margin_level: Option<Num>,
    /// 100 for 1:100 (MetaTrader).
    pub leverage: Option<Num>,
    /// Account currency (Alpaca, IBKR, Moomoo); the free_margin rule's figure where
    /// free_margin is null.
    pub buying_power: Option<Num>,
    /// Account currency (Alpaca, IBKR, Moomoo).
    pub maintenance_margin: Option<Num>,
    /// hedging (each ticket its own position) or netting (one per symbol); only where
    /// the broker has both kinds of account (MetaTrader).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub margin_mode: Option<&'static str>,
}

/// Fills each row's margin figures from what `reported` answers for its account (the
/// broker's currency must be the account's; figures in another are left out, as
/// `broker_equity`'s). Money is rounded to the currency, the margin level to 0.01%.
pub(crate) fn with_broker_margin(
    rows: &mut [AccountRow],
    reported: impl Fn(&str) -> Option<tradedesk_brokers::AccountMargin>,
) {
    for row in rows {
        let Some(m) = reported(&row.account).filter(|m| m.currency.code() == row.account_currency)
        else {
            continue;
        };
        let money = |v: Option<Decimal>| v.map(|v| Num(m.currency.round(v)));
        row.margin_used = money(m.margin_used);
        row.free_margin = money(m.free_margin);
        row.margin_level = m.margin_level.map(|l| Num(l.round_dp(2)));
        row.leverage = m.leverage.map(|l| Num(l.normalize()));
        row.buying_power = money(m.buying_power);
        row.maintenance_margin = money(m.maintenance_margin);
    }
}

/// Fills each row's `broker_equity` from what `reported` answers for its account (the
/// broker's currency must be the account's; a figure in another is left out).
pub(crate) fn with_broker_equity(
    rows: &mut [AccountRow],
    reported: impl Fn(&str) -> Option<(Currency, Decimal)>,
) {
    for row in rows {
        row.broker_equity = reported(&row.account)
            .filter(|(c, _)| c.code() == row.account_currency)
            .map(|(c, e)| Num(c.round(e)));
    }
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct AccountsResult {
    pub currency: String,
    pub total_value: Num,
    pub accounts: Vec<AccountRow>,
    pub notes: Vec<String>,
}

pub(crate) fn account_rows(
    book: &Book,
    v: &Valuation,
    notes: &mut Vec<String>,
) -> Result<Vec<AccountRow>> {
    let mut rows = Vec::with_capacity(book.accounts.len());
    for (i, account) in book.accounts.iter().enumerate() {
        let idx = u32::try_from(i).unwrap_or(u32::MAX);
        let marked = v
            .positions
            .iter()
            .filter(|p| p.account == idx)
            .filter_map(|p| p.marked.as_ref());
        let (mut positions_value, mut positions_converted) = (Decimal::ZERO, Decimal::ZERO);
        // A row without a rate into a total's currency is left out of it (noted).
        for m in marked {
            accumulate(
                &mut positions_value,
                m.market_value_account.unwrap_or_default(),
            )?;
            accumulate(
                &mut positions_converted,
                m.market_value_converted.unwrap_or_default(),
            )?;
        }
        let cash_known = v.cash_known.get(i).copied().unwrap_or(false);
        let cash_rows = v.cash.iter().filter(|c| c.account == idx);
        let cash: Option<Decimal> = if cash_known {
            Some(total(cash_rows.clone().filter_map(|c| c.amount_account))?)
        } else {
            None
        };
        let cash_converted = total(cash_rows.filter_map(|c| c.converted))?;
        if !cash_known {
            notes.push(format!(
                "{}: the book has no cash entries for this account, so its cash is unknown (null) and its total value is its positions' value alone",
                account.id
            ));
        }
        rows.push(AccountRow {
            account: account.id.clone(),
            broker: account.broker.clone(),
            name: account.name.clone(),
            account_currency: account.currency.code().to_owned(),
            mode: account.mode.as_str().to_owned(),
            margin_mode: book
                .margin_mode(idx)
                .map(tradedesk_core::MarginMode::as_str),
            cash: cash.map(Num),
            positions_value: Num(positions_value),
            total_value: Num(total([positions_value, cash.unwrap_or_default()])?),
            total_value_converted: Num(total([positions_converted, cash_converted])?),
            broker_equity: None,
            margin_used: None,
            free_margin: None,
            margin_level: None,
            leverage: None,
            buying_power: None,
            maintenance_margin: None,
        });
    }
    Ok(rows)
}

/// Notes for the rows left out of totals for lack of a rate (one per pair, naming the
/// rows and the fix), and for commissions the replay could not convert. Position rows
/// count only when `listed` holds them.
pub(crate) fn missing_rate_notes(
    book: &Book,
    v: &Valuation,
    listed: &[(AccountIdx, InstrumentIdx)],
    notes: &mut Vec<String>,
) {
    let mut groups: BTreeMap<(&str, &str), (NaiveDate, Vec<String>)> = BTreeMap::new();
    for l in &v.left_out {
        if let Some(i) = l.instrument
            && !listed.contains(&(l.account, i))
        {
            continue;
        }
        let account = &book.account(l.account).id;
        let amount = l.amount.map_or_else(String::new, |a| {
            let dp = l.currency.minor_units() as usize;
            format!(" {} {a:.dp$}", l.currency)
        });
        let row = match l.instrument {
            Some(i) => format!(
                "{} in {account} (market value{amount})",
                book.instrument(i).key
            ),
            None => format!("cash{amount} in {account}"),
        };
        let slot = groups
            .entry((l.currency.code(), l.to.code()))
            .or_insert((l.on, Vec::new()));
        slot.0 = slot.0.max(l.on);
        slot.1.push(row);
    }
    for ((from, to), (on, rows)) in groups {
        let what = if to == v.currency.code() {
            format!("left out of the {to} totals (their converted figures are null)")
        } else {
            format!("left out of the account's totals in {to}")
        };
        notes.push(format!(
            "no {from}/{to} rate on or before {on}: {what}: {}; to include them, {}",
            rows.join(", "),
            fix_hint(Currency::new(from), Currency::new(to), on)
        ));
    }
    let mut commissions: BTreeMap<(&str, &str), (NaiveDate, usize)> = BTreeMap::new();
    for &i in &v.unconverted_commissions {
        if let Some(f) = book.fills.get(i as usize) {
            let to = book.instrument(f.instrument).currency;
            let slot = commissions
                .entry((f.commission_currency.code(), to.code()))
                .or_insert((f.trade_date, 0));
            slot.0 = slot.0.max(f.trade_date);
            slot.1 += 1;
        }
    }
    for ((from, to), (on, count)) in commissions {
        notes.push(format!(
            "the commissions of {count} fill(s) paid in {from} could not be converted into {to}, the instrument's currency (no {from}/{to} rate on or before {on}): their lots carry no commission, so cost and P&L are gross of it (cash still pays it); to include it, {}",
            fix_hint(Currency::new(from), Currency::new(to), on)
        ));
    }
}

/// Notes every valuation-based answer carries: unmarked positions, rows without a rate,
/// fees unknown, stale rates.
pub(crate) fn common_notes<'a>(
    book: &Book,
    v: &Valuation,
    positions: impl Iterator<Item = &'a PositionRow> + Clone,
    notes: &mut Vec<String>,
) {
    let listed: Vec<(AccountIdx, InstrumentIdx)> = positions
        .clone()
        .map(|p| (p.account, p.instrument))
        .collect();
    missing_rate_notes(book, v, &listed, notes);
    let unmarked: Vec<String> = positions
        .clone()
        .filter(|p| p.marked.is_none())
        .map(|p| {
            format!(
                "{} in {}",
                book.instrument(p.instrument).key,
                book.account(p.account).id
            )
        })
        .collect();
    if !unmarked.is_empty() {
        notes.push(format!(
            "left out of every total for lack of a mark on or before {}: {}",
            v.as_of,
            unmarked.join(", ")
        ));
    }
    let gross: Vec<String> = positions
        .clone()
        .filter(|p| !p.commission_known)
        .map(|p| book.instrument(p.instrument).key.qualified())
        .collect();
    if !gross.is_empty() {
        notes.push(format!(
            "the broker reports no commissions for {}: cost basis and unrealized P&L are gross of fees",
            gross.join(", ")
        ));
    }
    let mut assumed: Vec<InstrumentIdx> = positions
        .map(|p| p.instrument)
        .filter(|i| book.unknown_spec(*i).is_some())
        .collect();
    assumed.sort_unstable();
    assumed.dedup();
    notes.extend(assumed.into_iter().filter_map(|i| spec_note(book, i)));
    for stale in &v.stale_rates {
        notes.push(format!("stale FX rate: {stale}"));
    }
    notes.extend(book.notes.iter().cloned());
}

/// The note an answer carries for a position or lot on an instrument whose contract size
/// or profit currency is assumed (see docs/methodology/instruments.md).
pub(crate) fn spec_note(book: &Book, instrument: InstrumentIdx) -> Option<String> {
    let u = book.unknown_spec(instrument)?;
    let inst = book.instrument(instrument);
    Some(format!(
        "{}: {}; its figures use multiplier {} in {}, so they may be off by the real contract size ({})",
        inst.key,
        u.detail,
        inst.multiplier.normalize(),
        inst.currency.code(),
        u.fix
    ))
}

pub fn get_accounts(book: &Book, v: &Valuation) -> Result<AccountsResult> {
    let mut notes = Vec::new();
    let accounts = account_rows(book, v, &mut notes)?;
    common_notes(book, v, v.positions.iter(), &mut notes);
    Ok(AccountsResult {
        currency: v.currency.code().to_owned(),
        total_value: Num(total(accounts.iter().map(|a| a.total_value_converted.0))?),
        accounts,
        notes,
    })
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct CurrencyBucket {
    pub currency: String,
    pub value: Num,
    pub pct: Option<Num>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct BrokerBucket {
    pub broker: String,
    pub value: Num,
    pub pct: Option<Num>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct SummaryResult {
    pub currency: String,
    pub as_of: String,
    /// positions_value + cash_value.
    pub total_value: Num,
    /// Sum of the positions' market_value_converted.
    pub positions_value: Num,
    pub cash_value: Num,
    /// Sum of the positions' unrealized_pnl_converted.
    pub unrealized_pnl: Num,
    /// Holdings by the currency they are held in, signed; pct of total_value.
    pub by_currency: Vec<CurrencyBucket>,
    pub by_broker: Vec<BrokerBucket>,
    pub accounts: Vec<AccountRow>,
    pub notes: Vec<String>,
}

fn sorted_buckets(map: BTreeMap<String, Decimal>) -> Vec<(String, Decimal)> {
    let mut out: Vec<(String, Decimal)> = map.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

pub fn get_portfolio_summary(book: &Book, v: &Valuation) -> Result<SummaryResult> {
    let mut notes = Vec::new();
    let accounts = account_rows(book, v, &mut notes)?;
    common_notes(book, v, v.positions.iter(), &mut notes);
    let mut by_currency: BTreeMap<String, Decimal> = BTreeMap::new();
    let mut by_broker: BTreeMap<String, Decimal> = BTreeMap::new();
    let (mut positions_value, mut unrealized) = (Decimal::ZERO, Decimal::ZERO);
    for p in &v.positions {
        if let Some(m) = &p.marked
            && let (Some(value), Some(pnl)) = (m.market_value_converted, m.unrealized_pnl_converted)
        {
            accumulate(&mut positions_value, value)?;
            accumulate(&mut unrealized, pnl)?;
            let ccy: Currency = book.instrument(p.instrument).currency;
            accumulate(by_currency.entry(ccy.code().to_owned()).or_default(), value)?;
            accumulate(
                by_broker
                    .entry(book.account(p.account).broker.clone())
                    .or_default(),
                value,
            )?;
        }
    }
    let mut cash_value = Decimal::ZERO;
    for c in &v.cash {
        let Some(converted) = c.converted else {
            continue;
        };
        accumulate(&mut cash_value, converted)?;
        accumulate(
            by_currency.entry(c.currency.code().to_owned()).or_default(),
            converted,
        )?;
        accumulate(
            by_broker
                .entry(book.account(c.account).broker.clone())
                .or_default(),
            converted,
        )?;
    }
    let total = total([positions_value, cash_value])?;
    Ok(SummaryResult {
        currency: v.currency.code().to_owned(),
        as_of: v.as_of.to_string(),
        total_value: Num(total),
        positions_value: Num(positions_value),
        cash_value: Num(cash_value),
        unrealized_pnl: Num(unrealized),
        by_currency: sorted_buckets(by_currency)
            .into_iter()
            .map(|(currency, value)| CurrencyBucket {
                currency,
                pct: pct(value, total).map(Num),
                value: Num(value),
            })
            .collect(),
        by_broker: sorted_buckets(by_broker)
            .into_iter()
            .map(|(broker, value)| BrokerBucket {
                broker,
                pct: pct(value, total).map(Num),
                value: Num(value),
            })
            .collect(),
        accounts,
        notes,
    })
}

/// The figures the brokers report beside the book's (equity, margin) and the note where
/// the brokers' positions disagree with the fills.
fn with_broker_figures(
    call: &Call<'_>,
    book: &Book,
    ledger: &tradedesk_core::ledger::Ledger,
    rows: &mut [AccountRow],
    notes: &mut Vec<String>,
) {
    with_broker_equity(rows, |a| call.ctx.reported_equity(a));
    with_broker_margin(rows, |a| call.ctx.reported_margin(a));
    notes.extend(crate::health::disagreement_note(book, ledger, |_, _| true));
}

/// The book's accounts valued in the report currency the call asks for.
async fn valued_accounts<T>(
    call: &mut Call<'_>,
    currency: Option<&str>,
    answer: impl FnOnce(&Book, &Valuation) -> Result<T>,
) -> Result<(
    T,
    std::sync::Arc<Book>,
    std::sync::Arc<tradedesk_core::ledger::Ledger>,
)> {
    let (book, ledger) = call.ledger().await?;
    let ccy = report_currency_in(&book, currency)?;
    let r = answer(&book, &value_ledger(&book, &ledger, ccy, Scope::ACCOUNTS)?)?;
    Ok((r, book, ledger))
}

/// get_accounts.
#[derive(Debug)]
pub struct GetAccounts;

impl Tool for GetAccounts {
    type Args = CurrencyArgs;
    type Output = AccountsResult;
    const META: Meta = Meta::book(
        "get_accounts",
        "Accounts",
        "Every configured account: broker, mode (book, paper, live), cash, \
                positions value and total value in its own currency, and the total in the report \
                currency. Call it first to learn the account ids.",
    );

    async fn run(call: &mut Call<'_>, a: CurrencyArgs) -> Result<AccountsResult> {
        let (mut r, book, ledger) =
            valued_accounts(call, a.currency.as_deref(), get_accounts).await?;
        with_broker_figures(call, &book, &ledger, &mut r.accounts, &mut r.notes);
        Ok(r)
    }

    fn summary(r: &AccountsResult) -> String {
        format!(
            "{} account(s), total value {} {}.{}",
            r.accounts.len(),
            r.total_value.0,
            r.currency,
            notes_suffix(&r.notes)
        )
    }
}

/// get_portfolio_summary.
#[derive(Debug)]
pub struct GetPortfolioSummary;

impl Tool for GetPortfolioSummary {
    type Args = CurrencyArgs;
    type Output = SummaryResult;
    const META: Meta = Meta::book(
        "get_portfolio_summary",
        "Portfolio summary",
        "The whole portfolio in the report currency: total value, positions, \
                cash, unrealized P&L, holdings by currency and by broker with their share of the \
                total, and each account. Answers 'how much of my portfolio is in ringgit?'.",
    );

    async fn run(call: &mut Call<'_>, a: CurrencyArgs) -> Result<SummaryResult> {
        let (mut r, book, ledger) =
            valued_accounts(call, a.currency.as_deref(), get_portfolio_summary).await?;
        with_broker_figures(call, &book, &ledger, &mut r.accounts, &mut r.notes);
        Ok(r)
    }

    fn summary(r: &SummaryResult) -> String {
        format!(
            "Total value {} {} as of {} (positions {}, cash {}, unrealized P&L {}).{}",
            r.total_value.0,
            r.currency,
            r.as_of,
            r.positions_value.0,
            r.cash_value.0,
            r.unrealized_pnl.0,
            notes_suffix(&r.notes)
        )
    }
}
