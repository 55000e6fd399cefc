//! What the order guard's rules ([`super::rules`]) decide on, read once: the broker's
//! instrument, quote, positions and margin, the store's idempotency keys, day totals and
//! reservations, the ledger, the FX rates and the kill switch. All of the guard's I/O
//! is here; the rules are pure. [`reread`] reads again, inside the reservation's
//! transaction, the facts another order can change meanwhile.

use std::sync::Arc;

use rust_decimal::Decimal;
use tradedesk_brokers::{Broker, BrokerError, OrderFilter};
use tradedesk_core::{
    Currency, Error, InstrumentKey, Order, Quote, Result, Side, TradableInstrument,
};
use tradedesk_store::StoreError;
use tradedesk_store::idempotency;
use tradedesk_store::rusqlite::Transaction;

use super::orders::{broker_error, trading_broker};
use super::rules::{self, Weight};
use super::{ErrorWrap, Trading};
use crate::context::ToolContext;
use crate::valuation::{Scope, value_ledger};

/// A ticket an order names, as the account's broker lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TicketFact {
    /// No open ticket of the account has that id.
    Missing,
    /// It is open, on this other symbol.
    OtherSymbol(String),
    /// Open on the order's symbol: its side and lots.
    Open { side: Side, quantity: Decimal },
}

/// Today's counted orders (every reservation of the day not rejected).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Day {
    /// Their summed base-currency valuations.
    pub(super) sum: Decimal,
    pub(super) count: u32,
}

/// What the position-weight limit weighs an order that adds risk against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Exposure {
    /// The portfolio's value, base currency.
    pub(super) total: Decimal,
    /// The accounts valued as their broker reports them, and how far the replay is.
    pub(super) as_reported: Vec<String>,
    /// The position in the instrument across the portfolio, signed, base currency.
    pub(super) held: Decimal,
    /// The working orders in the instrument, signed, base currency.
    pub(super) working: Decimal,
    /// Accounts whose holdings or working orders could not be read.
    pub(super) unknown: Vec<String>,
    /// The settle mark read before the portfolio and the working orders.
    pub(super) mark: i64,
    /// The signed exposures of the day's reservations in the instrument the reading may
    /// not show (in flight, or settled after the mark).
    pub(super) unseen: Vec<Decimal>,
}

/// The margin the account's broker reports with its last snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Margin {
    /// The account's currency.
    pub(super) currency: Currency,
    /// The free margin, else the buying power.
    pub(super) available: Decimal,
    /// `free margin` or `buying power`.
    pub(super) what: &'static str,
    /// The part of the notional it must cover: the instrument's margin rate against free
    /// margin, 1 against buying power.
    pub(super) rate: Decimal,
    /// `1 instrument currency = to_account account currency`; `None` when no rate was
    /// found (or none was needed: an order that only reduces, or one not valued).
    pub(super) to_account: Option<Decimal>,
}

/// Every fact the rules decide an order on.
#[derive(Debug, Clone)]
pub(super) struct Facts {
    pub(super) inst: TradableInstrument,
    pub(super) quote: Option<Quote>,
    /// The order its client order id was first used for: (fingerprint, broker id).
    pub(super) prior: Option<(String, Option<String>)>,
    /// The ticket the order names, when it names one.
    pub(super) ticket: Option<TicketFact>,
    /// The broker name of the order's account (`metatrader`, `alpaca`, `sim`, ...).
    pub(super) account_broker: String,
    /// Whether the account's broker takes a magic number on an order.
    pub(super) takes_magic: bool,
    /// This account's own signed position in the instrument.
    pub(super) held_here: Decimal,
    pub(super) base: Currency,
    /// `1 instrument currency = rate base`.
    pub(super) rate: Option<Decimal>,
    pub(super) kill_switch: bool,
    pub(super) day: Day,
    /// Read only for an order that adds risk and could be valued.
    pub(super) exposure: Option<Exposure>,
    pub(super) margin: Option<Margin>,
    pub(super) commission: Option<Decimal>,
    /// What the broker says of the instrument, and what could not be read.
    pub(super) notes: Vec<String>,
}

/// The facts the reservation's transaction decides on again.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Reread {
    pub(super) kill_switch: bool,
    pub(super) day: Day,
    pub(super) unseen: Vec<Decimal>,
    pub(super) margin: Option<Margin>,
}

/// Reads every fact `order` is decided on, from its account's broker alone where it
/// only reduces a position, else from the whole portfolio.
///
/// # Errors
/// `unknown_account`, `not_supported`, `live_not_allowed`, the broker's instrument
/// errors, a ledger that cannot be replayed, or a store failure.
pub(super) async fn gather(
    ctx: &ToolContext,
    trading: &Trading,
    order: &Order,
) -> Result<(Arc<dyn Broker>, Facts)> {
    let broker = trading_broker(ctx, trading, &order.terms.account, order.terms.mode)?;
    let inst = broker
        .instrument(&order.terms.account, &order.symbol)
        .await
        .map_err(broker_error)?;
    let key = inst.key.clone();
    // Read before the portfolio and the working orders: an outcome settled after this
    // may be missing from them, and is counted from the store instead.
    let mark = trading
        .store
        .tx::<_, ErrorWrap>(|tx| Ok(idempotency::settle_mark(tx)?))
        .map_err(Error::from)?;
    // The account's own position, read from its own broker alone: whether the order
    // only reduces it must never wait for another broker.
    let (own, own_ledger) = own_ledger(ctx, &order.terms.account).await?;
    let mut notes = broker.instrument_notes(&order.terms.account, &order.symbol);
    let quote = match broker.quote(&order.terms.account, &key.qualified()).await {
        Ok(q) => Some(q),
        Err(e) => {
            notes.push(format!("no quote: {e}"));
            None
        }
    };
    let prior = match &order.client_order_id {
        Some(id) => trading
            .store
            .tx::<_, ErrorWrap>(|tx| Ok(idempotency::get(tx, &order.terms.account, id)?))
            .map_err(Error::from)?
            .map(|r| (r.fingerprint, r.order_id)),
        None => None,
    };
    let account_idx = own.account_index(&order.terms.account);
    let ticket = order.terms.ticket.as_ref().map(|ticket| {
        match own
            .tickets
            .iter()
            .find(|t| Some(t.account) == account_idx && &t.ticket == ticket)
        {
            None => TicketFact::Missing,
            Some(t) if own.instrument(t.instrument).key.symbol != key.symbol => {
                TicketFact::OtherSymbol(own.instrument(t.instrument).key.symbol.clone())
            }
            Some(t) => TicketFact::Open {
                side: t.side,
                quantity: t.quantity,
            },
        }
    });
    let account_broker = account_idx
        .map(|a| own.account(a).broker.clone())
        .unwrap_or_default();
    let sizing = rules::sizing(order, &inst, quote.as_ref());
    let held_here = position_in(&own, &own_ledger, &order.terms.account, &key);
    let exempt = rules::reduces(
        order,
        sizing.quantity,
        held_here,
        matches!(ticket, Some(TicketFact::Open { .. })),
    );
    // The whole portfolio only for an order that adds risk: the weight limit needs it.
    // A reducing order is valued with its own account's book and rates alone.
    let (book, ledger, down) = if exempt {
        (own, own_ledger, Vec::new())
    } else {
        let (served, down) = ctx.served_ledger().await;
        let (book, ledger) = served?;
        let ids: Vec<String> = down.iter().map(|d| d.row.account.clone()).collect();
        (book, ledger, ids)
    };
    let base = if exempt {
        ctx.base_currency_or(&book)
    } else {
        book.base_currency
    };
    let kill_switch = trading.kill_switch_on();
    let today = trading.now().date_naive();
    let rate = rate_to_base(
        ctx,
        &book,
        base,
        &broker,
        &order.terms.account,
        inst.currency,
        today,
    )
    .await;
    let notional = rules::notional(order, &inst, &sizing);
    let value_exact = notional.zip(rate).and_then(|(n, r)| n.checked_mul(r));
    let day = day_totals(trading)?;
    let exposure = match value_exact {
        Some(_) if !exempt => {
            let valuation = value_ledger(&book, &ledger, base, Scope::ACCOUNTS)?;
            let (total, as_reported) = portfolio_total(ctx, &book, &valuation, base);
            let held: Decimal = valuation
                .positions
                .iter()
                .filter(|p| book.instrument(p.instrument).key == key)
                .filter_map(|p| p.marked.as_ref().and_then(|m| m.notional_converted))
                .sum();
            // Working orders in the same instrument count as if they had filled, and so
            // do the orders reserved but not yet visible at the broker.
            let (working, unread) = working_notional(ctx, &inst, sizing.touch, rate).await;
            let mut unknown = down.clone();
            unknown.extend(unread.into_iter().filter(|a| !down.contains(a)));
            let day_text = trading.today();
            let instrument = key.qualified();
            let unseen = trading
                .store
                .tx::<_, ErrorWrap>(|tx| Ok(unseen_in(tx, &day_text, &instrument, mark)?))
                .map_err(Error::from)?;
            Some(Exposure {
                total,
                as_reported,
                held,
                working,
                unknown,
                mark,
                unseen,
            })
        }
        _ => None,
    };
    let margin = match broker
        .reported_margin(&order.terms.account)
        .and_then(|m| margin_of(&m, &inst))
    {
        Some(mut margin) => {
            if !exempt && notional.is_some() {
                margin.to_account = rate_to_base(
                    ctx,
                    &book,
                    margin.currency,
                    &broker,
                    &order.terms.account,
                    inst.currency,
                    today,
                )
                .await;
            }
            Some(margin)
        }
        None => None,
    };
    let commission = match (sizing.quantity, sizing.price) {
        (Some(q), Some(p)) => broker.estimate_commission(&order.terms.account, &inst, q, p),
        _ => None,
    };
    let takes_magic = broker.takes_magic();
    Ok((
        broker,
        Facts {
            inst,
            quote,
            prior,
            ticket,
            account_broker,
            takes_magic,
            held_here,
            base,
            rate,
            kill_switch,
            day,
            exposure,
            margin,
            commission,
            notes,
        },
    ))
}

/// The margin figure an order is weighed against: the free margin, else the buying
/// power; `None` where the broker reports neither.
fn margin_of(m: &tradedesk_brokers::AccountMargin, inst: &TradableInstrument) -> Option<Margin> {
    let (available, what, rate) = match (m.free_margin, m.buying_power) {
        (Some(f), _) => (f, "free margin", inst.margin_rate),
        (None, Some(b)) => (b, "buying power", Decimal::ONE),
        (None, None) => return None,
    };
    Some(Margin {
        currency: m.currency,
        available,
        what,
        rate,
        to_account: None,
    })
}

/// Reads again, inside the reservation's transaction, what another order (in this
/// process or another sharing the state directory) can have changed since `facts` were
/// gathered: the kill switch, the day's reservations, the reservations of `weight`'s
/// instrument, and the broker's margin as of its last snapshot (weighed at the rate
/// the evaluation found). A margin the evaluation did not weigh the order against is
/// not weighed here either.
///
/// # Errors
/// A store failure.
pub(super) fn reread(
    tx: &Transaction<'_>,
    trading: &Trading,
    broker: &Arc<dyn Broker>,
    account: &str,
    facts: &Facts,
    weight: Option<&Weight>,
) -> std::result::Result<Reread, StoreError> {
    let day_text = trading.today();
    let day = day_in(tx, &day_text)?;
    let unseen = match weight {
        Some(w) => unseen_in(tx, &day_text, &w.instrument, w.mark)?,
        None => Vec::new(),
    };
    let margin = facts.margin.as_ref().and_then(|before| {
        let mut now = margin_of(&broker.reported_margin(account)?, &facts.inst)?;
        now.to_account = before
            .to_account
            .filter(|_| before.currency == now.currency);
        Some(now)
    });
    Ok(Reread {
        kill_switch: trading.kill_switch_on(),
        day,
        unseen,
        margin,
    })
}

/// The day's counted reservations, summed.
fn day_in(tx: &Transaction<'_>, day: &str) -> std::result::Result<Day, StoreError> {
    let rows = idempotency::day_notionals(tx, day)?;
    Ok(Day {
        sum: rows.iter().filter_map(|r| r.parse::<Decimal>().ok()).sum(),
        count: u32::try_from(rows.len()).unwrap_or(u32::MAX),
    })
}

/// The day's reservations of `instrument` the portfolio read after `mark` may not show.
fn unseen_in(
    tx: &Transaction<'_>,
    day: &str,
    instrument: &str,
    mark: i64,
) -> std::result::Result<Vec<Decimal>, StoreError> {
    Ok(idempotency::unseen_exposures(tx, day, instrument, mark)?
        .iter()
        .filter_map(|r| r.parse::<Decimal>().ok())
        .collect())
}

/// Today's counted orders.
fn day_totals(trading: &Trading) -> Result<Day> {
    let day = trading.today();
    trading
        .store
        .tx::<_, ErrorWrap>(|tx| Ok(day_in(tx, &day)?))
        .map_err(Error::from)
}

/// The portfolio's value for the position-weight limit, in `base`: each account as its
/// broker reports its equity, where it does (in `base`, or converted at the book's rates),
/// else as the replay values it (marked positions and cash). Answers the total and, per
/// account valued as reported, what was used and how far the replay's figure is from it:
/// the difference is what the reconciliation lists (holdings or cash the history does not
/// explain; docs/methodology/trading.md).
fn portfolio_total(
    ctx: &ToolContext,
    book: &tradedesk_core::Book,
    valuation: &crate::valuation::Valuation,
    base: Currency,
) -> (Decimal, Vec<String>) {
    let mut total = Decimal::ZERO;
    let mut said = Vec::new();
    for (index, account) in book.accounts.iter().enumerate() {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let ours: Decimal = valuation
            .positions
            .iter()
            .filter(|p| p.account == index)
            .filter_map(|p| p.marked.as_ref().and_then(|m| m.market_value_converted))
            .chain(
                valuation
                    .cash
                    .iter()
                    .filter(|c| c.account == index)
                    .filter_map(|c| c.converted),
            )
            .sum();
        let reported = ctx
            .reported_equity(&account.id)
            .and_then(|(currency, equity)| {
                if currency == base {
                    Some(equity)
                } else {
                    book.fx
                        .convert(equity, currency, base, book.as_of)
                        .ok()
                        .map(|v| base.round(v))
                }
            });
        match reported {
            Some(equity) => {
                total += equity;
                if equity != ours {
                    said.push(format!(
                        "{} valued as its broker reports it ({} {b}; the replayed history values it at {} {b}, the difference get_server_health's reconciliation explains)",
                        account.id,
                        base.round(equity),
                        base.round(ours),
                        b = base.code()
                    ));
                }
            }
            None => total += ours,
        }
    }
    (total, said)
}

/// `1 from = rate base` at the latest rate: the book's FX, else a broker that quotes
/// the pair (the sim quotes EURUSD, USDJPY, USDMYR, ...).
async fn rate_to_base(
    ctx: &ToolContext,
    book: &tradedesk_core::Book,
    base: Currency,
    own: &Arc<dyn Broker>,
    own_account: &str,
    from: Currency,
    today: chrono::NaiveDate,
) -> Option<Decimal> {
    if from == base {
        return Some(Decimal::ONE);
    }
    // A book rate only while it is fresh: a cap checked at a months-old rate is no cap.
    if let Ok(rate) = book.fx.rate(from, base, today)
        && rate.date.is_none_or(|d| !crate::rates::is_stale(today, d))
    {
        return Some(rate.rate);
    }
    // The order's own broker first, then the others that answer, each bounded.
    let down = ctx.down_accounts();
    let mut askable = vec![(own_account.to_owned(), Arc::clone(own))];
    askable.extend(
        ctx.served_accounts()
            .into_iter()
            .filter(|(a, _)| a.id != own_account && !down.contains(&a.id))
            .map(|(a, b)| (a.id, b)),
    );
    for (account, broker) in askable {
        for (pair, invert) in [
            (format!("{}{}", from.code(), base.code()), false),
            (format!("{}{}", base.code(), from.code()), true),
        ] {
            if let Ok(Ok(q)) =
                tokio::time::timeout(ctx.broker_timeout, broker.quote(&account, &pair)).await
            {
                let mid = (q.bid + q.ask) / Decimal::TWO;
                if mid <= Decimal::ZERO {
                    continue;
                }
                return Some(if invert { Decimal::ONE / mid } else { mid });
            }
        }
    }
    None
}

/// This account's signed position in an instrument.
pub(super) fn position_in(
    book: &tradedesk_core::Book,
    ledger: &tradedesk_core::ledger::Ledger,
    account: &str,
    key: &InstrumentKey,
) -> Decimal {
    let (Some(a), Some(i)) = (book.account_index(account), book.instrument_index(key)) else {
        return Decimal::ZERO;
    };
    ledger
        .fifo
        .open_positions()
        .filter(|(pa, pi, _)| *pa == a && *pi == i)
        .map(|(_, _, lots)| lots.signed_quantity())
        .sum()
}

/// The signed base-currency value of every working order in an instrument, at the
/// highest price written on each (or the current price), across the accounts that
/// report orders; and the accounts whose orders could not be read (down, or no answer
/// within the broker timeout). An account that cannot list orders is not one of them.
async fn working_notional(
    ctx: &ToolContext,
    inst: &TradableInstrument,
    price_now: Option<Decimal>,
    rate: Option<Decimal>,
) -> (Decimal, Vec<String>) {
    let mut total = Decimal::ZERO;
    let down = ctx.down_accounts();
    let mut unread = Vec::new();
    for (account, broker) in ctx.served_accounts() {
        if down.contains(&account.id) {
            unread.push(account.id);
            continue;
        }
        let orders = match tokio::time::timeout(
            ctx.broker_timeout,
            broker.orders(Some(&account.id), OrderFilter::Open),
        )
        .await
        {
            Ok(Ok(orders)) => orders,
            Ok(Err(BrokerError::Unsupported { .. })) => continue,
            Ok(Err(_)) | Err(_) => {
                unread.push(account.id);
                continue;
            }
        };
        for o in orders.iter().filter(|o| o.key == inst.key) {
            let price = [o.limit_price, o.stop_price, price_now]
                .into_iter()
                .flatten()
                .max();
            let remaining = o.quantity - o.filled_quantity;
            let value = price
                .zip(rate)
                .and_then(|(p, r)| {
                    remaining
                        .checked_mul(p)?
                        .checked_mul(inst.multiplier)?
                        .checked_mul(r)
                })
                .unwrap_or_default();
            total += if o.side == Side::Buy { value } else { -value };
        }
    }
    (total, unread)
}

/// An account's own book, replayed, read from its broker alone (never waiting for
/// another broker).
///
/// # Errors
/// The account's book cannot be read or replayed.
pub(super) async fn own_ledger(
    ctx: &ToolContext,
    account: &str,
) -> Result<(
    Arc<tradedesk_core::Book>,
    Arc<tradedesk_core::ledger::Ledger>,
)> {
    let book = ctx.account_book(account).await?;
    let ledger = Arc::new(tradedesk_core::ledger::replay(&book, |_, _| {})?);
    Ok((book, ledger))
}
