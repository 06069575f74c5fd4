#!/usr/bin/env bash
# Run 102 (H100, thirteenth session): gan_train's excess under gmlake, taken apart (run102_gan_diag.py: the host
# cost of an allocation and its free as PyTorch calls them, and per-step host and GPU time of whole runs), then the
# same workload through the extension with gmlake's own `caching` and `expandable` policies (the extension, the C
# API and the cuda backend without gmlake's engine), then the engine's ns/op on this host's CPU (sim backend).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
lscpu | grep -E "Model name|^CPU\(s\)|MHz" | head -4
D=bench/gpu-runs/2026-11-27
echo "##### diag default"
timeout 240 python3 $D/run102_gan_diag.py --pairs ${PAIRS:-8} > $OUT/run102-diag-default.json 2> $OUT/run102-diag-default.log
echo "rc=$?"; grep -E "^(micro|pair)" $OUT/run102-diag-default.log; tail -2 $OUT/run102-diag-default.log | cut -c1-300
python3 -c "
import json; r=json.load(open('$OUT/run102-diag-default.json')); print('total', round(r['total_ratio'],4)); print(json.dumps(r['median']))"
for c in ${CONFS:-policy:caching policy:expandable}; do
  echo "##### $c"
  timeout 120 python3 bench/torch/workload_ab.py gan_train --runs ${RUNS:-6} --conf $c > $OUT/run102-ab-${c#policy:}.json 2> $OUT/run102-ab.log
  echo "rc=$?"; tail -2 $OUT/run102-ab.log | cut -c1-300
  python3 -c "
import json; r=json.load(open('$OUT/run102-ab-${c#policy:}.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks', r['gmlake_peak_reserved'], r['native_peak_reserved'])
for p in r['pairs']: print(p)"
done
if [ -n "${BENCH:-1}" ]; then
  echo "##### engine ns/op"
  GMLAKE_BENCH_TRACES=$PWD/traces timeout 200 .dev/bin/gmlake_bench --benchmark_filter='replay/.*/(gmlake|caching)/' \
    --benchmark_repetitions=3 --benchmark_out=$OUT/run102-bench.json --benchmark_out_format=json > /dev/null 2>&1
  echo "rc=$?"; python3 $D/nsop.py $OUT/run102-bench.json | tail -3
fi
