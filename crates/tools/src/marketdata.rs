//! The `marketdata` toolset (docs/tools.md, "Market data"): `list_markets` and
//! `get_recent_trades` for the perps venues (Hyperliquid and the sim), served from every
//! configured account whose broker offers them, each call bounded by `broker_timeout`.
//! Money is `Decimal`; a figure a venue does not give is null, never a made-up zero.

use std::sync::Arc;

use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_brokers::{Broker, BrokerError};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{Currency, Error, ErrorCode, Result};

use crate::context::ToolContext;
use crate::num::Num;
use crate::tool::{Call, Meta, Tool, notes_suffix};

/// The brokers that serve the perps market tools, for `not_supported` hints.
pub const PERPS_VENUES: &str =
    "Hyperliquid accounts and the sim (SIM-PAPER in the demo, whose perp is PERP:BTC-PERP)";

/// `list_markets`' default and largest `limit`.
pub const MARKETS_DEFAULT: usize = 50;
pub const MARKETS_MAX: usize = 500;
/// `get_recent_trades`' default and largest `limit`.
pub const TRADES_DEFAULT: usize = 20;
pub const TRADES_MAX: usize = 100;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListMarketsArgs {
    /// A perps account (get_accounts); default: every account whose broker lists perps.
    pub account: Option<String>,
    /// Markets listed, largest open interest first; default 50, at most 500.
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct MarketRow {
    pub account: String,
    /// EXCHANGE:SYMBOL, as the quote and perps tools take it.
    pub market: String,
    /// The venue's own name (Hyperliquid's coin).
    pub name: String,
    pub mark: Num,
    /// The oracle (index) price; null where the venue has none.
    pub oracle: Option<Num>,
    /// Funding rate of one period, as a fraction; null where unknown.
    pub funding_rate: Option<Num>,
    /// Hours in a funding period; null where the venue has no funding.
    pub funding_period_hours: Option<u32>,
    /// In units of the market; null where unknown.
    pub open_interest: Option<Num>,
    /// open_interest x mark, in USD, rounded to cents.
    pub open_interest_usd: Option<Num>,
    pub max_leverage: u32,
    /// The smallest size, and the size step.
    pub min_size: Num,
    /// False once the venue has delisted it.
    pub open: bool,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct ListMarketsResult {
    pub count: usize,
    /// Markets the venues list; more than count when truncated.
    pub total: usize,
    pub limit: usize,
    pub truncated: bool,
    pub markets: Vec<MarketRow>,
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecentTradesArgs {
    /// A perp: BTC, BTC-PERP, HYPERLIQUID:BTC-PERP, PERP:BTC-PERP.
    pub market: String,
    /// Default: the first Hyperliquid account, else the first account that knows it.
    pub account: Option<String>,
    /// Trades listed, newest first; default 20, at most 100.
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct TradeRow {
    /// RFC 3339, UTC.
    pub time: String,
    pub price: Num,
    pub size: Num,
    /// The taker's side: buy lifted the ask, sell hit the bid.
    pub side: &'static str,
    /// price x size, in USD, rounded to cents.
    pub value_usd: Num,
    /// The venue's trade id, when it gives one.
    pub id: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct RecentTradesResult {
    pub account: String,
    pub market: String,
    pub count: usize,
    /// Trades the venue answered; more than count when truncated.
    pub total: usize,
    pub limit: usize,
    pub truncated: bool,
    pub trades: Vec<TradeRow>,
    pub notes: Vec<String>,
}

fn check_limit(limit: Option<usize>, default: usize, max: usize) -> Result<usize> {
    let limit = limit.unwrap_or(default);
    if (1..=max).contains(&limit) {
        Ok(limit)
    } else {
        Err(Error::invalid_argument(
            format!("limit: {limit} is outside 1..={max}"),
            format!("give a limit from 1 to {max} (default {default})"),
        ))
    }
}

fn not_supported(what: &str, account: Option<&str>) -> Error {
    Error::new(
        ErrorCode::NotSupported,
        match account {
            Some(a) => format!("account {} does not serve {what}", quoted(a)),
            None => format!("no configured account serves {what}"),
        },
        format!("{what} is served by {PERPS_VENUES}; get_accounts lists the accounts"),
    )
}

fn unknown_account(id: &str) -> Error {
    Error::new(
        ErrorCode::UnknownAccount,
        format!("no account {}", quoted(id)),
        format!("get_accounts lists the accounts; {PERPS_VENUES} serve the perps market tools"),
    )
}

/// A broker call bounded by the context's `broker_timeout`.
pub(crate) async fn bounded<T>(
    ctx: &ToolContext,
    account: &str,
    call: impl std::future::Future<Output = std::result::Result<T, BrokerError>>,
) -> std::result::Result<T, BrokerError> {
    tokio::time::timeout(ctx.broker_timeout, call)
        .await
        .unwrap_or_else(|_| {
            Err(BrokerError::Timeout {
                account: account.to_owned(),
                timeout: ctx.broker_timeout,
            })
        })
}

/// The accounts to ask: the named one, or every served one.
fn candidates(
    ctx: &ToolContext,
    account: Option<&str>,
) -> Result<Vec<(tradedesk_core::Account, Arc<dyn Broker>)>> {
    let mut all = ctx.served_accounts();
    if let Some(id) = account {
        all.retain(|(a, _)| a.id == id);
        if all.is_empty() {
            return Err(unknown_account(id));
        }
    }
    Ok(all)
}

fn usd(v: Decimal) -> Num {
    Num(Currency::USD.round(v))
}

/// `list_markets`.
///
/// # Errors
/// `unknown_account`; `not_supported` for an account (or a configuration) without a
/// perps venue; `invalid_argument` for a limit out of range; a named account's broker
/// failures. Without `account`, a venue that fails is named in a note and the others
/// answer.
pub async fn list_markets(ctx: &ToolContext, a: ListMarketsArgs) -> Result<ListMarketsResult> {
    let limit = check_limit(a.limit, MARKETS_DEFAULT, MARKETS_MAX)?;
    let named = a.account.as_deref();
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut served = 0usize;
    for (account, broker) in candidates(ctx, named)? {
        match bounded(ctx, &account.id, broker.perp_markets(&account.id)).await {
            Ok(listing) => {
                served += 1;
                notes.extend(listing.notes);
                rows.extend(listing.markets.into_iter().map(|m| MarketRow {
                    account: account.id.clone(),
                    open_interest_usd: m.open_interest.map(|oi| usd(oi * m.mark)),
                    market: m.market,
                    name: m.name,
                    mark: Num(m.mark.normalize()),
                    oracle: m.oracle.map(|o| Num(o.normalize())),
                    funding_rate: m.funding_rate.map(|f| Num(f.normalize())),
                    funding_period_hours: m.funding_period_hours,
                    open_interest: m.open_interest.map(|o| Num(o.normalize())),
                    max_leverage: m.max_leverage,
                    min_size: Num(m.size_step.normalize()),
                    open: m.open,
                }));
            }
            Err(BrokerError::Unsupported { .. }) if named.is_none() => {}
            Err(BrokerError::Unsupported { .. }) => {
                return Err(not_supported("list_markets", named));
            }
            Err(e) if named.is_some() => return Err(e.into()),
            Err(e) => {
                served += 1;
                notes.push(format!("{}: left out: {e}", account.id));
            }
        }
    }
    if served == 0 {
        return Err(not_supported("list_markets", named));
    }
    // Open markets first, then the largest open interest (unknown last), then by name.
    rows.sort_by(|x, y| {
        y.open
            .cmp(&x.open)
            .then_with(|| {
                let v = |r: &MarketRow| r.open_interest_usd.map(|n| n.0);
                v(y).cmp(&v(x))
            })
            .then_with(|| x.market.cmp(&y.market))
            .then_with(|| x.account.cmp(&y.account))
    });
    let total = rows.len();
    rows.truncate(limit);
    if total > rows.len() {
        notes.push(format!(
            "{} of {total} markets listed (limit {limit}, at most {MARKETS_MAX}): raise limit or name an account to see more",
            rows.len()
        ));
    }
    Ok(ListMarketsResult {
        count: rows.len(),
        total,
        limit,
        truncated: total > rows.len(),
        markets: rows,
        notes,
    })
}

/// `get_recent_trades`.
///
/// # Errors
/// `unknown_account`; `not_supported` for an account without a perps venue (naming the
/// ones that have one); `unknown_symbol`; `invalid_argument` for a limit out of range;
/// the venue's failures.
pub async fn get_recent_trades(
    ctx: &ToolContext,
    a: RecentTradesArgs,
) -> Result<RecentTradesResult> {
    let limit = check_limit(a.limit, TRADES_DEFAULT, TRADES_MAX)?;
    let named = a.account.as_deref();
    let mut accounts = candidates(ctx, named)?;
    accounts.sort_by_key(|(_, broker)| !broker.offers_perps());
    let mut last: Option<Error> = None;
    for (account, broker) in accounts {
        match bounded(
            ctx,
            &account.id,
            broker.recent_trades(&account.id, &a.market),
        )
        .await
        {
            Ok(tape) => {
                let total = tape.trades.len();
                let mut notes = tape.notes;
                let trades: Vec<TradeRow> = tape
                    .trades
                    .into_iter()
                    .take(limit)
                    .map(|t| TradeRow {
                        time: t.time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                        value_usd: usd(t.price * t.size),
                        price: Num(t.price.normalize()),
                        size: Num(t.size.normalize()),
                        side: match t.side {
                            tradedesk_core::Side::Buy => "buy",
                            tradedesk_core::Side::Sell => "sell",
                        },
                        id: t.id,
                    })
                    .collect();
                if total > trades.len() {
                    notes.push(format!(
                        "{} of the {total} latest trades listed (limit {limit}, at most {TRADES_MAX})",
                        trades.len()
                    ));
                }
                return Ok(RecentTradesResult {
                    account: account.id,
                    market: tape.market,
                    count: trades.len(),
                    total,
                    limit,
                    truncated: total > trades.len(),
                    trades,
                    notes,
                });
            }
            Err(BrokerError::Unsupported { .. }) => {
                if named.is_some() {
                    return Err(not_supported("get_recent_trades", named));
                }
            }
            Err(e) if named.is_some() => return Err(e.into()),
            Err(e) => {
                // An unknown symbol at one venue: try the next; keep the first real error.
                let keep = match &last {
                    None => true,
                    Some(prev) => {
                        prev.code == ErrorCode::UnknownSymbol
                            && !matches!(e, BrokerError::UnknownSymbol { .. })
                    }
                };
                if keep {
                    last = Some(e.into());
                }
            }
        }
    }
    Err(last.unwrap_or_else(|| not_supported("get_recent_trades", None)))
}

/// list_markets.
#[derive(Debug)]
pub struct ListMarkets;

impl Tool for ListMarkets {
    type Args = ListMarketsArgs;
    type Output = ListMarketsResult;
    const META: Meta = Meta::live(
        "list_markets",
        "Perpetual markets",
        crate::toolset::Toolset::MarketData,
        "Every perpetual market of the perps venues (Hyperliquid, the sim): \
                mark, oracle price, funding rate per period, open interest (units and USD), \
                maximum leverage, minimum size, and whether it is open; open markets with the \
                largest open interest first, capped at limit. A figure a venue does not give \
                is null.",
    );

    async fn run(call: &mut Call<'_>, a: ListMarketsArgs) -> Result<ListMarketsResult> {
        list_markets(call.ctx, a).await
    }

    fn summary(r: &ListMarketsResult) -> String {
        let top: Vec<String> = r
            .markets
            .iter()
            .take(5)
            .map(|m| {
                format!(
                    "{} mark {} funding {}",
                    m.market,
                    m.mark.0,
                    m.funding_rate
                        .map_or_else(|| "n/a".to_owned(), |f| f.0.to_string())
                )
            })
            .collect();
        format!(
            "{} of {} market(s){}: {}.{}",
            r.count,
            r.total,
            if r.truncated { " (truncated)" } else { "" },
            top.join("; "),
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"account": "SIM-PAPER"})
    }
}

/// get_recent_trades.
#[derive(Debug)]
pub struct GetRecentTrades;

impl Tool for GetRecentTrades {
    type Args = RecentTradesArgs;
    type Output = RecentTradesResult;
    const META: Meta = Meta::live(
        "get_recent_trades",
        "Recent trades",
        crate::toolset::Toolset::MarketData,
        "The latest trades printed on a perps venue's market (anyone's, not \
                the account's): time, price, size, the taker's side and value, newest first, \
                capped at limit.",
    );

    async fn run(call: &mut Call<'_>, a: RecentTradesArgs) -> Result<RecentTradesResult> {
        get_recent_trades(call.ctx, a).await
    }

    fn summary(r: &RecentTradesResult) -> String {
        let latest = r.trades.first().map_or_else(
            || "no trades".to_owned(),
            |t| {
                format!(
                    "latest {} {} at {} ({})",
                    t.side, t.size.0, t.price.0, t.time
                )
            },
        );
        format!(
            "{} at {}: {} of {} trade(s), {latest}.{}",
            r.market,
            r.account,
            r.count,
            r.total,
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"market": "BTC-PERP", "account": "SIM-PAPER", "limit": 3})
    }
}
