// PageMap (src/policies/gmlake/page_map.h) on its own: which chunk backs which pages of an arena. Every test
// checks the map's invariant after each step.
#include "policies/gmlake/page_map.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "expect_error.h"

namespace gmlake::engine {
namespace {

// Runs of unmapped pages as (first page, pages), raw numbers: the expectations read as the page numbers they are.
using Runs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

Runs gaps(const PageMap& m, std::uint64_t first, std::uint64_t last) {
  Runs out;
  m.for_each_gap(PageNumber{first}, PageNumber{last},
                 [&](PageNumber p, Pages n) { out.emplace_back(p.value(), n.count()); });
  return out;
}

TEST(PageMapTest, AnEmptyMapIsOneGap) {
  PageMap m;
  m.check_invariants();
  EXPECT_EQ(m.unmapped_pages(PageNumber{3}, PageNumber{9}), Pages{7});
  EXPECT_EQ(gaps(m, 3, 9), (Runs{{3, 7}}));
  EXPECT_EQ(m.next_mapped_after(PageNumber{0}), PageNumber::max());
}

TEST(PageMapTest, ChunksOverlappingARangeAreVisitedInOrderIncludingOneStartingBeforeIt) {
  PageMap m;
  m.insert(PageNumber{0}, 7, Pages{4});   // pages 0..3
  m.check_invariants();
  m.insert(PageNumber{6}, 8, Pages{2});   // pages 6..7
  m.check_invariants();
  m.insert(PageNumber{10}, 9, Pages{1});  // page 10
  m.check_invariants();
  std::vector<ChunkId> seen;
  m.for_each(PageNumber{2}, PageNumber{10}, [&](PageNumber, const PageMap::Entry& e) { seen.push_back(e.chunk); });
  EXPECT_EQ(seen, (std::vector<ChunkId>{7, 8, 9}));
  seen.clear();
  m.for_each(PageNumber{4}, PageNumber{5}, [&](PageNumber, const PageMap::Entry& e) { seen.push_back(e.chunk); });
  EXPECT_TRUE(seen.empty());
}

TEST(PageMapTest, GapsAndUnmappedPagesAreWhatNoChunkCovers) {
  PageMap m;
  m.insert(PageNumber{0}, 7, Pages{4});
  m.insert(PageNumber{6}, 8, Pages{2});
  m.check_invariants();
  EXPECT_EQ(gaps(m, 2, 9), (Runs{{4, 2}, {8, 2}}));
  EXPECT_EQ(m.unmapped_pages(PageNumber{2}, PageNumber{9}), Pages{4});
  EXPECT_EQ(m.unmapped_pages(PageNumber{0}, PageNumber{3}), Pages{0});
  EXPECT_EQ(m.next_mapped_after(PageNumber{3}), PageNumber{6});
  EXPECT_EQ(m.next_mapped_after(PageNumber{6}), PageNumber::max());
}

TEST(PageMapTest, ErasingAChunkUnmapsItsPages) {
  PageMap m;
  m.insert(PageNumber{4}, 1, Pages{8});
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 1u);
  m.erase(PageNumber{4});
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 0u);
  EXPECT_EQ(m.unmapped_pages(PageNumber{4}, PageNumber{11}), Pages{8});
}

TEST(PageMapTest, AWalkUntilStopsAtTheFirstChunkItsVisitorRefuses) {
  PageMap m;
  m.insert(PageNumber{0}, 7, Pages{2});
  m.insert(PageNumber{2}, 8, Pages{2});
  m.insert(PageNumber{4}, 9, Pages{2});
  std::vector<ChunkId> seen;
  m.for_each_until(PageNumber{1}, PageNumber{5}, [&](PageNumber, const PageMap::Entry& e) {
    seen.push_back(e.chunk);
    return e.chunk != 8;
  });
  EXPECT_EQ(seen, (std::vector<ChunkId>{7, 8}));
}

TEST(PageMapTest, ChunksAcrossLeavesAndFarApartAreWalkedAndFound) {
  PageMap m;
  m.insert(PageNumber{4090}, 1, Pages{12});     // pages 4090..4101: across the first two leaves
  m.insert(PageNumber{4102}, 2, Pages{3});      // right after it
  m.insert(PageNumber{1u << 20}, 3, Pages{2});  // far away, leaves between never made
  m.check_invariants();
  std::vector<std::pair<std::uint64_t, ChunkId>> seen;
  m.for_each(PageNumber{4095}, PageNumber{(1u << 20) + 1},
             [&](PageNumber p, const PageMap::Entry& e) { seen.emplace_back(p.value(), e.chunk); });
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint64_t, ChunkId>>{{4090, 1}, {4102, 2}, {1u << 20, 3}}));
  EXPECT_EQ(m.next_mapped_after(PageNumber{4095}), PageNumber{4102});  // the chunk covering 4095 is skipped
  EXPECT_EQ(m.next_mapped_after(PageNumber{4104}), PageNumber{std::uint64_t{1} << 20});
  EXPECT_EQ(m.next_mapped_after(PageNumber{4104}, PageNumber{9000}), PageNumber::max());  // none up to 9000
  EXPECT_EQ(m.unmapped_pages(PageNumber{4080}, PageNumber{4110}), Pages{31 - 15});
  m.erase(PageNumber{4090});
  m.erase(PageNumber{4091});  // no chunk starts there: nothing happens
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 2u);
  EXPECT_EQ(m.unmapped_pages(PageNumber{4080}, PageNumber{4110}), Pages{31 - 3});
  std::uint64_t all = 0;
  m.for_all([&](PageNumber, const PageMap::Entry&) { ++all; });
  EXPECT_EQ(all, 2u);
}

TEST(PageMapTest, AMappingIsActiveWhenInsertedAndTurnsStandbyAndBackWhole) {
  PageMap m;
  m.insert(PageNumber{4}, 1, Pages{3});  // pages 4..6
  m.insert(PageNumber{7}, 2, Pages{1});
  m.check_invariants();
  auto active = [&](std::uint64_t first, std::uint64_t last) {
    std::vector<bool> out;
    m.for_each(PageNumber{first}, PageNumber{last},
               [&](PageNumber, const PageMap::Entry& e) { out.push_back(e.active); });
    return out;
  };
  EXPECT_EQ(active(4, 7), (std::vector<bool>{true, true}));
  m.set_active(PageNumber{4}, false);  // every page of chunk 1, read from any of them
  m.check_invariants();
  EXPECT_EQ(active(6, 7), (std::vector<bool>{false, true}));
  EXPECT_EQ(active(5, 5), (std::vector<bool>{false}));
  m.set_active(PageNumber{5}, true);  // not a mapping's first page: nothing changes
  EXPECT_EQ(active(4, 4), (std::vector<bool>{false}));
  m.set_active(PageNumber{4}, true);
  m.check_invariants();
  EXPECT_EQ(active(4, 7), (std::vector<bool>{true, true}));
  m.erase(PageNumber{4});
  m.insert(PageNumber{4}, 3, Pages{2});  // a new mapping on the pages is active again
  EXPECT_EQ(active(4, 5), (std::vector<bool>{true}));
  m.check_invariants();
}

TEST(PageMapTest, AtGivesTheMappingThatBacksAPageAcrossALeafEnd) {
  PageMap m;
  m.insert(PageNumber{4094}, 1, Pages{4});   // pages 4094..4097: across the first leaf's end
  m.insert(PageNumber{4100}, 2, Pages{2});   // 4100..4101, turned standby
  m.set_active(PageNumber{4100}, false);
  m.insert(PageNumber{70}, 3, Pages{1});
  m.check_invariants();
  const auto [start, e] = m.at(PageNumber{4096});
  EXPECT_EQ(start, PageNumber{4094});
  EXPECT_EQ(e.chunk, 1u);
  EXPECT_EQ(m.at(PageNumber{4098}).second.chunk, kNoChunk);
  m.erase(PageNumber{4094});
  m.check_invariants();
  EXPECT_EQ(m.at(PageNumber{4096}).second.chunk, kNoChunk);
  EXPECT_EQ(m.at(PageNumber{70}).second.chunk, 3u);
}

// A chunk mapped over pages another chunk backs breaks the invariant: insert refuses it at once where
// GMLAKE_DCHECK is on; elsewhere the entry goes in over the other's pages and check_invariants finds it.
// The idle marks ChunkUse keeps (mark_idle, clear_idle) against a naive model: a tick per page, set over a span
// when it turns idle, and an idle flag per page. Random spans of whole chunks over 1-3 page chunks spread across
// two leaves, each marked where no page is idle, and random ranges cleared.
TEST(PageMapTest, IdleSpansGiveEachIdlePageTheTickItWasMarkedAtAndCountTheChunks) {
  constexpr std::uint64_t kBase = 4096 - 200, kPages = 400;  // across a leaf boundary
  PageMap m;
  std::vector<std::uint64_t> chunk_first(kPages);  // page -> the first page of its chunk (offset from kBase)
  for (std::uint64_t p = 0; p < kPages;) {
    const std::uint64_t n = std::min<std::uint64_t>(1 + (p * 7 + 3) % 3, kPages - p);
    m.insert(PageNumber{kBase + p}, static_cast<ChunkId>(p), Pages{n});
    for (std::uint64_t k = p; k < p + n; ++k) chunk_first[k] = p;
    p += n;
  }
  std::vector<std::uint64_t> tick_of(kPages, 0);
  std::vector<bool> idle(kPages, false);
  std::uint64_t rng = 12345, tick = 0;
  auto next = [&] { return rng = rng * 6364136223846793005ULL + 1442695040888963407ULL, rng >> 33; };
  for (int step = 0; step < 4000; ++step) {
    // A range of whole chunks.
    std::uint64_t a = chunk_first[next() % kPages], b = next() % kPages;
    if (b < a) std::swap(a, b);
    while (b + 1 < kPages && chunk_first[b + 1] == chunk_first[b]) ++b;
    const PageNumber first{kBase + a}, last{kBase + b};
    if (next() % 2 == 0) {
      std::uint64_t pages = 0, chunks = 0;
      for (std::uint64_t p = a; p <= b; ++p) {
        pages += idle[p] ? 1 : 0;
        chunks += idle[p] && chunk_first[p] == p ? 1 : 0;
        idle[p] = false;
      }
      const auto [cleared, cleared_chunks] = m.clear_idle(first, last);
      ASSERT_EQ(cleared, Pages{pages});
      ASSERT_EQ(cleared_chunks, chunks);
    } else if (std::none_of(idle.begin() + static_cast<std::ptrdiff_t>(a), idle.begin() + static_cast<std::ptrdiff_t>(b) + 1,
                            [](bool i) { return i; })) {
      ++tick;
      std::uint64_t chunks = 0;
      for (std::uint64_t p = a; p <= b; ++p) {
        idle[p] = true;
        tick_of[p] = tick;
        chunks += chunk_first[p] == p ? 1 : 0;
      }
      ASSERT_EQ(m.mark_idle(first, last, tick), chunks);
    }
    m.check_invariants();
    std::uint64_t first_idle = UINT64_MAX;
    for (std::uint64_t p = 0; p < kPages; ++p) {
      ASSERT_EQ(m.idle_at(PageNumber{kBase + p}), idle[p]) << "page " << p << " step " << step;
      if (idle[p]) ASSERT_EQ(m.idle_tick(PageNumber{kBase + p}), tick_of[p]) << "page " << p << " step " << step;
      if (idle[p] && first_idle == UINT64_MAX) first_idle = kBase + p;
    }
    ASSERT_EQ(m.first_idle(PageNumber{0}, PageNumber{kBase + kPages + 100}),
              first_idle == UINT64_MAX ? PageNumber::max() : PageNumber{first_idle});
  }
  EXPECT_EQ(m.starts(PageNumber{kBase}, PageNumber{kBase + kPages - 1}), m.mapped_chunks());
  // A mapping turned standby, or unmapped, is idle no more (the chunk at kBase has one page).
  m.clear_idle(PageNumber{kBase}, PageNumber{kBase + kPages - 1});
  m.mark_idle(PageNumber{kBase}, PageNumber{kBase + 1}, ++tick);
  m.set_active(PageNumber{kBase}, false);
  EXPECT_FALSE(m.idle_at(PageNumber{kBase}));
  EXPECT_TRUE(m.idle_at(PageNumber{kBase + 1}));
  m.erase(PageNumber{kBase + 1});
  EXPECT_FALSE(m.idle_at(PageNumber{kBase + 1}));
  m.check_invariants();
}

// word_bits against the pages one by one (at, idle_at): every range inside one word of a layout of active,
// standby and idle mappings of 1-70 pages (some across a word or the leaf boundary at 4096) with gaps, and a word
// past every leaf.
TEST(PageMapTest, TheBitsOfAWordAreEachPagesMappingAtItsPlace) {
  PageMap m;
  std::uint64_t seed = 5;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  ChunkId id = 0;
  for (std::uint64_t p = 3900; p < 4300;) {
    const std::uint64_t pages = 1 + next() % (next() % 3 == 0 ? 70 : 4);
    if (next() % 4 == 0) {  // a gap
      p += pages;
      continue;
    }
    m.insert(PageNumber{p}, id++, Pages{pages});
    if (const std::uint64_t kind = next() % 3; kind == 1) {
      m.set_active(PageNumber{p}, false);
    } else if (kind == 2) {
      m.mark_idle(PageNumber{p}, PageNumber{p + pages - 1}, id);
    }
    p += pages;
  }
  m.check_invariants();
  for (std::uint64_t first = 3840; first < 4352; ++first) {
    for (std::uint64_t last = first; (last >> 6) == (first >> 6); ++last) {
      std::uint64_t pages = 0, mapped = 0, active = 0, idle = 0;
      for (std::uint64_t p = first; p <= last; ++p) {
        const auto [start, e] = m.at(PageNumber{p});
        const std::uint64_t bit = std::uint64_t{1} << (p & 63);
        pages |= bit;
        if (e.chunk != kNoChunk) mapped |= bit;
        if (e.chunk != kNoChunk && e.active) active |= bit;
        if (m.idle_at(PageNumber{p})) idle |= bit;
      }
      const PageMap::WordBits bits = m.word_bits(PageNumber{first}, PageNumber{last});
      ASSERT_EQ(bits.pages, pages) << first << ".." << last;
      ASSERT_EQ(bits.mapped, mapped) << first << ".." << last;
      ASSERT_EQ(bits.active, active) << first << ".." << last;
      ASSERT_EQ(bits.idle, idle) << first << ".." << last;
    }
  }
  const PageMap::WordBits none = m.word_bits(PageNumber{1 << 20}, PageNumber{(1 << 20) + 63});
  EXPECT_EQ(none.pages, ~std::uint64_t{0});
  EXPECT_EQ(none.mapped | none.active | none.idle, 0u);
}

TEST(PageMapTest, OverlappingEntriesFailTheCheck) {
  PageMap m;
  m.insert(PageNumber{4}, 1, Pages{4});  // pages 4..7
  m.check_invariants();
  if (GMLAKE_DCHECK_IS_ON) {
    test::expect_broken([&] { m.insert(PageNumber{6}, 2, Pages{2}); },
                        "a chunk is mapped over pages another chunk backs");
    test::expect_broken([&] { m.insert(PageNumber{9}, 2, Pages{0}); },
                        "a chunk is mapped over pages another chunk backs");
    m.check_invariants();  // nothing went in
    return;
  }
  m.insert(PageNumber{9}, 3, Pages{0});  // an empty chunk records nothing
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 1u);
  m.insert(PageNumber{6}, 2, Pages{2});  // pages 6..7: inside chunk 1
  test::expect_broken([&] { m.check_invariants(); }, "page map slot 6 disagrees with the chunk at page 4");
}

}  // namespace
}  // namespace gmlake::engine
