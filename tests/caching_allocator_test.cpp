#include "policies/caching/caching_allocator.h"

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"
#include "policy_test_support.h"

namespace gmlake {
namespace {

using testing::addr;
using testing::expect_invalid_pointer;
using testing::expect_unchanged;
using testing::offset;
using testing::Snapshot;

Config caching_config(std::uint64_t cap_bytes = 0) {
  Config c;
  c.policy = Policy::kCaching;
  c.cap_bytes = cap_bytes;
  return c;
}

class CachingAllocatorTest : public ::testing::Test {
 protected:
  std::int64_t reserved() const { return alloc.stats().reserved_bytes.current; }
  std::int64_t inactive_split() const { return alloc.stats().inactive_split_bytes.current; }
  std::uint64_t block_size(void* p) const {
    for (const BlockInfo& b : alloc.blocks()) {
      if (b.address == addr(p)) return b.size_bytes;
    }
    ADD_FAILURE() << "no block at " << p;
    return 0;
  }

  SimBackend backend;
  CachingAllocator alloc{caching_config(), backend};
};

TEST(CachingAllocatorSizing, RoundsRequestsToPoolsAndSegmentSizesAsPyTorchDoes) {
  struct Case {
    std::uint64_t request_bytes, block_bytes, segment_bytes;
  };
  const std::uint64_t nine_point_nine_mib = 99 * kMiB / 10;
  const Case cases[] = {
      {1, 512, 2 * kMiB},                        // below 512 B: one 512 B block in a small segment
      {512, 512, 2 * kMiB},
      {513, 1024, 2 * kMiB},                     // up to the next 512 B
      {kMiB, kMiB, 2 * kMiB},                    // the largest small request
      {kMiB + 1, kMiB + 512, 20 * kMiB},         // large pool, under 10 MiB: a 20 MiB segment
      {nine_point_nine_mib, round_up(nine_point_nine_mib, kRoundBytes), 20 * kMiB},
      {10 * kMiB, 10 * kMiB, 10 * kMiB},         // 10 MiB and up: the request rounded to 2 MiB
      {21 * kMiB, 22 * kMiB, 22 * kMiB},         // 1 MiB left over is not split: the block is the segment
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.request_bytes);
    SimBackend backend;
    CachingAllocator alloc(caching_config(), backend);
    void* p = alloc.allocate(c.request_bytes, 0);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(alloc.blocks().size(), 1u);
    EXPECT_EQ(alloc.blocks()[0].size_bytes, c.block_bytes);
    EXPECT_EQ(alloc.blocks()[0].requested_bytes, c.request_bytes);
    const Stats s = alloc.stats();
    EXPECT_EQ(s.reserved_bytes.current, static_cast<std::int64_t>(c.segment_bytes));
    EXPECT_EQ(s.allocated_bytes.current, static_cast<std::int64_t>(c.block_bytes));
    EXPECT_EQ(s.requested_bytes.current, static_cast<std::int64_t>(c.request_bytes));
    EXPECT_EQ(backend.live_chunk_bytes(), c.segment_bytes);
    EXPECT_EQ(s.backend_calls[BackendCall::kCreate], 1u);
    EXPECT_EQ(s.chunks_created, 1u);
    EXPECT_TRUE(backend.is_accessible(addr(p), c.block_bytes));
    alloc.check_invariants();
  }
}

TEST_F(CachingAllocatorTest, SplitsSmallPoolRemaindersOfAtLeast512Bytes) {
  void* a = alloc.allocate(kMiB, 0);
  EXPECT_EQ(inactive_split(), static_cast<std::int64_t>(kMiB));  // the free second half of the segment
  void* b = alloc.allocate(kMiB - kRoundBytes, 0);
  EXPECT_EQ(addr(b), addr(a) + kMiB);
  EXPECT_EQ(block_size(b), kMiB - kRoundBytes);
  EXPECT_EQ(inactive_split(), static_cast<std::int64_t>(kRoundBytes));  // a 512 B remainder was split off
  void* c = alloc.allocate(kRoundBytes, 0);
  EXPECT_EQ(addr(c), addr(a) + 2 * kMiB - kRoundBytes);
  EXPECT_EQ(inactive_split(), 0);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(2 * kMiB));
  alloc.allocate(1, 0);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(4 * kMiB));  // the first segment is full
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, SplitsLargePoolRemaindersOnlyAboveOneMiB) {
  void* a = alloc.allocate(19 * kMiB, 0);  // 1 MiB left over: kept inside the block
  EXPECT_EQ(block_size(a), 20 * kMiB);
  EXPECT_EQ(alloc.stats().allocated_bytes.current, static_cast<std::int64_t>(20 * kMiB));
  EXPECT_EQ(inactive_split(), 0);
  void* b = alloc.allocate(19 * kMiB - kRoundBytes, 0);  // 1 MiB + 512 B left over: split off
  EXPECT_EQ(block_size(b), 19 * kMiB - kRoundBytes);
  EXPECT_EQ(inactive_split(), static_cast<std::int64_t>(kMiB + kRoundBytes));
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(40 * kMiB));
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, BestFitTakesTheSmallestAdequateBlockAndTheLowestAddressAmongEquals) {
  const std::uint64_t sizes[] = {4 * kKiB, kRoundBytes, 8 * kKiB, kRoundBytes, 4 * kKiB, kRoundBytes};
  std::vector<void*> p;
  for (std::uint64_t s : sizes) p.push_back(alloc.allocate(s, 0));
  alloc.deallocate(p[0]);  // holes: 4 KiB, 8 KiB, 4 KiB, then the rest of the segment
  alloc.deallocate(p[2]);
  alloc.deallocate(p[4]);
  EXPECT_EQ(alloc.allocate(3 * kKiB, 0), p[0]);  // a 4 KiB hole, the lower one
  EXPECT_EQ(alloc.allocate(3 * kKiB, 0), p[4]);  // the other 4 KiB hole (p[0]'s left 1 KiB)
  EXPECT_EQ(alloc.allocate(6 * kKiB, 0), p[2]);  // the 8 KiB hole, not the segment's tail
  alloc.check_invariants();

  // Two whole 12 MiB segments: the lower address wins.
  void* x = alloc.allocate(12 * kMiB, 0);
  void* y = alloc.allocate(12 * kMiB, 0);
  alloc.deallocate(y);
  alloc.deallocate(x);
  void* z = alloc.allocate(11 * kMiB, 0);
  EXPECT_EQ(addr(z), std::min(addr(x), addr(y)));
  EXPECT_EQ(block_size(z), 12 * kMiB);
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, CoalescesAFreedBlockWithItsFreeNeighbours) {
  void* a = alloc.allocate(4 * kKiB, 0);
  void* b = alloc.allocate(4 * kKiB, 0);
  void* c = alloc.allocate(4 * kKiB, 0);
  void* d = alloc.allocate(4 * kKiB, 0);
  alloc.deallocate(a);
  alloc.deallocate(b);
  void* ab = alloc.allocate(8 * kKiB, 0);  // fits only in a and b merged, before the segment's tail
  EXPECT_EQ(ab, a);
  alloc.deallocate(c);  // between two live blocks: stays apart
  EXPECT_EQ(inactive_split(), static_cast<std::int64_t>(2 * kMiB - 16 * kKiB + 4 * kKiB));
  alloc.deallocate(d);  // merges with c and with the tail
  alloc.deallocate(ab);  // merges everything back into the whole segment
  EXPECT_EQ(inactive_split(), 0);
  alloc.check_invariants();
  alloc.empty_cache();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST_F(CachingAllocatorTest, FreeBlocksServeOnlyTheirOwnStream) {
  void* p = alloc.allocate(4 * kKiB, 1);
  alloc.deallocate(p);
  void* q = alloc.allocate(4 * kKiB, 2);
  EXPECT_NE(q, p);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(4 * kMiB));  // stream 2 got its own segment
  EXPECT_EQ(alloc.allocate(4 * kKiB, 1), p);

  void* big = alloc.allocate(12 * kMiB, 1);
  alloc.deallocate(big);
  void* other = alloc.allocate(12 * kMiB, 2);
  EXPECT_NE(other, big);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(28 * kMiB));
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, DeferredFreeKeepsMemoryUnusableUntilItEnds) {
  void* p = alloc.allocate(12 * kMiB, 0);
  alloc.begin_deferred_free(p);
  Stats s = alloc.stats();
  EXPECT_EQ(s.allocated_bytes.current, 0);
  EXPECT_EQ(s.requested_bytes.current, 0);
  EXPECT_EQ(s.active_bytes.current, static_cast<std::int64_t>(12 * kMiB));
  EXPECT_TRUE(alloc.blocks()[0].pending_free);
  void* q = alloc.allocate(12 * kMiB, 0);
  EXPECT_NE(q, p);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(24 * kMiB));
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(p); });          // already freed
  expect_invalid_pointer(alloc, [&] { alloc.begin_deferred_free(p); });  // already pending
  alloc.empty_cache();
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(24 * kMiB));  // p's segment is not free yet
  alloc.check_invariants();
  alloc.end_deferred_free(p);
  EXPECT_EQ(alloc.stats().active_bytes.current, static_cast<std::int64_t>(12 * kMiB));
  EXPECT_EQ(alloc.allocate(12 * kMiB, 0), p);
  EXPECT_EQ(alloc.stats().num_frees, 1u);
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, EmptyCacheReleasesOnlyWhollyFreeSegments) {
  void* a = alloc.allocate(4 * kKiB, 0);   // small segment, 2 MiB
  void* b = alloc.allocate(12 * kMiB, 0);  // its own 12 MiB segment
  void* c = alloc.allocate(3 * kMiB, 0);   // a 20 MiB segment shared with d
  void* d = alloc.allocate(3 * kMiB, 0);
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(34 * kMiB));
  alloc.deallocate(b);
  alloc.deallocate(c);
  alloc.empty_cache();
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(22 * kMiB));
  EXPECT_EQ(alloc.stats().chunks_released, 1u);
  EXPECT_EQ(backend.live_chunks(), 2u);
  alloc.check_invariants();
  alloc.deallocate(d);
  alloc.deallocate(a);
  alloc.empty_cache();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
  alloc.check_invariants();
}

TEST(CachingAllocatorCap, FailsLikeCudaMallocWithTheStateFiguresAndKeepsWorking) {
  SimBackend backend;
  CachingAllocator alloc(caching_config(40 * kMiB), backend);
  void* a = alloc.allocate(30 * kMiB, 0);
  const Snapshot before = Snapshot::of(alloc);
  try {
    alloc.allocate(12 * kMiB, 0);
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_EQ(e.requested_bytes(), 12 * kMiB);
    EXPECT_EQ(e.reserved_bytes(), 30 * kMiB);
    EXPECT_EQ(e.allocated_bytes(), 30 * kMiB);
    EXPECT_EQ(e.cap_bytes(), 40 * kMiB);
  }
  expect_unchanged(before, alloc);
  EXPECT_EQ(alloc.stats().num_ooms, 1u);
  EXPECT_EQ(alloc.stats().num_alloc_retries, 1u);
  EXPECT_EQ(backend.live_reservations(), 1u);
  alloc.check_invariants();

  // Stream 1 cannot use stream 0's cached segment, but releasing it makes room: the retry succeeds.
  alloc.deallocate(a);
  void* b = alloc.allocate(12 * kMiB, 1);
  EXPECT_NE(b, nullptr);
  EXPECT_EQ(alloc.stats().reserved_bytes.current, static_cast<std::int64_t>(12 * kMiB));
  EXPECT_EQ(alloc.stats().num_alloc_retries, 2u);
  EXPECT_EQ(alloc.stats().num_ooms, 1u);

  alloc.set_cap_bytes(0);
  EXPECT_NE(alloc.allocate(100 * kMiB, 0), nullptr);
  alloc.check_invariants();
}

TEST(CachingAllocatorCap, BackendOutOfMemoryFailsTheSameWayAndLeaksNothing) {
  SimBackend backend(kPageBytes, 48 * kMiB);
  CachingAllocator alloc(caching_config(), backend);
  alloc.allocate(30 * kMiB, 0);
  try {
    alloc.allocate(20 * kMiB, 0);
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), 20 * kMiB);
    EXPECT_EQ(e.reserved_bytes(), 30 * kMiB);
    EXPECT_EQ(e.cap_bytes(), 0u);
  }
  EXPECT_EQ(backend.live_chunks(), 1u);
  EXPECT_EQ(backend.live_reservations(), 1u);  // the failed segment's reservation was given back
  EXPECT_EQ(alloc.stats().num_ooms, 1u);
  EXPECT_NE(alloc.allocate(10 * kMiB, 0), nullptr);  // a 10 MiB segment still fits under 48 MiB
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, RejectsInvalidFreesAndChangesNothing) {
  void* p = alloc.allocate(4 * kKiB, 0);
  void* q = alloc.allocate(12 * kMiB, 0);
  int stack_object = 0;
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(&stack_object); });        // never returned
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(offset(p, kRoundBytes)); });  // interior
  expect_invalid_pointer(alloc, [&] { alloc.end_deferred_free(p); });             // no deferred free begun
  alloc.deallocate(q);
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(q); });                    // double free
  expect_invalid_pointer(alloc, [&] { alloc.begin_deferred_free(q); });
  EXPECT_EQ(alloc.stats().invalid_frees, 5u);

  const Snapshot before = Snapshot::of(alloc);
  alloc.deallocate(nullptr);
  EXPECT_EQ(alloc.allocate(0, 0), nullptr);
  expect_unchanged(before, alloc);
  alloc.deallocate(p);
  alloc.check_invariants();
}

TEST(CachingAllocatorRandom, KeepsEveryInvariantThroughTwentyThousandRandomOperations) {
  SimBackend backend;
  CachingAllocator alloc(caching_config(), backend);
  testing::run_random_workload(alloc, backend, 20240611, 20000);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(CachingAllocatorHost, ServesDisjointWritableMemoryOnTheHostBackend) {
  HostBackend backend;
  CachingAllocator alloc(caching_config(), backend);
  testing::expect_blocks_are_disjoint_writable_memory(alloc);
}

TEST(CachingAllocatorLifetime, DestructorReturnsEveryChunkAndReservation) {
  SimBackend backend;
  {
    CachingAllocator alloc(caching_config(), backend);
    alloc.allocate(4 * kKiB, 0);
    void* p = alloc.allocate(30 * kMiB, 1);
    alloc.begin_deferred_free(p);
    alloc.deallocate(alloc.allocate(12 * kMiB, 0));
    EXPECT_EQ(backend.live_chunks(), 3u);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(CachingAllocatorConfig, RejectsSegmentSizesTheBackendCannotMap) {
  SimBackend backend(4 * kMiB);
  try {
    CachingAllocator alloc(caching_config(), backend);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kConfig);
    EXPECT_NE(std::string(e.what()).find("small_segment_bytes"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gmlake

namespace gmlake {
namespace {

TEST(CachingAllocatorSegments, EachCudaMallocLikeSegmentIsOneSegmentOfOneChunkCutIntoItsBlocks) {
  SimBackend backend;
  CachingAllocator alloc(caching_config(), backend);
  void* small = alloc.allocate(kMiB, 0);
  void* large = alloc.allocate(4 * kMiB, 3);  // a 20 MiB segment
  const std::vector<SegmentInfo> segments = alloc.segments();
  ASSERT_EQ(segments.size(), 2u);
  const SegmentInfo& s = segments[0].type == SegmentType::kSmall ? segments[0] : segments[1];
  const SegmentInfo& l = segments[0].type == SegmentType::kSmall ? segments[1] : segments[0];
  EXPECT_EQ(s.address, testing::addr(small));
  EXPECT_EQ(s.size_bytes, 2 * kMiB);
  EXPECT_FALSE(s.is_expandable);
  ASSERT_EQ(s.chunks.size(), 1u);
  EXPECT_EQ(s.chunks[0].size_bytes, 2 * kMiB);
  ASSERT_EQ(s.blocks.size(), 2u);
  EXPECT_EQ(s.blocks[0].state, SegmentBlockState::kActiveAllocated);
  EXPECT_EQ(s.blocks[1].state, SegmentBlockState::kInactive);
  EXPECT_EQ(l.stream, 3u);
  EXPECT_EQ(l.size_bytes, 20 * kMiB);
  EXPECT_EQ(l.blocks[0].requested_bytes, 4 * kMiB);
  testing::expect_segments_consistent(alloc);
  alloc.deallocate(small);
  alloc.deallocate(large);
  alloc.empty_cache();
  EXPECT_TRUE(alloc.segments().empty());
}

}  // namespace
}  // namespace gmlake

// allocate_at: a block re-made at its address (PyTorch's setCheckpointPoolState, through Pool::restore).
namespace gmlake {
namespace {

TEST_F(CachingAllocatorTest, AllocateAtRemakesEveryBlockOfAnAllocateFreeSequenceAtItsAddress) {
  std::mt19937_64 rng(11);
  const std::uint64_t sizes[] = {kRoundBytes, 3 * kKiB, 600 * kKiB, kMiB, 2 * kMiB, 5 * kMiB, 13 * kMiB - 7};
  std::vector<void*> live;
  for (int step = 0; step < 200; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t i = rng() % live.size();
      alloc.deallocate(live[i]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      live.push_back(alloc.allocate(sizes[rng() % std::size(sizes)], static_cast<StreamId>(rng() % 2)));
    }
    alloc.check_invariants();
  }
  const std::vector<BlockInfo> checkpoint = alloc.blocks();
  const Stats before = alloc.stats();
  ASSERT_GT(checkpoint.size(), 10u);
  for (void* p : live) alloc.deallocate(p);
  alloc.check_invariants();
  for (const BlockInfo& b : checkpoint) {
    EXPECT_EQ(alloc.allocate_at(b.address, b.size_bytes, b.requested_bytes), reinterpret_cast<void*>(b.address));
    alloc.check_invariants();
  }
  EXPECT_TRUE(testing::same_blocks(alloc.blocks(), checkpoint)) << "same addresses, sizes, requests and streams";
  EXPECT_EQ(alloc.stats().allocated_bytes.current, before.allocated_bytes.current);
  EXPECT_EQ(alloc.stats().requested_bytes.current, before.requested_bytes.current);
  EXPECT_EQ(alloc.stats().reserved_bytes.current, before.reserved_bytes.current) << "no segment made or released";
  for (const BlockInfo& b : checkpoint) alloc.deallocate(reinterpret_cast<void*>(b.address));
  alloc.check_invariants();
  EXPECT_EQ(alloc.stats().allocated_bytes.current, 0);
}

TEST_F(CachingAllocatorTest, AllocateAtCutsTheRangeOutOfAFreeBlockAndLeavesBothSidesFree) {
  void* whole = alloc.allocate(20 * kMiB, 4);  // one 20 MiB segment of stream 4
  alloc.deallocate(whole);
  void* mid = alloc.allocate_at(addr(whole) + 3 * kMiB, 2 * kMiB, kMiB + 1);
  alloc.check_invariants();
  EXPECT_EQ(mid, offset(whole, 3 * kMiB));
  ASSERT_EQ(alloc.blocks().size(), 1u);
  EXPECT_EQ(alloc.blocks()[0].stream, 4u) << "the segment's stream";
  EXPECT_EQ(alloc.blocks()[0].requested_bytes, kMiB + 1);
  EXPECT_EQ(inactive_split(), static_cast<std::int64_t>(18 * kMiB));
  EXPECT_EQ(alloc.allocate(3 * kMiB, 4), whole) << "the free piece before it serves requests";
  EXPECT_EQ(alloc.allocate(15 * kMiB, 4), offset(whole, 5 * kMiB)) << "and the one after it";
  EXPECT_EQ(reserved(), static_cast<std::int64_t>(20 * kMiB));
  alloc.check_invariants();
}

TEST_F(CachingAllocatorTest, AllocateAtRefusesARangeNotWhollyInsideOneFreeBlockAndChangesNothing) {
  void* a = alloc.allocate(4 * kKiB, 0);  // small segment: a, b, then free
  void* b = alloc.allocate(4 * kKiB, 0);
  alloc.deallocate(a);                    // free 4 KiB, b live, free tail
  const Snapshot before = Snapshot::of(alloc);
  const std::uintptr_t base = addr(a);
  struct Case {
    std::uintptr_t address;
    std::uint64_t size_bytes;
    std::uint64_t requested_bytes;
    const char* why;
  };
  const Case cases[] = {
      {base, 8 * kKiB, 1, "not wholly inside one free block"},              // the free hole and live b
      {addr(b), 4 * kKiB, 1, "not wholly inside one free block"},           // live b itself
      {base + 2 * kKiB, 4 * kKiB, 1, "not wholly inside one free block"},  // into b
      {base + 2 * kMiB - kKiB, 2 * kKiB, 1, "not wholly inside one free block"},  // past the segment's end
      {kRoundBytes, 4 * kKiB, 1, "not wholly inside one free block"},  // in no segment
      {base, 0, 1, "not a positive multiple of 512 B"},
      {base, 1000, 1, "not a positive multiple of 512 B"},
      {base, 4 * kKiB, 0, "requested size is not 1 .. size"},
      {base, 4 * kKiB, 4 * kKiB + 1, "requested size is not 1 .. size"},
  };
  for (const Case& c : cases) {
    try {
      alloc.allocate_at(c.address, c.size_bytes, c.requested_bytes);
      ADD_FAILURE() << "no error for " << c.address - base << " + " << c.size_bytes;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    }
    testing::expect_unchanged(before, alloc);
    alloc.check_invariants();
  }
  EXPECT_EQ(alloc.allocate_at(base + kKiB, 3 * kKiB, 10), offset(a, kKiB)) << "the hole's tail part fits";
  alloc.check_invariants();
}

}  // namespace
}  // namespace gmlake
