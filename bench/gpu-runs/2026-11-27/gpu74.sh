#!/usr/bin/env bash
# Run 74 (ninth session; binaries of e7d4d78, in_order_moves off by default): the GPU tests, the device pool's, the
# PyTorch allocator test and gmlake on cuda against sim on four traces.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p $OUT/r74
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r74/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r74/gpu_tests.log | tail -4; grep -E "^\[  FAILED  \]" $OUT/r74/gpu_tests.log | head -5
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r74/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r74/device_pool.log | tail -2
timeout 120 python3 tests/gpu/torch_allocator_test.py > $OUT/r74/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 2 $OUT/r74/torch_allocator_test.log
GMLAKE_CLI=.dev/bin/gmlake timeout 150 scripts/gpu-cuda-vs-sim.sh $OUT/r74/cvs traces/{bert_train_eval,gpt2_varlen,cnn_varres,llm_offload_streams}.snapshot.pickle.xz > /dev/null; echo "cuda vs sim rc $?"
tail -6 $OUT/r74/cvs/cuda-vs-sim.txt
cp $OUT/r74/cvs/cuda-vs-sim.txt $OUT/run74-cuda-vs-sim.txt

tar czf $OUT/run74.tgz -C $OUT r74 && rm -rf $OUT/r74
