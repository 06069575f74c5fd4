// A bump allocator: scratch memory for one frame (or one request) of work, freed all at once; markers give
// nested scopes inside the frame.
//
// Build and run: cmake --build build && build/examples/example_bump_allocator
#include "gmlake/classic/bump_allocator.h"

#include <cstdio>
#include <cstring>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/units.h"

int main() {
  gmlake::HostBackend backend;
  gmlake::classic::BumpAllocator bump(backend, 8 * gmlake::kMiB);  // one 8 MiB region, mapped once

  for (int frame = 0; frame < 3; ++frame) {
    // Allocation is a pointer bump: any size, any power-of-two alignment.
    auto* positions = static_cast<float*>(bump.allocate(1000 * sizeof(float), 64));
    for (int i = 0; i < 1000; ++i) positions[i] = static_cast<float>(frame * i);

    // A nested scope: everything allocated after the marker goes away at rollback.
    const gmlake::classic::BumpAllocator::Marker scope = bump.mark();
    char* text = static_cast<char*>(bump.allocate(64 * gmlake::kKiB));
    std::snprintf(text, 64, "frame %d, position[999] = %.0f", frame, positions[999]);
    std::printf("%s (arena used: %llu bytes)\n", text, static_cast<unsigned long long>(bump.used_bytes()));
    bump.rollback(scope);

    // End of the frame: free everything at once.
    bump.reset();
  }

  // Asking for more than the allocator holds is an OutOfMemoryError; the allocator is unchanged.
  try {
    bump.allocate(16 * gmlake::kMiB);
  } catch (const gmlake::OutOfMemoryError& e) {
    std::printf("too big: %s\n", e.what());
  }
  const gmlake::Stats stats = bump.stats();
  std::printf("high-water mark: %lld bytes of %llu\n", static_cast<long long>(stats.allocated_bytes.peak),
              static_cast<unsigned long long>(bump.capacity_bytes()));
  return stats.num_ooms == 1 && bump.used_bytes() == 0 ? 0 : 1;
}
