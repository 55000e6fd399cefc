#!/usr/bin/env python3
"""Times peer backtesters on an SMA 10/30 crossover, long only, next-bar-open fills, no fees.

Usage (bench/run_peers.sh makes the venv and calls this):

    bench/.venv/bin/python bench/peers.py [--bars 1000000] [--bt-bars N] [--warm-runs 20] [--bt-runs 1]

Everything runs on one thread: NUMBA_NUM_THREADS, OMP/MKL/OPENBLAS/NUMEXPR threads are
set to 1 before anything is imported, and each measurement runs in a child process of
its own (so an import or a compile in one cannot warm another).

Data: a seeded random walk built in memory with numpy (default_rng(SEED)), float64
open/high/low/close/volume on a one-minute DatetimeIndex. Building it is not timed.

Strategy, as both peers run it: fast = SMA(close, 10), slow = SMA(close, 30), both
including the current bar; entry when fast crosses above slow, exit when it crosses
below; a signal on bar t fills at the open of bar t+1; entries only when flat, exits
only when in a position; no fees, no slippage.

vectorbt (timed: signals + portfolio + closed-trade count + total return):
    fast = vbt.MA.run(close, 10); slow = vbt.MA.run(close, 30)
    entries = fast.ma_crossed_above(slow).vbt.fshift(1)   # the signal moves to bar t+1
    exits   = fast.ma_crossed_below(slow).vbt.fshift(1)
    pf = vbt.Portfolio.from_signals(close, entries, exits, price=open_, fees=0,
                                    init_cash=10_000_000, freq="1min")
  i.e. the way vectorbt's from_signals docstring recommends ("shift your signals by one
  tick forward ... use a price that comes after the signal"): orders are placed on bar
  t+1 and filled at that bar's open; equity is marked at each close.
  * cold, compile: a fresh process with an empty NUMBA_CACHE_DIR, so the first call
    includes numba's compilation of every kernel it touches (import time is reported
    separately and not included);
  * cold, cached: a fresh process reusing that cache directory (vectorbt's kernels are
    njit(cache=True)), which is what a user sees from the second run on;
  * warm: best of --warm-runs further calls in the cached process.

backtesting.py (timed: Backtest(...).run(), which also computes its statistics):
    class with self.I(sma, Close, 10) / 30 and backtesting.lib.crossover; buy() when
    flat on a cross above, position.close() on a cross below; Backtest(cash=10_000_000,
    commission=0, spread=0, trade_on_close=False, exclusive_orders=False, hedging=False,
    finalize_trades=False). It walks bar by bar in Python (about 20-50k bars/s), so
    --bt-bars can limit it to the first N bars of the same series (default: all of
    them); its bars/second is then measured on that slice only, and the row says so.

Check (not timed): on the bars backtesting.py ran, both peers should produce the same
closed trades (entry and exit bar, entry and exit price); the agreement is printed to
stderr (a crossing decided by float noise between the two SMA codes could differ).

Output: a table (peer, bars, seconds, bars_per_second) and one line per row
    PEER_JSON {"peer": ..., "bars": ..., "seconds": ..., "bars_per_second": ..., ...}
"""

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS"):
    os.environ[_var] = "1"
os.environ["TQDM_DISABLE"] = "1"  # backtesting.py's progress bar

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

SEED = 20240601
FAST, SLOW = 10, 30
CASH = 10_000_000


def make_bars(n, seed=SEED):
    """Seeded random walk: regimes of drifting and mean-reverting returns, float64."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    shocks = rng.standard_normal(n) * 0.0015
    # slow-changing drift so the SMAs trend for a while, then chop
    drift = np.repeat(rng.uniform(-0.0004, 0.0004, n // 500 + 1), 500)[:n]
    log_close = np.log(100.0) + np.cumsum(drift + shocks)
    close = np.exp(log_close)
    prev = np.concatenate(([100.0], close[:-1]))
    open_ = prev * (1.0 + rng.standard_normal(n) * 0.0003)
    top = np.maximum(open_, close)
    bottom = np.minimum(open_, close)
    high = top * (1.0 + rng.uniform(0.0, 0.001, n))
    low = bottom * (1.0 - rng.uniform(0.0, 0.001, n))
    volume = rng.integers(1_000, 100_000, n).astype(float)
    index = pd.date_range("2000-01-03", periods=n, freq="min")
    return pd.DataFrame(
        {"Open": open_, "High": high, "Low": low, "Close": close, "Volume": volume},
        index=index,
    )


# ---------------------------------------------------------------- vectorbt (child)

def vbt_backtest(vbt, df):
    close, open_ = df["Close"], df["Open"]
    fast = vbt.MA.run(close, FAST)
    slow = vbt.MA.run(close, SLOW)
    entries = fast.ma_crossed_above(slow).vbt.fshift(1)
    exits = fast.ma_crossed_below(slow).vbt.fshift(1)
    pf = vbt.Portfolio.from_signals(close, entries, exits, price=open_, fees=0.0,
                                    init_cash=CASH, freq="1min")
    trades = int(pf.trades.closed.count())
    total_return = float(pf.total_return())
    return pf, trades, total_return


def child_vectorbt(args):
    df = make_bars(args.bars)
    t0 = time.perf_counter()
    import vectorbt as vbt
    import_s = time.perf_counter() - t0

    t0 = time.perf_counter()
    _, trades, ret = vbt_backtest(vbt, df)
    first_s = time.perf_counter() - t0

    warm = []
    for _ in range(args.warm_runs):
        t0 = time.perf_counter()
        vbt_backtest(vbt, df)
        warm.append(time.perf_counter() - t0)

    # closed trades on the backtesting.py slice, for the agreement check (not timed)
    pf, _, _ = vbt_backtest(vbt, df.iloc[:args.bt_bars])
    rec = pf.trades.closed.records
    slice_trades = [[int(a), int(b), float(c), float(d)] for a, b, c, d in
                    zip(rec["entry_idx"], rec["exit_idx"], rec["entry_price"], rec["exit_price"])]
    print(json.dumps({
        "version": vbt.__version__, "import_s": import_s, "first_s": first_s,
        "warm_s": min(warm) if warm else None, "trades": trades, "total_return": ret,
        "slice_trades": slice_trades,
    }))


# ---------------------------------------------------------- backtesting.py (child)

def child_backtesting(args):
    import numpy as np
    import pandas as pd

    df = make_bars(args.bars).iloc[:args.bt_bars].copy()
    t0 = time.perf_counter()
    import backtesting
    from backtesting import Backtest, Strategy
    from backtesting.lib import crossover
    import_s = time.perf_counter() - t0

    def sma(values, n):
        return pd.Series(values).rolling(n).mean().to_numpy()

    class SmaCross(Strategy):
        def init(self):
            self.fast = self.I(sma, self.data.Close, FAST)
            self.slow = self.I(sma, self.data.Close, SLOW)

        def next(self):
            if crossover(self.fast, self.slow):
                if not self.position:
                    self.buy()
            elif crossover(self.slow, self.fast):
                self.position.close()

    runs = []
    stats = None
    for _ in range(args.bt_runs):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bt = Backtest(df, SmaCross, cash=CASH, commission=0.0, spread=0.0,
                          trade_on_close=False, exclusive_orders=False, hedging=False,
                          finalize_trades=False)
            stats = bt.run()
        runs.append(time.perf_counter() - t0)
    tr = stats["_trades"]
    slice_trades = [[int(a), int(b), float(c), float(d)] for a, b, c, d in
                    zip(tr["EntryBar"], tr["ExitBar"], tr["EntryPrice"], tr["ExitPrice"])]
    print(json.dumps({
        "version": backtesting.__version__, "import_s": import_s, "best_s": min(runs),
        "runs_s": runs, "trades": len(slice_trades), "slice_trades": slice_trades,
        "numpy": np.__version__, "pandas": pd.__version__,
    }))


# ------------------------------------------------------------------------ parent

def run_child(kind, args, env_extra):
    env = dict(os.environ)
    env.update(env_extra)
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind,
           "--bars", str(args.bars), "--bt-bars", str(args.bt_bars),
           "--warm-runs", str(args.warm_runs), "--bt-runs", str(args.bt_runs)]
    out = subprocess.run(cmd, env=env, check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def compare(a, b, rel=1e-9):
    """Closed trades of two peers: count of identical ones, and the first difference."""
    same = 0
    first_diff = None
    for i, (x, y) in enumerate(zip(a, b)):
        ok = (x[0] == y[0] and x[1] == y[1]
              and abs(x[2] - y[2]) <= rel * abs(y[2]) and abs(x[3] - y[3]) <= rel * abs(y[3]))
        same += ok
        if not ok and first_diff is None:
            first_diff = {"index": i, "vectorbt": x, "backtesting.py": y}
    return same, first_diff


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bars", type=int, default=1_000_000)
    p.add_argument("--bt-bars", type=int, default=0, help="0: all --bars")
    p.add_argument("--warm-runs", type=int, default=20)
    p.add_argument("--bt-runs", type=int, default=1)
    p.add_argument("--child", choices=["vectorbt", "backtesting"])
    args = p.parse_args()
    if args.bt_bars <= 0 or args.bt_bars > args.bars:
        args.bt_bars = args.bars
    if args.child == "vectorbt":
        return child_vectorbt(args)
    if args.child == "backtesting":
        return child_backtesting(args)

    print(f"# python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; one thread per peer",
          file=sys.stderr)
    rows = []
    cache = tempfile.mkdtemp(prefix="peers-numba-cache-")
    try:
        cold = run_child("vectorbt", args, {"NUMBA_CACHE_DIR": cache})
        cached = run_child("vectorbt", args, {"NUMBA_CACHE_DIR": cache})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    v = cold["version"]
    rows.append(("vectorbt-cold-compile", args.bars, cold["first_s"],
                 {"version": v, "trades": cold["trades"], "import_s": round(cold["import_s"], 3),
                  "note": "first call in a fresh process, empty numba cache: includes JIT compile; "
                          "import not included"}))
    rows.append(("vectorbt-cold-cached", args.bars, cached["first_s"],
                 {"version": v, "trades": cached["trades"],
                  "import_s": round(cached["import_s"], 3),
                  "note": "first call in a fresh process, numba cache on disk"}))
    rows.append(("vectorbt-warm", args.bars, cached["warm_s"],
                 {"version": v, "trades": cached["trades"],
                  "note": f"best of {args.warm_runs} calls after the first"}))

    bt = run_child("backtesting", args, {})
    rows.append(("backtesting.py", args.bt_bars, bt["best_s"],
                 {"version": bt["version"], "trades": bt["trades"],
                  "import_s": round(bt["import_s"], 3),
                  "note": (f"first {args.bt_bars} of the {args.bars} bars only; "
                           if args.bt_bars < args.bars else "all bars; ")
                          + f"best of {args.bt_runs} run(s); includes its statistics"}))

    same, diff = compare(cold["slice_trades"], bt["slice_trades"])
    n_v, n_b = len(cold["slice_trades"]), len(bt["slice_trades"])
    print(f"# agreement on the first {args.bt_bars} bars: vectorbt {n_v} closed trades, "
          f"backtesting.py {n_b}, identical {same}"
          + (f"; first difference {json.dumps(diff)}" if diff else ""), file=sys.stderr)

    print(f"{'peer':<24} {'bars':>9} {'seconds':>10} {'bars_per_second':>16}")
    for peer, bars, secs, _ in rows:
        print(f"{peer:<24} {bars:>9} {secs:>10.4f} {bars / secs:>16,.0f}")
    for peer, bars, secs, extra in rows:
        rec = {"peer": peer, "bars": bars, "seconds": round(secs, 6),
               "bars_per_second": round(bars / secs, 1)}
        rec.update(extra)
        print("PEER_JSON " + json.dumps(rec))


if __name__ == "__main__":
    main()
