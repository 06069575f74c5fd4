// DeviceWaits (src/policies/gmlake/device_waits.h): what it asks of the stream, and when.
#include "policies/gmlake/device_waits.h"

#include <gtest/gtest.h>

#include "manual_events.h"

namespace gmlake::engine {
namespace {

TEST(DeviceWaitsTest, WithoutStreamEventsTheAnswerIsTheAssumption) {
  StreamFence fence(nullptr);
  for (const bool assumed : {false, true}) {
    DeviceWaits waits(fence, assumed);
    waits.begin(5);
    EXPECT_EQ(waits.now(), assumed);
    waits.begin(6);
    EXPECT_EQ(waits.now(), assumed);
  }
}

TEST(DeviceWaitsTest, ABusyStreamIsAskedAgainADrainedOneNotUntilTheNextAllocation) {
  test::ManualEvents events;
  StreamFence fence(&events);
  DeviceWaits waits(fence, /*assumed=*/true);  // not read: the stream is asked
  const StreamId stream = 9;
  events.busy_streams.insert(stream);
  waits.begin(stream);
  EXPECT_FALSE(waits.now());
  EXPECT_FALSE(waits.now());
  EXPECT_EQ(events.idle_queries, 2) << "a busy answer is asked again: the queue drains while the host works";
  events.busy_streams.clear();
  EXPECT_TRUE(waits.now());
  EXPECT_TRUE(waits.now());
  EXPECT_EQ(events.idle_queries, 3) << "drained: not asked again in the same allocation";
  // The next allocation asks again, on its own stream.
  events.busy_streams.insert(stream);
  waits.begin(stream);
  EXPECT_FALSE(waits.now());
  EXPECT_EQ(events.idle_queries, 4);
  waits.begin(stream + 1);
  EXPECT_TRUE(waits.now()) << "another stream, nothing queued on it";
}

}  // namespace
}  // namespace gmlake::engine
