#!/usr/bin/env bash
# Run 148 (twentieth session). Run 147: every sampled page fault of model_swap_serve is in cuMemcpyDtoHAsync
# (Module.to("cpu") writing fresh pageable host pages), 1.14 M faults in gmlake's two runs against 0.67 M in
# native's and 0.52 M under gmlake's extension with the caching policy. (1) copy_bw.py's new d2h_new case: a device
# tensor of each size copied into a new host tensor, time and minor faults per copy, gmlake's block against
# native's. (2) the in-process A/B with more pairs than runs 144 (9) and 146 (4).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-148}
timeout ${LIMIT1:-120} python3 bench/torch/copy_bw.py --sizes ${SIZES:-2,8,74,256} --reps 10 \
  > $OUT/run$run-copy_bw_default.json 2>/tmp/e.log || tail -3 /tmp/e.log
python3 -c "
import json; r=json.load(open('$OUT/run$run-copy_bw_default.json'))
for s in r['sizes']:
    for c in ('d2h_new', 'd2h_pageable', 'h2d_pageable'): print(s['mib'], c, s[c])"
timeout ${LIMIT2:-330} python3 bench/torch/workload_ab.py model_swap_serve --runs ${RUNS:-20} \
  > $OUT/run$run-model_swap_serve.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 bench/torch/ab_summary.py $OUT/run$run-model_swap_serve.json
