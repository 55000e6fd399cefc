//! The order guard's rules (docs/methodology/trading.md, "The guards, in order"): pure
//! functions of an order, the facts gathered for it ([`super::facts`]) and the server's
//! policy. Nothing here reads a broker, the store, a file or a clock: the same functions
//! decide the preview, the placement and, for the rules that depend on other orders, the
//! reservation's transaction ([`reservation`]).

use rust_decimal::Decimal;
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{
    Currency, Error, ErrorCode, InstrumentKey, Order, OrderRequest, OrderType, Quote, Side,
    TradableInstrument,
};

use super::TradingSettings;
use super::facts::{Day, Exposure, Facts, Margin, Reread, TicketFact};
use super::orders::idempotency_fingerprint;

#[cfg(test)]
mod tests;

/// The policy the rules enforce: the server's `[trading]` settings.
pub(super) type Policy = TradingSettings;

macro_rules! rules {
    ($( $(#[$meta:meta])* $variant:ident = $name:literal, $code:ident, $hint:expr; )*) => {
        /// One guard. Its wire name is what the tools answer in a check's `rule` and an
        /// error's `rule`; its code and hint are the error it refuses an order with.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub(super) enum Rule {
            $( $(#[$meta])* $variant, )*
        }

        impl Rule {
            /// Every rule, in the order of this declaration.
            #[cfg(test)]
            pub(super) const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The name the tools answer (`lot_step`, `max_order_notional`, ...).
            pub(super) const fn name(self) -> &'static str {
                match self { $(Rule::$variant => $name,)* }
            }

            /// The error code an order it refuses gets.
            pub(super) const fn code(self) -> ErrorCode {
                match self { $(Rule::$variant => ErrorCode::$code,)* }
            }

            /// What to do about a refusal.
            pub(super) const fn hint(self) -> &'static str {
                match self { $(Rule::$variant => $hint,)* }
            }
        }
    };
}

const LIMITS_HINT: &str = "the server's trading limits refuse this order; make it smaller, or ask the owner to change [trading]";

rules! {
    QuantityOrNotional = "quantity_or_notional", InvalidQuantity,
        "pass exactly one of quantity and notional";
    QuantityPositive = "quantity_positive", InvalidQuantity,
        "quantity (or notional) must be above zero";
    LotStep = "lot_step", InvalidQuantity,
        "round the quantity to a whole multiple of the lot step (get_quote shows it)";
    MinQuantity = "min_quantity", InvalidQuantity,
        "raise the quantity to at least the minimum";
    MaxQuantity = "max_quantity", InvalidQuantity,
        "split the order or lower the quantity";
    /// `close_position` only.
    CloseExceedsPosition = "close_exceeds_position", InvalidQuantity,
        "close at most the open quantity (get_positions shows it), or omit quantity to close all";
    TicketFound = "ticket_found", InvalidOrder,
        "get_positions lists each open ticket under its symbol; pass one of those, of this symbol";
    /// `close_position` and `modify_position` on a symbol held both ways.
    TicketRequired = "ticket_required", InvalidOrder,
        "pass ticket (get_positions lists each ticket under its symbol)";
    TicketSide = "ticket_side", InvalidOrder,
        "an order on a ticket closes it: its side is the ticket's opposite (close_position sets it)";
    CloseExceedsTicket = "close_exceeds_ticket", InvalidQuantity,
        "close at most the ticket's lots (get_positions shows them), or omit quantity to close all of it";
    TicketCloseOnly = "ticket_close_only", InvalidOrder,
        "an order on a ticket closes it at the market: leave type market, or leave ticket out to open a new ticket";
    MagicSupported = "magic_supported", InvalidOrder,
        "magic numbers are MetaTrader's: leave magic out for this account";
    PricesMatchType = "prices_match_type", InvalidOrder,
        "limit orders need limit_price, stop orders stop_price, stop_limit both; market orders neither";
    PricePositive = "price_positive", InvalidOrder,
        "every price must be above zero";
    TickSize = "tick_size", InvalidOrder,
        "round each price to a multiple of the instrument's tick (get_quote shows it)";
    SlAboveTp = "sl_above_tp", InvalidOrder,
        "for a buy (a long position) the stop-loss must be below the take-profit";
    SlBelowTp = "sl_below_tp", InvalidOrder,
        "for a sell (a short position) the stop-loss must be above the take-profit";
    SlAbovePrice = "sl_above_price", InvalidOrder,
        "for a buy the stop-loss must be below the entry price (for a long position, below the bid)";
    SlBelowPrice = "sl_below_price", InvalidOrder,
        "for a sell the stop-loss must be above the entry price (for a short position, above the ask)";
    TpBelowPrice = "tp_below_price", InvalidOrder,
        "for a buy the take-profit must be above the entry price (for a long position, above the bid)";
    TpAbovePrice = "tp_above_price", InvalidOrder,
        "for a sell the take-profit must be below the entry price (for a short position, below the ask)";
    CommentLength = "comment_length", InvalidOrder,
        "shorten the comment to at most 31 characters";
    ClientOrderIdFormat = "client_order_id_format", InvalidOrder,
        "use 1 to 64 of letters, digits and - _ . :";
    ClientOrderIdReused = "client_order_id_reused", InvalidOrder,
        "this client_order_id was used for a different order; use a new id (get_orders shows the first)";
    /// `modify_position` only.
    SlOrTpRequired = "sl_or_tp_required", InvalidOrder,
        "pass stop_loss, take_profit or both";
    /// `close_position` and `modify_position` only.
    NoPosition = "no_position", InvalidOrder,
        "there is no open position to change; get_positions lists them";
    /// `cancel_order` only.
    OrderReference = "order_reference", InvalidOrder,
        "get_orders lists both for every working order";
    SymbolAllowed = "symbol_allowed", SymbolNotAllowed,
        "the server's allow_symbols / deny_symbols policy refuses this symbol; only its owner can change that";
    KillSwitch = "kill_switch", KillSwitch,
        "the kill switch is on: orders that add risk are refused; cancel_order and close_position still work";
    PriceAvailable = "price_available", PriceUnavailable,
        "no current price or FX rate to value the order; retry when the market data is back (get_quote)";
    MaxOrderNotional = "max_order_notional", LimitExceeded, LIMITS_HINT;
    MaxDailyNotional = "max_daily_notional", LimitExceeded, LIMITS_HINT;
    MaxPositionWeight = "max_position_weight", LimitExceeded, LIMITS_HINT;
    MaxOrdersPerDay = "max_orders_per_day", LimitExceeded, LIMITS_HINT;
    FreeMargin = "free_margin", LimitExceeded,
        "the broker's free margin (or buying power; get_accounts shows it) does not cover this order: make it smaller, close a position, or add funds";
}

impl Rule {
    /// Whether the reservation's transaction decides it again ([`reservation`]).
    #[cfg(test)]
    pub(super) const fn reserved(self) -> bool {
        matches!(
            self,
            Self::KillSwitch
                | Self::MaxDailyNotional
                | Self::MaxOrdersPerDay
                | Self::MaxPositionWeight
                | Self::FreeMargin
        )
    }

    /// The error refusing an order by this rule: `rule: detail`, its code and hint.
    pub(super) fn error(self, detail: &str) -> Error {
        Error::rule(
            self.code(),
            self.name(),
            format!("{}: {detail}", self.name()),
            self.hint(),
        )
    }
}

/// One rule's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Check {
    pub(super) rule: Rule,
    pub(super) passed: bool,
    pub(super) detail: String,
}

impl Check {
    fn new(rule: Rule, passed: bool, detail: impl Into<String>) -> Self {
        Self {
            rule,
            passed,
            detail: detail.into(),
        }
    }

    /// The refusal, when the rule did not pass.
    pub(super) fn failure(&self) -> Option<RuleFailure> {
        (!self.passed).then(|| RuleFailure {
            rule: self.rule,
            detail: self.detail.clone(),
        })
    }
}

/// A rule that refused the order, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct RuleFailure {
    pub(super) rule: Rule,
    pub(super) detail: String,
}

impl From<RuleFailure> for Error {
    fn from(f: RuleFailure) -> Self {
        f.rule.error(&f.detail)
    }
}

/// What an order trades at: the touch (the ask for a buy), the valuation price (the
/// highest of the limit, the stop and the touch, none without a quote) and the quantity
/// (a notional's rounded down to the lot step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Sizing {
    pub(super) touch: Option<Decimal>,
    pub(super) price: Option<Decimal>,
    pub(super) quantity: Option<Decimal>,
}

pub(super) fn sizing(order: &Order, inst: &TradableInstrument, quote: Option<&Quote>) -> Sizing {
    let touch = quote.map(|q| q.for_side(order.terms.side));
    let price = [order.terms.limit_price, order.terms.stop_price, touch]
        .into_iter()
        .flatten()
        .max()
        .filter(|_| touch.is_some());
    let quantity = match (order.quantity, order.notional, price) {
        (Some(q), _, _) => Some(q),
        (None, Some(n), Some(p))
            if p > Decimal::ZERO && n > Decimal::ZERO && !inst.lot_step.is_zero() =>
        {
            p.checked_mul(inst.multiplier)
                .and_then(|unit| n.checked_div(unit))
                .and_then(|units| units.checked_div(inst.lot_step))
                .and_then(|lots| lots.floor().checked_mul(inst.lot_step))
        }
        _ => None,
    };
    Sizing {
        touch,
        price,
        quantity,
    }
}

/// The order's notional in the instrument's currency: its own, else quantity × price ×
/// multiplier.
pub(super) fn notional(order: &Order, inst: &TradableInstrument, s: &Sizing) -> Option<Decimal> {
    match (order.notional, s.quantity, s.price) {
        (Some(n), _, _) => Some(n),
        (None, Some(q), Some(p)) => q
            .checked_mul(p)
            .and_then(|v| v.checked_mul(inst.multiplier)),
        _ => None,
    }
}

/// Whether an order only takes risk off: `close_position`, a market order on a ticket,
/// or a market order against this account's own position no bigger than it. Such an
/// order passes the kill switch, the lists and the limits: the owner must always be able
/// to get out (the broker is told to clamp it).
pub(super) fn reduces(
    order: &Order,
    quantity: Option<Decimal>,
    held: Decimal,
    on_ticket: bool,
) -> bool {
    let market = order.terms.order_type == OrderType::Market;
    order.reduce_only
        || (on_ticket && market)
        || (market
            && quantity.is_some_and(|q| q > Decimal::ZERO && q <= held.abs())
            && (held.is_sign_positive() != (order.terms.side == Side::Buy))
            && !held.is_zero())
}

pub(super) fn multiple_of(value: Decimal, step: Decimal) -> bool {
    step.is_zero() || (value % step).is_zero()
}

fn valid_client_order_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
}

fn symbol_listed(list: &[String], key: &InstrumentKey) -> bool {
    list.iter().any(|entry| {
        let entry = entry.trim().to_ascii_uppercase();
        entry == key.qualified().to_ascii_uppercase() || entry == key.symbol.to_ascii_uppercase()
    })
}

// ---- The order's own rules ----

pub(super) fn quantity_or_notional(order: &Order) -> Check {
    let both = order.quantity.is_some() && order.notional.is_some();
    let neither = order.quantity.is_none() && order.notional.is_none();
    Check::new(
        Rule::QuantityOrNotional,
        !both && !neither,
        if both {
            "both quantity and notional were given"
        } else if neither {
            "neither quantity nor notional was given"
        } else {
            "exactly one of quantity and notional"
        },
    )
}

pub(super) fn quantity_positive(order: &Order) -> Check {
    let amount = order.quantity.or(order.notional).unwrap_or_default();
    Check::new(
        Rule::QuantityPositive,
        amount > Decimal::ZERO,
        format!(
            "{} {}",
            if order.quantity.is_some() {
                "quantity"
            } else {
                "notional"
            },
            amount
        ),
    )
}

pub(super) fn prices_match_type(order: &Order) -> Check {
    let t = order.terms.order_type.as_str();
    let problem = if order.terms.order_type.needs_limit() != order.terms.limit_price.is_some() {
        Some(if order.terms.limit_price.is_some() {
            format!("a {t} order takes no limit_price")
        } else {
            format!("a {t} order needs limit_price")
        })
    } else if order.terms.order_type.needs_stop() != order.terms.stop_price.is_some() {
        Some(if order.terms.stop_price.is_some() {
            format!("a {t} order takes no stop_price")
        } else {
            format!("a {t} order needs stop_price")
        })
    } else {
        None
    };
    Check::new(
        Rule::PricesMatchType,
        problem.is_none(),
        problem.unwrap_or_else(|| "the prices match the order type".to_owned()),
    )
}

fn named_prices(order: &Order) -> [(&'static str, Option<Decimal>); 4] {
    [
        ("limit_price", order.terms.limit_price),
        ("stop_price", order.terms.stop_price),
        ("stop_loss", order.terms.stop_loss),
        ("take_profit", order.terms.take_profit),
    ]
}

pub(super) fn price_positive(prices: &[(&str, Option<Decimal>)]) -> Check {
    let not_positive: Vec<&str> = prices
        .iter()
        .filter(|(_, p)| p.is_some_and(|p| p <= Decimal::ZERO))
        .map(|(n, _)| *n)
        .collect();
    Check::new(
        Rule::PricePositive,
        not_positive.is_empty(),
        if not_positive.is_empty() {
            "every price is above zero".to_owned()
        } else {
            format!("{} must be above zero", not_positive.join(", "))
        },
    )
}

pub(super) fn tick_size(prices: &[(&str, Option<Decimal>)], tick: Decimal) -> Check {
    let off_tick: Vec<String> = prices
        .iter()
        .filter_map(|(n, p)| {
            p.filter(|p| !multiple_of(*p, tick))
                .map(|p| format!("{n} {p}"))
        })
        .collect();
    Check::new(
        Rule::TickSize,
        off_tick.is_empty(),
        if off_tick.is_empty() {
            format!("prices are multiples of the tick {tick}")
        } else {
            format!("{} not a multiple of the tick {tick}", off_tick.join(", "))
        },
    )
}

pub(super) fn lot_step(q: Decimal, inst: &TradableInstrument) -> Check {
    Check::new(
        Rule::LotStep,
        multiple_of(q, inst.lot_step),
        format!("{q} {} in steps of {}", inst.unit, inst.lot_step),
    )
}

pub(super) fn min_quantity(q: Decimal, inst: &TradableInstrument) -> Check {
    Check::new(
        Rule::MinQuantity,
        q >= inst.min_quantity,
        format!(
            "{q} against a minimum of {} {}",
            inst.min_quantity, inst.unit
        ),
    )
}

pub(super) fn max_quantity(q: Decimal, inst: &TradableInstrument) -> Check {
    Check::new(
        Rule::MaxQuantity,
        q <= inst.max_quantity,
        if inst.max_quantity == Decimal::MAX {
            format!("{q} {}: the broker states no maximum", inst.unit)
        } else {
            format!(
                "{q} against a maximum of {} {}",
                inst.max_quantity, inst.unit
            )
        },
    )
}

/// The stop-loss / take-profit rules of a long (`buy`) or short position: the pair
/// against each other, and each new level against the price it is entered (or exits) at.
pub(super) fn level_rules(
    buy: bool,
    (pair_sl, pair_tp): (Option<Decimal>, Option<Decimal>),
    (sl, tp): (Option<Decimal>, Option<Decimal>),
    price: Option<(Decimal, &str)>,
) -> Vec<Check> {
    let mut out = Vec::new();
    if let (Some(sl), Some(tp)) = (pair_sl, pair_tp) {
        let (rule, ok) = if buy {
            (Rule::SlAboveTp, sl < tp)
        } else {
            (Rule::SlBelowTp, sl > tp)
        };
        out.push(Check::new(
            rule,
            ok,
            format!("stop_loss {sl}, take_profit {tp}"),
        ));
    }
    if let (Some(sl), Some((p, name))) = (sl, price) {
        let (rule, ok) = if buy {
            (Rule::SlAbovePrice, sl < p)
        } else {
            (Rule::SlBelowPrice, sl > p)
        };
        out.push(Check::new(rule, ok, format!("stop_loss {sl}, {name} {p}")));
    }
    if let (Some(tp), Some((p, name))) = (tp, price) {
        let (rule, ok) = if buy {
            (Rule::TpBelowPrice, tp > p)
        } else {
            (Rule::TpAbovePrice, tp < p)
        };
        out.push(Check::new(
            rule,
            ok,
            format!("take_profit {tp}, {name} {p}"),
        ));
    }
    out
}

pub(super) fn comment_length(comment: &str) -> Check {
    let n = comment.chars().count();
    Check::new(
        Rule::CommentLength,
        n <= 31,
        format!("{n} characters (at most 31)"),
    )
}

pub(super) fn client_order_id_format(id: &str) -> Check {
    Check::new(
        Rule::ClientOrderIdFormat,
        valid_client_order_id(id),
        format!("{} ({} characters)", quoted(id), id.chars().count()),
    )
}

/// The id against the order it was first used for (`prior`: that order's fingerprint
/// and broker id).
pub(super) fn client_order_id_reused(
    id: &str,
    fingerprint: &str,
    prior: Option<&(String, Option<String>)>,
) -> Check {
    let (passed, detail) = match prior {
        Some((seen, order_id)) if seen != fingerprint => (
            false,
            format!(
                "{} was used for order {} with different arguments",
                quoted(id),
                order_id.as_deref().unwrap_or("(pending)")
            ),
        ),
        Some(_) => (
            true,
            "seen before with this same order: place_order returns the stored outcome".to_owned(),
        ),
        None => (true, "not used before".to_owned()),
    };
    Check::new(Rule::ClientOrderIdReused, passed, detail)
}

/// A ticket (MetaTrader): the order closes it, so it must be open, of this symbol, on
/// the other side, and no bigger than it.
pub(super) fn ticket_rules(
    order: &Order,
    ticket: &str,
    fact: &TicketFact,
    key: &InstrumentKey,
    inst: &TradableInstrument,
    quantity: Option<Decimal>,
) -> Vec<Check> {
    let mut out = vec![
        Check::new(
            Rule::TicketFound,
            matches!(fact, TicketFact::Open { .. }),
            match fact {
                TicketFact::Missing => format!(
                    "account {} has no open ticket {}",
                    order.terms.account,
                    quoted(ticket)
                ),
                TicketFact::OtherSymbol(symbol) => {
                    format!("ticket {} is {symbol}, not {}", quoted(ticket), key.symbol)
                }
                TicketFact::Open { .. } => format!("ticket {ticket} is open"),
            },
        ),
        Check::new(
            Rule::TicketCloseOnly,
            order.terms.order_type == OrderType::Market,
            format!(
                "a {} order on ticket {ticket}",
                order.terms.order_type.as_str()
            ),
        ),
    ];
    if let TicketFact::Open {
        side,
        quantity: lots,
    } = fact
    {
        out.push(Check::new(
            Rule::TicketSide,
            *side != order.terms.side,
            format!(
                "ticket {ticket} is a {}; an order on it is a {}",
                side.as_str(),
                if *side == Side::Buy { "sell" } else { "buy" }
            ),
        ));
        if let Some(q) = quantity {
            out.push(Check::new(
                Rule::CloseExceedsTicket,
                q <= *lots,
                format!("{q} {} to close, ticket {ticket} has {lots}", inst.unit),
            ));
        }
    }
    out
}

pub(super) fn magic_supported(account: &str, broker: &str, takes_magic: bool) -> Check {
    Check::new(
        Rule::MagicSupported,
        takes_magic,
        format!("account {account} is {broker}, which has no magic numbers"),
    )
}

// ---- `close_position`'s and `modify_position`'s own rules ----

/// `no_position`: there is a position (or ticket) to close or change.
pub(super) fn position_held(account: &str, key: &InstrumentKey, held: Decimal) -> Check {
    Check::new(
        Rule::NoPosition,
        !held.is_zero(),
        format!("account {account} holds no {key}"),
    )
}

/// How much `close_position` closes of `held` (signed; a ticket's lots when `ticket`):
/// all of it, or the `requested` part, never more.
///
/// # Errors
/// `no_position`, `close_exceeds_ticket` or `close_exceeds_position`.
pub(super) fn close_quantity(
    account: &str,
    key: &InstrumentKey,
    held: Decimal,
    requested: Option<Decimal>,
    ticket: Option<&str>,
) -> Result<Decimal, RuleFailure> {
    if let Some(f) = position_held(account, key, held).failure() {
        return Err(f);
    }
    let open = held.abs();
    match requested {
        None => Ok(open),
        Some(q) if q > open => Err(match ticket {
            Some(t) => RuleFailure {
                rule: Rule::CloseExceedsTicket,
                detail: format!("{q} to close, ticket {t} has {open}"),
            },
            None => RuleFailure {
                rule: Rule::CloseExceedsPosition,
                detail: format!("{q} to close, but {open} is open"),
            },
        }),
        Some(q) => Ok(q),
    }
}

/// `sl_or_tp_required`: `modify_position` changes at least one level.
pub(super) fn levels_given(sl: Option<Decimal>, tp: Option<Decimal>) -> Check {
    Check::new(
        Rule::SlOrTpRequired,
        sl.is_some() || tp.is_some(),
        if sl.is_none() && tp.is_none() {
            "neither stop_loss nor take_profit was given"
        } else {
            "a level was given"
        },
    )
}

/// `ticket_required`: a change to a whole symbol on a hedging account that holds it
/// both ways (`tickets`: the symbol's open tickets, id, side and lots) must name the
/// ticket it means.
pub(super) fn one_way(
    account: &str,
    key: &InstrumentKey,
    tool: &str,
    tickets: &[(&str, Side, Decimal)],
) -> Check {
    let buys = tickets.iter().any(|t| t.1 == Side::Buy);
    let sells = tickets.iter().any(|t| t.1 == Side::Sell);
    let list: Vec<String> = tickets
        .iter()
        .map(|(id, side, lots)| format!("{id} ({} {lots})", side.as_str()))
        .collect();
    Check::new(
        Rule::TicketRequired,
        !(buys && sells),
        if buys && sells {
            format!(
                "account {account} holds {} both ways (hedging): {tool} needs the ticket, one of {}",
                key.symbol,
                list.join(", ")
            )
        } else {
            format!("account {account} holds {} one way", key.symbol)
        },
    )
}

// ---- The policy ----

pub(super) fn symbol_allowed(key: &InstrumentKey, exempt: bool, policy: &Policy) -> Check {
    let denied = symbol_listed(&policy.deny_symbols, key);
    let allowed = policy.allow_symbols.is_empty() || symbol_listed(&policy.allow_symbols, key);
    Check::new(
        Rule::SymbolAllowed,
        exempt || (allowed && !denied),
        if exempt && (denied || !allowed) {
            format!("{key} is not allowed, but this order only reduces a position")
        } else if denied {
            format!("{key} is on deny_symbols")
        } else if !allowed {
            format!("{key} is not on allow_symbols")
        } else {
            format!("{key} is allowed")
        },
    )
}

pub(super) fn kill_switch(exempt: bool, on: bool, policy: &Policy) -> Check {
    Check::new(
        Rule::KillSwitch,
        !on || exempt,
        if on && exempt {
            "the kill switch is on, but this order only reduces a position".to_owned()
        } else if on {
            format!(
                "the kill switch file {} exists",
                policy.kill_switch_file.display()
            )
        } else {
            "off".to_owned()
        },
    )
}

pub(super) fn price_available(
    key: &InstrumentKey,
    inst: &TradableInstrument,
    base: Currency,
    s: &Sizing,
    rate: Option<Decimal>,
) -> Check {
    Check::new(
        Rule::PriceAvailable,
        s.touch.is_some() && rate.is_some(),
        match (s.touch, rate) {
            (None, _) => format!("no current quote for {key}"),
            (Some(_), None) => format!("no {}/{} rate", inst.currency.code(), base.code()),
            _ => format!(
                "valued at {} {} per unit",
                s.price.unwrap_or_default(),
                inst.currency.code()
            ),
        },
    )
}

/// `exact`: the order's base-currency value, unrounded (rounding must never take an
/// order under a limit).
pub(super) fn max_order_notional(
    exempt: bool,
    exact: Decimal,
    base: Currency,
    policy: &Policy,
) -> Check {
    Check::new(
        Rule::MaxOrderNotional,
        exempt || exact <= policy.max_order_notional,
        format!(
            "order valued at {} {b}; limit {} {b}{}",
            base.round(exact),
            policy.max_order_notional,
            if exempt {
                " (a close only reduces risk: exempt)"
            } else {
                ""
            },
            b = base.code()
        ),
    )
}

pub(super) fn max_daily_notional(
    exempt: bool,
    day: Day,
    exact: Decimal,
    base: Currency,
    policy: &Policy,
) -> Check {
    Check::new(
        Rule::MaxDailyNotional,
        exempt
            || day
                .sum
                .checked_add(exact)
                .is_some_and(|total| total <= policy.max_daily_notional),
        format!(
            "today {} {b} + this order {} {b} against a daily limit of {} {b}",
            day.sum,
            base.round(exact),
            policy.max_daily_notional,
            b = base.code()
        ),
    )
}

pub(super) fn max_orders_per_day(exempt: bool, count: u32, policy: &Policy) -> Check {
    Check::new(
        Rule::MaxOrdersPerDay,
        exempt || count < policy.max_orders_per_day,
        format!(
            "{count} order(s) today; limit {}",
            policy.max_orders_per_day
        ),
    )
}

/// The position-weight limit's inputs, kept so the reservation's transaction can decide
/// it again with the orders reserved meanwhile (docs/methodology/trading.md, "Decided
/// inside the reservation").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Weight {
    /// `EXCHANGE:SYMBOL`, as reservations record it.
    pub(super) instrument: String,
    /// The position and the working orders the evaluation saw, signed, base currency.
    pub(super) seen: Decimal,
    /// This order's signed exposure, base currency (a buy positive).
    pub(super) signed: Decimal,
    /// The portfolio's value.
    pub(super) total: Decimal,
    /// The settle mark read before the position and the working orders were.
    pub(super) mark: i64,
    pub(super) limit: Decimal,
}

impl Weight {
    /// The exposures of orders in flight (or settled after the evaluation read the
    /// portfolio) that go the same way as this one, of `rows` (every such reservation):
    /// what the reading cannot show yet. Orders the other way are left out until they
    /// fill: they might not.
    pub(super) fn unseen(&self, rows: &[Decimal]) -> (Decimal, usize) {
        let same_way: Vec<Decimal> = rows
            .iter()
            .copied()
            .filter(|e| e.is_sign_positive() == self.signed.is_sign_positive() && !e.is_zero())
            .collect();
        (same_way.iter().copied().sum(), same_way.len())
    }

    /// The position's weight in percent after this order, with `unseen` in flight.
    pub(super) fn after(&self, unseen: Decimal) -> Option<Decimal> {
        if self.total <= Decimal::ZERO {
            return None;
        }
        let after = self
            .seen
            .checked_add(unseen)?
            .checked_add(self.signed)?
            .abs();
        after
            .checked_div(self.total)?
            .checked_mul(Decimal::ONE_HUNDRED)
    }
}

/// The weight of the position after the fill in the whole portfolio, counting the
/// reservations in `unseen`; refused when an account that did not answer (`unknown`)
/// could change the verdict. `as_reported` says which accounts were valued as their
/// broker reports them.
pub(super) fn max_position_weight(
    w: &Weight,
    unseen: &[Decimal],
    exposure: &Exposure,
    key: &InstrumentKey,
    base: Currency,
) -> Check {
    let (unseen_sum, unseen_count) = w.unseen(unseen);
    let weight = w.after(unseen_sum);
    let in_flight = match unseen_count {
        0 => String::new(),
        1 => " counting 1 order in flight".to_owned(),
        n => format!(" counting {n} orders in flight"),
    };
    let passed = weight.is_some_and(|p| p <= w.limit);
    let mut detail = match weight.map(|p| p.round_dp(2)) {
        Some(p) => format!(
            "{key} would be {p}% of the portfolio ({} {b}){in_flight}; limit {}%",
            base.round(w.total),
            w.limit,
            b = base.code()
        ),
        None => "the portfolio's total value is not positive".to_owned(),
    };
    if !exposure.as_reported.is_empty() {
        detail = format!("{detail}; {}", exposure.as_reported.join("; "));
    }
    if exposure.unknown.is_empty() {
        return Check::new(Rule::MaxPositionWeight, passed, detail);
    }
    // What an account that does not answer holds (of this instrument, or in all) could
    // put the position over the limit: an order that adds risk waits for it; closes and
    // reductions never do.
    Check::new(
        Rule::MaxPositionWeight,
        false,
        format!(
            "cannot be decided: {} did not answer, and what {} could change the verdict ({detail})",
            exposure.unknown.join(", "),
            if exposure.unknown.len() == 1 {
                "it holds"
            } else {
                "they hold"
            }
        ),
    )
}

/// The `free_margin` rule (docs/methodology/trading.md, "Margin"): where the broker
/// reports a free margin (else a buying power), an order that adds risk may need no
/// more than that. `None` where it reports neither, or the order has no value yet
/// (`price_available` refuses it then).
pub(super) fn free_margin(
    exempt: bool,
    margin: Option<&Margin>,
    notional: Option<Decimal>,
    inst: &TradableInstrument,
) -> Option<Check> {
    let m = margin?;
    let what = m.what;
    if exempt {
        return Some(Check::new(
            Rule::FreeMargin,
            true,
            format!("this order only reduces a position: it needs no {what}"),
        ));
    }
    let notional = notional?;
    let ccy = m.currency;
    let Some(to_account) = m.to_account else {
        return Some(Check::new(
            Rule::FreeMargin,
            false,
            format!(
                "no {}/{} rate to weigh the order against the broker's {what}",
                inst.currency.code(),
                ccy.code()
            ),
        ));
    };
    let needed = notional
        .checked_mul(m.rate)
        .and_then(|n| n.checked_mul(to_account));
    let dp = ccy.minor_units() as usize;
    Some(match needed {
        Some(n) => Check::new(
            Rule::FreeMargin,
            n <= m.available,
            format!(
                "needs {:.dp$} {c} of {what}; the broker reports {:.dp$} {c}",
                ccy.round(n),
                ccy.round(m.available),
                c = ccy.code()
            ),
        ),
        None => Check::new(Rule::FreeMargin, false, "the order is too large to value"),
    })
}

/// An order evaluated: what it would trade, at what value, and every rule's verdict.
#[derive(Debug, Clone)]
pub(super) struct Evaluation {
    pub(super) quantity: Option<Decimal>,
    pub(super) price: Option<Decimal>,
    /// In the instrument's currency.
    pub(super) notional: Option<Decimal>,
    /// In the base currency, rounded.
    pub(super) notional_base: Option<Decimal>,
    pub(super) checks: Vec<Check>,
    pub(super) notes: Vec<String>,
    /// The order, when every rule passed and it could be sized and valued: the only way
    /// to the request its broker receives.
    pub(super) checked: Option<CheckedOrder>,
}

/// An order every rule of [`check`] passed, sized and valued: only [`check`] makes one
/// (its fields are private to this module), and only it makes the request a broker
/// receives ([`CheckedOrder::request`]), so no request is ever built from an order the
/// rules did not pass. The reservation's transaction decides its rules again on it
/// ([`reservation`]).
#[derive(Debug, Clone)]
pub(super) struct CheckedOrder {
    order: Order,
    key: InstrumentKey,
    quantity: Decimal,
    /// In the instrument's currency.
    notional: Decimal,
    /// The base-currency value before rounding: what the limits compare.
    value: Decimal,
    /// The base-currency value, rounded.
    notional_base: Decimal,
    /// Only takes risk off: exempt from the kill switch, lists and limits.
    reduces: bool,
    /// The position-weight limit's inputs (absent for an order that only reduces).
    weight: Option<Weight>,
}

impl CheckedOrder {
    /// What it trades (a notional's rounded down to the lot step).
    pub(super) fn quantity(&self) -> Decimal {
        self.quantity
    }

    /// Its base-currency value, unrounded.
    pub(super) fn value(&self) -> Decimal {
        self.value
    }

    /// Its base-currency value, rounded.
    pub(super) fn notional_base(&self) -> Decimal {
        self.notional_base
    }

    /// Whether it only takes risk off (the broker is told to clamp it).
    pub(super) fn reduces(&self) -> bool {
        self.reduces
    }

    /// The position-weight limit's inputs, decided again inside the reservation
    /// (absent for an order that only reduces).
    pub(super) fn weight(&self) -> Option<&Weight> {
        self.weight.as_ref()
    }

    /// The request its broker receives: the order's terms on the resolved instrument,
    /// for the quantity it trades, under the client order id it is reserved as;
    /// `reduce_only` when it only takes risk off.
    pub(super) fn request(&self, client_order_id: String) -> OrderRequest {
        OrderRequest {
            terms: self.order.terms.clone(),
            key: self.key.clone(),
            quantity: self.quantity,
            client_order_id,
            reduce_only: self.reduces,
        }
    }
}

impl Evaluation {
    pub(super) fn allowed(&self) -> bool {
        self.checks.iter().all(|c| c.passed)
    }

    /// The first rule that refused the order, in the order the rules ran.
    pub(super) fn first_failure(&self) -> Option<RuleFailure> {
        self.checks.iter().find_map(Check::failure)
    }
}

/// Runs every rule, in order: the order's own rules, then the policy. Every verdict is
/// kept (the preview shows them all); [`Evaluation::first_failure`] is the refusal.
pub(super) fn check(order: &Order, facts: &Facts, policy: &Policy) -> Evaluation {
    let inst = &facts.inst;
    let key = &inst.key;
    let base = facts.base;
    let mut checks = Vec::new();
    let mut notes = facts.notes.clone();
    let s = sizing(order, inst, facts.quote.as_ref());

    checks.push(quantity_or_notional(order));
    checks.push(quantity_positive(order));
    checks.push(prices_match_type(order));
    let prices = named_prices(order);
    checks.push(price_positive(&prices));
    checks.push(tick_size(&prices, inst.tick));
    if let Some(q) = s.quantity {
        if order.quantity.is_some() {
            checks.push(lot_step(q, inst));
        } else {
            notes.push(format!(
                "notional {} buys {q} {} at {}, rounded down to the lot step {}",
                order.notional.unwrap_or_default(),
                inst.unit,
                s.price.unwrap_or_default(),
                inst.lot_step
            ));
        }
        checks.push(min_quantity(q, inst));
        checks.push(max_quantity(q, inst));
    }
    // Stop-loss and take-profit against each other and the entry price.
    let reference = order
        .terms
        .limit_price
        .or(order.terms.stop_price)
        .or(s.touch);
    let buy = order.terms.side == Side::Buy;
    checks.extend(level_rules(
        buy,
        (order.terms.stop_loss, order.terms.take_profit),
        (order.terms.stop_loss, order.terms.take_profit),
        reference.map(|p| (p, "entry price")),
    ));
    if let Some(comment) = &order.terms.comment {
        checks.push(comment_length(comment));
    }
    if let Some(id) = &order.client_order_id {
        checks.push(client_order_id_format(id));
        checks.push(client_order_id_reused(
            id,
            &idempotency_fingerprint(order, key),
            facts.prior.as_ref(),
        ));
    }
    let mut on_ticket = false;
    if let Some(ticket) = &order.terms.ticket {
        let fact = facts.ticket.as_ref().unwrap_or(&TicketFact::Missing);
        on_ticket = matches!(fact, TicketFact::Open { .. });
        checks.extend(ticket_rules(order, ticket, fact, key, inst, s.quantity));
    }
    if order.terms.magic.is_some() {
        checks.push(magic_supported(
            &order.terms.account,
            &facts.account_broker,
            facts.takes_magic,
        ));
    }

    let exempt = reduces(order, s.quantity, facts.held_here, on_ticket);
    checks.push(symbol_allowed(key, exempt, policy));
    checks.push(kill_switch(exempt, facts.kill_switch, policy));
    let notional = notional(order, inst, &s);
    // Compared unrounded: rounding must never take an order under a limit.
    let value_exact = notional.zip(facts.rate).and_then(|(n, r)| n.checked_mul(r));
    let notional_base = value_exact.map(|v| base.round(v));
    checks.push(price_available(key, inst, base, &s, facts.rate));
    let mut weight = None;
    if s.touch.is_some() && facts.rate.is_some() && s.quantity.is_some() && value_exact.is_none() {
        checks.push(Check::new(
            Rule::MaxOrderNotional,
            false,
            "the order is too large to value",
        ));
    }
    if let Some(exact) = value_exact {
        checks.push(max_order_notional(exempt, exact, base, policy));
        checks.push(max_daily_notional(exempt, facts.day, exact, base, policy));
        // Weight of the position after the fill, in the whole portfolio: only for an
        // order that adds risk, which alone needs the other brokers.
        if exempt {
            checks.push(Check::new(
                Rule::MaxPositionWeight,
                true,
                "this order only reduces a position: exempt",
            ));
        } else if let Some(e) = &facts.exposure {
            let w = Weight {
                instrument: key.qualified(),
                seen: e.held + e.working,
                signed: if buy { exact } else { -exact },
                total: e.total,
                mark: e.mark,
                limit: policy.max_position_weight_pct,
            };
            checks.push(max_position_weight(&w, &e.unseen, e, key, base));
            weight = Some(w);
        } else {
            checks.push(Check::new(
                Rule::MaxPositionWeight,
                false,
                "cannot be decided: the portfolio was not read",
            ));
        }
    }
    checks.push(max_orders_per_day(exempt, facts.day.count, policy));
    checks.extend(free_margin(exempt, facts.margin.as_ref(), notional, inst));
    let mut eval = Evaluation {
        quantity: s.quantity,
        price: s.price,
        notional,
        notional_base,
        checks,
        notes,
        checked: None,
    };
    eval.checked = match (
        eval.allowed(),
        s.quantity,
        notional,
        value_exact,
        notional_base,
    ) {
        (true, Some(quantity), Some(n), Some(value), Some(rounded)) => Some(CheckedOrder {
            order: order.clone(),
            key: key.clone(),
            quantity,
            notional: n,
            value,
            notional_base: rounded,
            reduces: exempt,
            weight,
        }),
        _ => None,
    };
    eval
}

/// The rules decided again inside the reservation's transaction, with the same
/// functions as [`check`], over the facts read again there ([`Reread`]): the kill
/// switch, the day's notional and count, the position weight and the free margin, in
/// that order. Every other rule depends on the order alone, or on facts no other order
/// changes.
///
/// # Errors
/// The first of them that refuses the order.
pub(super) fn reservation(
    order: &CheckedOrder,
    facts: &Facts,
    again: &Reread,
    policy: &Policy,
) -> Result<(), RuleFailure> {
    let exempt = order.reduces;
    let exact = order.value;
    let base = facts.base;
    let mut checks = vec![
        kill_switch(exempt, again.kill_switch, policy),
        max_daily_notional(exempt, again.day, exact, base, policy),
        max_orders_per_day(exempt, again.day.count, policy),
    ];
    if let (Some(w), Some(e)) = (&order.weight, &facts.exposure) {
        checks.push(max_position_weight(
            w,
            &again.unseen,
            e,
            &facts.inst.key,
            base,
        ));
    }
    checks.extend(free_margin(
        exempt,
        again.margin.as_ref(),
        Some(order.notional),
        &facts.inst,
    ));
    match checks.iter().find_map(Check::failure) {
        Some(f) => Err(f),
        None => Ok(()),
    }
}
