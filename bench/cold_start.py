#!/usr/bin/env python3
"""Cold start of `tradedesk serve` over stdio, with the embedded demo and with generated
book files of 20,000 and 1,000,000 fills (docs/benchmarks.md, "Cold start with a book").

For each book and run: the time from spawning the binary to the `initialize` answer, to
the `tools/list` answer (sent right after `initialize` answered), and to the first
`get_portfolio_summary` answer (the first call that needs the book, so it includes
reading it). Only stdio, only this machine.

    cargo build --release
    python3 bench/cold_start.py [--bin target/release/tradedesk] [--runs 3]
"""

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone


def write_book(path, n):
    """n fills over 100 instruments (80 USD, 20 MYR), two accounts, one fill every two
    minutes, a seeded random walk that keeps each position within +-1000."""
    rng = random.Random(42)
    instruments = [
        ("NASDAQ" if i < 80 else "BURSA", f"S{i:03}", "USD" if i < 80 else "MYR")
        for i in range(100)
    ]
    position = [0] * 100
    price = [10_000] * 100  # cents
    start = datetime(2022, 1, 3, 14, 30, tzinfo=timezone.utc)
    with open(path, "w") as f:
        f.write('{"format":"tradedesk-book/1","base_currency":"USD","as_of":"2030-01-01",')
        f.write('"accounts":[{"id":"US","broker":"ibkr","currency":"USD"},'
                '{"id":"MY","broker":"moomoo","currency":"MYR"}],"instruments":[')
        f.write(",".join(
            f'{{"exchange":"{e}","symbol":"{s}","currency":"{c}","asset_class":"equity"}}'
            for e, s, c in instruments))
        f.write('],"fills":[')
        for k in range(n):
            i = rng.randrange(100)
            qty = rng.randrange(1, 101)
            if position[i] > 1000:
                buy = False
            elif position[i] < -1000:
                buy = True
            else:
                buy = rng.random() < 0.5
            position[i] += qty if buy else -qty
            price[i] = max(100, price[i] + rng.randrange(-100, 101))
            t = (start + timedelta(seconds=120 * k)).strftime("%Y-%m-%dT%H:%M:%SZ")
            e, s, _ = instruments[i]
            f.write(("," if k else "") + json.dumps({
                "id": f"F{k}", "account": "US" if i < 80 else "MY", "exchange": e,
                "symbol": s, "side": "buy" if buy else "sell", "quantity": str(qty),
                "price": f"{price[i] // 100}.{price[i] % 100:02}", "commission": "1.00",
                "time": t,
            }, separators=(",", ":")))
        f.write('],"marks":[')
        f.write(",".join(
            f'{{"exchange":"{e}","symbol":"{s}","price":"{price[i] // 100}.{price[i] % 100:02}","date":"2030-01-01"}}'
            for i, (e, s, _) in enumerate(instruments)))
        f.write('],"fx_rates":[{"base":"USD","quote":"MYR","rate":"4.4","date":"2022-01-03"}]}')


def session(binary, book, state):
    args = [binary]
    if book:
        args += ["--book", book]
    args += ["serve", "--no-telemetry", "--state-dir", state]
    env = dict(os.environ, TRADEDESK_RATE_LIMIT="0")
    started = time.perf_counter()
    proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=env, text=True, bufsize=1)

    def ask(i, method, params):
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": i, "method": method,
                                     "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed stdout before answering {method}")
            msg = json.loads(line)
            if msg.get("id") == i:
                return msg, (time.perf_counter() - started) * 1000

    _, t_init = ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                      "clientInfo": {"name": "bench", "version": "0"}})
    proc.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    proc.stdin.flush()
    _, t_list = ask(2, "tools/list", {})
    answer, t_call = ask(3, "tools/call", {"name": "get_portfolio_summary", "arguments": {}})
    status = answer["result"]["structuredContent"].get("status")
    proc.stdin.close()
    proc.wait(timeout=60)
    return t_init, t_list, t_call, status


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default="target/release/tradedesk")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--sizes", default="20000,1000000")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        books = [("demo", None)]
        for n in (int(s) for s in opts.sizes.split(",")):
            path = os.path.join(tmp, f"book-{n}.json")
            write_book(path, n)
            books.append((f"{n:,} fills ({os.path.getsize(path) / 1e6:.0f} MB)", path))
        print(f"binary: {opts.bin}")
        print("| book | run | initialize answered | tools/list answered | first get_portfolio_summary answered |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, path in books:
            for run in range(1, opts.runs + 1):
                with tempfile.TemporaryDirectory() as state:
                    t_init, t_list, t_call, status = session(opts.bin, path, state)
                print(f"| {name} | {run} | {t_init:.1f} ms | {t_list:.1f} ms | "
                      f"{t_call:.1f} ms ({status}) |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
