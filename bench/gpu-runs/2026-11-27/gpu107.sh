#!/usr/bin/env bash
# Run 107 (H100, thirteenth session): fsdp_like_train's frontier on the GPU. Run 106 measured the default at 1.064
# one allocator per process and 1.068 in one process (the two agree on this GPU-bound workload), with 255-550 ms of
# VMM and 43-77 fence waits a 2.5 s run. The in-process A/B (workload_ab.py, PAIRS pairs) of each setting in CONFS.
# Run 108: RUN=108 CONFS="default in_order_moves:true lag_grow_pages:512 in_order_moves:true,lag_grow_pages:512".
# Run 111: RUN=111 CONFS="default lag_grow_pages:128 lag_grow_pages:256 in_order_moves:true,lag_grow_pages:128".
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
i=0
for c in ${CONFS:-default max_chunk_bytes:16M,chunks_per_block:8 standby_mappings:64 headroom_permille:1000}; do
  i=$((i+1)); conf=$c; [ "$c" = default ] && conf=""
  echo "##### $c"
  timeout 150 python3 bench/torch/workload_ab.py fsdp_like_train --runs ${PAIRS:-6} --conf "$conf" > $OUT/run${RUN:-107}-c$i-fsdp_like_train.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run${RUN:-107}-c$i-fsdp_like_train.json')); print('conf', repr(r['conf']), 'median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(p['native_s'], p['gmlake_s'], p['ratio'], p['gmlake_vmm_ms'], p['gmlake_backend_calls'], p['gmlake_fence_waits'])"
done
