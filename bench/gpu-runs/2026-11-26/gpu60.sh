#!/usr/bin/env bash
# Run 60 (H100, seventh session; binaries of 04f007e's engine, as in runs 58-59): the GPU tests, the device pool's,
# the PyTorch allocator test, and gmlake on cuda against sim on the seven traces captured in run 57.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p $OUT/r60
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r60/gpu_tests.log 2>&1; echo "gpu tests rc $?"
grep -E "^\[  (PASSED|FAILED|SKIPPED) " $OUT/r60/gpu_tests.log | tail -4; grep -E "^\[  FAILED  \]" $OUT/r60/gpu_tests.log | head -5
timeout 60 .dev/bin/device_pool_gpu_tests --gtest_brief=1 > $OUT/r60/device_pool.log 2>&1; echo "device pool tests rc $?"
grep -E "^\[  (PASSED|FAILED) " $OUT/r60/device_pool.log | tail -2
timeout 120 python3 tests/gpu/torch_allocator_test.py > $OUT/r60/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"
tail -n 2 $OUT/r60/torch_allocator_test.log
GMLAKE_CLI=.dev/bin/gmlake timeout 150 scripts/gpu-cuda-vs-sim.sh $OUT/r60/cvs traces/{llm_serve_contbatch,act_offload_train,pipeline_streams_infer,whisper_train,dpo_train,bert_train_eval,vae_decode_varres}.snapshot.pickle.xz > /dev/null; echo "cuda vs sim rc $?"
tail -9 $OUT/r60/cvs/cuda-vs-sim.txt
cp $OUT/r60/cvs/cuda-vs-sim.txt $OUT/run60-cuda-vs-sim.txt
tar czf $OUT/run60.tgz -C $OUT r60 && rm -rf $OUT/r60
