#!/usr/bin/env bash
# Run 81 (H100, tenth session; binaries of 7e4ab72 in .dev/bin and .dev/lib): the in-process A/B at the default on
# clip-train (CLIP contrastive training, batch 32..192 and caption length per step: clip_contrastive_train's
# pattern, held out) and video-infer a second time, 35 pairs, 3 rounds.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p $OUT/r81
for m in clip-train video-infer; do
  echo "##### $m"
  ROUNDS=3 timeout 280 scripts/gpu-steptime-ab.sh $OUT/r81 35 $m 2>&1 | cut -c1-420
  cp $OUT/r81/ab_$m.json $OUT/run81-ab_$m.json
done
rm -rf $OUT/r81
