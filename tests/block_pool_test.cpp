// BlockPool and ConcurrentBlockPool: the same behaviour checked on both (typed tests), on the host backend
// (real memory, written and read back) and the sim backend; then the concurrent pool under several threads.
#include "gmlake/classic/block_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/classic/concurrent_block_pool.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "classic_test_support.h"

namespace gmlake::classic {
namespace {

using testing::addr;

template <typename Pool>
class BlockPoolTest : public ::testing::Test {};
using PoolTypes = ::testing::Types<BlockPool, ConcurrentBlockPool>;
TYPED_TEST_SUITE(BlockPoolTest, PoolTypes);

TYPED_TEST(BlockPoolTest, BlocksAreDistinctAlignedWritableAndFillOneRegion) {
  HostBackend backend;
  TypeParam pool(backend, {.block_bytes = 4 * kKiB, .alignment_bytes = 512});
  const std::uint64_t n = kPageBytes / (4 * kKiB);
  EXPECT_EQ(pool.capacity_blocks(), n);
  EXPECT_EQ(pool.available(), n);
  std::vector<char*> blocks;
  for (std::uint64_t i = 0; i < n; ++i) {
    char* p = static_cast<char*>(pool.allocate());
    EXPECT_EQ(addr(p) % 512, 0u);
    std::memset(p, static_cast<int>(i % 251), 4 * kKiB);
    blocks.push_back(p);
  }
  EXPECT_EQ(pool.available(), 0u);
  for (std::uint64_t i = 0; i < n; ++i) {
    EXPECT_EQ(blocks[i][0], static_cast<char>(i % 251));
    EXPECT_EQ(blocks[i][4 * kKiB - 1], static_cast<char>(i % 251));
  }
  std::sort(blocks.begin(), blocks.end());
  EXPECT_EQ(std::adjacent_find(blocks.begin(), blocks.end()), blocks.end());
  for (char* p : blocks) pool.deallocate(p);
  EXPECT_EQ(pool.available(), n);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, TheLowestAddressComesFirstAndAFreedBlockIsReusedNext) {
  SimBackend backend;
  TypeParam pool(backend, {.block_bytes = 256});
  void* a = pool.allocate();
  void* b = pool.allocate();
  EXPECT_EQ(addr(b), addr(a) + 256);
  pool.deallocate(a);
  EXPECT_EQ(pool.allocate(), a);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, AnOddBlockSizeIsStridedByItsAlignment) {
  HostBackend backend;
  TypeParam pool(backend, {.block_bytes = 100, .alignment_bytes = 16});
  EXPECT_EQ(pool.geometry().stride_bytes(), 112u);
  EXPECT_EQ(pool.capacity_blocks(), kPageBytes / 112);
  void* a = pool.allocate();
  void* b = pool.allocate();
  EXPECT_EQ(addr(b) - addr(a), 112u);
  test::expect_error([&] { pool.deallocate(static_cast<char*>(b) + 100); }, ErrorCode::kInvalidPointer,
                     "BlockPool::deallocate");
  pool.deallocate(b);
  pool.deallocate(a);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, AFixedPoolThatIsExhaustedThrowsOutOfMemoryWithItsFiguresAndStaysUsable) {
  SimBackend backend;
  TypeParam pool(backend, {.block_bytes = kMiB});
  void* a = pool.allocate();
  void* b = pool.allocate();
  try {
    pool.allocate();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), kMiB);
    EXPECT_EQ(e.reserved_bytes(), kPageBytes);
    EXPECT_EQ(e.allocated_bytes(), 2 * kMiB);
    EXPECT_EQ(e.cap_bytes(), kPageBytes);
  }
  EXPECT_EQ(pool.stats().num_ooms, 1u);
  EXPECT_EQ(backend.live_chunks(), 1u);
  pool.deallocate(a);
  EXPECT_EQ(pool.allocate(), a);
  pool.deallocate(b);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, AGrowingPoolMapsOneRegionAtATimeAndBlocksMayStraddleRegions) {
  HostBackend backend;
  // 768 KiB blocks in 2 MiB regions: the third block straddles the first two regions.
  TypeParam pool(backend, {.block_bytes = 768 * kKiB, .region_bytes = kPageBytes, .max_regions = 3});
  EXPECT_EQ(pool.capacity_blocks(), 2u);
  std::vector<char*> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(static_cast<char*>(pool.allocate()));
  EXPECT_EQ(pool.capacity_blocks(), 8u);  // 6 MiB / 768 KiB
  EXPECT_EQ(backend.live_chunks(), 3u);
  char* straddler = blocks[2];  // [1.5 MiB, 2.25 MiB)
  std::memset(straddler, 'q', 768 * kKiB);
  EXPECT_EQ(straddler[768 * kKiB - 1], 'q');
  EXPECT_THROW(pool.allocate(), OutOfMemoryError);
  for (char* p : blocks) pool.deallocate(p);
  EXPECT_EQ(pool.stats().chunks_created, 3u);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, ABackendOutOfMemoryWhileGrowingIsAnOutOfMemoryAndChangesNothing) {
  SimBackend backend(kPageBytes, kPageBytes);  // room for the first region only
  TypeParam pool(backend, {.block_bytes = kMiB, .max_regions = 4});
  void* a = pool.allocate();
  void* b = pool.allocate();
  try {
    pool.allocate();
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.cap_bytes(), 4 * kPageBytes);
    EXPECT_NE(std::string(e.what()).find("cannot grow"), std::string::npos);
  }
  EXPECT_EQ(pool.capacity_blocks(), 2u);
  EXPECT_EQ(backend.live_chunks(), 1u);
  pool.deallocate(b);
  EXPECT_EQ(pool.allocate(), b);
  pool.deallocate(a);
  pool.deallocate(b);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, DoubleInteriorForeignAndUnknownFreesAreInvalidPointersAndChangeNothing) {
  SimBackend backend;
  TypeParam pool(backend, {.block_bytes = 512});
  TypeParam other(backend, {.block_bytes = 512});
  void* a = pool.allocate();
  void* b = pool.allocate();
  pool.deallocate(a);
  test::expect_error([&] { pool.deallocate(a); }, ErrorCode::kInvalidPointer, "BlockPool::deallocate");  // twice
  test::expect_error([&] { pool.deallocate(static_cast<char*>(b) + 8); }, ErrorCode::kInvalidPointer,
                     "BlockPool::deallocate");  // interior
  void* foreign = other.allocate();
  test::expect_error([&] { pool.deallocate(foreign); }, ErrorCode::kInvalidPointer, "BlockPool::deallocate");
  test::expect_error([&] { pool.deallocate(reinterpret_cast<void*>(addr(b) + kPageBytes)); },
                     ErrorCode::kInvalidPointer, "BlockPool::deallocate");  // past the mapped blocks
  test::expect_error([&] { pool.deallocate(reinterpret_cast<void*>(16)); }, ErrorCode::kInvalidPointer,
                     "BlockPool::deallocate");
  pool.deallocate(nullptr);
  EXPECT_EQ(pool.stats().invalid_frees, 5u);
  EXPECT_TRUE(pool.is_live(b));
  EXPECT_FALSE(pool.is_live(a));
  EXPECT_EQ(pool.available(), pool.capacity_blocks() - 1);
  pool.check_invariants();
  pool.deallocate(b);
  pool.check_invariants();
}

TYPED_TEST(BlockPoolTest, BadOptionsAreInvalidArgumentsAndMapNothing) {
  SimBackend backend;
  auto expect_rejected = [&](BlockPoolOptions options, const char* why) {
    test::expect_error([&] { TypeParam pool(backend, options); }, ErrorCode::kInvalidArgument, why);
  };
  expect_rejected({.block_bytes = 0}, "block_bytes is 0");
  expect_rejected({.block_bytes = 64, .alignment_bytes = 24}, "not a power of two");
  expect_rejected({.block_bytes = 64, .alignment_bytes = 2 * kPageBytes}, "exceeds the backend's granularity");
  expect_rejected({.block_bytes = 3 * kMiB}, "holds no block");
  expect_rejected({.block_bytes = 64, .max_regions = 0}, "max_regions is 0");
  expect_rejected({.block_bytes = 1, .alignment_bytes = 1, .max_regions = 4096}, "more than the limit");
  expect_rejected({.block_bytes = 64, .region_bytes = kTiB, .max_regions = kTiB}, "overflows");
  EXPECT_EQ(backend.live_reservations(), 0u);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TYPED_TEST(BlockPoolTest, DestroyingThePoolWithLiveBlocksGivesEverythingBack) {
  HostBackend backend;
  {
    TypeParam pool(backend, {.block_bytes = kMiB, .max_regions = 2});
    for (int i = 0; i < 3; ++i) pool.allocate();
    EXPECT_EQ(backend.live_chunks(), 2u);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TYPED_TEST(BlockPoolTest, StatsCountLiveBlocksByStrideAndBlockSize) {
  SimBackend backend;
  TypeParam pool(backend, {.block_bytes = 100, .alignment_bytes = 64});
  void* a = pool.allocate();
  void* b = pool.allocate();
  pool.deallocate(a);
  const Stats s = pool.stats();
  EXPECT_EQ(s.allocated_bytes.current, 128);
  EXPECT_EQ(s.allocated_bytes.peak, 256);
  EXPECT_EQ(s.requested_bytes.current, 100);
  EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(kPageBytes));
  EXPECT_EQ(s.chunks_created, 1u);
  EXPECT_EQ(s.backend_calls[BackendCall::kCreate], 1u);
  pool.deallocate(b);
}

TEST(BlockPoolStatsTest, ThePlainPoolCountsAllocationsAndFrees) {
  SimBackend backend;
  BlockPool pool(backend, {.block_bytes = 256});
  pool.deallocate(pool.allocate());
  pool.allocate();
  EXPECT_EQ(pool.stats().num_allocs, 2u);
  EXPECT_EQ(pool.stats().num_frees, 1u);
}

// --- ConcurrentBlockPool under several threads -------------------------------------------------------------

TEST(ConcurrentBlockPoolTest, ThreadsNeverShareABlockAndFreeingEachOthersBlocksKeepsThePoolConsistent) {
  HostBackend backend;
  ConcurrentBlockPool pool(backend, {.block_bytes = 256, .region_bytes = kPageBytes, .max_regions = 8});
  constexpr int kThreads = 4;
  constexpr int kOpsPerThread = 40000;
  std::mutex shared_mutex;
  std::vector<std::uint64_t*> shared;  // blocks any thread may free; each holds its owner's tag
  std::atomic<int> corrupted{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) + 1);
      std::vector<std::uint64_t*> mine;
      for (int i = 0; i < kOpsPerThread; ++i) {
        const std::uint64_t tag = (static_cast<std::uint64_t>(t) << 32) | static_cast<std::uint64_t>(i);
        switch (rng() % 4) {
          case 0:
          case 1: {
            auto* p = static_cast<std::uint64_t*>(pool.allocate());
            p[0] = tag;
            p[31] = tag;
            mine.push_back(p);
            break;
          }
          case 2:
            if (!mine.empty()) {
              std::uint64_t* p = mine.back();
              mine.pop_back();
              if (p[0] != p[31]) corrupted.fetch_add(1);
              pool.deallocate(p);
            }
            break;
          default:
            if (!mine.empty()) {  // hand a block to whichever thread frees it
              std::lock_guard lock(shared_mutex);
              shared.push_back(mine.back());
              mine.pop_back();
            } else {
              std::uint64_t* p = nullptr;
              {
                std::lock_guard lock(shared_mutex);
                if (shared.empty()) break;
                p = shared.back();
                shared.pop_back();
              }
              if (p[0] != p[31]) corrupted.fetch_add(1);
              pool.deallocate(p);
            }
        }
      }
      for (std::uint64_t* p : mine) {
        if (p[0] != p[31]) corrupted.fetch_add(1);
        pool.deallocate(p);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(corrupted.load(), 0);
  pool.check_invariants();
  EXPECT_EQ(pool.capacity_blocks() - pool.available(), shared.size());
  for (std::uint64_t* p : shared) pool.deallocate(p);
  EXPECT_EQ(pool.available(), pool.capacity_blocks());
  EXPECT_EQ(pool.stats().allocated_bytes.current, 0);
  pool.check_invariants();
}

TEST(ConcurrentBlockPoolTest, ThreadsRacingForTheLastBlocksGetExactlyTheCapacityAndTheRestOutOfMemory) {
  SimBackend backend;
  ConcurrentBlockPool pool(backend, {.block_bytes = 64 * kKiB, .max_regions = 2});  // 64 blocks in all
  constexpr int kThreads = 4;
  std::atomic<std::uint64_t> got{0}, ooms{0};
  std::vector<std::thread> threads;
  std::vector<std::vector<void*>> blocks(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        try {
          blocks[t].push_back(pool.allocate());
          got.fetch_add(1);
        } catch (const OutOfMemoryError&) {
          ooms.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(got.load(), 64u);
  EXPECT_EQ(ooms.load(), 4u * 40 - 64);
  EXPECT_EQ(pool.stats().num_ooms, ooms.load());
  EXPECT_EQ(backend.live_chunks(), 2u);
  std::set<void*> distinct;
  for (const auto& v : blocks) distinct.insert(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), 64u);
  pool.check_invariants();
}

TEST(ConcurrentBlockPoolTest, OfTwoThreadsFreeingTheSameBlockExactlyOneSucceeds) {
  SimBackend backend;
  ConcurrentBlockPool pool(backend, {.block_bytes = 512});
  for (int round = 0; round < 200; ++round) {
    void* p = pool.allocate();
    std::atomic<int> ok{0}, rejected{0};
    std::atomic<bool> go{false};
    auto free_it = [&] {
      while (!go.load()) {
      }
      try {
        pool.deallocate(p);
        ok.fetch_add(1);
      } catch (const Error& e) {
        if (e.code() == ErrorCode::kInvalidPointer) rejected.fetch_add(1);
      }
    };
    std::thread a(free_it), b(free_it);
    go = true;
    a.join();
    b.join();
    ASSERT_EQ(ok.load(), 1);
    ASSERT_EQ(rejected.load(), 1);
  }
  pool.check_invariants();
  EXPECT_EQ(pool.available(), pool.capacity_blocks());
}

}  // namespace
}  // namespace gmlake::classic
