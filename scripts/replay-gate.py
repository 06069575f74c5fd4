#!/usr/bin/env python3
"""A benchmark gate on modelled, deterministic figures (no timing): replays every shipped trace on the
sim:h100 backend (VMM calls charged their cost measured on an H100) and fails when gmlake's utilization, or its
modelled VMM time as a multiple of the `caching` policy's (PyTorch's native algorithm) in the same run,
is worse than the bound recorded in bench/replay_bounds.json.

    scripts/replay-gate.py [--gmlake build/gmlake] [--bounds bench/replay_bounds.json] [--record]

--record rewrites the bounds from this run (utilization - 0.002, VMM ratio x 1.05), for a deliberate change.
Exit status: 0 when every trace is within its bounds, 1 otherwise, 2 on a missing trace or a failed replay.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def replay(gmlake, trace):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        subprocess.run([gmlake, "replay", trace, "--policy", "all", "--backend", "sim:h100", "--json", out],
                       check=True, stdout=subprocess.DEVNULL)
        rows = json.load(open(out))
    by = {r["policy"]: r for r in rows if r.get("device", 0) == rows[0].get("device", 0)}
    g, c = by["gmlake"], by["caching"]
    vmm = lambda r: sum(r["backend_time_ns"].values())
    return {"utilization": g["utilization"], "vmm_ratio": vmm(g) / max(vmm(c), 1),
            "vmm_ns_per_op": vmm(g) / g["ops"], "caching_vmm_ns_per_op": vmm(c) / c["ops"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gmlake", default=os.path.join(ROOT, "build", "gmlake"))
    ap.add_argument("--bounds", default=os.path.join(ROOT, "bench", "replay_bounds.json"))
    ap.add_argument("--record", action="store_true")
    args = ap.parse_args()
    traces = sorted(f for f in os.listdir(os.path.join(ROOT, "traces")) if ".snapshot.pickle" in f)
    results = {}
    for t in traces:
        try:
            results[t] = replay(args.gmlake, os.path.join(ROOT, "traces", t))
        except (subprocess.CalledProcessError, KeyError, OSError) as e:
            print(f"replay-gate: {t}: replay failed: {e}", file=sys.stderr)
            return 2
    if args.record:
        bounds = {t: {"min_utilization": round(r["utilization"] - 0.002, 4),
                      "max_vmm_ratio": round(r["vmm_ratio"] * 1.05, 3)} for t, r in results.items()}
        with open(args.bounds, "w") as f:
            json.dump(bounds, f, indent=1, sort_keys=True)
            f.write("\n")
        print(f"replay-gate: recorded {len(bounds)} bounds in {args.bounds}")
        return 0
    bounds = json.load(open(args.bounds))
    failed = 0
    print(f"{'trace':42s} {'util':>6s} {'min':>6s} {'vmm ratio':>9s} {'max':>6s}  gmlake/caching modelled VMM ns/op")
    for t, r in results.items():
        if t not in bounds:
            print(f"replay-gate: {t}: no bound recorded (run with --record)", file=sys.stderr)
            return 2
        b = bounds[t]
        ok = r["utilization"] >= b["min_utilization"] and r["vmm_ratio"] <= b["max_vmm_ratio"]
        failed += not ok
        print(f"{t:42s} {r['utilization']:6.3f} {b['min_utilization']:6.3f} {r['vmm_ratio']:9.2f} {b['max_vmm_ratio']:6.2f}"
              f"  {r['vmm_ns_per_op']:.0f}/{r['caching_vmm_ns_per_op']:.0f} {'ok' if ok else 'REGRESSED'}")
    print(f"replay-gate: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
