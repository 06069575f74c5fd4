#!/usr/bin/env bash
# Run 201 (thirty-first session), one call: pipeline_1f1b_train at the default as the bar measures it, three
# rounds of 30 pairs in one process each (bench/torch/workload_ab.py: both allocators alternating, order swapped
# each pair, one untimed run of each first), one after another on one machine.
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07e/run201.sh $OUT
set -uo pipefail
out=${1:?usage: run201.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for round in 1 2 3; do
  echo "--- round $round"
  timeout 190 python3 bench/torch/workload_ab.py pipeline_1f1b_train --runs ${PAIRS:-30} \
    > "$out/run201-round$round-pipeline_1f1b_train.json" 2> /tmp/ab.log || tail -3 /tmp/ab.log
  python3 bench/torch/ab_summary.py "$out/run201-round$round-pipeline_1f1b_train.json" | head -1
done
