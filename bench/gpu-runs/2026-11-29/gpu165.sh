#!/usr/bin/env bash
# Run 165 (H200, twenty-third session): the ninth held-out batch (captured in run 164) run whole under both allocators
# in one process at today's default (bench/torch/workload_ab.py W --runs N: an untimed pair, then N timed pairs,
# native then gmlake), one workload after the other on one machine. JSON: $OUT/run165-default-<workload>.json.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
run=${RUN:-165}
for wn in ${WORKLOADS:-maskrcnn_infer:6 multistream_embed_serve:6 ssm_lm_train:6 chunked_ce_train:4 vector_search_infer:3}; do
  w=${wn%%:*}; n=${wn#*:}
  echo "##### $w $n pairs"
  timeout ${LIMIT:-170} python3 bench/torch/workload_ab.py $w --runs $n > $OUT/run$run-default-$w.json 2> /tmp/r.log ||
    tail -3 /tmp/r.log
  python3 bench/torch/ab_summary.py $OUT/run$run-default-$w.json
done
