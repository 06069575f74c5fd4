#!/usr/bin/env bash
# Run 91 (H100, twelfth session): the frontier on the two inference workloads whose A/B misses the time bar, the
# default against settings that give memory for time, one after the other in one call (35 pairs, 3 rounds):
#   headroom_permille:200,growth_chunk_share:32   (the recorded resnet50-infer round replays at 0.856 GB, 0.936)
#   max_chunk_bytes:16M,chunks_per_block:8,growth_chunk_share:32,headroom_permille:1000   (0.967 GB, 0.828;
#   expandable 0.979, caching 1.724; default 0.807, 0.991)
# MODELS and CONFS select; the JSON of each goes to $OUT/run91-<tag>-ab_<model>.json.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-91}
mkdir -p $OUT/r$run
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
lscpu | grep -E "^Model name"
for m in ${MODELS:-resnet50-infer video-infer}; do
  for tc in ${CONFS:-default= h200=headroom_permille:200,growth_chunk_share:32 c16m=max_chunk_bytes:16M,chunks_per_block:8,growth_chunk_share:32,headroom_permille:1000}; do
    tag=${tc%%=*}; c=${tc#*=}
    echo "##### $m $tag '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout 250 scripts/gpu-steptime-ab.sh $OUT/r$run/$tag ${PAIRS:-35} $m 2>&1 | cut -c1-420
    cp $OUT/r$run/$tag/ab_$m.json $OUT/run$run-$tag-ab_$m.json 2>/dev/null
    tail -2 $OUT/r$run/$tag/ab_$m.log | cut -c1-300
  done
done
rm -rf $OUT/r$run
