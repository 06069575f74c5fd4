#!/usr/bin/env bash
# Builds gmlake and runs every CPU test (ctest label `cpu`; `gpu` tests run on a GPU machine only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir build -L cpu -j "$(nproc)" --output-on-failure
