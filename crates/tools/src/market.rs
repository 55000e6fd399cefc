//! Market data: `get_quote` and `get_bars` (from an account's broker or the sim, or from
//! a CSV file), with the semantics of docs/methodology/research.md.

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tradedesk_core::error::quote as quoted;
use tradedesk_core::{AssetClass, Error, ErrorCode, Interval, Result};

use crate::bars::{self, BarSeries, read_csv, resolve_path, sample_indices};
use crate::context::ToolContext;
use crate::num::Num;
use crate::tool::{Call, Meta, Tool};

/// Re-exported for the research tools.
pub use bars::Bar;

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuoteArgs {
    /// An account that quotes (see get_accounts; the demo's is SIM-PAPER).
    pub account: String,
    /// Bare (AAPL, EURUSD, XAUUSD) or qualified (NASDAQ:AAPL).
    pub symbol: String,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct QuoteResult {
    pub account: String,
    pub exchange: String,
    pub symbol: String,
    pub bid: Num,
    pub ask: Num,
    pub mid: Num,
    pub spread: Num,
    /// The spread in pips, for FX and metals; null otherwise.
    pub spread_pips: Option<Num>,
    pub currency: String,
    pub time: String,
    /// Quantity increment.
    pub lot_step: Num,
    pub min_quantity: Num,
    pub tick: Num,
    pub unit: &'static str,
    /// Units per quantity of 1 (100000 for an FX lot).
    pub multiplier: Num,
}

/// `get_quote`.
///
/// # Errors
/// `unknown_account`, `unknown_symbol`, `not_supported` (an account without quotes).
pub async fn get_quote(ctx: &ToolContext, args: QuoteArgs) -> Result<QuoteResult> {
    let broker = ctx.broker_for(&args.account).ok_or_else(|| {
        Error::new(
            ErrorCode::UnknownAccount,
            format!("no account {}", quoted(&args.account)),
            "get_accounts lists the accounts; the sim account quotes every demo symbol",
        )
    })?;
    let inst = broker
        .instrument(&args.account, &args.symbol)
        .await
        .map_err(Error::from)?;
    let q = broker
        .quote(&args.account, &inst.key.qualified())
        .await
        .map_err(Error::from)?;
    let spread = q.ask - q.bid;
    let pips = matches!(inst.asset_class, AssetClass::Fx | AssetClass::Cfd)
        .then_some(inst.pip)
        .flatten()
        .filter(|p| !p.is_zero())
        .map(|p| Num((spread / p).round_dp(1)));
    Ok(QuoteResult {
        account: args.account,
        exchange: q.key.exchange.clone(),
        symbol: q.key.symbol.clone(),
        bid: Num(q.bid),
        ask: Num(q.ask),
        mid: Num(((q.bid + q.ask) / Decimal::TWO).normalize()),
        spread: Num(spread),
        spread_pips: pips,
        currency: q.currency.code().to_owned(),
        time: q.time.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        lot_step: Num(inst.lot_step),
        min_quantity: Num(inst.min_quantity),
        tick: Num(inst.tick),
        unit: inst.unit,
        multiplier: Num(inst.multiplier),
    })
}

/// Where bars come from.
// Read by hand (the schema is the untagged pair), so a source that is neither says which
// keys are missing or do not go together.
#[derive(Debug, Clone, JsonSchema)]
#[serde(untagged)]
pub enum BarSource {
    Csv(CsvSource),
    Broker(BrokerSource),
}

impl<'de> Deserialize<'de> for BarSource {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Keys {
            csv: Option<String>,
            symbol: Option<String>,
            account: Option<String>,
            interval: Option<String>,
            start: Option<String>,
            end: Option<String>,
        }
        let k = Keys::deserialize(d)?;
        let broker_keys = k.symbol.is_some()
            || k.account.is_some()
            || k.interval.is_some()
            || k.start.is_some()
            || k.end.is_some();
        match (k.csv, k.symbol, k.account) {
            (Some(csv), ..) if !broker_keys => Ok(BarSource::Csv(CsvSource { csv })),
            (Some(_), ..) => Err(D::Error::custom(
                "csv goes alone: give {\"csv\": PATH}, or symbol and account (with interval, start, end) for a broker's bars",
            )),
            (None, Some(symbol), Some(account)) => Ok(BarSource::Broker(BrokerSource {
                symbol,
                account,
                interval: k.interval,
                start: k.start,
                end: k.end,
            })),
            (None, Some(_), None) => Err(D::Error::custom(
                "missing account: a symbol's bars come from an account's broker (get_accounts lists them; SIM-PAPER in the demo)",
            )),
            (None, None, _) => Err(D::Error::custom(
                "missing csv (a file of bars) or symbol and account (a broker's bars)",
            )),
        }
    }
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CsvSource {
    /// A CSV file: date or time, open, high, low, close and optional volume columns.
    pub csv: String,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BrokerSource {
    pub symbol: String,
    /// An account whose broker serves bars (SIM-PAPER in the demo).
    pub account: String,
    /// 1m, 5m, 15m, 1h or 1d (default 1d).
    pub interval: Option<String>,
    /// YYYY-MM-DD or RFC 3339 (default: 250 intervals before end).
    pub start: Option<String>,
    /// YYYY-MM-DD (the whole day) or RFC 3339 (default: now).
    pub end: Option<String>,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BarsArgs {
    /// A CSV file, or a symbol's bars at an account.
    pub source: BarSource,
    /// Default 250; 0 means all; else at least 2.
    pub max_rows: Option<usize>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BarView {
    pub time: String,
    pub open: f64,
    pub high: f64,
    pub low: f64,
    pub close: f64,
    pub volume: Option<f64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
pub struct BarsResult {
    pub symbol: String,
    pub interval: Option<String>,
    pub count: usize,
    pub total: usize,
    pub truncated: bool,
    pub stride: usize,
    pub bars: Vec<BarView>,
}

/// A `start` or `end` bound: RFC 3339, or a date (UTC midnight; its last second for an end).
pub(crate) fn parse_bound(name: &str, text: &str, end_of_day: bool) -> Result<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
        Error::new(
            ErrorCode::InvalidDate,
            format!(
                "{name}: {} is neither YYYY-MM-DD nor RFC 3339",
                quoted(text)
            ),
            "write dates as 2026-11-30 or times as 2026-11-30T14:30:00Z",
        )
    })?;
    let day = date.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    Ok(if end_of_day {
        day + chrono::Duration::days(1) - chrono::Duration::seconds(1)
    } else {
        day
    })
}

/// Loads a bar source in full.
///
/// # Errors
/// `invalid_argument` for a bad file, path or interval; broker errors.
pub async fn load_bars(ctx: &ToolContext, source: &BarSource) -> Result<BarSeries> {
    match source {
        BarSource::Csv(CsvSource { csv }) => {
            let path = resolve_path(csv, ctx.data_dirs.as_deref())?;
            read_csv(&path)
        }
        BarSource::Broker(b) => {
            let interval_text = b.interval.as_deref().unwrap_or("1d");
            let interval = Interval::parse(interval_text).ok_or_else(|| {
                Error::invalid_argument(
                    format!(
                        "source.interval: {} is not an interval",
                        quoted(interval_text)
                    ),
                    "use one of 1m, 5m, 15m, 1h, 1d",
                )
            })?;
            let broker = ctx.broker_for(&b.account).ok_or_else(|| {
                Error::new(
                    ErrorCode::UnknownAccount,
                    format!("source.account: no account {}", quoted(&b.account)),
                    "get_accounts lists the accounts",
                )
            })?;
            let now = ctx.trading.as_ref().map_or_else(Utc::now, |t| t.now());
            let end = match &b.end {
                Some(text) => parse_bound("source.end", text, true)?,
                None => now,
            };
            let start = match &b.start {
                Some(text) => parse_bound("source.start", text, false)?,
                None => end - chrono::Duration::seconds(interval.seconds() * 250),
            };
            if start > end {
                return Err(Error::new(
                    ErrorCode::InvalidDateRange,
                    "source.start is after source.end",
                    "swap them, or omit start for the 250 intervals before end",
                ));
            }
            let inst = broker
                .instrument(&b.account, &b.symbol)
                .await
                .map_err(Error::from)?;
            let bars = broker
                .bars(&b.account, &inst.key.qualified(), interval, start, end)
                .await
                .map_err(Error::from)?;
            Ok(BarSeries {
                symbol: inst.key.symbol.clone(),
                interval: Some(interval.as_str().to_owned()),
                bars,
            })
        }
    }
}

/// `get_bars`.
///
/// # Errors
/// As [`load_bars`], and `invalid_argument` for `max_rows` 1.
pub async fn get_bars(ctx: &ToolContext, args: BarsArgs) -> Result<BarsResult> {
    let max_rows = args.max_rows.unwrap_or(250);
    crate::bars::check_max_rows(max_rows)?;
    let series = load_bars(ctx, &args.source).await?;
    let total = series.bars.len();
    let (indices, stride) = sample_indices(total, max_rows)?;
    let bars: Vec<BarView> = indices
        .iter()
        .filter_map(|&i| series.bars.get(i))
        .map(|b| BarView {
            time: b.time.clone(),
            open: b.open,
            high: b.high,
            low: b.low,
            close: b.close,
            volume: b.volume,
        })
        .collect();
    Ok(BarsResult {
        symbol: series.symbol,
        interval: series.interval,
        count: bars.len(),
        total,
        truncated: bars.len() < total,
        stride,
        bars,
    })
}

/// get_quote.
#[derive(Debug)]
pub struct GetQuote;

impl Tool for GetQuote {
    type Args = QuoteArgs;
    type Output = QuoteResult;
    const META: Meta = Meta::live(
        "get_quote",
        "Quote",
        crate::toolset::Toolset::Market,
        "Bid, ask, mid and spread (in pips for FX and metals) of a symbol at an \
                account that quotes, with its trading rules: lot step, minimum, tick, unit. The \
                demo's SIM-PAPER quotes its stocks, FX pairs, XAUUSD and BTC-PERP.",
    );

    async fn run(call: &mut Call<'_>, a: QuoteArgs) -> Result<QuoteResult> {
        get_quote(call.ctx, a).await
    }

    fn summary(r: &QuoteResult) -> String {
        format!(
            "{}:{} bid {} ask {} spread {}{} {} at {}.",
            r.exchange,
            r.symbol,
            r.bid.0,
            r.ask.0,
            r.spread.0,
            r.spread_pips
                .map(|p| format!(" ({} pips)", p.0))
                .unwrap_or_default(),
            r.currency,
            r.time
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"account": "SIM-PAPER", "symbol": "EURUSD"})
    }
}

/// get_bars.
#[derive(Debug)]
pub struct GetBars;

impl Tool for GetBars {
    type Args = BarsArgs;
    type Output = BarsResult;
    const META: Meta = Meta::live(
        "get_bars",
        "Price bars",
        crate::toolset::Toolset::Market,
        "OHLCV bars from an account's broker or a CSV file. Long series are \
                thinned evenly to max_rows, keeping the first and last bar; total, stride and \
                truncated say how.",
    );

    async fn run(call: &mut Call<'_>, a: BarsArgs) -> Result<BarsResult> {
        get_bars(call.ctx, a).await
    }

    fn summary(r: &BarsResult) -> String {
        format!(
            "{} of {} bar(s) of {} (stride {}).",
            r.count, r.total, r.symbol, r.stride
        )
    }

    fn example() -> serde_json::Value {
        serde_json::json!({"source": {"symbol": "AAPL", "account": "SIM-PAPER", "interval": "1d",
            "start": "2026-11-02", "end": "2026-11-27"}, "max_rows": 4})
    }
}
