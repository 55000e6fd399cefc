//! A fake moomoo / Futu OpenD on loopback, built from the protocol's definitions alone: its
//! messages are its own (`opend_pb`, written from the futu-api SDK's `.proto` field
//! numbers), never the adapter's. It reads the 44-byte header itself (the `FT` flag,
//! proto id, format, version, serial number, body length, SHA-1 of the body), drops a
//! connection whose SHA-1 is wrong, answers with the request's proto id and serial number,
//! insists on InitConnect first and on a plaintext one, and serves in-memory accounts as
//! OpenD does: funds in the currency asked for, historical fills for real accounts only
//! (a simulated one gets OpenD's refusal), historical orders for both, history only before
//! OpenD's today and today's fills (real accounts) and orders in the today-queries,
//! K-lines within the asked window, a market's static info by security type, an
//! underlying's option expiries and chain (a window of at most 30 days, at most 10 chain
//! requests in 30 s; an option's IV and greeks left out on demand), and at most
//! 10 history queries per proto per account in 30 s. It can be
//! told to answer with a wrong SHA-1, as an encrypting OpenD, never, or with a retType
//! error for one proto id.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prost::Message;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::opend_pb as pb;
use pb::proto_id as id;

/// When each (accID, proto id) history query was answered.
type Limits = BTreeMap<(u64, u32), Vec<Instant>>;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum OpenDFailure {
    #[default]
    None,
    /// Every reply carries a SHA-1 that is not its body's.
    WrongSha1,
    /// InitConnect is answered with 128 bytes of ciphertext (an OpenD with an RSA key).
    Encrypted,
    /// Accepts and never answers.
    Silent,
    /// This proto id answers retType -1 with this message.
    RetType(u32, String),
}

/// What the fake says when a history proto is asked more than 10 times in 30 s (the
/// fake's own words: OpenD's text differs by version and language).
pub const TOO_FREQUENT: &str = "Request too frequent: at most 10 requests per 30 seconds";

#[derive(Debug, Clone, Default)]
pub struct OpenDState {
    pub accounts: Vec<pb::TrdAcc>,
    /// Funds by (accID, currency asked). A request without a currency gets the account's
    /// first entry.
    pub funds: BTreeMap<(u64, i32), pb::Funds>,
    pub positions: BTreeMap<u64, Vec<pb::Position>>,
    pub fills: BTreeMap<u64, Vec<pb::OrderFill>>,
    /// Historical orders by accID (real and simulated accounts).
    pub orders: BTreeMap<u64, Vec<pb::Order>>,
    /// Fee by order id (orderIDEx).
    pub fees: BTreeMap<String, f64>,
    /// Snapshots by (QotMarket, code). A snapshot request naming a code not here is
    /// refused whole ("Unknown stock CODE"), as OpenD refuses it; more than 400 securities,
    /// or more HK ones than `snapshot_hk_limit`, are refused too.
    pub snapshots: BTreeMap<(i32, String), pb::Snapshot>,
    /// The HK securities a snapshot request may name (20 with HK BMP quote rights);
    /// `None`: no limit past the 400.
    pub snapshot_hk_limit: Option<usize>,
    /// K-lines by (QotMarket, code), oldest first.
    pub klines: BTreeMap<(i32, String), Vec<pb::KLine>>,
    pub keep_alive_secs: i32,
    pub failure: OpenDFailure,
    /// (proto id, serial) of every request, in order.
    pub requests: Vec<(u32, u32)>,
    /// clientVer of each InitConnect.
    pub client_vers: Vec<i32>,
    /// (begin, end) of each history-fill query.
    pub fill_windows: Vec<(String, String)>,
    /// (begin, end) of each history-order query.
    pub order_windows: Vec<(String, String)>,
    /// (begin, end) of each K-line request.
    pub kline_windows: Vec<(String, String)>,
    /// Currencies the funds were asked in, in order.
    pub funds_asked: Vec<Option<i32>>,
    /// Requests whose SHA-1 did not match (the connection was dropped).
    pub bad_sha1: usize,
    /// InitConnects that did not say "no encryption".
    pub asked_encryption: usize,
    /// History queries refused for their frequency.
    pub too_frequent: usize,
    /// OpenD's today (`YYYY-MM-DD`, the exchange's date). `None`: today by the clock in
    /// the asked market's zone (UTC+8 for MY and HK, UTC-5 for US: the fake's rough
    /// reading; a test that needs the date exactly sets it).
    pub today: Option<String>,
    /// The history queries also answer today's rows (OpenD's history may reach today:
    /// the docs do not say), so a reader must count each once.
    pub history_includes_today: bool,
    /// Today's fills (2211) and today's orders (2201) asked.
    pub today_fill_queries: usize,
    pub today_order_queries: usize,
    /// Every security's static info, any market and type: `Qot_GetStaticInfo` answers
    /// those of the asked market and type (or the securities named).
    pub static_info: Vec<pb::SecurityStaticInfo>,
    /// (market, secType) of each static-info query.
    pub static_queries: Vec<(Option<i32>, Option<i32>)>,
    /// Option expiries by the underlying's (QotMarket, code): `Qot_GetOptionExpirationDate`
    /// answers them; an underlying not here is refused ("Unknown stock CODE").
    pub option_expiries: BTreeMap<(i32, String), Vec<pb::OptionExpirationDate>>,
    /// Each underlying's chain, one entry per expiry: `Qot_GetOptionChain` answers those
    /// whose strikeTime is within the asked window (at most 30 days, as OpenD allows), at
    /// most 10 requests in 30 s. The contracts' prices are their `snapshots`.
    pub option_chains: BTreeMap<(i32, String), Vec<pb::OptionChain>>,
    /// (begin, end) of each option-chain request.
    pub chain_windows: Vec<(String, String)>,
}

/// OpenD's today for an account of `trd_market`.
fn today_of(s: &OpenDState, trd_market: i32) -> String {
    if let Some(t) = &s.today {
        return t.clone();
    }
    let hours = if trd_market == pb::TRD_MARKET_US {
        -5
    } else {
        8
    };
    (chrono::Utc::now() + chrono::Duration::hours(hours))
        .format("%Y-%m-%d")
        .to_string()
}

#[derive(Debug)]
pub struct OpenDFake {
    pub port: u16,
    pub state: Arc<Mutex<OpenDState>>,
    /// When each (accID, proto id) history query was answered: OpenD's rate limit.
    limits: Arc<Mutex<Limits>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OpenDFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(s: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    s.lock().unwrap_or_else(PoisonError::into_inner)
}

impl OpenDFake {
    pub async fn start(state: OpenDState) -> OpenDFake {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("bind: {e}"));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("addr: {e}"))
            .port();
        let state = Arc::new(Mutex::new(state));
        let limits = Arc::new(Mutex::new(BTreeMap::new()));
        let (shared, counted) = (Arc::clone(&state), Arc::clone(&limits));
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&shared), Arc::clone(&counted)));
            }
        });
        OpenDFake {
            port,
            state,
            limits,
            task,
        }
    }

    pub fn fail(&self, f: OpenDFailure) {
        lock(&self.state).failure = f;
    }

    pub fn snapshot(&self) -> OpenDState {
        lock(&self.state).clone()
    }

    pub fn with_state(&self, f: impl FnOnce(&mut OpenDState)) {
        f(&mut lock(&self.state));
    }

    /// Forgets the rate limit's past (as 30 s passing would).
    pub fn reset_limits(&self) {
        lock(&self.limits).clear();
    }
}

fn reply_frame(proto_id: u32, serial: u32, body: &[u8], sha: &[u8]) -> Vec<u8> {
    // Little-endian `<1s1sI2B2I20s8s`: 'F','T', proto id, format, version, serial, length,
    // SHA-1, 8 reserved bytes.
    let mut out = Vec::with_capacity(44 + body.len());
    out.extend_from_slice(b"FT");
    out.extend_from_slice(&proto_id.to_le_bytes());
    out.push(0);
    out.push(0);
    out.extend_from_slice(&serial.to_le_bytes());
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(0).to_le_bytes());
    out.extend_from_slice(sha);
    out.extend_from_slice(&[0u8; 8]);
    out.extend_from_slice(body);
    out
}

/// A Response whose retType is 0 and whose s2c is `s2c`.
macro_rules! ok {
    ($module:ident, $s2c:expr) => {
        pb::$module::Response {
            ret_type: 0,
            ret_msg: None,
            err_code: Some(0),
            s2c: Some($s2c),
        }
        .encode_to_vec()
    };
}

/// A Response with retType -1 and OpenD's message; every proto's Response has this shape.
fn failed(msg: impl std::fmt::Display) -> Vec<u8> {
    pb::keep_alive::Response {
        ret_type: -1,
        ret_msg: Some(msg.to_string()),
        err_code: Some(1),
        s2c: None,
    }
    .encode_to_vec()
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<OpenDState>>, limits: Arc<Mutex<Limits>>) {
    let mut initialized = false;
    loop {
        let mut head = [0u8; 44];
        if stream.read_exact(&mut head).await.is_err() {
            return;
        }
        if &head[0..2] != b"FT" {
            return;
        }
        let u32_at =
            |i: usize| u32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
        let (proto_id, serial, len) = (u32_at(2), u32_at(8), u32_at(12));
        if head[6] != 0 || len > 16 * 1024 * 1024 {
            return;
        }
        let mut body = vec![0u8; len as usize];
        if stream.read_exact(&mut body).await.is_err() {
            return;
        }
        if Sha1::digest(&body).as_slice() != &head[16..36] {
            lock(&state).bad_sha1 += 1;
            return;
        }
        let failure = {
            let mut s = lock(&state);
            s.requests.push((proto_id, serial));
            s.failure.clone()
        };
        if failure == OpenDFailure::Silent {
            continue;
        }
        if !initialized && proto_id != id::INIT_CONNECT {
            // OpenD wants InitConnect first.
            return;
        }
        let answer = match failure {
            OpenDFailure::RetType(p, ref msg) if p == proto_id => failed(msg),
            OpenDFailure::Encrypted if proto_id == id::INIT_CONNECT => {
                let cipher: Vec<u8> = (0u8..128).map(|b| b.wrapping_mul(37)).collect();
                let sha = Sha1::digest(b"the plaintext nobody can see");
                let frame = reply_frame(proto_id, serial, &cipher, sha.as_slice());
                let _ = stream.write_all(&frame).await;
                continue;
            }
            _ => answer(proto_id, &body, &state, &limits, &mut initialized),
        };
        let sha = if failure == OpenDFailure::WrongSha1 {
            Sha1::digest(b"not the body").to_vec()
        } else {
            Sha1::digest(&answer).to_vec()
        };
        if stream
            .write_all(&reply_frame(proto_id, serial, &answer, &sha))
            .await
            .is_err()
        {
            return;
        }
    }
}

/// Whether a history query of `proto_id` for `acc` is over OpenD's 10 per 30 s.
fn over_limit(limits: &Mutex<Limits>, acc: u64, proto_id: u32) -> bool {
    let mut l = lock(limits);
    let seen = l.entry((acc, proto_id)).or_default();
    seen.retain(|t| t.elapsed() < Duration::from_secs(30));
    if seen.len() >= 10 {
        return true;
    }
    seen.push(Instant::now());
    false
}

/// `YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS[.mmm]` as a comparable `YYYY-MM-DD HH:MM:SS`; a
/// bare date as the start (or, for an end, the last second) of that day.
fn bound(text: &str, end: bool) -> String {
    let t = text.trim();
    if t.len() == 10 {
        format!("{t} {}", if end { "23:59:59" } else { "00:00:00" })
    } else {
        t.chars().take(19).collect()
    }
}

fn answer(
    proto_id: u32,
    body: &[u8],
    state: &Mutex<OpenDState>,
    limits: &Mutex<Limits>,
    initialized: &mut bool,
) -> Vec<u8> {
    let s = lock(state).clone();
    match proto_id {
        id::INIT_CONNECT => {
            let Ok(req) = pb::init_connect::Request::decode(body) else {
                return failed("clientVer and clientID are required");
            };
            lock(state).client_vers.push(req.c2s.client_ver);
            if req.c2s.packet_enc_algo != Some(-1) {
                lock(state).asked_encryption += 1;
            }
            *initialized = true;
            ok!(
                init_connect,
                pb::InitConnectS2c {
                    server_ver: 1006,
                    login_user_id: 77_001,
                    conn_id: 1,
                    conn_aes_key: "0123456789abcdef".to_owned(),
                    keep_alive_interval: if s.keep_alive_secs > 0 {
                        s.keep_alive_secs
                    } else {
                        10
                    },
                    aes_cb_civ: None,
                    user_attribution: Some(2),
                }
            )
        }
        id::KEEP_ALIVE => match pb::keep_alive::Request::decode(body) {
            Ok(req) => ok!(keep_alive, req.c2s),
            Err(_) => failed("time is required"),
        },
        id::TRD_GET_ACC_LIST => ok!(
            trd_get_acc_list,
            pb::GetAccListS2c {
                acc_list: s.accounts.clone()
            }
        ),
        id::TRD_GET_FUNDS => {
            let Ok(req) = pb::trd_get_funds::Request::decode(body) else {
                return failed("header is required");
            };
            let header = req.c2s.header;
            let acc = header.acc_id;
            lock(state).funds_asked.push(req.c2s.currency);
            let funds = match req.c2s.currency {
                Some(c) => s.funds.get(&(acc, c)),
                None => s
                    .funds
                    .range((acc, i32::MIN)..=(acc, i32::MAX))
                    .next()
                    .map(|(_, f)| f),
            };
            match funds {
                Some(f) => ok!(
                    trd_get_funds,
                    pb::GetFundsS2c {
                        header,
                        funds: Some(f.clone())
                    }
                ),
                None if s.funds.keys().any(|(a, _)| *a == acc) => {
                    failed("This currency is not supported by the account")
                }
                None => failed(format!("Nonexisting acc_id: {acc}")),
            }
        }
        id::TRD_GET_POSITION_LIST => {
            let Ok(req) = pb::trd_get_position_list::Request::decode(body) else {
                return failed("header is required");
            };
            let header = req.c2s.header;
            let acc = header.acc_id;
            ok!(
                trd_get_position_list,
                pb::GetPositionListS2c {
                    header,
                    position_list: s.positions.get(&acc).cloned().unwrap_or_default()
                }
            )
        }
        id::TRD_GET_HISTORY_ORDER_FILL_LIST | id::TRD_GET_HISTORY_ORDER_LIST => {
            let Ok(req) = pb::trd_get_history_order_fill_list::Request::decode(body) else {
                return failed("header and filterConditions are required");
            };
            let header = req.c2s.header;
            let filter = req.c2s.filter_conditions;
            let (Some(begin), Some(end)) = (filter.begin_time, filter.end_time) else {
                return failed("begin_time and end_time are required");
            };
            let fills = proto_id == id::TRD_GET_HISTORY_ORDER_FILL_LIST;
            if fills && header.trd_env != pb::TRD_ENV_REAL {
                return failed("Paper trading does not support this interface");
            }
            if over_limit(limits, header.acc_id, proto_id) {
                lock(state).too_frequent += 1;
                return failed(TOO_FREQUENT);
            }
            let (from, to) = (bound(&begin, false), bound(&end, true));
            let within = |t: &str| {
                let t = bound(t, false);
                t >= from && t <= to
            };
            let acc = header.acc_id;
            // History is the days before today (today's rows are in the today-queries),
            // unless told otherwise.
            let today = today_of(&s, header.trd_market);
            let within = |t: &str| within(t) && (s.history_includes_today || t < today.as_str());
            if fills {
                lock(state).fill_windows.push((begin.clone(), end.clone()));
                let mut rows: Vec<pb::OrderFill> = s
                    .fills
                    .get(&acc)
                    .into_iter()
                    .flatten()
                    .filter(|f| within(&f.create_time))
                    .cloned()
                    .collect();
                // Newest first, as OpenD answers.
                rows.sort_by(|a, b| b.create_time.cmp(&a.create_time));
                ok!(
                    trd_get_history_order_fill_list,
                    pb::HistoryFillS2c {
                        header,
                        order_fill_list: rows
                    }
                )
            } else {
                lock(state).order_windows.push((begin.clone(), end.clone()));
                let mut rows: Vec<pb::Order> = s
                    .orders
                    .get(&acc)
                    .into_iter()
                    .flatten()
                    .filter(|o| within(&o.create_time))
                    .filter(|o| {
                        req.c2s.filter_status_list.is_empty()
                            || req.c2s.filter_status_list.contains(&o.order_status)
                    })
                    .cloned()
                    .collect();
                rows.sort_by(|a, b| b.create_time.cmp(&a.create_time));
                ok!(
                    trd_get_history_order_list,
                    pb::HistoryOrderS2c {
                        header,
                        order_list: rows
                    }
                )
            }
        }
        id::TRD_GET_ORDER_FILL_LIST => {
            let Ok(req) = pb::trd_get_order_fill_list::Request::decode(body) else {
                return failed("header is required");
            };
            let header = req.c2s.header;
            if header.trd_env != pb::TRD_ENV_REAL {
                return failed("Paper trading does not support this interface");
            }
            lock(state).today_fill_queries += 1;
            let today = today_of(&s, header.trd_market);
            let mut rows: Vec<pb::OrderFill> = s
                .fills
                .get(&header.acc_id)
                .into_iter()
                .flatten()
                .filter(|f| f.create_time.starts_with(&today))
                .cloned()
                .collect();
            rows.sort_by(|a, b| b.create_time.cmp(&a.create_time));
            ok!(
                trd_get_order_fill_list,
                pb::HistoryFillS2c {
                    header,
                    order_fill_list: rows
                }
            )
        }
        id::TRD_GET_ORDER_LIST => {
            let Ok(req) = pb::trd_get_order_list::Request::decode(body) else {
                return failed("header is required");
            };
            let header = req.c2s.header;
            lock(state).today_order_queries += 1;
            let today = today_of(&s, header.trd_market);
            let mut rows: Vec<pb::Order> = s
                .orders
                .get(&header.acc_id)
                .into_iter()
                .flatten()
                .filter(|o| o.create_time.starts_with(&today))
                .filter(|o| {
                    req.c2s.filter_status_list.is_empty()
                        || req.c2s.filter_status_list.contains(&o.order_status)
                })
                .cloned()
                .collect();
            rows.sort_by(|a, b| b.create_time.cmp(&a.create_time));
            ok!(
                trd_get_order_list,
                pb::HistoryOrderS2c {
                    header,
                    order_list: rows
                }
            )
        }
        id::TRD_GET_ORDER_FEE => {
            let Ok(req) = pb::trd_get_order_fee::Request::decode(body) else {
                return failed("header is required");
            };
            let c2s = req.c2s;
            if c2s.order_id_ex_list.len() > 400 {
                return failed("at most 400 orders per request");
            }
            if over_limit(limits, c2s.header.acc_id, proto_id) {
                lock(state).too_frequent += 1;
                return failed(TOO_FREQUENT);
            }
            let list = c2s
                .order_id_ex_list
                .iter()
                .filter_map(|oid| {
                    s.fees.get(oid).map(|fee| pb::OrderFee {
                        order_id_ex: oid.clone(),
                        fee_amount: Some(*fee),
                        fee_list: vec![pb::OrderFeeItem {
                            title: Some("Commission".to_owned()),
                            value: Some(*fee),
                        }],
                    })
                })
                .collect();
            ok!(
                trd_get_order_fee,
                pb::GetOrderFeeS2c {
                    header: c2s.header,
                    order_fee_list: list
                }
            )
        }
        id::QOT_GET_SECURITY_SNAPSHOT => {
            let Ok(req) = pb::qot_get_security_snapshot::Request::decode(body) else {
                return failed("securityList is required");
            };
            let securities = &req.c2s.security_list;
            if securities.len() > 400 {
                return failed("Too many securities: at most 400 per request");
            }
            let hk = securities
                .iter()
                .filter(|s| s.market == pb::QOT_MARKET_HK)
                .count();
            if let Some(limit) = s.snapshot_hk_limit
                && hk > limit
            {
                return failed(format!(
                    "Too many HK securities: at most {limit} per request with BMP quote rights"
                ));
            }
            let mut list = Vec::new();
            for sec in req.c2s.security_list {
                match s.snapshots.get(&(sec.market, sec.code.clone())) {
                    Some(snap) => list.push(snap.clone()),
                    None => return failed(format!("Unknown stock {}", sec.code)),
                }
            }
            ok!(
                qot_get_security_snapshot,
                pb::GetSecuritySnapshotS2c {
                    snapshot_list: list
                }
            )
        }
        id::QOT_REQUEST_HISTORY_KL => {
            let Ok(req) = pb::qot_request_history_kl::Request::decode(body) else {
                return failed("rehabType, klType, security, beginTime and endTime are required");
            };
            let c2s = req.c2s;
            let sec = c2s.security.clone();
            let Some(lines) = s.klines.get(&(sec.market, sec.code.clone())) else {
                return failed(format!("Unknown stock {}", sec.code));
            };
            lock(state)
                .kline_windows
                .push((c2s.begin_time.clone(), c2s.end_time.clone()));
            let (from, to) = (bound(&c2s.begin_time, false), bound(&c2s.end_time, true));
            let within: Vec<&pb::KLine> = lines
                .iter()
                .filter(|k| {
                    let t = bound(&k.time, false);
                    t >= from && t <= to
                })
                .collect();
            // Two lines a page, to exercise the paging key.
            let start: usize = c2s
                .next_req_key
                .as_deref()
                .and_then(|k| std::str::from_utf8(k).ok())
                .and_then(|k| k.parse().ok())
                .unwrap_or(0);
            let page: Vec<pb::KLine> = within
                .iter()
                .skip(start)
                .take(2)
                .map(|k| (*k).clone())
                .collect();
            let next = (start + 2 < within.len()).then(|| (start + 2).to_string().into_bytes());
            ok!(
                qot_request_history_kl,
                pb::RequestHistoryKlS2c {
                    security: sec,
                    name: None,
                    kl_list: page,
                    next_req_key: next,
                }
            )
        }
        pb::QOT_GET_STATIC_INFO => static_info(body, &s, state),
        pb::QOT_GET_OPTION_EXPIRATION_DATE => {
            let Ok(req) = pb::qot_get_option_expiration_date::Request::decode(body) else {
                return failed("owner is required");
            };
            let owner = req.c2s.owner;
            match s.option_expiries.get(&(owner.market, owner.code.clone())) {
                Some(dates) => ok!(
                    qot_get_option_expiration_date,
                    pb::GetOptionExpirationDateS2c {
                        date_list: dates.clone()
                    }
                ),
                None => failed(format!("Unknown stock {}", owner.code)),
            }
        }
        pb::QOT_GET_OPTION_CHAIN => option_chain(body, &s, state, limits),
        _ => failed(format!("unknown proto {proto_id}")),
    }
}

/// `Qot_GetOptionChain`: the underlying's expiries within [beginTime, endTime], a window
/// of at most 30 days, at most 10 requests in 30 s.
fn option_chain(
    body: &[u8],
    s: &OpenDState,
    state: &Mutex<OpenDState>,
    limits: &Mutex<Limits>,
) -> Vec<u8> {
    let Ok(req) = pb::qot_get_option_chain::Request::decode(body) else {
        return failed("owner, beginTime and endTime are required");
    };
    let c2s = req.c2s;
    lock(state)
        .chain_windows
        .push((c2s.begin_time.clone(), c2s.end_time.clone()));
    let day = |t: &str| chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d").ok();
    let (Some(begin), Some(end)) = (day(&c2s.begin_time), day(&c2s.end_time)) else {
        return failed("beginTime and endTime must be yyyy-MM-dd");
    };
    if end < begin || (end - begin).num_days() > 30 {
        return failed("The time span between beginTime and endTime may be at most 30 days");
    }
    if over_limit(limits, 0, pb::QOT_GET_OPTION_CHAIN) {
        lock(state).too_frequent += 1;
        return failed(TOO_FREQUENT);
    }
    let owner = c2s.owner;
    let Some(chains) = s.option_chains.get(&(owner.market, owner.code.clone())) else {
        return failed(format!("Unknown stock {}", owner.code));
    };
    let within: Vec<pb::OptionChain> = chains
        .iter()
        .filter(|c| day(&c.strike_time).is_some_and(|d| d >= begin && d <= end))
        .cloned()
        .collect();
    ok!(
        qot_get_option_chain,
        pb::GetOptionChainS2c {
            option_chain: within
        }
    )
}

/// `Qot_GetStaticInfo`: the securities named (an unknown one refused), else the market's
/// of the type asked; both market and type are needed without a list (the SDK's
/// `get_stock_basicinfo` refuses a call without them).
fn static_info(body: &[u8], s: &OpenDState, state: &Mutex<OpenDState>) -> Vec<u8> {
    let Ok(req) = pb::qot_get_static_info::Request::decode(body) else {
        return failed("c2s is required");
    };
    let c2s = req.c2s;
    lock(state).static_queries.push((c2s.market, c2s.sec_type));
    let rows: Vec<pb::SecurityStaticInfo> = if c2s.security_list.is_empty() {
        let (Some(market), Some(sec_type)) = (c2s.market, c2s.sec_type) else {
            return failed("market and secType are required without securityList");
        };
        s.static_info
            .iter()
            .filter(|i| i.basic.security.market == market && i.basic.sec_type == sec_type)
            .cloned()
            .collect()
    } else {
        let mut out = Vec::new();
        for sec in &c2s.security_list {
            match s.static_info.iter().find(|i| &i.basic.security == sec) {
                Some(i) => out.push(i.clone()),
                None => return failed(format!("Unknown stock {}", sec.code)),
            }
        }
        out
    };
    ok!(
        qot_get_static_info,
        pb::GetStaticInfoS2c {
            static_info_list: rows
        }
    )
}

/// Builders for the fake's replies, every required field set as OpenD sets it.
pub mod build {
    use super::pb;

    /// The live Bursa account (card 1001) most OpenD tests serve as `MOOMOO-MY`.
    pub fn my_account() -> pb::TrdAcc {
        account(pb::TRD_ENV_REAL, 281_234, pb::TRD_MARKET_MY, "1001")
    }

    pub fn account(trd_env: i32, acc_id: u64, market: i32, card: &str) -> pb::TrdAcc {
        pb::TrdAcc {
            trd_env,
            acc_id,
            trd_market_auth_list: vec![market],
            acc_type: Some(1),
            card_num: Some(card.to_owned()),
            security_firm: Some(6),
            sim_acc_type: (trd_env == pb::TRD_ENV_SIMULATE).then_some(1),
            uni_card_num: None,
            acc_status: Some(0),
        }
    }

    /// Funds as asked in `currency`: `cash` is all the account's cash in that currency,
    /// `cash_info` each currency's own balance.
    pub fn funds(currency: i32, cash: f64, market_val: f64, cash_info: &[(i32, f64)]) -> pb::Funds {
        pb::Funds {
            power: cash,
            total_assets: cash + market_val,
            cash,
            market_val,
            frozen_cash: 0.0,
            debt_cash: 0.0,
            avl_withdrawal_cash: cash,
            currency: Some(currency),
            maintenance_margin: None,
            cash_info_list: cash_info
                .iter()
                .map(|(c, v)| pb::AccCashInfo {
                    currency: Some(*c),
                    cash: Some(*v),
                    available_balance: Some(*v),
                    net_cash_power: Some(*v),
                })
                .collect(),
            net_cash_power: Some(cash),
            securities_assets: Some(cash + market_val),
            market_info_list: Vec::new(),
        }
    }

    /// A long position; `market` is (TrdSecMarket, Currency, TrdMarket).
    pub fn position(code: &str, market: (i32, i32, i32), qty: f64, price: f64) -> pb::Position {
        pb::Position {
            position_id: 1,
            position_side: 0,
            code: code.to_owned(),
            name: format!("Name of {code}"),
            qty,
            can_sell_qty: qty,
            price,
            cost_price: None,
            val: qty * price,
            pl_val: 0.0,
            pl_ratio: None,
            sec_market: Some(market.0),
            currency: Some(market.1),
            trd_market: Some(market.2),
            diluted_cost_price: None,
            average_cost_price: None,
        }
    }

    pub const MY: (i32, i32, i32) = (pb::SEC_MARKET_MY, pb::CURRENCY_MYR, pb::TRD_MARKET_MY);
    pub const US: (i32, i32, i32) = (pb::SEC_MARKET_US, pb::CURRENCY_USD, pb::TRD_MARKET_US);

    /// A fill of order `order`; `at` in the exchange's wall clock.
    #[allow(clippy::too_many_arguments)]
    pub fn fill(
        id: u64,
        order: &str,
        code: &str,
        market: (i32, i32, i32),
        side: i32,
        qty: f64,
        price: f64,
        at: &str,
    ) -> pb::OrderFill {
        pb::OrderFill {
            trd_side: side,
            fill_id: id,
            fill_id_ex: format!("F{id}"),
            order_id: Some(id * 10),
            order_id_ex: Some(order.to_owned()),
            code: code.to_owned(),
            name: format!("Name of {code}"),
            qty,
            price,
            create_time: at.to_owned(),
            counter_broker_id: None,
            counter_broker_name: None,
            sec_market: Some(market.0),
            create_timestamp: None,
            update_timestamp: None,
            status: Some(0),
            trd_market: Some(market.2),
        }
    }

    /// A stock's snapshot.
    pub fn snapshot(qot_market: i32, code: &str, bid: f64, ask: f64) -> pb::Snapshot {
        pb::Snapshot {
            basic: pb::SnapshotBasicData {
                security: pb::Security {
                    market: qot_market,
                    code: code.to_owned(),
                },
                name: Some(format!("Name of {code}")),
                r#type: 3,
                is_suspend: false,
                list_time: "1990-01-01".to_owned(),
                lot_size: 100,
                price_spread: 0.01,
                update_time: "2026-11-30 16:50:00".to_owned(),
                high_price: ask,
                open_price: bid,
                low_price: bid,
                last_close_price: bid,
                cur_price: ask,
                volume: 1_000_000,
                turnover: 0.0,
                turnover_rate: 0.0,
                update_timestamp: Some(1_796_028_600.0),
                ask_price: Some(ask),
                bid_price: Some(bid),
            },
            option_ex_data: None,
        }
    }

    /// A security's static info as OpenD sends it (every required field set).
    pub fn static_info(
        qot_market: i32,
        code: &str,
        name: &str,
        sec_type: i32,
        lot_size: i32,
        exch_type: i32,
    ) -> pb::SecurityStaticInfo {
        pb::SecurityStaticInfo {
            basic: pb::SecurityStaticBasic {
                security: pb::Security {
                    market: qot_market,
                    code: code.to_owned(),
                },
                id: code
                    .bytes()
                    .fold(7_i64, |h, b| h.wrapping_mul(31).wrapping_add(i64::from(b))),
                lot_size,
                sec_type,
                name: name.to_owned(),
                list_time: "2000-01-03".to_owned(),
                delisting: Some(false),
                list_timestamp: Some(946_857_600.0),
                exch_type: Some(exch_type),
            },
            warrant_ex_data: None,
            option_ex_data: None,
            future_ex_data: None,
        }
    }

    /// An option's static row as `Qot_GetOptionChain` lists it: `code` of `owner`,
    /// `right` OPTION_TYPE_CALL or _PUT, its contract multiplier as the lot size.
    pub fn option(
        owner: &pb::Security,
        code: &str,
        right: i32,
        strike: f64,
        expiry: &str,
        multiplier: i32,
    ) -> pb::SecurityStaticInfo {
        let mut info = static_info(
            owner.market,
            code,
            &format!(
                "{} {expiry} {strike} {}",
                owner.code,
                if right == pb::OPTION_TYPE_CALL {
                    "Call"
                } else {
                    "Put"
                }
            ),
            pb::SECURITY_TYPE_DRVT,
            multiplier,
            0,
        );
        info.basic.exch_type = None;
        info.option_ex_data = Some(pb::OptionStaticExData {
            r#type: right,
            owner: owner.clone(),
            strike_time: expiry.to_owned(),
            strike_price: strike,
            suspend: false,
            market: if owner.market == pb::QOT_MARKET_HK {
                "HK"
            } else {
                "US"
            }
            .to_owned(),
            strike_timestamp: None,
        });
        info
    }

    /// An option's snapshot: its quote, the day's volume, and OpenD's option data (IV a
    /// percentage; greeks delta, gamma, vega, theta, rho, or none sent).
    #[allow(clippy::too_many_arguments)]
    pub fn option_snapshot(
        owner: &pb::Security,
        code: &str,
        right: i32,
        strike: f64,
        expiry: &str,
        quote: (f64, f64, f64),
        volume: i64,
        open_interest: i32,
        iv_percent: Option<f64>,
        greeks: Option<[f64; 5]>,
        contract_size: i32,
    ) -> pb::Snapshot {
        let (bid, ask, last) = quote;
        let mut snap = snapshot(owner.market, code, bid, ask);
        snap.basic.r#type = pb::SECURITY_TYPE_DRVT;
        snap.basic.cur_price = last;
        snap.basic.volume = volume;
        snap.basic.lot_size = contract_size;
        let g = |i: usize| greeks.map(|g| g[i]);
        snap.option_ex_data = Some(pb::OptionSnapshotExData {
            r#type: right,
            owner: owner.clone(),
            strike_time: expiry.to_owned(),
            strike_price: strike,
            contract_size,
            open_interest,
            implied_volatility: iv_percent,
            premium: Some(1.5),
            delta: g(0),
            gamma: g(1),
            vega: g(2),
            theta: g(3),
            rho: g(4),
            strike_timestamp: None,
            expiry_date_distance: None,
            contract_multiplier: None,
            contract_size_float: Some(f64::from(contract_size)),
        });
        snap
    }

    /// A daily K-line stamped `date 00:00:00`, as OpenD stamps day lines.
    pub fn day_line(date: &str, close: f64) -> pb::KLine {
        pb::KLine {
            time: format!("{date} 00:00:00"),
            is_blank: false,
            high_price: Some(close + 0.2),
            open_price: Some(close - 0.1),
            low_price: Some(close - 0.2),
            close_price: Some(close),
            last_close_price: Some(close - 0.1),
            volume: Some(1_000),
            turnover: None,
            timestamp: None,
        }
    }
}
