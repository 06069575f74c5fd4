#!/usr/bin/env bash
# The twelfth held-out batch of traces (capture_traces.py's pipeline_1f1b_train, t5_beam_generate,
# shampoo_like_train), written in the twenty-ninth session before any replay of them: each recorded, then run again
# unrecorded. Not run in that session (no GPU could be started, ten tries); first run in the thirtieth session
# (run 196, through bench/gpu-runs/2026-12-07d/capture_and_beam_check.sh), where all three ran as written.
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07c/capture_batch12.sh $OUT
set -uo pipefail
out=${1:?usage: capture_batch12.sh OUT}
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$out/batch12-capture.log"
python3 -c "import torch, transformers, torchvision; print(torch.__version__, transformers.__version__, torchvision.__version__)" | tee -a "$out/batch12-capture.log"
python3 bench/torch/capture_traces.py --xz-dir "$out" --json-dir "$out" --tmp /tmp/ct_batch12 --unrecorded \
  --budget-scale 0.7 --deadline 420 --only pipeline_1f1b_train,t5_beam_generate,shampoo_like_train 2>&1 |
  tee -a "$out/batch12-capture.log"
