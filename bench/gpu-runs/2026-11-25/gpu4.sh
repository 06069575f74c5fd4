#!/usr/bin/env bash
# Run 4 on the GPU: two time-leaning variants of the default in the A/B on the three workloads that missed 1.01,
# then a filled device (no cap).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r4
python3 -c "import sys; sys.path.insert(0,'python'); import gmlake; gmlake.torch.enable('', extension=True); print('mode', gmlake.torch.mode())" 2>&1 | tail -1
echo "--- move_headroom_permille:50"; GMLAKE_CONF_AB=move_headroom_permille:50 timeout 170 scripts/gpu-steptime-ab.sh $OUT/r4/mh50 35 gpt2-fixed resnet50-infer gpt2 2>&1 | grep "all rounds\|FAILED"
echo "--- headroom_permille:20"; GMLAKE_CONF_AB=headroom_permille:20 timeout 170 scripts/gpu-steptime-ab.sh $OUT/r4/h20 35 gpt2-fixed resnet50-infer gpt2 2>&1 | grep "all rounds\|FAILED"
fill() {  # fill MODEL BATCH STEPS LEAVE_GB ALLOC
  timeout 60 python3 bench/torch/train.py --model $1 --batch $2 --steps $3 --alloc $5 --fill-leave-gb $4 --json $OUT/r4/fill_$1_$5.json > $OUT/r4/fill_$1_$5.log 2>&1
  python3 -c "
import json,sys
try: r=json.load(open('$OUT/r4/fill_$1_$5.json'))
except Exception as e: print('$1 $5: no result', e); sys.exit()
print('$1 $5 leave $4 GB: fit', r['fit'], 'steps', r['steps_done'], 'peak reserved %.3f allocated %.3f GB' % (r['peak_reserved']/1e9, r['peak_allocated']/1e9), 'median step', r['median_step_s'])"
}
for a in native expandable gmlake; do fill gpt2-fixed 16 12 25.63 $a; done
for a in native expandable gmlake; do fill gpt2 8 30 14.21 $a; done
tar czf $OUT/run4.tgz -C $OUT r4 && rm -rf $OUT/r4
