// DevicePools (src/pool/device_pools.h): the C API's runtime on its own, without the C boundary: sessions, the
// device's main and private pools, owner lookup, the sum of their stats, and the calls before a start and after
// shut_down. Each test owns its DevicePools (not the process's instance the C API uses).
#include "pool/device_pools.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "expect_error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr PoolId kPrivate{0, 9};

class DevicePoolsTest : public ::testing::Test {
 protected:
  void SetUp() override { pools_->start("backend:host"); }
  std::unique_ptr<DevicePools> pools_ = std::make_unique<DevicePools>();
};

TEST_F(DevicePoolsTest, EachDeviceHasItsOwnMainPoolMadeByItsFirstAllocation) {
  void* a = pools_->allocate(0, 3 * kMiB, 0);
  void* b = pools_->allocate(DevicePools::kDevices - 1, kKiB, 5);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(pools_->stats(0).allocated_bytes.current, static_cast<std::int64_t>(3 * kMiB));
  EXPECT_EQ(pools_->stats(DevicePools::kDevices - 1).num_allocs, 1u);
  EXPECT_EQ(pools_->stats(3).reserved_bytes.current, 0) << "a device never used has no pool";
  EXPECT_EQ(pools_->backend_time(3).calls, 0u);
  EXPECT_GT(pools_->backend_time(0).calls, 0u) << "the main pool's backend mapped memory";
  test::expect_error([&] { pools_->deallocate(3, a); }, ErrorCode::kInvalidPointer, "no block was ever allocated");
  pools_->deallocate(0, a);
  pools_->deallocate(DevicePools::kDevices - 1, b);
  EXPECT_EQ(pools_->stats(0).allocated_bytes.current, 0);
  EXPECT_EQ(pools_->stats(0).num_frees, 1u);
}

TEST_F(DevicePoolsTest, BadDevicesAndSizesAreRefusedBeforeAnyPoolIsMade) {
  test::expect_error([&] { pools_->allocate(-1, kKiB, 0); }, ErrorCode::kInvalidArgument, "invalid device id -1");
  test::expect_error([&] { pools_->stats(static_cast<int>(DevicePools::kDevices)); }, ErrorCode::kInvalidArgument,
                     "expected 0..");
  test::expect_error([&] { pools_->allocate(0, DevicePools::kMaxSizeBytes + 1, 0); }, ErrorCode::kInvalidArgument,
                     ">= 2^63");
  EXPECT_EQ(pools_->backend_time(0).calls, 0u) << "no pool was made";
  EXPECT_EQ(pools_->allocate(0, 0, 0), nullptr) << "size 0: no block, no error";
}

TEST_F(DevicePoolsTest, PrivatePoolsServeTheirBlocksAndTheDeviceFindsTheOwnerOnFree) {
  pools_->create_private(0, kPrivate);
  EXPECT_EQ(pools_->private_use_count(0, kPrivate), 1);
  void* main_block = pools_->allocate(0, 2 * kMiB, 0);
  void* private_block = pools_->allocate_private(0, kPrivate, 5 * kMiB, 0);
  EXPECT_EQ(pools_->stats(0).allocated_bytes.current, static_cast<std::int64_t>(7 * kMiB)) << "the sum of both";
  ASSERT_EQ(pools_->blocks(0, kPrivate).size(), 1u);
  EXPECT_EQ(pools_->blocks(0, kPrivate)[0].address, reinterpret_cast<std::uintptr_t>(private_block));
  ASSERT_EQ(pools_->blocks(0, kMainPoolId).size(), 1u);
  const std::vector<OwnedSegment> segments = pools_->segments(0);
  ASSERT_GE(segments.size(), 2u);
  EXPECT_EQ(segments.front().pool, kMainPoolId) << "main pool first";
  EXPECT_EQ(segments.back().pool, kPrivate);

  pools_->release_private(0, kPrivate);
  EXPECT_EQ(pools_->private_use_count(0, kPrivate), 0);
  ASSERT_EQ(pools_->blocks(0, kPrivate).size(), 1u) << "a released pool lives while it holds a block";
  pools_->deallocate(0, private_block);  // found in the private pool, which then goes
  test::expect_error([&] { pools_->blocks(0, kPrivate); }, ErrorCode::kInvalidArgument, "no private pool (0, 9)");
  pools_->deallocate(0, main_block);
  EXPECT_EQ(pools_->stats(0).allocated_bytes.current, 0);
}

TEST_F(DevicePoolsTest, PrivatePoolCallsRefuseTheMainPoolsIdAndUnknownPools) {
  test::expect_error([&] { pools_->create_private(0, kMainPoolId); }, ErrorCode::kInvalidArgument, "main pool's");
  test::expect_error([&] { pools_->restore(0, kMainPoolId, {}); }, ErrorCode::kInvalidArgument, "main pool's");
  test::expect_error([&] { pools_->release_private(0, kPrivate); }, ErrorCode::kInvalidArgument, "gmlake_pool_release");
  test::expect_error([&] { pools_->allocate_private(0, kPrivate, kKiB, 0); }, ErrorCode::kInvalidArgument,
                     "gmlake_pool_malloc");
  EXPECT_NO_THROW(pools_->empty_private_cache(0, kPrivate)) << "a pool that does not exist has nothing cached";
  EXPECT_EQ(pools_->private_use_count(0, kPrivate), 0);
}

TEST_F(DevicePoolsTest, PrivatePoolsNeedRealAddresses) {
  pools_->shut_down();
  pools_->start("backend:sim");
  test::expect_error([&] { pools_->create_private(0, kPrivate); }, ErrorCode::kConfig, "not sim");
  EXPECT_EQ(pools_->private_use_count(0, kPrivate), 0);
}

TEST_F(DevicePoolsTest, StatsSumThePoolsAndResetPeaksOnEveryPool) {
  pools_->create_private(0, kPrivate);
  void* a = pools_->allocate(0, 4 * kMiB, 0);
  void* b = pools_->allocate_private(0, kPrivate, 2 * kMiB, 0);
  pools_->deallocate(0, a);
  pools_->deallocate(0, b);
  const Stats before = pools_->stats(0);
  EXPECT_EQ(before.allocated_bytes.peak, static_cast<std::int64_t>(6 * kMiB)) << "the sum of each pool's peak";
  EXPECT_EQ(before.num_allocs, 2u);
  pools_->reset_peak_stats(0);
  EXPECT_EQ(pools_->stats(0).allocated_bytes.peak, 0);
  EXPECT_EQ(pools_->stats(0).num_allocs, 2u) << "counters are not peaks";
}

TEST_F(DevicePoolsTest, EmptyCacheSparesPrivatePoolsInUse) {
  pools_->create_private(0, kPrivate);
  pools_->deallocate(0, pools_->allocate_private(0, kPrivate, 2 * kMiB, 0));
  pools_->deallocate(0, pools_->allocate(0, 2 * kMiB, 0));
  pools_->empty_cache(0);
  const std::int64_t kept = pools_->stats(0).reserved_bytes.current;
  EXPECT_GT(kept, 0) << "the private pool in use keeps its memory";
  pools_->empty_private_cache(0, kPrivate);
  EXPECT_EQ(pools_->stats(0).reserved_bytes.current, 0);
}

TEST_F(DevicePoolsTest, TheCapAndTracingApplyToPoolsMadeLater) {
  pools_->set_cap_bytes(1, 2 * kMiB);
  pools_->set_tracing(1, 100);
  test::expect_error([&] { pools_->allocate(1, 4 * kMiB, 0); }, ErrorCode::kOutOfMemory, "cap");
  void* p = pools_->allocate(1, kMiB, 0);
  pools_->deallocate(1, p);
  const std::vector<SnapshotEvent> events = pools_->drain_trace(1, 1000);
  ASSERT_FALSE(events.empty()) << "the pool made after set_tracing records";
  EXPECT_TRUE(pools_->drain_trace(1, 1000).empty()) << "drained";
  pools_->set_cap_bytes(1, 0);
  EXPECT_NO_THROW(pools_->deallocate(1, pools_->allocate(1, 4 * kMiB, 0))) << "0 lifts the cap";
}

TEST_F(DevicePoolsTest, ShutDownEndsEveryCallAndCountsIgnoredFreesUntilTheNextStart) {
  void* p = pools_->allocate(0, kMiB, 0);
  pools_->shut_down();
  EXPECT_THROW(pools_->allocate(0, kMiB, 0), ShutDownError);
  EXPECT_THROW(pools_->stats(0), ShutDownError);
  EXPECT_THROW(pools_->deallocate(0, p), ShutDownError);
  EXPECT_EQ(pools_->ignored_frees(), 1u);
  EXPECT_NO_THROW(pools_->deallocate(0, nullptr)) << "a null free is nothing, shut down or not";
  EXPECT_EQ(pools_->ignored_frees(), 1u);
  pools_->shut_down();  // again: nothing
  pools_->start("backend:host");
  EXPECT_EQ(pools_->stats(0).num_allocs, 0u) << "a new session starts with new pools";
  EXPECT_THROW(pools_->start("backend:host"), AlreadyInitializedError);
}

TEST_F(DevicePoolsTest, ANewSessionRemakesTheDevicesPoolsWithItsConfig) {
  pools_->allocate(0, kMiB, 0);
  pools_->shut_down();
  pools_->start("backend:host,cap_bytes:2M");
  test::expect_error([&] { pools_->allocate(0, 4 * kMiB, 0); }, ErrorCode::kOutOfMemory, "cap");
  EXPECT_EQ(pools_->stats(0).allocated_bytes.current, 0) << "the old session's block went with its pool";
}

TEST(DevicePoolsBeforeStartTest, CallsThatMakeAPoolStartFromTheEnvironmentTheOthersRunOnAnEmptySlot) {
  DevicePools pools;
  EXPECT_EQ(pools.stats(0).num_allocs, 0u) << "stats before any start: an empty slot";
  EXPECT_TRUE(pools.drain_trace(0, 10).empty());
  test::expect_error([&] { pools.release_private(0, kPrivate); }, ErrorCode::kInvalidArgument, "no private pool");
  void* p = pools.allocate(0, kKiB, 0);  // starts a session from GMLAKE_CONF (unset in the tests: the defaults)
  ASSERT_NE(p, nullptr);
  EXPECT_THROW(pools.start("backend:host"), AlreadyInitializedError) << "the allocation started a session";
  pools.deallocate(0, p);
}

TEST_F(DevicePoolsTest, RecordStreamFindsThePoolOfThePointer) {
  pools_->create_private(0, kPrivate);
  void* p = pools_->allocate_private(0, kPrivate, kMiB, 0);
  EXPECT_NO_THROW(pools_->record_stream(0, p, 7));
  EXPECT_NO_THROW(pools_->record_stream(0, nullptr, 7));
  test::expect_error([&] { pools_->record_stream(0, static_cast<char*>(p) + 512, 7); }, ErrorCode::kInvalidPointer,
                     "");
  pools_->deallocate(0, p);
}

TEST_F(DevicePoolsTest, IpcCloseOfADeviceThatNeverImportedIsAnInvalidPointer) {
  int x = 0;
  test::expect_error([&] { pools_->ipc_close(2, &x); }, ErrorCode::kInvalidPointer, "nothing was ever imported");
  test::expect_error([&] { pools_->ipc_close(-1, &x); }, ErrorCode::kInvalidArgument, "invalid device id");
  test::expect_error([&] { pools_->ipc_export(0, &x); }, ErrorCode::kInvalidPointer, "no block was ever allocated");
}

}  // namespace
}  // namespace gmlake
