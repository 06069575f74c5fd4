// FreeIndex (src/policies/gmlake/free_index.h) on its own: the free ranges of one arena, through its public
// calls only (take, give, best_fit, ranges), so the tests hold whatever the bins look like inside.
#include "policies/gmlake/free_index.h"

#include <gtest/gtest.h>

#include <vector>

#include "gmlake/units.h"

namespace gmlake::engine {
namespace {

constexpr std::uint64_t kCapacity = 64 * kMiB;

std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs(const FreeIndex& index) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const FreeRange& r : index.ranges()) out.emplace_back(r.offset, r.size_bytes);
  return out;
}

Fit first_fit(const FreeIndex& index, std::uint64_t size_bytes) {
  return index.best_fit(size_bytes, 64, [](const FreeRange&) { return true; });
}

TEST(FreeIndexTest, StartsAsOneFreeRangeOverTheWholeCapacity) {
  FreeIndex index(kCapacity);
  EXPECT_EQ(index.free_bytes(), kCapacity);
  EXPECT_EQ(index.range_count(), 1u);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, kCapacity}}));
  index.check_invariants();
}

TEST(FreeIndexTest, TakingFromTheMiddleLeavesBothSidesFreeAndGivingBackCoalesces) {
  FreeIndex index(kCapacity);
  index.take({0, kCapacity}, 4 * kMiB, 2 * kMiB);
  EXPECT_EQ(index.free_bytes(), kCapacity - 2 * kMiB);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                              {0, 4 * kMiB}, {6 * kMiB, kCapacity - 6 * kMiB}}));
  index.check_invariants();

  index.give(4 * kMiB, 2 * kMiB);  // touches both neighbours: one range again
  EXPECT_EQ(index.range_count(), 1u);
  EXPECT_EQ(index.free_bytes(), kCapacity);
  index.check_invariants();
}

TEST(FreeIndexTest, GivingBackNonTouchingRangesKeepsThemApart) {
  FreeIndex index(kCapacity);
  index.take({0, kCapacity}, 0, kCapacity);
  EXPECT_EQ(index.free_bytes(), 0u);
  EXPECT_EQ(index.range_count(), 0u);
  index.give(0, 512);
  index.give(2 * kMiB, 1024);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 512}, {2 * kMiB, 1024}}));
  index.give(512, 2 * kMiB - 512);  // fills the gap: all three become one
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 2 * kMiB + 1024}}));
  index.check_invariants();
}

TEST(FreeIndexTest, BestFitFindsARangeLargeEnoughOrNothing) {
  FreeIndex index(kCapacity);
  index.take({0, kCapacity}, 0, kCapacity);
  index.give(0, 1 * kMiB);
  index.give(8 * kMiB, 4 * kMiB);

  const Fit fit = first_fit(index, 3 * kMiB);
  EXPECT_TRUE(fit.accepted);
  EXPECT_EQ(fit.range.offset, 8 * kMiB);
  EXPECT_GE(fit.range.size_bytes, 3 * kMiB);

  const Fit small = first_fit(index, 512 * kKiB);
  EXPECT_TRUE(small.accepted);
  EXPECT_GE(small.range.size_bytes, 512 * kKiB);

  const Fit none = first_fit(index, 5 * kMiB);
  EXPECT_FALSE(none.accepted);
  EXPECT_EQ(none.range.size_bytes, 0u);
}

TEST(FreeIndexTest, ADecliningVisitorGetsTheFirstCandidateNotAccepted) {
  FreeIndex index(kCapacity);
  int visits = 0;
  const Fit fit = index.best_fit(1 * kMiB, 64, [&](const FreeRange&) {
    ++visits;
    return false;
  });
  EXPECT_FALSE(fit.accepted);
  EXPECT_EQ(fit.range.offset, 0u);
  EXPECT_EQ(fit.range.size_bytes, kCapacity);
  EXPECT_EQ(visits, 1);
}

}  // namespace
}  // namespace gmlake::engine
