// Report formatting (include/gmlake/report.h, src/replay/report.cpp) on its own: the table and the JSON of
// hand-made replay results, no replay run.
#include "gmlake/report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace gmlake {
namespace {

ReplayResult result(Policy policy, std::uint64_t peak_reserved_bytes) {
  ReplayResult r;
  r.trace = "toy";
  r.device = 1;
  r.policy = policy;
  r.backend = "sim";
  r.ops = 42;
  r.lower_bound_bytes = 1'500'000'000;
  r.peak_reserved_bytes = peak_reserved_bytes;
  r.peak_allocated_bytes = 1'600'000'000;
  r.utilization = 0.75;
  r.fragmentation = 0.2;
  return r;
}

TEST(ReportTest, BytesOnPeerDevicesAreReportedWhenThereWereAny) {
  ReplayResult lake = result(Policy::kGmlake, 2'000'000'000);
  lake.stats.peer_reserved_bytes.increase(500'000'000);
  const ReplayResult alone = result(Policy::kGmlake, 2'000'000'000);
  EXPECT_NE(format_table({lake}).find("of which on peer devices at most 0.500 GB"), std::string::npos);
  EXPECT_EQ(format_table({alone}).find("peer devices"), std::string::npos);
  const nlohmann::json j = nlohmann::json::parse(format_json({lake, alone}));
  EXPECT_EQ(j[0]["peak_peer_reserved_bytes"], 500'000'000);
  EXPECT_EQ(j[1]["peak_peer_reserved_bytes"], 0);
}

TEST(ReportTest, TheTableHasOneHeaderPerTraceAndDeviceAndOneRowPerPolicy) {
  ReplayResult gmlake = result(Policy::kGmlake, 2'000'000'000);
  gmlake.pytorch_peak_reserved_bytes = 3'000'000'000;
  gmlake.stats.stitches = 4;
  gmlake.backend_time_ns = 10'000;  // 2.5 µs per stitch
  ReplayResult caching = result(Policy::kCaching, 2'500'000'000);
  caching.ooms = 3;
  const std::string table = format_table({gmlake, caching});

  EXPECT_NE(table.find("toy (device 1): 42 ops, lower bound 1.500 GB, PyTorch recorded peak reserved 3.000 GB "
                       "[sim backend]\n"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("toy (device 1)"), table.rfind("toy (device 1)")) << "one header for both rows";
  EXPECT_NE(table.find("  gmlake           2.000 GB       0.750         0.200       1.600 GB"), std::string::npos)
      << table;
  EXPECT_NE(table.find("2.5\n"), std::string::npos) << table;
  EXPECT_NE(table.find("  caching          2.500 GB"), std::string::npos) << table;
  // gmlake's row says what it assumed of the device, caching's does not.
  EXPECT_NE(table.find("assumes the device has queued work wherever the pool grows or moves"), std::string::npos) << table;
  EXPECT_EQ(table.find("assumes"), table.rfind("assumes")) << table;
  gmlake.assumed_device_waits = true;
  EXPECT_NE(format_table({gmlake}).find("assumes the device waits for the host"), std::string::npos);
  // With a modelled device lag, the line says that instead.
  ReplayResult lagging = gmlake;
  lagging.device_lag_us = 2000;
  lagging.device_waits = 7;
  lagging.device_wait_ns = 12'500'000;
  lagging.stats.in_order_evictions = 3;
  lagging.stats.stream_event_calls = 41;
  const std::string lag_table = format_table({lagging});
  EXPECT_NE(lag_table.find("on a device 2000 µs behind the host (--device-lag-us): 7 waits for it, 12.5 ms blocked, "
                           "3 moves in stream order, 41 event records and queries"),
            std::string::npos)
      << lag_table;
  EXPECT_EQ(lag_table.find("assumes"), std::string::npos) << lag_table;
  EXPECT_NE(table.find("3 allocations failed (out of memory), 0 frees of unknown addresses skipped"),
            std::string::npos)
      << table;
  // One stream: no line on arenas. Several: their number, and whether gmlake's arenas were shared.
  EXPECT_EQ(table.find("streams"), std::string::npos) << table;
  gmlake.streams = 3;
  EXPECT_NE(format_table({gmlake}).find("3 streams, each with its own arenas, as under PyTorch on the GPU"),
            std::string::npos);
  gmlake.cross_stream_reuse = true;
  EXPECT_NE(format_table({gmlake}).find("3 streams, sharing arenas (cross_stream_reuse:true"), std::string::npos);
  caching.streams = 3;
  EXPECT_EQ(format_table({caching}).find("streams"), std::string::npos) << "PyTorch's policies never share";
  // One pass: no line on passes. Several (--repeat): the last pass's backend calls and time, and the total.
  EXPECT_EQ(table.find("passes"), std::string::npos) << table;
  ReplayResult repeated = result(Policy::kGmlake, 2'000'000'000);
  repeated.passes = 4;
  repeated.backend_time_ns = 9'000'000;
  repeated.backend_calls_last_pass.calls[static_cast<std::size_t>(BackendCall::kMap)] = 12;
  repeated.backend_calls_last_pass.time_ns[static_cast<std::size_t>(BackendCall::kMap)] = 1'500'000;
  const std::string repeat_table = format_table({repeated});
  EXPECT_NE(repeat_table.find("last of 4 passes: create/map/unmap/rel 0/12/0/0, backend time 1.5 ms (9.0 ms in all)"),
            std::string::npos)
      << repeat_table;
}

TEST(ReportTest, TheTableStartsANewHeaderForAnotherDevice) {
  ReplayResult other = result(Policy::kGmlake, 1);
  other.device = 2;
  const std::string table = format_table({result(Policy::kGmlake, 1), other});
  EXPECT_NE(table.find("toy (device 1)"), std::string::npos);
  EXPECT_NE(table.find("toy (device 2)"), std::string::npos);
  EXPECT_EQ(table.find("PyTorch recorded"), std::string::npos) << "no recorded peak: no figure";
}

TEST(ReportTest, TheJsonHasOneObjectPerResultWithTheDocumentedKeys) {
  ReplayResult r = result(Policy::kExpandable, 2'000'000'000);
  r.stats.arena_handovers = 3;
  r.streams = 2;
  const nlohmann::json json = nlohmann::json::parse(format_json({r, r}));
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), 2u);
  const nlohmann::json& o = json[0];
  EXPECT_EQ(o["trace"], "toy");
  EXPECT_EQ(o["device"], 1);
  EXPECT_EQ(o["policy"], "expandable");
  EXPECT_EQ(o["backend"], "sim");
  EXPECT_EQ(o["ops"], 42);
  EXPECT_EQ(o["peak_reserved_bytes"], 2'000'000'000u);
  EXPECT_TRUE(o["pytorch_peak_reserved_bytes"].is_null());
  EXPECT_DOUBLE_EQ(o["utilization"].get<double>(), 0.75);
  for (const char* key : {"lower_bound_bytes", "peak_allocated_bytes", "fragmentation", "ns_per_op", "stitches",
                          "stitched_chunks", "stitch_reuses", "evictions", "in_order_evictions", "ooms", "unknown_frees",
                          "peak_mappings",
                          "backend_calls", "backend_time_ns", "assumed_device_waits", "device_lag_us",
                          "device_waits", "device_wait_ns", "critical_path_moves", "refused_moves", "passes", "backend_calls_last_pass",
                          "backend_time_ns_last_pass"}) {
    EXPECT_TRUE(o.contains(key)) << key;
  }
  EXPECT_TRUE(o["backend_calls"].is_object());
  EXPECT_EQ(o["streams"], 2);
  EXPECT_EQ(o["cross_stream_reuse"], false);
  EXPECT_EQ(o["arena_handovers"], 3) << "the pool's handovers, as bench/torch/stream_churn.py's replays read them";
}

}  // namespace
}  // namespace gmlake
