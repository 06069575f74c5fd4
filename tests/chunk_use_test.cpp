// ChunkUse (src/policies/gmlake/chunk_use.h) on its own: chunks of a ChunkStore on the sim backend, shown as mapped
// in an arena's page map by hand (ChunkUse only counts; it maps nothing). Every test checks ChunkUse's invariants
// after each step it tells ChunkUse of; the last ones break them on purpose.
#include "policies/gmlake/chunk_use.h"

#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

class ChunkUseTest : public ::testing::Test {
 protected:
  ChunkUseTest() : store_(sim_, PageGeometry(kPageBytes), stats_), arena_(0, 0, 0, 64 * kPageBytes), use_(store_) {}

  // A chunk of `pages` pages mapped at `first_page` for a block being placed (users 1, as a stitch leaves it).
  ChunkId mapped_for_block(std::uint64_t first_page, std::uint64_t pages) {
    const ChunkId id = store_.create(Pages{pages});
    store_[id].arena = arena_.id;
    store_[id].first_page = PageNumber{first_page};
    arena_.pages.insert(PageNumber{first_page}, id, Pages{pages});
    use_.mapped_for_block(id);
    use_.check_invariants();
    return id;
  }
  std::vector<ChunkId> idle_order() const {
    std::vector<ChunkId> out;
    use_.for_each_idle([&](ChunkId id) { out.push_back(id); });
    return out;
  }

  SimBackend sim_;
  Stats stats_;
  ChunkStore store_;
  Arena arena_;
  ChunkUse use_;
};

TEST_F(ChunkUseTest, AChunkTurnsIdleWhenItsLastBlockGoesAndUsedAgainWhenOneComes) {
  const ChunkId a = mapped_for_block(0, 4);
  EXPECT_EQ(use_.used_pages(), Pages{4});
  use_.use(arena_, PageNumber{2}, PageNumber{3});  // a second block on pages 2-3
  use_.check_invariants();
  EXPECT_EQ(store_[a].users, 2u);
  EXPECT_EQ(use_.unuse(arena_, PageNumber{0}, PageNumber{1}), 0u) << "still used by the second block: no tick";
  use_.check_invariants();
  const std::uint64_t tick = use_.unuse(arena_, PageNumber{2}, PageNumber{3});
  use_.check_invariants();
  EXPECT_NE(tick, 0u);
  EXPECT_EQ(store_[a].idle_since, tick);
  EXPECT_EQ(use_.used_pages(), Pages{0});
  EXPECT_EQ(use_.idle_pages(), Pages{4});
  EXPECT_EQ(use_.idle_chunks(), 1u);
  EXPECT_EQ(use_.oldest_idle(), a);
  use_.check_invariants();
  use_.use(arena_, PageNumber{1}, PageNumber{1});  // reused in place: no longer idle
  use_.check_invariants();
  EXPECT_EQ(use_.idle_chunks(), 0u);
  EXPECT_EQ(use_.used_pages(), Pages{4});
  EXPECT_TRUE(idle_order().empty()) << "its queue entry is dead";
}

TEST_F(ChunkUseTest, AFreeChunkWhoseStandbyMappingIsActivatedCountsIdleThenUsedWhenTheBlockComes) {
  const ChunkId other = mapped_for_block(8, 2);  // an unrelated used chunk: its count must not move
  const ChunkId a = store_.create(Pages{3});
  store_[a].arena = arena_.id;  // what Stitcher::activate leaves: an active place, users 0
  store_[a].first_page = PageNumber{0};
  arena_.pages.insert(PageNumber{0}, a, Pages{3});
  use_.mapped_idle(a);
  use_.check_invariants();
  EXPECT_EQ(use_.used_pages(), Pages{2});
  EXPECT_EQ(use_.idle_pages(), Pages{3});
  EXPECT_EQ(use_.idle_chunks(), 1u);
  EXPECT_EQ(use_.oldest_idle(), a);
  use_.check_invariants();
  use_.use(arena_, PageNumber{0}, PageNumber{2});
  use_.check_invariants();
  EXPECT_EQ(use_.used_pages(), Pages{5});
  EXPECT_EQ(use_.idle_pages(), Pages{0});
  EXPECT_EQ(store_[a].users, 1u);
  EXPECT_EQ(store_[other].users, 1u);
}

TEST_F(ChunkUseTest, TheOldestIdleChunkComesFirstAndTicksGrow) {
  const ChunkId a = mapped_for_block(0, 1);
  const ChunkId b = mapped_for_block(1, 2);
  const ChunkId c = mapped_for_block(3, 1);
  const std::uint64_t tb = use_.unuse(arena_, PageNumber{1}, PageNumber{2});
  use_.check_invariants();
  const std::uint64_t ta = use_.unuse(arena_, PageNumber{0}, PageNumber{0});
  use_.check_invariants();
  const std::uint64_t tc = use_.unuse(arena_, PageNumber{3}, PageNumber{3});
  use_.check_invariants();
  EXPECT_LT(tb, ta);
  EXPECT_LT(ta, tc);
  EXPECT_EQ(idle_order(), (std::vector<ChunkId>{b, a, c}));
  EXPECT_EQ(use_.oldest_idle(), b);
  use_.check_invariants();
  EXPECT_GT(use_.next_tick(), tc);
  // b leaves (evicted): the next oldest is a.
  store_[b].arena = Chunk::kUnmapped;
  arena_.pages.erase(PageNumber{1});
  use_.unmapped(Pages{2}, /*was_used=*/false);
  use_.check_invariants();
  EXPECT_EQ(use_.idle_pages(), Pages{2});
  EXPECT_EQ(use_.idle_chunks(), 2u);
  EXPECT_EQ(use_.oldest_idle(), a);
  use_.check_invariants();
}

TEST_F(ChunkUseTest, ChunksGrownPastABlockTurnIdleButTheOneItEndsInStaysUsed) {
  // A block on pages 0-4, its run stitched with chunks [0,4) [4,6) and grown ahead with [6,8) [8,10).
  const ChunkId first = mapped_for_block(0, 4);
  const ChunkId ends_in = mapped_for_block(4, 2);
  const ChunkId grown1 = mapped_for_block(6, 2);
  const ChunkId grown2 = mapped_for_block(8, 2);
  const std::uint64_t tick = use_.idle_past(arena_, /*block_last=*/PageNumber{4}, /*last=*/PageNumber{9});
  use_.check_invariants();
  EXPECT_NE(tick, 0u);
  EXPECT_EQ(store_[first].users, 1u);
  EXPECT_EQ(store_[ends_in].users, 1u);
  EXPECT_EQ(store_[grown1].users, 0u);
  EXPECT_EQ(store_[grown2].users, 0u);
  EXPECT_EQ(use_.used_pages(), Pages{6});
  EXPECT_EQ(use_.idle_pages(), Pages{4});
  EXPECT_EQ(idle_order(), (std::vector<ChunkId>{grown1, grown2}));
  EXPECT_EQ(use_.idle_past(arena_, PageNumber{9}, PageNumber{9}), 0u) << "nothing past the last page";
  use_.check_invariants();
}

TEST_F(ChunkUseTest, AnUnmappedUsedChunkLeavesTheUsedCount) {
  const ChunkId a = mapped_for_block(0, 3);
  store_[a].arena = Chunk::kUnmapped;  // a stitch undone
  arena_.pages.erase(PageNumber{0});
  use_.unmapped(Pages{3}, /*was_used=*/true);
  use_.check_invariants();
  EXPECT_EQ(use_.used_pages(), Pages{0});
  EXPECT_EQ(use_.idle_pages(), Pages{0});
  EXPECT_EQ(use_.idle_chunks(), 0u);
}

// Inconsistent input: the pool's records changed behind ChunkUse's back (no UB: the test owns the pool).
TEST_F(ChunkUseTest, AChunkWhoseUsersChangedUntoldFailsTheRecount) {
  const ChunkId a = mapped_for_block(0, 2);
  store_[a].users = 0;  // idle now, but ChunkUse still counts it used and never queued it
  test::expect_broken([&] { use_.check_invariants(); }, "an idle chunk is not queued");
  store_[a].users = 1;
  use_.check_invariants();
  const ChunkId b = mapped_for_block(2, 3);
  store_[b].arena = Chunk::kUnmapped;  // unmapped without unmapped(): its pages are still counted used
  test::expect_broken([&] { use_.check_invariants(); }, "used page count differs from the recount");
}

TEST_F(ChunkUseTest, AnIdleChunkMappedUntoldFailsTheIdleCount) {
  mapped_for_block(0, 1);
  use_.unuse(arena_, PageNumber{0}, PageNumber{0});
  use_.check_invariants();
  // A chunk mapped idle by hand, not through mapped_idle(): queued by no one, counted by no one.
  const ChunkId b = store_.create(Pages{2});
  store_[b].arena = arena_.id;
  store_[b].first_page = PageNumber{4};
  test::expect_broken([&] { use_.check_invariants(); }, "an idle chunk is not queued");
}

}  // namespace
}  // namespace gmlake::engine
