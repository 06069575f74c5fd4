#!/usr/bin/env bash
# Runs 66 and 67 (eighth session; binaries of 93683d2): the default against waiting_growth_chunk_share:768 (growth
# chunks as small while the device waits as while it is busy) on the A/B workloads, 35 pairs, 3 rounds,
# the two configurations one after the other per model. Run 66: gpt2 resnet50-infer gpt2-generate; run 67:
# unet3d-infer bert (MODELS=...), run 68: gpt2-fixed. gpt2-generate did not finish in run 66 (190 s a configuration).
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for m in ${MODELS:-gpt2 resnet50-infer gpt2-generate}; do
  echo "##### $m"
  MODEL=$m PAIRS=35 bash .dev/gpu53.sh "" "waiting_growth_chunk_share:768"
  mkdir -p $OUT/$m && mv $OUT/c1.json $OUT/$m/c1.json && mv $OUT/c2.json $OUT/$m/c2.json
done
cd $OUT && tar czf ab.tgz ${MODELS:-gpt2 resnet50-infer gpt2-generate} && rm -rf ${MODELS:-gpt2 resnet50-infer gpt2-generate}
