#!/usr/bin/env bash
# On the GPU machine, with binaries built here and carried in .dev/ (scripts/gpu-carry.sh, or copied from a
# CUDA-enabled build): the GPU tests, every trace (traces/ and .dev/traces/) replayed through every policy on
# the cuda backend and on sim:h100, and the in-process A/B of train.py. Everything lands in OUT_DIR, packed into
# OUT_DIR/gpu-replay-all.tar.gz at the end.
#
#   scripts/gpu-replay-all.sh OUT_DIR [AB_MODELS...]      (AB_MODELS default: gpt2)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-replay-all.sh OUT_DIR [models...]}
shift
models=("${@:-gpt2}")
work=$(mktemp -d)
export LD_LIBRARY_PATH=$PWD/.dev/lib GMLAKE_LIBRARY=$PWD/.dev/lib/libgmlake_c.so PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
{ nvidia-smi; python3 -c "import torch; print(torch.__version__, torch.version.cuda)"; } >"$work/machine.txt" 2>&1
timeout 240 .dev/bin/gmlake_gpu_tests --gtest_brief=1 >"$work/gpu-tests.log" 2>&1
echo "gpu tests: exit $?" | tee -a "$work/summary.txt"
tail -3 "$work/gpu-tests.log" | tee -a "$work/summary.txt"
for trace in traces/*.snapshot.pickle.xz .dev/traces/*.snapshot.pickle.xz; do
  name=$(basename "$trace" .snapshot.pickle.xz)
  for backend in cuda sim:h100; do
    timeout 120 .dev/bin/gmlake replay "$trace" --policy all --backend "$backend" --json "$work/$name.${backend%%:*}.json" \
      >"$work/$name.${backend%%:*}.txt" 2>&1
    echo "replay $name $backend: exit $?" >>"$work/summary.txt"
  done
done
for model in "${models[@]}"; do
  timeout 200 python3 bench/torch/train.py --model "$model" --alloc ab --steps 30 --json "$work/ab_$model.json" \
    >"$work/ab_$model.log" 2>&1
  echo "ab $model: exit $? $(tail -c 400 "$work/ab_$model.log")" >>"$work/summary.txt"
done
timeout 300 python3 tests/gpu/torch_allocator_test.py >"$work/torch-allocator-test.log" 2>&1
echo "torch allocator test: exit $? $(tail -1 "$work/torch-allocator-test.log")" >>"$work/summary.txt"
mkdir -p "$out" && cp "$work/summary.txt" "$out/" && tar -czf "$out/gpu-replay-all.tar.gz" -C "$work" .
cat "$out/summary.txt"
