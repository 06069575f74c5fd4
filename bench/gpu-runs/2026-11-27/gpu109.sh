#!/usr/bin/env bash
# Run 109 (H100, thirteenth session): after workload_ab.alternate() took the pairs' loop that workload_ab.py and
# run102_gan_diag.py each had (duplicates --change), both run again, briefly, with --processes: that each still runs.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
echo "##### workload_ab in one process"
timeout 100 python3 bench/torch/workload_ab.py gan_train --runs 2 > $OUT/run109-inprocess.json 2> /tmp/r.log || tail -3 /tmp/r.log
cut -c1-600 $OUT/run109-inprocess.json
echo "##### run102_gan_diag"
timeout 150 python3 bench/gpu-runs/2026-11-27/run102_gan_diag.py --pairs 2 > $OUT/run109-diag.json 2> /tmp/r.log || tail -3 /tmp/r.log
grep -E "^(micro|pair)" /tmp/r.log; python3 -c "import json; r=json.load(open('$OUT/run109-diag.json')); print(round(r['total_ratio'],4), r['median'])"
echo "##### --processes"
timeout 120 python3 bench/torch/workload_ab.py gan_train --processes --runs 1 --runs-per-process 2 > $OUT/run109-processes.json 2> /tmp/r.log || tail -3 /tmp/r.log
cut -c1-600 $OUT/run109-processes.json
