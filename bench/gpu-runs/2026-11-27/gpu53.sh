#!/usr/bin/env bash
# Runs 53 and 55 (H100, sixth session; binaries in .dev/bin and .dev/lib): the A/B of MODEL (env, default gpt2) over
# PAIRS pairs (env, default 35) under each gmlake configuration given (GMLAKE_CONF_AB), 3 rounds each, one after the
# other in one call. Run 53: gpu53.sh "place_memory_first:0,headroom_permille:9,growth_chunk_share:448"
# "place_memory_first:0" "headroom_permille:9,growth_chunk_share:448" ""; run 55: MODEL=resnet50-infer PAIRS=65
# gpu53.sh "place_memory_first:0,headroom_permille:9,growth_chunk_share:448" "place_memory_first:0"
# "place_memory_first:0,waiting_headroom_permille:9" (place_memory_first: a key of that build, not landed).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
i=0
for conf in "$@"; do i=$((i+1))
  echo "=== conf $i: '$conf'"
  GMLAKE_CONF_AB="$conf" ROUNDS=3 timeout 190 scripts/gpu-steptime-ab.sh $OUT/c$i ${PAIRS:-35} ${MODEL:-gpt2} 2>&1 | grep "all rounds\|FAILED"
  python3 - $OUT/c$i/ab_${MODEL:-gpt2}.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("  rounds", [round(r["total_ratio_gmlake_to_native"], 3) for r in d["rounds"]],
      "timed VMM ms", [round(sum(r["step_backend_ms_gmlake"][5:]), 1) for r in d["rounds"]],
      "timed creates", [sum(r["step_chunks_created_gmlake"][5:]) for r in d["rounds"]],
      "timed evictions", [sum(r["step_evictions_gmlake"][5:]) for r in d["rounds"]],
      "peak reserved GB", [round(r["gmlake_peak_reserved"] / 1e9, 4) for r in d["rounds"]])
PY
  cp $OUT/c$i/ab_${MODEL:-gpt2}.json $OUT/c$i.json
done
rm -rf $OUT/c?/
