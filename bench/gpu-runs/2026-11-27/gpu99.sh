#!/usr/bin/env bash
# Run 99 (H100, twelfth session): the extension's cacheInfo as PyTorch's allocator answers it (a zero guess becomes
# the device's free memory, raised to the pool's unused bytes; it answered 0, which left cuDNN only the
# convolution plans that need no workspace). The PyTorch allocator and feature tests with the extension compiled
# from this tree, then gan_train whole against native (10 pairs; runs 95-97 gave 1.046-1.061 with the old answer).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
echo "##### torch_features_test"; timeout 400 python3 tests/gpu/torch_features_test.py 2>&1 | grep -E "^(ok|FAIL|PASSED|FAILED)" | tail -40
echo "##### torch_allocator_test"; timeout 300 python3 tests/gpu/torch_allocator_test.py 2>&1 | tail -4
echo "##### gan_train"
timeout 250 python3 bench/torch/workload_ab.py gan_train --runs ${RUNS:-10} > $OUT/run99-ab_gan_train.json 2> $OUT/run99.log
python3 -c "
import json; r=json.load(open('$OUT/run99-ab_gan_train.json')); print('median', r['median_ratio'], 'total', round(r['total_ratio'],4), 'peaks', r['gmlake_peak_reserved'], r['native_peak_reserved'])
for p in r['pairs']: print(p)"
