#!/usr/bin/env bash
# Run 68 (eighth session; binaries of f74ede0, the new default waiting_growth_chunk_share 768, no GMLAKE_CONF):
# the A/B of the two workloads run 66 did not reach (gpt2-generate, gpt2-fixed) and bert-train-eval again, 35 pairs,
# 3 rounds each; then the GPU tests on these binaries.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for m in "gpt2-generate 8" "gpt2-fixed 16" "bert-train-eval 32"; do
  set -- $m
  timeout 330 python3 bench/torch/train.py --model $1 --alloc ab --batch $2 --steps 35 --rounds 3 \
    --json $OUT/run68-ab_$1.json > $OUT/ab_$1.log 2>&1 || { echo "$1 FAILED"; tail -5 $OUT/ab_$1.log; continue; }
  python3 - $OUT/run68-ab_$1.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print(d["model"], "total", round(d["total_ratio_gmlake_to_native"], 4),
      "rounds", [round(r["total_ratio_gmlake_to_native"], 3) for r in d["rounds"]],
      "timed VMM ms", [round(sum(r["step_backend_ms_gmlake"][5:]), 1) for r in d["rounds"]],
      "peak reserved GB", [round(r["gmlake_peak_reserved"] / 1e9, 3) for r in d["rounds"]],
      "native GB", [round(r["native_peak_reserved"] / 1e9, 2) for r in d["rounds"]])
PY
done
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/gpu_tests.log | tail -3
timeout 120 python3 tests/gpu/torch_allocator_test.py > $OUT/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 1 $OUT/torch_allocator_test.log
