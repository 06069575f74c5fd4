#!/usr/bin/env bash
# Run 93 (H100, twelfth session): a fifth held-out batch of workloads, captured with PyTorch's own allocator as the
# fourth was (gpu87.sh: capture_traces.py --unrecorded, budget scale 0.7, deadline 420 s): gan_train,
# spec_decode_infer, sweep_train, pointcloud_train. Written and captured after the default was last changed
# (8607313, 2026-11-27), replayed only once captured.
RUN=93 ONLY=${ONLY:-gan_train,spec_decode_infer,sweep_train,pointcloud_train} \
  exec bash "$(dirname "$0")/gpu87.sh"
