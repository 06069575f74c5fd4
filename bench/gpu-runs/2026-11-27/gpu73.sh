#!/usr/bin/env bash
# Run 73 (ninth session; binaries of e7d4d78 in .dev/bin and .dev/lib): the engine's CPU time on sim over every
# shipped trace on this machine's CPU (gmlake_bench replay/ for gmlake and caching, 3 repetitions, machine idle),
# then the memory-first setting (in_order_moves:true,lag_grow_pages:0) against the default on GPT-2 varlen and BERT
# varlen training (35 pairs, 3 rounds, one after the other in one call: scripts/gpu-steptime-ab.sh).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
nproc; grep "model name" /proc/cpuinfo | head -1
GMLAKE_BENCH_TRACES=$PWD/traces timeout 150 .dev/bin/gmlake_bench --benchmark_filter='replay/.*/(gmlake|caching)/' \
  --benchmark_repetitions=3 --benchmark_format=json --benchmark_out=$OUT/run73-bench.json > /dev/null 2>&1
echo "bench rc $?"
python3 bench/gpu-runs/2026-11-27/nsop.py $OUT/run73-bench.json | tail -1
mkdir -p $OUT/r73
for m in ${MODELS:-gpt2 bert}; do
  for c in "" "in_order_moves:true,lag_grow_pages:0"; do
    tag=${c:+memfirst}; tag=${tag:-default}
    echo "##### $m conf '$c'"
    GMLAKE_CONF_AB="$c" ROUNDS=3 timeout ${LIMIT:-150} scripts/gpu-steptime-ab.sh $OUT/r73/$tag ${PAIRS:-35} $m 2>&1 | cut -c1-420
    cp $OUT/r73/$tag/ab_$m.json $OUT/run73-$tag-ab_$m.json 2>/dev/null
  done
done
rm -rf $OUT/r73
