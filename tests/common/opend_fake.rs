//! A fake moomoo / Futu OpenD on loopback: it reads the 44-byte header itself (the `FT`
//! flag, proto id, serial number, body length, SHA-1 of the body), drops a connection
//! whose SHA-1 is wrong, answers with the request's proto id and serial number, insists
//! on InitConnect first and on a plaintext one, and serves in-memory accounts. It can be
//! told to answer with a wrong SHA-1, as an encrypting OpenD, never, or with a retType
//! error for one proto id.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use prost::Message;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tradedesk_brokers::futu::proto;

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

#[derive(Debug, Clone, Default)]
pub struct OpenDState {
    pub accounts: Vec<proto::TrdAcc>,
    pub funds: BTreeMap<u64, proto::Funds>,
    pub positions: BTreeMap<u64, Vec<proto::Position>>,
    pub fills: BTreeMap<u64, Vec<proto::OrderFill>>,
    /// Fee by order id (orderIDEx).
    pub fees: BTreeMap<String, f64>,
    /// Snapshots by (QotMarket, code).
    pub snapshots: BTreeMap<(i32, String), proto::SnapshotBasicData>,
    /// K-lines by (QotMarket, code).
    pub klines: BTreeMap<(i32, String), Vec<proto::KLine>>,
    pub keep_alive_secs: i32,
    pub failure: OpenDFailure,
    /// (proto id, serial) of every request, in order.
    pub requests: Vec<(u32, u32)>,
    /// (begin, end) of each history-fill query.
    pub fill_windows: Vec<(String, String)>,
    /// Requests whose SHA-1 did not match (the connection was dropped).
    pub bad_sha1: usize,
    /// InitConnects that did not say "no encryption".
    pub asked_encryption: usize,
}

#[derive(Debug)]
pub struct OpenDFake {
    pub port: u16,
    pub state: Arc<Mutex<OpenDState>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for OpenDFake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(s: &Mutex<OpenDState>) -> std::sync::MutexGuard<'_, OpenDState> {
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
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, Arc::clone(&shared)));
            }
        });
        OpenDFake { port, state, task }
    }

    pub fn fail(&self, f: OpenDFailure) {
        lock(&self.state).failure = f;
    }

    pub fn snapshot(&self) -> OpenDState {
        lock(&self.state).clone()
    }
}

fn reply_frame(proto_id: u32, serial: u32, body: &[u8], sha: &[u8]) -> Vec<u8> {
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

macro_rules! ok {
    ($resp:ident, $s2c:expr) => {
        proto::$resp {
            ret_type: Some(0),
            ret_msg: None,
            err_code: Some(0),
            s2c: Some($s2c),
        }
        .encode_to_vec()
    };
}

macro_rules! failed {
    ($resp:ident, $msg:expr) => {
        proto::$resp {
            ret_type: Some(-1),
            ret_msg: Some($msg.to_string()),
            err_code: Some(1),
            s2c: None,
        }
        .encode_to_vec()
    };
}

async fn serve(mut stream: TcpStream, state: Arc<Mutex<OpenDState>>) {
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
        if !initialized && proto_id != proto::id::INIT_CONNECT {
            // OpenD wants InitConnect first.
            return;
        }
        let answer = match failure {
            OpenDFailure::RetType(id, ref msg) if id == proto_id => {
                failed!(KeepAliveResponse, msg)
            }
            OpenDFailure::Encrypted if proto_id == proto::id::INIT_CONNECT => {
                let cipher: Vec<u8> = (0u8..128).map(|b| b.wrapping_mul(37)).collect();
                let sha = Sha1::digest(b"the plaintext nobody can see");
                let frame = reply_frame(proto_id, serial, &cipher, sha.as_slice());
                let _ = stream.write_all(&frame).await;
                continue;
            }
            _ => answer(proto_id, &body, &state, &mut initialized),
        };
        let Some(answer) = answer_or(answer) else {
            return;
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

fn answer_or(v: Vec<u8>) -> Option<Vec<u8>> {
    Some(v)
}

fn answer(
    proto_id: u32,
    body: &[u8],
    state: &Mutex<OpenDState>,
    initialized: &mut bool,
) -> Vec<u8> {
    let s = lock(state).clone();
    match proto_id {
        proto::id::INIT_CONNECT => {
            let req = proto::InitConnectRequest::decode(body).unwrap_or_default();
            let c2s = req.c2s.unwrap_or_default();
            if c2s.client_ver.is_none() || c2s.client_id.is_none() {
                return failed!(InitConnectResponse, "clientVer and clientID are required");
            }
            if c2s.packet_enc_algo != Some(-1) {
                lock(state).asked_encryption += 1;
            }
            *initialized = true;
            ok!(
                InitConnectResponse,
                proto::InitConnectS2c {
                    server_ver: Some(1006),
                    login_user_id: Some(77_001),
                    conn_id: Some(1),
                    conn_aes_key: Some("0123456789abcdef".to_owned()),
                    keep_alive_interval: Some(if s.keep_alive_secs > 0 {
                        s.keep_alive_secs
                    } else {
                        10
                    }),
                    aes_cbc_iv: None,
                    user_attribution: Some(2),
                }
            )
        }
        proto::id::KEEP_ALIVE => {
            let req = proto::KeepAliveRequest::decode(body).unwrap_or_default();
            ok!(
                KeepAliveResponse,
                proto::KeepAliveS2c {
                    time: req.c2s.and_then(|c| c.time)
                }
            )
        }
        proto::id::GET_ACC_LIST => ok!(
            GetAccListResponse,
            proto::GetAccListS2c {
                acc_list: s.accounts.clone()
            }
        ),
        proto::id::GET_FUNDS => {
            let req = proto::GetFundsRequest::decode(body).unwrap_or_default();
            let Some(header) = req.c2s.and_then(|c| c.header) else {
                return failed!(GetFundsResponse, "header is required");
            };
            let acc = header.acc_id.unwrap_or(0);
            match s.funds.get(&acc) {
                Some(f) => ok!(
                    GetFundsResponse,
                    proto::GetFundsS2c {
                        header: Some(header),
                        funds: Some(f.clone())
                    }
                ),
                None => failed!(GetFundsResponse, format!("Nonexisting acc_id: {acc}")),
            }
        }
        proto::id::GET_POSITION_LIST => {
            let req = proto::GetPositionListRequest::decode(body).unwrap_or_default();
            let header = req.c2s.and_then(|c| c.header).unwrap_or_default();
            let acc = header.acc_id.unwrap_or(0);
            ok!(
                GetPositionListResponse,
                proto::GetPositionListS2c {
                    header: Some(header),
                    position_list: s.positions.get(&acc).cloned().unwrap_or_default()
                }
            )
        }
        proto::id::GET_HISTORY_ORDER_FILL_LIST => {
            let req = proto::GetHistoryOrderFillListRequest::decode(body).unwrap_or_default();
            let c2s = req.c2s.unwrap_or_default();
            let header = c2s.header.unwrap_or_default();
            let filter = c2s.filter_conditions.unwrap_or_default();
            let (Some(begin), Some(end)) = (filter.begin_time, filter.end_time) else {
                return failed!(
                    GetHistoryOrderFillListResponse,
                    "begin_time and end_time are required"
                );
            };
            if header.trd_env != Some(proto::trd_env::REAL) {
                return failed!(
                    GetHistoryOrderFillListResponse,
                    "Paper trading does not support this interface"
                );
            }
            lock(state).fill_windows.push((begin.clone(), end.clone()));
            let acc = header.acc_id.unwrap_or(0);
            let mut rows: Vec<proto::OrderFill> = s
                .fills
                .get(&acc)
                .into_iter()
                .flatten()
                .filter(|f| {
                    let t = f.create_time.clone().unwrap_or_default();
                    t.as_str() >= begin.as_str() && t.as_str() <= end.as_str()
                })
                .cloned()
                .collect();
            // Newest first, as OpenD answers.
            rows.sort_by(|a, b| b.create_time.cmp(&a.create_time));
            ok!(
                GetHistoryOrderFillListResponse,
                proto::GetHistoryOrderFillListS2c {
                    header: Some(header),
                    order_fill_list: rows
                }
            )
        }
        proto::id::GET_ORDER_FEE => {
            let req = proto::GetOrderFeeRequest::decode(body).unwrap_or_default();
            let c2s = req.c2s.unwrap_or_default();
            if c2s.order_id_ex_list.len() > 400 {
                return failed!(GetOrderFeeResponse, "at most 400 orders per request");
            }
            let list = c2s
                .order_id_ex_list
                .iter()
                .filter_map(|id| {
                    s.fees.get(id).map(|fee| proto::OrderFee {
                        order_id_ex: Some(id.clone()),
                        fee_amount: Some(*fee),
                        fee_list: vec![proto::OrderFeeItem {
                            title: Some("Commission".to_owned()),
                            value: Some(*fee),
                        }],
                    })
                })
                .collect();
            ok!(
                GetOrderFeeResponse,
                proto::GetOrderFeeS2c {
                    header: c2s.header,
                    order_fee_list: list
                }
            )
        }
        proto::id::GET_SECURITY_SNAPSHOT => {
            let req = proto::GetSecuritySnapshotRequest::decode(body).unwrap_or_default();
            let mut list = Vec::new();
            for sec in req.c2s.unwrap_or_default().security_list {
                let key = (
                    sec.market.unwrap_or(0),
                    sec.code.clone().unwrap_or_default(),
                );
                match s.snapshots.get(&key) {
                    Some(b) => list.push(proto::Snapshot {
                        basic: Some(b.clone()),
                        option_ex_data: None,
                    }),
                    None => {
                        return failed!(
                            GetSecuritySnapshotResponse,
                            format!("Unknown stock {}", key.1)
                        );
                    }
                }
            }
            ok!(
                GetSecuritySnapshotResponse,
                proto::GetSecuritySnapshotS2c {
                    snapshot_list: list
                }
            )
        }
        proto::id::REQUEST_HISTORY_KL => {
            let req = proto::RequestHistoryKlRequest::decode(body).unwrap_or_default();
            let c2s = req.c2s.unwrap_or_default();
            let sec = c2s.security.clone().unwrap_or_default();
            let key = (
                sec.market.unwrap_or(0),
                sec.code.clone().unwrap_or_default(),
            );
            let Some(lines) = s.klines.get(&key) else {
                return failed!(RequestHistoryKlResponse, format!("Unknown stock {}", key.1));
            };
            // Two lines a page, to exercise the paging key.
            let from: usize = c2s
                .next_req_key
                .as_deref()
                .and_then(|k| std::str::from_utf8(k).ok())
                .and_then(|k| k.parse().ok())
                .unwrap_or(0);
            let page: Vec<proto::KLine> = lines.iter().skip(from).take(2).cloned().collect();
            let next = (from + 2 < lines.len()).then(|| (from + 2).to_string().into_bytes());
            ok!(
                RequestHistoryKlResponse,
                proto::RequestHistoryKlS2c {
                    security: Some(sec),
                    kl_list: page,
                    next_req_key: next,
                    name: None
                }
            )
        }
        _ => failed!(KeepAliveResponse, format!("unknown proto {proto_id}")),
    }
}
