#!/usr/bin/env bash
# The backtester beside its peers, in one run: tradedesk's SMA 10/30 crossover over
# 1,000,000 in-memory bars (and the whole tool call on a CSV of them, cold and warm), then vectorbt and
# backtesting.py on the same kind of series (bench/peers.py, their own venv), then the
# ratios. Prints a table; the figures in docs/benchmarks.md come from this script.
# Do not run it while another build runs: the machine has 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo bench --quiet --bench research 2>/dev/null | tee "$out"
"$here/run_peers.sh" "$@" | tee -a "$out"
python3 "$here/table.py" < "$out"
