// CudaMemPool (src/backends/cuda/cuda_mem_pool.h), the stream-ordered pool behind the `async` policy, on the GPU:
// allocations that are real device memory, a pool that keeps freed memory, its high mark and its reset, a
// maximum size (the backend's device limit) that turns into out-of-memory; and `--policy async` replaying a
// synthetic trace end to end: every op done, the peak from CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH at least the trace's
// peak of live bytes. Skipped without a CUDA device.
#include "backends/cuda/cuda_mem_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "cuda_test_support.h"
#include "gmlake/error.h"
#include "gmlake/replay.h"
#include "gmlake/units.h"
#include "policies/async/async_allocator.h"

namespace gmlake {
namespace {

using gpu_test::CudaTest;

class CudaMemPoolTest : public CudaTest {};

TEST_F(CudaMemPoolTest, AllocationsAreDeviceMemoryAndFreedMemoryStaysInThePoolUntilTrimmed) {
  CudaBackend backend;
  std::unique_ptr<StreamOrderedPool> pool = backend.make_stream_ordered_pool();
  ASSERT_NE(pool, nullptr) << "`--policy all` includes async on cuda because this pool exists";
  EXPECT_EQ(pool->max_size_bytes(), 0u);
  EXPECT_EQ(pool->reserved_bytes(), 0u);

  const std::uint64_t size = 64 * kMiB;
  const std::uintptr_t a = pool->allocate_async(size, /*stream=*/1);
  ASSERT_NE(a, 0u);
  pool->synchronize();  // the allocation has completed: usable from any stream
  gpu_test::fill_bytes(a, 0x5A, size);
  gpu_test::synchronize();
  const std::vector<std::uint8_t> bytes = gpu_test::read_bytes(a + size - 4096, 4096);
  for (std::uint8_t b : bytes) ASSERT_EQ(b, 0x5A);
  EXPECT_GE(pool->reserved_bytes(), size);
  EXPECT_GE(pool->used_bytes(), size);
  EXPECT_EQ(pool->streams(), 1u);

  pool->free_async(a, 1);
  pool->synchronize();  // a synchronization: with the default release threshold (0) the pool would shrink here
  EXPECT_GE(pool->reserved_bytes(), size) << "release threshold UINT64_MAX keeps freed memory in the pool";
  EXPECT_EQ(pool->used_bytes(), 0u);
  EXPECT_GE(pool->reserved_high_bytes(), size);

  const std::uintptr_t b = pool->allocate_async(size, 2);  // a second stream
  const std::uint64_t reserved = pool->reserved_bytes();
  EXPECT_EQ(pool->streams(), 2u);
  pool->free_async(b, 2);
  pool->synchronize();
  EXPECT_EQ(pool->reserved_bytes(), reserved);
  pool->trim_to(0);
  EXPECT_EQ(pool->reserved_bytes(), 0u);
  EXPECT_GE(pool->reserved_high_bytes(), size) << "the high mark stays until reset";
  pool->reset_high_marks();
  EXPECT_EQ(pool->reserved_high_bytes(), 0u) << "reset to the current value, 0 after the trim";
  EXPECT_EQ(pool->used_high_bytes(), 0u);
}

TEST_F(CudaMemPoolTest, TheBackendsDeviceLimitIsThePoolsMaximumSizeAndPastItAllocationsAreOutOfMemory) {
  int version = 0;
  cuda::check("cuDriverGetVersion", cuda::driver().cuDriverGetVersion(&version));
  CudaBackend backend;
  backend.set_device_limit_bytes(64 * kMiB + 12345);  // rounded down to the granularity
  if (version < 12020) {
    EXPECT_THROW(backend.make_stream_ordered_pool(), BackendError) << "no maxSize before CUDA 12.2";
    GTEST_SKIP() << "driver " << version << " has no CUmemPoolProps::maxSize (CUDA 12.2)";
  }
  std::unique_ptr<StreamOrderedPool> pool = backend.make_stream_ordered_pool();
  EXPECT_EQ(pool->max_size_bytes(), 64 * kMiB);
  const std::uintptr_t a = pool->allocate_async(40 * kMiB, 0);
  EXPECT_THROW(pool->allocate_async(40 * kMiB, 0), OutOfMemoryError);
  EXPECT_LE(pool->reserved_bytes(), 64 * kMiB);
  pool->free_async(a, 0);
  const std::uintptr_t b = pool->allocate_async(40 * kMiB, 0);  // the same stream reuses the freed memory at once
  pool->free_async(b, 0);
  pool->synchronize();
  EXPECT_LE(pool->reserved_high_bytes(), 64 * kMiB);
}

// A synthetic trace over two streams: blocks of 1..40 MiB allocated and freed in a sawtooth, one freed on the
// other stream's behalf (record_stream: a deferred free), and blocks alive at the end.
Trace synthetic_trace() {
  Trace t;
  t.name = "synthetic_async";
  DeviceTrace d;
  std::int64_t time_us = 0;
  auto ev = [&](TraceAction a, std::uint64_t addr, std::uint64_t size, std::uint64_t stream) {
    d.events.push_back({a, addr, size, stream, time_us += 10});
  };
  std::uint64_t next = 0x7f0000000000;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> live;  // address, size
  for (int step = 0; step < 20; ++step) {
    const std::uint64_t stream = step % 3 == 0 ? 7 : 0;
    for (int i = 0; i < 6; ++i) {
      const std::uint64_t size = (1 + (step * 7 + i * 13) % 40) * kMiB + 512 * static_cast<std::uint64_t>(i);
      ev(TraceAction::kAlloc, next, size, stream);
      live.emplace_back(next, size);
      next += 64 * kMiB;
    }
    bool deferred = step % 5 != 4;  // every fifth step, one free completes after the next allocation
    while (live.size() > 4) {  // free the oldest
      const auto [addr, size] = live.front();
      live.erase(live.begin());
      ev(TraceAction::kFreeRequested, addr, size, 0);
      if (!deferred) {
        deferred = true;
        ev(TraceAction::kAlloc, next, 2 * kMiB, 7);
        live.emplace_back(next, 2 * kMiB);
        next += 64 * kMiB;
      }
      ev(TraceAction::kFreeCompleted, addr, size, 0);
    }
  }
  t.devices.push_back(d);
  return t;
}

ReplayResult replay_async(const Trace& trace, std::uint64_t device_bytes) {
  ReplayOptions options;
  options.config.policy = Policy::kAsync;
  options.backend = "cuda";
  options.device_bytes = device_bytes;
  options.check_every_ops = 1;
  return replay(trace, trace.devices.at(0), options);
}

TEST_F(CudaMemPoolTest, PolicyAsyncReplaysASyntheticTraceWithEveryOpDoneAndThePoolsPeakAboveTheLiveBytes) {
  const Trace trace = synthetic_trace();
  const DeviceTrace& d = trace.devices.at(0);
  // The ops the replay makes of it: one per allocation, one per free that completes at once (its two events in a
  // row), two per deferred free (begin and end).
  std::uint64_t allocs = 0, frees_at_once = 0, deferred = 0;
  for (std::size_t i = 0; i < d.events.size(); ++i) {
    if (d.events[i].action == TraceAction::kAlloc) ++allocs;
    if (d.events[i].action != TraceAction::kFreeRequested) continue;
    const bool at_once = i + 1 < d.events.size() && d.events[i + 1].action == TraceAction::kFreeCompleted &&
                         d.events[i + 1].addr == d.events[i].addr;
    ++(at_once ? frees_at_once : deferred);
  }
  ASSERT_GT(deferred, 0u) << "the trace has deferred frees";

  const ReplayResult r = replay_async(trace, 0);
  EXPECT_EQ(r.policy, Policy::kAsync);
  EXPECT_EQ(r.backend, "cuda");
  EXPECT_EQ(r.ooms, 0u);
  EXPECT_EQ(r.backend_errors, 0u);
  EXPECT_EQ(r.unknown_frees, 0u);
  EXPECT_EQ(r.stats.num_allocs, allocs) << "every allocation was served";
  EXPECT_EQ(r.ops, allocs + frees_at_once + 2 * deferred) << "every op of the trace was replayed";
  EXPECT_EQ(r.stats.num_frees, frees_at_once + deferred) << "every free was made";
  EXPECT_GT(r.peak_reserved_bytes, 0u);
  EXPECT_GE(r.peak_reserved_bytes, r.lower_bound_held_bytes)
      << "the pool held every live byte at the peak, deferred frees' until they ended";
  EXPECT_GE(r.lower_bound_held_bytes, r.lower_bound_bytes);
  EXPECT_EQ(r.lower_bound_bytes, lower_bound_bytes(d));
  EXPECT_GT(r.ns_per_op, 0.0);
  EXPECT_EQ(r.stats.backend_calls[BackendCall::kCreate], 0u) << "the pool's memory is the driver's, not chunks";
}

TEST_F(CudaMemPoolTest, PolicyAsyncUnderADeviceLimitCountsTheAllocationsThatDoNotFitAndGoesOn) {
  int version = 0;
  cuda::check("cuDriverGetVersion", cuda::driver().cuDriverGetVersion(&version));
  if (version < 12020) GTEST_SKIP() << "driver " << version << " has no CUmemPoolProps::maxSize (CUDA 12.2)";
  const Trace trace = synthetic_trace();
  const std::uint64_t lower = lower_bound_bytes(trace.devices.at(0));
  const std::uint64_t device_bytes = lower / 2;
  const ReplayResult r = replay_async(trace, device_bytes);
  EXPECT_GT(r.ooms, 0u) << "half the lower bound cannot hold the trace";
  // The driver honours the pool's maxSize at a coarser grain than 2 MiB: on an H100 (driver 580.159.04) a pool
  // of at most 124.5 MiB reserved 128 MiB. So the bound is maxSize rounded up to 64 MiB.
  constexpr std::uint64_t kDriverGrainBytes = 64ull << 20;
  const std::uint64_t bound = (device_bytes + kDriverGrainBytes - 1) / kDriverGrainBytes * kDriverGrainBytes;
  EXPECT_LE(r.peak_reserved_bytes, bound) << "the pool's maximum size bounds it, at the driver's grain";
  EXPECT_GT(r.peak_reserved_bytes, 0u);
  EXPECT_EQ(r.stats.num_ooms, r.ooms);
}

}  // namespace
}  // namespace gmlake
