"""Reads OURS_JSON / PEER_JSON lines (stdin) of the option benchmarks and prints one table
per measurement (price + greeks, implied volatility) with tradedesk's ratio to each peer."""
import json
import sys

rows = []
for line in sys.stdin:
    for prefix in ("OURS_JSON ", "PEER_JSON "):
        if line.startswith(prefix):
            rows.append(json.loads(line[len(prefix):]))
for what, title in (("price_greeks", "price + all greeks"), ("iv", "implied volatility")):
    group = [r for r in rows if r.get("what") == what]
    if not group:
        continue
    print(f"\n{title}:\n")
    print("| library | cases | per second | tradedesk is |")
    print("| --- | ---: | ---: | ---: |")
    ours = next((r for r in group if r["peer"] == "tradedesk"), None)
    for r in group:
        ratio = "" if ours is None or r is ours else "%.1fx faster" % (ours["per_second"] / r["per_second"])
        print("| %s | %s | %s | %s |" % (r["peer"], format(r["cases"], ","), format(round(r["per_second"]), ","), ratio))
