#!/usr/bin/env bash
# Run 199 (thirtieth session): pipeline_1f1b_train at the default, a third sample after run 197 (1.038, 5 pairs) and
# run 198 (0.995, 8 pairs): 10 pairs in one process, then one allocator per process as a user runs it
# (workload_ab.py --processes, 3 pairs of processes, 3 timed runs each).
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07d/run199.sh $OUT
set -uo pipefail
out=${1:?usage: run199.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
timeout 130 python3 bench/torch/workload_ab.py pipeline_1f1b_train --runs 10 \
  > "$out/run199-ab-pipeline_1f1b_train.json" 2> /tmp/ab.log || tail -3 /tmp/ab.log
python3 -c "
import json; r=json.load(open('$out/run199-ab-pipeline_1f1b_train.json'))
print({k: v for k, v in r.items() if not isinstance(v, (list, dict))})
for p in r['pairs']: print('  ', p['ratio'], p['gmlake_vmm_ms'], p['gmlake_evictions'])"
timeout 160 python3 bench/torch/workload_ab.py pipeline_1f1b_train --processes --runs 3 --runs-per-process 3 \
  > "$out/run199-processes-pipeline_1f1b_train.json" 2> /tmp/ab.log || tail -3 /tmp/ab.log
python3 -c "
import json; r=json.load(open('$out/run199-processes-pipeline_1f1b_train.json'))
print({k: v for k, v in r.items() if not isinstance(v, (list, dict))})"
