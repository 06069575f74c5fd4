// The backend conformance suite (tests/backend_conformance.h) run on the CUDA backend, device 0, with 2 MiB
// chunks (the recommended granularity on H100/H200). No context is made current here: the backend makes its own
// current around each driver call.
#include <memory>
#include <optional>
#include <string>

#include "backend_conformance.h"
#include "backends/cuda/cuda_backend.h"
#include "gpu/cuda_test_support.h"

namespace gmlake {
namespace {

using namespace conformance;  // the suite's names, for INSTANTIATE_TYPED_TEST_SUITE_P

struct CudaFactory {
  static constexpr const char* kName = "Cuda";
  static std::unique_ptr<Backend> make(std::uint64_t physical_limit_bytes = 0) {
    CudaBackendOptions options;
    options.granularity_bytes = kGranule;
    options.physical_limit_bytes = physical_limit_bytes;
    return std::make_unique<CudaBackend>(options);
  }
  static std::optional<std::string> unavailable() { return gpu_test::cuda_unavailable(); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Gpu, BackendConformanceTest, ::testing::Types<CudaFactory>, FactoryNames);

}  // namespace
}  // namespace gmlake
