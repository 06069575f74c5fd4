#!/usr/bin/env bash
# Run 82 (H100, tenth session; binaries of 7e4ab72): the frontier on the two inference workloads whose growth
# steps put the A/B over 1.01 (video-infer, held out, and resnet50-infer): the default against max_chunk_bytes:8M
# (in the replay: video_infer_varclip's modelled VMM 167 -> 101 ms at utilization 0.9946 -> 0.9935), one after the
# other in one call, 35 pairs, 3 rounds.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p $OUT/r82
for m in video-infer resnet50-infer; do
  for c in "" "max_chunk_bytes:8M"; do
    tag=${c:+chunk8m}; tag=${tag:-default}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout 200 scripts/gpu-steptime-ab.sh $OUT/r82/$tag 35 $m 2>&1 | cut -c1-330
    cp $OUT/r82/$tag/ab_$m.json $OUT/run82-$tag-ab_$m.json
  done
done
rm -rf $OUT/r82
