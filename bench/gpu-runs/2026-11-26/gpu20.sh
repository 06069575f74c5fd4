#!/usr/bin/env bash
# Run 20 (engine of fdf7c9f), H100: the A/B, 3 rounds in one process each: gpt2 varlen (60 pairs), gpt2-fixed
# and gpt2-generate (40 pairs); nothing else running.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r20
timeout 235 scripts/gpu-steptime-ab.sh $OUT/r20/ab 60 gpt2 2>&1 | grep "round\|FAILED"
timeout 200 scripts/gpu-steptime-ab.sh $OUT/r20/ab 40 gpt2-fixed 2>&1 | grep "round\|FAILED"
timeout 150 scripts/gpu-steptime-ab.sh $OUT/r20/ab 40 gpt2-generate 2>&1 | grep "round\|FAILED"
tar czf $OUT/run20.tgz -C $OUT r20 && rm -rf $OUT/r20
