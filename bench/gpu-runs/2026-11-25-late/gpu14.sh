#!/usr/bin/env bash
# Run 14: engine CPU per op on the idle GPU machine, the session's start (.dev/old) against the faster engine
# (3c57c12), alternating; then the A/B of gpt2 varlen, resnet50-infer (60 pairs) and gpt2-generate (40) on the new engine.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r14
[ -d /work/main/traces ] || { mkdir -p /work/main && ln -s $PWD/traces /work/main/traces; }
[ -d /work/shared/traces ] || { mkdir -p /work/shared && ln -s $PWD/.dev/traces /work/shared/traces; }
for r in 1 2; do for b in old bin; do
  timeout 80 .dev/$b/gmlake_bench --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_format=json > $OUT/r14/bench_${b}_$r.json 2>/dev/null; echo "bench $b $r rc $?"
done; done
timeout 130 scripts/gpu-steptime-ab.sh $OUT/r14/ab 60 gpt2 resnet50-infer 2>&1 | grep "round\|FAILED"
timeout 90 scripts/gpu-steptime-ab.sh $OUT/r14/ab 40 gpt2-generate 2>&1 | grep "round\|FAILED"
tar czf $OUT/run14.tgz -C $OUT r14 && rm -rf $OUT/r14
