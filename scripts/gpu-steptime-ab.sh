#!/usr/bin/env bash
# Step time of gmlake against PyTorch's native allocator, both in ONE process, batch by batch (train.py --alloc
# ab: every batch runs once under each allocator, the order swapped each pair). Machine drift between processes
# and rounds falls out of the ratio. Prints one line per model and round, and writes one JSON per model.
# Usage: scripts/gpu-steptime-ab.sh OUTDIR [PAIRS [MODELS...]]
#   PAIRS: pairs per round, the first 5 untimed (default 35); MODELS default: the six of issue 23:
#   gpt2 (varlen training), gpt2-fixed (16 x 1024 training), bert (varlen training), resnet50-infer (shapes
#   drawn per call), unet3d-infer (volumes drawn per call, GB tensors), gpt2-generate (batch 1-4, CPU-bound).
#   Held-out workloads (not tuned on): video-infer (clip length, size, batch per call), clip-train (batch 32-192,
#   caption length per step).
#   ROUNDS: rounds per model, one after the other in the same process (default 3).
#   GMLAKE_CONF_AB: gmlake settings for the run (GMLAKE_CONF form); needs GMLAKE_LIBRARY (libgmlake_c.so with CUDA)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-steptime-ab.sh OUTDIR [PAIRS [MODELS...]]}
pairs=${2:-35}
shift 2 2>/dev/null || shift $#
models=("${@:-gpt2 gpt2-fixed bert resnet50-infer unet3d-infer gpt2-generate}")
read -r -a models <<<"${models[*]}"
mkdir -p "$out"
export PYTHONUNBUFFERED=1
status=0
for model in "${models[@]}"; do
  batch=8
  case "$model" in
    resnet50) batch=128 ;;
    bert | bert-train-eval) batch=32 ;;
    gpt2-fixed) batch=16 ;;
    clip-train) batch=48 ;;
  esac
  python3 bench/torch/train.py --model "$model" --alloc ab --conf "${GMLAKE_CONF_AB:-}" --batch $batch \
    --steps "$pairs" --rounds "${ROUNDS:-3}" --json "$out/ab_$model.json" >"$out/ab_$model.log" 2>&1 ||
    { echo "FAILED $model" >&2; tail -n 20 "$out/ab_$model.log" >&2; status=1; continue; }
  python3 - "$out/ab_$model.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
n = r["pairs"] - r["warm_pairs"]
for i, x in enumerate(r["rounds"]):
    print(f"{r['model']:<14} round {i + 1}: total gmlake / native {x['total_ratio_gmlake_to_native']:.4f} over {n} "
          f"pairs (median {x['median_ratio_gmlake_to_native']:.4f}); steps {x['median_step_s_gmlake']:.4f} / "
          f"{x['median_step_s_native']:.4f} s; VMM (all pairs, formation included) {x['gmlake_backend_ms_per_step']:.3f} ms / step "
          f"({x['gmlake_backend_calls_per_step']:.1f} calls); peak reserved {x['gmlake_peak_reserved'] / 1e9:.2f} / "
          f"{x['native_peak_reserved'] / 1e9:.2f} GB; timed pairs only: VMM {x.get('gmlake_timed_backend_ms_per_step', float('nan')):.3f} ms / step "
          f"({x.get('gmlake_timed_backend_calls_per_step', float('nan')):.1f} calls); fence waits "
          f"{x.get('gmlake_fence_waits', '?')}, moves in stream order {x.get('gmlake_in_order_evictions', '?')}")
print(f"{r['model']:<14} all rounds: total {r['total_ratio_gmlake_to_native']:.4f}, worst round {r['max_round_total_ratio']:.4f}")
PY
done
exit $status
