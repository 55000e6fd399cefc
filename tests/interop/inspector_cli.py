#!/usr/bin/env python3
"""Interop test: the MCP Inspector CLI (npm @modelcontextprotocol/inspector, Node 22)
lists and calls tradedesk's tools over stdio and over Streamable HTTP.

Usage (from the repository root, after `npm install --no-save` in tests/interop):
    python3 tests/interop/inspector_cli.py target/debug/tradedesk

Each check prints PASS/FAIL; the last line is `N passed, M failed`; exit 1 on failure.
Every subprocess has a timeout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import wait_for_url  # noqa: E402
NODE_BIN = os.path.join(HERE, "node_modules", "node", "bin")
INSPECTOR = os.path.join(HERE, "node_modules", ".bin", "mcp-inspector")
results: list[tuple[str, bool, str]] = []


def check(name: str, ok: bool, detail: str = "") -> None:
    results.append((name, ok, detail))
    print(f"{'PASS' if ok else 'FAIL'} {name}{': ' + detail if detail and not ok else ''}", flush=True)


def inspector(target: list[str], args: list[str]) -> tuple[int, object, str]:
    env = dict(os.environ, PATH=NODE_BIN + os.pathsep + os.environ.get("PATH", ""))
    cmd = ["node", INSPECTOR, "--cli", *target, *args]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        return -1, None, "timeout"
    out = p.stdout.strip()
    try:
        return p.returncode, json.loads(out[out.index("{"):]), p.stderr
    except (ValueError, json.JSONDecodeError):
        return p.returncode, None, (p.stderr + out)[-400:]


def run_suite(label: str, target: list[str]) -> None:
    code, listed, err = inspector(target, ["--method", "tools/list"])
    tools = [t["name"] for t in (listed or {}).get("tools", [])]
    # Trading is off: every read tool (the marketdata toolset's get_news among them), no
    # write tool.
    check(
        f"{label}: tools/list lists the 29 read tools",
        code == 0 and len(tools) == 29 and "place_order" not in tools,
        f"code {code} {tools} {err}",
    )
    code, res, err = inspector(target, ["--method", "tools/call", "--tool-name", "get_portfolio_summary"])
    sc = (res or {}).get("structuredContent", {})
    check(f"{label}: get_portfolio_summary ok", code == 0 and sc.get("status") == "ok" and sc.get("currency") == "USD", f"{err}")
    code, res, err = inspector(
        target,
        ["--method", "tools/call", "--tool-name", "get_realized_pnl", "--tool-arg", "start=2026-01-01", "end=2026-11-27"],
    )
    sc = (res or {}).get("structuredContent", {})
    check(f"{label}: get_realized_pnl biggest loss", sc.get("biggest_loss", {}).get("fill_id") == "IB-0028", f"{err}")
    code, res, err = inspector(
        target,
        ["--method", "tools/call", "--tool-name", "get_realized_pnl", "--tool-arg", "start=last quarter", "end=2026-11-27"],
    )
    sc = (res or {}).get("structuredContent", {})
    check(
        f"{label}: bad date is an error result",
        (res or {}).get("isError") is True and sc.get("error", {}).get("code") == "invalid_date",
        f"{res} {err}",
    )
    code, res, err = inspector(target, ["--method", "resources/list"])
    check(f"{label}: resources/list", code == 0 and len((res or {}).get("resources", [])) >= 4, err)
    code, res, err = inspector(target, ["--method", "prompts/list"])
    check(f"{label}: prompts/list", code == 0 and len((res or {}).get("prompts", [])) == 3, err)



def main() -> int:
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/tradedesk")
    state = tempfile.mkdtemp(prefix="tradedesk-inspector-")
    run_suite("stdio", [binary, "serve", "--state-dir", state])
    env = dict(os.environ, TRADEDESK_RATE_LIMIT="0")
    server = subprocess.Popen(
        [binary, "serve", "--http", "127.0.0.1:0", "--state-dir", state],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env,
    )
    try:
        url = wait_for_url(server, 15)
        check("http: server started", url is not None)
        if url:
            run_suite("http", [url, "--transport", "http"])
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    failed = sum(1 for _, ok, _ in results if not ok)
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
