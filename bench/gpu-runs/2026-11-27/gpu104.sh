#!/usr/bin/env bash
# Runs 104-106, 110 (H100, thirteenth session): a workload as its user runs it, one allocator per process
# (bench/torch/workload_ab.py --processes: PAIRS pairs of processes, native and gmlake in turn, each one untimed
# run and RUNS timed runs of the workload whole). Run 103 found gan_train faster alone under gmlake, while in one
# process with both allocators (workload_ab.py's default) runs 95-102 had measured it 1.04-1.08. Run 104 ran the same
# loop written here in shell around run103_one.py (since folded into workload_ab.py --alone).
# Run 105 (IN_PROCESS=1 ALONE_RUNS=10): then, on the same machine, the in-process A/B (PAIRS pairs) and each
# allocator alone for ALONE_RUNS runs in a row: does the in-process slowdown come with the number of runs?
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
R=${RUN:-104}
for W in ${WORKLOADS:-gan_train}; do
  echo "##### $W processes"
  timeout 400 python3 bench/torch/workload_ab.py $W --processes --runs ${PAIRS:-5} --runs-per-process ${RUNS:-3} \
    > $OUT/run$R-processes-$W.json 2> /tmp/r.log || tail -3 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run$R-processes-$W.json'))
for p in r['processes']: print(p['allocator'], p['runs_s'])
print('median_s', r['median_s'], 'ratio median', round(r['median_ratio'], 4), 'total', round(r['total_ratio'], 4))"
  if [ -n "${IN_PROCESS:-}" ]; then
    echo "##### $W in one process"
    timeout 200 python3 bench/torch/workload_ab.py $W --runs ${PAIRS:-5} > $OUT/run$R-inprocess-$W.json 2> /tmp/r.log || tail -3 /tmp/r.log
    python3 -c "
import json; r=json.load(open('$OUT/run$R-inprocess-$W.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4))
for p in r['pairs']: print(p['native_s'], p['gmlake_s'], p['ratio'])"
  fi
  if [ -n "${ALONE_RUNS:-}" ]; then
    for a in native gmlake; do
      echo "##### $W $a alone, $ALONE_RUNS runs"
      timeout 150 python3 bench/torch/workload_ab.py $W --alone $a --runs $ALONE_RUNS 2> /tmp/r.log | tee $OUT/run$R-alone-$a-$W.json || tail -3 /tmp/r.log
    done
  fi
done
