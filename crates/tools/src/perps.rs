//! Perpetual-futures quote tools: `quote_open_position`, `quote_leverage_ladder` and
//! `quote_close_position` (docs/methodology/research.md, "Leveraged perpetuals"). Isolated
//! margin; numbers are analytics (`f64`). The mark comes from the call, or live from an
//! account that trades the market (Hyperliquid, or the sim's perps).

// Analytics: floating point is the point here (docs/methodology/research.md).
#![allow(clippy::float_arithmetic, clippy::cast_precision_loss)]

use rust_decimal::prelude::ToPrimitive;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{Error, ErrorCode, Result};
use tradedesk_research::perps::{self, Position, Side};

use crate::args::PositionSideArg;
use crate::args::check_number as check;
use crate::context::ToolContext;
use crate::tool::{Call, Meta, Tool};

// What every perps quote shares (flattened into each one's arguments).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerpCommon {
    /// The mark price; or leave it out and name a `market`.
    pub mark_price: Option<f64>,
    /// A perp (BTC, PERP:BTC-PERP) whose live mark and maximum leverage come from
    /// `account` (default: the first Hyperliquid account, else the sim).
    pub market: Option<String>,
    /// The account whose market to read (with `market`).
    pub account: Option<String>,
    /// long or short.
    pub side: PositionSideArg,
    /// Margin posted (> 0).
    pub margin: f64,
    /// A whole number, default 1000 (or the live market's).
    pub max_leverage: Option<f64>,
    /// Fraction of notional, default 0.
    pub maintenance_margin_rate: Option<f64>,
    /// Fraction of notional per side, default 0.
    pub fee_rate: Option<f64>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct OpenArgs {
    #[serde(flatten)]
    pub common: PerpCommon,
    /// A whole number from 1 to max_leverage (10.0 reads as 10).
    pub leverage: f64,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct LadderArgs {
    #[serde(flatten)]
    pub common: PerpCommon,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct CloseArgs {
    #[serde(flatten)]
    pub common: PerpCommon,
    /// A whole number from 1 to max_leverage.
    pub leverage: f64,
    /// The price the position was opened at (> 0).
    pub entry_price: f64,
    /// Default: the mark.
    pub exit_price: Option<f64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LadderRung {
    pub price_move_pct: f64,
    pub exit_price: f64,
    /// After the opening and closing fees; -margin when liquidated.
    pub net_pnl: f64,
    pub liquidated: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct OpenResult {
    /// The market the mark came from, when read live.
    pub market: Option<String>,
    pub side: String,
    pub margin: f64,
    pub leverage: u32,
    pub max_leverage: u32,
    /// margin x leverage.
    pub notional: f64,
    /// The mark.
    pub entry_price: f64,
    /// notional / entry_price.
    pub size: f64,
    pub bust_price: f64,
    pub bust_distance_pct: f64,
    pub valid: bool,
    pub invalid_reason: Option<String>,
    pub ladder: Vec<LadderRung>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LadderStep {
    pub leverage: u32,
    pub notional: f64,
    pub bust_price: f64,
    pub bust_distance_pct: f64,
    pub valid: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct LadderResult {
    pub market: Option<String>,
    pub side: String,
    pub margin: f64,
    pub mark_price: f64,
    pub max_leverage: u32,
    pub steps: Vec<LadderStep>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct CloseResult {
    pub market: Option<String>,
    pub side: String,
    pub leverage: u32,
    pub entry_price: f64,
    pub exit_price: f64,
    pub size: f64,
    pub bust_price: f64,
    /// Price P&L before fees.
    pub raw_pnl: f64,
    /// fee_rate x notional to open plus fee_rate x size x exit to close.
    pub fees: f64,
    /// raw_pnl - fees, never below -margin; -margin when liquidated.
    pub net_pnl: f64,
    pub liquidated: bool,
}

fn whole(name: &str, v: f64, low: u32, high: u32) -> Result<u32> {
    let rule = format!("a whole number from {low} to {high}");
    check(
        name,
        v,
        |v| v.fract() == 0.0 && v >= f64::from(low) && v <= f64::from(high),
        &rule,
    )
    .map(|v| {
        // In range and whole, so exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let n = v as u32;
        n
    })
}

/// The mark and maximum leverage: given, or read live.
struct Mark {
    market: Option<String>,
    price: f64,
    max_leverage: u32,
}

/// The account to read `market` from: the named one, else the first at a perpetuals
/// venue (Hyperliquid; `Broker::offers_perps`), else the first that knows the market
/// (the sim's perps).
async fn live_mark(ctx: &ToolContext, market: &str, account: Option<&str>) -> Result<Mark> {
    let mut candidates = ctx.served_accounts();
    if let Some(id) = account {
        candidates.retain(|(a, _)| a.id == id);
        if candidates.is_empty() {
            return Err(Error::new(
                ErrorCode::UnknownAccount,
                format!("no account {}", quoted(id)),
                "get_accounts lists the accounts; leave account out to use the first Hyperliquid account or the sim",
            ));
        }
    }
    candidates.sort_by_key(|(_, broker)| !broker.offers_perps());
    let mut last = None;
    for (a, broker) in candidates {
        match broker.perp_market(&a.id, market).await {
            Ok(m) => {
                return Ok(Mark {
                    market: Some(m.market),
                    price: m.mark.to_f64().unwrap_or(f64::NAN),
                    max_leverage: m.max_leverage,
                });
            }
            Err(e) => last = Some(Error::from(e)),
        }
    }
    Err(last.unwrap_or_else(|| {
        Error::invalid_argument(
            format!("no configured account trades perpetual {}", quoted(market)),
            "pass mark_price instead, or configure a Hyperliquid account",
        )
    }))
}

/// The mark: `mark_price`, or the live one of `market`; with neither, `default` (a
/// price the caller already has, such as a given exit price) if any. The maximum
/// leverage is 1000 unless the market or `max_leverage` says otherwise.
async fn mark(ctx: &ToolContext, c: &PerpCommon, default: Option<f64>) -> Result<Mark> {
    let mut m = match (c.mark_price, &c.market) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid_argument(
                "both mark_price and market are given",
                "pass mark_price for a price of your own, or market to read the live mark, not both",
            ));
        }
        (Some(p), None) => Mark {
            market: None,
            price: check("mark_price", p, |v| v > 0.0 && v < 1e15, "above 0")?,
            max_leverage: 1000,
        },
        (None, Some(market)) => live_mark(ctx, market, c.account.as_deref()).await?,
        (None, None) => match default {
            Some(price) => Mark {
                market: None,
                price,
                max_leverage: 1000,
            },
            None => {
                return Err(Error::invalid_argument(
                    "missing argument mark_price (or market)",
                    "pass mark_price, or market (such as BTC) to read the live mark from a Hyperliquid account or the sim",
                ));
            }
        },
    };
    if let Some(max) = c.max_leverage {
        m.max_leverage = whole("max_leverage", max, 1, 1_000_000)?;
    }
    Ok(m)
}

fn position(c: &PerpCommon, entry: f64, leverage: u32) -> Result<Position> {
    Ok(Position {
        side: Side::from(c.side),
        entry,
        margin: check("margin", c.margin, |v| v > 0.0 && v < 1e15, "above 0")?,
        leverage: f64::from(leverage),
        maintenance_margin_rate: check(
            "maintenance_margin_rate",
            c.maintenance_margin_rate.unwrap_or(0.0),
            |v| (0.0..1.0).contains(&v),
            "from 0 to below 1",
        )?,
        fee_rate: check(
            "fee_rate",
            c.fee_rate.unwrap_or(0.0),
            |v| (0.0..1.0).contains(&v),
            "from 0 to below 1",
        )?,
    })
}

fn side_name(c: &PerpCommon) -> String {
    match c.side {
        PositionSideArg::Long => "long",
        PositionSideArg::Short => "short",
    }
    .to_owned()
}

/// `quote_open_position`.
///
/// # Errors
/// `invalid_argument` naming the argument out of its bounds; a live market's errors.
pub async fn quote_open_position(ctx: &ToolContext, a: OpenArgs) -> Result<OpenResult> {
    let m = mark(ctx, &a.common, None).await?;
    let leverage = whole("leverage", a.leverage, 1, m.max_leverage)?;
    let p = position(&a.common, m.price, leverage)?;
    let ladder = perps::MOVES
        .iter()
        .map(|&pct| {
            let exit = p.entry * (1.0 + pct / 100.0);
            let e = p.exit_at(exit);
            LadderRung {
                price_move_pct: pct,
                exit_price: exit,
                net_pnl: e.net_pnl,
                liquidated: e.liquidated,
            }
        })
        .collect();
    let invalid_reason = p.invalid_reason();
    Ok(OpenResult {
        market: m.market,
        side: side_name(&a.common),
        margin: p.margin,
        leverage,
        max_leverage: m.max_leverage,
        notional: p.notional(),
        entry_price: p.entry,
        size: p.size(),
        bust_price: p.bust_price(),
        bust_distance_pct: p.bust_distance_pct(),
        valid: invalid_reason.is_none(),
        invalid_reason,
        ladder,
    })
}

/// `quote_leverage_ladder`.
///
/// # Errors
/// As [`quote_open_position`].
pub async fn quote_leverage_ladder(ctx: &ToolContext, a: LadderArgs) -> Result<LadderResult> {
    let m = mark(ctx, &a.common, None).await?;
    let steps = perps::ladder_leverages(m.max_leverage)
        .into_iter()
        .map(|leverage| {
            let p = position(&a.common, m.price, leverage)?;
            Ok(LadderStep {
                leverage,
                notional: p.notional(),
                bust_price: p.bust_price(),
                bust_distance_pct: p.bust_distance_pct(),
                valid: p.invalid_reason().is_none(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(LadderResult {
        market: m.market,
        side: side_name(&a.common),
        margin: a.common.margin,
        mark_price: m.price,
        max_leverage: m.max_leverage,
        steps,
    })
}

/// `quote_close_position`.
///
/// # Errors
/// As [`quote_open_position`].
pub async fn quote_close_position(ctx: &ToolContext, a: CloseArgs) -> Result<CloseResult> {
    let entry = check(
        "entry_price",
        a.entry_price,
        |v| v > 0.0 && v < 1e15,
        "above 0",
    )?;
    // The mark is needed only as the default exit price (and for a live maximum).
    let m = mark(ctx, &a.common, a.exit_price).await?;
    let (market, exit, max_leverage) = (m.market, a.exit_price.unwrap_or(m.price), m.max_leverage);
    let exit = check("exit_price", exit, |v| v > 0.0 && v < 1e15, "above 0")?;
    let leverage = whole("leverage", a.leverage, 1, max_leverage)?;
    let p = position(&a.common, entry, leverage)?;
    let e = p.exit_at(exit);
    Ok(CloseResult {
        market,
        side: side_name(&a.common),
        leverage,
        entry_price: entry,
        exit_price: exit,
        size: p.size(),
        bust_price: p.bust_price(),
        raw_pnl: e.raw_pnl,
        fees: e.fees,
        net_pnl: e.net_pnl,
        liquidated: e.liquidated,
    })
}

/// quote_open_position.
#[derive(Debug)]
pub struct QuoteOpenPosition;

impl Tool for QuoteOpenPosition {
    type Args = OpenArgs;
    type Output = OpenResult;
    const META: Meta = Meta::live(
        "quote_open_position",
        "Quote a leveraged perp position",
        crate::toolset::Toolset::Perps,
        "How far can this perp move before I am liquidated? For an \
                isolated-margin perpetual position (margin x leverage at a mark price, or a \
                market's live mark): notional, size, bust price and its distance, validity, and \
                net P&L after fees at moves of -10, -5, -1, +1, +5 and +10%.",
    )
    .flat_args();

    async fn run(call: &mut Call<'_>, a: OpenArgs) -> Result<OpenResult> {
        quote_open_position(call.ctx, a).await
    }

    fn summary(r: &OpenResult) -> String {
        format!(
            "{} {}x: notional {}, size {}, bust price {} ({:.4}% away){}.",
            r.side,
            r.leverage,
            r.notional,
            r.size,
            r.bust_price,
            r.bust_distance_pct,
            r.invalid_reason
                .as_ref()
                .map(|w| format!("; NOT valid: {w}"))
                .unwrap_or_default()
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"mark_price": 92000, "side": "long", "margin": 1000,
            "leverage": 20, "maintenance_margin_rate": 0.005, "fee_rate": 0.00045})
    }
}

/// quote_leverage_ladder.
#[derive(Debug)]
pub struct QuoteLeverageLadder;

impl Tool for QuoteLeverageLadder {
    type Args = LadderArgs;
    type Output = LadderResult;
    const META: Meta = Meta::live(
        "quote_leverage_ladder",
        "Leverage ladder",
        crate::toolset::Toolset::Perps,
        "Bust price and its distance for one isolated-margin perp position at \
                leverage 1, 2, 3, 5, 10, 25, 50, 100, 250, 500 and 1000 below the maximum, and at \
                the maximum.",
    )
    .flat_args();

    async fn run(call: &mut Call<'_>, a: LadderArgs) -> Result<LadderResult> {
        quote_leverage_ladder(call.ctx, a).await
    }

    fn summary(r: &LadderResult) -> String {
        let steps: Vec<String> = r
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{}x bust {} ({:.2}%)",
                    s.leverage, s.bust_price, s.bust_distance_pct
                )
            })
            .collect();
        format!("{} at {}: {}.", r.side, r.mark_price, steps.join(", "))
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"mark_price": 92000, "side": "short", "margin": 1000,
            "max_leverage": 50})
    }
}

/// quote_close_position.
#[derive(Debug)]
pub struct QuoteClosePosition;

impl Tool for QuoteClosePosition {
    type Args = CloseArgs;
    type Output = CloseResult;
    const META: Meta = Meta::live(
        "quote_close_position",
        "Quote closing a perp position",
        crate::toolset::Toolset::Perps,
        "Closing an isolated-margin perp position opened at entry_price: raw \
                P&L, fees (open and close), net P&L, and whether it was liquidated on the way \
                (net P&L is then -margin, never below).",
    )
    .flat_args();

    async fn run(call: &mut Call<'_>, a: CloseArgs) -> Result<CloseResult> {
        quote_close_position(call.ctx, a).await
    }

    fn summary(r: &CloseResult) -> String {
        format!(
            "{} {}x from {} to {}: raw P&L {}, fees {}, net P&L {}{}.",
            r.side,
            r.leverage,
            r.entry_price,
            r.exit_price,
            r.raw_pnl,
            r.fees,
            r.net_pnl,
            if r.liquidated { " (liquidated)" } else { "" }
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"mark_price": 95000, "side": "long", "margin": 1000,
            "leverage": 10, "entry_price": 92000, "fee_rate": 0.00045})
    }
}
