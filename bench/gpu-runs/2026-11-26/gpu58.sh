#!/usr/bin/env bash
# Run 58 (H100, seventh session; binaries of 04f007e's engine in .dev/bin and .dev/lib): the in-process A/B of
# bert-train-eval (BERT fine-tuning with an evaluation call after every 5 training steps), 65 pairs x 3 rounds, at
# the default and with chunks_per_block:16; then the engine's CPU time on sim over every shipped trace
# (gmlake_bench replay/, 3 repetitions) on this machine's CPU.
# .dev/gpu53.sh is bench/gpu-runs/2026-11-26/gpu53.sh, copied there.
set -uo pipefail
source .dev/gpu_env.sh
MODEL=bert-train-eval PAIRS=65 bash .dev/gpu53.sh "" "chunks_per_block:16"
nproc; cat /proc/cpuinfo | grep "model name" | head -1
timeout 200 .dev/bin/gmlake_bench --benchmark_filter='replay/' --benchmark_repetitions=3 --benchmark_format=json \
  --benchmark_out=$OUT/bench58.json > /dev/null 2>&1; echo "bench rc $?"
