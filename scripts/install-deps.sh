#!/usr/bin/env bash
# Installs what gmlake needs to build and test, from Debian 12 packages (gcc: the WorkloadAb test builds
# bench/torch/malloc_count.c). Skips apt when all are present.
# --sanitizers also installs clang 14 with its sanitizer and libFuzzer runtimes (scripts/ci-sanitizers.sh,
# scripts/ci-fuzz.sh); --chromium installs Debian's chromium (headless), for the `--plot` render test.
set -euo pipefail
pkgs=(cmake gcc g++ make libgtest-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libfmt-dev libabsl-dev liblzma-dev zlib1g-dev xz-utils python3)
if [ "${1:-}" = "--sanitizers" ]; then pkgs+=(clang-14 libclang-rt-14-dev llvm-14); fi
if [ "${1:-}" = "--chromium" ]; then pkgs=(chromium); fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
  echo "gmlake: missing packages (${missing[*]}) and no apt-get: install them by hand" >&2; exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "gmlake: need root or sudo to apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "gmlake: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
