// A fixed-size block pool: many equal objects (here 256-byte messages) allocated and freed in O(1).
//
// Build and run: cmake --build build && build/examples/example_block_pool
#include "gmlake/classic/block_pool.h"

#include <cstdio>
#include <cstring>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/units.h"

int main() {
  // The backend provides the memory: HostBackend maps real host memory (a CudaBackend would give GPU memory
  // through the very same pool code).
  gmlake::HostBackend backend;

  // 256-byte blocks, 64-byte aligned, in 2 MiB regions; the pool may grow to 4 regions (32768 blocks).
  gmlake::classic::BlockPool pool(backend, {.block_bytes = 256, .alignment_bytes = 64, .max_regions = 4});
  std::printf("one region holds %llu blocks; the pool can grow to %llu\n",
              static_cast<unsigned long long>(pool.capacity_blocks()),
              static_cast<unsigned long long>(pool.max_blocks()));

  // Allocate more blocks than one region holds: the pool maps a second region when the first is full.
  std::vector<void*> messages;
  for (int i = 0; i < 10000; ++i) {
    void* p = pool.allocate();
    std::snprintf(static_cast<char*>(p), 256, "message %d", i);
    messages.push_back(p);
  }
  std::printf("%s ... %s; %llu blocks free\n", static_cast<char*>(messages.front()),
              static_cast<char*>(messages.back()), static_cast<unsigned long long>(pool.available()));

  // Free them all: O(1) each.
  for (void* p : messages) pool.deallocate(p);

  // Misuse is an exception, and the pool stays usable.
  void* p = pool.allocate();
  pool.deallocate(p);
  try {
    pool.deallocate(p);  // twice
  } catch (const gmlake::Error& e) {
    std::printf("double free caught: %s\n", e.what());
  }

  const gmlake::Stats stats = pool.stats();
  std::printf("allocations %llu, frees %llu, peak allocated %lld bytes, reserved %lld bytes\n",
              static_cast<unsigned long long>(stats.num_allocs), static_cast<unsigned long long>(stats.num_frees),
              static_cast<long long>(stats.allocated_bytes.peak), static_cast<long long>(stats.reserved_bytes.current));
  return stats.num_allocs == stats.num_frees && stats.invalid_frees == 1 ? 0 : 1;
}
