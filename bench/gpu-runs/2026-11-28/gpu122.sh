#!/usr/bin/env bash
# Runs 122-123 (H100, fifteenth session), one machine, HEAD a1750e4 (arena handover on): the A/B table of issue 23
# at the default, in two calls: run 122 fsdp_like_train (workload_ab.py, 6 pairs) and train.py's A/B (gpu91.sh, 35
# pairs x 3 rounds) on GPT-2 varlen, GPT-2 fixed and BERT varlen; run 123 ResNet-50 inference, 3D UNet
# inference, generate and video inference (RUN=123 SKIP_FSDP=1 MODELS="...").
set -uo pipefail
export RUN=${RUN:-122} SKIP_CHECKS=1 MODELS="${MODELS:-gpt2 gpt2-fixed bert}"
bash bench/gpu-runs/2026-11-28/gpu118.sh
