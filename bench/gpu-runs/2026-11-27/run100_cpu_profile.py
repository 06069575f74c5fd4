#!/usr/bin/env python3
"""Run 100 (H100, twelfth session): gan_train's host side under each allocator. After an untimed run of each, one
run per allocator under torch.profiler (CPU activity only), native first: the ops with the most self CPU time, and
the total self CPU time of every op, per allocator.   python3 run100_cpu_profile.py [WORKLOAD]"""
import json, os, sys
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
from workload_ab import load, run_once
name = sys.argv[1] if len(sys.argv) > 1 else "gan_train"
w = load(name)
from torch.profiler import profile, ProfilerActivity
run_once(w, True)
run_once(w, False)
out = {}
for native in (True, False):
    with profile(activities=[ProfilerActivity.CPU]) as p:
        run_once(w, native)
    ka = p.key_averages()
    tag = "native" if native else "gmlake"
    rows = sorted(ka, key=lambda e: -e.self_cpu_time_total)[:14]
    out[tag] = {"self_cpu_total_ms": round(sum(e.self_cpu_time_total for e in ka) / 1e3, 1),
                "top": [(e.key, e.count, round(e.self_cpu_time_total / 1e3, 1)) for e in rows]}
    print(tag, out[tag]["self_cpu_total_ms"], "ms self CPU in all", flush=True)
    for r in out[tag]["top"]:
        print("   ", r, flush=True)
json.dump(out, open(os.environ.get("OUT", ".") + f"/run100-cpu_profile_{name}.json", "w"))
