// IdleChunks (src/policies/gmlake/idle_chunks.h) on its own: the queue of idle spans, oldest first. Which chunks
// are still idle is the page table's business (ChunkUse); here a map from page to chunk stands for it: first_of
// returns the first page of an entry still marked idle at the entry's tick.
#include "policies/gmlake/idle_chunks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "expect_error.h"

namespace gmlake::engine {
namespace {

class IdleChunksTest : public ::testing::Test {
 protected:
  // Pages [first, last] of arena 0 turned idle now, one chunk a page (chunk id = page number).
  std::uint64_t idle(std::uint64_t first, std::uint64_t last) {
    const std::uint64_t tick = queue_.next_tick();
    for (std::uint64_t p = first; p <= last; ++p) idle_[p] = tick;
    queue_.push(0, PageNumber{first}, PageNumber{last}, tick);
    return tick;
  }
  ChunkId first_of(IdleChunks::Entry& e) const {
    for (auto it = idle_.lower_bound(e.first.value()); it != idle_.end() && it->first <= e.last.value(); ++it) {
      if (it->second == e.tick) {
        e.first = PageNumber{it->first};
        return static_cast<ChunkId>(it->first);
      }
    }
    return kNoChunk;
  }
  ChunkId oldest() {
    return queue_.oldest([this](IdleChunks::Entry& e) { return first_of(e); });
  }
  // The idle chunks in queue order.
  std::vector<ChunkId> order() const {
    std::vector<ChunkId> out;
    queue_.for_each_entry([&](const IdleChunks::Entry& e) {
      for (auto it = idle_.lower_bound(e.first.value()); it != idle_.end() && it->first <= e.last.value(); ++it) {
        if (it->second == e.tick) out.push_back(static_cast<ChunkId>(it->first));
      }
    });
    return out;
  }

  IdleChunks queue_;
  std::map<std::uint64_t, std::uint64_t> idle_;  // idle page -> its tick (the page table's marks)
};

TEST_F(IdleChunksTest, TheOldestStillIdleChunkComesFirstAndEntriesWithNoneLeftAreSkipped) {
  idle(0, 2);
  idle(10, 11);
  EXPECT_EQ(oldest(), 0u);
  idle_.erase(0);  // used again
  EXPECT_EQ(oldest(), 1u);
  idle_.erase(1);
  idle_.erase(2);
  EXPECT_EQ(oldest(), 10u) << "the first entry holds nothing idle: the next one";
  EXPECT_EQ(queue_.queued(), 1u);
  const std::uint64_t later = idle(1, 1);  // page 1 idle again, later: after 10 and 11
  EXPECT_EQ(order(), (std::vector<ChunkId>{10, 11, 1}));
  idle_[11] = later + 1;  // marked by a later span than the entry's: no longer the entry's
  EXPECT_EQ(order(), (std::vector<ChunkId>{10, 1}));
  idle_.clear();
  EXPECT_EQ(oldest(), kNoChunk);
  EXPECT_EQ(queue_.queued(), 0u);
  queue_.check_invariants();
}

TEST_F(IdleChunksTest, CompactionKeepsTheOrderOfTheEntriesStillIdle) {
  // Enough entries to compact, most of them with nothing idle left, after the queue's head has moved past some.
  for (std::uint64_t i = 0; i < 5000; ++i) idle(2 * i, 2 * i + 1);
  for (std::uint64_t i = 0; i < 5000; ++i) {
    if (i % 100 != 7) {
      idle_.erase(2 * i);
      idle_.erase(2 * i + 1);
    }
  }
  EXPECT_EQ(oldest(), 14u);  // the head moved past the first seven, with nothing idle
  idle_.erase(14);
  idle_.erase(15);
  std::vector<ChunkId> expect;
  for (std::uint64_t i = 107; i < 5000; i += 100) {
    expect.push_back(static_cast<ChunkId>(2 * i));
    expect.push_back(static_cast<ChunkId>(2 * i + 1));
  }
  EXPECT_EQ(queue_.queued(), 5000u - 7u);
  queue_.compact_if_dead(/*idle_chunks=*/expect.size(), [this](IdleChunks::Entry& e) { return first_of(e); });
  EXPECT_EQ(queue_.queued(), expect.size() / 2);  // only the entries with an idle chunk are left
  EXPECT_EQ(order(), expect);
  queue_.check_invariants();
  idle(20000, 20000);  // a push after compaction goes last
  expect.push_back(20000);
  EXPECT_EQ(order(), expect);
}

TEST_F(IdleChunksTest, CompactionWaitsForSixteenEntriesPerIdleChunk) {
  for (std::uint64_t i = 0; i < 4200; ++i) idle(i, i);
  for (std::uint64_t i = 300; i < 4200; ++i) idle_.erase(i);
  auto first = [this](IdleChunks::Entry& e) { return first_of(e); };
  queue_.compact_if_dead(/*idle_chunks=*/300, first);  // 4200 entries < 16 x 300: kept
  EXPECT_EQ(queue_.queued(), 4200u);
  for (std::uint64_t i = 200; i < 300; ++i) idle_.erase(i);
  queue_.compact_if_dead(/*idle_chunks=*/200, first);  // 4200 >= 16 x 200 and kMinCompact: the rest go
  EXPECT_EQ(queue_.queued(), 200u);
  queue_.check_invariants();
}

TEST_F(IdleChunksTest, AChunkMovedBackIdleTakesItsOldPlaceInTheQueue) {
  const std::uint64_t tick = idle(0, 5);
  idle(8, 8);
  // Pages 2-3 (one chunk) moved to pages 20-21 for a placement that failed: idle there, with its old tick.
  idle_.erase(2);
  idle_.erase(3);
  idle_[20] = tick;
  queue_.push_moved(0, PageNumber{20}, PageNumber{20}, tick, 0, PageNumber{2}, PageNumber{3});
  queue_.check_invariants();
  EXPECT_EQ(order(), (std::vector<ChunkId>{0, 1, 20, 4, 5, 8}));
  EXPECT_EQ(oldest(), 0u);
  test::expect_broken([&] { queue_.push_moved(0, PageNumber{30}, PageNumber{30}, tick, 0, PageNumber{6}, PageNumber{6}); },
                      "old queue entry is gone");
  test::expect_broken([&] { queue_.push_moved(0, PageNumber{4}, PageNumber{4}, tick, 0, PageNumber{0}, PageNumber{0}); },
                      "comes back into its own span");
}

TEST_F(IdleChunksTest, TicksThatGoBackOrOverlapOrWereNeverHandedOutFailTheCheck) {
  IdleChunks queue;
  const std::uint64_t t1 = queue.next_tick();
  const std::uint64_t t2 = queue.next_tick();
  queue.push(0, PageNumber{0}, PageNumber{1}, t2);
  queue.check_invariants();
  queue.push(0, PageNumber{2}, PageNumber{3}, t1);
  test::expect_broken([&] { queue.check_invariants(); }, "ticks go back");
  IdleChunks overlap;
  const std::uint64_t t = overlap.next_tick();
  overlap.push(0, PageNumber{0}, PageNumber{3}, t);
  overlap.push(1, PageNumber{0}, PageNumber{3}, t);  // another arena: no overlap
  overlap.check_invariants();
  overlap.push(0, PageNumber{3}, PageNumber{4}, t);
  test::expect_broken([&] { overlap.check_invariants(); }, "entries of one tick overlap");
  IdleChunks ahead;
  ahead.push(0, PageNumber{0}, PageNumber{0}, 5);
  test::expect_broken([&] { ahead.check_invariants(); }, "not handed out yet");
}

}  // namespace
}  // namespace gmlake::engine
