#!/usr/bin/env bash
# Run 87 (H100, eleventh session): a fourth held-out batch of workloads, captured with PyTorch's own allocator
# (bench/torch/capture_traces.py, --unrecorded for each one's own wall time): fsdp_like_train, lstm_lm_train,
# convnext_multiscale_train, ppo_rollout_train. Written and captured after the default was last changed (8607313,
# 2026-11-27), replayed only once captured.
# RUN and ONLY name another batch (gpu93.sh).
set -uo pipefail
export PYTHONUNBUFFERED=1
run=${RUN:-87}
mkdir -p $OUT/r$run
python3 bench/torch/capture_traces.py --xz-dir $OUT/r$run --json-dir $OUT/r$run --unrecorded --budget-scale ${SCALE:-0.7} \
  --deadline 420 --only ${ONLY:-fsdp_like_train,lstm_lm_train,convnext_multiscale_train,ppo_rollout_train} \
  2>&1 | tee $OUT/r$run/capture.log | grep -v "params:"
ls -la $OUT/r$run
tar czf $OUT/run$run.tgz -C $OUT r$run && rm -rf $OUT/r$run
