//! The fake OpenD's own protobuf messages, written for the tests from the field numbers and
//! labels of the futu-api SDK's `.proto` files (proto2: `required` fields are always
//! encoded, repeated scalars are not packed), independently of the adapter's
//! `tradedesk_brokers::futu::proto`. Only the messages and fields the fake sends or reads
//! are here; each carries the SDK's tag, so a field number the adapter gets wrong shows
//! as a missing or garbled figure.

#![allow(dead_code, unreachable_pub, missing_docs)]

/// Proto ids (the SDK's `ProtoId`).
pub mod proto_id {
    pub const INIT_CONNECT: u32 = 1001;
    pub const KEEP_ALIVE: u32 = 1004;
    pub const TRD_GET_ACC_LIST: u32 = 2001;
    pub const TRD_GET_FUNDS: u32 = 2101;
    pub const TRD_GET_POSITION_LIST: u32 = 2102;
    pub const TRD_GET_ORDER_LIST: u32 = 2201;
    pub const TRD_GET_ORDER_FILL_LIST: u32 = 2211;
    pub const TRD_GET_HISTORY_ORDER_LIST: u32 = 2221;
    pub const TRD_GET_HISTORY_ORDER_FILL_LIST: u32 = 2222;
    pub const TRD_GET_ORDER_FEE: u32 = 2225;
    pub const QOT_REQUEST_HISTORY_KL: u32 = 3103;
    pub const QOT_GET_SECURITY_SNAPSHOT: u32 = 3203;
}

/// `Trd_Common.TrdEnv`.
pub const TRD_ENV_SIMULATE: i32 = 0;
pub const TRD_ENV_REAL: i32 = 1;
/// `Trd_Common.TrdMarket`.
pub const TRD_MARKET_HK: i32 = 1;
pub const TRD_MARKET_US: i32 = 2;
pub const TRD_MARKET_MY: i32 = 111;
/// `Trd_Common.TrdSecMarket`.
pub const SEC_MARKET_HK: i32 = 1;
pub const SEC_MARKET_US: i32 = 2;
pub const SEC_MARKET_MY: i32 = 71;
/// `Qot_Common.QotMarket`.
pub const QOT_MARKET_HK: i32 = 1;
pub const QOT_MARKET_US: i32 = 11;
pub const QOT_MARKET_MY: i32 = 61;
/// `Trd_Common.Currency`.
pub const CURRENCY_HKD: i32 = 1;
pub const CURRENCY_USD: i32 = 2;
pub const CURRENCY_MYR: i32 = 8;
/// `Trd_Common.TrdSide`.
pub const SIDE_BUY: i32 = 1;
pub const SIDE_SELL: i32 = 2;
/// `Trd_Common.OrderStatus`.
pub const ORDER_FILLED_PART: i32 = 10;
pub const ORDER_FILLED_ALL: i32 = 11;
pub const ORDER_CANCELLED_PART: i32 = 14;
pub const ORDER_CANCELLED_ALL: i32 = 15;
/// `Qot_Common.KLType`.
pub const KL_TYPE_DAY: i32 = 2;

// ---- Common to every proto: Request { c2s = 1 }, Response { retType = 1, retMsg = 2,
// errCode = 3, s2c = 4 } ----

macro_rules! request_response {
    ($module:ident, $c2s:ty, $s2c:ty) => {
        pub mod $module {
            #[derive(Clone, PartialEq, prost::Message)]
            pub struct Request {
                #[prost(message, required, tag = "1")]
                pub c2s: $c2s,
            }

            #[derive(Clone, PartialEq, prost::Message)]
            pub struct Response {
                #[prost(int32, required, tag = "1", default = "-400")]
                pub ret_type: i32,
                #[prost(string, optional, tag = "2")]
                pub ret_msg: Option<String>,
                #[prost(int32, optional, tag = "3")]
                pub err_code: Option<i32>,
                #[prost(message, optional, tag = "4")]
                pub s2c: Option<$s2c>,
            }
        }
    };
}

// ---- InitConnect.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct InitConnectC2s {
    #[prost(int32, required, tag = "1")]
    pub client_ver: i32,
    #[prost(string, required, tag = "2")]
    pub client_id: String,
    #[prost(bool, optional, tag = "3")]
    pub recv_notify: Option<bool>,
    #[prost(int32, optional, tag = "4")]
    pub packet_enc_algo: Option<i32>,
    #[prost(int32, optional, tag = "5")]
    pub push_proto_fmt: Option<i32>,
    #[prost(string, optional, tag = "6")]
    pub programming_language: Option<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InitConnectS2c {
    #[prost(int32, required, tag = "1")]
    pub server_ver: i32,
    #[prost(uint64, required, tag = "2")]
    pub login_user_id: u64,
    #[prost(uint64, required, tag = "3")]
    pub conn_id: u64,
    #[prost(string, required, tag = "4")]
    pub conn_aes_key: String,
    #[prost(int32, required, tag = "5")]
    pub keep_alive_interval: i32,
    #[prost(string, optional, tag = "6")]
    pub aes_cb_civ: Option<String>,
    #[prost(int32, optional, tag = "7")]
    pub user_attribution: Option<i32>,
}
request_response!(init_connect, super::InitConnectC2s, super::InitConnectS2c);

// ---- KeepAlive.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct KeepAliveTime {
    #[prost(int64, required, tag = "1")]
    pub time: i64,
}
request_response!(keep_alive, super::KeepAliveTime, super::KeepAliveTime);

// ---- Trd_Common.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrdHeader {
    #[prost(int32, required, tag = "1")]
    pub trd_env: i32,
    #[prost(uint64, required, tag = "2")]
    pub acc_id: u64,
    #[prost(int32, required, tag = "3")]
    pub trd_market: i32,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct TrdAcc {
    #[prost(int32, required, tag = "1")]
    pub trd_env: i32,
    #[prost(uint64, required, tag = "2")]
    pub acc_id: u64,
    #[prost(int32, repeated, packed = "false", tag = "3")]
    pub trd_market_auth_list: Vec<i32>,
    #[prost(int32, optional, tag = "4")]
    pub acc_type: Option<i32>,
    #[prost(string, optional, tag = "5")]
    pub card_num: Option<String>,
    #[prost(int32, optional, tag = "6")]
    pub security_firm: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    pub sim_acc_type: Option<i32>,
    #[prost(string, optional, tag = "8")]
    pub uni_card_num: Option<String>,
    #[prost(int32, optional, tag = "9")]
    pub acc_status: Option<i32>,
}

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
pub struct AccMarketInfo {
    #[prost(int32, optional, tag = "1")]
    pub trd_market: Option<i32>,
    #[prost(double, optional, tag = "2")]
    pub assets: Option<f64>,
}

/// `Trd_Common.Funds`: the figures are in the currency the funds were asked in (a
/// universal account's `Trd_GetFunds.C2S.currency`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Funds {
    #[prost(double, required, tag = "1")]
    pub power: f64,
    #[prost(double, required, tag = "2")]
    pub total_assets: f64,
    #[prost(double, required, tag = "3")]
    pub cash: f64,
    #[prost(double, required, tag = "4")]
    pub market_val: f64,
    #[prost(double, required, tag = "5")]
    pub frozen_cash: f64,
    #[prost(double, required, tag = "6")]
    pub debt_cash: f64,
    #[prost(double, required, tag = "7")]
    pub avl_withdrawal_cash: f64,
    #[prost(int32, optional, tag = "8")]
    pub currency: Option<i32>,
    /// Maintenance margin (Trd_Common.proto `maintenanceMargin`, optional).
    #[prost(double, optional, tag = "14")]
    pub maintenance_margin: Option<f64>,
    #[prost(message, repeated, tag = "15")]
    pub cash_info_list: Vec<AccCashInfo>,
    #[prost(double, optional, tag = "17")]
    pub net_cash_power: Option<f64>,
    #[prost(double, optional, tag = "30")]
    pub securities_assets: Option<f64>,
    #[prost(message, repeated, tag = "33")]
    pub market_info_list: Vec<AccMarketInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Position {
    #[prost(uint64, required, tag = "1")]
    pub position_id: u64,
    #[prost(int32, required, tag = "2")]
    pub position_side: i32,
    #[prost(string, required, tag = "3")]
    pub code: String,
    #[prost(string, required, tag = "4")]
    pub name: String,
    #[prost(double, required, tag = "5")]
    pub qty: f64,
    #[prost(double, required, tag = "6")]
    pub can_sell_qty: f64,
    #[prost(double, required, tag = "7")]
    pub price: f64,
    #[prost(double, optional, tag = "8")]
    pub cost_price: Option<f64>,
    #[prost(double, required, tag = "9")]
    pub val: f64,
    #[prost(double, required, tag = "10")]
    pub pl_val: f64,
    #[prost(double, optional, tag = "11")]
    pub pl_ratio: Option<f64>,
    #[prost(int32, optional, tag = "12")]
    pub sec_market: Option<i32>,
    #[prost(int32, optional, tag = "30")]
    pub currency: Option<i32>,
    #[prost(int32, optional, tag = "31")]
    pub trd_market: Option<i32>,
    #[prost(double, optional, tag = "32")]
    pub diluted_cost_price: Option<f64>,
    #[prost(double, optional, tag = "33")]
    pub average_cost_price: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Order {
    #[prost(int32, required, tag = "1")]
    pub trd_side: i32,
    #[prost(int32, required, tag = "2")]
    pub order_type: i32,
    #[prost(int32, required, tag = "3")]
    pub order_status: i32,
    #[prost(uint64, required, tag = "4")]
    pub order_id: u64,
    #[prost(string, required, tag = "5")]
    pub order_id_ex: String,
    #[prost(string, required, tag = "6")]
    pub code: String,
    #[prost(string, required, tag = "7")]
    pub name: String,
    #[prost(double, required, tag = "8")]
    pub qty: f64,
    #[prost(double, optional, tag = "9")]
    pub price: Option<f64>,
    #[prost(string, required, tag = "10")]
    pub create_time: String,
    #[prost(string, required, tag = "11")]
    pub update_time: String,
    #[prost(double, optional, tag = "12")]
    pub fill_qty: Option<f64>,
    #[prost(double, optional, tag = "13")]
    pub fill_avg_price: Option<f64>,
    #[prost(string, optional, tag = "14")]
    pub last_err_msg: Option<String>,
    #[prost(int32, optional, tag = "15")]
    pub sec_market: Option<i32>,
    #[prost(double, optional, tag = "16")]
    pub create_timestamp: Option<f64>,
    #[prost(double, optional, tag = "17")]
    pub update_timestamp: Option<f64>,
    #[prost(int32, optional, tag = "25")]
    pub currency: Option<i32>,
    #[prost(int32, optional, tag = "26")]
    pub trd_market: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderFeeItem {
    #[prost(string, optional, tag = "1")]
    pub title: Option<String>,
    #[prost(double, optional, tag = "2")]
    pub value: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderFee {
    #[prost(string, required, tag = "1")]
    pub order_id_ex: String,
    #[prost(double, optional, tag = "2")]
    pub fee_amount: Option<f64>,
    #[prost(message, repeated, tag = "3")]
    pub fee_list: Vec<OrderFeeItem>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OrderFill {
    #[prost(int32, required, tag = "1")]
    pub trd_side: i32,
    #[prost(uint64, required, tag = "2")]
    pub fill_id: u64,
    #[prost(string, required, tag = "3")]
    pub fill_id_ex: String,
    #[prost(uint64, optional, tag = "4")]
    pub order_id: Option<u64>,
    #[prost(string, optional, tag = "5")]
    pub order_id_ex: Option<String>,
    #[prost(string, required, tag = "6")]
    pub code: String,
    #[prost(string, required, tag = "7")]
    pub name: String,
    #[prost(double, required, tag = "8")]
    pub qty: f64,
    #[prost(double, required, tag = "9")]
    pub price: f64,
    #[prost(string, required, tag = "10")]
    pub create_time: String,
    #[prost(int32, optional, tag = "11")]
    pub counter_broker_id: Option<i32>,
    #[prost(string, optional, tag = "12")]
    pub counter_broker_name: Option<String>,
    #[prost(int32, optional, tag = "13")]
    pub sec_market: Option<i32>,
    #[prost(double, optional, tag = "14")]
    pub create_timestamp: Option<f64>,
    #[prost(double, optional, tag = "15")]
    pub update_timestamp: Option<f64>,
    #[prost(int32, optional, tag = "16")]
    pub status: Option<i32>,
    #[prost(int32, optional, tag = "17")]
    pub trd_market: Option<i32>,
}

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

// ---- Trd_GetAccList.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetAccListC2s {
    #[prost(uint64, required, tag = "1")]
    pub user_id: u64,
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
request_response!(trd_get_acc_list, super::GetAccListC2s, super::GetAccListS2c);

// ---- Trd_GetFunds.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetFundsC2s {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(bool, optional, tag = "2")]
    pub refresh_cache: Option<bool>,
    #[prost(int32, optional, tag = "3")]
    pub currency: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetFundsS2c {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, optional, tag = "2")]
    pub funds: Option<Funds>,
}
request_response!(trd_get_funds, super::GetFundsC2s, super::GetFundsS2c);

// ---- Trd_GetPositionList.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPositionListC2s {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    #[prost(bool, optional, tag = "5")]
    pub refresh_cache: Option<bool>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetPositionListS2c {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, repeated, tag = "2")]
    pub position_list: Vec<Position>,
}
request_response!(
    trd_get_position_list,
    super::GetPositionListC2s,
    super::GetPositionListS2c
);

// ---- Trd_GetHistoryOrderFillList.proto / Trd_GetHistoryOrderList.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct HistoryC2s {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, required, tag = "2")]
    pub filter_conditions: TrdFilterConditions,
    /// Trd_GetHistoryOrderList only.
    #[prost(int32, repeated, packed = "false", tag = "3")]
    pub filter_status_list: Vec<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct HistoryFillS2c {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, repeated, tag = "2")]
    pub order_fill_list: Vec<OrderFill>,
}
request_response!(
    trd_get_history_order_fill_list,
    super::HistoryC2s,
    super::HistoryFillS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct HistoryOrderS2c {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, repeated, tag = "2")]
    pub order_list: Vec<Order>,
}
request_response!(
    trd_get_history_order_list,
    super::HistoryC2s,
    super::HistoryOrderS2c
);

// ---- Trd_GetOrderFillList.proto / Trd_GetOrderList.proto (today's) ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct TodayFillC2s {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    #[prost(bool, optional, tag = "3")]
    pub refresh_cache: Option<bool>,
}
request_response!(
    trd_get_order_fill_list,
    super::TodayFillC2s,
    super::HistoryFillS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct TodayOrderC2s {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, optional, tag = "2")]
    pub filter_conditions: Option<TrdFilterConditions>,
    #[prost(int32, repeated, packed = "false", tag = "3")]
    pub filter_status_list: Vec<i32>,
    #[prost(bool, optional, tag = "4")]
    pub refresh_cache: Option<bool>,
}
request_response!(
    trd_get_order_list,
    super::TodayOrderC2s,
    super::HistoryOrderS2c
);

// ---- Trd_GetOrderFee.proto ----

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderFeeC2s {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(string, repeated, tag = "2")]
    pub order_id_ex_list: Vec<String>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOrderFeeS2c {
    #[prost(message, required, tag = "1")]
    pub header: TrdHeader,
    #[prost(message, repeated, tag = "2")]
    pub order_fee_list: Vec<OrderFee>,
}
request_response!(
    trd_get_order_fee,
    super::GetOrderFeeC2s,
    super::GetOrderFeeS2c
);

// ---- Qot_Common.proto, Qot_GetSecuritySnapshot.proto, Qot_RequestHistoryKL.proto ----

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, prost::Message)]
pub struct Security {
    #[prost(int32, required, tag = "1")]
    pub market: i32,
    #[prost(string, required, tag = "2")]
    pub code: String,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SnapshotBasicData {
    #[prost(message, required, tag = "1")]
    pub security: Security,
    #[prost(string, optional, tag = "41")]
    pub name: Option<String>,
    #[prost(int32, required, tag = "2")]
    pub r#type: i32,
    #[prost(bool, required, tag = "3")]
    pub is_suspend: bool,
    #[prost(string, required, tag = "4")]
    pub list_time: String,
    #[prost(int32, required, tag = "5")]
    pub lot_size: i32,
    #[prost(double, required, tag = "6")]
    pub price_spread: f64,
    #[prost(string, required, tag = "7")]
    pub update_time: String,
    #[prost(double, required, tag = "8")]
    pub high_price: f64,
    #[prost(double, required, tag = "9")]
    pub open_price: f64,
    #[prost(double, required, tag = "10")]
    pub low_price: f64,
    #[prost(double, required, tag = "11")]
    pub last_close_price: f64,
    #[prost(double, required, tag = "12")]
    pub cur_price: f64,
    #[prost(int64, required, tag = "13")]
    pub volume: i64,
    #[prost(double, required, tag = "14")]
    pub turnover: f64,
    #[prost(double, required, tag = "15")]
    pub turnover_rate: f64,
    #[prost(double, optional, tag = "17")]
    pub update_timestamp: Option<f64>,
    #[prost(double, optional, tag = "18")]
    pub ask_price: Option<f64>,
    #[prost(double, optional, tag = "19")]
    pub bid_price: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionSnapshotExData {
    #[prost(int32, required, tag = "1")]
    pub r#type: i32,
    #[prost(message, required, tag = "2")]
    pub owner: Security,
    #[prost(string, required, tag = "3")]
    pub strike_time: String,
    #[prost(double, required, tag = "4")]
    pub strike_price: f64,
    #[prost(int32, required, tag = "5")]
    pub contract_size: i32,
    #[prost(int32, required, tag = "6")]
    pub open_interest: i32,
    /// Required in the SDK's file (a percentage: 20 means 20%); `None` sends nothing, as
    /// an unkind OpenD would.
    #[prost(double, optional, tag = "7")]
    pub implied_volatility: Option<f64>,
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
    #[prost(double, optional, tag = "14")]
    pub strike_timestamp: Option<f64>,
    #[prost(int32, optional, tag = "17")]
    pub expiry_date_distance: Option<i32>,
    #[prost(double, optional, tag = "21")]
    pub contract_multiplier: Option<f64>,
    #[prost(double, optional, tag = "22")]
    pub contract_size_float: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Snapshot {
    #[prost(message, required, tag = "1")]
    pub basic: SnapshotBasicData,
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
request_response!(
    qot_get_security_snapshot,
    super::GetSecuritySnapshotC2s,
    super::GetSecuritySnapshotS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct KLine {
    #[prost(string, required, tag = "1")]
    pub time: String,
    #[prost(bool, required, tag = "2")]
    pub is_blank: bool,
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
    #[prost(int32, required, tag = "1")]
    pub rehab_type: i32,
    #[prost(int32, required, tag = "2")]
    pub kl_type: i32,
    #[prost(message, required, tag = "3")]
    pub security: Security,
    #[prost(string, required, tag = "4")]
    pub begin_time: String,
    #[prost(string, required, tag = "5")]
    pub end_time: String,
    #[prost(int32, optional, tag = "6")]
    pub max_ack_kl_num: Option<i32>,
    #[prost(int64, optional, tag = "7")]
    pub need_kl_fields_flag: Option<i64>,
    #[prost(bytes = "vec", optional, tag = "8")]
    pub next_req_key: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestHistoryKlS2c {
    #[prost(message, required, tag = "1")]
    pub security: Security,
    #[prost(string, optional, tag = "4")]
    pub name: Option<String>,
    #[prost(message, repeated, tag = "2")]
    pub kl_list: Vec<KLine>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub next_req_key: Option<Vec<u8>>,
}
request_response!(
    qot_request_history_kl,
    super::RequestHistoryKlC2s,
    super::RequestHistoryKlS2c
);

// ---- Qot_GetStaticInfo.proto (3202) and its Qot_Common.proto messages ----

/// `ProtoId.Qot_GetStaticInfo`.
pub const QOT_GET_STATIC_INFO: u32 = 3202;
/// `Qot_Common.SecurityType`.
pub const SECURITY_TYPE_BOND: i32 = 1;
pub const SECURITY_TYPE_EQTY: i32 = 3;
pub const SECURITY_TYPE_TRUST: i32 = 4;
pub const SECURITY_TYPE_WARRANT: i32 = 5;
pub const SECURITY_TYPE_FUTURE: i32 = 10;
/// `Qot_Common.ExchType`.
pub const EXCH_TYPE_HK_MAIN_BOARD: i32 = 1;
pub const EXCH_TYPE_US_NASDAQ: i32 = 5;
pub const EXCH_TYPE_MY_MYX: i32 = 20;

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityStaticBasic {
    #[prost(message, required, tag = "1")]
    pub security: Security,
    #[prost(int64, required, tag = "2")]
    pub id: i64,
    #[prost(int32, required, tag = "3")]
    pub lot_size: i32,
    #[prost(int32, required, tag = "4")]
    pub sec_type: i32,
    #[prost(string, required, tag = "5")]
    pub name: String,
    #[prost(string, required, tag = "6")]
    pub list_time: String,
    #[prost(bool, optional, tag = "7")]
    pub delisting: Option<bool>,
    #[prost(double, optional, tag = "8")]
    pub list_timestamp: Option<f64>,
    #[prost(int32, optional, tag = "9")]
    pub exch_type: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct WarrantStaticExData {
    #[prost(int32, required, tag = "1")]
    pub r#type: i32,
    #[prost(message, required, tag = "2")]
    pub owner: Security,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct FutureStaticExData {
    #[prost(string, required, tag = "1")]
    pub last_trade_time: String,
    #[prost(double, optional, tag = "2")]
    pub last_trade_timestamp: Option<f64>,
    #[prost(bool, required, tag = "3")]
    pub is_main_contract: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionStaticExData {
    #[prost(int32, required, tag = "1")]
    pub r#type: i32,
    #[prost(message, required, tag = "2")]
    pub owner: Security,
    #[prost(string, required, tag = "3")]
    pub strike_time: String,
    #[prost(double, required, tag = "4")]
    pub strike_price: f64,
    #[prost(bool, required, tag = "5")]
    pub suspend: bool,
    #[prost(string, required, tag = "6")]
    pub market: String,
    #[prost(double, optional, tag = "7")]
    pub strike_timestamp: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct SecurityStaticInfo {
    #[prost(message, required, tag = "1")]
    pub basic: SecurityStaticBasic,
    #[prost(message, optional, tag = "2")]
    pub warrant_ex_data: Option<WarrantStaticExData>,
    #[prost(message, optional, tag = "3")]
    pub option_ex_data: Option<OptionStaticExData>,
    #[prost(message, optional, tag = "4")]
    pub future_ex_data: Option<FutureStaticExData>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetStaticInfoC2s {
    #[prost(int32, optional, tag = "1")]
    pub market: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub sec_type: Option<i32>,
    #[prost(message, repeated, tag = "3")]
    pub security_list: Vec<Security>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetStaticInfoS2c {
    #[prost(message, repeated, tag = "1")]
    pub static_info_list: Vec<SecurityStaticInfo>,
}
request_response!(
    qot_get_static_info,
    super::GetStaticInfoC2s,
    super::GetStaticInfoS2c
);

// ---- Qot_GetOptionExpirationDate.proto (3224), Qot_GetOptionChain.proto (3209) ----

/// `ProtoId.Qot_GetOptionExpirationDate`, `ProtoId.Qot_GetOptionChain`.
pub const QOT_GET_OPTION_EXPIRATION_DATE: u32 = 3224;
pub const QOT_GET_OPTION_CHAIN: u32 = 3209;
/// `Qot_Common.SecurityType_Drvt`, `Qot_Common.OptionType`.
pub const SECURITY_TYPE_DRVT: i32 = 8;
pub const OPTION_TYPE_CALL: i32 = 1;
pub const OPTION_TYPE_PUT: i32 = 2;

#[derive(Clone, PartialEq, prost::Message)]
pub struct QotHeader {
    #[prost(int32, optional, tag = "1")]
    pub security_firm: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionExpirationDateC2s {
    #[prost(message, required, tag = "1")]
    pub owner: Security,
    #[prost(int32, optional, tag = "2")]
    pub index_option_type: Option<i32>,
    #[prost(message, optional, tag = "100")]
    pub header: Option<QotHeader>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionExpirationDate {
    #[prost(string, optional, tag = "1")]
    pub strike_time: Option<String>,
    #[prost(double, optional, tag = "2")]
    pub strike_timestamp: Option<f64>,
    #[prost(int32, required, tag = "3")]
    pub option_expiry_date_distance: i32,
    #[prost(int32, optional, tag = "4")]
    pub cycle: Option<i32>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionExpirationDateS2c {
    #[prost(message, repeated, tag = "1")]
    pub date_list: Vec<OptionExpirationDate>,
}
request_response!(
    qot_get_option_expiration_date,
    super::GetOptionExpirationDateC2s,
    super::GetOptionExpirationDateS2c
);

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionChainC2s {
    #[prost(message, required, tag = "1")]
    pub owner: Security,
    #[prost(int32, optional, tag = "6")]
    pub index_option_type: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    pub r#type: Option<i32>,
    #[prost(int32, optional, tag = "3")]
    pub condition: Option<i32>,
    #[prost(string, required, tag = "4")]
    pub begin_time: String,
    #[prost(string, required, tag = "5")]
    pub end_time: String,
    #[prost(message, optional, tag = "100")]
    pub header: Option<QotHeader>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionItem {
    #[prost(message, optional, tag = "1")]
    pub call: Option<SecurityStaticInfo>,
    #[prost(message, optional, tag = "2")]
    pub put: Option<SecurityStaticInfo>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionChain {
    #[prost(string, required, tag = "1")]
    pub strike_time: String,
    #[prost(message, repeated, tag = "2")]
    pub option: Vec<OptionItem>,
    #[prost(double, optional, tag = "3")]
    pub strike_timestamp: Option<f64>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct GetOptionChainS2c {
    #[prost(message, repeated, tag = "1")]
    pub option_chain: Vec<OptionChain>,
}
request_response!(
    qot_get_option_chain,
    super::GetOptionChainC2s,
    super::GetOptionChainS2c
);
