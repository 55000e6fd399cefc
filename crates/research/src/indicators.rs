//! The indicators, each exactly as research-contract.md defines it. A value is `NaN`
//! where the indicator has none yet (warm-up) or its input has none. Each value on bar t
//! reads bars up to t only.

/// The first index from which `x` is finite without a gap, and the rest stays finite;
/// recursive indicators (EMA, RSI, ATR) restart after a gap.
fn runs(x: &[f64]) -> Vec<(usize, usize)> {
    // The usual case, checked in one vectorized pass: no gap at all.
    if all_finite(x) {
        return if x.is_empty() {
            Vec::new()
        } else {
            vec![(0, x.len())]
        };
    }
    let mut out = Vec::new();
    let mut t = 0;
    while t < x.len() {
        if x[t].is_finite() {
            let start = t;
            while t < x.len() && x[t].is_finite() {
                t += 1;
            }
            out.push((start, t));
        } else {
            t += 1;
        }
    }
    out
}

/// Whether every value is finite. Blocks of 64 are folded without a branch, so the
/// check vectorizes; it stops at the first block with a gap.
pub fn all_finite(x: &[f64]) -> bool {
    x.chunks(64)
        .all(|block| block.iter().fold(true, |ok, v| ok & v.is_finite()))
}

/// Simple moving average over the last `n` bars, the current one included.
pub fn sma(x: &[f64], n: usize) -> Vec<f64> {
    if n == 0 {
        return vec![f64::NAN; x.len()];
    }
    // Written once, in order: gaps and warm-ups as NaN, then each run's averages.
    let mut out = Vec::with_capacity(x.len());
    // First as if the series had no gap, without a scan for one: a NaN or an infinity
    // anywhere leaves the running sum non-finite at the end (a NaN stays; an infinity
    // turns NaN as it leaves the window), so a finite sum proves there was none.
    if x.len() >= n {
        out.resize(n - 1, f64::NAN);
        if average_run(x, n, &mut out).is_finite() {
            return out;
        }
        out.clear();
    }
    for (start, end) in runs(x) {
        if end - start < n {
            continue;
        }
        out.resize(start + n - 1, f64::NAN);
        average_run(&x[start..end], n, &mut out);
    }
    out.resize(x.len(), f64::NAN);
    out
}

/// Appends the `n`-bar averages of `run` (at least `n` values) from its `n`th value on;
/// answers the running sum at the end.
fn average_run(run: &[f64], n: usize, out: &mut Vec<f64>) -> f64 {
    let scale = 1.0 / n as f64;
    let mut sum: f64 = run[..n].iter().sum();
    out.push(sum * scale);
    out.extend(run[n..].iter().zip(run).map(|(new, old)| {
        sum += new - old;
        sum * scale
    }));
    sum
}

/// Exponential moving average, alpha = 2 / (n + 1), seeded with the SMA of the first n.
pub fn ema(x: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if n == 0 {
        return out;
    }
    let alpha = 2.0 / (n as f64 + 1.0);
    for (start, end) in runs(x) {
        if end - start < n {
            continue;
        }
        let mut v = x[start..start + n].iter().sum::<f64>() / n as f64;
        out[start + n - 1] = v;
        for t in start + n..end {
            v = alpha * x[t] + (1.0 - alpha) * v;
            out[t] = v;
        }
    }
    out
}

/// Wilder's RSI: the first average gain and loss are the simple means of the first n
/// changes (so the first value is on bar n), then avg = (avg_prev x (n - 1) + current) / n.
pub fn rsi(x: &[f64], n: usize) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if n == 0 {
        return out;
    }
    let value = |gain: f64, loss: f64| {
        if loss == 0.0 {
            if gain == 0.0 { 50.0 } else { 100.0 }
        } else {
            100.0 - 100.0 / (1.0 + gain / loss)
        }
    };
    let nf = n as f64;
    for (start, end) in runs(x) {
        if end - start <= n {
            continue;
        }
        let (mut gain, mut loss) = (0.0, 0.0);
        for t in start + 1..=start + n {
            let d = x[t] - x[t - 1];
            if d > 0.0 {
                gain += d;
            } else {
                loss -= d;
            }
        }
        gain /= nf;
        loss /= nf;
        out[start + n] = value(gain, loss);
        for t in start + n + 1..end {
            let d = x[t] - x[t - 1];
            gain = (gain * (nf - 1.0) + d.max(0.0)) / nf;
            loss = (loss * (nf - 1.0) + (-d).max(0.0)) / nf;
            out[t] = value(gain, loss);
        }
    }
    out
}

/// Wilder's average true range: TR of bar 0 is high - low, then the largest of high -
/// low, |high - previous close|, |low - previous close|; the first ATR (bar n - 1) is the
/// mean of the first n true ranges, then Wilder smoothing.
pub fn atr(high: &[f64], low: &[f64], close: &[f64], n: usize) -> Vec<f64> {
    let len = close.len();
    let mut out = vec![f64::NAN; len];
    if n == 0 || len < n {
        return out;
    }
    let tr: Vec<f64> = (0..len)
        .map(|t| {
            let range = high[t] - low[t];
            if t == 0 {
                range
            } else {
                range
                    .max((high[t] - close[t - 1]).abs())
                    .max((low[t] - close[t - 1]).abs())
            }
        })
        .collect();
    let nf = n as f64;
    for (start, end) in runs(&tr) {
        if end - start < n {
            continue;
        }
        let mut v = tr[start..start + n].iter().sum::<f64>() / nf;
        out[start + n - 1] = v;
        for t in start + n..end {
            v = (v * (nf - 1.0) + tr[t]) / nf;
            out[t] = v;
        }
    }
    out
}

/// SMA plus `k` population standard deviations (minus, with a negative `k`).
pub fn bollinger(x: &[f64], n: usize, k: f64) -> Vec<f64> {
    let mean = sma(x, n);
    let mut out = vec![f64::NAN; x.len()];
    for t in 0..x.len() {
        if !mean[t].is_finite() {
            continue;
        }
        let m = mean[t];
        let var = x[t + 1 - n..=t]
            .iter()
            .map(|v| (v - m) * (v - m))
            .sum::<f64>()
            / n as f64;
        out[t] = m + k * var.sqrt();
    }
    out
}

fn window(x: &[f64], n: usize, pick: fn(f64, f64) -> f64) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if n == 0 {
        return out;
    }
    for t in n - 1..x.len() {
        let w = &x[t + 1 - n..=t];
        if w.iter().all(|v| v.is_finite()) {
            out[t] = w.iter().copied().fold(w[0], pick);
        }
    }
    out
}

/// The highest value over the last `n` bars, the current one included.
pub fn highest(x: &[f64], n: usize) -> Vec<f64> {
    window(x, n, f64::max)
}

/// The lowest value over the last `n` bars, the current one included.
pub fn lowest(x: &[f64], n: usize) -> Vec<f64> {
    window(x, n, f64::min)
}

/// x / x[n bars ago] - 1.
pub fn ret(x: &[f64], n: usize) -> Vec<f64> {
    (0..x.len())
        .map(|t| {
            if t < n || x[t - n] == 0.0 {
                f64::NAN
            } else {
                x[t] / x[t - n] - 1.0
            }
        })
        .collect()
}

/// x[n bars ago].
pub fn shift(x: &[f64], n: usize) -> Vec<f64> {
    (0..x.len())
        .map(|t| if t < n { f64::NAN } else { x[t - n] })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) {
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(b) {
            assert!(
                (x.is_nan() && y.is_nan()) || (x - y).abs() < 1e-9,
                "{a:?} vs {b:?}"
            );
        }
    }

    const N: f64 = f64::NAN;

    #[test]
    fn moving_averages_by_hand() {
        let x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        close(&sma(&x, 3), &[N, N, 2.0, 3.0, 4.0, 5.0]);
        // EMA 3: alpha 0.5, seeded with SMA(1,2,3) = 2 on bar 2; then 3, 4, 5.
        close(&ema(&x, 3), &[N, N, 2.0, 3.0, 4.0, 5.0]);
        let y = [10.0, 11.0, 9.0, 12.0];
        // seed mean(10, 11) = 10.5 on bar 1; alpha 2/3: 9 x 2/3 + 10.5/3 = 9.5; 12 x 2/3 + 9.5/3 = 11.1667.
        close(&ema(&y, 2), &[N, 10.5, 9.5, 11.0 + 1.0 / 6.0]);
        // Nested: a warm-up gap in the input starts the indicator later.
        close(&sma(&sma(&x, 2), 2), &[N, N, 2.0, 3.0, 4.0, 5.0]);
        // A gap anywhere, a NaN or an infinity, restarts the warm-up after it.
        const INF: f64 = f64::INFINITY;
        for gap in [N, INF, -INF] {
            let y = [1.0, 2.0, 3.0, gap, 5.0, 6.0, 7.0];
            close(&sma(&y, 2), &[N, 1.5, 2.5, N, N, 5.5, 6.5]);
            let last = [1.0, 2.0, 3.0, 4.0, gap];
            close(&sma(&last, 2), &[N, 1.5, 2.5, 3.5, N]);
            let first = [gap, 2.0, 3.0, 4.0];
            close(&sma(&first, 2), &[N, N, 2.5, 3.5]);
        }
        assert!(sma(&[1.0], 2)[0].is_nan() && sma(&[], 2).is_empty());
    }

    #[test]
    fn rsi_by_hand() {
        // Changes: +1, -2, +3, +1; n = 2: first averages on bar 2: gain 0.5, loss 1 → RS 0.5 → 33.33.
        // Bar 3: gain (0.5 + 3) / 2 = 1.75, loss (1 + 0) / 2 = 0.5 → RS 3.5 → 77.78.
        // Bar 4: gain (1.75 + 1) / 2 = 1.375, loss 0.25 → RS 5.5 → 84.615.
        let x = [10.0, 11.0, 9.0, 12.0, 13.0];
        close(
            &rsi(&x, 2),
            &[N, N, 100.0 / 3.0, 100.0 - 100.0 / 4.5, 100.0 - 100.0 / 6.5],
        );
        close(&rsi(&[1.0, 1.0, 1.0], 2), &[N, N, 50.0]);
        close(&rsi(&[1.0, 2.0, 3.0], 2), &[N, N, 100.0]);
    }

    #[test]
    fn atr_by_hand() {
        let high = [10.0, 12.0, 11.0, 13.0];
        let low = [8.0, 9.0, 9.5, 10.0];
        let close_ = [9.0, 11.0, 10.0, 12.5];
        // TR: 2; max(3, 3, 0) = 3; max(1.5, 0, 1.5) = 1.5; max(3, 3, 0) = 3.
        // ATR 2: bar 1 = 2.5; bar 2 = (2.5 + 1.5) / 2 = 2; bar 3 = (2 + 3) / 2 = 2.5.
        close(&atr(&high, &low, &close_, 2), &[N, 2.5, 2.0, 2.5]);
    }

    #[test]
    fn bands_windows_returns_and_shifts_by_hand() {
        let x = [1.0, 3.0, 5.0];
        // SMA 2 of (3, 5) = 4, population sd 1.
        close(&bollinger(&x, 2, 2.0), &[N, 4.0, 6.0]);
        close(&bollinger(&x, 2, -2.0), &[N, 0.0, 2.0]);
        close(&highest(&[1.0, 5.0, 3.0, 2.0], 2), &[N, 5.0, 5.0, 3.0]);
        close(&lowest(&[1.0, 5.0, 3.0, 2.0], 2), &[N, 1.0, 3.0, 2.0]);
        close(&ret(&[2.0, 3.0, 6.0], 1), &[N, 0.5, 1.0]);
        close(&shift(&[2.0, 3.0, 6.0], 2), &[N, N, 2.0]);
    }
}
