// A layout cache: buffers of recurring shapes (size + alignment) come back from a cache instead of the
// device, with reference counts for buffers shared between owners.
//
// Build and run: cmake --build build && build/examples/example_layout_cache
#include "gmlake/classic/layout_cache.h"

#include <cstdio>
#include <cstring>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/units.h"

int main() {
  // Two "devices" (two host backends here; one CudaBackend per GPU on a GPU machine).
  gmlake::HostBackend device0, device1;
  gmlake::classic::LayoutCache cache({&device0, &device1},
                                   {.max_cached_bytes = 256 * gmlake::kMiB, .max_cached_entries = 64});

  const gmlake::classic::Layout activation{.size_bytes = 6 * gmlake::kMiB, .alignment_bytes = 256};
  for (int step = 0; step < 5; ++step) {
    void* a = cache.allocate(activation, /*device=*/0);  // step 0: from the device; then from the cache
    void* b = cache.allocate(activation, /*device=*/1);
    std::memset(a, step, 1024);

    cache.retain(a, 0);   // a second owner...
    cache.release(a, 0);  // ...done with it
    cache.release(a, 0);  // the last owner: `a` goes into the cache, still mapped
    cache.release(b, 1);  // pointers are released on the device they came from
  }
  const gmlake::classic::LayoutCacheStats s = cache.stats(0);
  std::printf("device 0: %llu hits, %llu misses, %llu bytes cached\n", static_cast<unsigned long long>(s.hits),
              static_cast<unsigned long long>(s.misses), static_cast<unsigned long long>(s.cached_bytes));

  // Releasing a buffer twice is caught.
  void* c = cache.allocate(activation, 0);
  cache.release(c, 0);
  try {
    cache.release(c, 0);
  } catch (const gmlake::Error& e) {
    std::printf("caught: %s\n", e.what());
  }

  cache.clear();  // give every cached buffer back to its device
  std::printf("after clear: device 0 holds %llu chunks\n", static_cast<unsigned long long>(device0.live_chunks()));
  return s.hits == 4 && s.misses == 1 && device0.live_chunks() == 0 ? 0 : 1;
}
