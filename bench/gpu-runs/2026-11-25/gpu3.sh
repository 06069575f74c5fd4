#!/usr/bin/env bash
# Run 3 on the GPU: the in-process A/B of issue 23 at the default (wall-time move share), six workloads x 3 rounds.
set -uo pipefail
source .dev/gpu_env.sh
python3 -c "import sys; sys.path.insert(0,'python'); import gmlake; gmlake.torch.enable('', extension=True); print('mode', gmlake.torch.mode())" 2>&1 | tail -1
timeout 520 scripts/gpu-steptime-ab.sh $OUT/ab 35 ${MODELS:-} 2>&1
tar czf $OUT/run3.tgz -C $OUT ab && rm -rf $OUT/ab
