#!/usr/bin/env bash
# End-to-end runs on a GPU machine (PyTorch, transformers, torchvision installed): training under PyTorch
# native, expandable_segments and gmlake, then the largest GPT-2 varlen batch that fits under one memory cap.
# Usage: scripts/gpu-e2e.sh OUTDIR [models...]   (needs build/libgmlake_c.so built with CUDA)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-e2e.sh OUTDIR [models...]}
shift
models=("${@:-gpt2}")
mkdir -p "$out"
export GMLAKE_LIBRARY=${GMLAKE_LIBRARY:-$PWD/build/libgmlake_c.so}
export PYTHONUNBUFFERED=1

# 1. Same job, three allocators, one after the other (timings must not overlap).
for model in "${models[@]}"; do
  batch=8; steps=40
  [ "$model" = resnet50 ] && batch=128 && steps=30
  [ "$model" = bert ] && batch=32 && steps=50
  for alloc in native expandable gmlake; do
    python3 bench/torch/train.py --model "$model" --alloc "$alloc" --batch $batch --steps $steps \
      --json "$out/${model}_${alloc}.json" >"$out/${model}_${alloc}.log" 2>&1 || echo "FAILED $model $alloc" >&2
    tail -n 1 "$out/${model}_${alloc}.log"
  done
done

# 2. Largest GPT-2 varlen batch under a 24 GB cap: every (allocator, batch) is its own process; caps are per
#    process, so the trials run side by side on one large GPU (fit does not depend on speed).
cap=${CAP_GB:-24}
cap_steps=${CAP_STEPS:-8}
pids=()
for alloc in native expandable gmlake; do
  for batch in 10 11 12 13 14 15 16; do
    python3 bench/torch/train.py --model gpt2 --alloc $alloc --batch $batch --steps "$cap_steps" --cap-gb "$cap" \
      --json "$out/cap_${alloc}_${batch}.json" >"$out/cap_${alloc}_${batch}.log" 2>&1 &
    pids+=($!)
    # at most 5 side by side: 5 x 24 GB stays within one H200's 141 GB, so only the cap can refuse memory
    if [ ${#pids[@]} -ge 5 ]; then wait "${pids[@]}"; pids=(); fi
  done
done
wait
CAP_STEPS=$cap_steps python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
best = {}
for alloc in ("native", "expandable", "gmlake"):
    best[alloc] = None
    for batch in range(10, 17):  # the largest batch such that it and every smaller one fit
        try:
            r = json.load(open(os.path.join(out, f"cap_{alloc}_{batch}.json")))
        except (OSError, ValueError):
            break
        if not (r["fit"] and r["steps_done"] == int(os.environ.get("CAP_STEPS", "8"))):
            break
        best[alloc] = batch
print("largest batch under cap:", json.dumps(best))
json.dump(best, open(os.path.join(out, "cap_summary.json"), "w"))
PY
