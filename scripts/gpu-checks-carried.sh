#!/usr/bin/env bash
# The GPU checks on binaries carried to the GPU machine in .dev/ (scripts/gpu-carry.sh), in one call: the GPU
# tests, the device pool's, the PyTorch allocator test, 150 streams at once under PyTorch, and gmlake on cuda
# against sim on four shipped traces.
# Prints one summary block per check; full logs go to OUTDIR.
#   scripts/gpu-checks-carried.sh OUTDIR
# Needs .dev/gpu_env.sh (LD_LIBRARY_PATH and GMLAKE_LIBRARY for .dev/lib). Exit status: 0 when every check passed.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-checks-carried.sh OUTDIR}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p "$out"
status=0
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > "$out/gpu_tests.log" 2>&1; rc=$?; echo "gpu tests rc $rc"
[ $rc -eq 0 ] || status=1
grep -E "^\[  (PASSED|FAILED|SKIPPED) " "$out/gpu_tests.log" | tail -4; grep -E "^\[  FAILED  \]" "$out/gpu_tests.log" | head -5
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > "$out/device_pool.log" 2>&1; rc=$?; echo "device pool tests rc $rc"
[ $rc -eq 0 ] || status=1
grep -E "^\[  (PASSED|FAILED) " "$out/device_pool.log" | tail -2
timeout 120 python3 tests/gpu/torch_allocator_test.py > "$out/torch_allocator_test.log" 2>&1; rc=$?
echo "torch allocator test rc $rc"; [ $rc -eq 0 ] || status=1
tail -n 2 "$out/torch_allocator_test.log"
timeout 120 python3 tests/gpu/torch_many_streams_test.py > "$out/torch_many_streams_test.log" 2>&1; rc=$?
echo "torch many streams test rc $rc"; [ $rc -eq 0 ] || status=1
tail -n 2 "$out/torch_many_streams_test.log"
GMLAKE_CLI=.dev/bin/gmlake timeout 150 scripts/gpu-cuda-vs-sim.sh "$out/cvs" \
  traces/{bert_train_eval,gpt2_varlen,cnn_varres,llm_offload_streams}.snapshot.pickle.xz > /dev/null; rc=$?
echo "cuda vs sim rc $rc"; [ $rc -eq 0 ] || status=1
tail -6 "$out/cvs/cuda-vs-sim.txt"
exit $status
