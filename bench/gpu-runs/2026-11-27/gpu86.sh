#!/usr/bin/env bash
# Run 86 (H100, eleventh session): deferred mapping, an experiment not kept (a build of the working tree with a
# Config::deferred_mapping: map, set_access, unmap and release on a worker thread, each allocation's stream gated
# by cuStreamWaitValue64; bench/cuda/vmm_overlap_probe.cu). First the GPU tests of it and the torch allocator test
# with it on; then the A/B on the two inference workloads whose growth steps put the time bar out of reach
# (resnet50-infer, video-infer), the default against deferred_mapping:true, one after the other in one call, 35
# pairs, 3 rounds. Outcome: the default halves ran (run86-default-*.json); both deferred halves failed at once in
# `model.to("cuda")` with "CUDA error: invalid argument" (a copy into a block whose mapping had not run yet; the
# probe's part D shows the driver checks a copy's pointer when it is queued), so the code was dropped.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-86}
mkdir -p $OUT/r$run
echo "##### GPU tests"
.dev/bin/gmlake_gpu_tests --gtest_filter="${FILTER:-*Deferred*:CudaStreamEvents*:CudaEngine*:CudaBackend*}" 2>&1 | tail -${TAIL:-25}
echo "##### torch allocator test, deferred_mapping:true"
GMLAKE_CONF=deferred_mapping:true timeout 300 python3 tests/gpu/torch_allocator_test.py 2>&1 | tail -5
for m in ${MODELS:-resnet50-infer video-infer}; do
  for c in "" "deferred_mapping:true"; do
    tag=${c:+deferred}; tag=${tag:-default}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout 250 scripts/gpu-steptime-ab.sh $OUT/r$run/$tag ${PAIRS:-35} $m 2>&1 | cut -c1-420
    cp $OUT/r$run/$tag/ab_$m.json $OUT/run$run-$tag-ab_$m.json 2>/dev/null
    tail -3 $OUT/r$run/$tag/ab_$m.log | cut -c1-300
  done
done
rm -rf $OUT/r$run
