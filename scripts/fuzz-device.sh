#!/usr/bin/env bash
# The long fuzzing run (10^8 executions over the libFuzzer targets: docs/reliability.md) on a many-core machine, from a
# folder prepared here by scripts/fuzz-carry.sh (binaries, their shared libraries, seed corpora; no build needed).
#
# Usage (from the repository root): scripts/fuzz-device.sh OUT_DIR SECONDS [FOLDER]
#   FOLDER (default .dev/fuzz) holds bin/<target>_fuzzer, lib/, lib/compat/, corpus/<target>/, BUILD_INFO.
#   Runs plain libFuzzer processes in parallel, one per core (nproc, or FUZZ_CORES), for all five targets at
#   once: cores are spread in proportion to speed so that every target runs (16 cores: pickle 6, pickle_struct 6,
#   rmm_csv 2, allocator 1, lake 1; fewer than 4 cores: one process per target anyway). FUZZ_SPLIT="pickle:6,
#   pickle_struct:6,rmm_csv:2,allocator:1,lake:1" sets the split by hand. Processes of one target share one corpus folder
#   (libFuzzer reloads it every second), kept in FUZZ_WORK (default .dev/fuzz-work), so a later call on the same
#   machine goes on from it. Same flags as scripts/fuzz-long.sh and CI: -timeout=10, -rss_limit_mb and
#   -malloc_limit_mb FUZZ_RSS_MB (2048), -max_len=1024 for allocator and lake, pickle_struct seeded from corpus/pickle.
#   A process that ends with a finding is started again (up to 3 times per core) while time is left.
#   Everything stops inside SECONDS: the processes get -max_total_time of SECONDS less a margin (10 s + 5 %),
#   any still running 6 s before SECONDS is interrupted (libFuzzer then prints its final stats), 3 s before it
#   is killed. Every 60 s (FUZZ_PROGRESS_SECONDS) it prints a progress line (executions so far: a lower bound,
#   from libFuzzer's "#N" lines).
#   FUZZ_PREVIOUS_TOTAL (default 0): executions of earlier runs, added into the "total over runs" line.
#
# Outputs: OUT_DIR/fuzz-summary.txt, also printed: per target the cores, executions (libFuzzer's
# stat::number_of_executed_units of each process, summed), executions per second (over the run's wall time,
# and per core: over the seconds its processes ran), edges covered (the highest "cov:" of its processes), peak
# RSS, findings (crash-, leak-, timeout-, oom- files), then the grand total of this run and over runs. A partial
# summary is written at each progress line, so something comes back even if the caller's limit is hit. Finding
# inputs (at most 5) and the last 80 lines of the log of the process that wrote each go to OUT_DIR too, with
# the last 80 lines of any process that failed without a finding; all logs stay in FUZZ_WORK/logs.
# Findings are reproduced here, with file and line, by build-fuzz/<target>_fuzzer INPUT.
# Exit status: 0 no finding, 1 a finding or a process that failed without one, 2 usage or setup error.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ] || ! [[ "$2" =~ ^[0-9]+$ ]] || [ "$2" -lt 20 ]; then
  echo "usage: scripts/fuzz-device.sh OUT_DIR SECONDS(>=20) [FOLDER]" >&2; exit 2
fi
out="$1"; budget="$2"; folder="${3:-.dev/fuzz}"
work="${FUZZ_WORK:-.dev/fuzz-work}"
rss_mb="${FUZZ_RSS_MB:-2048}"
previous="${FUZZ_PREVIOUS_TOTAL:-0}"
cores="${FUZZ_CORES:-$(nproc)}"
targets=(pickle pickle_struct rmm_csv allocator lake)
t0=$(date +%s)
deadline=$((t0 + budget))
run_end=$((deadline - 10 - budget / 20))   # the processes' own end (-max_total_time)
mkdir -p "$out" "$work/logs" "$work/findings" "$work/pids" "$work/corpus" || exit 2
folder="$(cd "$folder" && pwd)" || { echo "fuzz-device: no folder ${3:-.dev/fuzz}" >&2; exit 2; }
out="$(cd "$out" && pwd)"; work="$(cd "$work" && pwd)"
rm -rf "$work/logs"/* "$work/findings"/* "$work/pids"/* "$work/stop"

export LD_LIBRARY_PATH="$folder/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"   # the caller may override (e.g. detect_leaks=0 where LSan cannot run)
# Setup: every binary must start; fall back to the carried libstdc++ if this machine's is too old.
for t in "${targets[@]}"; do
  bin="$folder/bin/${t}_fuzzer"
  [ -x "$bin" ] || { echo "fuzz-device: missing $bin (run scripts/fuzz-carry.sh)" >&2; exit 2; }
  if ! err="$("$bin" -help=1 2>&1 >/dev/null)"; then
    if [[ "$LD_LIBRARY_PATH" != *compat* ]] && [ -d "$folder/lib/compat" ]; then
      export LD_LIBRARY_PATH="$folder/lib:$folder/lib/compat${LD_LIBRARY_PATH#"$folder/lib"}"
      echo "fuzz-device: $t does not start with this machine's libraries; using $folder/lib/compat" >&2
      err="$("$bin" -help=1 2>&1 >/dev/null)" || { echo "$err" | tail -n 5 >&2; exit 2; }
    else
      echo "$err" | tail -n 5 >&2; exit 2
    fi
  fi
done

# Cores per target.
declare -A share
if [ -n "${FUZZ_SPLIT:-}" ]; then
  for t in "${targets[@]}"; do share[$t]=0; done
  IFS=',' read -ra parts <<<"$FUZZ_SPLIT"
  for p in "${parts[@]}"; do share[${p%%:*}]=${p##*:}; done
elif [ "$cores" -lt 4 ]; then
  for t in "${targets[@]}"; do share[$t]=1; done
else
  share[allocator]=$(( cores / 16 > 1 ? cores / 16 : 1 ))
  share[lake]=$(( cores / 16 > 1 ? cores / 16 : 1 ))
  share[rmm_csv]=$(( cores / 8 > 1 ? cores / 8 : 1 ))
  rest=$(( cores - share[allocator] - share[lake] - share[rmm_csv] ))
  share[pickle_struct]=$(( (rest + 1) / 2 ))
  share[pickle]=$(( rest / 2 ))
fi

workers=0
for t in "${targets[@]}"; do
  [[ "${share[$t]:-0}" =~ ^[0-9]+$ ]] || { echo "fuzz-device: bad FUZZ_SPLIT $FUZZ_SPLIT" >&2; exit 2; }
  workers=$((workers + ${share[$t]:-0}))
done

# One core: runs its target again after a finding (at most 3 runs) while at least 10 s are left.
# Files: logs/<target>-w<slot>-r<run>.log (+ .time: start end exit-status), pids/<target>-w<slot>.
slot_loop() {
  local t=$1 slot=$2 run=0 seeds="$folder/corpus/$1" extra=() rc left start
  if [ "$t" = pickle_struct ]; then seeds="$folder/corpus/pickle"; fi
  if [ "$t" = allocator ] || [ "$t" = lake ]; then extra=(-max_len=1024); fi
  mkdir -p "$work/corpus/$t"
  while [ "$run" -lt 3 ] && [ ! -e "$work/stop" ]; do
    start=$(date +%s); left=$((run_end - start))
    [ "$left" -ge 10 ] || break
    local log="$work/logs/$t-w$slot-r$run.log"
    echo "$start" >"$log.time"
    "$folder/bin/${t}_fuzzer" "$work/corpus/$t" "$seeds" -max_total_time="$left" -print_final_stats=1 \
      -timeout=10 -rss_limit_mb="$rss_mb" -malloc_limit_mb="$rss_mb" \
      -artifact_prefix="$work/findings/$t-w$slot-r$run-" "${extra[@]}" >"$log" 2>&1 &
    echo $! >"$work/pids/$t-w$slot"
    wait $!; rc=$?
    echo "$start $(date +%s) $rc" >"$log.time"
    [ "$rc" -eq 0 ] && break
    run=$((run + 1))
  done
  rm -f "$work/pids/$t-w$slot"
}

# Summary from the logs: final stats where a process has ended, else its last "#N" line.
summarize() {  # final(0/1) wall_seconds
  local final=$1 wall=$2 total=0 all_findings=0 t f n cov rss s e lines=() execs_t cov_t rss_t find_t cores_t secs_t
  for t in "${targets[@]}"; do
    execs_t=0; cov_t=0; rss_t=0; secs_t=0; cores_t=${share[$t]}
    for f in "$work/logs/$t"-w*-r*.log; do
      [ -e "$f" ] || continue
      n="$(sed -n 's/^stat::number_of_executed_units: *//p' "$f" | tail -n 1)"
      [ -n "$n" ] || n="$(grep -aoE '^#[0-9]+' "$f" | tail -n 1 | tr -d '#')"
      execs_t=$((execs_t + ${n:-0}))
      cov="$(grep -aoE 'cov: [0-9]+' "$f" | tail -n 1 | tr -dc 0-9)"
      [ "${cov:-0}" -gt "$cov_t" ] && cov_t=$cov
      read -r s e _ <"$f.time" 2>/dev/null || s=""
      [ -n "$s" ] && secs_t=$((secs_t + ${e:-$(date +%s)} - s))
      rss="$(sed -n 's/^stat::peak_rss_mb: *//p' "$f" | tail -n 1)"
      [ "${rss:-0}" -gt "$rss_t" ] && rss_t=$rss
    done
    find_t=$(find "$work/findings" -maxdepth 1 -type f -name "$t-w*" \
      \( -name '*-crash-*' -o -name '*-leak-*' -o -name '*-timeout-*' -o -name '*-oom-*' \) | wc -l)
    total=$((total + execs_t)); all_findings=$((all_findings + find_t))
    lines+=("$(printf '%-14s %5s %14s %10s %12s %6s %8s %8s' "$t" "$cores_t" "$execs_t" \
      $((execs_t / (wall > 0 ? wall : 1))) $((execs_t / (secs_t > 0 ? secs_t : 1))) \
      "$cov_t" "$rss_t" "$find_t")")
  done
  {
    if [ "$final" = 1 ]; then echo "fuzz-device: summary (final)"; else echo "fuzz-device: summary (partial, run still going)"; fi
    echo "build: $(cat "$folder/BUILD_INFO" 2>/dev/null || echo unknown)"
    echo "machine: $(nproc) cores, $workers fuzzing processes at a time; $(uname -m); wall ${wall} s of SECONDS=$budget"
    printf '%-14s %5s %14s %10s %12s %6s %8s %8s\n' target cores executions exec/s exec/s/core cov rss_mb findings
    printf '%s\n' "${lines[@]}"
    echo "total this run: $total executions in ${wall} s ($((total / (wall > 0 ? wall : 1)))/s), $all_findings findings, $failures processes failed without a finding"
    echo "total over runs: $((total + previous)) executions (this run $total + FUZZ_PREVIOUS_TOTAL $previous)"
  } >"$out/fuzz-summary.txt"
  grand=$((total + previous)); findings=$all_findings
}

failures=0; grand=0; findings=0
for t in "${targets[@]}"; do
  for ((s = 0; s < ${share[$t]:-0}; s++)); do slot_loop "$t" "$s" & done
done
echo "fuzz-device: $(nproc) cores; workers: pickle ${share[pickle]} pickle_struct ${share[pickle_struct]} rmm_csv ${share[rmm_csv]} allocator ${share[allocator]}; processes end after $((run_end - t0)) s, hard stop at ${budget} s"
tick="${FUZZ_PROGRESS_SECONDS:-60}"
next_tick=$((t0 + tick))
while [ -n "$(jobs -pr)" ]; do
  now=$(date +%s)
  if [ "$now" -ge $((deadline - 6)) ]; then
    touch "$work/stop"
    for p in "$work/pids"/*; do [ -e "$p" ] && kill -INT "$(cat "$p")" 2>/dev/null; done
    sleep 3
    for p in "$work/pids"/*; do [ -e "$p" ] && kill -KILL "$(cat "$p")" 2>/dev/null; done
    break
  fi
  if [ "$now" -ge "$next_tick" ]; then
    summarize 0 $((now - t0))
    echo "fuzz-device: after $((now - t0)) s: at least $((grand - previous)) executions this run, $grand over runs, $findings findings"
    next_tick=$((next_tick + tick))
  fi
  sleep 1
done
wait
wall=$(( $(date +%s) - t0 ))

# Processes that failed without a finding (neither exit 0, nor interrupted by the stop: 72, 130, 137).
for tf in "$work/logs"/*.time; do
  [ -e "$tf" ] || continue
  read -r _ _ rc <"$tf"
  case "$rc" in 0|72|130|137) ;; *)
    log="${tf%.time}"; name="$(basename "$log" .log)"
    if ! ls "$work/findings/$name-"* >/dev/null 2>&1; then
      failures=$((failures + 1)); tail -n 80 "$log" >"$out/$name.failed.log.tail"
    fi ;;
  esac
done
summarize 1 "$wall"
# Finding inputs (at most 5) with the end of their logs.
copied=0
for f in "$work/findings"/*; do
  [ -e "$f" ] || continue
  case "$f" in *-crash-*|*-leak-*|*-timeout-*|*-oom-*) ;; *) continue ;; esac
  [ "$copied" -lt 5 ] || break
  cp "$f" "$out/"
  name="$(basename "$f")"; name="${name%%-crash-*}"; name="${name%%-leak-*}"; name="${name%%-timeout-*}"; name="${name%%-oom-*}"
  tail -n 80 "$work/logs/$name.log" >"$out/$name.log.tail"
  copied=$((copied + 1))
done
cat "$out/fuzz-summary.txt"
if [ "$findings" -gt 0 ] || [ "$failures" -gt 0 ]; then exit 1; fi
exit 0
