#!/usr/bin/env bash
# CI: the whole CPU test suite (ctest -L cpu) built with clang under ASan + UBSan (build-asan), then under TSan
# (build-tsan). Every sanitizer finding is fatal to its test (halt_on_error, -fno-sanitize-recover=all), and a
# failed test fails the job. docs/reliability.md gives the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitizers
jobs="$(nproc)"

# configure_and_build BUILD_DIR SANITIZERS
configure_and_build() {
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 -DGMLAKE_SANITIZE="$2" \
    -DGMLAKE_BUILD_BENCHMARKS=OFF >/dev/null
  cmake --build "$1" -j "$jobs"
}

export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1
export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1
export LLVM_SYMBOLIZER_PATH=/usr/bin/llvm-symbolizer-14

configure_and_build build-asan address,undefined
ctest --test-dir build-asan -L cpu -j "$jobs" --output-on-failure

configure_and_build build-tsan thread
# TSan keeps mmap to a small part of the address space, and where that part starts moves with address
# randomization: the host backend's 1 TiB arenas then fail now and then with ENOMEM (and on some kernels TSan
# cannot start at all). Without randomization (setarch -R, inherited by every test process) they always fit.
setarch "$(uname -m)" -R ctest --test-dir build-tsan -L cpu -j "$jobs" --output-on-failure
