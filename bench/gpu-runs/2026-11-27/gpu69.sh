#!/usr/bin/env bash
# Run 69 (eighth session; binaries of f74ede0): ResNet-50 inference's A/B over 65 pairs a round (3 rounds), the old
# waiting share (waiting_growth_chunk_share:32) against the new default, one after the other in one call, then the
# new default against the old once more (the order swapped), for a verdict above the workload's noise.
set -uo pipefail
source .dev/gpu_env.sh
MODEL=resnet50-infer PAIRS=65 bash .dev/gpu53.sh "waiting_growth_chunk_share:32" "" "" "waiting_growth_chunk_share:32"
