#!/usr/bin/env bash
# Run 93 (H100, twelfth session): a fifth held-out batch of workloads, captured with PyTorch's own allocator
# (bench/torch/capture_traces.py, --unrecorded for each one's own wall time): gan_train, spec_decode_infer,
# sweep_train, pointcloud_train. Written and captured after the default was last changed (8607313,
# 2026-11-27), replayed only once captured.
set -uo pipefail
export PYTHONUNBUFFERED=1
mkdir -p $OUT/r93
python3 bench/torch/capture_traces.py --xz-dir $OUT/r93 --json-dir $OUT/r93 --unrecorded --budget-scale ${SCALE:-0.7} \
  --deadline 420 --only ${ONLY:-gan_train,spec_decode_infer,sweep_train,pointcloud_train} \
  2>&1 | tee $OUT/r93/capture.log | grep -v "params:"
ls -la $OUT/r93
tar czf $OUT/run93.tgz -C $OUT r93 && rm -rf $OUT/r93
