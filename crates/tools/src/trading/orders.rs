//! The order tools: `get_orders`, `preview_order`, `place_order`, `close_position`,
//! `modify_position`, `cancel_order`.

use std::sync::Arc;

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tradedesk_brokers::{Broker, BrokerError, OrderFilter, OrderRef};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{
    Currency, Error, ErrorCode, InstrumentKey, Mode, OrderRecord, OrderRequest, OrderType, Quote,
    Result, Side, TimeInForce, TradableInstrument,
};
use tradedesk_store::idempotency::{self, Record, State};
use tradedesk_store::lease::Owner;
use tradedesk_store::tokens::{self, Refusal};
use tradedesk_store::{audit, sha256_hex};

use super::{ErrorWrap, Failpoint, Trading, rfc3339};
use crate::context::ToolContext;
use crate::num::Num;
use crate::valuation::{Scope, value_ledger};
use rust_decimal::Decimal;

/// How the human answered a request to confirm an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmation {
    Accepted,
    Declined,
    /// The client cannot ask (no elicitation support).
    Unavailable,
    /// The question was handed to the client; the call ends and is retried with the
    /// answer (the 2026-07-28 input-required flow).
    Pending,
}

/// Asks the human to confirm an order (MCP elicitation, where the client supports it).
#[async_trait]
pub trait Confirmer: Send + Sync {
    /// Puts the question. `token` is the single-use confirmation token the answer will
    /// stand for: a client that answers on a retry (the 2026-07-28 input-required
    /// flow) must send it back as the request state.
    async fn confirm(&self, prompt: &str, token: &str) -> Confirmation;

    /// An answer this call already carries (a 2026-07-28 retry): accepted or not, and
    /// the request state it came back with.
    fn prior_answer(&self) -> Option<(bool, String)> {
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SideArg {
    Buy,
    Sell,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TypeArg {
    #[default]
    Market,
    Limit,
    Stop,
    StopLimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TifArg {
    #[default]
    Day,
    Gtc,
    Ioc,
    Fok,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModeArg {
    #[default]
    Paper,
    Live,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Paper => Self::Paper,
            ModeArg::Live => Self::Live,
        }
    }
}

macro_rules! order_args {
    ($(#[$meta:meta])* $name:ident { $($extra:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Account id (see get_accounts).
            pub account: String,
            /// Bare (AAPL, EURUSD) or qualified (NASDAQ:AAPL).
            pub symbol: String,
            pub side: SideArg,
            /// Units to trade (shares, lots, contracts): exactly one of quantity and notional.
            pub quantity: Option<Num>,
            /// Amount in the instrument's currency to trade instead of a quantity (rounded down to the lot step).
            pub notional: Option<Num>,
            /// market (default), limit, stop or stop_limit.
            #[serde(rename = "type", default)]
            pub order_type: TypeArg,
            /// Required for limit and stop_limit; refused for other types.
            pub limit_price: Option<Num>,
            /// Required for stop and stop_limit; refused for other types.
            pub stop_price: Option<Num>,
            /// day (default; lapses at the end of the UTC day), gtc, ioc or fok.
            #[serde(default)]
            pub time_in_force: TifArg,
            /// Stop-loss level for the resulting position: below the price for a buy, above for a sell.
            pub stop_loss: Option<Num>,
            /// Take-profit level: above the price for a buy, below for a sell.
            pub take_profit: Option<Num>,
            /// At most 31 characters.
            pub comment: Option<String>,
            /// 1 to 64 of letters, digits and -_.: ; a retry with the same id returns the first outcome.
            pub client_order_id: Option<String>,
            /// paper (default) or live (only where the account's config allows it).
            #[serde(default)]
            pub mode: ModeArg,
            /// MetaTrader: magic number (default: the account's).
            pub magic: Option<i64>,
            /// MetaTrader: the ticket it closes.
            pub ticket: Option<String>,
            $($extra)*
        }
    };
}

order_args!(
    /// `preview_order`'s arguments.
    PreviewArgs {}
);

order_args!(
    /// `place_order`'s arguments.
    PlaceArgs {
        /// From preview_order; required when confirmation is on.
        pub confirmation_token: Option<String>,
    }
);

impl From<PlaceArgs> for (PreviewArgs, Option<String>) {
    fn from(a: PlaceArgs) -> Self {
        (
            PreviewArgs {
                account: a.account,
                symbol: a.symbol,
                side: a.side,
                quantity: a.quantity,
                notional: a.notional,
                order_type: a.order_type,
                limit_price: a.limit_price,
                stop_price: a.stop_price,
                time_in_force: a.time_in_force,
                stop_loss: a.stop_loss,
                take_profit: a.take_profit,
                comment: a.comment,
                client_order_id: a.client_order_id,
                mode: a.mode,
                magic: a.magic,
                ticket: a.ticket,
            },
            a.confirmation_token,
        )
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CloseArgs {
    pub account: String,
    pub symbol: String,
    /// MetaTrader: only this ticket (get_positions lists them).
    pub ticket: Option<String>,
    /// How much to close (default: all of it).
    pub quantity: Option<Num>,
    #[serde(default)]
    pub mode: ModeArg,
    /// From preview_order of the equivalent market order (opposite side, this quantity).
    pub confirmation_token: Option<String>,
    pub client_order_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModifyArgs {
    pub account: String,
    pub symbol: String,
    /// MetaTrader: only this ticket (default: all of the symbol's).
    pub ticket: Option<String>,
    /// New stop-loss level (at least one of stop_loss and take_profit).
    pub stop_loss: Option<Num>,
    /// New take-profit level.
    pub take_profit: Option<Num>,
    #[serde(default)]
    pub mode: ModeArg,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    pub account: String,
    /// The broker's order id (exactly one of order_id and client_order_id).
    pub order_id: Option<String>,
    pub client_order_id: Option<String>,
    #[serde(default)]
    pub mode: ModeArg,
}

#[derive(Debug, Clone, Copy, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StatusArg {
    #[default]
    Open,
    Closed,
    All,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrdersArgs {
    /// Only this account (default: every account that reports orders).
    pub account: Option<String>,
    /// open (default: working orders), closed (filled, cancelled, expired, rejected) or all.
    #[serde(default)]
    pub status: StatusArg,
    /// 1..500, default 50; newest first.
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<u32>,
}

/// An order as the tools report it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OrderView {
    pub order_id: String,
    pub client_order_id: String,
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub side: &'static str,
    #[serde(rename = "type")]
    pub order_type: &'static str,
    pub quantity: Num,
    pub filled_quantity: Num,
    pub average_price: Option<Num>,
    pub limit_price: Option<Num>,
    pub stop_price: Option<Num>,
    pub time_in_force: &'static str,
    pub stop_loss: Option<Num>,
    pub take_profit: Option<Num>,
    /// accepted (working), filled, cancelled, expired or rejected.
    pub status: &'static str,
    pub mode: &'static str,
    pub comment: Option<String>,
    /// Why it was cancelled, expired or rejected, as the broker says it (quoted data).
    pub reason: Option<String>,
    pub created: String,
    pub updated: String,
}

impl From<&OrderRecord> for OrderView {
    fn from(o: &OrderRecord) -> Self {
        Self {
            order_id: o.order_id.clone(),
            client_order_id: o.client_order_id.clone(),
            account: o.account.clone(),
            exchange: o.key.exchange.clone(),
            symbol: o.key.symbol.clone(),
            side: o.side.as_str(),
            order_type: o.order_type.as_str(),
            quantity: Num(o.quantity),
            filled_quantity: Num(o.filled_quantity),
            average_price: o.average_price.map(Num),
            limit_price: o.limit_price.map(Num),
            stop_price: o.stop_price.map(Num),
            time_in_force: o.time_in_force.as_str(),
            stop_loss: o.stop_loss.map(Num),
            take_profit: o.take_profit.map(Num),
            status: o.status.as_str(),
            mode: o.mode.as_str(),
            comment: o.comment.clone(),
            reason: o.reason.clone(),
            created: rfc3339(o.created),
            updated: rfc3339(o.updated),
        }
    }
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OrdersResult {
    pub count: usize,
    pub truncated: bool,
    pub orders: Vec<OrderView>,
    pub notes: Vec<String>,
}

/// The order as the server understood it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct NormalizedView {
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub side: &'static str,
    pub quantity: Option<Num>,
    pub notional: Option<Num>,
    #[serde(rename = "type")]
    pub order_type: &'static str,
    pub limit_price: Option<Num>,
    pub stop_price: Option<Num>,
    pub time_in_force: &'static str,
    pub stop_loss: Option<Num>,
    pub take_profit: Option<Num>,
    pub comment: Option<String>,
    pub client_order_id: Option<String>,
    pub mode: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub magic: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ticket: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Estimate {
    /// The valuation price: the highest of the limit, the stop and the current quote.
    pub price: Option<Num>,
    /// The quantity the order trades (derived from a notional by rounding down to the lot step).
    pub quantity: Option<Num>,
    /// Currency of price, notional, commission and margin_required.
    pub currency: String,
    pub notional: Option<Num>,
    /// The notional in the base currency: what every limit is checked against.
    pub notional_base: Option<Num>,
    pub base_currency: String,
    pub commission: Option<Num>,
    pub margin_required: Option<Num>,
    pub bid: Option<Num>,
    pub ask: Option<Num>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CheckView {
    pub rule: &'static str,
    pub passed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct PreviewResult {
    pub mode: &'static str,
    pub order: NormalizedView,
    pub estimate: Estimate,
    pub checks: Vec<CheckView>,
    pub allowed: bool,
    /// Whether place_order needs the token (confirmation is on for this mode).
    pub confirmation_required: bool,
    pub confirmation_token: Option<String>,
    pub expires_at: Option<String>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PlaceResult {
    pub mode: String,
    /// filled or accepted (working at the broker).
    pub outcome: String,
    pub order_id: String,
    pub client_order_id: String,
    pub filled_quantity: Num,
    pub average_price: Option<Num>,
    pub message: String,
    /// True when this client_order_id was seen before with the same order: the stored outcome.
    pub replayed: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ModifyResult {
    pub mode: &'static str,
    pub account: String,
    pub symbol: String,
    pub stop_loss: Option<Num>,
    pub take_profit: Option<Num>,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CancelResult {
    pub mode: &'static str,
    pub order_id: String,
    /// cancelled, or not_cancellable (already filled, cancelled or expired).
    pub outcome: &'static str,
    pub message: String,
}

/// The order after parsing: every argument but the token, decimals normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Normalized {
    account: String,
    symbol: String,
    side: Side,
    quantity: Option<Decimal>,
    notional: Option<Decimal>,
    order_type: OrderType,
    limit_price: Option<Decimal>,
    stop_price: Option<Decimal>,
    time_in_force: TimeInForce,
    stop_loss: Option<Decimal>,
    take_profit: Option<Decimal>,
    comment: Option<String>,
    client_order_id: Option<String>,
    mode: Mode,
    reduce_only: bool,
    /// The ticket a close is for (MetaTrader).
    ticket: Option<String>,
    magic: Option<i64>,
}

impl Normalized {
    fn from_args(a: PreviewArgs) -> Self {
        let n = |v: Option<Num>| v.map(|n| n.0.normalize());
        Self {
            account: a.account,
            symbol: a.symbol.trim().to_ascii_uppercase(),
            side: match a.side {
                SideArg::Buy => Side::Buy,
                SideArg::Sell => Side::Sell,
            },
            quantity: n(a.quantity),
            notional: n(a.notional),
            order_type: match a.order_type {
                TypeArg::Market => OrderType::Market,
                TypeArg::Limit => OrderType::Limit,
                TypeArg::Stop => OrderType::Stop,
                TypeArg::StopLimit => OrderType::StopLimit,
            },
            limit_price: n(a.limit_price),
            stop_price: n(a.stop_price),
            time_in_force: match a.time_in_force {
                TifArg::Day => TimeInForce::Day,
                TifArg::Gtc => TimeInForce::Gtc,
                TifArg::Ioc => TimeInForce::Ioc,
                TifArg::Fok => TimeInForce::Fok,
            },
            stop_loss: n(a.stop_loss),
            take_profit: n(a.take_profit),
            comment: a.comment,
            client_order_id: a.client_order_id,
            mode: a.mode.into(),
            reduce_only: false,
            ticket: a.ticket.map(|t| t.trim().to_owned()),
            magic: a.magic,
        }
    }

    /// What an order is, for its idempotency fingerprint (the client order id is the
    /// key, so it is not part of it).
    fn order_text(&self, key: &InstrumentKey) -> String {
        let d = |v: Option<Decimal>| v.map(|d| d.normalize().to_string()).unwrap_or_default();
        format!(
            "{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}",
            self.account,
            key.qualified(),
            self.side.as_str(),
            d(self.quantity),
            d(self.notional),
            self.order_type.as_str(),
            d(self.limit_price),
            d(self.stop_price),
            self.time_in_force.as_str(),
            d(self.stop_loss),
            d(self.take_profit),
            self.comment.as_deref().unwrap_or(""),
            self.mode.as_str(),
        )
    }

    /// The order text, with the ticket and the magic number where given (an order
    /// without them keeps the fingerprint it always had).
    fn bound_text(&self, key: &InstrumentKey) -> String {
        let mut text = self.order_text(key);
        if let Some(t) = &self.ticket {
            text.push_str("|ticket=");
            text.push_str(t);
        }
        if let Some(m) = self.magic {
            text.push_str(&format!("|magic={m}"));
        }
        text
    }

    fn idempotency_fingerprint(&self, key: &InstrumentKey) -> String {
        sha256_hex(&[self.bound_text(key).as_bytes()])
    }

    /// What a confirmation token is bound to: the order, its account and mode, and the
    /// client order id when one was given.
    fn token_fingerprint(&self, key: &InstrumentKey) -> String {
        sha256_hex(&[
            self.bound_text(key).as_bytes(),
            b"|",
            self.client_order_id.as_deref().unwrap_or("").as_bytes(),
        ])
    }

    fn view(&self, key: &InstrumentKey) -> NormalizedView {
        NormalizedView {
            account: self.account.clone(),
            exchange: key.exchange.clone(),
            symbol: key.symbol.clone(),
            side: self.side.as_str(),
            quantity: self.quantity.map(Num),
            notional: self.notional.map(Num),
            order_type: self.order_type.as_str(),
            limit_price: self.limit_price.map(Num),
            stop_price: self.stop_price.map(Num),
            time_in_force: self.time_in_force.as_str(),
            stop_loss: self.stop_loss.map(Num),
            take_profit: self.take_profit.map(Num),
            comment: self.comment.clone(),
            client_order_id: self.client_order_id.clone(),
            mode: self.mode.as_str(),
            magic: self.magic,
            ticket: self.ticket.clone(),
        }
    }
}

/// One rule's verdict.
#[derive(Debug, Clone)]
struct Check {
    rule: &'static str,
    passed: bool,
    detail: String,
}

/// The stop-loss / take-profit rules of a long (`buy`) or short position: the pair
/// against each other, and each new level against the price it is entered (or exits) at.
fn level_rules(
    buy: bool,
    (pair_sl, pair_tp): (Option<Decimal>, Option<Decimal>),
    (sl, tp): (Option<Decimal>, Option<Decimal>),
    price: Option<(Decimal, &str)>,
) -> Vec<Check> {
    let mut out = Vec::new();
    let mut check = |rule: &'static str, passed: bool, detail: String| {
        out.push(Check {
            rule,
            passed,
            detail,
        });
    };
    if let (Some(sl), Some(tp)) = (pair_sl, pair_tp) {
        let (rule, ok) = if buy {
            ("sl_above_tp", sl < tp)
        } else {
            ("sl_below_tp", sl > tp)
        };
        check(rule, ok, format!("stop_loss {sl}, take_profit {tp}"));
    }
    if let (Some(sl), Some((p, name))) = (sl, price) {
        let (rule, ok) = if buy {
            ("sl_above_price", sl < p)
        } else {
            ("sl_below_price", sl > p)
        };
        check(rule, ok, format!("stop_loss {sl}, {name} {p}"));
    }
    if let (Some(tp), Some((p, name))) = (tp, price) {
        let (rule, ok) = if buy {
            ("tp_below_price", tp > p)
        } else {
            ("tp_above_price", tp < p)
        };
        check(rule, ok, format!("take_profit {tp}, {name} {p}"));
    }
    out
}

/// The error code and hint of a failed rule.
fn rule_error(rule: &'static str, detail: &str) -> Error {
    let (code, hint) = match rule {
        "quantity_or_notional" => (
            ErrorCode::InvalidQuantity,
            "pass exactly one of quantity and notional",
        ),
        "quantity_positive" => (
            ErrorCode::InvalidQuantity,
            "quantity (or notional) must be above zero",
        ),
        "lot_step" => (
            ErrorCode::InvalidQuantity,
            "round the quantity to a whole multiple of the lot step (get_quote shows it)",
        ),
        "min_quantity" => (
            ErrorCode::InvalidQuantity,
            "raise the quantity to at least the minimum",
        ),
        "max_quantity" => (
            ErrorCode::InvalidQuantity,
            "split the order or lower the quantity",
        ),
        "close_exceeds_position" => (
            ErrorCode::InvalidQuantity,
            "close at most the open quantity (get_positions shows it), or omit quantity to close all",
        ),
        "ticket_found" => (
            ErrorCode::InvalidOrder,
            "get_positions lists each open ticket under its symbol; pass one of those, of this symbol",
        ),
        "ticket_required" => (
            ErrorCode::InvalidOrder,
            "pass ticket (get_positions lists each ticket under its symbol)",
        ),
        "ticket_side" => (
            ErrorCode::InvalidOrder,
            "an order on a ticket closes it: its side is the ticket's opposite (close_position sets it)",
        ),
        "close_exceeds_ticket" => (
            ErrorCode::InvalidQuantity,
            "close at most the ticket's lots (get_positions shows them), or omit quantity to close all of it",
        ),
        "ticket_close_only" => (
            ErrorCode::InvalidOrder,
            "an order on a ticket closes it at the market: leave type market, or leave ticket out to open a new ticket",
        ),
        "magic_supported" => (
            ErrorCode::InvalidOrder,
            "magic numbers are MetaTrader's: leave magic out for this account",
        ),
        "prices_match_type" => (
            ErrorCode::InvalidOrder,
            "limit orders need limit_price, stop orders stop_price, stop_limit both; market orders neither",
        ),
        "price_positive" => (ErrorCode::InvalidOrder, "every price must be above zero"),
        "tick_size" => (
            ErrorCode::InvalidOrder,
            "round each price to a multiple of the instrument's tick (get_quote shows it)",
        ),
        "sl_above_tp" => (
            ErrorCode::InvalidOrder,
            "for a buy (a long position) the stop-loss must be below the take-profit",
        ),
        "sl_below_tp" => (
            ErrorCode::InvalidOrder,
            "for a sell (a short position) the stop-loss must be above the take-profit",
        ),
        "sl_above_price" => (
            ErrorCode::InvalidOrder,
            "for a buy the stop-loss must be below the entry price (for a long position, below the bid)",
        ),
        "sl_below_price" => (
            ErrorCode::InvalidOrder,
            "for a sell the stop-loss must be above the entry price (for a short position, above the ask)",
        ),
        "tp_below_price" => (
            ErrorCode::InvalidOrder,
            "for a buy the take-profit must be above the entry price (for a long position, above the bid)",
        ),
        "tp_above_price" => (
            ErrorCode::InvalidOrder,
            "for a sell the take-profit must be below the entry price (for a short position, below the ask)",
        ),
        "comment_length" => (
            ErrorCode::InvalidOrder,
            "shorten the comment to at most 31 characters",
        ),
        "client_order_id_format" => (
            ErrorCode::InvalidOrder,
            "use 1 to 64 of letters, digits and - _ . :",
        ),
        "client_order_id_reused" => (
            ErrorCode::InvalidOrder,
            "this client_order_id was used for a different order; use a new id (get_orders shows the first)",
        ),
        "sl_or_tp_required" => (
            ErrorCode::InvalidOrder,
            "pass stop_loss, take_profit or both",
        ),
        "no_position" => (
            ErrorCode::InvalidOrder,
            "there is no open position to change; get_positions lists them",
        ),
        "symbol_allowed" => (
            ErrorCode::SymbolNotAllowed,
            "the server's allow_symbols / deny_symbols policy refuses this symbol; only its owner can change that",
        ),
        "kill_switch" => (
            ErrorCode::KillSwitch,
            "the kill switch is on: orders that add risk are refused; cancel_order and close_position still work",
        ),
        "price_available" => (
            ErrorCode::PriceUnavailable,
            "no current price or FX rate to value the order; retry when the market data is back (get_quote)",
        ),
        "free_margin" => (
            ErrorCode::LimitExceeded,
            "the broker's free margin (or buying power; get_accounts shows it) does not cover this order: make it smaller, close a position, or add funds",
        ),
        "max_order_notional"
        | "max_daily_notional"
        | "max_orders_per_day"
        | "max_position_weight" => (
            ErrorCode::LimitExceeded,
            "the server's trading limits refuse this order; make it smaller, or ask the owner to change [trading]",
        ),
        _ => (ErrorCode::InvalidOrder, "fix the order as the message says"),
    };
    Error::rule(code, rule, format!("{rule}: {detail}"), hint)
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

/// The `free_margin` rule (docs/methodology/trading.md, "Margin"): where the account's
/// broker reports its free margin (else its buying power) with the last snapshot, an
/// order that adds risk may need no more than that: its notional times the instrument's
/// margin rate against free margin, its notional against buying power, in the account's
/// currency. `None` where the broker reports neither, or the order has no value yet
/// (`price_available` refuses it then).
#[allow(clippy::too_many_arguments)]
async fn free_margin_check(
    ctx: &ToolContext,
    book: &tradedesk_core::Book,
    broker: &Arc<dyn Broker>,
    account: &str,
    inst: &TradableInstrument,
    notional: Option<Decimal>,
    exempt: bool,
    today: chrono::NaiveDate,
) -> Option<(bool, String)> {
    let m = broker.reported_margin(account)?;
    let (available, what, rate) = match (m.free_margin, m.buying_power) {
        (Some(f), _) => (f, "free margin", inst.margin_rate),
        (None, Some(b)) => (b, "buying power", Decimal::ONE),
        (None, None) => return None,
    };
    let ccy = m.currency;
    if exempt {
        return Some((
            true,
            format!("this order only reduces a position: it needs no {what}"),
        ));
    }
    let notional = notional?;
    let Some(to_account) =
        rate_to_base(ctx, book, ccy, broker, account, inst.currency, today).await
    else {
        return Some((
            false,
            format!(
                "no {}/{} rate to weigh the order against the broker's {what}",
                inst.currency.code(),
                ccy.code()
            ),
        ));
    };
    let needed = notional
        .checked_mul(rate)
        .and_then(|n| n.checked_mul(to_account));
    let dp = ccy.minor_units() as usize;
    Some(match needed {
        Some(n) => (
            n <= available,
            format!(
                "needs {:.dp$} {c} of {what}; the broker reports {:.dp$} {c}",
                ccy.round(n),
                ccy.round(available),
                c = ccy.code()
            ),
        ),
        None => (false, "the order is too large to value".to_owned()),
    })
}

/// The evaluated order: what it would trade, at what value, and every rule's verdict.
struct Plan {
    order: Normalized,
    inst: TradableInstrument,
    broker: Arc<dyn Broker>,
    quote: Option<Quote>,
    quantity: Option<Decimal>,
    price: Option<Decimal>,
    notional: Option<Decimal>,
    notional_base: Option<Decimal>,
    /// The base-currency valuation before rounding: what the limits compare.
    value_exact: Option<Decimal>,
    /// Only takes risk off: exempt from the kill switch, lists and limits.
    reduces: bool,
    commission: Option<Decimal>,
    base: Currency,
    checks: Vec<Check>,
    notes: Vec<String>,
    /// What the position-weight limit is decided on again inside the reservation
    /// (absent for an order that only reduces, or one that could not be valued).
    weight: Option<Weight>,
}

/// The position-weight limit's inputs, so the reservation's transaction can decide it
/// again with the orders other calls and processes reserved meanwhile
/// (docs/methodology/trading.md, "Decided inside the reservation").
#[derive(Debug, Clone)]
struct Weight {
    /// `EXCHANGE:SYMBOL`, as reservations record it.
    instrument: String,
    /// The position and the working orders the evaluation saw, signed, base currency.
    seen: Decimal,
    /// This order's signed exposure, base currency (a buy positive).
    signed: Decimal,
    /// The portfolio's value.
    total: Decimal,
    /// The settle mark read before the position and the working orders were.
    mark: i64,
    limit: Decimal,
}

impl Weight {
    /// The exposures of orders in flight (or settled after the evaluation read the
    /// portfolio) that go the same way as this one: what the reading cannot show yet.
    /// Orders the other way are left out until they fill: they might not.
    fn unseen(
        &self,
        tx: &tradedesk_store::rusqlite::Transaction<'_>,
        day: &str,
    ) -> Result<(Decimal, usize)> {
        let rows = idempotency::unseen_exposures(tx, day, &self.instrument, self.mark)
            .map_err(|e| super::store_error(&e))?;
        let same_way: Vec<Decimal> = rows
            .iter()
            .filter_map(|r| r.parse::<Decimal>().ok())
            .filter(|e| e.is_sign_positive() == self.signed.is_sign_positive() && !e.is_zero())
            .collect();
        Ok((same_way.iter().copied().sum(), same_way.len()))
    }

    /// The position's weight in percent after this order, with `unseen` in flight.
    fn after(&self, unseen: Decimal) -> Option<Decimal> {
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

    /// The verdict and its detail, as the check and the reservation word it.
    fn verdict(
        &self,
        key: &InstrumentKey,
        base: Currency,
        unseen: (Decimal, usize),
    ) -> (bool, String) {
        let weight = self.after(unseen.0);
        let in_flight = match unseen.1 {
            0 => String::new(),
            1 => " counting 1 order in flight".to_owned(),
            n => format!(" counting {n} orders in flight"),
        };
        (
            weight.is_some_and(|w| w <= self.limit),
            match weight.map(|w| w.round_dp(2)) {
                Some(w) => format!(
                    "{key} would be {w}% of the portfolio ({} {b}){in_flight}; limit {}%",
                    base.round(self.total),
                    self.limit,
                    b = base.code()
                ),
                None => "the portfolio's total value is not positive".to_owned(),
            },
        )
    }
}

impl Plan {
    fn first_failure(&self) -> Option<Error> {
        self.checks
            .iter()
            .find(|c| !c.passed)
            .map(|c| rule_error(c.rule, &c.detail))
    }

    fn confirmation_required(&self, trading: &Trading) -> bool {
        match self.order.mode {
            Mode::Live => trading.settings.confirm_live,
            _ => trading.settings.confirm_paper,
        }
    }
}

fn trading_of(ctx: &ToolContext) -> Result<&Arc<Trading>> {
    match &ctx.trading {
        Some(t) if t.settings.enabled => Ok(t),
        _ => Err(Error::new(
            ErrorCode::TradingDisabled,
            "trading is switched off on this server",
            "the owner can switch it on with [trading] enabled = true in tradedesk.toml; until then only the read tools work",
        )),
    }
}

fn unknown_account(ctx: &ToolContext, account: &str) -> Error {
    let known: Vec<String> = ctx
        .served_accounts()
        .into_iter()
        .map(|(a, _)| a.id)
        .collect();
    Error::new(
        ErrorCode::UnknownAccount,
        format!("no account {}", quoted(account)),
        format!("accounts: {}", known.join(", ")),
    )
}

/// The broker of an account that can trade in `mode`.
///
/// # Errors
/// `unknown_account`, `not_supported` (no such side), `live_not_allowed`.
fn trading_broker(
    ctx: &ToolContext,
    trading: &Trading,
    account: &str,
    mode: Mode,
) -> Result<Arc<dyn Broker>> {
    let broker = ctx
        .broker_for(account)
        .ok_or_else(|| unknown_account(ctx, account))?;
    let modes = broker.trading_modes(account);
    if modes.is_empty() {
        return Err(Error::new(
            ErrorCode::NotSupported,
            format!("account {account} cannot trade through tradedesk"),
            "book accounts are read-only; trade on a sim, alpaca or mt account (get_accounts lists them)",
        ));
    }
    match mode {
        Mode::Live => {
            if !trading.settings.live_accounts.iter().any(|a| a == account) {
                return Err(Error::new(
                    ErrorCode::LiveNotAllowed,
                    format!("account {account} is not allowed to trade live"),
                    "live trading needs live = true in the account's own [[accounts]] section; use mode paper",
                ));
            }
            if !modes.contains(&Mode::Live) {
                return Err(Error::new(
                    ErrorCode::NotSupported,
                    format!("account {account} has no live side"),
                    "use mode paper",
                ));
            }
        }
        _ => {
            if !modes.contains(&Mode::Paper) {
                return Err(Error::new(
                    ErrorCode::NotSupported,
                    format!("account {account} has no paper side"),
                    "pass mode: \"live\" (its config must allow live trading)",
                ));
            }
        }
    }
    Ok(broker)
}

fn broker_error(e: BrokerError) -> Error {
    Error::from(e)
}

fn multiple_of(value: Decimal, step: Decimal) -> bool {
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
fn position_in(
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

/// Today's counted orders: (their summed valuations, how many).
fn day_totals(trading: &Trading) -> Result<(Decimal, u32)> {
    let day = trading.today();
    let rows = trading
        .store
        .tx::<_, ErrorWrap>(|tx| Ok(idempotency::day_notionals(tx, &day)?))
        .map_err(Error::from)?;
    let sum = rows.iter().filter_map(|r| r.parse::<Decimal>().ok()).sum();
    Ok((sum, u32::try_from(rows.len()).unwrap_or(u32::MAX)))
}

/// Evaluates an order against every rule without changing anything.
async fn evaluate(ctx: &ToolContext, trading: &Trading, order: Normalized) -> Result<Plan> {
    let broker = trading_broker(ctx, trading, &order.account, order.mode)?;
    let inst = broker
        .instrument(&order.account, &order.symbol)
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
    let (own, own_ledger) = own_ledger(ctx, &order.account).await?;
    let mut checks = Vec::new();
    let mut notes = Vec::new();
    let mut check = |rule: &'static str, passed: bool, detail: String| {
        checks.push(Check {
            rule,
            passed,
            detail,
        });
    };
    notes.extend(broker.instrument_notes(&order.account, &order.symbol));
    let quote = match broker.quote(&order.account, &key.qualified()).await {
        Ok(q) => Some(q),
        Err(e) => {
            notes.push(format!("no quote: {e}"));
            None
        }
    };
    let touch = quote.as_ref().map(|q| q.for_side(order.side));

    // The order's own rules.
    let both = order.quantity.is_some() && order.notional.is_some();
    let neither = order.quantity.is_none() && order.notional.is_none();
    check(
        "quantity_or_notional",
        !both && !neither,
        if both {
            "both quantity and notional were given".to_owned()
        } else if neither {
            "neither quantity nor notional was given".to_owned()
        } else {
            "exactly one of quantity and notional".to_owned()
        },
    );
    let amount = order.quantity.or(order.notional).unwrap_or_default();
    check(
        "quantity_positive",
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
    );
    let mut prices_ok = true;
    let mut price_problem = String::from("the prices match the order type");
    if order.order_type.needs_limit() != order.limit_price.is_some() {
        prices_ok = false;
        price_problem = if order.limit_price.is_some() {
            format!("a {} order takes no limit_price", order.order_type.as_str())
        } else {
            format!("a {} order needs limit_price", order.order_type.as_str())
        };
    } else if order.order_type.needs_stop() != order.stop_price.is_some() {
        prices_ok = false;
        price_problem = if order.stop_price.is_some() {
            format!("a {} order takes no stop_price", order.order_type.as_str())
        } else {
            format!("a {} order needs stop_price", order.order_type.as_str())
        };
    }
    check("prices_match_type", prices_ok, price_problem);
    let named_prices = [
        ("limit_price", order.limit_price),
        ("stop_price", order.stop_price),
        ("stop_loss", order.stop_loss),
        ("take_profit", order.take_profit),
    ];
    let not_positive: Vec<&str> = named_prices
        .iter()
        .filter(|(_, p)| p.is_some_and(|p| p <= Decimal::ZERO))
        .map(|(n, _)| *n)
        .collect();
    check(
        "price_positive",
        not_positive.is_empty(),
        if not_positive.is_empty() {
            "every price is above zero".to_owned()
        } else {
            format!("{} must be above zero", not_positive.join(", "))
        },
    );
    let off_tick: Vec<&str> = named_prices
        .iter()
        .filter(|(_, p)| p.is_some_and(|p| !multiple_of(p, inst.tick)))
        .map(|(n, _)| *n)
        .collect();
    check(
        "tick_size",
        off_tick.is_empty(),
        if off_tick.is_empty() {
            format!("prices are multiples of the tick {}", inst.tick)
        } else {
            format!(
                "{} not a multiple of the tick {}",
                off_tick.join(", "),
                inst.tick
            )
        },
    );

    // The valuation: the highest of the limit, the stop and the quote.
    let price = [order.limit_price, order.stop_price, touch]
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
    if let Some(q) = quantity {
        if order.quantity.is_some() {
            check(
                "lot_step",
                multiple_of(q, inst.lot_step),
                format!("{q} {} in steps of {}", inst.unit, inst.lot_step),
            );
        } else {
            notes.push(format!(
                "notional {} buys {q} {} at {}, rounded down to the lot step {}",
                order.notional.unwrap_or_default(),
                inst.unit,
                price.unwrap_or_default(),
                inst.lot_step
            ));
        }
        check(
            "min_quantity",
            q >= inst.min_quantity,
            format!(
                "{q} against a minimum of {} {}",
                inst.min_quantity, inst.unit
            ),
        );
        check(
            "max_quantity",
            q <= inst.max_quantity,
            if inst.max_quantity == Decimal::MAX {
                format!("{q} {}: the broker states no maximum", inst.unit)
            } else {
                format!(
                    "{q} against a maximum of {} {}",
                    inst.max_quantity, inst.unit
                )
            },
        );
    }
    // Stop-loss and take-profit against each other and the entry price.
    let reference = order.limit_price.or(order.stop_price).or(touch);
    let buy = order.side == Side::Buy;
    for c in level_rules(
        buy,
        (order.stop_loss, order.take_profit),
        (order.stop_loss, order.take_profit),
        reference.map(|p| (p, "entry price")),
    ) {
        check(c.rule, c.passed, c.detail);
    }
    if let Some(comment) = &order.comment {
        let n = comment.chars().count();
        check(
            "comment_length",
            n <= 31,
            format!("{n} characters (at most 31)"),
        );
    }
    if let Some(id) = &order.client_order_id {
        check(
            "client_order_id_format",
            valid_client_order_id(id),
            format!("{} ({} characters)", quoted(id), id.chars().count()),
        );
        let fingerprint = order.idempotency_fingerprint(&key);
        let existing = trading
            .store
            .tx::<_, ErrorWrap>(|tx| Ok(idempotency::get(tx, &order.account, id)?))
            .map_err(Error::from)?;
        check(
            "client_order_id_reused",
            existing
                .as_ref()
                .is_none_or(|r| r.fingerprint == fingerprint),
            match existing {
                Some(r) if r.fingerprint != fingerprint => format!(
                    "{} was used for order {} with different arguments",
                    quoted(id),
                    r.order_id.as_deref().unwrap_or("(pending)")
                ),
                Some(_) => {
                    "seen before with this same order: place_order returns the stored outcome"
                        .to_owned()
                }
                None => "not used before".to_owned(),
            },
        );
    }

    // A ticket (MetaTrader): the order closes it, so it must be open, of this symbol,
    // on the other side, and no bigger than it.
    let mut on_ticket = false;
    if let Some(ticket) = &order.ticket {
        let account_idx = own.account_index(&order.account);
        let found = own
            .tickets
            .iter()
            .find(|t| Some(t.account) == account_idx && &t.ticket == ticket);
        let of_symbol = found.filter(|t| own.instrument(t.instrument).key.symbol == key.symbol);
        check(
            "ticket_found",
            of_symbol.is_some(),
            match (found, of_symbol) {
                (None, _) => format!(
                    "account {} has no open ticket {}",
                    order.account,
                    quoted(ticket)
                ),
                (Some(t), None) => format!(
                    "ticket {} is {}, not {}",
                    quoted(ticket),
                    own.instrument(t.instrument).key.symbol,
                    key.symbol
                ),
                _ => format!("ticket {ticket} is open"),
            },
        );
        check(
            "ticket_close_only",
            order.order_type == OrderType::Market,
            format!("a {} order on ticket {ticket}", order.order_type.as_str()),
        );
        if let Some(t) = of_symbol {
            on_ticket = true;
            check(
                "ticket_side",
                t.side != order.side,
                format!(
                    "ticket {ticket} is a {}; an order on it is a {}",
                    t.side.as_str(),
                    if t.side == Side::Buy { "sell" } else { "buy" }
                ),
            );
            if let Some(q) = quantity {
                check(
                    "close_exceeds_ticket",
                    q <= t.quantity,
                    format!(
                        "{q} {} to close, ticket {ticket} has {}",
                        inst.unit, t.quantity
                    ),
                );
            }
        }
    }
    if order.magic.is_some() {
        let broker_name = own
            .account_index(&order.account)
            .map(|a| own.account(a).broker.as_str())
            .unwrap_or_default();
        check(
            "magic_supported",
            broker_name == "metatrader",
            format!(
                "account {} is {broker_name}, which has no magic numbers",
                order.account
            ),
        );
    }

    // An order that only takes risk off (a market order against this account's own
    // position, no bigger than it) passes the kill switch, the lists and the limits:
    // the owner must always be able to get out. The broker is told to clamp it.
    let held_here = position_in(&own, &own_ledger, &order.account, &key);
    let reduces = order.reduce_only
        || (on_ticket && order.order_type == OrderType::Market)
        || (order.order_type == OrderType::Market
            && quantity.is_some_and(|q| q > Decimal::ZERO && q <= held_here.abs())
            && (held_here.is_sign_positive() != buy)
            && !held_here.is_zero());
    let exempt = reduces;
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

    // The policy.
    let s = &trading.settings;
    let denied = symbol_listed(&s.deny_symbols, &key);
    let allowed = s.allow_symbols.is_empty() || symbol_listed(&s.allow_symbols, &key);
    check(
        "symbol_allowed",
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
    );
    let kill = trading.kill_switch_on();
    check(
        "kill_switch",
        !kill || exempt,
        if kill && exempt {
            "the kill switch is on, but this order only reduces a position".to_owned()
        } else if kill {
            format!(
                "the kill switch file {} exists",
                s.kill_switch_file.display()
            )
        } else {
            "off".to_owned()
        },
    );
    let today = trading.now().date_naive();
    let rate = rate_to_base(
        ctx,
        &book,
        base,
        &broker,
        &order.account,
        inst.currency,
        today,
    )
    .await;
    let notional = match (order.notional, quantity, price) {
        (Some(n), _, _) => Some(n),
        (None, Some(q), Some(p)) => q
            .checked_mul(p)
            .and_then(|v| v.checked_mul(inst.multiplier)),
        _ => None,
    };
    // Compared unrounded: rounding must never take an order under a limit.
    let value_exact = notional.zip(rate).and_then(|(n, r)| n.checked_mul(r));
    let too_large =
        touch.is_some() && rate.is_some() && quantity.is_some() && value_exact.is_none();
    let notional_base = value_exact.map(|v| base.round(v));
    check(
        "price_available",
        touch.is_some() && rate.is_some(),
        match (touch, rate) {
            (None, _) => format!("no current quote for {key}"),
            (Some(_), None) => format!("no {}/{} rate", inst.currency.code(), base.code()),
            _ => format!(
                "valued at {} {} per unit",
                price.unwrap_or_default(),
                inst.currency.code()
            ),
        },
    );
    let (day_sum, day_count) = day_totals(trading)?;
    let mut weight = None;
    if too_large {
        check(
            "max_order_notional",
            false,
            "the order is too large to value".to_owned(),
        );
    }
    if let Some((value, exact)) = notional_base.zip(value_exact) {
        check(
            "max_order_notional",
            exempt || exact <= s.max_order_notional,
            format!(
                "order valued at {value} {b}; limit {} {b}{}",
                s.max_order_notional,
                if exempt {
                    " (a close only reduces risk: exempt)"
                } else {
                    ""
                },
                b = base.code()
            ),
        );
        check(
            "max_daily_notional",
            exempt || day_sum + exact <= s.max_daily_notional,
            format!(
                "today {day_sum} {b} + this order {value} {b} against a daily limit of {} {b}",
                s.max_daily_notional,
                b = base.code()
            ),
        );
        // Weight of the position after the fill, in the whole portfolio: only for an
        // order that adds risk, which alone needs the other brokers.
        if exempt {
            check(
                "max_position_weight",
                true,
                "this order only reduces a position: exempt".to_owned(),
            );
        } else {
            let valuation = value_ledger(&book, &ledger, base, Scope::ACCOUNTS)?;
            let (total, as_reported) = portfolio_total(ctx, &book, &valuation, base);
            let held: Decimal = valuation
                .positions
                .iter()
                .filter(|p| book.instrument(p.instrument).key == key)
                .filter_map(|p| p.marked.as_ref().and_then(|m| m.notional_converted))
                .sum();
            // Working orders in the same instrument count as if they had filled, and so do
            // the orders reserved but not yet visible at the broker.
            let (working, unread) = working_notional(ctx, &inst, touch, rate).await;
            let mut unknown = down.clone();
            unknown.extend(unread.into_iter().filter(|a| !down.contains(a)));
            let w = Weight {
                instrument: key.qualified(),
                seen: held + working,
                signed: if buy { exact } else { -exact },
                total,
                mark,
                limit: s.max_position_weight_pct,
            };
            let day = trading.today();
            let unseen = trading
                .store
                .tx::<_, ErrorWrap>(|tx| Ok(w.unseen(tx, &day)?))
                .map_err(Error::from)?;
            let (passed, mut detail) = w.verdict(&key, base, unseen);
            if !as_reported.is_empty() {
                detail = format!("{detail}; {}", as_reported.join("; "));
            }
            if unknown.is_empty() {
                check("max_position_weight", passed, detail);
            } else {
                // What an account that does not answer holds (of this instrument, or in
                // all) could put the position over the limit: an order that adds risk
                // waits for it; closes and reductions never do.
                check(
                    "max_position_weight",
                    false,
                    format!(
                        "cannot be decided: {} did not answer, and what {} could change the verdict ({detail})",
                        unknown.join(", "),
                        if unknown.len() == 1 {
                            "it holds"
                        } else {
                            "they hold"
                        }
                    ),
                );
            }
            weight = Some(w);
        }
    }
    check(
        "max_orders_per_day",
        exempt || day_count < s.max_orders_per_day,
        format!("{day_count} order(s) today; limit {}", s.max_orders_per_day),
    );
    if let Some((passed, detail)) = free_margin_check(
        ctx,
        &book,
        &broker,
        &order.account,
        &inst,
        notional,
        exempt,
        today,
    )
    .await
    {
        check("free_margin", passed, detail);
    }
    let commission = match (quantity, price) {
        (Some(q), Some(p)) => broker.estimate_commission(&order.account, &inst, q, p),
        _ => None,
    };
    Ok(Plan {
        order,
        inst,
        broker,
        quote,
        quantity,
        price,
        notional,
        notional_base,
        value_exact,
        reduces,
        commission,
        base,
        checks,
        notes,
        weight,
    })
}

/// `preview_order`: the plan, every rule's verdict and, when allowed, a token.
///
/// # Errors
/// `trading_disabled`, `unknown_account`, `unknown_symbol`, `not_supported`,
/// `live_not_allowed`, or a store failure.
pub async fn preview_order(ctx: &ToolContext, args: PreviewArgs) -> Result<PreviewResult> {
    let trading = trading_of(ctx)?;
    let plan = evaluate(ctx, trading, Normalized::from_args(args)).await?;
    let allowed = plan.checks.iter().all(|c| c.passed);
    let key = plan.inst.key.clone();
    let (token, expires_at) = if allowed {
        let expires = trading.now().timestamp() + trading.settings.token_ttl_seconds;
        let fingerprint = plan.order.token_fingerprint(&key);
        let token = trading
            .store
            .tx::<_, ErrorWrap>(|tx| {
                Ok(tokens::issue(
                    tx,
                    trading.key(),
                    &plan.order.account,
                    &fingerprint,
                    expires,
                )?)
            })
            .map_err(Error::from)?;
        let expires_at = chrono::DateTime::from_timestamp(expires, 0)
            .map(super::rfc3339)
            .unwrap_or_default();
        (Some(token), Some(expires_at))
    } else {
        (None, None)
    };
    let mut notes = plan.notes.clone();
    if !allowed {
        notes.push("not allowed: see the checks that did not pass; no token was issued".to_owned());
    }
    let ccy = plan.inst.currency;
    Ok(PreviewResult {
        mode: plan.order.mode.as_str(),
        order: plan.order.view(&key),
        estimate: Estimate {
            price: plan.price.map(Num),
            quantity: plan.quantity.map(Num),
            currency: ccy.code().to_owned(),
            notional: plan.notional.map(|n| Num(ccy.round(n))),
            notional_base: plan.notional_base.map(Num),
            base_currency: plan.base.code().to_owned(),
            commission: plan.commission.map(Num),
            margin_required: plan.quantity.zip(plan.price).and_then(|(q, p)| {
                q.checked_mul(p)?
                    .checked_mul(plan.inst.multiplier)?
                    .checked_mul(plan.inst.margin_rate)
                    .map(|m| Num(ccy.round(m)))
            }),
            bid: plan.quote.as_ref().map(|q| Num(q.bid)),
            ask: plan.quote.as_ref().map(|q| Num(q.ask)),
        },
        checks: plan
            .checks
            .iter()
            .map(|c| CheckView {
                rule: c.rule,
                passed: c.passed,
                detail: c.detail.clone(),
            })
            .collect(),
        allowed,
        confirmation_required: plan.confirmation_required(trading),
        confirmation_token: token,
        expires_at,
        notes,
    })
}

fn refusal_error(refusal: Refusal) -> Error {
    let (what, hint) = match refusal {
        Refusal::Altered => (
            "the confirmation token does not match this order (altered, or issued for different arguments)",
            "call preview_order with exactly these arguments and pass its new token",
        ),
        Refusal::Expired => (
            "the confirmation token has expired",
            "call preview_order again for a fresh token, then place the order promptly",
        ),
        Refusal::AlreadyUsed => (
            "the confirmation token was already used",
            "a token is good for one order; preview again for a new one (to retry the same order, reuse its client_order_id instead)",
        ),
    };
    Error::new(ErrorCode::ConfirmationInvalid, what, hint)
}

fn random_id(prefix: &str) -> String {
    let mut bytes = [0_u8; 12];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = chrono::Utc::now().timestamp_nanos_opt().unwrap_or_default();
        bytes[..8].copy_from_slice(&nanos.to_le_bytes());
    }
    format!("{prefix}{}", tradedesk_store::hex(&bytes))
}

/// The outcome of a broker call, stored for replays.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Stored {
    Placed { result: PlaceResult },
    Failed { error: Value },
}

fn stored_error(value: &Value) -> Error {
    serde_json::from_value::<StoredError>(value.clone())
        .map(|e| {
            let mut err = Error::new(e.code, e.message, e.hint);
            err.client_order_id = e.client_order_id;
            err.order_id = e.order_id;
            err
        })
        .unwrap_or_else(|_| Error::internal("a stored outcome could not be read"))
}

#[derive(Debug, Deserialize)]
struct StoredError {
    code: ErrorCode,
    message: String,
    hint: String,
    client_order_id: Option<String>,
    order_id: Option<String>,
}

fn place_result(order: &OrderRecord, message: String, replayed: bool) -> PlaceResult {
    PlaceResult {
        mode: order.mode.as_str().to_owned(),
        outcome: if order.status == tradedesk_core::OrderStatus::Filled {
            "filled".to_owned()
        } else {
            "accepted".to_owned()
        },
        order_id: order.order_id.clone(),
        client_order_id: order.client_order_id.clone(),
        filled_quantity: Num(order.filled_quantity.normalize()),
        average_price: order.average_price.map(|p| Num(p.normalize())),
        message,
        replayed,
    }
}

fn uncertain_error(client_order_id: &str, order_id: Option<String>, detail: &str) -> Error {
    Error::new(
        ErrorCode::Uncertain,
        format!("the outcome of order {} is unknown: {detail}", quoted(client_order_id)),
        "do not send it again: look it up with get_orders (status all) by its client_order_id, or retry place_order with the same client_order_id, which resolves it without resending",
    )
    .with_order(Some(client_order_id.to_owned()), order_id)
}

/// Resolves a stored key whose outcome is not known by looking the order up at the
/// broker (never by sending it again).
async fn resolve(
    trading: &Trading,
    broker: &Arc<dyn Broker>,
    record: &Record,
) -> Result<PlaceResult> {
    let owner = trading.store.lease().owner(record.owner.as_deref());
    if owner == Owner::Alive {
        // Another running process holds it and has not finished: neither its outcome
        // nor its absence at the broker can be known yet.
        return Err(uncertain_error(
            &record.client_order_id,
            record.order_id.clone(),
            "another running tradedesk process is still placing it",
        ));
    }
    let now = rfc3339(trading.now());
    if record.state == State::Reserved {
        // Its owner has ended (or is this process, which holds the key now) without
        // starting the send: provably never placed.
        let error = Error::new(
            ErrorCode::BrokerRejected,
            "the order never reached the broker (the server stopped before submitting it)",
            "nothing was placed; place it again with a new client_order_id",
        )
        .with_order(Some(record.client_order_id.clone()), None);
        let text = serde_json::to_string(&Stored::Failed {
            error: json!(error),
        })
        .map_err(|e| Error::internal(e.to_string()))?;
        settle(
            trading,
            record,
            State::Rejected,
            None,
            &text,
            "recovered",
            &now,
        )?;
        return Err(error);
    }
    let found = broker
        .find_order(&record.account, &record.client_order_id)
        .await;
    let store = |state: State, order_id: Option<&str>, stored: &Stored| -> Result<()> {
        let text = serde_json::to_string(stored).map_err(|e| Error::internal(e.to_string()))?;
        settle(trading, record, state, order_id, &text, "recovered", &now)
    };
    match found {
        Ok(Some(order))
            if order.filled_quantity.is_zero()
                && matches!(
                    order.status,
                    tradedesk_core::OrderStatus::Rejected
                        | tradedesk_core::OrderStatus::Cancelled
                        | tradedesk_core::OrderStatus::Expired
                ) =>
        {
            // The broker has it, but it never traded: a rejection, not a success.
            let error = Error::new(
                ErrorCode::BrokerRejected,
                format!(
                    "order {} is {}: {}",
                    order.order_id,
                    order.status.as_str(),
                    order.reason.as_deref().unwrap_or("no reason given")
                ),
                "nothing was traded; change the order rather than retrying it",
            )
            .with_order(
                Some(record.client_order_id.clone()),
                Some(order.order_id.clone()),
            );
            store(
                State::Rejected,
                Some(&order.order_id),
                &Stored::Failed {
                    error: json!(error),
                },
            )?;
            Err(error)
        }
        Ok(Some(order)) => {
            let result = place_result(
                &order,
                "resolved by looking the order up at the broker".to_owned(),
                true,
            );
            store(
                State::Acknowledged,
                Some(&order.order_id),
                &Stored::Placed {
                    result: result.clone(),
                },
            )?;
            Ok(result)
        }
        // A send may have started: unknown to the broker is not proof it never will be.
        Ok(None) => Err(uncertain_error(
            &record.client_order_id,
            record.order_id.clone(),
            "its send started, and the broker does not know it (yet); if the broker still has no such order later, it never arrived",
        )),
        Err(e) => Err(uncertain_error(
            &record.client_order_id,
            record.order_id.clone(),
            &e.to_string(),
        )),
    }
}

/// Polls a key another running process owns until it settles, its owner ends, or the
/// wait runs out; answers the key as last read.
async fn wait_for_owner(
    timeout: std::time::Duration,
    trading: &Trading,
    record: &Record,
) -> Result<Record> {
    let deadline = tokio::time::Instant::now() + timeout * 2 + std::time::Duration::from_secs(1);
    let mut current = record.clone();
    while current.unsettled()
        && trading.store.lease().owner(current.owner.as_deref()) == Owner::Alive
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let read = trading
            .store
            .tx::<_, ErrorWrap>(|tx| {
                Ok(idempotency::get(
                    tx,
                    &record.account,
                    &record.client_order_id,
                )?)
            })
            .map_err(Error::from)?;
        match read {
            Some(r) => current = r,
            None => break,
        }
    }
    Ok(current)
}

fn settle(
    trading: &Trading,
    record: &Record,
    state: State,
    order_id: Option<&str>,
    stored: &str,
    kind: &str,
    now: &str,
) -> Result<()> {
    trading
        .store
        .tx::<_, ErrorWrap>(|tx| {
            idempotency::settle(tx, &record.account, &record.client_order_id, state, order_id, Some(stored), now)?;
            audit::append(
                tx,
                &audit::Entry {
                    time: now,
                    kind,
                    account: &record.account,
                    client_order_id: &record.client_order_id,
                    detail: &json!({"state": state.as_str(), "order_id": order_id, "outcome": serde_json::from_str::<Value>(stored).unwrap_or(Value::Null)}).to_string(),
                },
            )?;
            Ok(())
        })
        .map_err(Error::from)
}

/// Replays a stored key: its outcome, or a lookup when it is unresolved. A key another
/// running process is still placing is waited for (at most twice the broker timeout
/// and a second), then replayed.
async fn replay(
    timeout: std::time::Duration,
    trading: &Trading,
    broker: &Arc<dyn Broker>,
    record: &Record,
) -> Result<PlaceResult> {
    let waited;
    let record = if record.unsettled()
        && trading.store.lease().owner(record.owner.as_deref()) == Owner::Alive
    {
        waited = wait_for_owner(timeout, trading, record).await?;
        &waited
    } else {
        record
    };
    match (&record.state, record.outcome.as_deref()) {
        (State::Acknowledged | State::Rejected, Some(text)) => {
            match serde_json::from_str::<Stored>(text) {
                Ok(Stored::Placed { mut result }) => {
                    result.replayed = true;
                    Ok(result)
                }
                Ok(Stored::Failed { error }) => Err(stored_error(&error)),
                Err(_) => Err(Error::internal("a stored outcome could not be read")),
            }
        }
        _ => resolve(trading, broker, record).await,
    }
}

/// `place_order` (and `close_position`, with `reduce_only`).
///
/// # Errors
/// Every guard's error code (docs/methodology/trading.md), `broker_rejected`, `uncertain`.
pub async fn place_order(
    ctx: &ToolContext,
    args: PlaceArgs,
    confirmer: Option<&dyn Confirmer>,
) -> Result<PlaceResult> {
    let (preview_args, token) = args.into();
    let order = Normalized::from_args(preview_args);
    submit(ctx, order, token, confirmer).await
}

async fn submit(
    ctx: &ToolContext,
    order: Normalized,
    token: Option<String>,
    confirmer: Option<&dyn Confirmer>,
) -> Result<PlaceResult> {
    let trading = trading_of(ctx)?;
    let account = order.account.clone();
    let plan = match evaluate(ctx, trading, order).await {
        Ok(plan) => plan,
        Err(e) => {
            refuse(trading, &account, "", &e);
            return Err(e);
        }
    };
    let key = plan.inst.key.clone();
    let token_fingerprint = plan.order.token_fingerprint(&key);
    let fingerprint = plan.order.idempotency_fingerprint(&key);

    // A client order id seen before: its stored outcome, never a second order, and
    // without asking the human again.
    if let Some(id) = &plan.order.client_order_id {
        let lock = trading.key_lock(&account, id);
        let _guard = lock.lock().await;
        if let Some(outcome) =
            seen_before(ctx.broker_timeout, trading, &plan, id, &fingerprint).await?
        {
            return outcome;
        }
    }
    if let Some(e) = plan.first_failure() {
        let e = e.with_order(plan.order.client_order_id.clone(), None);
        refuse(
            trading,
            &account,
            plan.order.client_order_id.as_deref().unwrap_or(""),
            &e,
        );
        return Err(e);
    }
    let (Some(quantity), Some(notional_base), Some(value)) =
        (plan.quantity, plan.notional_base, plan.value_exact)
    else {
        let e = rule_error("price_available", "the order could not be valued");
        refuse(trading, &account, "", &e);
        return Err(e);
    };

    // Confirmation: a preview's token, or the human's answer, which stands for a token
    // (issued now, single use, redeemed with the order).
    let token = match token {
        Some(t) => Some(t),
        None if plan.confirmation_required(trading) => {
            match confirm(
                trading,
                &plan,
                confirmer,
                &token_fingerprint,
                quantity,
                notional_base,
            )
            .await
            {
                Ok(t) => Some(t),
                Err(e) => {
                    if e.code != ErrorCode::ConfirmationRequired
                        || !e.message.starts_with("waiting")
                    {
                        refuse(trading, &account, "", &e);
                    }
                    return Err(e);
                }
            }
        }
        None => None,
    };
    let client_order_id = match (&plan.order.client_order_id, &token) {
        (Some(id), _) => id.clone(),
        // Derived from the token's id, so a retry with the same token finds the same key
        // (and an edited copy of it, refused at redemption, cannot take another).
        (None, Some(t)) => {
            let id = tokens::token_id(t).unwrap_or(t);
            format!("td-{}", &sha256_hex(&[id.as_bytes()])[..24])
        }
        (None, None) => random_id("td-"),
    };
    let lock = trading.key_lock(&account, &client_order_id);
    let _guard = lock.lock().await;
    if plan.order.client_order_id.is_none()
        && let Some(outcome) = seen_before(
            ctx.broker_timeout,
            trading,
            &plan,
            &client_order_id,
            &fingerprint,
        )
        .await?
    {
        return outcome;
    }

    // One transaction: the kill switch and the daily limits re-checked, the token
    // redeemed, the key reserved and the attempt audited, all before the broker is
    // called.
    let now = trading.now();
    let now_text = rfc3339(now);
    let day = trading.today();
    let settings = &trading.settings;
    let record = Record {
        account: account.clone(),
        client_order_id: client_order_id.clone(),
        fingerprint: fingerprint.clone(),
        state: State::Reserved,
        order_id: None,
        day: day.clone(),
        notional_base: value.to_string(),
        outcome: None,
        created: rfc3339(chrono::Utc::now()),
        owner: Some(trading.store.lease().id().to_owned()),
        instrument: Some(key.qualified()),
        exposure: Some(
            if plan.order.side == Side::Buy {
                value
            } else {
                -value
            }
            .to_string(),
        ),
    };
    let confirmed_by = if plan.order.client_order_id.is_none()
        && token.is_some()
        && plan.confirmation_required(trading)
    {
        "token or the user's answer"
    } else if token.is_some() {
        "token"
    } else {
        "not required"
    };
    let reserved = trading.store.tx::<_, ErrorWrap>(|tx| {
        // Another process took this id since it was looked up: its outcome is the
        // answer, never a second order.
        if let Some(existing) = idempotency::get(tx, &account, &client_order_id)? {
            return Ok(Some(existing));
        }
        if !plan.reduces && trading.kill_switch_on() {
            return Err(rule_error("kill_switch", "the kill switch was switched on").into());
        }
        let rows = idempotency::day_notionals(tx, &day)?;
        let sum: Decimal = rows.iter().filter_map(|r| r.parse::<Decimal>().ok()).sum();
        if !plan.reduces && sum + value > settings.max_daily_notional {
            return Err(rule_error(
                "max_daily_notional",
                &format!(
                    "today {} + this order {} against a daily limit of {} {}",
                    plan.base.round(sum),
                    notional_base,
                    settings.max_daily_notional,
                    plan.base.code()
                ),
            )
            .into());
        }
        if !plan.reduces
            && u32::try_from(rows.len()).unwrap_or(u32::MAX) >= settings.max_orders_per_day
        {
            return Err(rule_error(
                "max_orders_per_day",
                &format!(
                    "{} order(s) today; limit {}",
                    rows.len(),
                    settings.max_orders_per_day
                ),
            )
            .into());
        }
        // Decided here, with every order reserved meanwhile counted, as the daily cap is.
        if let Some(w) = &plan.weight {
            let unseen = w.unseen(tx, &day)?;
            let (passed, detail) = w.verdict(&key, plan.base, unseen);
            if !passed {
                return Err(rule_error("max_position_weight", &detail).into());
            }
        }
        if let Some(token) = &token
            && let Err(refusal) = tokens::redeem(
                tx,
                trading.key(),
                token,
                &token_fingerprint,
                now.timestamp(),
                &now_text,
            )?
        {
            return Err(refusal_error(refusal).into());
        }
        idempotency::reserve(tx, &record)?;
        audit::append(
            tx,
            &audit::Entry {
                time: &now_text,
                kind: "submitted",
                account: &account,
                client_order_id: &client_order_id,
                detail: &json!({
                    "order": plan.order.view(&key),
                    "quantity": quantity.to_string(),
                    "notional_base": value.to_string(),
                    "base_currency": plan.base.code(),
                    "reduces_only": plan.reduces,
                    "confirmed_by": confirmed_by,
                })
                .to_string(),
            },
        )?;
        Ok(None)
    });
    match reserved {
        Err(ErrorWrap(e)) => {
            let e = e.with_order(Some(client_order_id.clone()), None);
            refuse(trading, &account, &client_order_id, &e);
            return Err(e);
        }
        Ok(Some(existing)) => {
            return if existing.fingerprint == fingerprint {
                replay(ctx.broker_timeout, trading, &plan.broker, &existing).await
            } else {
                Err(reused_error(trading, &account, &client_order_id, &existing))
            };
        }
        Ok(None) => {}
    }
    trading.pause_at(Failpoint::AfterReserve).await;
    // From here a send may start: a retry that finds the key `submitted` can no longer
    // say it was never placed.
    let sending = trading
        .store
        .tx::<_, ErrorWrap>(|tx| {
            Ok(idempotency::mark_sending(
                tx,
                &account,
                &client_order_id,
                &rfc3339(trading.now()),
            )?)
        })
        .map_err(Error::from);
    match sending {
        Ok(true) => {}
        Ok(false) => {
            // Settled by someone else meanwhile (a resolver that found this process
            // gone cannot: it is running). Never send on a key that is not ours.
            return Err(uncertain_error(
                &client_order_id,
                None,
                "its reservation changed before it was sent; nothing was sent by this call",
            ));
        }
        Err(e) => {
            // Nothing was sent: the key stays reserved, which a retry resolves as
            // "never reached the broker".
            return Err(e.with_order(Some(client_order_id.clone()), None));
        }
    }

    let request = OrderRequest {
        account: account.clone(),
        key: key.clone(),
        side: plan.order.side,
        quantity,
        order_type: plan.order.order_type,
        limit_price: plan.order.limit_price,
        stop_price: plan.order.stop_price,
        time_in_force: plan.order.time_in_force,
        stop_loss: plan.order.stop_loss,
        take_profit: plan.order.take_profit,
        comment: plan.order.comment.clone(),
        client_order_id: client_order_id.clone(),
        mode: plan.order.mode,
        reduce_only: plan.reduces,
        ticket: plan.order.ticket.clone(),
        magic: plan.order.magic,
    };
    let outcome = tokio::time::timeout(ctx.broker_timeout, plan.broker.place(&request)).await;
    trading.pause_at(Failpoint::AfterBroker).await;
    let now_text = rfc3339(trading.now());
    let (state, stored, result, order_id) = match outcome {
        Ok(Ok(placed)) => {
            let result = place_result(&placed.order, placed.message, false);
            let order_id = Some(placed.order.order_id.clone());
            (
                State::Acknowledged,
                Stored::Placed {
                    result: result.clone(),
                },
                Ok(result),
                order_id,
            )
        }
        Ok(Err(e)) if e.provably_not_placed() => {
            let order_id = e.order_id().map(str::to_owned);
            let mut error = broker_error(e);
            if error.code != ErrorCode::BrokerRejected {
                error = Error::new(ErrorCode::BrokerRejected, error.message, error.hint);
            }
            let error = error.with_order(Some(client_order_id.clone()), order_id.clone());
            (
                State::Rejected,
                Stored::Failed {
                    error: json!(error),
                },
                Err(error),
                order_id,
            )
        }
        Ok(Err(e)) => {
            let error = uncertain_error(&client_order_id, None, &e.to_string());
            (
                State::Uncertain,
                Stored::Failed {
                    error: json!(error),
                },
                Err(error),
                None,
            )
        }
        Err(_) => {
            let error = uncertain_error(
                &client_order_id,
                None,
                &format!("the broker did not answer within {:?}", ctx.broker_timeout),
            );
            (
                State::Uncertain,
                Stored::Failed {
                    error: json!(error),
                },
                Err(error),
                None,
            )
        }
    };
    let stored = serde_json::to_string(&stored).map_err(|e| Error::internal(e.to_string()))?;
    if let Err(e) = settle(
        trading,
        &record,
        state,
        order_id.as_deref(),
        &stored,
        state.as_str(),
        &now_text,
    ) {
        // The broker has answered but the outcome could not be stored: the model must
        // look the order up, never resend it.
        return Err(uncertain_error(
            &client_order_id,
            order_id,
            &format!(
                "the broker answered but its outcome could not be recorded ({})",
                e.message
            ),
        ));
    }
    result
}

/// The stored outcome of a client order id seen before (or a lookup when it is
/// unresolved); `None` when the id is new.
async fn seen_before(
    timeout: std::time::Duration,
    trading: &Trading,
    plan: &Plan,
    client_order_id: &str,
    fingerprint: &str,
) -> Result<Option<Result<PlaceResult>>> {
    let existing = trading
        .store
        .tx::<_, ErrorWrap>(|tx| Ok(idempotency::get(tx, &plan.order.account, client_order_id)?))
        .map_err(Error::from)?;
    let Some(record) = existing else {
        return Ok(None);
    };
    if record.fingerprint != fingerprint {
        return Ok(Some(Err(reused_error(
            trading,
            &plan.order.account,
            client_order_id,
            &record,
        ))));
    }
    Ok(Some(replay(timeout, trading, &plan.broker, &record).await))
}

/// A client order id already used for another order: refused and audited.
fn reused_error(trading: &Trading, account: &str, client_order_id: &str, record: &Record) -> Error {
    let e = rule_error(
        "client_order_id_reused",
        &format!("{} was used for a different order", quoted(client_order_id)),
    )
    .with_order(Some(client_order_id.to_owned()), record.order_id.clone());
    refuse(trading, account, client_order_id, &e);
    e
}

/// Gets the human's confirmation: an answer carried by a retry (the 2026-07-28 flow),
/// or a question put now. Answers the token that stands for the acceptance.
async fn confirm(
    trading: &Trading,
    plan: &Plan,
    confirmer: Option<&dyn Confirmer>,
    token_fingerprint: &str,
    quantity: Decimal,
    notional_base: Decimal,
) -> Result<String> {
    let declined = || {
        Error::new(
            ErrorCode::ConfirmationRequired,
            "the user declined the order",
            "do not place it; ask the user what to change",
        )
    };
    let unavailable = || {
        Error::new(
            ErrorCode::ConfirmationRequired,
            format!(
                "{} orders need confirmation on this server",
                plan.order.mode.as_str()
            ),
            "call preview_order with the same arguments, show the user its plan, then pass its confirmation_token to place_order",
        )
    };
    let Some(confirmer) = confirmer else {
        return Err(unavailable());
    };
    if let Some((accepted, state)) = confirmer.prior_answer() {
        // The answer's request state is the token issued when the question was put:
        // redeemed with the order, so one answer places one order, this one.
        return if accepted { Ok(state) } else { Err(declined()) };
    }
    let expires = trading.now().timestamp() + trading.settings.token_ttl_seconds;
    let token = trading
        .store
        .tx::<_, ErrorWrap>(|tx| {
            Ok(tokens::issue(
                tx,
                trading.key(),
                &plan.order.account,
                token_fingerprint,
                expires,
            )?)
        })
        .map_err(Error::from)?;
    match confirmer
        .confirm(&confirm_prompt(plan, quantity, notional_base), &token)
        .await
    {
        Confirmation::Accepted => Ok(token),
        Confirmation::Declined => Err(declined()),
        Confirmation::Pending => Err(Error::new(
            ErrorCode::ConfirmationRequired,
            "waiting for the user to confirm the order",
            "answer the confirmation request, then retry the call with the answer",
        )),
        Confirmation::Unavailable => Err(unavailable()),
    }
}

/// Audits a refused attempt (best effort: a refusal changes nothing to roll back).
fn refuse(trading: &Trading, account: &str, client_order_id: &str, e: &Error) {
    // The caller's text, bounded: an audit entry never grows with what was sent.
    let cut = |t: &str| {
        t.chars()
            .take(tradedesk_core::error::QUOTE_CHARS)
            .collect::<String>()
    };
    let _ = trading.audit(
        "refused",
        &cut(account),
        &cut(client_order_id),
        &json!({"error": e}),
    );
}

fn confirm_prompt(plan: &Plan, quantity: Decimal, notional_base: Decimal) -> String {
    let o = &plan.order;
    let mut text = format!(
        "Confirm {} order: {} {} {} {} on account {}",
        o.mode.as_str().to_uppercase(),
        o.side.as_str(),
        quantity,
        plan.inst.unit,
        plan.inst.key,
        o.account
    );
    text.push_str(&format!(", {}", o.order_type.as_str()));
    if let Some(p) = o.limit_price {
        text.push_str(&format!(" limit {p}"));
    }
    if let Some(p) = o.stop_price {
        text.push_str(&format!(" stop {p}"));
    }
    text.push_str(&format!(
        ", valued at {} {}",
        notional_base,
        plan.base.code()
    ));
    if let Some(sl) = o.stop_loss {
        text.push_str(&format!(", stop-loss {sl}"));
    }
    if let Some(tp) = o.take_profit {
        text.push_str(&format!(", take-profit {tp}"));
    }
    text.push('.');
    text
}

/// An open ticket of an account in an instrument, as its broker lists it.
///
/// # Errors
/// `invalid_order` (`ticket_found`) naming the tickets that are open in the instrument.
fn open_ticket(
    book: &tradedesk_core::Book,
    account: &str,
    key: &InstrumentKey,
    ticket: &str,
) -> Result<tradedesk_core::BrokerTicket> {
    let a = book.account_index(account);
    let here: Vec<&tradedesk_core::BrokerTicket> = book
        .tickets
        .iter()
        .filter(|t| Some(t.account) == a)
        .collect();
    if let Some(t) = here.iter().find(|t| t.ticket == ticket) {
        if book.instrument(t.instrument).key.symbol != key.symbol {
            return Err(rule_error(
                "ticket_found",
                &format!(
                    "ticket {} is {}, not {}",
                    quoted(ticket),
                    book.instrument(t.instrument).key.symbol,
                    key.symbol
                ),
            ));
        }
        return Ok((*t).clone());
    }
    let open: Vec<&str> = here
        .iter()
        .filter(|t| book.instrument(t.instrument).key.symbol == key.symbol)
        .map(|t| t.ticket.as_str())
        .collect();
    Err(rule_error(
        "ticket_found",
        &format!(
            "account {account} has no open ticket {}{}",
            quoted(ticket),
            if open.is_empty() {
                format!(" (nothing of {} is open)", key.symbol)
            } else {
                format!("; {} tickets open: {}", key.symbol, open.join(", "))
            }
        ),
    ))
}

/// Refuses a change to a whole symbol on a hedging account that holds it both ways (a
/// buy and a sell ticket): which ticket is meant must be said.
///
/// # Errors
/// `invalid_order` (`ticket_required`) naming the open tickets.
fn hedged_both_ways(
    book: &tradedesk_core::Book,
    account: &str,
    key: &InstrumentKey,
    tool: &str,
) -> Result<()> {
    let a = book.account_index(account);
    let here: Vec<&tradedesk_core::BrokerTicket> = book
        .tickets
        .iter()
        .filter(|t| Some(t.account) == a && book.instrument(t.instrument).key.symbol == key.symbol)
        .collect();
    let buys = here.iter().any(|t| t.side == Side::Buy);
    let sells = here.iter().any(|t| t.side == Side::Sell);
    if buys && sells {
        let list: Vec<String> = here
            .iter()
            .map(|t| format!("{} ({} {})", t.ticket, t.side.as_str(), t.quantity))
            .collect();
        return Err(rule_error(
            "ticket_required",
            &format!(
                "account {account} holds {} both ways (hedging): {tool} needs the ticket, one of {}",
                key.symbol,
                list.join(", ")
            ),
        ));
    }
    Ok(())
}

/// An account's own book, replayed, read from its broker alone (never waiting for
/// another broker).
async fn own_ledger(
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

/// `close_position`: a market order on the opposite side, for all or part.
///
/// # Errors
/// As `place_order`, plus `invalid_order` (`no_position`) and `invalid_quantity`
/// (`close_exceeds_position`).
pub async fn close_position(
    ctx: &ToolContext,
    args: CloseArgs,
    confirmer: Option<&dyn Confirmer>,
) -> Result<PlaceResult> {
    let trading = trading_of(ctx)?;
    let mode: Mode = args.mode.into();
    let broker = trading_broker(ctx, trading, &args.account, mode)?;
    let inst = broker
        .instrument(&args.account, &args.symbol)
        .await
        .map_err(broker_error)?;
    let ticket = args.ticket.as_deref().map(str::trim).map(str::to_owned);
    let (book, ledger) = own_ledger(ctx, &args.account).await?;
    if ticket.is_none() {
        hedged_both_ways(&book, &args.account, &inst.key, "close_position")?;
    }
    // By ticket (MetaTrader): that ticket's side and lots; else the net position.
    let held = if let Some(ticket) = &ticket {
        open_ticket(&book, &args.account, &inst.key, ticket)?.signed_quantity()
    } else {
        position_in(&book, &ledger, &args.account, &inst.key)
    };
    if held.is_zero() {
        return Err(rule_error(
            "no_position",
            &format!("account {} holds no {}", args.account, inst.key),
        ));
    }
    let quantity = match args.quantity {
        None => held.abs(),
        Some(q) if q.0 > held.abs() => {
            return Err(match &ticket {
                Some(t) => rule_error(
                    "close_exceeds_ticket",
                    &format!("{} to close, ticket {t} has {}", q.0, held.abs()),
                ),
                None => rule_error(
                    "close_exceeds_position",
                    &format!("{} to close, but {} is open", q.0, held.abs()),
                ),
            });
        }
        Some(q) => q.0,
    };
    let order = Normalized {
        account: args.account,
        symbol: inst.key.qualified(),
        ticket,
        magic: None,
        side: if held.is_sign_positive() {
            Side::Sell
        } else {
            Side::Buy
        },
        quantity: Some(quantity.normalize()),
        notional: None,
        order_type: OrderType::Market,
        limit_price: None,
        stop_price: None,
        time_in_force: TimeInForce::Day,
        stop_loss: None,
        take_profit: None,
        comment: None,
        client_order_id: args.client_order_id,
        mode,
        reduce_only: true,
    };
    submit(ctx, order, args.confirmation_token, confirmer).await
}

/// `modify_position`: new stop-loss / take-profit levels on an open position.
///
/// # Errors
/// `trading_disabled`, `kill_switch`, `invalid_order` (`sl_or_tp_required`,
/// `no_position`, the level rules), broker errors.
pub async fn modify_position(ctx: &ToolContext, args: ModifyArgs) -> Result<ModifyResult> {
    let trading = trading_of(ctx)?;
    let mode: Mode = args.mode.into();
    let broker = trading_broker(ctx, trading, &args.account, mode)?;
    let audit_refusal = |e: &Error| refuse(trading, &args.account, "", e);
    if trading.kill_switch_on() {
        let e = rule_error(
            "kill_switch",
            "modify_position is refused while the kill switch is on",
        );
        audit_refusal(&e);
        return Err(e);
    }
    let (sl, tp) = (args.stop_loss.map(|n| n.0), args.take_profit.map(|n| n.0));
    if sl.is_none() && tp.is_none() {
        return Err(rule_error(
            "sl_or_tp_required",
            "neither stop_loss nor take_profit was given",
        ));
    }
    let inst = broker
        .instrument(&args.account, &args.symbol)
        .await
        .map_err(broker_error)?;
    let ticket = args.ticket.as_deref().map(str::trim).map(str::to_owned);
    let (book, ledger) = own_ledger(ctx, &args.account).await?;
    let on_ticket = match &ticket {
        Some(t) => Some(open_ticket(&book, &args.account, &inst.key, t)?),
        None => {
            hedged_both_ways(&book, &args.account, &inst.key, "modify_position")?;
            None
        }
    };
    let held = match &on_ticket {
        Some(t) => t.signed_quantity(),
        None => position_in(&book, &ledger, &args.account, &inst.key),
    };
    if held.is_zero() {
        return Err(rule_error(
            "no_position",
            &format!("account {} holds no {}", args.account, inst.key),
        ));
    }
    let quote = broker
        .quote(&args.account, &inst.key.qualified())
        .await
        .map_err(|e| rule_error("price_available", &e.to_string()))?;
    let long = held.is_sign_positive();
    // A long position exits at the bid, a short one at the ask.
    let price = if long { quote.bid } else { quote.ask };
    for (name, level) in [("stop_loss", sl), ("take_profit", tp)] {
        if let Some(level) = level {
            if level <= Decimal::ZERO {
                return Err(rule_error(
                    "price_positive",
                    &format!("{name} must be above zero"),
                ));
            }
            if !multiple_of(level, inst.tick) {
                return Err(rule_error(
                    "tick_size",
                    &format!("{name} {level} is not a multiple of the tick {}", inst.tick),
                ));
            }
        }
    }
    // The pair in force after the change: a new level with the one already set.
    let (old_sl, old_tp) = match &on_ticket {
        Some(t) => (t.stop_loss, t.take_profit),
        None => broker
            .position_levels(&args.account, &inst.key.qualified())
            .await
            .unwrap_or((None, None)),
    };
    let exit = if long { "bid" } else { "ask" };
    if let Some(failed) = level_rules(
        long,
        (sl.or(old_sl), tp.or(old_tp)),
        (sl, tp),
        Some((price, exit)),
    )
    .into_iter()
    .find(|c| !c.passed)
    {
        return Err(rule_error(failed.rule, &failed.detail));
    }
    let (new_sl, new_tp) = match &ticket {
        Some(t) => broker
            .modify_ticket(&args.account, &inst.key.qualified(), t, sl, tp)
            .await
            .map_err(broker_error)?,
        None => broker
            .modify_position(&args.account, &inst.key.qualified(), sl, tp)
            .await
            .map_err(broker_error)?,
    };
    let mut detail = json!({"symbol": inst.key.qualified(), "stop_loss": new_sl.map(|d| d.to_string()), "take_profit": new_tp.map(|d| d.to_string())});
    if let Some(t) = &ticket {
        detail["ticket"] = json!(t);
    }
    trading.audit("modify", &args.account, "", &detail)?;
    Ok(ModifyResult {
        mode: mode.as_str(),
        account: args.account,
        symbol: inst.key.qualified(),
        stop_loss: new_sl.map(Num),
        take_profit: new_tp.map(Num),
        message: format!("levels on {} updated", inst.key),
    })
}

/// `cancel_order`.
///
/// # Errors
/// `trading_disabled`, `invalid_order` (`order_reference`), `unknown_order`.
pub async fn cancel_order(ctx: &ToolContext, args: CancelArgs) -> Result<CancelResult> {
    let trading = trading_of(ctx)?;
    let mode: Mode = args.mode.into();
    let broker = trading_broker(ctx, trading, &args.account, mode)?;
    let reference = match (args.order_id, args.client_order_id) {
        (Some(id), None) => OrderRef::OrderId(id),
        (None, Some(id)) => OrderRef::ClientOrderId(id),
        _ => {
            return Err(Error::rule(
                ErrorCode::InvalidOrder,
                "order_reference",
                "pass exactly one of order_id and client_order_id",
                "get_orders lists both for every working order",
            ));
        }
    };
    let (order, cancelled) = broker
        .cancel(&args.account, &reference)
        .await
        .map_err(broker_error)?;
    let order_id = order.order_id.clone();
    let (outcome, message) = if cancelled {
        ("cancelled", format!("order {order_id} cancelled"))
    } else {
        (
            "not_cancellable",
            format!(
                "order {order_id} is no longer working: it is {}",
                order.status.as_str()
            ),
        )
    };
    trading.audit(
        "cancel",
        &args.account,
        "",
        &json!({"order_id": order_id, "outcome": outcome}),
    )?;
    Ok(CancelResult {
        mode: mode.as_str(),
        order_id,
        outcome,
        message,
    })
}

/// `get_orders`: working or past orders, newest first.
///
/// # Errors
/// `unknown_account`, `not_supported` for an account without orders, broker errors.
pub async fn get_orders(ctx: &ToolContext, args: OrdersArgs) -> Result<OrdersResult> {
    let limit = args.limit.unwrap_or(50);
    if !(1..=500).contains(&limit) {
        return Err(Error::invalid_argument(
            format!("limit: {limit} is outside 1..500"),
            "pass a limit from 1 to 500",
        ));
    }
    let filter = match args.status {
        StatusArg::Open => OrderFilter::Open,
        StatusArg::Closed => OrderFilter::Closed,
        StatusArg::All => OrderFilter::All,
    };
    let mut orders = Vec::new();
    let mut notes = Vec::new();
    match &args.account {
        Some(account) => {
            let broker = ctx
                .broker_for(account)
                .ok_or_else(|| unknown_account(ctx, account))?;
            orders = broker
                .orders(Some(account), filter)
                .await
                .map_err(broker_error)?;
        }
        None => {
            for (account, broker) in ctx.served_accounts() {
                match broker.orders(Some(&account.id), filter).await {
                    Ok(mut found) => orders.append(&mut found),
                    Err(BrokerError::Unsupported { .. }) => {}
                    Err(e) => notes.push(format!("{}: {e}", account.id)),
                }
            }
        }
    }
    orders.sort_by(|a, b| b.created.cmp(&a.created).then(b.order_id.cmp(&a.order_id)));
    let truncated = orders.len() > limit as usize;
    orders.truncate(limit as usize);
    Ok(OrdersResult {
        count: orders.len(),
        truncated,
        orders: orders.iter().map(OrderView::from).collect(),
        notes,
    })
}

/// Resolves every key left unsettled by a process that has ended (a server stopped
/// mid-order): never sent is settled as such, anything else by looking the order up at
/// its broker; answers how many were settled. Keys of running processes are left to
/// them.
///
/// # Errors
/// A store failure.
pub async fn recover(ctx: &ToolContext) -> Result<usize> {
    let Some(trading) = &ctx.trading else {
        return Ok(0);
    };
    let pending = trading
        .store
        .tx::<_, ErrorWrap>(|tx| Ok(idempotency::unresolved(tx)?))
        .map_err(Error::from)?;
    let mut resolved = 0;
    for record in pending {
        // Another running process's order is its own to settle.
        if trading.store.lease().owner(record.owner.as_deref()) == Owner::Alive {
            continue;
        }
        if let Some(broker) = ctx.broker_for(&record.account) {
            let lock = trading.key_lock(&record.account, &record.client_order_id);
            let _guard = lock.lock().await;
            // Settled either way (placed, rejected, never sent) unless still uncertain.
            let outcome = resolve(trading, &broker, &record).await;
            if outcome.as_ref().is_ok()
                || outcome
                    .as_ref()
                    .is_err_and(|e| e.code != ErrorCode::Uncertain)
            {
                resolved += 1;
            }
        }
    }
    Ok(resolved)
}
