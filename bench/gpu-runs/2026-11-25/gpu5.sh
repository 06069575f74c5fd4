#!/usr/bin/env bash
# Run 5 on the GPU: the GPU tests, --device-bytes on cuda, and the A/B of the final default (move_burst_ms:300,
# move_headroom_permille:50 passed explicitly: the binary's defaults were 100 / 20 at the time).
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/r5
timeout 150 .dev/bin/gmlake_gpu_tests --gtest_brief=1 > $OUT/r5/gpu_tests.log 2>&1; echo "gpu tests rc $?"; tail -4 $OUT/r5/gpu_tests.log
for t in gpt2_fixed_b16 unet3d_infer; do timeout 60 .dev/bin/gmlake replay traces/$t.snapshot.pickle.xz --policy all --backend cuda --device-bytes 1.01x --conf move_burst_ms:300,move_headroom_permille:50 2>&1 | tail -4; done
python3 -c "import sys; sys.path.insert(0,'python'); import gmlake; gmlake.torch.enable('', extension=True); print('mode', gmlake.torch.mode())" 2>&1 | tail -1
GMLAKE_CONF_AB=move_burst_ms:300,move_headroom_permille:50 timeout 380 scripts/gpu-steptime-ab.sh $OUT/r5/ab 35 2>&1 | grep "all rounds\|FAILED"
tar czf $OUT/run5.tgz -C $OUT r5 && rm -rf $OUT/r5
