#!/usr/bin/env bash
# Run 34: the last part of the long fuzz run of issue 25 (SECS seconds) on the fuzzers of the commit in .dev/fuzz/BUILD_INFO, all 16 cores.
set -uo pipefail
mkdir -p $OUT/r23
FUZZ_PREVIOUS_TOTAL=${PREV:-0} scripts/fuzz-device.sh $OUT/r23/fz ${SECS:-545} .dev/fuzz > $OUT/r23/fuzz.log 2>&1; echo "fuzz rc $?"
tail -n 12 $OUT/r23/fz/fuzz-summary.txt
tar czf $OUT/run23.tgz -C $OUT r23 && rm -rf $OUT/r23
