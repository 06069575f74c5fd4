#!/usr/bin/env bash
# Run 149 (twentieth session). Run 148: a copy into a new host tensor faults once per 4 KiB page from gmlake's
# block and from native's alike (74 MiB: 18,945 each), yet run 147 counted 1.14 M faults in gmlake's process
# against 0.67 M in native's. One allocator per process, the minor faults of each timed run (workload_ab's new
# "minflt"): does gmlake's process fault more than native's on the same draws, and does its time follow?
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-149}
timeout ${LIMIT:-270} python3 bench/torch/workload_ab.py model_swap_serve --processes --runs ${RUNS:-2} \
  --runs-per-process ${PER:-2} > $OUT/run$run-procs-model_swap_serve.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 -c "
import json; r=json.load(open('$OUT/run$run-procs-model_swap_serve.json'))
for p in r['processes']: print(p['allocator'], [(x['wall_s'], x['minflt']) for x in p['runs']])
print('total_ratio', r['total_ratio'], 'median_ratio', r['median_ratio'], 'complete', r['complete'])"
