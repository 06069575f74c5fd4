#include "replay/lagging_stream_events.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

namespace gmlake {
namespace {

class ManualClock final : public Clock {
 public:
  std::int64_t now_ns() override { return now; }
  std::int64_t now = 0;
};

constexpr std::int64_t kLagNs = 1'000'000;  // 1 ms

TEST(LaggingStreamEventsTest, AMarkIsDoneOneLagAfterItWasRecorded) {
  ManualClock clock;
  LaggingStreamEvents events(clock, kLagNs);
  clock.now = 5'000;
  const auto a = events.record(0);
  clock.now = 5'000 + kLagNs - 1;
  EXPECT_FALSE(events.done(a));
  clock.now = 5'000 + kLagNs;
  EXPECT_TRUE(events.done(a));
  EXPECT_EQ(events.waits(), 0u);
  events.check_invariants();
}

TEST(LaggingStreamEventsTest, WaitingCostsTheRestOfTheLagAndFinishesEveryEarlierMark) {
  ManualClock clock;
  LaggingStreamEvents events(clock, kLagNs);
  const auto a = events.record(0);
  clock.now = 100;
  const auto b = events.record(7);  // another stream: one queue
  clock.now = 300;
  const auto c = events.record(0);
  clock.now = 400;
  events.wait(b);
  EXPECT_EQ(events.waits(), 1u);
  EXPECT_EQ(events.wait_ns(), 100 + kLagNs - 400);
  EXPECT_TRUE(events.done(a));
  EXPECT_TRUE(events.done(b));
  EXPECT_FALSE(events.done(c));  // queued after the mark waited for
  events.wait(a);                // already done: no wait
  EXPECT_EQ(events.waits(), 1u);
  events.check_invariants();
}

TEST(LaggingStreamEventsTest, TheDeviceIsIdleOnlyOnceALagHasPassedSinceTheHostsLastOp) {
  ManualClock clock;
  LaggingStreamEvents events(clock, kLagNs);
  clock.now = 10'000;
  events.host_op();
  clock.now = 10'000 + kLagNs / 2;
  EXPECT_FALSE(events.idle(0));
  clock.now = 10'000 + kLagNs;
  EXPECT_TRUE(events.idle(0));
  events.host_op();
  EXPECT_FALSE(events.idle(3));
}

TEST(LaggingStreamEventsTest, SynchronizingWaitsForEverythingQueuedSoFar) {
  ManualClock clock;
  LaggingStreamEvents events(clock, kLagNs);
  clock.now = 2'000;
  events.host_op();
  const auto a = events.record(0);
  clock.now = 3'000;
  events.synchronize_all();
  EXPECT_TRUE(events.done(a));
  EXPECT_EQ(events.waits(), 1u);
  EXPECT_EQ(events.wait_ns(), 3'000 + kLagNs - 3'000);
  const auto b = events.record(0);
  EXPECT_FALSE(events.done(b));  // queued after the synchronization
  events.release(a);
  events.release(b);
  EXPECT_EQ(events.live_marks(), 0u);
  events.check_invariants();
}

TEST(LaggingStreamEventsTest, WithNoLagEverythingIsDoneAtOnceAndNothingWaits) {
  ManualClock clock;
  LaggingStreamEvents events(clock, 0);
  clock.now = 50;
  events.host_op();
  const auto a = events.record(0);
  EXPECT_TRUE(events.done(a));
  EXPECT_TRUE(events.idle(0));
  events.wait(a);
  EXPECT_EQ(events.waits(), 0u);
}

TEST(LaggingStreamEventsTest, ANegativeLagIsRefused) {
  ManualClock clock;
  EXPECT_THROW(LaggingStreamEvents(clock, -1), std::invalid_argument);
}

}  // namespace
}  // namespace gmlake
