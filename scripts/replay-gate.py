#!/usr/bin/env python3
"""A benchmark gate on modelled, deterministic figures (no timing): replays every shipped trace on the
sim:h100 backend (VMM calls charged their cost measured on an H100) and fails when gmlake's utilization, or its
modelled VMM time as a multiple of the `caching` policy's (PyTorch's native algorithm) in the same run,
is worse than the bound recorded in bench/replay_bounds.json.

    scripts/replay-gate.py [--gmlake build/gmlake] [--bounds bench/replay_bounds.json] [--record]

--record rewrites the bounds from this run (utilization - 0.002, VMM ratio x 1.05), for a deliberate change.
Exit status: 0 when every trace is within its bounds, 1 otherwise, 2 on a missing trace or a failed replay.

The lake (docs/design.md, "Peer chunks in the engine") is gated too, on LAKE_TRACES: each replayed by gmlake on
sim:h100 under a cap of 80% of gmlake's own peak with `peer_devices:1`. It must fail no allocation, and neither
its modelled VMM ns/op (a peer chunk's cuMemSetAccess included) nor its peak on the peer may pass the recorded
bound (recorded at x 1.05): keys "lake:<trace>" in the same file.
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


LAKE_TRACES = ["resnet50.snapshot.pickle.xz", "gpt2_varlen.snapshot.pickle.xz", "gpt2_generate.snapshot.pickle.xz"]


def replay_lake(gmlake, trace):
    def run(extra):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            subprocess.run([gmlake, "replay", trace, "--policy", "gmlake", "--backend", "sim:h100", "--json", out]
                           + extra, check=True, stdout=subprocess.DEVNULL)
            return json.load(open(out))[0]
    alone = run([])
    cap = alone["peak_reserved_bytes"] // 10 * 8
    r = run(["--cap", str(cap), "--conf", "peer_devices:1"])
    return {"ooms": r["ooms"], "vmm_ns_per_op": sum(r["backend_time_ns"].values()) / r["ops"],
            "peak_peer_bytes": r["peak_peer_reserved_bytes"]}


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
    lake = {}
    for t in LAKE_TRACES:
        try:
            lake[t] = replay_lake(args.gmlake, os.path.join(ROOT, "traces", t))
        except (subprocess.CalledProcessError, KeyError, OSError) as e:
            print(f"replay-gate: lake {t}: replay failed: {e}", file=sys.stderr)
            return 2
    if args.record:
        bounds = {t: {"min_utilization": round(r["utilization"] - 0.002, 4),
                      "max_vmm_ratio": round(r["vmm_ratio"] * 1.05, 3)} for t, r in results.items()}
        for t, r in lake.items():
            bounds["lake:" + t] = {"max_vmm_ns_per_op": round(r["vmm_ns_per_op"] * 1.05, 1),
                                   "max_peak_peer_bytes": int(r["peak_peer_bytes"] * 1.05)}
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
    for t, r in lake.items():
        if "lake:" + t not in bounds:
            print(f"replay-gate: lake {t}: no bound recorded (run with --record)", file=sys.stderr)
            return 2
        b = bounds["lake:" + t]
        ok = r["ooms"] == 0 and r["vmm_ns_per_op"] <= b["max_vmm_ns_per_op"] and \
            r["peak_peer_bytes"] <= b["max_peak_peer_bytes"]
        failed += not ok
        print(f"lake {t:37s} ooms {r['ooms']} vmm ns/op {r['vmm_ns_per_op']:.0f} (max {b['max_vmm_ns_per_op']:.0f}) "
              f"peer {r['peak_peer_bytes'] / 1e9:.3f} GB (max {b['max_peak_peer_bytes'] / 1e9:.3f}) "
              f"{'ok' if ok else 'REGRESSED'}")
    print(f"replay-gate: {len(results) + len(lake) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
