#!/usr/bin/env bash
# Twenty-second session, run 163: at glibc's defaults, which of model_swap_serve's host tensors from 128 KiB up to
# 32 MiB does glibc give a mapping of their own (unmapped at their free, so faulted in again at the next swap)
# in gmlake's process and in native's? One process each, one timed run, bench/torch/malloc_count.c preloaded
# (large_mmapped: the IS_MMAPPED bit of each returned chunk). Needs .dev/malloc_count.so (gcc -O2 -shared -fPIC
# -o .dev/malloc_count.so bench/torch/malloc_count.c -ldl).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1 LD_PRELOAD=$PWD/.dev/malloc_count.so
W=model_swap_serve
timeout ${LIMIT:-200} python3 bench/torch/workload_ab.py $W --processes --runs 1 --runs-per-process 1 --per-call \
  > $OUT/run${RUN:-163}-mapped-$W.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))
for p in r['processes']:
    for x in p['runs']:
        print(p['allocator'], x['wall_s'], 'faults', x['minflt'], 'large', x.get('large_mallocs'), 'mapped', x.get('large_mmapped'),
              round(x.get('large_mmapped_bytes', 0) / 2**20, 1), 'MiB', 'heap', x.get('heap_bytes'), 'mmapped now', x.get('mmapped_bytes'),
              x.get('faults_by_swapped'))" $OUT/run${RUN:-163}-mapped-$W.json
