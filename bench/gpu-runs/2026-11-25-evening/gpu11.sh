#!/usr/bin/env bash
# Run 11: the GPU tests of the merged tree (the lake's scrub, the async policy's pool bound), a multi-stream replay
# on cuda at the new default, and the A/B of the two workloads that miss the time bar once more.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r11
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r11/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED|\[scrub\]" $OUT/r11/gpu_tests.log | tail -12
timeout 60 .dev/bin/gmlake replay traces/llm_offload_streams.snapshot.pickle.xz traces/gpt2_varlen.snapshot.pickle.xz --policy gmlake --backend cuda --quiet 2>&1 | grep -E "gmlake |failed|rror" | head
timeout 260 scripts/gpu-steptime-ab.sh $OUT/r11/ab 35 gpt2 resnet50-infer 2>&1 | grep "round\|FAILED"
tar czf $OUT/run11.tgz -C $OUT r11 && rm -rf $OUT/r11
