#!/usr/bin/env bash
# Run 2 on the GPU: unrecorded times of the older traces, then the in-process A/B of issue 23 (six workloads,
# three rounds each) at the default.
set -uo pipefail
source .dev/gpu_env.sh
mkdir -p $OUT/t && cp traces/*.native.json $OUT/t/
timeout 150 python3 bench/torch/capture_traces.py --time-only --json-dir $OUT/t --only calib_layerwise,cnn_varres,gpt2_generate,llm_offload_streams,moe_varload 2>&1 | grep "===" 
mkdir -p $OUT/tt && for n in calib_layerwise cnn_varres gpt2_generate llm_offload_streams moe_varload; do cp $OUT/t/$n.native.json $OUT/tt/; done; rm -rf $OUT/t
python3 -c "import sys; sys.path.insert(0,'python'); import gmlake; gmlake.torch.enable('', extension=True); print('mode', gmlake.torch.mode())" 2>&1 | tail -3
timeout 400 scripts/gpu-steptime-ab.sh $OUT/ab 35 ${MODELS:-} 2>&1
tar czf $OUT/run2.tgz -C $OUT tt ab && rm -rf $OUT/tt $OUT/ab
