#!/usr/bin/env bash
# Run 145 (nineteenth session): where model_swap_serve's gap is (run 144: 1.051 in one process over 9 pairs, 8 of
# them with no driver call). `--per-call`: each call's host seconds (a generate waits for the device each token;
# the other models' calls may leave kernels to the next), summed by model, gmlake against native.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-145}
timeout ${LIMIT:-150} python3 bench/torch/workload_ab.py model_swap_serve --runs ${RUNS:-3} --per-call \
  > $OUT/run$run-percall-model_swap_serve.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 bench/torch/ab_summary.py $OUT/run$run-percall-model_swap_serve.json
