#!/usr/bin/env bash
# Run 103 (H100, thirteenth session): where the host's time goes in gan_train under each allocator (run 102: the host
# sets the pace, its plain steps 10.78 ms under native and 11.33 under gmlake): perf (Debian's linux-perf, carried
# in .dev/perf.tar.xz) samples whole runs of each allocator alone, in turn, then reports the share of each shared
# object and the top symbols. Run 103 ran run103_one.py, since folded into workload_ab.py --alone (the same code).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p /tmp/perf && tar -xJf .dev/perf.tar.xz -C /tmp/perf
P="env LD_LIBRARY_PATH=/tmp/perf/perf /tmp/perf/perf/perf"
$P --version; cat /proc/sys/kernel/perf_event_paranoid
D=bench/gpu-runs/2026-11-27
if [ -z "${EVENT:-}" ]; then $P stat -e cycles true >/dev/null 2>&1 && EVENT="-e cycles" || EVENT="-e cpu-clock"; fi; echo "event: $EVENT"
W=${WORKLOAD:-gan_train}
for a in ${ORDER:-native gmlake native gmlake}; do
  rm -f /tmp/ctl; mkfifo /tmp/ctl
  i=$((${i:-0}+1))
  PERF_CTL=/tmp/ctl timeout 150 $P record $EVENT -F 4000 -D -1 --control fifo:/tmp/ctl \
    -o /tmp/p$i-$a.data env LD_LIBRARY_PATH=$LD_LIBRARY_PATH python3 bench/torch/workload_ab.py $W --alone $a --runs ${RUNS:-3} 2> /tmp/p$i.log | tail -1
  echo "rc=$? $a"; grep -v "^\[" /tmp/p$i.log | tail -2 | cut -c1-200
  $P report -i /tmp/p$i-$a.data --no-children --sort dso --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -14 > $OUT/run103-$i-$a-dso.txt
  $P report -i /tmp/p$i-$a.data --no-children --sort dso,sym --stdio 2>/dev/null | grep -v "^#" | grep -v "^$" | head -60 > $OUT/run103-$i-$a-sym.txt
  $P report -i /tmp/p$i-$a.data --no-children --sort comm,dso --stdio 2>/dev/null | grep -E "Samples|Event count" | head -3
  head -14 $OUT/run103-$i-$a-dso.txt
done
