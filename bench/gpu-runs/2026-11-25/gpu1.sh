#!/usr/bin/env bash
# Run 1 on the GPU: capture the four new traces (issue 23), with their unrecorded wall time.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/cap
timeout 560 python3 bench/torch/capture_traces.py --xz-dir $OUT/cap --json-dir $OUT/cap --tmp /tmp/cap \
  --only unet3d_infer,calib_awq_1b,bert_infer_varbatch,gpt2_generate_small --unrecorded --deadline 420 2>&1 | tail -40
ls -la $OUT/cap
