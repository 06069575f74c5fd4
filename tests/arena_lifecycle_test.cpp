// Per-stream arenas (cross_stream_reuse off, as on the GPU) of streams with nothing placed in
// them give their address space back, so short-lived streams never run a process out of it.
#include <gtest/gtest.h>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "policies/gmlake/stitching_allocator.h"

namespace gmlake::engine {
namespace {

TEST(ArenaLifecycleTest, ThousandsOfShortLivedStreamsKeepABoundedNumberOfReservations) {
  SimBackend sim;
  StitchingAllocator a(parse_config("cross_stream_reuse:false"), sim);
  void* long_lived = a.allocate(8 * kMiB, 1);
  for (StreamId stream = 100; stream < 3100; ++stream) {
    void* p = a.allocate(3 * kMiB, stream);
    void* q = a.allocate(4 * kKiB, stream);
    a.deallocate(p);
    a.deallocate(q);
    ASSERT_LE(sim.live_reservations(), 2 + 2 * StitchingAllocator::kSpareArenas + 2) << "stream " << stream;
  }
  a.check_invariants();
  EXPECT_NE(a.find_block(long_lived), std::nullopt) << "the arena in use stays";
  a.empty_cache();
  EXPECT_EQ(sim.live_reservations(), 1u) << "only the long-lived block's arena is left";
  a.check_invariants();
  a.deallocate(long_lived);
  void* again = a.allocate(kMiB * 2, 100);  // a retired stream comes back: a new arena
  a.check_invariants();
  a.deallocate(again);
}

TEST(ArenaLifecycleTest, RunningOutOfAddressSpaceRetiresEmptyArenasAndRetries) {
  // Host backend: 1 TiB arenas run a 47-bit address space out after about 100; short-lived streams must not.
  HostBackend host;
  StitchingAllocator a(parse_config("cross_stream_reuse:false"), host);
  for (StreamId stream = 1; stream <= 400; ++stream) {
    void* p = nullptr;
    ASSERT_NO_THROW(p = a.allocate(kMiB * 3, stream)) << "stream " << stream;
    a.deallocate(p);
  }
  a.check_invariants();
}

// Arenas of 32 TiB (the default 1 TiB would take hundreds of streams, arenas shrinking as they multiply) run the
// host's address space (about 128 TiB) out within a few dozen streams, even at their smallest (32 GiB).
TEST(ArenaLifecycleTest, AddressSpaceHeldByLiveBlocksIsAnOutOfMemoryThatRecovers) {
  HostBackend host;
  StitchingAllocator a(parse_config("cross_stream_reuse:false,arena_virtual_bytes:32T"), host);
  std::vector<void*> live;
  StreamId stream = 1;
  try {
    for (; stream < 100000; ++stream) live.push_back(a.allocate(kMiB * 3, stream));
    GTEST_SKIP() << "the address space did not run out";
  } catch (const OutOfMemoryError&) {
  }
  EXPECT_GE(a.stats().num_ooms, 1u);
  a.deallocate(live.back());
  live.pop_back();
  void* p = nullptr;
  EXPECT_NO_THROW(p = a.allocate(kMiB * 3, stream)) << "a freed stream's arena made room";
  a.check_invariants();
  a.deallocate(p);
  for (void* q : live) a.deallocate(q);
}

}  // namespace
}  // namespace gmlake::engine
