#!/usr/bin/env bash
# Run 15: A/B of resnet50-infer (60 pairs), gpt2-generate and gpt2-fixed (40 pairs) on the faster engine (3c57c12).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r15
timeout 200 scripts/gpu-steptime-ab.sh $OUT/r15/ab 60 resnet50-infer 2>&1 | grep "round\|FAILED"
timeout 170 scripts/gpu-steptime-ab.sh $OUT/r15/ab 40 gpt2-generate 2>&1 | grep "round\|FAILED"
timeout 200 scripts/gpu-steptime-ab.sh $OUT/r15/ab 40 gpt2-fixed 2>&1 | grep "round\|FAILED"
tar czf $OUT/run15.tgz -C $OUT r15 && rm -rf $OUT/r15
