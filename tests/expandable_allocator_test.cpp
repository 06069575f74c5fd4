#include "policies/expandable/expandable_allocator.h"

#include <gtest/gtest.h>

#include <string>

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

// The default pages: 2 MiB in the small pool, 20 MiB in the large pool.
constexpr std::uint64_t kLargePageBytes = 20 * kMiB;

Config expandable_config(std::uint64_t cap_bytes = 0) {
  Config c;
  c.policy = Policy::kExpandable;
  c.cap_bytes = cap_bytes;
  return c;
}

std::int64_t bytes(std::uint64_t v) { return static_cast<std::int64_t>(v); }

class ExpandableAllocatorTest : public ::testing::Test {
 protected:
  std::int64_t reserved() const { return alloc.stats().reserved_bytes.current; }
  std::int64_t inactive_split() const { return alloc.stats().inactive_split_bytes.current; }
  std::uint64_t calls(BackendCall c) const { return alloc.stats().backend_calls[c]; }

  SimBackend backend;
  ExpandableAllocator alloc{expandable_config(), backend};
};

TEST(ExpandableAllocatorSizing, RoundsRequestsAsPyTorchAndMapsWholePagesOfTheirPool) {
  struct Case {
    std::uint64_t request_bytes, block_bytes, reserved_bytes;
  };
  const std::uint64_t nine_point_nine_mib = 99 * kMiB / 10;
  const Case cases[] = {
      {1, 512, 2 * kMiB},
      {512, 512, 2 * kMiB},
      {513, 1024, 2 * kMiB},
      {kMiB, kMiB, 2 * kMiB},
      {kMiB + 1, kMiB + 512, kLargePageBytes},
      {nine_point_nine_mib, round_up(nine_point_nine_mib, kRoundBytes), kLargePageBytes},
      {10 * kMiB, 10 * kMiB, kLargePageBytes},
      {21 * kMiB, 21 * kMiB, 2 * kLargePageBytes},  // every remainder of 512 B or more is split off
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.request_bytes);
    SimBackend backend;
    ExpandableAllocator alloc(expandable_config(), backend);
    void* p = alloc.allocate(c.request_bytes, 0);
    ASSERT_EQ(alloc.blocks().size(), 1u);
    EXPECT_EQ(alloc.blocks()[0].size_bytes, c.block_bytes);
    const Stats s = alloc.stats();
    EXPECT_EQ(s.reserved_bytes.current, bytes(c.reserved_bytes));
    EXPECT_EQ(s.allocated_bytes.current, bytes(c.block_bytes));
    EXPECT_EQ(backend.live_chunk_bytes(), c.reserved_bytes);
    EXPECT_EQ(backend.live_reservations(), 1u);
    EXPECT_EQ(s.backend_calls[BackendCall::kSetAccess], 1u);  // one set_access over the new pages
    EXPECT_TRUE(backend.is_accessible(addr(p), c.block_bytes));
    alloc.check_invariants();
  }
}

TEST_F(ExpandableAllocatorTest, MapsPagesLazilyAndGrowsTheSegmentInPlace) {
  void* a = alloc.allocate(3 * kMiB, 0);
  EXPECT_EQ(reserved(), bytes(kLargePageBytes));
  void* b = alloc.allocate(10 * kMiB, 0);  // inside the first page
  EXPECT_EQ(addr(b), addr(a) + 3 * kMiB);
  EXPECT_EQ(reserved(), bytes(kLargePageBytes));
  void* c = alloc.allocate(10 * kMiB, 0);  // 7 MiB free at the end plus one more page, right after it
  EXPECT_EQ(addr(c), addr(a) + 13 * kMiB);
  EXPECT_EQ(reserved(), bytes(2 * kLargePageBytes));
  EXPECT_EQ(calls(BackendCall::kReserve), 1u);
  EXPECT_EQ(calls(BackendCall::kCreate), 2u);
  EXPECT_EQ(calls(BackendCall::kSetAccess), 2u);
  EXPECT_TRUE(backend.is_accessible(addr(a), 23 * kMiB));

  alloc.allocate(kRoundBytes, 0);  // the small pool has its own segment and 2 MiB pages
  EXPECT_EQ(reserved(), bytes(2 * kLargePageBytes + 2 * kMiB));
  EXPECT_EQ(calls(BackendCall::kReserve), 2u);
  alloc.check_invariants();
}

TEST_F(ExpandableAllocatorTest, ReusesFreedMappedMemoryBeforeTheGrowingEnd) {
  void* a = alloc.allocate(8 * kMiB, 0);
  alloc.allocate(8 * kMiB, 0);  // 4 MiB stay free at the end of the page, before unmapped space
  alloc.deallocate(a);
  // Best fit by size would take the 4 MiB at the end; PyTorch counts that one as large as it can grow.
  EXPECT_EQ(alloc.allocate(3 * kMiB, 0), a);
  EXPECT_EQ(addr(alloc.allocate(5 * kMiB, 0)), addr(a) + 3 * kMiB);  // the rest of a's range
  EXPECT_EQ(reserved(), bytes(kLargePageBytes));
  EXPECT_EQ(calls(BackendCall::kCreate), 1u);
  alloc.check_invariants();
}

TEST_F(ExpandableAllocatorTest, SplitsEveryRemainderOfAtLeast512Bytes) {
  void* a = alloc.allocate(kLargePageBytes - kRoundBytes, 0);
  ASSERT_EQ(alloc.blocks().size(), 1u);
  EXPECT_EQ(alloc.blocks()[0].size_bytes, kLargePageBytes - kRoundBytes);
  EXPECT_EQ(inactive_split(), bytes(kRoundBytes));  // free, and on a page an active block uses
  void* b = alloc.allocate(kMiB + 1, 0);  // starts in the free 512 B, then one more page
  EXPECT_EQ(addr(b), addr(a) + kLargePageBytes - kRoundBytes);
  EXPECT_EQ(reserved(), bytes(2 * kLargePageBytes));
  alloc.check_invariants();
}

TEST_F(ExpandableAllocatorTest, EmptyCacheUnmapsOnlyWholeFreePages) {
  void* a = alloc.allocate(30 * kMiB, 0);  // pages 0 and 1
  void* b = alloc.allocate(5 * kMiB, 0);   // [30, 35) MiB, on page 1
  alloc.deallocate(a);
  // Page 0 is wholly free; page 1 holds b and 15 MiB of free memory.
  EXPECT_EQ(inactive_split(), bytes(15 * kMiB));
  alloc.empty_cache();
  EXPECT_EQ(reserved(), bytes(kLargePageBytes));
  EXPECT_EQ(alloc.stats().chunks_released, 1u);
  EXPECT_EQ(calls(BackendCall::kUnmap), 1u);
  EXPECT_FALSE(backend.is_accessible(addr(a), kLargePageBytes));
  EXPECT_EQ(inactive_split(), bytes(15 * kMiB));
  alloc.check_invariants();

  // The hole is mapped again, and merges with the free 10 MiB after it.
  void* c = alloc.allocate(25 * kMiB, 0);
  EXPECT_EQ(c, a);
  EXPECT_EQ(reserved(), bytes(2 * kLargePageBytes));
  alloc.check_invariants();

  alloc.deallocate(b);
  alloc.deallocate(c);
  EXPECT_EQ(inactive_split(), 0);
  alloc.empty_cache();
  EXPECT_EQ(reserved(), 0);
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);  // a wholly unmapped segment is given back
  alloc.check_invariants();
  EXPECT_NE(alloc.allocate(kMiB + 1, 0), nullptr);  // and made again on demand
  alloc.check_invariants();
}

TEST_F(ExpandableAllocatorTest, FreeBlocksServeOnlyTheirOwnStream) {
  void* p = alloc.allocate(4 * kKiB, 1);
  alloc.deallocate(p);
  void* q = alloc.allocate(4 * kKiB, 2);
  EXPECT_NE(q, p);
  EXPECT_EQ(reserved(), bytes(4 * kMiB));
  EXPECT_EQ(backend.live_reservations(), 2u);  // one segment per stream and pool
  EXPECT_EQ(alloc.allocate(4 * kKiB, 1), p);
  alloc.check_invariants();
}

TEST_F(ExpandableAllocatorTest, DeferredFreeKeepsMemoryUnusableUntilItEnds) {
  void* p = alloc.allocate(8 * kMiB, 0);
  alloc.begin_deferred_free(p);
  EXPECT_EQ(alloc.stats().allocated_bytes.current, 0);
  EXPECT_EQ(alloc.stats().active_bytes.current, bytes(8 * kMiB));
  void* q = alloc.allocate(8 * kMiB, 0);
  EXPECT_EQ(addr(q), addr(p) + 8 * kMiB);
  void* r = alloc.allocate(8 * kMiB, 0);  // not p's range: the segment grows instead
  EXPECT_EQ(addr(r), addr(p) + 16 * kMiB);
  EXPECT_EQ(reserved(), bytes(2 * kLargePageBytes));
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(p); });
  alloc.empty_cache();
  EXPECT_EQ(reserved(), bytes(2 * kLargePageBytes));
  alloc.end_deferred_free(p);
  EXPECT_EQ(alloc.allocate(8 * kMiB, 0), p);
  alloc.check_invariants();
}

TEST(ExpandableAllocatorCap, FailsWhenNewPagesWouldPassTheCapAndKeepsWorking) {
  SimBackend backend;
  ExpandableAllocator alloc(expandable_config(2 * kLargePageBytes), backend);
  void* a = alloc.allocate(30 * kMiB, 0);
  const Snapshot before = Snapshot::of(alloc);
  try {
    alloc.allocate(15 * kMiB, 0);  // 10 MiB free at the end, and one more page would pass 40 MiB
    FAIL() << "no OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.requested_bytes(), 15 * kMiB);
    EXPECT_EQ(e.reserved_bytes(), 40 * kMiB);
    EXPECT_EQ(e.allocated_bytes(), 30 * kMiB);
    EXPECT_EQ(e.cap_bytes(), 40 * kMiB);
  }
  expect_unchanged(before, alloc);
  EXPECT_EQ(alloc.stats().num_ooms, 1u);
  EXPECT_EQ(alloc.stats().num_alloc_retries, 1u);
  alloc.check_invariants();
  void* b = alloc.allocate(10 * kMiB, 0);  // what is mapped still serves
  EXPECT_EQ(addr(b), addr(a) + 30 * kMiB);

  // Stream 1 needs a page of its own: stream 0's free pages are unmapped to make room.
  alloc.deallocate(a);
  alloc.deallocate(b);
  EXPECT_NE(alloc.allocate(15 * kMiB, 1), nullptr);
  EXPECT_EQ(alloc.stats().reserved_bytes.current, bytes(kLargePageBytes));
  EXPECT_EQ(alloc.stats().num_alloc_retries, 2u);
  EXPECT_EQ(backend.live_reservations(), 1u);

  alloc.set_cap_bytes(0);
  EXPECT_NE(alloc.allocate(100 * kMiB, 1), nullptr);
  alloc.check_invariants();
}

TEST(ExpandableAllocatorCap, BackendOutOfMemoryFailsTheSameWayAndLeaksNothing) {
  SimBackend backend(kPageBytes, 48 * kMiB);
  ExpandableAllocator alloc(expandable_config(), backend);
  alloc.allocate(30 * kMiB, 0);
  EXPECT_THROW(alloc.allocate(15 * kMiB, 0), OutOfMemoryError);
  EXPECT_EQ(backend.live_chunks(), 2u);
  EXPECT_EQ(alloc.stats().reserved_bytes.current, bytes(40 * kMiB));
  EXPECT_THROW(alloc.allocate(15 * kMiB, 7), OutOfMemoryError);  // a new segment whose page fails
  EXPECT_EQ(backend.live_reservations(), 1u);                    // ... is given back at once
  EXPECT_EQ(alloc.stats().num_ooms, 2u);
  alloc.check_invariants();
}

TEST_F(ExpandableAllocatorTest, RejectsInvalidFreesAndChangesNothing) {
  void* p = alloc.allocate(4 * kKiB, 0);
  void* q = alloc.allocate(12 * kMiB, 0);
  int stack_object = 0;
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(&stack_object); });
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(offset(q, kMiB)); });
  expect_invalid_pointer(alloc, [&] { alloc.end_deferred_free(p); });
  alloc.deallocate(q);
  expect_invalid_pointer(alloc, [&] { alloc.deallocate(q); });
  EXPECT_EQ(alloc.stats().invalid_frees, 4u);
  const Snapshot before = Snapshot::of(alloc);
  alloc.deallocate(nullptr);
  EXPECT_EQ(alloc.allocate(0, 0), nullptr);
  expect_unchanged(before, alloc);
  alloc.check_invariants();
}

TEST(ExpandableAllocatorRandom, KeepsEveryInvariantThroughTwentyThousandRandomOperations) {
  SimBackend backend;
  ExpandableAllocator alloc(expandable_config(), backend);
  testing::run_random_workload(alloc, backend, 20240612, 20000);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(ExpandableAllocatorHost, ServesDisjointWritableMemoryOnTheHostBackend) {
  HostBackend backend;
  Config host_config = expandable_config();
  host_config.expandable_virtual_bytes = kGiB;  // keep the host reservations small
  ExpandableAllocator alloc(host_config, backend);
  testing::expect_blocks_are_disjoint_writable_memory(alloc);
}

TEST(ExpandableAllocatorLifetime, DestructorReturnsEveryChunkAndReservation) {
  SimBackend backend;
  {
    ExpandableAllocator alloc(expandable_config(), backend);
    alloc.allocate(4 * kKiB, 0);
    void* p = alloc.allocate(30 * kMiB, 1);
    alloc.begin_deferred_free(p);
    alloc.deallocate(alloc.allocate(50 * kMiB, 0));
    EXPECT_GT(backend.live_chunks(), 0u);
  }
  EXPECT_EQ(backend.live_chunks(), 0u);
  EXPECT_EQ(backend.live_mappings(), 0u);
  EXPECT_EQ(backend.live_reservations(), 0u);
}

TEST(ExpandableAllocatorConfig, RejectsPagesTheBackendCannotMap) {
  SimBackend backend(4 * kMiB);
  EXPECT_THROW(ExpandableAllocator(expandable_config(), backend), Error);
}

}  // namespace
}  // namespace gmlake

namespace gmlake {
namespace {

TEST_F(ExpandableAllocatorTest, TheSegmentIsItsMappedRangeWithOneChunkPerPage) {
  void* a = alloc.allocate(kMiB, 0);
  void* b = alloc.allocate(kMiB, 0);
  void* c = alloc.allocate(kMiB, 0);  // maps a second 2 MiB page of the small pool's segment
  std::vector<SegmentInfo> segments = alloc.segments();
  ASSERT_EQ(segments.size(), 1u) << "only the mapped range, not the whole reservation";
  EXPECT_TRUE(segments[0].is_expandable);
  EXPECT_EQ(segments[0].address, testing::addr(a));
  EXPECT_EQ(segments[0].size_bytes, static_cast<std::uint64_t>(reserved()));
  EXPECT_EQ(segments[0].size_bytes, 4 * kMiB);
  EXPECT_EQ(segments[0].chunks.size(), 2u);
  EXPECT_EQ(segments[0].blocks.size(), 4u) << "three allocated blocks and the free rest of the second page";
  testing::expect_segments_consistent(alloc);
  alloc.deallocate(a);
  alloc.deallocate(b);
  alloc.deallocate(c);
  alloc.empty_cache();
  EXPECT_TRUE(alloc.segments().empty());
  testing::expect_segments_consistent(alloc);
}

}  // namespace
}  // namespace gmlake
