#!/usr/bin/env bash
# Run 12: the GPU tests again after the same-device lake test's fix (its lender now serves all 8 loans before it
# reads the parent's message; run 11 hung there), the whole suite under a time limit.
set -uo pipefail
source .dev/gpu_env.sh
timeout 120 .dev/bin/gmlake_gpu_tests --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|SKIPPED|\[scrub\]|Failure" | tail -14; echo "rc ${PIPESTATUS[0]}"
