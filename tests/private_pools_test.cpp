// PrivatePools (src/pool/private_pools.h): users, the pools made private (caching, no release on oom), owner
// lookup, and collection of released pools once they hold no block.
#include "pool/private_pools.h"

#include <gtest/gtest.h>

#include <vector>

#include "expect_error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr PoolId kA{1, 1};
constexpr PoolId kB{1, 2};

Config host_config() { return parse_config("backend:host,policy:gmlake,release_on_oom:1"); }

TEST(PrivatePoolsTest, APoolIsMadeByItsFirstUserAsACachingPoolThatKeepsItsMemoryOnOom) {
  PrivatePools pools;
  EXPECT_TRUE(pools.empty());
  pools.add_user(kA, host_config(), 0, 0);
  pools.add_user(kA, host_config(), 0, 0);
  EXPECT_EQ(pools.use_count(kA), 2);
  EXPECT_EQ(pools.use_count(kB), 0);
  ASSERT_NE(pools.find(kA), nullptr);
  EXPECT_EQ(pools.find(kB), nullptr);
  EXPECT_EQ(pools.find(kA)->policy(), Policy::kCaching);
  EXPECT_FALSE(pools.find(kA)->config().release_on_oom);
}

TEST(PrivatePoolsTest, OwnerOfFindsThePoolHoldingABlock) {
  PrivatePools pools;
  pools.add_user(kA, host_config(), 0, 0);
  pools.add_user(kB, host_config(), 0, 0);
  void* b = pools.get(kB, 0, "test").allocate(kMiB, 0);
  EXPECT_EQ(pools.owner_of(b), pools.find(kB));
  int elsewhere = 0;
  EXPECT_EQ(pools.owner_of(&elsewhere), nullptr);
  pools.find(kB)->deallocate(b);
}

TEST(PrivatePoolsTest, AReleasedPoolGoesOnceItHoldsNoBlock) {
  PrivatePools pools;
  pools.add_user(kA, host_config(), 0, 0);
  void* p = pools.get(kA, 0, "test").allocate(kMiB, 0);
  pools.remove_user(kA, 0, "release");
  ASSERT_NE(pools.find(kA), nullptr) << "it still holds a block";
  EXPECT_EQ(pools.use_count(kA), 0);
  pools.find(kA)->deallocate(p);
  pools.collect_released();
  EXPECT_EQ(pools.find(kA), nullptr);
  EXPECT_TRUE(pools.empty());
}

TEST(PrivatePoolsTest, RemovingAUserOfNoPoolOrTooManyIsRefused) {
  PrivatePools pools;
  test::expect_error([&] { pools.remove_user(kA, 3, "gmlake_pool_release"); }, ErrorCode::kInvalidArgument,
                     "gmlake_pool_release: device 3 has no private pool (1, 1)");
  pools.add_user(kA, host_config(), 0, 0);
  void* p = pools.get(kA, 0, "test").allocate(kMiB, 0);
  pools.remove_user(kA, 0, "gmlake_pool_release");
  test::expect_error([&] { pools.remove_user(kA, 0, "gmlake_pool_release"); }, ErrorCode::kInvalidArgument,
                     "released more than made");
  pools.find(kA)->deallocate(p);
}

TEST(PrivatePoolsTest, EmptyUnusedCachesSparesPoolsWithUsers) {
  PrivatePools pools;
  pools.add_user(kA, host_config(), 0, 0);
  pools.add_user(kB, host_config(), 0, 0);
  pools.find(kA)->deallocate(pools.find(kA)->allocate(8 * kMiB, 0));
  void* keep_b_alive = pools.find(kB)->allocate(kKiB, 0);  // a small segment of its own
  pools.find(kB)->deallocate(pools.find(kB)->allocate(8 * kMiB, 0));  // a large segment, free
  pools.remove_user(kB, 0, "release");  // no user, but a block: it stays
  const std::int64_t a_before = pools.find(kA)->stats().reserved_bytes.current;
  const std::int64_t b_before = pools.find(kB)->stats().reserved_bytes.current;
  pools.empty_unused_caches();
  EXPECT_EQ(pools.find(kA)->stats().reserved_bytes.current, a_before) << "in use: its memory stays";
  const std::int64_t b_after = pools.find(kB)->stats().reserved_bytes.current;
  EXPECT_LT(b_after, b_before) << "without users: its free segment goes";
  EXPECT_GT(b_after, 0) << "the segment of its live block stays";
  std::vector<PoolId> seen;
  pools.for_each([&](Pool&, PoolId id) { seen.push_back(id); });
  EXPECT_EQ(seen, (std::vector<PoolId>{kA, kB}));
  pools.find(kB)->deallocate(keep_b_alive);
}

TEST(PrivatePoolsTest, APoolThatCannotBeMadeLeavesNothing) {
  PrivatePools pools;
  Config config = host_config();
  config.backend = "nosuch";
  EXPECT_THROW(pools.add_user(kA, config, 0, 0), Error);
  EXPECT_TRUE(pools.empty());
  EXPECT_EQ(pools.use_count(kA), 0);
}

}  // namespace
}  // namespace gmlake
