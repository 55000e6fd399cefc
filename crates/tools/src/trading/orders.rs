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
    Error, ErrorCode, InstrumentKey, Mode, Order, OrderRecord, OrderTerms, OrderType, Result, Side,
    TimeInForce,
};
use tradedesk_store::idempotency::{self, Record, State};
use tradedesk_store::lease::Owner;
use tradedesk_store::tokens::{self, Refusal};
use tradedesk_store::{audit, sha256_hex};

use super::facts::{self, Facts, own_ledger, position_in};
use super::rules::{self, Evaluation, Rule, level_rules};
use super::{ErrorWrap, Failpoint, Trading, rfc3339};
use crate::args::SideArg;
use crate::context::ToolContext;
use crate::num::Num;
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

impl From<TypeArg> for OrderType {
    fn from(t: TypeArg) -> Self {
        match t {
            TypeArg::Market => Self::Market,
            TypeArg::Limit => Self::Limit,
            TypeArg::Stop => Self::Stop,
            TypeArg::StopLimit => Self::StopLimit,
        }
    }
}

impl From<TifArg> for TimeInForce {
    fn from(t: TifArg) -> Self {
        match t {
            TifArg::Day => Self::Day,
            TifArg::Gtc => Self::Gtc,
            TifArg::Ioc => Self::Ioc,
            TifArg::Fok => Self::Fok,
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

        /// The order these arguments describe, normalized: the one place an order's
        /// arguments become an [`Order`] (the token, if any, is not part of it).
        impl From<$name> for Order {
            fn from(a: $name) -> Self {
                Order {
                    terms: OrderTerms {
                        account: a.account,
                        side: a.side.into(),
                        order_type: a.order_type.into(),
                        limit_price: a.limit_price.map(|n| n.0),
                        stop_price: a.stop_price.map(|n| n.0),
                        time_in_force: a.time_in_force.into(),
                        stop_loss: a.stop_loss.map(|n| n.0),
                        take_profit: a.take_profit.map(|n| n.0),
                        comment: a.comment,
                        mode: a.mode.into(),
                        ticket: a.ticket,
                        magic: a.magic,
                    },
                    symbol: a.symbol,
                    quantity: a.quantity.map(|n| n.0),
                    notional: a.notional.map(|n| n.0),
                    client_order_id: a.client_order_id,
                    reduce_only: false,
                }
                .normalized()
            }
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

/// The fingerprint an order's client order id is stored with (the id is the key, so it
/// is not part of it).
pub(super) fn idempotency_fingerprint(order: &Order, key: &InstrumentKey) -> String {
    sha256_hex(&[order.bound_text(key).as_bytes()])
}

/// What a confirmation token is bound to: the order, its account and mode, and the
/// client order id when one was given.
fn token_fingerprint(order: &Order, key: &InstrumentKey) -> String {
    sha256_hex(&[
        order.bound_text(key).as_bytes(),
        b"|",
        order.client_order_id.as_deref().unwrap_or("").as_bytes(),
    ])
}

impl NormalizedView {
    /// The order on its resolved instrument `key`, as the preview and the audit log
    /// show it.
    fn of(o: &Order, key: &InstrumentKey) -> Self {
        Self {
            account: o.terms.account.clone(),
            exchange: key.exchange.clone(),
            symbol: key.symbol.clone(),
            side: o.terms.side.as_str(),
            quantity: o.quantity.map(Num),
            notional: o.notional.map(Num),
            order_type: o.terms.order_type.as_str(),
            limit_price: o.terms.limit_price.map(Num),
            stop_price: o.terms.stop_price.map(Num),
            time_in_force: o.terms.time_in_force.as_str(),
            stop_loss: o.terms.stop_loss.map(Num),
            take_profit: o.terms.take_profit.map(Num),
            comment: o.terms.comment.clone(),
            client_order_id: o.client_order_id.clone(),
            mode: o.terms.mode.as_str(),
            magic: o.terms.magic,
            ticket: o.terms.ticket.clone(),
        }
    }
}

/// An order gathered and checked: the facts it was decided on and every rule's verdict.
struct Plan {
    order: Order,
    broker: Arc<dyn Broker>,
    facts: Facts,
    eval: Evaluation,
}

impl Plan {
    /// Gathers the order's facts (all the I/O) and runs every rule over them, changing
    /// nothing.
    async fn evaluate(ctx: &ToolContext, trading: &Trading, order: Order) -> Result<Self> {
        let (broker, facts) = facts::gather(ctx, trading, &order).await?;
        let eval = rules::check(&order, &facts, &trading.settings);
        Ok(Self {
            order,
            broker,
            facts,
            eval,
        })
    }

    fn first_failure(&self) -> Option<Error> {
        self.eval.first_failure().map(Error::from)
    }

    fn confirmation_required(&self, trading: &Trading) -> bool {
        match self.order.terms.mode {
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
pub(super) fn trading_broker(
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

pub(super) fn broker_error(e: BrokerError) -> Error {
    Error::from(e)
}

/// `preview_order`: the plan, every rule's verdict and, when allowed, a token.
///
/// # Errors
/// `trading_disabled`, `unknown_account`, `unknown_symbol`, `not_supported`,
/// `live_not_allowed`, or a store failure.
pub async fn preview_order(ctx: &ToolContext, args: PreviewArgs) -> Result<PreviewResult> {
    let trading = trading_of(ctx)?;
    let plan = Plan::evaluate(ctx, trading, Order::from(args)).await?;
    let allowed = plan.eval.allowed();
    let key = plan.facts.inst.key.clone();
    let (token, expires_at) = if allowed {
        let expires = trading.now().timestamp() + trading.settings.token_ttl_seconds;
        let fingerprint = token_fingerprint(&plan.order, &key);
        let token = trading
            .store
            .tx::<_, ErrorWrap>(|tx| {
                Ok(tokens::issue(
                    tx,
                    trading.key(),
                    &plan.order.terms.account,
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
    let mut notes = plan.eval.notes.clone();
    if !allowed {
        notes.push("not allowed: see the checks that did not pass; no token was issued".to_owned());
    }
    let ccy = plan.facts.inst.currency;
    Ok(PreviewResult {
        mode: plan.order.terms.mode.as_str(),
        order: NormalizedView::of(&plan.order, &key),
        estimate: Estimate {
            price: plan.eval.price.map(Num),
            quantity: plan.eval.quantity.map(Num),
            currency: ccy.code().to_owned(),
            notional: plan.eval.notional.map(|n| Num(ccy.round(n))),
            notional_base: plan.eval.notional_base.map(Num),
            base_currency: plan.facts.base.code().to_owned(),
            commission: plan.facts.commission.map(Num),
            margin_required: plan.eval.quantity.zip(plan.eval.price).and_then(|(q, p)| {
                q.checked_mul(p)?
                    .checked_mul(plan.facts.inst.multiplier)?
                    .checked_mul(plan.facts.inst.margin_rate)
                    .map(|m| Num(ccy.round(m)))
            }),
            bid: plan.facts.quote.as_ref().map(|q| Num(q.bid)),
            ask: plan.facts.quote.as_ref().map(|q| Num(q.ask)),
        },
        checks: plan
            .eval
            .checks
            .iter()
            .map(|c| CheckView {
                rule: c.rule.name(),
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
    let mut args = args;
    let token = args.confirmation_token.take();
    submit(ctx, Order::from(args), token, confirmer).await
}

async fn submit(
    ctx: &ToolContext,
    order: Order,
    token: Option<String>,
    confirmer: Option<&dyn Confirmer>,
) -> Result<PlaceResult> {
    let trading = trading_of(ctx)?;
    let account = order.terms.account.clone();
    let plan = match Plan::evaluate(ctx, trading, order).await {
        Ok(plan) => plan,
        Err(e) => {
            refuse(trading, &account, "", &e);
            return Err(e);
        }
    };
    let key = plan.facts.inst.key.clone();
    let token_fingerprint = token_fingerprint(&plan.order, &key);
    let fingerprint = idempotency_fingerprint(&plan.order, &key);

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
    // Every rule passed: only a sized and valued order becomes a checked one, the one
    // kind a request is made of.
    let Some(checked) = plan.eval.checked.as_ref() else {
        let e = Rule::PriceAvailable.error("the order could not be valued");
        refuse(trading, &account, "", &e);
        return Err(e);
    };
    let (quantity, notional_base, value) =
        (checked.quantity(), checked.notional_base(), checked.value());

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

    // One transaction: the reservation's rules decided again, the token
    // redeemed, the key reserved and the attempt audited, all before the broker is
    // called.
    let now = trading.now();
    let now_text = rfc3339(now);
    let day = trading.today();
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
            if plan.order.terms.side == Side::Buy {
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
        // The rules another order can break meanwhile, decided again over the facts
        // as they stand now, by the functions the evaluation ran.
        let again = facts::reread(
            tx,
            trading,
            &plan.broker,
            &account,
            &plan.facts,
            checked.weight(),
        )?;
        rules::reservation(checked, &plan.facts, &again, &trading.settings).map_err(Error::from)?;
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
                    "order": NormalizedView::of(&plan.order, &key),
                    "quantity": quantity.to_string(),
                    "notional_base": value.to_string(),
                    "base_currency": plan.facts.base.code(),
                    "reduces_only": checked.reduces(),
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

    let request = checked.request(client_order_id.clone());
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
        .tx::<_, ErrorWrap>(|tx| {
            Ok(idempotency::get(
                tx,
                &plan.order.terms.account,
                client_order_id,
            )?)
        })
        .map_err(Error::from)?;
    let Some(record) = existing else {
        return Ok(None);
    };
    if record.fingerprint != fingerprint {
        return Ok(Some(Err(reused_error(
            trading,
            &plan.order.terms.account,
            client_order_id,
            &record,
        ))));
    }
    Ok(Some(replay(timeout, trading, &plan.broker, &record).await))
}

/// A client order id already used for another order: refused and audited.
fn reused_error(trading: &Trading, account: &str, client_order_id: &str, record: &Record) -> Error {
    let e = Rule::ClientOrderIdReused
        .error(&format!(
            "{} was used for a different order",
            quoted(client_order_id)
        ))
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
                plan.order.terms.mode.as_str()
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
                &plan.order.terms.account,
                token_fingerprint,
                expires,
            )?)
        })
        .map_err(Error::from)?;
    match confirmer
        .confirm(
            &plan.order.confirmation_text(
                &plan.facts.inst.key,
                quantity,
                plan.facts.inst.unit,
                notional_base,
                plan.facts.base,
            ),
            &token,
        )
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
            return Err(Rule::TicketFound.error(&format!(
                "ticket {} is {}, not {}",
                quoted(ticket),
                book.instrument(t.instrument).key.symbol,
                key.symbol
            )));
        }
        return Ok((*t).clone());
    }
    let open: Vec<&str> = here
        .iter()
        .filter(|t| book.instrument(t.instrument).key.symbol == key.symbol)
        .map(|t| t.ticket.as_str())
        .collect();
    Err(Rule::TicketFound.error(&format!(
        "account {account} has no open ticket {}{}",
        quoted(ticket),
        if open.is_empty() {
            format!(" (nothing of {} is open)", key.symbol)
        } else {
            format!("; {} tickets open: {}", key.symbol, open.join(", "))
        }
    )))
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
    let tickets: Vec<(&str, Side, Decimal)> = here
        .iter()
        .map(|t| (t.ticket.as_str(), t.side, t.quantity))
        .collect();
    if let Some(f) = rules::one_way(account, key, tool, &tickets).failure() {
        return Err(f.into());
    }
    Ok(())
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
    let quantity = rules::close_quantity(
        &args.account,
        &inst.key,
        held,
        args.quantity.map(|q| q.0),
        ticket.as_deref(),
    )?;
    let side = if held.is_sign_positive() {
        Side::Sell
    } else {
        Side::Buy
    };
    let mut order = Order::market(args.account, inst.key.qualified(), side, quantity, mode);
    order.terms.ticket = ticket;
    order.client_order_id = args.client_order_id;
    order.reduce_only = true;
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
        let e = Rule::KillSwitch.error("modify_position is refused while the kill switch is on");
        audit_refusal(&e);
        return Err(e);
    }
    let (sl, tp) = (args.stop_loss.map(|n| n.0), args.take_profit.map(|n| n.0));
    if let Some(f) = rules::levels_given(sl, tp).failure() {
        return Err(f.into());
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
    if let Some(f) = rules::position_held(&args.account, &inst.key, held).failure() {
        return Err(f.into());
    }
    let quote = broker
        .quote(&args.account, &inst.key.qualified())
        .await
        .map_err(|e| Rule::PriceAvailable.error(&e.to_string()))?;
    let long = held.is_sign_positive();
    // A long position exits at the bid, a short one at the ask.
    let price = if long { quote.bid } else { quote.ask };
    // The same rules, in the same words, as an order's levels.
    let levels = [("stop_loss", sl), ("take_profit", tp)];
    for check in [
        rules::price_positive(&levels),
        rules::tick_size(&levels, inst.tick),
    ] {
        if let Some(f) = check.failure() {
            return Err(f.into());
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
        return Err(failed.rule.error(&failed.detail));
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
            let rule = Rule::OrderReference;
            return Err(Error::rule(
                rule.code(),
                rule.name(),
                "pass exactly one of order_id and client_order_id",
                rule.hint(),
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
