// The gmlake engine with chunks of several sizes (up to 256 MiB): backend calls follow runs and chunks, not bytes.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "policies/gmlake/chunk_sizes.h"
#include "policies/gmlake/stitching_allocator.h"
#include "gmlake/error.h"
#include "gmlake/sim_backend.h"

namespace gmlake::engine {
namespace {

class MultiSizeChunksTest : public ::testing::Test {
 protected:
  // Chunks up to 256 MiB and grow-ahead of 20 MiB (the defaults until 2026-11-25: what these tests pin down).
  StitchingAllocator& make(const std::string& conf = "") {
    const std::string base = "max_chunk_bytes:256M,grow_bytes:20M";
    alloc_ = std::make_unique<StitchingAllocator>(parse_config(conf.empty() ? base : base + "," + conf), backend_);
    return *alloc_;
  }
  std::uint64_t calls(BackendCall c) const { return backend_.counters()[c]; }
  std::uint64_t reserved() const { return static_cast<std::uint64_t>(alloc_->stats().reserved_bytes.current); }

  SimBackend backend_;
  std::unique_ptr<StitchingAllocator> alloc_;
};

TEST_F(MultiSizeChunksTest, AOneGibibyteBlockIsBackedByFourChunksAndOneSetAccess) {
  auto& a = make("chunks_per_block:0");  // chunks of the run's size, up to max_chunk_bytes 256 MiB
  void* p = a.allocate(kGiB, 0);
  EXPECT_EQ(calls(BackendCall::kCreate), 4u);
  EXPECT_EQ(calls(BackendCall::kMap), 4u);
  EXPECT_EQ(calls(BackendCall::kSetAccess), 1u);
  EXPECT_EQ(reserved(), kGiB);
  EXPECT_EQ(a.live_chunks(), 4u);
  a.check_invariants();
  a.deallocate(p);
  a.check_invariants();
}

TEST_F(MultiSizeChunksTest, AFreedRangeServesABlockOfTheSameSizeWithNoBackendCall) {
  auto& a = make();
  a.deallocate(a.allocate(600 * kMiB, 0));
  const BackendCounters before = backend_.counters();
  void* p = a.allocate(600 * kMiB, 0);
  for (std::size_t k = 0; k < kBackendCallKinds; ++k) EXPECT_EQ(backend_.counters().calls[k], before.calls[k]);
  EXPECT_EQ(a.stats().stitch_reuses, 1u);
  a.check_invariants();
  a.deallocate(p);
}

TEST_F(MultiSizeChunksTest, AOneGibibyteBlockGetsChunksOfAThirtySecondOfItsSize) {
  auto& a = make();  // chunks_per_block 32: at most 32 MiB a chunk for this block
  void* p = a.allocate(kGiB, 0);
  EXPECT_EQ(calls(BackendCall::kCreate), 32u);
  EXPECT_EQ(calls(BackendCall::kMap), 32u);
  EXPECT_EQ(calls(BackendCall::kSetAccess), 1u) << "one set_access over the whole run still";
  EXPECT_EQ(reserved(), kGiB);
  a.check_invariants();
  a.deallocate(p);
  // A block of a quarter of it placed on the freed range covers 8 chunks and 1 MiB of a ninth: the 31 MiB that
  // chunk would strand pass max_strand_bytes (16 MiB), so it is re-cut; the block's last page is stitched anew,
  // grown ahead to 20 MiB in chunks of at most 8 MiB (257 MiB / 32): 3 maps, at most 7 MiB stranded, where
  // chunks of the run's size (256 MiB) would strand up to 255 MiB.
  void* q = a.allocate(256 * kMiB + kMiB, 0);
  EXPECT_EQ(a.stats().evictions, 1u);
  EXPECT_LE(calls(BackendCall::kMap), 32u + 3u);
  EXPECT_LE(static_cast<std::uint64_t>(a.stats().inactive_split_bytes.current), 7 * kMiB);
  a.check_invariants();
  a.deallocate(q);
}

TEST_F(MultiSizeChunksTest, AnIdleChunkASmallBlockWouldStrandIsRecut) {
  auto& a = make("chunks_per_block:0,headroom_permille:0");  // one 256 MiB chunk for the first block
  a.deallocate(a.allocate(256 * kMiB, 0));
  EXPECT_EQ(a.live_chunks(), 1u);
  void* p = a.allocate(4 * kMiB, 0);  // would strand 252 MiB of the idle chunk: re-cut
  EXPECT_EQ(a.stats().evictions, 1u);
  EXPECT_EQ(calls(BackendCall::kRelease), 1u);
  EXPECT_LE(reserved(), 24 * kMiB) << "the block's own pages, grown ahead to 20 MiB at most";
  EXPECT_LE(a.stats().inactive_split_bytes.current, static_cast<std::int64_t>(16 * kMiB))
      << "pinned: at most the pages grown ahead with the block, not the 252 MiB left of the old chunk";
  a.check_invariants();
  a.deallocate(p);
  // With max_strand_bytes above what it would strand, the chunk stays and the block pins the rest of it.
  auto& b = make("chunks_per_block:0,headroom_permille:0,max_strand_bytes:1G");
  b.deallocate(b.allocate(256 * kMiB, 0));
  void* r = b.allocate(4 * kMiB, 0);
  EXPECT_EQ(b.stats().evictions, 0u);
  EXPECT_EQ(reserved(), 256 * kMiB);
  EXPECT_EQ(b.stats().inactive_split_bytes.current, static_cast<std::int64_t>(252 * kMiB));
  b.check_invariants();
  b.deallocate(r);
}

TEST_F(MultiSizeChunksTest, GrowAheadBacksTwentyMebibytesSoTheNextBlocksNeedNoCall) {
  auto& a = make("chunks_per_block:0");
  void* first = a.allocate(3 * kMiB, 0);
  EXPECT_EQ(calls(BackendCall::kCreate), 1u);
  EXPECT_EQ(reserved(), 20 * kMiB);
  void* second = a.allocate(3 * kMiB, 0);
  void* third = a.allocate(10 * kMiB, 0);
  EXPECT_EQ(calls(BackendCall::kCreate), 1u) << "placed in the grown-ahead pages";
  EXPECT_EQ(calls(BackendCall::kMap), 1u);
  a.check_invariants();
  for (void* p : {first, second, third}) a.deallocate(p);
  a.check_invariants();
}

TEST_F(MultiSizeChunksTest, PageGranularConfigurationMovesSinglePages) {
  auto& a = make("max_chunk_bytes:2M,grow_bytes:2M");
  a.deallocate(a.allocate(64 * kMiB, 0));
  EXPECT_EQ(calls(BackendCall::kCreate), 32u);
  EXPECT_EQ(calls(BackendCall::kSetAccess), 1u);
  a.check_invariants();
}

TEST_F(MultiSizeChunksTest, PastTheHeadroomIdleChunksAreReusedAndReservedBytesDoNotGrow) {
  auto& a = make("headroom_permille:0");
  void* big = a.allocate(512 * kMiB, 0);
  a.deallocate(big);
  const std::uint64_t before = reserved();
  // A different shape elsewhere: the idle chunks are unmapped and their memory backs it (whole or traded).
  void* keep = a.allocate(kMiB * 2, 0);  // small pool, one page of its own
  void* other = a.allocate(300 * kMiB, 0);
  EXPECT_LE(reserved(), before + 2 * kMiB);
  a.check_invariants();
  a.deallocate(other);
  a.deallocate(keep);
  a.check_invariants();
}

TEST_F(MultiSizeChunksTest, UnderACapChunksArePageSizedAndNothingGrowsAhead) {
  auto& a = make("cap_bytes:64M");
  a.deallocate(a.allocate(20 * kMiB, 0));
  EXPECT_EQ(a.live_chunks(), 10u) << "memory first under a cap";
  a.empty_cache();
}

TEST_F(MultiSizeChunksTest, WithoutMemoryFirstChunksArePageSizedOnlyNearTheCap) {
  auto& a = make("cap_bytes:64M,memory_first_under_cap:false,chunks_per_block:0");
  a.deallocate(a.allocate(20 * kMiB, 0));
  EXPECT_EQ(a.live_chunks(), 1u) << "far from the cap: one chunk";
  a.empty_cache();
  void* p = a.allocate(60 * kMiB, 0);  // past 90% of the cap: memory first
  EXPECT_EQ(reserved(), 60 * kMiB);
  EXPECT_EQ(a.live_chunks(), 30u);
  EXPECT_THROW(a.allocate(8 * kMiB, 0), OutOfMemoryError);
  a.check_invariants();
  a.deallocate(p);
  void* q = a.allocate(62 * kMiB, 0);  // the idle pages move one by one: no new memory
  EXPECT_LE(reserved(), 64 * kMiB);
  a.check_invariants();
  a.deallocate(q);
}

TEST_F(MultiSizeChunksTest, ARequestTheCapCanNeverHoldLeavesNothingReserved) {
  auto& a = make("cap_bytes:256M");
  EXPECT_THROW(a.allocate(300 * kMiB, 0), OutOfMemoryError);
  a.check_invariants();
  EXPECT_EQ(a.stats().num_ooms, 1u);
  EXPECT_EQ(reserved(), 0u);
  EXPECT_EQ(calls(BackendCall::kCreate), 0u);
  void* p = a.allocate(200 * kMiB, 0);  // what fits still does
  a.deallocate(p);
}

TEST_F(MultiSizeChunksTest, FailedStitchesOfEveryCallKindLeaveTheAllocatorConsistent) {
  auto& a = make();
  std::vector<void*> live;
  for (int i = 0; i < 40; ++i) {
    live.push_back(a.allocate(static_cast<std::uint64_t>(1 + (i * 37) % 300) * kMiB, 0));
    if (i % 3 == 0) {
      a.deallocate(live.front());
      live.erase(live.begin());
    }
    a.check_invariants();
  }
  for (void* p : live) a.deallocate(p);
  a.empty_cache();
  a.check_invariants();
  EXPECT_EQ(reserved(), 0u);
  EXPECT_EQ(backend_.live_chunks(), 0u);
}

}  // namespace
}  // namespace gmlake::engine

namespace gmlake::engine {
namespace {

// Found on the GPU: a run grown ahead is backed by several chunks; one past the block turned idle at once and the
// next chunk of the same run could evict it, leaving a hole under the run's set_access. Random shapes with no
// headroom (evictions in mid-run) and every invariant checked after every step.
TEST(MultiSizeChunksRandomTest, RandomShapesWithEvictionsInMidRunKeepEveryInvariant) {
  for (const char* conf : {"headroom_permille:0", "headroom_permille:0,max_chunk_bytes:8M", "max_chunk_bytes:16M"}) {
    SCOPED_TRACE(conf);
    SimBackend sim;
    StitchingAllocator a(parse_config(conf), sim);
    std::mt19937_64 rng(7);
    std::vector<void*> live;
    for (int step = 0; step < 3000; ++step) {
      if (!live.empty() && (rng() % 100 < 45 || live.size() > 24)) {
        const std::size_t i = rng() % live.size();
        a.deallocate(live[i]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        const std::uint64_t size = rng() % 4 == 0 ? 1 + rng() % kMiB : 1 + rng() % (96 * kMiB);
        live.push_back(a.allocate(size, 0));
      }
      a.check_invariants();
    }
    for (void* p : live) a.deallocate(p);
    a.empty_cache();
    a.check_invariants();
    EXPECT_EQ(sim.live_chunks(), 0u);
  }
}

TEST(HugeBlockTest, ABlockOfHundredsOfGibibytesMapsInAtMost4096Chunks) {
  // At the default (4 MiB chunks), 512 GiB would be 131,072 chunks, each walked at every placement, use and
  // free of the block; its chunks grow with it instead (ChunkSource::chunk_limit).
  SimBackend backend;
  StitchingAllocator a(parse_config(""), backend);
  void* p = a.allocate(512 * kGiB, 0);
  EXPECT_LE(backend.counters()[BackendCall::kCreate], ChunkSizes::kMaxChunksPerBlock);
  EXPECT_EQ(backend.counters()[BackendCall::kSetAccess], 1u);
  EXPECT_EQ(static_cast<std::uint64_t>(a.stats().reserved_bytes.current), 512 * kGiB);
  a.check_invariants();
  a.deallocate(p);
  void* q = a.allocate(512 * kGiB - kMiB, 0);  // the same range, mapped: no backend call
  EXPECT_LE(backend.counters()[BackendCall::kCreate], ChunkSizes::kMaxChunksPerBlock);
  a.check_invariants();
  a.deallocate(q);
  a.empty_cache();
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST(ReformingPoolTest, AfterEmptyCacheThePoolFormsAgainInGrowthChunksSizedByItsAllocatedHigh) {
  // The default configuration: 4 MiB chunks, growth chunks of 16 MiB and at most 1/768 of the pool. A job of
  // 12 GiB (48 blocks of 256 MiB) empties its cache and forms again, as each round of train.py's A/B does.
  SimBackend backend(kPageBytes);
  StitchingAllocator a(parse_config(""), backend);
  std::vector<void*> blocks;
  for (int i = 0; i < 48; ++i) blocks.push_back(a.allocate(256 * kMiB, 0));
  for (void* p : blocks) a.deallocate(p);
  blocks.clear();
  a.empty_cache();
  ASSERT_EQ(a.stats().reserved_bytes.current, 0);
  // Below the 12 GiB it has held, the pool makes 16 MiB chunks (12 GiB / 768): 16 for a 256 MiB block, not the
  // 64 of the block's share (4 MiB) that nothing reserved would give.
  const std::uint64_t before = backend.counters()[BackendCall::kCreate];
  blocks.push_back(a.allocate(256 * kMiB, 0));
  EXPECT_EQ(backend.counters()[BackendCall::kCreate] - before, 16u);
  // So too with idle memory left to move, within the headroom: a freed block's chunks stay idle and the next
  // block gets growth chunks of its own.
  blocks.push_back(a.allocate(256 * kMiB, 0));
  a.deallocate(blocks.front());
  const std::uint64_t idle_before = backend.counters()[BackendCall::kCreate];
  blocks.front() = a.allocate(512 * kMiB, 0);
  EXPECT_EQ(backend.counters()[BackendCall::kCreate] - idle_before, 32u) << "512 MiB in 16 MiB chunks";
  a.check_invariants();
  for (void* p : blocks) a.deallocate(p);
  a.check_invariants();
}

}  // namespace
}  // namespace gmlake::engine
