//! Trading through the tools, on the embedded paper exchange with a hand-moved clock:
//! every validation and policy rule, the ways around them, tokens, idempotency under
//! concurrency, the sim's matching, and the paper fills in the portfolio tools.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::float_arithmetic
)]

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Duration, TimeZone, Utc};
use rust_decimal::Decimal;
use serde_json::{Value, json};
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::sim::{Clock, ManualClock, SimBroker, SimConfig};
use tradedesk_brokers::{
    AccountHealth, BookBroker, Broker, BrokerError, OrderFilter, OrderRef, Placed,
};
use tradedesk_core::{
    Account, Bar, Book, Interval, Mode, OrderRecord, OrderRequest, Quote, TradableInstrument,
};
use tradedesk_store::audit::{Verdict, verify};
use tradedesk_tools::config::{State, TradingConfig, trading_for};
use tradedesk_tools::{ToolContext, call};

fn start() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 11, 30, 15, 0, 0).unwrap()
}

/// A trading desk on a fresh state directory: the demo book plus sim accounts.
struct Desk {
    ctx: ToolContext,
    clock: Arc<ManualClock>,
    state: State,
    _dir: tempfile::TempDir,
}

struct Setup {
    trading: TradingConfig,
    sims: Vec<&'static str>,
    live: Vec<String>,
    /// Wraps the first sim (a broker that misbehaves on purpose).
    wrap: Option<fn(SimBroker) -> Arc<dyn Broker>>,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            trading: TradingConfig {
                enabled: Some(true),
                ..TradingConfig::default()
            },
            sims: vec!["SIM"],
            live: Vec::new(),
            wrap: None,
        }
    }
}

fn desk_with(setup: Setup) -> Desk {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    desk_on(setup, dir, state)
}

fn desk_on(setup: Setup, dir: tempfile::TempDir, state: State) -> Desk {
    let clock = Arc::new(ManualClock::new(start()));
    let book = demo_book().unwrap();
    let mut ctx = ToolContext::new("test")
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book.clone())), None);
    for (i, id) in setup.sims.iter().enumerate() {
        let sim = SimBroker::new(
            SimConfig::new(*id),
            &book,
            Arc::clone(&state.store),
            Arc::clone(&clock) as Arc<dyn Clock>,
        );
        let broker: Arc<dyn Broker> = match (i, setup.wrap) {
            (0, Some(wrap)) => wrap(sim),
            _ => Arc::new(sim),
        };
        ctx = ctx.with_broker(broker, None);
    }
    let trading = trading_for(
        Some(&setup.trading),
        setup.live,
        &state,
        Arc::clone(&clock) as Arc<dyn Clock>,
    )
    .unwrap();
    Desk {
        ctx: ctx.with_trading(Arc::new(trading)),
        clock,
        state,
        _dir: dir,
    }
}

fn desk() -> Desk {
    desk_with(Setup::default())
}

fn limits(f: impl FnOnce(&mut TradingConfig)) -> Setup {
    let mut setup = Setup::default();
    f(&mut setup.trading);
    setup
}

fn number(n: i64) -> Option<tradedesk_tools::config::ConfigNumber> {
    Some(tradedesk_tools::config::ConfigNumber::Int(n))
}

impl Desk {
    async fn call(&self, tool: &str, args: Value) -> Value {
        call(&self.ctx, tool, args).await.unwrap().structured
    }

    async fn ok(&self, tool: &str, args: Value) -> Value {
        let v = self.call(tool, args.clone()).await;
        assert_eq!(v["status"], "ok", "{tool} {args}: {v:#}");
        v
    }

    /// The error's code and rule.
    async fn refused(&self, tool: &str, args: Value) -> (String, String, Value) {
        let v = self.call(tool, args.clone()).await;
        assert_eq!(v["status"], "error", "{tool} {args} was not refused: {v:#}");
        (
            v["error"]["code"].as_str().unwrap().to_owned(),
            v["error"]["rule"].as_str().unwrap_or("").to_owned(),
            v,
        )
    }

    async fn orders(&self) -> Vec<Value> {
        self.ok("get_orders", json!({"status": "all", "limit": 500}))
            .await["orders"]
            .as_array()
            .unwrap()
            .clone()
    }

    fn audit_intact(&self) -> u64 {
        match self.state.store.read(verify).unwrap() {
            Verdict::Intact { entries } => entries,
            Verdict::Broken { seq, reason } => panic!("audit broken at {seq}: {reason}"),
        }
    }
}

fn order(symbol: &str, side: &str, extra: Value) -> Value {
    let mut base = json!({"account": "SIM", "symbol": symbol, "side": side});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            base[k] = v;
        }
    }
    base
}

/// One rule case: an order and the error code and rule it must be refused with.
struct RuleCase {
    name: &'static str,
    order: Value,
    code: &'static str,
    rule: &'static str,
}

#[tokio::test]
async fn every_validation_rule_refuses_with_its_own_name() {
    let d = desk();
    let q = d
        .ok("get_quote", json!({"account": "SIM", "symbol": "AAPL"}))
        .await;
    let ask = q["ask"].as_f64().unwrap();
    let bid = q["bid"].as_f64().unwrap();
    let cases = [
        RuleCase {
            name: "TC1: both quantity and notional",
            order: order("AAPL", "buy", json!({"quantity": 1, "notional": 100})),
            code: "invalid_quantity",
            rule: "quantity_or_notional",
        },
        RuleCase {
            name: "TC2: neither quantity nor notional",
            order: order("AAPL", "buy", json!({})),
            code: "invalid_quantity",
            rule: "quantity_or_notional",
        },
        RuleCase {
            name: "a magic number on a broker without them",
            order: order("AAPL", "buy", json!({"quantity": 1, "magic": 7})),
            code: "invalid_order",
            rule: "magic_supported",
        },
        RuleCase {
            name: "a MetaTrader ticket on an account without tickets",
            order: order("AAPL", "sell", json!({"quantity": 1, "ticket": "1"})),
            code: "invalid_order",
            rule: "ticket_found",
        },
        RuleCase {
            name: "TC3: zero quantity",
            order: order("AAPL", "buy", json!({"quantity": 0})),
            code: "invalid_quantity",
            rule: "quantity_positive",
        },
        RuleCase {
            name: "TC4: negative quantity",
            order: order("AAPL", "buy", json!({"quantity": -3})),
            code: "invalid_quantity",
            rule: "quantity_positive",
        },
        RuleCase {
            name: "TC5: FX off the 0.01 lot step",
            order: order("EURUSD", "buy", json!({"quantity": 0.015})),
            code: "invalid_quantity",
            rule: "lot_step",
        },
        RuleCase {
            name: "TC6: Bursa off the 100-share board lot",
            order: order("1155", "buy", json!({"quantity": 50})),
            code: "invalid_quantity",
            rule: "lot_step",
        },
        RuleCase {
            name: "TC7: a notional too small for one share",
            order: order("AAPL", "buy", json!({"notional": 1})),
            code: "invalid_quantity",
            rule: "min_quantity",
        },
        RuleCase {
            name: "TC8: above the maximum lots",
            order: order("EURUSD", "buy", json!({"quantity": 51})),
            code: "invalid_quantity",
            rule: "max_quantity",
        },
        RuleCase {
            name: "TC9: limit without limit_price",
            order: order("AAPL", "buy", json!({"quantity": 1, "type": "limit"})),
            code: "invalid_order",
            rule: "prices_match_type",
        },
        RuleCase {
            name: "TC10: market with a limit_price",
            order: order("AAPL", "buy", json!({"quantity": 1, "limit_price": 200})),
            code: "invalid_order",
            rule: "prices_match_type",
        },
        RuleCase {
            name: "TC11: stop_limit without stop_price",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "type": "stop_limit", "limit_price": 290}),
            ),
            code: "invalid_order",
            rule: "prices_match_type",
        },
        RuleCase {
            name: "TC12: a negative limit price",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "type": "limit", "limit_price": -5}),
            ),
            code: "invalid_order",
            rule: "price_positive",
        },
        RuleCase {
            name: "TC13: a limit off the tick",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "type": "limit", "limit_price": 270.001}),
            ),
            code: "invalid_order",
            rule: "tick_size",
        },
        RuleCase {
            name: "TC14: buy with stop-loss above take-profit",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "stop_loss": 300, "take_profit": 290}),
            ),
            code: "invalid_order",
            rule: "sl_above_tp",
        },
        RuleCase {
            name: "TC15: buy with stop-loss above the price",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "stop_loss": (ask + 5.0).round()}),
            ),
            code: "invalid_order",
            rule: "sl_above_price",
        },
        RuleCase {
            name: "TC16: buy with take-profit below the price",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "take_profit": (ask - 5.0).round()}),
            ),
            code: "invalid_order",
            rule: "tp_below_price",
        },
        RuleCase {
            name: "TC17: sell with stop-loss below take-profit",
            order: order(
                "AAPL",
                "sell",
                json!({"quantity": 1, "stop_loss": 250, "take_profit": 260}),
            ),
            code: "invalid_order",
            rule: "sl_below_tp",
        },
        RuleCase {
            name: "TC18: sell with stop-loss below the price",
            order: order(
                "AAPL",
                "sell",
                json!({"quantity": 1, "stop_loss": (bid - 5.0).round()}),
            ),
            code: "invalid_order",
            rule: "sl_below_price",
        },
        RuleCase {
            name: "TC19: sell with take-profit above the price",
            order: order(
                "AAPL",
                "sell",
                json!({"quantity": 1, "take_profit": (bid + 5.0).round()}),
            ),
            code: "invalid_order",
            rule: "tp_above_price",
        },
        RuleCase {
            name: "TC20: a 32-character comment",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "comment": "x".repeat(32)}),
            ),
            code: "invalid_order",
            rule: "comment_length",
        },
        RuleCase {
            name: "TC21: a client order id with a space",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "client_order_id": "my order"}),
            ),
            code: "invalid_order",
            rule: "client_order_id_format",
        },
        RuleCase {
            name: "TC23: a quantity too large to value (no overflow, no panic)",
            order: order("EURUSD", "buy", json!({"quantity": 1e27})),
            code: "invalid_quantity",
            rule: "max_quantity",
        },
        RuleCase {
            name: "TC24: a price too large to value",
            order: order(
                "EURUSD",
                "buy",
                json!({"quantity": 50, "type": "limit", "limit_price": 1e25}),
            ),
            code: "limit_exceeded",
            rule: "max_order_notional",
        },
        RuleCase {
            name: "TC22: a 65-character client order id",
            order: order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "client_order_id": "a".repeat(65)}),
            ),
            code: "invalid_order",
            rule: "client_order_id_format",
        },
    ];
    for case in &cases {
        let (code, rule, v) = d.refused("place_order", case.order.clone()).await;
        assert_eq!(
            (code.as_str(), rule.as_str()),
            (case.code, case.rule),
            "{}: {v:#}",
            case.name
        );
        assert!(
            !v["error"]["hint"].as_str().unwrap().is_empty(),
            "{}",
            case.name
        );
        let preview = d.ok("preview_order", case.order.clone()).await;
        assert_eq!(preview["allowed"], false, "{}", case.name);
        assert!(preview["confirmation_token"].is_null(), "{}", case.name);
        let failed: Vec<&str> = preview["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["passed"] == false)
            .map(|c| c["rule"].as_str().unwrap())
            .collect();
        assert!(failed.contains(&case.rule), "{}: {failed:?}", case.name);
    }
    // A 31-character comment is fine; nothing above placed anything.
    d.ok(
        "place_order",
        order(
            "AAPL",
            "buy",
            json!({"quantity": 1, "comment": "y".repeat(31)}),
        ),
    )
    .await;
    assert_eq!(d.orders().await.len(), 1);
}

#[tokio::test]
async fn accounts_symbols_and_modes_are_checked_before_anything_else() {
    let d = desk();
    let (code, ..) = d
        .refused(
            "place_order",
            json!({"account": "NOPE", "symbol": "AAPL", "side": "buy", "quantity": 1}),
        )
        .await;
    assert_eq!(code, "unknown_account");
    let (code, ..) = d
        .refused("place_order", order("ZZZZ", "buy", json!({"quantity": 1})))
        .await;
    assert_eq!(code, "unknown_symbol");
    let (code, _, v) = d
        .refused(
            "place_order",
            json!({"account": "IBKR-DEMO", "symbol": "AAPL", "side": "buy", "quantity": 1}),
        )
        .await;
    assert_eq!(code, "not_supported", "{v:#}");
    let (code, ..) = d
        .refused(
            "place_order",
            order("AAPL", "buy", json!({"quantity": 1, "mode": "live"})),
        )
        .await;
    assert_eq!(code, "live_not_allowed");
    // Unknown arguments and bad enums are invalid_argument naming them.
    let (code, _, v) = d
        .refused(
            "place_order",
            order("AAPL", "buy", json!({"quantity": 1, "price": 3})),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    assert!(v["error"]["message"].as_str().unwrap().contains("price"));
    let (code, ..) = d
        .refused("place_order", order("AAPL", "hold", json!({"quantity": 1})))
        .await;
    assert_eq!(code, "invalid_argument");
}

#[tokio::test]
async fn an_order_is_valued_at_the_highest_price_written_on_it() {
    let d = desk();
    // Around 276 a share, 3 shares look like 830 USD, under the 1000 cap; a limit of
    // 10000 could fill far higher, so the order is valued at 30000 and refused.
    let (code, rule, v) = d
        .refused(
            "place_order",
            order(
                "AAPL",
                "buy",
                json!({"quantity": 3, "type": "limit", "limit_price": 10000}),
            ),
        )
        .await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("limit_exceeded", "max_order_notional")
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("30000"),
        "{v:#}"
    );
    // A stop far above the market: valued at the stop.
    let (_, rule, _) = d
        .refused(
            "place_order",
            order(
                "AAPL",
                "buy",
                json!({"quantity": 3, "type": "stop", "stop_price": 5000}),
            ),
        )
        .await;
    assert_eq!(rule, "max_order_notional");
    // A stop-limit: the higher of the two.
    let p = d
        .ok(
            "preview_order",
            order(
                "AAPL",
                "buy",
                json!({"quantity": 3, "type": "stop_limit", "stop_price": 290, "limit_price": 330}),
            ),
        )
        .await;
    assert_eq!(p["estimate"]["price"], 330.0);
    assert_eq!(p["estimate"]["notional_base"], 990.0);
    // A sell limit far above the bid can fill there later: valued at the limit.
    let (_, rule, _) = d
        .refused(
            "place_order",
            order(
                "AAPL",
                "sell",
                json!({"quantity": 3, "type": "limit", "limit_price": 9000}),
            ),
        )
        .await;
    assert_eq!(rule, "max_order_notional");
    // A notional order is valued at its notional.
    let (_, rule, _) = d
        .refused(
            "place_order",
            order("AAPL", "buy", json!({"notional": 5000})),
        )
        .await;
    assert_eq!(rule, "max_order_notional");
    let p = d
        .ok(
            "preview_order",
            order("AAPL", "buy", json!({"notional": 900})),
        )
        .await;
    assert_eq!(p["estimate"]["notional_base"], 900.0);
    assert_eq!(p["allowed"], true);
    assert!(d.orders().await.is_empty());
}

#[tokio::test]
async fn caps_are_in_the_base_currency_whatever_the_order_is_priced_in() {
    let d = desk();
    // Bursa shares are priced in ringgit: RM 2,000+ is about USD 440, under the cap.
    let q = d
        .ok("get_quote", json!({"account": "SIM", "symbol": "1155"}))
        .await;
    let ask: Decimal = q["ask"].to_string().parse().unwrap();
    let p = d
        .ok(
            "preview_order",
            order("1155", "buy", json!({"quantity": 200})),
        )
        .await;
    let myr = ask * Decimal::from(200);
    let usd: Decimal = p["estimate"]["notional_base"].to_string().parse().unwrap();
    assert_eq!(p["estimate"]["currency"], "MYR");
    assert!(
        usd < myr / Decimal::from(4) && usd > myr / Decimal::from(5),
        "{usd} for RM {myr}"
    );
    assert_eq!(p["allowed"], true);
    // 500 shares is over RM 5,000: only about USD 1,100, but that is over the 1000 cap.
    let (_, rule, v) = d
        .refused(
            "place_order",
            order("1155", "buy", json!({"quantity": 500})),
        )
        .await;
    assert_eq!(rule, "max_order_notional", "{v:#}");
    // USDJPY is priced in yen, which no book rate covers: converted through the sim's
    // own quote. 0.01 lots = 1,000 USD of notional, about 154,000 yen.
    let p = d
        .ok(
            "preview_order",
            order("USDJPY", "buy", json!({"quantity": 0.01})),
        )
        .await;
    let base = p["estimate"]["notional_base"].as_f64().unwrap();
    assert!((990.0..1010.0).contains(&base), "{p:#}");
}

#[tokio::test]
async fn the_daily_cap_and_count_add_up_across_the_day_and_the_brokers() {
    let setup = Setup {
        sims: vec!["SIM", "SIM2"],
        ..Setup::default()
    };
    let d = desk_with(setup);
    // Six orders of ~827 USD across two brokers: 4963 of the 5000 daily cap.
    for i in 0..6_u32 {
        let account = if i.is_multiple_of(2) { "SIM" } else { "SIM2" };
        d.ok(
            "place_order",
            json!({"account": account, "symbol": "AAPL", "side": "buy", "quantity": 3}),
        )
        .await;
    }
    // The seventh (on either broker) would pass 5000.
    let (code, rule, v) = d
        .refused(
            "place_order",
            json!({"account": "SIM2", "symbol": "AAPL", "side": "buy", "quantity": 3}),
        )
        .await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("limit_exceeded", "max_daily_notional"),
        "{v:#}"
    );
    assert!(
        v["error"]["message"].as_str().unwrap().contains("4963"),
        "{v:#}"
    );
    // The next calendar day starts afresh.
    d.clock.advance(Duration::days(1));
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 3})))
        .await;

    let d = desk_with(limits(|t| t.max_orders_per_day = Some(3)));
    for _ in 0..3 {
        d.ok("place_order", order("KO", "buy", json!({"quantity": 1})))
            .await;
    }
    let (_, rule, _) = d
        .refused("place_order", order("KO", "buy", json!({"quantity": 1})))
        .await;
    assert_eq!(rule, "max_orders_per_day");
}

#[tokio::test]
async fn refused_and_rejected_orders_do_not_count_against_the_day() {
    let d = desk_with(limits(|t| t.max_orders_per_day = Some(2)));
    // Refused by a rule, and rejected by the broker (an ioc that cannot fill).
    d.refused("place_order", order("AAPL", "buy", json!({"quantity": 0})))
        .await;
    let (code, ..) = d
        .refused(
            "place_order",
            order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "type": "limit", "limit_price": 100, "time_in_force": "ioc"}),
            ),
        )
        .await;
    assert_eq!(code, "broker_rejected");
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
}

#[tokio::test]
async fn weight_lists_and_the_kill_switch() {
    let d = desk_with(limits(|t| t.max_position_weight_pct = number(0)));
    let (_, rule, _) = d
        .refused("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    assert_eq!(rule, "max_position_weight");

    let d = desk_with(limits(|t| t.deny_symbols = Some(vec!["aapl".into()])));
    let (code, ..) = d
        .refused("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    assert_eq!(code, "symbol_not_allowed");
    let d = desk_with(limits(|t| {
        t.allow_symbols = Some(vec!["NASDAQ:MSFT".into()]);
    }));
    let (code, ..) = d
        .refused("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    assert_eq!(code, "symbol_not_allowed");
    d.ok("place_order", order("MSFT", "buy", json!({"quantity": 1})))
        .await;

    let d = desk();
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 3})))
        .await;
    let working = d
        .ok(
            "place_order",
            order(
                "AAPL",
                "buy",
                json!({"quantity": 1, "type": "limit", "limit_price": 200, "time_in_force": "gtc"}),
            ),
        )
        .await;
    assert_eq!(working["outcome"], "accepted");
    let kill = d
        .ctx
        .trading
        .as_ref()
        .unwrap()
        .settings
        .kill_switch_file
        .clone();
    std::fs::write(&kill, "stop").unwrap();
    let (code, ..) = d
        .refused("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    assert_eq!(code, "kill_switch");
    let (code, ..) = d
        .refused(
            "modify_position",
            json!({"account": "SIM", "symbol": "AAPL", "stop_loss": 200}),
        )
        .await;
    assert_eq!(code, "kill_switch");
    // Reducing risk still works: cancel and (partial) close.
    let cancelled = d
        .ok(
            "cancel_order",
            json!({"account": "SIM", "order_id": working["order_id"]}),
        )
        .await;
    assert_eq!(cancelled["outcome"], "cancelled");
    let closed = d
        .ok(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "quantity": 1}),
        )
        .await;
    assert_eq!(closed["outcome"], "filled");
    std::fs::remove_file(&kill).unwrap();
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    assert!(d.audit_intact() > 5);
}

/// A sim whose market data is down: no quote means no valuation means no order.
#[derive(Debug)]
struct NoQuotes(SimBroker);

#[async_trait]
impl Broker for NoQuotes {
    fn accounts(&self) -> Vec<Account> {
        self.0.accounts()
    }
    async fn snapshot(&self) -> Result<Arc<Book>, BrokerError> {
        self.0.snapshot().await
    }
    async fn health(&self) -> Vec<AccountHealth> {
        self.0.health().await
    }
    fn trading_modes(&self, account: &str) -> Vec<Mode> {
        self.0.trading_modes(account)
    }
    async fn instrument(&self, a: &str, s: &str) -> Result<TradableInstrument, BrokerError> {
        self.0.instrument(a, s).await
    }
    async fn quote(&self, account: &str, _: &str) -> Result<Quote, BrokerError> {
        Err(BrokerError::Unavailable {
            account: account.to_owned(),
            detail: "market data feed down".into(),
            hint: "wait".into(),
        })
    }
    async fn bars(
        &self,
        a: &str,
        s: &str,
        i: Interval,
        f: DateTime<Utc>,
        t: DateTime<Utc>,
    ) -> Result<Vec<Bar>, BrokerError> {
        self.0.bars(a, s, i, f, t).await
    }
    async fn orders(
        &self,
        a: Option<&str>,
        f: OrderFilter,
    ) -> Result<Vec<OrderRecord>, BrokerError> {
        self.0.orders(a, f).await
    }
    async fn place(&self, o: &OrderRequest) -> Result<Placed, BrokerError> {
        self.0.place(o).await
    }
    async fn cancel(&self, a: &str, o: &OrderRef) -> Result<(OrderRecord, bool), BrokerError> {
        self.0.cancel(a, o).await
    }
}

#[tokio::test]
async fn no_price_means_no_order() {
    let d = desk_with(Setup {
        wrap: Some(|sim| Arc::new(NoQuotes(sim))),
        ..Setup::default()
    });
    for o in [
        order("AAPL", "buy", json!({"quantity": 1})),
        // Even with a limit price written on it: the quote is one of the prices it is
        // valued at, and without it the valuation could be too low.
        order(
            "AAPL",
            "buy",
            json!({"quantity": 1, "type": "limit", "limit_price": 1}),
        ),
    ] {
        let (code, rule, _) = d.refused("place_order", o).await;
        assert_eq!(
            (code.as_str(), rule.as_str()),
            ("price_unavailable", "price_available")
        );
    }
    assert!(d.orders().await.is_empty());
}

#[tokio::test]
async fn confirmation_tokens_bind_one_order_and_expire() {
    let d = desk_with(limits(|t| t.confirm_paper = Some(true)));
    let args = order("AAPL", "buy", json!({"quantity": 2}));
    let (code, ..) = d.refused("place_order", args.clone()).await;
    assert_eq!(code, "confirmation_required");

    let preview = d.ok("preview_order", args.clone()).await;
    assert_eq!(preview["confirmation_required"], true);
    let token = preview["confirmation_token"].as_str().unwrap().to_owned();
    // Altered: the token for 2 shares does not place 3, nor another account's order.
    let mut more = args.clone();
    more["quantity"] = json!(3);
    more["confirmation_token"] = json!(token);
    let (code, _, v) = d.refused("place_order", more).await;
    assert_eq!(code, "confirmation_invalid");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not match")
    );
    let mut tampered = args.clone();
    let mut text = token.clone();
    let last = text.pop().unwrap();
    text.push(if last == '0' { '1' } else { '0' });
    tampered["confirmation_token"] = json!(text);
    assert_eq!(
        d.refused("place_order", tampered).await.0,
        "confirmation_invalid"
    );

    // The same expiry written another way (a sign, a leading zero) is another token:
    // refused, and it leaves the real one unused.
    let expiry = token.split('.').nth(2).unwrap().to_owned();
    for edited in [format!("+{expiry}"), format!("0{expiry}")] {
        let mut edited_args = args.clone();
        edited_args["confirmation_token"] =
            json!(token.replace(&format!(".{expiry}."), &format!(".{edited}.")));
        let (code, _, v) = d.refused("place_order", edited_args).await;
        assert_eq!(code, "confirmation_invalid", "{v:#}");
    }
    assert!(d.orders().await.is_empty());

    let mut good = args.clone();
    good["confirmation_token"] = json!(token);
    let placed = d.ok("place_order", good.clone()).await;
    assert_eq!(placed["replayed"], false);
    // The same token again is the same order: its stored outcome, not a second order.
    let again = d.ok("place_order", good).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["order_id"], placed["order_id"]);
    assert_eq!(d.orders().await.len(), 1);

    // Expired: issued, then the clock moves past its 120 seconds.
    let preview = d
        .ok(
            "preview_order",
            order("MSFT", "buy", json!({"quantity": 1})),
        )
        .await;
    d.clock.advance(Duration::seconds(121));
    let mut late = order("MSFT", "buy", json!({"quantity": 1}));
    late["confirmation_token"] = preview["confirmation_token"].clone();
    let (code, _, v) = d.refused("place_order", late).await;
    assert_eq!(code, "confirmation_invalid");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("expired"),
        "{v:#}"
    );
    // A refused token does not count against the day, nor place anything.
    assert_eq!(d.orders().await.len(), 1);

    // close_position takes the token of the equivalent market order.
    let preview = d
        .ok(
            "preview_order",
            order("AAPL", "sell", json!({"quantity": 2})),
        )
        .await;
    let closed = d
        .ok(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "confirmation_token": preview["confirmation_token"]}),
        )
        .await;
    assert_eq!(closed["outcome"], "filled");
    assert_eq!(d.orders().await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_concurrent_calls_with_one_client_order_id_make_one_order() {
    let d = Arc::new(desk());
    let args = order(
        "AAPL",
        "buy",
        json!({"quantity": 1, "client_order_id": "same-id-1"}),
    );
    let mut tasks = Vec::new();
    for _ in 0..50 {
        let d = Arc::clone(&d);
        let args = args.clone();
        tasks.push(tokio::spawn(
            async move { d.call("place_order", args).await },
        ));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let ids: std::collections::BTreeSet<String> = results
        .iter()
        .map(|r| {
            assert_eq!(r["status"], "ok", "{r:#}");
            r["order_id"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(results.iter().filter(|r| r["replayed"] == false).count(), 1);
    assert_eq!(d.orders().await.len(), 1);
    let history = d
        .ok(
            "get_trade_history",
            json!({"account": "SIM", "start": "2026-11-30", "end": "2026-11-30"}),
        )
        .await;
    assert_eq!(history["total_count"], 1);
    // The same id with another order is refused, naming the rule.
    let (code, rule, _) = d
        .refused(
            "place_order",
            order(
                "AAPL",
                "buy",
                json!({"quantity": 2, "client_order_id": "same-id-1"}),
            ),
        )
        .await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("invalid_order", "client_order_id_reused")
    );
    d.audit_intact();
}

#[tokio::test]
async fn paper_fills_feed_the_portfolio_tools_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let state = State::open(dir.path()).unwrap();
    let path = dir.path().to_path_buf();
    // The state directory outlives the first desk, as it outlives a server process.
    let d = desk_on(Setup::default(), tempfile::tempdir().unwrap(), state);
    let buy = d
        .ok("place_order", order("AAPL", "buy", json!({"quantity": 3})))
        .await;
    let buy_price = buy["average_price"].as_f64().unwrap();
    d.clock.advance(Duration::hours(3));
    let sell = d
        .ok(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "quantity": 2}),
        )
        .await;
    let sell_price = sell["average_price"].as_f64().unwrap();
    let pnl = d
        .ok(
            "get_realized_pnl",
            json!({"account": "SIM", "start": "2026-11-30", "end": "2026-11-30"}),
        )
        .await;
    // 2 shares closed; commissions: 1.00 on each fill, 2/3 of the opening one prorated.
    let gross = ((sell_price - buy_price) * 2.0 * 100.0).round() / 100.0;
    assert_eq!(pnl["gross_pnl"].as_f64().unwrap(), gross, "{pnl:#}");
    let expected_net = ((gross - 1.0 - 2.0 / 3.0) * 100.0).round() / 100.0;
    assert!(
        (pnl["net_pnl"].as_f64().unwrap() - expected_net).abs() < 0.011,
        "{pnl:#}"
    );
    drop(d);

    // A new process on the same state directory sees the same ledger.
    let reopened = State::open(&path).unwrap();
    let d2 = desk_on(Setup::default(), tempfile::tempdir().unwrap(), reopened);
    d2.clock.set(start() + Duration::hours(4));
    let positions = d2.ok("get_positions", json!({"account": "SIM"})).await;
    let orders = d2.orders().await;
    assert_eq!(
        positions["positions"][0]["quantity"], 1.0,
        "{positions:#} {orders:#?}"
    );
    let history = d2
        .ok(
            "get_trade_history",
            json!({"account": "SIM", "start": "2026-11-30", "end": "2026-11-30"}),
        )
        .await;
    assert_eq!(history["total_count"], 2);
    assert_eq!(d2.orders().await.len(), 2);
    let accounts = d2.ok("get_accounts", json!({})).await;
    let sim = accounts["accounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["account"] == "SIM")
        .unwrap()
        .clone();
    assert_eq!(sim["mode"], "paper");
    d2.audit_intact();
    drop(dir);
}

/// Moves the clock an hour at a time until `done` holds, for at most `hours`.
async fn run_until(d: &Desk, hours: i64, mut done: impl FnMut(&[Value]) -> bool) -> bool {
    for _ in 0..hours {
        d.clock.advance(Duration::hours(1));
        if done(&d.orders().await) {
            return true;
        }
    }
    false
}

#[tokio::test]
async fn resting_orders_and_position_levels_trigger_on_the_price_path() {
    let d = desk_with(limits(|t| {
        t.max_order_notional = number(1_000_000);
        t.max_daily_notional = number(10_000_000);
        t.max_position_weight_pct = number(100);
    }));
    let q = d
        .ok("get_quote", json!({"account": "SIM", "symbol": "EURUSD"}))
        .await;
    let bid = q["bid"].as_f64().unwrap();
    // A buy limit 20 pips under the market rests, then fills when the path comes down
    // to it, at or under the limit.
    let limit = ((bid - 0.0020) * 100_000.0).round() / 100_000.0;
    let placed = d
        .ok(
            "place_order",
            order("EURUSD", "buy", json!({"quantity": 0.1, "type": "limit", "limit_price": limit, "time_in_force": "gtc"})),
        )
        .await;
    assert_eq!(placed["outcome"], "accepted");
    let open = d.ok("get_orders", json!({})).await;
    assert_eq!(open["count"], 1);
    let id = placed["order_id"].as_str().unwrap().to_owned();
    let filled = run_until(&d, 24 * 40, |orders| {
        orders
            .iter()
            .any(|o| o["order_id"] == id.as_str() && o["status"] == "filled")
    })
    .await;
    assert!(filled, "the limit never filled");
    let o = d
        .orders()
        .await
        .into_iter()
        .find(|o| o["order_id"] == id.as_str())
        .unwrap();
    assert!(o["average_price"].as_f64().unwrap() <= limit, "{o:#}");

    // Levels on the position: a stop-loss 10 pips under the bid closes it when hit.
    let q = d
        .ok("get_quote", json!({"account": "SIM", "symbol": "EURUSD"}))
        .await;
    let bid = q["bid"].as_f64().unwrap();
    let sl = ((bid - 0.0010) * 100_000.0).round() / 100_000.0;
    let tp = ((bid + 0.0300) * 100_000.0).round() / 100_000.0;
    let m = d
        .ok(
            "modify_position",
            json!({"account": "SIM", "symbol": "EURUSD", "stop_loss": sl, "take_profit": tp}),
        )
        .await;
    assert_eq!(m["stop_loss"].as_f64().unwrap(), sl);
    let closed = run_until(&d, 24 * 40, |orders| {
        orders
            .iter()
            .any(|o| o["comment"] == "stop_loss" || o["comment"] == "take_profit")
    })
    .await;
    assert!(closed, "the stop-loss never triggered");
    let positions = d.ok("get_positions", json!({"account": "SIM"})).await;
    assert_eq!(
        positions["positions"].as_array().unwrap().len(),
        0,
        "{positions:#}"
    );
    let (code, rule, _) = d
        .refused(
            "modify_position",
            json!({"account": "SIM", "symbol": "EURUSD", "stop_loss": sl}),
        )
        .await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("invalid_order", "no_position")
    );

    // A day order lapses at the end of its UTC day.
    let placed = d
        .ok(
            "place_order",
            order(
                "EURUSD",
                "buy",
                json!({"quantity": 0.1, "type": "limit", "limit_price": 0.5}),
            ),
        )
        .await;
    d.clock.advance(Duration::days(1));
    let o = d
        .orders()
        .await
        .into_iter()
        .find(|o| o["order_id"] == placed["order_id"])
        .unwrap();
    assert_eq!(o["status"], "expired");
    let c = d
        .ok(
            "cancel_order",
            json!({"account": "SIM", "order_id": placed["order_id"]}),
        )
        .await;
    assert_eq!(c["outcome"], "not_cancellable");
    let (code, ..) = d
        .refused(
            "cancel_order",
            json!({"account": "SIM", "order_id": "SIM-999999"}),
        )
        .await;
    assert_eq!(code, "unknown_order");
    let (code, rule, _) = d.refused("cancel_order", json!({"account": "SIM"})).await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("invalid_order", "order_reference")
    );
}

#[tokio::test]
async fn levels_and_closes_are_checked_against_the_position() {
    let d = desk();
    let (code, rule, _) = d
        .refused(
            "modify_position",
            json!({"account": "SIM", "symbol": "AAPL"}),
        )
        .await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("invalid_order", "sl_or_tp_required")
    );
    let (_, rule, _) = d
        .refused(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL"}),
        )
        .await;
    assert_eq!(rule, "no_position");
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 3})))
        .await;
    let q = d
        .ok("get_quote", json!({"account": "SIM", "symbol": "AAPL"}))
        .await;
    let bid = q["bid"].as_f64().unwrap();
    for (args, rule) in [
        (json!({"stop_loss": (bid + 10.0).round()}), "sl_above_price"),
        (
            json!({"take_profit": (bid - 10.0).round()}),
            "tp_below_price",
        ),
        (json!({"stop_loss": 250, "take_profit": 240}), "sl_above_tp"),
    ] {
        let mut a = args.clone();
        a["account"] = json!("SIM");
        a["symbol"] = json!("AAPL");
        let (_, got, v) = d.refused("modify_position", a).await;
        assert_eq!(got, rule, "{v:#}");
    }
    // A level that is not above zero or is off the tick: the rule and the words of an
    // order with the same level.
    for (level, rule) in [
        (-5.0, "price_positive"),
        ((bid - 10.0).round() + 0.005, "tick_size"),
    ] {
        let modify = json!({"account": "SIM", "symbol": "AAPL", "stop_loss": level});
        let (code, got, v) = d.refused("modify_position", modify).await;
        assert_eq!(
            (code.as_str(), got.as_str()),
            ("invalid_order", rule),
            "{v:#}"
        );
        let placed = order("AAPL", "buy", json!({"quantity": 1, "stop_loss": level}));
        let (_, _, w) = d.refused("place_order", placed).await;
        assert_eq!(w["error"]["rule"], rule, "{w:#}");
        assert_eq!(v["error"]["message"], w["error"]["message"], "{v:#}\n{w:#}");
    }
    let (code, rule, _) = d
        .refused(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "quantity": 4}),
        )
        .await;
    assert_eq!(
        (code.as_str(), rule.as_str()),
        ("invalid_quantity", "close_exceeds_position")
    );
    let part = d
        .ok(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "quantity": 1}),
        )
        .await;
    assert_eq!(part["filled_quantity"], 1.0);
    let rest = d
        .ok(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL"}),
        )
        .await;
    assert_eq!(rest["filled_quantity"], 2.0);
}

#[tokio::test]
async fn the_exchange_charges_each_market_and_enforces_margin() {
    let d = desk_with(limits(|t| {
        t.max_order_notional = number(10_000_000);
        t.max_daily_notional = number(100_000_000);
        t.max_position_weight_pct = number(10_000);
    }));
    d.ok(
        "place_order",
        order("1155", "buy", json!({"quantity": 1000})),
    )
    .await;
    let h = d
        .ok(
            "get_trade_history",
            json!({"account": "SIM", "start": "2026-11-30", "end": "2026-11-30"}),
        )
        .await;
    let fill = &h["fills"][0];
    let value: Decimal =
        fill["price"].to_string().parse::<Decimal>().unwrap() * Decimal::from(1000);
    // Brokerage 0.08% (min RM 8) + clearing 0.03% + stamp duty RM 1 per RM 1,000 or part.
    let brokerage = (value * Decimal::new(8, 4))
        .max(Decimal::from(8))
        .round_dp(2);
    let clearing = (value * Decimal::new(3, 4)).round_dp(2);
    let stamp = (value / Decimal::from(1000)).ceil();
    let fee: Decimal = fill["commission"].to_string().parse().unwrap();
    assert_eq!(fee, brokerage + clearing + stamp, "{fill:#}");
    assert_eq!(fill["commission_currency"], "MYR");
    // FX pays only the spread.
    d.ok(
        "place_order",
        order("EURUSD", "buy", json!({"quantity": 1})),
    )
    .await;
    // 40 lots of EURUSD is 4.7M of notional, 155k of margin at 30:1: more than the
    // account's 100k equity. Buying more stock than the cash allows is refused the same
    // way.
    for (o, why) in [
        (
            order("EURUSD", "buy", json!({"quantity": 40})),
            "insufficient margin",
        ),
        (
            order("MSFT", "buy", json!({"quantity": 1000})),
            "insufficient cash",
        ),
    ] {
        let (code, _, v) = d.refused("place_order", o).await;
        assert_eq!(code, "broker_rejected");
        assert!(
            v["error"]["message"].as_str().unwrap().contains(why),
            "{v:#}"
        );
        assert!(v["error"]["client_order_id"].is_string(), "{v:#}");
        assert!(v["error"]["order_id"].is_string(), "{v:#}");
    }
}

#[tokio::test]
async fn write_tools_answer_trading_disabled_while_trading_is_off() {
    let d = desk_with(limits(|t| t.enabled = Some(false)));
    for tool in [
        "preview_order",
        "place_order",
        "close_position",
        "modify_position",
        "cancel_order",
    ] {
        let (code, ..) = d
            .refused(
                tool,
                json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": 1}),
            )
            .await;
        assert_eq!(code, "trading_disabled", "{tool}");
    }
    let listed: Vec<&str> = tradedesk_tools::listed(&d.ctx).map(|t| t.name).collect();
    assert!(!listed.contains(&"place_order"));
    assert!(listed.contains(&"get_quote"));
    // The read side of trading still works.
    d.ok("get_quote", json!({"account": "SIM", "symbol": "XAUUSD"}))
        .await;
    d.ok("get_orders", json!({})).await;
}

#[tokio::test]
async fn quotes_and_bars_come_from_the_sim() {
    let d = desk();
    let q = d
        .ok("get_quote", json!({"account": "SIM", "symbol": "XAUUSD"}))
        .await;
    assert_eq!(q["spread_pips"], 3.0, "{q:#}");
    let q = d
        .ok(
            "get_quote",
            json!({"account": "SIM", "symbol": "NASDAQ:AAPL"}),
        )
        .await;
    assert!(q["spread_pips"].is_null());
    let bars = d
        .ok(
            "get_bars",
            json!({"source": {"symbol": "AAPL", "account": "SIM", "interval": "1d", "start": "2026-01-01", "end": "2026-11-29"}, "max_rows": 10}),
        )
        .await;
    assert_eq!(bars["count"], 10);
    assert_eq!(bars["bars"][0]["time"], "2026-01-01");
    assert_eq!(bars["bars"][9]["time"], "2026-11-29");
    let total = bars["total"].as_u64().unwrap();
    assert_eq!(total, 333);
    assert_eq!(bars["stride"], (total - 1).div_ceil(9));
    for b in bars["bars"].as_array().unwrap() {
        let (o, h, l, c) = (
            b["open"].as_f64().unwrap(),
            b["high"].as_f64().unwrap(),
            b["low"].as_f64().unwrap(),
            b["close"].as_f64().unwrap(),
        );
        assert!(h >= o.max(c) && l <= o.min(c) && l > 0.0, "{b}");
    }
    // Only completed bars: none from the future.
    let hourly = d
        .ok(
            "get_bars",
            json!({"source": {"symbol": "EURUSD", "account": "SIM", "interval": "1h"}, "max_rows": 0}),
        )
        .await;
    assert_eq!(hourly["total"], 250);
    assert_eq!(hourly["bars"][249]["time"], "2026-11-30T14:00:00Z");
    let (code, ..) = d
        .refused(
            "get_bars",
            json!({"source": {"symbol": "AAPL", "account": "SIM", "interval": "2d"}}),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    let (code, ..) = d
        .refused(
            "get_quote",
            json!({"account": "IBKR-DEMO", "symbol": "AAPL"}),
        )
        .await;
    assert_eq!(code, "not_supported");
}

#[tokio::test]
async fn bars_from_a_csv_file_follow_the_research_contract() {
    let d = desk();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ACME.csv");
    let mut text = String::from("date,open,high,low,close,volume\n");
    for i in 0..30 {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 1).unwrap() + Duration::days(i);
        text.push_str(&format!(
            "{day},{o},{h},{l},{c},100\n",
            o = 10 + i,
            h = 12 + i,
            l = 9 + i,
            c = 11 + i
        ));
    }
    std::fs::write(&path, &text).unwrap();
    let bars = d
        .ok(
            "get_bars",
            json!({"source": {"csv": path.to_str().unwrap()}, "max_rows": 4}),
        )
        .await;
    assert_eq!(bars["symbol"], "ACME");
    assert!(bars["interval"].is_null());
    assert_eq!(bars["total"], 30);
    assert_eq!(bars["stride"], 10);
    let times: Vec<&str> = bars["bars"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["time"].as_str().unwrap())
        .collect();
    assert_eq!(
        times,
        ["2026-01-01", "2026-01-11", "2026-01-21", "2026-01-30"]
    );
    std::fs::write(
        &path,
        "date,open,high,low,close\n2026-01-01,1,2,0.5,1\n2026-01-02,1,0.5,0.4,1\n",
    )
    .unwrap();
    let (code, _, v) = d
        .refused(
            "get_bars",
            json!({"source": {"csv": path.to_str().unwrap()}}),
        )
        .await;
    assert_eq!(code, "invalid_argument");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("line 3"),
        "{v:#}"
    );
}

#[tokio::test]
async fn every_write_is_in_the_hash_chained_audit_log() {
    let d = desk();
    d.ok(
        "preview_order",
        order("AAPL", "buy", json!({"quantity": 1})),
    )
    .await;
    d.ok("place_order", order("AAPL", "buy", json!({"quantity": 1})))
        .await;
    d.refused("place_order", order("AAPL", "buy", json!({"quantity": 0})))
        .await;
    d.ok(
        "close_position",
        json!({"account": "SIM", "symbol": "AAPL"}),
    )
    .await;
    let kinds: Vec<String> = d
        .state
        .store
        .read(|c| {
            let mut stmt = c.prepare("SELECT kind FROM audit ORDER BY seq").unwrap();
            let rows = stmt.query_map([], |r| r.get::<_, String>(0)).unwrap();
            Ok::<_, tradedesk_store::StoreError>(rows.map(Result::unwrap).collect())
        })
        .unwrap();
    assert_eq!(
        kinds,
        [
            "submitted",
            "acknowledged",
            "refused",
            "submitted",
            "acknowledged"
        ],
        "{kinds:?}"
    );
    assert_eq!(d.audit_intact(), 5);
}

#[tokio::test]
async fn a_position_can_always_be_closed_even_behind_the_kill_switch_and_confirmation() {
    let d = desk_with(limits(|t| {
        t.confirm_paper = Some(true);
        t.max_orders_per_day = Some(2);
    }));
    let buy = order("AAPL", "buy", json!({"quantity": 3}));
    let p = d.ok("preview_order", buy.clone()).await;
    let mut placed = buy.clone();
    placed["confirmation_token"] = p["confirmation_token"].clone();
    d.ok("place_order", placed).await;
    // The owner pulls the kill switch and denies the symbol; the day's count is near.
    std::fs::write(
        &d.ctx.trading.as_ref().unwrap().settings.kill_switch_file,
        "",
    )
    .unwrap();
    let opening = d.ok("preview_order", buy).await;
    assert_eq!(opening["allowed"], false);
    // The equivalent market order of a close only reduces: it is allowed, with a token.
    let closing = d
        .ok(
            "preview_order",
            order("AAPL", "sell", json!({"quantity": 2})),
        )
        .await;
    assert_eq!(closing["allowed"], true, "{closing:#}");
    let closed = d
        .ok(
            "close_position",
            json!({"account": "SIM", "symbol": "AAPL", "quantity": 2, "confirmation_token": closing["confirmation_token"]}),
        )
        .await;
    assert_eq!(closed["filled_quantity"], 2.0);
    // The count is spent, but the rest can still be closed.
    let closing = d
        .ok(
            "preview_order",
            order("AAPL", "sell", json!({"quantity": 1})),
        )
        .await;
    let closed = d
        .ok(
            "place_order",
            json!({"account": "SIM", "symbol": "AAPL", "side": "sell", "quantity": 1,
                "confirmation_token": closing["confirmation_token"]}),
        )
        .await;
    assert_eq!(closed["filled_quantity"], 1.0);
    // A sell beyond the position is not a reduction: the kill switch refuses it.
    let (code, ..) = d
        .refused("place_order", order("AAPL", "sell", json!({"quantity": 1})))
        .await;
    assert_eq!(code, "kill_switch");
}

#[tokio::test]
async fn working_orders_count_towards_the_position_weight() {
    let d = desk_with(limits(|t| {
        t.max_order_notional = number(10_000);
        t.max_daily_notional = number(100_000);
        t.max_position_weight_pct = number(2);
    }));
    // About 300k in all: 2% is about 6000; each resting order is 3900 of gold.
    let resting = order(
        "XAUUSD",
        "buy",
        json!({"quantity": 0.01, "type": "limit", "limit_price": 3900, "time_in_force": "gtc"}),
    );
    let first = d.ok("place_order", resting.clone()).await;
    assert_eq!(first["outcome"], "accepted");
    let (_, rule, v) = d.refused("place_order", resting).await;
    assert_eq!(rule, "max_position_weight", "{v:#}");
}
