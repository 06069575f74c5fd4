#!/usr/bin/env python3
"""Engine ns/op, two builds alternating (run 79): the lowest of each build's runs per trace, the medians over the
traces, and the median of the per-trace ratios new / old.  nsop-ab.py DIR  (DIR holds run79-bench-{old,new}N.json)"""
import glob, json, os, statistics, sys

def load(f):
    return {(b['name'].split('/')[1], b['name'].split('/')[2]): b['ns_per_op'] for b in json.load(open(f))['benchmarks']}

d = sys.argv[1]
runs = {v: [load(f) for f in sorted(glob.glob(os.path.join(d, f'run79-bench-{v}*.json')))] for v in ('old', 'new')}
traces = sorted({t for (t, p) in runs['old'][0] if p == 'gmlake'})
best = {v: {(t, p): min(r[(t, p)] for r in runs[v]) for t in traces for p in ('gmlake', 'caching')} for v in runs}
for v in ('old', 'new'):
    print(v, len(runs[v]), 'runs,', len(traces), 'traces: gmlake median %.1f ns/op, caching %.1f, max gmlake %.0f' % (
        statistics.median(best[v][(t, 'gmlake')] for t in traces), statistics.median(best[v][(t, 'caching')] for t in traces),
        max(best[v][(t, 'gmlake')] for t in traces)))
print('median per-trace ratio new / old (gmlake): %.3f' % statistics.median(
    best['new'][(t, 'gmlake')] / best['old'][(t, 'gmlake')] for t in traces))
