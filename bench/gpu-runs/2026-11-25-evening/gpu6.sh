#!/usr/bin/env bash
# Run 6 on the GPU (session 2026-11-25 evening): GPU tests with standby mappings and the new default
# (max_chunk_bytes 4M, grow_bytes 2M), --device-bytes on cuda, and the A/B of the three workloads that missed
# the time bar (gpt2-fixed, resnet50-infer, gpt2 varlen).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r6
timeout 120 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r6/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r6/gpu_tests.log | tail -8
timeout 60 .dev/bin/gmlake replay traces/gpt2_fixed_b16.snapshot.pickle.xz --policy all --backend cuda --device-bytes 1.01x --quiet 2>&1 | tail -4
timeout 380 scripts/gpu-steptime-ab.sh $OUT/r6/ab 35 gpt2-fixed resnet50-infer gpt2 2>&1 | grep "round\|FAILED"
tar czf $OUT/run6.tgz -C $OUT r6 && rm -rf $OUT/r6
