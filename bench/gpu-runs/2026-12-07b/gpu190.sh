#!/usr/bin/env bash
# Run 190 (one H100): ResNet-50 inference's frontier, A/B time against the GPU's memory, at the default and at
# three settings for where the device waits; the A/B's own sequence recorded for the replay.
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here: bench/gpu-runs/2026-12-07b/gpu190.sh $OUT
set -uo pipefail
out=${1:?usage: gpu190.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
log=$out/run190.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
ab() {  # name conf
  local t0=$SECONDS
  echo "== $1 (${2:-default}) $(date +%T)" | tee -a "$log"
  GMLAKE_CONF_AB="$2" ROUNDS=3 scripts/gpu-steptime-ab.sh /tmp/ab_$1 35 resnet50-infer 2>&1 | tee -a "$log"
  cp /tmp/ab_$1/ab_resnet50-infer.json "$out/run190-$1.json"
  tail -n 3 /tmp/ab_$1/ab_resnet50-infer.log >>"$log"
  echo "   $((SECONDS - t0)) s" | tee -a "$log"
}
ab default1 ""
ab wshare64 "waiting_growth_chunk_share:64"
ab whead20 "waiting_headroom_permille:20"
ab both "waiting_growth_chunk_share:64,waiting_headroom_permille:20"
ab default2 ""
echo "== history $(date +%T)" | tee -a "$log"
python3 bench/torch/train.py --model resnet50-infer --alloc ab --batch 8 --steps 35 --rounds 1 \
  --history-out /tmp/resnet50_infer_ab.pickle --json /tmp/hist.json >>"$log" 2>&1 &&
  xz -9 -c /tmp/resnet50_infer_ab.pickle >"$out/resnet50_infer_ab.snapshot.pickle.xz"
ls -la "$out" | tee -a "$log"
