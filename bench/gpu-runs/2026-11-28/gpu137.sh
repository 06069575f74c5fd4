#!/usr/bin/env bash
# Runs 137-138 (eighteenth session, H200): an eighth held-out batch of workloads, written after the default was last
# changed (66b236b) and replayed only once captured.
#   PART=capture (run 137): capture_traces.py --unrecorded, budget scale 0.7, as gpu87.sh captured the fourth to
#     seventh: graphed_decode_serve, model_swap_serve, ckpt_longseq_train. The JSON also goes to traces/ here so
#     that PART=ab in the same machine finds the call counts. $OUT/run137.tgz.
#   PART=ab (run 138): workload_ab.py W --runs RUNS in one process for each of WORKLOADS.
set -uo pipefail
export PYTHONUNBUFFERED=1
run=${RUN:-137}
only=${ONLY:-graphed_decode_serve,model_swap_serve,ckpt_longseq_train}
case ${PART:-capture} in
  capture)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    mkdir -p $OUT/r$run
    timeout 540 python3 bench/torch/capture_traces.py --xz-dir $OUT/r$run --json-dir traces --unrecorded \
      --budget-scale ${SCALE:-0.7} --deadline 400 --only $only 2>&1 | tee $OUT/r$run/capture.log | grep -v "params:"
    for w in ${only//,/ }; do cp traces/$w.native.json $OUT/r$run/ 2>/dev/null; done
    ls -la $OUT/r$run
    tar czf $OUT/run$run.tgz -C $OUT r$run && rm -rf $OUT/r$run ;;
  ab)
    source .dev/gpu_env.sh
    export PYTHONPATH=$PWD/python
    for w in ${WORKLOADS:-graphed_decode_serve model_swap_serve}; do
      echo "##### $w"
      timeout ${LIMIT:-240} python3 bench/torch/workload_ab.py $w --runs ${RUNS:-3} > $OUT/run$run-default-$w.json 2> /tmp/r.log || tail -5 /tmp/r.log
      python3 bench/torch/ab_summary.py $OUT/run$run-default-$w.json
    done ;;
esac
