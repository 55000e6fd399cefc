//! The indicators, each exactly as docs/methodology/research.md defines it. A value is `NaN`
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
    let nf = n as f64;
    // The window's sums of (v - anchor) and its square, moved one bar at a time, and
    // computed afresh (anchored at the window's mean) every n bars, after a gap, and
    // whenever the window has moved far from the anchor against its spread (where
    // s2 - s1^2 / n would cancel), so rounding cannot build up: linear in the bars
    // whatever n is, for all but pathological series.
    let anchored = |t: usize, anchor: f64| {
        x[t + 1 - n..=t].iter().fold((0.0, 0.0), |(a, b), v| {
            let d = v - anchor;
            (a + d, b + d * d)
        })
    };
    let (mut anchor, mut s1, mut s2) = (0.0, 0.0, 0.0);
    let mut since = usize::MAX;
    for t in 0..x.len() {
        let m = mean[t];
        if !m.is_finite() {
            since = usize::MAX;
            continue;
        }
        if since < n {
            let (new, old) = (x[t] - anchor, x[t - n] - anchor);
            s1 += new - old;
            s2 += new * new - old * old;
            since += 1;
            let shift = s1 / nf;
            if shift * shift > 1e6 * (s2 / nf - shift * shift).max(0.0) {
                since = n;
            }
        }
        if since >= n {
            anchor = m;
            (s1, s2) = anchored(t, anchor);
            since = 0;
        }
        let var = ((s2 - s1 * s1 / nf) / nf).max(0.0);
        out[t] = m + k * var.sqrt();
    }
    out
}

/// The best value (by `better`, which must hold for equal values too) over the last `n`
/// bars of each run without a gap: a monotonic queue of the candidates' places, so each
/// bar is added and removed once whatever `n` is.
fn window(x: &[f64], n: usize, better: fn(f64, f64) -> bool) -> Vec<f64> {
    let mut out = vec![f64::NAN; x.len()];
    if n == 0 {
        return out;
    }
    let mut queue = std::collections::VecDeque::new();
    for (start, end) in runs(x) {
        queue.clear();
        for t in start..end {
            while queue.back().is_some_and(|&b: &usize| better(x[t], x[b])) {
                queue.pop_back();
            }
            queue.push_back(t);
            if queue.front().is_some_and(|&f| f + n <= t) {
                queue.pop_front();
            }
            if t + 1 >= start + n
                && let Some(&f) = queue.front()
            {
                out[t] = x[f];
            }
        }
    }
    out
}

/// The highest value over the last `n` bars, the current one included.
pub fn highest(x: &[f64], n: usize) -> Vec<f64> {
    window(x, n, |new, old| new >= old)
}

/// The lowest value over the last `n` bars, the current one included.
pub fn lowest(x: &[f64], n: usize) -> Vec<f64> {
    window(x, n, |new, old| new <= old)
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
    }

    #[test]
    fn a_band_over_a_flat_window_after_a_jump_has_no_width() {
        // 100 for a while, then 10,000 flat: once the window is all 10,000 the band is
        // exactly the mean, not rounding noise from sums anchored at 100.
        let mut x = vec![100.0; 30];
        x.extend(vec![10_000.0; 30]);
        let up = bollinger(&x, 10, 2.0);
        assert_eq!(up[59], 10_000.0);
        assert_eq!(up[45], 10_000.0);
    }

    #[test]
    fn windows_and_bands_in_linear_time_match_each_window_worked_whole() {
        // A walk with gaps (NaN) and repeated values, against each window taken whole.
        let mut state = 7_u64;
        let x: Vec<f64> = (0..2_000)
            .map(|i| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1);
                if i % 397 == 5 {
                    N
                } else {
                    1_000.0 + ((state >> 40) % 50) as f64 * 0.25
                }
            })
            .collect();
        for n in [1, 2, 3, 20, 150] {
            let (hi, lo) = (highest(&x, n), lowest(&x, n));
            let (up, down) = (bollinger(&x, n, 2.0), bollinger(&x, n, -1.5));
            for t in 0..x.len() {
                let w = &x[(t + 1).saturating_sub(n)..=t];
                if t + 1 < n || w.iter().any(|v| !v.is_finite()) {
                    assert!(
                        hi[t].is_nan() && lo[t].is_nan() && up[t].is_nan(),
                        "{n} {t}"
                    );
                    continue;
                }
                let max = w.iter().copied().fold(f64::MIN, f64::max);
                let min = w.iter().copied().fold(f64::MAX, f64::min);
                assert_eq!((hi[t], lo[t]), (max, min), "{n} {t}");
                let mean = w.iter().sum::<f64>() / n as f64;
                let sd = (w.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n as f64).sqrt();
                assert!((up[t] - (mean + 2.0 * sd)).abs() < 1e-9, "{n} {t}");
                assert!((down[t] - (mean - 1.5 * sd)).abs() < 1e-9, "{n} {t}");
            }
        }
        close(&ret(&[2.0, 3.0, 6.0], 1), &[N, 0.5, 1.0]);
        close(&shift(&[2.0, 3.0, 6.0], 2), &[N, N, 2.0]);
    }
}
