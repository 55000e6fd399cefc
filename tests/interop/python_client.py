#!/usr/bin/env python3
"""Interop test: the official MCP Python SDK (mcp==2.3.0) against tradedesk.

Setup and usage (from the repository root):
    python3 -m venv /tmp/interop-venv
    /tmp/interop-venv/bin/pip install -r tests/interop/requirements.txt
    /tmp/interop-venv/bin/python tests/interop/python_client.py target/debug/tradedesk

Runs the same checks over four connections:

    stdio-modern   stdio transport, protocol 2026-07-28 (stateless; Client(mode="2026-07-28"))
    stdio-legacy   stdio transport, initialize handshake (Client(mode="legacy") -> 2025-11-25)
    http-modern    Streamable HTTP on /mcp, protocol 2026-07-28
    http-legacy    Streamable HTTP on /mcp, initialize handshake (2025-11-25)

The stdio servers list no output schemas (the default); the HTTP ones run with
`--output-schemas true`, so the SDK checks every structured result against its schema.

and then a "trading" section over stdio-legacy: a config with trading enabled on a
simulated account (SIM, clock frozen at 2026-11-30T15:00Z), a client with an
elicitation_callback, previews, paper orders confirmed by token, by elicitation
(accepted and declined) and by a tampered token; then "trading-off": the same
account with trading disabled, where the write tools are hidden and refused.

The SDK's legacy mode always proposes its newest handshake version (2025-11-25);
it has no public option to propose an older one, so 2025-06-18 and older are
not exercised here.

Each check prints one line (PASS/FAIL); the last line is `N passed, M failed`
and the exit code is 1 when M > 0. Every wait is bounded: each request has a
read timeout, each mode a deadline, and a watchdog thread ends the whole run.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import ElicitRequestParams, ElicitResult

MODERN = "2026-07-28"
LEGACY = "2025-11-25"  # what Client(mode="legacy") proposes in mcp 2.3.0

REQUEST_TIMEOUT = 10.0  # seconds, per request
MODE_TIMEOUT = 25.0  # seconds, per connection mode
STARTUP_TIMEOUT = 10.0  # seconds, for the HTTP server to print its address
WATCHDOG_TIMEOUT = 100.0  # seconds, the whole run

EXPECTED_TOOLS = {
    "get_market_hours",
    "get_news",
    "list_markets",
    "get_recent_trades",
    "get_snapshots",
    "get_option_chain",
    "search_instruments",
    "option_price",
    "implied_volatility",
    "option_strategy",
    "quote_open_position",
    "quote_leverage_ladder",
    "quote_close_position",
    "get_performance",
    "analyze_trades",
    "backtest",
    "get_run_result",
    "factor_analysis",
    "detect_patterns",
    "get_accounts",
    "get_positions",
    "get_trade_history",
    "get_realized_pnl",
    "get_portfolio_summary",
    "get_exposure",
    "get_server_health",
    "get_quote",
    "get_bars",
    "get_orders",
}
TRADING_TOOLS = {"preview_order", "place_order", "close_position", "modify_position", "cancel_order"}
WRITE_TOOLS = TRADING_TOOLS - {"preview_order"}  # preview_order changes nothing: read-only
PERIOD = {"start": "2026-01-01", "end": "2026-12-31"}
RESOURCE_URI = "tradedesk://methodology/realized-pnl"

INVALID_PARAMS = -32602
RESOURCE_NOT_FOUND_LEGACY = -32002


# --------------------------------------------------------------------------- results

_lock = threading.Lock()
_passed = 0
_failed = 0
_finished = False
_children: list[subprocess.Popen[bytes]] = []
_temp_dirs: list[str] = []


def check(mode: str, name: str, ok: bool, detail: str = "") -> bool:
    global _passed, _failed
    with _lock:
        if _finished:
            return ok
        if ok:
            _passed += 1
            print(f"PASS {mode}: {name}", flush=True)
        else:
            _failed += 1
            suffix = f" -- {detail}" if detail else ""
            print(f"FAIL {mode}: {name}{suffix}", flush=True)
    return ok


def skip(mode: str, reason: str) -> None:
    print(f"SKIP {mode}: {reason}", flush=True)


def finish() -> int:
    global _finished
    with _lock:
        _finished = True
        print(f"{_passed} passed, {_failed} failed", flush=True)
        return 1 if _failed else 0


def cleanup() -> None:
    for proc in _children:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                proc.kill()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
    for d in _temp_dirs:
        shutil.rmtree(d, ignore_errors=True)


def start_watchdog() -> None:
    def fire() -> None:
        global _failed
        with _lock:
            _failed += 1
            print(f"FAIL watchdog: whole run exceeded {WATCHDOG_TIMEOUT:.0f}s", flush=True)
        cleanup()
        code = finish()
        os._exit(code or 1)

    t = threading.Timer(WATCHDOG_TIMEOUT, fire)
    t.daemon = True
    t.start()


def temp_dir(prefix: str) -> str:
    d = tempfile.mkdtemp(prefix=prefix)
    _temp_dirs.append(d)
    return d


# --------------------------------------------------------------------------- helpers


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def short(v: Any, n: int = 300) -> str:
    try:
        s = json.dumps(v, default=str)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def describe(exc: BaseException) -> str:
    if isinstance(exc, MCPError):
        return f"MCPError {exc.code}: {exc.message}"
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


def text_of(result: Any) -> str:
    parts = []
    for block in getattr(result, "content", None) or []:
        if getattr(block, "type", None) == "text":
            parts.append(block.text)
    return "\n".join(parts)


# --------------------------------------------------------------------------- the checks


async def call_ok(mode: str, client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
    """Call a tool that should succeed; return its structuredContent or None."""
    label = f"{tool}({short(args, 80)})"
    try:
        res = await client.call_tool(tool, args)
    except Exception as exc:  # the SDK validates structuredContent against outputSchema here
        check(mode, f"{label} succeeds", False, describe(exc))
        return None
    sc = res.structured_content
    ok = (
        not res.is_error
        and isinstance(sc, dict)
        and sc.get("status") == "ok"
        and bool(res.content)
    )
    check(
        mode,
        f"{label} -> isError false, structuredContent.status ok, content present",
        ok,
        f"isError={res.is_error} structuredContent={short(sc)} content={short(text_of(res), 120)}",
    )
    return sc if ok else None


async def call_bad(mode: str, client: Client, tool: str, args: dict[str, Any], code: str) -> None:
    """Call a tool with bad arguments: expect a tool-level error result with this code."""
    label = f"{tool}({short(args, 80)})"
    try:
        res = await client.call_tool(tool, args)
    except Exception as exc:
        check(mode, f"{label} -> isError with code {code}", False, f"raised {describe(exc)}")
        return
    sc = res.structured_content
    err = sc.get("error") if isinstance(sc, dict) else None
    ok = (
        res.is_error is True
        and isinstance(sc, dict)
        and sc.get("status") == "error"
        and isinstance(err, dict)
        and err.get("code") == code
        and bool(err.get("message"))
    )
    check(mode, f"{label} -> isError with code {code}", ok, f"isError={res.is_error} structuredContent={short(sc)}")


async def expect_rpc_error(mode: str, label: str, codes: tuple[int, ...], coro: Any) -> None:
    want = " or ".join(str(c) for c in codes)
    try:
        res = await coro
    except MCPError as exc:
        check(mode, f"{label} -> JSON-RPC error {want}", exc.code in codes, f"got {exc.code}: {exc.message}")
        return
    except Exception as exc:
        check(mode, f"{label} -> JSON-RPC error {want}", False, f"raised {describe(exc)}")
        return
    check(mode, f"{label} -> JSON-RPC error {want}", False, f"no error; result={short(res.model_dump(), 200)}")


async def run_checks(mode: str, client: Client, expected_version: str) -> None:
    # ---- negotiation
    check(
        mode,
        f"negotiated protocol version {expected_version}",
        client.protocol_version == expected_version,
        f"got {client.protocol_version}",
    )
    if expected_version == MODERN:
        try:
            raw = await client.session.send_discover(MODERN)
            versions = raw.get("supportedVersions") or []
            caps = raw.get("capabilities") or {}
            check(
                mode,
                "server/discover lists 2026-07-28 and tools/resources/prompts capabilities",
                MODERN in versions and all(k in caps for k in ("tools", "resources", "prompts")),
                short(raw),
            )
        except Exception as exc:
            check(mode, "server/discover", False, describe(exc))
    else:
        info = client.server_info
        check(
            mode,
            "initialize: serverInfo.name is tradedesk",
            info is not None and info.name == "tradedesk",
            f"serverInfo={info}",
        )
        caps = client.server_capabilities
        check(
            mode,
            "initialize: tools, resources and prompts capabilities",
            caps.tools is not None and caps.resources is not None and caps.prompts is not None,
            f"capabilities={caps}",
        )

    # ---- tools/list
    try:
        listing = await client.list_tools()
        tools = listing.tools
    except Exception as exc:
        check(mode, "tools/list", False, describe(exc))
        tools = []
    names = {t.name for t in tools}
    check(mode, "tools/list returns the 29 read tools (trading off)", len(tools) == 29 and names == EXPECTED_TOOLS, f"got {sorted(names)}")
    not_ro = [t.name for t in tools if not (t.annotations and t.annotations.read_only_hint is True)]
    check(mode, "every tool has annotations.readOnlyHint true", bool(tools) and not not_ro, f"missing on {not_ro}")
    if mode.startswith("http"):
        # The HTTP servers here run with --output-schemas true: the SDK then checks every
        # structuredContent below against its tool's schema.
        no_out = [t.name for t in tools if not (isinstance(t.output_schema, dict) and t.output_schema.get("type") == "object")]
        check(mode, "every tool has an object outputSchema (--output-schemas true)", bool(tools) and not no_out, f"missing on {no_out}")
    else:
        listed = [t.name for t in tools if t.output_schema is not None]
        check(mode, "no outputSchema by default", bool(tools) and not listed, f"listed on {listed}")
    no_in = [t.name for t in tools if not (isinstance(t.input_schema, dict) and t.input_schema.get("type") == "object")]
    check(mode, "every tool has an object inputSchema", bool(tools) and not no_in, f"missing on {no_in}")

    # ---- tools/call, good arguments
    acc = await call_ok(mode, client, "get_accounts", {})
    if acc is not None:
        accounts = acc.get("accounts")
        check(
            mode,
            "get_accounts: currency USD, total_value number, accounts with ids",
            acc.get("currency") == "USD"
            and is_number(acc.get("total_value"))
            and isinstance(accounts, list)
            and len(accounts) >= 1
            and all(isinstance(a.get("account"), str) and is_number(a.get("total_value_converted")) for a in accounts),
            short(acc),
        )
        if isinstance(accounts, list) and accounts and is_number(acc.get("total_value")):
            total = sum(a.get("total_value_converted", 0) for a in accounts)
            check(
                mode,
                "get_accounts: total_value is the sum of total_value_converted",
                abs(total - acc["total_value"]) < 0.05,
                f"sum={total} total_value={acc['total_value']}",
            )

    acc_myr = await call_ok(mode, client, "get_accounts", {"currency": "MYR"})
    if acc_myr is not None:
        check(mode, "get_accounts(currency=MYR): reported in MYR", acc_myr.get("currency") == "MYR", short(acc_myr))

    pos = await call_ok(mode, client, "get_positions", {})
    if pos is not None:
        positions = pos.get("positions")
        check(
            mode,
            "get_positions: as_of date, total_market_value number, positions with symbol and quantity",
            isinstance(pos.get("as_of"), str)
            and re.fullmatch(r"\d{4}-\d{2}-\d{2}", pos["as_of"]) is not None
            and is_number(pos.get("total_market_value"))
            and isinstance(positions, list)
            and len(positions) >= 1
            and all(isinstance(p.get("symbol"), str) and is_number(p.get("quantity")) for p in positions),
            short(pos),
        )

    hist = await call_ok(mode, client, "get_trade_history", {**PERIOD, "limit": 5})
    if hist is not None:
        fills = hist.get("fills")
        check(
            mode,
            "get_trade_history(limit=5): at most 5 fills, count/total_count/truncated consistent",
            isinstance(fills, list)
            and 1 <= len(fills) <= 5
            and hist.get("count") == len(fills)
            and isinstance(hist.get("total_count"), int)
            and hist["total_count"] >= len(fills)
            and hist.get("truncated") == (hist["total_count"] > len(fills)),
            short({k: v for k, v in hist.items() if k != "fills"}),
        )

    pnl = await call_ok(mode, client, "get_realized_pnl", dict(PERIOD))
    if pnl is not None:
        net, gross, comm = pnl.get("net_pnl"), pnl.get("gross_pnl"), pnl.get("commissions")
        check(
            mode,
            "get_realized_pnl: net_pnl = gross_pnl - commissions",
            is_number(net) and is_number(gross) and is_number(comm) and abs(gross - comm - net) < 0.05,
            f"net={net} gross={gross} commissions={comm}",
        )

    summ = await call_ok(mode, client, "get_portfolio_summary", {})
    if summ is not None:
        check(
            mode,
            "get_portfolio_summary: total_value, positions_value, cash_value numbers",
            all(is_number(summ.get(k)) for k in ("total_value", "positions_value", "cash_value")),
            short(summ),
        )
        if acc is not None and is_number(summ.get("total_value")) and is_number(acc.get("total_value")):
            check(
                mode,
                "get_portfolio_summary.total_value equals get_accounts.total_value",
                abs(summ["total_value"] - acc["total_value"]) < 0.05,
                f"{summ['total_value']} vs {acc['total_value']}",
            )

    expo = await call_ok(mode, client, "get_exposure", {"by": "sector"})
    if expo is not None:
        buckets = expo.get("buckets")
        pct_sum = sum(b.get("pct", 0) for b in buckets) if isinstance(buckets, list) else None
        check(
            mode,
            "get_exposure(by=sector): buckets with keys, pct summing to ~100",
            expo.get("by") == "sector"
            and isinstance(buckets, list)
            and len(buckets) >= 1
            and all(isinstance(b.get("key"), str) and is_number(b.get("value")) for b in buckets)
            and pct_sum is not None
            and abs(pct_sum - 100) < 0.5,
            f"pct_sum={pct_sum} {short(expo)}",
        )

    health = await call_ok(mode, client, "get_server_health", {})
    if health is not None:
        check(
            mode,
            "get_server_health: health ok, version, brokers listed",
            health.get("health") == "ok"
            and isinstance(health.get("version"), str)
            and isinstance(health.get("brokers"), list)
            and len(health["brokers"]) >= 1,
            short(health),
        )

    # ---- research II: options, perps, performance, journal
    opt = await call_ok(
        mode, client, "option_price",
        {"type": "call", "spot": 100, "strike": 100, "volatility": 0.2, "rate": 0.05, "time_years": 1},
    )
    if opt is not None:
        check(mode, "option_price: the textbook call is 10.4506", abs(opt.get("price", 0) - 10.450583572185565) < 1e-12, short(opt))
    res = await client.call_tool(
        "option_strategy",
        {"spot": 100, "rate": 0.0, "legs": [
            {"type": "call", "strike": 95, "quantity": 1, "premium": 7.5, "volatility": 0.3, "time_years": 0.5},
            {"type": "call", "strike": 105, "quantity": -1, "premium": 3.5, "volatility": 0.3, "time_years": 0.5}]},
    )
    images = [b for b in res.content if getattr(b, "type", None) == "image"]
    sc = res.structured_content or {}
    check(
        mode,
        "option_strategy: breakeven 99, a PNG payoff chart beside the result",
        not res.is_error and [round(x, 9) for x in sc.get("breakevens", [])] == [99.0]
        and len(images) == 1 and images[0].mime_type == "image/png",
        short(sc),
    )
    perp = await call_ok(mode, client, "quote_open_position", {"market": "BTC-PERP", "side": "long", "margin": 500, "leverage": 5})
    if perp is not None:
        check(mode, "quote_open_position: the sim's live BTC-PERP mark", perp.get("market") == "PERP:BTC-PERP" and perp.get("entry_price", 0) > 0, short(perp))
    perf = await call_ok(mode, client, "get_performance", {"start": "2026-01-01", "end": "2026-11-27"})
    if perf is not None:
        check(mode, "get_performance: TWR and MWR with the method stated", isinstance(perf.get("twr_pct"), float) and "XIRR" in perf.get("method", ""), short(perf))
    journal = await call_ok(mode, client, "analyze_trades", {"start": "2023-01-01", "end": "2026-11-27"})
    realized = await call_ok(mode, client, "get_realized_pnl", {"start": "2023-01-01", "end": "2026-11-27"})
    if journal is not None and realized is not None:
        check(mode, "analyze_trades: its net P&L is get_realized_pnl's to the cent", journal.get("net_pnl") == realized.get("net_pnl"), short(journal))
    await call_bad(
        mode, client, "implied_volatility",
        {"type": "call", "spot": 100, "strike": 80, "rate": 0.05, "time_years": 1, "price": 20}, "invalid_argument",
    )

    # ---- tools/call, bad arguments
    await call_bad(mode, client, "get_realized_pnl", {"start": "last quarter", "end": "2026-12-31"}, "invalid_date")
    await call_bad(mode, client, "get_trade_history", {**PERIOD, "limit": 0}, "invalid_argument")
    await call_bad(mode, client, "get_exposure", {"by": "planet"}, "invalid_argument")
    await call_bad(mode, client, "get_trade_history", {"start": "2026-01-01"}, "invalid_argument")
    await expect_rpc_error(
        mode, "tools/call of unknown tool no_such_tool", (INVALID_PARAMS,), client.call_tool("no_such_tool", {})
    )

    # ---- resources
    try:
        res_list = await client.list_resources()
        uris = [str(r.uri) for r in res_list.resources]
    except Exception as exc:
        check(mode, "resources/list", False, describe(exc))
        uris = []
    check(mode, f"resources/list includes {RESOURCE_URI}", RESOURCE_URI in uris, f"got {uris}")
    try:
        read = await client.read_resource(RESOURCE_URI)
        contents = read.contents
        first = contents[0] if contents else None
        text = getattr(first, "text", None)
        check(
            mode,
            f"resources/read {RESOURCE_URI}: markdown text for that uri",
            first is not None
            and str(first.uri) == RESOURCE_URI
            and isinstance(text, str)
            and len(text) > 100
            and (first.mime_type or "").startswith("text/markdown"),
            short(read.model_dump(), 200),
        )
    except Exception as exc:
        check(mode, f"resources/read {RESOURCE_URI}", False, describe(exc))
    # Unknown resource: -32002 "Resource not found" in the 2025-era specs; 2026-07-28 retired
    # -32002 and uses -32602 (invalid params) instead.
    await expect_rpc_error(
        mode,
        "resources/read of unknown uri",
        (INVALID_PARAMS,) if expected_version == MODERN else (RESOURCE_NOT_FOUND_LEGACY,),
        client.read_resource("tradedesk://methodology/no-such-thing"),
    )

    # ---- prompts
    try:
        pr_list = await client.list_prompts()
        prompt_names = {p.name for p in pr_list.prompts}
    except Exception as exc:
        check(mode, "prompts/list", False, describe(exc))
        prompt_names = set()
    check(
        mode,
        "prompts/list returns 3 prompts incl. period_performance",
        len(prompt_names) == 3 and "period_performance" in prompt_names,
        f"got {sorted(prompt_names)}",
    )
    try:
        got = await client.get_prompt("period_performance", {"start": "2026-01-01", "end": "2026-03-31"})
        msg_text = " ".join(getattr(m.content, "text", "") or "" for m in got.messages)
        check(
            mode,
            "prompts/get period_performance: messages mention the dates",
            len(got.messages) >= 1 and "2026-01-01" in msg_text and "2026-03-31" in msg_text,
            short(got.model_dump(), 200),
        )
    except Exception as exc:
        check(mode, "prompts/get period_performance", False, describe(exc))
    await expect_rpc_error(
        mode,
        "prompts/get period_performance without required end",
        (INVALID_PARAMS,),
        client.get_prompt("period_performance", {"start": "2026-01-01"}),
    )
    await expect_rpc_error(mode, "prompts/get of unknown prompt", (INVALID_PARAMS,), client.get_prompt("no_such_prompt"))


# --------------------------------------------------------------------------- transports


def client_kwargs(version: str) -> dict[str, Any]:
    return {
        "mode": "legacy" if version != MODERN else MODERN,
        "read_timeout_seconds": REQUEST_TIMEOUT,
        "cache": None,  # every list/read goes to the server
    }


async def run_stdio(binary: str, mode: str, version: str, errlog: Any) -> None:
    params = StdioServerParameters(
        command=binary,
        args=["serve", "--state-dir", temp_dir("tradedesk-interop-stdio-")],
        env={"TRADEDESK_RATE_LIMIT": "0"},
    )
    async with Client(stdio_client(params, errlog=errlog), **client_kwargs(version)) as client:
        await run_checks(mode, client, version)
    if version == MODERN:
        await check_auto(mode, lambda: stdio_client(params, errlog=errlog))


async def check_auto(mode: str, make_transport: Any) -> None:
    """Client(mode="auto") (the SDK default) probes server/discover and must land on 2026-07-28."""
    try:
        async with Client(make_transport(), mode="auto", read_timeout_seconds=REQUEST_TIMEOUT, cache=None) as client:
            version = client.protocol_version
            res = await client.call_tool("get_server_health", {})
            sc = res.structured_content or {}
        check(
            mode,
            "mode=auto: discover probe negotiates 2026-07-28 and a call works",
            version == MODERN and not res.is_error and sc.get("status") == "ok",
            f"version={version} isError={res.is_error} status={sc.get('status')}",
        )
    except Exception as exc:
        check(mode, "mode=auto: discover probe negotiates 2026-07-28", False, describe(exc))


def start_http_server(binary: str) -> tuple[subprocess.Popen[bytes], str, "queue.Queue[str]"]:
    env = dict(os.environ, TRADEDESK_RATE_LIMIT="0")
    proc = subprocess.Popen(
        [binary, "--output-schemas", "true", "serve", "--http", "127.0.0.1:0", "--state-dir", temp_dir("tradedesk-interop-http-")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    _children.append(proc)
    lines: "queue.Queue[str]" = queue.Queue()

    def pump() -> None:  # drains stderr for the server's whole life so it never blocks
        assert proc.stderr is not None
        for raw in proc.stderr:
            lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        lines.put("\0EOF")

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + STARTUP_TIMEOUT
    seen: list[str] = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"no 'listening on' line within {STARTUP_TIMEOUT}s; stderr: {seen[-5:]}")
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            continue
        if line == "\0EOF":
            raise RuntimeError(f"server exited (rc={proc.poll()}) before listening; stderr: {seen[-5:]}")
        seen.append(line)
        m = re.search(r"listening on (http://\S+/mcp)", line)
        if m:
            return proc, m.group(1), lines


def stop_http_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=3)


async def run_http(binary: str, mode: str, version: str) -> None:
    proc, url, _lines = await anyio.to_thread.run_sync(start_http_server, binary)
    check(mode, f"server started and printed its address ({url})", True)
    try:
        timeout = httpx2.Timeout(REQUEST_TIMEOUT)
        async with httpx2.AsyncClient(timeout=timeout) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, **client_kwargs(version)) as client:
                await run_checks(mode, client, version)
            if version == MODERN:
                await check_auto(mode, lambda: streamable_http_client(url, http_client=http))
        check(mode, "server process still alive after the sessions", proc.poll() is None, f"rc={proc.poll()}")
    finally:
        await anyio.to_thread.run_sync(stop_http_server, proc)


# --------------------------------------------------------------------------- trading

TRADING_CLOCK_DATE = "2026-11-30"  # the sim account's frozen clock (2026-11-30T15:00:00Z)


def write_trading_config(enabled: bool) -> str:
    """A config with one simulated account; trading on (paper orders need confirmation) or off."""
    d = temp_dir("tradedesk-interop-cfg-")
    path = os.path.join(d, "tradedesk.toml")
    with open(path, "w") as f:
        f.write(
            'base_currency = "USD"\n'
            "[[accounts]]\n"
            'id = "SIM"\n'
            'broker = "sim"\n'
            f'clock = "{TRADING_CLOCK_DATE}T15:00:00Z"\n'
            "[trading]\n"
            f"enabled = {'true' if enabled else 'false'}\n"
            "confirm_paper = true\n"
            "max_order_notional = 5000\n"
            "max_daily_notional = 20000\n"
        )
    return path


class Elicitor:
    """elicitation_callback that records every request and accepts or declines as `accept` says."""

    def __init__(self) -> None:
        self.accept = True
        self.requests: list[ElicitRequestParams] = []

    async def __call__(self, context: Any, params: ElicitRequestParams) -> ElicitResult:
        self.requests.append(params)
        if self.accept:
            return ElicitResult(action="accept", content={"confirm": True})
        return ElicitResult(action="decline")


def trading_params(binary: str, enabled: bool) -> StdioServerParameters:
    return StdioServerParameters(
        command=binary,
        args=[
            "--config",
            write_trading_config(enabled),
            "--state-dir",
            temp_dir("tradedesk-interop-trading-"),
            "serve",
        ],
        env={"TRADEDESK_RATE_LIMIT": "0"},
    )


async def call_raw(mode: str, client: Client, tool: str, args: dict[str, Any]) -> Any:
    """Call a tool and return the result, or None (after a FAIL) when the call raises."""
    try:
        return await client.call_tool(tool, args)
    except Exception as exc:
        check(mode, f"{tool}({short(args, 80)}) returns a result", False, describe(exc))
        return None


def error_code(res: Any) -> str | None:
    sc = res.structured_content if res is not None else None
    err = sc.get("error") if isinstance(sc, dict) else None
    return err.get("code") if isinstance(err, dict) else None


def tampered(token: str) -> str:
    return token[:-1] + ("a" if token[-1:] != "a" else "b")


async def run_trading_checks(mode: str, client: Client, elicitor: Elicitor) -> None:
    check(mode, f"negotiated protocol version {LEGACY}", client.protocol_version == LEGACY, f"got {client.protocol_version}")

    # ---- tools/list: the read tools plus the trading tools
    try:
        tools = (await client.list_tools()).tools
    except Exception as exc:
        check(mode, "tools/list", False, describe(exc))
        tools = []
    names = {t.name for t in tools}
    want = EXPECTED_TOOLS | TRADING_TOOLS
    check(mode, "tools/list returns 34 tools: the 29 read tools and the 5 trading tools", len(tools) == 34 and names == want, f"got {sorted(names)}")
    by_name = {t.name: t for t in tools}
    bad_ann = [
        n
        for n in sorted(WRITE_TOOLS)
        if not (
            n in by_name
            and by_name[n].annotations is not None
            and by_name[n].annotations.read_only_hint is False
            and by_name[n].annotations.destructive_hint is True
        )
    ]
    check(mode, "write tools (place/close/modify/cancel) have readOnlyHint false, destructiveHint true", not bad_ann, f"wrong on {bad_ann}")
    pv = by_name.get("preview_order")
    check(
        mode,
        "preview_order has readOnlyHint true",
        pv is not None and pv.annotations is not None and pv.annotations.read_only_hint is True,
        f"annotations={pv.annotations if pv else None}",
    )

    # ---- get_quote
    quote = await call_ok(mode, client, "get_quote", {"account": "SIM", "symbol": "EURUSD"})
    if quote is not None:
        check(
            mode,
            "get_quote EURUSD: bid < ask, spread_pips a number",
            is_number(quote.get("bid")) and is_number(quote.get("ask")) and quote["bid"] < quote["ask"] and is_number(quote.get("spread_pips")),
            short(quote),
        )

    # ---- preview, then place with the token: no elicitation
    aapl = {"account": "SIM", "symbol": "AAPL", "side": "buy", "quantity": 3}
    preview = await call_ok(mode, client, "preview_order", aapl)
    token = preview.get("confirmation_token") if preview is not None else None
    if preview is not None:
        checks = preview.get("checks")
        check(
            mode,
            "preview_order AAPL: allowed, confirmation_token a string, checks non-empty, confirmation_required",
            preview.get("allowed") is True
            and isinstance(token, str)
            and bool(token)
            and isinstance(checks, list)
            and len(checks) > 0
            and preview.get("confirmation_required") is True,
            short(preview, 400),
        )
    if isinstance(token, str) and token:
        before = len(elicitor.requests)
        placed = await call_ok(mode, client, "place_order", {**aapl, "confirmation_token": token})
        if placed is not None:
            check(
                mode,
                "place_order AAPL with token: filled, paper, not replayed",
                placed.get("outcome") == "filled" and placed.get("mode") == "paper" and placed.get("replayed") is False,
                short(placed),
            )
        check(mode, "place_order with a token asks no elicitation", len(elicitor.requests) == before, f"{len(elicitor.requests) - before} elicitation(s)")

    # ---- no token, the user accepts the elicitation
    msft = {"account": "SIM", "symbol": "MSFT", "side": "buy", "quantity": 1}
    elicitor.accept = True
    before = len(elicitor.requests)
    placed = await call_ok(mode, client, "place_order", msft)
    if placed is not None:
        check(
            mode,
            "place_order MSFT without token, elicitation accepted: filled, paper",
            placed.get("outcome") == "filled" and placed.get("mode") == "paper",
            short(placed),
        )
    asked = elicitor.requests[before:]
    check(mode, "place_order without token asks exactly one elicitation", len(asked) == 1, f"{len(asked)} elicitation(s)")
    if asked:
        req = asked[0]
        schema = req.requested_schema if hasattr(req, "requested_schema") else None
        props = schema.get("properties") if isinstance(schema, dict) else None
        check(
            mode,
            "elicitation: message mentions MSFT; requestedSchema asks for a required boolean confirm",
            "MSFT" in (getattr(req, "message", "") or "")
            and isinstance(schema, dict)
            and schema.get("type") == "object"
            and isinstance(props, dict)
            and (props.get("confirm") or {}).get("type") == "boolean"
            and "confirm" in (schema.get("required") or []),
            short(req.model_dump(by_alias=True, exclude_none=True)),
        )

    # ---- no token, the user declines
    elicitor.accept = False
    before = len(elicitor.requests)
    res = await call_raw(mode, client, "place_order", msft)
    if res is not None:
        check(
            mode,
            "place_order MSFT without token, elicitation declined -> isError with code confirmation_required",
            res.is_error is True and error_code(res) == "confirmation_required",
            f"isError={res.is_error} structuredContent={short(res.structured_content)}",
        )
    check(mode, "the declined order asked exactly one elicitation", len(elicitor.requests) - before == 1, f"{len(elicitor.requests) - before} elicitation(s)")
    elicitor.accept = True

    # ---- a tampered token (from a fresh preview, so tampering is the only fault)
    aapl2 = {**aapl, "quantity": 2}
    preview2 = await call_ok(mode, client, "preview_order", aapl2)
    token2 = preview2.get("confirmation_token") if preview2 is not None else None
    if isinstance(token2, str) and token2:
        before = len(elicitor.requests)
        res = await call_raw(mode, client, "place_order", {**aapl2, "confirmation_token": tampered(token2)})
        if res is not None:
            check(
                mode,
                "place_order with a tampered token -> isError with code confirmation_invalid",
                res.is_error is True and error_code(res) == "confirmation_invalid",
                f"isError={res.is_error} structuredContent={short(res.structured_content)}",
            )
        check(mode, "a tampered token asks no elicitation", len(elicitor.requests) == before, f"{len(elicitor.requests) - before} elicitation(s)")
    else:
        check(mode, "preview_order for the tampered-token check returns a token", False, short(preview2))

    # ---- the fills: AAPL 3 and MSFT 1, nothing else
    hist = await call_ok(mode, client, "get_trade_history", {"start": TRADING_CLOCK_DATE, "end": TRADING_CLOCK_DATE})
    if hist is not None:
        fills = hist.get("fills") if isinstance(hist.get("fills"), list) else []
        got = sorted((f.get("account"), f.get("symbol"), f.get("side"), f.get("quantity")) for f in fills)
        check(
            mode,
            "get_trade_history on the sim's day: exactly the AAPL 3 and MSFT 1 paper buys on SIM",
            got == [("SIM", "AAPL", "buy", 3), ("SIM", "MSFT", "buy", 1)],
            f"got {got}",
        )


async def run_trading(binary: str, mode: str, errlog: Any) -> None:
    elicitor = Elicitor()
    params = trading_params(binary, enabled=True)
    async with Client(stdio_client(params, errlog=errlog), elicitation_callback=elicitor, **client_kwargs(LEGACY)) as client:
        await run_trading_checks(mode, client, elicitor)


async def run_trading_off(binary: str, mode: str, errlog: Any) -> None:
    elicitor = Elicitor()
    params = trading_params(binary, enabled=False)
    async with Client(stdio_client(params, errlog=errlog), elicitation_callback=elicitor, **client_kwargs(LEGACY)) as client:
        try:
            tools = (await client.list_tools()).tools
        except Exception as exc:
            check(mode, "tools/list", False, describe(exc))
            tools = []
        names = {t.name for t in tools}
        check(
            mode,
            "tools/list with [trading] enabled = false: exactly the 29 read tools, no trading tool",
            len(tools) == 29 and names == EXPECTED_TOOLS and not (names & TRADING_TOOLS),
            f"got {sorted(names)}",
        )
        label = "place_order while trading is off -> trading_disabled"
        try:
            res = await client.call_tool("place_order", {"account": "SIM", "symbol": "MSFT", "side": "buy", "quantity": 1})
        except MCPError as exc:
            check(mode, f"{label} (as a JSON-RPC error {exc.code})", "trading_disabled" in (exc.message or "") or exc.code == INVALID_PARAMS, f"got {exc.code}: {exc.message}")
        except Exception as exc:
            check(mode, label, False, f"raised {describe(exc)}")
        else:
            check(
                mode,
                f"{label} (as a tool result with isError)",
                res.is_error is True and error_code(res) == "trading_disabled",
                f"isError={res.is_error} structuredContent={short(res.structured_content)}",
            )
        check(mode, "no elicitation while trading is off", not elicitor.requests, f"{len(elicitor.requests)} elicitation(s)")


# --------------------------------------------------------------------------- main


async def amain(binary: str) -> None:
    errlog_path = os.path.join(temp_dir("tradedesk-interop-log-"), "stdio-stderr.log")
    with open(errlog_path, "w") as errlog:
        modes = [
            ("stdio-modern", lambda: run_stdio(binary, "stdio-modern", MODERN, errlog)),
            ("stdio-legacy", lambda: run_stdio(binary, "stdio-legacy", LEGACY, errlog)),
            ("http-modern", lambda: run_http(binary, "http-modern", MODERN)),
            ("http-legacy", lambda: run_http(binary, "http-legacy", LEGACY)),
            ("trading", lambda: run_trading(binary, "trading", errlog)),
            ("trading-off", lambda: run_trading_off(binary, "trading-off", errlog)),
        ]
        skip(
            "legacy-2025-06-18-and-older",
            "mcp 2.3.0's Client(mode='legacy') always proposes 2025-11-25 in initialize "
            "(mcp.client.session uses LATEST_HANDSHAKE_VERSION); it has no public option for an older version",
        )
        for mode, run in modes:
            started = time.monotonic()
            try:
                with anyio.fail_after(MODE_TIMEOUT):
                    await run()
                check(mode, f"client context exited without error ({time.monotonic() - started:.1f}s)", True)
            except TimeoutError:
                check(mode, "client context exited without error", False, f"exceeded {MODE_TIMEOUT}s")
            except Exception as exc:  # noqa: BLE001 - report and go on with the next mode
                check(mode, "client context exited without error", False, describe(exc))
                if os.environ.get("INTEROP_DEBUG"):
                    traceback.print_exc()


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} PATH_TO_TRADEDESK", file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    if not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
        print(f"not an executable: {binary}", file=sys.stderr)
        return 2
    start_watchdog()
    try:
        anyio.run(amain, binary)
    except BaseException as exc:  # noqa: BLE001
        check("run", "completed without an unexpected exception", False, describe(exc))
    finally:
        cleanup()
    return finish()


if __name__ == "__main__":
    sys.exit(main())
