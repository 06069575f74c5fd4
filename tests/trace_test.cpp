// read_trace and the trace model (src/trace/trace.cpp): the real traces, format detection, file errors, names.
#include "gmlake/trace.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "expect_error.h"
#include "gmlake/error.h"
#include "gmlake/units.h"
#include "trace_file_fixture.h"

namespace gmlake {
namespace {

namespace fs = std::filesystem;
using test::TraceFileTest;

void expect_trace_error(const std::function<void()>& f, const std::string& must_contain) {
  test::expect_error(f, ErrorCode::kTrace, must_contain);
}

std::map<TraceAction, std::size_t> count_actions(const DeviceTrace& d) {
  std::map<TraceAction, std::size_t> counts;
  for (const TraceEvent& e : d.events) ++counts[e.action];
  return counts;
}
// ---------------------------------------------------------------------------------------------------------
// Real snapshots recorded from training and inference runs, shipped in traces/ (traces/README.md gives their
// provenance): each is read whole and its counts are those the recording holds.

const Trace& real_trace(const std::string& path) {
  static std::map<std::string, Trace> cache;
  auto it = cache.find(path);
  if (it == cache.end()) it = cache.emplace(path, read_trace(path)).first;
  return it->second;
}

std::string repo_trace(const std::string& name) { return std::string(GMLAKE_TRACES_DIR) + "/" + name; }

TEST(TraceRealTest, Gpt2VarlenHasTheRecordedEventsAndPyTorchsPeakReserved) {
  const Trace& t = real_trace(repo_trace("gpt2_varlen.snapshot.pickle.xz"));
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
  const Trace& t = real_trace(repo_trace("resnet50.snapshot.pickle.xz"));
  EXPECT_EQ(t.name, "resnet50");
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events.size(), 71308u);
  EXPECT_EQ(count_actions(t.devices[0]).at(TraceAction::kSegmentAlloc), 112u);
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::optional<std::uint64_t>(7495221248u));
}

// Three allocating streams on one device (the default stream and two copy streams) and frees deferred by
// record_stream: requested frees that had not completed when the recording ended.
TEST(TraceRealTest, LlmOffloadStreamsHasThreeStreamsOnDevice0AndDeferredFrees) {
  const Trace& t = real_trace(repo_trace("llm_offload_streams.snapshot.pickle.xz"));
  ASSERT_EQ(t.devices.size(), 1u);
  const DeviceTrace& d = t.devices[0];
  EXPECT_EQ(d.device, 0);
  EXPECT_EQ(d.events.size(), 266144u);
  std::set<std::uint64_t> streams;
  for (const TraceEvent& e : d.events) streams.insert(e.stream);
  EXPECT_EQ(streams, (std::set<std::uint64_t>{0, 1403702208, 1403705264}));
  const auto counts = count_actions(d);
  EXPECT_EQ(counts.at(TraceAction::kAlloc), 88682u);  // as the run's allocator counted (native.json)
  EXPECT_EQ(counts.at(TraceAction::kFreeRequested), 88681u);
  EXPECT_EQ(counts.at(TraceAction::kFreeCompleted), 88671u);
  EXPECT_TRUE(d.initial_blocks.empty());
  EXPECT_EQ(recorded_peak_reserved_bytes(d), std::optional<std::uint64_t>(3726639104u));
}

TEST(TraceRealTest, Gpt2GenerateReadsWhole) {
  const Trace& t = real_trace(repo_trace("gpt2_generate.snapshot.pickle.xz"));
  ASSERT_EQ(t.devices.size(), 1u);
  EXPECT_EQ(t.devices[0].events.size(), 272126u);
  EXPECT_EQ(count_actions(t.devices[0]).at(TraceAction::kAlloc), 90691u);  // native.json's allocations
  EXPECT_EQ(recorded_peak_reserved_bytes(t.devices[0]), std::optional<std::uint64_t>(1581252608u));
}

// The largest shipped trace (compressed) reads whole: its events and allocations are those its provenance JSON
// counted when it was captured (bench/torch/capture_traces.py: "trace": {"events", "actions": {"alloc"}}).
TEST(TraceRealTest, TheLargestShippedTraceReadsWhole) {
  fs::path largest;
  for (const auto& entry : fs::directory_iterator(GMLAKE_TRACES_DIR)) {
    if (entry.path().string().find(".snapshot.pickle") == std::string::npos) continue;
    if (largest.empty() || fs::file_size(entry.path()) > fs::file_size(largest)) largest = entry.path();
  }
  ASSERT_FALSE(largest.empty());
  const std::string name = largest.filename().string().substr(0, largest.filename().string().find(".snapshot"));
  std::ifstream json_file(std::string(GMLAKE_TRACES_DIR) + "/" + name + ".native.json");
  ASSERT_TRUE(json_file) << name << " has no provenance JSON";
  const nlohmann::json provenance = nlohmann::json::parse(json_file);
  ASSERT_TRUE(provenance.contains("trace")) << name;
  const Trace& t = real_trace(largest.string());
  ASSERT_EQ(t.devices.size(), 1u) << name;
  EXPECT_EQ(t.devices[0].events.size(), provenance["trace"]["events"].get<std::size_t>()) << name;
  EXPECT_EQ(count_actions(t.devices[0]).at(TraceAction::kAlloc),
            provenance["trace"]["actions"]["alloc"].get<std::size_t>()) << name;
}

// ---------------------------------------------------------------------------------------------------------
// Files: compression, format detection, names.

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
