// Backends by name. The one platform switch of the library: GMLAKE_HAVE_CUDA (set by CMake for this file only
// when the CUDA backend is built) adds "cuda" and "cuda:N".
#include "gmlake/backend_factory.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "sim/vmm_cost_model.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"
#if GMLAKE_HAVE_CUDA
#include "cuda/cuda_backend.h"
#include "cuda/cuda_stream_events.h"
#endif

namespace gmlake {
namespace {

std::string expected_names() {
  const std::vector<std::string_view> names = backend_names();
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += i == 0 ? "" : i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

[[noreturn]] void unknown(std::string_view name) {
  throw Error(ErrorCode::kInvalidArgument, "unknown backend '" + std::string(name) + "': expected " + expected_names());
}

#if GMLAKE_HAVE_CUDA
constexpr std::string_view kCudaName = "cuda";

// The device ordinal of "cuda" (0) or "cuda:N".
int cuda_device(std::string_view name) {
  if (name == kCudaName) return 0;
  const std::string_view digits = name.substr(kCudaName.size() + 1);
  int device = -1;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), device);
  if (digits.empty() || error != std::errc() || end != digits.data() + digits.size() || device < 0) {
    throw Error(ErrorCode::kInvalidArgument, "backend '" + std::string(name) +
                                                 "': the device must be a non-negative integer, as in cuda:1");
  }
  return device;
}
#endif

// `n` unbounded devices: device 0 the own one (HBM), the others peers reached over NVLink (H100 figures).
std::vector<SimDevice> sim_device_list(std::uint32_t n) {
  std::vector<SimDevice> devices(n, SimDevice{0, kH100NvlinkBytesPerS});
  devices[0] = SimDevice{0, kH100HbmBytesPerS};
  return devices;
}

}  // namespace

std::string_view backend_base_name(std::string_view name) { return name.substr(0, name.find(':')); }

std::string backend_for_device(std::string_view backend, int device) {
  if (backend == "cuda") return "cuda:" + std::to_string(device);
  return std::string(backend);
}

std::unique_ptr<Backend> make_backend(std::string_view name, std::uint64_t granularity_bytes,
                                      [[maybe_unused]] bool exportable, std::uint32_t sim_devices) {
  if (name == "sim") {
    if (sim_devices <= 1) return std::make_unique<SimBackend>(granularity_bytes);
    return std::make_unique<SimBackend>(granularity_bytes, sim_device_list(sim_devices));
  }
  if (backend_base_name(name) == "sim") {
    const std::optional<VmmCostModel> model = vmm_cost_model(name.substr(4));
    if (!model) {
      throw Error(ErrorCode::kInvalidArgument, "backend '" + std::string(name) +
                                                   "': no VMM cost model of that name (sim:h100 or sim:h200)");
    }
    if (sim_devices <= 1) return std::make_unique<SimBackend>(granularity_bytes, 0, *model);
    return std::make_unique<SimBackend>(granularity_bytes, sim_device_list(sim_devices), *model);
  }
  if (name == "host") return std::make_unique<HostBackend>(granularity_bytes);
#if GMLAKE_HAVE_CUDA
  if (backend_base_name(name) == kCudaName) {
    CudaBackendOptions options;
    options.device = cuda_device(name);
    options.granularity_bytes = granularity_bytes;
    options.exportable = exportable;
    return std::make_unique<CudaBackend>(options);
  }
#endif
  unknown(name);
}

std::uint32_t sim_devices_for(std::string_view peer_devices) {
  std::uint32_t n = 1;
  for (const int d : parse_peer_devices(peer_devices)) n = std::max(n, static_cast<std::uint32_t>(d) + 1);
  return n;
}

std::unique_ptr<StreamEvents> make_stream_events([[maybe_unused]] Backend& backend) {
#if GMLAKE_HAVE_CUDA
  if (auto* cuda = dynamic_cast<CudaBackend*>(&backend)) return std::make_unique<CudaStreamEvents>(*cuda);
#endif
  return nullptr;
}

std::vector<std::string_view> backend_names() {
#if GMLAKE_HAVE_CUDA
  return {"sim", "sim:h100", "sim:h200", "host", kCudaName};
#else
  return {"sim", "sim:h100", "sim:h200", "host"};
#endif
}

}  // namespace gmlake
