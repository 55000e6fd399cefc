"""Reads OURS_JSON / PEER_JSON lines (stdin) and prints the backtester table and ratios."""
import json
import sys

rows = []
for line in sys.stdin:
    for prefix in ("OURS_JSON ", "PEER_JSON "):
        if line.startswith(prefix):
            rows.append(json.loads(line[len(prefix):]))
print("| engine | bars | seconds | bars/s |")
print("| --- | ---: | ---: | ---: |")
for r in rows:
    print("| %s | %s | %.4f | %s |" % (r["peer"], format(r["bars"], ","), r["seconds"], format(round(r["bars_per_second"]), ",")))
ours = next(r for r in rows if r["peer"].startswith("tradedesk (in memory"))
for r in rows:
    if not r["peer"].startswith("tradedesk"):
        print("tradedesk in memory vs %s: %.1fx" % (r["peer"], ours["bars_per_second"] / r["bars_per_second"]))
