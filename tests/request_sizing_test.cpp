// request_sizing (src/policies/common/request_sizing.h) on its own: PyTorch's rounding, pool choice, segment
// sizes and split rules, at the boundaries the default Config sets.
#include "policies/common/request_sizing.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "gmlake/units.h"

namespace gmlake::policy {
namespace {

TEST(RequestSizingTest, RequestsRoundUpTo512BytesAndOverflowIsNullopt) {
  EXPECT_EQ(round_request_bytes(1), 512u);
  EXPECT_EQ(round_request_bytes(512), 512u);
  EXPECT_EQ(round_request_bytes(513), 1024u);
  EXPECT_EQ(round_request_bytes(3 * kMiB + 1), 3 * kMiB + 512);
  EXPECT_EQ(round_request_bytes(std::numeric_limits<std::uint64_t>::max()), std::nullopt);
}

TEST(RequestSizingTest, RequestsUpToSmallRequestMaxBytesGoToTheSmallPool) {
  const Config config;
  EXPECT_EQ(pool_for(config, 512), PoolKind::kSmall);
  EXPECT_EQ(pool_for(config, config.small_request_max_bytes), PoolKind::kSmall);
  EXPECT_EQ(pool_for(config, config.small_request_max_bytes + 512), PoolKind::kLarge);
}

TEST(RequestSizingTest, CachingSegmentsAreSmallLargeOrTheRequestRoundedToLargeRoundBytes) {
  const Config config;
  EXPECT_EQ(caching_segment_bytes(config, 512), config.small_segment_bytes);
  EXPECT_EQ(caching_segment_bytes(config, config.small_request_max_bytes + 512), config.large_segment_bytes);
  EXPECT_EQ(caching_segment_bytes(config, config.large_segment_threshold_bytes - 512), config.large_segment_bytes);
  EXPECT_EQ(caching_segment_bytes(config, config.large_segment_threshold_bytes + 512),
            config.large_segment_threshold_bytes + config.large_round_bytes);
  EXPECT_EQ(caching_segment_bytes(config, std::numeric_limits<std::uint64_t>::max() - 511), std::nullopt);
}

TEST(RequestSizingTest, CachingSplitsSmallBlocksFromOneRoundingAndLargeOnesAboveSmallRequestMax) {
  const Config config;
  EXPECT_TRUE(caching_should_split(config, PoolKind::kSmall, 2 * kMiB, 2 * kMiB - 512));
  EXPECT_FALSE(caching_should_split(config, PoolKind::kSmall, 2 * kMiB, 2 * kMiB));
  EXPECT_FALSE(caching_should_split(config, PoolKind::kLarge, 20 * kMiB, 20 * kMiB - config.small_request_max_bytes));
  EXPECT_TRUE(caching_should_split(config, PoolKind::kLarge, 20 * kMiB,
                                   20 * kMiB - config.small_request_max_bytes - 512));
}

TEST(RequestSizingTest, ExpandableSplitsAnyRemainderOfOneRounding) {
  EXPECT_TRUE(expandable_should_split(20 * kMiB, 20 * kMiB - 512));
  EXPECT_FALSE(expandable_should_split(20 * kMiB, 20 * kMiB));
}

}  // namespace
}  // namespace gmlake::policy
