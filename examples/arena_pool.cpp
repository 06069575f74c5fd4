// An arena: scratch memory for one frame (or one request) of work, freed all at once; markers give
// nested scopes inside the frame.
//
// Build and run: cmake --build build && build/examples/example_arena_pool
#include "gmlake/classic/arena_pool.h"

#include <cstdio>
#include <cstring>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/units.h"

int main() {
  gmlake::HostBackend backend;
  gmlake::classic::ArenaPool arena(backend, 8 * gmlake::kMiB);  // one 8 MiB region, mapped once

  for (int frame = 0; frame < 3; ++frame) {
    // Allocation is a pointer bump: any size, any power-of-two alignment.
    auto* positions = static_cast<float*>(arena.allocate(1000 * sizeof(float), 64));
    for (int i = 0; i < 1000; ++i) positions[i] = static_cast<float>(frame * i);

    // A nested scope: everything allocated after the marker goes away at rollback.
    const gmlake::classic::ArenaPool::Marker scope = arena.mark();
    char* text = static_cast<char*>(arena.allocate(64 * gmlake::kKiB));
    std::snprintf(text, 64, "frame %d, position[999] = %.0f", frame, positions[999]);
    std::printf("%s (arena used: %llu bytes)\n", text, static_cast<unsigned long long>(arena.used_bytes()));
    arena.rollback(scope);

    // End of the frame: free everything at once.
    arena.reset();
  }

  // Asking for more than the arena holds is an OutOfMemoryError; the arena is unchanged.
  try {
    arena.allocate(16 * gmlake::kMiB);
  } catch (const gmlake::OutOfMemoryError& e) {
    std::printf("too big: %s\n", e.what());
  }
  const gmlake::Stats stats = arena.stats();
  std::printf("high-water mark: %lld bytes of %llu\n", static_cast<long long>(stats.allocated_bytes.peak),
              static_cast<unsigned long long>(arena.capacity_bytes()));
  return stats.num_ooms == 1 && arena.used_bytes() == 0 ? 0 : 1;
}
