#!/usr/bin/env bash
# Runs 130-131 (H100, seventeenth session): lag growth bounded above the highest allocated bytes
# (lag_headroom_permille, a Config key since this session) against the default of the build before (no bound),
# one machine, the settings one after the other per workload:
#   WORKLOADS: bench/torch/workload_ab.py W --runs RUNS (the workload whole, both allocators in one process)
#   MODELS:    train.py's A/B (gpu91.sh: 35 pairs x 3 rounds)
#   CONFS:     tag=conf pairs ("nobound=lag_headroom_permille:1000000 b20=lag_headroom_permille:20")
# JSON: $OUT/run<RUN>-<tag>-<workload>.json and $OUT/run<RUN>-<tag>-ab_<model>.json.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-130}
confs=${CONFS:-nobound=lag_headroom_permille:1000000 b20=lag_headroom_permille:20}
for w in ${WORKLOADS:-}; do
  for tc in $confs; do
    tag=${tc%%=*}; c=${tc#*=}
    echo "##### $w $tag '$c'"
    timeout ${LIMIT:-200} python3 bench/torch/workload_ab.py $w --runs ${RUNS:-3} --conf "$c" > $OUT/run$run-$tag-$w.json 2> /tmp/r.log || tail -3 /tmp/r.log
    python3 bench/torch/ab_summary.py $OUT/run$run-$tag-$w.json
  done
done
if [ -n "${MODELS:-}" ]; then
  RUN=$run MODELS="$MODELS" CONFS="$confs" PAIRS=35 bash bench/gpu-runs/2026-11-27/gpu91.sh 2>&1 |
    grep -E "round|#####|FAILED|Error|Model" | cut -c1-330
fi
