#!/usr/bin/env bash
# Run 24 (engine of d325a5c, as run 22), H100: the A/B of the three workloads that missed the bar in runs 20-21,
# again, to see the spread between runs of one engine: bert (40 pairs), gpt2 varlen and resnet50-infer (60).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r24
timeout 180 scripts/gpu-steptime-ab.sh $OUT/r24/ab 40 bert 2>&1 | grep "round\|FAILED"
timeout 200 scripts/gpu-steptime-ab.sh $OUT/r24/ab 60 gpt2 2>&1 | grep "round\|FAILED"
timeout 150 scripts/gpu-steptime-ab.sh $OUT/r24/ab 60 resnet50-infer 2>&1 | grep "round\|FAILED"
tar czf $OUT/run24.tgz -C $OUT r24 && rm -rf $OUT/r24
