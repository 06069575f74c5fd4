// PageMap (src/policies/gmlake/page_map.h) on its own: which chunk backs which pages of an arena.
#include "policies/gmlake/page_map.h"

#include <gtest/gtest.h>

#include <vector>

namespace gmlake::engine {
namespace {

using Runs = std::vector<std::pair<std::uint64_t, std::uint64_t>>;

Runs gaps(const PageMap& m, std::uint64_t first, std::uint64_t last) {
  Runs out;
  m.for_each_gap(first, last, [&](std::uint64_t p, std::uint64_t n) { out.emplace_back(p, n); });
  return out;
}

TEST(PageMapTest, AnEmptyMapIsOneGap) {
  PageMap m;
  EXPECT_EQ(m.unmapped_pages(3, 9), 7u);
  EXPECT_EQ(gaps(m, 3, 9), (Runs{{3, 7}}));
  EXPECT_EQ(m.next_mapped_after(0), UINT64_MAX);
}

TEST(PageMapTest, ChunksOverlappingARangeAreVisitedInOrderIncludingOneStartingBeforeIt) {
  PageMap m;
  m.insert(0, 7, 4);   // pages 0..3
  m.insert(6, 8, 2);   // pages 6..7
  m.insert(10, 9, 1);  // page 10
  std::vector<ChunkId> seen;
  m.for_each(2, 10, [&](std::uint64_t, const PageMap::Entry& e) { seen.push_back(e.chunk); });
  EXPECT_EQ(seen, (std::vector<ChunkId>{7, 8, 9}));
  seen.clear();
  m.for_each(4, 5, [&](std::uint64_t, const PageMap::Entry& e) { seen.push_back(e.chunk); });
  EXPECT_TRUE(seen.empty());
}

TEST(PageMapTest, GapsAndUnmappedPagesAreWhatNoChunkCovers) {
  PageMap m;
  m.insert(0, 7, 4);
  m.insert(6, 8, 2);
  EXPECT_EQ(gaps(m, 2, 9), (Runs{{4, 2}, {8, 2}}));
  EXPECT_EQ(m.unmapped_pages(2, 9), 4u);
  EXPECT_EQ(m.unmapped_pages(0, 3), 0u);
  EXPECT_EQ(m.next_mapped_after(3), 6u);
  EXPECT_EQ(m.next_mapped_after(6), UINT64_MAX);
}

TEST(PageMapTest, ErasingAChunkUnmapsItsPages) {
  PageMap m;
  m.insert(4, 1, 8);
  EXPECT_EQ(m.mapped_chunks(), 1u);
  m.erase(4);
  EXPECT_EQ(m.mapped_chunks(), 0u);
  EXPECT_EQ(m.unmapped_pages(4, 11), 8u);
}

TEST(PageMapTest, AWalkUntilStopsAtTheFirstChunkItsVisitorRefuses) {
  PageMap m;
  m.insert(0, 7, 2);
  m.insert(2, 8, 2);
  m.insert(4, 9, 2);
  std::vector<ChunkId> seen;
  m.for_each_until(1, 5, [&](std::uint64_t, const PageMap::Entry& e) {
    seen.push_back(e.chunk);
    return e.chunk != 8;
  });
  EXPECT_EQ(seen, (std::vector<ChunkId>{7, 8}));
}

TEST(PageMapTest, ChunksAcrossLeavesAndFarApartAreWalkedAndFound) {
  PageMap m;
  m.insert(4090, 1, 12);     // pages 4090..4101: across the first two leaves
  m.insert(4102, 2, 3);      // right after it
  m.insert(1u << 20, 3, 2);  // far away, leaves between never made
  m.check_invariants();
  std::vector<std::pair<std::uint64_t, ChunkId>> seen;
  m.for_each(4095, (1u << 20) + 1, [&](std::uint64_t p, const PageMap::Entry& e) { seen.emplace_back(p, e.chunk); });
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint64_t, ChunkId>>{{4090, 1}, {4102, 2}, {1u << 20, 3}}));
  EXPECT_EQ(m.next_mapped_after(4095), 4102u);  // the chunk covering 4095 is skipped
  EXPECT_EQ(m.next_mapped_after(4104), std::uint64_t{1} << 20);
  EXPECT_EQ(m.next_mapped_after(4104, 9000), UINT64_MAX);  // none up to 9000
  EXPECT_EQ(m.unmapped_pages(4080, 4110), 31u - 15u);
  m.erase(4090);
  m.erase(4091);  // no chunk starts there: nothing happens
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 2u);
  EXPECT_EQ(m.unmapped_pages(4080, 4110), 31u - 3u);
  std::uint64_t all = 0;
  m.for_all([&](std::uint64_t, const PageMap::Entry&) { ++all; });
  EXPECT_EQ(all, 2u);
}

}  // namespace
}  // namespace gmlake::engine
