#!/usr/bin/env bash
# Run 200 (thirty-first session), one call: (1) the GPU checks on the binaries of 23c2655 carried in .dev/
# (scripts/gpu-checks-carried.sh); (2) pipeline_1f1b_train, one allocator per process as a user runs it
# (workload_ab.py --processes, 2 pairs of processes, 3 timed runs each), now with the move budget's counters
# critical_path_moves and refused_moves per run, at the default and at move_burst_ms:0 (the wall-time share binds
# from the first move: the frontier's other point).
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07e/run200.sh $OUT
set -uo pipefail
out=${1:?usage: run200.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout 300 bash scripts/gpu-checks-carried.sh /tmp/checks > "$out/run200-gpu-checks.txt" 2>&1
echo "gpu checks rc $?"; cat "$out/run200-gpu-checks.txt"
for conf in "" "move_burst_ms:0"; do
  tag=${conf:-default}; tag=${tag%%:*}
  echo "--- pipeline_1f1b_train per process, conf '$conf'"
  timeout 125 python3 bench/torch/workload_ab.py pipeline_1f1b_train --processes --runs 2 --runs-per-process 3 \
    --conf "$conf" > "$out/run200-processes-pipeline_1f1b_train-$tag.json" 2> /tmp/ab.log || tail -3 /tmp/ab.log
  python3 bench/torch/ab_summary.py "$out/run200-processes-pipeline_1f1b_train-$tag.json"
done
