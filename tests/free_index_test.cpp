// FreeIndex (src/policies/gmlake/free_index.h) on its own: the free ranges of one arena, through its public
// calls only (take, give, best_fit, ranges, used, extent), so the tests hold whatever the bins look like inside.
#include "policies/gmlake/free_index.h"

#include <gtest/gtest.h>

#include <stdexcept>
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

// The free range that contains `offset` (tests give take() the range best_fit would have visited).
FreeRange range_at(const FreeIndex& index, std::uint64_t offset) {
  for (const FreeRange& r : index.ranges()) {
    if (r.offset <= offset && offset < r.offset + r.size_bytes) return r;
  }
  ADD_FAILURE() << "no free range holds offset " << offset;
  return {};
}

// Takes [offset, offset + size) out of whatever free range holds it.
PieceId take_at(FreeIndex& index, std::uint64_t offset, std::uint64_t size_bytes) {
  return index.take(range_at(index, offset), offset, size_bytes);
}

TEST(FreeIndexTest, TakingFromTheMiddleLeavesBothSidesFreeAndGivingBackCoalesces) {
  FreeIndex index(kCapacity);
  const PieceId piece = take_at(index, 4 * kMiB, 2 * kMiB);
  EXPECT_EQ(index.free_bytes(), kCapacity - 2 * kMiB);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                              {0, 4 * kMiB}, {6 * kMiB, kCapacity - 6 * kMiB}}));
  EXPECT_TRUE(index.used(piece));
  EXPECT_EQ(index.extent(piece).offset, 4 * kMiB);
  EXPECT_EQ(index.extent(piece).size_bytes, 2 * kMiB);
  index.check_invariants();

  index.give(piece);  // touches both neighbours: one range again
  EXPECT_EQ(index.range_count(), 1u);
  EXPECT_EQ(index.free_bytes(), kCapacity);
  EXPECT_FALSE(index.used(piece));
  index.check_invariants();
}

TEST(FreeIndexTest, GivingBackCoalescesWithTheLowerTheUpperBothOrNeither) {
  FreeIndex index(kCapacity);
  // Four used pieces end to end, then the rest of the capacity free.
  std::vector<PieceId> p;
  for (std::uint64_t i = 0; i < 4; ++i) p.push_back(take_at(index, i * kMiB, kMiB));
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{4 * kMiB, kCapacity - 4 * kMiB}}));
  index.give(p[1]);  // neither neighbour free
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                              {1 * kMiB, kMiB}, {4 * kMiB, kCapacity - 4 * kMiB}}));
  index.check_invariants();
  index.give(p[3]);  // the upper neighbour is free
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                              {1 * kMiB, kMiB}, {3 * kMiB, kCapacity - 3 * kMiB}}));
  index.check_invariants();
  index.give(p[0]);  // the upper neighbour is free, none below: the range now starts at 0
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{
                              {0, 2 * kMiB}, {3 * kMiB, kCapacity - 3 * kMiB}}));
  index.check_invariants();
  index.give(p[2]);  // both: one range over everything
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, kCapacity}}));
  EXPECT_EQ(index.free_bytes(), kCapacity);
  index.check_invariants();
}

TEST(FreeIndexTest, GivingBackNonTouchingRangesKeepsThemApart) {
  FreeIndex index(kCapacity);
  const PieceId a = take_at(index, 0, 512);
  const PieceId b = take_at(index, 512, 2 * kMiB - 512);
  const PieceId c = take_at(index, 2 * kMiB, 1024);
  const PieceId rest = take_at(index, 2 * kMiB + 1024, kCapacity - 2 * kMiB - 1024);
  EXPECT_EQ(index.free_bytes(), 0u);
  EXPECT_EQ(index.range_count(), 0u);
  index.give(a);
  index.give(c);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 512}, {2 * kMiB, 1024}}));
  index.give(b);  // fills the gap: all three become one
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, 2 * kMiB + 1024}}));
  EXPECT_TRUE(index.used(rest));
  index.check_invariants();
}

TEST(FreeIndexTest, AStaleOrForeignRangeOrPieceIsRefusedAndChangesNothing) {
  FreeIndex index(kCapacity);
  const FreeRange whole = range_at(index, 0);
  const PieceId piece = index.take(whole, 0, kMiB);
  // `whole` no longer describes a free range: its size changed.
  EXPECT_THROW(index.take(whole, 2 * kMiB, kMiB), std::logic_error);
  // A range outside the free range given.
  EXPECT_THROW(index.take(range_at(index, kMiB), 0, kMiB), std::logic_error);
  // A piece that is free, or was never handed out.
  index.give(piece);
  EXPECT_THROW(index.give(piece), std::logic_error);
  EXPECT_THROW(index.give(12345), std::logic_error);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, kCapacity}}));
  index.check_invariants();
}

TEST(FreeIndexTest, ManyRandomTakesAndGivesKeepTheTiling) {
  FreeIndex index(kCapacity);
  std::vector<PieceId> live;
  std::uint64_t seed = 12345;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  std::uint64_t used_bytes = 0;
  for (int step = 0; step < 2000; ++step) {
    if (!live.empty() && (next() % 3 == 0 || index.free_bytes() < kMiB)) {
      const std::size_t k = next() % live.size();
      used_bytes -= index.extent(live[k]).size_bytes;
      index.give(live[k]);
      live[k] = live.back();
      live.pop_back();
    } else {
      const std::uint64_t size = ((next() % 2048) + 1) * 512;
      const Fit fit = index.best_fit(size, 8, [](const FreeRange&) { return true; });
      if (!fit.accepted) continue;
      // At its start, its end, or inside, as the allocator places blocks.
      const std::uint64_t room = fit.range.size_bytes - size;
      const std::uint64_t offset = fit.range.offset + (next() % 3 == 0 ? 0 : (next() % (room / 512 + 1)) * 512);
      live.push_back(index.take(fit.range, offset, size));
      used_bytes += size;
    }
    ASSERT_EQ(index.free_bytes() + used_bytes, kCapacity);
    if (step % 50 == 0) index.check_invariants();
  }
  for (const PieceId p : live) index.give(p);
  EXPECT_EQ(pairs(index), (std::vector<std::pair<std::uint64_t, std::uint64_t>>{{0, kCapacity}}));
  index.check_invariants();
}

TEST(FreeIndexTest, BestFitFindsARangeLargeEnoughOrNothing) {
  FreeIndex index(kCapacity);
  const PieceId low = take_at(index, 0, 1 * kMiB);
  take_at(index, 1 * kMiB, 7 * kMiB);
  const PieceId mid = take_at(index, 8 * kMiB, 4 * kMiB);
  take_at(index, 12 * kMiB, kCapacity - 12 * kMiB);
  index.give(low);
  index.give(mid);

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

// first_candidate is best_fit's first visit (the Placer's fast path takes it alone when it costs nothing): the
// same range for every request size, whatever the bins hold, over many random takes and gives.
TEST(FreeIndexTest, TheFirstCandidateIsTheRangeBestFitVisitsFirst) {
  FreeIndex index(kCapacity);
  std::vector<PieceId> live;
  std::uint64_t seed = 777;
  auto next = [&] { return seed = seed * 6364136223846793005ull + 1442695040888963407ull, seed >> 33; };
  int compared = 0;
  for (int step = 0; step < 3000; ++step) {
    const std::uint64_t size = ((next() % 4096) + 1) * 512;
    const Fit visited = index.best_fit(size, 64, [](const FreeRange&) { return false; });  // the first visit
    const FreeRange first = index.first_candidate(size);
    ASSERT_EQ(first.size_bytes, visited.range.size_bytes) << "step " << step << ", request " << size;
    if (first.size_bytes != 0) {
      ASSERT_EQ(first.offset, visited.range.offset) << "step " << step;
      ASSERT_EQ(first.piece, visited.range.piece) << "step " << step;
      ++compared;
    }
    if (!live.empty() && (next() % 2 == 0 || first.size_bytes == 0)) {
      const std::size_t k = next() % live.size();
      index.give(live[k]);
      live[k] = live.back();
      live.pop_back();
    } else if (first.size_bytes != 0) {
      const std::uint64_t room = first.size_bytes - size;
      const std::uint64_t offset = first.offset + (next() % 2 == 0 ? 0 : (next() % (room / 512 + 1)) * 512);
      live.push_back(index.take(first, offset, size));
    }
  }
  EXPECT_GT(compared, 2000);
  for (const PieceId p : live) index.give(p);
  index.check_invariants();
}

}  // namespace
}  // namespace gmlake::engine
