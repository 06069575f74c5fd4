# nsop.py BENCH_JSON: per trace the lowest ns_per_op of gmlake and caching over the repetitions, then the medians.
import json, statistics, sys
d = json.load(open(sys.argv[1]))
by = {}
for b in d['benchmarks']:
    if b.get('run_type') == 'aggregate': continue
    parts = b['name'].split('/')
    by.setdefault(parts[1], {}).setdefault(parts[2], []).append(b['ns_per_op'])
g = {t: min(v['gmlake']) for t, v in by.items() if 'gmlake' in v}
c = {t: min(v['caching']) for t, v in by.items() if 'caching' in v}
for t in sorted(g): print(f"{t:24s} gmlake {g[t]:7.1f} caching {c.get(t, float('nan')):7.1f}")
print("median gmlake", round(statistics.median(g.values()), 1), "caching", round(statistics.median(c.values()), 1),
      "ratio median", round(statistics.median(g[t] / c[t] for t in g), 3))
