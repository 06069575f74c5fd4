// BumpAllocator (bump allocation, reset, markers) and ConcurrentBumpAllocator (lock-free bump) on the host and sim
// backends, including exhaustion, misuse and several threads.
#include "gmlake/classic/bump_allocator.h"

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
#include "gmlake/classic/concurrent_bump_allocator.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "classic_test_support.h"

namespace gmlake::classic {
namespace {

using testing::addr;

TEST(BumpAllocatorTest, AllocationsFollowEachOtherWithTheirAlignmentAndKeepTheirBytes) {
  HostBackend backend;
  BumpAllocator bump(backend, kMiB);
  EXPECT_EQ(bump.capacity_bytes(), kPageBytes);  // rounded up to the granularity
  char* a = static_cast<char*>(bump.allocate(10));
  char* b = static_cast<char*>(bump.allocate(10));
  char* c = static_cast<char*>(bump.allocate(1, 4 * kKiB));
  EXPECT_EQ(addr(a), addr(bump.data()));
  EXPECT_EQ(addr(b), addr(a) + alignof(std::max_align_t));
  EXPECT_EQ(addr(c) % (4 * kKiB), 0u);
  std::memset(a, 'a', 10);
  std::memset(b, 'b', 10);
  *c = 'c';
  EXPECT_EQ(a[9], 'a');
  EXPECT_EQ(b[0], 'b');
  EXPECT_EQ(bump.used_bytes(), 4 * kKiB + 1);
}

TEST(BumpAllocatorTest, ResetStartsOverAtTheBeginning) {
  SimBackend backend;
  BumpAllocator bump(backend, kPageBytes);
  void* first = bump.allocate(kKiB);
  bump.allocate(kKiB);
  bump.reset();
  EXPECT_EQ(bump.used_bytes(), 0u);
  EXPECT_EQ(bump.allocate(kKiB), first);
  EXPECT_EQ(bump.stats().allocated_bytes.peak, static_cast<std::int64_t>(2 * kKiB));
}

TEST(BumpAllocatorTest, RollingBackToAMarkerFreesWhatCameAfterItAndMarkersNest) {
  SimBackend backend;
  BumpAllocator bump(backend, kPageBytes);
  bump.allocate(100);
  const BumpAllocator::Marker outer = bump.mark();
  void* x = bump.allocate(200);
  const BumpAllocator::Marker inner = bump.mark();
  bump.allocate(300);
  bump.rollback(inner);
  EXPECT_EQ(bump.used_bytes(), inner.offset_bytes);
  EXPECT_EQ(bump.stats().requested_bytes.current, 300);
  bump.rollback(outer);
  EXPECT_EQ(bump.allocate(200), x);
  bump.rollback(outer);  // a marker may be used again
  EXPECT_EQ(bump.used_bytes(), outer.offset_bytes);
}

TEST(BumpAllocatorTest, StaleForeignAndDiscardedMarkersAreInvalidArgumentsAndChangeNothing) {
  SimBackend backend;
  BumpAllocator bump(backend, kPageBytes);
  BumpAllocator other(backend, kPageBytes);
  bump.allocate(64);
  const BumpAllocator::Marker outer = bump.mark();
  bump.allocate(64);
  const BumpAllocator::Marker inner = bump.mark();
  bump.rollback(outer);
  test::expect_error([&] { bump.rollback(inner); }, ErrorCode::kInvalidArgument, "BumpAllocator");  // discarded
  test::expect_error([&] { bump.rollback(other.mark()); }, ErrorCode::kInvalidArgument, "BumpAllocator");
  bump.reset();
  bump.allocate(1024);
  test::expect_error([&] { bump.rollback(outer); }, ErrorCode::kInvalidArgument, "BumpAllocator");  // before the reset
  EXPECT_EQ(bump.used_bytes(), 1024u);
}

TEST(BumpAllocatorTest, ARequestThatDoesNotFitThrowsOutOfMemoryWithTheBumpAllocatorsFiguresAndChangesNothing) {
  SimBackend backend;
  BumpAllocator bump(backend, kPageBytes);
  bump.allocate(kPageBytes - 100);
  try {
    bump.allocate(200);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), 200u);
    EXPECT_EQ(e.reserved_bytes(), kPageBytes);
    EXPECT_EQ(e.allocated_bytes(), kPageBytes - 100);
    EXPECT_EQ(e.cap_bytes(), kPageBytes);
  }
  EXPECT_THROW(bump.allocate(2 * kPageBytes), OutOfMemoryError);
  EXPECT_THROW(bump.allocate(90, 64), OutOfMemoryError);  // would fit without the alignment padding
  EXPECT_EQ(bump.used_bytes(), kPageBytes - 100);
  EXPECT_EQ(bump.stats().num_ooms, 3u);
  EXPECT_NE(bump.allocate(100, 4), nullptr);  // exactly fills it
  EXPECT_EQ(bump.available_bytes(), 0u);
}

TEST(BumpAllocatorTest, BadAlignmentIsAnInvalidArgumentAndSizeZeroReturnsNull) {
  SimBackend backend;
  BumpAllocator bump(backend, kPageBytes);
  test::expect_error([&] { bump.allocate(8, 3); }, ErrorCode::kInvalidArgument, "BumpAllocator");
  test::expect_error([&] { bump.allocate(8, 0); }, ErrorCode::kInvalidArgument, "BumpAllocator");
  test::expect_error([&] { bump.allocate(8, 2 * kPageBytes); }, ErrorCode::kInvalidArgument, "BumpAllocator");
  EXPECT_EQ(bump.allocate(0), nullptr);
  EXPECT_EQ(bump.used_bytes(), 0u);
  test::expect_error([&] { BumpAllocator bad(backend, 0); }, ErrorCode::kInvalidArgument, "BumpAllocator");
}

TEST(BumpAllocatorTest, TheBumpAllocatorIsOneChunkAndGivesItBackWhenDestroyed) {
  HostBackend backend;
  {
    BumpAllocator bump(backend, 3 * kPageBytes);
    EXPECT_EQ(backend.live_chunks(), 1u);
    EXPECT_EQ(bump.stats().reserved_bytes.current, static_cast<std::int64_t>(3 * kPageBytes));
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(BumpAllocatorTest, ABumpAllocatorLargerThanTheBackendHasIsAnOutOfMemoryAtConstruction) {
  SimBackend backend(kPageBytes, kPageBytes);
  EXPECT_THROW(BumpAllocator(backend, 2 * kPageBytes), OutOfMemoryError);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

// --- ConcurrentBumpAllocator -------------------------------------------------------------------------------------

TEST(ConcurrentBumpAllocatorTest, ThreadsGetDisjointAlignedRangesThatKeepTheirBytes) {
  HostBackend backend;
  ConcurrentBumpAllocator bump(backend, 4 * kPageBytes);
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
        auto* p = static_cast<unsigned char*>(bump.allocate(size, align));
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
  EXPECT_LE(all.back().first + all.back().second - addr(bump.data()), bump.used_bytes());
}

// Four threads allocate 4 KiB blocks until the allocator is full; returns how many were served.
template <typename Bump>
std::uint64_t fill_from_four_threads(Bump& bump, std::atomic<std::uint64_t>& ooms) {
  std::atomic<std::uint64_t> served{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 300; ++i) {
        try {
          bump.allocate(4 * kKiB, 4 * kKiB);
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

TEST(ConcurrentBumpAllocatorTest, WithoutThreadBuffersThreadsFillTheBumpAllocatorExactlyToItsCapacity) {
  SimBackend backend;
  ConcurrentBumpAllocator bump(backend, kPageBytes, /*thread_buffer_bytes=*/0);
  std::atomic<std::uint64_t> ooms{0};
  EXPECT_EQ(fill_from_four_threads(bump, ooms), kPageBytes / (4 * kKiB));
  EXPECT_EQ(ooms.load(), 4u * 300 - kPageBytes / (4 * kKiB));
  EXPECT_EQ(bump.stats().num_ooms, ooms.load());
  EXPECT_EQ(bump.used_bytes(), kPageBytes);
  bump.reset();
  EXPECT_EQ(bump.used_bytes(), 0u);
  EXPECT_EQ(bump.stats().allocated_bytes.peak, static_cast<std::int64_t>(kPageBytes));
  EXPECT_EQ(bump.allocate(1), bump.data());
}

TEST(ConcurrentBumpAllocatorTest, WithThreadBuffersAtMostOneBufferPerThreadIsLeftUnusedWhenFull) {
  SimBackend backend;
  ConcurrentBumpAllocator bump(backend, kPageBytes, 64 * kKiB);
  std::atomic<std::uint64_t> ooms{0};
  const std::uint64_t served = fill_from_four_threads(bump, ooms);
  const std::uint64_t capacity_blocks = kPageBytes / (4 * kKiB);
  EXPECT_LE(served, capacity_blocks);
  EXPECT_GE(served, capacity_blocks - 4 * (64 * kKiB) / (4 * kKiB));
  EXPECT_EQ(ooms.load(), 4u * 300 - served);
}

TEST(ConcurrentBumpAllocatorTest, ResetMakesEveryThreadBufferStale) {
  SimBackend backend;
  ConcurrentBumpAllocator bump(backend, kPageBytes);
  void* first = bump.allocate(64);
  EXPECT_EQ(first, bump.data());
  EXPECT_EQ(bump.used_bytes(), ConcurrentBumpAllocator::kDefaultThreadBufferBytes);  // a whole buffer is claimed
  bump.allocate(64);
  bump.reset();
  EXPECT_EQ(bump.allocate(64), first);             // not the old buffer's next bytes
  ConcurrentBumpAllocator other(backend, kPageBytes);  // a second allocator gets a buffer of its own
  EXPECT_EQ(other.allocate(64), other.data());
  EXPECT_EQ(addr(bump.allocate(64)), addr(first) + 64);
}

TEST(ConcurrentBumpAllocatorTest, RequestsTooLargeForABufferBumpTheSharedOffsetDirectly) {
  SimBackend backend;
  ConcurrentBumpAllocator bump(backend, kPageBytes, 64 * kKiB);
  void* big = bump.allocate(32 * kKiB);
  EXPECT_EQ(big, bump.data());
  EXPECT_EQ(bump.used_bytes(), 32 * kKiB);
  EXPECT_THROW(bump.allocate(kPageBytes), OutOfMemoryError);
  EXPECT_EQ(bump.used_bytes(), 32 * kKiB);
  test::expect_error([&] { ConcurrentBumpAllocator bad(backend, kPageBytes, 2 * kPageBytes); },
                     ErrorCode::kInvalidArgument, "BumpAllocator");
}

TEST(ConcurrentBumpAllocatorTest, BadAlignmentIsAnInvalidArgumentAndChangesNothing) {
  SimBackend backend;
  ConcurrentBumpAllocator bump(backend, kPageBytes);
  test::expect_error([&] { bump.allocate(8, 48); }, ErrorCode::kInvalidArgument, "BumpAllocator");
  EXPECT_EQ(bump.allocate(0), nullptr);
  EXPECT_EQ(bump.used_bytes(), 0u);
}

}  // namespace
}  // namespace gmlake::classic
