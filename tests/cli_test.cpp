// The `gmlake` command line, run as a user would: the main job's output, its --json form, and bad input,
// which must get one clear line on stderr and exit status 2, never a crash or a traceback.
#include <sys/wait.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_support.h"
#include "gmlake/backend_factory.h"

namespace {

using gmlake::testing::Outcome;
using gmlake::testing::slurp;
namespace fs = std::filesystem;

class CliTest : public gmlake::testing::CliFixture {
 protected:
  CliTest() : CliFixture("cli_test") {}

  Outcome gmlake(const std::string& args) { return run(args); }
  void expect_bad_input(const std::string& args, const std::string& must_mention) {
    const Outcome o = gmlake(args);
    EXPECT_EQ(o.status, 2) << args << "\nstderr: " << o.err;
    EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << "not one line: " << o.err;
    EXPECT_NE(o.err.find(must_mention), std::string::npos) << o.err;
    EXPECT_EQ(o.err.find("Traceback"), std::string::npos);
  }
  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }

  const std::string trace_ = std::string(GMLAKE_TRACES_DIR) + "/resnet50.snapshot.pickle.xz";
};

TEST_F(CliTest, ReplayPrintsEveryPolicySideBySideAndWritesTheJsonKeys) {
  const fs::path json = dir_ / "r.json";
  const Outcome o = gmlake("replay " + trace_ + " --json " + json.string());
  ASSERT_EQ(o.status, 0) << o.err;
  for (const char* word : {"caching", "expandable", "gmlake", "utilization", "resnet50", "lower bound", "vmm ns/op"}) {
    EXPECT_NE(o.out.find(word), std::string::npos) << word;
  }
  const auto results = nlohmann::json::parse(slurp(json));
  ASSERT_EQ(results.size(), 3u);
  for (const auto& r : results) {
    for (const char* key : {"trace", "device", "policy", "backend", "ops", "lower_bound_bytes", "peak_reserved_bytes",
                            "peak_allocated_bytes", "utilization", "fragmentation", "pytorch_peak_reserved_bytes",
                            "ns_per_op", "stitches", "ooms", "backend_calls", "backend_time_ns"}) {
      EXPECT_TRUE(r.contains(key)) << key;
    }
    EXPECT_EQ(r["trace"], "resnet50");
    EXPECT_EQ(r["pytorch_peak_reserved_bytes"], 7495221248u);
    EXPECT_TRUE(r["backend_calls"].contains("map"));
    EXPECT_TRUE(r["backend_time_ns"].contains("set_access"));
    EXPECT_GT(r["utilization"].get<double>(), 0.5);
  }
}

TEST_F(CliTest, OnePolicyOnTheHostBackendWithACap) {
  const Outcome o = gmlake("replay " + trace_ + " --policy gmlake --backend host --cap 7G");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("host backend"), std::string::npos);
  EXPECT_EQ(o.out.find("caching"), std::string::npos);
}

// The lake in a replay: `--conf peer_devices:1` gives the sim a peer, which takes what the cap cannot hold.
TEST_F(CliTest, APeerDeviceInTheConfTakesWhatTheCapCannotHoldOnTheSim) {
  const Outcome o = gmlake("replay " + trace_ + " --policy gmlake --backend sim:h100 --cap 4900M --conf peer_devices:1");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("of which on peer devices at most"), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("allocations failed"), std::string::npos) << o.out;
  expect_bad_input("replay " + trace_ + " --conf peer_devices:x", "peer_devices");
}

TEST_F(CliTest, PlotWritesOneSelfContainedPageWithTheCurveOfEachPolicy) {
  const fs::path page = dir_ / "plot.html";
  const Outcome o = gmlake("replay " + trace_ + " --policy all --plot " + page.string());
  ASSERT_EQ(o.status, 0) << o.err;
  const std::string html = slurp(page);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* policy : {"caching", "expandable", "gmlake"}) {
    EXPECT_NE(html.find(std::string("class=\"reserved\" data-policy=\"") + policy + "\""), std::string::npos) << policy;
  }
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_LT(html.size(), 3'000'000u);
}

TEST_F(CliTest, APlotPathThatCannotBeWrittenIsBadInput) {
  expect_bad_input("replay " + trace_ + " --policy gmlake --plot /no/such/dir/plot.html", "/no/such/dir/plot.html");
}

// The progress line is for terminals (tests/progress_test.cpp): with stderr in a file, nothing reaches it, with or
// without --quiet.
TEST_F(CliTest, QuietIsAcceptedAndAStderrThatIsNotATerminalGetsNoProgress) {
  for (const char* quiet : {"", " --quiet"}) {
    const Outcome o = gmlake("replay " + trace_ + " --policy gmlake" + quiet);
    EXPECT_EQ(o.status, 0) << quiet;
    EXPECT_EQ(o.err, "") << quiet;
    EXPECT_NE(o.out.find("gmlake"), std::string::npos);
  }
  expect_bad_input("replay " + trace_ + " --quiet=maybe", "quiet");
}

TEST_F(CliTest, AMissingFileIsBadInput) { expect_bad_input("replay /no/such/trace.pickle", "/no/such/trace.pickle"); }

TEST_F(CliTest, ATruncatedXzFileIsBadInput) {
  const std::string whole = slurp(trace_);
  expect_bad_input("replay " + write("cut.pickle.xz", whole.substr(0, whole.size() / 2)).string(), "cut.pickle.xz");
}

TEST_F(CliTest, CorruptCompressedDataIsBadInput) {
  std::string whole = slurp(trace_);
  for (std::size_t i = 64; i < whole.size(); i += 97) whole[i] = static_cast<char>(whole[i] ^ 0x5a);
  expect_bad_input("replay " + write("corrupt.pickle.xz", whole).string(), "corrupt.pickle.xz");
}

TEST_F(CliTest, APickleThatIsNotASnapshotIsBadInput) {
  // protocol 4: an empty list, then STOP
  expect_bad_input("replay " + write("list.pickle", std::string("\x80\x04]\x94.", 5)).string(), "snapshot");
}

TEST_F(CliTest, APickleThatWouldRunCodeIsRejected) {
  // protocol 2: GLOBAL 'os system', the classic hostile pickle
  static constexpr char kEvil[] = "\x80\x02" "cos\nsystem\n" "X\x02\x00\x00\x00id\x85R.";
  expect_bad_input("replay " + write("evil.pickle", std::string(kEvil, sizeof kEvil - 1)).string(), "GLOBAL");
}

TEST_F(CliTest, UnknownPolicyBackendOrCapIsBadInput) {
  expect_bad_input("replay " + trace_ + " --policy magic", "expected gmlake, caching, expandable, async or all");
  expect_bad_input("replay " + trace_ + " --backend gpu9", "gpu9");
  expect_bad_input("replay " + trace_ + " --cap lots", "cap_bytes");
  expect_bad_input("replay " + trace_ + " --conf nokey:1", "nokey");
}

// --policy async replays through cudaMallocAsync's pool of a GPU: alone on the sim or host backend it is refused
// with one line before any trace is read; `all` there replays the other three without a word (the JSON rows of
// DeviceBytesSizesTheDeviceOnTheSimAndHostBackends: three).
TEST_F(CliTest, AsyncAloneOnTheSimOrHostBackendIsRefusedWithOneLineSayingWhy) {
  for (const std::string backend : {"sim", "sim:h100", "host"}) {
    expect_bad_input("replay " + trace_ + " --policy async --backend " + backend,
                     "--policy async: it replays through cudaMallocAsync's stream-ordered pool of a GPU, which "
                     "backend " + backend + " has none of: use --backend cuda");
    // Refused before the trace is read: a missing file is not what it reports.
    expect_bad_input("replay /no/such/trace.pickle --policy async --backend " + backend, "--backend cuda");
  }
  const Outcome all = gmlake("replay " + trace_ + " --policy all --backend sim");
  ASSERT_EQ(all.status, 0) << all.err;
  EXPECT_EQ(all.out.find("async"), std::string::npos) << all.out;
  EXPECT_EQ(all.err.find("async"), std::string::npos) << all.err;
}

// --device-bytes: a device of that size on the sim and host backends alike; the policy is not told, so a
// policy that needs more fails allocations (counted, the replay goes on), and gmlake, memory first near the
// device's end, fails none at 1.01x the lower bound where caching does.
TEST_F(CliTest, DeviceBytesSizesTheDeviceOnTheSimAndHostBackends) {
  for (const std::string backend : {"sim", "host"}) {
    const std::string json = (dir_ / ("device_" + backend + ".json")).string();
    const Outcome o = gmlake("replay " + trace_ + " --policy all --backend " + backend +
                             " --device-bytes 1.01x --json " + json);
    ASSERT_EQ(o.status, 0) << o.err;
    const std::string text = slurp(json);
    const auto rows = nlohmann::json::parse(text);
    ASSERT_EQ(rows.size(), 3u);
    // The trace's lower bound: the largest row's (a policy's counts only the allocations that succeeded).
    double lower = 0;
    for (const auto& r : rows) lower = std::max(lower, r["lower_bound_bytes"].get<double>());
    for (const auto& r : rows) {
      EXPECT_LE(r["peak_reserved_bytes"].get<double>(), lower * 1.01 + 1) << backend << " " << r["policy"];
      if (r["policy"] == "gmlake") {
        EXPECT_EQ(r["ooms"].get<int>(), 0) << backend;
      }
      if (r["policy"] == "caching") {
        EXPECT_GT(r["ooms"].get<int>(), 0) << backend;
      }
    }
  }
  // A byte count works too, and the same as the factor it equals.
  const Outcome o = gmlake("replay " + trace_ + " --policy gmlake --device-bytes 5G");
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("out of memory"), std::string::npos) << "5 GB is below resnet50's 6.06 GB lower bound";
}

TEST_F(CliTest, ABadDeviceSizeIsBadInput) {
  expect_bad_input("replay " + trace_ + " --device-bytes lots", "--device-bytes");
  expect_bad_input("replay " + trace_ + " --device-bytes 0", "--device-bytes");
  expect_bad_input("replay " + trace_ + " --device-bytes 0.5x", "--device-bytes");
  expect_bad_input("replay " + trace_ + " --device-bytes x", "--device-bytes");
  expect_bad_input("replay " + trace_ + " --device-bytes 8G,cap_bytes:1", "--device-bytes");
}

// --repeat: the trace that many times in a row; the table and the JSON add the last pass's backend calls, which
// caching, whose segments the first pass made, needs none of.
TEST_F(CliTest, RepeatReplaysTheTraceAgainAndReportsTheLastPass) {
  const std::string json = (dir_ / "repeat.json").string();
  const Outcome o = gmlake("replay " + trace_ + " --policy all --backend sim --repeat 3 --json " + json);
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find("last of 3 passes: create/map/unmap/rel "), std::string::npos) << o.out;
  const Outcome once = gmlake("replay " + trace_ + " --policy caching --backend sim");
  ASSERT_EQ(once.status, 0) << once.err;
  EXPECT_EQ(once.out.find("passes"), std::string::npos) << once.out;
  for (const auto& r : nlohmann::json::parse(slurp(json))) {
    EXPECT_EQ(r["passes"], 3) << r["policy"];
    EXPECT_LE(r["backend_calls_last_pass"]["create"].get<std::uint64_t>(), r["backend_calls"]["create"].get<std::uint64_t>());
    if (r["policy"] == "caching") EXPECT_EQ(r["backend_calls_last_pass"]["create"], 0);
  }
  expect_bad_input("replay " + trace_ + " --repeat 0", "--repeat");
  expect_bad_input("replay " + trace_ + " --repeat 1001", "--repeat");
  expect_bad_input("replay " + trace_ + " --repeat twice", "--repeat");
}

TEST_F(CliTest, TheCudaBackendReplaysOrFailsWithOneClearLine) {
  const std::vector<std::string_view> names = gmlake::backend_names();
  if (std::find(names.begin(), names.end(), "cuda") == names.end()) {
    expect_bad_input("replay " + trace_ + " --backend cuda", "unknown backend 'cuda'");
    return;
  }
  const Outcome o = gmlake("replay " + trace_ + " --policy gmlake --backend cuda");
  if (o.status == 0) {  // a GPU machine
    EXPECT_NE(o.out.find("cuda backend"), std::string::npos) << o.out;
    return;
  }
  expect_bad_input("replay " + trace_ + " --policy gmlake --backend cuda", "cuInit failed");
  expect_bad_input("replay " + trace_ + " --backend cuda:one", "cuda:one");
}

TEST_F(CliTest, ConfListsEveryConfigurationKey) {
  const Outcome o = gmlake("conf");
  ASSERT_EQ(o.status, 0);
  for (const char* key : {"policy", "cap_bytes", "page_bytes", "cross_stream_reuse", "fit_candidates"}) {
    EXPECT_NE(o.out.find(key), std::string::npos) << key;
  }
}

}  // namespace
