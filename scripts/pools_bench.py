#!/usr/bin/env python3
"""Runs the classic pools' benchmarks (bench/pools_bench.cpp) and prints each pool against its plain
alternative as a ratio (plain time / pool time: above 1, the pool is faster).

Each benchmark runs in a process of its own: glibc's malloc adapts its thresholds to what a process freed
before (its mmap threshold rises, it trims its heap less), so a malloc benchmark run after others measures
their history. With --repetitions N > 1 the medians are compared.

Usage: scripts/pools_bench.py [--bench build/gmlake_bench] [--repetitions N] [--json FILE]
Build first (scripts/build.sh).
"""
import argparse
import json
import re
import subprocess
import sys

FILTER = "BM_(BlockPool|ConcurrentBlockPool|MallocBlocks|Arena|ConcurrentArena|MallocObjects|GrowableBuffer|" \
         "Realloc|MallocCopyFree|LayoutCache|MallocLayouts|UncachedBackend)"

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
    rows.append(("arena, 256 objects of 16..1024 B", "BM_Arena", "BM_MallocObjects"))
    rows.append(("concurrent arena, same", "BM_ConcurrentArena", "BM_MallocObjects"))
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


def key(name):
    """A benchmark's name without its run options (min_time, iterations, real_time)."""
    name = re.sub(r"/(min_time:[^/]*|iterations:\d+|real_time)", "", name)
    return re.sub(r"_(median|mean|stddev|cv)$", "", name)


def per_op_seconds(results, want_median):
    table = {}
    for b in results["benchmarks"]:
        if want_median and b.get("aggregate_name") != "median":
            continue
        if not want_median and b.get("run_type") == "aggregate":
            continue
        table[key(b["run_name"] if "run_name" in b else b["name"])] = b["per_op"]
    return table


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
    args = parser.parse_args()
    names = subprocess.run([args.bench, f"--benchmark_filter={FILTER}", "--benchmark_list_tests=true"], check=True,
                           capture_output=True, text=True).stdout.split()
    table, runs = {}, []
    for name in names:
        command = [args.bench, f"--benchmark_filter=^{re.escape(name)}$", "--benchmark_format=json"]
        if args.repetitions > 1:
            command += [f"--benchmark_repetitions={args.repetitions}", "--benchmark_report_aggregates_only=true"]
        results = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        runs.append(results)
        table.update(per_op_seconds(results, args.repetitions > 1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    print("| comparison | pool | plain | plain / pool |")
    print("|---|---|---|---|")
    for label, pool, plain in pairs():
        if pool not in table or plain not in table:
            print(f"missing: {pool if pool not in table else plain}", file=sys.stderr)
            continue
        print(f"| {label} | {pretty(table[pool])} | {pretty(table[plain])} | {table[plain] / table[pool]:.2f} |")


if __name__ == "__main__":
    main()
