//! The paper exchange and the guards: orders placed per second (each one a durable
//! SQLite transaction, as the server runs it, and in memory for the engine alone),
//! resting orders worked per second while the clock catches up, and `preview_order`'s
//! latency through the registry (every rule, the valuation and a stored token).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{TimeZone, Utc};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rust_decimal::Decimal;
use serde_json::json;
use tradedesk_brokers::demo::{DEMO_SOURCE, demo_book};
use tradedesk_brokers::sim::{Clock, ManualClock, SimBroker, SimConfig};
use tradedesk_brokers::{BookBroker, Broker};
use tradedesk_core::{InstrumentKey, Mode, OrderRequest, OrderTerms, OrderType, Side, TimeInForce};
use tradedesk_store::Store;
use tradedesk_tools::config::{State, TradingConfig, trading_for};
use tradedesk_tools::{ToolContext, call};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 11, 30, 15, 0, 0)
            .single()
            .unwrap_or_default(),
    ))
}

fn request(i: usize, order_type: OrderType, limit: Option<Decimal>) -> OrderRequest {
    let side = if i.is_multiple_of(2) {
        Side::Buy
    } else {
        Side::Sell
    };
    // Straight to the sim, past the guard (which has its own benchmark).
    OrderRequest {
        terms: OrderTerms {
            order_type,
            limit_price: limit,
            time_in_force: TimeInForce::Gtc,
            ..OrderTerms::market("SIM", side, Mode::Paper)
        },
        key: InstrumentKey::new("NASDAQ", "AAPL"),
        quantity: Decimal::ONE,
        client_order_id: format!("bench-{i}"),
        reduce_only: false,
    }
}

/// `n` market orders, alternating buy and sell (so the position stays small), on a
/// fresh exchange; the time it took.
fn place_orders(store: Store, n: usize) -> Duration {
    let rt = runtime();
    let sim = SimBroker::new(
        SimConfig::new("SIM"),
        &demo_book().unwrap_or_else(|e| panic!("{e}")),
        Arc::new(store),
        clock() as Arc<dyn Clock>,
    );
    let started = Instant::now();
    for i in 0..n {
        let placed = rt
            .block_on(sim.place(&request(i, OrderType::Market, None)))
            .unwrap_or_else(|e| panic!("{e}"));
        black_box(placed);
    }
    started.elapsed()
}

fn matching(c: &mut Criterion) {
    let mut group = c.benchmark_group("sim");
    group.sample_size(10);
    let n = 200;
    group.throughput(Throughput::Elements(n as u64));
    group.bench_function(BenchmarkId::new("place_market_durable", n), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
                    place_orders(Store::open(dir.path()).unwrap_or_else(|e| panic!("{e}")), n)
                })
                .sum()
        });
    });
    group.bench_function(BenchmarkId::new("place_market_in_memory", n), |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| place_orders(Store::in_memory().unwrap_or_else(|e| panic!("{e}")), n))
                .sum()
        });
    });
    // Resting orders worked minute by minute: 200 limits far from the market, one hour.
    let resting = 200;
    let minutes = 60;
    group.throughput(Throughput::Elements((resting * minutes) as u64));
    group.bench_function(
        BenchmarkId::new("work_resting_order_minutes", resting * minutes),
        |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let rt = runtime();
                    let clock = clock();
                    let sim = SimBroker::new(
                        SimConfig::new("SIM"),
                        &demo_book().unwrap_or_else(|e| panic!("{e}")),
                        Arc::new(Store::in_memory().unwrap_or_else(|e| panic!("{e}"))),
                        Arc::clone(&clock) as Arc<dyn Clock>,
                    );
                    for i in 0..resting {
                        let mut r = request(i, OrderType::Limit, None);
                        r.terms.side = Side::Buy;
                        r.terms.limit_price = Some(Decimal::from(100));
                        rt.block_on(sim.place(&r)).unwrap_or_else(|e| panic!("{e}"));
                    }
                    clock.advance(chrono::Duration::minutes(
                        i64::try_from(minutes).unwrap_or(60),
                    ));
                    let started = Instant::now();
                    let open = rt
                        .block_on(sim.orders(Some("SIM"), tradedesk_brokers::OrderFilter::Open))
                        .unwrap_or_else(|e| panic!("{e}"));
                    total += started.elapsed();
                    assert_eq!(open.len(), resting);
                }
                total
            });
        },
    );
    group.finish();
}

fn preview(c: &mut Criterion) {
    let mut group = c.benchmark_group("preview_order");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let durable = State::open(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let in_memory = State {
        dir: dir.path().join("memory"),
        store: Arc::new(Store::in_memory().unwrap_or_else(|e| panic!("{e}"))),
    };
    for (name, state) in [("durable", durable), ("in_memory", in_memory)] {
        preview_on(&mut group, name, &state);
    }
    group.finish();
}

fn preview_on(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    state: &State,
) {
    let clock = clock();
    let book = demo_book().unwrap_or_else(|e| panic!("{e}"));
    let sim = SimBroker::new(
        SimConfig::new("SIM"),
        &book,
        Arc::clone(&state.store),
        Arc::clone(&clock) as Arc<dyn Clock>,
    );
    let enabled = TradingConfig {
        enabled: Some(true),
        ..TradingConfig::default()
    };
    let trading = trading_for(Some(&enabled), Vec::new(), state, clock as Arc<dyn Clock>)
        .unwrap_or_else(|e| panic!("{e}"));
    let ctx = ToolContext::new("bench")
        .with_broker(Arc::new(BookBroker::new(DEMO_SOURCE, book)), None)
        .with_broker(Arc::new(sim), None)
        .with_trading(Arc::new(trading));
    let rt = runtime();
    let args = json!({"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": 3,
        "type": "limit", "limit_price": 280, "stop_loss": 260, "take_profit": 300});
    group.bench_function(name, |b| {
        b.iter(|| {
            let out = rt
                .block_on(call(&ctx, "preview_order", args.clone()))
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(!out.is_error, "{}", out.summary);
            black_box(out)
        });
    });
}

criterion_group!(benches, matching, preview);
criterion_main!(benches);
