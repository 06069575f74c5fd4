#!/usr/bin/env bash
# Run 198 (thirtieth session): pipeline_1f1b_train ran 1.038 in run 197's one-process A/B (5 pairs), with 130-146 ms
# of VMM and 2,000-2,300 evictions in every timed run of the same 13 steps: moves that do not stop. The move budget
# charges only moves made while the device waits, and the stream has queued work here, so none is refused. Is the
# excess those moves? The default again, then a per-operation move budget (move_budget_ns_per_op:200, which charges
# every move), 8 pairs each, in one call.
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07d/run198.sh $OUT
set -uo pipefail
out=${1:?usage: run198.sh OUT}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for c in "" move_budget_ns_per_op:200; do
  tag=${c:-default}; tag=${tag%%:*}
  timeout 200 python3 bench/torch/workload_ab.py pipeline_1f1b_train --runs ${RUNS:-8} ${c:+--conf $c} \
    > "$out/run198-ab-pipeline_1f1b_train-$tag.json" 2> /tmp/ab.log || tail -3 /tmp/ab.log
  python3 -c "
import json; r=json.load(open('$out/run198-ab-pipeline_1f1b_train-$tag.json'))
print('$tag', {k: v for k, v in r.items() if not isinstance(v, (list, dict))})
for p in r['pairs']: print('  ', p['ratio'], p['gmlake_vmm_ms'], p['gmlake_evictions'], p['gmlake_chunks_created'])" 2>&1 | tail -12
done
