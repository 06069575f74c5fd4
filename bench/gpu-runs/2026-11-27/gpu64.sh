#!/usr/bin/env bash
# Run 64 (eighth session; binaries of 93683d2): resnet50-infer's A/B (35 pairs, 3 rounds) at the default, with
# lag_grow_pages:0 (wait for the fence rather than create) and lag_grow_pages:8, one after the other in one call;
# gmlake's peak reserved on the GPU against the replay of run 63's recorded sequence (0.807 GB on sim). Then one
# recorded round under lag_grow_pages:0. .dev/gpu53.sh is bench/gpu-runs/2026-11-27/gpu53.sh.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
MODEL=resnet50-infer PAIRS=35 bash .dev/gpu53.sh "" "lag_grow_pages:0" "lag_grow_pages:8"
timeout 120 python3 bench/torch/train.py --model resnet50-infer --alloc ab --batch 8 --steps 35 --rounds 1 \
  --conf lag_grow_pages:0 --history-out $OUT/ab_r50_lag0.pickle --json $OUT/ab_r50_lag0.json > $OUT/ab_r50_lag0.log 2>&1
echo "history rc $?"; xz -T8 $OUT/ab_r50_lag0.pickle
