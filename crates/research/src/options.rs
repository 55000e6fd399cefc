//! European options under Black-Scholes-Merton (continuous dividend yield): price and
//! greeks, implied volatility, and multi-leg strategies at expiry and now.
//!
//! Units follow docs/methodology/research.md: vega and rho per 1 point (0.01), theta per calendar
//! day (annual / 365). The normal distribution comes from `libm::erfc`, which keeps its
//! relative accuracy far into the tails, so deep out-of-the-money prices stay accurate.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// Call or put.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Call,
    Put,
}

/// What prices an option: everything but its type.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Contract {
    pub spot: f64,
    pub strike: f64,
    pub volatility: f64,
    pub rate: f64,
    pub dividend_yield: f64,
    pub time_years: f64,
}

/// Price, greeks (contract units) and d1, d2: `option_price`'s result.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, schemars::JsonSchema)]
pub struct Greeks {
    pub price: f64,
    pub delta: f64,
    pub gamma: f64,
    /// Per 1 volatility point (0.01).
    pub vega: f64,
    /// Per calendar day (annual theta / 365).
    pub theta: f64,
    /// Per 1 rate point (0.01).
    pub rho: f64,
    pub d1: f64,
    pub d2: f64,
}

/// The standard normal CDF, accurate in relative terms in both tails.
#[inline]
#[must_use]
pub fn norm_cdf(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// The standard normal density.
#[inline]
#[must_use]
pub fn norm_pdf(x: f64) -> f64 {
    const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;
    INV_SQRT_2PI * (-0.5 * x * x).exp()
}

/// d1 and d2, and the two discount factors e^-qT and e^-rT.
#[inline]
fn terms(c: &Contract) -> (f64, f64, f64, f64) {
    let sd = c.volatility * c.time_years.sqrt();
    let d1 = ((c.spot / c.strike).ln()
        + (c.rate - c.dividend_yield + 0.5 * c.volatility * c.volatility) * c.time_years)
        / sd;
    (
        d1,
        d1 - sd,
        (-c.dividend_yield * c.time_years).exp(),
        (-c.rate * c.time_years).exp(),
    )
}

/// The price alone.
#[inline]
#[must_use]
pub fn price(kind: Kind, c: &Contract) -> f64 {
    let (d1, d2, dq, dr) = terms(c);
    match kind {
        Kind::Call => c.spot * dq * norm_cdf(d1) - c.strike * dr * norm_cdf(d2),
        Kind::Put => c.strike * dr * norm_cdf(-d2) - c.spot * dq * norm_cdf(-d1),
    }
}

/// Price and every greek in one pass.
#[inline]
#[must_use]
pub fn greeks(kind: Kind, c: &Contract) -> Greeks {
    let (d1, d2, dq, dr) = terms(c);
    let sqrt_t = c.time_years.sqrt();
    let pdf = norm_pdf(d1);
    let (s, k) = (c.spot, c.strike);
    // Shared by both types: gamma, vega and the volatility part of theta.
    let gamma = dq * pdf / (s * c.volatility * sqrt_t);
    let vega = s * dq * pdf * sqrt_t;
    let decay = -s * dq * pdf * c.volatility / (2.0 * sqrt_t);
    let (price, delta, theta, rho) = match kind {
        Kind::Call => {
            let (n1, n2) = (norm_cdf(d1), norm_cdf(d2));
            (
                s * dq * n1 - k * dr * n2,
                dq * n1,
                decay - c.rate * k * dr * n2 + c.dividend_yield * s * dq * n1,
                k * c.time_years * dr * n2,
            )
        }
        Kind::Put => {
            let (n1, n2) = (norm_cdf(-d1), norm_cdf(-d2));
            (
                k * dr * n2 - s * dq * n1,
                -dq * n1,
                decay + c.rate * k * dr * n2 - c.dividend_yield * s * dq * n1,
                -k * c.time_years * dr * n2,
            )
        }
    };
    Greeks {
        price,
        delta,
        gamma,
        vega: vega / 100.0,
        theta: theta / 365.0,
        rho: rho / 100.0,
        d1,
        d2,
    }
}

/// The discounted European no-arbitrage bounds `(lower, upper)` of a price.
#[must_use]
pub fn bounds(kind: Kind, c: &Contract) -> (f64, f64) {
    let fwd_s = c.spot * (-c.dividend_yield * c.time_years).exp();
    let fwd_k = c.strike * (-c.rate * c.time_years).exp();
    match kind {
        Kind::Call => ((fwd_s - fwd_k).max(0.0), fwd_s),
        Kind::Put => ((fwd_k - fwd_s).max(0.0), fwd_k),
    }
}

/// Why a price has no implied volatility.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum IvError {
    /// At or below the lower bound (given).
    BelowLower(f64),
    /// At or above the upper bound (given).
    AboveUpper(f64),
    /// The solver could not reprice within tolerance (the closest volatility it found).
    NoConvergence(f64),
}

/// A solved implied volatility.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Implied {
    pub volatility: f64,
    pub iterations: u32,
}

/// The largest volatility searched (10,000%): beyond it a price is the upper bound to
/// within rounding.
const MAX_VOL: f64 = 100.0;

/// The implied volatility of `target` (the `volatility` field of `c` is ignored).
///
/// The solver works on the out-of-the-money option of the same strike (put-call parity
/// turns an in-the-money price into its time value), and on the logarithm of that price,
/// which is close to linear in volatility far from the money where the price itself
/// spans many orders of magnitude. Halley steps (Newton's, bent by the curvature) are
/// kept inside a bracket that shrinks every iteration, with bisection whenever a step
/// would leave it, so the search always converges. It stops when the option reprices to within 1e-12 relative of its time
/// value (so the full price to within 1e-10), or when the bracket cannot shrink further.
///
/// # Errors
/// [`IvError`] for a price on or outside the bounds, or one that no volatility below
/// 10,000% reprices.
pub fn implied_volatility(kind: Kind, c: &Contract, target: f64) -> Result<Implied, IvError> {
    let (lower, upper) = bounds(kind, c);
    if target.is_nan() || target <= lower {
        return Err(IvError::BelowLower(lower));
    }
    if target >= upper {
        return Err(IvError::AboveUpper(upper));
    }
    // The out-of-the-money side: a call when the forward is below the strike.
    let fwd_s = c.spot * (-c.dividend_yield * c.time_years).exp();
    let fwd_k = c.strike * (-c.rate * c.time_years).exp();
    let otm = if fwd_s < fwd_k { Kind::Call } else { Kind::Put };
    let time_value = match (kind, otm) {
        (Kind::Call, Kind::Put) => target - (fwd_s - fwd_k),
        (Kind::Put, Kind::Call) => target - (fwd_k - fwd_s),
        _ => target,
    };
    let goal = time_value.ln();
    // What does not depend on the volatility is computed once: per iteration, two
    // normal CDFs and one density. d1 = x / sd + sd / 2 with x = ln(F / K), which is
    // ln(S / K) + (r - q) T of the usual form.
    let x = (fwd_s / fwd_k).ln();
    let sqrt_t = c.time_years.sqrt();
    let at = |vol: f64| {
        let sd = vol * sqrt_t;
        let d1 = x / sd + 0.5 * sd;
        let d2 = d1 - sd;
        let price = match otm {
            Kind::Call => fwd_s * norm_cdf(d1) - fwd_k * norm_cdf(d2),
            Kind::Put => fwd_k * norm_cdf(-d2) - fwd_s * norm_cdf(-d1),
        };
        (price, fwd_s * norm_pdf(d1) * sqrt_t)
    };
    // Start where vega peaks (the price's inflection point in volatility), or from the
    // at-the-money approximation when the option is at the money.
    let moneyness = x.abs();
    let atm = (2.0 * PI / c.time_years).sqrt() * time_value / fwd_s.min(fwd_k);
    let mut vol = (2.0 * moneyness / c.time_years)
        .sqrt()
        .max(atm)
        .clamp(1e-4, MAX_VOL);
    let (mut lo, mut hi) = (0.0_f64, MAX_VOL);
    let mut best = vol;
    for iteration in 1..=200 {
        let (value, vega) = at(vol);
        if value > 0.0 && ((value - time_value) / time_value).abs() <= 1e-12 {
            return Ok(Implied {
                volatility: vol,
                iterations: iteration,
            });
        }
        if value < time_value {
            lo = vol;
        } else {
            hi = vol;
        }
        best = vol;
        if hi - lo <= 4.0 * f64::EPSILON * hi {
            break;
        }
        // Halley on f = ln(price) - ln(target): f' = vega / price and
        // f'' = (volga / price) - f'^2, with volga = vega d1 d2 / vol. The step is
        // -f / f' / (1 - f f'' / (2 f'^2)): Newton's, bent by the curvature.
        let next = if value > 0.0 && vega > 0.0 {
            let f = value.ln() - goal;
            let slope = vega / value;
            let sd = vol * sqrt_t;
            let d1 = x / sd + 0.5 * sd;
            let curve = slope * d1 * (d1 - sd) / vol - slope * slope;
            let newton = -f / slope;
            let bend = 1.0 - 0.5 * f * curve / (slope * slope);
            if bend > 0.5 {
                vol + newton / bend
            } else {
                vol + newton
            }
        } else {
            f64::NAN
        };
        vol = if next.is_finite() && next > lo && next < hi {
            next
        } else if lo > 0.0 {
            0.5 * (lo + hi)
        } else {
            // Nothing below yet: halve, which reaches tiny volatilities quickly.
            0.5 * hi.min(vol)
        };
    }
    // The bracket collapsed: accept when the full price reprices to 1e-10 relative.
    let full = price(
        kind,
        &Contract {
            volatility: best,
            ..*c
        },
    );
    if ((full - target) / target).abs() <= 1e-10 {
        return Ok(Implied {
            volatility: best,
            iterations: 200,
        });
    }
    Err(IvError::NoConvergence(best))
}

/// One leg of a strategy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LegKind {
    Option {
        kind: Kind,
        strike: f64,
        volatility: f64,
        time_years: f64,
    },
    Stock,
}

impl LegKind {
    /// An option's kind and contract with the underlying at `spot`, `elapsed` years from
    /// now (the time left may be 0 or less); `None` for stock.
    fn option_at(&self, market: &Market, spot: f64, elapsed: f64) -> Option<(Kind, Contract)> {
        match *self {
            LegKind::Stock => None,
            LegKind::Option {
                kind,
                strike,
                volatility,
                time_years,
            } => Some((
                kind,
                market.contract(spot, strike, volatility, time_years - elapsed),
            )),
        }
    }

    /// What one unit is worth with the underlying at `spot`, `elapsed` years from now:
    /// the stock at `spot`; an option by the model while time is left, else its
    /// intrinsic value.
    #[must_use]
    pub fn value(&self, market: &Market, spot: f64, elapsed: f64) -> f64 {
        match self.option_at(market, spot, elapsed) {
            None => spot,
            Some((kind, c)) if c.time_years > 0.0 => price(kind, &c),
            Some((kind, c)) => intrinsic(kind, spot, c.strike),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Leg {
    pub kind: LegKind,
    /// Signed: + long, - short; per share.
    pub quantity: f64,
    /// Per share, paid when long.
    pub premium: f64,
}

/// The market a strategy lives in.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Market {
    pub spot: f64,
    pub rate: f64,
    pub dividend_yield: f64,
}

impl Market {
    fn contract(&self, spot: f64, strike: f64, volatility: f64, time_years: f64) -> Contract {
        Contract {
            spot,
            strike,
            volatility,
            rate: self.rate,
            dividend_yield: self.dividend_yield,
            time_years,
        }
    }
}

/// A strategy: legs in a market.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    pub market: Market,
    pub legs: Vec<Leg>,
}

/// Root-finding tolerance in price, relative.
const ROOT_TOL: f64 = 1e-12;

impl Strategy {
    /// The earliest option expiry: "at expiry" means then. `None` without option legs.
    #[must_use]
    pub fn expiry(&self) -> Option<f64> {
        self.legs
            .iter()
            .filter_map(|l| match l.kind {
                LegKind::Option { time_years, .. } => Some(time_years),
                LegKind::Stock => None,
            })
            .reduce(f64::min)
    }

    /// Premium paid (positive) or received (negative).
    #[must_use]
    pub fn net_premium(&self) -> f64 {
        self.legs.iter().map(|l| l.quantity * l.premium).sum()
    }

    /// Whether some leg outlives the earliest expiry (then the payoff is not piecewise
    /// linear).
    #[must_use]
    pub fn has_later_legs(&self, expiry: f64) -> bool {
        self.legs
            .iter()
            .any(|l| matches!(l.kind, LegKind::Option { time_years, .. } if time_years > expiry))
    }

    /// The volatility of the underlying to `expiry`: the |quantity|-weighted mean of the
    /// volatilities of the legs that expire by then (NaN without such legs).
    #[must_use]
    pub fn expiry_volatility(&self, expiry: f64) -> f64 {
        let (mut weighted, mut weight) = (0.0, 0.0);
        for l in &self.legs {
            if let LegKind::Option {
                volatility,
                time_years,
                ..
            } = l.kind
                && time_years <= expiry
            {
                weighted += l.quantity.abs() * volatility;
                weight += l.quantity.abs();
            }
        }
        weighted / weight
    }

    /// P&L at the earliest expiry if the underlying is at `price_then` then.
    #[must_use]
    pub fn pnl_at_expiry(&self, price_then: f64) -> f64 {
        self.pnl(price_then, self.expiry().unwrap_or(0.0))
    }

    /// P&L now if the underlying moved to `price_now` at once.
    #[must_use]
    pub fn pnl_now(&self, price_now: f64) -> f64 {
        self.pnl(price_now, 0.0)
    }

    /// P&L with the underlying at `spot`, `elapsed` years from now.
    fn pnl(&self, spot: f64, elapsed: f64) -> f64 {
        self.legs
            .iter()
            .map(|l| l.quantity * (l.kind.value(&self.market, spot, elapsed) - l.premium))
            .sum()
    }

    /// Greeks summed over legs at the current spot (a stock leg has delta 1 per share).
    #[must_use]
    pub fn greeks(&self) -> Greeks {
        let mut sum = Greeks::default();
        for l in &self.legs {
            match l.kind.option_at(&self.market, self.market.spot, 0.0) {
                None => sum.delta += l.quantity,
                Some((kind, contract)) => {
                    let g = greeks(kind, &contract);
                    sum.price += l.quantity * g.price;
                    sum.delta += l.quantity * g.delta;
                    sum.gamma += l.quantity * g.gamma;
                    sum.vega += l.quantity * g.vega;
                    sum.theta += l.quantity * g.theta;
                    sum.rho += l.quantity * g.rho;
                }
            }
        }
        sum
    }

    /// The strikes of the legs that expire at the earliest expiry, sorted: the kinks of
    /// the payoff.
    fn kinks(&self, expiry: f64) -> Vec<f64> {
        let mut k: Vec<f64> = self
            .legs
            .iter()
            .filter_map(|l| match l.kind {
                LegKind::Option {
                    strike, time_years, ..
                } if time_years <= expiry => Some(strike),
                _ => None,
            })
            .collect();
        k.sort_by(f64::total_cmp);
        k.dedup();
        k
    }

    /// The slope of the expiry payoff beyond the highest strike (when piecewise linear):
    /// shares held, long calls, minus short calls.
    fn final_slope(&self) -> f64 {
        self.legs
            .iter()
            .map(|l| match l.kind {
                LegKind::Stock
                | LegKind::Option {
                    kind: Kind::Call, ..
                } => l.quantity,
                LegKind::Option {
                    kind: Kind::Put, ..
                } => 0.0,
            })
            .sum()
    }

    /// The prices at which the expiry P&L crosses zero, found as roots. `search_high` is
    /// how far up a payoff that is not piecewise linear is searched.
    #[must_use]
    pub fn breakevens(&self, search_high: f64) -> Vec<f64> {
        let Some(expiry) = self.expiry() else {
            return Vec::new();
        };
        let f = |p: f64| self.pnl_at_expiry(p);
        let kinks = self.kinks(expiry);
        let smooth = self.has_later_legs(expiry);
        // Segment ends: 0, every kink, then a point beyond them all.
        let top = kinks.last().copied().unwrap_or(self.market.spot);
        let mut ends = vec![0.0];
        ends.extend(kinks.iter().copied());
        let mut roots = Vec::new();
        let push = |r: f64, roots: &mut Vec<f64>| {
            if roots
                .last()
                .is_none_or(|last: &f64| (r - last).abs() > ROOT_TOL * r.max(1.0))
            {
                roots.push(r);
            }
        };
        let segments: Vec<(f64, f64)> = ends.windows(2).map(|w| (w[0], w[1])).collect();
        for (a, b) in segments {
            for (x, y) in sub_intervals(a, b, smooth) {
                for r in bracketed_roots(&f, x, y) {
                    push(r, &mut roots);
                }
            }
        }
        // Beyond the last kink.
        if smooth {
            let high = search_high.max(top * 2.0);
            for (x, y) in sub_intervals(top, high, true) {
                for r in bracketed_roots(&f, x, y) {
                    push(r, &mut roots);
                }
            }
        } else {
            let slope = self.final_slope();
            let at_top = f(top);
            if at_top == 0.0 && slope != 0.0 {
                push(top, &mut roots);
            } else if slope != 0.0 && at_top.signum() != slope.signum() {
                push(top - at_top / slope, &mut roots);
            }
        }
        roots
    }

    /// Maximum profit and loss at expiry (`None` when unbounded), for a piecewise-linear
    /// payoff exactly (at 0 and the kinks, plus the slope beyond them); otherwise over
    /// the sampled `prices`, unbounded when the final slope of the long-dated legs is
    /// not zero.
    #[must_use]
    pub fn extremes(&self, prices: &[f64]) -> (Option<f64>, Option<f64>) {
        let Some(expiry) = self.expiry() else {
            return (None, None);
        };
        let mut points = vec![0.0];
        points.extend(self.kinks(expiry));
        if self.has_later_legs(expiry) {
            points.extend_from_slice(prices);
        }
        let values: Vec<f64> = points.iter().map(|p| self.pnl_at_expiry(*p)).collect();
        let max = values.iter().copied().fold(f64::MIN, f64::max);
        let min = values.iter().copied().fold(f64::MAX, f64::min);
        let slope = self.final_slope();
        let slope = if slope.abs() < 1e-12 { 0.0 } else { slope };
        ((slope <= 0.0).then_some(max), (slope >= 0.0).then_some(min))
    }

    /// Probability that the expiry P&L is above zero, with the underlying lognormal under
    /// the risk-neutral drift (r - q) and volatility `vol`, over the root intervals.
    #[must_use]
    pub fn probability_of_profit(&self, breakevens: &[f64], vol: f64) -> f64 {
        let Some(t) = self.expiry() else {
            return 0.0;
        };
        let m = &self.market;
        let sd = vol * t.sqrt();
        let mu = m.spot.ln() + (m.rate - m.dividend_yield - 0.5 * vol * vol) * t;
        // P(S_T <= x).
        let cdf = |x: f64| {
            if x <= 0.0 {
                0.0
            } else if sd <= 0.0 {
                if mu.exp() <= x { 1.0 } else { 0.0 }
            } else {
                norm_cdf((x.ln() - mu) / sd)
            }
        };
        let mut edges = vec![0.0];
        edges.extend_from_slice(breakevens);
        let mut total = 0.0;
        for (i, &a) in edges.iter().enumerate() {
            let b = edges.get(i + 1).copied();
            let probe = match b {
                Some(b) => 0.5 * (a + b),
                None => a * 1.5 + 1.0,
            };
            if self.pnl_at_expiry(probe) > 0.0 {
                total += b.map_or(1.0, cdf) - cdf(a);
            }
        }
        total.clamp(0.0, 1.0)
    }
}

fn intrinsic(kind: Kind, spot: f64, strike: f64) -> f64 {
    match kind {
        Kind::Call => (spot - strike).max(0.0),
        Kind::Put => (strike - spot).max(0.0),
    }
}

/// A segment cut into pieces small enough that a smooth payoff changes sign at most
/// once in each; a linear segment stays whole.
fn sub_intervals(a: f64, b: f64, smooth: bool) -> Vec<(f64, f64)> {
    let pieces = if smooth { 64 } else { 1 };
    let width = (b - a) / f64::from(pieces);
    (0..pieces)
        .map(|i| (a + width * f64::from(i), a + width * f64::from(i + 1)))
        .collect()
}

/// Roots of `f` in `[a, b]` where it changes sign: a zero at `a` counts, and a sign
/// change is refined by Brent's method to [`ROOT_TOL`].
fn bracketed_roots(f: &impl Fn(f64) -> f64, a: f64, b: f64) -> Vec<f64> {
    let (fa, fb) = (f(a), f(b));
    if fa == 0.0 && a > 0.0 {
        return vec![a];
    }
    if fa.signum() == fb.signum() || fb == 0.0 {
        return Vec::new();
    }
    vec![brent(f, a, b, fa, fb)]
}

/// Brent's method on a bracket with a sign change.
fn brent(f: &impl Fn(f64) -> f64, mut a: f64, mut b: f64, mut fa: f64, mut fb: f64) -> f64 {
    if fa.abs() < fb.abs() {
        std::mem::swap(&mut a, &mut b);
        std::mem::swap(&mut fa, &mut fb);
    }
    let (mut c, mut fc) = (a, fa);
    let mut d = b - a;
    let mut bisected = true;
    for _ in 0..200 {
        if fb == 0.0 || (b - a).abs() <= ROOT_TOL * b.abs().max(1e-300) {
            break;
        }
        let mut s = if fa != fc && fb != fc {
            // Inverse quadratic interpolation.
            a * fb * fc / ((fa - fb) * (fa - fc))
                + b * fa * fc / ((fb - fa) * (fb - fc))
                + c * fa * fb / ((fc - fa) * (fc - fb))
        } else {
            b - fb * (b - a) / (fb - fa)
        };
        let lo = (3.0 * a + b) / 4.0;
        let outside = !((s > lo.min(b)) && (s < lo.max(b)));
        let slow = if bisected {
            (s - b).abs() >= (b - c).abs() / 2.0
        } else {
            (s - b).abs() >= (c - d).abs() / 2.0
        };
        if outside || slow {
            s = 0.5 * (a + b);
            bisected = true;
        } else {
            bisected = false;
        }
        let fs = f(s);
        d = c;
        c = b;
        fc = fb;
        if fa.signum() == fs.signum() {
            a = s;
            fa = fs;
        } else {
            b = s;
            fb = fs;
        }
        if fa.abs() < fb.abs() {
            std::mem::swap(&mut a, &mut b);
            std::mem::swap(&mut fa, &mut fb);
        }
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1.0)
    }

    const ATM: Contract = Contract {
        spot: 100.0,
        strike: 100.0,
        volatility: 0.2,
        rate: 0.05,
        dividend_yield: 0.0,
        time_years: 1.0,
    };

    #[test]
    fn the_textbook_at_the_money_call() {
        // Hull's classic: S=K=100, r=5%, sigma=20%, T=1 gives 10.4506.
        let g = greeks(Kind::Call, &ATM);
        assert!(close(g.price, 10.450_583_572_185_565, 1e-12), "{}", g.price);
        assert!(close(g.delta, 0.636_830_651_175_619, 1e-12));
        // Put-call parity.
        let p = greeks(Kind::Put, &ATM).price;
        assert!(close(g.price - p, 100.0 - 100.0 * (-0.05_f64).exp(), 1e-12));
    }

    #[test]
    fn implied_volatility_recovers_the_volatility_far_from_the_money() {
        for (strike, t) in [(100.0, 1.0), (30.0, 0.1), (300.0, 2.0), (60.0, 5.0)] {
            for kind in [Kind::Call, Kind::Put] {
                let c = Contract {
                    strike,
                    time_years: t,
                    ..ATM
                };
                let p = price(kind, &c);
                let (lo, hi) = bounds(kind, &c);
                if p <= lo || p >= hi || (p - lo) / p < 1e-9 {
                    continue;
                }
                let iv = implied_volatility(kind, &c, p).expect("solves");
                assert!(
                    close(iv.volatility, 0.2, 1e-7),
                    "{kind:?} {strike} {t}: {iv:?}"
                );
            }
        }
        assert!(matches!(
            implied_volatility(Kind::Call, &ATM, 0.0),
            Err(IvError::BelowLower(_))
        ));
        assert!(matches!(
            implied_volatility(Kind::Call, &ATM, 100.0),
            Err(IvError::AboveUpper(_))
        ));
    }

    #[test]
    fn a_bull_call_spread_breaks_even_at_the_lower_strike_plus_the_debit() {
        let m = Market {
            spot: 100.0,
            rate: 0.0,
            dividend_yield: 0.0,
        };
        let opt = |strike, quantity, premium| Leg {
            kind: LegKind::Option {
                kind: Kind::Call,
                strike,
                volatility: 0.2,
                time_years: 0.5,
            },
            quantity,
            premium,
        };
        let s = Strategy {
            market: m,
            legs: vec![opt(95.0, 1.0, 8.0), opt(105.0, -1.0, 3.0)],
        };
        assert!(close(s.net_premium(), 5.0, 1e-15));
        let be = s.breakevens(200.0);
        assert_eq!(be.len(), 1);
        assert!(close(be[0], 100.0, 1e-12), "{be:?}");
        let (max_profit, max_loss) = s.extremes(&[]);
        assert_eq!(max_profit, Some(5.0));
        assert_eq!(max_loss, Some(-5.0));
        // A long call alone: unbounded profit.
        let call = Strategy {
            market: m,
            legs: vec![opt(100.0, 1.0, 4.0)],
        };
        assert_eq!(call.extremes(&[]), (None, Some(-4.0)));
        assert!(close(call.breakevens(200.0)[0], 104.0, 1e-12));
    }
}
