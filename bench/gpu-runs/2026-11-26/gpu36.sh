#!/usr/bin/env bash
# Run 36 (H100; main f2f7410: branches uses (ChunkUse end-chunk counts, idle spans) and growth (growth chunks)
# merged): the GPU tests, the device pool's, gmlake on cuda against sim on every shipped trace, the PyTorch
# allocator test, and the engine's ns/op on sim, 1b5a8e9 against f2f7410 alternating.
# Usage: gpu36.sh [RUN [BASE]]: run 36 (BASE gmlake_bench_1b5a8e9); run 46 (main d995a13) was
# `gpu36.sh 46 gmlake_bench_f2f7410`, the new binary gmlake_bench_new either way.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
run=${1:-36}; base=${2:-gmlake_bench_1b5a8e9}
mkdir -p $OUT/r$run
nproc; cat /proc/loadavg
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r$run/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r$run/gpu_tests.log | tail -4; grep -c "^\[  SKIPPED" $OUT/r$run/gpu_tests.log
grep -E "^\[  FAILED  \]" $OUT/r$run/gpu_tests.log | head -5
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r$run/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r$run/device_pool.log | tail -2
GMLAKE_CLI=.dev/bin/gmlake timeout 200 scripts/gpu-cuda-vs-sim.sh $OUT/r$run/cvs > /dev/null; echo "cuda vs sim rc $?"; tail -1 $OUT/r$run/cvs/cuda-vs-sim.txt
timeout 150 python3 tests/gpu/torch_allocator_test.py > $OUT/r$run/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 2 $OUT/r$run/torch_allocator_test.log
export GMLAKE_BENCH_TRACES=$PWD/traces:$PWD/.dev/traces
for i in 1 2; do for b in $base gmlake_bench_new; do
  timeout 60 .dev/bin/$b --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_min_time=0.2 \
    --benchmark_format=json --benchmark_out=$OUT/r$run/bench_${b}_$i.json > /dev/null 2>&1; echo "$b $i rc $?"
done; done
python3 - $OUT/r$run $base <<'PY'
import json, sys, statistics
res = {}
for b in (sys.argv[2], "gmlake_bench_new"):
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
    o, n = res[sys.argv[2]], res["gmlake_bench_new"]
    print(f"| {t} | {o[(t,'gmlake')]:.0f} | {n[(t,'gmlake')]:.0f} | {n[(t,'gmlake')]/o[(t,'gmlake')]:.2f} | {o[(t,'caching')]:.0f} / {n[(t,'caching')]:.0f} |")
for b in res:
    g = [res[b][(t, "gmlake")] for t in traces]; c = [res[b][(t, "caching")] for t in traces]
    print(b, "median gmlake %.0f caching %.0f worst gmlake %.0f" % (statistics.median(g), statistics.median(c), max(g)))
PY
tar czf $OUT/run$run.tgz -C $OUT r$run && rm -rf $OUT/r$run
