#include "vmm_cost_model.h"

#include <cmath>

namespace gmlake {
namespace {

std::uint64_t interpolate(const VmmCostModel::Table& t, std::uint64_t size_bytes) {
  if (t.empty()) return 0;
  if (size_bytes <= t.front().first) return t.front().second;
  if (size_bytes >= t.back().first) return t.back().second;
  std::size_t i = 1;
  while (t[i].first < size_bytes) ++i;
  const double x0 = std::log2(static_cast<double>(t[i - 1].first)), x1 = std::log2(static_cast<double>(t[i].first));
  const double y0 = static_cast<double>(t[i - 1].second), y1 = static_cast<double>(t[i].second);
  const double x = std::log2(static_cast<double>(size_bytes));
  return static_cast<std::uint64_t>(y0 + (y1 - y0) * (x - x0) / (x1 - x0));
}

}  // namespace

std::uint64_t VmmCostModel::ns(BackendCall c, std::uint64_t size_bytes) const {
  switch (c) {
    case BackendCall::kReserve: return reserve_ns;
    case BackendCall::kAddressFree: return address_free_ns;
    case BackendCall::kCreate: return interpolate(per_chunk[0], size_bytes);
    case BackendCall::kMap: return interpolate(per_chunk[1], size_bytes);
    case BackendCall::kSetAccess: return interpolate(per_chunk[2], size_bytes);
    case BackendCall::kUnmap: return interpolate(per_chunk[3], size_bytes);
    case BackendCall::kRelease: return interpolate(per_chunk[4], size_bytes);
    case BackendCall::kCount: break;
  }
  return 0;
}

std::optional<VmmCostModel> vmm_cost_model(std::string_view gpu) {
  if (gpu == "h100") {
    return
#include "vmm_costs_h100.inc"
        ;
  }
  if (gpu == "h200") {
    return
#include "vmm_costs_h200.inc"
        ;
  }
  return std::nullopt;
}

std::vector<std::string_view> vmm_cost_model_names() { return {"h100", "h200"}; }

}  // namespace gmlake
