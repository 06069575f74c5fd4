// LayoutCache: reuse by layout, LRU bounds in bytes and entries, reference counts, misuse, several devices,
// out-of-memory retry, nothing left at exit, and several threads; on the host and sim backends.
#include "gmlake/classic/layout_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "classic_test_support.h"

namespace gmlake::classic {
namespace {

using testing::addr;

TEST(LayoutCacheTest, AReleasedBlockServesTheNextRequestWithTheSameLayoutWithoutABackendCall) {
  HostBackend backend;
  LayoutCache cache(backend);
  void* p = cache.allocate({3 * kMiB, 256});
  std::memset(p, 'x', 3 * kMiB);
  cache.release(p);
  const std::uint64_t creates = backend.counters()[BackendCall::kCreate];
  EXPECT_EQ(cache.allocate({3 * kMiB, 256}), p);
  EXPECT_EQ(backend.counters()[BackendCall::kCreate], creates);
  const LayoutCacheStats s = cache.stats();
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.pool.reserved_bytes.current, static_cast<std::int64_t>(4 * kMiB));
  EXPECT_EQ(s.pool.allocated_bytes.current, static_cast<std::int64_t>(4 * kMiB));
  EXPECT_EQ(s.pool.requested_bytes.current, static_cast<std::int64_t>(3 * kMiB));
  cache.check_invariants();
}

TEST(LayoutCacheTest, ADifferentSizeOrAlignmentIsADifferentLayoutAndIsNotServedFromTheCache) {
  SimBackend backend;
  LayoutCache cache(backend);
  void* p = cache.allocate({kMiB, 64});
  cache.release(p);
  void* q = cache.allocate({kMiB, 128});
  void* r = cache.allocate({kMiB + 1, 64});
  EXPECT_NE(q, p);
  EXPECT_NE(r, p);
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.stats().cached_entries, 1u);
  EXPECT_EQ(cache.allocate({kMiB, 64}), p);
  cache.check_invariants();
}

TEST(LayoutCacheTest, TheMostRecentlyReleasedBlockOfALayoutIsReusedFirst) {
  SimBackend backend;
  LayoutCache cache(backend);
  void* a = cache.allocate({kKiB});
  void* b = cache.allocate({kKiB});
  cache.release(a);
  cache.release(b);
  EXPECT_EQ(cache.allocate({kKiB}), b);
  EXPECT_EQ(cache.allocate({kKiB}), a);
  cache.check_invariants();
}

TEST(LayoutCacheTest, PastTheEntryBoundTheLeastRecentlyReleasedBlocksAreGivenBack) {
  SimBackend backend;
  LayoutCache cache(backend, {.max_cached_bytes = kGiB, .max_cached_entries = 2});
  void* a = cache.allocate({kKiB});
  void* b = cache.allocate({2 * kKiB});
  void* c = cache.allocate({3 * kKiB});
  cache.release(a);
  cache.release(b);
  cache.release(c);  // a is the oldest: evicted
  const LayoutCacheStats s = cache.stats();
  EXPECT_EQ(s.cached_entries, 2u);
  EXPECT_EQ(s.pool.evictions, 1u);
  EXPECT_EQ(backend.live_chunks(), 2u);
  EXPECT_NE(cache.allocate({kKiB}), nullptr);
  EXPECT_EQ(cache.stats().misses, 4u);
  EXPECT_EQ(cache.allocate({2 * kKiB}), b);
  EXPECT_EQ(cache.allocate({3 * kKiB}), c);
  cache.check_invariants();
}

TEST(LayoutCacheTest, PastTheByteBoundTheLeastRecentlyReleasedBlocksAreGivenBackAndTooLargeOnesAtOnce) {
  SimBackend backend;
  LayoutCache cache(backend, {.max_cached_bytes = 3 * kPageBytes, .max_cached_entries = 100});
  void* small1 = cache.allocate({kPageBytes});
  void* small2 = cache.allocate({kPageBytes});
  void* big = cache.allocate({2 * kPageBytes});
  void* huge = cache.allocate({4 * kPageBytes});
  cache.release(huge);  // larger than the whole bound: given back at once
  EXPECT_EQ(cache.stats().cached_entries, 0u);
  EXPECT_EQ(cache.stats().pool.evictions, 0u);
  cache.release(small1);
  cache.release(small2);
  cache.release(big);  // 4 chunks cached > 3: small1 goes
  EXPECT_EQ(cache.stats().cached_bytes, 3 * kPageBytes);
  EXPECT_EQ(cache.stats().pool.evictions, 1u);
  EXPECT_EQ(backend.live_chunk_bytes(), 3 * kPageBytes);
  EXPECT_EQ(cache.allocate({kPageBytes}), small2);
  cache.check_invariants();
}

TEST(LayoutCacheTest, ABlockReturnsToTheCacheOnlyWhenItsUseCountReachesZero) {
  SimBackend backend;
  LayoutCache cache(backend);
  void* p = cache.allocate({kMiB});
  EXPECT_EQ(cache.use_count(p), 1u);
  cache.retain(p);
  cache.retain(p);
  EXPECT_EQ(cache.use_count(p), 3u);
  cache.release(p);
  cache.release(p);
  EXPECT_EQ(cache.stats().cached_entries, 0u);
  EXPECT_NE(cache.allocate({kMiB}), p);  // still in use: a new block
  cache.release(p);
  EXPECT_EQ(cache.use_count(p), 0u);
  EXPECT_EQ(cache.stats().cached_entries, 1u);
  EXPECT_EQ(cache.stats().pool.num_frees, 1u);
  cache.check_invariants();
}

TEST(LayoutCacheTest, DoubleReleaseUnknownAndInteriorPointersAreInvalidPointersAndChangeNothing) {
  SimBackend backend;
  LayoutCache cache(backend);
  void* p = cache.allocate({kMiB});
  void* q = cache.allocate({kMiB});
  cache.release(p);
  test::expect_error([&] { cache.release(p); }, ErrorCode::kInvalidPointer, "is not a live block of this device");
  test::expect_error([&] { cache.retain(p); }, ErrorCode::kInvalidPointer, "is not a live block of this device");
  test::expect_error([&] { cache.release(static_cast<char*>(q) + 64); }, ErrorCode::kInvalidPointer,
                     "is not a live block of this device");
  int local = 0;
  test::expect_error([&] { cache.release(&local); }, ErrorCode::kInvalidPointer, "is not a live block of this device");
  cache.release(nullptr);
  cache.retain(nullptr);
  EXPECT_EQ(cache.stats().pool.invalid_frees, 4u);
  EXPECT_EQ(cache.use_count(q), 1u);
  EXPECT_EQ(cache.stats().cached_entries, 1u);
  cache.check_invariants();
}

TEST(LayoutCacheTest, BadLayoutsDevicesAndDeviceListsAreInvalidArguments) {
  SimBackend backend;
  LayoutCache cache(backend);
  test::expect_error([&] { cache.allocate({64, 3}); }, ErrorCode::kInvalidArgument, "LayoutCache: ");
  test::expect_error([&] { cache.allocate({64, 2 * kPageBytes}); }, ErrorCode::kInvalidArgument, "LayoutCache: ");
  test::expect_error([&] { cache.allocate({~std::uint64_t{0}, 64}); }, ErrorCode::kInvalidArgument, "LayoutCache: ");
  test::expect_error([&] { cache.allocate({64}, 1); }, ErrorCode::kInvalidArgument, "LayoutCache: ");
  test::expect_error([&] { cache.release(nullptr, 7); }, ErrorCode::kInvalidArgument, "LayoutCache: ");
  EXPECT_EQ(cache.allocate({0}), nullptr);
  test::expect_error([&] { LayoutCache c(std::vector<Backend*>{}); }, ErrorCode::kInvalidArgument, "LayoutCache: ");
  test::expect_error(
      [&] {
        LayoutCache c(std::vector<Backend*>{&backend, nullptr});
      },
      ErrorCode::kInvalidArgument, "LayoutCache: ");
  test::expect_error(
      [&] {
        LayoutCache c(std::vector<Backend*>{&backend, &backend});
      },
      ErrorCode::kInvalidArgument, "LayoutCache: ");
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(LayoutCacheTest, EachDeviceHasItsOwnCacheAndItsOwnPointers) {
  SimBackend gpu0, gpu1;  // sim backends hand out the same addresses
  LayoutCache cache({&gpu0, &gpu1});
  void* p0 = cache.allocate({kMiB}, 0);
  void* p1 = cache.allocate({kMiB}, 1);
  EXPECT_EQ(p0, p1);
  cache.release(p0, 0);
  EXPECT_EQ(cache.use_count(p1, 1), 1u);
  test::expect_error([&] { cache.release(p0, 0); }, ErrorCode::kInvalidPointer, "is not a live block of this device");
  EXPECT_EQ(cache.stats(0).cached_entries, 1u);
  EXPECT_EQ(cache.stats(1).cached_entries, 0u);
  EXPECT_EQ(cache.allocate({kMiB}, 1), reinterpret_cast<void*>(addr(p1) + kPageBytes));  // a miss on gpu1
  cache.check_invariants();
}

TEST(LayoutCacheTest, WhenTheBackendIsOutOfMemoryTheCacheIsGivenBackAndTheAllocationRetried) {
  SimBackend backend(kPageBytes, 4 * kPageBytes);
  LayoutCache cache(backend);
  void* a = cache.allocate({kPageBytes});
  void* b = cache.allocate({2 * kPageBytes});
  cache.release(b);
  void* c = cache.allocate({3 * kPageBytes});  // only fits once b's cached region is given back
  EXPECT_NE(c, nullptr);
  EXPECT_EQ(cache.stats().pool.num_alloc_retries, 1u);
  EXPECT_EQ(cache.stats().cached_entries, 0u);
  try {
    cache.allocate({kPageBytes});
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), kPageBytes);
    EXPECT_EQ(e.reserved_bytes(), 4 * kPageBytes);
    EXPECT_EQ(e.allocated_bytes(), 4 * kPageBytes);
  }
  EXPECT_EQ(cache.stats().pool.num_ooms, 1u);
  cache.release(a);
  EXPECT_EQ(cache.allocate({kPageBytes}), a);  // usable afterwards
  cache.check_invariants();
}

TEST(LayoutCacheTest, ClearGivesCachedBlocksBackAndKeepsLiveOnes) {
  HostBackend backend;
  LayoutCache cache(backend);
  char* live = static_cast<char*>(cache.allocate({kMiB}));
  cache.release(cache.allocate({2 * kMiB}));
  cache.release(cache.allocate({3 * kMiB}));
  cache.clear();
  EXPECT_EQ(cache.stats().cached_entries, 0u);
  EXPECT_EQ(backend.live_chunks(), 1u);
  live[kMiB - 1] = 'l';
  EXPECT_EQ(live[kMiB - 1], 'l');
  cache.check_invariants();
}

TEST(LayoutCacheTest, DestroyingTheCacheGivesBackEveryBlockLiveOrCached) {
  HostBackend backend;
  {
    LayoutCache cache(backend);
    cache.allocate({kMiB});
    cache.allocate({5 * kMiB});
    cache.release(cache.allocate({kKiB}));
    EXPECT_EQ(backend.live_chunks(), 3u);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(LayoutCacheTest, ThreadsAllocatingSharingAndReleasingOnTwoDevicesLeaveTheCacheConsistent) {
  HostBackend gpu0(testing::page_bytes()), gpu1(testing::page_bytes());
  LayoutCache cache({&gpu0, &gpu1}, {.max_cached_bytes = 64 * testing::page_bytes(), .max_cached_entries = 16});
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 3000;
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 7);
      struct Held {
        unsigned char* ptr;
        std::size_t device;
        std::uint64_t size;
      };
      std::vector<Held> held;
      for (int i = 0; i < kOpsPerThread; ++i) {
        if (held.size() < 8 && rng() % 2 == 0) {
          const std::size_t device = rng() % 2;
          const std::uint64_t size = 64 * (1 + rng() % 8);
          auto* p = static_cast<unsigned char*>(cache.allocate({size, 64}, device));
          std::memset(p, t + 1, size);
          held.push_back({p, device, size});
        } else if (!held.empty()) {
          const Held h = held.back();
          held.pop_back();
          if (h.ptr[0] != t + 1 || h.ptr[h.size - 1] != t + 1) corrupted.fetch_add(1);
          cache.retain(h.ptr, h.device);   // a second user...
          cache.release(h.ptr, h.device);  // ...gone again
          cache.release(h.ptr, h.device);
        }
      }
      for (const Held& h : held) cache.release(h.ptr, h.device);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(corrupted.load(), 0);
  cache.check_invariants();
  for (std::size_t d = 0; d < 2; ++d) {
    const LayoutCacheStats s = cache.stats(d);
    EXPECT_EQ(s.live_blocks, 0u);
    EXPECT_EQ(s.pool.num_allocs, s.pool.num_frees);
    EXPECT_EQ(s.hits + s.misses, s.pool.num_allocs);
    EXPECT_LE(s.cached_entries, 16u);
  }
  EXPECT_GT(cache.stats(0).hits + cache.stats(1).hits, 0u);
  cache.clear();
  EXPECT_EQ(gpu0.live_chunks() + gpu1.live_chunks(), 0u);
}

TEST(LayoutCacheTest, ThreadsRetainingAndReleasingOneSharedBlockLeaveItsCountWhereItStarted) {
  SimBackend backend;
  LayoutCache cache(backend);
  void* shared = cache.allocate({kMiB});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 5000; ++i) {
        cache.retain(shared);
        cache.release(shared);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(cache.use_count(shared), 1u);
  cache.release(shared);
  EXPECT_EQ(cache.stats().cached_entries, 1u);
  cache.check_invariants();
}

}  // namespace
}  // namespace gmlake::classic
