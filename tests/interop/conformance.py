#!/usr/bin/env python3
"""The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned in
package.json) against tradedesk's HTTP transport, serving the suite's fixtures from the
`tradedesk-conformance` build (crates/server, feature `conformance`).

Usage (from the repository root, after `npm install --no-save` in tests/interop and
`cargo build -p tradedesk-server --features conformance --bin tradedesk-conformance`):
    python3 tests/interop/conformance.py target/debug/tradedesk-conformance

Runs the frozen requirement sets of both protocol eras (2025-11-25, stateful, and
2026-07-28, stateless); a run fails when any scored scenario fails. Scenarios that are not
scored (the tasks extension, pending proposals) are reported; docs/conformance.md lists
the ones expected to fail and why. Prints `N passed, M failed` (runs) and exits 1 on failure.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import wait_for_url  # noqa: E402
NODE_BIN = os.path.join(HERE, "node_modules", "node", "bin")
SUITE = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")



def main() -> int:
    binary = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "target/debug/tradedesk-conformance")
    server = subprocess.Popen([binary, "--http", "127.0.0.1:0"], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    passed = failed = 0
    try:
        url = wait_for_url(server, 15)
        if url is None:
            print("FAIL conformance fixtures did not start")
            print("0 passed, 1 failed")
            return 1
        env = dict(os.environ, PATH=NODE_BIN + os.pathsep + os.environ.get("PATH", ""))
        for revision in ["2025-11-25", "2026-07-28"]:
            try:
                run = subprocess.run(
                    ["node", SUITE, "server", "--url", url, "--requirements", revision],
                    capture_output=True, text=True, timeout=600, env=env,
                )
                out, code = run.stdout + run.stderr, run.returncode
            except subprocess.TimeoutExpired:
                out, code = "timed out", -1
            total = re.findall(r"^Total: .*$", out, re.M)
            failing = [l.strip() for l in out.splitlines() if l.strip().startswith("✗")]
            print(f"{'PASS' if code == 0 else 'FAIL'} conformance --requirements {revision}: {total[-1] if total else out[-300:]}")
            for line in failing:
                print(f"     not passing: {line}")
            if code == 0:
                passed += 1
            else:
                failed += 1
                print(out[-3000:])
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
