#!/usr/bin/env bash
# Run 35 (H100; main bde4b49, the nsop merge: no decision changed). The engine's ns/op on sim with the machine
# idle, before (1b5a8e9) and after (bde4b49) in alternation; the allocator's CPU time per op under PyTorch
# (bench/torch/op_cost.py, gmlake's extension against native in one process) with both libraries; and the
# resnet50-infer A/B, three rounds of 30 timed pairs.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r35
nproc; cat /proc/loadavg
export GMLAKE_BENCH_TRACES=$PWD/traces:$PWD/.dev/traces
export PYTHONPATH=$PWD/python  # (added after the run: op_cost.py ran with it in a second call, see docs/benchmarks.md)
for i in 1 2; do for b in gmlake_bench_1b5a8e9 gmlake_bench; do
  timeout 150 .dev/bin/$b --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_min_time=0.2 \
    --benchmark_format=json --benchmark_out=$OUT/r35/bench_${b}_$i.json > /dev/null 2>&1; echo "$b $i rc $?"
done; done
python3 - $OUT/r35 <<'PY'
import json, sys, statistics, glob, os
for b in ("gmlake_bench_1b5a8e9", "gmlake_bench"):
    rows = {}
    for f in sorted(glob.glob(f"{sys.argv[1]}/bench_{b}_[12].json")):
        for x in json.load(open(f))["benchmarks"]:
            _, trace, policy = x["name"].split("/")[:3]
            v = x.get("ns/op") or x.get("ns_per_op")
            if v is not None:
                rows.setdefault((trace, policy), []).append(v)
    best = {k: min(v) for k, v in rows.items()}
    traces = sorted({t for t, _ in best})
    g = [best[(t, "gmlake")] for t in traces if (t, "gmlake") in best]
    c = [best[(t, "caching")] for t in traces if (t, "caching") in best]
    print(b, " ".join(f"{t}:{best.get((t,'gmlake'),0):.0f}/{best.get((t,'caching'),0):.0f}" for t in traces))
    print(b, "median gmlake", statistics.median(g), "caching", statistics.median(c), "worst gmlake", max(g))
PY
for lib in libgmlake_c_1b5a8e9.so libgmlake_c.so; do
  GMLAKE_LIBRARY=$PWD/.dev/lib/$lib timeout 240 python3 bench/torch/op_cost.py --ops 100000 --rounds 5 --json $OUT/r35/opcost_$lib.json 2>&1 | tail -2
done
ROUNDS=3 timeout 330 scripts/gpu-steptime-ab.sh $OUT/r35/ab 35 resnet50-infer 2>&1 | grep "round\|FAILED\|total"
python3 - $OUT/r35/ab/ab_resnet50-infer.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["rounds"]):
    vmm = r["step_backend_ms_gmlake"]
    print(f"round {i + 1}: total {r['total_ratio_gmlake_to_native']:.3f}, VMM ms in all {sum(vmm):.1f}, steps with VMM {sum(1 for v in vmm if v > 0)}")
PY
tar czf $OUT/run35.tgz -C $OUT r35 && rm -rf $OUT/r35
