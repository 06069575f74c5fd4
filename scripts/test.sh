#!/usr/bin/env bash
# Builds gmlake and runs every CPU test (ctest label `cpu`; `gpu` tests run on a GPU machine only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# Chromium renders the --plot page in one test, which is skipped only where it cannot be installed.
scripts/install-deps.sh --chromium || echo "gmlake: chromium could not be installed: the plot render test is skipped" >&2
ctest --test-dir build -L cpu -j "$(nproc)" --output-on-failure
