#!/usr/bin/env bash
# Run 104 (H100, thirteenth session): a workload as its user runs it, one allocator per process: PAIRS pairs of
# processes, native and gmlake in turn (the order swapped each pair), each one untimed run and RUNS timed runs of
# the workload whole (run103_one.py). Run 103 found gan_train faster alone under gmlake (2.64-2.95 s against
# 2.76-3.47 under perf), while in one process with both allocators (workload_ab.py) both run slower, gmlake more.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
D=bench/gpu-runs/2026-11-27
for W in ${WORKLOADS:-gan_train}; do
  : > $OUT/run104-$W.jsonl
  for p in $(seq 1 ${PAIRS:-5}); do
    if [ $((p % 2)) -eq 1 ]; then order="native gmlake"; else order="gmlake native"; fi
    for a in $order; do
      timeout 120 python3 $D/run103_one.py $W $a --runs ${RUNS:-3} 2> /tmp/r104.log | tail -1 >> $OUT/run104-$W.jsonl || tail -3 /tmp/r104.log
    done
  done
  python3 - $OUT/run104-$W.jsonl <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = {a: [x for r in rows if r["allocator"] == a for x in r["runs_s"]] for a in ("native", "gmlake")}
for a in t: print(rows[0]["workload"], a, len(t[a]), "runs, median", round(statistics.median(t[a]), 4), "total", round(sum(t[a]), 3), [round(x, 2) for x in t[a]])
print("ratio gmlake/native: median", round(statistics.median(t["gmlake"]) / statistics.median(t["native"]), 4), "total", round(sum(t["gmlake"]) / sum(t["native"]), 4))
PY
done
