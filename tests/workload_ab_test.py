"""bench/torch/workload_ab.py's --processes A/B reports the processes that finished when a `timeout` stops it
(SIGTERM), and its ratios from all runs of both allocators; --per-call's stamps and sums by kind;
bench/torch/malloc_count.c's counters around known mallocs (built with the C compiler, preloaded). No GPU or
PyTorch: each process is a stand-in that prints what `--alone` prints.

    python3 tests/workload_ab_test.py REPO_ROOT

Run by ctest (label cpu); standard library only."""

import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

# The stand-in --alone process: the first two print their runs, the third sleeps until it is killed.
ALONE = textwrap.dedent("""
    import json, os, sys, time
    n = int(open(sys.argv[2]).read() or 0) if os.path.exists(sys.argv[2]) else 0
    open(sys.argv[2], "w").write(str(n + 1))
    if n >= 2:
        time.sleep(600)
    print(json.dumps({"allocator": sys.argv[1], "runs_s": [[4.0, 5.0], [6.0, 7.0]][n]}))
""")

# Runs by_processes with the stand-in, 2 pairs: prints its JSON on stdout.
PARENT = textwrap.dedent("""
    import argparse, sys
    sys.path.insert(0, sys.argv[1])
    import workload_ab
    args = argparse.Namespace(workload="w", conf="", runs=2, runs_per_process=2)
    workload_ab.by_processes(args, lambda a, allocator: [sys.executable, "-c", sys.argv[2], allocator, sys.argv[3]])
""")


# Under bench/torch/malloc_count.c (preloaded): malloc_counts before and after a 40 MiB malloc through ctypes.
COUNTED = textwrap.dedent("""
    import ctypes, json, sys
    sys.path.insert(0, sys.argv[1])
    import workload_ab
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = workload_ab.malloc_counts()
    libc.free(libc.malloc(40 << 20))
    print(json.dumps(workload_ab.counts_delta(before, workload_ab.malloc_counts())))
    # glibc's mmap threshold fixed at 1 MiB (M_MMAP_THRESHOLD, -3): a 2 MiB request gets a mapping of its own, a
    # 512 KiB one comes from the heap
    if libc.mallopt(-3, 1 << 20) != 1:
        raise SystemExit("mallopt(M_MMAP_THRESHOLD) refused")
    before = workload_ab.malloc_counts()
    for size in (2 << 20, 512 << 10):
        libc.free(libc.malloc(size))
    print(json.dumps(workload_ab.counts_delta(before, workload_ab.malloc_counts())))
""")


def malloc_count_failures(root, tmp):
    """Builds malloc_count.c and checks what malloc_counts/counts_delta report of one 40 MiB malloc."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return ["no C compiler (cc, gcc) on PATH to build bench/torch/malloc_count.c"]
    lib = os.path.join(tmp, "malloc_count.so")
    build = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib,
                            os.path.join(root, "bench", "torch", "malloc_count.c"), "-ldl"],
                           capture_output=True, text=True)
    if build.returncode != 0:
        return [f"malloc_count.c did not build: {build.stderr}"]
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["LD_PRELOAD"] = lib
    r = subprocess.run([sys.executable, "-c", COUNTED, os.path.join(root, "bench", "torch")], env=env,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return [f"counted process exited {r.returncode}: {r.stderr}"]
    lines = r.stdout.strip().splitlines()
    d, m = json.loads(lines[-2]), json.loads(lines[-1])
    big = [name for name, (requests, size) in d.get("large_mallocs_by_object", {}).items() if size >= 40 << 20]
    out = []
    if d.get("huge_mallocs") != 1 or d.get("huge_malloc_bytes") != 40 << 20 or d.get("frees", 0) < 1 or not big:
        out.append(f"malloc_counts around one 40 MiB malloc: {d}")
    if d.get("large_mmapped") != 0:
        out.append(f"a 40 MiB malloc counted among the mapped ones below 32 MiB: {d}")
    if m.get("large_mmapped") != 1 or m.get("large_mmapped_bytes") != 2 << 20 or m.get("large_mallocs") != 2:
        out.append(f"mmap threshold 1 MiB, mallocs of 2 MiB and 512 KiB: not exactly the 2 MiB one mapped: {m}")
    return out


def main():
    root = sys.argv[1]
    sys.path.insert(0, os.path.join(root, "bench", "torch"))
    import workload_ab

    failures = []
    whole = workload_ab.processes_result("w", "", [{"allocator": "native", "runs_s": [4.0, 5.0]},
                                                   {"allocator": "gmlake", "runs_s": [6.0, 7.0]},
                                                   {"allocator": "gmlake", "runs_s": [5.0]},
                                                   {"allocator": "native", "runs_s": [3.0]}])
    if (whole["median_ratio"], whole["total_ratio"], whole["complete"]) != (6.0 / 4.0, 18.0 / 12.0, True):
        failures.append(f"ratios of four processes: {whole}")
    # Stopped after three processes, gmlake's two to native's one: like against like, not 2x.
    uneven = workload_ab.processes_result("w", "", [{"allocator": "native", "runs_s": [4.0, 4.0]},
                                                    {"allocator": "gmlake", "runs_s": [5.0, 5.0]},
                                                    {"allocator": "gmlake", "runs_s": [5.0, 5.0]}], complete=False)
    if uneven["total_ratio"] != 5.0 / 4.0:
        failures.append(f"total ratio of 4 gmlake runs to 2 native runs: {uneven}")
    half = workload_ab.processes_result("w", "", [{"allocator": "native", "runs_s": [4.0]}], complete=False)
    if half["median_ratio"] is not None or half["total_ratio"] is not None or half["median_s"]["gmlake"] is not None:
        failures.append(f"one allocator only should have no ratio: {half}")

    # --per-call: a StampCtx stamps only the calls its inner context lets run; per_kind sums them by kind.
    class Inner:
        left = 2

        def fits(self, est_allocs=0):
            self.left -= 1
            return self.left >= 0

    ctx = workload_ab.StampCtx(Inner())
    verdicts = [ctx.fits(est_allocs=5) for _ in range(3)]
    if verdicts != [True, True, False] or len(ctx.stamps_s) != 2 or ctx.left != -1:
        failures.append(f"StampCtx: verdicts {verdicts}, {len(ctx.stamps_s)} stamps, left {ctx.left}")
    times = workload_ab.call_times([0.0, 1.0, 3.0, 6.0, 10.0],
                                   [["gpt2", 1], ["bert", 2, 0, 0, "vit"], ["gpt2", 3, 0, 0, None], [4]])
    if times != [["gpt2", 1.0], ["bert+swap", 2.0], ["gpt2", 3.0], ["call", 4.0]]:
        failures.append(f"call_times: {times}")
    kinds = workload_ab.per_kind(times)
    if kinds != {"gpt2": [4.0, 2], "bert+swap": [2.0, 1], "call": [4.0, 1]}:
        failures.append(f"per_kind: {kinds}")
    moved = workload_ab.faults_by_swapped([100, 150, 400, 420, 1000],
                                          [["gpt2", 1, 0, 0, None], ["vit", 2, 0, 0, "gpt2"], ["gpt2", 3], [4]])
    if moved != {"-": 20 + 50 + 580, "gpt2": 250}:
        failures.append(f"faults_by_swapped: {moved}")
    args = argparse.Namespace(workload="w", conf="", runs_per_process=2, per_call=True)
    if workload_ab.alone_command(args, "gmlake")[-1] != "--per-call":
        failures.append(f"alone_command drops --per-call: {workload_ab.alone_command(args, 'gmlake')}")
    args.device_time = True
    if workload_ab.alone_command(args, "native")[-2:] != ["--per-call", "--device-time"]:
        failures.append(f"alone_command drops --device-time: {workload_ab.alone_command(args, 'native')}")
    ratios = workload_ab.kind_ratios([{"native_per_kind": {"a": [2.0, 1], "b": [4.0, 2]},
                                       "gmlake_per_kind": {"a": [3.0, 1], "b": [4.0, 2]}},
                                      {"native_per_kind": {"a": [2.0, 1], "b": [4.0, 2]},
                                       "gmlake_per_kind": {"a": [1.0, 1]}}])
    if ratios != {"a": [1.0, 1], "b": [0.5, 2]}:
        failures.append(f"kind_ratios: {ratios}")

    # heap_state: a 64 MiB malloc is past glibc's mmap threshold (32 MiB at most): mmapped_bytes holds it until free.
    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    before = workload_ab.heap_state()
    block = libc.malloc(64 << 20)
    during = workload_ab.heap_state()
    libc.free(block)
    after = workload_ab.heap_state()
    if set(before) != {"heap_bytes", "heap_free_bytes", "mmapped_bytes"} or before["heap_bytes"] <= 0:
        failures.append(f"heap_state: {before}")
    elif (during["mmapped_bytes"] - before["mmapped_bytes"] < 64 << 20
          or after["mmapped_bytes"] != before["mmapped_bytes"]):
        failures.append(f"heap_state around a 64 MiB malloc: {before}, {during}, {after}")

    with tempfile.TemporaryDirectory() as tmp:
        failures += malloc_count_failures(root, tmp)
        count = os.path.join(tmp, "count")
        parent = subprocess.Popen([sys.executable, "-c", PARENT, os.path.join(root, "bench", "torch"), ALONE, count],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = [parent.stderr.readline() for _ in range(2)]  # "process 1: ...", "process 2: ..."
        parent.send_signal(signal.SIGTERM)  # the third process is asleep
        out, err = parent.communicate(timeout=60)
        if parent.returncode != 0:
            failures.append(f"stopped A/B exited {parent.returncode}: {err}")
        else:
            r = json.loads(out.strip().splitlines()[-1])
            if r["complete"] or len(r["processes"]) != 2 or r["total_ratio"] != 13.0 / 9.0:
                failures.append(f"stopped A/B after 2 processes: {r}")
        if not all(line.startswith("process ") for line in seen):
            failures.append(f"progress lines: {seen}")
    for f in failures:
        print("workload_ab_test:", f)
    if not failures:
        print("workload_ab_test: ratios, one-allocator results, per-call stamps, heap_state, malloc_count.c's "
              "counts and a SIGTERM-stopped A/B as documented")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
