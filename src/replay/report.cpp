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
      if (r.pytorch_peak_reserved_bytes) {
        out += fmt::format(", PyTorch recorded peak reserved {:.3f} GB", gb(*r.pytorch_peak_reserved_bytes));
      }
      out += fmt::format(" [{} backend]\n", r.backend);
      out += fmt::format("  {:<11} {:>13} {:>11} {:>13} {:>14} {:>21} {:>9} {:>9} {:>8}\n", "policy",
                         "peak reserved", "utilization", "fragmentation", "peak allocated",
                         "create/map/unmap/rel", "stitches", "evictions", "ns/op");
    }
    out += fmt::format("  {:<11} {:>10.3f} GB {:>11.3f} {:>13.3f} {:>11.3f} GB {:>21} {:>9} {:>9} {:>8.0f}\n",
                       to_string(r.policy), gb(r.peak_reserved_bytes), r.utilization, r.fragmentation,
                       gb(r.peak_allocated_bytes), backend_calls_text(r.stats.backend_calls), r.stats.stitches,
                       r.stats.evictions, r.ns_per_op);
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
    for (std::size_t k = 0; k < kBackendCallKinds; ++k) {
      calls[std::string(to_string(static_cast<BackendCall>(k)))] = r.stats.backend_calls.calls[k];
    }
    array.push_back({
        {"trace", r.trace},
        {"device", r.device},
        {"policy", to_string(r.policy)},
        {"backend", r.backend},
        {"ops", r.ops},
        {"lower_bound_bytes", r.lower_bound_bytes},
        {"peak_reserved_bytes", r.peak_reserved_bytes},
        {"peak_allocated_bytes", r.peak_allocated_bytes},
        {"utilization", r.utilization},
        {"fragmentation", r.fragmentation},
        {"pytorch_peak_reserved_bytes",
         r.pytorch_peak_reserved_bytes ? nlohmann::json(*r.pytorch_peak_reserved_bytes) : nlohmann::json(nullptr)},
        {"ns_per_op", r.ns_per_op},
        {"stitches", r.stats.stitches},
        {"stitched_chunks", r.stats.stitched_chunks},
        {"stitch_reuses", r.stats.stitch_reuses},
        {"evictions", r.stats.evictions},
        {"ooms", r.ooms},
        {"unknown_frees", r.unknown_frees},
        {"peak_mappings", r.peak_mappings},
        {"backend_calls", calls},
    });
  }
  return array.dump(1) + "\n";
}

}  // namespace gmlake
