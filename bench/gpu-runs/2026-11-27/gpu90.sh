#!/usr/bin/env bash
# Run 90 (H100, eleventh session, after the re-read): the two VMM probes after probe_support.h took their shared
# summarize(), bench/torch/workload_ab.py and capture_traces.py --time-only after both took recorded_calls() (the
# latter now counts a workload's "iterations": ppo_rollout_train), each run once to check they still run as before.
set -uo pipefail
source .dev/gpu_env.sh
export PYTHONPATH=$PWD/python PYTHONUNBUFFERED=1
echo "##### overlap probe"; timeout 60 .dev/probe/vmm_overlap_probe > $OUT/overlap5.json; echo rc=$?; cut -c1-220 $OUT/overlap5.json
echo "##### async probe"; timeout 150 .dev/probe/vmm_async_probe > $OUT/async2.json; echo rc=$?; head -c 400 $OUT/async2.json; echo
echo "##### workload_ab ppo"; timeout 200 python3 bench/torch/workload_ab.py ppo_rollout_train --runs 2 > $OUT/run90-ab_ppo_rollout_train.json 2>$OUT/ab.log; echo rc=$?; tail -2 $OUT/ab.log | cut -c1-200; cut -c1-400 $OUT/run90-ab_ppo_rollout_train.json
echo "##### time-only ppo"; mkdir -p $OUT/t; cp traces/ppo_rollout_train.native.json $OUT/t/; timeout 200 python3 bench/torch/capture_traces.py --time-only --json-dir $OUT/t --only ppo_rollout_train 2>&1 | grep -v params | tail -3
