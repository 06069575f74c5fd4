#!/usr/bin/env bash
# Run 191 (one H100): ResNet-50 inference's frontier, A/B time against the GPU's memory, at the default and at
# headroom (memory kept before moving: the memory-for-time end of the frontier).
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here: bench/gpu-runs/2026-12-07b/gpu191.sh $OUT
set -uo pipefail
out=${1:?usage: gpu191.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
log=$out/run191.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
ab() {  # name conf
  local t0=$SECONDS
  echo "== $1 (${2:-default}) $(date +%T)" | tee -a "$log"
  GMLAKE_CONF_AB="$2" ROUNDS=3 scripts/gpu-steptime-ab.sh /tmp/ab_$1 35 resnet50-infer 2>&1 | tee -a "$log"
  cp /tmp/ab_$1/ab_resnet50-infer.json "$out/run191-$1.json"
  tail -n 3 /tmp/ab_$1/ab_resnet50-infer.log >>"$log"
  echo "   $((SECONDS - t0)) s" | tee -a "$log"
}
ab default3 ""
ab head50 "headroom_permille:50"
ab head200 "headroom_permille:200"
ab default4 ""
ls -la "$out" | tee -a "$log"
