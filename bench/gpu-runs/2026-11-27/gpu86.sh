#!/usr/bin/env bash
# Run 86 (H100, eleventh session): deferred mapping, an experiment not kept (a build of the working tree with a
# Config::deferred_mapping: map, set_access, unmap and release on a worker thread, each allocation's stream gated
# by cuStreamWaitValue64; bench/cuda/vmm_overlap_probe.cu). First the GPU tests of it and the torch allocator test
# with it on; then the A/B on the two inference workloads whose growth steps put the time bar out of reach
# (resnet50-infer, video-infer), the default against deferred_mapping:true, one after the other in one call, 35
# pairs, 3 rounds. Outcome: the default halves ran (run86-default-*.json); both deferred halves failed at once in
# `model.to("cuda")` with "CUDA error: invalid argument" (a copy into a block whose mapping had not run yet; the
# probe's part D shows the driver checks a copy's pointer when it is queued), so the code was dropped. Its A/B loop
# is now gpu91.sh's (which took it over with settings as a parameter).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-86}
mkdir -p $OUT/r$run
echo "##### GPU tests"
.dev/bin/gmlake_gpu_tests --gtest_filter="${FILTER:-*Deferred*:CudaStreamEvents*:CudaEngine*:CudaBackend*}" 2>&1 | tail -${TAIL:-25}
echo "##### torch allocator test, deferred_mapping:true"
GMLAKE_CONF=deferred_mapping:true timeout 300 python3 tests/gpu/torch_allocator_test.py 2>&1 | tail -5
RUN=$run MODELS=${MODELS:-resnet50-infer video-infer} CONFS="default= deferred=deferred_mapping:true" \
  bash "$(dirname "$0")/gpu91.sh"
