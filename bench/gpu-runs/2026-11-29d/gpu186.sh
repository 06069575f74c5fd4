#!/usr/bin/env bash
# Run 186 (twenty-sixth session): the eleventh batch ran 1.02-1.04 in one process with gmlake's VMM at 0.1-0.4%
# of a run (runs 184-185), on workloads where the host sets the pace. Is it the allocator's CPU time per
# operation? bench/torch/op_cost.py (torch.empty / del, no kernels, both allocators in one process, alternating),
# in two processes; then nerf_rays_train one allocator per process, as a user runs it (workload_ab.py --processes).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for i in 1 2; do
  timeout 60 python3 bench/torch/op_cost.py --ops 100000 --rounds 5 --json $OUT/run186-op_cost-$i.json 2>&1 | tail -4
done
timeout ${LIMIT:-150} python3 bench/torch/workload_ab.py nerf_rays_train --processes --runs 3 --runs-per-process 3 \
  > $OUT/run186-processes-nerf_rays_train.json 2> /tmp/r.log || tail -3 /tmp/r.log
python3 -c "
import json; r=json.load(open('$OUT/run186-processes-nerf_rays_train.json'))
print({k: v for k, v in r.items() if not isinstance(v, (list, dict))})"
