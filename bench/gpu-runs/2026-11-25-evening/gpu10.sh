#!/usr/bin/env bash
# Run 10: the A/B again for the three workloads of run 6, with the VMM calls of the timed pairs reported apart
# from the warm pairs (where the layout forms).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r10
timeout 420 scripts/gpu-steptime-ab.sh $OUT/r10/ab 35 gpt2 resnet50-infer gpt2-fixed 2>&1 | grep "round\|FAILED"
tar czf $OUT/run10.tgz -C $OUT r10 && rm -rf $OUT/r10
