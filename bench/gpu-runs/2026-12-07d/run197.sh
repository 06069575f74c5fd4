#!/usr/bin/env bash
# Run 197 (thirtieth session), one call: (1) the beam-search check at budget scale 1.0 (run 196's 0.15 compared
# no call); (2) the GPU checks on the binaries of 7cd6b4a carried in .dev/ (scripts/gpu-checks-carried.sh); (3) the
# twelfth batch's workloads, each an A/B in one process (bench/torch/workload_ab.py, whole runs as recorded,
# alternating, order swapped each pair), at the default.
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07d/run197.sh $OUT
set -uo pipefail
out=${1:?usage: run197.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
BEAM_ONLY=1 timeout 120 bash bench/gpu-runs/2026-12-07d/capture_and_beam_check.sh "$out"
tail -2 "$out/beam-check.log"
timeout 330 bash scripts/gpu-checks-carried.sh /tmp/checks > "$out/run197-gpu-checks.txt" 2>&1
echo "gpu checks rc $?"; cat "$out/run197-gpu-checks.txt"
for w in ${WORKLOADS:-pipeline_1f1b_train t5_beam_generate shampoo_like_train}; do
  timeout ${LIMIT:-150} python3 bench/torch/workload_ab.py $w --runs ${RUNS:-5} > "$out/run197-ab-$w.json" 2> /tmp/ab.log ||
    tail -3 /tmp/ab.log
  python3 -c "
import json; r=json.load(open('$out/run197-ab-$w.json'))
print('$w', {k: v for k, v in r.items() if not isinstance(v, (list, dict))})" 2>&1 | tail -1
done
