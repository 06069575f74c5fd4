#!/usr/bin/env bash
# Runs 80-81 (H100, tenth session; binaries of 7e4ab72 in .dev/bin and .dev/lib): the in-process A/B at the default,
# 35 pairs, 3 rounds, on held-out workloads the time bar was not tuned on, given to the device tool as one command
# line each:
#   run 80: RUN=80 MODELS="video-infer resnet50-infer"   (video-infer: r2plus1d_18 inference at clip lengths, sizes
#           and batches drawn per call, the held-out video_infer_varclip's pattern)
#   run 81: RUN=81 MODELS="clip-train video-infer"        (clip-train: CLIP contrastive training, batch 32..192 and
#           caption length per step, clip_contrastive_train's pattern)
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:?RUN=80 or 81}
mkdir -p $OUT/r$run
for m in ${MODELS:?}; do
  echo "##### $m"
  ROUNDS=3 timeout 280 scripts/gpu-steptime-ab.sh $OUT/r$run 35 $m 2>&1 | cut -c1-420
  cp $OUT/r$run/ab_$m.json $OUT/run$run-ab_$m.json
done
rm -rf $OUT/r$run
