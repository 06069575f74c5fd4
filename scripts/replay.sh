#!/usr/bin/env bash
# Builds the command line alone (build/gmlake and the libraries it links: no tests, benchmarks or examples) and
# replays a real PyTorch trace shipped in traces/ through every policy, side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target gmlake_cli
exec build/gmlake replay "${@:-traces/gpt2_varlen.snapshot.pickle.xz}" --policy all
