#!/usr/bin/env python3
"""Compares the Python twin's answers with tradedesk's golden outputs (tests/golden/*.json).

    /tmp/bench-venv/bin/python bench/check_golden.py      (stdlib only; run from anywhere)

Prints one line per golden case and every differing JSON path. Two fields are expected
to differ and are ignored: get_server_health's `version` and each broker's `detail`
(tradedesk serves the *embedded* demo; the twin names the file it loaded).
Exit 0 when every case matches.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import python_server as ps  # noqa: E402

CASES = [
    ("get_accounts", "get_accounts", {}),
    ("get_accounts_myr", "get_accounts", {"currency": "MYR"}),
    ("get_positions", "get_positions", {}),
    ("get_positions_moomoo_myr", "get_positions", {"broker": "moomoo", "currency": "MYR"}),
    ("get_trade_history_2026", "get_trade_history", {"start": "2026-01-01", "end": "2026-11-27"}),
    ("get_trade_history_limit", "get_trade_history",
     {"start": "2023-01-01", "end": "2026-11-27", "limit": 5, "side": "sell"}),
    ("get_realized_pnl_all_lots", "get_realized_pnl",
     {"start": "2023-01-01", "end": "2026-11-27", "include_lots": True}),
    ("get_realized_pnl_2026_month", "get_realized_pnl",
     {"start": "2026-01-01", "end": "2026-11-27", "group_by": "month"}),
    ("get_realized_pnl_zero", "get_realized_pnl", {"start": "2026-06-01", "end": "2026-06-30"}),
    ("get_portfolio_summary", "get_portfolio_summary", {}),
    ("get_portfolio_summary_myr", "get_portfolio_summary", {"currency": "MYR"}),
    ("get_exposure_sector", "get_exposure", {"by": "sector"}),
    ("get_exposure_symbol_net", "get_exposure", {"by": "symbol", "basis": "net"}),
    ("get_exposure_country", "get_exposure", {"by": "country"}),
    ("get_server_health", "get_server_health", {}),
    ("error_relative_date", "get_realized_pnl", {"start": "last quarter", "end": "2026-11-27"}),
]


def diff(a, b, path="$", out=None):
    out = [] if out is None else out
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            out.append(f"{path}: keys {list(a)} != {list(b)}")
        for k in a:
            if k in b:
                diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif type(a) is not type(b) or a != b:
        out.append(f"{path}: python {json.dumps(a)} != golden {json.dumps(b)}")
    return out


def main():
    book = ps.load_book(os.path.join(ROOT, "demo", "demo-book.json"))
    failures = 0
    for name, tool, args in CASES:
        with open(os.path.join(ROOT, "tests", "golden", f"{name}.json"), encoding="utf-8") as fh:
            golden = json.load(fh)
        _, got, _ = ps.call(book, tool, args)
        got = json.loads(json.dumps(got))
        if tool == "get_server_health":
            got["version"] = golden.get("version")
            for b, g in zip(got.get("brokers", []), golden.get("brokers", [])):
                b["detail"], b["latency_ms"] = g["detail"], g["latency_ms"]
        d = diff(got, golden)
        failures += bool(d)
        print(f"{'ok  ' if not d else 'DIFF'} {name}")
        for line in d[:20]:
            print(f"     {line}")
    print(f"{len(CASES) - failures}/{len(CASES)} golden cases match")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
