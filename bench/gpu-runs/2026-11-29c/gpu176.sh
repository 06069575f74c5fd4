#!/usr/bin/env bash
# Run 176 (twenty-fifth session). PART=capture (one call): a tenth held-out batch of workloads captured with
# PyTorch's own allocator as the fourth to ninth were (gpu87.sh: capture_traces.py --unrecorded, budget scale 0.7):
# sparse_embed_train, unfreeze_finetune_train, simclr_varbatch_train, sam_prompt_infer. Written after the default
# was last changed (3f0c1cf) and replayed only once captured.
# PART=ab (a later call, .dev carried from scripts/gpu-carry.sh): the batch run whole under both allocators in one
# process (bench/torch/workload_ab.py W --runs N), then the GPU checks (scripts/gpu-checks-carried.sh) unless
# CHECKS=0.
set -uo pipefail
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
run=${RUN:-176}
if [ "${PART:-capture}" = capture ]; then
  RUN=$run ONLY=${ONLY:-sparse_embed_train,unfreeze_finetune_train,simclr_varbatch_train,sam_prompt_infer} \
    timeout 570 bash bench/gpu-runs/2026-11-27/gpu87.sh
else
  source .dev/gpu_env.sh
  export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
  for wn in ${WORKLOADS:-sparse_embed_train:4 unfreeze_finetune_train:4 simclr_varbatch_train:4 sam_prompt_infer:4}; do
    w=${wn%%:*}; n=${wn#*:}
    echo "##### $w $n pairs"
    timeout ${LIMIT:-150} python3 bench/torch/workload_ab.py $w --runs $n > $OUT/run$run-default-$w.json 2> /tmp/r.log ||
      tail -3 /tmp/r.log
    python3 bench/torch/ab_summary.py $OUT/run$run-default-$w.json
  done
  if [ "${CHECKS:-1}" = 1 ]; then timeout 400 scripts/gpu-checks-carried.sh $OUT/checks; echo "gpu checks rc $?"; fi
fi
