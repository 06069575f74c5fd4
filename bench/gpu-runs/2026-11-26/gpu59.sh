#!/usr/bin/env bash
# Run 59 (H100, seventh session; the binaries of run 58): the frontier of bert-train-eval, the in-process A/B at
# 50 pairs x 3 rounds under five gmlake configurations one after the other in one call: the default (again, for
# the noise against run 58), a tight move budget (move_burst_ms:0, move_share_permille:1: the pool grows within
# move_headroom_permille instead of moving), headroom_permille:100, max_chunk_bytes:16M, chunks_per_block:16.
# .dev/gpu53.sh is bench/gpu-runs/2026-11-26/gpu53.sh, copied there.
set -uo pipefail
source .dev/gpu_env.sh
MODEL=bert-train-eval PAIRS=50 bash .dev/gpu53.sh "" "move_burst_ms:0,move_share_permille:1" "headroom_permille:100" \
  "max_chunk_bytes:16M" "chunks_per_block:16"
