//! A fake of Hyperliquid's `POST /info` on loopback: it dispatches on the body's `type`
//! as the venue does, answers numbers as strings where Hyperliquid does, pages fills at
//! 2,000, refuses a malformed wallet with a 422, and can be told to hang or fail.

#![allow(dead_code, unreachable_pub)]

use std::sync::{Arc, Mutex, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
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
    pub closed_pnl: String,
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
    pub fills: Vec<HlFill>,
    pub failure: HlFailure,
    /// Every request body's `type`, in order.
    pub requests: Vec<String>,
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
            {"universe": s.markets.iter().map(|m| json!({
                "name": m.coin, "szDecimals": m.sz_decimals, "maxLeverage": m.max_leverage,
                "marginTableId": m.max_leverage})).collect::<Vec<_>>()},
            s.markets.iter().map(|m| json!({
                "funding": m.funding, "openInterest": m.open_interest, "prevDayPx": m.mark,
                "dayNtlVlm": "1000000.0", "premium": "0.0001", "oraclePx": m.mark,
                "markPx": m.mark, "midPx": m.mid, "impactPxs": [m.mid, m.mid],
                "dayBaseVlm": "100.0"})).collect::<Vec<_>>(),
        ]),
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
            let mut rows: Vec<&HlFill> = if mine {
                s.fills
                    .iter()
                    .filter(|f| f.time >= start && f.time <= end)
                    .collect()
            } else {
                Vec::new()
            };
            rows.sort_by_key(|f| f.time);
            rows.truncate(2_000);
            rows.iter()
                .map(|f| json!({"coin": f.coin, "px": f.px, "sz": f.sz, "side": f.side,
                    "time": f.time, "startPosition": "0", "dir": if f.side == "B" {"Open Long"} else {"Close Long"},
                    "closedPnl": f.closed_pnl, "hash": format!("0x{:064x}", f.tid), "oid": f.tid * 10,
                    "crossed": true, "fee": f.fee, "tid": f.tid, "feeToken": "USDC"}))
                .collect::<Vec<_>>()
                .into()
        }
        _ => return unprocessable("Failed to deserialize the JSON body into the target type"),
    };
    (StatusCode::OK, axum::Json(answer)).into_response()
}
