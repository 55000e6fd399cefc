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

/// An OpenD message, one line a field: `name: RustType = label(proto type, field number)`
/// (prost's options after the number); every field public.
macro_rules! message {
    ($(#[$meta:meta])* pub struct $name:ident {
        $($(#[$doc:meta])* $field:ident: $ty:ty = $label:ident($kind:ident, $tag:tt $(, $opt:ident = $value:tt)*)),* $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, prost::Message)]
        pub struct $name {
            $($(#[$doc])* #[prost($kind, $label, tag = $tag $(, $opt = $value)*)] pub $field: $ty,)*
        }
    };
}

/// A request and its reply wrapper for one C2S / S2C pair: `Request { c2s = 1 }` and
/// `Response { retType = 1, retMsg = 2, errCode = 3, s2c = 4 }`.
macro_rules! wrappers {
    ($req:ident, $resp:ident, $c2s:ty, $s2c:ty) => {
        message! {
            pub struct $req {
                c2s: Option<$c2s> = optional(message, 1),
            }
        }

        message! {
            pub struct $resp {
                ret_type: Option<i32> = optional(int32, 1),
                ret_msg: Option<String> = optional(string, 2),
                err_code: Option<i32> = optional(int32, 3),
                s2c: Option<$s2c> = optional(message, 4),
            }
        }

        impl Ask for $req {
            type Reply = $resp;
        }

        impl Reply for $resp {
            fn ret(&self) -> (Option<i32>, Option<&str>) {
                (self.ret_type, self.ret_msg.as_deref())
            }
        }
    };
}

/// A request OpenD answers with `Reply`.
pub trait Ask: prost::Message {
    type Reply: Reply;
}

/// A reply: its `retType` and `retMsg`.
pub trait Reply: prost::Message + Default {
    fn ret(&self) -> (Option<i32>, Option<&str>);
}

message! {
    pub struct InitConnectC2s {
        client_ver: Option<i32> = optional(int32, 1),
        client_id: Option<String> = optional(string, 2),
        recv_notify: Option<bool> = optional(bool, 3),
        /// -1: no encryption (must be said: absent means OpenD's default, FTAES_ECB, when it
        /// has an RSA key).
        packet_enc_algo: Option<i32> = optional(int32, 4),
        push_proto_fmt: Option<i32> = optional(int32, 5),
        programming_language: Option<String> = optional(string, 6),
    }
}

message! {
    pub struct InitConnectS2c {
        server_ver: Option<i32> = optional(int32, 1),
        login_user_id: Option<u64> = optional(uint64, 2),
        conn_id: Option<u64> = optional(uint64, 3),
        conn_aes_key: Option<String> = optional(string, 4),
        /// Seconds.
        keep_alive_interval: Option<i32> = optional(int32, 5),
        aes_cbc_iv: Option<String> = optional(string, 6),
        user_attribution: Option<i32> = optional(int32, 7),
    }
}
wrappers!(
    InitConnectRequest,
    InitConnectResponse,
    InitConnectC2s,
    InitConnectS2c
);

message! {
    pub struct KeepAliveC2s {
        time: Option<i64> = optional(int64, 1),
    }
}

message! {
    pub struct KeepAliveS2c {
        time: Option<i64> = optional(int64, 1),
    }
}
wrappers!(
    KeepAliveRequest,
    KeepAliveResponse,
    KeepAliveC2s,
    KeepAliveS2c
);

message! {
    pub struct TrdHeader {
        trd_env: Option<i32> = optional(int32, 1),
        acc_id: Option<u64> = optional(uint64, 2),
        trd_market: Option<i32> = optional(int32, 3),
    }
}

message! {
    pub struct TrdAcc {
        trd_env: Option<i32> = optional(int32, 1),
        acc_id: Option<u64> = optional(uint64, 2),
        trd_market_auth_list: Vec<i32> = repeated(int32, 3, packed = "false"),
        acc_type: Option<i32> = optional(int32, 4),
        card_num: Option<String> = optional(string, 5),
        security_firm: Option<i32> = optional(int32, 6),
        acc_status: Option<i32> = optional(int32, 9),
    }
}

message! {
    pub struct GetAccListC2s {
        user_id: Option<u64> = optional(uint64, 1),
        trd_category: Option<i32> = optional(int32, 2),
        need_general_sec_account: Option<bool> = optional(bool, 3),
    }
}

message! {
    pub struct GetAccListS2c {
        acc_list: Vec<TrdAcc> = repeated(message, 1),
    }
}
wrappers!(
    GetAccListRequest,
    GetAccListResponse,
    GetAccListC2s,
    GetAccListS2c
);

message! {
    pub struct AccCashInfo {
        currency: Option<i32> = optional(int32, 1),
        cash: Option<f64> = optional(double, 2),
        available_balance: Option<f64> = optional(double, 3),
        net_cash_power: Option<f64> = optional(double, 4),
    }
}

message! {
    pub struct Funds {
        power: Option<f64> = optional(double, 1),
        total_assets: Option<f64> = optional(double, 2),
        cash: Option<f64> = optional(double, 3),
        market_val: Option<f64> = optional(double, 4),
        frozen_cash: Option<f64> = optional(double, 5),
        debt_cash: Option<f64> = optional(double, 6),
        avl_withdrawal_cash: Option<f64> = optional(double, 7),
        currency: Option<i32> = optional(int32, 8),
        maintenance_margin: Option<f64> = optional(double, 14),
        cash_info_list: Vec<AccCashInfo> = repeated(message, 15),
    }
}

message! {
    pub struct GetFundsC2s {
        header: Option<TrdHeader> = optional(message, 1),
        refresh_cache: Option<bool> = optional(bool, 2),
        currency: Option<i32> = optional(int32, 3),
    }
}

message! {
    pub struct GetFundsS2c {
        header: Option<TrdHeader> = optional(message, 1),
        funds: Option<Funds> = optional(message, 2),
    }
}
wrappers!(GetFundsRequest, GetFundsResponse, GetFundsC2s, GetFundsS2c);

message! {
    pub struct TrdFilterConditions {
        code_list: Vec<String> = repeated(string, 1),
        id_list: Vec<u64> = repeated(uint64, 2, packed = "false"),
        begin_time: Option<String> = optional(string, 3),
        end_time: Option<String> = optional(string, 4),
        order_id_ex_list: Vec<String> = repeated(string, 5),
        filter_market: Option<i32> = optional(int32, 6),
    }
}

message! {
    pub struct Position {
        position_id: Option<u64> = optional(uint64, 1),
        /// 0 long, 1 short.
        position_side: Option<i32> = optional(int32, 2),
        code: Option<String> = optional(string, 3),
        name: Option<String> = optional(string, 4),
        qty: Option<f64> = optional(double, 5),
        can_sell_qty: Option<f64> = optional(double, 6),
        price: Option<f64> = optional(double, 7),
        val: Option<f64> = optional(double, 9),
        pl_val: Option<f64> = optional(double, 10),
        sec_market: Option<i32> = optional(int32, 12),
        currency: Option<i32> = optional(int32, 30),
        trd_market: Option<i32> = optional(int32, 31),
        average_cost_price: Option<f64> = optional(double, 33),
    }
}

message! {
    pub struct GetPositionListC2s {
        header: Option<TrdHeader> = optional(message, 1),
        filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        refresh_cache: Option<bool> = optional(bool, 5),
    }
}

message! {
    pub struct GetPositionListS2c {
        header: Option<TrdHeader> = optional(message, 1),
        position_list: Vec<Position> = repeated(message, 2),
    }
}
wrappers!(
    GetPositionListRequest,
    GetPositionListResponse,
    GetPositionListC2s,
    GetPositionListS2c
);

message! {
    pub struct OrderFill {
        /// 1 buy, 2 sell, 3 sell short, 4 buy back.
        trd_side: Option<i32> = optional(int32, 1),
        fill_id: Option<u64> = optional(uint64, 2),
        fill_id_ex: Option<String> = optional(string, 3),
        order_id: Option<u64> = optional(uint64, 4),
        order_id_ex: Option<String> = optional(string, 5),
        code: Option<String> = optional(string, 6),
        name: Option<String> = optional(string, 7),
        qty: Option<f64> = optional(double, 8),
        price: Option<f64> = optional(double, 9),
        /// `YYYY-MM-DD HH:MM:SS[.mmm]`, in the exchange's time zone.
        create_time: Option<String> = optional(string, 10),
        sec_market: Option<i32> = optional(int32, 13),
        create_timestamp: Option<f64> = optional(double, 14),
        /// 0 ok, 1 cancelled, 2 changed.
        status: Option<i32> = optional(int32, 16),
        trd_market: Option<i32> = optional(int32, 17),
    }
}

message! {
    pub struct GetHistoryOrderFillListC2s {
        header: Option<TrdHeader> = optional(message, 1),
        filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
    }
}

message! {
    pub struct GetHistoryOrderFillListS2c {
        header: Option<TrdHeader> = optional(message, 1),
        order_fill_list: Vec<OrderFill> = repeated(message, 2),
    }
}
wrappers!(
    GetHistoryOrderFillListRequest,
    GetHistoryOrderFillListResponse,
    GetHistoryOrderFillListC2s,
    GetHistoryOrderFillListS2c
);

message! {
    /// Trd_Common.Order: only what a filled order's book entry needs.
    pub struct Order {
        /// 1 buy, 2 sell, 3 sell short, 4 buy back.
        trd_side: Option<i32> = optional(int32, 1),
        order_status: Option<i32> = optional(int32, 3),
        order_id: Option<u64> = optional(uint64, 4),
        order_id_ex: Option<String> = optional(string, 5),
        code: Option<String> = optional(string, 6),
        name: Option<String> = optional(string, 7),
        qty: Option<f64> = optional(double, 8),
        create_time: Option<String> = optional(string, 10),
        /// The order's last change: for a filled order, when its last fill came.
        update_time: Option<String> = optional(string, 11),
        fill_qty: Option<f64> = optional(double, 12),
        fill_avg_price: Option<f64> = optional(double, 13),
        sec_market: Option<i32> = optional(int32, 15),
        trd_market: Option<i32> = optional(int32, 26),
    }
}

message! {
    pub struct GetHistoryOrderListC2s {
        header: Option<TrdHeader> = optional(message, 1),
        filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        filter_status_list: Vec<i32> = repeated(int32, 3, packed = "false"),
    }
}

message! {
    pub struct GetHistoryOrderListS2c {
        header: Option<TrdHeader> = optional(message, 1),
        order_list: Vec<Order> = repeated(message, 2),
    }
}
wrappers!(
    GetHistoryOrderListRequest,
    GetHistoryOrderListResponse,
    GetHistoryOrderListC2s,
    GetHistoryOrderListS2c
);

message! {
    /// Trd_GetOrderFillList (2211): today's fills; the filter is optional.
    pub struct GetOrderFillListC2s {
        header: Option<TrdHeader> = optional(message, 1),
        filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        /// false: OpenD's own copy (kept current by the server's pushes).
        refresh_cache: Option<bool> = optional(bool, 3),
    }
}

message! {
    pub struct GetOrderFillListS2c {
        header: Option<TrdHeader> = optional(message, 1),
        order_fill_list: Vec<OrderFill> = repeated(message, 2),
    }
}
wrappers!(
    GetOrderFillListRequest,
    GetOrderFillListResponse,
    GetOrderFillListC2s,
    GetOrderFillListS2c
);

message! {
    /// Trd_GetOrderList (2201): today's orders; the filter is optional.
    pub struct GetOrderListC2s {
        header: Option<TrdHeader> = optional(message, 1),
        filter_conditions: Option<TrdFilterConditions> = optional(message, 2),
        filter_status_list: Vec<i32> = repeated(int32, 3, packed = "false"),
        refresh_cache: Option<bool> = optional(bool, 4),
    }
}

message! {
    pub struct GetOrderListS2c {
        header: Option<TrdHeader> = optional(message, 1),
        order_list: Vec<Order> = repeated(message, 2),
    }
}
wrappers!(
    GetOrderListRequest,
    GetOrderListResponse,
    GetOrderListC2s,
    GetOrderListS2c
);

message! {
    pub struct OrderFeeItem {
        title: Option<String> = optional(string, 1),
        value: Option<f64> = optional(double, 2),
    }
}

message! {
    pub struct OrderFee {
        order_id_ex: Option<String> = optional(string, 1),
        fee_amount: Option<f64> = optional(double, 2),
        fee_list: Vec<OrderFeeItem> = repeated(message, 3),
    }
}

message! {
    pub struct GetOrderFeeC2s {
        header: Option<TrdHeader> = optional(message, 1),
        order_id_ex_list: Vec<String> = repeated(string, 2),
    }
}

message! {
    pub struct GetOrderFeeS2c {
        header: Option<TrdHeader> = optional(message, 1),
        order_fee_list: Vec<OrderFee> = repeated(message, 2),
    }
}
wrappers!(
    GetOrderFeeRequest,
    GetOrderFeeResponse,
    GetOrderFeeC2s,
    GetOrderFeeS2c
);

message! {
    pub struct Security {
        market: Option<i32> = optional(int32, 1),
        code: Option<String> = optional(string, 2),
    }
}

message! {
    pub struct SnapshotBasicData {
        security: Option<Security> = optional(message, 1),
        r#type: Option<i32> = optional(int32, 2),
        is_suspend: Option<bool> = optional(bool, 3),
        list_time: Option<String> = optional(string, 4),
        lot_size: Option<i32> = optional(int32, 5),
        price_spread: Option<f64> = optional(double, 6),
        update_time: Option<String> = optional(string, 7),
        high_price: Option<f64> = optional(double, 8),
        open_price: Option<f64> = optional(double, 9),
        low_price: Option<f64> = optional(double, 10),
        last_close_price: Option<f64> = optional(double, 11),
        cur_price: Option<f64> = optional(double, 12),
        volume: Option<i64> = optional(int64, 13),
        turnover: Option<f64> = optional(double, 14),
        turnover_rate: Option<f64> = optional(double, 15),
        update_timestamp: Option<f64> = optional(double, 17),
        ask_price: Option<f64> = optional(double, 18),
        bid_price: Option<f64> = optional(double, 19),
        name: Option<String> = optional(string, 41),
    }
}

message! {
    /// An option's extra snapshot data (Qot_GetSecuritySnapshot.OptionSnapshotExData).
    pub struct OptionSnapshotExData {
        /// `Qot_Common.OptionType`: 1 call, 2 put.
        r#type: Option<i32> = optional(int32, 1),
        owner: Option<Security> = optional(message, 2),
        /// `yyyy-MM-dd`.
        strike_time: Option<String> = optional(string, 3),
        strike_price: Option<f64> = optional(double, 4),
        /// Shares per contract, as an integer.
        contract_size: Option<i32> = optional(int32, 5),
        open_interest: Option<i32> = optional(int32, 6),
        /// A percentage: 20 means 20%.
        implied_volatility: Option<f64> = optional(double, 7),
        /// A percentage.
        premium: Option<f64> = optional(double, 8),
        delta: Option<f64> = optional(double, 9),
        gamma: Option<f64> = optional(double, 10),
        vega: Option<f64> = optional(double, 11),
        theta: Option<f64> = optional(double, 12),
        rho: Option<f64> = optional(double, 13),
        contract_multiplier: Option<f64> = optional(double, 21),
        /// Shares per contract, as a float (newer OpenD; adjusted contracts).
        contract_size_float: Option<f64> = optional(double, 22),
    }
}

message! {
    pub struct Snapshot {
        basic: Option<SnapshotBasicData> = optional(message, 1),
        option_ex_data: Option<OptionSnapshotExData> = optional(message, 4),
    }
}

message! {
    pub struct GetSecuritySnapshotC2s {
        security_list: Vec<Security> = repeated(message, 1),
    }
}

message! {
    pub struct GetSecuritySnapshotS2c {
        snapshot_list: Vec<Snapshot> = repeated(message, 1),
    }
}
wrappers!(
    GetSecuritySnapshotRequest,
    GetSecuritySnapshotResponse,
    GetSecuritySnapshotC2s,
    GetSecuritySnapshotS2c
);

message! {
    pub struct KLine {
        /// `YYYY-MM-DD HH:MM:SS`, exchange time.
        time: Option<String> = optional(string, 1),
        is_blank: Option<bool> = optional(bool, 2),
        high_price: Option<f64> = optional(double, 3),
        open_price: Option<f64> = optional(double, 4),
        low_price: Option<f64> = optional(double, 5),
        close_price: Option<f64> = optional(double, 6),
        last_close_price: Option<f64> = optional(double, 7),
        volume: Option<i64> = optional(int64, 8),
        turnover: Option<f64> = optional(double, 9),
        timestamp: Option<f64> = optional(double, 13),
    }
}

message! {
    pub struct RequestHistoryKlC2s {
        /// 0 none, 1 forward, 2 backward.
        rehab_type: Option<i32> = optional(int32, 1),
        /// 1 1-min, 2 day, 6 5-min, 7 15-min, 9 60-min.
        kl_type: Option<i32> = optional(int32, 2),
        security: Option<Security> = optional(message, 3),
        begin_time: Option<String> = optional(string, 4),
        end_time: Option<String> = optional(string, 5),
        max_ack_kl_num: Option<i32> = optional(int32, 6),
        need_kl_fields_flag: Option<i64> = optional(int64, 7),
        next_req_key: Option<Vec<u8>> = optional(bytes, 8),
    }
}

message! {
    pub struct RequestHistoryKlS2c {
        security: Option<Security> = optional(message, 1),
        kl_list: Vec<KLine> = repeated(message, 2),
        next_req_key: Option<Vec<u8>> = optional(bytes, 3),
        name: Option<String> = optional(string, 4),
    }
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

message! {
    pub struct GetStaticInfoC2s {
        /// `QotMarket`; ignored by OpenD when `security_list` is given.
        market: Option<i32> = optional(int32, 1),
        /// `SecurityType`.
        sec_type: Option<i32> = optional(int32, 2),
        security_list: Vec<Security> = repeated(message, 3),
    }
}

message! {
    pub struct SecurityStaticBasic {
        security: Option<Security> = optional(message, 1),
        id: Option<i64> = optional(int64, 2),
        /// Shares per board lot; for options and futures, the contract multiplier.
        lot_size: Option<i32> = optional(int32, 3),
        sec_type: Option<i32> = optional(int32, 4),
        name: Option<String> = optional(string, 5),
        list_time: Option<String> = optional(string, 6),
        delisting: Option<bool> = optional(bool, 7),
        /// `ExchType`.
        exch_type: Option<i32> = optional(int32, 9),
    }
}

message! {
    /// `Qot_Common.OptionStaticExData`: an option's static data.
    pub struct OptionStaticExData {
        /// `Qot_Common.OptionType`: 1 call, 2 put.
        r#type: Option<i32> = optional(int32, 1),
        owner: Option<Security> = optional(message, 2),
        /// The expiry, `yyyy-MM-dd`.
        strike_time: Option<String> = optional(string, 3),
        strike_price: Option<f64> = optional(double, 4),
        suspend: Option<bool> = optional(bool, 5),
    }
}

message! {
    pub struct SecurityStaticInfo {
        basic: Option<SecurityStaticBasic> = optional(message, 1),
        option_ex_data: Option<OptionStaticExData> = optional(message, 3),
    }
}

message! {
    pub struct GetStaticInfoS2c {
        static_info_list: Vec<SecurityStaticInfo> = repeated(message, 1),
    }
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

message! {
    pub struct GetOptionExpirationDateC2s {
        owner: Option<Security> = optional(message, 1),
    }
}

message! {
    pub struct OptionExpirationDate {
        /// `yyyy-MM-dd` (the exchange's date).
        strike_time: Option<String> = optional(string, 1),
        strike_timestamp: Option<f64> = optional(double, 2),
        /// Days to expiry; negative: expired.
        option_expiry_date_distance: Option<i32> = optional(int32, 3),
    }
}

message! {
    pub struct GetOptionExpirationDateS2c {
        date_list: Vec<OptionExpirationDate> = repeated(message, 1),
    }
}
wrappers!(
    GetOptionExpirationDateRequest,
    GetOptionExpirationDateResponse,
    GetOptionExpirationDateC2s,
    GetOptionExpirationDateS2c
);

message! {
    pub struct GetOptionChainC2s {
        owner: Option<Security> = optional(message, 1),
        /// `yyyy-MM-dd`: the first expiry of the window.
        begin_time: Option<String> = optional(string, 4),
        /// `yyyy-MM-dd`: the last expiry of the window (at most 30 days after the first).
        end_time: Option<String> = optional(string, 5),
    }
}

message! {
    pub struct OptionItem {
        call: Option<SecurityStaticInfo> = optional(message, 1),
        put: Option<SecurityStaticInfo> = optional(message, 2),
    }
}

message! {
    pub struct OptionChainOfExpiry {
        strike_time: Option<String> = optional(string, 1),
        option: Vec<OptionItem> = repeated(message, 2),
        strike_timestamp: Option<f64> = optional(double, 3),
    }
}

message! {
    pub struct GetOptionChainS2c {
        option_chain: Vec<OptionChainOfExpiry> = repeated(message, 1),
    }
}
wrappers!(
    GetOptionChainRequest,
    GetOptionChainResponse,
    GetOptionChainC2s,
    GetOptionChainS2c
);
