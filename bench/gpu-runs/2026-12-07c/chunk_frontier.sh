#!/usr/bin/env bash
# Runs 195+ (one GPU): the in-process A/B (scripts/gpu-steptime-ab.sh, 35 pairs, 3 rounds) of the given models at
# the default and at each given setting, to price on the GPU what the replay prices as modelled VMM: one-page
# chunks everywhere (max_chunk_bytes:2M) meet every memory target of the shipped traces, ppo_rollout_train's and
# nerf_rays_train's included, at +48% of the gate's modelled VMM (docs/benchmarks.md, twenty-ninth).
# On the GPU machine, from the repo root, after scripts/gpu-carry.sh here:
#   bash bench/gpu-runs/2026-12-07c/chunk_frontier.sh OUT RUN "MODELS" NAME=CONF...   (NAME= alone: the default)
set -uo pipefail
out=${1:?usage: chunk_frontier.sh OUT RUN MODELS NAME=CONF...}
run=${2:?run number}
models=${3:?models}
shift 3
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
log=$out/run$run.log
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a "$log"
for m in $models; do
  for setting in "$@"; do
    name=${setting%%=*}
    conf=${setting#*=}
    t0=$SECONDS
    echo "== $m $name ($conf) $(date +%T)" | tee -a "$log"
    GMLAKE_CONF_AB=$conf ROUNDS=3 scripts/gpu-steptime-ab.sh /tmp/ab$run-$name 35 $m 2>&1 | tee -a "$log"
    cp /tmp/ab$run-$name/ab_$m.json "$out/run$run-$m-$name.json"
    echo "   $((SECONDS - t0)) s" | tee -a "$log"
  done
done
