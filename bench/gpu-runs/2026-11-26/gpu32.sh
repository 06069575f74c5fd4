#!/usr/bin/env bash
# Run 32 (H100; main after the Pages type, AsyncAllocator on BlockTable and GrowableBuffer's step_bytes; binaries
# built on the build machine with the CUDA backend and carried in .dev/bin, .dev/lib): the GPU tests, the device
# pool's GPU tests, gmlake on cuda against sim on every shipped trace (scripts/gpu-cuda-vs-sim.sh), the async
# policy on cuda over one trace, the PyTorch allocator test, and two short bert A/B rounds read per step.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r32
git log -1 --format='commit %h %s' 2>/dev/null | cut -c1-100; nproc; cat /proc/loadavg
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r32/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r32/gpu_tests.log | tail -4; grep -c "^\[  SKIPPED" $OUT/r32/gpu_tests.log
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r32/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r32/device_pool.log | tail -2
GMLAKE_CLI=.dev/bin/gmlake timeout 240 scripts/gpu-cuda-vs-sim.sh $OUT/r32/cvs; echo "cuda vs sim rc $?"
timeout 60 .dev/bin/gmlake replay traces/resnet50.snapshot.pickle.xz --policy async --backend cuda > $OUT/r32/async.txt 2>&1
echo "async on cuda rc $?"; tail -n 4 $OUT/r32/async.txt
timeout 200 python3 tests/gpu/torch_allocator_test.py > $OUT/r32/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 3 $OUT/r32/torch_allocator_test.log
# One short bert A/B round, to see what a step with driver time does (train.py's per-pair calls, creates, evictions)
ROUNDS=2 timeout 150 scripts/gpu-steptime-ab.sh $OUT/r32/ab 25 bert 2>&1 | grep "round\|FAILED"
python3 - $OUT/r32/ab/ab_bert.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["rounds"]):
    print(f"round {i + 1}: total {r['total_ratio_gmlake_to_native']:.3f}")
    for k, ms in enumerate(r["step_backend_ms_gmlake"]):
        if ms > 2:
            print(f"  pair {k}: {ms} ms VMM, {r['step_backend_calls_gmlake'][k]} calls, "
                  f"{r['step_chunks_created_gmlake'][k]} creates, {r['step_evictions_gmlake'][k]} evictions, "
                  f"shape {r['step_input_shapes'][k]}, longest before {max([s[0][1] for s in r['step_input_shapes'][:k]] or [0])}, "
                  f"gmlake {r['step_times_s_gmlake'][k] * 1e3:.1f} ms native {r['step_times_s_native'][k] * 1e3:.1f} ms")
PY
tar czf $OUT/run32.tgz -C $OUT r32 && rm -rf $OUT/r32
