#!/usr/bin/env bash
# Next session's first calls (written in the twentieth, not run: its device time was spent). Run 149: one allocator
# per process, gmlake's runs of model_swap_serve fault 641,943 host pages each (every run alike), native's 244k-337k,
# all in cuMemcpyDtoHAsync (run 147: Module.to("cpu") writing new host tensors), and gmlake's runs take 1.17x.
# A copy into a new host tensor faults alike from either allocator (run 148), so the lead is glibc's heap: where
# freed host tensors are given back to the kernel (trimmed, or each in its own mmap) in gmlake's process and reused
# in native's. workload_ab now reports each run's minflt and glibc's heap (heap_bytes, heap_free_bytes,
# mmapped_bytes, mallinfo2), and with --per-call the faults by the model each call moved out. Arithmetic on run 149
# (docs/benchmarks.md, twentieth): native's faults are about the pages of the two embeddings over glibc's 32 MiB
# mmap ceiling (GPT-2's 77 MB x 9 moves out, BERT's 62.5 MB x 5), gmlake's about those plus every page of every ViT
# and ResNet-50 move out (7 x 173 MB, 8 x 51 MB): faults_by_swapped says whether that is so.
#   PART=procs:    whether libcuda or libc10 import mallopt; copy_bw's d2h_new out of blocks of 2 MiB chunks; then
#                  the per-process A/B again, with the heap figures and, under bench/torch/malloc_count.c, each
#                  run's host mallocs (about 330 s). Before carrying: gcc -O2 -shared -fPIC -o
#                  .dev/malloc_count.so bench/torch/malloc_count.c -ldl (built there if missing).
#   PART=tunables: the same with glibc's thresholds fixed for both allocators (tensors up to 32 MiB from the heap,
#                  no trim below 1 GiB free): if gmlake's faults and time fall to native's, the heap is the cause.
#   PART=inproc:   both allocators in one process (one heap), under malloc_count.c: do gmlake's runs still fault
#                  more, and does anything (libcuda?) make more large mallocs in gmlake's runs? Then gmlake alone
#                  with one chunk per block: the chunked layout or the rest of the policy? (about 220 s)
# Each part is one call: PART=procs, then PART=tunables, then PART=inproc.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
run=${RUN:-150}
W=model_swap_serve
show='
import json, sys; r = json.load(open(sys.argv[1]))
for p in r.get("processes", []):
    print(p["allocator"], [(x["wall_s"], x["minflt"], x.get("heap_bytes"), x.get("heap_free_bytes"), x.get("mmapped_bytes")) for x in p["runs"]])
    for x in p["runs"]:
        print("  faults by model moved out", x.get("faults_by_swapped"))
        if "mallocs" in x:
            print("  mallocs", x["mallocs"], "large", x["large_mallocs"], x["large_malloc_bytes"], "huge", x["huge_mallocs"],
                  sorted(x["large_mallocs_by_object"].items(), key=lambda kv: -kv[1][1])[:6])
for p in r.get("pairs", []):
    print(p["ratio"], "minflt native", p["native_minflt"], "gmlake", p["gmlake_minflt"], "gmlake heap", p.get("gmlake_heap_bytes"), p.get("gmlake_mmapped_bytes"))
    print("  faults by model moved out: native", p.get("native_faults_by_swapped"), "gmlake", p.get("gmlake_faults_by_swapped"))
    for a in ("native", "gmlake"):
        if a + "_mallocs" in p:
            print("  ", a, "mallocs", p[a + "_mallocs"], "large", p[a + "_large_mallocs"], "huge", p[a + "_huge_mallocs"],
                  sorted(p[a + "_large_mallocs_by_object"].items(), key=lambda kv: -kv[1][1])[:6])
print("total_ratio", r["total_ratio"], "median_ratio", r["median_ratio"])'
case ${PART:?PART=procs, tunables or inproc} in
  procs|tunables)
    if [ $PART = procs ]; then  # does the driver or PyTorch set glibc's malloc parameters (mallopt)? THP mode?
      for lib in $(ldconfig -p | awk '/libcuda.so.1 /{print $NF}' | head -1) \
                 $(python3 -c "import torch, os; print(os.path.join(os.path.dirname(torch.__file__), 'lib', 'libc10.so'))"); do
        if command -v objdump > /dev/null; then
          echo "$lib imports mallopt: $(objdump -T "$lib" | grep -c -w mallopt)"
        else  # no binutils: the name in the file's strings (its dynamic string table holds the imports' names)
          echo "$lib holds the string mallopt: $(grep -a -c mallopt "$lib")"
        fi
      done
      cat /sys/kernel/mm/transparent_hugepage/enabled
      # A copy into a new host tensor out of a block made of many 2 MiB chunks (run 148's blocks may have been one
      # chunk each): does the driver's pageable path over many chunks fault more pages than the copy's own?
      timeout 120 python3 bench/torch/copy_bw.py --conf max_chunk_bytes:2M,chunks_per_block:0 --sizes 8,74 --reps 6 \
        > $OUT/run$run-copy_bw_chunk2M.json 2>/tmp/e.log || tail -3 /tmp/e.log
      python3 -c "
import json; r = json.load(open('$OUT/run$run-copy_bw_chunk2M.json'))
for s in r['sizes']: print(s['mib'], 'd2h_new', s['d2h_new'])"
    fi
    [ $PART = tunables ] && export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=1073741824
    # PART=procs: every process under bench/torch/malloc_count.c (built here, carried in .dev/): each run's host
    # mallocs, those of 128 KiB or more by the shared object that asked.
    if [ $PART = procs ]; then
      [ -f .dev/malloc_count.so ] || gcc -O2 -shared -fPIC -o .dev/malloc_count.so bench/torch/malloc_count.c -ldl
      export LD_PRELOAD=$PWD/.dev/malloc_count.so
    fi
    timeout ${LIMIT:-275} python3 bench/torch/workload_ab.py $W --processes --runs ${RUNS:-2} --runs-per-process 2 --per-call \
      > $OUT/run$run-$PART-$W.json 2>/tmp/a.log || tail -3 /tmp/a.log
    python3 -c "$show" $OUT/run$run-$PART-$W.json ;;
  inproc)
    [ -f .dev/malloc_count.so ] || gcc -O2 -shared -fPIC -o .dev/malloc_count.so bench/torch/malloc_count.c -ldl
    export LD_PRELOAD=$PWD/.dev/malloc_count.so  # each arm's host mallocs, in one process
    timeout ${LIMIT:-200} python3 bench/torch/workload_ab.py $W --runs ${RUNS:-6} --per-call > $OUT/run$run-inproc-$W.json \
      2>/tmp/a.log || tail -3 /tmp/a.log
    python3 -c "$show" $OUT/run$run-inproc-$W.json
    # gmlake alone with one chunk per block (no block spans chunks; the stream fence as at the default): do its
    # runs fault as the default's (the fence, or something else of the policy) or as native's (the chunked layout)?
    timeout 100 python3 bench/torch/workload_ab.py $W --alone gmlake --conf max_chunk_bytes:1G,chunks_per_block:0 \
      --runs 2 --per-call > $OUT/run$run-onechunk-$W.json 2>/tmp/o.log || tail -3 /tmp/o.log
    python3 -c "
import json; r = json.load(open('$OUT/run$run-onechunk-$W.json'))
print('one chunk per block', [(x['wall_s'], x['minflt'], x['stream_event_calls'], x.get('heap_bytes'), x.get('faults_by_swapped')) for x in r['runs']])" ;;
esac
