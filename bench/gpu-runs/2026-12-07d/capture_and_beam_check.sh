#!/usr/bin/env bash
# Thirtieth session, first GPU call. (1) The check left by 7cd6b4a: gpt2_beam, now run through beam_search_calls,
# must draw the calls its shipped trace lists and allocate the same sizes in the same order (the shipped trace was
# made by the loop before the refactor). (2) The twelfth held-out batch (capture_batch12.sh, never run before).
# On the GPU machine, from the repo root: bash bench/gpu-runs/2026-12-07d/capture_and_beam_check.sh $OUT
# (BEAM_ONLY=1: the check alone. Run 196 ran it at budget scale 0.15, which ends gpt2_beam before its first call
# (model set-up takes the budget): 292 allocations compared and no call; run 197 at the default scale 1.0.)
set -uo pipefail
out=${1:?usage: capture_and_beam_check.sh OUT}
export PYTHONUNBUFFERED=1
log=$out/beam-check.log
python3 bench/torch/capture_traces.py --xz-dir /tmp/beamchk --json-dir /tmp/beamchk --tmp /tmp/beamchk_tmp \
  --budget-scale ${BEAM_SCALE:-1.0} --only gpt2_beam > "$log" 2>&1
python3 - traces/gpt2_beam.native.json /tmp/beamchk/gpt2_beam.native.json traces/gpt2_beam.snapshot.pickle.xz \
  /tmp/beamchk/gpt2_beam.snapshot.pickle.xz <<'PY' 2>&1 | tee -a "$log"
import json, lzma, pickle, sys
old, new = (json.load(open(f))["params"]["calls"] for f in sys.argv[1:3])
print(f"calls: shipped {len(old)}, now {len(new)}; prefix equal: {old[:len(new)] == new}")
def sizes(f):
    s = pickle.load(lzma.open(f))
    return [e["size"] for e in s["device_traces"][0] if e["action"] == "alloc"]
a, b = sizes(sys.argv[3]), sizes(sys.argv[4])
n = min(len(a), len(b))
first = next((i for i in range(n) if a[i] != b[i]), None)
print(f"allocs: shipped {len(a)}, now {len(b)}; first {n} sizes equal: {first is None}"
      + ("" if first is None else f" (first difference at alloc {first}: {a[first]} vs {b[first]})"))
PY
[ -n "${BEAM_ONLY:-}" ] || bash bench/gpu-runs/2026-12-07c/capture_batch12.sh "$out"
