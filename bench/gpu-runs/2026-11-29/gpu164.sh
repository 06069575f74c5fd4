#!/usr/bin/env bash
# Run 164 (H200, twenty-third session). PART=capture (one call): a ninth held-out batch of workloads captured with
# PyTorch's own allocator as the fourth to eighth were (gpu87.sh: capture_traces.py --unrecorded, budget scale 0.7):
# ssm_lm_train, maskrcnn_infer, multistream_embed_serve, chunked_ce_train, vector_search_infer. Written after the
# default was last changed and replayed only once captured.
# PART=checks (the next call, .dev carried from scripts/gpu-carry.sh): the GPU checks (scripts/gpu-checks-carried.sh)
# and bench/cuda/map_offset_probe.py after its two mends of the twenty-second session.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
if [ "${PART:-capture}" = capture ]; then
  RUN=${RUN:-164} ONLY=${ONLY:-ssm_lm_train,maskrcnn_infer,multistream_embed_serve,chunked_ce_train,vector_search_infer} \
    timeout 570 bash bench/gpu-runs/2026-11-27/gpu87.sh
else
  timeout 400 scripts/gpu-checks-carried.sh $OUT/checks; echo "gpu checks rc $?"
  (cd bench/cuda && timeout 60 python3 map_offset_probe.py > $OUT/map_offset_probe.json); echo "probe rc $?"
  tail -c 600 $OUT/map_offset_probe.json
fi
