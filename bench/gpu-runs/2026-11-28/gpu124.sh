#!/usr/bin/env bash
# Run 124 (H100, sixteenth session), one call: the engine's ns/op on this host's CPU (gmlake_bench on sim, HEAD
# 38ed0a2's build carried in .dev/bin, lowest of 3 per trace), then a sixth held-out batch of workloads captured
# with PyTorch's own allocator as the fourth and fifth were (gpu87.sh: capture_traces.py --unrecorded, budget scale
# 0.7): embed_infer_sorted, int8_weight_generate, longctx_chunked_prefill, mae_pretrain. Written after the default
# was last changed (a1750e4, 2026-11-28), replayed only once captured.
set -uo pipefail
source .dev/gpu_env.sh
run=${RUN:-124}
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "##### bench"; lscpu | grep -E "Model name|^CPU\(s\)" | tr -s ' '
  timeout 200 .dev/bin/gmlake_bench --benchmark_filter='replay/.*/(gmlake|caching)/' --benchmark_repetitions=3 \
    --benchmark_format=json > $OUT/run$run-bench.json 2> /tmp/bench.err || tail -3 /tmp/bench.err
  python3 bench/gpu-runs/2026-11-27/nsop.py $OUT/run$run-bench.json 2>&1 | tail -4
fi
echo "##### capture"
RUN=$run ONLY=${ONLY:-embed_infer_sorted,int8_weight_generate,longctx_chunked_prefill,mae_pretrain} \
  timeout 520 bash bench/gpu-runs/2026-11-27/gpu87.sh
