#!/usr/bin/env bash
# Run 22 (main d325a5c: chunk bound, page-table bitmaps, BlockTable, lake behind ChunkProvider, page_bytes and
# PageGeometry), H100: GPU tests, gmlake on cuda against sim on every shipped trace, the PyTorch allocator test,
# the A/B of unet3d-infer (40 pairs, 3 rounds).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r22
timeout 120 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r22/gpu_tests.log 2>&1; echo "gpu tests rc $?"; grep -E "PASSED|FAILED|SKIPPED" $OUT/r22/gpu_tests.log | tail -8
timeout 50 .dev/bin/device_pool_gpu_tests --gtest_brief=1 2>&1 | grep -E "PASSED|FAILED|SKIPPED" | tail -3
timeout 100 .dev/bin/gmlake replay traces/*.snapshot.pickle.xz --policy gmlake --backend cuda --json $OUT/r22/cuda.json --quiet > $OUT/r22/cuda.txt 2>&1; echo "cuda replay rc $?"
timeout 40 .dev/bin/gmlake replay traces/*.snapshot.pickle.xz --policy gmlake --backend sim --json $OUT/r22/sim.json --quiet > /dev/null 2>&1
python3 - $OUT/r22/cuda.json $OUT/r22/sim.json <<'PY'
import json, sys
c = {(r["trace"], r["device"]): r for r in json.load(open(sys.argv[1]))}
s = {(r["trace"], r["device"]): r for r in json.load(open(sys.argv[2]))}
same = [k for k in s if k in c and all(c[k][f] == s[k][f] for f in ("peak_reserved_bytes", "backend_calls", "ooms", "evictions"))]
print(f"cuda vs sim: {len(same)} of {len(s)} replays identical in peak, calls, ooms, evictions; differ: {[k for k in s if k not in same]}")
PY
timeout 170 scripts/gpu-steptime-ab.sh $OUT/r22/ab 40 unet3d-infer 2>&1 | grep "round\|FAILED"
timeout 150 python3 tests/gpu/torch_allocator_test.py > $OUT/r22/torch_allocator_test.log 2>&1; echo "torch allocator test rc $?"; tail -n 12 $OUT/r22/torch_allocator_test.log
tar czf $OUT/run22.tgz -C $OUT r22 && rm -rf $OUT/r22
