#!/usr/bin/env bash
# Run 112 (H100, fourteenth session), one machine:
# 1. fsdp_like_train's excess under gmlake, GPU or host: run112_gpu_gaps.py at the default and at
#    lag_grow_pages:256 (run 111's nearest time), each in its own process.
# 2. The hand-run scripts after they took workload_ab.load() and run_once(w, native, ctx) (the twins the
#    thirteenth session's re-read left): each run again, briefly, that it still runs.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
D=bench/gpu-runs/2026-11-27
for c in ${CONFS:-default lag_grow_pages:256}; do
  conf=$c; [ "$c" = default ] && conf=""; tag=${c//[:,]/-}
  echo "##### gaps $c"
  timeout 170 python3 $D/run112_gpu_gaps.py --pairs ${PAIRS:-2} --conf "$conf" > $OUT/run112-gaps-$tag.json 2> /tmp/r.log; tail -2 /tmp/r.log
  python3 -c "
import json; r=json.load(open('$OUT/run112-gaps-$tag.json'))
for p in r['pairs']: print('pair', p['ratio'], p['native']['wall_s'], p['gmlake'])
for k in r['top_kernels_ms']: print('  ', k)"
done
[ -n "${SKIP_CHECKS:-}" ] && exit 0
echo "##### workload_ab in one process, and --processes"
timeout 100 python3 bench/torch/workload_ab.py gan_train --runs 1 > $OUT/run112-inprocess.json 2> /tmp/r.log || tail -3 /tmp/r.log
cut -c1-400 $OUT/run112-inprocess.json; echo
timeout 120 python3 bench/torch/workload_ab.py gan_train --processes --runs 1 --runs-per-process 1 > $OUT/run112-processes.json 2> /tmp/r.log || tail -3 /tmp/r.log
cut -c1-400 $OUT/run112-processes.json; echo
echo "##### run98_profile, run100_cpu_profile, run102_gan_diag"
timeout 100 python3 $D/run98_profile.py gan_train 1 2>&1 | tail -4
timeout 100 python3 $D/run100_cpu_profile.py gan_train 2>&1 | grep "self CPU"
timeout 150 python3 $D/run102_gan_diag.py --pairs 1 > $OUT/run112-diag.json 2> /tmp/r.log || tail -3 /tmp/r.log
python3 -c "import json; r=json.load(open('$OUT/run112-diag.json')); print(round(r['total_ratio'],4), r['median'])"
