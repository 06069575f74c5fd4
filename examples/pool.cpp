// gmlake's pool from C++: the same stack the C API, the replay and PyTorch use (include/gmlake/pool.h), made from
// one configuration string. backend:cuda gives it GPU memory of device 0 (builds with the CUDA backend).
//
// Build and run: cmake --build build && build/examples/example_pool
#include "gmlake/pool.h"

#include <cstdio>
#include <cstring>

#include "gmlake/error.h"
#include "gmlake/units.h"

int main() {
  gmlake::Pool pool(gmlake::parse_config("backend:host,cap_bytes:256M"));
  auto* a = static_cast<char*>(pool.allocate(100 * gmlake::kMiB, /*stream=*/0));
  std::memset(a, 1, 100 * gmlake::kMiB);  // host memory: the CPU may touch it
  pool.record_stream(a, /*stream=*/7);    // a second stream uses it too (waits only on cuda)
  try {
    pool.allocate(200 * gmlake::kMiB, 0);  // 300 MiB would pass the cap
  } catch (const gmlake::OutOfMemoryError& e) {
    std::printf("as expected: %s\n", e.what());
  }
  pool.deallocate(a);
  void* b = pool.allocate(200 * gmlake::kMiB, 0);  // fits now: the freed memory is reused
  const gmlake::Stats s = pool.stats();
  std::printf("allocated %lld MiB, reserved %lld MiB (peak %lld MiB)\n",
              static_cast<long long>(s.allocated_bytes.current >> 20), static_cast<long long>(s.reserved_bytes.current >> 20),
              static_cast<long long>(s.reserved_bytes.peak >> 20));
  pool.deallocate(b);
  pool.empty_cache();
  return pool.stats().reserved_bytes.current == 0 ? 0 : 1;
}
