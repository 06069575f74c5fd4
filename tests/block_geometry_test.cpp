// BlockGeometry (include/gmlake/classic/block_pool.h, src/classic/block_geometry.cpp) on its own: the option checks
// and the address arithmetic the block pools share.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "expect_error.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/units.h"

namespace gmlake::classic {
namespace {

constexpr std::uint64_t kGranularity = 2 * kMiB;

void expect_invalid(const BlockPoolOptions& options, const std::string& must_contain) {
  test::expect_error([&] { (void)BlockGeometry(options, kGranularity); }, ErrorCode::kInvalidArgument, must_contain);
}

TEST(BlockGeometryTest, TheStrideIsTheBlockRoundedToItsAlignmentAndRegionsToTheGranularity) {
  const BlockGeometry g({.block_bytes = 100, .alignment_bytes = 64, .region_bytes = 3 * kMiB, .max_regions = 2},
                        kGranularity);
  EXPECT_EQ(g.block_bytes(), 100u);
  EXPECT_EQ(g.stride_bytes(), 128u);
  EXPECT_EQ(g.region_bytes(), 4 * kMiB);
  EXPECT_EQ(g.reservation_bytes(), 8 * kMiB);
  EXPECT_EQ(g.max_blocks(), 8 * kMiB / 128);
  EXPECT_EQ(g.blocks_within(1000), 7u);
}

TEST(BlockGeometryTest, IndexOfAcceptsOnlyTheStartsOfExistingBlocks) {
  const BlockGeometry g({.block_bytes = 96, .alignment_bytes = 32}, kGranularity);  // stride 96: not a power of two
  const std::uintptr_t base = 0x10000000;
  EXPECT_EQ(g.address_of(base, 3), base + 288);
  EXPECT_EQ(g.index_of(base, base + 288, 10), 3u);
  EXPECT_EQ(g.index_of(base, base + 289, 10), BlockGeometry::kNoBlock);  // interior
  EXPECT_EQ(g.index_of(base, base + 960, 10), BlockGeometry::kNoBlock);  // block 10: not among the first 10
  EXPECT_EQ(g.index_of(base, base - 96, 10), BlockGeometry::kNoBlock);   // below the base
}

TEST(BlockGeometryTest, BadOptionsAreInvalidArgumentsNamingTheProblem) {
  expect_invalid({.block_bytes = 0}, "block_bytes is 0");
  expect_invalid({.block_bytes = 64, .alignment_bytes = 48}, "not a power of two");
  expect_invalid({.block_bytes = 64, .alignment_bytes = 2 * kGranularity}, "exceeds the backend's granularity");
  expect_invalid({.block_bytes = 3 * kMiB}, "holds no block");
  expect_invalid({.block_bytes = 64, .max_regions = 0}, "max_regions is 0");
  expect_invalid({.block_bytes = 64, .max_regions = std::numeric_limits<std::uint64_t>::max()}, "overflows");
  expect_invalid({.block_bytes = 1, .alignment_bytes = 1, .max_regions = 4096}, "more than the limit");
}

}  // namespace
}  // namespace gmlake::classic
