// `gmlake replay TRACE --policy P --snapshot-out FILE` (ReplayOptions::record, write_snapshot_file): every policy
// on every shipped trace writes a snapshot that passes PyTorch's schema (checked on the pickle itself, as
// scripts/check-snapshot.py checks it in Python) and replays back to the same figures as the trace it came from.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "cli_support.h"
#include "gmlake/replay.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/trace.h"
#include "trace/pickle_reader.h"

namespace gmlake {
namespace {

namespace fs = std::filesystem;
using pickle::Document;
using pickle::Kind;
using pickle::Value;

const std::vector<std::string> kTraces = {"calib_layerwise", "cnn_varres",  "gpt2_generate", "gpt2_varlen",
                                          "llm_offload_streams", "moe_varload", "resnet50"};

const Trace& shipped(const std::string& name) {
  static std::map<std::string, Trace> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    it = cache.emplace(name, read_trace(std::string(GMLAKE_TRACES_DIR) + "/" + name + ".snapshot.pickle.xz")).first;
  }
  return it->second;
}

// The int under `key` of `dict`; fails the test when absent or not an int.
std::int64_t int_at(const Document& doc, const Value& dict, const char* key) {
  const Value* v = doc.find(dict, key);
  EXPECT_TRUE(v != nullptr && v->is(Kind::kInt)) << key;
  return v != nullptr && v->is(Kind::kInt) ? v->integer : -1;
}

// PyTorch's schema, as torch.cuda._memory_viz's segsum and trace read it: every segment's blocks in address
// order from its address, adding up to total_size; states valid; allocated / active / requested sizes equal to
// the blocks'; the keys of every segment, block and trace entry present. Returns the segments' total_size.
std::uint64_t expect_pytorch_schema(const Document& doc) {
  const Value& root = doc.root();
  EXPECT_TRUE(root.is(Kind::kDict));
  const Value* segments = doc.find(root, "segments");
  const Value* traces = doc.find(root, "device_traces");
  EXPECT_NE(doc.find(root, "allocator_settings"), nullptr);
  if (segments == nullptr || traces == nullptr) {
    ADD_FAILURE() << "no segments or device_traces";
    return 0;
  }
  std::uint64_t reserved = 0;
  for (const Value& s : doc.list(*segments)) {
    for (const char* key : {"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
                            "stream", "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}) {
      EXPECT_NE(doc.find(s, key), nullptr) << "segment without " << key;
    }
    const std::int64_t address = int_at(doc, s, "address"), total = int_at(doc, s, "total_size");
    std::int64_t next = address, allocated = 0, active = 0, requested = 0;
    for (const Value& b : doc.list(*doc.find(s, "blocks"))) {
      EXPECT_NE(doc.find(b, "frames"), nullptr);
      EXPECT_EQ(int_at(doc, b, "address"), next) << "blocks not contiguous in segment " << address;
      const std::int64_t size = int_at(doc, b, "size"), req = int_at(doc, b, "requested_size");
      EXPECT_GT(size, 0);
      next += size;
      const std::string_view state = doc.find(b, "state")->text();
      if (state == "active_allocated") {
        allocated += size;
      } else if (state != "active_pending_free") {
        EXPECT_EQ(state, "inactive");
        continue;
      }
      EXPECT_GT(req, 0);
      EXPECT_LE(req, size);
      active += size;
      requested += req;
    }
    EXPECT_EQ(next - address, total) << "blocks do not add up to segment " << address;
    EXPECT_EQ(int_at(doc, s, "allocated_size"), allocated);
    EXPECT_EQ(int_at(doc, s, "active_size"), active);
    EXPECT_EQ(int_at(doc, s, "requested_size"), requested);
    const std::string_view type = doc.find(s, "segment_type")->text();
    EXPECT_TRUE(type == "large" || type == "small") << type;
    reserved += static_cast<std::uint64_t>(total);
  }
  const std::set<std::string_view> actions = {"alloc",       "free_requested", "free_completed", "segment_alloc",
                                              "segment_free", "segment_map",    "segment_unmap",  "oom"};
  for (const Value& device : doc.list(*traces)) {
    for (const Value& e : doc.list(device)) {
      const std::string_view action = doc.find(e, "action")->text();
      EXPECT_TRUE(actions.count(action)) << action;
      for (const char* key : {"size", "stream", "time_us", "frames"}) EXPECT_NE(doc.find(e, key), nullptr) << key;
      EXPECT_NE(doc.find(e, action == "oom" ? "device_free" : "addr"), nullptr);
    }
  }
  return reserved;
}

using Case = std::tuple<std::string, Policy>;

class SnapshotOutTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("gmlake_snapshot_out_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(SnapshotOutTest, PassesPyTorchsSchemaAndReplaysBackToTheSameFigures) {
  const auto& [name, policy] = GetParam();
  const Trace& original = shipped(name);
  ReplayOptions options;
  options.config.policy = policy;
  MemorySnapshot snapshot;
  std::vector<ReplayResult> first;
  std::uint64_t mapped_at_end = 0;
  for (const DeviceTrace& device : original.devices) {
    ReplayRecord record;
    options.record = &record;
    first.push_back(replay(original, device, options));
    options.record = nullptr;
    // Recording changes nothing the replay reports about memory.
    const ReplayResult plain = replay(original, device, options);
    EXPECT_EQ(first.back().peak_reserved_bytes, plain.peak_reserved_bytes);
    EXPECT_EQ(first.back().stats.backend_calls.calls, plain.stats.backend_calls.calls);
    for (SegmentInfo& s : record.segments) {
      mapped_at_end += s.size_bytes;
      snapshot.segments.push_back({device.device, std::move(s)});
    }
    snapshot.device_traces.resize(static_cast<std::size_t>(device.device) + 1);
    snapshot.device_traces[static_cast<std::size_t>(device.device)] = std::move(record.events);
  }
  const std::string path = (dir_ / (name + ".pickle")).string();
  write_snapshot_file(snapshot, path);

  const std::vector<std::uint8_t> bytes = read_decompressed(path);
  const Document doc = pickle::parse_pickle(bytes, path);
  EXPECT_EQ(expect_pytorch_schema(doc), mapped_at_end);

  const Trace back = read_trace(path);
  ASSERT_EQ(back.devices.size(), original.devices.size());
  for (std::size_t d = 0; d < back.devices.size(); ++d) {
    SCOPED_TRACE("device " + std::to_string(back.devices[d].device));
    const ReplayResult again = replay(back, back.devices[d], options);
    EXPECT_EQ(again.ops, first[d].ops);
    EXPECT_EQ(again.peak_allocated_bytes, first[d].peak_allocated_bytes);
    EXPECT_EQ(again.lower_bound_bytes, first[d].lower_bound_bytes) << "requested peak";
    EXPECT_EQ(again.ooms, 0u);
    EXPECT_EQ(again.unknown_frees, 0u) << "every free written is of a block the snapshot allocated or holds";
    // The segment events are the replay's own maps and unmaps: PyTorch's view of reserved memory is then what
    // the policy had mapped, which for caching and expandable is all it reserved.
    ASSERT_TRUE(again.pytorch_peak_reserved_bytes.has_value());
    if (policy != Policy::kGmlake) EXPECT_EQ(*again.pytorch_peak_reserved_bytes, first[d].peak_reserved_bytes);
    else EXPECT_LE(*again.pytorch_peak_reserved_bytes, first[d].peak_reserved_bytes);
  }
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return std::get<0>(info.param) + "_" + to_string(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(EveryShippedTraceEveryPolicy, SnapshotOutTest,
                         ::testing::Combine(::testing::ValuesIn(kTraces),
                                            ::testing::Values(Policy::kCaching, Policy::kExpandable, Policy::kGmlake)),
                         case_name);

TEST(SnapshotOutRecordTest, AFailedAllocationIsAnOomEntryAndItsFreeIsLeftOut) {
  DeviceTrace device;
  device.events = {{TraceAction::kAlloc, 0x1000, 8 * kMiB, 0, 1},
                   {TraceAction::kAlloc, 0x9000000, 64 * kMiB, 0, 2},
                   {TraceAction::kFreeRequested, 0x9000000, 64 * kMiB, 0, 3},
                   {TraceAction::kFreeCompleted, 0x9000000, 64 * kMiB, 0, 4}};
  const Trace trace{"cap", {device}};
  ReplayRecord record;
  ReplayOptions options;
  options.config.policy = Policy::kCaching;
  options.config.cap_bytes = 32 * kMiB;
  options.record = &record;
  const ReplayResult r = replay(trace, trace.devices[0], options);
  EXPECT_EQ(r.ooms, 1u);
  std::vector<SnapshotAction> actions;
  for (const SnapshotEvent& e : record.events) actions.push_back(e.action);
  EXPECT_EQ(actions, (std::vector<SnapshotAction>{SnapshotAction::kSegmentAlloc, SnapshotAction::kAlloc,
                                                  SnapshotAction::kOom}));
  EXPECT_EQ(record.events[2].size_bytes, 64 * kMiB);
  EXPECT_EQ(record.events[1].time_us, 1);
  ASSERT_EQ(record.segments.size(), 1u);
  EXPECT_EQ(record.segments[0].blocks[0].requested_bytes, 8 * kMiB);
}

class SnapshotOutCliTest : public testing::CliFixture {
 protected:
  SnapshotOutCliTest() : CliFixture("snapshot_out_cli") {}
};

TEST_F(SnapshotOutCliTest, PolicyAllWritesOneFileNamedAfterEachPolicyThatReplaysLikeTheTrace) {
  const std::string trace = std::string(GMLAKE_TRACES_DIR) + "/resnet50.snapshot.pickle.xz";
  const std::string out = (dir_ / "resnet.pickle").string();
  const testing::Outcome o = run("replay " + trace + " --policy all --snapshot-out " + out);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_FALSE(fs::exists(out));
  for (const char* policy : {"caching", "expandable", "gmlake"}) {
    const std::string written = (dir_ / (std::string("resnet.") + policy + ".pickle")).string();
    ASSERT_TRUE(fs::exists(written)) << written;
    const testing::Outcome again = run("replay " + written + " --policy " + policy);
    ASSERT_EQ(again.status, 0) << again.err;
    EXPECT_NE(again.out.find(policy), std::string::npos);
  }
  const testing::Outcome one = run("replay " + trace + " --policy gmlake --snapshot-out " + out);
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_TRUE(fs::exists(out)) << "one policy: the file as named";
}

TEST_F(SnapshotOutCliTest, BadUsesAreOneLineAndStatusTwo) {
  const std::string trace = std::string(GMLAKE_TRACES_DIR) + "/resnet50.snapshot.pickle.xz";
  const testing::Outcome two = run("replay " + trace + " " + trace + " --snapshot-out " + (dir_ / "x").string());
  EXPECT_EQ(two.status, 2);
  EXPECT_NE(two.err.find("exactly one trace"), std::string::npos) << two.err;
  const testing::Outcome unwritable = run("replay " + trace + " --policy caching --snapshot-out /no/such/dir/x.pickle");
  EXPECT_EQ(unwritable.status, 2);
  EXPECT_NE(unwritable.err.find("cannot write /no/such/dir/x.pickle"), std::string::npos) << unwritable.err;
}

}  // namespace
}  // namespace gmlake
