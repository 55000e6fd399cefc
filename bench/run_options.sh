#!/usr/bin/env bash
# Option analytics beside their peers, in one run: tradedesk's price + greeks and implied
# volatility over 1,000,000 seeded contracts (`cargo bench --bench options`), then
# py_vollib, py_vollib_vectorized and QuantLib on contracts drawn the same way
# (bench/run_options_peers.sh, their own venvs), then the ratios. Prints a table; the
# figures in docs/benchmarks.md come from this script.
# Do not run it while another build runs: the machine has 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here/.."
out="$(mktemp)"
trap 'rm -f "$out"' EXIT
cargo bench --quiet --bench options 2>/dev/null | tee "$out"
"$here/run_options_peers.sh" "$@" | tee -a "$out"
python3 "$here/options_table.py" < "$out"
