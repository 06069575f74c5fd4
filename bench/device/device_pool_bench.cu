// The device pool against CUDA's in-kernel malloc/free (the device heap, sized with cudaLimitMallocHeapSize):
// for each request size (16 B .. 64 KiB, and a mix of them) and number of threads allocating at once (1 .. all), one kernel in
// which every thread allocates one block and writes its first word, then one kernel in which every thread frees
// its block. Each (size, threads) pair is timed with CUDA events, `reps` times after one warm-up; the table
// gives the median of each kernel in microseconds, launch included, and the nulls seen.
//
//   device_pool_bench [reps (default 5)] [heap GiB for both allocators (default 18)]
//
// Prints a Markdown table (docs/benchmarks.md holds measured figures). Exits with 77 without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gmlake/backend_factory.h"
#include "gmlake/device/device_pool.cuh"
#include "gmlake/units.h"

namespace {

using gmlake::device::DevicePoolView;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Pool {
  DevicePoolView view;
  __device__ void* allocate(std::uint64_t size) const { return view.allocate(size); }
  __device__ void free(void* p) const { view.free(p); }
};
struct CudaHeap {
  __device__ void* allocate(std::uint64_t size) const { return malloc(size); }
  __device__ void free(void* p) const { ::free(p); }
};

template <typename A>
__global__ void alloc_kernel(A a, void** ptrs, std::uint32_t n, std::uint64_t size, unsigned long long* nulls) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  if (size == 0) {  // mixed: 16 B << (0 .. 12), by a hash of the thread's index
    std::uint32_t h = i * 0x9E3779B9u;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    size = std::uint64_t{16} << (h % 13);
  }
  void* p = a.allocate(size);
  if (p != nullptr) {
    *static_cast<std::uint32_t*>(p) = i;
  } else {
    atomicAdd(nulls, 1ull);
  }
  ptrs[i] = p;
}

template <typename A>
__global__ void free_kernel(A a, void** ptrs, std::uint32_t n) {
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n && ptrs[i] != nullptr) a.free(ptrs[i]);
}

struct Timing {
  double alloc_us = 0, free_us = 0;
  unsigned long long nulls = 0;
};

template <typename A>
Timing measure(const A& a, void** ptrs, std::uint32_t n, std::uint64_t size, int reps, unsigned long long* nulls_d) {
  const std::uint32_t threads = std::min<std::uint32_t>(n, 256), blocks = (n + threads - 1) / threads;
  cudaEvent_t e0, e1, e2;
  check(cudaEventCreate(&e0), "event");
  check(cudaEventCreate(&e1), "event");
  check(cudaEventCreate(&e2), "event");
  std::vector<double> alloc_us, free_us;
  Timing t;
  for (int r = 0; r <= reps; ++r) {  // rep 0: warm-up
    check(cudaMemset(nulls_d, 0, sizeof(unsigned long long)), "memset");
    check(cudaEventRecord(e0), "record");
    alloc_kernel<<<blocks, threads>>>(a, ptrs, n, size, nulls_d);
    check(cudaEventRecord(e1), "record");
    free_kernel<<<blocks, threads>>>(a, ptrs, n);
    check(cudaEventRecord(e2), "record");
    check(cudaEventSynchronize(e2), "kernels");
    float ms1 = 0, ms2 = 0;
    cudaEventElapsedTime(&ms1, e0, e1);
    cudaEventElapsedTime(&ms2, e1, e2);
    check(cudaMemcpy(&t.nulls, nulls_d, sizeof(t.nulls), cudaMemcpyDeviceToHost), "copy");
    if (r == 0) continue;
    alloc_us.push_back(ms1 * 1000.0);
    free_us.push_back(ms2 * 1000.0);
    if (ms1 + ms2 > 1000.0f) break;  // over a second: one rep is enough
  }
  std::sort(alloc_us.begin(), alloc_us.end());
  std::sort(free_us.begin(), free_us.end());
  t.alloc_us = alloc_us[alloc_us.size() / 2];
  t.free_us = free_us[free_us.size() / 2];
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaEventDestroy(e2);
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const std::uint64_t heap_bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 18) * gmlake::kGiB;
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: benchmark skipped\n");
    return 77;
  }
  check(cudaDeviceSetLimit(cudaLimitMallocHeapSize, heap_bytes), "cudaDeviceSetLimit(cudaLimitMallocHeapSize)");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "properties");
  int driver = 0, runtime = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  auto backend = gmlake::make_backend("cuda", gmlake::kPageBytes);
  gmlake::device::DevicePool pool(*backend, {.initial_bytes = heap_bytes, .max_bytes = heap_bytes});
  const std::uint32_t all = static_cast<std::uint32_t>(prop.multiProcessorCount) * 2048;  // every thread slot
  const std::vector<std::uint32_t> thread_counts = {1, 32, 1024, 32768, all};
  const std::vector<std::uint64_t> sizes = {16, 64, 256, 1024, 4096, 16384, 65536, 0};  // 0: mixed
  void** ptrs = nullptr;
  unsigned long long* nulls = nullptr;
  check(cudaMalloc(&ptrs, all * sizeof(void*)), "cudaMalloc");
  check(cudaMalloc(&nulls, sizeof(*nulls)), "cudaMalloc");

  std::printf("%s (%d SMs), driver %d, runtime %d; heap %llu GiB each; median of %d reps, microseconds per kernel\n\n",
              prop.name, prop.multiProcessorCount, driver, runtime,
              static_cast<unsigned long long>(heap_bytes / gmlake::kGiB), reps);
  std::printf("| size | threads | gmlake alloc | gmlake free | CUDA malloc | CUDA free | CUDA / gmlake (alloc+free) | nulls gmlake / CUDA |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (std::uint64_t size : sizes) {
    bool cuda_too_slow = false;
    for (std::uint32_t n : thread_counts) {
      const Timing g = measure(Pool{pool.view()}, ptrs, n, size, reps, nulls);
      Timing c;
      std::string cuda_alloc = "-", cuda_free = "-", ratio = "-", cuda_nulls = "-";
      if (!cuda_too_slow) {
        c = measure(CudaHeap{}, ptrs, n, size, reps, nulls);
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.1f", c.alloc_us);
        cuda_alloc = buf;
        std::snprintf(buf, sizeof(buf), "%.1f", c.free_us);
        cuda_free = buf;
        std::snprintf(buf, sizeof(buf), "%.2fx", (c.alloc_us + c.free_us) / (g.alloc_us + g.free_us));
        ratio = buf;
        cuda_nulls = std::to_string(c.nulls);
        if (c.alloc_us + c.free_us > 3e6) cuda_too_slow = true;  // skip larger thread counts (time budget)
      }
      const std::string size_name = size == 0 ? std::string("mixed 16 B-64 KiB") : std::to_string(size) + " B";
      std::printf("| %s | %u | %.1f | %.1f | %s | %s | %s | %llu / %s |\n", size_name.c_str(), n,
                  g.alloc_us, g.free_us, cuda_alloc.c_str(), cuda_free.c_str(), ratio.c_str(), g.nulls,
                  cuda_nulls.c_str());
      std::fflush(stdout);
    }
  }
  const gmlake::device::DevicePoolStats s = pool.stats();
  std::printf("\ngmlake pool: %llu allocs, %llu frees, %llu nulls, %llu live, %llu slabs claimed\n",
              static_cast<unsigned long long>(s.allocs), static_cast<unsigned long long>(s.frees),
              static_cast<unsigned long long>(s.failed_allocs), static_cast<unsigned long long>(s.live_allocations()),
              static_cast<unsigned long long>(s.slabs_claimed));
  pool.check_invariants();
  cudaFree(ptrs);
  cudaFree(nulls);
  return 0;
}
