//! The OpenD protobuf messages tradedesk uses, written by hand from the protocol's field
//! numbers (proto2: every field optional on the wire; what OpenD requires is set when
//! sending). The test fake has its own definitions, written separately from the same
//! protocol, so a wrong field number here shows.

#![allow(missing_docs)]

/// Proto ids.
pub mod id {
    pub const INIT_CONNECT: u32 = 1001;
    pub const KEEP_ALIVE: u32 = 1004;
    pub const GET_ACC_LIST: u32 = 2001;
    pub const GET_FUNDS: u32 = 2101;
    pub const GET_POSITION_LIST: u32 = 2102;
    /// Today's orders (Trd_GetOrderList).
    pub const GET_ORDER_LIST: u32 = 2201;
    /// Today's fills (Trd_GetOrderFillList).
    pub const GET_ORDER_FILL_LIST: u32 = 2211;
    pub const GET_HISTORY_ORDER_LIST: u32 = 2221;
    pub const GET_HISTORY_ORDER_FILL_LIST: u32 = 2222;
    pub const GET_ORDER_FEE: u32 = 2225;
    pub const REQUEST_HISTORY_KL: u32 = 3103;
    pub const GET_SECURITY_SNAPSHOT: u32 = 3203;
    /// Pushes OpenD may send unasked: skipped while waiting for a reply.
    pub const PUSHES: &[u32] = &[1003, 2208, 2218, 3005, 3007, 3009, 3011, 3013, 3015, 3019];
}

/// `TrdMarket`.
pub mod trd_market {
    pub const HK: i32 = 1;
    pub const US: i32 = 2;
    pub const MY: i32 = 111;
}

/// `TrdSecMarket`.
pub mod sec_market {
    pub const HK: i32 = 1;
    pub const US: i32 = 2;
    pub const CN_SH: i32 = 31;
    pub const CN_SZ: i32 = 32;
    pub const SG: i32 = 41;
    pub const JP: i32 = 51;
    pub const AU: i32 = 61;
    pub const MY: i32 = 71;
}

/// `QotMarket`.
pub mod qot_market {
    pub const HK: i32 = 1;
    pub const US: i32 = 11;
    pub const MY: i32 = 61;
}

/// `Currency`.
pub mod currency {
    pub const HKD: i32 = 1;
    pub const USD: i32 = 2;
    pub const CNH: i32 = 3;
    pub const JPY: i32 = 4;
    pub const SGD: i32 = 5;
    pub const AUD: i32 = 6;
    pub const CAD: i32 = 7;
    pub const MYR: i32 = 8;
}

/// `TrdEnv`.
pub mod trd_env {
    pub const SIMULATE: i32 = 0;
    pub const REAL: i32 = 1;
}

/// `RetType`: 0 is success.
pub const RET_SUCCEED: i32 = 0;

/// A request and its reply wrapper for one C2S / S2C pair: `Request { c2s = 1 }` and
/// `Response { retType = 1, retMsg = 2, errCode = 3, s2c = 4 }`.
macro_rules! wrappers {
    ($req:ident, $resp:ident, $c2s:ty, $s2c:ty) => {
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct $req {
            #[prost(message, optional, tag = "1")]
            pub c2s: Option<$c2s>,
        }

        #[derive(Clone, PartialEq, prost::Message)]
        pub struct $resp {
            #[prost(int32, optional, tag = "1")]
            pub ret_type: Option<i32>,
            #[prost(string, optional, tag = "2")]
            pub ret_msg: Option<String>,
            #[prost(int32, optional, tag = "3")]
            pub err_code: Option<i32>,
            #[prost(message, optional, tag = "4")]
            pub s2c: Option<$s2c>,
        }
    };
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InitConnectC2s {
    #[prost(int32, optional, tag = "1")]
    pub client_ver: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub client_id: Option<String>,
    #[prost(bool, optional, tag = "3")]
    pub recv_notify: Option<bool>,
    /// -1: no encryption (must be said: absent means OpenD's default, FTAES_ECB, when it
    /// has an RSA key).
    #[prost(int32, optional, tag = "4")]
    pub packet_enc_algo: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub push_proto_fmt: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub programming_language: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InitConnectS2c {
    #[prost(int32, optional, tag = "1")]
    pub server_ver: Option<i32>,
    #[prost(uint64, optional, tag = "2")]
    pub login_user_id: Option<u64>,
    #[prost(uint64, optional, tag = "3")]
    pub conn_id: Option<u64>,
    #[prost(string, optional, tag = "4")]
    pub conn_aes_key: Option<String>,
    /// Seconds.
    #[prost(int32, optional, tag = "5")]
    pub keep_alive_interval: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub aes_cbc_iv: Option<String>,
    #[prost(int32, optional, tag = "7")]
    pub user_attribution: Option<i32>,
}
wrappers!(
    InitConnectRequest,
    InitConnectResponse,
    InitConnectC2s,
    InitConnectS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveC2s {
    #[prost(int64, optional, tag = "1")]
    pub time: Option<i64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveS2c {
    #[prost(int64, optional, tag = "1")]
    pub time: Option<i64>,
}
wrappers!(
    KeepAliveRequest,
    KeepAliveResponse,
    KeepAliveC2s,
    KeepAliveS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrdHeader {
    #[prost(int32, optional, tag = "1")]
    pub trd_env: Option<i32>,
    #[prost(uint64, optional, tag = "2")]
    pub acc_id: Option<u64>,
    #[prost(int32, optional, tag = "3")]
    pub trd_market: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrdAcc {
    #[prost(int32, optional, tag = "1")]
    pub trd_env: Option<i32>,
    #[prost(uint64, optional, tag = "2")]
    pub acc_id: Option<u64>,
    #[prost(int32, repeated, packed = "false", tag = "3")]
    pub trd_market_auth_list: Vec<i32>,
    #[prost(int32, optional, tag = "4")]
    pub acc_type: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub card_num: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub security_firm: Option<i32>,
    #[prost(int32, optional, tag = "9")]
    pub acc_status: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetAccListC2s {
    #[prost(uint64, optional, tag = "1")]
    pub user_id: Option<u64>,
    #[prost(int32, optional, tag = "2")]
    pub trd_category: Option<i32>,
    #[prost(bool, optional, tag = "3")]
    pub need_general_sec_account: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetAccListS2c {
    #[prost(message, repeated, tag = "1")]
    pub acc_list: Vec<TrdAcc>,
}
wrappers!(
    GetAccListRequest,
    GetAccListResponse,
    GetAccListC2s,
    GetAccListS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct AccCashInfo {
    #[prost(int32, optional, tag = "1")]
    pub currency: Option<i32>,
    #[prost(double, optional, tag = "2")]
    pub cash: Option<f64>,
    #[prost(double, optional, tag = "3")]
    pub available_balance: Option<f64>,
    #[prost(double, optional, tag = "4")]
    pub net_cash_power: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Funds {
    #[prost(double, optional, tag = "1")]
    pub power: Option<f64>,
    #[prost(double, optional, tag = "2")]
    pub total_assets: Option<f64>,
    #[prost(double, optional, tag = "3")]
    pub cash: Option<f64>,
    #[prost(double, optional, tag = "4")]
    pub market_val: Option<f64>,
    #[prost(double, optional, tag = "5")]
    pub frozen_cash: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub debt_cash: Option<f64>,
    #[prost(double, optional, tag = "7")]
    pub avl_withdrawal_cash: Option<f64>,
    #[prost(int32, optional, tag = "8")]
    pub currency: Option<i32>,
    #[prost(double, optional, tag = "14")]
    pub maintenance_margin: Option<f64>,
    #[prost(message, repeated, tag = "15")]
    pub cash_info_list: Vec<AccCashInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetFundsC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(bool, optional, tag = "2")]
    pub refresh_cache: Option<bool>,
    #[prost(int32, optional, tag = "3")]
    pub currency: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetFundsS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, optional, tag = "2")]
    pub funds: Option<Funds>,
}
wrappers!(GetFundsRequest, GetFundsResponse, GetFundsC2s, GetFundsS2c);

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrdFilterConditions {
    #[prost(string, repeated, tag = "1")]
    pub code_list: Vec<String>,
    #[prost(uint64, repeated, packed = "false", tag = "2")]
    pub id_list: Vec<u64>,
    #[prost(string, optional, tag = "3")]
    pub begin_time: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub end_time: Option<String>,
    #[prost(string, repeated, tag = "5")]
    pub order_id_ex_list: Vec<String>,
    #[prost(int32, optional, tag = "6")]
    pub filter_market: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Position {
    #[prost(uint64, optional, tag = "1")]
    pub position_id: Option<u64>,
    /// 0 long, 1 short.
    #[prost(int32, optional, tag = "2")]
    pub position_side: Option<i32>,
    #[prost(string, optional, tag = "3")]
    pub code: Option<String>,
    #[prost(string, optional, tag = "4")]
    pub name: Option<String>,
    #[prost(double, optional, tag = "5")]
    pub qty: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub can_sell_qty: Option<f64>,
    #[prost(double, optional, tag = "7")]
    pub price: Option<f64>,
    #[prost(double, optional, tag = "9")]
    pub val: Option<f64>,
    #[prost(double, optional, tag = "10")]
    pub pl_val: Option<f64>,
    #[prost(int32, optional, tag = "12")]
    pub sec_market: Option<i32>,
    #[prost(int32, optional, tag = "30")]
    pub currency: Option<i32>,
    #[prost(int32, optional, tag = "31")]
    pub trd_market: Option<i32>,
    #[prost(double, optional, tag = "33")]
    pub average_cost_price: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPositionListC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    #[prost(bool, optional, tag = "5")]
    pub refresh_cache: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPositionListS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, repeated, tag = "2")]
    pub position_list: Vec<Position>,
}
wrappers!(
    GetPositionListRequest,
    GetPositionListResponse,
    GetPositionListC2s,
    GetPositionListS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderFill {
    /// 1 buy, 2 sell, 3 sell short, 4 buy back.
    #[prost(int32, optional, tag = "1")]
    pub trd_side: Option<i32>,
    #[prost(uint64, optional, tag = "2")]
    pub fill_id: Option<u64>,
    #[prost(string, optional, tag = "3")]
    pub fill_id_ex: Option<String>,
    #[prost(uint64, optional, tag = "4")]
    pub order_id: Option<u64>,
    #[prost(string, optional, tag = "5")]
    pub order_id_ex: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub code: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub name: Option<String>,
    #[prost(double, optional, tag = "8")]
    pub qty: Option<f64>,
    #[prost(double, optional, tag = "9")]
    pub price: Option<f64>,
    /// `YYYY-MM-DD HH:MM:SS[.mmm]`, in the exchange's time zone.
    #[prost(string, optional, tag = "10")]
    pub create_time: Option<String>,
    #[prost(int32, optional, tag = "13")]
    pub sec_market: Option<i32>,
    #[prost(double, optional, tag = "14")]
    pub create_timestamp: Option<f64>,
    /// 0 ok, 1 cancelled, 2 changed.
    #[prost(int32, optional, tag = "16")]
    pub status: Option<i32>,
    #[prost(int32, optional, tag = "17")]
    pub trd_market: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetHistoryOrderFillListC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetHistoryOrderFillListS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, repeated, tag = "2")]
    pub order_fill_list: Vec<OrderFill>,
}
wrappers!(
    GetHistoryOrderFillListRequest,
    GetHistoryOrderFillListResponse,
    GetHistoryOrderFillListC2s,
    GetHistoryOrderFillListS2c
);

/// Trd_Common.Order: only what a filled order's book entry needs.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Order {
    /// 1 buy, 2 sell, 3 sell short, 4 buy back.
    #[prost(int32, optional, tag = "1")]
    pub trd_side: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub order_status: Option<i32>,
    #[prost(uint64, optional, tag = "4")]
    pub order_id: Option<u64>,
    #[prost(string, optional, tag = "5")]
    pub order_id_ex: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub code: Option<String>,
    #[prost(string, optional, tag = "7")]
    pub name: Option<String>,
    #[prost(double, optional, tag = "8")]
    pub qty: Option<f64>,
    #[prost(string, optional, tag = "10")]
    pub create_time: Option<String>,
    /// The order's last change: for a filled order, when its last fill came.
    #[prost(string, optional, tag = "11")]
    pub update_time: Option<String>,
    #[prost(double, optional, tag = "12")]
    pub fill_qty: Option<f64>,
    #[prost(double, optional, tag = "13")]
    pub fill_avg_price: Option<f64>,
    #[prost(int32, optional, tag = "15")]
    pub sec_market: Option<i32>,
    #[prost(int32, optional, tag = "26")]
    pub trd_market: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetHistoryOrderListC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    #[prost(int32, repeated, packed = "false", tag = "3")]
    pub filter_status_list: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetHistoryOrderListS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, repeated, tag = "2")]
    pub order_list: Vec<Order>,
}
wrappers!(
    GetHistoryOrderListRequest,
    GetHistoryOrderListResponse,
    GetHistoryOrderListC2s,
    GetHistoryOrderListS2c
);

/// Trd_GetOrderFillList (2211): today's fills; the filter is optional.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderFillListC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    /// false: OpenD's own copy (kept current by the server's pushes).
    #[prost(bool, optional, tag = "3")]
    pub refresh_cache: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderFillListS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, repeated, tag = "2")]
    pub order_fill_list: Vec<OrderFill>,
}
wrappers!(
    GetOrderFillListRequest,
    GetOrderFillListResponse,
    GetOrderFillListC2s,
    GetOrderFillListS2c
);

/// Trd_GetOrderList (2201): today's orders; the filter is optional.
#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderListC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    #[prost(int32, repeated, packed = "false", tag = "3")]
    pub filter_status_list: Vec<i32>,
    #[prost(bool, optional, tag = "4")]
    pub refresh_cache: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderListS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, repeated, tag = "2")]
    pub order_list: Vec<Order>,
}
wrappers!(
    GetOrderListRequest,
    GetOrderListResponse,
    GetOrderListC2s,
    GetOrderListS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderFeeItem {
    #[prost(string, optional, tag = "1")]
    pub title: Option<String>,
    #[prost(double, optional, tag = "2")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderFee {
    #[prost(string, optional, tag = "1")]
    pub order_id_ex: Option<String>,
    #[prost(double, optional, tag = "2")]
    pub fee_amount: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    pub fee_list: Vec<OrderFeeItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderFeeC2s {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(string, repeated, tag = "2")]
    pub order_id_ex_list: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderFeeS2c {
    #[prost(message, optional, tag = "1")]
    pub header: Option<TrdHeader>,
    #[prost(message, repeated, tag = "2")]
    pub order_fee_list: Vec<OrderFee>,
}
wrappers!(
    GetOrderFeeRequest,
    GetOrderFeeResponse,
    GetOrderFeeC2s,
    GetOrderFeeS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct Security {
    #[prost(int32, optional, tag = "1")]
    pub market: Option<i32>,
    #[prost(string, optional, tag = "2")]
    pub code: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotBasicData {
    #[prost(message, optional, tag = "1")]
    pub security: Option<Security>,
    #[prost(int32, optional, tag = "2")]
    pub r#type: Option<i32>,
    #[prost(bool, optional, tag = "3")]
    pub is_suspend: Option<bool>,
    #[prost(string, optional, tag = "4")]
    pub list_time: Option<String>,
    #[prost(int32, optional, tag = "5")]
    pub lot_size: Option<i32>,
    #[prost(double, optional, tag = "6")]
    pub price_spread: Option<f64>,
    #[prost(string, optional, tag = "7")]
    pub update_time: Option<String>,
    #[prost(double, optional, tag = "8")]
    pub high_price: Option<f64>,
    #[prost(double, optional, tag = "9")]
    pub open_price: Option<f64>,
    #[prost(double, optional, tag = "10")]
    pub low_price: Option<f64>,
    #[prost(double, optional, tag = "11")]
    pub last_close_price: Option<f64>,
    #[prost(double, optional, tag = "12")]
    pub cur_price: Option<f64>,
    #[prost(int64, optional, tag = "13")]
    pub volume: Option<i64>,
    #[prost(double, optional, tag = "14")]
    pub turnover: Option<f64>,
    #[prost(double, optional, tag = "15")]
    pub turnover_rate: Option<f64>,
    #[prost(double, optional, tag = "17")]
    pub update_timestamp: Option<f64>,
    #[prost(double, optional, tag = "18")]
    pub ask_price: Option<f64>,
    #[prost(double, optional, tag = "19")]
    pub bid_price: Option<f64>,
    #[prost(string, optional, tag = "41")]
    pub name: Option<String>,
}

/// An option's extra snapshot data (Qot_GetSecuritySnapshot.OptionSnapshotExData).
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionSnapshotExData {
    /// `Qot_Common.OptionType`: 1 call, 2 put.
    #[prost(int32, optional, tag = "1")]
    pub r#type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub owner: Option<Security>,
    /// `yyyy-MM-dd`.
    #[prost(string, optional, tag = "3")]
    pub strike_time: Option<String>,
    #[prost(double, optional, tag = "4")]
    pub strike_price: Option<f64>,
    /// Shares per contract, as an integer.
    #[prost(int32, optional, tag = "5")]
    pub contract_size: Option<i32>,
    #[prost(int32, optional, tag = "6")]
    pub open_interest: Option<i32>,
    /// A percentage: 20 means 20%.
    #[prost(double, optional, tag = "7")]
    pub implied_volatility: Option<f64>,
    /// A percentage.
    #[prost(double, optional, tag = "8")]
    pub premium: Option<f64>,
    #[prost(double, optional, tag = "9")]
    pub delta: Option<f64>,
    #[prost(double, optional, tag = "10")]
    pub gamma: Option<f64>,
    #[prost(double, optional, tag = "11")]
    pub vega: Option<f64>,
    #[prost(double, optional, tag = "12")]
    pub theta: Option<f64>,
    #[prost(double, optional, tag = "13")]
    pub rho: Option<f64>,
    #[prost(double, optional, tag = "21")]
    pub contract_multiplier: Option<f64>,
    /// Shares per contract, as a float (newer OpenD; adjusted contracts).
    #[prost(double, optional, tag = "22")]
    pub contract_size_float: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Snapshot {
    #[prost(message, optional, tag = "1")]
    pub basic: Option<SnapshotBasicData>,
    #[prost(message, optional, tag = "4")]
    pub option_ex_data: Option<OptionSnapshotExData>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetSecuritySnapshotC2s {
    #[prost(message, repeated, tag = "1")]
    pub security_list: Vec<Security>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetSecuritySnapshotS2c {
    #[prost(message, repeated, tag = "1")]
    pub snapshot_list: Vec<Snapshot>,
}
wrappers!(
    GetSecuritySnapshotRequest,
    GetSecuritySnapshotResponse,
    GetSecuritySnapshotC2s,
    GetSecuritySnapshotS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct KLine {
    /// `YYYY-MM-DD HH:MM:SS`, exchange time.
    #[prost(string, optional, tag = "1")]
    pub time: Option<String>,
    #[prost(bool, optional, tag = "2")]
    pub is_blank: Option<bool>,
    #[prost(double, optional, tag = "3")]
    pub high_price: Option<f64>,
    #[prost(double, optional, tag = "4")]
    pub open_price: Option<f64>,
    #[prost(double, optional, tag = "5")]
    pub low_price: Option<f64>,
    #[prost(double, optional, tag = "6")]
    pub close_price: Option<f64>,
    #[prost(double, optional, tag = "7")]
    pub last_close_price: Option<f64>,
    #[prost(int64, optional, tag = "8")]
    pub volume: Option<i64>,
    #[prost(double, optional, tag = "9")]
    pub turnover: Option<f64>,
    #[prost(double, optional, tag = "13")]
    pub timestamp: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestHistoryKlC2s {
    /// 0 none, 1 forward, 2 backward.
    #[prost(int32, optional, tag = "1")]
    pub rehab_type: Option<i32>,
    /// 1 1-min, 2 day, 6 5-min, 7 15-min, 9 60-min.
    #[prost(int32, optional, tag = "2")]
    pub kl_type: Option<i32>,
    #[prost(message, optional, tag = "3")]
    pub security: Option<Security>,
    #[prost(string, optional, tag = "4")]
    pub begin_time: Option<String>,
    #[prost(string, optional, tag = "5")]
    pub end_time: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub max_ack_kl_num: Option<i32>,
    #[prost(int64, optional, tag = "7")]
    pub need_kl_fields_flag: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub next_req_key: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestHistoryKlS2c {
    #[prost(message, optional, tag = "1")]
    pub security: Option<Security>,
    #[prost(message, repeated, tag = "2")]
    pub kl_list: Vec<KLine>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub next_req_key: Option<Vec<u8>>,
    #[prost(string, optional, tag = "4")]
    pub name: Option<String>,
}
wrappers!(
    RequestHistoryKlRequest,
    RequestHistoryKlResponse,
    RequestHistoryKlC2s,
    RequestHistoryKlS2c
);

// ---- Qot_GetStaticInfo (3202), for search_instruments ----

/// `Qot_GetStaticInfo`: a market's securities of one type (or the securities named).
pub const GET_STATIC_INFO: u32 = 3202;

/// `Qot_Common.SecurityType`, the types searched.
pub mod security_type {
    pub const BOND: i32 = 1;
    pub const EQUITY: i32 = 3;
    /// Trusts and funds (ETFs).
    pub const TRUST: i32 = 4;
    pub const WARRANT: i32 = 5;
    pub const DRVT: i32 = 8;
    pub const FUTURE: i32 = 10;
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetStaticInfoC2s {
    /// `QotMarket`; ignored by OpenD when `security_list` is given.
    #[prost(int32, optional, tag = "1")]
    pub market: Option<i32>,
    /// `SecurityType`.
    #[prost(int32, optional, tag = "2")]
    pub sec_type: Option<i32>,
    #[prost(message, repeated, tag = "3")]
    pub security_list: Vec<Security>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityStaticBasic {
    #[prost(message, optional, tag = "1")]
    pub security: Option<Security>,
    #[prost(int64, optional, tag = "2")]
    pub id: Option<i64>,
    /// Shares per board lot; for options and futures, the contract multiplier.
    #[prost(int32, optional, tag = "3")]
    pub lot_size: Option<i32>,
    #[prost(int32, optional, tag = "4")]
    pub sec_type: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub name: Option<String>,
    #[prost(string, optional, tag = "6")]
    pub list_time: Option<String>,
    #[prost(bool, optional, tag = "7")]
    pub delisting: Option<bool>,
    /// `ExchType`.
    #[prost(int32, optional, tag = "9")]
    pub exch_type: Option<i32>,
}

/// `Qot_Common.OptionStaticExData`: an option's static data.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionStaticExData {
    /// `Qot_Common.OptionType`: 1 call, 2 put.
    #[prost(int32, optional, tag = "1")]
    pub r#type: Option<i32>,
    #[prost(message, optional, tag = "2")]
    pub owner: Option<Security>,
    /// The expiry, `yyyy-MM-dd`.
    #[prost(string, optional, tag = "3")]
    pub strike_time: Option<String>,
    #[prost(double, optional, tag = "4")]
    pub strike_price: Option<f64>,
    #[prost(bool, optional, tag = "5")]
    pub suspend: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityStaticInfo {
    #[prost(message, optional, tag = "1")]
    pub basic: Option<SecurityStaticBasic>,
    #[prost(message, optional, tag = "3")]
    pub option_ex_data: Option<OptionStaticExData>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetStaticInfoS2c {
    #[prost(message, repeated, tag = "1")]
    pub static_info_list: Vec<SecurityStaticInfo>,
}
wrappers!(
    GetStaticInfoRequest,
    GetStaticInfoResponse,
    GetStaticInfoC2s,
    GetStaticInfoS2c
);

// ---- Qot_GetOptionExpirationDate (3224) and Qot_GetOptionChain (3209) ----

/// `Qot_GetOptionExpirationDate`: an underlying's option expiries.
pub const GET_OPTION_EXPIRATION_DATE: u32 = 3224;
/// `Qot_GetOptionChain`: the contracts expiring in a window of at most 30 days.
pub const GET_OPTION_CHAIN: u32 = 3209;
/// `Qot_Common.OptionType`.
pub const OPTION_CALL: i32 = 1;
pub const OPTION_PUT: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionExpirationDateC2s {
    #[prost(message, optional, tag = "1")]
    pub owner: Option<Security>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionExpirationDate {
    /// `yyyy-MM-dd` (the exchange's date).
    #[prost(string, optional, tag = "1")]
    pub strike_time: Option<String>,
    #[prost(double, optional, tag = "2")]
    pub strike_timestamp: Option<f64>,
    /// Days to expiry; negative: expired.
    #[prost(int32, optional, tag = "3")]
    pub option_expiry_date_distance: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionExpirationDateS2c {
    #[prost(message, repeated, tag = "1")]
    pub date_list: Vec<OptionExpirationDate>,
}
wrappers!(
    GetOptionExpirationDateRequest,
    GetOptionExpirationDateResponse,
    GetOptionExpirationDateC2s,
    GetOptionExpirationDateS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionChainC2s {
    #[prost(message, optional, tag = "1")]
    pub owner: Option<Security>,
    /// `yyyy-MM-dd`: the first expiry of the window.
    #[prost(string, optional, tag = "4")]
    pub begin_time: Option<String>,
    /// `yyyy-MM-dd`: the last expiry of the window (at most 30 days after the first).
    #[prost(string, optional, tag = "5")]
    pub end_time: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionItem {
    #[prost(message, optional, tag = "1")]
    pub call: Option<SecurityStaticInfo>,
    #[prost(message, optional, tag = "2")]
    pub put: Option<SecurityStaticInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionChainOfExpiry {
    #[prost(string, optional, tag = "1")]
    pub strike_time: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub option: Vec<OptionItem>,
    #[prost(double, optional, tag = "3")]
    pub strike_timestamp: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionChainS2c {
    #[prost(message, repeated, tag = "1")]
    pub option_chain: Vec<OptionChainOfExpiry>,
}
wrappers!(
    GetOptionChainRequest,
    GetOptionChainResponse,
    GetOptionChainC2s,
    GetOptionChainS2c
);
