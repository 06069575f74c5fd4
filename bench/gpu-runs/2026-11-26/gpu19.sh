#!/usr/bin/env bash
# Run 19 (engine of fdf7c9f: chunk bound, page-table bitmaps, BlockTable, lake behind ChunkProvider): GPU tests,
# every shipped trace through gmlake on cuda (figures against sim), the A/B of gpt2 varlen; beside the fuzzers of
# 70f8e53 on 8 cores.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r19
FUZZ_CORES=8 scripts/fuzz-device.sh $OUT/r19/fz 545 .dev/fuzz > $OUT/r19/fuzz.log 2>&1 &
fpid=$!
timeout 120 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r19/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r19/gpu_tests.log | tail -8
timeout 50 .dev/bin/device_pool_gpu_tests --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|SKIPPED" | tail -3
timeout 100 .dev/bin/gmlake replay traces/*.snapshot.pickle.xz --policy gmlake --backend cuda --json $OUT/r19/cuda.json --quiet > $OUT/r19/cuda.txt 2>&1; echo "cuda replay rc $?"
timeout 40 .dev/bin/gmlake replay traces/*.snapshot.pickle.xz --policy gmlake --backend sim --json $OUT/r19/sim.json --quiet > /dev/null 2>&1
python3 - $OUT/r19/cuda.json $OUT/r19/sim.json <<'PY'
import json, sys
c = {(r["trace"], r["device"]): r for r in json.load(open(sys.argv[1]))}
s = {(r["trace"], r["device"]): r for r in json.load(open(sys.argv[2]))}
same = [k for k in s if k in c and all(c[k][f] == s[k][f] for f in ("peak_reserved_bytes", "backend_calls", "ooms", "evictions"))]
print(f"cuda vs sim: {len(same)} of {len(s)} replays identical in peak, calls, ooms, evictions; differ: {[k for k in s if k not in same]}")
PY
timeout 230 scripts/gpu-steptime-ab.sh $OUT/r19/ab 35 gpt2 2>&1 | grep "round\|FAILED"
wait $fpid; echo "fuzz rc $?"
tail -n 12 $OUT/r19/fz/fuzz-summary.txt
tar czf $OUT/run19.tgz -C $OUT r19 && rm -rf $OUT/r19
