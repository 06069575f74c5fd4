#!/usr/bin/env bash
# Configures and builds gmlake into ./build (Release). `--target NAME` (repeatable, first) builds only those CMake
# targets and what they link (scripts/replay.sh: `--target gmlake_cli`, build/gmlake); without it, everything.
# The other arguments go to cmake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
targets=()
while [ "${1:-}" = "--target" ]; do
  [ -n "${2:-}" ] || { echo "scripts/build.sh: --target needs a target name" >&2; exit 2; }
  targets+=(--target "$2")
  shift 2
done
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)" "${targets[@]}"
