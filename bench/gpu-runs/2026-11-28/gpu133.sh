#!/usr/bin/env bash
# Run 133 (H200 or H100, seventeenth session), one call: a seventh held-out batch of workloads captured with
# PyTorch's own allocator as the fourth to sixth were (gpu87.sh: capture_traces.py --unrecorded, budget scale 0.7):
# token_budget_train, stochastic_depth_train, zero_offload_train, rag_two_model_serve. Written after the default
# was last changed (2c397ba, 2026-11-28), replayed only once captured.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
RUN=${RUN:-133} ONLY=${ONLY:-token_budget_train,stochastic_depth_train,zero_offload_train,rag_two_model_serve} \
  timeout 560 bash bench/gpu-runs/2026-11-27/gpu87.sh
