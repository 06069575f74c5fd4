#!/usr/bin/env bash
# Run 118 (H100, fifteenth session), one machine, HEAD c9a72ce (lag_grow_covered on; wait_safe reporting its
# drain, b915aa4, not on a GPU before): the GPU checks on the carried build, fsdp_like_train's in-process A/B
# (workload_ab.py, 6 pairs), then train.py's A/B (gpu91.sh, 35 pairs x 3 rounds) at the default on MODELS.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-118}
if [ -z "${SKIP_CHECKS:-}" ]; then echo "##### checks"; scripts/gpu-checks-carried.sh $OUT/checks; fi
if [ -z "${SKIP_FSDP:-}" ]; then
  echo "##### fsdp default"
  timeout 150 python3 bench/torch/workload_ab.py fsdp_like_train --runs 6 > $OUT/run$run-default-fsdp_like_train.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run$run-default-fsdp_like_train.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(p['ratio'], p['gmlake_vmm_ms'], p['gmlake_backend_calls'], p['gmlake_fence_waits'], p['gmlake_fence_drains'], p['gmlake_fence_wait_ms'])"
fi
RUN=$run MODELS="${MODELS:-gpt2-generate video-infer}" CONFS="default=" PAIRS=${PAIRS:-35} \
  bash bench/gpu-runs/2026-11-27/gpu91.sh 2>&1 | grep -E "round|#####|FAILED|Error|H100|H200|Model" | cut -c1-420
