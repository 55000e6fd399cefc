//! `get_snapshots` (the `marketdata` toolset; docs/methodology/research.md, "Snapshots"):
//! several symbols' latest trade, bid and ask, the day's open, high, low, close and
//! volume, the previous close and the change, from one account's broker in one request
//! where the broker batches, bounded by `broker_timeout`. A symbol the broker does not
//! know is listed in `unknown_symbols` with its reason; a figure it does not give is
//! null, never a made-up zero.

use chrono::{DateTime, SecondsFormat, Utc};
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_brokers::BrokerError;
use tradedesk_brokers::market_snapshot::{MAX_SNAPSHOT_SYMBOLS, MarketSnapshot};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{Error, ErrorCode, Result};

use crate::context::ToolContext;
use crate::num::Num;
use crate::tool::{Call, Meta, Tool, notes_suffix};

/// The brokers that serve snapshots, for `not_supported` and `unknown_account` hints.
pub const SNAPSHOT_BROKERS: &str = "Alpaca, Moomoo / Futu OpenD, Hyperliquid, IBKR through TWS or IB Gateway and MetaTrader (DWX) accounts, and the sim (SIM-PAPER in the demo)";

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotsArgs {
    /// An account that quotes (get_accounts; the demo's is SIM-PAPER).
    pub account: String,
    /// 1 to 100 symbols, bare or EXCHANGE:SYMBOL as get_quote takes them.
    pub symbols: Vec<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotRow {
    /// As asked.
    pub symbol: String,
    /// EXCHANGE:SYMBOL, as the other tools take it.
    pub market: String,
    pub currency: Option<String>,
    /// The latest trade's price.
    pub last: Option<Num>,
    /// Its size.
    pub last_size: Option<Num>,
    /// Its time (RFC 3339, UTC).
    pub last_time: Option<String>,
    pub bid: Option<Num>,
    pub ask: Option<Num>,
    /// The broker's own mid, else the middle of bid and ask.
    pub mid: Option<Num>,
    /// A perp's mark.
    pub mark: Option<Num>,
    /// The day so far (the latest session's): its open.
    pub open: Option<Num>,
    pub high: Option<Num>,
    pub low: Option<Num>,
    /// The day's latest close.
    pub close: Option<Num>,
    /// Traded today, in units (shares, coins, contracts).
    pub volume: Option<Num>,
    /// Value traded today, in currency.
    pub turnover: Option<Num>,
    /// The trading day of those figures (YYYY-MM-DD), where the broker says.
    pub session_date: Option<String>,
    /// The previous session's close.
    pub prev_close: Option<Num>,
    /// The price (change_from) less prev_close.
    pub change: Option<Num>,
    /// change as a % of prev_close, 2 places.
    pub change_pct: Option<Num>,
    /// Which price the change is from: last, close, mark or mid.
    pub change_from: Option<&'static str>,
    /// When the broker stamped the figures.
    pub time: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct UnknownRow {
    pub symbol: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct SnapshotsResult {
    pub account: String,
    /// Snapshots answered.
    pub count: usize,
    /// Distinct symbols asked.
    pub asked: usize,
    /// The most symbols one call takes.
    pub limit: usize,
    pub snapshots: Vec<SnapshotRow>,
    /// Symbols the broker does not know or did not answer, with the reason.
    pub unknown_symbols: Vec<UnknownRow>,
    /// Requests sent to the broker (one where it batches).
    pub requests: usize,
    pub notes: Vec<String>,
}

impl SnapshotsResult {
    /// The summary line, without the notes.
    pub fn summary(&self) -> String {
        let top: Vec<String> = self
            .snapshots
            .iter()
            .take(5)
            .map(|r| {
                let price = match r.change_from {
                    Some("last") => r.last,
                    Some("close") => r.close,
                    Some("mark") => r.mark,
                    Some("mid") => r.mid,
                    _ => None,
                };
                format!(
                    "{} {}{}",
                    r.market,
                    price.map_or_else(|| "n/a".to_owned(), |p| p.0.to_string()),
                    r.change_pct
                        .map(|c| format!(
                            " ({}{}%)",
                            if c.0 >= Decimal::ZERO { "+" } else { "" },
                            c.0
                        ))
                        .unwrap_or_default()
                )
            })
            .collect();
        let unknown: Vec<&str> = self
            .unknown_symbols
            .iter()
            .map(|u| u.symbol.as_str())
            .collect();
        format!(
            "{} of {} symbol(s) at {}{}{}.",
            self.count,
            self.asked,
            self.account,
            if top.is_empty() {
                String::new()
            } else {
                format!(": {}", top.join("; "))
            },
            if unknown.is_empty() {
                String::new()
            } else {
                format!("; not answered: {}", unknown.join(", "))
            }
        )
    }
}

fn time(t: Option<DateTime<Utc>>) -> Option<String> {
    t.map(|t| t.to_rfc3339_opts(SecondsFormat::Millis, true))
}

fn num(d: Option<Decimal>) -> Option<Num> {
    d.map(|d| Num(d.normalize()))
}

/// The symbols to ask: trimmed, duplicates dropped (first kept), 1 to the limit.
fn symbols_of(asked: &[String]) -> Result<(Vec<String>, usize)> {
    let mut out: Vec<String> = Vec::with_capacity(asked.len());
    for (i, s) in asked.iter().enumerate() {
        let s = s.trim();
        if s.is_empty() {
            return Err(Error::invalid_argument(
                format!("symbols[{i}]: empty"),
                "give each symbol as get_quote takes it: AAPL, NASDAQ:AAPL, BURSA:1155, BTC",
            ));
        }
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    }
    if out.is_empty() || out.len() > MAX_SNAPSHOT_SYMBOLS {
        return Err(Error::invalid_argument(
            format!(
                "symbols: {} distinct symbols; a call takes 1 to {MAX_SNAPSHOT_SYMBOLS}",
                out.len()
            ),
            format!(
                "give 1 to {MAX_SNAPSHOT_SYMBOLS} symbols; split a longer list over several calls"
            ),
        ));
    }
    let dropped = asked.len() - out.len();
    Ok((out, dropped))
}

fn row(s: MarketSnapshot) -> SnapshotRow {
    let mid = s.mid.or(match (s.bid, s.ask) {
        (Some(b), Some(a)) if b <= a => Some((b + a) / Decimal::TWO),
        _ => None,
    });
    let (from, price) = [
        ("last", s.last),
        ("close", s.close),
        ("mark", s.mark),
        ("mid", mid),
    ]
    .into_iter()
    .find_map(|(name, p)| p.map(|p| (name, p)))
    .map_or((None, None), |(n, p)| (Some(n), Some(p)));
    let change = match (price, s.prev_close) {
        (Some(p), Some(c)) => Some(p - c),
        _ => None,
    };
    let change_pct = match (change, s.prev_close) {
        (Some(ch), Some(c)) if !c.is_zero() => ch
            .checked_div(c)
            .map(|r| (r * Decimal::ONE_HUNDRED).round_dp(2)),
        _ => None,
    };
    SnapshotRow {
        symbol: s.symbol,
        market: s.market,
        currency: s.currency.map(|c| c.code().to_owned()),
        last: num(s.last),
        last_size: num(s.last_size),
        last_time: time(s.last_time),
        bid: num(s.bid),
        ask: num(s.ask),
        mid: num(mid),
        mark: num(s.mark),
        open: num(s.open),
        high: num(s.high),
        low: num(s.low),
        close: num(s.close),
        volume: num(s.volume),
        turnover: num(s.turnover),
        session_date: s.session_date.map(|d| d.to_string()),
        prev_close: num(s.prev_close),
        change: change.map(|c| Num(c.normalize())),
        change_pct: change_pct.map(|c| Num(c.normalize())),
        change_from: from.filter(|_| change.is_some()),
        time: time(s.time),
    }
}

/// `get_snapshots`.
///
/// # Errors
/// `invalid_argument` (no symbols, an empty one, more than the limit);
/// `unknown_account`; `not_supported` for an account whose broker has no snapshots
/// (naming those that do); the broker's failures (`broker_timeout` past
/// `broker_timeout`). Symbols the broker does not know are not an error.
pub async fn get_snapshots(ctx: &ToolContext, a: SnapshotsArgs) -> Result<SnapshotsResult> {
    let (symbols, dropped) = symbols_of(&a.symbols)?;
    let broker = ctx.broker_for(&a.account).ok_or_else(|| {
        Error::new(
            ErrorCode::UnknownAccount,
            format!("no account {}", quoted(&a.account)),
            format!("get_accounts lists the accounts; snapshots are served by {SNAPSHOT_BROKERS}"),
        )
    })?;
    let answer = tokio::time::timeout(
        ctx.broker_timeout,
        broker.market_snapshots(&a.account, &symbols),
    )
    .await
    .unwrap_or_else(|_| {
        Err(BrokerError::Timeout {
            account: a.account.clone(),
            timeout: ctx.broker_timeout,
        })
    });
    let answer = match answer {
        Ok(answer) => answer.in_order_of(&symbols),
        Err(BrokerError::Unsupported { .. }) => {
            return Err(Error::new(
                ErrorCode::NotSupported,
                format!("account {} does not serve snapshots", quoted(&a.account)),
                format!(
                    "get_snapshots is served by {SNAPSHOT_BROKERS}; get_accounts lists the accounts"
                ),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    let mut notes = answer.notes;
    if dropped > 0 {
        notes.push(format!("{dropped} repeated symbol(s) asked once"));
    }
    let snapshots: Vec<SnapshotRow> = answer.rows.into_iter().map(row).collect();
    Ok(SnapshotsResult {
        account: a.account,
        count: snapshots.len(),
        asked: symbols.len(),
        limit: MAX_SNAPSHOT_SYMBOLS,
        snapshots,
        unknown_symbols: answer
            .unknown
            .into_iter()
            .map(|u| UnknownRow {
                symbol: u.symbol,
                reason: u.reason,
            })
            .collect(),
        requests: answer.requests,
        notes,
    })
}

/// get_snapshots.
#[derive(Debug)]
pub struct GetSnapshots;

impl Tool for GetSnapshots {
    type Args = SnapshotsArgs;
    type Output = SnapshotsResult;
    const META: Meta = Meta::live(
        "get_snapshots",
        "Snapshots",
        crate::toolset::Toolset::MarketData,
        "Several symbols at once (1 to 100) at one account: last trade, bid, \
                ask, the day's open, high, low, close and volume, the previous close and the \
                change (absolute and %), in one request where the broker batches. A symbol \
                the broker does not know is listed in unknown_symbols, not an error; a figure \
                it does not give is null.",
    );

    async fn run(call: &mut Call<'_>, a: SnapshotsArgs) -> Result<SnapshotsResult> {
        get_snapshots(call.ctx, a).await
    }

    fn summary(r: &SnapshotsResult) -> String {
        format!("{}{}", r.summary(), notes_suffix(&r.notes))
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"account": "SIM-PAPER", "symbols": ["AAPL", "EURUSD", "BTC-PERP", "NOPE"]})
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rust_decimal_macros::dec;

    #[test]
    fn the_change_is_from_the_first_price_given() {
        let r = row(MarketSnapshot {
            symbol: "A".into(),
            market: "X:A".into(),
            last: Some(dec!(101.5)),
            close: Some(dec!(101)),
            prev_close: Some(dec!(100)),
            bid: Some(dec!(101.4)),
            ask: Some(dec!(101.6)),
            ..MarketSnapshot::default()
        });
        assert_eq!(r.change_from, Some("last"));
        assert_eq!(r.change, Some(Num(dec!(1.5))));
        assert_eq!(r.change_pct, Some(Num(dec!(1.5))));
        assert_eq!(r.mid, Some(Num(dec!(101.5))));
        // Only a mid: the change is from it; no previous close: no change at all.
        let r = row(MarketSnapshot {
            bid: Some(dec!(3)),
            ask: Some(dec!(4)),
            prev_close: Some(dec!(3)),
            ..MarketSnapshot::default()
        });
        assert_eq!(
            (r.change_from, r.change),
            (Some("mid"), Some(Num(dec!(0.5))))
        );
        assert_eq!(r.change_pct, Some(Num(dec!(16.67))));
        let r = row(MarketSnapshot {
            last: Some(dec!(3)),
            ..MarketSnapshot::default()
        });
        assert_eq!((r.change_from, r.change, r.change_pct), (None, None, None));
        // A crossed quote has no mid.
        let r = row(MarketSnapshot {
            bid: Some(dec!(5)),
            ask: Some(dec!(4)),
            ..MarketSnapshot::default()
        });
        assert_eq!(r.mid, None);
    }

    #[test]
    fn symbols_are_trimmed_deduplicated_and_capped() {
        let (s, dropped) = symbols_of(&[" AAPL".into(), "AAPL".into(), "JPM".into()]).unwrap();
        assert_eq!((s, dropped), (vec!["AAPL".to_owned(), "JPM".to_owned()], 1));
        assert!(symbols_of(&[]).is_err());
        assert!(
            symbols_of(&[" ".into()])
                .unwrap_err()
                .message
                .contains("symbols[0]")
        );
        let many: Vec<String> = (0..101).map(|i| format!("S{i}")).collect();
        let e = symbols_of(&many).unwrap_err();
        assert!(e.message.contains("101") && e.hint.contains("100"), "{e}");
        assert!(symbols_of(&many[..100]).is_ok());
    }
}
