#!/usr/bin/env bash
# Run 129 (H100, sixteenth session; an experiment, not kept): lag growth bounded above the highest allocated bytes
# (GMLAKE_X_LAGHR permille, an environment hook in ChunkSource::obtain of a build of be8dda7, not committed).
# NOTE: X="" set the variable empty, which the hook read as 0: the first of each pair ran at 0 permille, not at
# the default. JSON: run129-laghr0-* and run129-laghr20-*.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for x in "" 20; do
  echo "##### embed_infer_sorted X=$x"
  GMLAKE_X_LAGHR=$x timeout 150 python3 bench/torch/workload_ab.py embed_infer_sorted --runs 3 > $OUT/run129-x$x-embed.json 2>/tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run129-x$x-embed.json')); print('median', round(r['median_ratio'],4), 'total', round(r['total_ratio'],4), 'peaks GB', round(r['gmlake_peak_reserved']/1e9,3), round(r['native_peak_reserved']/1e9,3))
for p in r['pairs']: print(round(p['ratio'],4), p['gmlake_vmm_ms'], p['gmlake_backend_calls'], p['gmlake_fence_waits'], p['gmlake_fence_wait_ms'])"
done
for x in "" 20; do
  echo "##### bert X=$x"
  GMLAKE_X_LAGHR=$x GMLAKE_CONF_AB="" ROUNDS=3 timeout 150 scripts/gpu-steptime-ab.sh $OUT/r129x$x 35 bert 2>&1 | grep -E "round|total" | cut -c1-330
done
