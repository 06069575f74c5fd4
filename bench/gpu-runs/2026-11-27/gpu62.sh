#!/usr/bin/env bash
# Run 62 (eighth session; binaries of 93683d2, after the ChunkSource split): the GPU tests, the device pool's, the
# PyTorch allocator test, gmlake on cuda against sim on four traces, and workload_unrecorded_s for the two older
# traces whose workloads capture_traces.py holds (llm_offload_streams, moe_varload).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p $OUT/r62
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r62/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r62/gpu_tests.log | tail -4; grep -E "^\[  FAILED  \]" $OUT/r62/gpu_tests.log | head -5
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r62/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r62/device_pool.log | tail -2
timeout 120 python3 tests/gpu/torch_allocator_test.py > $OUT/r62/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 2 $OUT/r62/torch_allocator_test.log
GMLAKE_CLI=.dev/bin/gmlake timeout 150 scripts/gpu-cuda-vs-sim.sh $OUT/r62/cvs traces/{bert_train_eval,gpt2_varlen,cnn_varres,llm_offload_streams}.snapshot.pickle.xz > /dev/null; echo "cuda vs sim rc $?"
tail -6 $OUT/r62/cvs/cuda-vs-sim.txt
cp $OUT/r62/cvs/cuda-vs-sim.txt $OUT/run62-cuda-vs-sim.txt
# (the time-only capture ran in the first try of this run; see the log)

tar czf $OUT/run62.tgz -C $OUT r62 && rm -rf $OUT/r62
