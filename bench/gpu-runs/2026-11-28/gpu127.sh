#!/usr/bin/env bash
# Runs 127-128 (H100, sixteenth session), one machine kept warm after runs 125-126, HEAD be8dda7 (the move budget
# charges only moves on the critical path, 2c397ba): train.py's A/B (gpu91.sh, 35 pairs x 3 rounds) at the default,
# in two calls: run 127 GPT-2 varlen, BERT varlen, ResNet-50 inference; run 128 (RUN=128 MODELS="gpt2-fixed
# unet3d-infer gpt2-generate video-infer") the other four.
set -uo pipefail
RUN=${RUN:-127} MODELS="${MODELS:-gpt2 bert resnet50-infer}" CONFS="default=" PAIRS=35 \
  bash bench/gpu-runs/2026-11-27/gpu91.sh 2>&1 | grep -E "round|#####|FAILED|Error|Model" | cut -c1-330
