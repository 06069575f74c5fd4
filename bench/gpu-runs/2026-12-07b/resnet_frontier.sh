#!/usr/bin/env bash
# Runs 190-192 (one H100): ResNet-50 inference's frontier, A/B time against the GPU's memory, one
# `ROUNDS=3 scripts/gpu-steptime-ab.sh DIR 35 resnet50-infer` per setting (GMLAKE_CONF_AB), in the order given.
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here:
#   resnet_frontier.sh OUT RUN NAME=CONF...   writes OUT/runRUN-NAME.json per setting and OUT/runRUN.log
#   HISTORY=1: then records the A/B's own sequence under the default (train.py --history-out, one round) as
#   OUT/resnet50_infer_ab.snapshot.pickle.xz (ResNet-50 inference whatever MODEL is)
#   MODEL=M: another train.py A/B model than resnet50-infer; the JSON is then OUT/runRUN-M-NAME.json (run 195 through
#   ../2026-12-07c/chunk_frontier.sh)
# As run:
#   190: HISTORY=1 resnet_frontier.sh $OUT 190 default1= wshare64=waiting_growth_chunk_share:64 \
#          whead20=waiting_headroom_permille:20 both=waiting_growth_chunk_share:64,waiting_headroom_permille:20 default2=
#   191: resnet_frontier.sh $OUT 191 default3= head50=headroom_permille:50 head200=headroom_permille:200 default4=
#   192: resnet_frontier.sh $OUT 192 default5= laghead20=lag_headroom_permille:20 lag0=lag_grow_pages:0
set -uo pipefail
out=${1:?usage: resnet_frontier.sh OUT RUN NAME=CONF...}
run=${2:?usage: resnet_frontier.sh OUT RUN NAME=CONF...}
shift 2
model=${MODEL:-resnet50-infer}
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
log=$out/run$run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for setting in "$@"; do
  name=${setting%%=*} conf=${setting#*=} t0=$SECONDS
  echo "== ${MODEL:+$model }$name (${conf:-default}) $(date +%T)" | tee -a "$log"
  GMLAKE_CONF_AB="$conf" ROUNDS=3 scripts/gpu-steptime-ab.sh /tmp/ab_$name 35 $model 2>&1 | tee -a "$log"
  cp /tmp/ab_$name/ab_$model.json "$out/run$run-${MODEL:+$model-}$name.json"
  tail -n 3 /tmp/ab_$name/ab_$model.log >>"$log"
  echo "   $((SECONDS - t0)) s" | tee -a "$log"
done
if [ -n "${HISTORY:-}" ]; then
  echo "== history $(date +%T)" | tee -a "$log"
  python3 bench/torch/train.py --model resnet50-infer --alloc ab --batch 8 --steps 35 --rounds 1 \
    --history-out /tmp/resnet50_infer_ab.pickle --json /tmp/hist.json >>"$log" 2>&1 &&
    xz -9 -c /tmp/resnet50_infer_ab.pickle >"$out/resnet50_infer_ab.snapshot.pickle.xz"
fi
ls -la "$out" | tee -a "$log"
