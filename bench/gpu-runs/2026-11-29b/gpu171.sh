#!/usr/bin/env bash
# Run 171 (H200, twenty-fourth session), .dev carried from scripts/gpu-carry.sh at the kept-block handover
# (handover_quiet_ms): the GPU checks (scripts/gpu-checks-carried.sh: among the GPU tests the new
# AKeptBlocksFreeWaitsForItsOwnStreamBeforeTheArenasNewStreamReusesIt), then multistream_embed_serve in one process
# (workload_ab.py --per-call) at the new default and with handover_quiet_ms:0 (the handover as before), and
# fsdp_like_train (the churn workload the handover was made for) at the default.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run=${RUN:-171}
if [ "${PART:-all}" != ab ]; then
  timeout 400 scripts/gpu-checks-carried.sh $OUT/checks; echo "gpu checks rc $?"
  grep -E "KeptBlock" $OUT/checks/gpu_tests.log | head -3
fi
for spec in ${SPECS:-default:multistream_embed_serve:8 quiet0:multistream_embed_serve:8 default:fsdp_like_train:5}; do
  name=${spec%%:*}; rest=${spec#*:}; w=${rest%%:*}; n=${rest#*:}
  conf=""; [ "$name" = quiet0 ] && conf="handover_quiet_ms:0"
  echo "##### $w $n pairs, $name"
  timeout ${LIMIT:-200} python3 bench/torch/workload_ab.py $w --runs $n --per-call ${conf:+--conf $conf} \
    > $OUT/run$run-$name-$w.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 bench/torch/ab_summary.py $OUT/run$run-$name-$w.json
  python3 - $OUT/run$run-$name-$w.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("handovers", [p.get("gmlake_arena_handovers") for p in d["pairs"]],
      "calls", [p.get("gmlake_backend_calls") for p in d["pairs"]],
      "waits", [p.get("gmlake_fence_waits") for p in d["pairs"]])
PY
done
