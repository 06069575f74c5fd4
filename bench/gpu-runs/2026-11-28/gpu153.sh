#!/usr/bin/env bash
# Run 153 (twenty-first session): model_swap_serve one allocator per process (2 pairs of processes x 2 runs) with the
# host heap held by the lighter setting that closed the gap alone in run 151 (mmap threshold 32 MiB, trim threshold
# 256 MiB) for both allocators, or, where the machine has one, under a preloaded jemalloc or tcmalloc for both.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
W=model_swap_serve
ldconfig -p | grep -E "jemalloc|tcmalloc" || echo "no jemalloc or tcmalloc in ldconfig"
alt=$(ldconfig -p | awk '/libjemalloc.so.2 |libtcmalloc_minimal.so.4 |libtcmalloc.so.4 /{print $NF}' | head -1)
if [ -n "$alt" ]; then
  echo "preloading $alt"; export LD_PRELOAD=$alt; tag=$(basename $alt .so.2)
else
  export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456; tag=trim256
fi
timeout 280 python3 bench/torch/workload_ab.py $W --processes --runs 2 --runs-per-process 2 --per-call \
  > $OUT/run153-$tag-$W.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 bench/torch/ab_summary.py $OUT/run153-$tag-$W.json | head -8
