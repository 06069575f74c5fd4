#!/usr/bin/env bash
# Next session's first call (written in the nineteenth, not run: its device time was spent). Run 145 found
# model_swap_serve's gap (1.11 that run) in its GPT-2 generate calls (gmlake / native host seconds 1.16, with a
# swap 1.19; BERT-large 1.09-1.38 on few calls; the swaps and image models 0.97-1.06), in runs with no VMM call.
# The engine's own time on that trace is 64 ns/op (12 ms a run, sim), and the stream fence's driver calls about
# 2,300 a run (replay --device-lag-us 50). Three questions:
#   PART=conf: the same --per-call A/B with gmlake's extension over the `caching` policy: is the gap the extension
#              and c10 path (it stays) or the gmlake policy (it goes)? Both report stream_event_calls now.
#   PART=perf: perf samples of each allocator alone (gpu103.sh's method): which shared object takes the time.
#   PART=weights: bench/torch/weights_ab.py: GPT-2 generate with the same weights held by gmlake or by native, the
#              activations from one allocator for both (train.py's generate A/B, 1.000, shares weights moved in
#              once; model_swap_serve moves them in under each run's allocator).
# PART=all (the default) runs weights then conf (at most 120 + 2 x 130 s: one call); PART=perf in a second call.
set -uo pipefail
if [ "${PART:-all}" = all ]; then
  for part in weights conf; do PART=$part bash "$0"; done
  exit 0
fi
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-146}
W=model_swap_serve
if [ "$PART" = weights ]; then
  timeout ${LIMIT:-120} python3 bench/torch/weights_ab.py --calls 12 --pairs 4 > $OUT/run$run-weights_ab.json \
    2>/tmp/w.log || tail -3 /tmp/w.log
  python3 -c "
import json; r=json.load(open('$OUT/run$run-weights_ab.json'))
for a, v in r['activations'].items(): print('activations', a, round(v['total_ratio'], 4), [(p['native_weights_s'], p['gmlake_weights_s']) for p in v['pairs']])
print('wte gemv', r['wte_gemv'])"
elif [ "$PART" = conf ]; then
  for conf in "" "policy:caching"; do
    tag=${conf:-default}; tag=${tag//:/-}
    timeout ${LIMIT:-130} python3 bench/torch/workload_ab.py $W --runs ${RUNS:-4} --per-call --conf "$conf" \
      > $OUT/run$run-percall-$tag.json 2>/tmp/a.log || tail -3 /tmp/a.log
    echo "conf ${conf:-default}"; python3 bench/torch/ab_summary.py $OUT/run$run-percall-$tag.json
  done
else
  mkdir -p /tmp/perf && tar -xJf .dev/perf.tar.xz -C /tmp/perf
  P="env LD_LIBRARY_PATH=/tmp/perf/perf /tmp/perf/perf/perf"
  $P stat -e cycles true >/dev/null 2>&1 && EVENT="-e cycles" || EVENT="-e cpu-clock"
  for a in native gmlake; do
    rm -f /tmp/ctl; mkfifo /tmp/ctl
    PERF_CTL=/tmp/ctl timeout 120 $P record $EVENT -F 4000 -D -1 --control fifo:/tmp/ctl -o /tmp/p-$a.data \
      env LD_LIBRARY_PATH=$LD_LIBRARY_PATH python3 bench/torch/workload_ab.py $W --alone $a --runs 3 2>/tmp/p.log | tail -1
    $P report -i /tmp/p-$a.data --no-children --sort dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -14 \
      > $OUT/run$run-$a-dso.txt
    $P report -i /tmp/p-$a.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -60 \
      > $OUT/run$run-$a-sym.txt
    echo "$a"; head -14 $OUT/run$run-$a-dso.txt
  done
fi
