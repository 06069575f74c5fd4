#!/usr/bin/env bash
# Run 7: GPU tests (async policy merged; the standby-mapping fence fix), and the A/B of resnet50-infer (which
# faulted in run 6 before the fix), bert and unet3d-infer at the new default.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r7
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r7/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r7/gpu_tests.log | tail -12
timeout 400 scripts/gpu-steptime-ab.sh $OUT/r7/ab 35 resnet50-infer bert unet3d-infer 2>&1 | grep "round\|FAILED"
grep -l "ILLEGAL" $OUT/r7/ab/*.log
tar czf $OUT/run7.tgz -C $OUT r7 && rm -rf $OUT/r7
