#!/usr/bin/env bash
# Runs 75-77 (ninth session; binaries of e7d4d78 in .dev/bin and .dev/lib), given to the device tool as one command
# line each: the memory-first setting (in_order_moves:true,lag_grow_pages:0) against the default, 35 pairs, 3
# rounds, one after the other in one call, on the A/B workloads gpu73.sh did not cover.
#   run 75: RUN=75 MODELS="resnet50-infer unet3d-infer" LIMIT=150   run 76: RUN=76 MODELS=gpt2-fixed LIMIT=240
#   run 77: RUN=77 MODELS=gpt2-generate LIMIT=270
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:?RUN=75, 76 or 77}
mkdir -p $OUT/r$run
for m in ${MODELS:?}; do
  for c in "" "in_order_moves:true,lag_grow_pages:0"; do
    tag=${c:+memfirst}; tag=${tag:-default}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout ${LIMIT:-150} scripts/gpu-steptime-ab.sh $OUT/r$run/$tag 35 $m 2>&1 | cut -c1-420
    cp $OUT/r$run/$tag/ab_$m.json $OUT/run$run-$tag-ab_$m.json
  done
done
rm -rf $OUT/r$run
