#!/usr/bin/env bash
# Run 8: --policy async (and all) on every shipped trace on cuda; the A/B of gpt2-generate and gpt2 varlen at the
# new default.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r8
timeout 220 scripts/gpu-async-replay.sh $OUT/r8/async > $OUT/r8/async.log 2>&1; echo "async rc $?"; cat $OUT/r8/async/async-summary.md 2>/dev/null | head -20
timeout 300 scripts/gpu-steptime-ab.sh $OUT/r8/ab 35 gpt2-generate gpt2 2>&1 | grep "round\|FAILED"
tar czf $OUT/run8.tgz -C $OUT r8 && rm -rf $OUT/r8
