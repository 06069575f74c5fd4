#!/usr/bin/env bash
# Run 32 (H100; main after the Pages type, AsyncAllocator on BlockTable and GrowableBuffer's step_bytes; binaries
# built on the build machine with the CUDA backend and carried in .dev/bin, .dev/lib): the GPU tests, the device
# pool's GPU tests, gmlake on cuda against sim on every shipped trace (scripts/gpu-cuda-vs-sim.sh), the async
# policy on cuda over one trace, the PyTorch allocator test, then the engine's wall ns/op on the idle host
# (gmlake_bench over traces/ and the shared traces carried in .dev/traces).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r32
git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-100; nproc; cat /proc/loadavg
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r32/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r32/gpu_tests.log | tail -4; grep -c "^\[  SKIPPED" $OUT/r32/gpu_tests.log
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r32/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r32/device_pool.log | tail -2
GMLAKE_CLI=.dev/bin/gmlake timeout 240 scripts/gpu-cuda-vs-sim.sh $OUT/r32/cvs; echo "cuda vs sim rc $?"
timeout 60 .dev/bin/gmlake replay traces/resnet50.snapshot.pickle.xz --policy async --backend cuda > $OUT/r32/async.txt 2>&1
echo "async on cuda rc $?"; tail -n 4 $OUT/r32/async.txt
timeout 200 python3 tests/gpu/torch_allocator_test.py > $OUT/r32/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 3 $OUT/r32/torch_allocator_test.log
cat /proc/loadavg
GMLAKE_BENCH_TRACES=$PWD/traces:$PWD/.dev/traces timeout 180 .dev/bin/gmlake_bench \
  --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_min_time=0.2 --benchmark_format=json \
  --benchmark_out=$OUT/r32/bench.json > $OUT/r32/bench.txt 2>&1; echo "bench rc $?"
python3 - $OUT/r32/bench.json <<'PY'
import json, sys, statistics
rows = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    _, trace, policy = b["name"].split("/")[:3]
    rows.setdefault(trace, {})[policy] = b.get("ns_per_op")
g = [r["gmlake"] for r in rows.values() if r.get("gmlake")]
c = [r["caching"] for r in rows.values() if r.get("caching")]
ratio = [r["gmlake"] / r["caching"] for r in rows.values() if r.get("gmlake") and r.get("caching")]
for t, r in sorted(rows.items()): print(f"{t:24s} gmlake {r.get('gmlake', 0):7.1f} caching {r.get('caching', 0):7.1f}")
print(f"median ns/op gmlake {statistics.median(g):.1f} caching {statistics.median(c):.1f}; worst gmlake {max(g):.1f}; "
      f"gmlake/caching median {statistics.median(ratio):.2f} worst {max(ratio):.2f}")
PY
tar czf $OUT/run32.tgz -C $OUT r32 && rm -rf $OUT/r32
