#!/usr/bin/env bash
# Run 192 (one H100): ResNet-50 inference's frontier, A/B time against the GPU's memory, at the default and at
# lag growth bounded or off (the GPU's memory above the replay's is lag growth).
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here: bench/gpu-runs/2026-12-07b/gpu192.sh $OUT
set -uo pipefail
out=${1:?usage: gpu192.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
log=$out/run192.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
ab() {  # name conf
  local t0=$SECONDS
  echo "== $1 (${2:-default}) $(date +%T)" | tee -a "$log"
  GMLAKE_CONF_AB="$2" ROUNDS=3 scripts/gpu-steptime-ab.sh /tmp/ab_$1 35 resnet50-infer 2>&1 | tee -a "$log"
  cp /tmp/ab_$1/ab_resnet50-infer.json "$out/run192-$1.json"
  tail -n 3 /tmp/ab_$1/ab_resnet50-infer.log >>"$log"
  echo "   $((SECONDS - t0)) s" | tee -a "$log"
}
ab default5 ""
ab laghead20 "lag_headroom_permille:20"
ab lag0 "lag_grow_pages:0"
ls -la "$out" | tee -a "$log"
