// TracingAllocator (src/adaptors/tracing_allocator.h): PyTorch's memory history for any allocator, and the
// Pool's wiring of it (the backend's maps and unmaps arrive as segment entries).
#include "adaptors/tracing_allocator.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/pool.h"
#include "gmlake/sim_backend.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

std::vector<SnapshotAction> actions(const std::vector<SnapshotEvent>& events) {
  std::vector<SnapshotAction> out;
  for (const SnapshotEvent& e : events) out.push_back(e.action);
  return out;
}

class TracingPoolTest : public ::testing::TestWithParam<Policy> {
 protected:
  Config config() const {
    Config c = parse_config("backend:sim");
    c.policy = GetParam();
    return c;
  }
};

TEST_P(TracingPoolTest, NothingIsRecordedWhileTracingIsOff) {
  Pool pool(config());
  pool.deallocate(pool.allocate(3 * kMiB, 0));
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events);
  EXPECT_TRUE(events.empty());
}

TEST_P(TracingPoolTest, AllocAndFreeComeAfterTheMapsTheyCaused) {
  Pool pool(config());
  pool.set_tracing(1000);
  void* p = pool.allocate(3 * kMiB, 7);
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back().action, SnapshotAction::kAlloc);
  EXPECT_EQ(events.back().addr, reinterpret_cast<std::uintptr_t>(p));
  EXPECT_EQ(events.back().size_bytes, 3 * kMiB);
  EXPECT_EQ(events.back().stream, 7u);
  std::uint64_t mapped = 0;
  for (std::size_t i = 0; i + 1 < events.size(); ++i) {
    const bool map = events[i].action == SnapshotAction::kSegmentMap || events[i].action == SnapshotAction::kSegmentAlloc;
    EXPECT_TRUE(map) << to_string(events[i].action);
    mapped += events[i].size_bytes;
  }
  EXPECT_EQ(mapped, static_cast<std::uint64_t>(pool.stats().reserved_bytes.current));
  EXPECT_GT(events.back().time_us, 1'600'000'000'000'000);  // microseconds since 1970: after 2020

  pool.deallocate(p);
  events.clear();
  pool.drain_trace(&events);
  EXPECT_EQ(actions(events), (std::vector{SnapshotAction::kFreeRequested, SnapshotAction::kFreeCompleted}));
  pool.empty_cache();
  events.clear();
  pool.drain_trace(&events);
  ASSERT_FALSE(events.empty());
  std::uint64_t unmapped = 0;
  for (const SnapshotEvent& e : events) {
    EXPECT_TRUE(e.action == SnapshotAction::kSegmentUnmap || e.action == SnapshotAction::kSegmentFree);
    unmapped += e.size_bytes;
  }
  EXPECT_EQ(unmapped, mapped);
}

TEST_P(TracingPoolTest, DeferredFreesAreRequestedThenCompleted) {
  Pool pool(config());
  void* p = pool.allocate(kMiB, 0);
  pool.set_tracing(100);
  pool.begin_deferred_free(p);
  pool.end_deferred_free(p);
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events);
  EXPECT_EQ(actions(events), (std::vector{SnapshotAction::kFreeRequested, SnapshotAction::kFreeCompleted}));
}

TEST_P(TracingPoolTest, AnOutOfMemoryIsRecordedAndABadFreeIsNot) {
  Pool pool(config());
  pool.set_cap_bytes(64 * kMiB);
  pool.set_tracing(100);
  EXPECT_THROW(pool.allocate(100 * kMiB, 0), OutOfMemoryError);
  int x = 0;
  EXPECT_THROW(pool.deallocate(&x), Error);
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].action, SnapshotAction::kOom);
  EXPECT_EQ(events[0].size_bytes, 100 * kMiB);
}

TEST_P(TracingPoolTest, AtMostMaxEventsAreKeptAndADrainMayTakePart) {
  Pool pool(config());
  pool.allocate(kMiB, 0);  // the pool's memory exists: later small allocations map nothing... or little
  pool.set_tracing(4);
  std::vector<void*> blocks;
  for (int i = 0; i < 6; ++i) blocks.push_back(pool.allocate(512, 0));
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events, 3);
  EXPECT_EQ(events.size(), 3u);
  pool.drain_trace(&events);
  ASSERT_EQ(events.size(), 4u);  // the bound held: older entries were dropped
  EXPECT_EQ(events.back().action, SnapshotAction::kAlloc);
  EXPECT_EQ(events.back().addr, reinterpret_cast<std::uintptr_t>(blocks.back()));
  pool.set_tracing(0);
  pool.deallocate(blocks[0]);
  events.clear();
  pool.drain_trace(&events);
  EXPECT_TRUE(events.empty());
}

// The Pool takes its tracer out of the call path while it does not record (Pool::set_tracing): each period of
// tracing records its own calls, and only those, however often it stops and starts.
TEST_P(TracingPoolTest, TracingThatStopsAndStartsAgainRecordsTheCallsOfEachPeriodOnly) {
  Pool pool(config());
  pool.allocate(kMiB, 0);  // the pool's memory exists: the periods below map little
  pool.set_tracing(100);
  void* a = pool.allocate(512, 0);
  pool.set_tracing(0);
  void* b = pool.allocate(1024, 0);
  pool.deallocate(a);
  pool.set_tracing(100);
  void* c = pool.allocate(2048, 0);
  pool.deallocate(b);
  pool.set_tracing(0);
  pool.deallocate(c);
  std::vector<SnapshotEvent> events;
  pool.drain_trace(&events);
  auto count = [&](SnapshotAction action, void* ptr) {
    return std::count_if(events.begin(), events.end(), [&](const SnapshotEvent& e) {
      return e.action == action && e.addr == reinterpret_cast<std::uintptr_t>(ptr);
    });
  };
  EXPECT_EQ(count(SnapshotAction::kAlloc, a), 1);
  EXPECT_EQ(count(SnapshotAction::kFreeRequested, a), 0) << "freed while tracing was off";
  EXPECT_EQ(count(SnapshotAction::kAlloc, b), 0) << "allocated while tracing was off";
  EXPECT_EQ(count(SnapshotAction::kFreeRequested, b), 1);
  EXPECT_EQ(count(SnapshotAction::kFreeCompleted, b), 1);
  EXPECT_EQ(count(SnapshotAction::kAlloc, c), 1);
  EXPECT_EQ(count(SnapshotAction::kFreeRequested, c), 0) << "freed while tracing was off";
  pool.check_invariants();
}

INSTANTIATE_TEST_SUITE_P(EveryPolicy, TracingPoolTest,
                         ::testing::Values(Policy::kGmlake, Policy::kCaching, Policy::kExpandable),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(TracingAllocatorTest, ThePoolsTeardownIsNotTracedAndLeavesNoObserverBehind) {
  SimBackend backend(kPageBytes);
  {
    Pool pool(parse_config(""), backend);
    pool.set_tracing(10);
    EXPECT_NE(backend.observer(), nullptr);
    pool.allocate(40 * kMiB, 0);
  }
  EXPECT_EQ(backend.observer(), nullptr);
  EXPECT_EQ(backend.live_mappings(), 0u);
}

}  // namespace
}  // namespace gmlake
