#!/usr/bin/env bash
# Run 21 (engine of fdf7c9f), H100: the A/B, 3 rounds in one process each: gpt2-generate and bert varlen (40
# pairs), resnet50-infer (60 pairs); nothing else running.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r21
timeout 230 scripts/gpu-steptime-ab.sh $OUT/r21/ab 40 gpt2-generate 2>&1 | grep "round\|FAILED"
timeout 180 scripts/gpu-steptime-ab.sh $OUT/r21/ab 40 bert 2>&1 | grep "round\|FAILED"
timeout 150 scripts/gpu-steptime-ab.sh $OUT/r21/ab 60 resnet50-infer 2>&1 | grep "round\|FAILED"
tar czf $OUT/run21.tgz -C $OUT r21 && rm -rf $OUT/r21
