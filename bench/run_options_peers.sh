#!/usr/bin/env bash
# Times peer option libraries (py_vollib, py_vollib_vectorized, QuantLib) on European
# Black-Scholes-Merton price + greeks and implied volatility, one thread each, on seeded
# random cases. Prints a table and PEER_JSON lines.
# Usage: bench/run_options_peers.sh [options_peers.py options]
#   PYTHON=python3.12 picks the Python that makes the venvs; PEERS_VENV=/tmp/x puts the
#   main venv elsewhere, PEERS_VECTORIZED_VENV=/tmp/y the py_vollib_vectorized one (it
#   needs a venv of its own: see requirements-options-vectorized.txt).
# Do not run it while cargo is building: the machine has 2 cores.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="${PEERS_VENV:-$here/.venv-options}"                          # QuantLib, py_vollib
vvenv="${PEERS_VECTORIZED_VENV:-$here/.venv-options-vectorized}"    # py_vollib_vectorized
for v in "$venv" "$vvenv"; do
    if [ ! -x "$v/bin/python" ]; then
        "${PYTHON:-python3}" -m venv "$v"
    fi
done
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements-options.txt"
"$vvenv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$here/requirements-options-vectorized.txt"
exec "$venv/bin/python" "$here/options_peers.py" --vectorized-python "$vvenv/bin/python" "$@"
