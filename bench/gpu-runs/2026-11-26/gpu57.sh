#!/usr/bin/env bash
# Run 57 (H100, seventh session): a second held-out batch of workloads, captured with PyTorch's own allocator
# (bench/torch/capture_traces.py, --unrecorded for each one's own wall time): llm_serve_contbatch,
# act_offload_train, pipeline_streams_infer, whisper_train, dpo_train, bert_train_eval, vae_decode_varres.
set -uo pipefail
export PYTHONUNBUFFERED=1
mkdir -p $OUT/r57
python3 bench/torch/capture_traces.py --xz-dir $OUT/r57 --json-dir $OUT/r57 --unrecorded --budget-scale 0.7 \
  --deadline 400 --only llm_serve_contbatch,act_offload_train,pipeline_streams_infer,whisper_train,dpo_train,bert_train_eval,vae_decode_varres \
  2>&1 | tee $OUT/r57/capture.log | grep -v "params:"
ls -la $OUT/r57
tar czf $OUT/run57.tgz -C $OUT r57 && rm -rf $OUT/r57
