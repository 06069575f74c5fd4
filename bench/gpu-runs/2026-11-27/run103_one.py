"""Run 103: whole runs of one capture_traces.py workload under one allocator alone (for a sampling profiler).

    python3 run103_one.py WORKLOAD native|gmlake [--runs 4] [--conf C]

One untimed run, then `--runs` timed ones (workload_ab.run_once); prints each run's seconds. With PERF_CTL set (a
perf record --control fifo), writes "enable" to it before the timed runs and "disable" after, so that the profile
holds the timed runs alone.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("allocator", choices=("native", "gmlake"))
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--conf", default="")
    args = ap.parse_args()
    import torch
    import gmlake.torch
    import capture_traces as ct
    import workload_ab
    gmlake.torch.enable(conf=args.conf or None, extension=True)
    ct.torch, ct.F = torch, torch.nn.functional
    fn = ct.WORKLOADS[args.workload][0]
    calls = ct.recorded_calls(json.load(open(os.path.join(ROOT, "traces", f"{args.workload}.native.json")))["params"])
    native = args.allocator == "native"
    workload_ab.run_once(ct, fn, calls, native)
    ctl = os.environ.get("PERF_CTL")

    def tell(word):
        if ctl:
            with open(ctl, "w") as f:
                f.write(word + "\n")

    tell("enable")
    times = [round(workload_ab.run_once(ct, fn, calls, native), 4) for _ in range(args.runs)]
    tell("disable")
    print(json.dumps({"workload": args.workload, "allocator": args.allocator, "conf": args.conf, "runs_s": times}))


if __name__ == "__main__":
    main()
