#!/usr/bin/env bash
# Run 78 (H100, tenth session): a third held-out batch of workloads, captured with PyTorch's own allocator
# (bench/torch/capture_traces.py, --unrecorded for each one's own wall time): clip_contrastive_train,
# seg_train_fp16, video_infer_varclip, distill_mlm_train, compiled_gpt_train. Replayed only once captured.
set -uo pipefail
export PYTHONUNBUFFERED=1
mkdir -p $OUT/r78
python3 bench/torch/capture_traces.py --xz-dir $OUT/r78 --json-dir $OUT/r78 --unrecorded --budget-scale 0.7 \
  --deadline 420 --only clip_contrastive_train,seg_train_fp16,video_infer_varclip,distill_mlm_train,compiled_gpt_train \
  2>&1 | tee $OUT/r78/capture.log | grep -v "params:"
ls -la $OUT/r78
tar czf $OUT/run78.tgz -C $OUT r78 && rm -rf $OUT/r78
