#!/usr/bin/env bash
# The long fuzzing run, outside CI: every libFuzzer target (built by scripts/ci-fuzz.sh into build-fuzz, or
# here when missing) in rounds of FUZZ_ROUND_SECONDS (default 600) each, until the executions of all targets
# add up to FUZZ_TOTAL_RUNS (default 10^8) or FUZZ_MAX_SECONDS (default: no limit) have passed. Runs
# FUZZ_PARALLEL targets at once (default 1: the others on the machine keep their cores). Same limits as CI
# (-timeout=10, -rss_limit_mb=FUZZ_RSS_MB, 2048 by default); the corpus grows in build-fuzz/corpus/<target>
# from round to round. Stops at the first finding (input kept as build-fuzz/<target>-crash-* ...).
# Prints after each round, per target, its executions, executions per second, and the running total; the last
# line estimates the time left to FUZZ_TOTAL_RUNS at the rates measured (docs/reliability.md has the figures).
set -euo pipefail
cd "$(dirname "$0")/.."
total_goal="${FUZZ_TOTAL_RUNS:-100000000}"
round="${FUZZ_ROUND_SECONDS:-600}"
max_seconds="${FUZZ_MAX_SECONDS:-0}"
parallel="${FUZZ_PARALLEL:-1}"
rss_mb="${FUZZ_RSS_MB:-2048}"
targets=(pickle pickle_struct rmm_csv allocator lake)

if [ ! -x build-fuzz/allocator_fuzzer ] || [ ! -x build-fuzz/pickle_struct_fuzzer ] || [ ! -x build-fuzz/lake_fuzzer ]; then
  FUZZ_SECONDS=1 scripts/ci-fuzz.sh >/dev/null
fi
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1

declare -A done_runs
for t in "${targets[@]}"; do done_runs[$t]=0; done
total=0
start=$(date +%s)
round_no=0

run_one() {  # target seconds -> log build-fuzz/long-<target>.log
  local target=$1 seconds=$2 seeds="fuzz/corpus/$1" extra=()
  if [ "$target" = pickle_struct ]; then seeds="fuzz/corpus/pickle"; fi
  if [ "$target" = allocator ] || [ "$target" = lake ]; then extra=(-max_len=1024); fi
  mkdir -p "build-fuzz/corpus/$target"
  "build-fuzz/${target}_fuzzer" "build-fuzz/corpus/$target" "$seeds" -max_total_time="$seconds" \
    -print_final_stats=1 -timeout=10 -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" \
    -artifact_prefix="build-fuzz/$target-" "${extra[@]}" >"build-fuzz/long-$target.log" 2>&1
}

while [ "$total" -lt "$total_goal" ]; do
  now=$(date +%s)
  if [ "$max_seconds" -gt 0 ] && [ $((now - start)) -ge "$max_seconds" ]; then break; fi
  seconds=$round
  if [ "$max_seconds" -gt 0 ]; then
    left=$((max_seconds - (now - start)))
    per=$(( (left * parallel) / ${#targets[@]} ))
    if [ "$per" -lt "$seconds" ]; then seconds=$per; fi
    if [ "$seconds" -lt 1 ]; then break; fi
  fi
  round_no=$((round_no + 1))
  pids=()
  names=()
  for t in "${targets[@]}"; do
    run_one "$t" "$seconds" &
    pids+=($!)
    names+=("$t")
    if [ "${#pids[@]}" -ge "$parallel" ]; then
      for i in "${!pids[@]}"; do
        if ! wait "${pids[$i]}"; then
          tail -n 40 "build-fuzz/long-${names[$i]}.log" >&2
          echo "fuzz-long: ${names[$i]}: FINDING (input saved as build-fuzz/${names[$i]}-*)" >&2
          exit 1
        fi
      done
      pids=()
      names=()
    fi
  done
  for i in "${!pids[@]}"; do
    if ! wait "${pids[$i]}"; then
      tail -n 40 "build-fuzz/long-${names[$i]}.log" >&2
      echo "fuzz-long: ${names[$i]}: FINDING (input saved as build-fuzz/${names[$i]}-*)" >&2
      exit 1
    fi
  done
  for t in "${targets[@]}"; do
    n="$(sed -n 's/^stat::number_of_executed_units: *//p' "build-fuzz/long-$t.log")"
    n="${n:-0}"
    done_runs[$t]=$((done_runs[$t] + n))
    total=$((total + n))
    echo "fuzz-long: round $round_no: $t: $n executions in $seconds s ($((n / seconds))/s); ${done_runs[$t]} in all"
  done
  elapsed=$(( $(date +%s) - start ))
  rate=$(( total / (elapsed > 0 ? elapsed : 1) ))
  left_runs=$(( total_goal > total ? total_goal - total : 0 ))
  echo "fuzz-long: $total of $total_goal executions after ${elapsed} s (${rate}/s over all targets);" \
       "about $(( left_runs / (rate > 0 ? rate : 1) )) s left at this rate"
done
echo "fuzz-long: done: $total executions, 0 findings"
