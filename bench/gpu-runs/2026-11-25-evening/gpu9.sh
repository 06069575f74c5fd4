#!/usr/bin/env bash
# Run 9: does the wall-time move budget cause the live steady-state VMM calls? gpt2 varlen and resnet50-infer A/B
# with move_share_permille:0; then a filled H100 for gpt2-fixed at the new default.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r9
GMLAKE_CONF_AB=move_share_permille:0 timeout 250 scripts/gpu-steptime-ab.sh $OUT/r9/ab 35 gpt2 resnet50-infer 2>&1 | grep "round\|FAILED"
for alloc in native expandable gmlake; do timeout 60 python3 bench/torch/train.py --model gpt2-fixed --alloc $alloc --batch 16 --steps 12 --fill-leave-gb 25.63 --json $OUT/r9/fill_$alloc.json > $OUT/r9/fill_$alloc.log 2>&1; echo "fill $alloc rc $?"; tail -2 $OUT/r9/fill_$alloc.log; done
tar czf $OUT/run9.tgz -C $OUT r9 && rm -rf $OUT/r9
