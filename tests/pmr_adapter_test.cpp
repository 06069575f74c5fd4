// The std::pmr adapters: std::pmr containers running on a block pool, a bump allocator and a layout cache over the
// host backend, with the pools' own accounting showing the containers' memory.
#include "gmlake/classic/pmr_adapter.h"

#include <gtest/gtest.h>

#include <memory_resource>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/classic/bump_allocator.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/classic/concurrent_bump_allocator.h"
#include "gmlake/classic/concurrent_block_pool.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "classic_test_support.h"

namespace gmlake::classic {
namespace {

// Counts what reaches it, so a test can tell which requests left the pool.
class CountingResource final : public std::pmr::memory_resource {
 public:
  int allocations = 0;
  int live = 0;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment) override {
    ++allocations;
    ++live;
    return std::pmr::new_delete_resource()->allocate(bytes, alignment);
  }
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override {
    --live;
    std::pmr::new_delete_resource()->deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override { return this == &other; }
};

TEST(PmrAdapterTest, AnUnorderedMapTakesItsNodesFromTheBlockPoolAndItsBucketsFromUpstream) {
  HostBackend backend;
  BlockPool pool(backend, {.block_bytes = 64});
  CountingResource upstream;
  BlockPoolResource<BlockPool> resource(pool, &upstream);
  {
    std::pmr::unordered_map<int, int> map(&resource);
    for (int i = 0; i < 1000; ++i) map[i] = i * i;
    EXPECT_EQ(map.at(999), 999 * 999);
    EXPECT_EQ(pool.stats().num_allocs, 1000u);  // one node each
    EXPECT_GT(upstream.allocations, 0);         // bucket arrays
    map.erase(7);
    EXPECT_EQ(pool.available(), pool.capacity_blocks() - 999);
  }
  EXPECT_EQ(pool.available(), pool.capacity_blocks());
  EXPECT_EQ(upstream.live, 0);
  pool.check_invariants();
}

TEST(PmrAdapterTest, AVectorOfStringsGrowsInABumpAllocatorAndTheBumpAllocatorFreesItAllAtOnce) {
  HostBackend backend;
  BumpAllocator bump(backend, 4 * kMiB);
  BumpAllocatorResource<BumpAllocator> resource(bump);
  {
    std::pmr::vector<std::pmr::string> words(&resource);
    for (int i = 0; i < 2000; ++i)
      words.emplace_back("a string long enough to leave the small-string buffer #" + std::to_string(i));
    EXPECT_EQ(words[1234].substr(words[1234].size() - 5), "#1234");
    EXPECT_GT(bump.used_bytes(), 2000u * 56);
  }
  EXPECT_GT(bump.used_bytes(), 0u);  // deallocate does nothing...
  bump.reset();                      // ...reset frees everything
  EXPECT_EQ(bump.used_bytes(), 0u);
}

TEST(PmrAdapterTest, AContainerOutgrowingItsBumpAllocatorGetsTheBumpAllocatorsOutOfMemoryError) {
  HostBackend backend;
  BumpAllocator bump(backend, kPageBytes);
  BumpAllocatorResource<BumpAllocator> resource(bump);
  std::pmr::vector<char> bytes(&resource);
  EXPECT_THROW(bytes.resize(3 * kMiB), OutOfMemoryError);
  EXPECT_TRUE(bytes.empty());
}

TEST(PmrAdapterTest, AVectorOnTheLayoutCacheReusesTheSameBlocksWhenRebuilt) {
  HostBackend backend(testing::page_bytes());
  LayoutCache cache(backend);
  LayoutCacheResource resource(cache);
  for (int round = 0; round < 3; ++round) {
    std::pmr::vector<double> v(&resource);
    for (int i = 0; i < 10000; ++i) v.push_back(i * 0.5);
    EXPECT_EQ(v[9999], 9999 * 0.5);
  }
  const LayoutCacheStats s = cache.stats();
  EXPECT_EQ(s.live_blocks, 0u);
  EXPECT_EQ(s.hits, 2 * s.misses);  // rounds two and three hit every growth step of round one
  cache.check_invariants();
}

TEST(PmrAdapterTest, ConcurrentPoolsServeContainersOnSeveralThreads) {
  HostBackend backend;
  ConcurrentBlockPool pool(backend, {.block_bytes = 64, .max_regions = 4});
  BlockPoolResource<ConcurrentBlockPool> resource(pool);
  std::vector<std::thread> threads;
  std::vector<std::size_t> sizes(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::pmr::unordered_map<int, int> map(&resource);
      for (int i = 0; i < 5000; ++i) map[i] = t;
      for (int i = 0; i < 5000; i += 2) map.erase(i);
      sizes[t] = map.size();
    });
  }
  for (auto& t : threads) t.join();
  for (std::size_t n : sizes) EXPECT_EQ(n, 2500u);
  EXPECT_EQ(pool.available(), pool.capacity_blocks());
  pool.check_invariants();
}

TEST(PmrAdapterTest, AdaptersOverTheSamePoolAreEqualAndOverAnotherAreNot) {
  HostBackend backend;
  BlockPool a(backend, {.block_bytes = 64});
  BlockPool b(backend, {.block_bytes = 64});
  BlockPoolResource<BlockPool> a1(a), a2(a), b1(b);
  EXPECT_TRUE(a1.is_equal(a2));
  EXPECT_FALSE(a1.is_equal(b1));
  ConcurrentBumpAllocator bump(backend, kPageBytes);
  BumpAllocatorResource<ConcurrentBumpAllocator> r1(bump), r2(bump);
  EXPECT_TRUE(r1.is_equal(r2));
  EXPECT_FALSE(r1.is_equal(a1));
  LayoutCache cache(backend);
  EXPECT_TRUE(LayoutCacheResource(cache).is_equal(LayoutCacheResource(cache)));
}

TEST(PmrAdapterTest, PoolsOverMemoryTheCpuCannotTouchAreRejected) {
  SimBackend backend;
  BlockPool pool(backend, {.block_bytes = 64});
  BumpAllocator bump(backend, kPageBytes);
  LayoutCache cache(backend);
  test::expect_error([&] { BlockPoolResource<BlockPool> r(pool); }, ErrorCode::kInvalidArgument, "");
  test::expect_error([&] { BumpAllocatorResource<BumpAllocator> r(bump); }, ErrorCode::kInvalidArgument, "");
  test::expect_error([&] { LayoutCacheResource r(cache); }, ErrorCode::kInvalidArgument, "");
  test::expect_error([&] { LayoutCacheResource r(cache, 3); }, ErrorCode::kInvalidArgument, "");
}

}  // namespace
}  // namespace gmlake::classic
