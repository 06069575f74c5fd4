#!/usr/bin/env bash
# Run 65 (eighth session; binaries of 93683d2): bert-train-eval's A/B (35 pairs, 3 rounds) at the default and with
# waiting_growth_chunk_share:768 (growth chunks as small while the device waits as while it is busy: the replay of
# run 63's recorded sequence predicts a layout that stops moving after the first evaluation), one after the other
# in one call; then one recorded round under that setting, to check the prediction call for call.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
MODEL=bert-train-eval PAIRS=35 bash .dev/gpu53.sh "" "waiting_growth_chunk_share:768"
timeout 150 python3 bench/torch/train.py --model bert-train-eval --alloc ab --batch 32 --steps 35 --rounds 1 \
  --conf waiting_growth_chunk_share:768 --history-out $OUT/ab_bte_wg768.pickle --json $OUT/ab_bte_wg768.json \
  > $OUT/ab_bte_wg768.log 2>&1
echo "history rc $?"; xz -T8 $OUT/ab_bte_wg768.pickle
