#!/usr/bin/env bash
# Run 70 (eighth session; binaries of f74ede0): lag_grow_pages:0 (wait for the fence rather than create a chunk)
# against the default (64) on the training A/B workloads, 35 pairs, 3 rounds, the two one after the other per
# model: the replay's device model (--device-lag-us) says the lag growth costs utilization on 14 of 30 traces and
# lag_grow_pages:0 gives it back at about 3x the waits; this asks what the waits cost in step time.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
for m in bert-train-eval gpt2 bert; do
  echo "##### $m"
  MODEL=$m PAIRS=35 bash .dev/gpu53.sh "" "lag_grow_pages:0"
  mv $OUT/c1.json $OUT/run70-c1-ab_$m.json; mv $OUT/c2.json $OUT/run70-c2-ab_$m.json
done
