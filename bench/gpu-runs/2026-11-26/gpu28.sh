#!/usr/bin/env bash
# Run 28 (main ffc5497: the issue-24 renames, serve_recalls from the pool layer, per-part invariant checks,
# gmlake_get_cap_bytes), H100: first the engine's ns/op on sim with the machine idle (gmlake_bench, replay of every
# shipped and shared trace, gmlake and caching), then the GPU tests, gmlake on cuda against sim on every trace and
# the PyTorch allocator test, with the fuzzers of .dev/fuzz (d217081) on 12 cores beside them for the rest.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r28 /work/wt24 /work/shared
ln -sfn $PWD/traces /work/wt24/traces; ln -sfn $PWD/.dev/traces /work/shared/traces
nproc; cat /proc/loadavg
timeout 200 .dev/bin/gmlake_bench --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_min_time=0.2 \
  --benchmark_format=json --benchmark_out=$OUT/r28/bench.json > $OUT/r28/bench.txt 2>&1; echo "bench rc $?"
python3 - $OUT/r28/bench.json <<'PY'
import json, sys, statistics
d = json.load(open(sys.argv[1]))
rows = {}
for b in d["benchmarks"]:
    _, trace, policy = b["name"].split("/")[:3]
    ns = b.get("ns_per_op") or b["real_time"]
    rows.setdefault(trace, {})[policy] = b
def per_op(b):
    for k in ("ns/op", "ns_per_op"):
        if k in b: return b[k]
    return None
print("trace gmlake caching (ns/op)")
g = []; c = []
for t, r in sorted(rows.items()):
    gv = per_op(r.get("gmlake", {})); cv = per_op(r.get("caching", {}))
    print(t, gv, cv)
    if gv: g.append(gv)
    if cv: c.append(cv)
if g: print("median gmlake", statistics.median(g), "caching", statistics.median(c) if c else None, "worst gmlake", max(g))
PY
(FUZZ_CORES=12 FUZZ_PREVIOUS_TOTAL=${PREV:-0} scripts/fuzz-device.sh $OUT/r28/fz 330 .dev/fuzz > $OUT/r28/fuzz.log 2>&1; echo "fuzz rc $?" >> $OUT/r28/fuzz.log) &
timeout 120 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r28/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r28/gpu_tests.log | tail -8
timeout 50 .dev/bin/device_pool_gpu_tests --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|SKIPPED" | tail -3
timeout 120 .dev/bin/gmlake replay traces/*.snapshot.pickle.xz --policy gmlake --backend cuda --json $OUT/r28/cuda.json --quiet > $OUT/r28/cuda.txt 2>&1; echo "cuda replay rc $?"
timeout 60 .dev/bin/gmlake replay traces/*.snapshot.pickle.xz --policy gmlake --backend sim --json $OUT/r28/sim.json --quiet > /dev/null 2>&1
python3 - $OUT/r28/cuda.json $OUT/r28/sim.json <<'PY'
import json, sys
c = {(r["trace"], r["device"]): r for r in json.load(open(sys.argv[1]))}
s = {(r["trace"], r["device"]): r for r in json.load(open(sys.argv[2]))}
same = [k for k in s if k in c and all(c[k][f] == s[k][f] for f in ("peak_reserved_bytes", "backend_calls", "ooms", "evictions"))]
print(f"cuda vs sim: {len(same)} of {len(s)} replays identical in peak, calls, ooms, evictions; differ: {[k for k in s if k not in same]}")
PY
timeout 150 python3 tests/gpu/torch_allocator_test.py > $OUT/r28/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"; tail -n 6 $OUT/r28/torch_allocator_test.log
wait
tail -n 12 $OUT/r28/fz/fuzz-summary.txt
tar czf $OUT/run28.tgz -C $OUT r28 && rm -rf $OUT/r28
