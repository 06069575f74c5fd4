#!/usr/bin/env bash
# Run 195 (one GPU): the in-process A/B (scripts/gpu-steptime-ab.sh, 35 pairs, 3 rounds) of the given models at
# the default and at each given setting, to price on the GPU what the replay prices as modelled VMM: one-page
# chunks everywhere (max_chunk_bytes:2M) meet every memory target of the shipped traces, ppo_rollout_train's and
# nerf_rays_train's included, at +48% of the gate's modelled VMM (docs/benchmarks.md, twenty-ninth). Each model is
# one ../2026-12-07b/resnet_frontier.sh call with MODEL set: OUT/runRUN-MODEL-NAME.json per setting, OUT/runRUN.log.
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here:
#   bash bench/gpu-runs/2026-12-07c/chunk_frontier.sh OUT RUN "MODELS" NAME=CONF...   (NAME= alone: the default)
# As run: 195: chunk_frontier.sh $OUT 195 "gpt2 bert" default= page1=max_chunk_bytes:2M
set -uo pipefail
out=${1:?usage: chunk_frontier.sh OUT RUN MODELS NAME=CONF...}
run=${2:?usage: chunk_frontier.sh OUT RUN MODELS NAME=CONF...}
models=${3:?usage: chunk_frontier.sh OUT RUN MODELS NAME=CONF...}
shift 3
for m in $models; do
  MODEL=$m bash "$(dirname "$0")/../2026-12-07b/resnet_frontier.sh" "$out" "$run" "$@"
done
