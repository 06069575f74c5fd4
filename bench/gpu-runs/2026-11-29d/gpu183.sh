#!/usr/bin/env bash
# Run 183 (twenty-sixth session). PART=capture (one call): an eleventh held-out batch captured with PyTorch's own
# allocator as the fourth to tenth were (gpu87.sh: capture_traces.py --unrecorded, budget scale 0.7):
# dino_multicrop_train, nerf_rays_train, lora_adapter_serve, resume_ckpt_train. Written after the default was last
# changed and replayed only once captured.
# PART=ab (a later call, .dev carried from scripts/gpu-carry.sh): the batch run whole under both allocators in one
# process (gpu176.sh's PART=ab, RUN=184).
set -uo pipefail
if [ "${PART:-capture}" = capture ]; then
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  RUN=${RUN:-183} ONLY=${ONLY:-dino_multicrop_train,nerf_rays_train,lora_adapter_serve,resume_ckpt_train} \
    timeout 570 bash bench/gpu-runs/2026-11-27/gpu87.sh
else
  RUN=${RUN:-184} PART=ab CHECKS=${CHECKS:-0} \
    WORKLOADS=${WORKLOADS:-"dino_multicrop_train:4 nerf_rays_train:4 lora_adapter_serve:4 resume_ckpt_train:4"} \
    bash bench/gpu-runs/2026-11-29c/gpu176.sh
fi
