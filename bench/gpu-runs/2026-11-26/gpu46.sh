#!/usr/bin/env bash
# Run 46 (H100; main d995a13: waiting growth chunks + placer merged): GPU tests, device pool, cuda vs sim, torch test, ns/op f2f7410 vs d995a13.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p $OUT/r46
nproc; cat /proc/loadavg
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r46/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r46/gpu_tests.log | tail -4; grep -c "^\[  SKIPPED" $OUT/r46/gpu_tests.log
grep -E "^\[  FAILED  \]" $OUT/r46/gpu_tests.log | head -5
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r46/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r46/device_pool.log | tail -2
GMLAKE_CLI=.dev/bin/gmlake timeout 200 scripts/gpu-cuda-vs-sim.sh $OUT/r46/cvs > /dev/null; echo "cuda vs sim rc $?"; tail -1 $OUT/r46/cvs/cuda-vs-sim.txt
timeout 150 python3 tests/gpu/torch_allocator_test.py > $OUT/r46/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 2 $OUT/r46/torch_allocator_test.log
export GMLAKE_BENCH_TRACES=$PWD/traces:$PWD/.dev/traces
for i in 1 2; do for b in gmlake_bench_f2f7410 gmlake_bench_new; do
  timeout 60 .dev/bin/$b --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_min_time=0.2 \
    --benchmark_format=json --benchmark_out=$OUT/r46/bench_${b}_$i.json > /dev/null 2>&1; echo "$b $i rc $?"
done; done
python3 - $OUT/r46 <<'PY'
import json, sys, statistics
res = {}
for b in ("gmlake_bench_f2f7410", "gmlake_bench_new"):
    rows = {}
    for i in (1, 2):
        try: d = json.load(open(f"{sys.argv[1]}/bench_{b}_{i}.json"))
        except Exception as e: print(b, i, e); continue
        for x in d["benchmarks"]:
            _, t, p = x["name"].split("/")[:3]
            rows.setdefault((t, p), []).append(x["ns_per_op"])
    res[b] = {k: min(v) for k, v in rows.items()}
traces = sorted({t for t, _ in res["gmlake_bench_new"]})
for t in traces:
    o, n = res["gmlake_bench_f2f7410"], res["gmlake_bench_new"]
    print(f"| {t} | {o[(t,'gmlake')]:.0f} | {n[(t,'gmlake')]:.0f} | {n[(t,'gmlake')]/o[(t,'gmlake')]:.2f} | {o[(t,'caching')]:.0f} / {n[(t,'caching')]:.0f} |")
for b in res:
    g = [res[b][(t, "gmlake")] for t in traces]; c = [res[b][(t, "caching")] for t in traces]
    print(b, "median gmlake %.0f caching %.0f worst gmlake %.0f" % (statistics.median(g), statistics.median(c), max(g)))
PY
tar czf $OUT/run46.tgz -C $OUT r46 && rm -rf $OUT/r46
