#!/usr/bin/env bash
# Written in the twenty-first session for the next (its device time was spent). model_swap_serve one allocator per
# process, 4 pairs of processes x 2 runs (about 420 s a part): is there a gap once the host heap is held for both
# (run 150: 1.003; run 154: 1.265 with even faults, gmlake's resident GPT-2 generate calls slower), and does it sit
# in every generate call or in a few? Each run now records every call's host time (call_times, --per-call).
#   PART=held:    GLIBC_TUNABLES mmap threshold 32 MiB, trim threshold 1 GiB, for both allocators.
#   PART=default: glibc's defaults (the user's case).
#   PART=device:  the heap held, 2 pairs, each timed run profiled (--device-time: kernel, copy and memset seconds
#                 from torch.profiler's CUDA activity): does a slow gmlake run spend more on the device or the host?
#   PART=chunks:  bench/torch/weights_ab.py with gmlake's blocks made of 2 MiB chunks (max_chunk_bytes:2M,
#                 chunks_per_block:0): are GPT-2's generate and its GEMV slower over weights spread over many chunks
#                 (run 146, at the default: no)? About 120 s.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
W=model_swap_serve
extra=()
if [ "${PART:-}" = chunks ]; then
  timeout ${LIMIT:-150} python3 bench/torch/weights_ab.py --conf max_chunk_bytes:2M,chunks_per_block:0 --calls 12 \
    --pairs 4 > $OUT/run${RUN:-155}-chunks-weights_ab.json 2>/tmp/w.log || tail -3 /tmp/w.log
  python3 -c "
import json, sys; r = json.load(open(sys.argv[1]))
for a, v in r['activations'].items(): print('activations', a, round(v['total_ratio'], 4))
print('wte gemv', r['wte_gemv'])" $OUT/run${RUN:-155}-chunks-weights_ab.json
  exit 0
fi
held=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824  # freed host heap kept up to 1 GiB
case ${PART:?PART=held, default, device or chunks} in
  held) export GLIBC_TUNABLES=$held ;;
  default) ;;
  device) export GLIBC_TUNABLES=$held; extra=(--device-time); RUNS=${RUNS:-2} ;;
  *) echo "PART=held, default, device or chunks"; exit 2 ;;
esac
timeout ${LIMIT:-560} python3 bench/torch/workload_ab.py $W --processes --runs ${RUNS:-4} --runs-per-process 2 --per-call \
  "${extra[@]}" > $OUT/run${RUN:-155}-$PART-$W.json 2>/tmp/a.log || tail -3 /tmp/a.log
python3 bench/torch/ab_summary.py $OUT/run${RUN:-155}-$PART-$W.json | head -12
python3 -c "
import json, statistics, sys; r = json.load(open(sys.argv[1]))
for p in r['processes']:
    for x in p['runs']:
        g = sorted(t for k, t in x.get('call_times', []) if k.startswith('gpt2'))
        if 'kernel_s' in x:
            print(p['allocator'], x['wall_s'], 'device: kernels', x['kernel_s'], x['kernels'], 'memcpy', x['memcpy_s'], 'memset', x['memset_s'])
        print(p['allocator'], x['wall_s'], x['minflt'], 'gpt2 calls s: median', round(statistics.median(g), 4) if g else None,
              'max', round(g[-1], 4) if g else None, 'all', [round(t, 3) for t in g])" $OUT/run${RUN:-155}-$PART-$W.json
