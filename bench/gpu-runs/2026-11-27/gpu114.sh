#!/usr/bin/env bash
# Run 114 (H100, fourteenth session), one machine, after Stats gained fence_drains and fence_wait_ns: where
# fsdp_like_train's fence waits stand (drained streams, the host's time blocked) beside the GPU's idle time
# (run112_gpu_gaps.py, 3 pairs, the default), the in-process A/B of 6 pairs (workload_ab.py), then the GPU checks
# on the carried build (scripts/gpu-checks-carried.sh).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
D=bench/gpu-runs/2026-11-27
echo "##### gaps"
timeout 170 python3 $D/run112_gpu_gaps.py --pairs 3 > $OUT/run114-gaps-default.json 2> /tmp/r.log; tail -2 /tmp/r.log | cut -c1-600
python3 -c "
import json; r=json.load(open('$OUT/run114-gaps-default.json'))
for p in r['pairs']: print('pair', p['ratio'], p['native']['wall_s'], p['gmlake'])"
echo "##### A/B"
timeout 150 python3 bench/torch/workload_ab.py fsdp_like_train --runs 6 > $OUT/run114-ab-fsdp_like_train.json 2> /tmp/r.log || tail -3 /tmp/r.log
python3 -c "
import json; r=json.load(open('$OUT/run114-ab-fsdp_like_train.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(p)"
echo "##### checks"
scripts/gpu-checks-carried.sh $OUT/checks
