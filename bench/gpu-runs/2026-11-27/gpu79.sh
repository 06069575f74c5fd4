#!/usr/bin/env bash
# Run 79 (H100, tenth session): (1) the engine's CPU time on sim, the build of 8607313 (old) and of this session's
# engine (new: POPCNT, the idle tracer out of the call path, ArenaSet::get inline) alternating, three times each,
# on every shipped trace; (2) the GPU tests, the device pool's, the PyTorch allocator test and cuda against sim with
# the new binaries (the commands as run, now in scripts/gpu-checks-carried.sh); (3) seg_train_fp16 captured again
# with a 90 s budget (run 78 made 6 steps in 21 s).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
mkdir -p $OUT/r79
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
lscpu | grep -E "^Model name|^CPU\(s\)"
for i in 1 2 3; do
  for b in old new; do
    B=.dev/bin/gmlake_bench; [ $b = old ] && B=.dev/bin/gmlake_bench_old
    GMLAKE_BENCH_TRACES=$PWD/traces timeout 100 $B --benchmark_filter='replay/.*/(gmlake|caching)/' \
      --benchmark_format=json --benchmark_out=$OUT/r79/bench-$b$i.json > /dev/null 2>&1
    echo "$b$i rc $? $(python3 bench/gpu-runs/2026-11-27/nsop.py $OUT/r79/bench-$b$i.json | tail -1)"
  done
done
scripts/gpu-checks-carried.sh $OUT/r79
python3 bench/torch/capture_traces.py --xz-dir $OUT/r79 --json-dir $OUT/r79 --unrecorded --only seg_train_fp16 \
  2>&1 | tee $OUT/r79/capture.log | grep -v "params:" | cut -c1-600
tar czf $OUT/run79.tgz -C $OUT r79 && rm -rf $OUT/r79
