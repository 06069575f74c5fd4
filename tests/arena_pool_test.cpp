// ArenaPool (bump allocation, reset, markers) and ConcurrentArenaPool (lock-free bump) on the host and sim
// backends, including exhaustion, misuse and several threads.
#include "gmlake/classic/arena_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/classic/concurrent_arena_pool.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "classic_test_support.h"

namespace gmlake::classic {
namespace {

using testing::addr;

TEST(ArenaPoolTest, AllocationsFollowEachOtherWithTheirAlignmentAndKeepTheirBytes) {
  HostBackend backend;
  ArenaPool arena(backend, kMiB);
  EXPECT_EQ(arena.capacity_bytes(), kPageBytes);  // rounded up to the granularity
  char* a = static_cast<char*>(arena.allocate(10));
  char* b = static_cast<char*>(arena.allocate(10));
  char* c = static_cast<char*>(arena.allocate(1, 4 * kKiB));
  EXPECT_EQ(addr(a), addr(arena.data()));
  EXPECT_EQ(addr(b), addr(a) + alignof(std::max_align_t));
  EXPECT_EQ(addr(c) % (4 * kKiB), 0u);
  std::memset(a, 'a', 10);
  std::memset(b, 'b', 10);
  *c = 'c';
  EXPECT_EQ(a[9], 'a');
  EXPECT_EQ(b[0], 'b');
  EXPECT_EQ(arena.used_bytes(), 4 * kKiB + 1);
}

TEST(ArenaPoolTest, ResetStartsOverAtTheBeginning) {
  SimBackend backend;
  ArenaPool arena(backend, kPageBytes);
  void* first = arena.allocate(kKiB);
  arena.allocate(kKiB);
  arena.reset();
  EXPECT_EQ(arena.used_bytes(), 0u);
  EXPECT_EQ(arena.allocate(kKiB), first);
  EXPECT_EQ(arena.stats().allocated_bytes.peak, static_cast<std::int64_t>(2 * kKiB));
}

TEST(ArenaPoolTest, RollingBackToAMarkerFreesWhatCameAfterItAndMarkersNest) {
  SimBackend backend;
  ArenaPool arena(backend, kPageBytes);
  arena.allocate(100);
  const ArenaPool::Marker outer = arena.mark();
  void* x = arena.allocate(200);
  const ArenaPool::Marker inner = arena.mark();
  arena.allocate(300);
  arena.rollback(inner);
  EXPECT_EQ(arena.used_bytes(), inner.offset_bytes);
  EXPECT_EQ(arena.stats().requested_bytes.current, 300);
  arena.rollback(outer);
  EXPECT_EQ(arena.allocate(200), x);
  arena.rollback(outer);  // a marker may be used again
  EXPECT_EQ(arena.used_bytes(), outer.offset_bytes);
}

TEST(ArenaPoolTest, StaleForeignAndDiscardedMarkersAreInvalidArgumentsAndChangeNothing) {
  SimBackend backend;
  ArenaPool arena(backend, kPageBytes);
  ArenaPool other(backend, kPageBytes);
  arena.allocate(64);
  const ArenaPool::Marker outer = arena.mark();
  arena.allocate(64);
  const ArenaPool::Marker inner = arena.mark();
  arena.rollback(outer);
  test::expect_error([&] { arena.rollback(inner); }, ErrorCode::kInvalidArgument, "ArenaPool");  // discarded
  test::expect_error([&] { arena.rollback(other.mark()); }, ErrorCode::kInvalidArgument, "ArenaPool");
  arena.reset();
  arena.allocate(1024);
  test::expect_error([&] { arena.rollback(outer); }, ErrorCode::kInvalidArgument, "ArenaPool");  // before the reset
  EXPECT_EQ(arena.used_bytes(), 1024u);
}

TEST(ArenaPoolTest, ARequestThatDoesNotFitThrowsOutOfMemoryWithTheArenasFiguresAndChangesNothing) {
  SimBackend backend;
  ArenaPool arena(backend, kPageBytes);
  arena.allocate(kPageBytes - 100);
  try {
    arena.allocate(200);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), 200u);
    EXPECT_EQ(e.reserved_bytes(), kPageBytes);
    EXPECT_EQ(e.allocated_bytes(), kPageBytes - 100);
    EXPECT_EQ(e.cap_bytes(), kPageBytes);
  }
  EXPECT_THROW(arena.allocate(2 * kPageBytes), OutOfMemoryError);
  EXPECT_THROW(arena.allocate(90, 64), OutOfMemoryError);  // would fit without the alignment padding
  EXPECT_EQ(arena.used_bytes(), kPageBytes - 100);
  EXPECT_EQ(arena.stats().num_ooms, 3u);
  EXPECT_NE(arena.allocate(100, 4), nullptr);  // exactly fills it
  EXPECT_EQ(arena.available_bytes(), 0u);
}

TEST(ArenaPoolTest, BadAlignmentIsAnInvalidArgumentAndSizeZeroReturnsNull) {
  SimBackend backend;
  ArenaPool arena(backend, kPageBytes);
  test::expect_error([&] { arena.allocate(8, 3); }, ErrorCode::kInvalidArgument, "ArenaPool");
  test::expect_error([&] { arena.allocate(8, 0); }, ErrorCode::kInvalidArgument, "ArenaPool");
  test::expect_error([&] { arena.allocate(8, 2 * kPageBytes); }, ErrorCode::kInvalidArgument, "ArenaPool");
  EXPECT_EQ(arena.allocate(0), nullptr);
  EXPECT_EQ(arena.used_bytes(), 0u);
  test::expect_error([&] { ArenaPool bad(backend, 0); }, ErrorCode::kInvalidArgument, "ArenaPool");
}

TEST(ArenaPoolTest, TheArenaIsOneChunkAndGivesItBackWhenDestroyed) {
  HostBackend backend;
  {
    ArenaPool arena(backend, 3 * kPageBytes);
    EXPECT_EQ(backend.live_chunks(), 1u);
    EXPECT_EQ(arena.stats().reserved_bytes.current, static_cast<std::int64_t>(3 * kPageBytes));
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(ArenaPoolTest, AnArenaLargerThanTheBackendHasIsAnOutOfMemoryAtConstruction) {
  SimBackend backend(kPageBytes, kPageBytes);
  EXPECT_THROW(ArenaPool(backend, 2 * kPageBytes), OutOfMemoryError);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

// --- ConcurrentArenaPool -------------------------------------------------------------------------------------

TEST(ConcurrentArenaPoolTest, ThreadsGetDisjointAlignedRangesThatKeepTheirBytes) {
  HostBackend backend;
  ConcurrentArenaPool arena(backend, 4 * kPageBytes);
  constexpr int kThreads = 4;
  constexpr int kAllocsPerThread = 5000;
  std::vector<std::vector<std::pair<std::uintptr_t, std::uint64_t>>> ranges(kThreads);
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kAllocsPerThread; ++i) {
        const std::uint64_t size = 1 + static_cast<std::uint64_t>(i % 97);
        const std::uint64_t align = std::uint64_t{1} << (i % 7);
        auto* p = static_cast<unsigned char*>(arena.allocate(size, align));
        if (addr(p) % align != 0) corrupted.fetch_add(1);
        std::memset(p, t + 1, size);
        ranges[t].emplace_back(addr(p), size);
      }
      for (const auto& [start, size] : ranges[t]) {
        const auto* p = reinterpret_cast<const unsigned char*>(start);
        if (p[0] != t + 1 || p[size - 1] != t + 1) corrupted.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(corrupted.load(), 0);
  std::vector<std::pair<std::uintptr_t, std::uint64_t>> all;
  for (const auto& r : ranges) all.insert(all.end(), r.begin(), r.end());
  std::sort(all.begin(), all.end());
  for (std::size_t i = 1; i < all.size(); ++i) ASSERT_LE(all[i - 1].first + all[i - 1].second, all[i].first);
  EXPECT_LE(all.back().first + all.back().second - addr(arena.data()), arena.used_bytes());
}

// Four threads allocate 4 KiB blocks until the arena is full; returns how many were served.
template <typename Arena>
std::uint64_t fill_from_four_threads(Arena& arena, std::atomic<std::uint64_t>& ooms) {
  std::atomic<std::uint64_t> served{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        try {
          arena.allocate(4 * kKiB, 4 * kKiB);
          served.fetch_add(1);
        } catch (const OutOfMemoryError&) {
          ooms.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  return served.load();
}

TEST(ConcurrentArenaPoolTest, WithoutThreadBuffersThreadsFillTheArenaExactlyToItsCapacity) {
  SimBackend backend;
  ConcurrentArenaPool arena(backend, kPageBytes, /*thread_buffer_bytes=*/0);
  std::atomic<std::uint64_t> ooms{0};
  EXPECT_EQ(fill_from_four_threads(arena, ooms), kPageBytes / (4 * kKiB));
  EXPECT_EQ(ooms.load(), 4u * 300 - kPageBytes / (4 * kKiB));
  EXPECT_EQ(arena.stats().num_ooms, ooms.load());
  EXPECT_EQ(arena.used_bytes(), kPageBytes);
  arena.reset();
  EXPECT_EQ(arena.used_bytes(), 0u);
  EXPECT_EQ(arena.stats().allocated_bytes.peak, static_cast<std::int64_t>(kPageBytes));
  EXPECT_EQ(arena.allocate(1), arena.data());
}

TEST(ConcurrentArenaPoolTest, WithThreadBuffersAtMostOneBufferPerThreadIsLeftUnusedWhenFull) {
  SimBackend backend;
  ConcurrentArenaPool arena(backend, kPageBytes, 64 * kKiB);
  std::atomic<std::uint64_t> ooms{0};
  const std::uint64_t served = fill_from_four_threads(arena, ooms);
  const std::uint64_t capacity_blocks = kPageBytes / (4 * kKiB);
  EXPECT_LE(served, capacity_blocks);
  EXPECT_GE(served, capacity_blocks - 4 * (64 * kKiB) / (4 * kKiB));
  EXPECT_EQ(ooms.load(), 4u * 300 - served);
}

TEST(ConcurrentArenaPoolTest, ResetMakesEveryThreadBufferStale) {
  SimBackend backend;
  ConcurrentArenaPool arena(backend, kPageBytes);
  void* first = arena.allocate(64);
  EXPECT_EQ(first, arena.data());
  EXPECT_EQ(arena.used_bytes(), ConcurrentArenaPool::kDefaultThreadBufferBytes);  // a whole buffer is claimed
  arena.allocate(64);
  arena.reset();
  EXPECT_EQ(arena.allocate(64), first);             // not the old buffer's next bytes
  ConcurrentArenaPool other(backend, kPageBytes);  // a second arena gets a buffer of its own
  EXPECT_EQ(other.allocate(64), other.data());
  EXPECT_EQ(addr(arena.allocate(64)), addr(first) + 64);
}

TEST(ConcurrentArenaPoolTest, RequestsTooLargeForABufferBumpTheSharedOffsetDirectly) {
  SimBackend backend;
  ConcurrentArenaPool arena(backend, kPageBytes, 64 * kKiB);
  void* big = arena.allocate(32 * kKiB);
  EXPECT_EQ(big, arena.data());
  EXPECT_EQ(arena.used_bytes(), 32 * kKiB);
  EXPECT_THROW(arena.allocate(kPageBytes), OutOfMemoryError);
  EXPECT_EQ(arena.used_bytes(), 32 * kKiB);
  test::expect_error([&] { ConcurrentArenaPool bad(backend, kPageBytes, 2 * kPageBytes); },
                     ErrorCode::kInvalidArgument, "ArenaPool");
}

TEST(ConcurrentArenaPoolTest, BadAlignmentIsAnInvalidArgumentAndChangesNothing) {
  SimBackend backend;
  ConcurrentArenaPool arena(backend, kPageBytes);
  test::expect_error([&] { arena.allocate(8, 48); }, ErrorCode::kInvalidArgument, "ArenaPool");
  EXPECT_EQ(arena.allocate(0), nullptr);
  EXPECT_EQ(arena.used_bytes(), 0u);
}

}  // namespace
}  // namespace gmlake::classic
