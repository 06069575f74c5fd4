"""A/B of one capture_traces.py workload: gmlake against PyTorch's native allocator, whole runs.

    python3 bench/torch/workload_ab.py fsdp_like_train [--runs 6] [--conf GMLAKE_CONF]
    python3 bench/torch/workload_ab.py gan_train --processes [--runs 5] [--runs-per-process 3] [--conf C]
    python3 bench/torch/workload_ab.py gan_train --alone gmlake [--runs 3] [--conf C]

For a workload that bench/torch/train.py does not have as an A/B model: its function in capture_traces.py runs
whole (every step its recorded run made: the call count from its provenance JSON in traces/).
- In one process (the default): alternately under gmlake's extension and inside gmlake.torch.native(), the order
  swapped each pair, after one untimed run of each. Prints one JSON object: each pair's wall seconds and ratio
  gmlake / native, their median and the total ratio, gmlake's backend (VMM) time, calls and fence waits (the host
  blocked until the device passed a mark; those that drained the stream, and the time blocked) per run, and each
  allocator's peak reserved bytes.
- `--processes`: as a user runs it, one allocator per process: `--runs` pairs of processes, each `--alone`, the
  order swapped each pair. Prints one JSON object: each process's runs, per allocator the median and total of
  all its runs, and the ratios gmlake / native of both. (Where the host sets the pace, one process with both
  allocators can slow gmlake: gan_train 1.083 in one process, 0.971 per process, one machine; docs/benchmarks.md,
  run 110.)
- `--alone A`: this process uses allocator A (native or gmlake) alone: one untimed run, then `--runs` timed.
  Prints one JSON object with each run's seconds, and per run measured_run's figures (gmlake's VMM time, calls,
  fence waits; zeros under native). With PERF_CTL set (the control fifo of `perf record
  --control`), writes "enable" to it before the timed runs and "disable" after, so that a profile holds them alone.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class Workload:
    """A capture_traces.py workload made ready to run under both allocators (load())."""

    def __init__(self, name, ct, fn, calls):
        self.name, self.ct, self.fn, self.calls = name, ct, fn, calls


def load(name, conf=""):
    """Enables gmlake's extension (configuration `conf`, GMLAKE_CONF form; "" the default) as this process's
    allocator, PyTorch's own reachable through gmlake.torch.native(), and loads workload `name` from
    capture_traces.py with its call count from traces/NAME.native.json (exits when it lists none)."""
    sys.path.insert(0, os.path.join(ROOT, "python"))
    sys.path.insert(0, os.path.join(ROOT, "bench", "torch"))
    import torch
    import gmlake.torch
    import capture_traces as ct
    gmlake.torch.enable(conf=conf or None, extension=True)
    ct.torch, ct.F = torch, torch.nn.functional
    rec = json.load(open(os.path.join(ROOT, "traces", f"{name}.native.json")))
    calls = ct.recorded_calls(rec["params"])
    if calls is None:
        sys.exit(f"workload_ab: traces/{name}.native.json lists no count of calls")
    return Workload(name, ct, ct.WORKLOADS[name][0], calls)


def run_once(w, native, ctx=None):
    """One whole run of Workload `w` (load()), seeded as the recorded run, under PyTorch's allocator when `native`,
    else under gmlake's extension; its wall seconds, from a synchronized device to a synchronized device. `ctx`:
    the workload's context (a capture_traces.ReplayCtx of w.calls calls, or one derived from it, e.g. one that
    stamps each step); a new ReplayCtx when None."""
    import torch
    import gmlake.torch
    torch.manual_seed(w.ct.SEED)
    random.seed(w.ct.SEED)
    ctx = ctx if ctx is not None else w.ct.ReplayCtx(w.calls)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if native:
        with gmlake.torch.native():
            w.fn(ctx, {})
    else:
        w.fn(ctx, {})
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def measured_run(w, native, ctx=None):
    """run_once(w, native, ctx) with what gmlake's pool did meanwhile: {"wall_s", "vmm_ms" (backend time),
    "backend_calls", "fence_waits", "fence_drains", "fence_wait_ms" (the host blocked in them), "chunks_created",
    "chunks_released", "evictions", "arena_handovers"}; gmlake's figures are 0 for a native run."""
    import gmlake.torch
    counts = ("backend_calls", "fence_waits", "fence_drains", "chunks_created", "chunks_released", "evictions",
              "arena_handovers")
    before = gmlake.torch.memory_stats()
    wall = run_once(w, native, ctx)
    after = gmlake.torch.memory_stats()
    d = {k: after["gmlake." + k] - before["gmlake." + k] for k in counts + ("backend_time_ns", "fence_wait_ns")}
    return {"wall_s": round(wall, 4), "vmm_ms": round(d["backend_time_ns"] / 1e6, 2),
            "fence_wait_ms": round(d["fence_wait_ns"] / 1e6, 2), **{k: d[k] for k in counts}}


def alternate(run, pairs):
    """One untimed run(native) under each allocator (native first), then `pairs` timed pairs, the order swapped each
    pair: a list with, per pair, {True: native's run, False: gmlake's run, "gmlake_first": bool}."""
    run(True)
    run(False)
    out = []
    for i in range(pairs):
        order = (True, False) if i % 2 == 0 else (False, True)
        r = {native: run(native) for native in order}
        r["gmlake_first"] = not order[0]
        out.append(r)
    return out


def by_processes(args):
    """The --processes A/B: pairs of processes of run --alone, native and gmlake in turn."""
    rows = []
    for i in range(args.runs):
        for allocator in (("native", "gmlake") if i % 2 == 0 else ("gmlake", "native")):
            cmd = [sys.executable, os.path.abspath(__file__), args.workload, "--alone", allocator,
                   "--runs", str(args.runs_per_process), "--conf", args.conf]
            out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
    runs = {a: [x for r in rows if r["allocator"] == a for x in r["runs_s"]] for a in ("native", "gmlake")}
    out = {"workload": args.workload, "conf": args.conf, "mode": "processes", "processes": rows,
           "median_s": {a: statistics.median(v) for a, v in runs.items()},
           "total_s": {a: round(sum(v), 4) for a, v in runs.items()},
           "median_ratio": statistics.median(runs["gmlake"]) / statistics.median(runs["native"]),
           "total_ratio": sum(runs["gmlake"]) / sum(runs["native"])}
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--runs", type=int, default=6, help="timed pairs (--alone: timed runs)")
    ap.add_argument("--conf", default="", help="gmlake configuration (GMLAKE_CONF form)")
    ap.add_argument("--processes", action="store_true", help="one allocator per process (see above)")
    ap.add_argument("--runs-per-process", type=int, default=3, help="--processes: timed runs in each process")
    ap.add_argument("--alone", choices=("native", "gmlake"), help="one allocator alone in this process")
    args = ap.parse_args()
    if args.processes:
        return by_processes(args)
    w = load(args.workload, args.conf)
    import torch
    import gmlake.torch

    if args.alone:
        native = args.alone == "native"
        run_once(w, native)
        ctl = os.environ.get("PERF_CTL")

        def tell(word):
            if ctl:
                with open(ctl, "w") as f:
                    f.write(word + "\n")

        tell("enable")
        runs = [measured_run(w, native) for _ in range(args.runs)]
        tell("disable")
        print(json.dumps({"workload": args.workload, "allocator": args.alone, "conf": args.conf,
                          "runs_s": [r["wall_s"] for r in runs], "runs": runs,
                          "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}))
        return

    # Per pair: both walls, their ratio, and each of measured_run's figures of gmlake's run as "gmlake_<name>".
    pairs = [{"native_s": r[True]["wall_s"], "gmlake_s": r[False]["wall_s"],
              "ratio": round(r[False]["wall_s"] / r[True]["wall_s"], 4),
              **{f"gmlake_{k}": v for k, v in r[False].items() if k != "wall_s"},
              "gmlake_first": r["gmlake_first"]} for r in alternate(lambda native: measured_run(w, native), args.runs)]
    out = {"workload": args.workload, "calls": w.calls, "conf": args.conf, "pairs": pairs,
           "median_ratio": statistics.median(x["ratio"] for x in pairs),
           "total_ratio": sum(x["gmlake_s"] for x in pairs) / sum(x["native_s"] for x in pairs),
           "gmlake_peak_reserved": gmlake.torch.memory_stats()["reserved_bytes.all.peak"],
           "native_peak_reserved": gmlake.torch.native_memory_stats()["reserved_bytes.all.peak"],
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
