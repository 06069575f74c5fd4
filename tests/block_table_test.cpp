// BlockTable (src/policies/common/block_table.h) on its own: live blocks, pending frees, the gauges it keeps in a
// Stats, the classification and wording of invalid frees, and the release rule. check_invariants() runs after
// every step.
#include "policies/common/block_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>

#include "expect_error.h"
#include "gmlake/error.h"

namespace gmlake::policy {
namespace {

constexpr std::uint64_t kKiB = 1024;

// A policy's record of a block, as the tests' policy keeps it.
struct Tag {
  int id = 0;
};
using Table = BlockTable<Tag>;

void* at(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

class BlockTableTest : public ::testing::Test {
 protected:
  BlockTableTest() : table_(InvalidFreeWords::reference("caching"), stats_) {}

  // Inserts and checks.
  void insert(std::uintptr_t address, std::uint64_t size_bytes, std::uint64_t requested_bytes, int id = 0) {
    table_.insert(address, size_bytes, requested_bytes, /*stream=*/7, Tag{id});
    table_.check_invariants();
  }
  // release() that records what give_back saw, then checks.
  void release(std::uintptr_t address, FreeCall call) {
    table_.release(at(address), call, [&](std::uintptr_t a, const Table::Block& b) {
      given_address_ = a;
      given_ = b;
    });
    table_.check_invariants();
  }
  void expect_gauges(std::int64_t allocated, std::int64_t active, std::int64_t requested) {
    EXPECT_EQ(stats_.allocated_bytes.current, allocated);
    EXPECT_EQ(stats_.active_bytes.current, active);
    EXPECT_EQ(stats_.requested_bytes.current, requested);
  }
  // A rejected free: Error(kInvalidPointer) with `words`, invalid_frees counted, nothing else changed.
  void expect_rejected(const std::function<void()>& free, const std::string& words) {
    const Stats before = stats_;
    const std::size_t blocks = table_.size();
    test::expect_error(free, ErrorCode::kInvalidPointer, words);
    EXPECT_EQ(stats_.invalid_frees, before.invalid_frees + 1);
    EXPECT_EQ(stats_.allocated_bytes.current, before.allocated_bytes.current);
    EXPECT_EQ(stats_.active_bytes.current, before.active_bytes.current);
    EXPECT_EQ(stats_.requested_bytes.current, before.requested_bytes.current);
    EXPECT_EQ(stats_.num_frees, before.num_frees);
    EXPECT_EQ(table_.size(), blocks);
    table_.check_invariants();
  }

  Stats stats_;
  Table table_;
  std::uintptr_t given_address_ = 0;
  Table::Block given_;
};

TEST_F(BlockTableTest, InsertCountsTheBlockAsAllocatedActiveAndRequested) {
  insert(0x10000, 2 * kKiB, 1500, 3);
  insert(0x20000, 512, 512);
  expect_gauges(2560, 2560, 2012);
  EXPECT_EQ(stats_.num_allocs, 2u);
  const Table::Block* b = table_.find(0x10000);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->size_bytes, 2 * kKiB);
  EXPECT_EQ(b->requested_bytes, 1500u);
  EXPECT_EQ(b->stream, 7u);
  EXPECT_FALSE(b->pending_free);
  EXPECT_EQ(b->id, 3);
  EXPECT_EQ(table_.find(0x10200), nullptr);  // interior
}

TEST_F(BlockTableTest, DeallocateCommitsTheFreeBeforeGivingTheMemoryBack) {
  insert(0x10000, 2 * kKiB, 1500, 3);
  table_.release(at(0x10000), FreeCall::kDeallocate, [&](std::uintptr_t address, const Table::Block& b) {
    // Inside give_back the free has happened: the block is gone and the gauges are down.
    EXPECT_EQ(address, 0x10000u);
    EXPECT_EQ(b.id, 3);
    EXPECT_EQ(table_.find(0x10000), nullptr);
    expect_gauges(0, 0, 0);
    table_.check_invariants();
  });
  EXPECT_EQ(stats_.num_frees, 1u);
  table_.check_invariants();
}

TEST_F(BlockTableTest, AGiveBackThatThrowsLeavesTheBlockFreed) {
  insert(0x10000, 2 * kKiB, 1500);
  EXPECT_THROW(table_.release(at(0x10000), FreeCall::kDeallocate,
                              [](std::uintptr_t, const Table::Block&) { throw std::bad_alloc(); }),
               std::bad_alloc);
  EXPECT_EQ(table_.size(), 0u);
  expect_gauges(0, 0, 0);
  EXPECT_EQ(stats_.num_frees, 1u);
  table_.check_invariants();
  expect_rejected([&] { release(0x10000, FreeCall::kDeallocate); }, "not the start of a live block");
}

TEST_F(BlockTableTest, ADeferredFreeIsNotAllocatedButStillActiveUntilItEnds) {
  insert(0x10000, 2 * kKiB, 1500, 4);
  insert(0x20000, kKiB, kKiB);
  Table::Block& b = table_.begin_deferred_free(at(0x10000));
  table_.check_invariants();
  EXPECT_TRUE(b.pending_free);
  EXPECT_EQ(b.id, 4);
  expect_gauges(1024, 3072, 1024);
  EXPECT_EQ(stats_.num_frees, 1u);
  release(0x10000, FreeCall::kEndDeferredFree);
  EXPECT_EQ(given_address_, 0x10000u);
  EXPECT_TRUE(given_.pending_free);
  expect_gauges(1024, 1024, 1024);
  EXPECT_EQ(stats_.num_frees, 1u);  // counted once, at begin_deferred_free
}

TEST_F(BlockTableTest, GaugePeaksFollowTheHighestCurrent) {
  insert(0x10000, 4 * kKiB, 4 * kKiB);
  release(0x10000, FreeCall::kDeallocate);
  insert(0x20000, kKiB, kKiB);
  EXPECT_EQ(stats_.allocated_bytes.peak, 4096);
  EXPECT_EQ(stats_.active_bytes.peak, 4096);
  EXPECT_EQ(stats_.requested_bytes.peak, 4096);
}

TEST_F(BlockTableTest, InvalidFreesAreClassifiedAndWordedAsTheReferencePoliciesWordThem) {
  insert(0x10000, kKiB, kKiB);
  expect_rejected([&] { release(0x30000, FreeCall::kDeallocate); },
                  "gmlake caching: deallocate(0x30000): not the start of a live block (never allocated, already "
                  "freed, or an interior pointer)");
  expect_rejected([&] { release(0x10200, FreeCall::kDeallocate); }, "deallocate(0x10200): not the start");
  expect_rejected([&] { table_.begin_deferred_free(nullptr); }, "begin_deferred_free(0x0): not the start");
  expect_rejected([&] { release(0x30000, FreeCall::kEndDeferredFree); }, "end_deferred_free(0x30000): not the start");
  expect_rejected([&] { release(0x10000, FreeCall::kEndDeferredFree); },
                  "gmlake caching: end_deferred_free(0x10000): no deferred free was begun");
  table_.begin_deferred_free(at(0x10000));
  table_.check_invariants();
  expect_rejected([&] { release(0x10000, FreeCall::kDeallocate); }, "deallocate(0x10000): its free is already pending");
  expect_rejected([&] { table_.begin_deferred_free(at(0x10000)); },
                  "begin_deferred_free(0x10000): its free is already pending");
  release(0x10000, FreeCall::kEndDeferredFree);
  expect_rejected([&] { release(0x10000, FreeCall::kDeallocate); }, "not the start of a live block");  // double free
  EXPECT_EQ(stats_.invalid_frees, 8u);
}

TEST(BlockTableWords, TheEngineNamesEveryInvalidFreeAsItAlwaysHas) {
  Stats stats;
  Table table(InvalidFreeWords::engine(), stats);
  table.insert(0x10000, kKiB, kKiB, 0, Tag{});
  auto none = [](std::uintptr_t, const Table::Block&) {};
  const std::string not_live = "not a live block (never allocated here, already freed, or an interior pointer)";
  test::expect_error([&] { table.release(at(0x30000), FreeCall::kDeallocate, none); }, ErrorCode::kInvalidPointer,
                     "gmlake: deallocate(0x30000): " + not_live);
  test::expect_error([&] { table.release(at(0x10000), FreeCall::kEndDeferredFree, none); },
                     ErrorCode::kInvalidPointer,
                     "gmlake: end_deferred_free(0x10000): no deferred free is pending for this pointer");
  test::expect_error([&] { table.release(at(0x30000), FreeCall::kEndDeferredFree, none); },
                     ErrorCode::kInvalidPointer,
                     "gmlake: end_deferred_free(0x30000): no deferred free is pending for this pointer");
  table.begin_deferred_free(at(0x10000));
  test::expect_error([&] { table.begin_deferred_free(at(0x10000)); }, ErrorCode::kInvalidPointer,
                     "gmlake: begin_deferred_free(0x10000): " + not_live);
  EXPECT_EQ(stats.invalid_frees, 4u);
  table.check_invariants();
}

TEST_F(BlockTableTest, CheckInvariantsFindsAGaugeNoLongerMatchingTheBlocks) {
  insert(0x10000, kKiB, 600);
  stats_.active_bytes.increase(512);
  test::expect_broken([&] { table_.check_invariants(); }, "active_bytes differs from the blocks' sum");
  stats_.active_bytes.decrease(512);
  ++stats_.num_frees;
  test::expect_broken([&] { table_.check_invariants(); }, "num_allocs - num_frees");
}

}  // namespace
}  // namespace gmlake::policy
