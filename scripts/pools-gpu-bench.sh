#!/usr/bin/env bash
# The classic pools on the GPU against the driver's cuMemAlloc / cuMemFree (bench/cuda/pools_cuda_bench.cpp):
# runs those benchmarks in one process, 3 repetitions each (medians), and prints the plain / pool ratios as a
# table (scripts/pools_bench.py --gpu --from-json). Under a minute on an H200; without a usable CUDA device every
# benchmark is skipped with the reason, and the table says which are missing.
#
#   scripts/pools-gpu-bench.sh [OUT_DIR]
#     OUT_DIR   where the results go (default: $OUT, else build/): pools-gpu-bench.json (Google Benchmark's
#               JSON), pools-gpu-bench.txt (its console output and the GPU's name), pools-gpu-ratios.md (the table)
#   GMLAKE_BENCH=path   the benchmark program (default build/gmlake_bench, built with the CUDA backend)
#   REPETITIONS=N       repetitions per benchmark (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."

bench=${GMLAKE_BENCH:-build/gmlake_bench}
repetitions=${REPETITIONS:-3}
out=${1:-${OUT:-build}}
mkdir -p "$out"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$out/pools-gpu-bench.txt" 2>&1 ||
  echo "nvidia-smi not available" >"$out/pools-gpu-bench.txt"
"$bench" --benchmark_filter='^BM_Cu' --benchmark_repetitions="$repetitions" --benchmark_report_aggregates_only=true \
  --benchmark_out="$out/pools-gpu-bench.json" --benchmark_out_format=json | tee -a "$out/pools-gpu-bench.txt"
echo
python3 scripts/pools_bench.py --gpu --from-json "$out/pools-gpu-bench.json" | tee "$out/pools-gpu-ratios.md"
