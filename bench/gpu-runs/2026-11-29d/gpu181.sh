#!/usr/bin/env bash
# Runs 181-183 (twenty-sixth session): the six A/B workloads of issue 23 at HEAD's default (the arena ladder,
# per-stream arenas and the kept-block handover since the last full set, run 131), three rounds of 35 pairs (5
# untimed) each, both allocators in one process (scripts/gpu-steptime-ab.sh), one model after the other with a
# time limit each (LIMIT s); the JSON per model comes back as run$RUN-ab_MODEL.json. MODELS picks them; CHECKS=1 runs the GPU checks after them
# (scripts/gpu-checks-carried.sh). .dev carried from scripts/gpu-carry.sh.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-181}
for m in ${MODELS:-gpt2 gpt2-fixed bert}; do
  echo "##### $m"
  start=$(date +%s)
  ROUNDS=3 timeout ${LIMIT:-190} scripts/gpu-steptime-ab.sh /tmp/run$run 35 $m 2>&1 | grep -E "round|total|FAILED" | cut -c1-400
  echo "($m: $(( $(date +%s) - start )) s)"
  cp /tmp/run$run/ab_$m.json $OUT/run$run-ab_$m.json 2>/dev/null
done
if [ "${CHECKS:-0}" = 1 ]; then timeout 430 scripts/gpu-checks-carried.sh $OUT/checks; echo "gpu checks rc $?"; fi
