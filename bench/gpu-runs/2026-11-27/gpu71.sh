#!/usr/bin/env bash
# Run 71 (ninth session; binaries of the in-order-moves change, in .dev/bin and .dev/lib; run 72: RUN=72
# SKIP_TESTS=1 MODELS="bert-train-eval resnet50-infer", with moves in stream order after lag growth): the GPU tests (one new:
# a chunk freed under queued work backs a block of the same stream with no wait, and the block reads its own value
# only), the PyTorch allocator test, then the A/B of MODELS (env, default bert-train-eval) over PAIRS pairs, 3
# rounds, at the default (in_order_moves:true) and with in_order_moves:false (the fence as before), one after the
# other in one call: scripts/gpu-steptime-ab.sh prints peak reserved, fence waits and moves in stream order.
# Files kept: the run's JSON renamed by what its binary did. Run 71's default moved a chunk in stream order before
# any lag growth (run71-inorder-first-*); run 72's only once lag growth was spent (run72-inorder-after-lag-*);
# in_order_moves:false is the fence as before (run7?-fence-*). The default landed is in_order_moves:false.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-71}
mkdir -p $OUT/r$run
if [ -z "${SKIP_TESTS:-}" ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r$run/gpu_tests.log 2>&1; echo "gpu tests rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r$run/gpu_tests.log | tail -4; grep -E "^\[  FAILED  \]" $OUT/r$run/gpu_tests.log | head -5
  timeout 120 python3 tests/gpu/torch_allocator_test.py > $OUT/r$run/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
  tail -n 2 $OUT/r$run/torch_allocator_test.log
fi
for m in ${MODELS:-bert-train-eval}; do
  for c in "" "in_order_moves:false"; do
    tag=${c:+old}; tag=${tag:-new}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout ${LIMIT:-200} scripts/gpu-steptime-ab.sh $OUT/r$run/$tag ${PAIRS:-35} $m 2>&1 | cut -c1-400
    cp $OUT/r$run/$tag/ab_$m.json $OUT/run$run-$tag-ab_$m.json 2>/dev/null
  done
done
tar czf $OUT/run$run.tgz -C $OUT r$run && rm -rf $OUT/r$run
