// Numbers that cannot be. The lower bound counts only allocations that succeeded, so that
// utilization never exceeds 1 when some fail under a cap; RMM CSV sizes of 2^63 or more are refused as the
// snapshot reader refuses them; live bytes that add up past 64 bits are an error, not a wrap-around.
#include <gtest/gtest.h>

#include <string>

#include "expect_error.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/replay.h"
#include "gmlake/trace.h"
#include "gmlake/units.h"

namespace gmlake {
namespace {

TraceEvent ev(TraceAction a, std::uint64_t addr, std::uint64_t size) { return {a, addr, size, 0, 0}; }

// Eight live blocks of 100 MiB under a 256 MiB cap: six cannot be allocated.
Trace eight_blocks() {
  Trace t;
  t.name = "eight";
  DeviceTrace d;
  for (std::uint64_t i = 0; i < 8; ++i) d.events.push_back(ev(TraceAction::kAlloc, (i + 1) << 30, 100 * kMiB));
  for (std::uint64_t i = 0; i < 8; ++i) {
    d.events.push_back(ev(TraceAction::kFreeRequested, (i + 1) << 30, 100 * kMiB));
    d.events.push_back(ev(TraceAction::kFreeCompleted, (i + 1) << 30, 100 * kMiB));
  }
  t.devices.push_back(d);
  return t;
}

TEST(LowerBoundTest, FailedAllocationsAreNotInTheLowerBoundAndUtilizationStaysAtMostOne) {
  const Trace t = eight_blocks();
  EXPECT_EQ(lower_bound_bytes(t.devices[0]), 800 * kMiB);  // the trace's own bound
  for (const Policy policy : {Policy::kCaching, Policy::kExpandable, Policy::kGmlake}) {
    ReplayOptions options;
    options.config = parse_config("cap_bytes:256M");
    options.config.policy = policy;
    options.backend = "sim";
    const ReplayResult r = replay(t, t.devices[0], options);
    EXPECT_GT(r.ooms, 0u) << to_string(policy);
    EXPECT_LE(r.lower_bound_bytes, r.peak_allocated_bytes) << to_string(policy);
    EXPECT_LE(r.utilization, 1.0) << to_string(policy);
    EXPECT_EQ(r.lower_bound_bytes, 200 * kMiB) << to_string(policy);  // the two that fit
  }
}

TEST(LowerBoundTest, WithoutFailuresTheLowerBoundIsTheTraces) {
  const Trace t = eight_blocks();
  ReplayOptions options;
  options.config.policy = Policy::kCaching;
  options.backend = "sim";
  const ReplayResult r = replay(t, t.devices[0], options);
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_EQ(r.lower_bound_bytes, 800 * kMiB);
  EXPECT_LE(r.utilization, 1.0);
}

TEST(LowerBoundTest, LiveBytesBeyond64BitsSaturateNotWrapAroundAndTheReplayGoesOn) {
  DeviceTrace d;
  const std::uint64_t big = std::uint64_t{1} << 62;
  for (std::uint64_t i = 0; i < 4; ++i) d.events.push_back(ev(TraceAction::kAlloc, (i + 1) << 40, big));
  EXPECT_EQ(lower_bound_bytes(d), UINT64_MAX);
  Trace t;
  t.name = "past_2_64";
  t.devices.push_back(d);
  ReplayOptions options;
  ReplayResult r;
  EXPECT_NO_THROW(r = replay(t, t.devices[0], options)) << "a replay never throws for trace content";
  EXPECT_EQ(r.ooms, 4u) << "2^62 bytes fit no arena";
  d.events.pop_back();  // three: 3 * 2^62 fits
  EXPECT_EQ(lower_bound_bytes(d), 3 * big);
}

TEST(LowerBoundTest, RmmSizesOf2Pow63OrMoreAreRefused) {
  const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n";
  test::expect_error([&] { parse_rmm_csv(header + "1,1,allocate,0x1000,9223372036854775808,0x0\n", "big"); },
                     ErrorCode::kTrace, "line 2: Size '9223372036854775808' is 2^63 or more");
  test::expect_error([&] { parse_rmm_csv(header + "1,1,allocate,0x1000,18446744073709551615,0x0\n", "big"); },
                     ErrorCode::kTrace, "is 2^63 or more");
  const Trace t = parse_rmm_csv(header + "1,1,allocate,0x1000,9223372036854775807,0x0\n", "max");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events[0].size_bytes, 9223372036854775807u);
}

}  // namespace
}  // namespace gmlake
