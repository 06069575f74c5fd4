// Placer (src/policies/gmlake/placement.h) on its own: an arena whose page map and free ranges the test lays out
// by hand, over chunks of a ChunkStore on the sim backend, idle ones told to a ChunkUse (the Placer only reads
// them). Every place chosen is
// checked against the Placement invariant (Placer::check_invariants); the last test breaks it on purpose.
#include "policies/gmlake/placement.h"

#include <gtest/gtest.h>

#include <initializer_list>
#include <vector>

#include "expect_error.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

constexpr PageGeometry kGeometry = PageGeometry::from_shift(21);  // 2 MiB pages
constexpr std::uint64_t kPage = kGeometry.bytes();

class PlacementTest : public ::testing::Test {
 protected:
  PlacementTest()
      : store_(sim_, PageGeometry(kPage), stats_),
        arenas_(sim_, 64 * kPage, false, [](Arena&) { return true; }, [] {}),
        arena_(arenas_.get(false, 0)),
        use_(store_, arenas_) {}

  // A chunk of `pages` pages shown as mapped at `first_page`, the end chunk of `users` blocks (0: idle).
  ChunkId mapped(std::uint64_t first_page, std::uint64_t pages, std::uint32_t users) {
    const ChunkId id = store_.create(Pages{pages});
    store_[id].arena = arena_.id;
    store_[id].first_page = PageNumber{first_page};
    arena_.pages.insert(PageNumber{first_page}, id, Pages{pages});
    if (users == 0) {
      use_.mapped_idle(arena_, id);
    } else {
      store_[id].users = users;
    }
    return id;
  }
  // Marks [offset, offset + size) used in the arena's free ranges.
  void occupy(std::uint64_t offset, std::uint64_t size) {
    for (const FreeRange& r : arena_.free.ranges()) {
      if (r.offset <= offset && offset + size <= r.offset + r.size_bytes) {
        arena_.free.take(r, offset, size);
        return;
      }
    }
    FAIL() << "no free range holds " << offset;
  }

  // Chunks idle or used (one user), with gaps, over pages [from, to) from a seeded random sequence: each step
  // draws a size (pages_of(next)) and then whether it is a gap (next() % gap_every == 0). Returns, per page, its
  // chunk or kNoChunk.
  template <typename PagesOf>
  std::vector<ChunkId> random_layout(std::uint64_t seed, std::uint64_t from, std::uint64_t to, PagesOf pages_of,
                                     std::uint64_t gap_every) {
    std::vector<ChunkId> owner(8192, kNoChunk);
    auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
    for (std::uint64_t p = from; p < to;) {
      const std::uint64_t pages = pages_of(next);
      if (next() % gap_every == 0) {  // a gap
        p += pages;
        continue;
      }
      const ChunkId id = mapped(p, pages, static_cast<std::uint32_t>(next() % 2));
      for (std::uint64_t k = 0; k < pages; ++k) owner[p + k] = id;
      p += pages;
    }
    return owner;
  }
  // What a page-by-page count gives for pages [first, last] of `owner` (random_layout): the unmapped pages, and
  // the pages of idle chunks outside the range, counted once per chunk at its first page in the range.
  struct PageCount {
    std::uint64_t unmapped = 0, pinned = 0;
  };
  PageCount count_page_by_page(const std::vector<ChunkId>& owner, std::uint64_t first, std::uint64_t last) {
    PageCount n;
    for (std::uint64_t p = first; p <= last; ++p) {
      if (owner[p] == kNoChunk) {
        ++n.unmapped;
        continue;
      }
      const Chunk& c = store_[owner[p]];
      if (!use_.used(owner[p]) && (p == first || owner[p - 1] != owner[p])) {
        const std::uint64_t chunk_first = c.first_page.value();
        for (std::uint64_t k = chunk_first; k < chunk_first + c.pages.count(); ++k) n.pinned += k < first || k > last;
      }
    }
    return n;
  }
  // placer.cost_of(pages [first, last], bound) for each bound is `want` (no standby mapping), or Pages::max()
  // where want.unmapped is past the bound.
  void expect_cost(const Placer& placer, std::uint64_t first, std::uint64_t last, const PageCount& want,
                   std::initializer_list<std::uint64_t> bounds) {
    for (const std::uint64_t bound : bounds) {
      const Placer::Cost c = placer.cost_of(arena_, PageNumber{first}, PageNumber{last}, Pages{bound});
      if (want.unmapped > bound) {
        EXPECT_EQ(c.unmapped, Pages::max()) << first << ".." << last << " bound " << bound;
        continue;
      }
      EXPECT_EQ(c.unmapped, Pages{want.unmapped}) << first << ".." << last << " bound " << bound;
      EXPECT_EQ(c.pinned_waste, Pages{want.pinned}) << first << ".." << last;
      EXPECT_EQ(c.standby, 0u);
    }
  }

  // placer.choose(arena_, rounded_bytes), checked against the Placement invariant.
  Placer::Placement choose(const Placer& placer, std::uint64_t rounded_bytes) {
    const Placer::Placement p = placer.choose(arena_, rounded_bytes);
    placer.check_invariants(arena_, rounded_bytes, p);
    return p;
  }

  SimBackend sim_;
  Stats stats_;
  ChunkStore store_;
  ArenaSet arenas_;
  Arena& arena_;
  ChunkUse use_;
};

TEST_F(PlacementTest, CostCountsUnmappedPagesAndTheIdlePagesABlockWouldPin) {
  mapped(0, 4, /*users=*/0);  // idle, pages 0-3
  mapped(4, 2, /*users=*/1);  // used, pages 4-5
  const Placer placer(store_, use_, kGeometry, 8);
  // Pages 2..7: 2 of the idle chunk (2 more pinned), 2 of the used one (none pinned: it is in use), 2 unmapped.
  const Placer::Cost c = placer.cost_of(arena_, PageNumber{2}, PageNumber{7});
  EXPECT_EQ(c.unmapped, Pages{2});
  EXPECT_EQ(c.pinned_waste, Pages{2});
  // The whole idle chunk: nothing pinned, nothing to map.
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{0}, PageNumber{3}).total(), Pages{0});
  // Past every chunk: all unmapped.
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{10}, PageNumber{12}).unmapped, Pages{3});
}

TEST_F(PlacementTest, AMappedPlaceWinsOverAnUnmappedOneOfTheSameFit) {
  // Two free ranges of 4 pages: [8, 12) unmapped and [20, 24) mapped (an idle chunk); the rest is used.
  occupy(0, 8 * kPage);
  occupy(12 * kPage, 8 * kPage);
  occupy(24 * kPage, 40 * kPage);
  mapped(20, 4, /*users=*/0);
  const Placer placer(store_, use_, kGeometry, 8);
  const Placer::Placement p = choose(placer, 3 * kPage);
  EXPECT_EQ(p.range.offset, 20 * kPage);
  EXPECT_EQ(p.cost.unmapped, Pages{0});
  // It fits at either end with nothing to map; the start would pin the chunk's last page, the end its first:
  // equal costs, so the start is kept.
  EXPECT_EQ(p.offset, 20 * kPage);
  EXPECT_EQ(p.cost.pinned_waste, Pages{1});
}

TEST_F(PlacementTest, TheEndOfARangeIsTakenWhenItsMappedPartLiesThere) {
  // One free range [0, 16): its last 4 pages are mapped, idle.
  occupy(16 * kPage, 48 * kPage);
  mapped(12, 4, /*users=*/0);
  const Placer placer(store_, use_, kGeometry, 8);
  const Placer::Placement p = choose(placer, 4 * kPage);
  EXPECT_EQ(p.offset, 12 * kPage);
  EXPECT_EQ(p.cost.total(), Pages{0});
  EXPECT_GE(p.offset, p.range.offset);
  EXPECT_LE(p.offset + 4 * kPage, p.range.offset + p.range.size_bytes);
}

TEST_F(PlacementTest, ARecalledChunkIsNeverChosenAndNothingLargeEnoughGivesAnEmptyRange) {
  // Free [0, 4) lies on a lent chunk its lender recalled; free [8, 12) is unmapped.
  occupy(4 * kPage, 4 * kPage);
  occupy(12 * kPage, 52 * kPage);
  const ChunkId lent = store_.adopt(sim_.create(4 * kPage), Pages{4});
  store_[lent].arena = arena_.id;
  store_[lent].first_page = PageNumber{0};
  arena_.pages.insert(PageNumber{0}, lent, Pages{4});
  use_.mapped_idle(arena_, lent);
  store_.recall(lent);
  const Placer placer(store_, use_, kGeometry, 8);
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{0}, PageNumber{1}).unmapped, Pages::max());
  const Placer::Placement p = choose(placer, 2 * kPage);
  EXPECT_EQ(p.range.offset, 8 * kPage);
  EXPECT_EQ(p.cost.unmapped, Pages{2});
  EXPECT_EQ(choose(placer, 5 * kPage).range.size_bytes, 0u);
}

TEST_F(PlacementTest, OnlyFitCandidatesRangesAreWeighed) {
  // Three free ranges of 2 pages at 0, 4 and 8; only the one at 8 is mapped.
  occupy(2 * kPage, 2 * kPage);
  occupy(6 * kPage, 2 * kPage);
  occupy(10 * kPage, 54 * kPage);
  mapped(8, 2, /*users=*/0);
  // With one candidate the first range of the good-fit order is taken, whatever it costs.
  const Placer one(store_, use_, kGeometry, 1);
  const Placer::Placement first = choose(one, 2 * kPage);
  EXPECT_EQ(first.cost.unmapped, first.range.offset == 8 * kPage ? Pages{0} : Pages{2});
  // With all three weighed, the mapped one wins.
  const Placer three(store_, use_, kGeometry, 3);
  EXPECT_EQ(choose(three, 2 * kPage).range.offset, 8 * kPage);
}

TEST_F(PlacementTest, APlaceOutsideItsRangeOrWithAnotherCostFailsTheCheck) {
  occupy(8 * kPage, 56 * kPage);  // one free range: [0, 8) pages
  mapped(0, 2, /*users=*/0);
  const Placer placer(store_, use_, kGeometry, 8);
  const Placer::Placement good = choose(placer, 2 * kPage);
  EXPECT_EQ(good.offset, 0u);
  Placer::Placement p = good;
  p.offset = 7 * kPage;  // the block would end past the range
  test::expect_broken([&] { placer.check_invariants(arena_, 2 * kPage, p); }, "leaves its free range");
  p = good;
  p.offset = 512 * 3 + 100;
  test::expect_broken([&] { placer.check_invariants(arena_, 2 * kPage, p); }, "is not 512 B aligned");
  p = good;
  p.cost.unmapped = Pages{1};  // pages 0-1 are mapped: nothing to map
  test::expect_broken([&] { placer.check_invariants(arena_, 2 * kPage, p); },
                      "a placement's cost differs from the cost of its pages");
  // No place: nothing to check.
  placer.check_invariants(arena_, 2 * kPage, Placer::Placement{{0, 0}, 0, {Pages::max(), Pages{0}}});
}

TEST_F(PlacementTest, AWalkPastItsBoundIsCutShortAndNeverWins) {
  // Pages 0-1 unmapped, 2-3 an idle chunk, 4-7 unmapped: 6 of the 8 pages unmapped.
  mapped(2, 2, /*users=*/0);
  const Placer placer(store_, use_, kGeometry, 8);
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{0}, PageNumber{7}).unmapped, Pages{6});
  // At the bound: exact.
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{0}, PageNumber{7}, /*unmapped_bound=*/Pages{6}).unmapped, Pages{6});
  // Below it: the gap before the chunk already exceeds a bound of 1, so the walk stops at the chunk.
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{0}, PageNumber{7}, /*unmapped_bound=*/Pages{1}).unmapped, Pages::max());
  // The trailing gap counts too: 4 unmapped pages are past a bound of 3, within one of 4.
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{2}, PageNumber{7}, /*unmapped_bound=*/Pages{3}).unmapped, Pages::max());
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{2}, PageNumber{7}, /*unmapped_bound=*/Pages{4}).unmapped, Pages{4});
}

// Without standby mappings, cost_of reads the page table's bitmaps instead of walking the chunks: it must give
// what a page-by-page count gives, for every range and bound, on a layout of chunks of 1-5 pages (idle or used)
// with gaps, across a leaf boundary (4096 pages).
TEST_F(PlacementTest, TheCostFromTheBitmapsIsWhatAPageByPageCountGives) {
  const std::vector<ChunkId> owner = random_layout(7, 4060, 4140, [](auto& next) { return 1 + next() % 5; }, 4);
  const Placer placer(store_, use_, kGeometry, 8);
  for (std::uint64_t first = 4050; first < 4150; ++first) {
    for (std::uint64_t last = first; last < 4150; last += 1 + last % 3) {
      expect_cost(placer, first, last, count_page_by_page(owner, first, last), {0, 3, UINT64_MAX});
    }
  }
  arena_.pages.check_invariants();
}

// A block within one word of pages with no standby mapping there is priced from the word's bits (cost_in_words),
// reading the chunk at an end only where that page is idle. Against the page-by-page count: every range inside
// one word, around idle and used chunks of up to 150 pages that start before the word (one in the leaf before)
// or end after it, with gaps, so that an end chunk is covered in part from either side, or is one chunk at both
// ends.
TEST_F(PlacementTest, TheCostOfABlockInOneWordIsWhatAPageByPageCountGives) {
  const std::vector<ChunkId> owner =
      random_layout(3, 3950, 4400, [](auto& next) { return 1 + next() % (next() % 3 == 0 ? 150 : 6); }, 5);
  const Placer placer(store_, use_, kGeometry, 8);
  for (std::uint64_t first = 4032; first < 4352; ++first) {
    for (std::uint64_t last = first; (last >> 6) == (first >> 6); ++last) {
      expect_cost(placer, first, last, count_page_by_page(owner, first, last), {0, 2, UINT64_MAX});
      if (HasFailure()) return;  // the first failing range is enough
    }
  }
  arena_.pages.check_invariants();
}

// With standby mappings in the pages and no recalled chunk, cost_of reads the bitmaps and the standby mappings'
// chunks; with a chunk recalled anywhere it walks every chunk. Both must agree, for every range and bound, on a
// layout of active places and standby mappings (of idle and of used chunks) of 1-5 pages with gaps, across a
// leaf boundary (4096 pages).
TEST_F(PlacementTest, TheCostWithStandbyMappingsFromTheBitmapsIsTheWalks) {
  std::uint64_t seed = 11;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  std::uint64_t elsewhere = 6000;  // where the standby mappings' chunks are active
  for (std::uint64_t p = 4060; p < 4140;) {
    const std::uint64_t pages = 1 + next() % 5, kind = next() % 6;
    if (kind == 0) {  // a gap
      p += pages;
      continue;
    }
    const auto users = static_cast<std::uint32_t>(next() % 2);
    if (kind <= 2) {  // a standby mapping
      const ChunkId id = mapped(elsewhere, pages, users);
      elsewhere += pages;
      arena_.pages.insert(PageNumber{p}, id, Pages{pages});
      arena_.pages.set_active(PageNumber{p}, false);
      store_[id].standby.push_back({arena_.id, PageNumber{p}});
    } else {
      mapped(p, pages, users);
    }
    p += pages;
  }
  arena_.pages.check_invariants();
  const Placer placer(store_, use_, kGeometry, 8);
  struct Case {
    std::uint64_t first, last, bound;
    Placer::Cost cost;
  };
  std::vector<Case> cases;
  std::uint64_t with_standby = 0;
  for (std::uint64_t first = 4050; first < 4150; ++first) {
    for (std::uint64_t last = first; last < 4150; last += 1 + last % 3) {
      for (const std::uint64_t bound : {std::uint64_t{0}, std::uint64_t{2}, std::uint64_t{5}, UINT64_MAX}) {
        cases.push_back({first, last, bound, placer.cost_of(arena_, PageNumber{first}, PageNumber{last}, Pages{bound})});
        with_standby += cases.back().cost.standby != 0 ? 1 : 0;
      }
    }
  }
  EXPECT_GT(with_standby, cases.size() / 4) << "the layout puts standby mappings in many of the ranges";
  // A recalled chunk outside every range: cost_of walks.
  const ChunkId far = mapped(8000, 1, /*users=*/1);
  store_[far].on_peer = true;
  store_.recall(far);
  ASSERT_FALSE(store_.recalled().empty());
  for (const Case& k : cases) {
    const Placer::Cost walked = placer.cost_of(arena_, PageNumber{k.first}, PageNumber{k.last}, Pages{k.bound});
    EXPECT_EQ(k.cost.unmapped, walked.unmapped) << k.first << ".." << k.last << " bound " << k.bound;
    EXPECT_EQ(k.cost.pinned_waste, walked.pinned_waste) << k.first << ".." << k.last << " bound " << k.bound;
    EXPECT_EQ(k.cost.standby, walked.standby) << k.first << ".." << k.last << " bound " << k.bound;
  }
}

TEST_F(PlacementTest, StandbyMappingsInThePagesAreCountedEitherKind) {
  // Pages 0-1: the active place of an idle chunk; pages 2-3: a standby mapping of an idle chunk active at
  // 10-11 (taken back: counts as mapped); pages 4-5: a standby mapping of a used chunk active at 20-21
  // (unmapped first: counts as unmapped).
  mapped(0, 2, /*users=*/0);
  const ChunkId idle = mapped(10, 2, /*users=*/0);
  arena_.pages.insert(PageNumber{2}, idle, Pages{2});
  arena_.pages.set_active(PageNumber{2}, false);  // a standby mapping, as Stitcher::to_standby leaves it
  store_[idle].standby.push_back({arena_.id, PageNumber{2}});
  const ChunkId used = mapped(20, 2, /*users=*/1);
  arena_.pages.insert(PageNumber{4}, used, Pages{2});
  arena_.pages.set_active(PageNumber{4}, false);
  store_[used].standby.push_back({arena_.id, PageNumber{4}});
  const Placer placer(store_, use_, kGeometry, 8);
  const Placer::Cost c = placer.cost_of(arena_, PageNumber{0}, PageNumber{5});
  EXPECT_EQ(c.standby, 2u);
  EXPECT_EQ(c.unmapped, Pages{2});
  EXPECT_EQ(placer.cost_of(arena_, PageNumber{0}, PageNumber{1}).standby, 0u);
}

// choose() prices each place against the best place's unmapped pages and stops counting past them: on random
// layouts and free ranges it must still return a place that no candidate beats (fewer pages to map, then fewer
// pages stranded), as an unbounded pricing of every candidate's start and end finds.
TEST_F(PlacementTest, TheChosenPlaceIsTheBestOfEveryCandidate) {
  random_layout(11, 0, 60, [](auto& next) { return 1 + next() % 4; }, 3);
  // Used space cut into the arena's 64 pages at random: free ranges of 1..6 pages between used ones.
  std::uint64_t seed = 5, p = 0;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  while (p < 64) {
    const std::uint64_t used_bytes = std::min<std::uint64_t>(64 - p, 1 + next() % 3) * kPage - (next() % 2) * 4096;
    occupy(p * kPage, used_bytes);
    p = (p * kPage + used_bytes + (1 + next() % 6) * kPage) / kPage;
  }
  const Placer placer(store_, use_, kGeometry, 8);
  auto better = [](const Placer::Cost& a, const Placer::Cost& b) {
    return a.unmapped < b.unmapped || (a.unmapped == b.unmapped && a.pinned_waste < b.pinned_waste);
  };
  for (const std::uint64_t bytes : {std::uint64_t{512}, 300 * kKiB, kPage, kPage + 4096, 3 * kPage, 5 * kPage - 512}) {
    Placer::Cost best{Pages::max(), Pages{0}};
    std::uint64_t candidates = 0;
    arena_.free.best_fit(bytes, 8, [&](const FreeRange& r) {
      ++candidates;
      for (const std::uint64_t at : {r.offset, r.offset + r.size_bytes - bytes}) {
        const Placer::Cost c = placer.cost_of(arena_, kGeometry.first_page(at), kGeometry.last_page(at, bytes));
        if (better(c, best)) best = c;
      }
      return false;
    });
    const Placer::Placement got = choose(placer, bytes);
    if (candidates == 0) {
      EXPECT_EQ(got.range.size_bytes, 0u) << bytes << " B";
      continue;
    }
    EXPECT_FALSE(better(best, got.cost)) << bytes << " B";
    EXPECT_FALSE(better(got.cost, best)) << bytes << " B";
  }
}

}  // namespace
}  // namespace gmlake::engine
