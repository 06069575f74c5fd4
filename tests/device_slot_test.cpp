// DeviceSlot (src/pool/device_slot.h): the main pool made per session, owner lookup, the sum of the pools' stats,
// segments and traces in pool order, and the settings kept for pools made later. Each test holds the slot's lock,
// as DevicePools does around every call (the slot asserts it).
#include "pool/device_slot.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "expect_error.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

constexpr PoolId kPrivate{2, 3};

class DeviceSlotTest : public ::testing::Test {
 protected:
  Session session_{parse_config("backend:host")};
  DeviceSlot slot_;
  MutexLock lock_{&slot_.mutex()};
};

TEST_F(DeviceSlotTest, TheMainPoolIsMadeOncePerSession) {
  EXPECT_EQ(slot_.main_pool_if_made(), nullptr);
  test::expect_error([&] { slot_.existing_main_pool(4, "gmlake_ipc_export"); }, ErrorCode::kInvalidPointer,
                     "gmlake_ipc_export: no block was ever allocated on device 4");
  Pool& first = slot_.main_pool(session_, 0);
  EXPECT_EQ(&slot_.main_pool(session_, 0), &first) << "the same session: the same pool";
  first.deallocate(first.allocate(kMiB, 0));
  Session next{parse_config("backend:host")};
  Pool& second = slot_.main_pool(next, 0);
  EXPECT_EQ(second.stats().num_allocs, 0u) << "a new session: a new pool";
  EXPECT_EQ(&slot_.existing_main_pool(0, "x"), &second);
}

TEST_F(DeviceSlotTest, ANewSessionDropsTheOldSessionsPrivatePools) {
  slot_.main_pool(session_, 0);
  slot_.private_pools().add_user(kPrivate, session_.config, 0, 0);
  Session next{parse_config("backend:host")};
  slot_.main_pool(next, 0);
  EXPECT_TRUE(slot_.private_pools().empty());
}

TEST_F(DeviceSlotTest, OwnerOfLooksInThePrivatePoolsOnlyForPointersTheMainPoolDoesNotHold) {
  Pool& main = slot_.main_pool(session_, 0);
  slot_.private_pools().add_user(kPrivate, session_.config, 0, 0);
  Pool& mine = *slot_.private_pools().find(kPrivate);
  void* a = main.allocate(kMiB, 0);
  void* b = mine.allocate(kMiB, 0);
  EXPECT_EQ(&slot_.owner_of(a, 0, "free"), &main);
  EXPECT_EQ(&slot_.owner_of(b, 0, "free"), &mine);
  int nobody = 0;
  EXPECT_EQ(&slot_.owner_of(&nobody, 0, "free"), &main) << "the main pool answers for pointers nobody holds";
  main.deallocate(a);
  mine.deallocate(b);
}

TEST_F(DeviceSlotTest, StatsSegmentsAndTracesCoverEveryPoolMainFirst) {
  slot_.set_tracing(50);
  Pool& main = slot_.main_pool(session_, 0);
  slot_.private_pools().add_user(kPrivate, session_.config, 0, slot_.tracing_max_events());
  Pool& mine = *slot_.private_pools().find(kPrivate);
  void* a = main.allocate(3 * kMiB, 0);
  void* b = mine.allocate(kMiB, 0);
  const Stats s = slot_.stats();
  EXPECT_EQ(s.allocated_bytes.current, main.stats().allocated_bytes.current + mine.stats().allocated_bytes.current);
  EXPECT_EQ(s.num_allocs, 2u);
  const std::vector<OwnedSegment> segments = slot_.segments();
  ASSERT_FALSE(segments.empty());
  EXPECT_EQ(segments.front().pool, kMainPoolId);
  EXPECT_EQ(segments.back().pool, kPrivate);
  std::vector<SnapshotEvent> events;
  slot_.drain_trace(&events, 1);
  EXPECT_EQ(events.size(), 1u) << "at most max";
  slot_.drain_trace(&events, 1000);
  bool saw_b = false;
  for (const SnapshotEvent& e : events) saw_b |= e.addr == reinterpret_cast<std::uintptr_t>(b);
  EXPECT_TRUE(saw_b) << "the private pool traced too";
  main.deallocate(a);
  mine.deallocate(b);
  EXPECT_GT(slot_.backend_time().calls, 0u);
}

TEST_F(DeviceSlotTest, TheCapIsKeptForAMainPoolMadeLaterAndTearDownForgetsIt) {
  slot_.set_cap_bytes(kMiB);
  EXPECT_THROW(slot_.main_pool(session_, 0).allocate(2 * kMiB, 0), OutOfMemoryError);
  slot_.tear_down();
  EXPECT_EQ(slot_.main_pool_if_made(), nullptr);
  EXPECT_EQ(slot_.tracing_max_events(), 0u);
  Pool& fresh = slot_.main_pool(session_, 0);
  EXPECT_NO_THROW(fresh.deallocate(fresh.allocate(2 * kMiB, 0))) << "the cap went with tear_down";
}

}  // namespace
}  // namespace gmlake
