#!/usr/bin/env bash
# Run 116 (H100, fourteenth session): a filled GPU, no cap, at the default with lag growth where a mark covers
# (lag_grow_covered): train.py --fill-leave-gb G (1.01x the job's peak allocated, as runs 49 and 56), gpt2-fixed
# and gpt2 varlen, gmlake only. Then, if MODELS is set, train.py's A/B of the old rule against the new (gpu91.sh).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p $OUT/r116
fill() {  # fill MODEL BATCH STEPS LEAVE_GB ALLOC
  timeout 100 python3 bench/torch/train.py --model $1 --batch $2 --steps $3 --alloc $5 --fill-leave-gb $4 --json $OUT/r116/fill_$1_$5.json > $OUT/r116/fill_$1_$5.log 2>&1
  python3 -c "
import json,sys
try: r=json.load(open('$OUT/r116/fill_$1_$5.json'))
except Exception as e: print('$1 $5: no result', e); sys.exit()
print('$1 $5 leave $4 GB: fit', r['fit'], 'steps', r['steps_done'], 'peak reserved %.3f allocated %.3f GB' % (r['peak_reserved']/1e9, r['peak_allocated']/1e9), 'median step', r['median_step_s'], {k: v for k, v in r.items() if 'waiting' in k or 'retries' in k or 'ooms' in k or 'fence' in k})"
}
fill gpt2-fixed 16 12 25.63 gmlake
fill gpt2 8 30 14.21 gmlake
grep -h "Error\|error" $OUT/r116/*.log | head -5
for f in $OUT/r116/*.json; do cp $f $OUT/run116-$(basename $f); done
rm -rf $OUT/r116
[ -n "${MODELS:-}" ] && RUN=116 MODELS="$MODELS" CONFS="old=lag_grow_covered:false new=" PAIRS=${PAIRS:-35} \
  bash bench/gpu-runs/2026-11-27/gpu91.sh 2>&1 | grep -E "round|#####|FAILED|Error" | cut -c1-420
exit 0
