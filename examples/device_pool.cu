// Allocation inside kernels: each thread of a kernel finds the divisors of its number, a list whose length it
// learns only while it runs, and keeps them in memory it allocates from a gmlake device pool; a second kernel
// reads every list and frees it. The pool's memory is gmlake's (a cuda backend's VMM chunks, grown without
// moving); the host reads the pool's counters afterwards.
//
// Build: with the project (example_device_pool, when nvcc is found). Without a CUDA device it says so and exits
// with 77 (ctest: skipped).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "gmlake/backend_factory.h"
#include "gmlake/device/device_pool.cuh"
#include "gmlake/units.h"

using gmlake::device::DevicePoolView;

__global__ void find_divisors(DevicePoolView pool, std::uint32_t** lists, std::uint32_t* lengths, std::uint32_t n) {
  const std::uint32_t x = blockIdx.x * blockDim.x + threadIdx.x + 1;
  if (x > n) return;
  std::uint32_t count = 0;
  for (std::uint32_t d = 1; d * d <= x; ++d) count += (x % d == 0) ? (d * d == x ? 1 : 2) : 0;
  auto* list = static_cast<std::uint32_t*>(pool.allocate(count * sizeof(std::uint32_t)));  // known only now
  if (list != nullptr) {
    std::uint32_t k = 0;
    for (std::uint32_t d = 1; d * d <= x; ++d) {
      if (x % d != 0) continue;
      list[k++] = d;
      if (d * d != x) list[k++] = x / d;
    }
  }
  lists[x - 1] = list;
  lengths[x - 1] = list ? count : 0;
}

__global__ void sum_and_free(DevicePoolView pool, std::uint32_t** lists, const std::uint32_t* lengths, std::uint32_t n,
                             unsigned long long* total) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n || lists[i] == nullptr) return;
  unsigned long long sum = 0;
  for (std::uint32_t k = 0; k < lengths[i]; ++k) sum += lists[i][k];
  atomicAdd(total, sum);
  pool.free(lists[i]);  // another kernel frees what the first allocated
}

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: example skipped\n");
    return 77;
  }
  auto backend = gmlake::make_backend("cuda", gmlake::kPageBytes);
  gmlake::device::DevicePool pool(*backend, {.initial_bytes = 512 * gmlake::kMiB, .max_bytes = 1 * gmlake::kGiB});

  constexpr std::uint32_t n = 1u << 20;
  std::uint32_t** lists = nullptr;
  std::uint32_t* lengths = nullptr;
  unsigned long long* total = nullptr;
  cudaMalloc(&lists, n * sizeof(*lists));
  cudaMalloc(&lengths, n * sizeof(*lengths));
  cudaMalloc(&total, sizeof(*total));
  cudaMemset(total, 0, sizeof(*total));

  find_divisors<<<n / 256, 256>>>(pool.view(), lists, lengths, n);
  gmlake::device::DevicePoolStats s = pool.stats();
  std::printf("after the first kernel: %llu lists allocated, %llu nulls, %llu bytes in blocks, pool %llu MiB\n",
              static_cast<unsigned long long>(s.allocs), static_cast<unsigned long long>(s.failed_allocs),
              static_cast<unsigned long long>(s.live_block_bytes()),
              static_cast<unsigned long long>(pool.capacity_bytes() / gmlake::kMiB));

  sum_and_free<<<n / 256, 256>>>(pool.view(), lists, lengths, n, total);
  unsigned long long sum = 0;
  cudaMemcpy(&sum, total, sizeof(sum), cudaMemcpyDeviceToHost);
  s = pool.stats();
  // The sum of the divisors of 1..n is sum over d of d * floor(n / d).
  unsigned long long expected = 0;
  for (unsigned long long d = 1; d <= n; ++d) expected += d * (n / d);
  std::printf("sum of all divisors: %llu (expected %llu); %llu frees, %llu live allocations\n", sum, expected,
              static_cast<unsigned long long>(s.frees), static_cast<unsigned long long>(s.live_allocations()));
  pool.check_invariants();
  cudaFree(lists);
  cudaFree(lengths);
  cudaFree(total);
  return sum == expected && s.failed_allocs == 0 && s.live_allocations() == 0 ? 0 : 1;
}
