//! get_server_health: each broker's state, reconciliation of what brokers report against
//! what the fills imply, and the FX table's freshness.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::Serialize;
use tradedesk_brokers::{AccountHealth, HealthStatus};
use tradedesk_core::ledger::Ledger;
use tradedesk_core::{AccountIdx, Book, InstrumentIdx, Result};

use crate::args::NoArgs;
use crate::num::Num;
use crate::rates::{STALE_DAYS, is_stale};
use crate::tool::{Call, Meta, Tool, notes_suffix};

#[derive(Debug, Serialize, JsonSchema)]
pub struct BrokerOut {
    pub account: String,
    pub broker: String,
    pub mode: String,
    /// ok | degraded | down
    pub status: String,
    pub latency_ms: Option<u64>,
    pub detail: String,
    pub hint: Option<String>,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct ReconciliationRow {
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub reported_quantity: Num,
    pub implied_quantity: Num,
    /// reported - implied.
    pub difference: Num,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FxPair {
    pub base: String,
    pub quote: String,
    pub rate: Num,
    pub date: String,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct FxHealth {
    pub as_of: String,
    pub pairs: Vec<FxPair>,
    /// Pairs (BASE/QUOTE) whose latest rate is over 7 days older than as_of.
    pub stale: Vec<String>,
    /// Pairs (FROM/TO) with no rate, direct or crossed, where a holding, cash balance,
    /// commission or closed lot needed one; those rows are left out of the totals.
    pub missing: Vec<String>,
}

/// An instrument whose contract size or profit currency its broker did not state.
#[derive(Debug, Serialize, JsonSchema)]
pub struct UnknownSpecOut {
    pub exchange: String,
    pub symbol: String,
    pub asset_class: String,
    /// The multiplier the figures use meanwhile.
    pub multiplier_assumed: Num,
    /// The currency P&L is counted in meanwhile.
    pub currency_assumed: String,
    /// What is not known.
    pub detail: String,
    /// How to state it.
    pub fix: String,
}

/// A closing fill that found no open lot: a position older than the history.
#[derive(Debug, Serialize, JsonSchema)]
pub struct UnexplainedClose {
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub fill_id: String,
    pub date: String,
    /// Unsigned quantity the fill closed that no fill of the history opened.
    pub quantity: Num,
}

#[derive(Debug, Serialize, JsonSchema)]
pub struct HealthResult {
    /// ok | degraded | down
    pub health: String,
    pub version: String,
    pub brokers: Vec<BrokerOut>,
    pub reconciliation: Vec<ReconciliationRow>,
    /// Closing fills the history has no opening for (their P&L is not counted).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unexplained_closes: Vec<UnexplainedClose>,
    pub fx: Option<FxHealth>,
    /// Instruments with an assumed contract size or profit currency (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown_specs: Vec<UnknownSpecOut>,
    /// The trading switch and guards, where any account can trade.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trading: Option<TradingHealth>,
    pub notes: Vec<String>,
}

/// What an order would face right now.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TradingHealth {
    pub enabled: bool,
    pub kill_switch: bool,
    pub confirm_paper: bool,
    pub confirm_live: bool,
    pub max_order_notional: Num,
    pub max_daily_notional: Num,
    pub max_position_weight_pct: Num,
    pub max_orders_per_day: u32,
    /// Accounts whose config allows live trading.
    pub live_accounts: Vec<String>,
}

/// The trading section of the health report, with its warnings.
pub fn trading_health(trading: &crate::trading::Trading, notes: &mut Vec<String>) -> TradingHealth {
    let s = &trading.settings;
    let kill_switch = trading.kill_switch_on();
    if s.enabled && !s.confirm_live {
        notes.push(
            "warning: confirm_live = false: live orders are placed without a confirmation"
                .to_owned(),
        );
    }
    if kill_switch {
        notes.push(format!(
            "the kill switch is on ({}): orders that add risk are refused",
            s.kill_switch_file.display()
        ));
    }
    TradingHealth {
        enabled: s.enabled,
        kill_switch,
        confirm_paper: s.confirm_paper,
        confirm_live: s.confirm_live,
        max_order_notional: Num(s.max_order_notional),
        max_daily_notional: Num(s.max_daily_notional),
        max_position_weight_pct: Num(s.max_position_weight_pct),
        max_orders_per_day: s.max_orders_per_day,
        live_accounts: s.live_accounts.clone(),
    }
}

fn status_str(s: HealthStatus) -> &'static str {
    match s {
        HealthStatus::Ok => "ok",
        HealthStatus::Degraded => "degraded",
        HealthStatus::Down => "down",
    }
}

/// A position whose broker-reported quantity differs from the open FIFO lots of its
/// fills (a side missing counts as zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disagreement {
    pub account: AccountIdx,
    pub instrument: InstrumentIdx,
    pub reported: Decimal,
    pub implied: Decimal,
}

/// Every disagreement over the accounts that report positions, by account and instrument.
pub fn disagreements(book: &Book, ledger: &Ledger) -> Vec<Disagreement> {
    let mut reported: BTreeMap<(AccountIdx, InstrumentIdx), Decimal> = BTreeMap::new();
    for r in &book.reported_positions {
        reported.insert((r.account, r.instrument), r.quantity);
    }
    let reporting: Vec<AccountIdx> = {
        let mut v: Vec<AccountIdx> = reported.keys().map(|(a, _)| *a).collect();
        v.dedup();
        v
    };
    let mut implied: BTreeMap<(AccountIdx, InstrumentIdx), Decimal> = BTreeMap::new();
    for (account, instrument, queue) in ledger.fifo.open_positions() {
        if reporting.contains(&account) {
            // A hedging account's tickets are queues of their own: summed.
            *implied.entry((account, instrument)).or_default() += queue.signed_quantity();
        }
    }
    let mut keys: Vec<(AccountIdx, InstrumentIdx)> =
        reported.keys().chain(implied.keys()).copied().collect();
    keys.sort_by(|a, b| (a.0, &book.instrument(a.1).key).cmp(&(b.0, &book.instrument(b.1).key)));
    keys.dedup();
    keys.into_iter()
        .filter_map(|(account, instrument)| {
            let reported = reported
                .get(&(account, instrument))
                .copied()
                .unwrap_or_default();
            let implied = implied
                .get(&(account, instrument))
                .copied()
                .unwrap_or_default();
            (reported != implied).then_some(Disagreement {
                account,
                instrument,
                reported,
                implied,
            })
        })
        .collect()
}

/// Every instrument where the reported and implied quantities differ, over the accounts
/// that report positions; a side missing counts as zero.
pub fn reconcile(book: &Book, ledger: &Ledger) -> Vec<ReconciliationRow> {
    disagreements(book, ledger)
        .into_iter()
        .map(|d| {
            let inst = book.instrument(d.instrument);
            ReconciliationRow {
                account: book.account(d.account).id.clone(),
                exchange: inst.key.exchange.clone(),
                symbol: inst.key.symbol.clone(),
                reported_quantity: Num(d.reported),
                implied_quantity: Num(d.implied),
                difference: Num(d.reported - d.implied),
            }
        })
        .collect()
}

/// Every pair a figure of the book needs and has no rate for (see [`FxHealth::missing`]).
fn missing_rates(book: &Book, ledger: &Ledger, notes: &mut Vec<String>) -> Vec<String> {
    let base = book.base_currency;
    let mut missing =
        match crate::valuation::value_ledger(book, ledger, base, crate::valuation::Scope::ACCOUNTS)
        {
            Ok(v) => v.missing,
            Err(e) => {
                notes.push(format!("the holdings could not be valued: {e}"));
                crate::rates::Missing::default()
            }
        };
    let mut rates = crate::rates::Rates::new(book);
    let replayed = tradedesk_core::ledger::replay_lots(book, |_, lot| {
        let ccy = book.instrument(lot.instrument).currency;
        if ccy != base {
            // A missing pair is recorded by the lookup itself.
            let _ = rates.rate(ccy, base, lot.close_date);
        }
    });
    if let Err(e) = replayed {
        notes.push(format!("the closed lots could not be replayed: {e}"));
    }
    missing.extend(&rates.missing);
    missing.pairs()
}

/// The closing fills of the replay that found no lot to close.
pub fn unexplained(book: &Book, ledger: &Ledger) -> Vec<UnexplainedClose> {
    ledger
        .unmatched_closes
        .iter()
        .map(|u| {
            let fill = &book.fills[u.fill as usize];
            let inst = book.instrument(fill.instrument);
            UnexplainedClose {
                account: book.account(fill.account).id.clone(),
                exchange: inst.key.exchange.clone(),
                symbol: inst.key.symbol.clone(),
                fill_id: fill.id.to_string(),
                date: fill.trade_date.to_string(),
                quantity: Num(u.quantity),
            }
        })
        .collect()
}

/// The note get_positions, get_accounts and get_portfolio_summary carry when a position
/// they cover (`covers`) is held in a quantity the broker reports otherwise: both
/// quantities, and where the reconciliation is.
pub fn disagreement_note(
    book: &Book,
    ledger: &Ledger,
    covers: impl Fn(AccountIdx, InstrumentIdx) -> bool,
) -> Option<String> {
    let listed: Vec<String> = disagreements(book, ledger)
        .into_iter()
        .filter(|d| covers(d.account, d.instrument))
        .map(|d| {
            format!(
                "{} in {}: the broker reports {}, the fills give {}",
                book.instrument(d.instrument).key.qualified(),
                book.account(d.account).id,
                d.reported.normalize(),
                d.implied.normalize()
            )
        })
        .collect();
    (!listed.is_empty()).then(|| {
        format!(
            "the broker's position differs from the fills': {}; quantities, values and P&L here follow the fills, and get_server_health's reconciliation lists every difference",
            listed.join("; ")
        )
    })
}

pub fn get_server_health(
    version: &str,
    probes: Vec<AccountHealth>,
    book: Option<(&Book, &Ledger)>,
    book_error: Option<String>,
) -> Result<HealthResult> {
    let mut notes = Vec::new();
    let down = probes
        .iter()
        .filter(|p| p.status == HealthStatus::Down)
        .count();
    let degraded = probes
        .iter()
        .filter(|p| p.status == HealthStatus::Degraded)
        .count();
    let health = if probes.is_empty() || down == probes.len() {
        "down"
    } else if down > 0 || degraded > 0 || book_error.is_some() {
        "degraded"
    } else {
        "ok"
    };
    if let Some(e) = book_error {
        notes.push(format!("account data could not be assembled: {e}"));
    }
    let brokers = probes
        .into_iter()
        .map(|p| BrokerOut {
            account: p.account,
            broker: p.broker,
            mode: p.mode.as_str().to_owned(),
            status: status_str(p.status).to_owned(),
            latency_ms: p.latency_ms,
            detail: p.detail,
            hint: p.hint,
        })
        .collect();
    let unknown_specs: Vec<UnknownSpecOut> = book
        .map(|(book, _)| {
            book.unknown_specs
                .iter()
                .map(|u| {
                    let inst = book.instrument(u.instrument);
                    UnknownSpecOut {
                        exchange: inst.key.exchange.clone(),
                        symbol: inst.key.symbol.clone(),
                        asset_class: inst.asset_class.as_str().to_owned(),
                        multiplier_assumed: Num(inst.multiplier.normalize()),
                        currency_assumed: inst.currency.code().to_owned(),
                        detail: u.detail.clone(),
                        fix: u.fix.clone(),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if !unknown_specs.is_empty() {
        notes.push(format!(
            "{} instrument(s) have a contract size or profit currency their broker did not state: figures on them use an assumed one (unknown_specs lists each, with the fix)",
            unknown_specs.len()
        ));
    }
    let mut unexplained_closes = Vec::new();
    let (reconciliation, fx) = match book {
        None => (Vec::new(), None),
        Some((book, ledger)) => {
            unexplained_closes = unexplained(book, ledger);
            if !unexplained_closes.is_empty() {
                notes.push(format!(
                    "{} closing fill(s) found no position to close: held before the history starts, or fills are missing (unexplained_closes lists each; state the positions held at the start as opening_positions)",
                    unexplained_closes.len()
                ));
            }
            notes.extend(ledger.notes.iter().cloned());
            let rows = reconcile(book, ledger);
            if !rows.is_empty() {
                notes.push(format!(
                    "{} position(s) reported by a broker disagree with the fills; answers follow the fills (reconciliation lists each)",
                    rows.len()
                ));
            }
            let quotes = book.fx.latest_quotes(book.as_of);
            let stale: Vec<String> = quotes
                .iter()
                .filter(|q| is_stale(book.as_of, q.date))
                .map(|q| format!("{}/{}", q.base, q.quote))
                .collect();
            for q in quotes.iter().filter(|q| is_stale(book.as_of, q.date)) {
                let fresher = quotes
                    .iter()
                    .find(|o| o.base == q.quote && o.quote == q.base && o.date > q.date);
                notes.push(match fresher {
                    Some(o) => format!(
                        "{}/{} was last quoted on {}; conversions use the newer {}/{} rate of {} instead",
                        q.base, q.quote, q.date, o.base, o.quote, o.date
                    ),
                    None => format!(
                        "{}/{} was last quoted on {}, more than {STALE_DAYS} days before {}: conversions in it are stale",
                        q.base, q.quote, q.date, book.as_of
                    ),
                });
            }
            let missing = missing_rates(book, ledger, &mut notes);
            if !missing.is_empty() {
                notes.push(format!(
                    "no rate for {}: rows in them are left out of the totals (each answer notes which); add the rates to the fx_file or set fx_source = \"ecb\" in tradedesk.toml",
                    missing.join(", ")
                ));
            }
            let pairs = quotes
                .into_iter()
                .map(|q| FxPair {
                    base: q.base.code().to_owned(),
                    quote: q.quote.code().to_owned(),
                    rate: Num(q.rate),
                    date: q.date.to_string(),
                })
                .collect();
            (
                rows,
                Some(FxHealth {
                    as_of: book.as_of.to_string(),
                    pairs,
                    stale,
                    missing,
                }),
            )
        }
    };
    Ok(HealthResult {
        health: health.to_owned(),
        version: version.to_owned(),
        brokers,
        reconciliation,
        unexplained_closes,
        fx,
        unknown_specs,
        trading: None,
        notes,
    })
}

/// get_server_health: the probes and the served book, read at once.
#[derive(Debug)]
pub struct GetServerHealth;

impl Tool for GetServerHealth {
    type Args = NoArgs;
    type Output = HealthResult;
    const META: Meta = Meta::served_always(
        "get_server_health",
        "Server health",
        "Each broker connection's state (a hint when down), the positions \
                brokers report reconciled against the fills, and the FX rates in use, stale ones \
                flagged. Call it when a tool says a broker is unavailable.",
    )
    .partial();

    async fn run(call: &mut Call<'_>, _: NoArgs) -> Result<HealthResult> {
        let ctx = call.ctx;
        let (mut probes, (served, down)) = tokio::join!(ctx.health(), ctx.served_ledger());
        // A gateway that answers its probe while its account's data could not be read.
        for d in down.iter() {
            if let Some(p) = probes
                .iter_mut()
                .find(|p| p.account == d.row.account && p.status == HealthStatus::Ok)
            {
                p.status = HealthStatus::Degraded;
                p.detail = format!(
                    "{}; but its account data could not be read: {}",
                    p.detail, d.row.message
                );
                p.hint = Some(d.row.hint.clone());
            }
        }
        call.leave_out(down.iter().cloned());
        let mut r = match served {
            Ok((book, ledger)) => {
                get_server_health(&ctx.version, probes, Some((&book, &ledger)), None)
            }
            Err(e) => get_server_health(&ctx.version, probes, None, Some(e.to_string())),
        }?;
        if let Some(trading) = &ctx.trading {
            r.trading = Some(trading_health(trading, &mut r.notes));
        }
        Ok(r)
    }

    fn summary(r: &HealthResult) -> String {
        format!(
            "Health {}: {} account(s), {} reconciliation difference(s).{}",
            r.health,
            r.brokers.len(),
            r.reconciliation.len(),
            notes_suffix(&r.notes)
        )
    }
}
