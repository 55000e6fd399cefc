//! A fake of Hyperliquid's `POST /info` on loopback: it dispatches on the body's `type`
//! as the venue does, answers numbers as strings where Hyperliquid does, pages fills at
//! 2,000, refuses a malformed wallet with a 422, and can be told to hang or fail. On
//! demand it answers fills the ways the venue really does (`docs/dev/dwx-hyperliquid-facts.md`
//! B.5): without `tid` (2023 answers), newest first, in pages capped below 2,000, and only
//! the most recent of them (the venue keeps 10,000); partial fills of one order share its
//! hash.

#![allow(dead_code, unreachable_pub)]

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use rust_decimal::Decimal;
use serde_json::{Value, json};

#[derive(Debug, Clone)]
pub struct HlMarket {
    pub coin: String,
    pub mark: String,
    pub mid: String,
    pub funding: String,
    pub open_interest: String,
    pub max_leverage: u32,
    pub sz_decimals: u32,
    /// `oraclePx`; `None` is the mark.
    pub oracle: Option<String>,
    /// Sends `isDelisted: true` in the universe (the venue leaves it out otherwise).
    pub delisted: bool,
}

/// One print of a coin's tape, as `recentTrades` answers it (the venue's `WsTrade`).
#[derive(Debug, Clone)]
pub struct HlTrade {
    pub coin: String,
    /// "B" (the taker bought) or "A" (the taker sold).
    pub side: String,
    pub px: String,
    pub sz: String,
    pub time: i64,
    pub tid: u64,
}

#[derive(Debug, Clone)]
pub struct HlPosition {
    pub coin: String,
    /// Signed size.
    pub szi: String,
    pub entry_px: String,
    pub unrealized_pnl: String,
    pub liquidation_px: Option<String>,
    pub leverage: u32,
}

/// One execution of the wallet. The fake works out what the venue adds to it: the
/// position before it (`startPosition`), its `dir`, its average-cost `closedPnl`, and its
/// order's `hash` (shared by every partial fill of one order).
#[derive(Debug, Clone)]
pub struct HlFill {
    pub coin: String,
    pub px: String,
    pub sz: String,
    /// "B" (buy) or "A" (sell).
    pub side: String,
    pub time: i64,
    pub fee: String,
    pub tid: u64,
    /// The order's id; `None` is `tid * 10`, an order of its own.
    pub oid: Option<u64>,
}

impl HlFill {
    pub fn new(coin: &str, side: &str, sz: &str, px: &str, time: i64, tid: u64) -> Self {
        Self {
            coin: coin.into(),
            px: px.into(),
            sz: sz.into(),
            side: side.into(),
            time,
            fee: "0.0".into(),
            tid,
            oid: None,
        }
    }

    pub fn fee(mut self, fee: &str) -> Self {
        self.fee = fee.into();
        self
    }

    /// A partial fill of order `oid`: it shares the order's hash.
    pub fn order(mut self, oid: u64) -> Self {
        self.oid = Some(oid);
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HlFailure {
    #[default]
    None,
    /// Accept and never answer.
    Hang,
    ServerError,
}

#[derive(Debug, Clone, Default)]
pub struct HlState {
    pub wallet: String,
    pub markets: Vec<HlMarket>,
    pub positions: Vec<HlPosition>,
    pub account_value: String,
    /// Every fill the wallet ever made, in execution order for one instant.
    pub fills: Vec<HlFill>,
    /// Fills per `userFillsByTime` answer; `None` is the documented 2,000. The venue's
    /// docs also say time-range answers stop at 500.
    pub page_cap: Option<usize>,
    /// Only this many most recent fills are served (the venue keeps 10,000); the older
    /// ones still count in `startPosition` and in the positions.
    pub retention: Option<usize>,
    /// Fills as the venue answered them in 2023 (the SDK's recorded answers): no `tid`,
    /// no `feeToken`.
    pub legacy_fills: bool,
    /// Answers newest first, as the recorded 2023 answers are (one instant's fills stay
    /// in the order they were made).
    pub newest_first: bool,
    /// Every market's tape, any order: `recentTrades` answers a coin's newest first.
    pub trades: Vec<HlTrade>,
    /// A coin's asset-context fields sent as given here instead of the defaults
    /// (`prevDayPx` the mark, `dayBaseVlm` "100.0", `dayNtlVlm` "1000000.0", `midPx` the
    /// mid); a `null` is sent as null, as the venue does for a coin with no mid.
    pub contexts: HashMap<String, serde_json::Map<String, Value>>,
    pub failure: HlFailure,
    /// Every request body's `type`, in order.
    pub requests: Vec<String>,
    /// Coins `meta` marks isolated-only (`onlyIsolated: true`, `marginMode:
    /// "strictIsolated"`; the venue leaves both out otherwise).
    pub isolated_only: Vec<String>,
    /// `meta` also answers a universe row without a name (unkind).
    pub nameless_meta_row: bool,
}

#[derive(Debug)]
pub struct HlFake {
    pub url: String,
    pub state: Arc<Mutex<HlState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HlFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl HlFake {
    pub async fn start(state: HlState) -> HlFake {
        let state = Arc::new(Mutex::new(state));
        let app = Router::new()
            .route("/info", post(info))
            .with_state(Arc::clone(&state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let url = format!(
            "http://{}",
            listener
                .local_addr()
                .unwrap_or_else(|e| panic!("addr: {e}"))
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        HlFake { url, state, task }
    }

    pub fn fail(&self, f: HlFailure) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failure = f;
    }

    pub fn requests(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .requests
            .clone()
    }
}

fn unprocessable(text: &str) -> Response {
    (StatusCode::UNPROCESSABLE_ENTITY, text.to_owned()).into_response()
}

fn wallet_ok(v: &Value) -> bool {
    v.as_str().is_some_and(|s| {
        s.len() == 42 && s.starts_with("0x") && s[2..].chars().all(|c| c.is_ascii_hexdigit())
    })
}

async fn info(State(state): State<Arc<Mutex<HlState>>>, body: String) -> Response {
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        return unprocessable("Failed to deserialize the JSON body into the target type");
    };
    let kind = body.get("type").and_then(Value::as_str).unwrap_or("");
    let failure = {
        let mut s = state.lock().unwrap_or_else(PoisonError::into_inner);
        s.requests.push(kind.to_owned());
        s.failure
    };
    match failure {
        HlFailure::Hang => {
            tokio::time::sleep(std::time::Duration::from_secs(3_600)).await;
        }
        HlFailure::ServerError => {
            return (StatusCode::INTERNAL_SERVER_ERROR, "").into_response();
        }
        HlFailure::None => {}
    }
    let s = state.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let answer = match kind {
        "metaAndAssetCtxs" => json!([
            {"universe": s.markets.iter().map(|m| {
                let mut u = json!({
                    "name": m.coin, "szDecimals": m.sz_decimals, "maxLeverage": m.max_leverage,
                    "marginTableId": m.max_leverage});
                if m.delisted {
                    u["isDelisted"] = json!(true);
                }
                u
            }).collect::<Vec<_>>()},
            s.markets.iter().map(|m| {
                let mut ctx = json!({
                    "funding": m.funding, "openInterest": m.open_interest, "prevDayPx": m.mark,
                    "dayNtlVlm": "1000000.0", "premium": "0.0001",
                    "oraclePx": m.oracle.as_deref().unwrap_or(&m.mark),
                    "markPx": m.mark, "midPx": m.mid, "impactPxs": [m.mid, m.mid],
                    "dayBaseVlm": "100.0"});
                for (k, v) in s.contexts.get(&m.coin).into_iter().flatten() {
                    ctx[k] = v.clone();
                }
                ctx
            }).collect::<Vec<_>>(),
        ]),
        "meta" => {
            let mut universe: Vec<Value> = s
                .markets
                .iter()
                .map(|m| {
                    let mut u = json!({"szDecimals": m.sz_decimals, "name": m.coin,
                        "maxLeverage": m.max_leverage, "marginTableId": m.max_leverage});
                    if m.delisted {
                        u["isDelisted"] = json!(true);
                    }
                    if s.isolated_only.contains(&m.coin) {
                        u["onlyIsolated"] = json!(true);
                        u["marginMode"] = json!("strictIsolated");
                    }
                    u
                })
                .collect();
            if s.nameless_meta_row {
                universe.insert(1, json!({"szDecimals": 2, "maxLeverage": 3}));
            }
            json!({"universe": universe, "marginTables": [], "collateralToken": 0})
        }
        "recentTrades" => {
            let Some(coin) = body.get("coin").and_then(Value::as_str) else {
                return unprocessable("Failed to deserialize the JSON body into the target type");
            };
            let mut rows: Vec<&HlTrade> = s.trades.iter().filter(|t| t.coin == coin).collect();
            rows.sort_by_key(|t| std::cmp::Reverse((t.time, t.tid)));
            rows.iter()
                .map(|t| {
                    json!({"coin": t.coin, "side": t.side, "px": t.px, "sz": t.sz,
                    "time": t.time, "hash": format!("0x{:064x}", t.tid * 7),
                    "tid": t.tid, "users": [
                        format!("0x{:040x}", t.tid * 2), format!("0x{:040x}", t.tid * 2 + 1)]})
                })
                .collect::<Vec<_>>()
                .into()
        }
        "allMids" => Value::Object(
            s.markets
                .iter()
                .map(|m| (m.coin.clone(), json!(m.mid)))
                .collect(),
        ),
        "l2Book" => {
            let coin = body.get("coin").and_then(Value::as_str).unwrap_or("");
            let Some(m) = s.markets.iter().find(|m| m.coin == coin) else {
                return (StatusCode::OK, "null").into_response();
            };
            let mid: f64 = m.mid.parse().unwrap_or(0.0);
            json!({"coin": coin, "time": 1_796_050_800_000i64, "levels": [
                [{"px": format!("{:.1}", mid - 0.5), "sz": "1.5", "n": 3}],
                [{"px": format!("{:.1}", mid + 0.5), "sz": "2.0", "n": 2}],
            ]})
        }
        "candleSnapshot" => {
            let req = body.get("req").cloned().unwrap_or(Value::Null);
            let coin = req.get("coin").and_then(Value::as_str).unwrap_or("");
            let interval = req.get("interval").and_then(Value::as_str).unwrap_or("");
            let start = req.get("startTime").and_then(Value::as_i64).unwrap_or(0);
            let end = req
                .get("endTime")
                .and_then(Value::as_i64)
                .unwrap_or(i64::MAX);
            let step: i64 = match interval {
                "1m" => 60_000,
                "5m" => 300_000,
                "15m" => 900_000,
                "1h" => 3_600_000,
                "1d" => 86_400_000,
                _ => {
                    return unprocessable(
                        "Failed to deserialize the JSON body into the target type",
                    );
                }
            };
            let Some(m) = s.markets.iter().find(|m| m.coin == coin) else {
                return (StatusCode::OK, "[]").into_response();
            };
            let base: f64 = m.mark.parse().unwrap_or(1.0);
            // Five candles ending at 2026-11-30 00:00 UTC, within the window asked.
            let last = 1_795_996_800_000i64 - 1_795_996_800_000i64 % step;
            (0..5i64)
                .map(|i| last - (4 - i) * step)
                .filter(|t| *t >= start && *t <= end)
                .map(|t| {
                    let k = (t - last) / step;
                    let close = base + f64::from(i32::try_from(k).unwrap_or(0));
                    json!({"t": t, "T": t + step - 1, "s": coin, "i": interval,
                        "o": format!("{:.1}", close - 1.0), "c": format!("{close:.1}"),
                        "h": format!("{:.1}", close + 2.0), "l": format!("{:.1}", close - 2.0),
                        "v": "12.5", "n": 40})
                })
                .collect::<Vec<_>>()
                .into()
        }
        "clearinghouseState" => {
            let user = body.get("user").cloned().unwrap_or(Value::Null);
            if !wallet_ok(&user) {
                return unprocessable("Failed to deserialize the JSON body into the target type");
            }
            let mine = user
                .as_str()
                .is_some_and(|u| u.eq_ignore_ascii_case(&s.wallet));
            let positions: Vec<Value> = if mine {
                s.positions
                    .iter()
                    .map(|p| json!({"type": "oneWay", "position": {
                        "coin": p.coin, "szi": p.szi,
                        "leverage": {"type": "cross", "value": p.leverage},
                        "entryPx": p.entry_px, "positionValue": "0", "unrealizedPnl": p.unrealized_pnl,
                        "returnOnEquity": "0", "liquidationPx": p.liquidation_px,
                        "marginUsed": "0", "maxLeverage": 50,
                        "cumFunding": {"allTime": "0", "sinceOpen": "0", "sinceChange": "0"}}}))
                    .collect()
            } else {
                Vec::new()
            };
            let value = if mine {
                s.account_value.as_str()
            } else {
                "0.0"
            };
            json!({"assetPositions": positions,
                "marginSummary": {"accountValue": value, "totalNtlPos": "0", "totalRawUsd": value, "totalMarginUsed": "0"},
                "crossMarginSummary": {"accountValue": value, "totalNtlPos": "0", "totalRawUsd": value, "totalMarginUsed": "0"},
                "crossMaintenanceMarginUsed": "0", "withdrawable": value, "time": 1_796_050_800_000i64})
        }
        "userFillsByTime" => {
            let user = body.get("user").cloned().unwrap_or(Value::Null);
            if !wallet_ok(&user) {
                return unprocessable("Failed to deserialize the JSON body into the target type");
            }
            let start = body.get("startTime").and_then(Value::as_i64).unwrap_or(0);
            let end = body
                .get("endTime")
                .and_then(Value::as_i64)
                .unwrap_or(i64::MAX);
            let mine = user
                .as_str()
                .is_some_and(|u| u.eq_ignore_ascii_case(&s.wallet));
            if !mine {
                return (StatusCode::OK, axum::Json(json!([]))).into_response();
            }
            let mut all = venue_fills(&s.fills);
            if let Some(keep) = s.retention {
                let drop = all.len().saturating_sub(keep);
                all.drain(..drop);
            }
            let mut rows: Vec<Value> = all
                .into_iter()
                .filter(|f| {
                    let t = f["time"].as_i64().unwrap_or(0);
                    t >= start && t <= end
                })
                .collect();
            if s.newest_first {
                // Stable: one instant's fills keep the order they were made in.
                rows.sort_by_key(|f| std::cmp::Reverse(f["time"].as_i64().unwrap_or(0)));
            }
            rows.truncate(s.page_cap.unwrap_or(2_000));
            if s.legacy_fills {
                for f in &mut rows {
                    if let Some(o) = f.as_object_mut() {
                        o.remove("tid");
                        o.remove("feeToken");
                    }
                }
            }
            rows.into()
        }
        _ => return unprocessable("Failed to deserialize the JSON body into the target type"),
    };
    (StatusCode::OK, axum::Json(answer)).into_response()
}

fn dec(s: &str) -> Decimal {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// A decimal as the venue writes it: `"0.0"`, `"-14.771454"`.
fn venue_text(d: Decimal) -> String {
    let t = d.normalize().to_string();
    if t.contains('.') { t } else { format!("{t}.0") }
}

/// Every fill as the venue sends it, oldest first: `startPosition`, `dir` and the
/// average-cost `closedPnl` worked out from all the wallet's fills before it.
fn venue_fills(fills: &[HlFill]) -> Vec<Value> {
    let mut ordered: Vec<&HlFill> = fills.iter().collect();
    ordered.sort_by_key(|f| f.time);
    // Per coin: signed position and its average entry price.
    let mut book: HashMap<&str, (Decimal, Decimal)> = HashMap::new();
    let mut out = Vec::with_capacity(ordered.len());
    for f in ordered {
        let (pos, entry) = book.entry(f.coin.as_str()).or_default();
        let sz = dec(&f.sz);
        let px = dec(&f.px);
        let signed = if f.side == "B" { sz } else { -sz };
        let start = *pos;
        let closing = !start.is_zero() && start.is_sign_positive() != signed.is_sign_positive();
        let closed = if closing {
            sz.min(start.abs())
        } else {
            Decimal::ZERO
        };
        let pnl = if start.is_sign_positive() {
            closed * (px - *entry)
        } else {
            closed * (*entry - px)
        };
        let after = start + signed;
        if after.is_zero() {
            *entry = Decimal::ZERO;
        } else if !closing {
            *entry = (start.abs() * *entry + sz * px) / after.abs();
        } else if after.is_sign_positive() != start.is_sign_positive() {
            *entry = px;
        }
        *pos = after;
        let dir = match (start.cmp(&Decimal::ZERO), after.cmp(&Decimal::ZERO)) {
            (Ordering::Greater, Ordering::Less) => "Long > Short",
            (Ordering::Less, Ordering::Greater) => "Short > Long",
            (Ordering::Greater, _) if closing => "Close Long",
            (Ordering::Less, _) if closing => "Close Short",
            _ if signed.is_sign_positive() => "Open Long",
            _ => "Open Short",
        };
        let oid = f.oid.unwrap_or(f.tid * 10);
        out.push(
            json!({"coin": f.coin, "px": f.px, "sz": f.sz, "side": f.side,
            "time": f.time, "startPosition": venue_text(start), "dir": dir,
            "closedPnl": venue_text(pnl), "hash": format!("0x{oid:064x}"), "oid": oid,
            "crossed": true, "fee": f.fee, "tid": f.tid, "feeToken": "USDC"}),
        );
    }
    out
}

/// A loopback `/info` that answers recorded `{request, response}` pairs, in the shape of
/// the SDK's recorded cassettes (`../shared/realworld/hyperliquid/recorded.json`) and of
/// the project's own `tests/fixtures/hyperliquid/*.json`:
/// * a request is matched by its `type` and, where it names one, its `user`;
/// * `userFillsByTime` (or `userFills`) rows of that user are served by the window asked,
///   in the order recorded, at most `page_cap` a answer (500, as the docs say of time
///   ranges);
/// * `clearinghouseState` of a user without one recorded is the venue's answer for an
///   empty wallet;
/// * `metaAndAssetCtxs`, when not recorded, is made of the recorded `meta` and `allMids`
///   (each market's mark, mid and oracle price its mid), in the documented shape.
#[derive(Debug)]
pub struct HlReplay {
    pub url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for HlReplay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Debug)]
struct Recorded {
    pairs: Vec<(Value, Value)>,
    page_cap: usize,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl HlReplay {
    pub async fn start(recorded: &Value, page_cap: usize) -> HlReplay {
        let pairs = recorded
            .as_array()
            .unwrap_or_else(|| panic!("recorded answers are a list"))
            .iter()
            .map(|p| (p["request"].clone(), p["response"].clone()))
            .collect();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let state = Arc::new(Recorded {
            pairs,
            page_cap,
            requests: Arc::clone(&requests),
        });
        let app = Router::new().route("/info", post(replay)).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let url = format!(
            "http://{}",
            listener
                .local_addr()
                .unwrap_or_else(|e| panic!("addr: {e}"))
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        HlReplay {
            url,
            requests,
            task,
        }
    }

    /// The `userFillsByTime` requests made, in order.
    pub fn fill_requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|r| r["type"] == "userFillsByTime")
            .cloned()
            .collect()
    }
}

fn same_user(a: &Value, b: &Value) -> bool {
    match (a.as_str(), b.as_str()) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => false,
    }
}

async fn replay(State(rec): State<Arc<Recorded>>, body: String) -> Response {
    let Ok(body) = serde_json::from_str::<Value>(&body) else {
        return unprocessable("Failed to deserialize the JSON body into the target type");
    };
    rec.requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(body.clone());
    let kind = body["type"].as_str().unwrap_or("");
    let user = &body["user"];
    let recorded = |t: &str| {
        rec.pairs
            .iter()
            .find(|(req, _)| {
                req["type"] == t && (req.get("user").is_none() || same_user(&req["user"], user))
            })
            .map(|(_, resp)| resp.clone())
    };
    let answer = match kind {
        "userFillsByTime" => {
            let start = body["startTime"].as_i64().unwrap_or(0);
            let end = body["endTime"].as_i64().unwrap_or(i64::MAX);
            let rows = recorded("userFillsByTime")
                .or_else(|| recorded("userFills"))
                .unwrap_or_else(|| json!([]));
            let rows: Vec<Value> = rows
                .as_array()
                .into_iter()
                .flatten()
                .filter(|f| {
                    let t = f["time"].as_i64().unwrap_or(0);
                    t >= start && t <= end
                })
                .take(rec.page_cap)
                .cloned()
                .collect();
            rows.into()
        }
        "clearinghouseState" => recorded("clearinghouseState").unwrap_or_else(|| {
            let zero = json!({"accountValue": "0.0", "totalNtlPos": "0.0",
                "totalRawUsd": "0.0", "totalMarginUsed": "0.0"});
            json!({"assetPositions": [], "marginSummary": zero, "crossMarginSummary": zero,
                "crossMaintenanceMarginUsed": "0.0", "withdrawable": "0.0", "time": 0})
        }),
        "metaAndAssetCtxs" => recorded("metaAndAssetCtxs").unwrap_or_else(|| {
            let meta = recorded("meta").unwrap_or_else(|| json!({"universe": []}));
            let mids = recorded("allMids").unwrap_or_else(|| json!({}));
            let contexts: Vec<Value> = meta["universe"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|m| {
                    let mid = mids[m["name"].as_str().unwrap_or("")].clone();
                    json!({"funding": "0.0", "openInterest": "0.0", "prevDayPx": mid,
                        "dayNtlVlm": "0.0", "premium": null, "oraclePx": mid,
                        "markPx": mid, "midPx": mid, "impactPxs": null})
                })
                .collect();
            json!([meta, contexts])
        }),
        other => match recorded(other) {
            Some(v) => v,
            None => {
                return unprocessable("Failed to deserialize the JSON body into the target type");
            }
        },
    };
    (StatusCode::OK, axum::Json(answer)).into_response()
}
