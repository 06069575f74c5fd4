#!/usr/bin/env bash
# Run 63 (eighth session): the A/B's own allocation sequence under gmlake, for the replay. One round of
# `train.py --alloc ab --history-out` for bert-train-eval (35 pairs, batch 32) and resnet50-infer (35 pairs,
# batch 8), default configuration; the recorded round's timings are not comparable (recording costs host time).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for m in "bert-train-eval 32" "resnet50-infer 8"; do
  set -- $m
  timeout 240 python3 bench/torch/train.py --model $1 --alloc ab --batch $2 --steps 35 --rounds 1 \
    --history-out $OUT/ab_$1.pickle --json $OUT/ab_$1.json > $OUT/ab_$1.log 2>&1; echo "$1 rc $?"
  tail -c 300 $OUT/ab_$1.log; echo
  ls -la $OUT/ab_$1.pickle && xz -T8 -6 $OUT/ab_$1.pickle
done
