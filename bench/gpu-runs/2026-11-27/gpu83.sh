#!/usr/bin/env bash
# Run 83 (H100, tenth session; binaries of 7e4ab72): does the fence's lag growth decide the inference workloads'
# excess? video-infer's first round makes 18-24 fence waits (runs 80-82): each drains the GPU's queue, so the
# moves that follow run while the GPU waits. lag_grow_pages 64 (default) against 512 (1 GiB made instead of
# waiting), one after the other in one call, 35 pairs, 3 rounds; peak reserved shows what it costs in memory.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p $OUT/r83
for m in video-infer resnet50-infer; do
  for c in "" "lag_grow_pages:512"; do
    tag=${c:+lag512}; tag=${tag:-default}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout 200 scripts/gpu-steptime-ab.sh $OUT/r83/$tag 35 $m 2>&1 | cut -c1-420
    cp $OUT/r83/$tag/ab_$m.json $OUT/run83-$tag-ab_$m.json
  done
done
rm -rf $OUT/r83
