#!/usr/bin/env bash
# Runs 125-126 (H100, sixteenth session), HEAD be8dda7 (the move budget charges only moves on the critical path,
# 2c397ba): the GPU checks on the carried build (unless SKIP_CHECKS), then the sixth held-out batch's workloads
# run whole under both allocators in one process (workload_ab.py, RUNS pairs after one untimed run of each).
#   RUN=125 WORKLOADS="embed_infer_sorted mae_pretrain" gpu125.sh; RUN=126 SKIP_CHECKS=1 WORKLOADS="..." gpu125.sh
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-125}
if [ -z "${SKIP_CHECKS:-}" ]; then echo "##### checks"; scripts/gpu-checks-carried.sh $OUT/checks; fi
for w in ${WORKLOADS:-embed_infer_sorted mae_pretrain}; do
  echo "##### $w"
  timeout ${LIMIT:-200} python3 bench/torch/workload_ab.py $w --runs ${RUNS:-4} > $OUT/run$run-default-$w.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run$run-default-$w.json')); print('median', round(r['median_ratio'],4), 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(round(p['ratio'],4), p['gmlake_vmm_ms'], p['gmlake_backend_calls'], p['gmlake_fence_waits'], p.get('gmlake_evictions'), p.get('gmlake_chunks_created'))"
done
