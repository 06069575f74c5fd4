#!/usr/bin/env bash
# Run 151 (twenty-first session). Run 150's PART=tunables removed model_swap_serve's per-process gap (total 1.003,
# faults 38k-74k a run for gmlake against 605k-630k untuned): glibc's heap, not the engine. Which thresholds does it
# take? glibc's dynamic ceiling from the start (mmap 32 MiB, trim 64 MiB: what it reaches after freeing a 32 MiB
# mmapped chunk) or a larger trim threshold (256 MiB)? Each allocator alone in its own process, 2 timed runs.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
W=model_swap_serve
for trim_mib in 64 256; do
  for alloc in gmlake native; do
    GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=$((trim_mib << 20)) \
      timeout 110 python3 bench/torch/workload_ab.py $W --alone $alloc --runs 2 --per-call \
      > $OUT/run151-trim${trim_mib}-$alloc.json 2>/tmp/a.log || tail -3 /tmp/a.log
    python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))
print('trim $trim_mib MiB', '$alloc', [(x['wall_s'], x['minflt'], x.get('faults_by_swapped')) for x in r['runs']])" \
      $OUT/run151-trim${trim_mib}-$alloc.json
  done
done
