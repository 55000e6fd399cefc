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
            message! {
                pub struct Request {
                    pub c2s: $c2s = required(message, 1),
                }
            }

            message! {
                pub struct Response {
                    pub ret_type: i32 = required(int32, 1, default = "-400"),
                    pub ret_msg: Option<String> = optional(string, 2),
                    pub err_code: Option<i32> = optional(int32, 3),
                    pub s2c: Option<$s2c> = optional(message, 4),
                }
            }
        }
    };
}

// ---- InitConnect.proto ----

message! {
    pub struct InitConnectC2s {
        pub client_ver: i32 = required(int32, 1),
        pub client_id: String = required(string, 2),
        pub recv_notify: Option<bool> = optional(bool, 3),
        pub packet_enc_algo: Option<i32> = optional(int32, 4),
        pub push_proto_fmt: Option<i32> = optional(int32, 5),
        pub programming_language: Option<String> = optional(string, 6),
    }
}

message! {
    pub struct InitConnectS2c {
        pub server_ver: i32 = required(int32, 1),
        pub login_user_id: u64 = required(uint64, 2),
        pub conn_id: u64 = required(uint64, 3),
        pub conn_aes_key: String = required(string, 4),
        pub keep_alive_interval: i32 = required(int32, 5),
        pub aes_cb_civ: Option<String> = optional(string, 6),
        pub user_attribution: Option<i32> = optional(int32, 7),
    }
}
request_response!(init_connect, super::InitConnectC2s, super::InitConnectS2c);

// ---- KeepAlive.proto ----

message! {
    pub struct KeepAliveTime {
        pub time: i64 = required(int64, 1),
    }
}
request_response!(keep_alive, super::KeepAliveTime, super::KeepAliveTime);

// ---- Trd_Common.proto ----

message! {
    pub struct TrdHeader {
        pub trd_env: i32 = required(int32, 1),
        pub acc_id: u64 = required(uint64, 2),
        pub trd_market: i32 = required(int32, 3),
    }
}

message! {
    pub struct TrdAcc {
        pub trd_env: i32 = required(int32, 1),
        pub acc_id: u64 = required(uint64, 2),
        pub trd_market_auth_list: Vec<i32> = repeated(int32, 3, packed = "false"),
        pub acc_type: Option<i32> = optional(int32, 4),
        pub card_num: Option<String> = optional(string, 5),
        pub security_firm: Option<i32> = optional(int32, 6),
        pub sim_acc_type: Option<i32> = optional(int32, 7),
        pub uni_card_num: Option<String> = optional(string, 8),
        pub acc_status: Option<i32> = optional(int32, 9),
    }
}

message! {
    pub struct AccCashInfo {
        pub currency: Option<i32> = optional(int32, 1),
        pub cash: Option<f64> = optional(double, 2),
        pub available_balance: Option<f64> = optional(double, 3),
        pub net_cash_power: Option<f64> = optional(double, 4),
    }
}

message! {
    pub struct AccMarketInfo {
        pub trd_market: Option<i32> = optional(int32, 1),
        pub assets: Option<f64> = optional(double, 2),
    }
}

message! {
    /// `Trd_Common.Funds`: the figures are in the currency the funds were asked in (a
    /// universal account's `Trd_GetFunds.C2S.currency`).
    pub struct Funds {
        pub power: f64 = required(double, 1),
        pub total_assets: f64 = required(double, 2),
        pub cash: f64 = required(double, 3),
        pub market_val: f64 = required(double, 4),
        pub frozen_cash: f64 = required(double, 5),
        pub debt_cash: f64 = required(double, 6),
        pub avl_withdrawal_cash: f64 = required(double, 7),
        pub currency: Option<i32> = optional(int32, 8),
        /// Maintenance margin (Trd_Common.proto `maintenanceMargin`, optional).
        pub maintenance_margin: Option<f64> = optional(double, 14),
        pub cash_info_list: Vec<AccCashInfo> = repeated(message, 15),
        pub net_cash_power: Option<f64> = optional(double, 17),
        pub securities_assets: Option<f64> = optional(double, 30),
        pub market_info_list: Vec<AccMarketInfo> = repeated(message, 33),
    }
}

message! {
    pub struct Position {
        pub position_id: u64 = required(uint64, 1),
        pub position_side: i32 = required(int32, 2),
        pub code: String = required(string, 3),
        pub name: String = required(string, 4),
        pub qty: f64 = required(double, 5),
        pub can_sell_qty: f64 = required(double, 6),
        pub price: f64 = required(double, 7),
        pub cost_price: Option<f64> = optional(double, 8),
        pub val: f64 = required(double, 9),
        pub pl_val: f64 = required(double, 10),
        pub pl_ratio: Option<f64> = optional(double, 11),
        pub sec_market: Option<i32> = optional(int32, 12),
        pub currency: Option<i32> = optional(int32, 30),
        pub trd_market: Option<i32> = optional(int32, 31),
        pub diluted_cost_price: Option<f64> = optional(double, 32),
        pub average_cost_price: Option<f64> = optional(double, 33),
    }
}

message! {
    pub struct Order {
        pub trd_side: i32 = required(int32, 1),
        pub order_type: i32 = required(int32, 2),
        pub order_status: i32 = required(int32, 3),
        pub order_id: u64 = required(uint64, 4),
        pub order_id_ex: String = required(string, 5),
        pub code: String = required(string, 6),
        pub name: String = required(string, 7),
        pub qty: f64 = required(double, 8),
        pub price: Option<f64> = optional(double, 9),
        pub create_time: String = required(string, 10),
        pub update_time: String = required(string, 11),
        pub fill_qty: Option<f64> = optional(double, 12),
        pub fill_avg_price: Option<f64> = optional(double, 13),
        pub last_err_msg: Option<String> = optional(string, 14),
        pub sec_market: Option<i32> = optional(int32, 15),
        pub create_timestamp: Option<f64> = optional(double, 16),
        pub update_timestamp: Option<f64> = optional(double, 17),
        pub currency: Option<i32> = optional(int32, 25),
        pub trd_market: Option<i32> = optional(int32, 26),
    }
}

message! {
    pub struct OrderFeeItem {
        pub title: Option<String> = optional(string, 1),
        pub value: Option<f64> = optional(double, 2),
    }
}

message! {
    pub struct OrderFee {
        pub order_id_ex: String = required(string, 1),
        pub fee_amount: Option<f64> = optional(double, 2),
        pub fee_list: Vec<OrderFeeItem> = repeated(message, 3),
    }
}

message! {
    pub struct OrderFill {
        pub trd_side: i32 = required(int32, 1),
        pub fill_id: u64 = required(uint64, 2),
        pub fill_id_ex: String = required(string, 3),
        pub order_id: Option<u64> = optional(uint64, 4),
        pub order_id_ex: Option<String> = optional(string, 5),
        pub code: String = required(string, 6),
        pub name: String = required(string, 7),
        pub qty: f64 = required(double, 8),
        pub price: f64 = required(double, 9),
        pub create_time: String = required(string, 10),
        pub counter_broker_id: Option<i32> = optional(int32, 11),
        pub counter_broker_name: Option<String> = optional(string, 12),
        pub sec_market: Option<i32> = optional(int32, 13),
        pub create_timestamp: Option<f64> = optional(double, 14),
        pub update_timestamp: Option<f64> = optional(double, 15),
        pub status: Option<i32> = optional(int32, 16),
        pub trd_market: Option<i32> = optional(int32, 17),
    }
}

message! {
    pub struct TrdFilterConditions {
        pub code_list: Vec<String> = repeated(string, 1),
        pub id_list: Vec<u64> = repeated(uint64, 2, packed = "false"),
        pub begin_time: Option<String> = optional(string, 3),
        pub end_time: Option<String> = optional(string, 4),
        pub order_id_ex_list: Vec<String> = repeated(string, 5),
        pub filter_market: Option<i32> = optional(int32, 6),
    }
}

// ---- Trd_GetAccList.proto ----

message! {
    pub struct GetAccListC2s {
        pub user_id: u64 = required(uint64, 1),
        pub trd_category: Option<i32> = optional(int32, 2),
        pub need_general_sec_account: Option<bool> = optional(bool, 3),
    }
}

message! {
    pub struct GetAccListS2c {
        pub acc_list: Vec<TrdAcc> = repeated(message, 1),
    }
}
request_response!(trd_get_acc_list, super::GetAccListC2s, super::GetAccListS2c);

// ---- Trd_GetFunds.proto ----

message! {
    pub struct GetFundsC2s {
        pub header: TrdHeader = required(message, 1),
        pub refresh_cache: Option<bool> = optional(bool, 2),
        pub currency: Option<i32> = optional(int32, 3),
    }
}

message! {
    pub struct GetFundsS2c {
        pub header: TrdHeader = required(message, 1),
        pub funds: Option<Funds> = optional(message, 2),
    }
}
request_response!(trd_get_funds, super::GetFundsC2s, super::GetFundsS2c);

// ---- Trd_GetPositionList.proto ----

message! {
    pub struct GetPositionListC2s {
        pub header: TrdHeader = required(message, 1),
        pub filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        pub refresh_cache: Option<bool> = optional(bool, 5),
    }
}

message! {
    pub struct GetPositionListS2c {
        pub header: TrdHeader = required(message, 1),
        pub position_list: Vec<Position> = repeated(message, 2),
    }
}
request_response!(
    trd_get_position_list,
    super::GetPositionListC2s,
    super::GetPositionListS2c
);

// ---- Trd_GetHistoryOrderFillList.proto / Trd_GetHistoryOrderList.proto ----

message! {
    pub struct HistoryC2s {
        pub header: TrdHeader = required(message, 1),
        pub filter_conditions: TrdFilterConditions = required(message, 2),
        /// Trd_GetHistoryOrderList only.
        pub filter_status_list: Vec<i32> = repeated(int32, 3, packed = "false"),
    }
}

message! {
    pub struct HistoryFillS2c {
        pub header: TrdHeader = required(message, 1),
        pub order_fill_list: Vec<OrderFill> = repeated(message, 2),
    }
}
request_response!(
    trd_get_history_order_fill_list,
    super::HistoryC2s,
    super::HistoryFillS2c
);

message! {
    pub struct HistoryOrderS2c {
        pub header: TrdHeader = required(message, 1),
        pub order_list: Vec<Order> = repeated(message, 2),
    }
}
request_response!(
    trd_get_history_order_list,
    super::HistoryC2s,
    super::HistoryOrderS2c
);

// ---- Trd_GetOrderFillList.proto / Trd_GetOrderList.proto (today's) ----

message! {
    pub struct TodayFillC2s {
        pub header: TrdHeader = required(message, 1),
        pub filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        pub refresh_cache: Option<bool> = optional(bool, 3),
    }
}
request_response!(
    trd_get_order_fill_list,
    super::TodayFillC2s,
    super::HistoryFillS2c
);

message! {
    pub struct TodayOrderC2s {
        pub header: TrdHeader = required(message, 1),
        pub filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        pub filter_status_list: Vec<i32> = repeated(int32, 3, packed = "false"),
        pub refresh_cache: Option<bool> = optional(bool, 4),
    }
}
request_response!(
    trd_get_order_list,
    super::TodayOrderC2s,
    super::HistoryOrderS2c
);

// ---- Trd_GetOrderFee.proto ----

message! {
    pub struct GetOrderFeeC2s {
        pub header: TrdHeader = required(message, 1),
        pub order_id_ex_list: Vec<String> = repeated(string, 2),
    }
}

message! {
    pub struct GetOrderFeeS2c {
        pub header: TrdHeader = required(message, 1),
        pub order_fee_list: Vec<OrderFee> = repeated(message, 2),
    }
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

message! {
    pub struct SnapshotBasicData {
        pub security: Security = required(message, 1),
        pub name: Option<String> = optional(string, 41),
        pub r#type: i32 = required(int32, 2),
        pub is_suspend: bool = required(bool, 3),
        pub list_time: String = required(string, 4),
        pub lot_size: i32 = required(int32, 5),
        pub price_spread: f64 = required(double, 6),
        pub update_time: String = required(string, 7),
        pub high_price: f64 = required(double, 8),
        pub open_price: f64 = required(double, 9),
        pub low_price: f64 = required(double, 10),
        pub last_close_price: f64 = required(double, 11),
        pub cur_price: f64 = required(double, 12),
        pub volume: i64 = required(int64, 13),
        pub turnover: f64 = required(double, 14),
        pub turnover_rate: f64 = required(double, 15),
        pub update_timestamp: Option<f64> = optional(double, 17),
        pub ask_price: Option<f64> = optional(double, 18),
        pub bid_price: Option<f64> = optional(double, 19),
    }
}

message! {
    pub struct OptionSnapshotExData {
        pub r#type: i32 = required(int32, 1),
        pub owner: Security = required(message, 2),
        pub strike_time: String = required(string, 3),
        pub strike_price: f64 = required(double, 4),
        pub contract_size: i32 = required(int32, 5),
        pub open_interest: i32 = required(int32, 6),
        /// Required in the SDK's file (a percentage: 20 means 20%); `None` sends nothing, as
        /// an unkind OpenD would.
        pub implied_volatility: Option<f64> = optional(double, 7),
        pub premium: Option<f64> = optional(double, 8),
        pub delta: Option<f64> = optional(double, 9),
        pub gamma: Option<f64> = optional(double, 10),
        pub vega: Option<f64> = optional(double, 11),
        pub theta: Option<f64> = optional(double, 12),
        pub rho: Option<f64> = optional(double, 13),
        pub strike_timestamp: Option<f64> = optional(double, 14),
        pub expiry_date_distance: Option<i32> = optional(int32, 17),
        pub contract_multiplier: Option<f64> = optional(double, 21),
        pub contract_size_float: Option<f64> = optional(double, 22),
    }
}

message! {
    pub struct Snapshot {
        pub basic: SnapshotBasicData = required(message, 1),
        pub option_ex_data: Option<OptionSnapshotExData> = optional(message, 4),
    }
}

message! {
    pub struct GetSecuritySnapshotC2s {
        pub security_list: Vec<Security> = repeated(message, 1),
    }
}

message! {
    pub struct GetSecuritySnapshotS2c {
        pub snapshot_list: Vec<Snapshot> = repeated(message, 1),
    }
}
request_response!(
    qot_get_security_snapshot,
    super::GetSecuritySnapshotC2s,
    super::GetSecuritySnapshotS2c
);

message! {
    pub struct KLine {
        pub time: String = required(string, 1),
        pub is_blank: bool = required(bool, 2),
        pub high_price: Option<f64> = optional(double, 3),
        pub open_price: Option<f64> = optional(double, 4),
        pub low_price: Option<f64> = optional(double, 5),
        pub close_price: Option<f64> = optional(double, 6),
        pub last_close_price: Option<f64> = optional(double, 7),
        pub volume: Option<i64> = optional(int64, 8),
        pub turnover: Option<f64> = optional(double, 9),
        pub timestamp: Option<f64> = optional(double, 13),
    }
}

message! {
    pub struct RequestHistoryKlC2s {
        pub rehab_type: i32 = required(int32, 1),
        pub kl_type: i32 = required(int32, 2),
        pub security: Security = required(message, 3),
        pub begin_time: String = required(string, 4),
        pub end_time: String = required(string, 5),
        pub max_ack_kl_num: Option<i32> = optional(int32, 6),
        pub need_kl_fields_flag: Option<i64> = optional(int64, 7),
        pub next_req_key: Option<Vec<u8>> = optional(bytes, 8),
    }
}

message! {
    pub struct RequestHistoryKlS2c {
        pub security: Security = required(message, 1),
        pub name: Option<String> = optional(string, 4),
        pub kl_list: Vec<KLine> = repeated(message, 2),
        pub next_req_key: Option<Vec<u8>> = optional(bytes, 3),
    }
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

message! {
    pub struct SecurityStaticBasic {
        pub security: Security = required(message, 1),
        pub id: i64 = required(int64, 2),
        pub lot_size: i32 = required(int32, 3),
        pub sec_type: i32 = required(int32, 4),
        pub name: String = required(string, 5),
        pub list_time: String = required(string, 6),
        pub delisting: Option<bool> = optional(bool, 7),
        pub list_timestamp: Option<f64> = optional(double, 8),
        pub exch_type: Option<i32> = optional(int32, 9),
    }
}

message! {
    pub struct WarrantStaticExData {
        pub r#type: i32 = required(int32, 1),
        pub owner: Security = required(message, 2),
    }
}

message! {
    pub struct FutureStaticExData {
        pub last_trade_time: String = required(string, 1),
        pub last_trade_timestamp: Option<f64> = optional(double, 2),
        pub is_main_contract: bool = required(bool, 3),
    }
}

message! {
    pub struct OptionStaticExData {
        pub r#type: i32 = required(int32, 1),
        pub owner: Security = required(message, 2),
        pub strike_time: String = required(string, 3),
        pub strike_price: f64 = required(double, 4),
        pub suspend: bool = required(bool, 5),
        pub market: String = required(string, 6),
        pub strike_timestamp: Option<f64> = optional(double, 7),
    }
}

message! {
    pub struct SecurityStaticInfo {
        pub basic: SecurityStaticBasic = required(message, 1),
        pub warrant_ex_data: Option<WarrantStaticExData> = optional(message, 2),
        pub option_ex_data: Option<OptionStaticExData> = optional(message, 3),
        pub future_ex_data: Option<FutureStaticExData> = optional(message, 4),
    }
}

message! {
    pub struct GetStaticInfoC2s {
        pub market: Option<i32> = optional(int32, 1),
        pub sec_type: Option<i32> = optional(int32, 2),
        pub security_list: Vec<Security> = repeated(message, 3),
    }
}

message! {
    pub struct GetStaticInfoS2c {
        pub static_info_list: Vec<SecurityStaticInfo> = repeated(message, 1),
    }
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

message! {
    pub struct QotHeader {
        pub security_firm: Option<i32> = optional(int32, 1),
    }
}

message! {
    pub struct GetOptionExpirationDateC2s {
        pub owner: Security = required(message, 1),
        pub index_option_type: Option<i32> = optional(int32, 2),
        pub header: Option<QotHeader> = optional(message, 100),
    }
}

message! {
    pub struct OptionExpirationDate {
        pub strike_time: Option<String> = optional(string, 1),
        pub strike_timestamp: Option<f64> = optional(double, 2),
        pub option_expiry_date_distance: i32 = required(int32, 3),
        pub cycle: Option<i32> = optional(int32, 4),
    }
}

message! {
    pub struct GetOptionExpirationDateS2c {
        pub date_list: Vec<OptionExpirationDate> = repeated(message, 1),
    }
}
request_response!(
    qot_get_option_expiration_date,
    super::GetOptionExpirationDateC2s,
    super::GetOptionExpirationDateS2c
);

message! {
    pub struct GetOptionChainC2s {
        pub owner: Security = required(message, 1),
        pub index_option_type: Option<i32> = optional(int32, 6),
        pub r#type: Option<i32> = optional(int32, 2),
        pub condition: Option<i32> = optional(int32, 3),
        pub begin_time: String = required(string, 4),
        pub end_time: String = required(string, 5),
        pub header: Option<QotHeader> = optional(message, 100),
    }
}

message! {
    pub struct OptionItem {
        pub call: Option<SecurityStaticInfo> = optional(message, 1),
        pub put: Option<SecurityStaticInfo> = optional(message, 2),
    }
}

message! {
    pub struct OptionChain {
        pub strike_time: String = required(string, 1),
        pub option: Vec<OptionItem> = repeated(message, 2),
        pub strike_timestamp: Option<f64> = optional(double, 3),
    }
}

message! {
    pub struct GetOptionChainS2c {
        pub option_chain: Vec<OptionChain> = repeated(message, 1),
    }
}
request_response!(
    qot_get_option_chain,
    super::GetOptionChainC2s,
    super::GetOptionChainS2c
);
