#!/usr/bin/env bash
# Prepares .dev/fuzz/ (ignored by git) for the long fuzzing run on a many-core machine that has none of gmlake's
# Debian libraries (scripts/fuzz-device.sh runs it there). Builds the libFuzzer targets from the current working
# tree with scripts/ci-fuzz.sh (clang 14, ASan + UBSan, one second of each as a smoke test), then copies:
#   .dev/fuzz/bin/<target>_fuzzer   the five targets, debug info stripped (symbols kept): reproduce a finding
#                                   here with build-fuzz/<target>_fuzzer INPUT for file and line numbers
#   .dev/fuzz/lib/                  the shared libraries they need beyond glibc, libstdc++, libgcc_s and libm
#   .dev/fuzz/lib/compat/           libstdc++ and libgcc_s of this machine, used by fuzz-device.sh only when the
#                                   other machine's libstdc++ is too old for the binaries (GLIBCXX_3.4.30)
#   .dev/fuzz/corpus/<target>/      the seed corpora (fuzz/corpus/*)
#   .dev/fuzz/BUILD_INFO            the commit built and the sources that differed from it
# Usage: scripts/fuzz-carry.sh   (FUZZ_JOBS: build jobs, default all cores). Prints the folder's size.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=.dev/fuzz
targets=(pickle pickle_struct rmm_csv allocator lake)
# What is built: the commit, and the sources compiled that differ from it (others may be editing the tree).
info="commit $(git rev-parse --short=12 HEAD) ($(git log -1 --format=%cd --date=iso-strict)), built $(date -u +%Y-%m-%dT%H:%M:%SZ)"
dirty="$(git status --porcelain -- src include fuzz CMakeLists.txt | tr '\n' ' ')"
if [ -n "$dirty" ]; then info="$info; uncommitted changes compiled: $dirty"; else info="$info; no uncommitted changes in src/ include/ fuzz/"; fi
FUZZ_SECONDS=1 scripts/ci-fuzz.sh
rm -rf "$dest" && mkdir -p "$dest/bin" "$dest/lib/compat" "$dest/corpus"
for t in "${targets[@]}"; do
  cp "build-fuzz/${t}_fuzzer" "$dest/bin/"
  strip --strip-debug "$dest/bin/${t}_fuzzer"
done
ldd "$dest"/bin/* | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
ldd "$dest"/bin/* | awk '/=> \// {print $3}' | sort -u | grep -E '/(libgcc_s|libstdc\+\+)\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/compat/"; done
cp -r fuzz/corpus/* "$dest/corpus/"
echo "$info" >"$dest/BUILD_INFO"
cat "$dest/BUILD_INFO"
du -sh "$dest"
