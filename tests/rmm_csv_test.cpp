// parse_rmm_csv (src/trace/rmm_csv.cpp): RMM logging_resource_adaptor CSV logs.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"

namespace gmlake {
namespace {

void expect_trace_error(const std::function<void()>& f, const std::string& must_contain) {
  test::expect_error(f, ErrorCode::kTrace, must_contain);
}

TEST(RmmCsvTest, AllocatesAndFreesBecomeEventsAndFailuresAreSkipped) {
  const Trace t = parse_rmm_csv(
      " Thread , Time,Action,Pointer,Size,Stream\r\n"
      "140202006716160,09:59:08:542316,allocate,0x7f83e6000000,4000000,0x0\r\n"
      "140202006716160,12.5,allocate,140204010000000,512,0x1a2b\n"
      "140202006716160,13,allocate failure,0x0,99999999999,0x0\n"
      "\n"
      "140202006716160,14,free,0x7f83e6000000,4000000,0x0\n",
      "rmm");
  EXPECT_EQ(t.name, "rmm");
  ASSERT_EQ(t.devices.size(), 1u);
  const std::vector<TraceEvent>& e = t.devices[0].events;
  ASSERT_EQ(e.size(), 4u);
  EXPECT_EQ(e[0].action, TraceAction::kAlloc);
  EXPECT_EQ(e[0].addr, 0x7f83e6000000u);
  EXPECT_EQ(e[0].size_bytes, 4000000u);
  EXPECT_EQ(e[0].time_us, 0);  // a clock string, not a number
  EXPECT_EQ(e[1].addr, 140204010000000u);
  EXPECT_EQ(e[1].stream, 0x1a2bu);
  EXPECT_EQ(e[1].time_us, 12);
  EXPECT_EQ(e[2].action, TraceAction::kFreeRequested);
  EXPECT_EQ(e[3].action, TraceAction::kFreeCompleted);
  EXPECT_EQ(e[3].addr, 0x7f83e6000000u);
  EXPECT_EQ(e[3].time_us, 14);
  EXPECT_TRUE(t.devices[0].initial_blocks.empty());
}

TEST(RmmCsvTest, ColumnsMayComeInAnyOrderAndAFreeWithoutAllocateIsAnInitialBlock) {
  const Trace t = parse_rmm_csv("Action,Size,Pointer,Stream,Time,Thread\nfree,256,0x1000,7,1,1\n", "rmm");
  ASSERT_EQ(t.devices.size(), 1u);
  ASSERT_EQ(t.devices[0].events.size(), 2u);
  EXPECT_EQ(t.devices[0].events[0].size_bytes, 256u);
  ASSERT_EQ(t.devices[0].initial_blocks.size(), 1u);
  EXPECT_EQ(t.devices[0].initial_blocks[0].addr, 0x1000u);
  EXPECT_EQ(t.devices[0].initial_blocks[0].stream, 7u);
}

TEST(RmmCsvTest, AHeaderOnlyLogHasNoDevices) {
  EXPECT_TRUE(parse_rmm_csv("Thread,Time,Action,Pointer,Size,Stream\n", "rmm").devices.empty());
}

TEST(RmmCsvTest, ABadHeaderIsAnErrorOnLine1) {
  expect_trace_error([] { parse_rmm_csv("Thread,Time,Action,Pointer,Size\n1,2,allocate,0x0,1\n", "rmm"); },
                     "rmm: line 1: bad RMM log header 'Thread,Time,Action,Pointer,Size'");
  expect_trace_error([] { parse_rmm_csv("", "rmm"); }, "line 1: bad RMM log header");
  expect_trace_error([] { parse_rmm_csv("Thread,Time,Action,Pointer,Size,Stream,Extra\n", "rmm"); }, "line 1");
}

TEST(RmmCsvTest, BadLinesNameTheirLineNumber) {
  const std::string header = "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10,16,0\n";
  expect_trace_error([&] { parse_rmm_csv(header + "1,1,allocate,0x10,16\n", "rmm"); },
                     "rmm: line 3: expected 6 fields, found 5");
  expect_trace_error([&] { parse_rmm_csv(header + "1,1,allocate,0xZZ,16,0\n", "rmm"); }, "line 3: bad Pointer '0xZZ'");
  expect_trace_error([&] { parse_rmm_csv(header + "1,1,allocate,0x10,0x10,0\n", "rmm"); }, "line 3: bad Size '0x10'");
  expect_trace_error([&] { parse_rmm_csv(header + "1,1,allocate,0x10,-5,0\n", "rmm"); }, "line 3: bad Size '-5'");
  expect_trace_error([&] { parse_rmm_csv(header + "\n1,1,reallocate,0x10,16,0\n", "rmm"); },
                     "line 4: unknown Action 'reallocate'");
  expect_trace_error([&] { parse_rmm_csv(header + "1,1,free,0x10,16,\n", "rmm"); }, "line 3: bad Stream ''");
}

}  // namespace
}  // namespace gmlake
