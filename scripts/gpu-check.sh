#!/usr/bin/env bash
# The GPU check, in one go on a machine with an NVIDIA GPU (driver loaded; the CUDA toolkit's cuda.h for the
# build, no internet needed): builds gmlake with the CUDA backend (Release, into build-gpu/), runs the GPU tests
# (ctest -L gpu), and replays traces through every policy on the cuda backend, and on the sim backend for
# reference (gmlake and expandable place blocks by offset, not address: their peaks must be the same on both).
#
#   scripts/gpu-check.sh [OUT_DIR [TRACES_DIR]]
#     OUT_DIR     where logs and results go (default: $OUT, else build-gpu/gpu-check-out)
#     TRACES_DIR  the traces to replay (default: the repo's traces/): every *.pickle, *.pickle.xz,
#                 *.pickle.gz and *.csv in it
#   CUDAToolkit_ROOT=/path   where the toolkit is, when not in /usr/local/cuda or on PATH (cuda.h is all the
#                            build needs; the script also looks for one in Python's nvidia packages)
#
# OUT_DIR receives: summary.txt (one line per step, PASS/FAIL), configure.log, build.log, nvidia-smi.txt,
# ctest-gpu.log, ctest-gpu.junit.xml, gpu-tests-full.log (every test's output), replay/<trace>.<backend>.txt and
# .json (the table and `--json` results), replay-compare.txt (cuda vs sim: scripts/cuda-vs-sim.py).
# Every step runs even when an earlier one failed (unless the build failed); each has a time limit, and the
# whole script stays under about 9 minutes. Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

out=${1:-${OUT:-$repo/build-gpu/gpu-check-out}}
traces=${2:-$repo/traces}
mkdir -p "$out/replay"
out=$(cd "$out" && pwd)
summary="$out/summary.txt"
: >"$summary"
status=0
deadline_s=540  # stop starting replays after this many seconds of the script

step() {  # step NAME STATUS DETAIL
  printf '%-28s %s %s\n' "$1" "$([ "$2" -eq 0 ] && echo PASS || echo FAIL)" "${3:-}" | tee -a "$summary"
  [ "$2" -eq 0 ] || status=1
}

# --- the machine ---
{ nvidia-smi || echo "nvidia-smi not available"; } >"$out/nvidia-smi.txt" 2>&1
{ echo "commit: $(git rev-parse HEAD 2>/dev/null || echo unknown)"; uname -a; nproc; } >>"$out/nvidia-smi.txt"

# --- configure and build ---
cuda_args=()
if [ -z "${CUDAToolkit_ROOT:-}" ] && [ ! -f /usr/local/cuda/include/cuda.h ] && ! command -v nvcc >/dev/null; then
  # No toolkit in the usual places: PyTorch's pip packages may carry the headers.
  header=$(python3 - <<'EOF' 2>/dev/null
import glob, os, site
for root in site.getsitepackages() + [site.getusersitepackages()]:
    for path in sorted(glob.glob(os.path.join(root, "nvidia", "**", "include", "cuda.h"), recursive=True)):
        print(path); raise SystemExit
EOF
)
  [ -n "$header" ] && cuda_args=(-DGMLAKE_CUDA_INCLUDE_DIR="$(dirname "$header")")
fi
configure() {  # configure EXTRA_ARGS...
  timeout 120 cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DGMLAKE_WITH_CUDA=ON \
    -DGMLAKE_BUILD_BENCHMARKS=OFF "${cuda_args[@]}" "$@" >>"$out/configure.log" 2>&1
}
: >"$out/configure.log"
tests_built=1
configure -DGMLAKE_BUILD_TESTS=ON
rc=$?
if [ $rc -ne 0 ]; then  # GoogleTest missing, say: still build the CLI for the replays
  tests_built=0
  configure -DGMLAKE_BUILD_TESTS=OFF
  rc=$?
fi
step configure $rc "(configure.log)"
if [ $rc -eq 0 ]; then
  timeout 300 cmake --build build-gpu -j "$(nproc)" >"$out/build.log" 2>&1
  rc=$?
  step build $rc "(build.log)"
fi
if [ $rc -ne 0 ]; then
  echo "gpu-check: the build failed, see $out" >&2
  exit 1
fi

# --- GPU tests: one at a time (one test fills the whole device on purpose) ---
run_gpu_tests() {
  timeout 330 ctest --test-dir build-gpu -L gpu --no-tests=error --output-on-failure --timeout 300 \
    --output-junit "$out/ctest-gpu.junit.xml" >"$out/ctest-gpu.log" 2>&1
  local rc=$?
  cp build-gpu/Testing/Temporary/LastTest.log "$out/gpu-tests-full.log" 2>/dev/null
  local skipped ran
  skipped=$(grep -c '(Skipped)' "$out/ctest-gpu.log")
  ran=$(grep -Eo 'out of [0-9]+' "$out/ctest-gpu.log" | tail -1)
  step "gpu tests" $rc "($(grep -E 'tests passed' "$out/ctest-gpu.log" | tail -1), ctest-gpu.log)"
  if [ "$skipped" -ne 0 ]; then
    step "gpu tests ran, none skipped" 1 "($skipped of the tests ${ran:-?} skipped: no usable device? ctest-gpu.log)"
  fi
}
if [ $tests_built -eq 1 ]; then
  run_gpu_tests
else
  step "gpu tests" 1 "(not built: configuring with the tests failed, see the start of configure.log)"
fi

# --- replays: every policy, cuda and sim ---
shopt -s nullglob
files=("$traces"/*.pickle "$traces"/*.pickle.xz "$traces"/*.pickle.gz "$traces"/*.csv)
[ ${#files[@]} -gt 0 ] || step "replay: traces found" 1 "(none in $traces)"
for trace in "${files[@]}"; do
  name=$(basename "$trace")
  name=${name%%.*}
  for backend in sim cuda; do
    if [ "$SECONDS" -ge "$deadline_s" ]; then
      step "replay $name $backend" 1 "(not run: the script's time is up)"
      continue
    fi
    start=$SECONDS
    timeout 240 build-gpu/gmlake replay "$trace" --policy all --backend "$backend" \
      --json "$out/replay/$name.$backend.json" >"$out/replay/$name.$backend.txt" 2>&1
    step "replay $name $backend" $? "($((SECONDS - start)) s, replay/$name.$backend.txt)"
  done
done

# --- cuda vs sim: the same peaks, calls, ooms and evictions for gmlake and expandable (scripts/cuda-vs-sim.py) ---
if command -v python3 >/dev/null; then
  pairs=()
  for cuda_json in "$out"/replay/*.cuda.json; do
    sim_json=${cuda_json%.cuda.json}.sim.json
    [ -f "$sim_json" ] && pairs+=("$cuda_json" "$sim_json")
  done
  if [ ${#pairs[@]} -gt 0 ]; then
    python3 scripts/cuda-vs-sim.py "${pairs[@]}" >"$out/replay-compare.txt" 2>&1
    step "replay cuda == sim" $? "(replay-compare.txt)"
  else
    step "replay cuda == sim" 1 "(nothing to compare: no cuda and sim replay results)"
  fi
fi

echo "gpu-check: $( [ $status -eq 0 ] && echo all passed || echo FAILURES ) in ${SECONDS} s; results in $out" |
  tee -a "$summary"
exit $status
