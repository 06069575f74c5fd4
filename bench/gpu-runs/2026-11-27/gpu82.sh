#!/usr/bin/env bash
# Runs 82-83 (H100, tenth session; binaries of 7e4ab72): the frontier on the two inference workloads whose growth
# steps put the A/B over 1.01 (video-infer, held out, and resnet50-infer): the default against one setting, one
# after the other in one call, 35 pairs, 3 rounds. One command line each:
#   run 82: RUN=82 CONF=max_chunk_bytes:8M TAG=chunk8m  (in the replay: video_infer_varclip's modelled VMM 167 ->
#           101 ms at utilization 0.9946 -> 0.9935)
#   run 83: RUN=83 CONF=lag_grow_pages:512 TAG=lag512   (1 GiB made instead of a fence wait: video-infer's first
#           round makes 18-24 waits, each draining the GPU's queue before the moves that follow)
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:?RUN=82 or 83}
mkdir -p $OUT/r$run
for m in video-infer resnet50-infer; do
  for c in "" "${CONF:?}"; do
    tag=${c:+${TAG:?}}; tag=${tag:-default}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout 200 scripts/gpu-steptime-ab.sh $OUT/r$run/$tag 35 $m 2>&1 | cut -c1-420
    cp $OUT/r$run/$tag/ab_$m.json $OUT/run$run-$tag-ab_$m.json
  done
done
rm -rf $OUT/r$run
