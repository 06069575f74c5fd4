#!/usr/bin/env python3
"""Run 98 (H100, twelfth session): where gan_train's excess under gmlake goes (runs 95-97: 1.046-1.061 of native
with no backend call at all). One workload run per allocator under torch.profiler (CPU and CUDA activity), after an
untimed run of each: RUNS pairs of unprofiled runs (wall time), gmlake and native alternately, then one profiled run
of each: wall time and the GPU's kernel time (the sum of the kernels' device time).
    python3 run98_profile.py [WORKLOAD] [RUNS]"""
import json, os, sys
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
from workload_ab import alternate, load, run_once
name = sys.argv[1] if len(sys.argv) > 1 else "gan_train"
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 2
w = load(name)
from torch.profiler import profile as prof_, ProfilerActivity

def one(native, profile):
    p = prof_(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) if profile else None
    if p: p.__enter__()
    wall = run_once(w, native)
    if not p: return {"wall_s": round(wall, 4)}
    p.__exit__(None, None, None)
    kernel_us = sum(e.device_time_total for e in p.events() if e.device_type.name == "CUDA")
    return {"wall_s": round(wall, 4), "kernel_s": round(kernel_us / 1e6, 4), "events": len(p.events())}

out = []
for pair in alternate(lambda native: one(native, False), runs):
    for native in ((False, True) if pair["gmlake_first"] else (True, False)):
        r = {"alloc": "native" if native else "gmlake", **pair[native]}
        out.append(r); print(r, flush=True)
for native in (True, False):
    r = {"alloc": "native" if native else "gmlake", "profiled": True, **one(native, True)}
    out.append(r); print(r, flush=True)
json.dump(out, open(os.environ.get("OUT", ".") + f"/run98-profile_{name}.json", "w"))
