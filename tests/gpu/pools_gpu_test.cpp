// The classic pools on the CUDA backend: the same pool code as on the host, over device memory. Every block,
// allocator allocation, buffer and cached layout holds the bytes written into it (filled and read back through the
// driver), exhaustion is a clean out-of-memory, and destroying a pool gives every chunk back to the device.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "gmlake/error.h"
#include "gmlake/classic/bump_allocator.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/classic/concurrent_block_pool.h"
#include "gmlake/classic/growable_buffer.h"
#include "gmlake/classic/layout_cache.h"
#include "gmlake/classic/pmr_adapter.h"
#include "gmlake/units.h"
#include "gpu/cuda_test_support.h"

namespace gmlake::classic {
namespace {

using gpu_test::fill_bytes;
using gpu_test::read_bytes;
using gpu_test::synchronize;

class PoolsOnCudaTest : public gpu_test::CudaTest {};

std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// True when every byte of [p, p + size_bytes) on the device is `value`.
bool holds(const void* p, std::uint8_t value, std::uint64_t size_bytes) {
  for (std::uint8_t b : read_bytes(addr(p), size_bytes)) {
    if (b != value) return false;
  }
  return true;
}

TEST_F(PoolsOnCudaTest, EveryBlockOfAGrowingBlockPoolHoldsItsOwnBytesAndTheLastOneIsAnOutOfMemory) {
  CudaBackend backend;
  {
    BlockPool pool(backend, {.block_bytes = 768 * kKiB, .alignment_bytes = 256, .max_regions = 3});
    std::vector<void*> blocks;
    for (int i = 0; i < 8; ++i) {
      blocks.push_back(pool.allocate());
      fill_bytes(addr(blocks.back()), static_cast<std::uint8_t>(i + 1), 768 * kKiB);
    }
    EXPECT_THROW(pool.allocate(), OutOfMemoryError);
    synchronize();
    for (int i = 0; i < 8; ++i) EXPECT_TRUE(holds(blocks[i], static_cast<std::uint8_t>(i + 1), 768 * kKiB)) << i;
    pool.deallocate(blocks[3]);
    EXPECT_EQ(pool.allocate(), blocks[3]);
    pool.check_invariants();
    EXPECT_EQ(backend.live_chunks(), 3u);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST_F(PoolsOnCudaTest, ThreadsSharingAConcurrentBlockPoolGetDistinctDeviceBlocks) {
  CudaBackend backend;
  ConcurrentBlockPool pool(backend, {.block_bytes = 64 * kKiB, .max_regions = 8});  // 256 blocks
  std::vector<std::vector<void*>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 64; ++i) got[t].push_back(pool.allocate());
    });
  }
  for (auto& t : threads) t.join();
  std::set<void*> distinct;
  for (const auto& v : got) distinct.insert(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), 256u);
  EXPECT_EQ(backend.live_chunks(), 8u);
  for (std::size_t t = 0; t < got.size(); ++t) {
    for (void* p : got[t]) fill_bytes(addr(p), static_cast<std::uint8_t>(t + 1), 64 * kKiB);
  }
  synchronize();
  for (std::size_t t = 0; t < got.size(); ++t) {
    for (void* p : got[t]) ASSERT_TRUE(holds(p, static_cast<std::uint8_t>(t + 1), 64 * kKiB));
  }
  pool.check_invariants();
}

TEST_F(PoolsOnCudaTest, BumpAllocatorAllocationsHoldTheirBytesAndAResetStartsOver) {
  CudaBackend backend;
  BumpAllocator bump(backend, 4 * kMiB);
  void* a = bump.allocate(3 * kKiB, 256);
  void* b = bump.allocate(kMiB, 4 * kKiB);
  EXPECT_EQ(addr(b) % (4 * kKiB), 0u);
  fill_bytes(addr(a), 0xA1, 3 * kKiB);
  fill_bytes(addr(b), 0xB2, kMiB);
  synchronize();
  EXPECT_TRUE(holds(a, 0xA1, 3 * kKiB));
  EXPECT_TRUE(holds(b, 0xB2, kMiB));
  EXPECT_THROW(bump.allocate(4 * kMiB), OutOfMemoryError);
  bump.reset();
  EXPECT_EQ(bump.allocate(1), a);
}

TEST_F(PoolsOnCudaTest, AGrowableBufferKeepsItsAddressAndItsBytesAsItGrowsAndGivesItsTailBack) {
  CudaBackend backend;
  GrowableBuffer buffer(backend, {.max_bytes = kGiB});
  buffer.resize(kMiB);
  void* const data = buffer.data();
  fill_bytes(addr(data), 0x5A, kMiB);
  synchronize();
  buffer.resize(256 * kMiB);
  EXPECT_EQ(buffer.data(), data);
  fill_bytes(addr(data) + 255 * kMiB, 0x6B, kMiB);
  synchronize();
  EXPECT_TRUE(holds(data, 0x5A, kMiB));
  EXPECT_TRUE(holds(static_cast<char*>(data) + 255 * kMiB, 0x6B, kMiB));
  EXPECT_EQ(backend.live_chunks(), 2u);  // one chunk per growth
  buffer.resize(kMiB);
  buffer.shrink_to_fit();
  EXPECT_EQ(backend.live_chunk_bytes(), kPageBytes);
  EXPECT_TRUE(holds(data, 0x5A, kMiB));
  buffer.check_invariants();
}

TEST_F(PoolsOnCudaTest, ALayoutCacheServesARepeatedLayoutWithoutADriverCallAndGivesEverythingBackAtExit) {
  CudaBackend backend;
  {
    LayoutCache cache(backend, {.max_cached_bytes = 256 * kMiB, .max_cached_entries = 8});
    void* p = cache.allocate({24 * kMiB, 256});
    fill_bytes(addr(p), 0x3C, 24 * kMiB);
    synchronize();
    cache.release(p);
    const std::uint64_t creates = backend.counters()[BackendCall::kCreate];
    void* q = cache.allocate({24 * kMiB, 256});
    EXPECT_EQ(q, p);
    EXPECT_EQ(backend.counters()[BackendCall::kCreate], creates);
    EXPECT_TRUE(holds(q, 0x3C, 24 * kMiB));  // the cached block kept its bytes
    cache.allocate({kMiB});                  // left live: the destructor gives it back
    cache.check_invariants();
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST_F(PoolsOnCudaTest, ThePmrAdaptersRefuseDeviceMemory) {
  CudaBackend backend;
  BlockPool pool(backend, {.block_bytes = 256});
  EXPECT_THROW(BlockPoolResource<BlockPool> resource(pool), Error);
}

}  // namespace
}  // namespace gmlake::classic
