#!/usr/bin/env bash
# On the GPU machine: replays traces through one policy on --backend cuda and on --backend sim, and checks that
# both give the same peak reserved bytes, backend calls of every kind, out-of-memory errors and evictions (gmlake
# and expandable place blocks by offset, not by address, so the two backends must agree call for call).
#
#   scripts/gpu-cuda-vs-sim.sh OUT_DIR [TRACE...]
#     TRACE...   default: every traces/*.snapshot.pickle.xz
#   GMLAKE_CLI   the CLI to run (default: .dev/bin/gmlake, as scripts/gpu-carry.sh leaves it; else build/gmlake)
#   POLICY       the policy (default: gmlake)
#   CONF         a --conf string (default: none, the default configuration)
#
# Writes OUT_DIR/cuda.json, OUT_DIR/sim.json (the replays' --json) and OUT_DIR/cuda-vs-sim.txt (the comparison of
# scripts/cuda-vs-sim.py: a line per replay, then how many agree and which differ; with POLICY=all, caching's rows
# are shown but not counted). Exit status: 0 when every replay agrees, 1 when one differs or a replay failed, 2 on
# bad usage.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-cuda-vs-sim.sh OUT_DIR [TRACE...]}
shift
traces=("$@")
[ ${#traces[@]} -gt 0 ] || traces=(traces/*.snapshot.pickle.xz)
cli=${GMLAKE_CLI:-.dev/bin/gmlake}
[ -x "$cli" ] || cli=build/gmlake
[ -x "$cli" ] || { echo "gpu-cuda-vs-sim: no gmlake CLI (.dev/bin/gmlake or build/gmlake); set GMLAKE_CLI" >&2; exit 2; }
policy=${POLICY:-gmlake}
conf=()
[ -n "${CONF:-}" ] && conf=(--conf "$CONF")
mkdir -p "$out"
status=0
for backend in cuda sim; do
  timeout 300 "$cli" replay "${traces[@]}" --policy "$policy" --backend "$backend" "${conf[@]}" \
    --json "$out/$backend.json" --quiet >"$out/$backend.txt" 2>&1
  rc=$?
  [ $rc -eq 0 ] || { echo "gpu-cuda-vs-sim: the $backend replay exited $rc (see $out/$backend.txt)"; status=1; }
done
python3 scripts/cuda-vs-sim.py "$out/cuda.json" "$out/sim.json" | tee "$out/cuda-vs-sim.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
