#!/usr/bin/env bash
# On the GPU machine, with the binaries scripts/gpu-carry.sh built and put in .dev/bin and .dev/lib (on the build
# machine): the GPU tests of the `async` policy (PyTorch's backend:cudaMallocAsync: CudaMemPoolTest.*), then every
# shipped trace (traces/*.snapshot.pickle.xz) replayed with `--policy all --backend cuda` (caching, expandable,
# gmlake and async), for docs/benchmarks.md.
#
#   scripts/gpu-async-replay.sh OUT [TRACE...]     (TRACE default: traces/*.snapshot.pickle.xz, every shipped trace;
#                                                  name a few to split the run over several calls)
#
# OUT receives: machine.txt (GPU, driver, commit), gpu-test-async.log, per trace <trace>.txt (the table),
# <trace>.json (--json rows) and <trace>.err (stderr), async-summary.md (one row per trace: the lower bound, each
# policy's peak reserved, async's utilization, ns/op and out-of-memory count), and summary.txt (each step's exit
# status). Every step runs even when one before failed. Exit status: 0 when every step passed and every trace
# has an async row, 1 otherwise, 2 without .dev/bin/gmlake.
set -uo pipefail
out=${1:?usage: scripts/gpu-async-replay.sh OUT [TRACE...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
traces=()
for trace in "$@"; do traces+=("$(realpath "$trace")"); done  # named from where the script was called
cd "$(dirname "$0")/.."
[ ${#traces[@]} -gt 0 ] || traces=(traces/*.snapshot.pickle.xz)
if [ ! -x .dev/bin/gmlake ]; then
  echo "gpu-async-replay: no .dev/bin/gmlake: run scripts/gpu-carry.sh on the build machine first" >&2
  exit 2
fi
export LD_LIBRARY_PATH=$PWD/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
summary=$out/summary.txt
: >"$summary"
status=0
note() {  # note NAME EXIT_STATUS
  echo "$1: exit $2" | tee -a "$summary"
  [ "$2" -eq 0 ] || status=1
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv,noheader || echo "no nvidia-smi"
  echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"
} >"$out/machine.txt" 2>&1

timeout 120 .dev/bin/gmlake_gpu_tests --gtest_filter='CudaMemPoolTest.*' >"$out/gpu-test-async.log" 2>&1
note "gpu test CudaMemPoolTest.*" $?
grep -E '^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]+ test' "$out/gpu-test-async.log" | tee -a "$summary"
if grep -q '^\[  SKIPPED \] [0-9]' "$out/gpu-test-async.log"; then  # no device, or a driver without maxSize
  echo "  GPU tests were skipped: the reason is in gpu-test-async.log" | tee -a "$summary"
  status=1
fi

for trace in "${traces[@]}"; do
  name=$(basename "$trace" .snapshot.pickle.xz)
  timeout 150 .dev/bin/gmlake replay "$trace" --policy all --backend cuda --quiet --json "$out/$name.json" \
    >"$out/$name.txt" 2>"$out/$name.err"
  note "replay $name" $?
  if ! grep -q '"policy": *"async"' "$out/$name.json" 2>/dev/null; then
    echo "  no async row in $name.json: $(head -c 300 "$out/$name.err")" | tee -a "$summary"
    status=1
  fi
done

# One row per trace, from the JSON files: what docs/benchmarks.md takes.
python3 - "$out" >"$out/async-summary.md" <<'EOF'
import glob, json, os, sys
out = sys.argv[1]
gb = lambda b: f"{b / 1e9:.3f}"
print("| trace | lower bound GB | caching GB | expandable GB | gmlake GB | async GB | async utilization "
      "| async ns/op | gmlake ns/op | async OOMs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    try:
        rows = json.load(open(path))
    except (OSError, ValueError):
        continue
    for device in sorted({r["device"] for r in rows}):
        by = {r["policy"]: r for r in rows if r["device"] == device}
        if "async" not in by:
            continue
        a = by["async"]
        peak = lambda p: gb(by[p]["peak_reserved_bytes"]) if p in by else "-"
        ns = lambda p: f"{by[p]['ns_per_op']:.0f}" if p in by else "-"
        lower = max(r["lower_bound_bytes"] for r in by.values())
        name = a["trace"] + (f" (dev {device})" if device else "")
        print(f"| {name} | {gb(lower)} | {peak('caching')} | {peak('expandable')} | {peak('gmlake')} | "
              f"{peak('async')} | {a['utilization']:.3f} | {ns('async')} | {ns('gmlake')} | {a['ooms']} |")
EOF
note "async-summary.md" $?
cat "$out/async-summary.md"
exit $status
