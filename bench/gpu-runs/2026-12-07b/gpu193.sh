#!/usr/bin/env bash
# Run 193 (one H100): the six A/B workloads of issue 23 at the default again (a second sample after runs 187-188).
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here: bench/gpu-runs/2026-12-07b/gpu193.sh $OUT
set -uo pipefail
out=${1:?usage: gpu193.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
log=$out/run193.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for m in gpt2 bert gpt2-fixed unet3d-infer gpt2-generate resnet50-infer; do
  t0=$SECONDS
  echo "== $m $(date +%T)" | tee -a "$log"
  ROUNDS=3 scripts/gpu-steptime-ab.sh /tmp/ab193 35 $m 2>&1 | tee -a "$log"
  cp /tmp/ab193/ab_$m.json "$out/run193-ab_$m.json"
  echo "   $((SECONDS - t0)) s" | tee -a "$log"
done
