#!/usr/bin/env bash
# Runs 42-45 and 47-48 (H100; main with waiting growth chunks, the binaries of each run in .dev/bin and .dev/lib):
# optionally the GPU tests and the PyTorch allocator test, then the in-process A/B of each MODEL over 3 rounds of
# PAIRS pairs (35 unless MODEL:PAIRS), with per round the pairs with > 2 ms of VMM and the waiting growths.
# Usage: gpu42.sh RUN TESTS(0|1) MODEL[:PAIRS]...  (run 42: 42 1 resnet50-infer gpt2; 43: 43 0 resnet50-infer gpt2
# bert; 44: 44 0 resnet50-infer:65 gpt2-fixed unet3d-infer gpt2-generate; 45: 45 0 resnet50-infer:65 gpt2 bert;
# 47: 47 0 gpt2 bert gpt2-fixed; 48: 48 0 resnet50-infer:65 unet3d-infer gpt2-generate. Sixth session: 52: 52 1
# gpt2 resnet50-infer:65 bert (the memory-first placement build); 54: GMLAKE_CONF_AB=place_memory_first:0 54 0
# resnet50-infer:65 bert gpt2-fixed unet3d-infer gpt2-generate)
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
run=$1; tests=$2; shift 2
mkdir -p $OUT/r$run
if [ "$tests" = 1 ]; then
  timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r$run/gpu_tests.log 2>&1; echo "gpu tests rc $?"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r$run/gpu_tests.log | tail -4
  grep -E "^\[  FAILED  \]|StreamIsIdle" $OUT/r$run/gpu_tests.log | head -5
  timeout 150 python3 tests/gpu/torch_allocator_test.py > $OUT/r$run/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
  tail -n 2 $OUT/r$run/torch_allocator_test.log
fi
for mp in "$@"; do m=${mp%%:*}; p=${mp##*:}; [ "$p" = "$m" ] && p=35
  ROUNDS=3 timeout 290 scripts/gpu-steptime-ab.sh $OUT/r$run/ab $p $m 2>&1 | grep "round\|FAILED\|total"
  python3 - $OUT/r$run/ab/ab_$m.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["rounds"]):
    vmm = r["step_backend_ms_gmlake"]; w = r.get("step_waiting_growths_gmlake", [0] * len(vmm))
    big = [(k, v, r["step_chunks_created_gmlake"][k], r["step_evictions_gmlake"][k], w[k]) for k, v in enumerate(vmm) if v > 2]
    print(f"  round {i + 1}: total {r['total_ratio_gmlake_to_native']:.3f}, VMM ms in all {sum(vmm):.1f}, "
          f"creates {sum(r['step_chunks_created_gmlake'])}, waiting growths {sum(w)}, pairs > 2 ms (pair, ms, creates, evictions, waiting): {big}")
PY
done
cp $OUT/r$run/ab/*.json $OUT/ 2>/dev/null
tar czf $OUT/run$run.tgz -C $OUT r$run && rm -rf $OUT/r$run
