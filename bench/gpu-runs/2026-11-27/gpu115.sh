#!/usr/bin/env bash
# Run 115 (H100, fourteenth session), one machine: lag growth where an unfinished mark covers the oldest idle
# chunk (lag_grow_covered, the new default) against waiting for that mark (lag_grow_covered:false, before):
# fsdp_like_train's in-process A/B (workload_ab.py, 6 pairs), then train.py's A/B (gpu91.sh) on MODELS.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-115}
if [ -z "${SKIP_FSDP:-}" ]; then
for c in lag_grow_covered:false default; do
  conf=$c; [ "$c" = default ] && conf=""; tag=${c//[:,]/-}
  echo "##### fsdp $c"
  timeout 150 python3 bench/torch/workload_ab.py fsdp_like_train --runs 6 --conf "$conf" > $OUT/run$run-$tag-fsdp_like_train.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run$run-$tag-fsdp_like_train.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(p['ratio'], p['gmlake_vmm_ms'], p['gmlake_backend_calls'], p['gmlake_fence_waits'], p['gmlake_fence_drains'], p['gmlake_fence_wait_ms'])"
done
fi
RUN=$run MODELS="${MODELS:-bert-train-eval resnet50-infer}" CONFS="old=lag_grow_covered:false new=" PAIRS=${PAIRS:-35} \
  bash bench/gpu-runs/2026-11-27/gpu91.sh 2>&1 | grep -E "round|#####|FAILED|Error" | cut -c1-420
