"""In-process A/B of one capture_traces.py workload: gmlake against PyTorch's native allocator, whole runs.

    python3 bench/torch/workload_ab.py fsdp_like_train [--runs 6] [--conf GMLAKE_CONF]

For a workload that bench/torch/train.py does not have as an A/B model: its function in capture_traces.py runs
whole (every step its recorded run made: the call count from its provenance JSON in traces/), alternately under
gmlake's extension and inside gmlake.torch.native(), the order swapped each pair, after one untimed run of each.
Prints one JSON object: each pair's wall seconds and ratio gmlake / native, their median and the total ratio,
gmlake's backend (VMM) time, calls and fence waits (the host blocked until the device passed a mark) per run, and
each allocator's peak reserved bytes.
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_once(ct, fn, calls, native):
    """One whole run of workload `fn` (capture_traces.py module `ct`, `calls` calls as recorded), seeded as the
    recorded run, under PyTorch's allocator when `native`, else under gmlake's extension; its wall seconds."""
    import torch
    import gmlake.torch
    torch.manual_seed(ct.SEED)
    random.seed(ct.SEED)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if native:
        with gmlake.torch.native():
            fn(ct.ReplayCtx(calls), {})
    else:
        fn(ct.ReplayCtx(calls), {})
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--runs", type=int, default=6, help="timed pairs")
    ap.add_argument("--conf", default="", help="gmlake configuration (GMLAKE_CONF form)")
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    import torch
    import gmlake
    import gmlake.torch
    import capture_traces as ct
    gmlake.torch.enable(conf=args.conf or None, extension=True)
    ct.torch, ct.F = torch, torch.nn.functional
    fn = ct.WORKLOADS[args.workload][0]
    rec = json.load(open(os.path.join(ROOT, "traces", f"{args.workload}.native.json")))
    calls = ct.recorded_calls(rec["params"])
    if calls is None:
        sys.exit(f"workload_ab: traces/{args.workload}.native.json lists no count of calls")

    def run(native):
        before = gmlake.torch.memory_stats()
        s = run_once(ct, fn, calls, native)
        after = gmlake.torch.memory_stats()
        return s, (after["gmlake.backend_time_ns"] - before["gmlake.backend_time_ns"]) / 1e6, \
            after["gmlake.backend_calls"] - before["gmlake.backend_calls"], \
            after["gmlake.fence_waits"] - before["gmlake.fence_waits"]

    run(True)
    run(False)
    pairs = []
    for i in range(args.runs):
        order = (True, False) if i % 2 == 0 else (False, True)
        r = {native: run(native) for native in order}
        pairs.append({"native_s": round(r[True][0], 4), "gmlake_s": round(r[False][0], 4),
                      "ratio": round(r[False][0] / r[True][0], 4), "gmlake_vmm_ms": round(r[False][1], 2),
                      "gmlake_backend_calls": r[False][2], "gmlake_fence_waits": r[False][3],
                      "gmlake_first": not order[0]})
    out = {"workload": args.workload, "calls": calls, "conf": args.conf, "pairs": pairs,
           "median_ratio": statistics.median(x["ratio"] for x in pairs),
           "total_ratio": sum(x["gmlake_s"] for x in pairs) / sum(x["native_s"] for x in pairs),
           "gmlake_peak_reserved": gmlake.torch.memory_stats()["reserved_bytes.all.peak"],
           "native_peak_reserved": gmlake.torch.native_memory_stats()["reserved_bytes.all.peak"],
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
