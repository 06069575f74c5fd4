#!/usr/bin/env bash
# Run 80 (H100, tenth session; binaries of 7e4ab72 in .dev/bin and .dev/lib): the in-process A/B at the default on
# video-infer (r2plus1d_18 inference at clip lengths, sizes and batches drawn per call: the held-out
# video_infer_varclip's pattern, a workload the time bar was not tuned on) and on resnet50-infer, 35 pairs, 3 rounds.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p $OUT/r80
for m in video-infer resnet50-infer; do
  echo "##### $m"
  ROUNDS=3 timeout 240 scripts/gpu-steptime-ab.sh $OUT/r80 35 $m 2>&1 | cut -c1-420
  cp $OUT/r80/ab_$m.json $OUT/run80-ab_$m.json
done
rm -rf $OUT/r80
