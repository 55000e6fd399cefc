#!/usr/bin/env python3
"""Side-by-side benchmark: tradedesk (Rust) against its Python twin (official MCP SDK).

Measures, in one run, for both servers on the demo book:

  * cold start over stdio: spawn, send initialize + notifications/initialized + tools/list
    as raw JSON-RPC lines at once, time until the tools/list answer (median of N runs,
    after one untimed warm-up spawn each);
  * sequential tools/call latency (get_portfolio_summary) p50/p99 over stdio and over
    Streamable HTTP (http.client, one keep-alive connection, after an initialize);
  * HTTP requests per second at concurrency 1 and 16 (tools/call get_accounts, threads,
    one keep-alive connection and MCP session per thread, a fixed time each);
  * idle RSS (VmRSS once started and initialized, before any tool call) and peak RSS
    (VmHWM after the load), from /proc/PID/status.

Only 127.0.0.1 is used; every loop is bounded in count and in time. Standard library
only (the servers need the `mcp` package, the client does not).

    python3 bench/run.py                       # defaults below
    python3 bench/run.py --json-out /tmp/bench.json

Defaults: tradedesk = target/release/tradedesk (else target/debug/tradedesk, waiting for
one to appear), Python = /tmp/bench-venv/bin/python running bench/python_server.py on
demo/demo-book.json. tradedesk runs as `tradedesk serve [--http ADDR] --no-telemetry` with
TRADEDESK_RATE_LIMIT=0 (it serves its embedded copy of demo/demo-book.json).
"""

import argparse
import hashlib
import http.client
import json
import math
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROTOCOL = "2025-11-25"
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {},
               "clientInfo": {"name": "tradedesk-bench", "version": "1"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------------------

def percentile(values, p):
    """Nearest-rank percentile (p in 0..100)."""
    s = sorted(values)
    if not s:
        return float("nan")
    k = max(1, math.ceil(p / 100 * len(s)))
    return s[k - 1]


def proc_status_kb(pid, field):
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"server exited with {proc.returncode} before listening on {port}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise BenchError(f"nothing listening on 127.0.0.1:{port} after {timeout}s")


def stop(proc, timeout=5.0):
    if proc.poll() is not None:
        return
    try:
        if proc.stdin:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=0.5)
        return
    except subprocess.TimeoutExpired:
        pass
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def fmt_ms(x):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "n/a"
    return f"{x:.2f} ms" if x < 100 else f"{x:.0f} ms"


def fmt_mb(kb):
    return "n/a" if kb is None else f"{kb / 1024:.1f} MB"


def fmt_rps(x):
    return "n/a" if x is None else f"{x:,.0f} req/s"


def ratio(py, td):
    if py is None or td is None or td == 0 or (isinstance(py, float) and math.isnan(py)):
        return None
    return py / td


def fmt_ratio(r):
    if r is None:
        return "n/a"
    return f"{r:.1f}x" if r >= 10 else f"{r:.2f}x"


# ---------------------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------------------

class Server:
    """How to start one server over stdio or HTTP."""

    def __init__(self, label, stdio_argv, http_argv, env):
        self.label, self.stdio_argv, self.http_argv, self.env = label, stdio_argv, http_argv, env

    def spawn_stdio(self, errfile):
        return subprocess.Popen(self.stdio_argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=errfile, env=self.env, bufsize=0, cwd=ROOT)

    def spawn_http(self, port, errfile):
        argv = [a.replace("{ADDR}", f"127.0.0.1:{port}") for a in self.http_argv]
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=errfile, stderr=errfile,
                                env=self.env, cwd=ROOT)


class StdioClient:
    def __init__(self, proc):
        self.proc = proc
        self.fd = proc.stdout.fileno()
        self.buf = b""

    def send(self, *messages):
        data = b"".join(json.dumps(m, separators=(",", ":")).encode() + b"\n" for m in messages)
        self.proc.stdin.write(data)

    def wait_for(self, rid, timeout):
        deadline = time.monotonic() + timeout
        while True:
            nl = self.buf.find(b"\n")
            while nl >= 0:
                line, self.buf = self.buf[:nl], self.buf[nl + 1:]
                if line.strip():
                    msg = json.loads(line)
                    if msg.get("id") == rid and ("result" in msg or "error" in msg):
                        return msg
                nl = self.buf.find(b"\n")
            left = deadline - time.monotonic()
            if left <= 0:
                raise BenchError(f"no answer to request {rid} within {timeout}s")
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                if not chunk:
                    raise BenchError(f"server closed stdout (exit {self.proc.poll()}) before answering {rid}")
                self.buf += chunk


def call_msg(rid, name, args=None):
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
            "params": {"name": name, "arguments": args or {}}}


class HttpClient:
    """One keep-alive connection and, when the server hands one out, one MCP session."""

    def __init__(self, port, timeout=30.0):
        self.port, self.timeout = port, timeout
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.session = None
        self.initialized = False
        self.next_id = 1

    def _headers(self):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.initialized:
            h["MCP-Protocol-Version"] = PROTOCOL
        if self.session:
            h["Mcp-Session-Id"] = self.session
        return h

    def post(self, message):
        body = json.dumps(message, separators=(",", ":")).encode()
        self.conn.request("POST", "/mcp", body=body, headers=self._headers())
        r = self.conn.getresponse()
        raw = r.read()
        sid = r.getheader("mcp-session-id")
        if sid:
            self.session = sid
        if r.status == 202 or not raw:
            if r.status >= 400:
                raise BenchError(f"HTTP {r.status}")
            return None
        if r.status >= 400:
            raise BenchError(f"HTTP {r.status}: {raw[:200]!r}")
        ctype = r.getheader("content-type", "")
        if "text/event-stream" in ctype:
            want = message.get("id")
            for event in raw.decode().replace("\r\n", "\n").split("\n\n"):
                data = "\n".join(l[5:].lstrip() for l in event.split("\n") if l.startswith("data:"))
                if data:
                    msg = json.loads(data)
                    if msg.get("id") == want:
                        return msg
            raise BenchError("SSE response without the answer")
        return json.loads(raw)

    def initialize(self):
        msg = self.post(INIT)
        if not msg or "result" not in msg:
            raise BenchError(f"initialize failed: {msg}")
        self.initialized = True
        self.post(INITIALIZED)
        self.next_id = 2
        return msg

    def call(self, name, args=None):
        rid = self.next_id
        self.next_id += 1
        msg = self.post(call_msg(rid, name, args))
        if not msg or "result" not in msg or msg["result"].get("isError"):
            raise BenchError(f"tools/call {name} failed: {str(msg)[:300]}")
        return msg["result"]

    def close(self):
        self.conn.close()


# ---------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------

def cold_start_once(server, errfile, timeout):
    t0 = time.perf_counter()
    proc = server.spawn_stdio(errfile)
    try:
        c = StdioClient(proc)
        c.send(INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        msg = c.wait_for(2, timeout)
        elapsed = (time.perf_counter() - t0) * 1000
        tools = [t["name"] for t in msg.get("result", {}).get("tools", [])]
        if len(tools) < 7:
            raise BenchError(f"{server.label}: tools/list answered {tools}")
        return elapsed
    finally:
        stop(proc)


def stdio_session(server, errfile, calls, warmup, timeout, budget):
    """Idle RSS after startup, then sequential tools/call latencies, then peak RSS."""
    proc = server.spawn_stdio(errfile)
    try:
        c = StdioClient(proc)
        c.send(INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        c.wait_for(2, timeout)
        time.sleep(0.5)
        idle = proc_status_kb(proc.pid, "VmRSS")
        rid = 3
        sample = None
        for _ in range(warmup):
            c.send(call_msg(rid, "get_portfolio_summary"))
            sample = c.wait_for(rid, timeout)
            rid += 1
        lat = []
        deadline = time.monotonic() + budget
        for _ in range(calls):
            if time.monotonic() > deadline:
                break
            t0 = time.perf_counter()
            c.send(call_msg(rid, "get_portfolio_summary"))
            msg = c.wait_for(rid, timeout)
            lat.append((time.perf_counter() - t0) * 1000)
            if msg.get("result", {}).get("isError"):
                raise BenchError(f"{server.label}: get_portfolio_summary failed: {msg}")
            rid += 1
        peak = proc_status_kb(proc.pid, "VmHWM")
        structured = (sample or msg)["result"].get("structuredContent", {})
        return {"idle_rss_kb": idle, "peak_rss_kb": peak, "latencies_ms": lat, "summary": structured}
    finally:
        stop(proc)


def http_load(port, name, concurrency, duration, max_requests):
    """Requests per second with `concurrency` threads for at most `duration` seconds."""
    clients = []
    for _ in range(concurrency):
        c = HttpClient(port)
        c.initialize()
        clients.append(c)
    counts = [0] * concurrency
    errors = [0] * concurrency
    per_thread_cap = max(1, max_requests // concurrency)
    barrier = threading.Barrier(concurrency + 1)
    stop_at = [0.0]

    def worker(i):
        c = clients[i]
        barrier.wait()
        end = stop_at[0]
        n = 0
        while n < per_thread_cap and time.perf_counter() < end:
            try:
                c.call(name)
                counts[i] += 1
            except (OSError, http.client.HTTPException, BenchError, ValueError):
                errors[i] += 1
                if errors[i] > 100:
                    break
                c.conn.close()
                c.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=c.timeout)
            n += 1

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(concurrency)]
    for t in threads:
        t.start()
    start = time.perf_counter()
    stop_at[0] = start + duration
    barrier.wait()
    for t in threads:
        t.join(duration + 60)
    elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    return {"rps": sum(counts) / elapsed, "requests": sum(counts), "errors": sum(errors),
            "seconds": elapsed}


def http_session(server, errfile, calls, warmup, duration, max_requests, timeout, budget, concurrencies):
    port = free_port()
    proc = server.spawn_http(port, errfile)
    try:
        wait_port(port, proc, timeout)
        c = HttpClient(port)
        c.initialize()
        time.sleep(0.5)
        idle = proc_status_kb(proc.pid, "VmRSS")
        for _ in range(warmup):
            c.call("get_portfolio_summary")
        lat = []
        deadline = time.monotonic() + budget
        for _ in range(calls):
            if time.monotonic() > deadline:
                break
            t0 = time.perf_counter()
            c.call("get_portfolio_summary")
            lat.append((time.perf_counter() - t0) * 1000)
        c.close()
        loads = {}
        for conc in concurrencies:
            loads[conc] = http_load(port, "get_accounts", conc, duration, max_requests)
        peak = proc_status_kb(proc.pid, "VmHWM")
        return {"idle_rss_kb": idle, "peak_rss_kb": peak, "latencies_ms": lat, "loads": loads,
                "session": c.session is not None}
    finally:
        stop(proc)


# ---------------------------------------------------------------------------------------
# Setup and report
# ---------------------------------------------------------------------------------------

def find_tradedesk(explicit, wait_seconds):
    if explicit:
        if not os.path.isfile(explicit):
            raise BenchError(f"{explicit} does not exist")
        return explicit, "given"
    deadline = time.monotonic() + wait_seconds
    while True:
        for kind in ("release", "debug"):
            path = os.path.join(ROOT, "target", kind, "tradedesk")
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return path, kind
        if time.monotonic() > deadline:
            raise BenchError("no target/release/tradedesk or target/debug/tradedesk; build one first")
        print("waiting for a tradedesk binary to be built ...", file=sys.stderr)
        time.sleep(10)


def sha256_prefix(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def python_mcp_version(python):
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m, sys; "
                                            "print(m.version('mcp'), sys.version.split()[0])"],
                             capture_output=True, text=True, timeout=60)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description="tradedesk vs Python MCP server benchmark")
    ap.add_argument("--tradedesk", help="tradedesk binary (default target/release, else target/debug)")
    ap.add_argument("--python", default="/tmp/bench-venv/bin/python", help="Python with mcp installed")
    ap.add_argument("--book", default=os.path.join(ROOT, "demo", "demo-book.json"),
                    help="book for the Python server (tradedesk serves its embedded demo)")
    ap.add_argument("--cold-runs", type=int, default=20)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=5, help="untimed calls before the latency series")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per req/s phase (at most 10)")
    ap.add_argument("--max-requests", type=int, default=500_000, help="cap per req/s phase")
    ap.add_argument("--concurrency", default="1,16")
    ap.add_argument("--timeout", type=float, default=30.0, help="per answer / startup")
    ap.add_argument("--wait-binary", type=float, default=900.0, help="seconds to wait for a binary")
    ap.add_argument("--json-out", help="also write the raw results here")
    ap.add_argument("--only", choices=("tradedesk", "python"), help="measure one server only")
    a = ap.parse_args()
    if not 0 < a.duration <= 10:
        ap.error("--duration must be in (0, 10]")
    if not (1 <= a.cold_runs <= 200 and 1 <= a.calls <= 100_000):
        ap.error("--cold-runs 1..200, --calls 1..100000")
    concurrencies = [int(x) for x in a.concurrency.split(",") if x]
    if any(not 1 <= c <= 256 for c in concurrencies):
        ap.error("--concurrency values must be 1..256")

    td_path, td_kind = find_tradedesk(a.tradedesk, a.wait_binary)
    workdir = tempfile.mkdtemp(prefix="tradedesk-bench-")
    # Measure a snapshot: a concurrent cargo build may replace the file mid-run.
    td_copy = os.path.join(workdir, "tradedesk")
    shutil.copy2(td_path, td_copy)
    td_env = dict(os.environ, TRADEDESK_RATE_LIMIT="0")
    py_env = dict(os.environ)
    py_env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed server has its .pyc files
    server_py = os.path.join(HERE, "python_server.py")
    servers = {
        "tradedesk": Server("tradedesk", [td_copy, "serve", "--no-telemetry"],
                            [td_copy, "serve", "--http", "{ADDR}", "--no-telemetry"], td_env),
        "python": Server("python", [a.python, server_py, a.book],
                         [a.python, server_py, a.book, "--http", "{ADDR}"], py_env),
    }
    names = [a.only] if a.only else ["tradedesk", "python"]
    mcp_ver = python_mcp_version(a.python)
    print(f"tradedesk: {td_path} ({td_kind}, sha256 {sha256_prefix(td_path)}, "
          f"built {time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(td_path)))})", file=sys.stderr)
    print(f"python:    {a.python} (mcp, python: {mcp_ver}) {server_py} {a.book}", file=sys.stderr)

    errs = {n: open(os.path.join(workdir, f"{n}.stderr"), "wb") for n in names}
    results = {n: {} for n in names}
    try:
        # Cold start: one untimed warm-up spawn each, then alternate runs to share noise.
        for n in names:
            cold_start_once(servers[n], errs[n], a.timeout)
        cold = {n: [] for n in names}
        for i in range(a.cold_runs):
            for n in (names if i % 2 == 0 else names[::-1]):
                cold[n].append(cold_start_once(servers[n], errs[n], a.timeout))
        for n in names:
            results[n]["cold_ms"] = cold[n]
            print(f"cold start {n}: median {statistics.median(cold[n]):.2f} ms", file=sys.stderr)
        for n in names:
            results[n]["stdio"] = stdio_session(servers[n], errs[n], a.calls, a.warmup, a.timeout, 120.0)
            print(f"stdio {n}: p50 {statistics.median(results[n]['stdio']['latencies_ms']):.3f} ms", file=sys.stderr)
        for n in names:
            results[n]["http"] = http_session(servers[n], errs[n], a.calls, a.warmup, a.duration,
                                              a.max_requests, a.timeout, 120.0, concurrencies)
            print(f"http {n}: " + ", ".join(f"c={c} {v['rps']:.0f} req/s" for c, v in
                                           results[n]["http"]["loads"].items()), file=sys.stderr)
    except BenchError as e:
        for n in names:
            errs[n].flush()
            tail = open(os.path.join(workdir, f"{n}.stderr"), "rb").read()[-2000:].decode(errors="replace")
            if tail.strip():
                print(f"--- {n} stderr (tail) ---\n{tail}", file=sys.stderr)
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        for f in errs.values():
            f.close()

    # ---- report ----------------------------------------------------------------------
    def get(n, fn):
        try:
            return fn(results[n]) if n in results else None
        except (KeyError, statistics.StatisticsError):
            return None

    rows = []  # (metric, td value, py value, formatter, target text or None)
    rows.append(("cold start to tools/list, stdio (median of %d)" % a.cold_runs,
                 get("tradedesk", lambda r: statistics.median(r["cold_ms"])),
                 get("python", lambda r: statistics.median(r["cold_ms"])), fmt_ms))
    for transport in ("stdio", "http"):
        for p in (50, 99):
            rows.append((f"tools/call get_portfolio_summary p{p}, {transport.upper() if transport == 'http' else transport} "
                         f"({a.calls} sequential)",
                         get("tradedesk", lambda r, t=transport, p=p: percentile(r[t]["latencies_ms"], p)),
                         get("python", lambda r, t=transport, p=p: percentile(r[t]["latencies_ms"], p)), fmt_ms))
    for conc in concurrencies:
        rows.append((f"HTTP tools/call get_accounts, concurrency {conc} ({a.duration:g} s)",
                     get("tradedesk", lambda r, c=conc: r["http"]["loads"][c]["rps"]),
                     get("python", lambda r, c=conc: r["http"]["loads"][c]["rps"]), fmt_rps))
    rows.append(("idle RSS, stdio (VmRSS after startup)",
                 get("tradedesk", lambda r: r["stdio"]["idle_rss_kb"]),
                 get("python", lambda r: r["stdio"]["idle_rss_kb"]), fmt_mb))
    rows.append(("idle RSS, HTTP (VmRSS after startup)",
                 get("tradedesk", lambda r: r["http"]["idle_rss_kb"]),
                 get("python", lambda r: r["http"]["idle_rss_kb"]), fmt_mb))
    rows.append((f"peak RSS, stdio (VmHWM after {a.calls} calls)",
                 get("tradedesk", lambda r: r["stdio"]["peak_rss_kb"]),
                 get("python", lambda r: r["stdio"]["peak_rss_kb"]), fmt_mb))
    rows.append(("peak RSS, HTTP (VmHWM after the load)",
                 get("tradedesk", lambda r: r["http"]["peak_rss_kb"]),
                 get("python", lambda r: r["http"]["peak_rss_kb"]), fmt_mb))

    lines = []
    lines.append(f"tradedesk `{os.path.relpath(td_path, ROOT)}` ({td_kind}) vs Python `mcp` {mcp_ver.split()[0]} "
                 f"MCPServer (python {mcp_ver.split()[-1]}); {os.cpu_count()} CPUs, "
                 f"loadavg at end {os.getloadavg()[0]:.2f}, {platform.system()} {platform.release()}")
    lines.append("")
    lines.append("| metric | tradedesk | python | python/tradedesk |")
    lines.append("| --- | ---: | ---: | ---: |")
    for metric, td, py, f in rows:
        lines.append(f"| {metric} | {f(td)} | {f(py)} | {fmt_ratio(ratio(py, td))} |")
    lines.append("")

    td_cold = rows[0][1]
    py_cold = rows[0][2]
    td_idle = get("tradedesk", lambda r: r["stdio"]["idle_rss_kb"])
    targets = []
    if td_cold is not None:
        targets.append(("cold start <= 20 ms", td_cold <= 20, fmt_ms(td_cold)))
    if td_cold is not None and py_cold is not None:
        r = py_cold / td_cold
        targets.append(("cold start >= 30x faster than Python", r >= 30, f"{r:.1f}x"))
    if td_idle is not None:
        http_idle = get("tradedesk", lambda r: r["http"]["idle_rss_kb"]) or 0
        worst = max(td_idle, http_idle)
        targets.append(("idle RSS <= 20 MB", worst <= 20 * 1024, f"{fmt_mb(worst)} (worse of stdio/HTTP)"))
    if targets:
        lines.append("| target (tradedesk) | measured | verdict |")
        lines.append("| --- | ---: | --- |")
        for text, ok, measured in targets:
            lines.append(f"| {text} | {measured} | {'PASS' if ok else 'FAIL'} |")
        lines.append("")

    # Same answer from both? (sanity: the benchmark compares equal work)
    sums = {n: results[n]["stdio"]["summary"] for n in names}
    if len(sums) == 2:
        keys = ("total_value", "positions_value", "cash_value", "unrealized_pnl")
        same = all(sums["tradedesk"].get(k) == sums["python"].get(k) for k in keys)
        lines.append(f"answers: get_portfolio_summary total_value tradedesk {sums['tradedesk'].get('total_value')}, "
                     f"python {sums['python'].get('total_value')} "
                     f"({'identical' if same else 'DIFFERENT'} {', '.join(keys)})")
    for n in names:
        h = results[n]["http"]
        errors = sum(v["errors"] for v in h["loads"].values())
        reqs = ", ".join(f"c={c}: {v['requests']} req in {v['seconds']:.1f} s" for c, v in h["loads"].items())
        lines.append(f"{n}: HTTP session id {'used' if h['session'] else 'none'}; load {reqs}; {errors} errors")
    report = "\n".join(lines)
    print(report)
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as fh:
            json.dump({"tradedesk": td_path, "tradedesk_kind": td_kind, "python": a.python, "mcp": mcp_ver,
                       "results": {n: {k: ({str(c): v for c, v in val.items()} if k == "loads" else val)
                                       for k, val in results[n].items() if k != "http"}
                                   | {"http": {k: ({str(c): v for c, v in val.items()} if k == "loads" else val)
                                               for k, val in results[n]["http"].items()}}
                                   for n in names},
                       "report": report}, fh, indent=1)
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
