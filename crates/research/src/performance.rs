//! Return measures over dated flows: the money-weighted XIRR (actual/365) and the
//! chained time-weighted return.

/// A dated amount: `days` from the first flow (fractions allowed), signed as the
/// investor sees it (money in negative, money out or value held positive).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Flow {
    pub days: f64,
    pub amount: f64,
}

/// Net present value at `rate`, actual/365.
#[must_use]
pub fn npv(flows: &[Flow], rate: f64) -> f64 {
    npv_of_growth(flows, (1.0 + rate).ln())
}

/// [`npv`] at the rate exp(g) - 1 (g = ln(1 + rate)).
fn npv_of_growth(flows: &[Flow], g: f64) -> f64 {
    flows
        .iter()
        .map(|f| f.amount * (-g * f.days / 365.0).exp())
        .sum()
}

/// The secant's root inside (lo, hi), or the midpoint when it falls on or outside them.
fn secant_or_midpoint(lo: f64, hi: f64, flo: f64, fhi: f64) -> f64 {
    let g = (lo * fhi - hi * flo) / (fhi - flo);
    if g.is_finite() && g > lo && g < hi {
        g
    } else {
        0.5 * (lo + hi)
    }
}

/// The rate at which [`npv`] is zero, to `1e-10` in the rate (relative above 1), or
/// `None` when the flows have no root with a rate above -100% (all of one sign, say).
///
/// The search is on g = ln(1 + rate), where NPV is smooth and defined for every real g:
/// it brackets a sign change, then bisects with secant steps (Illinois), which cannot
/// diverge.
#[must_use]
pub fn xirr(flows: &[Flow]) -> Option<f64> {
    let has_in = flows.iter().any(|f| f.amount < 0.0);
    let has_out = flows.iter().any(|f| f.amount > 0.0);
    if !has_in || !has_out {
        return None;
    }
    let at = |g: f64| npv_of_growth(flows, g);
    // Bracket: widen around g = 0 until the NPV changes sign.
    let (mut lo, mut hi) = (-0.5_f64, 0.5_f64);
    let (mut flo, mut fhi) = (at(lo), at(hi));
    let mut widen = 0;
    while flo.signum() == fhi.signum() {
        widen += 1;
        if widen > 60 {
            return None;
        }
        lo *= 2.0;
        hi *= 2.0;
        // ln(1 + rate) beyond +-700 overflows exp: no rate there is meaningful.
        if hi > 700.0 {
            return None;
        }
        flo = at(lo);
        fhi = at(hi);
    }
    if flo == 0.0 {
        return Some(lo.exp_m1());
    }
    // Illinois regula falsi on [lo, hi].
    let mut side = 0i8;
    for _ in 0..500 {
        let g = secant_or_midpoint(lo, hi, flo, fhi);
        let fg = at(g);
        if fg == 0.0 {
            return Some(g.exp_m1());
        }
        if fg.signum() == flo.signum() {
            lo = g;
            flo = fg;
            if side == -1 {
                fhi *= 0.5;
            }
            side = -1;
        } else {
            hi = g;
            fhi = fg;
            if side == 1 {
                flo *= 0.5;
            }
            side = 1;
        }
        // The rate is exp(g) - 1: its error is exp(g) times g's.
        let (rlo, rhi) = (lo.exp_m1(), hi.exp_m1());
        if (rhi - rlo).abs() <= 1e-12 * rhi.abs().max(1.0) {
            break;
        }
    }
    Some(secant_or_midpoint(lo, hi, flo, fhi).exp_m1())
}

/// The time-weighted return of daily values `(value_before_flows_of_previous_day,
/// flow_at_start_of_day, value_at_close)`: the daily returns V_d / (V_(d-1) + F_d) - 1
/// chained. A day that starts with no capital is skipped. Returns the chained growth
/// minus one and the number of days counted.
#[must_use]
pub fn twr(days: &[(f64, f64, f64)]) -> (f64, usize) {
    let mut growth = 1.0;
    let mut counted = 0;
    for &(previous, flow, value) in days {
        let capital = previous + flow;
        if capital.abs() < 1e-9 {
            continue;
        }
        growth *= value / capital;
        counted += 1;
    }
    (growth - 1.0, counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_year_that_doubles_is_one_hundred_percent() {
        let flows = [
            Flow {
                days: 0.0,
                amount: -100.0,
            },
            Flow {
                days: 365.0,
                amount: 200.0,
            },
        ];
        assert!((xirr(&flows).unwrap() - 1.0).abs() < 1e-12);
        assert!(npv(&flows, 1.0).abs() < 1e-9);
        assert!(xirr(&flows[..1]).is_none());
    }

    #[test]
    fn time_weighting_ignores_the_size_of_a_flow() {
        // +10% on 100, then a deposit of 1000 and -10%: TWR = 1.1 x 0.9 - 1.
        let (r, n) = twr(&[(0.0, 100.0, 110.0), (110.0, 1000.0, 999.0)]);
        assert!((r - (1.1 * 0.9 - 1.0)).abs() < 1e-12);
        assert_eq!(n, 2);
        // A day with no capital is skipped.
        assert_eq!(twr(&[(0.0, 0.0, 0.0)]), (0.0, 0));
    }
}
