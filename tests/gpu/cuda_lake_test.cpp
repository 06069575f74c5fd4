// The lake on GPUs (docs/design.md, "The lake"): a gmlake pool on device 0 past its cap holds blocks on device 1
// (cuMemCreate at device 1, mapped in device 0's arena, cuMemSetAccess for device 0), and device 0 reads and
// writes them over the peer link. Needs two devices with peer access; skipped otherwise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "gmlake/allocator.h"
#include "gmlake/config.h"
#include "gmlake/error.h"
#include "gmlake/units.h"
#include "gpu/cuda_test_support.h"

namespace gmlake {
namespace {

class CudaLakeTest : public gpu_test::CudaTest {
 protected:
  void SetUp() override {
    gpu_test::CudaTest::SetUp();
    if (IsSkipped()) return;
    const cuda::DriverApi& api = cuda::driver();
    int count = 0;
    cuda::check("cuDeviceGetCount", api.cuDeviceGetCount(&count));
    if (count < 2) GTEST_SKIP() << "one CUDA device: the lake needs a peer";
    CUdevice d0 = 0, d1 = 0;
    cuda::check("cuDeviceGet", api.cuDeviceGet(&d0, 0));
    cuda::check("cuDeviceGet", api.cuDeviceGet(&d1, 1));
    int can_access = 0;
    cuda::check("cuDeviceCanAccessPeer", api.cuDeviceCanAccessPeer(&can_access, d0, d1));
    if (can_access == 0) GTEST_SKIP() << "device 0 cannot access device 1's memory (no P2P path)";
  }
};

TEST_F(CudaLakeTest, APoolPastItsCapHoldsBlocksOnThePeerThatDevice0ReadsAndWrites) {
  constexpr std::uint64_t kCapBytes = 64 * kMiB;
  CudaBackend backend(CudaBackendOptions{});
  std::unique_ptr<Allocator> allocator =
      make_allocator(parse_config("cap_bytes:64M,peer_devices:1,peer_budget_bytes:256M"), backend);
  void* local = allocator->allocate(kCapBytes, 0);
  void* peer = allocator->allocate(32 * kMiB, 0);  // past the cap: on device 1
  allocator->check_invariants();
  EXPECT_EQ(allocator->stats().peer_reserved_bytes.current, static_cast<std::int64_t>(32 * kMiB));
  EXPECT_EQ(backend.live_chunk_bytes(1), 32 * kMiB);
  EXPECT_EQ(backend.live_chunk_bytes(0), kCapBytes);
  const auto at = reinterpret_cast<std::uintptr_t>(peer);
  gpu_test::fill_bytes(at, 0x5A, 32 * kMiB);  // device 0 writes device 1's memory
  gpu_test::synchronize();
  const std::vector<std::uint8_t> back = gpu_test::read_bytes(at, 32 * kMiB);
  EXPECT_EQ(std::count(back.begin(), back.end(), 0x5A), static_cast<std::ptrdiff_t>(back.size()));
  allocator->deallocate(peer);
  allocator->deallocate(local);
  allocator->empty_cache();
  allocator->check_invariants();
  EXPECT_EQ(backend.live_chunks(), 0u);
}

TEST_F(CudaLakeTest, ThePeersBudgetBoundsWhatIsBorrowed) {
  CudaBackend backend(CudaBackendOptions{});
  std::unique_ptr<Allocator> allocator =
      make_allocator(parse_config("cap_bytes:64M,peer_devices:1,peer_budget_bytes:32M"), backend);
  void* local = allocator->allocate(64 * kMiB, 0);
  void* peer = allocator->allocate(32 * kMiB, 0);
  EXPECT_THROW(allocator->allocate(2 * kMiB, 0), OutOfMemoryError);
  allocator->check_invariants();
  allocator->deallocate(peer);
  allocator->deallocate(local);
}

}  // namespace
}  // namespace gmlake
