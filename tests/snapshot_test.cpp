// parse_snapshot_pickle (src/trace/snapshot.cpp): PyTorch memory snapshots built by hand (pickle_builder.h).
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "gmlake/units.h"
#include "pickle_builder.h"
#include "pickle_fixtures.h"

namespace gmlake {
namespace {

using test::FakeBlock;
using test::FakeEvent;
using test::FakeSegment;
using test::PickleBuilder;
using test::snapshot_pickle;

constexpr std::uint64_t kSegmentAddr = std::uint64_t{1} << 40;

void expect_trace_error(const std::function<void()>& f, const std::string& must_contain) {
  test::expect_error(f, ErrorCode::kTrace, must_contain);
}

Trace parse(const std::vector<std::uint8_t>& bytes) { return parse_snapshot_pickle(bytes, "fake"); }

TEST(SnapshotTest, EventsMapToActionsAndMissingStreamAndTimeDefaultToZero) {
  const std::vector<FakeEvent> events = {
      {"segment_alloc", kSegmentAddr, 20 * kMiB, 3, 100},
      {"alloc", kSegmentAddr, 1000, 3, 101},
      {"free_requested", kSegmentAddr, 1000, std::nullopt, std::nullopt},
      {"free_completed", kSegmentAddr, 1000, 3, 103},
      {"segment_map", kSegmentAddr, 2 * kMiB, 3, 104},
      {"segment_unmap", kSegmentAddr, 2 * kMiB, 3, 105},
      {"segment_free", kSegmentAddr, 20 * kMiB, 3, 106},
  };
  const Trace t = parse(snapshot_pickle({events}));
  EXPECT_EQ(t.name, "fake");
  ASSERT_EQ(t.devices.size(), 1u);
  const std::vector<TraceEvent>& got = t.devices[0].events;
  ASSERT_EQ(got.size(), events.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(to_string(got[i].action), events[i].action);
    EXPECT_EQ(got[i].addr, events[i].addr);
    EXPECT_EQ(got[i].size_bytes, events[i].size);
    EXPECT_EQ(got[i].stream, events[i].stream.value_or(0));
    EXPECT_EQ(got[i].time_us, events[i].time_us.value_or(0));
  }
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::optional<std::uint64_t>(22 * kMiB));
}

TEST(SnapshotTest, UnknownActionsLikeSnapshotAndOomAreSkipped) {
  const Trace t = parse(snapshot_pickle({{{"snapshot", 0, 0}, {"alloc", kSegmentAddr, 512}, {"oom", 5, 7}}}));
  ASSERT_EQ(t.devices.size(), 1u);
  ASSERT_EQ(t.devices[0].events.size(), 1u);
  EXPECT_EQ(t.devices[0].events[0].action, TraceAction::kAlloc);
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::nullopt);
}

TEST(SnapshotTest, PythonPicklerOutputOfASnapshotReadsAtEveryProtocol) {
  const std::span<const std::uint8_t> fixtures[] = {test::kProtocol0Pickle, test::kProtocol2Pickle,
                                                    test::kProtocol4Pickle};
  for (const std::span<const std::uint8_t> bytes : fixtures) {
    const Trace t = parse_snapshot_pickle(bytes, "fixture");
    ASSERT_EQ(t.devices.size(), 1u);
    ASSERT_EQ(t.devices[0].events.size(), 3u);
    EXPECT_EQ(t.devices[0].events[1].action, TraceAction::kAlloc);
    EXPECT_EQ(t.devices[0].events[1].stream, 7u);
    EXPECT_EQ(t.devices[0].events[2].time_us, 12);
    EXPECT_TRUE(t.devices[0].initial_blocks.empty());  // freed after its alloc; the segment block is inactive
    EXPECT_EQ(t.devices[0].initial_reserved_bytes, 0u);
  }
}

TEST(SnapshotTest, AFreeWithNoAllocBecomesAnInitialBlockOnce) {
  const Trace t = parse(snapshot_pickle({{
      {"alloc", kSegmentAddr + 4096, 100, 0, 1},
      {"free_requested", kSegmentAddr, 1536, 9, 2},
      {"free_completed", kSegmentAddr, 1536, 9, 3},
      {"free_completed", kSegmentAddr + 8192, 700, 0, 4},  // free_requested happened before recording
      {"alloc", kSegmentAddr, 512, 0, 5},                  // the freed address reused
  }}));
  ASSERT_EQ(t.devices.size(), 1u);
  const std::vector<InitialBlock>& blocks = t.devices[0].initial_blocks;
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[0].addr, kSegmentAddr);
  EXPECT_EQ(blocks[0].size_bytes, 1536u);
  EXPECT_EQ(blocks[0].stream, 9u);
  EXPECT_EQ(blocks[1].addr, kSegmentAddr + 8192);
  EXPECT_EQ(blocks[1].size_bytes, 700u);
}

TEST(SnapshotTest, ActiveSegmentBlocksTheEventsNeverTouchBecomeInitialBlocks) {
  const std::uint64_t a = kSegmentAddr;
  const std::vector<FakeEvent> events = {
      {"free_requested", a + 1 * kMiB, 1000, 4, 1},  // (a): already an initial block
      {"alloc", a + 3 * kMiB, 2000, 4, 2},           // allocated by the events: not initial
  };
  const FakeSegment segment{0, a, 20 * kMiB, 4, {
      {a, 1 * kMiB, 700, "active_allocated"},                // (b), requested_size 700
      {a + 1 * kMiB, 1 * kMiB, 1000, "active_pending_free"}, // the free above: not counted twice
      {a + 2 * kMiB, 1 * kMiB, std::nullopt, "active_pending_free"},  // (b), no requested_size: size
      {a + 3 * kMiB, 1 * kMiB, 2000, "active_allocated"},    // allocated by the events
      {a + 4 * kMiB, 16 * kMiB, 0, "inactive"},              // free: never initial
  }};
  const Trace t = parse(snapshot_pickle({events}, std::vector<FakeSegment>{segment}));
  ASSERT_EQ(t.devices.size(), 1u);
  const std::vector<InitialBlock>& blocks = t.devices[0].initial_blocks;
  ASSERT_EQ(blocks.size(), 3u);
  EXPECT_EQ(blocks[0].addr, a);
  EXPECT_EQ(blocks[0].size_bytes, 700u);
  EXPECT_EQ(blocks[0].stream, 4u);
  EXPECT_EQ(blocks[1].addr, a + 1 * kMiB);
  EXPECT_EQ(blocks[1].size_bytes, 1000u);
  EXPECT_EQ(blocks[2].addr, a + 2 * kMiB);
  EXPECT_EQ(blocks[2].size_bytes, 1 * kMiB);
  // No segment events, so the 20 MiB segment was there from the start.
  EXPECT_EQ(t.devices[0].initial_reserved_bytes, 20 * kMiB);
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::nullopt);
}

TEST(SnapshotTest, BlocksWithoutAddressesLieAfterTheBlocksBeforeThem) {
  PickleBuilder p;  // an old-style segment whose blocks carry no address
  p.proto().empty_dict().mark().str("device_traces").empty_list().str("segments").empty_list().mark();
  p.empty_dict().mark().key_int("device", 0).key_int("address", static_cast<std::int64_t>(kSegmentAddr));
  p.key_int("total_size", static_cast<std::int64_t>(4 * kMiB)).str("blocks").empty_list().mark();
  p.empty_dict().mark().key_int("size", static_cast<std::int64_t>(1 * kMiB)).key_str("state", "inactive").setitems();
  p.empty_dict().mark().key_int("size", static_cast<std::int64_t>(3 * kMiB)).key_str("state", "active_allocated");
  p.setitems().appends().setitems().appends().setitems().stop();
  const Trace t = parse(p.bytes());
  ASSERT_EQ(t.devices.size(), 1u);
  ASSERT_EQ(t.devices[0].initial_blocks.size(), 1u);
  EXPECT_EQ(t.devices[0].initial_blocks[0].addr, kSegmentAddr + 1 * kMiB);
  EXPECT_EQ(t.devices[0].initial_blocks[0].size_bytes, 3 * kMiB);
}

TEST(SnapshotTest, InitialReservedBytesAreTheSegmentsAtTheEndLessTheSegmentEvents) {
  const std::uint64_t a = kSegmentAddr;
  const std::vector<FakeEvent> events = {
      {"segment_alloc", a + 100 * kMiB, 20 * kMiB},
      {"segment_free", a, 8 * kMiB},  // a segment reserved before recording began
      {"segment_alloc", a + 200 * kMiB, 2 * kMiB},
  };
  const std::vector<FakeSegment> segments = {{0, a + 100 * kMiB, 20 * kMiB, 0, {}},
                                             {0, a + 200 * kMiB, 2 * kMiB, 0, {}},
                                             {0, a + 300 * kMiB, 6 * kMiB, 0, {}}};
  const Trace t = parse(snapshot_pickle({events}, segments));
  ASSERT_EQ(t.devices.size(), 1u);
  // At the end 28 MiB; the events added 22 MiB and released 8 MiB: 14 MiB at the start.
  EXPECT_EQ(t.devices[0].initial_reserved_bytes, 14 * kMiB);
  // 14 + 20 = 34 MiB, then 26, then 28.
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::optional<std::uint64_t>(34 * kMiB));
  // Without `segments` nothing is known about the start; the running sum never goes below 0.
  const Trace bare = parse(snapshot_pickle({events}));
  EXPECT_EQ(bare.devices[0].initial_reserved_bytes, 0u);
  EXPECT_EQ(recorded_peak_reserved_bytes(bare.devices[0]), std::optional<std::uint64_t>(20 * kMiB));
}

TEST(SnapshotTest, SeveralDevicesKeepTheirIndexesAndEmptyOnesAreOmitted) {
  const std::vector<FakeSegment> segments = {
      {3, kSegmentAddr, 2 * kMiB, 0, {{kSegmentAddr, 2 * kMiB, 4096, "active_allocated"}}},
      {4, kSegmentAddr, 2 * kMiB, 0, {{kSegmentAddr, 2 * kMiB, 0, "inactive"}}},
  };
  const Trace t = parse(snapshot_pickle(
      {{{"alloc", 1, 512}}, {}, {{"alloc", 2, 512}, {"alloc", 3, 1024}}}, segments));
  ASSERT_EQ(t.devices.size(), 3u);
  EXPECT_EQ(t.devices[0].device, 0);
  EXPECT_EQ(t.devices[0].events.size(), 1u);
  EXPECT_EQ(t.devices[1].device, 2);
  EXPECT_EQ(t.devices[1].events.size(), 2u);
  EXPECT_EQ(t.devices[2].device, 3);  // no events, one live block
  EXPECT_TRUE(t.devices[2].events.empty());
  ASSERT_EQ(t.devices[2].initial_blocks.size(), 1u);
  EXPECT_EQ(t.devices[2].initial_blocks[0].size_bytes, 4096u);
  EXPECT_EQ(t.devices[2].initial_reserved_bytes, 2 * kMiB);
}

TEST(SnapshotTest, AGlobalOpcodeIsRejectedAsNotASnapshot) {
  PickleBuilder p;  // pickle.dumps(collections.OrderedDict(), 2) begins like this
  p.proto(2).raw(test::op::kGlobal).text("collections\nOrderedDict\n").raw(0x71).raw(0);
  p.raw(0x29).raw(test::op::kReduce).stop();
  expect_trace_error([&] { parse(p.bytes()); },
                     "fake: not a PyTorch memory snapshot: pickle opcode GLOBAL at offset 2 would construct an object");
}

TEST(SnapshotTest, ATopLevelThatIsNotADictIsNotASnapshot) {
  PickleBuilder p;
  p.proto().empty_list().stop();
  expect_trace_error([&] { parse(p.bytes()); }, "not a PyTorch memory snapshot (top level is a list, not a dict)");
}

TEST(SnapshotTest, APickleWithoutDeviceTracesIsNotASnapshot) {
  PickleBuilder p;
  p.proto().empty_dict().mark().str("segments").empty_list().setitems().stop();
  expect_trace_error([&] { parse(p.bytes()); }, "not a PyTorch memory snapshot (no device_traces)");
}

TEST(SnapshotTest, BadFieldsNameTheEventOrBlock) {
  PickleBuilder p;  // device_traces[0][1] has a string addr
  p.proto().empty_dict().mark().str("device_traces").empty_list().mark().empty_list().mark();
  p.empty_dict().mark().key_str("action", "alloc").key_int("addr", 1).key_int("size", 2).setitems();
  p.empty_dict().mark().key_str("action", "alloc").key_str("addr", "0x10").key_int("size", 2).setitems();
  p.appends().appends().setitems().stop();
  expect_trace_error([&] { parse(p.bytes()); }, "fake: device_traces[0][1]: addr is a str, not a non-negative int");
  PickleBuilder bad_block;  // segments[0].blocks[1] has size None
  bad_block.proto().empty_dict().mark().str("device_traces").empty_list().str("segments").empty_list().mark();
  bad_block.empty_dict().mark().key_int("address", 0).key_int("total_size", 4096).str("blocks").empty_list().mark();
  bad_block.empty_dict().mark().key_int("size", 4096).key_str("state", "inactive").setitems();
  bad_block.empty_dict().mark().str("size").none().key_str("state", "inactive").setitems();
  bad_block.appends().setitems().appends().setitems().stop();
  expect_trace_error([&] { parse(bad_block.bytes()); }, "fake: segments[0].blocks[1]: size is a None, not a non-negative int");
  PickleBuilder no_action;
  no_action.proto().empty_dict().mark().str("device_traces").empty_list().mark().empty_list().mark();
  no_action.empty_dict().mark().key_int("addr", 1).setitems().appends().appends().setitems().stop();
  expect_trace_error([&] { parse(no_action.bytes()); }, "device_traces[0][0]: no action");
}

TEST(SnapshotTest, EveryTruncatedPrefixThrowsATraceError) {
  const std::vector<std::uint8_t> full = snapshot_pickle(
      {{{"free_requested", 1, 512}, {"alloc", 2, 512}}},
      std::vector<FakeSegment>{{0, 0, 2 * kMiB, 0, {{0, 2 * kMiB, 512, "active_allocated"}}}});
  ASSERT_EQ(parse(full).devices.size(), 1u);
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::vector<std::uint8_t> prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    expect_trace_error([&] { parse(prefix); }, "fake: truncated pickle at offset");
  }
}

TEST(SnapshotTest, RandomlyCorruptedSnapshotsParseOrThrowTraceErrors) {
  const std::vector<std::uint8_t> full = snapshot_pickle(
      {{{"segment_alloc", 0, 2 * kMiB}, {"free_requested", 1, 512}, {"alloc", 2, 512}}},
      std::vector<FakeSegment>{{0, 0, 2 * kMiB, 0, {{0, 2 * kMiB, 512, "active_allocated"}}}});
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::uint8_t> bytes = full;
    bytes[rng() % bytes.size()] = static_cast<std::uint8_t>(rng());
    try {
      parse(bytes);
    } catch (const Error& e) {
      ASSERT_EQ(e.code(), ErrorCode::kTrace) << e.what();
    }
  }
}

TEST(SnapshotTest, AnEventListSharedManyTimesThroughTheMemoIsRejected) {
  PickleBuilder p;  // device_traces = [events] * 2000, events a memoized list of 1000 events
  p.proto().empty_dict().mark().str("device_traces").empty_list().mark();
  p.empty_list().memoize().mark();  // memo 0
  for (int i = 0; i < 1000; ++i) p.empty_dict().mark().key_str("action", "alloc").key_int("addr", i).key_int("size", 1).setitems();
  p.appends();
  for (int i = 0; i < 1999; ++i) p.raw(test::op::kBinGet).raw(0);
  p.appends().setitems().stop();
  expect_trace_error([&] { parse(p.bytes()); }, "shared through the pickle memo too often");
}

}  // namespace
}  // namespace gmlake
