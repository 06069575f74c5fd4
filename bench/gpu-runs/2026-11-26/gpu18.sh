#!/usr/bin/env bash
# Run 18: the long fuzz run of issue 25 on the fuzzers of 1c12efc (chunks per block bounded), 14 cores, beside
# two bert A/Bs (default; 16 MiB chunks) that split bert's excess over native.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r18
nproc
FUZZ_CORES=14 scripts/fuzz-device.sh $OUT/r18/fz 545 .dev/fuzz > $OUT/r18/fuzz.log 2>&1 &
fpid=$!
timeout 330 scripts/gpu-steptime-ab.sh $OUT/r18/ab 60 bert 2>&1 | grep "round\|FAILED"
GMLAKE_CONF_AB=max_chunk_bytes:16777216 timeout 190 scripts/gpu-steptime-ab.sh $OUT/r18/ab16 40 bert 2>&1 | grep "round\|FAILED"
wait $fpid; echo "fuzz rc $?"
tail -n 25 $OUT/r18/fz/fuzz-summary.txt
tar czf $OUT/run18.tgz -C $OUT r18 && rm -rf $OUT/r18
