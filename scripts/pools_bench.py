#!/usr/bin/env python3
"""Runs the classic pools' benchmarks (bench/pools_bench.cpp) and prints each pool against its plain
alternative as a ratio (plain time / pool time: above 1, the pool is faster).

Each benchmark runs in a process of its own: glibc's malloc adapts its thresholds to what a process freed
before (its mmap threshold rises, it trims its heap less), so a malloc benchmark run after others measures
their history. With --repetitions N > 1 the medians are compared.

--gpu compares the GPU set instead (bench/cuda/pools_cuda_bench.cpp: the pools on the CUDA backend against
cuMemAlloc / cuMemFree), all in one process (no malloc history to avoid, and one CUDA context).
--from-json FILE reads Google Benchmark's JSON output (--benchmark_out=FILE --benchmark_out_format=json, or
what --json wrote) instead of running anything; medians are compared when it holds aggregates.
scripts/pools-gpu-bench.sh runs the GPU set and this script with both.

Usage: scripts/pools_bench.py [--bench build/gmlake_bench] [--repetitions N] [--json FILE] [--gpu]
                              [--from-json FILE]
Build first (scripts/build.sh).
"""
import argparse
import json
import re
import subprocess
import sys

FILTER = "BM_(BlockPool|ConcurrentBlockPool|MallocBlocks|BumpAllocator|ConcurrentBumpAllocator|MallocObjects|GrowableBuffer|" \
         "Realloc|MallocCopyFree|LayoutCache|MallocLayouts|UncachedBackend)"

GPU_FILTER = "^BM_Cu"

SIZES = {"256": "256 B", "4096": "4 KiB", "65536": "64 KiB", "1048576": "1 MiB",
         "16777216": "16 MiB", "67108864": "64 MiB"}


def pairs():
    """(row label, pool benchmark, plain benchmark) in the order of docs/benchmarks.md."""
    rows = []
    for size, label in list(SIZES.items())[:4]:
        rows.append((f"block pool, {label}", f"BM_BlockPool/{size}", f"BM_MallocBlocks/{size}/threads:1"))
    for size, label in list(SIZES.items())[:4]:
        for threads in (1, 2):
            rows.append((f"concurrent block pool, {label}, {threads} thread(s)",
                         f"BM_ConcurrentBlockPool/{size}/threads:{threads}", f"BM_MallocBlocks/{size}/threads:{threads}"))
    rows.append(("arena, 256 objects of 16..1024 B", "BM_BumpAllocator", "BM_MallocObjects"))
    rows.append(("concurrent arena, same", "BM_ConcurrentBumpAllocator", "BM_MallocObjects"))
    for kind, what in (("Grow/8192", "1 MiB -> 8 GiB, untouched"), ("GrowFilled/1024", "1 MiB -> 1 GiB, written"),
                       ("Append/64", "+2 MiB steps to 64 MiB, written")):
        rows.append((f"growable buffer vs realloc, {what}", f"BM_GrowableBuffer_{kind}", f"BM_Realloc_{kind}"))
        if not kind.startswith("Grow/"):
            rows.append((f"growable buffer vs malloc+copy+free, {what}", f"BM_GrowableBuffer_{kind}",
                         f"BM_MallocCopyFree_{kind}"))
    for size, label in list(SIZES.items())[3:]:
        for threads in (1, 2):
            rows.append((f"layout cache vs malloc, {label}, {threads} thread(s)",
                         f"BM_LayoutCache/{size}/threads:{threads}", f"BM_MallocLayouts/{size}/threads:{threads}"))
        rows.append((f"layout cache vs uncached backend, {label}", f"BM_LayoutCache/{size}/threads:1",
                     f"BM_UncachedBackend/{size}"))
    return rows


def size_label(size_bytes):
    """'256 B', '64 KiB', '128 MiB', '8 GiB'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    return f"{size_bytes} B"


def gpu_pairs():
    """(row label, pool benchmark, plain benchmark) for bench/cuda/pools_cuda_bench.cpp."""
    rows = []
    for pool, what in (("BM_CudaBlockPool", "BlockPool"), ("BM_CudaBumpAllocator", "BumpAllocator (64 blocks, reset)")):
        for size in (256, 4 << 10, 64 << 10, 1 << 20):
            rows.append((f"{what} vs cuMemAlloc + cuMemFree, {size_label(size)}", f"{pool}/{size}",
                         f"BM_CuMemAllocFree/{size}"))
    end = 8 << 30
    rows.append((f"GrowableBuffer vs cuMemAlloc + copy + cuMemFree, 1 MiB -> {size_label(end)} doubling",
                 f"BM_CudaGrowableBuffer_Grow/{end}", f"BM_CuMemAllocCopyFree_Grow/{end}"))
    for size in (2 << 20, 16 << 20, 128 << 20):
        rows.append((f"LayoutCache vs cuMemAlloc + cuMemFree, {size_label(size)}", f"BM_CudaLayoutCache/{size}",
                     f"BM_CuMemAllocFreeLayouts/{size}"))
    return rows


def key(name):
    """A benchmark's name without its run options (min_time, iterations, real_time)."""
    name = re.sub(r"/(min_time:[^/]*|iterations:\d+|real_time)", "", name)
    return re.sub(r"_(median|mean|stddev|cv)$", "", name)


def per_op_seconds(results, want_median, errors):
    """{benchmark: seconds per operation}; the messages of benchmarks that reported an error go to `errors`."""
    table = {}
    for b in results["benchmarks"]:
        name = key(b["run_name"] if "run_name" in b else b["name"])
        if b.get("error_occurred"):
            errors[name] = b.get("error_message", "error")
            continue
        if want_median and b.get("aggregate_name") != "median":
            continue
        if not want_median and b.get("run_type") == "aggregate":
            continue
        table[name] = b["per_op"]
    return table


def read_json(path, errors):
    """The per-op table of a Google Benchmark JSON file (one run's object, or a list of them)."""
    with open(path) as f:
        loaded = json.load(f)
    table = {}
    for results in loaded if isinstance(loaded, list) else [loaded]:
        has_aggregates = any(b.get("run_type") == "aggregate" for b in results["benchmarks"])
        table.update(per_op_seconds(results, has_aggregates, errors))
    return table


def run_each(bench, bench_filter, repetitions, errors, runs):
    """Runs every benchmark the filter selects in a process of its own; returns the per-op table."""
    names = subprocess.run([bench, f"--benchmark_filter={bench_filter}", "--benchmark_list_tests=true"],
                           check=True, capture_output=True, text=True).stdout.split()
    table = {}
    for name in names:
        table.update(run(bench, f"^{re.escape(name)}$", repetitions, errors, runs))
    return table


def run(bench, bench_filter, repetitions, errors, runs):
    """Runs the benchmarks the filter selects in one process; returns the per-op table."""
    command = [bench, f"--benchmark_filter={bench_filter}", "--benchmark_format=json"]
    if repetitions > 1:
        command += [f"--benchmark_repetitions={repetitions}", "--benchmark_report_aggregates_only=true"]
    results = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
    runs.append(results)
    return per_op_seconds(results, repetitions > 1, errors)


def pretty(seconds):
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", default="build/gmlake_bench")
    parser.add_argument("--repetitions", type=int, default=1)
    parser.add_argument("--json", help="also keep Google Benchmark's JSON output here")
    parser.add_argument("--gpu", action="store_true", help="the GPU set (pools on CUDA vs cuMemAlloc / cuMemFree)")
    parser.add_argument("--from-json", metavar="FILE", help="read Google Benchmark's JSON output instead of running")
    args = parser.parse_args()
    errors, runs = {}, []
    if args.from_json:
        table = read_json(args.from_json, errors)
    elif args.gpu:
        table = run(args.bench, GPU_FILTER, args.repetitions, errors, runs)
    else:
        table = run_each(args.bench, FILTER, args.repetitions, errors, runs)
    if args.json and runs:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    print("| comparison | pool | plain | plain / pool |")
    print("|---|---|---|---|")
    for label, pool, plain in gpu_pairs() if args.gpu else pairs():
        if pool not in table or plain not in table:
            absent = pool if pool not in table else plain
            print(f"missing: {absent}" + (f" ({errors[absent]})" if absent in errors else ""), file=sys.stderr)
            continue
        print(f"| {label} | {pretty(table[pool])} | {pretty(table[plain])} | {table[plain] / table[pool]:.2f} |")


if __name__ == "__main__":
    main()
