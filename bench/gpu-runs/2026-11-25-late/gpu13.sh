#!/usr/bin/env bash
# Run 13 (2026-11-25 late): engine CPU per op on the idle GPU machine (sim backend), then the A/B of the two
# workloads that missed the time bar, with the harness's garbage collection moved between pairs, 60 pairs x 3
# rounds, at the default and with 16 MiB chunks (the frontier).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r13
nproc; uptime
pwd; [ -d /work/main/traces ] || { mkdir -p /work/main && ln -s $PWD/traces /work/main/traces; }
[ -d /work/shared/traces ] || { mkdir -p /work/shared && ln -s $PWD/.dev/traces /work/shared/traces; }
timeout 200 .dev/bin/gmlake_bench --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=json > $OUT/r13/bench.json 2> $OUT/r13/bench.err; echo "bench rc $?"
timeout 200 scripts/gpu-steptime-ab.sh $OUT/r13/ab 60 gpt2 resnet50-infer 2>&1 | grep "round\|FAILED"
GMLAKE_CONF_AB=max_chunk_bytes:16777216 timeout 200 scripts/gpu-steptime-ab.sh $OUT/r13/ab16 60 gpt2 resnet50-infer 2>&1 | grep "round\|FAILED"
tar czf $OUT/run13.tgz -C $OUT r13 && rm -rf $OUT/r13
