//! An offline fake of Alpaca's trading API and market-data API, for tests.
//!
//! One HTTP/1.1 server on `127.0.0.1` answers both hosts' paths: point the trading client
//! and the market-data client at [`AlpacaFake::url`]. Every request must carry the
//! `APCA-API-KEY-ID` and `APCA-API-SECRET-KEY` headers given to [`AlpacaFake::start`]; a
//! wrong or missing one gets `401 {"code":40110000,"message":"request is not authorized"}`.
//! Response shapes follow Alpaca's published OpenAPI documents (kept in
//! `tests/fixtures/alpaca/`); [`self_check`] proves each one with
//! [`check_response`](super::openapi::check_response). Trading amounts are decimal strings
//! (`"150.25"`, trailing zeros trimmed), market-data prices are JSON numbers (as Alpaca's
//! data API sends them), ids are UUIDs counted up from `00000000-0000-4000-8000-000000000001`.
//!
//! # The seeded scenario (every number can be checked by hand)
//!
//! | when (UTC)            | what                                           | cash after |
//! |-----------------------|------------------------------------------------|-----------:|
//! | 2026-01-02 14:00      | CSD deposit +10,000.00                         |  10,000.00 |
//! | 2026-01-05 14:30      | FILL buy 10 AAPL at 150.00 (−1,500.00)         |   8,500.00 |
//! | 2026-01-06 14:35      | FILL buy 5 JPM at 200.00 (−1,000.00)           |   7,500.00 |
//! | 2026-02-14 13:00      | DIV AAPL +1.25 (10 shares × 0.125)             |   7,501.25 |
//! | 2026-03-02 15:00      | FILL sell 4 AAPL at 170.00 (+680.00)           |   8,181.25 |
//! | 2026-03-02 21:00      | FEE −0.02 (REG)                                |   8,181.23 |
//! | 2026-03-02 21:00      | FEE −0.01 (TAF)                                |   8,181.22 |
//!
//! A fee names no order: the documented non-trade activity has no `order_id` (nor does
//! alpaca-py's `NonTradeActivity`), and the fake sends only documented fields.
//!
//! So: cash 10000 − 1500 − 1000 + 680 − 0.03 + 1.25 = **8181.22**; positions AAPL 6 shares
//! (average entry 150, cost basis 900) and JPM 5 shares (average entry 200, cost basis
//! 1000); three filled market orders (the sell is the newest); seven activities.
//!
//! Ids come from one counter in creation order: the account is `…000000000001`, the AAPL
//! buy `…000000000003`, the JPM buy `…000000000006` and the AAPL sell `…00000000000a` (each
//! order's generated `client_order_id` is the next number). Activity ids are the New York
//! time of the activity, `::`, and a UUID: the first AAPL fill is
//! `20260105093000000::00000000-0000-4000-8000-000000000005`.
//!
//! Quotes: AAPL bid 181.00 / ask 181.10, JPM 240.00 / 240.20, SPY 600.00 / 600.05. The
//! last trade price of a symbol is its bid, so positions are valued at the bid: AAPL
//! 6 × 181 = 1086 (unrealized P/L +186), JPM 5 × 240 = 1200 (+200); long market value
//! 2286; equity = portfolio value = cash + long market value = 8181.22 + 2286 = **10467.22**.
//! Yesterday's closes (`lastday_price`): AAPL 180.00, JPM 238.00, SPY 598.00, so the
//! intraday P/L is AAPL +6 and JPM +10, and `last_equity` is 8181.22 + 1080 + 1190 =
//! 10451.22. The account is a cash account (`multiplier` "1"): buying power is cash less
//! what open buy orders reserve.
//!
//! Assets: AAPL (NASDAQ), SPY (ARCA), JPM (NYSE); [`AlpacaFake::set_price`] on another
//! symbol lists it too (on NASDAQ), and [`AlpacaFake::list_asset`] lists anything else
//! (crypto pairs with their increments, untradable or inactive stocks). `GET /v2/assets`
//! filters by `status`, `asset_class` (default `us_equity`, an unknown one a 422) and
//! `exchange`, sorted by class, exchange and symbol, unpaged, as documented.
//!
//! # Behaviour
//!
//! * Orders fill at once, whatever the clock says: a market buy at the ask, a market sell
//!   at the bid; a limit buy when the ask is at or below the limit (at the ask), a limit sell
//!   when the bid is at or above it (at the bid); stops trigger on the same prices. An order
//!   that cannot fill stays `new` (`ioc`/`fok` ones are canceled instead) and is re-tried on
//!   every [`AlpacaFake::set_price`] of its symbol. A fill appends a FILL activity and moves
//!   cash and the position (average cost). New fills charge no fees.
//! * Bracket orders carry two legs (take-profit limit, stop-loss stop or stop-limit), both
//!   `held` until the entry fills; then the take-profit leg is `new` and the stop-loss stays
//!   `held` but live, and when one fills the other is canceled. `oto` has one leg; `oco` is a
//!   limit order (the take-profit) with a stop-loss leg.
//! * `GET /v2/orders` lists legs as orders of their own unless `nested=true`, which rolls them
//!   up under `legs`; `POST /v2/orders` always answers with the legs.
//! * Sells beyond the position (less what open sells already hold) and buys beyond buying
//!   power answer 403. Trailing stops and multi-leg option orders answer 422.
//! * Bars: 400 weekdays (no holidays) ending 2026-03-02, regular session only (09:30–16:00
//!   New York time); daily bars are stamped at New York midnight, intraday bars at their start,
//!   aligned to multiples of the bar length since midnight. Prices are a deterministic
//!   function of symbol and minute. Without `start`/`end` the whole series is in range.
//! * Activities come newest first unless `direction=asc`; `page_size` defaults to 100 and is
//!   capped at 100; `page_token` is the id of the last row of the previous page; `after` and
//!   `until` are exclusive and compare a FILL's `transaction_time` or a non-trade row's
//!   `created_at`. A non-trade row's `date` is `YYYY-MM-DD`, as Alpaca sends it (its OpenAPI
//!   document calls it a date-time).
//! * Bars paginate with `limit` (default 1000, at most 10000) and an opaque `page_token`;
//!   `sort=desc` is supported; a symbol the fake does not know has no bars.
//! * Errors always have the body `{"code": …, "message": …}`: 400 (40010000) for a body that
//!   is not a JSON object, 400 (40010001) for a bad market-data parameter, 403 (40310000)
//!   for too little buying power or too few shares, 404 (40410000) for an unknown order,
//!   position, asset, quote or path, 422 (40010001) for an invalid order or query parameter,
//!   422 (42210000) for an order that cannot be canceled or replaced any more.
//! * Snapshots (`GET /v2/stocks/snapshots?symbols=…`, unknown symbols left out) hold the
//!   quote, a latest trade at the bid, and the series' last minute bar and last two daily bars;
//!   [`AlpacaFake::omit_from_snapshot`] leaves parts of one symbol's out, a symbol with a
//!   character no ticker has is refused with 400 `invalid symbol: …` (the fake's words), and
//!   an ask set to 0 is sent as 0 (Alpaca's "no active ask"). Option snapshots
//!   (`GET /v1beta1/options/snapshots?symbols=…`) answer the contracts given
//!   [`AlpacaFake::set_option_quote`], with their latest quote and trade only. Crypto
//!   snapshots (`GET /v1beta3/crypto/{loc}/snapshots?symbols=BTC/USD,…`, `loc` one of
//!   `us`, `us-1`, `eu-1`, another a 400) answer `{"snapshots": {pair: …}}` for the pairs
//!   given [`AlpacaFake::set_crypto_snapshot`], in the documented crypto shapes: a trade
//!   has `t p s i tks` (no exchange, tape or conditions), a quote `t bp bs ap as`, a bar
//!   `t o h l c v n vw`; sizes and volumes are fractional coins, daily bars are stamped
//!   at Chicago midnight (06:00Z in winter). An unknown pair is left out, a pair written
//!   without its slash (`BTCUSD`) is not a pair there and is left out too, a lower-case
//!   or otherwise malformed one is refused with 400 `invalid symbol: …`, and
//!   [`AlpacaFake::omit_from_snapshot`] leaves parts of a pair's out.
//! * `GET /v2/clock` uses the real time (or [`AlpacaFake::set_now`]'s), with US daylight
//!   saving and the calendar's closed days and early closes; `GET /v2/calendar` and
//!   `GET /v1beta1/news` are described in their section at the end of the file.
//! * Normal answers carry `X-RateLimit-Limit: 200`, `X-RateLimit-Remaining: 199` and
//!   `X-RateLimit-Reset`; only [`Failure::TooManyRequests`] produces a 429.

#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::ops::{Add, Neg, Sub};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use chrono::{
    DateTime, Datelike, FixedOffset, NaiveDate, NaiveTime, Offset, SecondsFormat, TimeDelta, Utc,
    Weekday,
};
use serde_json::{Map, Value, json};
use tokio::net::{TcpListener, TcpStream};

use super::openapi::{
    check_response, check_response_strict, check_schema, check_schema_strict, load_spec,
};

/// A failure the fake injects into the next request it matches (see [`AlpacaFake::fail_next`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// Any request: 429 with `X-RateLimit-Limit: 200`, `X-RateLimit-Remaining: 0`,
    /// `X-RateLimit-Reset: <now + reset_in_secs, unix seconds>`, `Retry-After:
    /// <reset_in_secs>` and `{"code":42910000,"message":"rate limit exceeded"}`.
    TooManyRequests { reset_in_secs: u64 },
    /// Any request: 500 `{"code":50010000,"message":"internal server error"}`.
    ServerError,
    /// Any request: read it, then answer nothing for an hour.
    Hang,
    /// The next `POST /v2/orders`: read it, then answer nothing (and make no order), as
    /// a gateway that died mid-request.
    HangOnOrder,
    /// The next `POST /v2/orders`: 422 `{"code":40010001,"message":"client_order_id must be
    /// unique"}`, and no order is made.
    DuplicateClientOrderId,
    /// The next `DELETE /v2/orders`: the first open order fails to cancel (its entry in the
    /// 207 list has status 500 and stays open); the others are canceled.
    CancelAllMultiStatus,
}

/// A running fake; the server stops when this is dropped.
#[derive(Debug)]
pub struct AlpacaFake {
    /// `http://127.0.0.1:PORT`, the base URL of both the trading and the market-data API.
    pub url: String,
    state: Arc<Mutex<State>>,
    server: tokio::task::JoinHandle<()>,
}

impl AlpacaFake {
    /// Starts a fake on a free port of 127.0.0.1 that accepts `key` and `secret`, seeded with
    /// the scenario in the module documentation.
    pub async fn start(key: &str, secret: &str) -> Self {
        Self::start_on(key, secret, 0).await
    }

    /// As [`AlpacaFake::start`], on `port` of 127.0.0.1 (0: a free one): a gateway that
    /// comes up where a client was told to look.
    pub async fn start_on(key: &str, secret: &str, port: u16) -> Self {
        let listener = TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap_or_else(|e| panic!("the Alpaca fake cannot bind 127.0.0.1:{port}: {e}"));
        let addr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the Alpaca fake has no local address: {e}"));
        let state = Arc::new(Mutex::new(State::seeded(key, secret, Utc::now())));
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&state));
        let server = tokio::spawn(async move {
            // The server only ends when its task is aborted; an accept error ends the fake.
            let _ = axum::serve(listener, app).await;
        });
        AlpacaFake {
            url: format!("http://{addr}"),
            state,
            server,
        }
    }

    /// Queues `failure`; the next request it matches consumes it. Requests with bad
    /// credentials never consume a failure.
    pub fn fail_next(&self, failure: Failure) {
        lock(&self.state).failures.push_back(failure);
    }

    /// From now on, a request whose `activity_types` holds one of `types` is refused as
    /// Alpaca refuses a type it does not take: 422 `{"code":40010001,"message":"invalid
    /// activity type: FOPT"}` (the body recorded in jrusso1020/alpaca_elixir's cassettes),
    /// or, when `names_type` is false, the same message without the type. Asking with no
    /// `activity_types` still answers every activity.
    pub fn refuse_activity_types(&self, types: &[&str], names_type: bool) {
        let mut state = lock(&self.state);
        state.refused_types = types.iter().map(|t| t.to_uppercase()).collect();
        state.refusal_names_type = names_type;
    }

    /// Shares moved by a transfer (`ACATS`) or a journal (`JNLS`) on `date`: a non-trade
    /// row with the `symbol`, the signed `qty` (negative: out of the account),
    /// `net_amount` "0" and, when given, the `price` (alpaca-py's `NonTradeActivity.price`;
    /// Alpaca's document has no price for it). The position moves with it: shares in at
    /// `cost` a share (the basis Alpaca carries into `avg_entry_price`), shares out at the
    /// position's average cost.
    pub fn transfer_shares(
        &self,
        kind: &str,
        symbol: &str,
        qty: &str,
        price: Option<&str>,
        cost: &str,
        date: NaiveDate,
    ) {
        assert!(
            matches!(kind, "ACATS" | "JNLS"),
            "not a share transfer: {kind}"
        );
        let moved = dec(qty);
        let mut state = lock(&self.state);
        let held = state.positions.get(symbol).copied().unwrap_or_default();
        let next = if moved.is_positive() {
            Holding {
                qty: held.qty + moved,
                cost: held.cost + moved.times(dec(cost)).round(2),
            }
        } else {
            let out = held
                .cost
                .times(moved.abs())
                .over(held.qty)
                .unwrap_or(Dec::ZERO)
                .round(2);
            Holding {
                qty: held.qty + moved,
                cost: held.cost - out,
            }
        };
        if next.qty == Dec::ZERO {
            state.positions.remove(symbol);
        } else {
            state.positions.insert(symbol.to_owned(), next);
        }
        let mut extra = vec![
            (
                "description",
                json!(if moved.is_positive() {
                    format!("{kind} IN")
                } else {
                    format!("{kind} OUT")
                }),
            ),
            ("symbol", json!(symbol)),
            ("qty", moved.json()),
        ];
        if let Some(p) = price {
            extra.push(("price", dec(p).json()));
        }
        let at = date.and_time(NaiveTime::MIN).and_utc() + TimeDelta::hours(12);
        state.add_row(kind, None, date, at, Dec::ZERO, extra);
    }

    /// An option contract (OCC symbol) traded at `price` a share: a FILL row (side `buy`,
    /// `sell` or `sell_short`) whose order id is fresh; cash moves `qty` x `price` x 100.
    /// The fake's positions and orders are stocks only: an option held shows in neither.
    pub fn option_fill(
        &self,
        contract: &str,
        side: &str,
        qty: &str,
        price: &str,
        at: DateTime<Utc>,
    ) {
        let (qty, price) = (dec(qty), dec(price));
        let amount = qty.times(price).times(Dec::int(100)).round(2);
        let mut state = lock(&self.state);
        state.cash = if side == "buy" {
            state.cash - amount
        } else {
            state.cash + amount
        };
        let id = state.activity_id(at);
        let order_id = state.fresh_id();
        state.activities.push(Activity {
            id: id.clone(),
            kind: "FILL".to_owned(),
            at,
            json: json!({
                "id": id,
                "activity_type": "FILL",
                "transaction_time": stamp(at),
                "type": "fill",
                "price": price.json(),
                "qty": qty.json(),
                "side": side,
                "symbol": contract,
                "leaves_qty": "0",
                "order_id": order_id,
                "cum_qty": qty.json(),
                "order_status": "filled",
            }),
        });
    }

    /// An option event on `date` for `qty` contracts of `contract` (OCC symbol):
    /// `OPEXP` is one row for the contract; `OPASN` (a short contract assigned) and
    /// `OPEXC` (a long one exercised) are a row for the contract and, under the same
    /// `group_id`, a row for the shares delivered at the strike (100 a contract): signed
    /// `qty` and `net_amount` the way the shares and cash move. The stock position and
    /// cash move with it.
    pub fn option_event(&self, kind: &str, contract: &str, qty: &str, date: NaiveDate) {
        assert!(
            matches!(kind, "OPEXP" | "OPASN" | "OPEXC"),
            "not an option event: {kind}"
        );
        let contracts = dec(qty);
        let at = date.and_time(NaiveTime::MIN).and_utc() + TimeDelta::hours(12);
        let mut state = lock(&self.state);
        let group = state.fresh_id();
        let common = |symbol: &str, q: Dec| {
            vec![
                ("symbol", json!(symbol)),
                ("qty", q.json()),
                ("group_id", json!(group.clone())),
            ]
        };
        state.add_row(kind, None, date, at, Dec::ZERO, common(contract, contracts));
        if kind == "OPEXP" {
            return;
        }
        // OCC: root, YYMMDD, C or P, strike x 1000 in eight digits.
        let n = contract.len();
        assert!(n > 15, "not an OCC symbol: {contract}");
        let root = contract[..n - 15].trim();
        let right = &contract[n - 9..n - 8];
        let strike = Dec(contract[n - 8..].parse::<i128>().unwrap_or(0) * (SCALE / 1000));
        let shares = contracts.times(Dec::int(100));
        // A call exercised or a put assigned buys the shares; else they are sold.
        let buys = (right == "C") == (kind == "OPEXC");
        let value = shares.times(strike).round(2);
        let (signed, net) = if buys {
            (shares, -value)
        } else {
            (-shares, value)
        };
        let held = state.positions.get(root).copied().unwrap_or_default();
        let next = Holding {
            qty: held.qty + signed,
            cost: if buys {
                held.cost + value
            } else {
                held.cost - value
            },
        };
        if next.qty == Dec::ZERO {
            state.positions.remove(root);
        } else {
            state.positions.insert(root.to_owned(), next);
        }
        let mut rows = common(root, signed);
        rows.push(("price", strike.json()));
        state.add_row(kind, None, date, at, net, rows);
    }

    /// Every activity row, oldest first, as `GET /v2/account/activities` sends it.
    pub fn activities(&self) -> Vec<Value> {
        let state = lock(&self.state);
        let mut rows: Vec<&Activity> = state.activities.iter().collect();
        rows.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        rows.into_iter().map(|a| a.json.clone()).collect()
    }

    /// Every request received, in order, as `"METHOD /path?query"` (the target exactly as
    /// sent, so `"GET /v2/account"` or `"GET /v2/orders?status=all"`).
    pub fn requests(&self) -> Vec<String> {
        lock(&self.state).requests.clone()
    }

    /// Sets the quote of `symbol` (decimal strings) and fills the open orders it makes
    /// marketable. A symbol not yet known becomes a tradable NASDAQ asset.
    pub fn set_price(&self, symbol: &str, bid: &str, ask: &str) {
        let bid = Dec::parse(bid).unwrap_or_else(|| panic!("set_price: bad bid {bid:?}"));
        let ask = Dec::parse(ask).unwrap_or_else(|| panic!("set_price: bad ask {ask:?}"));
        let now = Utc::now();
        let mut state = lock(&self.state);
        if state.asset(symbol).is_none() {
            let id = state.fresh_id();
            state.assets.push(AssetInfo {
                symbol: symbol.to_owned(),
                id,
                name: format!("{symbol} Common Stock"),
                exchange: "NASDAQ",
                tape: "C",
                cusip: None,
                base: bid,
                listing: Listing::stock(),
            });
        }
        state
            .quotes
            .insert(symbol.to_owned(), Quote { bid, ask, at: now });
        state.sweep(symbol, now);
    }

    /// Leaves `parts` (`latestTrade`, `latestQuote`, `minuteBar`, `dailyBar`,
    /// `prevDailyBar`) out of `symbol`'s stock snapshot, as Alpaca does for a symbol with no
    /// trade yet or no previous day.
    pub fn omit_from_snapshot(&self, symbol: &str, parts: &[&str]) {
        lock(&self.state).snapshot_omit.insert(
            symbol.to_owned(),
            parts.iter().map(|p| (*p).to_owned()).collect(),
        );
    }

    /// Sets an option contract's quote and last trade price (decimal strings), served by
    /// the option snapshots.
    pub fn set_option_quote(&self, contract: &str, bid: &str, ask: &str, last: &str) {
        let d = |t: &str| Dec::parse(t).unwrap_or_else(|| panic!("set_option_quote: bad {t:?}"));
        lock(&self.state)
            .option_quotes
            .insert(contract.to_owned(), (d(bid), d(ask), d(last)));
    }

    /// Serves a crypto pair (`BTC/USD`) from the crypto snapshots, with these figures.
    pub fn set_crypto_snapshot(&self, pair: &str, figures: CryptoFigures) {
        lock(&self.state)
            .crypto_snapshots
            .insert(pair.to_owned(), figures);
    }

    /// Lists another asset (`GET /v2/assets`, `GET /v2/assets/{symbol}`): a crypto pair's
    /// exchange is what Alpaca's crypto docs show, `ALPACA`.
    pub fn list_asset(&self, symbol: &str, name: &str, exchange: &'static str, listing: Listing) {
        let mut state = lock(&self.state);
        let id = state.fresh_id();
        state.assets.push(AssetInfo {
            symbol: symbol.to_owned(),
            id,
            name: name.to_owned(),
            exchange,
            tape: "C",
            cusip: None,
            base: Dec::int(100),
            listing,
        });
    }

    /// Every order the fake holds, oldest first, as the API shows it; legs are listed as
    /// orders of their own and also under their parent's `legs`.
    pub fn orders(&self) -> Vec<Value> {
        let state = lock(&self.state);
        (0..state.orders.len())
            .map(|i| state.order_json(i, true))
            .collect()
    }
}

impl Drop for AlpacaFake {
    fn drop(&mut self) {
        self.server.abort();
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

// ---------------------------------------------------------------------------------------
// Decimal arithmetic (fixed point, nine fractional digits; no floating point)

const SCALE: i128 = 1_000_000_000;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Dec(i128);

impl Dec {
    const ZERO: Dec = Dec(0);

    fn int(n: i64) -> Self {
        Dec(i128::from(n) * SCALE)
    }

    fn cents(n: i64) -> Self {
        Dec(i128::from(n) * (SCALE / 100))
    }

    /// `"150.25"`, `"-0.02"`, `"10"`: at most nine digits on either side of the point.
    fn parse(text: &str) -> Option<Self> {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
        let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
        if (whole.is_empty() && frac.is_empty())
            || !all_digits(whole)
            || !all_digits(frac)
            || whole.len() > 9
            || frac.len() > 9
        {
            return None;
        }
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        let mut fraction: i128 = if frac.is_empty() {
            0
        } else {
            frac.parse().ok()?
        };
        for _ in frac.len()..9 {
            fraction *= 10;
        }
        let value = whole * SCALE + fraction;
        Some(Dec(if negative { -value } else { value }))
    }

    /// A decimal given as a JSON string or number.
    fn from_json(value: &Value) -> Option<Self> {
        match value {
            Value::String(s) => Self::parse(s),
            Value::Number(n) => Self::parse(&n.to_string()),
            _ => None,
        }
    }

    fn times(self, other: Dec) -> Dec {
        Dec(div_round(self.0 * other.0, SCALE))
    }

    fn over(self, other: Dec) -> Option<Dec> {
        (other.0 != 0).then(|| Dec(div_round(self.0 * SCALE, other.0)))
    }

    /// `self / other`, cut (not rounded) to nine places.
    fn over_down(self, other: Dec) -> Option<Dec> {
        (other.0 != 0).then(|| Dec(self.0 * SCALE / other.0))
    }

    fn round(self, places: u32) -> Dec {
        let unit = 10_i128.pow(9 - places.min(9));
        Dec(div_round(self.0, unit) * unit)
    }

    fn trunc(self, places: u32) -> Dec {
        let unit = 10_i128.pow(9 - places.min(9));
        Dec(self.0 / unit * unit)
    }

    fn is_integer(self) -> bool {
        self.0 % SCALE == 0
    }

    fn is_positive(self) -> bool {
        self.0 > 0
    }

    fn abs(self) -> Dec {
        Dec(self.0.abs())
    }

    /// As a JSON string, the trading API's way.
    fn json(self) -> Value {
        Value::String(self.to_string())
    }

    /// As a JSON number, the market-data API's way.
    fn number(self) -> Value {
        self.to_string()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .map_or(Value::Null, Value::Number)
    }
}

/// `n / d` rounded half away from zero.
fn div_round(n: i128, d: i128) -> i128 {
    let q = n / d;
    let r = n % d;
    if 2 * r.abs() >= d.abs() {
        q + n.signum() * d.signum()
    } else {
        q
    }
}

impl fmt::Display for Dec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let scale = SCALE.unsigned_abs();
        let abs = self.0.unsigned_abs();
        let (whole, frac) = (abs / scale, abs % scale);
        if frac == 0 {
            write!(f, "{sign}{whole}")
        } else {
            let digits = format!("{frac:09}");
            write!(f, "{sign}{whole}.{}", digits.trim_end_matches('0'))
        }
    }
}

impl Add for Dec {
    type Output = Dec;
    fn add(self, other: Dec) -> Dec {
        Dec(self.0 + other.0)
    }
}

impl Sub for Dec {
    type Output = Dec;
    fn sub(self, other: Dec) -> Dec {
        Dec(self.0 - other.0)
    }
}

impl Neg for Dec {
    type Output = Dec;
    fn neg(self) -> Dec {
        Dec(-self.0)
    }
}

fn dec(text: &str) -> Dec {
    Dec::parse(text).unwrap_or_else(|| panic!("bad decimal literal {text:?}"))
}

// ---------------------------------------------------------------------------------------
// Time: New York time with US daylight saving rules, no holidays

fn nth_sunday(year: i32, month: u32, n: u32) -> NaiveDate {
    let first = NaiveDate::from_ymd_opt(year, month, 1).unwrap_or(NaiveDate::MIN);
    let offset = (7 - first.weekday().num_days_from_sunday()) % 7 + 7 * (n - 1);
    first + TimeDelta::days(i64::from(offset))
}

/// Daylight saving time in New York: from 02:00 local on the second Sunday of March to
/// 02:00 local on the first Sunday of November.
fn in_dst(t: DateTime<Utc>) -> bool {
    let year = t.year();
    let start = nth_sunday(year, 3, 2).and_time(NaiveTime::MIN).and_utc() + TimeDelta::hours(7);
    let end = nth_sunday(year, 11, 1).and_time(NaiveTime::MIN).and_utc() + TimeDelta::hours(6);
    t >= start && t < end
}

fn ny_offset(t: DateTime<Utc>) -> FixedOffset {
    let hours = if in_dst(t) { 4 } else { 5 };
    FixedOffset::west_opt(hours * 3600).unwrap_or(Utc.fix())
}

fn ny(t: DateTime<Utc>) -> DateTime<FixedOffset> {
    t.with_timezone(&ny_offset(t))
}

/// The instant `minute` minutes after New York midnight of `date`.
fn ny_at(date: NaiveDate, minute: u32) -> DateTime<Utc> {
    let local = date.and_time(NaiveTime::MIN).and_utc() + TimeDelta::minutes(i64::from(minute));
    let guess = local + TimeDelta::hours(5);
    let hours = if in_dst(guess) { 4 } else { 5 };
    local + TimeDelta::hours(hours)
}

fn utc(year: i32, month: u32, day: u32, hour: u32, minute: u32) -> DateTime<Utc> {
    let date = NaiveDate::from_ymd_opt(year, month, day)
        .unwrap_or_else(|| panic!("bad date {year}-{month}-{day}"));
    date.and_time(NaiveTime::MIN).and_utc() + TimeDelta::minutes(i64::from(hour * 60 + minute))
}

fn stamp(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

fn is_weekday(d: NaiveDate) -> bool {
    !matches!(d.weekday(), Weekday::Sat | Weekday::Sun)
}

/// A query time: RFC 3339 (a `+` turned into a space by form decoding is put back) or a
/// date (its UTC midnight).
fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    let fixed = text.replace(' ', "+");
    if let Ok(t) = DateTime::parse_from_rfc3339(&fixed) {
        return Some(t.with_timezone(&Utc));
    }
    let date = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(date.and_time(NaiveTime::MIN).and_utc())
}

const OPEN_MINUTE: u32 = 9 * 60 + 30;
const CLOSE_MINUTE: u32 = 16 * 60;

fn clock_json(now: DateTime<Utc>, market: &MarketInfo) -> Value {
    let today = ny(now).date_naive();
    let mut next_open = None;
    let mut next_close = None;
    let mut day = today;
    // The calendar's days (holidays and early closes kept); bounded past its end.
    for _ in 0..40 {
        if next_open.is_some() && next_close.is_some() {
            break;
        }
        if let Some((open_minute, close_minute)) = market.session(day) {
            let open = ny_at(day, open_minute);
            let close = ny_at(day, close_minute);
            if next_open.is_none() && open > now {
                next_open = Some(open);
            }
            if next_close.is_none() && close > now {
                next_close = Some(close);
            }
        }
        day += TimeDelta::days(1);
    }
    let next_open = next_open.unwrap_or(now);
    let next_close = next_close.unwrap_or(now);
    let is_open = next_close < next_open;
    let local = |t: DateTime<Utc>| ny(t).to_rfc3339_opts(SecondsFormat::Secs, false);
    json!({
        "timestamp": ny(now).to_rfc3339_opts(SecondsFormat::AutoSi, false),
        "is_open": is_open,
        "next_open": local(next_open),
        "next_close": local(next_close),
    })
}

// ---------------------------------------------------------------------------------------
// State

fn uuid(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

#[derive(Clone, Debug)]
struct AssetInfo {
    symbol: String,
    id: String,
    name: String,
    exchange: &'static str,
    tape: &'static str,
    cusip: Option<&'static str>,
    /// Where the synthetic bar series is centred.
    base: Dec,
    /// How `GET /v2/assets` lists it (a stock's defaults for the seeded assets).
    listing: Listing,
}

/// An asset as `GET /v2/assets` and `GET /v2/assets/{symbol}` describe it.
#[derive(Clone, Debug)]
pub struct Listing {
    /// `us_equity` or `crypto`.
    pub class: &'static str,
    /// `active` or `inactive`.
    pub status: &'static str,
    pub tradable: bool,
    pub fractionable: bool,
    pub shortable: bool,
    pub marginable: bool,
    pub easy_to_borrow: bool,
    /// Crypto only: `min_order_size`, `min_trade_increment`, `price_increment`, as the
    /// decimal strings Alpaca sends.
    pub increments: Option<[&'static str; 3]>,
}

impl Listing {
    /// A tradable, fractionable, shortable, marginable stock.
    pub fn stock() -> Self {
        Listing {
            class: "us_equity",
            status: "active",
            tradable: true,
            fractionable: true,
            shortable: true,
            marginable: true,
            easy_to_borrow: true,
            increments: None,
        }
    }

    /// A crypto pair, with its order size and increments.
    pub fn crypto(min_order: &'static str, step: &'static str, tick: &'static str) -> Self {
        Listing {
            class: "crypto",
            status: "active",
            tradable: true,
            fractionable: true,
            shortable: false,
            marginable: false,
            easy_to_borrow: false,
            increments: Some([min_order, step, tick]),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Quote {
    bid: Dec,
    ask: Dec,
    at: DateTime<Utc>,
}

/// A position: signed quantity and signed cost (average-cost accounting).
#[derive(Clone, Copy, Debug, Default)]
struct Holding {
    qty: Dec,
    cost: Dec,
}

#[derive(Clone, Debug)]
struct Order {
    id: String,
    client_order_id: String,
    symbol: String,
    asset_id: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    filled_at: Option<DateTime<Utc>>,
    canceled_at: Option<DateTime<Utc>>,
    replaced_at: Option<DateTime<Utc>>,
    replaced_by: Option<String>,
    replaces: Option<String>,
    qty: Option<Dec>,
    notional: Option<Dec>,
    filled_qty: Dec,
    filled_avg_price: Option<Dec>,
    order_class: String,
    order_type: String,
    side: String,
    time_in_force: String,
    limit_price: Option<Dec>,
    stop_price: Option<Dec>,
    status: String,
    parent: Option<String>,
    legs: Vec<String>,
}

#[derive(Clone, Debug)]
struct Activity {
    id: String,
    kind: String,
    at: DateTime<Utc>,
    json: Value,
}

#[derive(Debug)]
struct State {
    key: String,
    secret: String,
    failures: VecDeque<Failure>,
    requests: Vec<String>,
    next_id: u64,
    account_id: String,
    account_created: DateTime<Utc>,
    cash: Dec,
    assets: Vec<AssetInfo>,
    quotes: BTreeMap<String, Quote>,
    lastday: BTreeMap<String, Dec>,
    positions: BTreeMap<String, Holding>,
    orders: Vec<Order>,
    activities: Vec<Activity>,
    /// Activity types refused as a filter (see [`AlpacaFake::refuse_activity_types`]),
    /// and whether the refusal names the type.
    refused_types: Vec<String>,
    refusal_names_type: bool,
    /// Snapshot parts left out per symbol (see [`AlpacaFake::omit_from_snapshot`]).
    snapshot_omit: BTreeMap<String, Vec<String>>,
    /// Option contracts' bid, ask and last trade price.
    option_quotes: BTreeMap<String, (Dec, Dec, Dec)>,
    /// Crypto pairs' snapshot figures (see [`AlpacaFake::set_crypto_snapshot`]).
    crypto_snapshots: BTreeMap<String, CryptoFigures>,
    /// News, the calendar's closed days and the clock (see the last section).
    market: MarketInfo,
    /// Option chains (see the section "Option chains").
    chain: ChainBook,
}

fn is_open_status(status: &str) -> bool {
    matches!(
        status,
        "new"
            | "partially_filled"
            | "accepted"
            | "pending_new"
            | "held"
            | "accepted_for_bidding"
            | "pending_cancel"
            | "pending_replace"
            | "calculated"
            | "stopped"
            | "suspended"
    )
}

const ACTIVITY_TYPES: [&str; 39] = [
    "FILL", "TRANS", "MISC", "ACATC", "ACATS", "CFEE", "CGD", "CSD", "CSW", "DIV", "DIVCGL",
    "DIVCGS", "DIVFEE", "DIVFT", "DIVNRA", "DIVROC", "DIVTW", "DIVTXEX", "FEE", "INT", "INTNRA",
    "INTTW", "JNL", "JNLC", "JNLS", "MA", "NC", "OPASN", "OPCA", "OPCSH", "OPEXC", "OPEXP",
    "OPTRD", "PTC", "PTR", "REORG", "SPIN", "SPLIT", "FOPT",
];

/// What a new order is made of.
#[derive(Clone, Debug)]
struct Draft {
    symbol: String,
    side: String,
    order_type: String,
    time_in_force: String,
    qty: Option<Dec>,
    notional: Option<Dec>,
    limit_price: Option<Dec>,
    stop_price: Option<Dec>,
    order_class: String,
    client_order_id: Option<String>,
    parent: Option<String>,
    status: &'static str,
}

impl Draft {
    fn market(symbol: &str, side: &str, qty: Dec) -> Self {
        Draft {
            symbol: symbol.to_owned(),
            side: side.to_owned(),
            order_type: "market".to_owned(),
            time_in_force: "day".to_owned(),
            qty: Some(qty),
            notional: None,
            limit_price: None,
            stop_price: None,
            order_class: "simple".to_owned(),
            client_order_id: None,
            parent: None,
            status: "new",
        }
    }
}

impl State {
    fn seeded(key: &str, secret: &str, now: DateTime<Utc>) -> Self {
        let asset =
            |n: u64, symbol: &str, name: &str, exchange, tape, cusip, base: &str| AssetInfo {
                symbol: symbol.to_owned(),
                id: format!("00000000-0000-4000-8000-a55e7{n:07x}"),
                name: name.to_owned(),
                exchange,
                tape,
                cusip: Some(cusip),
                base: dec(base),
                listing: Listing::stock(),
            };
        let quote = |bid: &str, ask: &str| Quote {
            bid: dec(bid),
            ask: dec(ask),
            at: now,
        };
        let mut state = State {
            key: key.to_owned(),
            secret: secret.to_owned(),
            failures: VecDeque::new(),
            requests: Vec::new(),
            next_id: 1,
            account_id: String::new(),
            account_created: utc(2026, 1, 2, 13, 0),
            cash: Dec::ZERO,
            assets: vec![
                asset(
                    1,
                    "AAPL",
                    "Apple Inc. Common Stock",
                    "NASDAQ",
                    "C",
                    "037833100",
                    "150",
                ),
                asset(
                    2,
                    "SPY",
                    "SPDR S&P 500 ETF Trust",
                    "ARCA",
                    "B",
                    "78462F103",
                    "550",
                ),
                asset(
                    3,
                    "JPM",
                    "JPMorgan Chase & Co. Common Stock",
                    "NYSE",
                    "A",
                    "46625H100",
                    "200",
                ),
            ],
            quotes: BTreeMap::from([
                ("AAPL".to_owned(), quote("181.00", "181.10")),
                ("JPM".to_owned(), quote("240.00", "240.20")),
                ("SPY".to_owned(), quote("600.00", "600.05")),
            ]),
            lastday: BTreeMap::from([
                ("AAPL".to_owned(), dec("180.00")),
                ("JPM".to_owned(), dec("238.00")),
                ("SPY".to_owned(), dec("598.00")),
            ]),
            positions: BTreeMap::new(),
            orders: Vec::new(),
            activities: Vec::new(),
            refused_types: Vec::new(),
            refusal_names_type: true,
            snapshot_omit: BTreeMap::new(),
            option_quotes: BTreeMap::new(),
            crypto_snapshots: BTreeMap::new(),
            market: MarketInfo::seeded(),
            chain: ChainBook::default(),
        };
        state.account_id = state.fresh_id();

        let day = |m, d| NaiveDate::from_ymd_opt(2026, m, d).unwrap_or(NaiveDate::MIN);
        state.add_cash_activity(
            "CSD",
            None,
            day(1, 2),
            utc(2026, 1, 2, 14, 0),
            dec("10000.00"),
            vec![("description", json!("Cash deposit"))],
        );
        state.seed_fill("AAPL", "buy", "10", "150.00", utc(2026, 1, 5, 14, 30));
        state.seed_fill("JPM", "buy", "5", "200.00", utc(2026, 1, 6, 14, 35));
        state.add_cash_activity(
            "DIV",
            Some("CDIV"),
            day(2, 14),
            utc(2026, 2, 14, 13, 0),
            dec("1.25"),
            vec![
                ("description", json!("Cash dividend on 10 AAPL at 0.125")),
                ("symbol", json!("AAPL")),
                ("qty", json!("10")),
                ("per_share_amount", json!("0.125")),
            ],
        );
        state.seed_fill("AAPL", "sell", "4", "170.00", utc(2026, 3, 2, 15, 0));
        state.add_cash_activity(
            "FEE",
            Some("REG"),
            day(3, 2),
            utc(2026, 3, 2, 21, 0),
            dec("-0.02"),
            vec![
                ("description", json!("REG fee on the sale of 4 AAPL")),
                ("symbol", json!("AAPL")),
                ("qty", json!("4")),
            ],
        );
        state.add_cash_activity(
            "FEE",
            Some("TAF"),
            day(3, 2),
            utc(2026, 3, 2, 21, 0),
            dec("-0.01"),
            vec![
                ("description", json!("TAF fee on the sale of 4 AAPL")),
                ("symbol", json!("AAPL")),
                ("qty", json!("4")),
            ],
        );
        state
    }

    fn fresh_id(&mut self) -> String {
        let id = uuid(self.next_id);
        self.next_id += 1;
        id
    }

    /// `20260105093000000::<uuid>`: the New York time of the activity, then a fresh UUID.
    fn activity_id(&mut self, at: DateTime<Utc>) -> String {
        let prefix = ny(at).format("%Y%m%d%H%M%S%3f").to_string();
        format!("{prefix}::{}", self.fresh_id())
    }

    fn asset(&self, symbol_or_id: &str) -> Option<&AssetInfo> {
        self.assets
            .iter()
            .find(|a| a.symbol.eq_ignore_ascii_case(symbol_or_id) || a.id == symbol_or_id)
    }

    fn find(&self, id: &str) -> Option<usize> {
        self.orders.iter().position(|o| o.id == id)
    }

    fn add_row(
        &mut self,
        kind: &str,
        sub_type: Option<&str>,
        date: NaiveDate,
        at: DateTime<Utc>,
        net: Dec,
        extra: Vec<(&str, Value)>,
    ) {
        self.add_cash_activity(kind, sub_type, date, at, net, extra);
    }

    fn add_cash_activity(
        &mut self,
        kind: &str,
        sub_type: Option<&str>,
        date: NaiveDate,
        at: DateTime<Utc>,
        net: Dec,
        extra: Vec<(&str, Value)>,
    ) {
        let id = self.activity_id(at);
        let mut row = Map::new();
        row.insert("id".into(), json!(id));
        row.insert("activity_type".into(), json!(kind));
        if let Some(sub) = sub_type {
            row.insert("activity_sub_type".into(), json!(sub));
        }
        row.insert("date".into(), json!(date.format("%Y-%m-%d").to_string()));
        row.insert("net_amount".into(), net.json());
        for (k, v) in extra {
            row.insert(k.to_owned(), v);
        }
        row.insert("status".into(), json!("executed"));
        row.insert("currency".into(), json!("USD"));
        row.insert("created_at".into(), json!(stamp(at)));
        self.cash = self.cash + net;
        self.activities.push(Activity {
            id,
            kind: kind.to_owned(),
            at,
            json: Value::Object(row),
        });
    }

    fn seed_fill(
        &mut self,
        symbol: &str,
        side: &str,
        qty: &str,
        price: &str,
        at: DateTime<Utc>,
    ) -> usize {
        let index = self.insert_order(Draft::market(symbol, side, dec(qty)), at);
        self.execute(index, dec(price), at);
        index
    }

    fn insert_order(&mut self, draft: Draft, at: DateTime<Utc>) -> usize {
        let id = self.fresh_id();
        let client_order_id = match draft.client_order_id {
            Some(c) => c,
            None => self.fresh_id(),
        };
        let asset_id = self
            .asset(&draft.symbol)
            .map(|a| a.id.clone())
            .unwrap_or_default();
        self.orders.push(Order {
            id,
            client_order_id,
            symbol: draft.symbol,
            asset_id,
            created_at: at,
            updated_at: at,
            filled_at: None,
            canceled_at: None,
            replaced_at: None,
            replaced_by: None,
            replaces: None,
            qty: draft.qty,
            notional: draft.notional,
            filled_qty: Dec::ZERO,
            filled_avg_price: None,
            order_class: draft.order_class,
            order_type: draft.order_type,
            side: draft.side,
            time_in_force: draft.time_in_force,
            limit_price: draft.limit_price,
            stop_price: draft.stop_price,
            status: draft.status.to_owned(),
            parent: draft.parent,
            legs: Vec::new(),
        });
        self.orders.len() - 1
    }

    /// Fills order `index` completely at `price`.
    fn execute(&mut self, index: usize, price: Dec, at: DateTime<Utc>) {
        let order = self.orders[index].clone();
        let qty = match (order.qty, order.notional) {
            (Some(q), _) => q,
            (None, Some(n)) => n.over_down(price).unwrap_or(Dec::ZERO),
            (None, None) => Dec::ZERO,
        };
        let amount = qty.times(price).round(2);
        let held = self
            .positions
            .get(&order.symbol)
            .copied()
            .unwrap_or_default();
        let buying = order.side == "buy";
        let signed = if buying { qty } else { -qty };
        let fill_side = if buying {
            "buy"
        } else if held.qty.is_positive() {
            "sell"
        } else {
            "sell_short"
        };
        let mut next = held;
        let same_direction = held.qty == Dec::ZERO || (held.qty.is_positive() == buying);
        if same_direction {
            next.qty = held.qty + signed;
            next.cost = held.cost + if buying { amount } else { -amount };
        } else if qty <= held.qty.abs() {
            let out = if qty == held.qty.abs() {
                held.cost
            } else {
                held.cost
                    .times(qty)
                    .over(held.qty.abs())
                    .unwrap_or(Dec::ZERO)
                    .round(2)
            };
            next.qty = held.qty + signed;
            next.cost = held.cost - out;
        } else {
            next.qty = held.qty + signed;
            next.cost = next.qty.times(price).round(2);
        }
        if next.qty == Dec::ZERO {
            self.positions.remove(&order.symbol);
        } else {
            self.positions.insert(order.symbol.clone(), next);
        }
        self.cash = if buying {
            self.cash - amount
        } else {
            self.cash + amount
        };

        let o = &mut self.orders[index];
        o.status = "filled".to_owned();
        o.filled_qty = qty;
        o.filled_avg_price = Some(price);
        o.filled_at = Some(at);
        o.updated_at = at;

        let id = self.activity_id(at);
        self.activities.push(Activity {
            id: id.clone(),
            kind: "FILL".to_owned(),
            at,
            json: json!({
                "id": id,
                "activity_type": "FILL",
                "transaction_time": stamp(at),
                "type": "fill",
                "price": price.json(),
                "qty": qty.json(),
                "side": fill_side,
                "symbol": order.symbol,
                "leaves_qty": "0",
                "order_id": order.id,
                "cum_qty": qty.json(),
                "order_status": "filled",
            }),
        });

        // Legs wake up when their entry fills.
        for leg in &order.legs {
            if let Some(i) = self.find(leg)
                && self.orders[i].status == "held"
                && order.order_class != "oco"
                && (order.order_class != "bracket" || self.orders[i].order_type == "limit")
            {
                self.orders[i].status = "new".to_owned();
                self.orders[i].updated_at = at;
            }
        }
        // One-cancels-other: a filled exit cancels its siblings (and an OCO's parent).
        if order.order_class == "oco" && order.parent.is_none() {
            for leg in &order.legs {
                if let Some(i) = self.find(leg) {
                    self.cancel(i, at);
                }
            }
        }
        if let Some(parent) = order.parent.as_deref().and_then(|p| self.find(p)) {
            let class = self.orders[parent].order_class.clone();
            if class == "bracket" || class == "oco" {
                let siblings = self.orders[parent].legs.clone();
                for leg in siblings.iter().filter(|l| **l != order.id) {
                    if let Some(i) = self.find(leg) {
                        self.cancel(i, at);
                    }
                }
                if class == "oco" {
                    self.cancel(parent, at);
                }
            }
        }
    }

    /// Cancels order `index` (and its open legs) if it is open.
    fn cancel(&mut self, index: usize, at: DateTime<Utc>) {
        if !is_open_status(&self.orders[index].status) {
            return;
        }
        let o = &mut self.orders[index];
        o.status = "canceled".to_owned();
        o.canceled_at = Some(at);
        o.updated_at = at;
        for leg in o.legs.clone() {
            if let Some(i) = self.find(&leg) {
                self.cancel(i, at);
            }
        }
    }

    /// Whether order `index` is working at the exchange (and so can fill).
    fn is_live(&self, index: usize) -> bool {
        let o = &self.orders[index];
        match o.status.as_str() {
            "new" | "accepted" | "partially_filled" | "pending_new" => true,
            "held" => match o.parent.as_deref().and_then(|p| self.find(p)) {
                Some(p) => {
                    let parent = &self.orders[p];
                    parent.status == "filled"
                        || (parent.order_class == "oco" && is_open_status(&parent.status))
                }
                None => false,
            },
            _ => false,
        }
    }

    fn match_price(order: &Order, quote: Quote) -> Option<Dec> {
        let buying = order.side == "buy";
        let touch = if buying { quote.ask } else { quote.bid };
        let limit_ok = |limit: Option<Dec>| match limit {
            Some(l) if buying => touch <= l,
            Some(l) => touch >= l,
            None => false,
        };
        let stop_hit = |stop: Option<Dec>| match stop {
            Some(s) if buying => touch >= s,
            Some(s) => touch <= s,
            None => false,
        };
        let fills = match order.order_type.as_str() {
            "market" => true,
            "limit" => limit_ok(order.limit_price),
            "stop" => stop_hit(order.stop_price),
            "stop_limit" => stop_hit(order.stop_price) && limit_ok(order.limit_price),
            _ => false,
        };
        fills.then_some(touch)
    }

    /// Fills every live order of `symbol` that the current quote makes marketable.
    fn sweep(&mut self, symbol: &str, at: DateTime<Utc>) {
        let Some(quote) = self.quotes.get(symbol).copied() else {
            return;
        };
        for i in 0..self.orders.len() {
            if self.orders[i].symbol != symbol || !self.is_live(i) {
                continue;
            }
            if let Some(price) = Self::match_price(&self.orders[i], quote) {
                self.execute(i, price, at);
            }
        }
    }

    /// The remaining quantity of order `index` if it holds shares or cash now.
    fn working_qty(&self, index: usize) -> Option<Dec> {
        let o = &self.orders[index];
        let working = matches!(
            o.status.as_str(),
            "new" | "accepted" | "partially_filled" | "pending_new"
        );
        if !working {
            return None;
        }
        o.qty.map(|q| q - o.filled_qty)
    }

    /// Shares of `symbol` that open sell orders hold.
    fn reserved_shares(&self, symbol: &str) -> Dec {
        (0..self.orders.len())
            .filter(|i| self.orders[*i].symbol == symbol && self.orders[*i].side == "sell")
            .filter_map(|i| self.working_qty(i))
            .fold(Dec::ZERO, |a, b| a + b)
    }

    /// Cash that open buy orders hold (at their limit or stop price).
    fn reserved_cash(&self) -> Dec {
        (0..self.orders.len())
            .filter(|i| self.orders[*i].side == "buy")
            .filter_map(|i| {
                let o = &self.orders[i];
                let price = o.limit_price.or(o.stop_price)?;
                Some(self.working_qty(i)?.times(price).round(2))
            })
            .fold(Dec::ZERO, |a, b| a + b)
    }

    fn buying_power(&self) -> Dec {
        self.cash - self.reserved_cash()
    }

    fn last_price(&self, symbol: &str) -> Option<Dec> {
        self.quotes.get(symbol).map(|q| q.bid)
    }

    fn order_json(&self, index: usize, nested: bool) -> Value {
        let o = &self.orders[index];
        let time = |t: Option<DateTime<Utc>>| t.map_or(Value::Null, |t| json!(stamp(t)));
        let opt = |d: Option<Dec>| d.map_or(Value::Null, Dec::json);
        let legs = if nested && !o.legs.is_empty() {
            Value::Array(
                o.legs
                    .iter()
                    .filter_map(|l| self.find(l))
                    .map(|i| self.order_json(i, false))
                    .collect(),
            )
        } else {
            Value::Null
        };
        let intent = if o.side == "buy" {
            "buy_to_open"
        } else {
            "sell_to_close"
        };
        json!({
            "id": o.id,
            "client_order_id": o.client_order_id,
            "created_at": stamp(o.created_at),
            "updated_at": stamp(o.updated_at),
            "submitted_at": stamp(o.created_at),
            "filled_at": time(o.filled_at),
            "expired_at": null,
            "canceled_at": time(o.canceled_at),
            "failed_at": null,
            "replaced_at": time(o.replaced_at),
            "replaced_by": o.replaced_by,
            "replaces": o.replaces,
            "asset_id": o.asset_id,
            "symbol": o.symbol,
            "asset_class": "us_equity",
            "notional": opt(o.notional),
            "qty": opt(o.qty),
            "filled_qty": o.filled_qty.json(),
            "filled_avg_price": opt(o.filled_avg_price),
            "order_class": o.order_class,
            "order_type": o.order_type,
            "type": o.order_type,
            "side": o.side,
            "position_intent": intent,
            "time_in_force": o.time_in_force,
            "limit_price": opt(o.limit_price),
            "stop_price": opt(o.stop_price),
            "status": o.status,
            "extended_hours": false,
            "legs": legs,
            "trail_percent": null,
            "trail_price": null,
            "hwm": null,
        })
    }

    fn position_json(&self, symbol: &str) -> Option<Value> {
        let held = self.positions.get(symbol)?;
        let asset = self.asset(symbol)?;
        let avg = held.cost.over(held.qty).unwrap_or(Dec::ZERO).abs().round(4);
        let current = self.last_price(symbol).unwrap_or(avg);
        let lastday = self.lastday.get(symbol).copied().unwrap_or(current);
        let market_value = held.qty.times(current).round(2);
        let pl = market_value - held.cost;
        let intraday = held.qty.times(current - lastday).round(2);
        let ratio = |a: Dec, b: Dec| a.over(b.abs()).unwrap_or(Dec::ZERO);
        let available = held.qty - self.reserved_shares(symbol);
        Some(json!({
            "asset_id": asset.id,
            "symbol": symbol,
            "exchange": asset.exchange,
            "asset_class": "us_equity",
            "asset_marginable": true,
            "qty": held.qty.json(),
            "qty_available": available.json(),
            "avg_entry_price": avg.json(),
            "side": if held.qty.is_positive() { "long" } else { "short" },
            "market_value": market_value.json(),
            "cost_basis": held.cost.json(),
            "unrealized_pl": pl.json(),
            "unrealized_plpc": ratio(pl, held.cost).json(),
            "unrealized_intraday_pl": intraday.json(),
            "unrealized_intraday_plpc": ratio(current - lastday, lastday).json(),
            "current_price": current.json(),
            "lastday_price": lastday.json(),
            "change_today": ratio(current - lastday, lastday).json(),
        }))
    }

    fn account_json(&self) -> Value {
        let mut long = Dec::ZERO;
        let mut short = Dec::ZERO;
        let mut last = Dec::ZERO;
        for (symbol, held) in &self.positions {
            let current = self.last_price(symbol).unwrap_or(Dec::ZERO);
            let value = held.qty.times(current).round(2);
            if held.qty.is_positive() {
                long = long + value;
            } else {
                short = short + value;
            }
            let lastday = self.lastday.get(symbol).copied().unwrap_or(current);
            last = last + held.qty.times(lastday).round(2);
        }
        let equity = self.cash + long + short;
        let power = self.buying_power().json();
        json!({
            "id": self.account_id,
            "account_number": "PA3TESTACCT",
            "status": "ACTIVE",
            "crypto_status": "ACTIVE",
            "currency": "USD",
            "buying_power": power,
            "regt_buying_power": power,
            "daytrading_buying_power": "0",
            "non_marginable_buying_power": power,
            "options_buying_power": power,
            "cash": self.cash.json(),
            "accrued_fees": "0",
            "pending_transfer_in": "0",
            "pending_transfer_out": "0",
            "portfolio_value": equity.json(),
            "pattern_day_trader": false,
            "trading_blocked": false,
            "transfers_blocked": false,
            "account_blocked": false,
            "created_at": stamp(self.account_created),
            "trade_suspended_by_user": false,
            "multiplier": "1",
            "shorting_enabled": false,
            "equity": equity.json(),
            "last_equity": (self.cash + last).json(),
            "long_market_value": long.json(),
            "short_market_value": short.json(),
            "initial_margin": "0",
            "maintenance_margin": "0",
            "last_maintenance_margin": "0",
            "sma": "0",
            "daytrade_count": 0,
            "balance_asof": "2026-03-02",
            "options_approved_level": 0,
            "options_trading_level": 0,
            "intraday_adjustments": "0",
            "pending_reg_taf_fees": "0",
        })
    }
}

// ---------------------------------------------------------------------------------------
// HTTP

/// An answer before it becomes an HTTP response.
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Option<Value>,
}

impl Reply {
    fn json(status: u16, body: Value) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: Some(body),
        }
    }

    fn ok(body: Value) -> Self {
        Self::json(200, body)
    }

    fn error(status: u16, code: u64, message: &str) -> Self {
        Self::json(status, json!({"code": code, "message": message}))
    }

    fn empty(status: u16) -> Self {
        Reply {
            status,
            headers: Vec::new(),
            body: None,
        }
    }

    fn into_response(self) -> Response {
        let mut builder = Response::builder().status(self.status);
        for (name, value) in &self.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        let body = match &self.body {
            Some(json) => {
                builder = builder.header("content-type", "application/json; charset=UTF-8");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        builder
            .body(body)
            .unwrap_or_else(|_| Response::new(Body::empty()))
    }
}

fn unprocessable(message: &str) -> Reply {
    Reply::error(422, 40010001, message)
}

fn bad_request(message: &str) -> Reply {
    Reply::error(400, 40010001, message)
}

enum Outcome {
    Reply(Reply),
    Hang,
}

async fn handle(
    AxumState(state): AxumState<Arc<Mutex<State>>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let outcome = lock(&state).dispatch(&method, &uri, &headers, &body, Utc::now());
    let reply = match outcome {
        Outcome::Reply(reply) => reply,
        Outcome::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Reply::error(500, 50010000, "internal server error")
        }
    };
    reply.into_response()
}

fn percent_decode(text: &str, plus_is_space: bool) -> String {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                if let (Some(hi), Some(lo)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                    out.push(hi * 16 + lo);
                    i += 3;
                    continue;
                }
                out.push(b'%');
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A decoded query string.
#[derive(Debug, Default)]
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decode(k, true), percent_decode(v, true))
            })
            .collect();
        Query(pairs)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    fn flag(&self, key: &str) -> bool {
        self.get(key) == Some("true")
    }

    /// A whole number in `min..=max`, `default` when absent.
    fn number(&self, key: &str, default: u64, min: u64, max: u64) -> Result<u64, String> {
        match self.get(key) {
            None => Ok(default),
            Some(text) => match text.parse::<u64>() {
                Ok(n) if (min..=max).contains(&n) => Ok(n),
                _ => Err(format!("invalid {key}: {text}")),
            },
        }
    }

    fn time(&self, key: &str) -> Result<Option<DateTime<Utc>>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(text) => parse_time(text)
                .map(Some)
                .ok_or_else(|| format!("invalid {key}: {text}")),
        }
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl State {
    fn dispatch(
        &mut self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &[u8],
        now: DateTime<Utc>,
    ) -> Outcome {
        let target = uri
            .path_and_query()
            .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
        self.requests.push(format!("{method} {target}"));

        let authorized = header(headers, "apca-api-key-id") == Some(self.key.as_str())
            && header(headers, "apca-api-secret-key") == Some(self.secret.as_str());
        if !authorized {
            return Outcome::Reply(Reply::error(401, 40110000, "request is not authorized"));
        }

        let path = uri.path();
        let post_order = method == Method::POST && path == "/v2/orders";
        let cancel_all = method == Method::DELETE && path == "/v2/orders";
        let queued = self.failures.iter().position(|f| match f {
            Failure::TooManyRequests { .. } | Failure::ServerError | Failure::Hang => true,
            Failure::DuplicateClientOrderId | Failure::HangOnOrder => post_order,
            Failure::CancelAllMultiStatus => cancel_all,
        });
        let mut partial_cancel = false;
        if let Some(failure) = queued.and_then(|i| self.failures.remove(i)) {
            match failure {
                Failure::TooManyRequests { reset_in_secs } => {
                    let reset = now.timestamp().saturating_add_unsigned(reset_in_secs);
                    let mut reply = Reply::error(429, 42910000, "rate limit exceeded");
                    reply.headers = vec![
                        ("X-RateLimit-Limit".into(), "200".into()),
                        ("X-RateLimit-Remaining".into(), "0".into()),
                        ("X-RateLimit-Reset".into(), reset.to_string()),
                        ("Retry-After".into(), reset_in_secs.to_string()),
                    ];
                    return Outcome::Reply(reply);
                }
                Failure::ServerError => {
                    return Outcome::Reply(Reply::error(500, 50010000, "internal server error"));
                }
                Failure::Hang | Failure::HangOnOrder => return Outcome::Hang,
                Failure::DuplicateClientOrderId => {
                    return Outcome::Reply(unprocessable("client_order_id must be unique"));
                }
                Failure::CancelAllMultiStatus => partial_cancel = true,
            }
        }

        let segments: Vec<String> = path
            .trim_start_matches('/')
            .split('/')
            .map(|s| percent_decode(s, false))
            .collect();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        let query = Query::parse(uri.query());
        let mut reply = self.route(method, &segments, &query, body, now, partial_cancel);
        reply.headers.extend([
            ("X-RateLimit-Limit".to_owned(), "200".to_owned()),
            ("X-RateLimit-Remaining".to_owned(), "199".to_owned()),
            (
                "X-RateLimit-Reset".to_owned(),
                (now.timestamp() + 60).to_string(),
            ),
        ]);
        Outcome::Reply(reply)
    }

    fn route(
        &mut self,
        method: &Method,
        segments: &[&str],
        query: &Query,
        body: &[u8],
        now: DateTime<Utc>,
        partial_cancel: bool,
    ) -> Reply {
        match (method.as_str(), segments) {
            ("GET", ["v2", "account"]) => Reply::ok(self.account_json()),
            ("GET", ["v2", "account", "activities"]) => self.list_activities(None, query),
            ("GET", ["v2", "account", "activities", kind]) => {
                self.list_activities(Some(kind), query)
            }
            ("GET", ["v2", "positions"]) => {
                let symbols: Vec<String> = self.positions.keys().cloned().collect();
                Reply::ok(Value::Array(
                    symbols
                        .iter()
                        .filter_map(|s| self.position_json(s))
                        .collect(),
                ))
            }
            ("GET", ["v2", "positions", symbol]) => match self.position_symbol(symbol) {
                Some(s) => Reply::ok(self.position_json(&s).unwrap_or(Value::Null)),
                None => Reply::error(404, 40410000, "position does not exist"),
            },
            ("DELETE", ["v2", "positions", symbol]) => self.close_position(symbol, query, now),
            ("GET", ["v2", "orders"]) => self.list_orders(query),
            ("POST", ["v2", "orders"]) => self.post_order(body, now),
            ("DELETE", ["v2", "orders"]) => self.cancel_all(partial_cancel, now),
            ("GET", ["v2", "orders:by_client_order_id"]) => {
                let wanted = query.get("client_order_id").unwrap_or("");
                match self.orders.iter().position(|o| o.client_order_id == wanted) {
                    Some(i) => Reply::ok(self.order_json(i, query.flag("nested"))),
                    None => Reply::error(404, 40410000, "order not found"),
                }
            }
            ("GET", ["v2", "orders", id]) => match self.find(id) {
                Some(i) => Reply::ok(self.order_json(i, query.flag("nested"))),
                None => Reply::error(404, 40410000, "order not found"),
            },
            ("DELETE", ["v2", "orders", id]) => match self.find(id) {
                Some(i) if is_open_status(&self.orders[i].status) => {
                    self.cancel(i, now);
                    Reply::empty(204)
                }
                Some(_) => Reply::error(422, 42210000, "order is not cancelable"),
                None => Reply::error(404, 40410000, "order not found"),
            },
            ("PATCH", ["v2", "orders", id]) => self.replace_order(id, body, now),
            ("GET", ["v2", "clock"]) => {
                Reply::ok(clock_json(self.market.now.unwrap_or(now), &self.market))
            }
            ("GET", ["v2", "calendar"]) => self.market.calendar(query),
            ("GET", ["v1beta1", "news"]) => self.market.news(query),
            ("GET", ["v2", "assets"]) => self.list_assets(query),
            ("GET", ["v2", "assets", symbol]) => match self.asset(symbol) {
                Some(asset) => Reply::ok(asset_json(asset)),
                None => Reply::error(404, 40410000, "asset not found"),
            },
            ("GET", ["v2", "stocks", "snapshots"]) => self.snapshots(query),
            ("GET", ["v1beta1", "options", "snapshots"]) => self.option_snapshots(query),
            ("GET", ["v1beta1", "options", "snapshots", underlying]) => {
                self.chain.snapshots(underlying, query)
            }
            ("GET", ["v2", "options", "contracts"]) => self.chain.contracts(query, now),
            ("GET", ["v1beta3", "crypto", loc, "snapshots"]) => self.crypto_snapshots(loc, query),
            ("GET", ["v2", "stocks", symbol, "quotes", "latest"]) => {
                self.latest_quote(symbol, query)
            }
            ("GET", ["v2", "stocks", symbol, "bars"]) => self.bars(symbol, query),
            _ => Reply::error(404, 40410000, "endpoint not found"),
        }
    }

    /// `GET /v2/assets`: `status` (default every status), `asset_class` (default
    /// `us_equity`; an unknown one is a 422), `exchange`; sorted by class, exchange and
    /// symbol, as documented. Not paged.
    fn list_assets(&self, query: &Query) -> Reply {
        let class = query.get("asset_class").unwrap_or("us_equity");
        if !["us_equity", "us_option", "crypto", "ipo"].contains(&class) {
            return unprocessable(&format!("invalid asset_class: {class}"));
        }
        let status = query.get("status");
        if status.is_some_and(|s| !["active", "inactive"].contains(&s)) {
            return unprocessable("invalid status");
        }
        let mut rows: Vec<&AssetInfo> = self
            .assets
            .iter()
            .filter(|a| a.listing.class == class)
            .filter(|a| status.is_none_or(|s| a.listing.status == s))
            .filter(|a| query.get("exchange").is_none_or(|e| a.exchange == e))
            .collect();
        rows.sort_by(|a, b| (a.exchange, &a.symbol).cmp(&(b.exchange, &b.symbol)));
        Reply::ok(Value::Array(rows.into_iter().map(asset_json).collect()))
    }

    fn position_symbol(&self, symbol_or_id: &str) -> Option<String> {
        let symbol = self.asset(symbol_or_id)?.symbol.clone();
        self.positions.contains_key(&symbol).then_some(symbol)
    }

    fn list_activities(&self, only: Option<&str>, query: &Query) -> Reply {
        let types: Option<Vec<String>> = match only.or(query.get("activity_types")) {
            None => None,
            Some(list) => {
                let wanted: Vec<String> = list
                    .split(',')
                    .map(|t| t.trim().to_uppercase())
                    .filter(|t| !t.is_empty())
                    .collect();
                if let Some(bad) = wanted
                    .iter()
                    .find(|t| !ACTIVITY_TYPES.contains(&t.as_str()))
                {
                    return unprocessable(&format!("invalid activity type: {bad}"));
                }
                if let Some(bad) = wanted.iter().find(|t| self.refused_types.contains(t)) {
                    return unprocessable(&if self.refusal_names_type {
                        format!("invalid activity type: {bad}")
                    } else {
                        "invalid activity type".to_owned()
                    });
                }
                Some(wanted)
            }
        };
        let category = query.get("category");
        if !matches!(
            category,
            None | Some("trade_activity" | "non_trade_activity")
        ) {
            return unprocessable("invalid category");
        }
        let ascending = match query.get("direction") {
            None | Some("desc") => false,
            Some("asc") => true,
            Some(_) => return unprocessable("invalid direction"),
        };
        let page_size = match query.number("page_size", 100, 1, u64::MAX) {
            Ok(n) => usize_of(n.min(100)),
            Err(e) => return unprocessable(&e),
        };
        let (after, until, date) =
            match (query.time("after"), query.time("until"), query.time("date")) {
                (Ok(a), Ok(u), Ok(d)) => (a, u, d),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return unprocessable(&e),
            };

        let mut sorted: Vec<&Activity> = self.activities.iter().collect();
        sorted.sort_by(|a, b| (a.at, &a.id).cmp(&(b.at, &b.id)));
        if !ascending {
            sorted.reverse();
        }
        if let Some(token) = query.get("page_token") {
            match sorted.iter().position(|a| a.id == token) {
                Some(i) => {
                    sorted.drain(..=i);
                }
                None => return unprocessable("invalid page_token"),
            }
        }
        let rows: Vec<Value> = sorted
            .into_iter()
            .filter(|a| types.as_ref().is_none_or(|t| t.contains(&a.kind)))
            .filter(|a| match category {
                Some("trade_activity") => a.kind == "FILL",
                Some(_) => a.kind != "FILL",
                None => true,
            })
            .filter(|a| after.is_none_or(|t| a.at > t))
            .filter(|a| until.is_none_or(|t| a.at < t))
            .filter(|a| date.is_none_or(|d| ny(a.at).date_naive() == d.date_naive()))
            .take(page_size)
            .map(|a| a.json.clone())
            .collect();
        Reply::ok(Value::Array(rows))
    }

    fn list_orders(&self, query: &Query) -> Reply {
        let status = query.get("status").unwrap_or("open");
        if !matches!(status, "open" | "closed" | "all") {
            return unprocessable("invalid status");
        }
        let limit = match query.number("limit", 50, 1, 500) {
            Ok(n) => usize_of(n),
            Err(e) => return unprocessable(&e),
        };
        let ascending = match query.get("direction") {
            None | Some("desc") => false,
            Some("asc") => true,
            Some(_) => return unprocessable("invalid direction"),
        };
        let (after, until) = match (query.time("after"), query.time("until")) {
            (Ok(a), Ok(u)) => (a, u),
            (Err(e), _) | (_, Err(e)) => return unprocessable(&e),
        };
        let nested = query.flag("nested");
        let symbols: Option<Vec<String>> = query
            .get("symbols")
            .map(|s| s.split(',').map(|x| x.trim().to_uppercase()).collect());
        let side = query.get("side");
        let mut picked: Vec<usize> = (0..self.orders.len())
            .filter(|i| {
                let o = &self.orders[*i];
                let open = is_open_status(&o.status);
                (status == "all" || (status == "open") == open)
                    && !(nested && o.parent.is_some())
                    && symbols.as_ref().is_none_or(|s| s.contains(&o.symbol))
                    && side.is_none_or(|s| s == o.side)
                    && after.is_none_or(|t| o.created_at > t)
                    && until.is_none_or(|t| o.created_at < t)
            })
            .collect();
        picked.sort_by_key(|i| (self.orders[*i].created_at, *i));
        if !ascending {
            picked.reverse();
        }
        Reply::ok(Value::Array(
            picked
                .into_iter()
                .take(limit)
                .map(|i| self.order_json(i, nested))
                .collect(),
        ))
    }

    fn post_order(&mut self, body: &[u8], now: DateTime<Utc>) -> Reply {
        let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(body) else {
            return Reply::error(400, 40010000, "request body format is invalid");
        };
        let text = |key: &str| request.get(key).and_then(Value::as_str);
        let Some(symbol) = text("symbol").map(str::to_uppercase) else {
            return unprocessable("symbol is required");
        };
        if self.asset(&symbol).is_none() {
            return unprocessable(&format!("asset \"{symbol}\" not found"));
        }
        let side = text("side").unwrap_or("");
        if !matches!(side, "buy" | "sell") {
            return unprocessable("invalid side");
        }
        let order_type = text("type").unwrap_or("");
        match order_type {
            "market" | "limit" | "stop" | "stop_limit" => {}
            "trailing_stop" => return unprocessable("the fake does not support trailing_stop"),
            _ => return unprocessable("invalid order type"),
        }
        let tif = text("time_in_force").unwrap_or("");
        if !matches!(tif, "day" | "gtc" | "opg" | "cls" | "ioc" | "fok") {
            return unprocessable("invalid time_in_force");
        }
        let decimal = |value: Option<&Value>, name: &str| -> Result<Option<Dec>, Reply> {
            match value {
                None | Some(Value::Null) => Ok(None),
                Some(v) => match Dec::from_json(v) {
                    Some(d) if d.is_positive() => Ok(Some(d)),
                    _ => Err(unprocessable(&format!("invalid {name}"))),
                },
            }
        };
        let field = |name: &str| decimal(request.get(name), name);
        let (qty, notional, limit_price, stop_price) = match (
            field("qty"),
            field("notional"),
            field("limit_price"),
            field("stop_price"),
        ) {
            (Ok(q), Ok(n), Ok(l), Ok(s)) => (q, n, l, s),
            (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return e,
        };
        match (qty, notional) {
            (Some(_), Some(_)) => {
                return unprocessable("only one of qty or notional may be given");
            }
            (None, None) => return unprocessable("qty or notional is required"),
            (None, Some(_)) if order_type != "market" || tif != "day" => {
                return unprocessable("notional orders must be market orders for the day");
            }
            _ => {}
        }
        let client_order_id = match request.get("client_order_id") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) if c.chars().count() > 128 => {
                return unprocessable("client_order_id must be no more than 128 characters");
            }
            Some(Value::String(c)) => {
                if self.orders.iter().any(|o| o.client_order_id == *c) {
                    return unprocessable("client_order_id must be unique");
                }
                Some(c.clone())
            }
            Some(_) => return unprocessable("invalid client_order_id"),
        };
        let class = match text("order_class").unwrap_or("simple") {
            "" | "simple" => "simple",
            c @ ("bracket" | "oto" | "oco") => c,
            "mleg" => return unprocessable("the fake does not support mleg orders"),
            _ => return unprocessable("invalid order_class"),
        };
        let take_profit = match decimal(
            request
                .get("take_profit")
                .and_then(|t| t.get("limit_price")),
            "take_profit.limit_price",
        ) {
            Ok(v) => v,
            Err(e) => return e,
        };
        let (stop_loss, stop_loss_limit) = match (
            decimal(
                request.get("stop_loss").and_then(|t| t.get("stop_price")),
                "stop_loss.stop_price",
            ),
            decimal(
                request.get("stop_loss").and_then(|t| t.get("limit_price")),
                "stop_loss.limit_price",
            ),
        ) {
            (Ok(s), Ok(l)) => (s, l),
            (Err(e), _) | (_, Err(e)) => return e,
        };

        // An OCO order's own limit price is its take-profit's.
        let limit_price = match class {
            "oco" => limit_price.or(take_profit),
            _ => limit_price,
        };
        if matches!(order_type, "limit" | "stop_limit") && limit_price.is_none() {
            return unprocessable("limit_price is required");
        }
        if matches!(order_type, "stop" | "stop_limit") && stop_price.is_none() {
            return unprocessable("stop_price is required");
        }
        let quote = self.quotes.get(&symbol).copied();
        let buying = side == "buy";
        let touch = quote.map(|q| if buying { q.ask } else { q.bid });
        if class != "simple" {
            if notional.is_some() {
                return unprocessable("notional orders cannot have legs");
            }
            let (needs_tp, needs_sl) = match class {
                "oto" => (false, false),
                _ => (true, true),
            };
            if (needs_tp && take_profit.is_none()) || (needs_sl && stop_loss.is_none()) {
                return unprocessable(
                    "take_profit.limit_price and stop_loss.stop_price are required",
                );
            }
            if class == "oto" && take_profit.is_some() == stop_loss.is_some() {
                return unprocessable("oto orders take one of take_profit or stop_loss");
            }
            if class == "oco" && order_type != "limit" {
                return unprocessable("oco orders must be limit orders");
            }
            if class != "oco" && !matches!(order_type, "market" | "limit") {
                return unprocessable("bracket and oto entries must be market or limit orders");
            }
            if !matches!(tif, "day" | "gtc") {
                return unprocessable("orders with legs must be day or gtc");
            }
            let cent = Dec::cents(1);
            if class == "oco" {
                // An OCO is itself the exit: a sell takes profit above its stop, a buy below.
                if let (Some(t), Some(s)) = (take_profit, stop_loss)
                    && ((buying && t >= s) || (!buying && t <= s))
                {
                    return unprocessable(
                        "take_profit.limit_price must be on the profitable side of stop_loss.stop_price",
                    );
                }
            } else if let Some(base) = limit_price.or(touch) {
                // A bracket's exits sit on either side of the entry: above and below a buy.
                let tp_ok = take_profit.is_none_or(|t| {
                    if buying {
                        t >= base + cent
                    } else {
                        t <= base - cent
                    }
                });
                let sl_ok = stop_loss.is_none_or(|s| {
                    if buying {
                        s <= base - cent
                    } else {
                        s >= base + cent
                    }
                });
                if !(tp_ok && sl_ok) {
                    return unprocessable(if buying {
                        "take_profit.limit_price must be above and stop_loss.stop_price below the entry"
                    } else {
                        "take_profit.limit_price must be below and stop_loss.stop_price above the entry"
                    });
                }
            }
        }

        // What the order needs: cash for a buy, shares for a sell.
        let estimate_price = limit_price.or(stop_price).or(touch);
        if buying {
            let cost = match (qty, notional, estimate_price) {
                (_, Some(n), _) => Some(n),
                (Some(q), None, Some(p)) => Some(q.times(p).round(2)),
                _ => None,
            };
            if cost.is_some_and(|c| c > self.buying_power()) {
                return Reply::error(403, 40310000, "insufficient buying power");
            }
        }
        if !buying {
            let wanted = match (qty, notional, touch) {
                (Some(q), _, _) => q,
                (None, Some(n), Some(p)) => n.over_down(p).unwrap_or(Dec::ZERO),
                _ => Dec::ZERO,
            };
            let held = self.positions.get(&symbol).map_or(Dec::ZERO, |h| h.qty);
            let available = held - self.reserved_shares(&symbol);
            if wanted > available {
                return Reply::error(
                    403,
                    40310000,
                    &format!(
                        "insufficient qty available for order (requested: {wanted}, available: {available})"
                    ),
                );
            }
        }

        let draft = Draft {
            symbol: symbol.clone(),
            side: side.to_owned(),
            order_type: order_type.to_owned(),
            time_in_force: tif.to_owned(),
            qty,
            notional,
            limit_price,
            stop_price,
            order_class: class.to_owned(),
            client_order_id,
            parent: None,
            status: "new",
        };
        let index = self.insert_order(draft, now);
        let parent_id = self.orders[index].id.clone();
        let exit_side = if class == "oco" {
            side
        } else if buying {
            "sell"
        } else {
            "buy"
        };
        let mut legs = Vec::new();
        if class != "simple" {
            let leg = |order_type: &str, limit: Option<Dec>, stop: Option<Dec>, status| Draft {
                symbol: symbol.clone(),
                side: exit_side.to_owned(),
                order_type: order_type.to_owned(),
                time_in_force: tif.to_owned(),
                qty,
                notional: None,
                limit_price: limit,
                stop_price: stop,
                order_class: class.to_owned(),
                client_order_id: None,
                parent: Some(parent_id.clone()),
                status,
            };
            if class != "oco"
                && let Some(tp) = take_profit
            {
                legs.push(leg("limit", Some(tp), None, "held"));
            }
            if let Some(sl) = stop_loss {
                let kind = if stop_loss_limit.is_some() {
                    "stop_limit"
                } else {
                    "stop"
                };
                legs.push(leg(kind, stop_loss_limit, Some(sl), "held"));
            }
        }
        for draft in legs {
            let child = self.insert_order(draft, now);
            let child_id = self.orders[child].id.clone();
            self.orders[index].legs.push(child_id);
        }
        self.sweep(&symbol, now);
        if matches!(tif, "ioc" | "fok") && is_open_status(&self.orders[index].status) {
            self.cancel(index, now);
        }
        Reply::ok(self.order_json(index, true))
    }

    fn cancel_all(&mut self, partial: bool, now: DateTime<Utc>) -> Reply {
        let open: Vec<usize> = (0..self.orders.len())
            .filter(|i| {
                let o = &self.orders[*i];
                o.parent.is_none() && is_open_status(&o.status)
            })
            .collect();
        let mut rows = Vec::new();
        for (n, i) in open.into_iter().enumerate() {
            let id = self.orders[i].id.clone();
            if partial && n == 0 {
                rows.push(json!({
                    "id": id,
                    "status": 500,
                    "body": {"code": 50010000, "message": "internal server error"},
                }));
                continue;
            }
            self.cancel(i, now);
            rows.push(json!({"id": id, "status": 200, "body": self.order_json(i, true)}));
        }
        Reply::json(207, Value::Array(rows))
    }

    fn replace_order(&mut self, id: &str, body: &[u8], now: DateTime<Utc>) -> Reply {
        let Some(index) = self.find(id) else {
            return Reply::error(404, 40410000, "order not found");
        };
        let Ok(Value::Object(patch)) = serde_json::from_slice::<Value>(body) else {
            return Reply::error(400, 40010000, "request body format is invalid");
        };
        let old = self.orders[index].clone();
        // A bracket's waiting legs (held) can be replaced too: how a stop-loss moves.
        let held_leg = old.status == "held" && old.parent.is_some();
        if !(matches!(old.status.as_str(), "new" | "accepted" | "partially_filled") || held_leg)
            || old.order_type == "market"
        {
            return Reply::error(422, 42210000, "order is not replaceable");
        }
        let mut draft = Draft {
            symbol: old.symbol.clone(),
            side: old.side.clone(),
            order_type: old.order_type.clone(),
            time_in_force: old.time_in_force.clone(),
            qty: old.qty,
            notional: old.notional,
            limit_price: old.limit_price,
            stop_price: old.stop_price,
            order_class: old.order_class.clone(),
            client_order_id: None,
            parent: old.parent.clone(),
            status: if held_leg { "held" } else { "new" },
        };
        for (name, slot) in [
            ("qty", &mut draft.qty),
            ("limit_price", &mut draft.limit_price),
            ("stop_price", &mut draft.stop_price),
        ] {
            match patch.get(name) {
                None | Some(Value::Null) => {}
                Some(v) => match Dec::from_json(v) {
                    Some(d) if d.is_positive() => *slot = Some(d),
                    _ => return unprocessable(&format!("invalid {name}")),
                },
            }
        }
        if let Some(tif) = patch.get("time_in_force").and_then(Value::as_str) {
            if !matches!(tif, "day" | "gtc" | "opg" | "cls" | "ioc" | "fok") {
                return unprocessable("invalid time_in_force");
            }
            draft.time_in_force = tif.to_owned();
        }
        match patch.get("client_order_id") {
            None | Some(Value::Null) => {}
            Some(Value::String(c)) if c.chars().count() > 128 => {
                return unprocessable("client_order_id must be no more than 128 characters");
            }
            Some(Value::String(c)) => {
                if self.orders.iter().any(|o| o.client_order_id == *c) {
                    return unprocessable("client_order_id must be unique");
                }
                draft.client_order_id = Some(c.clone());
            }
            Some(_) => return unprocessable("invalid client_order_id"),
        }
        let new_index = self.insert_order(draft, now);
        let new_id = self.orders[new_index].id.clone();
        self.orders[new_index].replaces = Some(old.id.clone());
        self.orders[new_index].legs = old.legs.clone();
        for leg in &old.legs {
            if let Some(i) = self.find(leg) {
                self.orders[i].parent = Some(new_id.clone());
            }
        }
        if let Some(parent) = old.parent.as_deref().and_then(|p| self.find(p)) {
            for leg in &mut self.orders[parent].legs {
                if *leg == old.id {
                    leg.clone_from(&new_id);
                }
            }
        }
        let o = &mut self.orders[index];
        o.status = "replaced".to_owned();
        o.replaced_by = Some(new_id);
        o.replaced_at = Some(now);
        o.updated_at = now;
        self.sweep(&old.symbol, now);
        Reply::ok(self.order_json(new_index, true))
    }

    fn close_position(&mut self, symbol_or_id: &str, query: &Query, now: DateTime<Utc>) -> Reply {
        let Some(symbol) = self.position_symbol(symbol_or_id) else {
            return Reply::error(404, 40410000, "position does not exist");
        };
        let held = self.positions.get(&symbol).map_or(Dec::ZERO, |h| h.qty);
        if !held.is_positive() {
            return unprocessable("the fake only closes long positions");
        }
        let qty = match (query.get("qty"), query.get("percentage")) {
            (Some(_), Some(_)) => {
                return unprocessable("only one of qty or percentage may be given");
            }
            (Some(q), None) => match Dec::parse(q) {
                Some(q) if q.is_positive() => q,
                _ => return unprocessable("invalid qty"),
            },
            (None, Some(p)) => match Dec::parse(p) {
                Some(p) if p.is_positive() && p <= Dec::int(100) => {
                    let share = held.times(p).over(Dec::int(100)).unwrap_or(Dec::ZERO);
                    if held.is_integer() {
                        share.trunc(0)
                    } else {
                        share.trunc(9)
                    }
                }
                _ => return unprocessable("invalid percentage"),
            },
            (None, None) => held,
        };
        if !qty.is_positive() {
            return unprocessable("the quantity to close rounds to zero");
        }
        let available = held - self.reserved_shares(&symbol);
        if qty > available {
            return Reply::error(
                403,
                40310000,
                &format!(
                    "insufficient qty available for order (requested: {qty}, available: {available})"
                ),
            );
        }
        let index = self.insert_order(Draft::market(&symbol, "sell", qty), now);
        self.sweep(&symbol, now);
        Reply::ok(self.order_json(index, true))
    }

    // -- market data ---------------------------------------------------------------------

    fn quote_json(&self, symbol: &str) -> Option<Value> {
        let q = self.quotes.get(symbol)?;
        let tape = self.asset(symbol).map_or("C", |a| a.tape);
        Some(json!({
            "t": q.at.to_rfc3339_opts(SecondsFormat::Nanos, true),
            "ax": "V",
            "ap": q.ask.number(),
            "as": 2,
            "bx": "V",
            "bp": q.bid.number(),
            "bs": 3,
            "c": ["R"],
            "z": tape,
        }))
    }

    fn latest_quote(&self, symbol: &str, query: &Query) -> Reply {
        if let Some(feed) = query.get("feed")
            && !matches!(
                feed,
                "delayed_sip" | "iex" | "otc" | "sip" | "boats" | "overnight"
            )
        {
            return bad_request(&format!("invalid feed: {feed}"));
        }
        match self.quote_json(symbol) {
            Some(quote) => Reply::ok(json!({"symbol": symbol, "quote": quote})),
            None => Reply::error(404, 40410000, &format!("no quote found for {symbol}")),
        }
    }

    fn series(&self, symbol: &str) -> Option<Series> {
        let asset = self.asset(symbol)?;
        let base = asset.base.round(2).0 / (SCALE / 100);
        Some(Series {
            seed: fnv(symbol),
            base_cents: i64::try_from(base).unwrap_or(100),
        })
    }

    fn bars(&self, symbol: &str, query: &Query) -> Reply {
        let Some(timeframe) = query.get("timeframe") else {
            return bad_request("timeframe is required");
        };
        let Some(frame) = Frame::parse(timeframe) else {
            return bad_request(&format!("invalid timeframe: {timeframe}"));
        };
        let limit = match query.number("limit", 1000, 1, 10000) {
            Ok(n) => usize_of(n),
            Err(e) => return bad_request(&e),
        };
        if let Some(feed) = query.get("feed")
            && !matches!(feed, "iex" | "otc" | "sip" | "boats")
        {
            return bad_request(&format!("invalid feed: {feed}"));
        }
        let descending = match query.get("sort") {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(other) => return bad_request(&format!("invalid sort: {other}")),
        };
        let start = match query.time("start") {
            Ok(t) => t,
            Err(e) => return bad_request(&e),
        };
        // A bare date as `end` includes that whole day.
        let end = match query.get("end") {
            None => None,
            Some(text) => match parse_time(text) {
                Some(t) if text.len() == 10 => {
                    Some(t + TimeDelta::days(1) - TimeDelta::nanoseconds(1))
                }
                Some(t) => Some(t),
                None => return bad_request(&format!("invalid end: {text}")),
            },
        };
        let token_kind = format!("{symbol}|{timeframe}");
        let resume = match query.get("page_token") {
            None => None,
            Some(token) => {
                let decoded = base64_decode(token).and_then(|b| String::from_utf8(b).ok());
                let parsed = decoded
                    .as_deref()
                    .and_then(|d| d.rsplit_once('|'))
                    .and_then(|(kind, secs)| {
                        (kind == token_kind)
                            .then(|| secs.parse::<i64>().ok())
                            .flatten()
                            .and_then(|s| DateTime::from_timestamp(s, 0))
                    });
                match parsed {
                    Some(t) => Some(t),
                    None => return bad_request("invalid page_token"),
                }
            }
        };
        let Some(series) = self.series(symbol) else {
            return Reply::ok(json!({"bars": [], "symbol": symbol, "next_page_token": null}));
        };
        let mut slots: Vec<Slot> = frame
            .slots()
            .into_iter()
            .filter(|s| start.is_none_or(|t| s.t >= t) && end.is_none_or(|t| s.t <= t))
            .collect();
        if descending {
            slots.reverse();
        }
        if let Some(from) = resume {
            slots.retain(|s| if descending { s.t <= from } else { s.t >= from });
        }
        let next = slots.get(limit).map(|s| {
            Value::String(base64_encode(
                format!("{token_kind}|{}", s.t.timestamp()).as_bytes(),
            ))
        });
        let bars: Vec<Value> = slots.iter().take(limit).map(|s| series.bar(s)).collect();
        Reply::ok(json!({
            "bars": bars,
            "symbol": symbol,
            "next_page_token": next.unwrap_or(Value::Null),
        }))
    }

    fn snapshots(&self, query: &Query) -> Reply {
        let Some(symbols) = query.get("symbols") else {
            return bad_request("symbols is required");
        };
        if let Some(feed) = query.get("feed")
            && !matches!(
                feed,
                "delayed_sip" | "iex" | "otc" | "sip" | "boats" | "overnight"
            )
        {
            return bad_request(&format!("invalid feed: {feed}"));
        }
        let days = Frame::Day.slots();
        let minutes = Frame::Minutes(1).slots();
        let mut out = Map::new();
        let asked: Vec<&str> = symbols
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if let Some(bad) = asked.iter().find(|s| {
            !s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || ".-/".contains(c))
        }) {
            return bad_request(&format!("invalid symbol: {bad}"));
        }
        for symbol in asked {
            let (Some(series), Some(quote), Some(q)) = (
                self.series(symbol),
                self.quote_json(symbol),
                self.quotes.get(symbol),
            ) else {
                continue;
            };
            let tape = self.asset(symbol).map_or("C", |a| a.tape);
            let mut snapshot = Map::new();
            snapshot.insert(
                "latestTrade".into(),
                json!({
                    "t": q.at.to_rfc3339_opts(SecondsFormat::Nanos, true),
                    "x": "V",
                    "p": q.bid.number(),
                    "s": 100,
                    "c": ["@"],
                    "i": 52983525029461_u64,
                    "z": tape,
                }),
            );
            snapshot.insert("latestQuote".into(), quote);
            if let Some(slot) = minutes.last() {
                snapshot.insert("minuteBar".into(), series.bar(slot));
            }
            if let Some(slot) = days.last() {
                snapshot.insert("dailyBar".into(), series.bar(slot));
            }
            if let Some(slot) = days.iter().rev().nth(1) {
                snapshot.insert("prevDailyBar".into(), series.bar(slot));
            }
            for part in self.snapshot_omit.get(symbol).into_iter().flatten() {
                snapshot.remove(part);
            }
            out.insert(symbol.to_owned(), Value::Object(snapshot));
        }
        Reply::ok(Value::Object(out))
    }

    fn option_snapshots(&self, query: &Query) -> Reply {
        let Some(symbols) = query.get("symbols") else {
            return bad_request("symbols is required");
        };
        if let Some(feed) = query.get("feed")
            && !matches!(feed, "opra" | "indicative")
        {
            return bad_request(&format!("invalid feed: {feed}"));
        }
        let at = stamp(Utc::now());
        let mut out = Map::new();
        for symbol in symbols.split(',').map(str::trim) {
            let Some((bid, ask, last)) = self.option_quotes.get(symbol) else {
                continue;
            };
            out.insert(
                symbol.to_owned(),
                json!({
                    "latestQuote": {"ap": ask.number(), "as": 12, "ax": "C", "bp": bid.number(),
                                    "bs": 9, "bx": "B", "c": "A", "t": at},
                    "latestTrade": {"c": "I", "p": last.number(), "s": 1, "t": at, "x": "C"},
                }),
            );
        }
        Reply::ok(json!({"snapshots": out, "next_page_token": null}))
    }

    fn crypto_snapshots(&self, loc: &str, query: &Query) -> Reply {
        if !matches!(loc, "us" | "us-1" | "eu-1") {
            return bad_request(&format!("invalid location: {loc}"));
        }
        let Some(symbols) = query.get("symbols") else {
            return bad_request("symbols is required");
        };
        let asked: Vec<&str> = symbols
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if let Some(bad) = asked.iter().find(|s| {
            !s.chars()
                .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '/')
        }) {
            return bad_request(&format!("invalid symbol: {bad}"));
        }
        let mut out = Map::new();
        for pair in asked {
            let Some(f) = self.crypto_snapshots.get(pair) else {
                continue;
            };
            let n = |x: &str| {
                Dec::parse(x)
                    .unwrap_or_else(|| panic!("crypto figure {x:?}"))
                    .number()
            };
            let day = chicago_midnight(f.date);
            let prev = chicago_midnight(f.date.pred_opt().unwrap_or(f.date));
            let minute = day + TimeDelta::hours(9) + TimeDelta::minutes(59);
            let mut snapshot = Map::new();
            snapshot.insert(
                "latestTrade".into(),
                json!({
                    "t": (minute + TimeDelta::microseconds(30_123_456))
                        .to_rfc3339_opts(SecondsFormat::Micros, true),
                    "p": n(f.last), "s": n(f.last_size), "i": 32_396_097_u64, "tks": f.taker,
                }),
            );
            snapshot.insert(
                "latestQuote".into(),
                json!({
                    "t": (minute + TimeDelta::nanoseconds(31_507_608_832))
                        .to_rfc3339_opts(SecondsFormat::Nanos, true),
                    "bp": n(f.bid), "bs": n(f.bid_size), "ap": n(f.ask), "as": n(f.ask_size),
                }),
            );
            snapshot.insert("minuteBar".into(), crypto_bar(minute, &f.minute, 2));
            snapshot.insert("dailyBar".into(), crypto_bar(day, &f.day, 438));
            snapshot.insert("prevDailyBar".into(), crypto_bar(prev, &f.prev_day, 8221));
            for part in self.snapshot_omit.get(pair).into_iter().flatten() {
                snapshot.remove(part);
            }
            out.insert(pair.to_owned(), Value::Object(snapshot));
        }
        Reply::ok(json!({ "snapshots": out }))
    }
}

/// A crypto pair's snapshot figures, decimal strings as a test writes them; the fake
/// sends them as JSON numbers, as Alpaca's data API does.
#[derive(Clone, Debug)]
pub struct CryptoFigures {
    /// The latest trade: price, size (coins, fractional) and taker side (`B` or `S`).
    pub last: &'static str,
    pub last_size: &'static str,
    pub taker: &'static str,
    pub bid: &'static str,
    pub bid_size: &'static str,
    pub ask: &'static str,
    pub ask_size: &'static str,
    /// Today's bar (since Chicago midnight) and yesterday's: open, high, low, close,
    /// volume (coins).
    pub day: [&'static str; 5],
    pub prev_day: [&'static str; 5],
    /// The latest minute bar.
    pub minute: [&'static str; 5],
    /// The trading day the daily bar is of (its Chicago midnight is the bar's time).
    pub date: NaiveDate,
}

impl CryptoFigures {
    /// BTC/USD on 2026-03-02, every figure fractional where Alpaca's are.
    pub fn btc() -> Self {
        Self {
            last: "67012.5",
            last_size: "0.00008231",
            taker: "S",
            bid: "67010.25",
            bid_size: "0.395",
            ask: "67014.75",
            ask_size: "1.2051",
            day: ["66250", "67450.5", "65980.25", "67012.5", "812.40516327"],
            prev_day: ["65110.75", "66480", "64900.5", "66250", "1856.4065"],
            minute: ["67000", "67020", "66995.5", "67012.5", "0.5873"],
            date: NaiveDate::from_ymd_opt(2026, 3, 2).unwrap_or_default(),
        }
    }
}

/// Chicago midnight of `date`, as Alpaca stamps a crypto daily bar: 05:00Z while US
/// daylight saving time is in force, else 06:00Z.
fn chicago_midnight(date: NaiveDate) -> DateTime<Utc> {
    let hours = if us_dst(date) { 5 } else { 6 };
    date.and_hms_opt(hours, 0, 0).unwrap_or_default().and_utc()
}

/// Whether US daylight saving time is in force on `date` (second Sunday of March to the
/// first Sunday of November).
fn us_dst(date: NaiveDate) -> bool {
    let sunday = |month: u32, nth: u8| {
        NaiveDate::from_weekday_of_month_opt(date.year(), month, Weekday::Sun, nth)
            .unwrap_or_default()
    };
    date >= sunday(3, 2) && date < sunday(11, 1)
}

fn crypto_bar(t: DateTime<Utc>, ohlcv: &[&str; 5], trades: u64) -> Value {
    let n = |x: &str| {
        Dec::parse(x)
            .unwrap_or_else(|| panic!("crypto figure {x:?}"))
            .number()
    };
    // A volume-weighted price inside the bar: the middle of high and low.
    let vw = match (Dec::parse(ohlcv[1]), Dec::parse(ohlcv[2])) {
        (Some(h), Some(l)) => Dec((h.0 + l.0) / 2).number(),
        _ => Value::Null,
    };
    json!({
        "t": t.to_rfc3339_opts(SecondsFormat::Secs, true),
        "o": n(ohlcv[0]), "h": n(ohlcv[1]), "l": n(ohlcv[2]), "c": n(ohlcv[3]),
        "v": n(ohlcv[4]), "n": trades, "vw": vw,
    })
}

fn asset_json(asset: &AssetInfo) -> Value {
    let l = &asset.listing;
    let mut row = json!({
        "id": asset.id,
        "class": l.class,
        "exchange": asset.exchange,
        "symbol": asset.symbol,
        "name": asset.name,
        "status": l.status,
        "tradable": l.tradable,
        "marginable": l.marginable,
        "shortable": l.shortable,
        "easy_to_borrow": l.easy_to_borrow,
        "fractionable": l.fractionable,
        "attributes": [],
    });
    if let Some([min_order, step, tick]) = l.increments {
        // Documented for crypto only.
        row["min_order_size"] = json!(min_order);
        row["min_trade_increment"] = json!(step);
        row["price_increment"] = json!(tick);
    } else {
        // Equities only: margin requirements, borrow status, CUSIP.
        row["maintenance_margin_requirement"] = json!(30);
        row["margin_requirement_long"] = json!("30");
        row["margin_requirement_short"] = json!("100");
        row["borrow_status"] = json!(if l.easy_to_borrow {
            "easy_to_borrow"
        } else {
            "hard_to_borrow"
        });
        row["attributes"] = json!(["has_options"]);
        row["cusip"] = json!(asset.cusip);
    }
    row
}

// ---------------------------------------------------------------------------------------
// Synthetic bars

/// The last day of the bar series, and how many weekdays it spans.
const SERIES_END: (i32, u32, u32) = (2026, 3, 2);
const SERIES_DAYS: usize = 400;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    Day,
    Minutes(u32),
}

/// One bar's place: when it starts and which minutes of which series day it covers.
#[derive(Clone, Copy, Debug)]
struct Slot {
    t: DateTime<Utc>,
    day: i64,
    from: u32,
    to: u32,
}

impl Frame {
    fn parse(text: &str) -> Option<Self> {
        let digits = text.bytes().take_while(u8::is_ascii_digit).count();
        let n: u32 = text[..digits].parse().ok()?;
        match &text[digits..] {
            "Min" | "T" if (1..=59).contains(&n) => Some(Frame::Minutes(n)),
            "Hour" | "H" if (1..=23).contains(&n) => Some(Frame::Minutes(n * 60)),
            "Day" | "D" if n == 1 => Some(Frame::Day),
            _ => None,
        }
    }

    fn days() -> Vec<NaiveDate> {
        let (y, m, d) = SERIES_END;
        let mut day = NaiveDate::from_ymd_opt(y, m, d).unwrap_or(NaiveDate::MIN);
        let mut days = Vec::with_capacity(SERIES_DAYS);
        while days.len() < SERIES_DAYS {
            if is_weekday(day) {
                days.push(day);
            }
            day -= TimeDelta::days(1);
        }
        days.reverse();
        days
    }

    fn slots(self) -> Vec<Slot> {
        let mut slots = Vec::new();
        for (index, date) in Self::days().into_iter().enumerate() {
            let day = i64::try_from(index).unwrap_or(0);
            match self {
                Frame::Day => slots.push(Slot {
                    t: ny_at(date, 0),
                    day,
                    from: OPEN_MINUTE,
                    to: CLOSE_MINUTE,
                }),
                Frame::Minutes(step) => {
                    let mut start = OPEN_MINUTE / step * step;
                    while start < CLOSE_MINUTE {
                        slots.push(Slot {
                            t: ny_at(date, start),
                            day,
                            from: start.max(OPEN_MINUTE),
                            to: (start + step).min(CLOSE_MINUTE),
                        });
                        start += step;
                    }
                }
            }
        }
        slots
    }
}

#[derive(Clone, Copy, Debug)]
struct Series {
    seed: u64,
    base_cents: i64,
}

impl Series {
    /// The price, in cents, at minute `x` of the series: a slow ±10% triangle wave over
    /// 100 days, a fast ±0.5% one over two hours, and a little noise.
    fn level(self, x: i64) -> i64 {
        let amp = (self.base_cents / 5).max(2);
        let slow_period: i64 = 100 * 1440;
        let pos = x.rem_euclid(slow_period);
        let tri = if pos < slow_period / 2 {
            pos
        } else {
            slow_period - pos
        };
        let slow = tri * amp / (slow_period / 2) - amp / 2;
        let fast_amp = (self.base_cents / 100).max(1);
        let fast_pos = x.rem_euclid(120);
        let fast_tri = if fast_pos < 60 {
            fast_pos
        } else {
            120 - fast_pos
        };
        let fast = fast_tri * fast_amp / 60 - fast_amp / 2;
        let jitter = self.noise(x, 0) % (self.base_cents / 1000 + 1);
        (self.base_cents + slow + fast + jitter).max(1)
    }

    fn noise(self, x: i64, salt: u64) -> i64 {
        let mut z = self
            .seed
            .wrapping_add(x.unsigned_abs().wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(salt.wrapping_mul(0xD1B5_4A32_D192_ED03));
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        i64::try_from(z % 1_000_000).unwrap_or(0)
    }

    fn bar(self, slot: &Slot) -> Value {
        let x0 = slot.day * 1440 + i64::from(slot.from);
        let x1 = slot.day * 1440 + i64::from(slot.to) - 1;
        let open = self.level(x0);
        let close = self.level(x1);
        let spread = (self.base_cents / 400).max(1);
        let high = open.max(close) + self.noise(x0, 1) % spread + 1;
        let low = (open.min(close) - self.noise(x0, 2) % spread - 1).max(1);
        let vwap = (open + high + low + close) / 4;
        let minutes = i64::from(slot.to - slot.from);
        let volume = (self.noise(x0, 3) % 900 + 100) * minutes;
        let cents = |c: i64| Dec::cents(c).number();
        json!({
            "t": stamp(slot.t),
            "o": cents(open),
            "h": cents(high),
            "l": cents(low),
            "c": cents(close),
            "v": volume,
            "n": volume / 40 + 1,
            "vw": cents(vwap),
        })
    }
}

fn fnv(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// URL-safe base64 without padding, so a page token needs no escaping in a query.
fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..=chunk.len() {
            let index = (n >> (18 - 6 * i)) & 63;
            out.push(char::from(BASE64[usize_of(u64::from(index))]));
        }
    }
    out
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut bits: u32 = 0;
    let mut count = 0;
    let mut out = Vec::new();
    for c in text.trim_end_matches('=').bytes() {
        let value = BASE64.iter().position(|b| *b == c)?;
        bits = (bits << 6) | u32::try_from(value).ok()?;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push(u8::try_from((bits >> count) & 0xff).ok()?);
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// Self-check: every endpoint, status and failure, over a hand-written HTTP/1.1 client

/// One HTTP answer as the self-check's client read it.
#[derive(Debug)]
struct Exchange {
    status: u16,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Exchange {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

fn parse_exchange(raw: &[u8]) -> Exchange {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of headers in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut rest = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or("");
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    if chunked {
        let mut body = Vec::new();
        let mut at = 0;
        while let Some(end) = rest[at..].windows(2).position(|w| w == b"\r\n") {
            let size_text = String::from_utf8_lossy(&rest[at..at + end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
                .unwrap_or(0);
            at += end + 2;
            if size == 0 || at + size > rest.len() {
                break;
            }
            body.extend_from_slice(&rest[at..at + size]);
            at += size + 2;
        }
        rest = body;
    } else if let Some(length) = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
    {
        rest.truncate(length);
    }
    let body = if rest.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&rest).unwrap_or_else(|e| {
            panic!(
                "body is not JSON ({e}): {:?}",
                String::from_utf8_lossy(&rest)
            )
        })
    };
    Exchange {
        status,
        headers,
        body,
    }
}

// Plain readiness-based I/O, so the fake needs no more of tokio than `net`.
async fn write_all(stream: &TcpStream, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        stream.writable().await?;
        match stream.try_write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

async fn read_to_end(stream: &TcpStream, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        stream.readable().await?;
        match stream.try_read(&mut buffer) {
            Ok(0) => return Ok(()),
            Ok(n) => out.extend_from_slice(&buffer[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// Sends one request on a fresh connection; `None` when no full answer came within `wait`.
async fn http(
    addr: &str,
    method: &str,
    target: &str,
    auth: Option<(&str, &str)>,
    body: Option<&Value>,
    wait: Duration,
) -> Option<Exchange> {
    let exchange = async {
        let stream = TcpStream::connect(addr)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {addr}: {e}"));
        let payload = body.map(Value::to_string).unwrap_or_default();
        let mut request = format!(
            "{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nAccept: application/json\r\n"
        );
        if let Some((key, secret)) = auth {
            request += &format!("APCA-API-KEY-ID: {key}\r\nAPCA-API-SECRET-KEY: {secret}\r\n");
        }
        if body.is_some() {
            request += &format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                payload.len()
            );
        }
        request += "\r\n";
        request += &payload;
        write_all(&stream, request.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("{method} {target}: cannot send: {e}"));
        let mut raw = Vec::new();
        read_to_end(&stream, &mut raw)
            .await
            .unwrap_or_else(|e| panic!("{method} {target}: cannot read: {e}"));
        parse_exchange(&raw)
    };
    tokio::time::timeout(wait, exchange).await.ok()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    Trading,
    Data,
}

/// The self-check's client: sends requests, checks answers against the specs.
#[derive(Debug)]
struct Checker {
    addr: String,
    key: String,
    secret: String,
    trading: Value,
    data: Value,
    sent: usize,
    undeclared: Vec<String>,
}

const WAIT: Duration = Duration::from_secs(20);

impl Checker {
    async fn send(&mut self, method: &str, target: &str, body: Option<&Value>) -> Exchange {
        self.sent += 1;
        let auth = Some((self.key.as_str(), self.secret.as_str()));
        http(&self.addr, method, target, auth, body, WAIT)
            .await
            .unwrap_or_else(|| panic!("{method} {target}: no answer within {WAIT:?}"))
    }

    async fn send_as(
        &mut self,
        auth: Option<(&str, &str)>,
        method: &str,
        target: &str,
    ) -> Exchange {
        self.sent += 1;
        http(&self.addr, method, target, auth, None, WAIT)
            .await
            .unwrap_or_else(|| panic!("{method} {target}: no answer within {WAIT:?}"))
    }

    /// Checks an answer against its API's document. An error status the document does not
    /// declare for the operation is noted (see the return value of [`self_check`]); every
    /// error body must match the trading document's `Error` schema.
    fn conform(&mut self, api: Api, method: &str, template: &str, reply: &Exchange) {
        let spec = match api {
            Api::Trading => &self.trading,
            Api::Data => &self.data,
        };
        // Strict: every property the fake sends must be one the document declares.
        match check_response_strict(spec, method, template, reply.status, &reply.body) {
            Ok(()) => {}
            Err(e) if reply.status >= 400 && e.contains("no response declared") => {
                let note = format!("{} {template} {}", method.to_uppercase(), reply.status);
                if !self.undeclared.contains(&note) {
                    self.undeclared.push(note);
                }
            }
            Err(e) => panic!("{e}\nbody: {}", reply.body),
        }
        if reply.status >= 400 {
            let error = json!({"$ref": "#/components/schemas/Error"});
            if let Err(e) = check_schema(&self.trading, &error, &reply.body) {
                panic!("{method} {template} -> {}: not an Error: {e}", reply.status);
            }
        }
    }

    async fn expect(
        &mut self,
        api: Api,
        method: &str,
        target: &str,
        template: &str,
        body: Option<&Value>,
        status: u16,
    ) -> Exchange {
        let reply = self.send(method, target, body).await;
        assert_eq!(
            reply.status, status,
            "{method} {target}: unexpected status; body {}",
            reply.body
        );
        self.conform(api, method, template, &reply);
        reply
    }

    async fn get(&mut self, api: Api, target: &str, template: &str) -> Value {
        self.expect(api, "GET", target, template, None, 200)
            .await
            .body
    }

    async fn post_order(&mut self, order: &Value) -> Value {
        self.expect(
            Api::Trading,
            "POST",
            "/v2/orders",
            "/v2/orders",
            Some(order),
            200,
        )
        .await
        .body
    }

    #[allow(clippy::too_many_arguments)]
    async fn fails(
        &mut self,
        api: Api,
        method: &str,
        target: &str,
        template: &str,
        body: Option<&Value>,
        status: u16,
        code: u64,
    ) -> Value {
        let reply = self
            .expect(api, method, target, template, body, status)
            .await;
        assert_eq!(
            reply.body["code"],
            json!(code),
            "{method} {target}: {}",
            reply.body
        );
        reply.body
    }
}

fn text(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("expected a string, got {value}"))
}

fn items(value: &Value) -> &Vec<Value> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected an array, got {value}"))
}

fn number(value: &Value) -> f64 {
    value
        .as_f64()
        .unwrap_or_else(|| panic!("expected a number, got {value}"))
}

fn time_of(value: &Value) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text(value))
        .unwrap_or_else(|e| panic!("{value} is not RFC 3339: {e}"))
        .with_timezone(&Utc)
}

fn position_of<'a>(positions: &'a Value, symbol: &str) -> &'a Value {
    items(positions)
        .iter()
        .find(|p| p["symbol"] == symbol)
        .unwrap_or_else(|| panic!("no {symbol} position in {positions}"))
}

fn order_by_id(orders: &[Value], id: &Value) -> Value {
    orders
        .iter()
        .find(|o| o["id"] == *id)
        .cloned()
        .unwrap_or_else(|| panic!("the fake holds no order {id}"))
}

/// Exercises every endpoint, status and failure of a fresh fake over HTTP, checking each
/// answer against Alpaca's OpenAPI documents and the seeded scenario's numbers. Returns the
/// `"METHOD /template STATUS"` answers the fake gives that the documents do not declare for
/// that operation (their bodies are still checked against the `Error` schema).
/// The trading document as Alpaca's answers bear it out: a non-trade activity's `date` is
/// `YYYY-MM-DD` (the document calls it a date-time; the bodies recorded in alpaca-py's
/// tests and the document's own example send a date).
///
/// The vendor's own SDK documents two more fields of a non-trade activity than the
/// document does (alpaca-py's `NonTradeActivity`: `description`, "can be empty string",
/// and `price`, "not present for all activity types"), and one more of a cancelled
/// order's entry in the answer to `DELETE /v2/orders` (alpaca-py's `CancelOrderResponse`:
/// `body`); they are added, so the fake may send them and nothing else the vendor does
/// not document.
fn documented_as_sent(mut spec: Value) -> Value {
    let schemas = &mut spec["components"]["schemas"];
    let nta = &mut schemas["NonTradeActivities"]["properties"];
    nta["date"]["format"] = json!("date");
    nta["description"] = json!({"type": "string"});
    nta["price"] = json!({"type": "string"});
    schemas["CanceledOrderResponse"]["properties"]["body"] =
        json!({"type": "object", "additionalProperties": true});
    // The enum names the equity venues only; Alpaca lists its crypto pairs under
    // ALPACA (docs/dev/alpaca-facts.md, "Assets").
    if let Some(venues) = schemas["Exchange"]["enum"].as_array_mut() {
        venues.push(json!("ALPACA"));
    }
    spec
}

/// Checks activity rows the fake sent, each against its own schema, strictly: a field
/// the vendor does not document fails.
pub fn check_activities(rows: &[Value]) {
    let spec = documented_as_sent(load_spec("trading-api.json"));
    for row in rows {
        let schema = if row["activity_type"] == "FILL" {
            json!({"$ref": "#/components/schemas/TradingActivities"})
        } else {
            json!({"$ref": "#/components/schemas/NonTradeActivities"})
        };
        if let Err(e) = check_schema_strict(&spec, &schema, row) {
            panic!("activity {row}: {e}");
        }
    }
}

pub async fn self_check() -> Vec<String> {
    use Api::{Data, Trading};

    let fake = AlpacaFake::start("test-key", "test-secret").await;
    let mut c = Checker {
        addr: fake.url.trim_start_matches("http://").to_owned(),
        key: "test-key".to_owned(),
        secret: "test-secret".to_owned(),
        trading: documented_as_sent(load_spec("trading-api.json")),
        data: news_as_sent(load_spec("market-data-api.json")),
        sent: 0,
        undeclared: Vec::new(),
    };

    // -- authentication ----------------------------------------------------------------
    let unauthorized = json!({"code": 40110000, "message": "request is not authorized"});
    for auth in [
        None,
        Some(("test-key", "wrong")),
        Some(("wrong", "test-secret")),
    ] {
        let reply = c.send_as(auth, "GET", "/v2/account").await;
        assert_eq!(reply.status, 401);
        assert_eq!(reply.body, unauthorized);
        c.conform(Trading, "GET", "/v2/account", &reply);
    }
    let reply = c
        .send_as(None, "GET", "/v2/stocks/AAPL/quotes/latest")
        .await;
    assert_eq!(reply.status, 401);
    c.conform(Data, "GET", "/v2/stocks/{symbol}/quotes/latest", &reply);

    // -- account -------------------------------------------------------------------------
    let account = c.get(Trading, "/v2/account", "/v2/account").await;
    assert_eq!(account["id"], uuid(1));
    assert_eq!(account["account_number"], "PA3TESTACCT");
    assert_eq!(account["status"], "ACTIVE");
    assert_eq!(account["currency"], "USD");
    assert_eq!(account["cash"], "8181.22");
    assert_eq!(account["long_market_value"], "2286");
    assert_eq!(account["equity"], "10467.22");
    assert_eq!(account["portfolio_value"], "10467.22");
    assert_eq!(account["last_equity"], "10451.22");
    assert_eq!(account["buying_power"], "8181.22");

    // -- positions -----------------------------------------------------------------------
    let positions = c.get(Trading, "/v2/positions", "/v2/positions").await;
    assert_eq!(items(&positions).len(), 2);
    let aapl = position_of(&positions, "AAPL").clone();
    for (field, want) in [
        ("qty", "6"),
        ("qty_available", "6"),
        ("avg_entry_price", "150"),
        ("cost_basis", "900"),
        ("current_price", "181"),
        ("lastday_price", "180"),
        ("market_value", "1086"),
        ("unrealized_pl", "186"),
        ("unrealized_intraday_pl", "6"),
        ("side", "long"),
        ("exchange", "NASDAQ"),
    ] {
        assert_eq!(aapl[field], want, "AAPL {field}");
    }
    let jpm = position_of(&positions, "JPM");
    for (field, want) in [
        ("qty", "5"),
        ("avg_entry_price", "200"),
        ("cost_basis", "1000"),
        ("market_value", "1200"),
        ("unrealized_pl", "200"),
        ("unrealized_plpc", "0.2"),
        ("unrealized_intraday_pl", "10"),
        ("exchange", "NYSE"),
    ] {
        assert_eq!(jpm[field], want, "JPM {field}");
    }
    let template = "/v2/positions/{symbol_or_asset_id}";
    assert_eq!(c.get(Trading, "/v2/positions/AAPL", template).await, aapl);
    let by_id = format!("/v2/positions/{}", text(&aapl["asset_id"]));
    assert_eq!(c.get(Trading, &by_id, template).await, aapl);
    let missing = c
        .fails(
            Trading,
            "GET",
            "/v2/positions/SPY",
            template,
            None,
            404,
            40410000,
        )
        .await;
    assert_eq!(missing["message"], "position does not exist");

    // -- activities ----------------------------------------------------------------------
    let template = "/v2/account/activities";
    let all = c.get(Trading, template, template).await;
    let kinds = |rows: &Value| -> Vec<String> {
        items(rows)
            .iter()
            .map(|r| text(&r["activity_type"]).to_owned())
            .collect()
    };
    assert_eq!(
        kinds(&all),
        ["FEE", "FEE", "FILL", "DIV", "FILL", "FILL", "CSD"],
        "newest first"
    );
    let rows = items(&all);
    // Cash is the sum of the cash movements.
    let mut cash = Dec::ZERO;
    for row in rows {
        if row["activity_type"] == "FILL" {
            let amount = dec(text(&row["price"])).times(dec(text(&row["qty"])));
            cash = if row["side"] == "buy" {
                cash - amount
            } else {
                cash + amount
            };
        } else {
            cash = cash + dec(text(&row["net_amount"]));
        }
    }
    assert_eq!(cash.to_string(), "8181.22");
    let sell = &rows[2];
    assert_eq!(
        (&sell["side"], &sell["qty"], &sell["price"]),
        (&json!("sell"), &json!("4"), &json!("170"))
    );
    let fees: Vec<&Value> = rows
        .iter()
        .filter(|r| r["activity_type"] == "FEE")
        .collect();
    let reg = fees
        .iter()
        .find(|f| f["activity_sub_type"] == "REG")
        .unwrap_or_else(|| panic!("no REG fee"));
    let taf = fees
        .iter()
        .find(|f| f["activity_sub_type"] == "TAF")
        .unwrap_or_else(|| panic!("no TAF fee"));
    assert!(reg.get("order_id").is_none());
    assert_eq!(sell["order_id"], uuid(10));
    assert_eq!(rows[5]["id"], format!("20260105093000000::{}", uuid(5)));
    assert_eq!(reg["net_amount"], "-0.02");
    assert!(taf.get("order_id").is_none());
    assert_eq!(taf["net_amount"], "-0.01");
    assert!(text(&rows[5]["id"]).starts_with("20260105093000000::"));
    assert_eq!(rows[5]["transaction_time"], "2026-01-05T14:30:00Z");
    assert_eq!(rows[6]["date"], "2026-01-02");
    // Each row against its own schema. Alpaca sends a non-trade activity's `date` as
    // YYYY-MM-DD, which the document calls a date-time: checked as a date instead.
    let patched = c.trading.clone();
    let non_trade = json!({"$ref": "#/components/schemas/NonTradeActivities"});
    let trade = json!({"$ref": "#/components/schemas/TradingActivities"});
    for row in rows {
        let schema = if row["activity_type"] == "FILL" {
            &trade
        } else {
            &non_trade
        };
        if let Err(e) = check_schema_strict(&patched, schema, row) {
            panic!("activity {row}: {e}");
        }
    }
    // A fee naming its order would not be what Alpaca documents.
    let mut with_order = (*reg).clone();
    with_order["order_id"] = sell["order_id"].clone();
    let refused = check_schema_strict(&patched, &non_trade, &with_order);
    assert!(
        refused.as_ref().is_err_and(|e| e.contains("order_id")),
        "{refused:?}"
    );
    let strict = check_schema(&load_spec("trading-api.json"), &non_trade, &rows[6]);
    assert!(
        strict.as_ref().is_err_and(|e| e.contains("$.date")),
        "the document's NonTradeActivities.date is a date-time: {strict:?}"
    );
    // Pages of two, oldest first, for fills and fees only.
    let mut collected = Vec::new();
    let mut sizes = Vec::new();
    let mut token = String::new();
    loop {
        let target = format!("{template}?activity_types=FILL,FEE&direction=asc&page_size=2{token}");
        let page = c.get(Trading, &target, template).await;
        let page = items(&page).clone();
        let Some(last) = page.last() else {
            break;
        };
        token = format!("&page_token={}", text(&last["id"]));
        sizes.push(page.len());
        collected.extend(page);
    }
    assert_eq!(sizes, [2, 2, 1]);
    assert_eq!(
        kinds(&Value::Array(collected.clone())),
        ["FILL", "FILL", "FILL", "FEE", "FEE"]
    );
    let window = c
        .get(
            Trading,
            &format!("{template}?after=2026-01-05&until=2026-03-01&direction=asc"),
            template,
        )
        .await;
    assert_eq!(kinds(&window), ["FILL", "FILL", "DIV"]);
    let on_day = c
        .get(Trading, &format!("{template}?date=2026-03-02"), template)
        .await;
    assert_eq!(kinds(&on_day), ["FEE", "FEE", "FILL"]);
    let non_trades = c
        .get(
            Trading,
            &format!("{template}?category=non_trade_activity"),
            template,
        )
        .await;
    assert_eq!(kinds(&non_trades), ["FEE", "FEE", "DIV", "CSD"]);
    let big_page = c
        .get(Trading, &format!("{template}?page_size=1000"), template)
        .await;
    assert_eq!(items(&big_page).len(), 7);
    let dividends = c
        .get(
            Trading,
            "/v2/account/activities/DIV",
            "/v2/account/activities/{activity_type}",
        )
        .await;
    assert_eq!(kinds(&dividends), ["DIV"]);
    assert_eq!(dividends[0]["net_amount"], "1.25");
    c.fails(
        Trading,
        "GET",
        &format!("{template}?activity_types=BOGUS"),
        template,
        None,
        422,
        40010001,
    )
    .await;
    c.fails(
        Trading,
        "GET",
        &format!("{template}?page_token=nope"),
        template,
        None,
        422,
        40010001,
    )
    .await;

    // -- clock and assets ------------------------------------------------------------------
    let clock = c.get(Trading, "/v2/clock", "/v2/clock").await;
    let now = time_of(&clock["timestamp"]);
    let (next_open, next_close) = (time_of(&clock["next_open"]), time_of(&clock["next_close"]));
    assert!(next_open > now && next_close > now);
    assert_eq!(clock["is_open"], json!(next_close < next_open));
    check_calendar_and_news(&mut c).await;
    let template = "/v2/assets/{symbol_or_asset_id}";
    for (symbol, exchange) in [("AAPL", "NASDAQ"), ("SPY", "ARCA"), ("JPM", "NYSE")] {
        let asset = c
            .get(Trading, &format!("/v2/assets/{symbol}"), template)
            .await;
        assert_eq!(
            (asset["symbol"].clone(), asset["exchange"].clone()),
            (json!(symbol), json!(exchange))
        );
        assert_eq!(asset["tradable"], true);
    }
    c.fails(
        Trading,
        "GET",
        "/v2/assets/NOPE",
        template,
        None,
        404,
        40410000,
    )
    .await;
    fake.list_asset(
        "BTC/USD",
        "Bitcoin / US Dollar",
        "ALPACA",
        Listing::crypto("0.0001", "0.000000001", "1"),
    );
    let stocks = c
        .get(
            Trading,
            "/v2/assets?status=active&asset_class=us_equity",
            "/v2/assets",
        )
        .await;
    let symbols: Vec<&str> = stocks
        .as_array()
        .unwrap_or_else(|| panic!("a list: {stocks}"))
        .iter()
        .filter_map(|a| a["symbol"].as_str())
        .collect();
    assert_eq!(symbols, ["SPY", "AAPL", "JPM"], "by exchange, then symbol");
    let crypto = c
        .get(
            Trading,
            "/v2/assets?status=active&asset_class=crypto",
            "/v2/assets",
        )
        .await;
    assert_eq!(crypto[0]["min_trade_increment"], "0.000000001", "{crypto}");
    c.fails(
        Trading,
        "GET",
        "/v2/assets?asset_class=bonds",
        "/v2/assets",
        None,
        422,
        40010001,
    )
    .await;

    // -- market data: quotes, bars, snapshots ----------------------------------------------
    let template = "/v2/stocks/{symbol}/quotes/latest";
    let quote = c
        .get(Data, "/v2/stocks/AAPL/quotes/latest?feed=iex", template)
        .await;
    assert_eq!(quote["symbol"], "AAPL");
    assert_eq!(quote["quote"]["bp"], json!(181.0));
    assert_eq!(quote["quote"]["ap"], json!(181.1));
    assert_eq!(quote["quote"]["z"], "C");
    c.fails(
        Data,
        "GET",
        "/v2/stocks/AAPL/quotes/latest?feed=bogus",
        template,
        None,
        400,
        40010001,
    )
    .await;
    c.fails(
        Data,
        "GET",
        "/v2/stocks/NOPE/quotes/latest",
        template,
        None,
        404,
        40410000,
    )
    .await;

    let template = "/v2/stocks/{symbol}/bars";
    let daily = c
        .get(
            Data,
            "/v2/stocks/AAPL/bars?timeframe=1Day&feed=iex",
            template,
        )
        .await;
    let bars = items(&daily["bars"]).clone();
    assert_eq!(bars.len(), 400);
    assert_eq!(daily["next_page_token"], Value::Null);
    assert_eq!(daily["symbol"], "AAPL");
    assert_eq!(bars[399]["t"], "2026-03-02T05:00:00Z");
    assert!(
        bars.iter().any(|b| b["t"] == "2025-07-01T04:00:00Z"),
        "summer bars at 04:00Z"
    );
    for pair in bars.windows(2) {
        assert!(time_of(&pair[0]["t"]) < time_of(&pair[1]["t"]));
    }
    for bar in &bars {
        let (o, h, l, cl) = (
            number(&bar["o"]),
            number(&bar["h"]),
            number(&bar["l"]),
            number(&bar["c"]),
        );
        assert!(h >= o.max(cl) && l <= o.min(cl) && l > 0.0, "bar {bar}");
    }
    let again = c
        .get(Data, "/v2/stocks/AAPL/bars?timeframe=1Day", template)
        .await;
    assert_eq!(again, daily, "bars are deterministic");
    let mut paged = Vec::new();
    let mut sizes = Vec::new();
    let mut next = String::new();
    loop {
        let page = c
            .get(
                Data,
                &format!("/v2/stocks/AAPL/bars?timeframe=1Day&limit=150{next}"),
                template,
            )
            .await;
        sizes.push(items(&page["bars"]).len());
        paged.extend(items(&page["bars"]).iter().cloned());
        match page["next_page_token"].as_str() {
            Some(token) => next = format!("&page_token={token}"),
            None => break,
        }
    }
    assert_eq!(sizes, [150, 150, 100]);
    assert_eq!(paged, bars);
    let newest = c
        .get(
            Data,
            "/v2/stocks/AAPL/bars?timeframe=1D&sort=desc&limit=3",
            template,
        )
        .await;
    assert_eq!(newest["bars"][0], bars[399]);
    assert!(newest["next_page_token"].is_string());
    let week = c
        .get(
            Data,
            "/v2/stocks/AAPL/bars?timeframe=1Day&start=2026-02-02&end=2026-02-06",
            template,
        )
        .await;
    assert_eq!(items(&week["bars"]).len(), 5);
    for (timeframe, count, first) in [
        ("1Min", 390, "2026-03-02T14:30:00Z"),
        ("5Min", 78, "2026-03-02T14:30:00Z"),
        ("15Min", 26, "2026-03-02T14:30:00Z"),
        ("1Hour", 7, "2026-03-02T14:00:00Z"),
    ] {
        let day = c
            .get(
                Data,
                &format!(
                    "/v2/stocks/JPM/bars?timeframe={timeframe}&start=2026-03-02&end=2026-03-02&limit=10000"
                ),
                template,
            )
            .await;
        assert_eq!(items(&day["bars"]).len(), count, "{timeframe}");
        assert_eq!(day["bars"][0]["t"], first, "{timeframe}");
    }
    let minutes = c
        .get(
            Data,
            "/v2/stocks/SPY/bars?timeframe=1Min&limit=10000",
            template,
        )
        .await;
    assert_eq!(items(&minutes["bars"]).len(), 10000);
    assert!(minutes["next_page_token"].is_string());
    let unknown = c
        .get(Data, "/v2/stocks/NOPE/bars?timeframe=1Day", template)
        .await;
    assert_eq!(unknown["bars"], json!([]));
    for bad in [
        "/v2/stocks/AAPL/bars",
        "/v2/stocks/AAPL/bars?timeframe=1Week",
        "/v2/stocks/AAPL/bars?timeframe=1Day&limit=10001",
        "/v2/stocks/AAPL/bars?timeframe=1Day&page_token=garbage",
        "/v2/stocks/AAPL/bars?timeframe=1Day&start=yesterday",
    ] {
        c.fails(Data, "GET", bad, template, None, 400, 40010001)
            .await;
    }

    let template = "/v2/stocks/snapshots";
    let snapshots = c
        .get(
            Data,
            "/v2/stocks/snapshots?symbols=AAPL,JPM,NOPE&feed=iex",
            template,
        )
        .await;
    let keys: Vec<&String> = snapshots
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    assert_eq!(keys, ["AAPL", "JPM"]);
    assert_eq!(snapshots["JPM"]["latestQuote"]["ap"], json!(240.2));
    assert_eq!(snapshots["JPM"]["latestTrade"]["p"], json!(240.0));
    assert_eq!(snapshots["AAPL"]["dailyBar"], bars[399]);
    c.fails(Data, "GET", template, template, None, 400, 40010001)
        .await;
    let refused = c
        .fails(
            Data,
            "GET",
            "/v2/stocks/snapshots?symbols=AAPL,BAD$",
            template,
            None,
            400,
            40010001,
        )
        .await;
    assert_eq!(refused["message"], "invalid symbol: BAD$");
    fake.omit_from_snapshot("JPM", &["latestTrade", "prevDailyBar"]);
    let gaps = c
        .get(Data, "/v2/stocks/snapshots?symbols=JPM", template)
        .await;
    assert!(gaps["JPM"].get("latestTrade").is_none() && gaps["JPM"].get("dailyBar").is_some());
    let template = "/v1beta1/options/snapshots";
    fake.set_option_quote("AAPL260320C00180000", "4.15", "4.3", "4.2");
    let options = c
        .get(
            Data,
            "/v1beta1/options/snapshots?symbols=AAPL260320C00180000,AAPL260320P00001000",
            template,
        )
        .await;
    assert_eq!(
        options["snapshots"]["AAPL260320C00180000"]["latestQuote"]["ap"],
        json!(4.3)
    );
    assert!(options["snapshots"].get("AAPL260320P00001000").is_none());
    c.fails(Data, "GET", template, template, None, 400, 40010001)
        .await;
    let template = "/v1beta3/crypto/{loc}/snapshots";
    fake.set_crypto_snapshot("BTC/USD", CryptoFigures::btc());
    let crypto = c
        .get(
            Data,
            "/v1beta3/crypto/us/snapshots?symbols=BTC%2FUSD,DOGE%2FUSD,BTCUSD",
            template,
        )
        .await;
    let keys: Vec<&String> = crypto["snapshots"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["BTC/USD"], "{crypto}");
    let btc = &crypto["snapshots"]["BTC/USD"];
    assert_eq!(btc["latestTrade"]["s"], json!(0.00008231));
    assert_eq!(btc["dailyBar"]["t"], "2026-03-02T06:00:00Z");
    assert_eq!(btc["prevDailyBar"]["c"], json!(66250.0));
    c.fails(
        Data,
        "GET",
        "/v1beta3/crypto/us/snapshots?symbols=btc%2Fusd",
        template,
        None,
        400,
        40010001,
    )
    .await;

    // -- option chains: the chain's snapshots and the contract list ----------------------
    let mut call = FakeOption::new("AAPL261218C00280000");
    call.bid = Some("4.15");
    call.ask = Some("4.3");
    call.last = Some("4.2");
    call.volume = Some(31);
    call.implied_volatility = Some(0.3372);
    call.greeks = Some([0.52, 0.012, -0.08, 0.33, 0.11]);
    call.open_interest = Some("237");
    fake.list_option(call);
    fake.list_option(FakeOption::new("AAPL261218P00280000"));
    let template = "/v1beta1/options/snapshots/{underlying_symbol}";
    let chain = c
        .get(
            Data,
            "/v1beta1/options/snapshots/AAPL?expiration_date=2026-12-18&limit=1000",
            template,
        )
        .await;
    assert_eq!(
        chain["snapshots"]["AAPL261218C00280000"]["greeks"]["delta"],
        json!(0.52)
    );
    assert!(
        chain["snapshots"]["AAPL261218P00280000"]
            .get("greeks")
            .is_none()
    );
    c.fails(
        Data,
        "GET",
        "/v1beta1/options/snapshots/AAPL?limit=1001",
        template,
        None,
        400,
        40010001,
    )
    .await;
    let template = "/v2/options/contracts";
    let listed = c
        .get(
            Trading,
            "/v2/options/contracts?underlying_symbols=AAPL&expiration_date_gte=2026-01-01&expiration_date_lte=2027-12-31&limit=10000",
            template,
        )
        .await;
    assert_eq!(listed["option_contracts"][0]["open_interest"], "237");
    assert_eq!(listed["option_contracts"][0]["strike_price"], "280");

    // -- orders: market, lookups, validation -------------------------------------------------
    let bought = c
        .post_order(&json!({
            "symbol": "AAPL", "qty": "2", "side": "buy", "type": "market",
            "time_in_force": "day", "client_order_id": "self-check-1",
        }))
        .await;
    assert_eq!(bought["status"], "filled");
    assert_eq!(bought["filled_qty"], "2");
    assert_eq!(bought["filled_avg_price"], "181.1");
    assert_eq!(bought["client_order_id"], "self-check-1");
    assert!(bought["filled_at"].is_string());
    let account = c.get(Trading, "/v2/account", "/v2/account").await;
    assert_eq!(account["cash"], "7819.02", "8181.22 - 2 x 181.10");
    let positions = c.get(Trading, "/v2/positions", "/v2/positions").await;
    let aapl = position_of(&positions, "AAPL");
    assert_eq!(
        (&aapl["qty"], &aapl["cost_basis"]),
        (&json!("8"), &json!("1262.2"))
    );
    let latest = c
        .get(
            Trading,
            "/v2/account/activities?page_size=1",
            "/v2/account/activities",
        )
        .await;
    assert_eq!(latest[0]["order_id"], bought["id"]);
    assert_eq!(latest[0]["price"], "181.1");

    let template = "/v2/orders/{order_id}";
    let id = text(&bought["id"]).to_owned();
    assert_eq!(
        c.get(Trading, &format!("/v2/orders/{id}"), template).await,
        bought
    );
    let by_client = c
        .get(
            Trading,
            "/v2/orders:by_client_order_id?client_order_id=self-check-1",
            "/v2/orders:by_client_order_id",
        )
        .await;
    assert_eq!(by_client["id"], bought["id"]);
    c.fails(
        Trading,
        "GET",
        "/v2/orders:by_client_order_id?client_order_id=nope",
        "/v2/orders:by_client_order_id",
        None,
        404,
        40410000,
    )
    .await;
    c.fails(
        Trading,
        "GET",
        &format!("/v2/orders/{}", uuid(999_999)),
        template,
        None,
        404,
        40410000,
    )
    .await;

    let order_count = fake.orders().len();
    let base = json!({
        "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market", "time_in_force": "day",
    });
    // The base order with some fields changed (or, given as null, removed).
    let with = |changes: Value| -> Value {
        let mut order = base.clone();
        if let (Some(order), Some(changes)) = (order.as_object_mut(), changes.as_object()) {
            for (k, v) in changes {
                if v.is_null() {
                    order.remove(k);
                } else {
                    order.insert(k.clone(), v.clone());
                }
            }
        }
        order
    };
    for (bad, message) in [
        (
            with(json!({"client_order_id": "self-check-1"})),
            "client_order_id must be unique",
        ),
        (
            with(json!({"notional": "100"})),
            "only one of qty or notional may be given",
        ),
        (with(json!({"qty": null})), "qty or notional is required"),
        (
            with(json!({"client_order_id": "x".repeat(129)})),
            "client_order_id must be no more than 128 characters",
        ),
        (with(json!({"type": "limit"})), "limit_price is required"),
        (with(json!({"symbol": "NOPE"})), "asset \"NOPE\" not found"),
        (
            with(json!({"time_in_force": "week"})),
            "invalid time_in_force",
        ),
        (with(json!({"qty": "-1"})), "invalid qty"),
        (
            with(json!({
                "order_class": "bracket",
                "take_profit": {"limit_price": "170"},
                "stop_loss": {"stop_price": "160"},
            })),
            "take_profit.limit_price must be above and stop_loss.stop_price below the entry",
        ),
    ] {
        let body = c
            .fails(
                Trading,
                "POST",
                "/v2/orders",
                "/v2/orders",
                Some(&bad),
                422,
                40010001,
            )
            .await;
        assert_eq!(body["message"], message);
    }
    let malformed = c
        .send("POST", "/v2/orders", Some(&json!("not an object")))
        .await;
    assert_eq!(malformed.status, 400);
    c.conform(Trading, "POST", "/v2/orders", &malformed);
    c.fails(
        Trading,
        "POST",
        "/v2/orders",
        "/v2/orders",
        Some(&with(json!({"symbol": "SPY", "qty": "1000"}))),
        403,
        40310000,
    )
    .await;
    c.fails(
        Trading,
        "POST",
        "/v2/orders",
        "/v2/orders",
        Some(&with(
            json!({"symbol": "JPM", "qty": "100", "side": "sell"}),
        )),
        403,
        40310000,
    )
    .await;
    assert_eq!(
        fake.orders().len(),
        order_count,
        "rejected orders leave nothing behind"
    );

    // -- orders: resting limits, set_price, replace, cancel -----------------------------------
    let resting = c
        .post_order(&json!({
            "symbol": "JPM", "qty": 1, "side": "buy", "type": "limit",
            "limit_price": "239.00", "time_in_force": "day",
        }))
        .await;
    assert_eq!(resting["status"], "new");
    assert_eq!(resting["filled_avg_price"], Value::Null);
    let account = c.get(Trading, "/v2/account", "/v2/account").await;
    assert_eq!(
        account["buying_power"], "7580.02",
        "7819.02 less 239 held for the limit"
    );
    let open = c.get(Trading, "/v2/orders", "/v2/orders").await;
    assert_eq!(items(&open).len(), 1);
    assert_eq!(open[0]["id"], resting["id"]);
    fake.set_price("JPM", "238.50", "238.90");
    let filled = order_by_id(&fake.orders(), &resting["id"]);
    assert_eq!(
        (&filled["status"], &filled["filled_avg_price"]),
        (&json!("filled"), &json!("238.9"))
    );
    let marketable = c
        .post_order(&json!({
            "symbol": "JPM", "qty": "1", "side": "buy", "type": "limit",
            "limit_price": "239.00", "time_in_force": "gtc",
        }))
        .await;
    assert_eq!(marketable["status"], "filled");

    let selling = c
        .post_order(&json!({
            "symbol": "AAPL", "qty": "1", "side": "sell", "type": "limit",
            "limit_price": "500", "time_in_force": "gtc",
        }))
        .await;
    assert_eq!(selling["status"], "new");
    let positions = c.get(Trading, "/v2/positions", "/v2/positions").await;
    assert_eq!(position_of(&positions, "AAPL")["qty_available"], "7");
    let old_id = text(&selling["id"]).to_owned();
    let replaced = c
        .expect(
            Trading,
            "PATCH",
            &format!("/v2/orders/{old_id}"),
            template,
            Some(&json!({"limit_price": "450", "client_order_id": "self-check-replaced"})),
            200,
        )
        .await
        .body;
    assert_ne!(replaced["id"], selling["id"]);
    assert_eq!(replaced["replaces"], selling["id"]);
    assert_eq!(replaced["limit_price"], "450");
    assert_eq!(replaced["status"], "new");
    assert_eq!(replaced["client_order_id"], "self-check-replaced");
    let old = c
        .get(Trading, &format!("/v2/orders/{old_id}"), template)
        .await;
    assert_eq!(old["status"], "replaced");
    assert_eq!(old["replaced_by"], replaced["id"]);
    c.fails(
        Trading,
        "PATCH",
        &format!("/v2/orders/{old_id}"),
        template,
        Some(&json!({"limit_price": "400"})),
        422,
        42210000,
    )
    .await;
    let new_id = text(&replaced["id"]).to_owned();
    let gone = c
        .expect(
            Trading,
            "DELETE",
            &format!("/v2/orders/{new_id}"),
            template,
            None,
            204,
        )
        .await;
    assert_eq!(gone.body, Value::Null);
    assert_eq!(
        order_by_id(&fake.orders(), &replaced["id"])["status"],
        "canceled"
    );
    let again = c
        .fails(
            Trading,
            "DELETE",
            &format!("/v2/orders/{new_id}"),
            template,
            None,
            422,
            42210000,
        )
        .await;
    assert_eq!(again["message"], "order is not cancelable");
    c.fails(
        Trading,
        "DELETE",
        &format!("/v2/orders/{id}"),
        template,
        None,
        422,
        42210000,
    )
    .await;
    c.fails(
        Trading,
        "DELETE",
        &format!("/v2/orders/{}", uuid(999_999)),
        template,
        None,
        404,
        40410000,
    )
    .await;
    c.fails(
        Trading,
        "PATCH",
        &format!("/v2/orders/{}", uuid(999_999)),
        template,
        Some(&json!({"qty": "1"})),
        404,
        40410000,
    )
    .await;

    // -- orders: notional, ioc, bracket, oto, oco ----------------------------------------------
    let notional = c
        .post_order(&json!({
            "symbol": "SPY", "notional": "100", "side": "buy", "type": "market",
            "time_in_force": "day",
        }))
        .await;
    assert_eq!(
        (&notional["qty"], &notional["notional"]),
        (&Value::Null, &json!("100"))
    );
    assert_eq!(
        notional["filled_qty"], "0.166652778",
        "100 / 600.05, to nine places"
    );
    let ioc = c
        .post_order(&json!({
            "symbol": "AAPL", "qty": "1", "side": "buy", "type": "limit",
            "limit_price": "100", "time_in_force": "ioc",
        }))
        .await;
    assert_eq!(ioc["status"], "canceled");

    let bracket = c
        .post_order(&json!({
            "symbol": "AAPL", "qty": "1", "side": "buy", "type": "market",
            "time_in_force": "gtc", "order_class": "bracket",
            "take_profit": {"limit_price": "200"},
            "stop_loss": {"stop_price": "150", "limit_price": "149"},
        }))
        .await;
    assert_eq!(bracket["status"], "filled");
    assert_eq!(bracket["order_class"], "bracket");
    let legs = items(&bracket["legs"]).clone();
    assert_eq!(legs.len(), 2);
    assert_eq!(
        (
            &legs[0]["type"],
            &legs[0]["status"],
            &legs[0]["limit_price"]
        ),
        (&json!("limit"), &json!("new"), &json!("200"))
    );
    assert_eq!(
        (&legs[1]["type"], &legs[1]["status"], &legs[1]["stop_price"]),
        (&json!("stop_limit"), &json!("held"), &json!("150"))
    );
    assert!(legs.iter().all(|l| l["side"] == "sell"));
    let nested = c
        .get(
            Trading,
            "/v2/orders?status=all&nested=true&limit=500",
            "/v2/orders",
        )
        .await;
    let rolled = order_by_id(items(&nested), &bracket["id"]);
    assert_eq!(items(&rolled["legs"]).len(), 2);
    assert!(!items(&nested).iter().any(|o| o["id"] == legs[0]["id"]));
    let open = c.get(Trading, "/v2/orders?status=open", "/v2/orders").await;
    let open_ids: Vec<&Value> = items(&open).iter().map(|o| &o["id"]).collect();
    assert_eq!(
        open_ids,
        [&legs[1]["id"], &legs[0]["id"]],
        "legs listed flat, newest first"
    );
    let flat = c
        .get(Trading, "/v2/orders?status=all&limit=500", "/v2/orders")
        .await;
    assert_eq!(
        order_by_id(items(&flat), &bracket["id"])["legs"],
        Value::Null
    );
    fake.set_price("AAPL", "201.00", "201.10");
    let orders = fake.orders();
    assert_eq!(order_by_id(&orders, &legs[0]["id"])["status"], "filled");
    assert_eq!(
        order_by_id(&orders, &legs[0]["id"])["filled_avg_price"],
        "201"
    );
    assert_eq!(order_by_id(&orders, &legs[1]["id"])["status"], "canceled");
    fake.set_price("AAPL", "181.00", "181.10");

    let oto = c
        .post_order(&json!({
            "symbol": "JPM", "qty": "1", "side": "buy", "type": "limit", "limit_price": "230",
            "time_in_force": "day", "order_class": "oto", "stop_loss": {"stop_price": "220"},
        }))
        .await;
    assert_eq!(oto["status"], "new");
    assert_eq!(items(&oto["legs"]).len(), 1);
    assert_eq!(oto["legs"][0]["status"], "held");
    let oco = c
        .post_order(&json!({
            "symbol": "AAPL", "qty": "1", "side": "sell", "type": "limit",
            "time_in_force": "gtc", "order_class": "oco",
            "take_profit": {"limit_price": "300"}, "stop_loss": {"stop_price": "100"},
        }))
        .await;
    assert_eq!(
        (&oco["status"], &oco["limit_price"]),
        (&json!("new"), &json!("300"))
    );
    assert_eq!(oco["legs"][0]["type"], "stop");

    // -- cancel all, with one failure ------------------------------------------------------
    c.post_order(&json!({
        "symbol": "SPY", "qty": "1", "side": "buy", "type": "limit", "limit_price": "500",
        "time_in_force": "day",
    }))
    .await;
    fake.fail_next(Failure::CancelAllMultiStatus);
    let first = c
        .expect(Trading, "DELETE", "/v2/orders", "/v2/orders", None, 207)
        .await
        .body;
    let statuses: Vec<&Value> = items(&first).iter().map(|r| &r["status"]).collect();
    assert_eq!(statuses, [&json!(500), &json!(200), &json!(200)]);
    assert_eq!(first[0]["id"], oto["id"]);
    assert_eq!(first[1]["body"]["status"], "canceled");
    let orders = fake.orders();
    assert_eq!(order_by_id(&orders, &oto["id"])["status"], "new");
    assert_eq!(
        order_by_id(&orders, &oco["legs"][0]["id"])["status"],
        "canceled"
    );
    let second = c
        .expect(Trading, "DELETE", "/v2/orders", "/v2/orders", None, 207)
        .await
        .body;
    assert_eq!(items(&second).len(), 1);
    assert_eq!(
        (&second[0]["id"], &second[0]["status"]),
        (&oto["id"], &json!(200))
    );
    let third = c
        .expect(Trading, "DELETE", "/v2/orders", "/v2/orders", None, 207)
        .await
        .body;
    assert_eq!(third, json!([]));

    // -- closing positions ----------------------------------------------------------------
    let template = "/v2/positions/{symbol_or_asset_id}";
    // JPM: 5 seeded + 2 bought = 7; the bid is 238.50.
    let closed = c
        .expect(
            Trading,
            "DELETE",
            "/v2/positions/JPM?qty=2",
            template,
            None,
            200,
        )
        .await
        .body;
    assert_eq!(
        (&closed["side"], &closed["qty"], &closed["status"]),
        (&json!("sell"), &json!("2"), &json!("filled"))
    );
    assert_eq!(closed["filled_avg_price"], "238.5");
    // AAPL: 6 seeded + 2 bought + 1 (bracket) - 1 (its take-profit) = 8; half is 4.
    let half = c
        .expect(
            Trading,
            "DELETE",
            "/v2/positions/AAPL?percentage=50",
            template,
            None,
            200,
        )
        .await
        .body;
    assert_eq!(half["qty"], "4");
    c.fails(
        Trading,
        "DELETE",
        "/v2/positions/JPM?qty=1&percentage=5",
        template,
        None,
        422,
        40010001,
    )
    .await;
    c.fails(
        Trading,
        "DELETE",
        "/v2/positions/JPM?qty=100",
        template,
        None,
        403,
        40310000,
    )
    .await;
    let rest = c
        .expect(Trading, "DELETE", "/v2/positions/JPM", template, None, 200)
        .await
        .body;
    assert_eq!(rest["qty"], "5");
    c.fails(
        Trading,
        "GET",
        "/v2/positions/JPM",
        template,
        None,
        404,
        40410000,
    )
    .await;
    c.fails(
        Trading,
        "DELETE",
        "/v2/positions/JPM",
        template,
        None,
        404,
        40410000,
    )
    .await;

    // -- order lists -----------------------------------------------------------------------
    let everything = c
        .get(Trading, "/v2/orders?status=all&limit=500", "/v2/orders")
        .await;
    assert_eq!(items(&everything).len(), fake.orders().len());
    let oldest = c
        .get(
            Trading,
            "/v2/orders?status=closed&direction=asc&limit=2",
            "/v2/orders",
        )
        .await;
    assert_eq!(items(&oldest).len(), 2);
    assert_eq!(
        (&oldest[0]["symbol"], &oldest[0]["filled_avg_price"]),
        (&json!("AAPL"), &json!("150"))
    );
    let jpm_orders = c
        .get(
            Trading,
            "/v2/orders?status=all&symbols=JPM&side=sell",
            "/v2/orders",
        )
        .await;
    assert!(
        items(&jpm_orders)
            .iter()
            .all(|o| o["symbol"] == "JPM" && o["side"] == "sell")
    );
    // The two closes and the OTO's canceled stop-loss leg.
    assert_eq!(items(&jpm_orders).len(), 3);
    c.fails(
        Trading,
        "GET",
        "/v2/orders?status=bogus",
        "/v2/orders",
        None,
        422,
        40010001,
    )
    .await;

    // -- injected failures -------------------------------------------------------------------
    fake.fail_next(Failure::TooManyRequests { reset_in_secs: 7 });
    let limited = c
        .fails(
            Trading,
            "GET",
            "/v2/clock",
            "/v2/clock",
            None,
            429,
            42910000,
        )
        .await;
    assert_eq!(limited["message"], "rate limit exceeded");
    fake.fail_next(Failure::TooManyRequests { reset_in_secs: 7 });
    let limited = c.send("GET", "/v2/account", None).await;
    assert_eq!(limited.status, 429);
    c.conform(Trading, "GET", "/v2/account", &limited);
    assert_eq!(limited.header("x-ratelimit-limit"), Some("200"));
    assert_eq!(limited.header("x-ratelimit-remaining"), Some("0"));
    assert_eq!(limited.header("retry-after"), Some("7"));
    let reset: i64 = limited
        .header("x-ratelimit-reset")
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("no X-RateLimit-Reset"));
    assert!(
        (reset - Utc::now().timestamp() - 7).abs() <= 2,
        "reset {reset}"
    );
    let fine = c.send("GET", "/v2/clock", None).await;
    assert_eq!(fine.status, 200);
    assert_eq!(fine.header("x-ratelimit-limit"), Some("200"));
    fake.fail_next(Failure::TooManyRequests { reset_in_secs: 1 });
    c.fails(
        Data,
        "GET",
        "/v2/stocks/AAPL/bars?timeframe=1Day",
        "/v2/stocks/{symbol}/bars",
        None,
        429,
        42910000,
    )
    .await;

    fake.fail_next(Failure::ServerError);
    c.fails(
        Trading,
        "GET",
        "/v2/clock",
        "/v2/clock",
        None,
        500,
        50010000,
    )
    .await;
    fake.fail_next(Failure::ServerError);
    let unauthorized_first = c.send_as(None, "GET", "/v2/account").await;
    assert_eq!(
        unauthorized_first.status, 401,
        "bad credentials consume no failure"
    );
    c.fails(
        Trading,
        "GET",
        "/v2/account",
        "/v2/account",
        None,
        500,
        50010000,
    )
    .await;
    fake.fail_next(Failure::ServerError);
    c.fails(
        Data,
        "GET",
        "/v2/stocks/snapshots?symbols=AAPL",
        "/v2/stocks/snapshots",
        None,
        500,
        50010000,
    )
    .await;
    fake.fail_next(Failure::ServerError);
    c.fails(
        Trading,
        "DELETE",
        "/v2/orders",
        "/v2/orders",
        None,
        500,
        50010000,
    )
    .await;

    let before = fake.orders().len();
    fake.fail_next(Failure::DuplicateClientOrderId);
    c.get(Trading, "/v2/account", "/v2/account").await;
    let duplicate = c
        .fails(
            Trading,
            "POST",
            "/v2/orders",
            "/v2/orders",
            Some(&json!({
                "symbol": "SPY", "qty": "1", "side": "buy", "type": "limit", "limit_price": "1",
                "time_in_force": "day", "client_order_id": "never-used",
            })),
            422,
            40010001,
        )
        .await;
    assert_eq!(duplicate["message"], "client_order_id must be unique");
    assert_eq!(fake.orders().len(), before);
    let accepted = c
        .post_order(&json!({
            "symbol": "SPY", "qty": "1", "side": "buy", "type": "limit", "limit_price": "1",
            "time_in_force": "day", "client_order_id": "never-used",
        }))
        .await;
    assert_eq!(accepted["status"], "new");

    fake.fail_next(Failure::Hang);
    c.sent += 1;
    let auth = Some(("test-key", "test-secret"));
    let hung = http(
        &c.addr,
        "GET",
        "/v2/account",
        auth,
        None,
        Duration::from_millis(300),
    )
    .await;
    assert!(hung.is_none(), "a hung request gets no answer");
    let account = c.get(Trading, "/v2/account", "/v2/account").await;
    assert_eq!(account["status"], "ACTIVE");

    // -- the request log -------------------------------------------------------------------
    let log = fake.requests();
    assert_eq!(log.len(), c.sent);
    assert_eq!(log[0], "GET /v2/account");
    assert!(log.contains(
        &"GET /v2/account/activities?activity_types=FILL,FEE&direction=asc&page_size=2".to_owned()
    ));
    assert!(log.contains(&"POST /v2/orders".to_owned()));

    // -- the checker rejects what it should -----------------------------------------------
    let spec = &c.trading;
    let rejects = |body: &Value, expected: &str| match check_response(
        spec,
        "POST",
        "/v2/orders",
        200,
        body,
    ) {
        Ok(()) => panic!("the checker accepted {body}"),
        Err(e) => assert!(e.contains(expected), "{e:?} should say {expected:?}"),
    };
    let changed = |path: &str, value: Value| -> Value {
        let mut order = bracket.clone();
        if let Some(slot) = order.pointer_mut(path) {
            *slot = value;
        }
        order
    };
    rejects(
        &changed("/qty", json!(1)),
        "POST /v2/orders -> 200: $.qty: expected string or null, got integer 1",
    );
    rejects(
        &changed("/filled_qty", Value::Null),
        "$.filled_qty: expected string, got null",
    );
    rejects(
        &changed("/status", json!("bogus")),
        "$.status: expected one of [",
    );
    rejects(
        &changed("/created_at", json!("yesterday")),
        "$.created_at: expected an RFC 3339",
    );
    rejects(
        &changed("/legs/1/side", json!("short")),
        "$.legs[1].side: expected one of",
    );
    rejects(
        &changed("/id", json!("not-a-uuid")),
        "$.id: expected a UUID",
    );
    rejects(
        &changed("/client_order_id", json!("x".repeat(129))),
        "at most 128 characters",
    );
    rejects(&json!([]), "$: expected object, got array []");
    let mut no_tif = bracket.clone();
    if let Some(order) = no_tif.as_object_mut() {
        order.remove("time_in_force");
    }
    rejects(&no_tif, "$: missing required property \"time_in_force\"");
    let strange = json!([{"activity_type": "NOPE"}]);
    let e = check_response(spec, "GET", "/v2/account/activities", 200, &strange);
    assert!(e.is_err_and(|e| e.contains("$[0]: matched none of the anyOf branches")));
    let e = check_response(spec, "GET", "/v2/account", 404, &json!({}));
    assert!(e.is_err_and(|e| e.contains("no response declared for status 404 (declared: 200)")));
    let e = check_response(spec, "GET", "/v9/nothing", 200, &json!({}));
    assert!(e.is_err_and(|e| e.contains("no path /v9/nothing")));
    let e = check_response(spec, "PUT", "/v2/account", 200, &json!({}));
    assert!(e.is_err_and(|e| e.contains("no PUT operation")));
    let mut bad_quote = quote.clone();
    bad_quote["quote"]["bp"] = json!("181.00");
    let e = check_response(
        &c.data,
        "GET",
        "/v2/stocks/{symbol}/quotes/latest",
        200,
        &bad_quote,
    );
    assert!(e.is_err_and(|e| e.contains("$.quote.bp: expected number, got string")));
    let bad_snapshot = json!({"AAPL": {"latestQuote": {"bp": 1}}});
    let e = check_response(&c.data, "GET", "/v2/stocks/snapshots", 200, &bad_snapshot);
    assert!(e.is_err_and(|e| e.contains("$.AAPL.latestQuote: missing required property")));
    let tiny = json!({
        "paths": {"/x": {"get": {"responses": {
            "2XX": {"content": {"application/json": {"schema": {"type": "integer"}}}},
            "default": {"content": {"application/json": {
                "schema": {"$ref": "#/components/schemas/E"},
            }}},
        }}}},
        "components": {"schemas": {"E": {
            "type": "object", "required": ["code"],
            "properties": {"code": {"type": "integer"}},
        }}},
    });
    assert_eq!(check_response(&tiny, "get", "/x", 201, &json!(5)), Ok(()));
    assert!(check_response(&tiny, "get", "/x", 201, &json!("5")).is_err());
    assert_eq!(
        check_response(&tiny, "get", "/x", 503, &json!({"code": 1})),
        Ok(())
    );
    let e = check_response(&tiny, "get", "/x", 503, &json!({"code": 1.5}));
    assert!(e.is_err_and(|e| e.contains("$.code: expected integer, got number 1.5")));
    let accepts = |schema: Value, value: Value| check_schema(&tiny, &schema, &value).is_ok();
    let both = json!({"allOf": [{"required": ["a"]}, {"required": ["b"]}]});
    assert!(accepts(both.clone(), json!({"a": 1, "b": 2})));
    assert!(!accepts(both, json!({"a": 1})));
    let either = json!({"oneOf": [{"type": "string"}, {"type": "integer"}]});
    assert!(accepts(either.clone(), json!(3)));
    assert!(!accepts(either, json!(true)));
    assert!(accepts(
        json!({"type": "string", "nullable": true}),
        Value::Null
    ));
    assert!(!accepts(json!({"type": "string"}), Value::Null));
    assert!(accepts(json!({"type": ["string", "null"]}), Value::Null));
    assert!(accepts(
        json!({"type": "string", "format": "date"}),
        json!("2026-01-02")
    ));
    assert!(!accepts(
        json!({"type": "string", "format": "date"}),
        json!("2026-01-02T00:00:00Z")
    ));
    assert!(accepts(
        json!({"type": "string", "format": "date-time"}),
        json!("2026-01-02T09:30:00-05:00")
    ));
    assert!(!accepts(
        json!({"type": "string", "format": "date-time"}),
        json!("2026-01-02")
    ));
    assert!(!accepts(
        json!({"type": "string", "enum": ["a"]}),
        json!("b")
    ));
    assert!(!accepts(
        json!({"properties": {"n": {"type": "number"}}}),
        json!({"n": "1"})
    ));
    assert!(accepts(
        json!({"properties": {"n": {"type": "number"}}}),
        json!({"m": "1"})
    ));
    assert!(!accepts(
        json!({"additionalProperties": false}),
        json!({"m": 1})
    ));
    assert!(!accepts(
        json!({"items": {"type": "integer"}}),
        json!([1, "2"])
    ));

    c.undeclared.sort();
    c.undeclared
}

// ---------------------------------------------------------------------------------------
// News and the market calendar: GET /v1beta1/news (market-data host), GET /v2/calendar,
// and the clock's time
//
// * The calendar holds every weekday from 1970 to 2029 (Alpaca's calendar "from 1970 to
//   2029") but the closed days: seeded with NYSE's Thanksgiving (2026-11-26), Christmas
//   (2026-12-25) and New Year's Day (2027-01-01), and early closes at 13:00 on 2026-11-27
//   and 2026-12-24; [`AlpacaFake::close_day`] and [`AlpacaFake::close_early`] add more. A
//   row is `date`, `open` and `close` (`HH:MM`), `session_open` and `session_close`
//   (`HHMM`: 0400 to 2000, or 1700 on an early close) and `settlement_date` (the next
//   trading day), New York time. `start` and `end` (RFC 3339 or a date, inclusive) default
//   to the calendar's ends; `date_type=SETTLEMENT` reads them as settlement dates.
// * News: the seeded articles (below) and those [`AlpacaFake::add_news`] adds, filtered by
//   `symbols` (any of them), `start` and `end` (inclusive, on `created_at`), sorted by
//   `updated_at` (`sort`, default `desc`), `limit` 1 to 50 (default 10), and paged with an
//   opaque `page_token`; `next_page_token` is null on the last page. `content` is sent
//   only with `include_content=true` (else `""`, as alpaca-py's recorded answer has it);
//   an article without a summary has `"summary": ""`. [`AlpacaFake::cap_news_pages`] makes
//   pages shorter than `limit`, so a client must follow the token. A bad parameter is 400
//   `{"code":40010001,...}`. [`Failure::Hang`] makes the next request (a news one too)
//   answer nothing.

/// One article of the fake's news, sent in the shape of the document's `news` schema.
#[derive(Clone, Debug)]
pub struct FakeArticle {
    pub id: i64,
    pub headline: String,
    pub author: String,
    pub source: String,
    /// `""`: the article has none.
    pub summary: String,
    pub content: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub symbols: Vec<String>,
    /// Sent as null when `None` (the document's `url` is nullable).
    pub url: Option<String>,
}

impl FakeArticle {
    /// An ordinary article: by "Fake Newsroom", from "benzinga", updated when created,
    /// with a summary, a one-paragraph HTML body and a link.
    pub fn new(id: i64, headline: &str, created_at: DateTime<Utc>, symbols: &[&str]) -> Self {
        FakeArticle {
            id,
            headline: headline.to_owned(),
            author: "Fake Newsroom".to_owned(),
            source: "benzinga".to_owned(),
            summary: format!("Summary of article {id}."),
            content: format!("<p>Body of article {id}.</p>"),
            created_at,
            updated_at: created_at,
            symbols: symbols.iter().map(|s| (*s).to_owned()).collect(),
            url: Some(format!("https://news.example.com/{id}")),
        }
    }

    fn json(&self, with_content: bool) -> Value {
        json!({
            "id": self.id,
            "headline": self.headline,
            "author": self.author,
            "created_at": stamp(self.created_at),
            "updated_at": stamp(self.updated_at),
            "summary": self.summary,
            "content": if with_content { self.content.as_str() } else { "" },
            "images": [],
            "symbols": self.symbols,
            "source": self.source,
            "url": self.url,
        })
    }
}

/// The fake's market calendar, news and clock.
#[derive(Clone, Debug, Default)]
struct MarketInfo {
    /// The clock's time, when set (else the real time).
    now: Option<DateTime<Utc>>,
    closed: Vec<NaiveDate>,
    /// Early closes: the close, in minutes after New York midnight.
    early: BTreeMap<NaiveDate, u32>,
    news: Vec<FakeArticle>,
    page_cap: Option<usize>,
}

/// The last day of Alpaca's calendar.
fn calendar_end() -> NaiveDate {
    NaiveDate::from_ymd_opt(2029, 12, 31).unwrap_or(NaiveDate::MAX)
}

fn calendar_start() -> NaiveDate {
    NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or(NaiveDate::MIN)
}

fn hhmm(minute: u32, colon: bool) -> String {
    if colon {
        format!("{:02}:{:02}", minute / 60, minute % 60)
    } else {
        format!("{:02}{:02}", minute / 60, minute % 60)
    }
}

impl MarketInfo {
    fn seeded() -> Self {
        let day = |y, m, d| NaiveDate::from_ymd_opt(y, m, d).unwrap_or(NaiveDate::MIN);
        let at = |d: u32, h: u32, m: u32| utc(2026, 3, d, h, m);
        let mut global = FakeArticle::new(
            40_000_004,
            "Treasury yields slip as traders weigh the jobs report",
            utc(2026, 2, 27, 21, 30),
            &[],
        );
        global.source = "reuters".to_owned();
        MarketInfo {
            now: None,
            closed: vec![day(2026, 11, 26), day(2026, 12, 25), day(2027, 1, 1)],
            early: BTreeMap::from([(day(2026, 11, 27), 13 * 60), (day(2026, 12, 24), 13 * 60)]),
            news: vec![
                FakeArticle::new(
                    40_000_001,
                    "Apple shares rise before the open",
                    at(2, 14, 5),
                    &["AAPL"],
                ),
                FakeArticle::new(
                    40_000_002,
                    "JPMorgan raises its quarterly dividend",
                    at(2, 13, 0),
                    &["JPM"],
                ),
                FakeArticle::new(
                    40_000_003,
                    "Stocks end the week higher",
                    at(1, 20, 0),
                    &["AAPL", "SPY"],
                ),
                global,
            ],
            page_cap: None,
        }
    }

    /// The regular session of `day` in minutes after New York midnight, if it trades.
    fn session(&self, day: NaiveDate) -> Option<(u32, u32)> {
        let trades = is_weekday(day)
            && !self.closed.contains(&day)
            && (calendar_start()..=calendar_end()).contains(&day);
        trades.then(|| {
            (
                OPEN_MINUTE,
                self.early.get(&day).copied().unwrap_or(CLOSE_MINUTE),
            )
        })
    }

    fn next_trading_day(&self, day: NaiveDate) -> Option<NaiveDate> {
        (1..=10)
            .map(|n| day + TimeDelta::days(n))
            .find(|d| self.session(*d).is_some())
    }

    fn calendar(&self, query: &Query) -> Reply {
        // A date is that date; a time, its New York date.
        let date_of = |key: &str| -> Result<Option<NaiveDate>, String> {
            if let Some(d) = query
                .get(key)
                .and_then(|t| NaiveDate::parse_from_str(t, "%Y-%m-%d").ok())
            {
                return Ok(Some(d));
            }
            Ok(query.time(key)?.map(|t| ny(t).date_naive()))
        };
        let (start, end) = match (date_of("start"), date_of("end")) {
            (Ok(s), Ok(e)) => (s.unwrap_or(calendar_start()), e.unwrap_or(calendar_end())),
            (Err(e), _) | (_, Err(e)) => return bad_request(&e),
        };
        let settlement = match query.get("date_type") {
            None | Some("TRADING") => false,
            Some("SETTLEMENT") => true,
            Some(other) => return bad_request(&format!("invalid date_type: {other}")),
        };
        let mut rows = Vec::new();
        let mut day =
            start.max(calendar_start()) - TimeDelta::days(if settlement { 10 } else { 0 });
        while day <= end.min(calendar_end()) {
            if let Some((open, close)) = self.session(day) {
                let settles = self.next_trading_day(day).unwrap_or(day);
                let key = if settlement { settles } else { day };
                if (start..=end).contains(&key) {
                    let session_close = if close < CLOSE_MINUTE {
                        17 * 60
                    } else {
                        20 * 60
                    };
                    rows.push(json!({
                        "date": day.to_string(),
                        "open": hhmm(open, true),
                        "close": hhmm(close, true),
                        "session_open": hhmm(4 * 60, false),
                        "session_close": hhmm(session_close, false),
                        "settlement_date": settles.to_string(),
                    }));
                }
            }
            day += TimeDelta::days(1);
        }
        Reply::ok(Value::Array(rows))
    }

    fn news(&self, query: &Query) -> Reply {
        let limit = match query.number("limit", 10, 1, 50) {
            Ok(n) => usize_of(n),
            Err(e) => return bad_request(&e),
        };
        let (start, end) = match (query.time("start"), query.time("end")) {
            (Ok(s), Ok(e)) => (s, e),
            (Err(e), _) | (_, Err(e)) => return bad_request(&e),
        };
        let ascending = match query.get("sort") {
            None | Some("desc") => false,
            Some("asc") => true,
            Some(other) => return bad_request(&format!("invalid sort: {other}")),
        };
        let wanted: Vec<String> = query
            .get("symbols")
            .unwrap_or("")
            .split(',')
            .map(|s| s.trim().to_uppercase())
            .filter(|s| !s.is_empty())
            .collect();
        let mut hits: Vec<&FakeArticle> = self
            .news
            .iter()
            .filter(|a| wanted.is_empty() || a.symbols.iter().any(|s| wanted.contains(s)))
            .filter(|a| start.is_none_or(|s| a.created_at >= s))
            .filter(|a| end.is_none_or(|e| a.created_at <= e))
            .collect();
        let key = |a: &FakeArticle| (a.updated_at.timestamp_nanos_opt().unwrap_or(0), a.id);
        hits.sort_by_key(|a| key(a));
        if !ascending {
            hits.reverse();
        }
        let from = match query.get("page_token") {
            None => 0,
            Some(token) => {
                let after = base64_decode(token)
                    .and_then(|b| String::from_utf8(b).ok())
                    .and_then(|t| {
                        let (nanos, id) = t.split_once('|')?;
                        Some((nanos.parse::<i64>().ok()?, id.parse::<i64>().ok()?))
                    });
                match after.and_then(|k| hits.iter().position(|a| key(a) == k)) {
                    Some(i) => i + 1,
                    None => return bad_request("invalid page token"),
                }
            }
        };
        let size = self.page_cap.map_or(limit, |cap| cap.min(limit));
        let page: Vec<&FakeArticle> = hits.iter().skip(from).take(size).copied().collect();
        let next = (from + page.len() < hits.len())
            .then(|| page.last())
            .flatten()
            .map(|a| {
                let (nanos, id) = key(a);
                base64_encode(format!("{nanos}|{id}").as_bytes())
            });
        let with_content = query.flag("include_content");
        Reply::ok(json!({
            "news": page.iter().map(|a| a.json(with_content)).collect::<Vec<_>>(),
            "next_page_token": next,
        }))
    }
}

impl AlpacaFake {
    /// Fixes the time `GET /v2/clock` answers for.
    pub fn set_now(&self, now: DateTime<Utc>) {
        lock(&self.state).market.now = Some(now);
    }

    /// Closes the market on `day` (the calendar leaves it out).
    pub fn close_day(&self, day: NaiveDate) {
        lock(&self.state).market.closed.push(day);
    }

    /// Closes the market early on `day`, at `hour:minute` New York time.
    pub fn close_early(&self, day: NaiveDate, hour: u32, minute: u32) {
        lock(&self.state)
            .market
            .early
            .insert(day, hour * 60 + minute);
    }

    /// Adds an article to the news.
    pub fn add_news(&self, article: FakeArticle) {
        lock(&self.state).market.news.push(article);
    }

    /// Replaces the news with `articles`.
    pub fn set_news(&self, articles: Vec<FakeArticle>) {
        lock(&self.state).market.news = articles;
    }

    /// Pages of news hold at most `cap` articles, whatever `limit` asks.
    pub fn cap_news_pages(&self, cap: usize) {
        lock(&self.state).market.page_cap = Some(cap.max(1));
    }
}

/// The market-data document as Alpaca's news answers bear it out: an article's `content`
/// is `""` without `include_content` (alpaca-py's recorded answer in
/// tests/data/test_historical_news_data.py sends `"content": ""`), and an article without
/// a summary sends `""` for the required key (the fake's reading); the document gives both
/// a `minLength` of 1.
fn news_as_sent(mut spec: Value) -> Value {
    let news = &mut spec["components"]["schemas"]["news"]["properties"];
    for field in ["content", "summary"] {
        if let Some(p) = news[field].as_object_mut() {
            p.remove("minLength");
        }
    }
    spec
}

/// The self-check of the calendar and the news, against the documents.
async fn check_calendar_and_news(c: &mut Checker) {
    use Api::{Data, Trading};

    // -- calendar --------------------------------------------------------------------------
    let days = c
        .get(
            Trading,
            "/v2/calendar?start=2026-11-23&end=2026-11-30",
            "/v2/calendar",
        )
        .await;
    let dates: Vec<&str> = items(&days).iter().map(|d| text(&d["date"])).collect();
    // Thanksgiving missing, the day after closing early, the weekend absent.
    assert_eq!(
        dates,
        [
            "2026-11-23",
            "2026-11-24",
            "2026-11-25",
            "2026-11-27",
            "2026-11-30"
        ]
    );
    let friday = &items(&days)[3];
    assert_eq!(
        (text(&friday["open"]), text(&friday["close"])),
        ("09:30", "13:00")
    );
    assert_eq!(text(&friday["session_close"]), "1700");
    assert_eq!(text(&friday["settlement_date"]), "2026-11-30");
    assert_eq!(text(&items(&days)[0]["session_open"]), "0400");
    let settled = c
        .get(
            Trading,
            "/v2/calendar?start=2026-11-30&end=2026-11-30&date_type=SETTLEMENT",
            "/v2/calendar",
        )
        .await;
    assert_eq!(text(&items(&settled)[0]["date"]), "2026-11-27");
    let end = c
        .get(
            Trading,
            "/v2/calendar?start=2029-12-28&end=2030-01-10",
            "/v2/calendar",
        )
        .await;
    assert_eq!(items(&end).len(), 2, "the calendar ends with 2029: {end}");
    c.fails(
        Trading,
        "GET",
        "/v2/calendar?start=someday",
        "/v2/calendar",
        None,
        400,
        40010001,
    )
    .await;

    // -- news ------------------------------------------------------------------------------
    let template = "/v1beta1/news";
    let latest = c.get(Data, template, template).await;
    let ids: Vec<i64> = items(&latest["news"])
        .iter()
        .map(|a| a["id"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(ids, [40_000_001, 40_000_002, 40_000_003, 40_000_004]);
    assert_eq!(latest["next_page_token"], Value::Null);
    assert_eq!(latest["news"][0]["content"], "");
    let with_body = c
        .get(
            Data,
            "/v1beta1/news?symbols=JPM&include_content=true",
            template,
        )
        .await;
    assert_eq!(items(&with_body["news"]).len(), 1);
    assert_eq!(
        with_body["news"][0]["content"],
        "<p>Body of article 40000002.</p>"
    );
    let first = c
        .get(Data, "/v1beta1/news?symbols=AAPL,SPY&limit=1", template)
        .await;
    assert_eq!(first["news"][0]["id"], 40_000_001);
    let token = text(&first["next_page_token"]).to_owned();
    let second = c
        .get(
            Data,
            &format!("/v1beta1/news?symbols=AAPL,SPY&limit=1&page_token={token}"),
            template,
        )
        .await;
    assert_eq!(second["news"][0]["id"], 40_000_003);
    assert_eq!(second["next_page_token"], Value::Null);
    let window = c
        .get(
            Data,
            "/v1beta1/news?start=2026-03-01T00:00:00Z&end=2026-03-02T13:00:00Z&sort=asc",
            template,
        )
        .await;
    let ids: Vec<i64> = items(&window["news"])
        .iter()
        .map(|a| a["id"].as_i64().unwrap_or(0))
        .collect();
    assert_eq!(ids, [40_000_003, 40_000_002]);
    for bad in [
        "/v1beta1/news?limit=51",
        "/v1beta1/news?limit=0",
        "/v1beta1/news?sort=sideways",
        "/v1beta1/news?start=yesterday",
        "/v1beta1/news?page_token=garbage",
    ] {
        c.fails(Data, "GET", bad, template, None, 400, 40010001)
            .await;
    }
}

// ---------------------------------------------------------------------------------------
// Option chains
//
// * `GET /v1beta1/options/snapshots/{underlying}` answers `{"snapshots": {OCC: {...}},
//   "next_page_token": ...}` for the contracts given [`AlpacaFake::list_option`] whose
//   root is the underlying, filtered by `type`, `strike_price_gte`/`_lte`,
//   `expiration_date`, `expiration_date_gte`/`_lte`, sorted by symbol, `limit` 1 to 1000
//   (default 100; else 400), paged by an opaque token. A contract's `greeks` and
//   `impliedVolatility` are sent only where given (Alpaca leaves them out for a contract it
//   cannot compute them for), as are `latestQuote`, `latestTrade` and `dailyBar`.
// * `GET /v2/options/contracts` answers `{"option_contracts": [...], "next_page_token":
//   ...}` with `underlying_symbols`, `status` (default active), `expiration_date`,
//   `expiration_date_gte`, `expiration_date_lte` (default: the coming Sunday, as the
//   document says "the next weekend"), `limit` (default 100, at most 10000), strings for
//   the decimals, `open_interest` and `close_price` only where given.
// * [`AlpacaFake::cap_chain_pages`] makes both answer at most that many per page whatever
//   `limit` says; [`AlpacaFake::refuse_contracts`] makes the contract list answer 403.

/// One contract the fake lists.
#[derive(Clone, Debug, Default)]
pub struct FakeOption {
    pub symbol: String,
    pub bid: Option<&'static str>,
    pub ask: Option<&'static str>,
    pub last: Option<&'static str>,
    pub volume: Option<u64>,
    pub implied_volatility: Option<f64>,
    /// delta, gamma, theta, vega, rho.
    pub greeks: Option<[f64; 5]>,
    pub open_interest: Option<&'static str>,
    pub open_interest_date: Option<&'static str>,
    pub multiplier: &'static str,
}

impl FakeOption {
    pub fn new(symbol: &str) -> Self {
        FakeOption {
            symbol: symbol.to_owned(),
            multiplier: "100",
            ..FakeOption::default()
        }
    }
}

#[derive(Debug, Default)]
struct ChainBook {
    options: Vec<FakeOption>,
    page_cap: Option<usize>,
    refuse_contracts: bool,
}

/// The parts of a compact OCC symbol: root, expiry, type, strike.
fn occ_parts(symbol: &str) -> Option<(&str, NaiveDate, &'static str, f64)> {
    let n = symbol.len();
    if n < 16 {
        return None;
    }
    let (root, rest) = symbol.split_at(n - 15);
    let date = NaiveDate::parse_from_str(&format!("20{}", &rest[..6]), "%Y%m%d").ok()?;
    let kind = match &rest[6..7] {
        "C" => "call",
        "P" => "put",
        _ => return None,
    };
    let strike = rest[7..].parse::<f64>().ok()? / 1000.0;
    Some((root, date, kind, strike))
}

fn query_date(query: &Query, key: &str) -> Result<Option<NaiveDate>, String> {
    match query.get(key) {
        None => Ok(None),
        Some(t) => NaiveDate::parse_from_str(t, "%Y-%m-%d")
            .map(Some)
            .map_err(|_| format!("invalid {key}: {t}")),
    }
}

fn query_float(query: &Query, key: &str) -> Result<Option<f64>, String> {
    match query.get(key) {
        None => Ok(None),
        Some(t) => t
            .parse::<f64>()
            .map(Some)
            .map_err(|_| format!("invalid {key}: {t}")),
    }
}

impl ChainBook {
    /// The contracts on `underlying` the query's filters keep, by symbol.
    fn matching(&self, underlying: &str, query: &Query) -> Result<Vec<&FakeOption>, String> {
        let on = query_date(query, "expiration_date")?;
        let from = query_date(query, "expiration_date_gte")?;
        let to = query_date(query, "expiration_date_lte")?;
        let lo = query_float(query, "strike_price_gte")?;
        let hi = query_float(query, "strike_price_lte")?;
        let kind = query.get("type");
        if let Some(k) = kind
            && !matches!(k, "call" | "put")
        {
            return Err(format!("invalid type: {k}"));
        }
        let mut out: Vec<&FakeOption> = self
            .options
            .iter()
            .filter(|o| {
                let Some((root, d, t, k)) = occ_parts(&o.symbol) else {
                    return false;
                };
                root == underlying
                    && on.is_none_or(|x| d == x)
                    && from.is_none_or(|x| d >= x)
                    && to.is_none_or(|x| d <= x)
                    && lo.is_none_or(|x| k >= x - 1e-9)
                    && hi.is_none_or(|x| k <= x + 1e-9)
                    && kind.is_none_or(|x| x == t)
            })
            .collect();
        out.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        Ok(out)
    }

    /// A page from `token` (the last symbol sent, encoded), at most `limit`.
    fn page<'a>(
        &self,
        all: Vec<&'a FakeOption>,
        query: &Query,
        limit: usize,
    ) -> Result<(Vec<&'a FakeOption>, Value), String> {
        let after = match query.get("page_token") {
            None => None,
            Some(t) => Some(
                base64_decode(t)
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| format!("invalid page_token: {t}"))?,
            ),
        };
        let limit = self.page_cap.map_or(limit, |c| c.min(limit));
        let rest: Vec<&FakeOption> = all
            .into_iter()
            .filter(|o| after.as_ref().is_none_or(|a| o.symbol > *a))
            .collect();
        let page: Vec<&FakeOption> = rest.iter().take(limit).copied().collect();
        let next = if rest.len() > limit {
            page.last().map_or(Value::Null, |o| {
                Value::String(base64_encode(o.symbol.as_bytes()))
            })
        } else {
            Value::Null
        };
        Ok((page, next))
    }

    fn snapshots(&self, underlying: &str, query: &Query) -> Reply {
        let limit = match query.number("limit", 100, 1, 1000) {
            Ok(n) => usize_of(n),
            Err(e) => return bad_request(&e),
        };
        if let Some(feed) = query.get("feed")
            && !matches!(feed, "opra" | "indicative")
        {
            return bad_request(&format!("invalid feed: {feed}"));
        }
        let all = match self.matching(underlying, query) {
            Ok(all) => all,
            Err(e) => return bad_request(&e),
        };
        let (page, next) = match self.page(all, query, limit) {
            Ok(p) => p,
            Err(e) => return bad_request(&e),
        };
        let at = "2026-11-30T20:59:58.123456789Z";
        let mut out = Map::new();
        for o in page {
            let mut snap = Map::new();
            if let (Some(b), Some(a)) = (o.bid, o.ask) {
                let d = |t: &str| Dec::parse(t).map_or(Value::Null, Dec::number);
                snap.insert(
                    "latestQuote".into(),
                    json!({"ap": d(a), "as": 12, "ax": "C", "bp": d(b), "bs": 9, "bx": "B", "c": "A", "t": at}),
                );
            }
            if let Some(l) = o.last {
                let p = Dec::parse(l).map_or(Value::Null, Dec::number);
                snap.insert(
                    "latestTrade".into(),
                    json!({"c": "I", "p": p, "s": 1, "t": "2026-11-30T20:41:07.5Z", "x": "C"}),
                );
            }
            if let (Some(v), Some(l)) = (o.volume, o.last) {
                let p = Dec::parse(l).map_or(Value::Null, Dec::number);
                snap.insert(
                    "dailyBar".into(),
                    json!({"c": p, "h": p, "l": p, "n": 12, "o": p, "t": "2026-11-30T05:00:00Z", "v": v, "vw": p}),
                );
            }
            if let Some(iv) = o.implied_volatility {
                snap.insert("impliedVolatility".into(), json!(iv));
            }
            if let Some([delta, gamma, theta, vega, rho]) = o.greeks {
                snap.insert(
                    "greeks".into(),
                    json!({"delta": delta, "gamma": gamma, "rho": rho, "theta": theta, "vega": vega}),
                );
            }
            out.insert(o.symbol.clone(), Value::Object(snap));
        }
        Reply::ok(json!({"snapshots": out, "next_page_token": next}))
    }

    fn contracts(&self, query: &Query, now: DateTime<Utc>) -> Reply {
        if self.refuse_contracts {
            return Reply::error(403, 40310000, "forbidden");
        }
        let limit = match query.number("limit", 100, 1, 10000) {
            Ok(n) => usize_of(n),
            Err(e) => return unprocessable(&e),
        };
        if query.get("status").is_some_and(|s| s != "active") {
            return Reply::ok(json!({"option_contracts": [], "next_page_token": null}));
        }
        // "By default this is set to the next weekend."
        let mut sunday = now.date_naive();
        while sunday.weekday() != Weekday::Sun {
            sunday += TimeDelta::days(1);
        }
        let mut q = Query(query.0.clone());
        if q.get("expiration_date").is_none() && q.get("expiration_date_lte").is_none() {
            q.0.push(("expiration_date_lte".into(), sunday.to_string()));
        }
        let mut all = Vec::new();
        for u in query.get("underlying_symbols").unwrap_or("").split(',') {
            match self.matching(u.trim(), &q) {
                Ok(m) => all.extend(m),
                Err(e) => return unprocessable(&e),
            }
        }
        all.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        let (page, next) = match self.page(all, query, limit) {
            Ok(p) => p,
            Err(e) => return unprocessable(&e),
        };
        let rows: Vec<Value> = page
            .iter()
            .filter_map(|o| {
                let (root, d, t, k) = occ_parts(&o.symbol)?;
                let strike = format!("{k}");
                let mut row = json!({
                    "id": format!("00000000-0000-4000-8000-{:012x}", o.symbol.bytes().fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) & 0xffff_ffff_ffff),
                    "symbol": o.symbol,
                    "name": format!("{root} {} {strike} {}", d.format("%b %d %Y"), if t == "call" { "Call" } else { "Put" }),
                    "status": "active",
                    "tradable": true,
                    "expiration_date": d.to_string(),
                    "root_symbol": root,
                    "underlying_symbol": root,
                    "underlying_asset_id": "b0b6dd9d-8b9b-48a9-ba46-b9d54906e415",
                    "type": t,
                    "style": "american",
                    "strike_price": strike,
                    "multiplier": o.multiplier,
                    "size": o.multiplier,
                });
                if let Some(oi) = o.open_interest {
                    row["open_interest"] = json!(oi);
                    row["open_interest_date"] = json!(o.open_interest_date.unwrap_or("2026-11-27"));
                }
                if let Some(l) = o.last {
                    row["close_price"] = json!(l);
                    row["close_price_date"] = json!("2026-11-27");
                }
                Some(row)
            })
            .collect();
        Reply::ok(json!({"option_contracts": rows, "next_page_token": next}))
    }
}

impl AlpacaFake {
    /// Lists a contract in the chain and the contract list.
    pub fn list_option(&self, option: FakeOption) {
        lock(&self.state).chain.options.push(option);
    }

    /// Pages of the chain and the contract list hold at most `cap`, whatever `limit` asks.
    pub fn cap_chain_pages(&self, cap: usize) {
        lock(&self.state).chain.page_cap = Some(cap.max(1));
    }

    /// The contract list answers 403 from now on.
    pub fn refuse_contracts(&self) {
        lock(&self.state).chain.refuse_contracts = true;
    }
}
