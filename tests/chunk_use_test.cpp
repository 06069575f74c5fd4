// ChunkUse (src/policies/gmlake/chunk_use.h) on its own: chunks of a ChunkStore on the sim backend, shown as mapped
// in an arena's page map by hand (ChunkUse only counts; it maps nothing). Every test checks ChunkUse's invariants
// after each step it tells ChunkUse of; the random one also checks every answer against a naive model that counts
// every block on every chunk it overlaps and queues every chunk on its own (what ChunkUse did before it kept
// only the end chunks' counts and one span per free); the last ones break the invariants on purpose.
#include "policies/gmlake/chunk_use.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

class ChunkUseTest : public ::testing::Test {
 protected:
  ChunkUseTest()
      : store_(sim_, PageGeometry(kPageBytes), stats_),
        arenas_(sim_, 4096 * kPageBytes, false, [](Arena&) { return true; }, [] {}),
        arena_(arenas_.get(false, 0)),
        use_(store_, arenas_) {}

  // A chunk of `pages` pages shown mapped at `first_page` (as Stitcher::map leaves it: users 0).
  ChunkId map(std::uint64_t first_page, std::uint64_t pages) {
    const ChunkId id = store_.create(Pages{pages});
    store_[id].arena = arena_.id;
    store_[id].first_page = PageNumber{first_page};
    arena_.pages.insert(PageNumber{first_page}, id, Pages{pages});
    return id;
  }
  // A chunk mapped for a block on pages [block_first, block_last] being placed.
  ChunkId mapped_for_block(std::uint64_t first_page, std::uint64_t pages, std::uint64_t block_first,
                           std::uint64_t block_last) {
    const ChunkId id = map(first_page, pages);
    use_.mapped_for_block(id, PageNumber{block_first}, PageNumber{block_last});
    return id;
  }
  // A chunk mapped for a block of exactly its pages (users 1).
  ChunkId mapped_for_block(std::uint64_t first_page, std::uint64_t pages) {
    const ChunkId id = mapped_for_block(first_page, pages, first_page, first_page + pages - 1);
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
  ArenaSet arenas_;
  Arena& arena_;
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
  EXPECT_EQ(use_.idle_since(a), tick);
  EXPECT_FALSE(use_.used(a));
  EXPECT_EQ(use_.used_pages(), Pages{0});
  EXPECT_EQ(use_.idle_pages(), Pages{4});
  EXPECT_EQ(use_.idle_chunks(), 1u);
  EXPECT_EQ(use_.oldest_idle(), a);
  use_.check_invariants();
  use_.use(arena_, PageNumber{1}, PageNumber{1});  // reused in place: no longer idle
  use_.check_invariants();
  EXPECT_TRUE(use_.used(a));
  EXPECT_EQ(use_.idle_since(a), 0u);
  EXPECT_EQ(use_.idle_chunks(), 0u);
  EXPECT_EQ(use_.used_pages(), Pages{4});
  EXPECT_TRUE(idle_order().empty()) << "its queue entry holds no idle chunk";
}

TEST_F(ChunkUseTest, OnlyABlocksEndChunksCountItAndTheOnesInsideTurnIdleTogetherInPageOrder) {
  // A block on pages 1-8 over chunks [0,2) [2,4) [4,5) [5,7) [7,9): the first and the last back its ends.
  const std::vector<ChunkId> ids = {mapped_for_block(0, 2, 1, 8), mapped_for_block(2, 2, 1, 8),
                                    mapped_for_block(4, 1, 1, 8), mapped_for_block(5, 2, 1, 8),
                                    mapped_for_block(7, 2, 1, 8)};
  EXPECT_EQ(store_[ids[0]].users, 1u);
  EXPECT_EQ(store_[ids[2]].users, 0u) << "a chunk inside the block counts nothing";
  EXPECT_EQ(store_[ids[4]].users, 1u);
  for (const ChunkId id : ids) EXPECT_TRUE(use_.used(id));
  use_.check_invariants();
  const std::uint64_t tick = use_.unuse(arena_, PageNumber{1}, PageNumber{8});
  use_.check_invariants();
  EXPECT_EQ(idle_order(), ids) << "one free: page order";
  for (const ChunkId id : ids) EXPECT_EQ(use_.idle_since(id), tick);
  EXPECT_EQ(use_.idle_pages(), Pages{9});
  EXPECT_EQ(use_.idle_chunks(), 5u);
  // A smaller block takes the middle chunk: the others stay idle, in their order.
  use_.use(arena_, PageNumber{4}, PageNumber{4});
  use_.check_invariants();
  EXPECT_EQ(idle_order(), (std::vector<ChunkId>{ids[0], ids[1], ids[3], ids[4]}));
  EXPECT_EQ(use_.oldest_idle(), ids[0]);
  // Freed again: the middle chunk is the newest idle one.
  const std::uint64_t later = use_.unuse(arena_, PageNumber{4}, PageNumber{4});
  use_.check_invariants();
  EXPECT_GT(later, tick);
  EXPECT_EQ(use_.idle_since(ids[2]), later);
  EXPECT_EQ(use_.idle_since(ids[3]), tick) << "the chunk after it keeps its tick";
  EXPECT_EQ(idle_order(), (std::vector<ChunkId>{ids[0], ids[1], ids[3], ids[4], ids[2]}));
}

TEST_F(ChunkUseTest, AFreeChunkWhoseStandbyMappingIsActivatedCountsIdleThenUsedWhenTheBlockComes) {
  const ChunkId other = mapped_for_block(8, 2);  // an unrelated used chunk: its count must not move
  const ChunkId a = map(0, 3);  // what Stitcher::activate leaves: an active place, users 0
  use_.mapped_idle(arena_, a);
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
  use_.use(arena_, PageNumber{0}, PageNumber{4});
  const ChunkId first = mapped_for_block(0, 4, 0, 4);
  const ChunkId ends_in = mapped_for_block(4, 2, 0, 4);
  const ChunkId grown1 = mapped_for_block(6, 2, 0, 4);
  const ChunkId grown2 = mapped_for_block(8, 2, 0, 4);
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

TEST_F(ChunkUseTest, AFailedPlacementLeavesItsUnmappedPagesOutOfTheSpans) {
  // A block on pages 0-9 whose stitch failed: [0,2) and [6,8) stayed mapped, the rest did not.
  use_.use(arena_, PageNumber{0}, PageNumber{9});
  const ChunkId a = mapped_for_block(0, 2, 0, 9);
  const ChunkId b = mapped_for_block(6, 2, 0, 9);
  const std::uint64_t tick = use_.unuse_partly_mapped(arena_, PageNumber{0}, PageNumber{9});
  use_.check_invariants();
  EXPECT_NE(tick, 0u);
  EXPECT_EQ(idle_order(), (std::vector<ChunkId>{a, b}));
  EXPECT_EQ(use_.idle_since(a), tick);
  EXPECT_EQ(use_.idle_since(b), tick);
  EXPECT_EQ(use_.idle_pages(), Pages{4});
}

TEST_F(ChunkUseTest, AnIdleChunkTakenForAFailedPlacementComesBackIdleInItsOldPlaceInTheQueue) {
  const std::vector<ChunkId> ids = {mapped_for_block(0, 2, 0, 5), mapped_for_block(2, 2, 0, 5),
                                    mapped_for_block(4, 2, 0, 5)};
  const std::uint64_t tick = use_.unuse(arena_, PageNumber{0}, PageNumber{5});
  const ChunkId later = mapped_for_block(30, 1);
  use_.unuse(arena_, PageNumber{30}, PageNumber{30});
  use_.check_invariants();
  // The middle chunk moves to a standby mapping of it at pages 20-21, for a block that then fails.
  use_.take_idle(arena_, ids[1]);
  arena_.pages.set_active(PageNumber{2}, false);  // what Stitcher::activate does next
  arena_.pages.insert(PageNumber{20}, ids[1], Pages{2});
  store_[ids[1]].first_page = PageNumber{20};
  EXPECT_TRUE(use_.used(ids[1])) << "counted as the block's";
  EXPECT_EQ(use_.idle_chunks(), 3u);
  use_.restore_taken(arena_);
  use_.check_invariants();
  EXPECT_EQ(use_.idle_since(ids[1]), tick);
  EXPECT_EQ(idle_order(), (std::vector<ChunkId>{ids[0], ids[1], ids[2], later}));
  EXPECT_EQ(use_.oldest_idle(), ids[0]);
  // Taken again, moved to pages 24-25, and this time the block comes: use() counts it.
  use_.take_idle(arena_, ids[0]);
  arena_.pages.set_active(PageNumber{0}, false);
  arena_.pages.insert(PageNumber{24}, ids[0], Pages{2});
  store_[ids[0]].first_page = PageNumber{24};
  use_.use(arena_, PageNumber{24}, PageNumber{25});
  use_.check_invariants();
  EXPECT_EQ(use_.idle_chunks(), 3u);
  EXPECT_EQ(use_.used_pages(), Pages{2});
}

TEST_F(ChunkUseTest, AChunkPutBackWithATickOlderThanTheArenasHandoverBringsTheHandoverDownToIt) {
  const ChunkId id = mapped_for_block(0, 2, 0, 1);
  const std::uint64_t tick = use_.unuse(arena_, PageNumber{0}, PageNumber{1});
  // The arena passed to another stream after that tick (ArenaSet): ticks below handover_tick count as safe.
  arena_.handover_tick = use_.next_tick();
  ASSERT_LT(tick, arena_.handover_tick);
  use_.take_idle(arena_, id);
  arena_.pages.set_active(PageNumber{0}, false);
  arena_.pages.insert(PageNumber{20}, id, Pages{2});
  store_[id].first_page = PageNumber{20};
  use_.restore_taken(arena_);  // the placement failed: idle again, at its old tick
  use_.check_invariants();
  EXPECT_EQ(use_.idle_since(id), tick);
  EXPECT_EQ(arena_.handover_tick, tick) << "the fence, not the handover, judges the old tick";
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

// Random blocks placed on and freed from 96 pages of chunks of 1-3 pages, and the oldest idle chunk evicted and
// mapped back idle, against the naive model: each chunk counts every block it overlaps, and each chunk turning
// idle is queued on its own, page order within one free (an entry is current while its chunk stayed idle since).
TEST_F(ChunkUseTest, UsersIdleTicksAndTheIdleOrderMatchANaiveCountOfEveryChunk) {
  constexpr std::uint64_t kPages = 96;
  std::vector<ChunkId> owner(kPages);
  std::vector<ChunkId> ids;
  std::mt19937_64 rng(7);
  for (std::uint64_t p = 0; p < kPages;) {
    const std::uint64_t n = std::min<std::uint64_t>(1 + rng() % 3, kPages - p);
    const ChunkId id = map(p, n);
    ids.push_back(id);
    for (std::uint64_t k = p; k < p + n; ++k) owner[k] = id;
    p += n;
  }
  struct Naive {
    std::uint32_t users = 0;
    std::uint64_t idle_since = 0;
  };
  std::vector<Naive> naive(store_.live_chunks() + 8);
  std::vector<std::pair<ChunkId, std::uint64_t>> queue;
  auto current = [&](const std::pair<ChunkId, std::uint64_t>& e) {
    return naive[e.first].users == 0 && naive[e.first].idle_since == e.second;
  };
  for (const ChunkId id : ids) {  // every chunk starts idle, as a free chunk mapped back
    use_.mapped_idle(arena_, id);
    naive[id].idle_since = use_.idle_since(id);
    queue.emplace_back(id, naive[id].idle_since);
  }
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blocks;
  // Blocks share at most one page, an end page of both (blocks are 512 B-aligned: two may share a page).
  auto fits = [&](std::uint64_t f, std::uint64_t l) {
    for (const auto& [bf, bl] : blocks) {
      const std::uint64_t lo = std::max(f, bf), hi = std::min(l, bl);
      if (lo > hi) continue;
      if (lo != hi || !((lo == f || lo == l) && (lo == bf || lo == bl))) return false;
    }
    return true;
  };
  auto chunks_of = [&](std::uint64_t f, std::uint64_t l) {
    std::vector<ChunkId> out;
    for (std::uint64_t p = f; p <= l; ++p) {
      if (out.empty() || out.back() != owner[p]) out.push_back(owner[p]);
    }
    return out;
  };
  for (int step = 0; step < 3000; ++step) {
    const std::uint64_t kind = rng() % 8;
    if (kind < 4) {  // place
      const std::uint64_t f = rng() % kPages, l = std::min(kPages - 1, f + rng() % 24);
      if (!fits(f, l)) continue;
      use_.use(arena_, PageNumber{f}, PageNumber{l});
      for (const ChunkId id : chunks_of(f, l)) ++naive[id].users;
      blocks.emplace_back(f, l);
    } else if (kind < 7 && !blocks.empty()) {  // free
      const std::size_t i = rng() % blocks.size();
      const auto [f, l] = blocks[i];
      blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
      const std::uint64_t tick = use_.unuse(arena_, PageNumber{f}, PageNumber{l});
      bool any = false;
      for (const ChunkId id : chunks_of(f, l)) {
        if (--naive[id].users != 0) continue;
        any = true;
        naive[id].idle_since = tick;
        queue.emplace_back(id, tick);
      }
      ASSERT_EQ(tick != 0, any) << "a tick exactly when a chunk turned idle";
    } else if (use_.idle_chunks() != 0) {  // evict the oldest, then map it back idle
      const auto naive_oldest = std::find_if(queue.begin(), queue.end(), current);
      ASSERT_NE(naive_oldest, queue.end());
      const ChunkId id = use_.oldest_idle();
      ASSERT_EQ(id, naive_oldest->first) << "step " << step;
      const PageNumber at = store_[id].first_page;
      arena_.pages.erase(at);
      store_[id].arena = Chunk::kUnmapped;
      use_.unmapped(store_[id].pages, /*was_used=*/false);
      use_.check_invariants();
      store_[id].arena = arena_.id;
      arena_.pages.insert(at, id, store_[id].pages);
      use_.mapped_idle(arena_, id);
      naive[id].idle_since = use_.idle_since(id);
      ASSERT_GT(naive[id].idle_since, naive_oldest->second);
      queue.emplace_back(id, naive[id].idle_since);
    }
    use_.check_invariants();
    std::vector<ChunkId> expect;
    Pages used, idle;
    for (const auto& e : queue) {
      if (current(e)) expect.push_back(e.first);
    }
    ASSERT_EQ(idle_order(), expect) << "step " << step;
    for (const ChunkId id : ids) {
      ASSERT_EQ(use_.used(id), naive[id].users != 0) << "chunk " << id << " step " << step;
      if (naive[id].users == 0) {
        ASSERT_EQ(use_.idle_since(id), naive[id].idle_since);
      }
      (naive[id].users != 0 ? used : idle) += store_[id].pages;
    }
    ASSERT_EQ(use_.used_pages(), used);
    ASSERT_EQ(use_.idle_pages(), idle);
    ASSERT_EQ(use_.idle_chunks(), expect.size());
  }
}

// Inconsistent input: the records changed behind ChunkUse's back (no UB: the test owns them).
TEST_F(ChunkUseTest, PagesTurnedIdleOrUsedUntoldFailTheRecount) {
  const ChunkId a = mapped_for_block(0, 2);
  store_[a].users = 0;
  arena_.pages.mark_idle(PageNumber{0}, PageNumber{1}, use_.next_tick());  // idle, but queued by no one
  test::expect_broken([&] { use_.check_invariants(); }, "an idle chunk is not queued");
  arena_.pages.clear_idle(PageNumber{0}, PageNumber{1});
  store_[a].users = 1;
  use_.check_invariants();
  const ChunkId b = mapped_for_block(2, 3);
  store_[b].arena = Chunk::kUnmapped;  // unmapped without unmapped(): its pages are still counted used
  test::expect_broken([&] { use_.check_invariants(); }, "used page count differs from the recount");
  store_[b].arena = arena_.id;
  use_.unuse(arena_, PageNumber{2}, PageNumber{4});
  use_.check_invariants();
  arena_.pages.clear_idle(PageNumber{3}, PageNumber{3});  // one page of an idle chunk used untold
  test::expect_broken([&] { use_.check_invariants(); }, "a chunk's pages are idle in part");
}

}  // namespace
}  // namespace gmlake::engine
