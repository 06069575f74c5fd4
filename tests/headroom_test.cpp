// Headroom (src/policies/gmlake/headroom.h): the four allowances above the highest allocated bytes, as tables of
// reserved bytes against the bound H + H / 1000 x permille, and what a full device and empty_cache do to them.
// Its use by ChunkSource (a new chunk within the headroom rather than a move) is chunk_source_test's.
#include "policies/gmlake/headroom.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace gmlake::engine {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

TEST(HeadroomTest, EachAllowanceIsTheHighestAllocatedBytesPlusItsThousandths) {
  Headroom h({.plain = 7, .waiting = 50, .move = 100, .lag = 20});
  h.note_allocated(1000 * kMiB);  // H = 1000 MiB: plain 1007 MiB, lag 1020, waiting 1050 MiB, move 1100 MiB
  struct Row {
    std::uint64_t reserved_mib, more_mib;
    bool plain, waiting, move, lag;
  };
  const Row rows[] = {
      {0, 1000, true, true, true, true},      // nothing above H
      {1000, 7, true, true, true, true},      // exactly the plain bound
      {1000, 8, false, true, true, true},     // one MiB past it
      {1019, 1, false, true, true, true},     // at the lag bound
      {1020, 1, false, true, true, false},    // past it
      {1049, 1, false, true, true, false},
      {1050, 1, false, false, true, false},   // past the waiting bound
      {1100, 0, false, false, true, false},   // at the move bound
      {1100, 1, false, false, false, false},
  };
  for (const Row& r : rows) {
    const std::uint64_t reserved = r.reserved_mib * kMiB;
    const std::uint64_t more = r.more_mib * kMiB;
    EXPECT_EQ(h.plain_allows(reserved, more), r.plain) << r.reserved_mib << " + " << r.more_mib;
    EXPECT_EQ(h.waiting_allows(reserved, more), r.waiting) << r.reserved_mib << " + " << r.more_mib;
    EXPECT_EQ(h.move_allows(reserved, more), r.move) << r.reserved_mib << " + " << r.more_mib;
    EXPECT_EQ(h.lag_allows(reserved, more), r.lag) << r.reserved_mib << " + " << r.more_mib;
    EXPECT_EQ(h.within(reserved, more, 7), r.plain);
  }
}

TEST(HeadroomTest, AHugePermilleIsNoBoundAndDoesNotWrapAround) {
  Headroom h({.lag = 1'000'000});  // lag_headroom_permille's "no bound"
  h.note_allocated(80'000 * kMiB);
  EXPECT_TRUE(h.lag_allows(1'000'000 * kMiB, kMiB));
  EXPECT_TRUE(h.within(~std::uint64_t{0} / 2, 0, ~std::uint64_t{0})) << "H / 1000 x permille overflows: no bound";
  EXPECT_FALSE(h.within(80'001 * kMiB, 0, 0)) << "0: nothing above H";
}

TEST(HeadroomTest, AFullDeviceLeavesTheLagAllowance) {
  Headroom h({.plain = 7, .lag = 20});
  h.note_allocated(1000 * kMiB);
  h.device_found_full();
  EXPECT_FALSE(h.plain_allows(1000 * kMiB, kMiB));
  EXPECT_TRUE(h.lag_allows(1000 * kMiB, kMiB)) << "a refused lag create is the caller's to remember (lag_refused)";
}

TEST(HeadroomTest, TheHighestAllocatedBytesNeverFall) {
  Headroom h({.plain = 10});
  EXPECT_EQ(h.allocated_high_bytes(), 0u);
  EXPECT_FALSE(h.plain_allows(0, 1)) << "nothing allocated yet: no headroom at all";
  h.note_allocated(500 * kMiB);
  h.note_allocated(200 * kMiB);  // a lower figure (frees, or a peak reset) leaves the highest
  EXPECT_EQ(h.allocated_high_bytes(), 500 * kMiB);
  EXPECT_TRUE(h.plain_allows(500 * kMiB, 5 * kMiB));
  EXPECT_FALSE(h.plain_allows(500 * kMiB, 6 * kMiB));
  EXPECT_NO_THROW(h.check_invariants(500 * kMiB));
  EXPECT_THROW(h.check_invariants(501 * kMiB), std::logic_error) << "allocated bytes past the highest seen";
}

TEST(HeadroomTest, AFullDeviceSpendsThePlainAndWaitingAllowancesUntilItHasRoom) {
  Headroom h({.plain = 7, .waiting = 50, .move = 50});
  h.note_allocated(1000 * kMiB);
  ASSERT_TRUE(h.plain_allows(1000 * kMiB, kMiB));
  ASSERT_TRUE(h.waiting_applies());
  h.device_found_full();
  EXPECT_TRUE(h.device_full());
  EXPECT_FALSE(h.plain_allows(1000 * kMiB, kMiB));
  EXPECT_FALSE(h.waiting_applies());
  EXPECT_TRUE(h.move_allows(1000 * kMiB, kMiB)) << "decide() reads device_full for growth for time itself";
  h.device_has_room();  // empty_cache
  EXPECT_FALSE(h.device_full());
  EXPECT_TRUE(h.plain_allows(1000 * kMiB, kMiB));
  EXPECT_TRUE(h.waiting_applies());
}

TEST(HeadroomTest, TheWaitingAllowanceAppliesOnlyAboveAPlainOneThatIsOn) {
  struct Row {
    std::uint64_t plain, waiting;
    bool applies;
  };
  const Row rows[] = {
      {7, 0, false},   // the default: off
      {7, 7, false},   // no larger than plain: nothing to add
      {7, 8, true},
      {0, 50, false},  // plain off (memory over calls): no waiting allowance either
  };
  for (const Row& r : rows) {
    Headroom h({.plain = r.plain, .waiting = r.waiting, .move = 50});
    h.note_allocated(kMiB);
    EXPECT_EQ(h.waiting_applies(), r.applies) << r.plain << " / " << r.waiting;
  }
}

TEST(HeadroomTest, PlainZeroMeansEveryIdlePageMoves) {
  Headroom h({.plain = 0, .waiting = 0, .move = 50});
  h.note_allocated(1000 * kMiB);
  EXPECT_FALSE(h.plain_allows(0, kMiB)) << "off, even far under the highest allocated bytes";
  EXPECT_TRUE(h.move_allows(1000 * kMiB, 50 * kMiB));
}

}  // namespace
}  // namespace gmlake::engine
