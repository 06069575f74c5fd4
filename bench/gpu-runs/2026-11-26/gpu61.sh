#!/usr/bin/env bash
# Run 61 (H100, seventh session; binaries of runs 58-60): fit_candidates:16 (the Placer weighs 16 free ranges, not
# 8) against the default, in the A/B of bert-train-eval (35 pairs) and of gpt2 varlen (35 pairs), 3 rounds each,
# one configuration after the other in one call. Not landed: a measurement for the next session.
# .dev/gpu53.sh is bench/gpu-runs/2026-11-26/gpu53.sh, copied there.
set -uo pipefail
source .dev/gpu_env.sh
MODEL=bert-train-eval PAIRS=35 bash .dev/gpu53.sh "" "fit_candidates:16"
mkdir -p $OUT/bte && mv $OUT/c1.json $OUT/bte/c1.json && mv $OUT/c2.json $OUT/bte/c2.json
MODEL=gpt2 PAIRS=35 bash .dev/gpu53.sh "" "fit_candidates:16"
