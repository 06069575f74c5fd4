#!/usr/bin/env bash
# Step time of gmlake against PyTorch's native allocator, both in ONE process, batch by batch (train.py --alloc
# ab: every batch runs once under each allocator, the order swapped each pair). Machine drift between processes
# and rounds falls out of the ratio. Prints one JSON line per model and a summary.
# Usage: scripts/gpu-steptime-ab.sh OUTDIR [PAIRS [MODELS...]]   (defaults: 100 pairs; gpt2 bert resnet50)
#   GMLAKE_CONF_AB: gmlake settings for the run (GMLAKE_CONF form); needs GMLAKE_LIBRARY (libgmlake_c.so with CUDA)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-steptime-ab.sh OUTDIR [PAIRS [MODELS...]]}
pairs=${2:-100}
shift 2 2>/dev/null || shift $#
models=("${@:-gpt2 bert resnet50}")
read -r -a models <<<"${models[*]}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
for model in "${models[@]}"; do
  batch=8
  [ "$model" = resnet50 ] && batch=128
  [ "$model" = bert ] && batch=32
  python3 bench/torch/train.py --model "$model" --alloc ab --conf "${GMLAKE_CONF_AB:-}" --batch $batch \
    --steps "$pairs" --json "$out/ab_$model.json" >"$out/ab_$model.log" 2>&1 ||
    { echo "FAILED $model" >&2; tail -n 20 "$out/ab_$model.log" >&2; status=1; continue; }
  python3 - "$out/ab_$model.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = r["pairs"] - r["warm_pairs"]
print(f"{r['model']:<9} batch {r['batch']:>3}: gmlake / native step time, median of {n} pairs "
      f"{r['median_ratio_gmlake_to_native']:.4f} (mean {r['mean_ratio_gmlake_to_native']:.4f}; gmlake faster in "
      f"{r['pairs_gmlake_faster']} of {n}); median steps {r['median_step_s_gmlake']:.4f} s / "
      f"{r['median_step_s_native']:.4f} s")
PY
done
exit $status
