#!/usr/bin/env python3
"""Times peer option libraries on European Black-Scholes-Merton pricing, greeks and
implied volatility: py_vollib (plain loop), py_vollib_vectorized and QuantLib.

Usage (bench/run_options_peers.sh makes the venvs and calls this):

    bench/.venv-options/bin/python bench/options_peers.py [--cases 200000]
        [--loop-cases 20000] [--repeats 3] [--check 2000]
        [--vectorized-python bench/.venv-options-vectorized/bin/python]

Everything runs on one thread: NUMBA_NUM_THREADS, OMP/MKL/OPENBLAS/NUMEXPR threads are
set to 1 before anything is imported, and each peer runs in a child process of its own.
py_vollib_vectorized runs in a second venv (--vectorized-python): it needs the numba-
jitted py_lets_be_rational 1.0.1 and the original py_vollib 1.0.1, while the current
py_vollib (1.0.12, a shim over vollib 1.0.11) pulls lets_be_rational 1.1.2, whose wheel
also writes a py_lets_be_rational/ folder without numba; with it py_vollib_vectorized
0.1.1 fails to compile (numba TypingError on norm_cdf). Without that venv the
vectorized rows are skipped.

Cases: --cases of them, seeded (numpy default_rng(SEED)), the same for every peer; the
loop peers take the first --loop-cases of them. Each: call or put (even odds), strike 100, spot 100 x
exp(U(-0.4, 0.4)), expiry a whole number of days in 7..1095 (time = days / 365),
volatility U(0.08, 0.8), rate U(-0.01, 0.08), dividend yield U(0, 0.05). Building the
cases is not timed.

(a) price_greeks: price, delta, gamma, vega, theta, rho for each case, in the units of
    docs/methodology/research.md (vega and rho per 0.01, theta per calendar day).
    * py_vollib: a Python loop calling black_scholes_merton and the five analytical
      greeks (py_vollib.black_scholes_merton.greeks.analytical), each one call;
    * py_vollib_vectorized: one call of vectorized_black_scholes_merton and one of
      get_all_greeks(model="black_scholes_merton") on the arrays. Its greeks are
      numerical (finite differences: theta is the one-day forward difference, vega and
      rho central differences of +-0.01), not analytical;
    * QuantLib: one VanillaOption per type (call, put; strike 100) with
      AnalyticEuropeanEngine on one BlackScholesMertonProcess whose spot, rate, dividend
      and volatility are SimpleQuotes updated per case with setValue; the term
      structures move with the evaluation date (settlement days 0, NullCalendar,
      Actual365Fixed), which is set per case to maturity - days, so the expiry varies
      too. Per case: NPV, delta, gamma, vega, thetaPerDay, rho (vega and rho / 100 after
      the timing).
(b) iv: implied volatility of prices computed (untimed) from the cases with numpy's
    closed form, keeping the cases whose time value is at least 1e-4 of the price and
    whose price is at least 1e-6 of the strike (the volatility is well determined).
    * py_vollib: a loop of black_scholes_merton.implied_volatility (Let's Be Rational);
    * py_vollib_vectorized: vectorized_implied_volatility(model="black_scholes_merton");
    * QuantLib: per case, evaluation date and quotes set as above, then
      VanillaOption.impliedVolatility(price, process, accuracy=1e-12,
      maxEvaluations=200, minVol=1e-4, maxVol=4.0) (Brent; the accuracy is tightened
      from QuantLib's default 1e-4 to be comparable with Let's Be Rational).

Timing: each measurement is the best of --repeats runs, after one untimed warm-up run on
a small slice (for py_vollib_vectorized that warm-up is numba's compilation, into an
empty NUMBA_CACHE_DIR; its time is reported as first_call_s). Imports are not timed.

Check (not timed): on the first --check cases whose price is at least 1e-6 of the strike,
every peer's results are compared with py_vollib's analytical ones, and on the first
--check implied-volatility cases every implied volatility with the volatility that made
the price; the largest relative differences go to stderr. Expect py_vollib_vectorized's
finite-difference greeks to differ (theta by a lot: a one-day difference is not the
derivative; rho too: its BSM rho bumps the dividend yield along with the rate).

Output: a table (peer, what, cases, seconds, per_second) and one line per measurement
    PEER_JSON {"peer": ..., "what": "price_greeks"|"iv", "per_second": ..., "cases": ...,
               "seconds": ..., "version": ..., "note": ...}
"""

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

SEED = 20240611
STRIKE = 100.0
FIELDS = ("price", "delta", "gamma", "vega", "theta", "rho")
HERE = os.path.dirname(os.path.abspath(__file__))


# ------------------------------------------------------------------------ the cases

def make_cases(n, seed=SEED):
    """The seeded cases as numpy arrays (see the module docstring)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    is_call = rng.random(n) < 0.5
    spot = STRIKE * np.exp(rng.uniform(-0.4, 0.4, n))
    days = rng.integers(7, 1096, n)
    vol = rng.uniform(0.08, 0.8, n)
    rate = rng.uniform(-0.01, 0.08, n)
    div = rng.uniform(0.0, 0.05, n)
    return {"is_call": is_call, "spot": spot, "strike": np.full(n, STRIKE),
            "days": days, "t": days / 365.0, "vol": vol, "rate": rate, "div": div}


def closed_form_prices(c):
    """BSM prices with numpy/scipy (only to make implied-volatility targets)."""
    import numpy as np
    from scipy.special import ndtr

    sd = c["vol"] * np.sqrt(c["t"])
    d1 = (np.log(c["spot"] / c["strike"]) + (c["rate"] - c["div"]) * c["t"]) / sd + sd / 2
    d2 = d1 - sd
    sq = c["spot"] * np.exp(-c["div"] * c["t"])
    kr = c["strike"] * np.exp(-c["rate"] * c["t"])
    call = sq * ndtr(d1) - kr * ndtr(d2)
    put = kr * ndtr(-d2) - sq * ndtr(-d1)
    return np.where(c["is_call"], call, put), sq, kr


def iv_cases(n, seed=SEED):
    """The cases usable for implied volatility, with their target prices."""
    import numpy as np

    c = make_cases(n, seed)
    price, sq, kr = closed_form_prices(c)
    lower = np.where(c["is_call"], np.maximum(sq - kr, 0.0), np.maximum(kr - sq, 0.0))
    keep = ((price - lower) >= 1e-4 * price) & (price >= 1e-6 * c["strike"])
    out = {k: v[keep] for k, v in c.items()}
    out["price"] = price[keep]
    return out


def best_of(repeats, fn):
    """Best wall time of `repeats` calls of fn(), and the last result."""
    times, result = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


# ---------------------------------------------------------------- py_vollib (child)

def child_py_vollib(args):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import importlib.metadata
        from py_vollib.black_scholes_merton import black_scholes_merton as price_fn
        from py_vollib.black_scholes_merton.greeks.analytical import (
            delta, gamma, rho, theta, vega)
        from py_vollib.black_scholes_merton.implied_volatility import implied_volatility
    import_s = time.perf_counter() - t0

    # the whole seeded set, then its first --loop-cases (so every peer sees the same cases)
    c = {k: v[:args.loop_cases] for k, v in make_cases(args.cases).items()}
    rows = list(zip(["c" if x else "p" for x in c["is_call"]], c["spot"].tolist(),
                    c["strike"].tolist(), c["t"].tolist(), c["rate"].tolist(),
                    c["vol"].tolist(), c["div"].tolist()))

    def price_greeks(rs):
        out = []
        for flag, S, K, t, r, v, q in rs:
            out.append((price_fn(flag, S, K, t, r, v, q), delta(flag, S, K, t, r, v, q),
                        gamma(flag, S, K, t, r, v, q), vega(flag, S, K, t, r, v, q),
                        theta(flag, S, K, t, r, v, q), rho(flag, S, K, t, r, v, q)))
        return out

    price_greeks(rows[:200])  # warm-up
    pg_s, pg = best_of(args.repeats, lambda: price_greeks(rows))

    ivc = iv_cases(args.cases)
    m = min(args.loop_cases, len(ivc["price"]))
    iv_rows = list(zip(ivc["price"][:m].tolist(), ivc["spot"][:m].tolist(),
                       ivc["strike"][:m].tolist(), ivc["t"][:m].tolist(),
                       ivc["rate"][:m].tolist(), ivc["div"][:m].tolist(),
                       ["c" if x else "p" for x in ivc["is_call"][:m]]))

    def ivs(rs):
        return [implied_volatility(p, S, K, t, r, q, flag) for p, S, K, t, r, q, flag in rs]

    ivs(iv_rows[:200])  # warm-up
    iv_s, iv = best_of(args.repeats, lambda: ivs(iv_rows))

    print(json.dumps({
        "version": importlib.metadata.version("py_vollib"),
        "detail": "vollib " + importlib.metadata.version("vollib") + ", lets_be_rational "
                  + importlib.metadata.version("lets_be_rational"),
        "import_s": import_s,
        "price_greeks": {"cases": len(rows), "seconds": pg_s},
        "iv": {"cases": m, "seconds": iv_s},
        "check_greeks": [[float(x) for x in r] for r in pg[:args.check]],
        "check_iv": [float(x) for x in iv[:args.check]],
    }))


# ------------------------------------------------------- py_vollib_vectorized (child)

def child_vectorized(args):
    import numpy as np

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import importlib.metadata
        import py_vollib_vectorized as pvv
    import_s = time.perf_counter() - t0

    c = make_cases(args.cases)
    flags = np.where(c["is_call"], "c", "p")

    def price_greeks(sl):
        args_ = (flags[sl], c["spot"][sl], c["strike"][sl], c["t"][sl], c["rate"][sl],
                 c["vol"][sl], c["div"][sl])
        price = pvv.vectorized_black_scholes_merton(*args_, return_as="numpy")
        greeks = pvv.get_all_greeks(*args_, model="black_scholes_merton", return_as="dict")
        return price, greeks

    # first call: numba compiles every kernel it touches (NUMBA_CACHE_DIR is empty)
    t0 = time.perf_counter()
    price_greeks(slice(0, 100))
    first_pg_s = time.perf_counter() - t0
    pg_s, (price, greeks) = best_of(args.repeats, lambda: price_greeks(slice(None)))

    ivc = iv_cases(args.cases)
    iv_flags = np.where(ivc["is_call"], "c", "p")

    def ivs(sl):
        return pvv.vectorized_implied_volatility(
            ivc["price"][sl], ivc["spot"][sl], ivc["strike"][sl], ivc["t"][sl],
            ivc["rate"][sl], iv_flags[sl], q=ivc["div"][sl], model="black_scholes_merton",
            return_as="numpy", on_error="ignore")

    t0 = time.perf_counter()
    ivs(slice(0, 100))
    first_iv_s = time.perf_counter() - t0
    iv_s, iv = best_of(args.repeats, lambda: ivs(slice(None)))

    k = args.check
    check = [[float(price[i])] + [float(greeks[f][i]) for f in FIELDS[1:]] for i in range(k)]
    print(json.dumps({
        "version": importlib.metadata.version("py_vollib_vectorized"),
        "detail": "numba " + importlib.metadata.version("numba") + ", py_vollib "
                  + importlib.metadata.version("py_vollib") + ", py_lets_be_rational "
                  + importlib.metadata.version("py_lets_be_rational"),
        "import_s": import_s,
        "price_greeks": {"cases": len(price), "seconds": pg_s, "first_call_s": first_pg_s},
        "iv": {"cases": len(iv), "seconds": iv_s, "first_call_s": first_iv_s},
        "check_greeks": check,
        "check_iv": [float(x) for x in iv[:k]],
    }))


# ---------------------------------------------------------------- QuantLib (child)

def child_quantlib(args):
    t0 = time.perf_counter()
    import importlib.metadata
    import QuantLib as ql
    import_s = time.perf_counter() - t0

    settings = ql.Settings.instance()
    base = ql.Date(2, 1, 2024)
    settings.evaluationDate = base
    maturity = base + 1200          # beyond the longest expiry (1095 days)
    dc, cal = ql.Actual365Fixed(), ql.NullCalendar()
    spot_q, rate_q, div_q, vol_q = (ql.SimpleQuote(x) for x in (100.0, 0.0, 0.0, 0.2))
    # settlement days 0: the curves' reference date is the evaluation date, and moves
    rate_ts = ql.YieldTermStructureHandle(
        ql.FlatForward(0, cal, ql.QuoteHandle(rate_q), dc, ql.Continuous))
    div_ts = ql.YieldTermStructureHandle(
        ql.FlatForward(0, cal, ql.QuoteHandle(div_q), dc, ql.Continuous))
    vol_ts = ql.BlackVolTermStructureHandle(
        ql.BlackConstantVol(0, cal, ql.QuoteHandle(vol_q), dc))
    process = ql.BlackScholesMertonProcess(ql.QuoteHandle(spot_q), div_ts, rate_ts, vol_ts)
    engine = ql.AnalyticEuropeanEngine(process)
    options = {}
    for is_call, kind in ((True, ql.Option.Call), (False, ql.Option.Put)):
        opt = ql.VanillaOption(ql.PlainVanillaPayoff(kind, STRIKE),
                               ql.EuropeanExercise(maturity))
        opt.setPricingEngine(engine)
        options[is_call] = opt
    # one Date per distinct expiry, made before the timing (Date arithmetic is not the point)
    eval_dates = {d: maturity - d for d in range(7, 1096)}

    c = {k: v[:args.loop_cases] for k, v in make_cases(args.cases).items()}
    rows = list(zip(c["is_call"].tolist(), c["spot"].tolist(), c["days"].tolist(),
                    c["rate"].tolist(), c["div"].tolist(), c["vol"].tolist()))

    def price_greeks(rs):
        out = []
        for is_call, S, days, r, q, v in rs:
            settings.evaluationDate = eval_dates[days]
            spot_q.setValue(S)
            rate_q.setValue(r)
            div_q.setValue(q)
            vol_q.setValue(v)
            o = options[is_call]
            out.append((o.NPV(), o.delta(), o.gamma(), o.vega(), o.thetaPerDay(), o.rho()))
        return out

    price_greeks(rows[:200])  # warm-up
    pg_s, pg = best_of(args.repeats, lambda: price_greeks(rows))
    pg = [(p, d, g, v / 100.0, th, rh / 100.0) for p, d, g, v, th, rh in pg]

    ivc = iv_cases(args.cases)
    m = min(args.loop_cases, len(ivc["price"]))
    iv_rows = list(zip(ivc["is_call"][:m].tolist(), ivc["spot"][:m].tolist(),
                       ivc["days"][:m].tolist(), ivc["rate"][:m].tolist(),
                       ivc["div"][:m].tolist(), ivc["price"][:m].tolist()))
    failures = []

    def ivs(rs):
        out = []
        failures.clear()
        for i, (is_call, S, days, r, q, price) in enumerate(rs):
            settings.evaluationDate = eval_dates[days]
            spot_q.setValue(S)
            rate_q.setValue(r)
            div_q.setValue(q)
            try:
                out.append(options[is_call].impliedVolatility(price, process, 1e-12, 200,
                                                              1e-4, 4.0))
            except RuntimeError:
                failures.append(i)
                out.append(float("nan"))
        return out

    ivs(iv_rows[:200])  # warm-up
    iv_s, iv = best_of(args.repeats, lambda: ivs(iv_rows))

    print(json.dumps({
        "version": importlib.metadata.version("QuantLib"),
        "detail": "AnalyticEuropeanEngine",
        "import_s": import_s,
        "price_greeks": {"cases": len(rows), "seconds": pg_s},
        "iv": {"cases": m, "seconds": iv_s, "failures": len(failures)},
        "check_greeks": [list(r) for r in pg[:args.check]],
        "check_iv": iv[:args.check],
    }))


# ------------------------------------------------------------------------ parent

def run_child(kind, args, python, env_extra=None):
    env = dict(os.environ)
    env.update(env_extra or {})
    cmd = [python, os.path.abspath(__file__), "--child", kind,
           "--cases", str(args.cases), "--loop-cases", str(args.loop_cases),
           "--repeats", str(args.repeats), "--check", str(args.check)]
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def max_rel(a, b):
    """Largest |a - b| / |b| over paired values (NaN in a counts as a failure: inf)."""
    worst = 0.0
    for x, y in zip(a, b):
        if x != x:
            return float("inf")
        worst = max(worst, abs(x - y) / abs(y) if y != 0 else abs(x))
    return worst


def report_check(name, res, ref, true_vols):
    """Agreement of one peer with py_vollib's analytical values, on stderr."""
    parts = []
    # compare where the price is at least 1e-6 of the strike: below that, relative
    # differences measure tail arithmetic (QuantLib's puts go to 0 there), not the peer
    keep = [i for i, r in enumerate(ref["check_greeks"]) if r[0] >= 1e-6 * STRIKE]
    if res is not ref:
        for j, f in enumerate(FIELDS):
            got = [res["check_greeks"][i][j] for i in keep]
            want = [ref["check_greeks"][i][j] for i in keep]
            parts.append(f"{f} {max_rel(got, want):.2g}")
    iv_err = max_rel(res["check_iv"], true_vols[:len(res["check_iv"])])
    print(f"# check {name}: "
          + (f"vs py_vollib analytical on {len(keep)} of the first "
             f"{len(res['check_greeks'])} cases (price >= 1e-6 x strike), max rel "
             + ", ".join(parts) + "; " if parts else "")
          + f"implied volatility vs the true one, max rel {iv_err:.2g}", file=sys.stderr)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cases", type=int, default=200_000,
                   help="cases for py_vollib_vectorized (and the pool the loops draw from)")
    p.add_argument("--loop-cases", type=int, default=20_000,
                   help="cases for the per-case loops (py_vollib, QuantLib)")
    p.add_argument("--repeats", type=int, default=3, help="best of this many timed runs")
    p.add_argument("--check", type=int, default=2000, help="cases compared across peers")
    p.add_argument("--vectorized-python",
                   default=os.path.join(HERE, ".venv-options-vectorized", "bin", "python"),
                   help="the Python of the venv that has py_vollib_vectorized")
    p.add_argument("--child", choices=["py_vollib", "vectorized", "quantlib"])
    args = p.parse_args()
    args.loop_cases = min(args.loop_cases, args.cases)
    args.check = min(args.check, args.loop_cases)
    if args.child == "py_vollib":
        return child_py_vollib(args)
    if args.child == "vectorized":
        return child_vectorized(args)
    if args.child == "quantlib":
        return child_quantlib(args)

    print(f"# python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; one thread per peer",
          file=sys.stderr)
    results = {"py_vollib": run_child("py_vollib", args, sys.executable)}
    if os.path.exists(args.vectorized_python):
        cache = tempfile.mkdtemp(prefix="options-peers-numba-cache-")
        try:
            results["py_vollib_vectorized"] = run_child(
                "vectorized", args, args.vectorized_python, {"NUMBA_CACHE_DIR": cache})
        finally:
            shutil.rmtree(cache, ignore_errors=True)
    else:
        print(f"# py_vollib_vectorized skipped: no {args.vectorized_python}", file=sys.stderr)
    results["QuantLib"] = run_child("quantlib", args, sys.executable)

    true_vols = iv_cases(args.cases)["vol"].tolist()
    for name, res in results.items():
        report_check(name, res, results["py_vollib"], true_vols)

    notes = {
        ("py_vollib", "price_greeks"): "Python loop: price + 5 analytical greeks, 6 calls per case",
        ("py_vollib", "iv"): "Python loop of implied_volatility (Let's Be Rational)",
        ("py_vollib_vectorized", "price_greeks"):
            "numba, one call for prices + get_all_greeks (numerical greeks)",
        ("py_vollib_vectorized", "iv"): "numba, vectorized_implied_volatility",
        ("QuantLib", "price_greeks"):
            "one VanillaOption per type, quotes and evaluation date set per case",
        ("QuantLib", "iv"): "impliedVolatility, Brent, accuracy 1e-12",
    }
    rows = []
    for name, res in results.items():
        for what in ("price_greeks", "iv"):
            m = res[what]
            rec = {"peer": name, "what": what, "per_second": round(m["cases"] / m["seconds"], 1),
                   "cases": m["cases"], "seconds": round(m["seconds"], 6),
                   "version": res["version"], "detail": res["detail"],
                   "note": notes[(name, what)] + f"; best of {args.repeats}"}
            if "first_call_s" in m:
                rec["first_call_s"] = round(m["first_call_s"], 3)
            if m.get("failures"):
                rec["failures"] = m["failures"]
            rows.append(rec)

    print(f"{'peer':<22} {'what':<13} {'cases':>8} {'seconds':>9} {'per_second':>12}")
    for r in rows:
        print(f"{r['peer']:<22} {r['what']:<13} {r['cases']:>8} {r['seconds']:>9.4f} "
              f"{r['per_second']:>12,.0f}")
    for r in rows:
        print("PEER_JSON " + json.dumps(r))


if __name__ == "__main__":
    main()
