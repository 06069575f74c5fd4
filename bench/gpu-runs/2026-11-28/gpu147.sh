#!/usr/bin/env bash
# Run 147 (twentieth session). Run 146's perf samples of model_swap_serve: gmlake's process spends 20% of its
# samples in the kernel against native's 9% (exc_page_fault 7.5% vs 3.5%, clear_page_erms, memcg charge,
# do_anonymous_page): first touches of anonymous host pages, about the whole gap in seconds. Which code touches
# them? perf samples every 50th page fault with a DWARF call chain, per allocator alone (native, gmlake, gmlake's
# extension over the caching policy), in the measured runs only (PERF_CTL).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-147}
W=${W:-model_swap_serve}
mkdir -p /tmp/perf && tar -xJf .dev/perf.tar.xz -C /tmp/perf
P="env LD_LIBRARY_PATH=/tmp/perf/perf /tmp/perf/perf/perf"
for arm in native gmlake caching; do
  a=$arm; conf=""; [ $arm = caching ] && { a=gmlake; conf=policy:caching; }
  rm -f /tmp/ctl; mkfifo /tmp/ctl
  PERF_CTL=/tmp/ctl timeout ${LIMIT:-110} $P record -e page-faults -c 50 --call-graph dwarf,8192 -D -1 \
    --control fifo:/tmp/ctl -o /tmp/f-$arm.data \
    env LD_LIBRARY_PATH=$LD_LIBRARY_PATH python3 bench/torch/workload_ab.py $W --alone $a --conf "$conf" \
    --runs ${RUNS:-2} 2>/tmp/p.log | tail -1 | cut -c1-160
  echo "== $arm: page-fault samples (x50)"; $P report -i /tmp/f-$arm.data --stdio 2>/dev/null | grep -m1 "Samples"
  $P report -i /tmp/f-$arm.data --no-children --sort dso,sym --stdio -g none 2>/dev/null | grep -v "^#" |
    grep -v "^$" | head -25 > $OUT/run$run-$arm-faults-leaf.txt
  $P report -i /tmp/f-$arm.data --no-children --sort dso --stdio -g caller,2,callee --percent-limit 3 2>/dev/null |
    grep -v "^$" | head -400 > $OUT/run$run-$arm-faults-chains.txt
  head -12 $OUT/run$run-$arm-faults-leaf.txt
done
