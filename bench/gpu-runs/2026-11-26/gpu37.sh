#!/usr/bin/env bash
# Runs 37-39 (H100; main f2f7410, growth chunks): the in-process A/B, 3 rounds x 30 timed pairs per workload.
# Usage: .dev/gpu37.sh RUN MODEL...
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
run=$1; shift
mkdir -p $OUT/r$run
for m in "$@"; do
  ROUNDS=3 timeout 280 scripts/gpu-steptime-ab.sh $OUT/r$run/ab 35 $m 2>&1 | grep "round\|FAILED\|total"
  python3 - $OUT/r$run/ab/ab_$m.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["rounds"]):
    vmm = r["step_backend_ms_gmlake"]
    big = [(k, v, r["step_chunks_created_gmlake"][k], r["step_evictions_gmlake"][k]) for k, v in enumerate(vmm) if v > 2]
    print(f"  round {i + 1}: total {r['total_ratio_gmlake_to_native']:.3f}, VMM ms in all {sum(vmm):.1f}, "
          f"creates {sum(r['step_chunks_created_gmlake'])}, pairs > 2 ms (pair, ms, creates, evictions): {big}")
PY
done
tar czf $OUT/run$run.tgz -C $OUT r$run && rm -rf $OUT/r$run
