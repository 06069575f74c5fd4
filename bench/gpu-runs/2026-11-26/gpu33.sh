#!/usr/bin/env bash
# Run 33 (H100, binaries of 1b5a8e9 as run 32): bert's A/B (2 rounds x 25 pairs, read per step) at the default
# and with larger chunks for large blocks, to see whether fewer creates at a new longest batch take the formation
# steps' excess away: chunks_per_block:8,max_chunk_bytes:32M and max_chunk_bytes:16M.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r33
n=0
for conf in "" "chunks_per_block:8,max_chunk_bytes:32M" "max_chunk_bytes:16M"; do
  n=$((n + 1))
  echo "== conf '${conf:-default}'"
  GMLAKE_CONF_AB="$conf" ROUNDS=2 timeout 140 scripts/gpu-steptime-ab.sh $OUT/r33/ab$n 25 bert 2>&1 | grep "all rounds\|FAILED"
  python3 - $OUT/r33/ab$n/ab_bert.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for i, r in enumerate(d["rounds"]):
    grow = [k for k, ms in enumerate(r["step_backend_ms_gmlake"]) if ms > 2 and k >= d["warm_pairs"]]
    print(f"round {i + 1}: total {r['total_ratio_gmlake_to_native']:.3f}; timed steps with > 2 ms VMM: " + ", ".join(
        f"{r['step_backend_ms_gmlake'][k]:.1f} ms / {r['step_chunks_created_gmlake'][k]} creates / excess "
        f"{(r['step_times_s_gmlake'][k] - r['step_times_s_native'][k]) * 1e3:.1f} ms" for k in grow))
PY
done
tar czf $OUT/run33.tgz -C $OUT r33 && rm -rf $OUT/r33
