// snapshot_pickle / write_snapshot_file (include/gmlake/snapshot_writer.h): PyTorch's snapshot schema, read back
// by our pickle reader (key by key) and by the snapshot reader the replay uses (round trip).
#include "gmlake/snapshot_writer.h"

#include <gtest/gtest.h>

#include <string>

#include "gmlake/error.h"
#include "gmlake/trace.h"
#include "gmlake/units.h"
#include "trace/pickle_reader.h"

namespace gmlake {
namespace {

using pickle::Document;
using pickle::Kind;
using pickle::Value;

constexpr std::uintptr_t kBase = 0x7f0000000000;

// Device 0: one stitched segment of two chunks (an allocated block, a free gap, a pending free block); device 1:
// a small segment with one block allocated before the trace began (no event touches it).
MemorySnapshot example() {
  MemorySnapshot s;
  s.policy = "gmlake";
  s.conf = "policy:gmlake";
  s.segments.push_back({0, SegmentInfo{kBase, 4 * kMiB, 0, SegmentType::kLarge, true,
                                       {{kBase, kMiB, kMiB - 100, SegmentBlockState::kActiveAllocated},
                                        {kBase + kMiB, kMiB, 0, SegmentBlockState::kInactive},
                                        {kBase + 2 * kMiB, 2 * kMiB, 2 * kMiB, SegmentBlockState::kActivePendingFree}},
                                       {{11, 0, 2 * kMiB}, {12, 2 * kMiB, 2 * kMiB}}}});
  s.segments.push_back({1, SegmentInfo{kBase + 64 * kMiB, 2 * kMiB, 7, SegmentType::kSmall, false,
                                       {{kBase + 64 * kMiB, 512, 500, SegmentBlockState::kActiveAllocated},
                                        {kBase + 64 * kMiB + 512, 2 * kMiB - 512, 0, SegmentBlockState::kInactive}},
                                       {{13, 0, 2 * kMiB}}}});
  s.device_traces.resize(2);
  s.device_traces[0] = {{SnapshotAction::kSegmentMap, kBase, 4 * kMiB, 0, 10},
                        {SnapshotAction::kAlloc, kBase, kMiB - 100, 0, 11},
                        {SnapshotAction::kAlloc, kBase + 2 * kMiB, 2 * kMiB, 0, 12},
                        {SnapshotAction::kFreeRequested, kBase + 2 * kMiB, 2 * kMiB, 0, 13},
                        {SnapshotAction::kOom, 0, 80 * kGiB, 0, 14}};
  return s;
}

const Value& at(const Document& doc, const Value& dict, const char* key) {
  const Value* v = doc.find(dict, key);
  if (v == nullptr) throw std::runtime_error(std::string("no key ") + key);
  return *v;
}

TEST(SnapshotWriterTest, SegmentsCarryPyTorchsKeysWithSizesRecountedFromTheirBlocks) {
  const std::vector<std::uint8_t> bytes = snapshot_pickle(example());
  const Document doc = pickle::parse_pickle(bytes, "written");
  const auto segments = doc.list(at(doc, doc.root(), "segments"));
  ASSERT_EQ(segments.size(), 2u);
  const Value& s0 = segments[0];
  EXPECT_EQ(at(doc, s0, "device").integer, 0);
  EXPECT_EQ(at(doc, s0, "address").integer, static_cast<std::int64_t>(kBase));
  EXPECT_EQ(at(doc, s0, "total_size").integer, static_cast<std::int64_t>(4 * kMiB));
  EXPECT_EQ(at(doc, s0, "allocated_size").integer, static_cast<std::int64_t>(kMiB));
  EXPECT_EQ(at(doc, s0, "active_size").integer, static_cast<std::int64_t>(3 * kMiB));
  EXPECT_EQ(at(doc, s0, "requested_size").integer, static_cast<std::int64_t>(3 * kMiB - 100));
  EXPECT_EQ(at(doc, s0, "stream").integer, 0);
  EXPECT_EQ(at(doc, s0, "segment_type").text(), "large");
  EXPECT_EQ(doc.list(at(doc, s0, "segment_pool_id")).size(), 2u);
  EXPECT_EQ(at(doc, s0, "is_expandable").integer, 1);
  EXPECT_EQ(doc.list(at(doc, s0, "frames")).size(), 0u);
  const auto blocks = doc.list(at(doc, s0, "blocks"));
  ASSERT_EQ(blocks.size(), 3u);
  const char* states[] = {"active_allocated", "inactive", "active_pending_free"};
  std::int64_t next = static_cast<std::int64_t>(kBase);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(at(doc, blocks[i], "address").integer, next);
    next += at(doc, blocks[i], "size").integer;
    EXPECT_EQ(at(doc, blocks[i], "state").text(), states[i]);
    EXPECT_TRUE(at(doc, blocks[i], "requested_size").is(Kind::kInt));
    EXPECT_TRUE(at(doc, blocks[i], "frames").is(Kind::kList));
  }
  const auto chunks = doc.list(at(doc, s0, "gmlake_chunks"));
  ASSERT_EQ(chunks.size(), 2u) << "a stitched segment shows its chunks";
  EXPECT_EQ(at(doc, chunks[1], "handle").integer, 12);
  EXPECT_EQ(at(doc, chunks[1], "offset").integer, static_cast<std::int64_t>(2 * kMiB));
  EXPECT_EQ(at(doc, segments[1], "segment_type").text(), "small");
  EXPECT_EQ(at(doc, segments[1], "stream").integer, 7);
  EXPECT_EQ(at(doc, segments[1], "is_expandable").integer, 0);
}

TEST(SnapshotWriterTest, TraceEntriesAndSettingsCarryPyTorchsKeys) {
  const std::vector<std::uint8_t> bytes = snapshot_pickle(example());
  const Document doc = pickle::parse_pickle(bytes, "written");
  const auto devices = doc.list(at(doc, doc.root(), "device_traces"));
  ASSERT_EQ(devices.size(), 2u);
  EXPECT_EQ(doc.list(devices[1]).size(), 0u);
  const auto events = doc.list(devices[0]);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(at(doc, events[0], "action").text(), "segment_map");
  EXPECT_EQ(at(doc, events[1], "action").text(), "alloc");
  EXPECT_EQ(at(doc, events[1], "addr").integer, static_cast<std::int64_t>(kBase));
  EXPECT_EQ(at(doc, events[1], "size").integer, static_cast<std::int64_t>(kMiB - 100));
  EXPECT_EQ(at(doc, events[1], "time_us").integer, 11);
  EXPECT_TRUE(at(doc, events[1], "frames").is(Kind::kList));
  EXPECT_EQ(at(doc, events[4], "action").text(), "oom");
  EXPECT_EQ(doc.find(events[4], "addr"), nullptr) << "PyTorch writes device_free in place of addr for an oom";
  EXPECT_EQ(at(doc, events[4], "device_free").integer, 0);
  const Value& settings = at(doc, doc.root(), "allocator_settings");
  EXPECT_EQ(at(doc, settings, "PYTORCH_CUDA_ALLOC_CONF").text(), "policy:gmlake");
  EXPECT_EQ(at(doc, settings, "expandable_segments").integer, 0);
  EXPECT_EQ(at(doc, settings, "gmlake_policy").text(), "gmlake");
}

TEST(SnapshotWriterTest, TheSnapshotReaderReadsItBackAsATrace) {
  const Trace t = parse_snapshot_pickle(snapshot_pickle(example()), "example");
  ASSERT_EQ(t.devices.size(), 2u);
  const DeviceTrace& d0 = t.devices[0];
  ASSERT_EQ(d0.events.size(), 4u) << "the oom entry is skipped";
  EXPECT_EQ(d0.events[0].action, TraceAction::kSegmentMap);
  EXPECT_EQ(d0.events[1].action, TraceAction::kAlloc);
  EXPECT_EQ(d0.events[1].addr, kBase);
  EXPECT_EQ(d0.events[1].size_bytes, kMiB - 100);
  EXPECT_EQ(d0.events[3].action, TraceAction::kFreeRequested);
  EXPECT_TRUE(d0.initial_blocks.empty()) << "the events allocate every active block of device 0";
  const DeviceTrace& d1 = t.devices[1];
  EXPECT_EQ(d1.device, 1);
  ASSERT_EQ(d1.initial_blocks.size(), 1u) << "an active block no event touches was live before the trace";
  EXPECT_EQ(d1.initial_blocks[0].addr, kBase + 64 * kMiB);
  EXPECT_EQ(d1.initial_blocks[0].size_bytes, 500u) << "its requested size";
  EXPECT_EQ(d1.initial_blocks[0].stream, 7u);
  EXPECT_EQ(d1.initial_reserved_bytes, 2 * kMiB);
}

TEST(SnapshotWriterTest, ValuesBeyondPyTorchsInt64AreRefusedNotWrapped) {
  MemorySnapshot s = example();
  s.segments[0].segment.address = std::uintptr_t{1} << 63;
  try {
    snapshot_pickle(s);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("segment address"), std::string::npos) << e.what();
  }
  MemorySnapshot negative = example();
  negative.segments[1].device = -1;
  EXPECT_THROW(snapshot_pickle(negative), Error);
  // A stream is a handle: any 64-bit value is kept bit for bit.
  MemorySnapshot stream = example();
  stream.segments[1].segment.stream = ~StreamId{0};
  const std::vector<std::uint8_t> bytes = snapshot_pickle(stream);
  const Document doc = pickle::parse_pickle(bytes, "written");
  EXPECT_EQ(at(doc, doc.list(at(doc, doc.root(), "segments"))[1], "stream").integer, -1);
}

TEST(SnapshotWriterTest, AFileThatCannotBeWrittenIsAClearError) {
  try {
    write_snapshot_file(example(), "/nonexistent-gmlake-dir/out.pickle");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("/nonexistent-gmlake-dir/out.pickle"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace gmlake
