#!/usr/bin/env bash
# Runs 135-136 (eighteenth session, H200): what the seventeenth left open.
#   PART=procs: token_budget_train one allocator per process (workload_ab.py --processes): its 1.049 in one process
#               (run 134) had no VMM call and no fence wait in two of three pairs.
#   PART=checks: the GPU checks on this build (scripts/gpu-checks-carried.sh), then zero_offload_train's in-process
#               A/B with a limit that fits its 15 s runs (run 134 passed 140 s).
# JSON: $OUT/run<RUN>-*.json; logs under $OUT/checks.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-135}
case ${PART:-procs} in
  procs)
    timeout ${LIMIT:-420} python3 bench/torch/workload_ab.py token_budget_train --processes --runs ${RUNS:-3} \
      --runs-per-process ${RPP:-2} > $OUT/run$run-procs-token_budget_train.json 2> /tmp/r.log || tail -5 /tmp/r.log
    python3 bench/torch/ab_summary.py $OUT/run$run-procs-token_budget_train.json ;;
  checks)
    scripts/gpu-checks-carried.sh $OUT/checks; echo "checks rc $?"
    timeout ${LIMIT:-330} python3 bench/torch/workload_ab.py zero_offload_train --runs ${RUNS:-3} \
      > $OUT/run$run-default-zero_offload_train.json 2> /tmp/r.log || tail -5 /tmp/r.log
    python3 bench/torch/ab_summary.py $OUT/run$run-default-zero_offload_train.json ;;
esac
