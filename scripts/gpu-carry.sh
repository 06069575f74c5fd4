#!/usr/bin/env bash
# Prepares .dev/ for a run on the GPU machine, which has CUDA, PyTorch and CMake but none of gmlake's Debian
# libraries: builds here (Release, CUDA backend on), then copies the CLI, the GPU tests, the benchmark, the C
# API library, the shared libraries those need beyond glibc and libstdc++, and the shared traces into .dev/
# (ignored by git: add "/.dev/" to .git/info/exclude). On the GPU machine:
#   export LD_LIBRARY_PATH=$PWD/.dev/lib GMLAKE_LIBRARY=$PWD/.dev/lib/libgmlake_c.so
#   .dev/bin/gmlake_gpu_tests; .dev/bin/device_pool_gpu_tests; .dev/bin/gmlake replay .dev/traces/*.xz --backend cuda; scripts/gpu-e2e.sh $OUT
#   scripts/gpu-async-replay.sh $OUT   (the async policy's GPU tests, then every shipped trace with --policy all on cuda)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh -DGMLAKE_WITH_CUDA=ON
rm -rf .dev/bin .dev/lib .dev/traces && mkdir -p .dev/bin .dev/lib .dev/traces  # other folders of .dev/ (helpers') stay
for f in gmlake gmlake_gpu_tests gmlake_bench device_pool_gpu_tests device_pool_bench examples/example_device_pool; do
  [ -f "build/$f" ] && cp "build/$f" .dev/bin/
done
cp build/libgmlake_c.so .dev/lib/
# The environment the GPU machine's scripts source (scripts/gpu-checks-carried.sh, bench/gpu-runs/*): written here
# so that a fresh checkout has it too.
cat > .dev/gpu_env.sh <<'ENV'
export LD_LIBRARY_PATH=$PWD/.dev/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GMLAKE_LIBRARY=$PWD/.dev/lib/libgmlake_c.so
ENV
ldd .dev/bin/* .dev/lib/libgmlake_c.so | awk '/=> \// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libgcc_s|libstdc\+\+|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
  while read -r lib; do cp -L "$lib" .dev/lib/; done
cp ../shared/traces/*.snapshot.pickle.xz .dev/traces/ 2>/dev/null || cp traces/*.snapshot.pickle.xz .dev/traces/
du -sh .dev
# The build dependencies of libgmlake_c.so (fmt, abseil: headers, CMake package files, shared libraries) under
# .dev/sysroot/usr, for `pip install .` on the GPU machine: CMAKE_PREFIX_PATH=$PWD/.dev/sysroot/usr there.
rm -rf .dev/sysroot && mkdir -p .dev/sysroot/usr/include .dev/sysroot/usr/lib/x86_64-linux-gnu/cmake
cp -r /usr/include/absl /usr/include/fmt .dev/sysroot/usr/include/
cp -r /usr/lib/x86_64-linux-gnu/cmake/absl /usr/lib/x86_64-linux-gnu/cmake/fmt .dev/sysroot/usr/lib/x86_64-linux-gnu/cmake/
cp -P /usr/lib/x86_64-linux-gnu/libabsl_*.so* /usr/lib/x86_64-linux-gnu/libfmt.so* .dev/sysroot/usr/lib/x86_64-linux-gnu/
du -sh .dev/sysroot
