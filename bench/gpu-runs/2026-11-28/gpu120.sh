#!/usr/bin/env bash
# Run 120 (H100, fifteenth session), one machine: arena handover (a new stream takes over an empty arena of a
# stream whose work finished, its chunks mapped where they are; arena_handover, on) against a new arena per new
# stream (arena_handover:false, before), on fsdp_like_train's in-process A/B (workload_ab.py, 6 pairs; the
# workload makes its all-gather and reduce-scatter streams anew in every run), one after the other; then the GPU
# checks on the carried build.
set -uo pipefail
export RUN=${RUN:-120} CONFS="${CONFS:-arena_handover:false default}"
bash bench/gpu-runs/2026-11-28/gpu119.sh
[ -n "${SKIP_CHECKS:-}" ] || { echo "##### checks"; scripts/gpu-checks-carried.sh $OUT/checks; }
