// StreamOrderedPool: a device's stream-ordered memory pool, the memory behind CUDA's cudaMallocAsync /
// cudaFreeAsync (the runtime's wrappers of the driver's cuMemAllocFromPoolAsync / cuMemFreeAsync). The pool, not
// gmlake, decides where blocks go and when it grows; gmlake only asks and frees. A backend that has one makes it
// with Backend::make_stream_ordered_pool() (cuda: CudaMemPool, src/backends/cuda/cuda_mem_pool.h); host and sim
// have none. The `async` policy (src/policies/async/async_allocator.h) drives one: PyTorch's
// PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync, replayed.
//
// The pool is set up as PyTorch's CUDAMallocAsyncAllocator.cpp sets up the device's default pool: release
// threshold UINT64_MAX (CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: freed memory stays in the pool at synchronizations
// instead of going back to the device), and the three reuse flags on (FOLLOW_EVENT_DEPENDENCIES,
// ALLOW_OPPORTUNISTIC, ALLOW_INTERNAL_DEPENDENCIES). CUDA Programming Guide, "Stream-Ordered Memory Allocator":
// https://docs.nvidia.com/cuda/cuda-programming-guide/04-special-topics/stream-ordered-memory-allocation.html
//
// Streams: a StreamId here is a name the caller gives a stream (a trace's stream), not a CUDA handle: the pool
// gives each name a CUDA stream of its own on first use and keeps it until it is destroyed. An allocation is
// ordered on its stream; a free on the stream it names (memory freed on one stream serves another once the free
// has completed on the device, or at once on the same stream).
//
// Sizes in bytes. Thread safety: none, as a Backend (one allocator, under its pool's lock).
#pragma once

#include <cstdint>

#include "gmlake/stream_events.h"

namespace gmlake {

class StreamOrderedPool {
 public:
  // Waits for every stream of the pool, frees what is still allocated, and gives the pool's memory back to the
  // device. Never throws (driver failures here are ignored).
  virtual ~StreamOrderedPool() = default;

  // cuMemAllocFromPoolAsync of `size_bytes` (>= 1) on `stream`'s CUDA stream: the address of the new allocation,
  // usable by work queued on that stream after this call. Throws OutOfMemoryError when the pool cannot grow
  // (CUDA_ERROR_OUT_OF_MEMORY: the device is full, or the pool is at its max_size_bytes()); BackendError for any
  // other driver failure. Either way nothing is allocated.
  virtual std::uintptr_t allocate_async(std::uint64_t size_bytes, StreamId stream) = 0;
  // cuMemFreeAsync of `address` (an allocation of this pool, not yet freed) on `stream`'s CUDA stream: its
  // memory returns to the pool once the work queued on that stream before the call has finished. Throws
  // BackendError when the driver refuses (then the allocation stays live).
  virtual void free_async(std::uintptr_t address, StreamId stream) = 0;
  // Blocks until the work queued on every stream of the pool has finished (cuStreamSynchronize of each):
  // every free made before the call has then completed. Throws BackendError.
  virtual void synchronize() = 0;
  // cuMemPoolTrimTo(pool, keep_bytes): gives free memory of the pool back to the device until it holds at most
  // `keep_bytes` beyond its allocations (0: all of it; PyTorch's emptyCache). Frees that have not completed
  // are not free yet: synchronize() first. Throws BackendError.
  virtual void trim_to(std::uint64_t keep_bytes) = 0;

  // Bytes of device memory the pool holds now (CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT): what the pool took from
  // the device, in the pool's own granularity. Throws BackendError.
  virtual std::uint64_t reserved_bytes() const = 0;
  // The most reserved_bytes() has been since the pool was made or reset_high_marks() ran
  // (CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH). Throws BackendError.
  virtual std::uint64_t reserved_high_bytes() const = 0;
  // Bytes of the pool in use by allocations, including those whose free has not completed yet
  // (CU_MEMPOOL_ATTR_USED_MEM_CURRENT), and its high mark (CU_MEMPOOL_ATTR_USED_MEM_HIGH). Throw BackendError.
  virtual std::uint64_t used_bytes() const = 0;
  virtual std::uint64_t used_high_bytes() const = 0;
  // Resets both high marks to their current values (setting CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH and
  // CU_MEMPOOL_ATTR_USED_MEM_HIGH to 0, the one value the driver accepts; PyTorch's resetPeakStats).
  // Throws BackendError.
  virtual void reset_high_marks() = 0;
  // The most bytes the pool may reserve (CUmemPoolProps::maxSize), 0 when only the device bounds it.
  virtual std::uint64_t max_size_bytes() const = 0;
  // CUDA streams the pool has made so far, one per stream name used.
  virtual std::uint64_t streams() const = 0;
};

}  // namespace gmlake
