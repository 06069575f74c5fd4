// CudaMemPool: StreamOrderedPool (include/gmlake/stream_ordered_pool.h) on the CUDA driver's stream-ordered
// allocator, one driver call per pool call:
//
//   allocate_async     cuMemAllocFromPoolAsync(pool, the name's stream)   (cudaMallocFromPoolAsync)
//   free_async         cuMemFreeAsync(the name's stream)                  (cudaFreeAsync)
//   synchronize        cuStreamSynchronize of every stream the pool made
//   trim_to            cuMemPoolTrimTo
//   reserved_bytes ... cuMemPoolGetAttribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT / _HIGH, USED_MEM_CURRENT / _HIGH)
//   reset_high_marks   cuMemPoolSetAttribute(RESERVED_MEM_HIGH, 0), (USED_MEM_HIGH, 0)
//
// The pool is its own (cuMemPoolCreate: pinned memory on the backend's device, no IPC handle types), set up as
// PyTorch's CUDAMallocAsyncAllocator.cpp sets up the device's default pool (lazy_init_device): release threshold
// UINT64_MAX and the three reuse flags on. PyTorch takes the default pool (cudaDeviceGetDefaultMemPool); a pool
// of our own behaves the same and differs in two ways the replay needs: its figures are this pool's alone (no
// other user of the process's default pool counts in them, and a replay after another starts from zero), and
// it takes a maximum size (CUmemPoolProps::maxSize, CUDA 12.2): the device limit of `gmlake replay
// --device-bytes`. CUDA driver API, "Stream Ordered Memory Allocator":
// https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__MALLOC__ASYNC.html
//
// Streams: each stream name gets a CUDA stream made with CU_STREAM_NON_BLOCKING on first use (name 0 included:
// a trace's default stream is a stream like the others here, not the legacy default stream, which would
// serialize with every other). Calls run in the backend's primary context (made current around each call, as
// CudaBackend does, and restored).
//
// Errors: a failing driver call throws BackendError(call, "<CUDA_ERROR_NAME> (...)");
// CUDA_ERROR_OUT_OF_MEMORY from cuMemAllocFromPoolAsync throws OutOfMemoryError (requested = the size,
// reserved = the pool's reserved bytes, allocated = its used bytes, cap = max_size_bytes()).
// Thread safety: none, as every Backend.
#pragma once

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "gmlake/stream_ordered_pool.h"

namespace gmlake {

class CudaMemPool final : public StreamOrderedPool {
 public:
  // Makes the pool on device `device` (a CUDA ordinal) in `context` (its primary context, retained by the
  // caller for the pool's life), with maxSize `max_size_bytes` (0: the driver's default, the device's memory).
  // Throws BackendError("cuDeviceGetAttribute", ...) when the device has no memory pools,
  // BackendError("cuMemPoolCreate", ...) when the driver refuses the pool or max_size_bytes is set on a driver
  // older than CUDA 12.2 (no maxSize field), BackendError("cuMemPoolSetAttribute", ...).
  CudaMemPool(void* context, int device, std::uint64_t max_size_bytes);
  // Synchronizes every stream, trims and destroys the pool, then destroys the streams. Allocations still live
  // are the owner's to free first (free_async): cuMemPoolDestroy defers releasing a pool until its allocations
  // are freed. Never throws.
  ~CudaMemPool() override;
  CudaMemPool(const CudaMemPool&) = delete;
  CudaMemPool& operator=(const CudaMemPool&) = delete;

  std::uintptr_t allocate_async(std::uint64_t size_bytes, StreamId stream) override;
  void free_async(std::uintptr_t address, StreamId stream) override;
  void synchronize() override;
  void trim_to(std::uint64_t keep_bytes) override;
  std::uint64_t reserved_bytes() const override;
  std::uint64_t reserved_high_bytes() const override;
  std::uint64_t used_bytes() const override;
  std::uint64_t used_high_bytes() const override;
  void reset_high_marks() override;
  std::uint64_t max_size_bytes() const override { return max_size_bytes_; }
  std::uint64_t streams() const override { return streams_.size(); }

 private:
  // The CUstream of `stream`, made on first use (cuStreamCreate, CU_STREAM_NON_BLOCKING). Call with the
  // context current.
  void* stream_of(StreamId stream);
  // cuMemPoolGetAttribute of a cuuint64_t attribute (a CUmemPool_attribute), with the context current.
  std::uint64_t attribute(int attr) const;

  void* context_;  // CUcontext
  void* pool_ = nullptr;  // CUmemoryPool
  std::uint64_t max_size_bytes_;
  absl::flat_hash_map<StreamId, void*> streams_;  // name -> CUstream
};

}  // namespace gmlake
