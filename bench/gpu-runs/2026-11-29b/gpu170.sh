#!/usr/bin/env bash
# Run 170 (H200, twenty-fourth session): multistream_embed_serve in one process with each call's host time
# (workload_ab.py --per-call): whether gmlake's excess lies in the serving ticks or in the run's setup (the
# BertModel built on the host and moved to the device, before the first tick's stamp).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run=${RUN:-170}
for wn in ${WORKLOADS:-multistream_embed_serve:10}; do
  w=${wn%%:*}; n=${wn#*:}
  echo "##### $w $n pairs, per call"
  timeout ${LIMIT:-240} python3 bench/torch/workload_ab.py $w --runs $n --per-call ${CONF:+--conf $CONF} \
    > $OUT/run$run-percall-$w.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 bench/torch/ab_summary.py $OUT/run$run-percall-$w.json
done
