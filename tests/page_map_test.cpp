// PageMap (src/policies/gmlake/page_map.h) on its own: which chunk backs which pages of an arena. Every test
// checks the map's invariant after each step.
#include "policies/gmlake/page_map.h"

#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"

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
  m.check_invariants();
  EXPECT_EQ(m.unmapped_pages(3, 9), 7u);
  EXPECT_EQ(gaps(m, 3, 9), (Runs{{3, 7}}));
  EXPECT_EQ(m.next_mapped_after(0), UINT64_MAX);
}

TEST(PageMapTest, ChunksOverlappingARangeAreVisitedInOrderIncludingOneStartingBeforeIt) {
  PageMap m;
  m.insert(0, 7, 4);   // pages 0..3
  m.check_invariants();
  m.insert(6, 8, 2);   // pages 6..7
  m.check_invariants();
  m.insert(10, 9, 1);  // page 10
  m.check_invariants();
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
  m.check_invariants();
  EXPECT_EQ(gaps(m, 2, 9), (Runs{{4, 2}, {8, 2}}));
  EXPECT_EQ(m.unmapped_pages(2, 9), 4u);
  EXPECT_EQ(m.unmapped_pages(0, 3), 0u);
  EXPECT_EQ(m.next_mapped_after(3), 6u);
  EXPECT_EQ(m.next_mapped_after(6), UINT64_MAX);
}

TEST(PageMapTest, ErasingAChunkUnmapsItsPages) {
  PageMap m;
  m.insert(4, 1, 8);
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 1u);
  m.erase(4);
  m.check_invariants();
  EXPECT_EQ(m.mapped_chunks(), 0u);
  EXPECT_EQ(m.unmapped_pages(4, 11), 8u);
}

// A chunk mapped over pages another chunk backs breaks the invariant: insert refuses it at once where
// GMLAKE_DCHECK is on; elsewhere the entry goes in and check_invariants finds the overlap.
TEST(PageMapTest, OverlappingEntriesFailTheCheck) {
  PageMap m;
  m.insert(4, 1, 4);  // pages 4..7
  m.check_invariants();
  if (GMLAKE_DCHECK_IS_ON) {
    test::expect_broken([&] { m.insert(6, 2, 2); }, "a chunk is mapped over pages another chunk backs");
    test::expect_broken([&] { m.insert(9, 2, 0); }, "a chunk is mapped over pages another chunk backs");
    m.check_invariants();  // nothing went in
    return;
  }
  m.insert(6, 2, 2);  // pages 6..7: inside chunk 1
  test::expect_broken([&] { m.check_invariants(); }, "page map entries overlap at page 6");
  m.erase(6);
  m.check_invariants();
  m.insert(9, 2, 0);
  test::expect_broken([&] { m.check_invariants(); }, "a page map entry at page 9 backs no page");
}

}  // namespace
}  // namespace gmlake::engine
