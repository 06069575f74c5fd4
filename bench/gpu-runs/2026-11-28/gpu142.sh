#!/usr/bin/env bash
# Next session's first call (written in the eighteenth, not run: no device time left). Two questions run 139-141 left:
#   1. model_swap_serve one allocator per process (1.080 in run 139): with --alone's counters (workload_ab.py since
#      this session), does gmlake call the driver in its timed runs, and does the gap hold over 4 pairs?
#   2. copy_bw.py with the host's time per call: does the driver split a device -> device copy over many chunks on
#      the host (the call's own time grows) or does the copy run slower on the device?
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-142}
timeout 240 python3 bench/torch/copy_bw.py --sizes 64,256,1024 --reps 10 > $OUT/run$run-copy_bw_default.json 2>/tmp/e.log || tail -3 /tmp/e.log
python3 -c "
import json; r=json.load(open('$OUT/run$run-copy_bw_default.json'))
for s in r['sizes']: print(s['mib'], {k: (v['time_ratio'], v['native_call_us'], v['gmlake_call_us']) for k, v in s.items() if k != 'mib'})"
timeout ${LIMIT:-420} python3 bench/torch/workload_ab.py model_swap_serve --processes --runs ${RUNS:-4} --runs-per-process 2 \
  > $OUT/run$run-procs-model_swap_serve.json 2>/tmp/r.log || tail -3 /tmp/r.log
python3 bench/torch/ab_summary.py $OUT/run$run-procs-model_swap_serve.json
