#!/usr/bin/env bash
# Run 92 (H100, twelfth session): ppo_rollout_train's frontier, the workload whole (bench/torch/workload_ab.py,
# gmlake against native in one process): the default (utilization 0.9892 in the replay, the known miss) and the
# page-granular engine (max_chunk_bytes:2M,grow_bytes:2M,move_share_permille:0: 0.9903, the trace's floor), one after
# the other in one call, RUNS pairs each.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader; lscpu | grep -E "^Model name"
for tc in ${CONFS:-default= pages=max_chunk_bytes:2M,grow_bytes:2M,move_share_permille:0}; do
  tag=${tc%%=*}; c=${tc#*=}; w=ppo_rollout_train
  echo "##### $w $tag '$c'"
  timeout 280 python3 bench/torch/workload_ab.py $w --runs ${RUNS:-3} --conf "$c" > $OUT/run92-$tag-ab_$w.json 2> $OUT/run92-$tag-ab_$w.log
  echo "rc=$?"; tail -2 $OUT/run92-$tag-ab_$w.log | cut -c1-300
  python3 -c "
import json; r=json.load(open('$OUT/run92-$tag-ab_$w.json'))
print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(p)
"
done
