#!/usr/bin/env bash
# Run 88 (H100, eleventh session): what fsdp_like_train's modelled VMM share (27.8% of its unrecorded time in the
# replay, the highest of the shipped traces) costs on the GPU (run 89: RUN=89 WORKLOADS="lstm_lm_train ppo_rollout_train",
# the other two held-out workloads of the batch): bench/torch/workload_ab.py, the workload whole,
# gmlake against native in one process, 6 pairs; and convnext_multiscale_train (2.5%) as a check.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for w in ${WORKLOADS:-fsdp_like_train convnext_multiscale_train}; do
  echo "##### $w"
  timeout 280 python3 bench/torch/workload_ab.py $w --runs ${RUNS:-6} > $OUT/run${RUN:-88}-ab_$w.json 2> $OUT/run${RUN:-88}-ab_$w.log
  echo "rc=$?"; tail -3 $OUT/run${RUN:-88}-ab_$w.log | cut -c1-300
  python3 -c "
import json,sys; r=json.load(open('$OUT/run${RUN:-88}-ab_$w.json'))
print(r['workload'], 'median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(p)
"
done
