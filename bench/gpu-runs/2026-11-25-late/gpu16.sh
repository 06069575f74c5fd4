#!/usr/bin/env bash
# Run 16: the GPU tests of the merged tree (8edcebf: the faster engine and issue 25's borrower fix), then the A/B of
# bert and unet3d-infer (40 pairs) on it.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r16
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r16/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r16/gpu_tests.log | tail -12
timeout 180 scripts/gpu-steptime-ab.sh $OUT/r16/ab 40 bert 2>&1 | grep "round\|FAILED"
timeout 200 scripts/gpu-steptime-ab.sh $OUT/r16/ab 40 unet3d-infer 2>&1 | grep "round\|FAILED"
tar czf $OUT/run16.tgz -C $OUT r16 && rm -rf $OUT/r16
