//! `search_instruments` (docs/tools.md; the rule: docs/methodology/instruments.md,
//! "Instrument search"): symbol and name matches
//! from every configured account whose broker can search (or the one named), each with
//! the qualified `EXCHANGE:SYMBOL` the quote, bar and order tools take and the trading
//! rules the broker gives. Exact symbols first, then symbols that start with the query,
//! then names whose words start with the query's words (the rule is
//! `tradedesk_brokers::search`'s); each account's call is bounded by `broker_timeout`.
//! A rule a broker does not give is null, never a made-up figure.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_brokers::search::{Found, InstrumentMatches, InstrumentQuery, MatchKind};
use tradedesk_brokers::{Broker, BrokerError};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{AssetClass, Error, ErrorCode, Result};

use crate::context::ToolContext;
use crate::num::Num;
use crate::tool::{Call, Meta, Tool, notes_suffix};

/// What each broker searches, for hints and the docs.
pub const SEARCHERS: &str = "Alpaca (its asset list), IBKR over TWS (its matching symbols), Moomoo / Futu OpenD (the market's static list), Hyperliquid (its perp universe), MetaTrader (the symbols the EA and the config know), IBKR Flex and book files (the instruments of the account's own book), and the sim (its instrument table; SIM-PAPER in the demo)";

/// The default and largest `limit`.
pub const SEARCH_DEFAULT: usize = 20;
pub const SEARCH_MAX: usize = 100;
/// The longest query taken.
pub const QUERY_MAX: usize = 100;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// A symbol, its start, or words of the name: AAPL, NASDAQ:AA, "coca cola", 1155, BTC.
    pub query: String,
    /// Search this account only (get_accounts); default every account.
    pub account: Option<String>,
    /// equity, etf, fund, bond, option, future, fx, cfd, crypto or perp.
    pub asset_class: Option<String>,
    /// Results listed; default 20, at most 100.
    pub limit: Option<usize>,
}

/// The trading rules a broker gives; null where it gives none.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Rules {
    /// The smallest quantity an order may have.
    pub min_quantity: Option<Num>,
    /// Quantities are whole multiples of this.
    pub lot_step: Option<Num>,
    /// Shares per board lot, where the exchange trades in lots (HKEX, Bursa).
    pub lot_size: Option<Num>,
    /// The price increment.
    pub tick: Option<Num>,
    /// Units per quantity of 1.
    pub multiplier: Option<Num>,
    /// What a quantity counts: shares, lots, contracts, coins.
    pub unit: Option<&'static str>,
    pub fractionable: Option<bool>,
    pub shortable: Option<bool>,
    pub easy_to_borrow: Option<bool>,
    pub marginable: Option<bool>,
    pub max_leverage: Option<u32>,
    /// Isolated margin only (no cross margin).
    pub only_isolated: Option<bool>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct InstrumentRow {
    pub account: String,
    /// EXCHANGE:SYMBOL, as get_quote, get_bars and place_order take it.
    pub instrument: String,
    pub exchange: String,
    pub symbol: String,
    /// The broker's own code where it differs (Futu HK.00700, a Hyperliquid coin, an
    /// IBKR contract id).
    pub venue_symbol: Option<String>,
    pub name: Option<String>,
    pub currency: Option<String>,
    pub asset_class: &'static str,
    /// Whether the broker lets the account trade it now; null where its source does
    /// not say (a book's instruments).
    pub tradable: Option<bool>,
    /// symbol, symbol_prefix, name, or broker (the broker's own search found it).
    pub matched: &'static str,
    pub rules: Rules,
}

/// One account searched.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct Searched {
    pub account: String,
    /// What was searched; or why the account is left out.
    pub source: String,
    /// Instruments of this account that matched (before the limit).
    pub matched: usize,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SearchResult {
    pub query: String,
    pub asset_class: Option<&'static str>,
    pub count: usize,
    /// Instruments that matched; more than count when truncated.
    pub total: usize,
    pub limit: usize,
    pub truncated: bool,
    /// Best first: exact symbols, symbol prefixes, name matches.
    pub instruments: Vec<InstrumentRow>,
    pub searched: Vec<Searched>,
    pub notes: Vec<String>,
}

fn invalid(message: String, hint: &str) -> Error {
    Error::invalid_argument(message, hint)
}

fn not_supported(account: Option<&str>) -> Error {
    Error::new(
        ErrorCode::NotSupported,
        match account {
            Some(a) => format!("account {} cannot search instruments", quoted(a)),
            None => "no configured account can search instruments".to_owned(),
        },
        format!("search_instruments is served by {SEARCHERS}; get_accounts lists the accounts"),
    )
}

fn check(a: &SearchArgs) -> Result<(InstrumentQuery, usize)> {
    let text = a.query.trim();
    if text.is_empty() || !text.chars().any(char::is_alphanumeric) {
        return Err(invalid(
            format!("query: {} names nothing to search", quoted(&a.query)),
            "give a symbol (AAPL), its start (AA), EXCHANGE:SYMBOL (NASDAQ:AAPL) or words of the name (coca cola)",
        ));
    }
    if text.chars().count() > QUERY_MAX {
        return Err(invalid(
            format!(
                "query: {} characters, more than {QUERY_MAX}",
                text.chars().count()
            ),
            "give a symbol or a few words of the name",
        ));
    }
    let class = match a.asset_class.as_deref().map(str::trim) {
        None | Some("") => None,
        Some(c) => Some(AssetClass::parse(&c.to_ascii_lowercase()).ok_or_else(|| {
            invalid(
                format!("asset_class: {} is not an asset class", quoted(c)),
                &format!(
                    "give one of {} (or leave it out)",
                    AssetClass::ALL.map(AssetClass::as_str).join(", ")
                ),
            )
        })?),
    };
    let limit = a.limit.unwrap_or(SEARCH_DEFAULT);
    if !(1..=SEARCH_MAX).contains(&limit) {
        return Err(invalid(
            format!("limit: {limit} is outside 1..={SEARCH_MAX}"),
            &format!("give a limit from 1 to {SEARCH_MAX} (default {SEARCH_DEFAULT})"),
        ));
    }
    Ok((InstrumentQuery::new(text, class), limit))
}

/// One account's search, bounded by `timeout`.
async fn ask(
    broker: Arc<dyn Broker>,
    account: String,
    query: InstrumentQuery,
    timeout: Duration,
) -> std::result::Result<InstrumentMatches, BrokerError> {
    match tokio::time::timeout(timeout, broker.search_instruments(&account, &query)).await {
        Ok(answer) => answer,
        Err(_) => Err(BrokerError::Timeout { account, timeout }),
    }
}

fn num(d: Option<rust_decimal::Decimal>) -> Option<Num> {
    d.map(|d| Num(d.normalize()))
}

fn row(account: &str, f: Found) -> InstrumentRow {
    let i = f.instrument;
    let r = i.rules;
    InstrumentRow {
        account: account.to_owned(),
        instrument: i.key.qualified(),
        exchange: i.key.exchange,
        symbol: i.key.symbol,
        venue_symbol: i.venue_symbol,
        name: i.name,
        currency: i.currency,
        asset_class: i.asset_class.as_str(),
        tradable: i.tradable,
        matched: f.matched.as_str(),
        rules: Rules {
            min_quantity: num(r.min_quantity),
            lot_step: num(r.lot_step),
            lot_size: num(r.lot_size),
            tick: num(r.tick),
            multiplier: num(r.multiplier),
            unit: r.unit,
            fractionable: r.fractionable,
            shortable: r.shortable,
            easy_to_borrow: r.easy_to_borrow,
            marginable: r.marginable,
            max_leverage: r.max_leverage,
            only_isolated: r.only_isolated,
        },
    }
}

/// `search_instruments`.
///
/// # Errors
/// `invalid_argument` for an empty or too long query, an unknown asset class or a limit
/// out of range; `unknown_account`; `not_supported` for a named account whose broker
/// cannot search; a named account's broker failures. Without `account`, an account that
/// fails is named in the notes and the others answer; when every one fails, the first
/// failure is the error.
pub async fn search_instruments(ctx: &ToolContext, a: SearchArgs) -> Result<SearchResult> {
    let (query, limit) = check(&a)?;
    let named = a.account.as_deref();
    let mut accounts = ctx.served_accounts();
    if let Some(id) = named {
        accounts.retain(|(acc, _)| acc.id == id);
        if accounts.is_empty() {
            return Err(Error::new(
                ErrorCode::UnknownAccount,
                format!("no account {}", quoted(id)),
                format!(
                    "get_accounts lists the accounts; leave account out to search them all ({SEARCHERS})"
                ),
            ));
        }
    }
    let asks: Vec<_> = accounts
        .into_iter()
        .map(|(acc, broker)| {
            let handle = tokio::spawn(ask(
                broker,
                acc.id.clone(),
                query.clone(),
                ctx.broker_timeout,
            ));
            (acc.id, handle)
        })
        .collect();
    let mut found: Vec<(String, Found)> = Vec::new();
    let mut searched = Vec::new();
    let mut notes = Vec::new();
    let mut answered = 0usize;
    let mut first_failure: Option<Error> = None;
    for (account, handle) in asks {
        let answer = handle.await.unwrap_or_else(|e| {
            Err(BrokerError::Unavailable {
                account: account.clone(),
                detail: format!("the search failed unexpectedly: {e}"),
                hint: "retry; the server is still running".to_owned(),
            })
        });
        match answer {
            Ok(m) => {
                answered += 1;
                searched.push(Searched {
                    account: account.clone(),
                    source: m.source,
                    matched: m.found.len(),
                });
                notes.extend(m.notes);
                found.extend(m.found.into_iter().map(|f| (account.clone(), f)));
            }
            Err(BrokerError::Unsupported { .. }) if named.is_some() => {
                return Err(not_supported(named));
            }
            Err(BrokerError::Unsupported { .. }) => {}
            Err(e) if named.is_some() => return Err(e.into()),
            Err(e) => {
                searched.push(Searched {
                    account: account.clone(),
                    source: format!("left out: {e}"),
                    matched: 0,
                });
                notes.push(format!("{account}: left out: {e}"));
                first_failure.get_or_insert_with(|| e.into());
            }
        }
    }
    if answered == 0 {
        return Err(first_failure.unwrap_or_else(|| not_supported(named)));
    }
    // Best match first; then what can be traded now, then the shorter (nearer) symbol.
    let tradable_rank = |t: Option<bool>| match t {
        Some(true) => 0,
        None => 1,
        Some(false) => 2,
    };
    found.sort_by(|(xa, x), (ya, y)| {
        let (xi, yi) = (&x.instrument, &y.instrument);
        x.matched
            .cmp(&y.matched)
            .then_with(|| tradable_rank(xi.tradable).cmp(&tradable_rank(yi.tradable)))
            .then_with(|| xi.key.symbol.len().cmp(&yi.key.symbol.len()))
            .then_with(|| xi.key.cmp(&yi.key))
            .then_with(|| xa.cmp(ya))
    });
    let total = found.len();
    let instruments: Vec<InstrumentRow> = found
        .into_iter()
        .take(limit)
        .map(|(account, f)| row(&account, f))
        .collect();
    if total > instruments.len() {
        notes.push(format!(
            "{} of {total} matches listed (limit {limit}, at most {SEARCH_MAX}): raise limit, give more of the symbol or name, or name an account or asset_class",
            instruments.len()
        ));
    }
    if total == 0 {
        notes.push(format!(
            "nothing matched {}: give fewer letters of the symbol, the first word of the name, or another asset_class",
            quoted(&query.text)
        ));
    }
    if instruments
        .iter()
        .any(|r| r.matched == MatchKind::Broker.as_str())
    {
        notes.push(
            "matched broker: the broker's own search found it by a rule of its own (a word of the name tradedesk is not shown, a former symbol)"
                .to_owned(),
        );
    }
    Ok(SearchResult {
        query: query.text,
        asset_class: query.asset_class.map(AssetClass::as_str),
        count: instruments.len(),
        total,
        limit,
        truncated: total > instruments.len(),
        instruments,
        searched,
        notes,
    })
}

/// search_instruments.
#[derive(Debug)]
pub struct SearchInstruments;

impl Tool for SearchInstruments {
    type Args = SearchArgs;
    type Output = SearchResult;
    const META: Meta = Meta::live(
        "search_instruments",
        "Search instruments",
        crate::toolset::Toolset::MarketData,
        "Finds instruments by symbol or name in every account (or one): each \
                with the EXCHANGE:SYMBOL the quote, bar and order tools take, its currency, \
                class, whether it is tradable and the broker's trading rules (null where it \
                gives none); exact symbols first, then symbol prefixes, then names.",
    );

    async fn run(call: &mut Call<'_>, a: SearchArgs) -> Result<SearchResult> {
        search_instruments(call.ctx, a).await
    }

    fn summary(r: &SearchResult) -> String {
        let top: Vec<String> = r
            .instruments
            .iter()
            .take(5)
            .map(|i| {
                format!(
                    "{} ({}, {}){}",
                    i.instrument,
                    i.account,
                    i.name.as_deref().unwrap_or(i.asset_class),
                    if i.tradable == Some(false) {
                        " not tradable"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        format!(
            "{} of {} match(es) for {}{}{}{}.{}",
            r.count,
            r.total,
            quoted(&r.query),
            if r.truncated { " (truncated)" } else { "" },
            if top.is_empty() { "" } else { ": " },
            top.join("; "),
            notes_suffix(&r.notes)
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"query": "apple", "limit": 5})
    }
}
