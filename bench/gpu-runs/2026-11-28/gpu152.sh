#!/usr/bin/env bash
# Run 152 (twenty-first session): model_swap_serve's in-process A/B (18 pairs, one heap for both allocators) with
# glibc's thresholds fixed as in run 150's PART=tunables: what is left of the gap when the heap is not the variable?
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824 \
  timeout 300 python3 bench/torch/workload_ab.py model_swap_serve --runs 18 --per-call > $OUT/run152-inproc-tuned.json \
  2>/tmp/a.log || tail -3 /tmp/a.log
python3 bench/torch/ab_summary.py $OUT/run152-inproc-tuned.json | tail -30
