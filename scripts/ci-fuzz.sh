#!/usr/bin/env bash
# CI: builds the libFuzzer targets (fuzz/*_fuzzer.cpp, clang, ASan + UBSan) into build-fuzz and runs each for
# FUZZ_SECONDS (default 60) from its seed corpus. Any finding (crash, sanitizer report, leak, an input slower
# than 10 s or one that makes the process use more than FUZZ_RSS_MB, default 2048 MiB, resident: the trace
# readers' memory budget must hold every input far below that) fails the job; the input is kept as
# build-fuzz/<target>-crash-* (or leak-, timeout-, oom-). New corpus entries go to build-fuzz/corpus/<target>,
# never into the repo. Prints the executions of each target (docs/reliability.md). FUZZ_JOBS: build jobs
# (default: all cores). For a long run outside CI (10^8 executions in all): scripts/fuzz-long.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitizers
seconds="${FUZZ_SECONDS:-60}"
rss_mb="${FUZZ_RSS_MB:-2048}"
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 -DGMLAKE_BUILD_FUZZERS=ON \
  -DGMLAKE_BUILD_TESTS=OFF -DGMLAKE_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-fuzz -j "${FUZZ_JOBS:-$(nproc)}"

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1
# Each target and its seeds: pickle_struct mutates pickles opcode by opcode from the same real snapshot pieces.
for target in pickle pickle_struct rmm_csv allocator lake; do
  seeds="fuzz/corpus/$target"
  if [ "$target" = pickle_struct ]; then seeds="fuzz/corpus/pickle"; fi
  work="build-fuzz/corpus/$target"
  log="build-fuzz/$target.log"
  mkdir -p "$work"
  extra=()
  # The allocator target checks every invariant after every operation, the lake target sets up a lender or a
  # borrower per input: shorter inputs, more of them.
  if [ "$target" = allocator ] || [ "$target" = lake ]; then extra=(-max_len=1024); fi
  if ! "build-fuzz/${target}_fuzzer" "$work" "$seeds" -max_total_time="$seconds" -print_final_stats=1 \
      -timeout=10 -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" -artifact_prefix="build-fuzz/$target-" \
      "${extra[@]}" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "ci-fuzz: $target: FINDING (input saved as build-fuzz/$target-*)" >&2
    exit 1
  fi
  executions="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")"
  echo "ci-fuzz: $target: $executions executions in ${seconds} s, 0 findings"
done
