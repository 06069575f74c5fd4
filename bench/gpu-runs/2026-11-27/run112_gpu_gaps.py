#!/usr/bin/env python3
"""Run 112 (H100, fourteenth session): is a GPU-bound workload's excess under gmlake on the GPU (kernels that run
longer over gmlake's mappings) or on the host (the GPU left idle while the host waits on a fence or makes VMM
calls)? fsdp_like_train ran at 1.035-1.068 of native at the default (runs 106-108, 111) with 206-610 ms of VMM
and 24-77 fence waits a run.

    python3 run112_gpu_gaps.py [--workload fsdp_like_train] [--pairs 2] [--conf GMLAKE_CONF]

After workload_ab.alternate()'s untimed runs and PAIRS timed pairs (wall seconds), one run per allocator under
torch.profiler with CUDA activity only (native first), and from its trace: the span from the first GPU activity
to the last; busy, the union of every kernel, copy and set's interval over all streams; idle = span - busy; the
gaps of at least 50 µs (count, sum, the 5 longest); the kernels' summed time, in all and for the 8 kernels of
most time (by name) under native, with gmlake's time for the same names. Prints one JSON object.
"""
import argparse
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def gaps_of(trace_path):
    """Span, busy, idle and gaps (µs) and kernel time by name, from a chrome trace written by torch.profiler."""
    events = json.load(open(trace_path))["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") in GPU_CATS)
    by_name = {}
    for e in events:
        if e.get("cat") == "kernel":
            by_name[e["name"]] = by_name.get(e["name"], 0.0) + e.get("dur", 0)
    busy, gaps = 0.0, []
    start, end = spans[0]
    for s, t in spans[1:]:
        if s > end:
            busy += end - start
            gaps.append(s - end)
            start, end = s, t
        else:
            end = max(end, t)
    busy += end - start
    span = max(t for _, t in spans) - spans[0][0]
    long = sorted(g for g in gaps if g >= 50)
    return {"span_ms": round(span / 1e3, 2), "busy_ms": round(busy / 1e3, 2), "idle_ms": round((span - busy) / 1e3, 2),
            "gaps_50us": len(long), "gaps_50us_ms": round(sum(long) / 1e3, 2),
            "longest_gaps_us": [round(g) for g in long[-5:]], "gpu_ops": len(spans),
            "kernel_ms": round(sum(by_name.values()) / 1e3, 2)}, by_name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="fsdp_like_train")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--conf", default="")
    args = ap.parse_args()
    import workload_ab
    w = workload_ab.load(args.workload, args.conf)
    import torch
    from torch.profiler import profile, ProfilerActivity

    pairs = workload_ab.alternate(lambda native: workload_ab.measured_run(w, native), args.pairs)
    out = {"workload": args.workload, "conf": args.conf,
           "pairs": [{"native": p[True], "gmlake": p[False], "ratio": round(p[False]["wall_s"] / p[True]["wall_s"], 4)}
                     for p in pairs], "profiled": {}}
    names = {}
    with tempfile.TemporaryDirectory() as d:
        for native in (True, False):
            who = "native" if native else "gmlake"
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                r = workload_ab.measured_run(w, native)
            path = os.path.join(d, who + ".json")
            p.export_chrome_trace(path)
            g, names[who] = gaps_of(path)
            out["profiled"][who] = {**r, **g}
            print(who, out["profiled"][who], file=sys.stderr, flush=True)
    top = sorted(names["native"], key=lambda n: -names["native"][n])[:8]
    out["top_kernels_ms"] = [{"name": n[:80], "native": round(names["native"][n] / 1e3, 2),
                              "gmlake": round(names["gmlake"].get(n, 0) / 1e3, 2)} for n in top]
    out["gpu"], out["torch"] = torch.cuda.get_device_name(0), torch.__version__
    print(json.dumps(out))


if __name__ == "__main__":
    main()
