#include "gmlake/backend_factory.h"

#include <string>

#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/sim_backend.h"

namespace gmlake {

std::unique_ptr<Backend> make_backend(std::string_view name, std::uint64_t granularity_bytes) {
  if (name == "sim") return std::make_unique<SimBackend>(granularity_bytes);
  if (name == "host") return std::make_unique<HostBackend>(granularity_bytes);
  throw Error(ErrorCode::kInvalidArgument, "unknown backend '" + std::string(name) + "': expected sim or host");
}

std::vector<std::string_view> backend_names() { return {"sim", "host"}; }

}  // namespace gmlake
