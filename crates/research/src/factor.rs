//! Cross-sectional factor statistics: information coefficient (IC), rank IC,
//! their t-statistics and hit rate, and quantile forward returns.
//!
//! Inputs are plain `f64` matrices indexed `[asset][time]`; non-finite values
//! (NaN, ±inf) mean "missing". See [`DEFINITIONS`] for the exact rules.

use schemars::JsonSchema;
use serde::Serialize;

/// Every definition used by [`analyze`], [`pearson`], [`spearman`] and
/// [`forward_returns`], as one paragraph for tool output.
pub const DEFINITIONS: &str = "The cross-sections are the bar times every asset has (the \
common bars); each asset's factor is computed on all of its own bars and read at those times. \
Forward return at t with horizon h = close[t+h] / close[t] - 1, t+h counted in common bars \
(a fraction; missing when t+h is past the end, either close is not finite, or close[t] is 0). \
A cross-section is one time t; it uses the assets whose factor value and forward return at t \
are both finite, and it is used only if it has at least max(min_assets, 3) such assets and \
neither the factor values nor the forward returns are all equal (otherwise the correlation is \
undefined and the cross-section is skipped entirely, including for quantiles). \
IC = Pearson correlation between factor values and forward returns across the assets of one \
cross-section; rank IC = Spearman correlation, i.e. the Pearson correlation of the ranks, with \
tied values given the average of the ranks they span. \
periods = number of cross-sections used; ic_mean = arithmetic mean of the per-period ICs; \
ic_std = their sample standard deviation (divisor n - 1, needs n >= 2); \
t-stat = mean / sqrt(V / n), undefined when n < 2 or V is not above 0, where V is the sample \
variance plus 2 × sum over k = 1..L of (1 - k / (L + 1)) × the lag-k autocovariance (divisor \
n - 1): Newey-West with L = horizon - 1 lags, because neighbouring forward returns overlap by \
horizon - 1 bars; the lags count used cross-sections, so a skipped one is not a lag (with \
horizon 1, mean / (sample std / sqrt(n))); the same formulas apply to rank IC. hit_rate_pct = 100 × (number of periods with IC > 0) / periods. \
Quantiles: in each used cross-section the n assets are sorted by factor value ascending (ties \
keep asset order) and split into q groups as equal as possible, group g (0-based) taking the \
sorted positions floor(g·n/q) up to but excluding floor((g+1)·n/q); quantile 1 holds the \
lowest factor values. The forward returns of each group are pooled over all used periods and \
averaged; mean_forward_return_pct = 100 × that average, and observations = the pooled count \
(a group that never receives an asset has no mean).";

/// Result of [`analyze`].
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct FactorStats {
    /// Cross-sections used.
    pub periods: usize,
    pub ic_mean: Option<f64>,
    pub ic_std: Option<f64>,
    pub ic_t_stat: Option<f64>,
    pub rank_ic_mean: Option<f64>,
    pub rank_ic_t_stat: Option<f64>,
    /// Share of periods with IC > 0, in percent.
    pub hit_rate_pct: Option<f64>,
    pub quantiles: Vec<QuantileRow>,
    pub ic_series: Vec<IcPoint>,
}

/// Pooled forward returns of one factor quantile.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct QuantileRow {
    /// 1 = lowest factor values.
    pub quantile: usize,
    /// Mean pooled forward return, in percent; null without observations.
    pub mean_forward_return_pct: Option<f64>,
    pub observations: usize,
}

/// IC and rank IC of one used cross-section.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct IcPoint {
    pub time: String,
    pub ic: f64,
    pub rank_ic: f64,
    /// Assets in the cross-section.
    pub assets: usize,
}

/// Pearson correlation over the pairs where both values are finite.
///
/// `None` when the lengths differ, fewer than 2 pairs remain, or either side
/// is constant over those pairs. The result is clamped to `[-1, 1]`.
pub fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() {
        return None;
    }
    let (xs, ys) = finite_pairs(x, y);
    pearson_finite(&xs, &ys)
}

/// Spearman rank correlation over the pairs where both values are finite:
/// the Pearson correlation of the ranks, tied values receiving the average
/// of the ranks they span. `None` in the same cases as [`pearson`].
pub fn spearman(x: &[f64], y: &[f64]) -> Option<f64> {
    if x.len() != y.len() {
        return None;
    }
    let (xs, ys) = finite_pairs(x, y);
    pearson_finite(&average_ranks(&xs), &average_ranks(&ys))
}

/// `close[t + horizon] / close[t] - 1`; NaN where `t + horizon` is past the
/// end, either close is not finite, or `close[t]` is 0.
pub fn forward_returns(close: &[f64], horizon: usize) -> Vec<f64> {
    (0..close.len())
        .map(|t| {
            let later = t.checked_add(horizon).and_then(|k| close.get(k)).copied();
            match later {
                Some(c1) if close[t].is_finite() && close[t] != 0.0 && c1.is_finite() => {
                    c1 / close[t] - 1.0
                }
                _ => f64::NAN,
            }
        })
        .collect()
}

/// Factor statistics over a common time axis.
///
/// `factor[a][t]` and `fwd[a][t]` are asset `a`'s factor value and forward
/// return (a fraction) at `time[t]`. Assets beyond the shorter of the two
/// matrices are ignored, and a value missing because a row is shorter than
/// `time` counts as non-finite. A cross-section uses the assets where both
/// values are finite and needs at least `max(min_assets, 3)` of them.
/// `quantiles == 0` gives no quantile rows. The t-stats are Newey-West over `lags` lags
/// (horizon - 1 when the forward returns overlap). See [`DEFINITIONS`].
pub fn analyze(
    time: &[String],
    factor: &[Vec<f64>],
    fwd: &[Vec<f64>],
    quantiles: usize,
    min_assets: usize,
    lags: usize,
) -> FactorStats {
    let assets = factor.len().min(fwd.len());
    let need = min_assets.max(3);
    let value = |m: &[Vec<f64>], a: usize, t: usize| m[a].get(t).copied().unwrap_or(f64::NAN);

    let mut ic_series = Vec::new();
    let mut sums = vec![0.0_f64; quantiles];
    let mut counts = vec![0_usize; quantiles];

    for (t, stamp) in time.iter().enumerate() {
        let mut xs = Vec::with_capacity(assets);
        let mut ys = Vec::with_capacity(assets);
        for a in 0..assets {
            let (f, r) = (value(factor, a, t), value(fwd, a, t));
            if f.is_finite() && r.is_finite() {
                xs.push(f);
                ys.push(r);
            }
        }
        let n = xs.len();
        if n < need {
            continue;
        }
        let (Some(ic), Some(rank_ic)) = (
            pearson_finite(&xs, &ys),
            pearson_finite(&average_ranks(&xs), &average_ranks(&ys)),
        ) else {
            continue;
        };
        ic_series.push(IcPoint {
            time: stamp.clone(),
            ic,
            rank_ic,
            assets: n,
        });

        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&i, &j| xs[i].total_cmp(&xs[j]));
        for g in 0..quantiles {
            let start = g * n / quantiles;
            let end = (g + 1) * n / quantiles;
            for &k in &order[start..end] {
                sums[g] += ys[k];
                counts[g] += 1;
            }
        }
    }

    let ics: Vec<f64> = ic_series.iter().map(|p| p.ic).collect();
    let rank_ics: Vec<f64> = ic_series.iter().map(|p| p.rank_ic).collect();
    let ic = Summary::of(&ics, lags);
    let rank = Summary::of(&rank_ics, lags);
    let periods = ic_series.len();
    let hit_rate_pct = (periods > 0)
        .then(|| 100.0 * ics.iter().filter(|&&v| v > 0.0).count() as f64 / periods as f64);

    let quantiles = sums
        .iter()
        .zip(&counts)
        .enumerate()
        .map(|(g, (&sum, &count))| QuantileRow {
            quantile: g + 1,
            mean_forward_return_pct: (count > 0).then(|| 100.0 * sum / count as f64),
            observations: count,
        })
        .collect();

    FactorStats {
        periods,
        ic_mean: ic.mean,
        ic_std: ic.std,
        ic_t_stat: ic.t_stat,
        rank_ic_mean: rank.mean,
        rank_ic_t_stat: rank.t_stat,
        hit_rate_pct,
        quantiles,
        ic_series,
    }
}

/// Mean, sample standard deviation and t-statistic of a series (Newey-West over `lags`
/// lags; 0 lags is the plain mean / (std / sqrt(n))).
struct Summary {
    mean: Option<f64>,
    std: Option<f64>,
    t_stat: Option<f64>,
}

impl Summary {
    fn of(v: &[f64], lags: usize) -> Summary {
        let n = v.len();
        if n == 0 {
            return Summary {
                mean: None,
                std: None,
                t_stat: None,
            };
        }
        let nf = n as f64;
        if all_equal(v) {
            // Exactly 0 rather than rounding noise from the mean; no t-stat.
            return Summary {
                mean: Some(v[0]),
                std: (n >= 2).then_some(0.0),
                t_stat: None,
            };
        }
        let mean = v.iter().sum::<f64>() / nf;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (nf - 1.0);
        let std = var.sqrt();
        // Newey-West: the sample variance plus the weighted autocovariances of the first
        // `lags` lags (Bartlett weights, divisor n - 1 like the variance's).
        let mut long_run = var;
        for k in 1..=lags.min(n - 1) {
            let gamma = v[k..]
                .iter()
                .zip(v)
                .map(|(a, b)| (a - mean) * (b - mean))
                .sum::<f64>()
                / (nf - 1.0);
            long_run += 2.0 * (1.0 - k as f64 / (lags as f64 + 1.0)) * gamma;
        }
        let t_stat = (long_run > 0.0).then(|| mean / (long_run / nf).sqrt());
        Summary {
            mean: Some(mean),
            std: Some(std),
            t_stat: t_stat.filter(|t| t.is_finite()),
        }
    }
}

/// The pairs of `x` and `y` (same length) where both are finite.
fn finite_pairs(x: &[f64], y: &[f64]) -> (Vec<f64>, Vec<f64>) {
    x.iter()
        .zip(y)
        .filter(|(a, b)| a.is_finite() && b.is_finite())
        .map(|(&a, &b)| (a, b))
        .unzip()
}

/// Pearson correlation of finite, equal-length slices.
fn pearson_finite(x: &[f64], y: &[f64]) -> Option<f64> {
    let n = x.len();
    if n < 2 || y.len() != n || all_equal(x) || all_equal(y) {
        return None;
    }
    let nf = n as f64;
    let mx = x.iter().sum::<f64>() / nf;
    let my = y.iter().sum::<f64>() / nf;
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (&a, &b) in x.iter().zip(y) {
        let (dx, dy) = (a - mx, b - my);
        sxy += dx * dy;
        sxx += dx * dx;
        syy += dy * dy;
    }
    let denom = (sxx * syy).sqrt();
    if !denom.is_finite() || denom <= 0.0 {
        return None;
    }
    Some((sxy / denom).clamp(-1.0, 1.0))
}

/// True when every value equals the first (exact comparison, so a series
/// whose mean is not exactly representable is still detected as constant).
fn all_equal(v: &[f64]) -> bool {
    v.split_first()
        .is_none_or(|(first, rest)| rest.iter().all(|x| x == first))
}

/// 1-based ranks; tied values get the average of the ranks they span.
fn average_ranks(v: &[f64]) -> Vec<f64> {
    let n = v.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| v[i].total_cmp(&v[j]));
    let mut ranks = vec![0.0; n];
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && v[order[end]] == v[order[start]] {
            end += 1;
        }
        // Positions start..end hold ranks start+1 ..= end; their average:
        let rank = (start + 1 + end) as f64 / 2.0;
        for &k in &order[start..end] {
            ranks[k] = rank;
        }
        start = end;
    }
    ranks
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const EPS: f64 = 1e-9;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < EPS
    }

    fn times(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("t{i}")).collect()
    }

    /// Builds `[asset][time]` from `[time][asset]` rows.
    fn by_asset(rows: &[&[f64]]) -> Vec<Vec<f64>> {
        let assets = rows[0].len();
        (0..assets)
            .map(|a| rows.iter().map(|r| r[a]).collect())
            .collect()
    }

    #[test]
    fn t_stats_with_overlapping_horizons_are_newey_west() {
        let v = [0.1, 0.3, -0.2, 0.4, 0.05, 0.25, -0.1];
        // numpy: mean / sqrt(V / n), V = sample variance + 2 x sum of Bartlett-weighted
        // lag-1 and lag-2 autocovariances (divisor n - 1).
        let nw = Summary::of(&v, 2).t_stat.unwrap();
        assert!((nw - 2.409_918_288_599_048).abs() < 1e-12, "{nw}");
        let plain = Summary::of(&v, 0).t_stat.unwrap();
        assert!((plain - 1.390_866_210_719_387_4).abs() < 1e-12, "{plain}");
        // More lags than values: only the ones there are.
        assert!(Summary::of(&v[..2], 5).t_stat.is_some());
    }

    #[test]
    fn pearson_hand_computed() {
        // x = [1,2,3], y = [2,4,7]: dx = [-1,0,1], my = 13/3, dy = [-7/3,-1/3,8/3];
        // sxy = 7/3 + 8/3 = 5, sxx = 2, syy = (49+1+64)/9 = 114/9;
        // r = 5 / sqrt(2 · 114/9) = 15 / sqrt(228) = 0.99339926779878...
        let r = pearson(&[1.0, 2.0, 3.0], &[2.0, 4.0, 7.0]).unwrap();
        assert!(close(r, 15.0 / 228.0_f64.sqrt()));
        assert!(close(r, 0.993_399_267_798_782_8));
        // Perfect linear relations.
        assert!(close(
            pearson(&[1.0, 2.0, 3.0], &[3.0, 5.0, 7.0]).unwrap(),
            1.0
        ));
        assert!(close(
            pearson(&[1.0, 2.0, 3.0], &[7.0, 5.0, 3.0]).unwrap(),
            -1.0
        ));
    }

    #[test]
    fn pearson_degenerate_and_missing() {
        assert_eq!(pearson(&[1.0, 2.0], &[1.0]), None);
        assert_eq!(pearson(&[1.0], &[1.0]), None);
        assert_eq!(pearson(&[], &[]), None);
        assert_eq!(pearson(&[0.1, 0.1, 0.1], &[1.0, 2.0, 3.0]), None);
        assert_eq!(pearson(&[1.0, 2.0, 3.0], &[5.0, 5.0, 5.0]), None);
        // The NaN pair is dropped: the rest is [1,2,3] vs [3,5,7].
        let r = pearson(&[1.0, f64::NAN, 2.0, 3.0], &[3.0, 100.0, 5.0, 7.0]).unwrap();
        assert!(close(r, 1.0));
        // Only one finite pair left.
        assert_eq!(pearson(&[1.0, f64::NAN], &[2.0, 3.0]), None);
    }

    #[test]
    fn spearman_hand_computed() {
        // Monotonic but non-linear: ranks identical → 1.
        assert!(close(
            spearman(&[1.0, 2.0, 3.0], &[2.0, 4.0, 7.0]).unwrap(),
            1.0
        ));
        assert!(close(
            spearman(&[1.0, 2.0, 3.0, 4.0], &[1.0, 10.0, 0.5, 0.1]).unwrap(),
            -0.8
        ));
        // Ties: x = [1,2,2,3] → ranks [1, 2.5, 2.5, 4]; y = [1,3,2,4] → ranks [1,3,2,4].
        // Both rank means 2.5; dx = [-1.5,0,0,1.5], dy = [-1.5,0.5,-0.5,1.5];
        // sxy = 2.25 + 2.25 = 4.5, sxx = 4.5, syy = 5 → r = 4.5 / sqrt(22.5) = 3 / sqrt(10).
        let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 3.0, 2.0, 4.0]).unwrap();
        assert!(close(r, 3.0 / 10.0_f64.sqrt()));
        assert_eq!(
            average_ranks(&[5.0, 1.0, 5.0, 5.0, 0.0]),
            vec![4.0, 2.0, 4.0, 4.0, 1.0]
        );
        assert_eq!(spearman(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0]), None);
        assert_eq!(spearman(&[1.0, 2.0], &[1.0]), None);
    }

    #[test]
    fn forward_returns_basic() {
        let r = forward_returns(&[100.0, 110.0, 99.0, f64::NAN, 50.0, 0.0, 10.0], 1);
        assert_eq!(r.len(), 7);
        assert!(close(r[0], 0.1));
        assert!(close(r[1], -0.1));
        assert!(r[2].is_nan()); // next close NaN
        assert!(r[3].is_nan()); // this close NaN
        assert!(close(r[4], -1.0)); // 0 / 50 - 1
        assert!(r[5].is_nan()); // division by zero
        assert!(r[6].is_nan()); // past the end
        let r2 = forward_returns(&[100.0, 110.0, 121.0], 2);
        assert!(close(r2[0], 0.21));
        assert!(r2[1].is_nan() && r2[2].is_nan());
        assert!(
            forward_returns(&[1.0, 2.0], usize::MAX)
                .iter()
                .all(|v| v.is_nan())
        );
        assert!(forward_returns(&[], 1).is_empty());
    }

    /// 3 periods × 5 assets, forward returns as fractions (shown in % below).
    ///
    /// t0: factor [1,2,3,4,5], fwd% [1,2,3,4,20]
    ///     dx = [-2,-1,0,1,2] (sxx 10); my = 6, dy = [-5,-4,-3,-2,14] (syy 250);
    ///     sxy = 10+4+0-2+28 = 40 → IC = 40/sqrt(2500) = 0.8; fwd is monotonic → rank IC = 1.
    /// t1: factor [5,4,3,2,1], fwd% [-1,-2,0,2,1]
    ///     dx = [2,1,0,-1,-2]; my = 0, dy = [-1,-2,0,2,1] (syy 10);
    ///     sxy = -2-2+0-2-2 = -8 → IC = -8/10 = -0.8; fwd ranks [2,1,3,5,4] have the same
    ///     deviations as fwd% → rank IC = -0.8.
    /// t2: factor [3,1,2,5,4], fwd% [3,1,1,3,2]
    ///     dx = [0,-2,-1,2,1]; my = 2, dy = [1,-1,-1,1,0] (syy 4);
    ///     sxy = 0+2+1+2+0 = 5 → IC = 5/sqrt(40) = 0.790569415;
    ///     fwd ranks (ties averaged) [4.5,1.5,1.5,4.5,3], dy = [1.5,-1.5,-1.5,1.5,0] (syy 9);
    ///     sxy = 0+3+1.5+3+0 = 7.5 → rank IC = 7.5/sqrt(90) = 0.790569415.
    /// IC: mean = (0.8 - 0.8 + 0.790569)/3 = 0.263523;
    ///     deviations 0.536477, -1.063523, 0.527046 → squares 0.287808, 1.131081, 0.277778;
    ///     sum 1.696667 / 2 = 0.848333 → std 0.921050; t = 0.263523 / (0.921050/√3 = 0.531769)
    ///     = 0.495560. Hit rate: 2 of 3 positive = 66.667 %.
    /// Rank IC: mean = (1 - 0.8 + 0.790569)/3 = 0.330190; deviations 0.669810, -1.130190,
    ///     0.460379 → squares 0.448645, 1.277329, 0.211949; sum 1.937923 / 2 = 0.968962
    ///     → std 0.984359; t = 0.330190 / (0.984359/√3 = 0.568320) = 0.580993.
    /// Quantiles q = 2, n = 5: group 1 = sorted positions 0..2, group 2 = 2..5.
    ///     t0 ascending factor → fwd% [1,2 | 3,4,20]
    ///     t1 ascending factor = assets 4,3,2,1,0 → fwd% [1,2 | 0,-2,-1]
    ///     t2 ascending factor = assets 1,2,0,4,3 → fwd% [1,1 | 3,2,3]
    ///     Q1 = (1+2+1+2+1+1)/6 = 8/6 = 1.333333 %, 6 obs;
    ///     Q2 = (3+4+20+0-2-1+3+2+3)/9 = 32/9 = 3.555556 %, 9 obs.
    fn example() -> (Vec<String>, Vec<Vec<f64>>, Vec<Vec<f64>>) {
        let factor = by_asset(&[
            &[1.0, 2.0, 3.0, 4.0, 5.0],
            &[5.0, 4.0, 3.0, 2.0, 1.0],
            &[3.0, 1.0, 2.0, 5.0, 4.0],
        ]);
        let fwd = by_asset(&[
            &[0.01, 0.02, 0.03, 0.04, 0.20],
            &[-0.01, -0.02, 0.0, 0.02, 0.01],
            &[0.03, 0.01, 0.01, 0.03, 0.02],
        ]);
        (times(3), factor, fwd)
    }

    #[test]
    fn analyze_hand_computed_example() {
        let (time, factor, fwd) = example();
        let s = analyze(&time, &factor, &fwd, 2, 3, 0);
        assert_eq!(s.periods, 3);

        let ics: Vec<f64> = s.ic_series.iter().map(|p| p.ic).collect();
        let rics: Vec<f64> = s.ic_series.iter().map(|p| p.rank_ic).collect();
        let r = 5.0 / 40.0_f64.sqrt();
        for (got, want) in ics.iter().zip([0.8, -0.8, r]) {
            assert!(close(*got, want), "{got} vs {want}");
        }
        for (got, want) in rics.iter().zip([1.0, -0.8, r]) {
            assert!(close(*got, want), "{got} vs {want}");
        }
        assert_eq!(s.ic_series[1].time, "t1");
        assert!(s.ic_series.iter().all(|p| p.assets == 5));

        let tol = 1e-6;
        assert!((s.ic_mean.unwrap() - 0.263_523).abs() < tol);
        assert!((s.ic_std.unwrap() - 0.921_050).abs() < tol);
        assert!((s.ic_t_stat.unwrap() - 0.495_560).abs() < tol);
        assert!((s.rank_ic_mean.unwrap() - 0.330_190).abs() < tol);
        assert!((s.rank_ic_t_stat.unwrap() - 0.580_993).abs() < tol);
        assert!(close(s.hit_rate_pct.unwrap(), 200.0 / 3.0));

        assert_eq!(s.quantiles.len(), 2);
        assert_eq!(s.quantiles[0].quantile, 1);
        assert_eq!(s.quantiles[0].observations, 6);
        assert!(close(
            s.quantiles[0].mean_forward_return_pct.unwrap(),
            8.0 / 6.0
        ));
        assert_eq!(s.quantiles[1].quantile, 2);
        assert_eq!(s.quantiles[1].observations, 9);
        assert!(close(
            s.quantiles[1].mean_forward_return_pct.unwrap(),
            32.0 / 9.0
        ));
    }

    #[test]
    fn quantile_split_sizes() {
        // n = 5, q = 3: floor(g·5/3) boundaries 0,1,3,5 → sizes 1,2,2 per period.
        // q = 7 > n: boundaries 0,0,1,2,2,3,4,5 → groups 1 and 4 never get an asset.
        let (time, factor, fwd) = example();
        let s = analyze(&time, &factor, &fwd, 3, 3, 0);
        let obs: Vec<usize> = s.quantiles.iter().map(|q| q.observations).collect();
        assert_eq!(obs, vec![3, 6, 6]);
        let s = analyze(&time, &factor, &fwd, 7, 3, 0);
        let obs: Vec<usize> = s.quantiles.iter().map(|q| q.observations).collect();
        assert_eq!(obs, vec![0, 3, 3, 0, 3, 3, 3]);
        assert_eq!(s.quantiles[0].mean_forward_return_pct, None);
        assert!(analyze(&time, &factor, &fwd, 0, 3, 0).quantiles.is_empty());
    }

    #[test]
    fn single_period_has_no_t_stat() {
        let (time, factor, fwd) = example();
        let s = analyze(&time[..1], &factor, &fwd, 2, 3, 0);
        assert_eq!(s.periods, 1);
        assert!(close(s.ic_mean.unwrap(), 0.8));
        assert_eq!(s.ic_std, None);
        assert_eq!(s.ic_t_stat, None);
        assert!(close(s.rank_ic_mean.unwrap(), 1.0));
        assert_eq!(s.rank_ic_t_stat, None);
        assert!(close(s.hit_rate_pct.unwrap(), 100.0));
    }

    #[test]
    fn constant_factor_period_is_skipped() {
        let (time, mut factor, fwd) = example();
        // Make t1's factor constant across assets.
        for row in &mut factor {
            row[1] = 0.7;
        }
        let s = analyze(&time, &factor, &fwd, 2, 3, 0);
        assert_eq!(s.periods, 2);
        let stamps: Vec<&str> = s.ic_series.iter().map(|p| p.time.as_str()).collect();
        assert_eq!(stamps, vec!["t0", "t2"]);
        // Quantiles pool only t0 and t2: Q1 = [1,2,1,1] %, Q2 = [3,4,20,3,2,3] %.
        assert_eq!(s.quantiles[0].observations, 4);
        assert!(close(
            s.quantiles[0].mean_forward_return_pct.unwrap(),
            5.0 / 4.0
        ));
        assert_eq!(s.quantiles[1].observations, 6);
        assert!(close(
            s.quantiles[1].mean_forward_return_pct.unwrap(),
            35.0 / 6.0
        ));
        // Identical ICs → std 0 → no t-stat.
        let (time, _, fwd) = example();
        let row: &[f64] = &[1.0, 2.0, 3.0, 4.0, 5.0];
        let same = by_asset(&[row; 3]);
        let same_fwd: Vec<Vec<f64>> = fwd.iter().map(|r| vec![r[0]; 3]).collect();
        let s = analyze(&time, &same, &same_fwd, 2, 3, 0);
        assert_eq!(s.periods, 3);
        assert!(close(s.ic_std.unwrap(), 0.0));
        assert_eq!(s.ic_t_stat, None);
    }

    #[test]
    fn missing_values_and_min_assets() {
        let (time, mut factor, mut fwd) = example();
        // t0 loses asset 4's return and t2 loses asset 0's factor → 4 assets each.
        fwd[4][0] = f64::NAN;
        factor[0][2] = f64::INFINITY;
        let s = analyze(&time, &factor, &fwd, 2, 5, 0);
        assert_eq!(s.periods, 1);
        assert_eq!(s.ic_series[0].time, "t1");
        let s = analyze(&time, &factor, &fwd, 2, 4, 0);
        assert_eq!(s.periods, 3);
        let assets: Vec<usize> = s.ic_series.iter().map(|p| p.assets).collect();
        assert_eq!(assets, vec![4, 5, 4]);
        // t0 without asset 4 is a perfect line: factor [1,2,3,4] vs fwd% [1,2,3,4].
        assert!(close(s.ic_series[0].ic, 1.0));
        // min_assets below 3 is raised to 3.
        let two = by_asset(&[&[1.0, 2.0], &[2.0, 1.0]]);
        let two_fwd = by_asset(&[&[0.01, 0.02], &[0.01, 0.02]]);
        let s = analyze(&times(2), &two, &two_fwd, 2, 0, 0);
        assert_eq!(s.periods, 0);
        assert_eq!(s.ic_mean, None);
        assert_eq!(s.hit_rate_pct, None);
        assert_eq!(s.quantiles[0].observations, 0);
        // Rows shorter than `time` and mismatched asset counts are tolerated.
        let s = analyze(&times(10), &factor, &fwd[..4], 2, 3, 0);
        assert_eq!(s.periods, 3);
        assert!(s.ic_series.iter().all(|p| p.assets <= 4));
    }

    #[test]
    fn definitions_cover_the_rules() {
        for needle in [
            "Pearson",
            "Spearman",
            "average of the ranks",
            "max(min_assets, 3)",
            "sample standard deviation",
            "sqrt(n)",
            "floor(g·n/q)",
            "hit_rate_pct",
            "close[t+h] / close[t] - 1",
        ] {
            assert!(DEFINITIONS.contains(needle), "missing {needle}");
        }
    }
}
