#include "gmlake/report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace gmlake {
namespace {

double gb(std::uint64_t bytes) { return static_cast<double>(bytes) / 1e9; }

std::string backend_calls_text(const BackendCounters& c) {
  return fmt::format("{}/{}/{}/{}", c[BackendCall::kCreate], c[BackendCall::kMap], c[BackendCall::kUnmap],
                     c[BackendCall::kRelease]);
}

// Backend time per stitch in µs, or "-" when nothing was stitched.
std::string vmm_us_per_stitch_text(const ReplayResult& r) {
  if (r.stats.stitches == 0) return "-";
  return fmt::format("{:.1f}", static_cast<double>(r.backend_time_ns) / 1e3 / static_cast<double>(r.stats.stitches));
}

double vmm_ns_per_op(const ReplayResult& r) {
  return r.ops ? static_cast<double>(r.backend_time_ns) / static_cast<double>(r.ops) : 0;
}

}  // namespace

std::string format_table(const std::vector<ReplayResult>& results) {
  std::string out;
  std::string current;
  for (const ReplayResult& r : results) {
    const std::string key = fmt::format("{}#{}", r.trace, r.device);
    if (key != current) {
      current = key;
      out += fmt::format("\n{} (device {}): {} ops, lower bound {:.3f} GB", r.trace, r.device, r.ops,
                         gb(r.lower_bound_bytes));
      if (r.lower_bound_held_bytes > r.lower_bound_bytes) {
        out += fmt::format(" ({:.3f} GB with record_stream frees held until they complete)", gb(r.lower_bound_held_bytes));
      }
      if (r.pytorch_peak_reserved_bytes) {
        out += fmt::format(", PyTorch recorded peak reserved {:.3f} GB", gb(*r.pytorch_peak_reserved_bytes));
      }
      out += fmt::format(" [{} backend]\n", r.backend);
      out += fmt::format("  {:<11} {:>13} {:>11} {:>13} {:>14} {:>21} {:>9} {:>9} {:>8} {:>9} {:>13}\n", "policy",
                         "peak reserved", "utilization", "fragmentation", "peak allocated",
                         "create/map/unmap/rel", "stitches", "evictions", "ns/op", "vmm ns/op", "vmm µs/stitch");
    }
    out += fmt::format("  {:<11} {:>10.3f} GB {:>11.3f} {:>13.3f} {:>11.3f} GB {:>21} {:>9} {:>9} {:>8.0f} {:>9.0f} "
                       "{:>13}\n",
                       to_string(r.policy), gb(r.peak_reserved_bytes), r.utilization, r.fragmentation,
                       gb(r.peak_allocated_bytes), backend_calls_text(r.stats.backend_calls), r.stats.stitches,
                       r.stats.evictions, r.ns_per_op, vmm_ns_per_op(r), vmm_us_per_stitch_text(r));
    if (r.passes > 1) {
      out += fmt::format("  {:<11} last of {} passes: create/map/unmap/rel {}, backend time {:.1f} ms ({:.1f} ms in "
                         "all)\n",
                         "", r.passes, backend_calls_text(r.backend_calls_last_pass),
                         static_cast<double>(r.backend_calls_last_pass.total_time_ns()) / 1e6,
                         static_cast<double>(r.backend_time_ns) / 1e6);
    }
    if (r.policy == Policy::kGmlake && r.device_lag_us != 0) {
      out += fmt::format("  {:<11} on a device {} µs behind the host (--device-lag-us): {} waits for it, {:.1f} ms "
                         "blocked, {} moves in stream order, {} event records and queries\n",
                         "", r.device_lag_us, r.device_waits, static_cast<double>(r.device_wait_ns) / 1e6,
                         r.stats.in_order_evictions, r.stats.stream_event_calls);
    } else if (r.policy == Policy::kGmlake) {
      out += fmt::format("  {:<11} assumes the device {} wherever the pool grows or moves (a replay has no stream to ask: "
                         "assume_device_waits:{})\n",
                         "", r.assumed_device_waits ? "waits for the host" : "has queued work",
                         r.assumed_device_waits ? 1 : 0);
    }
    if (r.policy == Policy::kGmlake && r.streams > 1) {
      out += fmt::format("  {:<11} {} streams, {}\n", "", r.streams,
                         r.cross_stream_reuse ? "sharing arenas (cross_stream_reuse:true; under PyTorch on the GPU "
                                                "each stream has its own)"
                                              : "each with its own arenas, as under PyTorch on the GPU "
                                                "(cross_stream_reuse:false)");
    }
    if (r.stats.peer_reserved_bytes.peak > 0) {
      out += fmt::format("  {:<11} of which on peer devices at most {:.3f} GB (the lake: peer_devices)\n", "",
                         gb(static_cast<std::uint64_t>(r.stats.peer_reserved_bytes.peak)));
    }
    if (r.ooms || r.unknown_frees) {
      out += fmt::format("  {:<11} {} allocations failed (out of memory), {} frees of unknown addresses skipped\n", "",
                         r.ooms, r.unknown_frees);
    }
  }
  return out;
}

std::string format_json(const std::vector<ReplayResult>& results) {
  nlohmann::json array = nlohmann::json::array();
  for (const ReplayResult& r : results) {
    nlohmann::json calls = nlohmann::json::object();
    nlohmann::json time_ns = nlohmann::json::object();
    nlohmann::json second_half = nlohmann::json::object();
    nlohmann::json last_pass = nlohmann::json::object();
    nlohmann::json last_pass_time_ns = nlohmann::json::object();
    for (std::size_t k = 0; k < kBackendCallKinds; ++k) {
      const std::string kind(to_string(static_cast<BackendCall>(k)));
      calls[kind] = r.stats.backend_calls.calls[k];
      second_half[kind] = r.backend_calls_second_half.calls[k];
      last_pass[kind] = r.backend_calls_last_pass.calls[k];
      last_pass_time_ns[kind] = r.backend_calls_last_pass.time_ns[k];
      time_ns[kind] = r.stats.backend_calls.time_ns[k];
    }
    array.push_back({
        {"trace", r.trace},
        {"device", r.device},
        {"policy", to_string(r.policy)},
        {"backend", r.backend},
        {"ops", r.ops},
        {"streams", r.streams},
        {"cross_stream_reuse", r.cross_stream_reuse},
        {"lower_bound_bytes", r.lower_bound_bytes},
        {"lower_bound_held_bytes", r.lower_bound_held_bytes},
        {"peak_reserved_bytes", r.peak_reserved_bytes},
        {"peak_allocated_bytes", r.peak_allocated_bytes},
        {"peak_peer_reserved_bytes", r.stats.peer_reserved_bytes.peak},
        {"utilization", r.utilization},
        {"fragmentation", r.fragmentation},
        {"pytorch_peak_reserved_bytes",
         r.pytorch_peak_reserved_bytes ? nlohmann::json(*r.pytorch_peak_reserved_bytes) : nlohmann::json(nullptr)},
        {"ns_per_op", r.ns_per_op},
        {"stitches", r.stats.stitches},
        {"stitched_chunks", r.stats.stitched_chunks},
        {"stitch_reuses", r.stats.stitch_reuses},
        {"evictions", r.stats.evictions},
        {"in_order_evictions", r.stats.in_order_evictions},
        {"critical_path_moves", r.stats.critical_path_moves},
        {"refused_moves", r.stats.refused_moves},
        {"ooms", r.ooms},
        {"unknown_frees", r.unknown_frees},
        {"peak_mappings", r.peak_mappings},
        {"backend_calls", calls},
        {"backend_calls_second_half", second_half},
        {"passes", r.passes},
        {"backend_calls_last_pass", last_pass},
        {"backend_time_ns_last_pass", last_pass_time_ns},
        {"backend_time_ns", time_ns},
        {"assumed_device_waits", r.assumed_device_waits},
        {"device_lag_us", r.device_lag_us},
        {"device_waits", r.device_waits},
        {"device_wait_ns", r.device_wait_ns},
        {"stream_event_calls", r.stats.stream_event_calls},
        {"arena_handovers", r.stats.arena_handovers},
    });
  }
  return array.dump(1) + "\n";
}

}  // namespace gmlake
