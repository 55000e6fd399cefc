#!/usr/bin/env bash
# Times peer Python backtesters (vectorbt, backtesting.py) on an SMA 10/30 crossover
# over 1,000,000 in-memory bars, one thread each. Prints a table and PEER_JSON lines.
# Usage: bench/run_peers.sh [peers.py options]
#   PYTHON=python3.12 picks the Python that makes the venv; PEERS_VENV=/tmp/x puts it elsewhere.
# Do not run it while cargo is building: the machine has 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PEERS_VENV:-$here/.venv}"   # PEERS_VENV: put the venv elsewhere
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
exec "$venv/bin/python" "$here/peers.py" "$@"
