#!/usr/bin/env bash
# Run 17: the GPU tests of the merged tree d554a04 (issue 24's absl::Mutex locks and invariants, issue 25's
# borrower fix, the engine's page table).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r17
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r17/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r17/gpu_tests.log | tail -12
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|SKIPPED" | tail -5
timeout 90 .dev/bin/gmlake replay traces/llm_offload_streams.snapshot.pickle.xz traces/gpt2_varlen.snapshot.pickle.xz --policy gmlake --backend cuda --quiet 2>&1 | grep -E "gmlake |failed|rror" | head
tar czf $OUT/run17.tgz -C $OUT r17 && rm -rf $OUT/r17
