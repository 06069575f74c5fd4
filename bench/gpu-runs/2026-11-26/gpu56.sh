#!/usr/bin/env bash
# Run 56 (H100, sixth session: the build of runs 52-55 with place_memory_first:0, the code path of d8a5ad6): a
# filled GPU, no cap, at the new default (headroom 7, growth share 768), gmlake only (native and expandable: run 49):
# train.py --fill-leave-gb G (1.01x the job's peak allocated), gpt2-fixed and gpt2 varlen.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python
mkdir -p $OUT/r56
fill() {  # fill MODEL BATCH STEPS LEAVE_GB ALLOC
  timeout 100 python3 bench/torch/train.py --model $1 --batch $2 --steps $3 --alloc $5 --conf place_memory_first:0 --fill-leave-gb $4 --json $OUT/r56/fill_$1_$5.json > $OUT/r56/fill_$1_$5.log 2>&1
  python3 -c "
import json,sys
try: r=json.load(open('$OUT/r56/fill_$1_$5.json'))
except Exception as e: print('$1 $5: no result', e); sys.exit()
print('$1 $5 leave $4 GB: fit', r['fit'], 'steps', r['steps_done'], 'peak reserved %.3f allocated %.3f GB' % (r['peak_reserved']/1e9, r['peak_allocated']/1e9), 'median step', r['median_step_s'], {k: v for k, v in r.items() if 'waiting' in k or 'retries' in k or 'ooms' in k})"
}
fill gpt2-fixed 16 12 25.63 gmlake
fill gpt2 8 30 14.21 gmlake
grep -h "Error\|error" $OUT/r56/*.log | head -5
cp $OUT/r56/*.json $OUT/
tar czf $OUT/run56.tgz -C $OUT r56 && rm -rf $OUT/r56
