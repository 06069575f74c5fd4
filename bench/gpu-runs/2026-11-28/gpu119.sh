#!/usr/bin/env bash
# Run 119 (H100, fifteenth session), one machine: where fsdp_like_train's VMM calls go in each run of the in-process
# A/B (workload_ab.py, 6 pairs; per run now also chunks created, released and evictions), at the default and at
# headroom_permille:3800 (in the replay the pool then grows early to the need it reaches at 89% of the trace and
# stops moving: 628 evictions against 12,635, the same peak), one after the other.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-119}
for c in ${CONFS:-default headroom_permille:3800}; do
  conf=$c; [ "$c" = default ] && conf=""; tag=${c//[:,]/-}
  echo "##### fsdp $c"
  timeout 150 python3 bench/torch/workload_ab.py fsdp_like_train --runs ${RUNS:-6} --conf "$conf" > $OUT/run$run-$tag-fsdp_like_train.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run$run-$tag-fsdp_like_train.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
print('ratio vmm_ms calls waits drains blocked_ms created released evictions handovers')
for p in r['pairs']: print(p['ratio'], p['gmlake_vmm_ms'], p['gmlake_backend_calls'], p['gmlake_fence_waits'], p['gmlake_fence_drains'], p['gmlake_fence_wait_ms'], p['gmlake_chunks_created'], p['gmlake_chunks_released'], p['gmlake_evictions'], p.get('gmlake_arena_handovers'))"
done
