// The classic pools against the plain alternative, on the host backend (real memory; every block is touched
// once, as a user would). Pairs to compare (docs/benchmarks.md, "Classic pools", has the figures and
// scripts/pools_bench.py prints the ratios):
//   BM_BlockPool / BM_ConcurrentBlockPool   vs BM_MallocBlocks        64 blocks allocated, touched, freed in
//                                                                     allocation order; 256 B .. 1 MiB; 1 and 2 threads
//   BM_BumpAllocator / BM_ConcurrentBumpAllocator
//                                           vs BM_MallocObjects       256 objects of 16..1024 B, then free all
//                                                                     (bump allocator: reset); 1 thread
//   BM_GrowableBuffer_Grow                  vs BM_Realloc_Grow        1 MiB doubling to 8 GiB, untouched
//   BM_GrowableBuffer_GrowFilled            vs BM_Realloc_GrowFilled, 1 MiB doubling to 1 GiB, every new byte
//                                              BM_MallocCopyFree_GrowFilled       written (memset)
//   BM_GrowableBuffer_Append                vs BM_Realloc_Append,     2 MiB appended at a time up to 64 MiB,
//                                              BM_MallocCopyFree_Append           written
//   BM_LayoutCache                          vs BM_MallocLayouts,      8 buffers of one layout (256 B aligned)
//                                              BM_UncachedBackend                 allocated, touched, released;
//                                                                     1, 16, 64 MiB; 1 and 2 threads
// Figures are per operation (counter per_op: an allocation or a free; for the growth benchmarks, one whole
// growth from start to end including creating and destroying the buffer).
// The pools run on the backend named by the environment variable GMLAKE_POOLS_BACKEND (a make_backend name:
// host by default; with cuda, pool memory is not touched and the "filled" growth benchmarks are skipped). The
// GPU's plain alternatives (cuMemAlloc / cuMemFree, what cudaMalloc / cudaFree call) are compared with the
// pools on the CUDA backend in bench/cuda/pools_cuda_bench.cpp (scripts/pools-gpu-bench.sh).
// Run: build/gmlake_bench --benchmark_filter='BM_(BlockPool|Concurrent|Malloc|Bump|Growable|Realloc|Layout|Uncached)'
#include <benchmark/benchmark.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "gmlake/backend_factory.h"
#include "gmlake/classic/bump_allocator.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/classic/concurrent_bump_allocator.h"
#include "gmlake/classic/concurrent_block_pool.h"
#include "gmlake/classic/growable_buffer.h"
#include "gmlake/classic/layout_cache.h"
#include "gmlake/classic/vmm_range.h"
#include "gmlake/units.h"

namespace {

using gmlake::kGiB;
using gmlake::kKiB;
using gmlake::kMiB;

constexpr int kBatch = 64;       // blocks per iteration (block pool)
constexpr int kObjects = 256;    // objects per iteration (bump allocator)
constexpr int kLayoutBatch = 8;  // buffers per iteration (layout cache)
constexpr double kShortRunSeconds = 0.2;

void touch(void* p) { *static_cast<volatile char*>(p) = 1; }

// The backend the pools run on (see above).
std::unique_ptr<gmlake::Backend> make_pool_backend() {
  const char* name = std::getenv("GMLAKE_POOLS_BACKEND");
  return gmlake::make_backend(name != nullptr ? name : "host", gmlake::kPageBytes);
}

// True when the CPU can touch the pools' memory (asked once of a backend of the same kind: every thread of a
// threaded benchmark can call this before thread 0 has made the shared pool).
bool pool_memory_is_host() {
  static const bool host = make_pool_backend()->host_accessible();
  return host;
}

// Touches pool memory the way a user would, where the CPU can.
void touch_pool(const gmlake::Backend& backend, void* p) {
  if (backend.host_accessible()) touch(p);
}

void set_per_op(benchmark::State& state, double ops_per_iteration) {
  state.counters["per_op"] = benchmark::Counter(
      ops_per_iteration, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// --- Fixed-size blocks ----------------------------------------------------------------------------------------

template <typename Allocate, typename Free>
void run_block_batches(benchmark::State& state, bool touch_blocks, Allocate&& allocate, Free&& free_block) {
  std::array<void*, kBatch> blocks{};
  for (auto _ : state) {
    for (void*& p : blocks) {
      p = allocate();
      if (touch_blocks) touch(p);
    }
    for (void* p : blocks) free_block(p);
    benchmark::ClobberMemory();
  }
  set_per_op(state, 2 * kBatch);
}

gmlake::classic::BlockPoolOptions batch_pool_options(std::uint64_t block_bytes, int threads) {
  return {.block_bytes = block_bytes, .region_bytes = block_bytes * kBatch * static_cast<std::uint64_t>(threads)};
}

void BM_BlockPool(benchmark::State& state) {
  const auto size = static_cast<std::uint64_t>(state.range(0));
  const auto backend = make_pool_backend();
  gmlake::classic::BlockPool pool(*backend, batch_pool_options(size, 1));
  run_block_batches(
      state, backend->host_accessible(), [&] { return pool.allocate(); }, [&](void* p) { pool.deallocate(p); });
}

std::unique_ptr<gmlake::Backend> shared_backend;
std::unique_ptr<gmlake::classic::ConcurrentBlockPool> shared_block_pool;

void BM_ConcurrentBlockPool(benchmark::State& state) {
  const auto size = static_cast<std::uint64_t>(state.range(0));
  if (state.thread_index() == 0) {
    shared_backend = make_pool_backend();
    shared_block_pool = std::make_unique<gmlake::classic::ConcurrentBlockPool>(*shared_backend,
                                                                             batch_pool_options(size, state.threads()));
  }
  run_block_batches(
      state, pool_memory_is_host(), [&] { return shared_block_pool->allocate(); },
      [&](void* p) { shared_block_pool->deallocate(p); });
  if (state.thread_index() == 0) {
    shared_block_pool.reset();
    shared_backend.reset();
  }
}

void BM_MallocBlocks(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  run_block_batches(
      state, true, [&] { return std::malloc(size); }, [](void* p) { std::free(p); });
}

void block_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t size : {256, 4 * 1024, 64 * 1024, 1024 * 1024}) b->Arg(size);
  b->MinTime(kShortRunSeconds);
}

BENCHMARK(BM_BlockPool)->Apply(block_sizes);
BENCHMARK(BM_ConcurrentBlockPool)->Apply(block_sizes)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_MallocBlocks)->Apply(block_sizes)->Threads(1)->Threads(2)->UseRealTime();

// --- Bump allocator -------------------------------------------------------------------------------------------

// 256 sizes of 16..1024 B, the same for every run.
const std::array<std::uint64_t, kObjects>& object_sizes() {
  static const auto sizes = [] {
    std::array<std::uint64_t, kObjects> s{};
    std::uint64_t x = 88172645463325252ULL;
    for (auto& size : s) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size = 16 + x % 1009;
    }
    return s;
  }();
  return sizes;
}

template <typename Bump>
void run_bump(benchmark::State& state, Bump& bump) {
  const auto& sizes = object_sizes();
  for (auto _ : state) {
    for (std::uint64_t size : sizes) touch_pool(bump.backend(), bump.allocate(size));
    bump.reset();
    benchmark::ClobberMemory();
  }
  set_per_op(state, kObjects);
}

void BM_BumpAllocator(benchmark::State& state) {
  const auto backend = make_pool_backend();
  gmlake::classic::BumpAllocator bump(*backend, kMiB);
  run_bump(state, bump);
}

void BM_ConcurrentBumpAllocator(benchmark::State& state) {
  const auto backend = make_pool_backend();
  gmlake::classic::ConcurrentBumpAllocator bump(*backend, kMiB);
  run_bump(state, bump);
}

void BM_MallocObjects(benchmark::State& state) {
  const auto& sizes = object_sizes();
  std::array<void*, kObjects> objects{};
  for (auto _ : state) {
    for (int i = 0; i < kObjects; ++i) touch(objects[i] = std::malloc(sizes[i]));
    for (void* p : objects) std::free(p);
    benchmark::ClobberMemory();
  }
  set_per_op(state, kObjects);
}

BENCHMARK(BM_BumpAllocator)->MinTime(kShortRunSeconds);
BENCHMARK(BM_ConcurrentBumpAllocator)->MinTime(kShortRunSeconds);
BENCHMARK(BM_MallocObjects)->MinTime(kShortRunSeconds);

// --- Growable buffer ------------------------------------------------------------------------------------------

// Grows 1 MiB -> final_bytes, doubling; `fill` writes the bytes each step added.
void grow_buffer(gmlake::Backend& backend, std::uint64_t final_bytes, std::uint64_t step_factor_or_add, bool doubling,
                 bool fill) {
  gmlake::classic::GrowableBuffer buffer(backend, {.max_bytes = final_bytes});
  auto* const data = static_cast<char*>(buffer.data());
  std::uint64_t size = 0;
  for (std::uint64_t next = kMiB; next <= final_bytes;
       next = doubling ? next * step_factor_or_add : next + step_factor_or_add) {
    buffer.resize(next);
    if (fill) std::memset(data + size, 1, next - size);
    size = next;
  }
  benchmark::DoNotOptimize(data);
}

void grow_realloc(std::uint64_t final_bytes, std::uint64_t step, bool doubling, bool fill) {
  char* data = nullptr;
  std::uint64_t size = 0;
  for (std::uint64_t next = kMiB; next <= final_bytes; next = doubling ? next * step : next + step) {
    data = static_cast<char*>(std::realloc(data, next));
    if (data == nullptr) std::abort();
    if (fill) std::memset(data + size, 1, next - size);
    size = next;
  }
  benchmark::DoNotOptimize(data);
  std::free(data);
}

void grow_malloc_copy_free(std::uint64_t final_bytes, std::uint64_t step, bool doubling) {
  char* data = nullptr;
  std::uint64_t size = 0;
  for (std::uint64_t next = kMiB; next <= final_bytes; next = doubling ? next * step : next + step) {
    auto* bigger = static_cast<char*>(std::malloc(next));
    if (bigger == nullptr) std::abort();
    if (size != 0) std::memcpy(bigger, data, size);
    std::free(data);
    data = bigger;
    std::memset(data + size, 1, next - size);
    size = next;
  }
  benchmark::DoNotOptimize(data);
  std::free(data);
}

void BM_GrowableBuffer_Grow(benchmark::State& state) {
  const auto backend = make_pool_backend();
  for (auto _ : state) grow_buffer(*backend, static_cast<std::uint64_t>(state.range(0)) * kMiB, 2, true, false);
  set_per_op(state, 1);
}
void BM_Realloc_Grow(benchmark::State& state) {
  for (auto _ : state) grow_realloc(static_cast<std::uint64_t>(state.range(0)) * kMiB, 2, true, false);
  set_per_op(state, 1);
}
void BM_GrowableBuffer_GrowFilled(benchmark::State& state) {
  const auto backend = make_pool_backend();
  if (!backend->host_accessible()) return state.SkipWithError("writes the buffer from the CPU");
  for (auto _ : state) grow_buffer(*backend, static_cast<std::uint64_t>(state.range(0)) * kMiB, 2, true, true);
  set_per_op(state, 1);
}
void BM_Realloc_GrowFilled(benchmark::State& state) {
  for (auto _ : state) grow_realloc(static_cast<std::uint64_t>(state.range(0)) * kMiB, 2, true, true);
  set_per_op(state, 1);
}
void BM_MallocCopyFree_GrowFilled(benchmark::State& state) {
  for (auto _ : state) grow_malloc_copy_free(static_cast<std::uint64_t>(state.range(0)) * kMiB, 2, true);
  set_per_op(state, 1);
}
void BM_GrowableBuffer_Append(benchmark::State& state) {
  const auto backend = make_pool_backend();
  if (!backend->host_accessible()) return state.SkipWithError("writes the buffer from the CPU");
  for (auto _ : state) grow_buffer(*backend, static_cast<std::uint64_t>(state.range(0)) * kMiB, 2 * kMiB, false, true);
  set_per_op(state, 1);
}
void BM_Realloc_Append(benchmark::State& state) {
  for (auto _ : state) grow_realloc(static_cast<std::uint64_t>(state.range(0)) * kMiB, 2 * kMiB, false, true);
  set_per_op(state, 1);
}
void BM_MallocCopyFree_Append(benchmark::State& state) {
  for (auto _ : state) grow_malloc_copy_free(static_cast<std::uint64_t>(state.range(0)) * kMiB, 2 * kMiB, false);
  set_per_op(state, 1);
}

// Arguments are final sizes in MiB. 8 GiB untouched costs address space and page tables only; the filled
// runs write every byte (1 GiB resident at most, 1.5 GiB for malloc + copy + free).
BENCHMARK(BM_GrowableBuffer_Grow)->Arg(8 * 1024)->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Realloc_Grow)->Arg(8 * 1024)->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrowableBuffer_GrowFilled)->Arg(1024)->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Realloc_GrowFilled)->Arg(1024)->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MallocCopyFree_GrowFilled)->Arg(1024)->Iterations(2)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GrowableBuffer_Append)->Arg(64)->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Realloc_Append)->Arg(64)->Iterations(5)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MallocCopyFree_Append)->Arg(64)->Iterations(5)->Unit(benchmark::kMillisecond);

// --- Layout cache ---------------------------------------------------------------------------------------------

template <typename Allocate, typename Release>
void run_layout_batches(benchmark::State& state, bool touch_buffers, Allocate&& allocate, Release&& release) {
  std::array<void*, kLayoutBatch> buffers{};
  for (auto _ : state) {
    for (void*& p : buffers) {
      p = allocate();
      if (touch_buffers) touch(p);
    }
    for (void* p : buffers) release(p);
    benchmark::ClobberMemory();
  }
  set_per_op(state, 2 * kLayoutBatch);
}

std::unique_ptr<gmlake::classic::LayoutCache> shared_cache;

void BM_LayoutCache(benchmark::State& state) {
  const gmlake::classic::Layout layout{static_cast<std::uint64_t>(state.range(0)), 256};
  if (state.thread_index() == 0) {
    shared_backend = make_pool_backend();
    shared_cache = std::make_unique<gmlake::classic::LayoutCache>(*shared_backend);
  }
  run_layout_batches(
      state, pool_memory_is_host(), [&] { return shared_cache->allocate(layout); },
      [&](void* p) { shared_cache->release(p); });
  if (state.thread_index() == 0) {
    shared_cache.reset();
    shared_backend.reset();
  }
}

void BM_MallocLayouts(benchmark::State& state) {
  const auto size = static_cast<std::size_t>(state.range(0));
  run_layout_batches(
      state, true, [&] { return std::aligned_alloc(256, size); }, [](void* p) { std::free(p); });
}

// Every allocation its own backend region, given back at release: what a layout cache saves (cudaMalloc /
// cudaFree on a GPU; mmap + munmap here).
void BM_UncachedBackend(benchmark::State& state) {
  const auto size = static_cast<std::uint64_t>(state.range(0));
  const auto backend = make_pool_backend();
  std::vector<gmlake::classic::VmmRange> ranges;
  ranges.reserve(kLayoutBatch);
  for (auto _ : state) {
    for (int i = 0; i < kLayoutBatch; ++i) {
      ranges.emplace_back(*backend, size);
      ranges.back().map_chunks(ranges.back().reserved_bytes());
      touch_pool(*backend, ranges.back().data());
    }
    ranges.clear();
    benchmark::ClobberMemory();
  }
  set_per_op(state, 2 * kLayoutBatch);
}

void layout_sizes(benchmark::internal::Benchmark* b) {
  for (std::int64_t mib : {1, 16, 64}) b->Arg(mib * 1024 * 1024);
  b->MinTime(kShortRunSeconds);
}

BENCHMARK(BM_LayoutCache)->Apply(layout_sizes)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_MallocLayouts)->Apply(layout_sizes)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_UncachedBackend)->Apply(layout_sizes);

}  // namespace
