#!/usr/bin/env bash
# Builds gmlake and replays a real PyTorch trace shipped in traces/ through every policy, side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
exec build/gmlake replay "${@:-traces/gpt2_varlen.snapshot.pickle.xz}" --policy all
