//! The trading tools' declarations: orders, previews and the write tools (their code is
//! in [`super::orders`]).

use serde_json::{Value, json};
use tradedesk_core::Result;

use super::orders::{
    CancelArgs, CancelResult, CloseArgs, ModifyArgs, ModifyResult, OrdersArgs, OrdersResult,
    PlaceArgs, PlaceResult, PreviewArgs, PreviewResult, cancel_order, close_position, get_orders,
    modify_position, place_order, preview_order,
};
use crate::tool::{Call, Meta, Tool, notes_suffix};

/// get_orders.
#[derive(Debug)]
pub struct GetOrders;

impl Tool for GetOrders {
    type Args = OrdersArgs;
    type Output = OrdersResult;
    const META: Meta = Meta::live(
        "get_orders",
        "Orders",
        crate::toolset::Toolset::Trading,
        "Orders at the brokers, newest first (working by default, closed, or \
                all) with fills, prices, stop-loss / take-profit, status and mode. Look an order \
                up here by client_order_id after an uncertain outcome.",
    );

    async fn run(call: &mut Call<'_>, a: OrdersArgs) -> Result<OrdersResult> {
        get_orders(call.ctx, a).await
    }

    fn summary(r: &OrdersResult) -> String {
        format!("{} order(s).{}", r.count, notes_suffix(&r.notes))
    }

    fn example() -> Value {
        json!({"status": "all"})
    }
}

/// preview_order.
#[derive(Debug)]
pub struct PreviewOrder;

impl Tool for PreviewOrder {
    type Args = PreviewArgs;
    type Output = PreviewResult;
    const META: Meta = Meta::live(
        "preview_order",
        "Preview an order",
        crate::toolset::Toolset::Trading,
        "Checks an order without sending it: the normalized order, its valuation \
                (the highest of its limit, its stop and the current quote, in the base currency), \
                commission, margin, and every validation and policy rule with passed/detail. When \
                allowed, a single-use confirmation_token bound to these exact arguments, for \
                place_order. Show the user the plan first.",
    )
    .trading();

    async fn run(call: &mut Call<'_>, a: PreviewArgs) -> Result<PreviewResult> {
        preview_order(call.ctx, a).await
    }

    fn summary(r: &PreviewResult) -> String {
        let failed: Vec<&str> = r
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.rule)
            .collect();
        if r.allowed {
            format!(
                "{} order allowed: valued at {} {}; confirmation_token valid until {}.{}",
                r.mode,
                r.estimate
                    .notional_base
                    .map_or_else(|| "-".to_owned(), |n| n.0.to_string()),
                r.estimate.base_currency,
                r.expires_at.as_deref().unwrap_or("-"),
                notes_suffix(&r.notes)
            )
        } else {
            format!(
                "{} order NOT allowed; failed rules: {}.{}",
                r.mode,
                failed.join(", "),
                notes_suffix(&r.notes)
            )
        }
    }

    fn example() -> Value {
        json!({"account": "SIM-PAPER", "symbol": "AAPL", "side": "buy", "quantity": 3,
            "type": "limit", "limit_price": 280, "stop_loss": 260, "take_profit": 300})
    }
}

fn order_summary(r: &PlaceResult) -> String {
    format!(
        "{} order {} ({}): {}, filled {} at {}{}. {}",
        r.mode,
        r.order_id,
        r.client_order_id,
        r.outcome,
        r.filled_quantity.0,
        r.average_price
            .map_or_else(|| "-".to_owned(), |p| p.0.to_string()),
        if r.replayed {
            ", replayed from the first call"
        } else {
            ""
        },
        Value::String(r.message.clone())
    )
}

/// place_order.
#[derive(Debug)]
pub struct PlaceOrder;

impl Tool for PlaceOrder {
    type Args = PlaceArgs;
    type Output = PlaceResult;
    const META: Meta = Meta::live(
        "place_order",
        "Place an order",
        crate::toolset::Toolset::Trading,
        "Sends an order (paper unless mode is live and the account allows it) \
                after every server-side guard, with preview_order's confirmation_token for the \
                same arguments when confirmation is on. A retry with the same client_order_id \
                returns the first outcome (replayed: true), never a second order. On an uncertain \
                outcome look the order up with get_orders; do not resend. MetaTrader takes no \
                slippage (the EA's order command has none).",
    )
    .writes();

    async fn run(call: &mut Call<'_>, a: PlaceArgs) -> Result<PlaceResult> {
        place_order(call.ctx, a, call.confirmer).await
    }

    fn summary(r: &PlaceResult) -> String {
        order_summary(r)
    }

    fn example() -> Value {
        json!({"account": "SIM-PAPER", "symbol": "AAPL", "side": "buy", "quantity": 3,
            "type": "limit", "limit_price": 280, "stop_loss": 260, "take_profit": 300, "client_order_id": "docs-1"})
    }
}

/// close_position.
#[derive(Debug)]
pub struct ClosePosition;

impl Tool for ClosePosition {
    type Args = CloseArgs;
    type Output = PlaceResult;
    const META: Meta = Meta::live(
        "close_position",
        "Close a position",
        crate::toolset::Toolset::Trading,
        "Closes all (default) or part of an open position with a market order on \
                the opposite side; allowed while the kill switch is on. Its confirmation_token \
                comes from preview_order of that market order (with its ticket, if any).",
    )
    .writes();

    async fn run(call: &mut Call<'_>, a: CloseArgs) -> Result<PlaceResult> {
        close_position(call.ctx, a, call.confirmer).await
    }

    fn summary(r: &PlaceResult) -> String {
        order_summary(r)
    }

    fn example() -> Value {
        json!({"account": "SIM-PAPER", "symbol": "AAPL", "quantity": 1, "client_order_id": "docs-2"})
    }
}

/// modify_position.
#[derive(Debug)]
pub struct ModifyPosition;

impl Tool for ModifyPosition {
    type Args = ModifyArgs;
    type Output = ModifyResult;
    const META: Meta = Meta::live(
        "modify_position",
        "Modify stop-loss / take-profit",
        crate::toolset::Toolset::Trading,
        "Sets the stop-loss and/or take-profit of an open position. A long's \
                stop-loss must be below the bid and take-profit above it; a short's, the reverse.",
    )
    .writes();

    async fn run(call: &mut Call<'_>, a: ModifyArgs) -> Result<ModifyResult> {
        modify_position(call.ctx, a).await
    }

    fn summary(r: &ModifyResult) -> String {
        format!(
            "{} {}: stop-loss {}, take-profit {}.",
            r.mode,
            r.symbol,
            r.stop_loss
                .map_or_else(|| "none".to_owned(), |n| n.0.to_string()),
            r.take_profit
                .map_or_else(|| "none".to_owned(), |n| n.0.to_string())
        )
    }

    fn example() -> Value {
        json!({"account": "SIM-PAPER", "symbol": "AAPL", "stop_loss": 265})
    }
}

/// cancel_order.
#[derive(Debug)]
pub struct CancelOrder;

impl Tool for CancelOrder {
    type Args = CancelArgs;
    type Output = CancelResult;
    const META: Meta = Meta::live(
        "cancel_order",
        "Cancel an order",
        crate::toolset::Toolset::Trading,
        "Cancels a working order by order_id or client_order_id: cancelled, or \
                not_cancellable when it already filled, expired or was cancelled. Allowed while \
                the kill switch is on.",
    )
    .writes();

    async fn run(call: &mut Call<'_>, a: CancelArgs) -> Result<CancelResult> {
        cancel_order(call.ctx, a).await
    }

    fn summary(r: &CancelResult) -> String {
        format!("{} order {}: {}.", r.mode, r.order_id, r.outcome)
    }

    fn example() -> Value {
        json!({"account": "SIM-PAPER", "client_order_id": "docs-1"})
    }
}
