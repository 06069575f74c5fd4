#!/usr/bin/env bash
# Step time of one model under several allocators, interleaved round by round (these machines drift: compare
# runs of one round), each run its own process. Prints one JSON line per run and a summary of median steps.
# Usage: scripts/gpu-steptime.sh OUTDIR [ROUNDS [MODEL [ALLOCS...]]]
#   defaults: 3 rounds, gpt2, allocators native gmlake gmlake-pluggable (see bench/torch/train.py --alloc)
#   an allocator may carry gmlake settings after '+', ';' for ',': gmlake+fit_candidates:1;cap_bytes:24G
#   needs GMLAKE_LIBRARY (libgmlake_c.so built with CUDA); the gmlake allocator extension is built on first use.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-steptime.sh OUTDIR [ROUNDS [MODEL [ALLOCS...]]]}
rounds=${2:-3}
model=${3:-gpt2}
shift 3 2>/dev/null || shift $#
allocs=("${@:-native gmlake gmlake-pluggable}")
read -r -a allocs <<<"${allocs[*]}"
batch=8; steps=40
[ "$model" = resnet50 ] && batch=128 && steps=30
[ "$model" = bert ] && batch=32 && steps=50
mkdir -p "$out"
export PYTHONUNBUFFERED=1
for r in $(seq 1 "$rounds"); do
  for alloc in "${allocs[@]}"; do
    tag=$(printf %s "$alloc" | tr -c 'A-Za-z0-9_.-' '_')
    conf=""; [[ "$alloc" == *+* ]] && conf=${alloc#*+} && conf=${conf//;/,}
    python3 bench/torch/train.py --model "$model" --alloc "${alloc%%+*}" --conf "$conf" --batch $batch --steps $steps \
      --json "$out/step_${model}_${tag}_$r.json" >"$out/step_${model}_${tag}_$r.log" 2>&1 ||
      { echo "FAILED $model $alloc round $r" >&2; tail -n 20 "$out/step_${model}_${tag}_$r.log" >&2; }
    tail -n 1 "$out/step_${model}_${tag}_$r.log" | cut -c1-400
  done
done
python3 - "$out" "$model" "$rounds" "${allocs[@]}" <<'PY'
import json, os, re, sys
out, model, rounds, allocs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
rows = []
for r in range(1, rounds + 1):
    row = {}
    for a in allocs:
        try:
            row[a] = json.load(open(os.path.join(out, f"step_{model}_{re.sub(r'[^A-Za-z0-9_.-]', '_', a)}_{r}.json")))["median_step_s"]
        except (OSError, ValueError, KeyError):
            row[a] = None
    base = row.get(allocs[0])
    print(f"round {r}: " + "  ".join(f"{a} {v:.4f} s ({v / base:.3f}x)" if v and base else f"{a} -" for a, v in row.items()))
    rows.append(row)
import statistics
for a in allocs[1:]:
    ratios = [row[a] / row[allocs[0]] for row in rows if row.get(a) and row.get(allocs[0])]
    if ratios:
        print(f"{a}: median of per-round ratios to {allocs[0]} {statistics.median(ratios):.3f} over {len(ratios)} rounds")
PY
