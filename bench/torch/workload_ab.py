"""A/B of one capture_traces.py workload: gmlake against PyTorch's native allocator, whole runs.

    python3 bench/torch/workload_ab.py fsdp_like_train [--runs 6] [--conf GMLAKE_CONF] [--per-call] [--device-time]
    python3 bench/torch/workload_ab.py gan_train --processes [--runs 5] [--runs-per-process 3] [--conf C]
    python3 bench/torch/workload_ab.py gan_train --alone gmlake [--runs 3] [--conf C]

For a workload that bench/torch/train.py does not have as an A/B model: its function in capture_traces.py runs
whole (every step its recorded run made: the call count from its provenance JSON in traces/).
- In one process (the default): alternately under gmlake's extension and inside gmlake.torch.native(), the order
  swapped each pair, after one untimed run of each. Prints one JSON object: each pair's wall seconds and ratio
  gmlake / native, their median and the total ratio, gmlake's backend (VMM) time, calls and fence waits (the host
  blocked until the device passed a mark; those that drained the stream, and the time blocked) per run, and each
  allocator's peak reserved bytes. With `--per-call`, also each run's host seconds by kind of call (StampCtx) and,
  per kind, gmlake's total over native's: which calls a gap is in; and each run's minor page faults by the model
  its calls moved to the host (faults_by_swapped; with --processes and --alone too). With `--device-time`, each
  timed run is profiled (CUDA activity, bench/torch/device_time.py) and reports its kernel, copy and memset
  seconds: whether a slower run lost its time on the device or on the host.
- `--processes`: as a user runs it, one allocator per process: `--runs` pairs of processes, each `--alone`, the
  order swapped each pair. Prints one JSON object: each process's runs, per allocator the median and total of
  all its runs, and the ratios gmlake / native of both. (Where the host sets the pace, one process with both
  allocators can slow gmlake: gan_train 1.083 in one process, 0.971 per process, one machine; docs/benchmarks.md,
  run 110.) Each finished process is named on stderr; on SIGTERM (a `timeout` around it) the processes that
  finished are still printed, with "complete": false.
- `--alone A`: this process uses allocator A (native or gmlake) alone: one untimed run, then `--runs` timed.
  Prints one JSON object with each run's seconds, and per run measured_run's figures (gmlake's VMM time, calls,
  fence waits; zeros under native). With PERF_CTL set (the control fifo of `perf record
  --control`), writes "enable" to it before the timed runs and "disable" after, so that a profile holds them alone.
"""
import argparse
import contextlib
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import time

import device_time  # standard library only until a Recorder starts

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


def run_once(w, native, ctx=None, p=None):
    """One whole run of Workload `w` (load()), seeded as the recorded run, under PyTorch's allocator when `native`,
    else under gmlake's extension; its wall seconds, from a synchronized device to a synchronized device. `ctx`:
    the workload's context (a capture_traces.ReplayCtx of w.calls calls, or one derived from it, e.g. one that
    stamps each step); a new ReplayCtx when None. `p`: the dict the workload fills with what it did (its "calls");
    a new one when None."""
    import torch
    import gmlake.torch
    torch.manual_seed(w.ct.SEED)
    random.seed(w.ct.SEED)
    ctx = ctx if ctx is not None else w.ct.ReplayCtx(w.calls)
    p = p if p is not None else {}
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    if native:
        with gmlake.torch.native():
            w.fn(ctx, p)
    else:
        w.fn(ctx, p)
    torch.cuda.synchronize()
    t1 = time.perf_counter()
    if isinstance(ctx, StampCtx):
        ctx.stamp(t1)
    return t1 - t0


class StampCtx:
    """A workload context (capture_traces.ReplayCtx) that also stamps the host's clock (perf_counter seconds) at the
    start of each call it lets run; run_once adds the end of the run (after a device synchronize) as the last
    stamp. A call's host time is then the next stamp less its own: it holds device time only where the workload
    waits for the device within the call (a generate loop does, an asynchronous forward may leave its kernels to
    the next call). With each stamp also the process's minor page faults so far (faults)."""

    def __init__(self, inner):
        self.inner, self.stamps_s, self.faults = inner, [], []

    def stamp(self, now_s):
        self.stamps_s.append(now_s)
        self.faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)

    def fits(self, *args, **kwargs):
        ok = self.inner.fits(*args, **kwargs)
        if ok:
            self.stamp(time.perf_counter())
        return ok

    def __getattr__(self, name):
        return getattr(self.inner, name)


def moved_out(record):
    """The model a call moved to the host to make room, from its "calls" record (model_swap_serve: a record of
    five fields whose fifth is a string), else None."""
    return record[4] if isinstance(record, (list, tuple)) and len(record) == 5 and isinstance(record[4], str) else None


def call_times(stamps_s, calls):
    """[[kind, seconds], ...], one per call in the order they ran, from a StampCtx's stamps (one per call, then the
    run's end) and the workload's "calls" record: a call's kind is its record's first field where that is a string
    (model_swap_serve: the model), else "call"; "+swap" added where the call moved a model out (moved_out()). Shows
    whether one kind is slower call by call or in a few calls."""
    out = []
    for i in range(len(stamps_s) - 1):
        c = calls[i] if i < len(calls) else None
        kind = c[0] if isinstance(c, (list, tuple)) and c and isinstance(c[0], str) else "call"
        if kind != "call" and moved_out(c):
            kind += "+swap"
        out.append([kind, stamps_s[i + 1] - stamps_s[i]])
    return out


def per_kind(times):
    """{kind: [seconds, calls]}: call_times()' list `times` summed by kind."""
    out = {}
    for kind, seconds in times:
        k = out.setdefault(kind, [0.0, 0])
        k[0] += seconds
        k[1] += 1
    return {k: [round(v[0], 4), v[1]] for k, v in out.items()}


def faults_by_swapped(faults, calls):
    """{model: minor page faults} from a StampCtx's fault stamps (one per call, then the run's end) and the
    workload's "calls" record, summed by the model a call moved to the host (moved_out()), "-" for calls that moved
    none: which moves out to new host tensors fault."""
    out = {}
    for i in range(len(faults) - 1):
        moved = moved_out(calls[i] if i < len(calls) else None) or "-"
        out[moved] = out.get(moved, 0) + faults[i + 1] - faults[i]
    return out


def kind_ratios(pairs):
    """{kind: [gmlake's host seconds / native's over all pairs, calls of that kind in a run]} from --per-call
    pairs ("gmlake_per_kind", "native_per_kind")."""
    out = {}
    for kind in pairs[0]["native_per_kind"]:
        g = sum(x["gmlake_per_kind"].get(kind, [0.0])[0] for x in pairs)
        n = sum(x["native_per_kind"][kind][0] for x in pairs)
        out[kind] = [round(g / n, 4) if n else None, pairs[0]["native_per_kind"][kind][1]]
    return out


def heap_state():
    """glibc's malloc state of the process (mallinfo2, glibc 2.33+): {"heap_bytes": the main heap's size from brk
    plus the other arenas', "heap_free_bytes": free bytes inside them, "mmapped_bytes": bytes in blocks malloc gave
    their own mmap}; {} where mallinfo2 is missing. A freed host tensor at the top of the heap is given back to the
    kernel when the free top passes glibc's trim threshold, and the next tensor there faults its pages in again."""
    import ctypes

    class MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                         "fsmblks", "uordblks", "fordblks", "keepcost")]
    try:
        f = ctypes.CDLL(None).mallinfo2
    except (AttributeError, OSError):
        return {}
    f.restype = MallInfo2
    m = f()
    return {"heap_bytes": m.arena, "heap_free_bytes": m.fordblks, "mmapped_bytes": m.hblkhd}


MALLOC_COUNT_FIELDS = ("mallocs", "frees", "large_mallocs", "large_malloc_bytes", "huge_mallocs", "huge_malloc_bytes",
                       "large_mmapped", "large_mmapped_bytes")


def malloc_counts():
    """The counters of bench/torch/malloc_count.c where it is preloaded (LD_PRELOAD), by MALLOC_COUNT_FIELDS (large:
    128 KiB or more, huge: 32 MiB or more, large_mmapped: those from 128 KiB up to 32 MiB that glibc gave a mapping
    of their own, as its dynamic mmap threshold decides), and "large_mallocs_by_object": {shared object:
    [requests, bytes]} of the large ones; {} where it is not loaded."""
    import ctypes
    lib = ctypes.CDLL(None)
    if not hasattr(lib, "malloc_count_snapshot"):
        return {}
    values = (ctypes.c_long * len(MALLOC_COUNT_FIELDS))()
    lib.malloc_count_snapshot(values)
    buf = ctypes.create_string_buffer(16384)
    lib.malloc_count_by_object(buf, ctypes.c_size_t(len(buf)))
    by_object = {}
    for line in buf.value.decode(errors="replace").splitlines():
        name, requests, size = line.rsplit(" ", 2)
        by_object[os.path.basename(name)] = [int(requests), int(size)]
    return {**dict(zip(MALLOC_COUNT_FIELDS, values)), "large_mallocs_by_object": by_object}


def counts_delta(before, after):
    """after - before of two malloc_counts(), field by field and per shared object."""
    if not before:
        return {}
    out = {k: after[k] - before[k] for k in MALLOC_COUNT_FIELDS}
    out["large_mallocs_by_object"] = {
        name: [r - before["large_mallocs_by_object"].get(name, [0, 0])[0],
               b - before["large_mallocs_by_object"].get(name, [0, 0])[1]]
        for name, (r, b) in after["large_mallocs_by_object"].items()
        if [r, b] != before["large_mallocs_by_object"].get(name)}
    return out


def measured_run(w, native, ctx=None, per_call=False, profile=False):
    """run_once(w, native, ctx) with what gmlake's pool did meanwhile: {"wall_s", "vmm_ms" (backend time),
    "backend_calls", "fence_waits", "fence_drains", "fence_wait_ms" (the host blocked in them), "chunks_created",
    "chunks_released", "evictions", "arena_handovers", "stream_event_calls" (event records and queries),
    "critical_path_moves" and "refused_moves" (the move budget: moves charged as on the critical path, refusals), "minflt"
    (minor page faults of the whole process: first touches of host pages, as a copy into a new host tensor makes),
    heap_state() after the run, and the run's counts_delta of malloc_counts() where malloc_count.c is preloaded};
    gmlake's figures are 0 for a native run. With `per_call`, also "per_kind": the host seconds and count of its
    calls by kind (per_kind(), StampCtx), each call's ("call_times", call_times()) and "faults_by_swapped"
    (faults_by_swapped()). With `profile`, the run is profiled (CUDA activity only, bench/torch/device_time.py)
    and its device time added (device_time.FIELDS: "kernel_s", "memcpy_s", "memset_s", "kernels")."""
    import gmlake.torch
    counts = ("backend_calls", "fence_waits", "fence_drains", "chunks_created", "chunks_released", "evictions",
              "arena_handovers", "stream_event_calls", "critical_path_moves", "refused_moves")
    p = {}
    if per_call:
        ctx = StampCtx(ctx if ctx is not None else w.ct.ReplayCtx(w.calls))
    before = gmlake.torch.memory_stats()
    mallocs = malloc_counts()
    minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    with device_time.Recorder() if profile else contextlib.nullcontext() as rec:
        wall = run_once(w, native, ctx, p)
    minflt = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - minflt
    mallocs = counts_delta(mallocs, malloc_counts())
    after = gmlake.torch.memory_stats()
    d = {k: after["gmlake." + k] - before["gmlake." + k] for k in counts + ("backend_time_ns", "fence_wait_ns")}
    out = {"wall_s": round(wall, 4), "vmm_ms": round(d["backend_time_ns"] / 1e6, 2),
           "fence_wait_ms": round(d["fence_wait_ns"] / 1e6, 2), **{k: d[k] for k in counts}, "minflt": minflt,
           **heap_state(), **mallocs}
    if profile:
        out.update(rec.result)
    if per_call:
        times = call_times(ctx.stamps_s, p.get("calls", []))
        out["per_kind"] = per_kind(times)
        out["call_times"] = [[k, round(t, 5)] for k, t in times]
        out["faults_by_swapped"] = faults_by_swapped(ctx.faults, p.get("calls", []))
    return out


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


def alone_command(args, allocator):
    """The command line of one --processes process: this script --alone `allocator` (--per-call and --device-time
    passed on)."""
    return [sys.executable, os.path.abspath(__file__), args.workload, "--alone", allocator,
            "--runs", str(args.runs_per_process), "--conf", args.conf] + (["--per-call"] if args.per_call else []) \
        + (["--device-time"] if getattr(args, "device_time", False) else [])


def by_processes(args, command=alone_command):
    """The --processes A/B: pairs of processes of `command(args, allocator)` (run --alone), native and gmlake in
    turn. On SIGTERM the process running is stopped and the result holds the processes that finished, with
    "complete": false."""
    rows, state = [], {"child": None, "stopped": False}

    def stop(signum, frame):  # a flag, not an exception: a Popen cut short could leave its child running
        state["stopped"] = True
        if state["child"] is not None and state["child"].poll() is None:
            state["child"].kill()

    signal.signal(signal.SIGTERM, stop)
    for i in range(args.runs):
        for allocator in (("native", "gmlake") if i % 2 == 0 else ("gmlake", "native")):
            if state["stopped"]:
                break
            cmd = command(args, allocator)
            state["child"] = child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
            if state["stopped"]:  # the signal came while the child started
                child.kill()
            out = child.communicate()[0]
            if state["stopped"]:
                break
            if child.returncode != 0:
                raise subprocess.CalledProcessError(child.returncode, cmd)
            rows.append(json.loads(out.strip().splitlines()[-1]))
            print(f"process {len(rows)}: {allocator} {rows[-1]['runs_s']}", file=sys.stderr, flush=True)
    complete = not state["stopped"]
    print(json.dumps(processes_result(args.workload, args.conf, rows, complete)))


def processes_result(workload, conf, rows, complete=True):
    """The --processes JSON object from the --alone results `rows`: per allocator the median and total of all its
    runs and the ratios gmlake / native of both (None while an allocator has no run). total_ratio is the ratio of
    the mean run times: the totals' ratio when both ran as many runs, and still like against like when a time limit
    stopped the A/B after one allocator ran more processes than the other."""
    runs = {a: [x for r in rows if r["allocator"] == a for x in r["runs_s"]] for a in ("native", "gmlake")}
    both = all(runs.values())
    return {"workload": workload, "conf": conf, "mode": "processes", "complete": complete, "processes": rows,
            "median_s": {a: statistics.median(v) if v else None for a, v in runs.items()},
            "total_s": {a: round(sum(v), 4) for a, v in runs.items()},
            "median_ratio": statistics.median(runs["gmlake"]) / statistics.median(runs["native"]) if both else None,
            "total_ratio": statistics.mean(runs["gmlake"]) / statistics.mean(runs["native"]) if both else None}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("--runs", type=int, default=6, help="timed pairs (--alone: timed runs)")
    ap.add_argument("--conf", default="", help="gmlake configuration (GMLAKE_CONF form)")
    ap.add_argument("--processes", action="store_true", help="one allocator per process (see above)")
    ap.add_argument("--runs-per-process", type=int, default=3, help="--processes: timed runs in each process")
    ap.add_argument("--alone", choices=("native", "gmlake"), help="one allocator alone in this process")
    ap.add_argument("--per-call", action="store_true",
                    help="each run's host seconds by kind of call (StampCtx), their ratios (in one process), and "
                         "its page faults by the model moved out")
    ap.add_argument("--device-time", action="store_true",
                    help="profile each timed run's CUDA activity (torch.profiler) and report its kernel, copy and "
                         "memset seconds: device time against host time (the profiler slows launches alike)")
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
        runs = [measured_run(w, native, per_call=args.per_call, profile=args.device_time)
                for _ in range(args.runs)]
        tell("disable")
        print(json.dumps({"workload": args.workload, "allocator": args.alone, "conf": args.conf,
                          "runs_s": [r["wall_s"] for r in runs], "runs": runs,
                          "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}))
        return

    # Per pair: both walls, their ratio, and each of measured_run's figures of gmlake's run as "gmlake_<name>".
    # Also native's "native_minflt" (and malloc counts where counted) and, with --per-call, its "native_per_kind",
    # "native_call_times" and "native_faults_by_swapped".
    runs = alternate(lambda native: measured_run(w, native, per_call=args.per_call, profile=args.device_time),
                     args.runs)
    pairs = [{"native_s": r[True]["wall_s"], "gmlake_s": r[False]["wall_s"],
              "ratio": round(r[False]["wall_s"] / r[True]["wall_s"], 4),
              **{f"gmlake_{k}": v for k, v in r[False].items() if k != "wall_s"},
              **{f"native_{k}": r[True][k] for k in ("minflt", *MALLOC_COUNT_FIELDS, "large_mallocs_by_object",
                                                      *device_time.FIELDS) if k in r[True]},
              **({f"native_{k}": r[True][k] for k in ("per_kind", "call_times", "faults_by_swapped")}
                 if args.per_call else {}),
              "gmlake_first": r["gmlake_first"]} for r in runs]
    out = {"workload": args.workload, "calls": w.calls, "conf": args.conf, "pairs": pairs,
           "median_ratio": statistics.median(x["ratio"] for x in pairs),
           "total_ratio": sum(x["gmlake_s"] for x in pairs) / sum(x["native_s"] for x in pairs),
           "gmlake_peak_reserved": gmlake.torch.memory_stats()["reserved_bytes.all.peak"],
           "native_peak_reserved": gmlake.torch.native_memory_stats()["reserved_bytes.all.peak"],
           "gpu": torch.cuda.get_device_name(0), "torch": torch.__version__}
    if args.per_call:
        out["per_kind_ratio"] = kind_ratios(pairs)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
