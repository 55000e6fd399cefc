//! Option analytics speed, printed as figures, on one core: Black-Scholes-Merton price
//! plus every greek, and implied volatility, over 1,000,000 seeded random contracts held
//! in memory (the same distribution `bench/options_peers.py` times py_vollib and
//! QuantLib on). Beside them, one whole `option_price` tool call (argument parsing and
//! JSON result included).
//!
//! `cargo bench --bench options` prints one `OURS_JSON {...}` line per figure so
//! `bench/run_options.sh` can put them beside the peers'.

#![allow(
    clippy::print_stdout,
    clippy::float_arithmetic,
    clippy::cast_precision_loss
)]

use std::hint::black_box;
use std::time::Instant;

use serde_json::json;
use tradedesk_research::options::{Contract, Kind, greeks, implied_volatility, price};
use tradedesk_tools::{ToolContext, call};

const CASES: usize = 1_000_000;

/// Seeded contracts drawn as `bench/options_peers.py` draws them: strike 100, spot
/// 100 x exp(U(-0.4, 0.4)), a whole number of days from 7 to 1095 (time = days / 365),
/// volatility U(0.08, 0.8), rate U(-0.01, 0.08), dividend yield U(0, 0.05); calls and
/// puts alternating.
fn contracts(n: usize) -> Vec<(Kind, Contract)> {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let mut uniform = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|i| {
            let kind = if i % 2 == 0 { Kind::Call } else { Kind::Put };
            (
                kind,
                Contract {
                    spot: 100.0 * (0.8 * uniform() - 0.4).exp(),
                    strike: 100.0,
                    volatility: 0.08 + 0.72 * uniform(),
                    rate: -0.01 + 0.09 * uniform(),
                    dividend_yield: 0.05 * uniform(),
                    time_years: (7.0 + (1089.0 * uniform()).floor()) / 365.0,
                },
            )
        })
        .collect()
}

/// Best of `runs` timings of `f`, in seconds.
fn best(runs: usize, mut f: impl FnMut() -> f64) -> (f64, f64) {
    let mut fastest = f64::INFINITY;
    let mut checksum = 0.0;
    for _ in 0..runs {
        let t = Instant::now();
        checksum = black_box(f());
        fastest = fastest.min(t.elapsed().as_secs_f64());
    }
    (fastest, checksum)
}

fn report(what: &str, peer: &str, cases: usize, seconds: f64) {
    let per_second = cases as f64 / seconds;
    println!("{peer}: {what} {per_second:.0}/s ({cases} in {seconds:.4} s)");
    println!(
        "OURS_JSON {}",
        json!({"peer": peer, "what": what, "cases": cases, "seconds": seconds, "per_second": per_second})
    );
}

fn main() {
    let cases = contracts(CASES);
    let (seconds, _) = best(5, || {
        cases
            .iter()
            .map(|(k, c)| {
                let g = greeks(*k, black_box(c));
                g.price + g.delta + g.gamma + g.vega + g.theta + g.rho
            })
            .sum()
    });
    report("price_greeks", "tradedesk", CASES, seconds);

    // Implied volatility of each contract's own model price, on the cases the peers
    // keep: time value at least 1e-4 of the price, price at least 1e-6 of the strike.
    let priced: Vec<(Kind, Contract, f64)> = cases
        .iter()
        .map(|(k, c)| (*k, *c, price(*k, c)))
        .filter(|(k, c, p)| {
            let (lo, hi) = tradedesk_research::options::bounds(*k, c);
            *p > lo && *p < hi && (*p - lo) >= 1e-4 * *p && *p >= 1e-6 * c.strike
        })
        .collect();
    let (seconds, _) = best(3, || {
        priced
            .iter()
            .map(|(k, c, p)| {
                implied_volatility(*k, black_box(c), *p).map_or(0.0, |iv| iv.volatility)
            })
            .sum()
    });
    report("iv", "tradedesk", priced.len(), seconds);
    let iterations: u64 = priced
        .iter()
        .map(|(k, c, p)| implied_volatility(*k, c, *p).map_or(0, |iv| u64::from(iv.iterations)))
        .sum();
    println!(
        "tradedesk: iv iterations, mean {:.2}",
        iterations as f64 / priced.len() as f64
    );

    // The whole tool call, arguments to JSON.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let ctx = ToolContext::new("bench");
    let calls = 20_000;
    let (seconds, _) = best(3, || {
        runtime.block_on(async {
            let mut sum = 0.0;
            for (k, c) in cases.iter().take(calls) {
                let args = json!({
                    "type": if *k == Kind::Call { "call" } else { "put" },
                    "spot": c.spot, "strike": c.strike, "volatility": c.volatility,
                    "rate": c.rate, "dividend_yield": c.dividend_yield, "time_years": c.time_years,
                });
                let out = call(&ctx, "option_price", args)
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                sum += out.structured["price"].as_f64().unwrap_or(0.0);
            }
            sum
        })
    });
    report("option_price tool call", "tradedesk", calls, seconds);
}
