// Page, PageTable and IdleQueue (src/policies/gmlake/page_table.h) on their own: the page states (used,
// idle, empty, stale) and the order in which idle pages come back for eviction.
#include "policies/gmlake/page_table.h"

#include <gtest/gtest.h>

#include <vector>

namespace gmlake::engine {
namespace {

TEST(PageTest, OnlyAMappedUnusedPageThatOwnsItsChunkIsIdle) {
  Page empty;
  EXPECT_FALSE(empty.idle());  // unmapped
  Page idle{.chunk = ChunkHandle{7}};
  EXPECT_TRUE(idle.idle());
  Page used{.chunk = ChunkHandle{7}, .users = 1};
  EXPECT_FALSE(used.idle());
  Page stale{.chunk = ChunkHandle{7}, .stale = true};
  EXPECT_FALSE(stale.idle());
}

TEST(PageTableTest, GrowsOnDemandAndFindDoesNot) {
  PageTable table;
  EXPECT_EQ(table.size(), 0u);
  EXPECT_EQ(table.find(0), nullptr);
  EXPECT_TRUE(table.existing(0, 9).empty());

  table.at(3).users = 2;
  EXPECT_EQ(table.size(), 4u);
  ASSERT_NE(table.find(3), nullptr);
  EXPECT_EQ(table.find(3)->users, 2u);
  EXPECT_EQ(table.find(4), nullptr);
  EXPECT_EQ(table.existing(2, 9).size(), 2u);  // pages 2 and 3: the table ends there

  Page* pages = table.span(5, 7);
  pages[2].users = 1;  // page 7
  EXPECT_EQ(table.size(), 8u);
  EXPECT_EQ(table.find(7)->users, 1u);
}

class IdleQueueTest : public ::testing::Test {
 protected:
  // Pages [first, first+count) of arena 0 turn idle now (mapped, unused), queued as one run.
  void turn_idle(std::uint64_t first, std::uint64_t count) {
    const std::uint64_t tick = queue_.next_tick();
    for (std::uint64_t p = first; p < first + count; ++p) {
      Page& page = table_.at(p);
      page.chunk = ChunkHandle{p + 1};
      page.users = 0;
      page.idle_since = tick;
    }
    queue_.push(0, first, count, tick);
  }
  PageRef oldest() {
    return queue_.oldest([this](std::uint32_t) -> const PageTable& { return table_; });
  }

  PageTable table_;
  IdleQueue queue_;
};

TEST_F(IdleQueueTest, AnEmptyQueueHasNoOldestPage) { EXPECT_FALSE(oldest().valid()); }

TEST_F(IdleQueueTest, PagesComeBackLeastRecentlyIdledFirstAndPopAdvances) {
  turn_idle(4, 2);
  turn_idle(0, 1);
  EXPECT_EQ(oldest(), (PageRef{0, 4}));
  EXPECT_EQ(oldest(), (PageRef{0, 4}));  // oldest() leaves it queued
  queue_.pop_oldest();
  EXPECT_EQ(oldest(), (PageRef{0, 5}));
  queue_.pop_oldest();
  EXPECT_EQ(oldest(), (PageRef{0, 0}));
  queue_.pop_oldest();
  EXPECT_FALSE(oldest().valid());
}

TEST_F(IdleQueueTest, PagesUsedAgainOrIdledAgainLaterAreSkipped) {
  turn_idle(0, 3);
  table_.at(0).users = 1;  // used again: no longer idle
  table_.at(1).stale = true;  // its chunk went elsewhere
  EXPECT_EQ(oldest(), (PageRef{0, 2}));

  turn_idle(2, 1);  // page 2 idles again: its first entry is stale now, the new one is last
  turn_idle(5, 1);
  EXPECT_EQ(oldest(), (PageRef{0, 2}));
  queue_.pop_oldest();
  EXPECT_EQ(oldest(), (PageRef{0, 5}));

  std::vector<std::uint64_t> current;
  queue_.for_each_current([this](std::uint32_t) -> const PageTable& { return table_; },
                          [&](std::uint32_t, std::uint64_t page) { current.push_back(page); });
  EXPECT_EQ(current, (std::vector<std::uint64_t>{5}));
}

}  // namespace
}  // namespace gmlake::engine
