// The classic pools on the CUDA backend against the GPU's plain alternative, the driver's cuMemAlloc /
// cuMemFree (what cudaMalloc / cudaFree call). The GPU half of bench/pools_bench.cpp; built only with the CUDA
// backend (GMLAKE_WITH_CUDA), and every benchmark here skips with the reason when no CUDA device is usable.
// Pairs to compare (scripts/pools-gpu-bench.sh runs them and prints the ratios):
//   BM_CudaBlockPool / BM_CudaBumpAllocator   vs BM_CuMemAllocFree          64 blocks of 256 B .. 1 MiB obtained, then
//                                                                   given back (pool: in allocation order;
//                                                                   allocator: one reset)
//   BM_CudaGrowableBuffer_Grow        vs BM_CuMemAllocCopyFree_Grow 1 MiB doubling to 8 GiB, the contents kept
//                                                                   (plain: a new allocation, a device copy of
//                                                                   the old contents, a free, at each step)
//   BM_CudaLayoutCache                vs BM_CuMemAllocFreeLayouts   8 buffers of one layout (256 B aligned)
//                                                                   allocated, then released; 2, 16, 128 MiB
// Device memory is never touched (the costs compared are the allocators'); every address is 256 B aligned, as
// cudaMalloc's are. Figures are per operation (counter per_op: an allocation or a free, a bump allocator's reset
// counting as the frees of its 64 blocks; for the growth benchmarks, one whole growth from start to end,
// including creating and destroying the buffer). The growths end with cuCtxSynchronize, and the copying one
// waits for each copy before freeing its source, so the device's copy time is counted; the other benchmarks
// start no device work (cuMemFree itself waits for the device).
// Run: build/gmlake_bench --benchmark_filter='^BM_Cu', or scripts/pools-gpu-bench.sh (3 repetitions; sized to
// stay under a minute on an H200).
#include <benchmark/benchmark.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "backends/cuda/cuda_driver.h"
#include "backends/cuda/cuda_backend.h"
#include "gmlake/error.h"
#include "gmlake/classic/bump_allocator.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/classic/growable_buffer.h"
#include "gmlake/classic/layout_cache.h"
#include "gmlake/units.h"

namespace {

using gmlake::kGiB;
using gmlake::kKiB;
using gmlake::kMiB;

constexpr int kBatch = 64;       // blocks per iteration (block pool, allocator, cuMemAlloc)
constexpr int kLayoutBatch = 8;  // buffers per iteration (layout cache)
constexpr std::uint64_t kAlignmentBytes = 256;  // cudaMalloc's alignment guarantee
constexpr std::uint64_t kSmallestBlockBytes = 256;
constexpr std::uint64_t kGrowthStartBytes = kMiB;
constexpr std::uint64_t kGrowthEndBytes = 8 * kGiB;
constexpr double kShortRunSeconds = 0.2;

// --- The device ------------------------------------------------------------------------------------------------

// Device 0, or why it cannot be used.
struct Device {
  std::optional<std::string> unusable_because;
  CUcontext context = nullptr;  // device 0's primary context; retained for the rest of the process
};

// Checks once per process that a CudaBackend can be made on device 0 (it throws BackendError without a driver
// or a device), and retains the device's primary context for the life of the process, so that it is not
// destroyed and created again between benchmarks (each CudaBackend retains and releases it too).
const Device& device() {
  static const Device checked = []() -> Device {
    try {
      const gmlake::CudaBackend probe;
      const gmlake::cuda::DriverApi& api = gmlake::cuda::driver();
      CUdevice cu_device = 0;
      gmlake::cuda::check("cuDeviceGet", api.cuDeviceGet(&cu_device, probe.device()));
      Device usable;
      gmlake::cuda::check("cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain(&usable.context, cu_device));
      return usable;
    } catch (const gmlake::Error& e) {
      return {std::string("no usable CUDA device: ") + e.what(), nullptr};
    }
  }();
  return checked;
}

// Runs `body` with device 0's primary context current; skips the benchmark with the reason when there is no
// usable device, or when a driver call fails (out of memory, say).
template <typename Body>
void on_device(benchmark::State& state, Body&& body) {
  const Device& d = device();
  if (d.unusable_because) return state.SkipWithError(d.unusable_because->c_str());
  try {
    const gmlake::cuda::ScopedContext current(d.context);
    body();
  } catch (const gmlake::Error& e) {
    state.SkipWithError(e.what());
  }
}

CUdeviceptr mem_alloc(std::uint64_t size_bytes) {
  CUdeviceptr p = 0;
  gmlake::cuda::check("cuMemAlloc", gmlake::cuda::driver().cuMemAlloc(&p, size_bytes));
  return p;
}

void mem_free(CUdeviceptr p) { gmlake::cuda::check("cuMemFree", gmlake::cuda::driver().cuMemFree(p)); }

void synchronize() { gmlake::cuda::check("cuCtxSynchronize", gmlake::cuda::driver().cuCtxSynchronize()); }

void set_per_op(benchmark::State& state, double ops_per_iteration) {
  state.counters["per_op"] = benchmark::Counter(
      ops_per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

std::uint64_t arg_bytes(const benchmark::State& state) { return static_cast<std::uint64_t>(state.range(0)); }

// --- Fixed-size blocks: block pool, allocator, cuMemAlloc ------------------------------------------------------------

void BM_CudaBlockPool(benchmark::State& state) {
  on_device(state, [&] {
    gmlake::CudaBackend backend;
    const std::uint64_t size = arg_bytes(state);
    gmlake::classic::BlockPool pool(
        backend, {.block_bytes = size, .alignment_bytes = kAlignmentBytes, .region_bytes = size * kBatch});
    std::array<void*, kBatch> blocks{};
    for (auto _ : state) {
      for (void*& p : blocks) p = pool.allocate();
      for (void* p : blocks) pool.deallocate(p);
    }
  });
  set_per_op(state, 2 * kBatch);
}

void BM_CudaBumpAllocator(benchmark::State& state) {
  on_device(state, [&] {
    gmlake::CudaBackend backend;
    const std::uint64_t size = arg_bytes(state);
    gmlake::classic::BumpAllocator bump(backend, gmlake::round_up(size, kAlignmentBytes) * kBatch);
    for (auto _ : state) {
      for (int i = 0; i < kBatch; ++i) benchmark::DoNotOptimize(bump.allocate(size, kAlignmentBytes));
      bump.reset();
    }
  });
  set_per_op(state, 2 * kBatch);
}

void BM_CuMemAllocFree(benchmark::State& state) {
  on_device(state, [&] {
    const std::uint64_t size = arg_bytes(state);
    std::array<CUdeviceptr, kBatch> blocks{};
    for (auto _ : state) {
      for (CUdeviceptr& p : blocks) p = mem_alloc(size);
      for (CUdeviceptr p : blocks) mem_free(p);
    }
  });
  set_per_op(state, 2 * kBatch);
}

void block_sizes(benchmark::internal::Benchmark* b) {
  for (std::uint64_t size : {kSmallestBlockBytes, 4 * kKiB, 64 * kKiB, kMiB}) b->Arg(static_cast<std::int64_t>(size));
  b->MinTime(kShortRunSeconds);
}

BENCHMARK(BM_CudaBlockPool)->Apply(block_sizes);
BENCHMARK(BM_CudaBumpAllocator)->Apply(block_sizes);
BENCHMARK(BM_CuMemAllocFree)->Apply(block_sizes);

// --- Growable buffer -------------------------------------------------------------------------------------------

// One growth from start_bytes to end_bytes, doubling, in a buffer that never moves.
void grow_buffer(gmlake::Backend& backend, std::uint64_t start_bytes, std::uint64_t end_bytes) {
  gmlake::classic::GrowableBuffer buffer(backend, {.max_bytes = end_bytes});
  for (std::uint64_t size = start_bytes; size <= end_bytes; size *= 2) buffer.resize(size);
  benchmark::DoNotOptimize(buffer.data());
  synchronize();
}

// One growth from start_bytes to end_bytes, doubling, the cudaMalloc way: each step allocates the new size,
// copies the old contents on the device, waits for the copy, and frees the old allocation.
void grow_by_copying(std::uint64_t start_bytes, std::uint64_t end_bytes) {
  const gmlake::cuda::DriverApi& api = gmlake::cuda::driver();
  CUdeviceptr data = 0;
  std::uint64_t old_size = 0;
  for (std::uint64_t size = start_bytes; size <= end_bytes; size *= 2) {
    const CUdeviceptr bigger = mem_alloc(size);
    if (old_size != 0) {
      gmlake::cuda::check("cuMemcpyDtoD", api.cuMemcpyDtoD(bigger, data, old_size));
      synchronize();
      mem_free(data);
    }
    data = bigger;
    old_size = size;
  }
  mem_free(data);
  synchronize();
}

void BM_CudaGrowableBuffer_Grow(benchmark::State& state) {
  on_device(state, [&] {
    gmlake::CudaBackend backend;
    for (auto _ : state) grow_buffer(backend, kGrowthStartBytes, arg_bytes(state));
  });
  set_per_op(state, 1);
}

void BM_CuMemAllocCopyFree_Grow(benchmark::State& state) {
  on_device(state, [&] {
    for (auto _ : state) grow_by_copying(kGrowthStartBytes, arg_bytes(state));
  });
  set_per_op(state, 1);
}

// The argument is the final size in bytes; at most 12 GiB of device memory live at once (copying 4 GiB into 8).
BENCHMARK(BM_CudaGrowableBuffer_Grow)
    ->Arg(static_cast<std::int64_t>(kGrowthEndBytes))
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CuMemAllocCopyFree_Grow)
    ->Arg(static_cast<std::int64_t>(kGrowthEndBytes))
    ->Iterations(5)
    ->Unit(benchmark::kMillisecond);

// --- Layout cache ----------------------------------------------------------------------------------------------

void BM_CudaLayoutCache(benchmark::State& state) {
  on_device(state, [&] {
    gmlake::CudaBackend backend;
    const gmlake::classic::Layout layout{arg_bytes(state), kAlignmentBytes};
    // Room for the whole batch, whatever the size: every iteration after the first hits the cache.
    gmlake::classic::LayoutCache cache(backend, {.max_cached_bytes = 2 * kLayoutBatch * layout.size_bytes});
    std::array<void*, kLayoutBatch> buffers{};
    for (auto _ : state) {
      for (void*& p : buffers) p = cache.allocate(layout);
      for (void* p : buffers) cache.release(p);
    }
  });
  set_per_op(state, 2 * kLayoutBatch);
}

void BM_CuMemAllocFreeLayouts(benchmark::State& state) {
  on_device(state, [&] {
    const std::uint64_t size = arg_bytes(state);
    std::array<CUdeviceptr, kLayoutBatch> buffers{};
    for (auto _ : state) {
      for (CUdeviceptr& p : buffers) p = mem_alloc(size);
      for (CUdeviceptr p : buffers) mem_free(p);
    }
  });
  set_per_op(state, 2 * kLayoutBatch);
}

void layout_sizes(benchmark::internal::Benchmark* b) {
  for (std::uint64_t size : {2 * kMiB, 16 * kMiB, 128 * kMiB}) b->Arg(static_cast<std::int64_t>(size));
  b->MinTime(kShortRunSeconds);
}

BENCHMARK(BM_CudaLayoutCache)->Apply(layout_sizes);
BENCHMARK(BM_CuMemAllocFreeLayouts)->Apply(layout_sizes);

}  // namespace
