#include "gmlake/trace.h"

#include <gtest/gtest.h>

#include "expect_error.h"
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/units.h"
#include "pickle_builder.h"
#include "pickle_fixtures.h"

namespace gmlake {
namespace {

namespace fs = std::filesystem;
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

std::map<TraceAction, std::size_t> count_actions(const DeviceTrace& d) {
  std::map<TraceAction, std::size_t> counts;
  for (const TraceEvent& e : d.events) ++counts[e.action];
  return counts;
}

// ---------------------------------------------------------------------------------------------------------
// Real snapshots recorded from training runs (traces/ in the repo, ../shared/traces beside it).

const Trace& real_trace(const std::string& path) {
  static std::map<std::string, Trace> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, read_trace(path)).first;
  return it->second;
}

std::string repo_trace(const std::string& name) { return std::string(GMLAKE_TRACES_DIR) + "/" + name; }
std::string shared_trace(const std::string& name) { return std::string(GMLAKE_SHARED_TRACES_DIR) + "/" + name; }

#define SKIP_UNLESS_EXISTS(path) \
  if (!fs::exists(path)) GTEST_SKIP() << (path) << " is not here"

TEST(TraceRealTest, Gpt2VarlenHasTheRecordedEventsAndPyTorchsPeakReserved) {
  const std::string path = repo_trace("gpt2_varlen.snapshot.pickle.xz");
  SKIP_UNLESS_EXISTS(path);
  const Trace& t = real_trace(path);
  EXPECT_EQ(t.name, "gpt2_varlen");
  ASSERT_EQ(t.devices.size(), 1u);
  const DeviceTrace& d = t.devices[0];
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.events.size(), 171053u);
  const auto counts = count_actions(d);
  EXPECT_EQ(counts.at(TraceAction::kAlloc), 56953u);
  EXPECT_EQ(counts.at(TraceAction::kFreeRequested), 56950u);
  EXPECT_EQ(counts.at(TraceAction::kFreeCompleted), 56950u);
  EXPECT_EQ(counts.at(TraceAction::kSegmentAlloc), 200u);
  EXPECT_EQ(counts.size(), 4u);
  EXPECT_TRUE(d.initial_blocks.empty());
  EXPECT_EQ(d.initial_reserved_bytes, 0u);
  EXPECT_EQ(recorded_peak_reserved_bytes(d), std::optional<std::uint64_t>(17509122048u));  // max_memory_reserved
  EXPECT_EQ(d.events.front().action, TraceAction::kSegmentAlloc);
  EXPECT_EQ(d.events.front().addr, 140419493003264u);
  EXPECT_EQ(d.events.front().size_bytes, 155189248u);
  EXPECT_EQ(d.events.front().time_us, 1795257200439281);
}

TEST(TraceRealTest, Resnet50HasTheRecordedEventsAndPyTorchsPeakReserved) {
  const std::string path = repo_trace("resnet50.snapshot.pickle.xz");
  SKIP_UNLESS_EXISTS(path);
  const Trace& t = real_trace(path);
  EXPECT_EQ(t.name, "resnet50");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events.size(), 71308u);
  EXPECT_EQ(count_actions(t.devices[0]).at(TraceAction::kSegmentAlloc), 112u);
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::optional<std::uint64_t>(7495221248u));
}

TEST(TraceRealTest, FsdpRank0HasThreeStreamsOnDevice0AndOmitsTheEmptyDevice1) {
  const std::string path = shared_trace("fsdp_gpt2m_rank0.snapshot.pickle.xz");
  SKIP_UNLESS_EXISTS(path);
  const Trace& t = real_trace(path);
  ASSERT_EQ(t.devices.size(), 1u);
  const DeviceTrace& d = t.devices[0];
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.events.size(), 212801u);
  std::set<std::uint64_t> streams;
  for (const TraceEvent& e : d.events) streams.insert(e.stream);
  EXPECT_EQ(streams, (std::set<std::uint64_t>{0, 1088581904, 1088647840}));
  EXPECT_TRUE(d.initial_blocks.empty());  // the 881 blocks live at the end were all allocated in the trace
  EXPECT_EQ(recorded_peak_reserved_bytes(d), std::optional<std::uint64_t>(34124857344u));
}

TEST(TraceRealTest, BertVarlenIsTheLargestTraceAndReadsWhole) {
  const std::string path = shared_trace("bert_varlen.snapshot.pickle.xz");
  SKIP_UNLESS_EXISTS(path);
  const Trace& t = real_trace(path);
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events.size(), 223599u);
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::optional<std::uint64_t>(7520387072u));
}

// ---------------------------------------------------------------------------------------------------------
// Hand-built snapshots.

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

// ---------------------------------------------------------------------------------------------------------
// RMM logging_resource_adaptor CSV logs.

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

// ---------------------------------------------------------------------------------------------------------
// Files: compression, format detection, names.

class TraceFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gmlake_trace_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
    const std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }

  static std::vector<std::uint8_t> xz(const std::vector<std::uint8_t>& in) {
    std::vector<std::uint8_t> out(lzma_stream_buffer_bound(in.size()));
    std::size_t used = 0;
    EXPECT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr, in.data(), in.size(), out.data(), &used,
                                      out.size()),
              LZMA_OK);
    out.resize(used);
    return out;
  }

  static std::vector<std::uint8_t> gzip(const std::vector<std::uint8_t>& in) {
    z_stream z{};
    EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
    std::vector<std::uint8_t> out(deflateBound(&z, static_cast<uLong>(in.size())));
    z.next_in = const_cast<Bytef*>(in.data());
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
  }

  static std::vector<std::uint8_t> concat(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  }

  fs::path dir_;
  const std::vector<std::uint8_t> pickle_ = snapshot_pickle({{{"alloc", 1, 512}, {"free_requested", 1, 512}}});
};

TEST_F(TraceFileTest, RawXzAndGzipSnapshotsReadTheSame) {
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::vector<std::uint8_t>>>{
           {"run.snapshot.pickle", pickle_}, {"run.snapshot.pickle.xz", xz(pickle_)},
           {"run.pickle.gz", gzip(pickle_)}}) {
    const std::string path = write(name, bytes);
    EXPECT_EQ(read_decompressed(path), pickle_) << name;
    const Trace t = read_trace(path);
    EXPECT_EQ(t.name, "run") << name;
    ASSERT_EQ(t.devices.size(), 1u) << name;
    EXPECT_EQ(t.devices[0].events.size(), 2u) << name;
  }
}

TEST_F(TraceFileTest, ConcatenatedXzStreamsAndGzipMembersReadAsOne) {
  const std::vector<std::uint8_t> a = {1, 2, 3};
  const std::vector<std::uint8_t> b = {4, 5};
  EXPECT_EQ(read_decompressed(write("two.xz", concat(xz(a), xz(b)))), concat(a, b));
  EXPECT_EQ(read_decompressed(write("two.gz", concat(gzip(a), gzip(b)))), concat(a, b));
}

TEST_F(TraceFileTest, TruncatedXzIsAnErrorNamingTheFile) {
  const std::vector<std::uint8_t> full = xz(pickle_);
  for (std::size_t n : {std::size_t{6}, std::size_t{12}, full.size() / 2, full.size() - 1}) {
    const std::string path = write("cut.xz", std::vector<std::uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
    expect_trace_error([&] { read_decompressed(path); }, path + ": truncated or corrupt xz data");
  }
}

TEST_F(TraceFileTest, TruncatedGzipIsAnErrorNamingTheFile) {
  const std::vector<std::uint8_t> full = gzip(pickle_);
  for (std::size_t n : {std::size_t{2}, std::size_t{10}, full.size() / 2, full.size() - 1}) {
    const std::string path = write("cut.gz", std::vector<std::uint8_t>(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n)));
    expect_trace_error([&] { read_decompressed(path); }, path + ": truncated or corrupt gzip data");
  }
}

TEST_F(TraceFileTest, CorruptCompressedDataIsAnError) {
  std::vector<std::uint8_t> bad_xz = xz(pickle_);
  bad_xz[bad_xz.size() / 2] ^= 0x55;
  expect_trace_error([&] { read_decompressed(write("bad.xz", bad_xz)); }, "truncated or corrupt xz data");
  std::vector<std::uint8_t> bad_gz = gzip(pickle_);
  bad_gz[bad_gz.size() - 6] ^= 0x55;  // inside the CRC-32 trailer
  expect_trace_error([&] { read_decompressed(write("bad.gz", bad_gz)); }, "truncated or corrupt gzip data");
  expect_trace_error([&] { read_decompressed(write("junk.gz", concat(gzip(pickle_), {'x', 'y', 'z'}))); },
                     "trailing bytes");
}

TEST_F(TraceFileTest, RmmLogsAreRecognisedByTheirHeaderEvenWhenCompressed) {
  const std::string csv = "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10,16,0\n";
  const std::vector<std::uint8_t> bytes(csv.begin(), csv.end());
  const Trace t = read_trace(write("rmm_log.csv.gz", gzip(bytes)));
  EXPECT_EQ(t.name, "rmm_log");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events.size(), 1u);
  const std::string bad = "Thread,Time,Action,Pointer,Size,Stream\n1,1,allocate,0x10\n";
  const std::string path = write("bad.csv", std::vector<std::uint8_t>(bad.begin(), bad.end()));
  expect_trace_error([&] { read_trace(path); }, path + ": line 2: expected 6 fields");
}

TEST_F(TraceFileTest, OtherContentIsNeitherASnapshotNorAnRmmLog) {
  const std::string path = write("notes.txt", {'h', 'e', 'l', 'l', 'o'});
  expect_trace_error([&] { read_trace(path); }, path + ": not a PyTorch snapshot or RMM log");
  const std::string empty = write("empty", {});
  expect_trace_error([&] { read_trace(empty); }, "not a PyTorch snapshot or RMM log");
}

TEST_F(TraceFileTest, PickleErrorsNameTheFilePath) {
  const std::string path = write("cut.pickle", std::vector<std::uint8_t>(pickle_.begin(), pickle_.end() - 1));
  expect_trace_error([&] { read_trace(path); }, path + ": truncated pickle at offset");
}

TEST_F(TraceFileTest, AMissingFileIsAnErrorNamingThePath) {
  const std::string path = (dir_ / "no_such.snapshot.pickle.xz").string();
  expect_trace_error([&] { read_trace(path); }, "cannot open " + path + ": No such file or directory");
  expect_trace_error([&] { read_decompressed(dir_.string()); }, "cannot read " + dir_.string());
}

TEST(TraceActionTest, NamesAreThoseOfPyTorchSnapshots) {
  EXPECT_STREQ(to_string(TraceAction::kAlloc), "alloc");
  EXPECT_STREQ(to_string(TraceAction::kFreeRequested), "free_requested");
  EXPECT_STREQ(to_string(TraceAction::kFreeCompleted), "free_completed");
  EXPECT_STREQ(to_string(TraceAction::kSegmentAlloc), "segment_alloc");
  EXPECT_STREQ(to_string(TraceAction::kSegmentFree), "segment_free");
  EXPECT_STREQ(to_string(TraceAction::kSegmentMap), "segment_map");
  EXPECT_STREQ(to_string(TraceAction::kSegmentUnmap), "segment_unmap");
}

}  // namespace
}  // namespace gmlake
