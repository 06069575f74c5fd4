#!/usr/bin/env bash
# Run 144 (nineteenth session): model_swap_serve's time, both ways, in one call of at most ~560 s.
#   1. In one process, as the bar measures it: 9 alternating pairs (three rounds of 3; run 139 had 3 pairs: 1.012).
#   2. One allocator per process (runs 139: 1.080, 142: 1.051, 143: stopped by its limit with nothing): up to 4
#      pairs of processes, 2 runs each; a limit now leaves the processes that finished in the JSON.
# The machine has one NUMA node (run 143: 16 CPUs, node 0, the GPU's affinity 0-15), so placement is not the
# spread between processes.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-144}
timeout ${LIMIT1:-170} python3 bench/torch/workload_ab.py model_swap_serve --runs 9 \
  > $OUT/run$run-model_swap_serve.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 bench/torch/ab_summary.py $OUT/run$run-model_swap_serve.json
timeout ${LIMIT2:-360} python3 bench/torch/workload_ab.py model_swap_serve --processes --runs 4 --runs-per-process 2 \
  > $OUT/run$run-procs-model_swap_serve.json 2>/tmp/r.log || tail -3 /tmp/r.log
python3 bench/torch/ab_summary.py $OUT/run$run-procs-model_swap_serve.json
