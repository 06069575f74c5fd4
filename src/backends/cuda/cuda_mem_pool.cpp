// CudaMemPool: see cuda_mem_pool.h for which driver call plays which pool call.
#include "cuda_mem_pool.h"

#include <cuda.h>

#include <string>

#include "cuda_driver.h"
#include "gmlake/error.h"

namespace gmlake {
namespace {

using cuda::check;
using cuda::driver;

CUcontext as_context(void* context) { return static_cast<CUcontext>(context); }
CUmemoryPool as_pool(void* pool) { return static_cast<CUmemoryPool>(pool); }

// The first driver with CUmemPoolProps::maxSize (CUDA 12.2): older ones want those bytes zero.
constexpr int kMaxSizeDriverVersion = 12020;

void set_attribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  check("cuMemPoolSetAttribute", driver().cuMemPoolSetAttribute(pool, attr, value));
}

// Makes the pool, as PyTorch's lazy_init_device sets up the default one (see the header).
CUmemoryPool created_pool(int device, std::uint64_t max_size_bytes) {
  const cuda::DriverApi& api = driver();
  CUdevice cu_device = 0;
  check("cuDeviceGet", api.cuDeviceGet(&cu_device, device));
  int supported = 0;
  check("cuDeviceGetAttribute",
        api.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, cu_device));
  if (supported == 0) {
    throw BackendError("cuDeviceGetAttribute", "CUDA device " + std::to_string(device) +
                                                   " does not support memory pools (cudaMallocAsync)");
  }
  if (max_size_bytes != 0) {
    int version = 0;
    check("cuDriverGetVersion", api.cuDriverGetVersion(&version));
    if (version < kMaxSizeDriverVersion) {
      throw BackendError("cuMemPoolCreate", "a pool of at most " + std::to_string(max_size_bytes) +
                                                " bytes (--device-bytes) needs CUmemPoolProps::maxSize, CUDA 12.2 "
                                                "or newer; this driver is CUDA " + std::to_string(version / 1000) +
                                                "." + std::to_string(version % 1000 / 10));
    }
  }
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  props.maxSize = max_size_bytes;
  CUmemoryPool pool = nullptr;
  check("cuMemPoolCreate", api.cuMemPoolCreate(&pool, &props));
  try {
    // Freed memory stays in the pool at synchronizations (the default threshold, 0, gives it back at each).
    cuuint64_t threshold = UINT64_MAX;
    set_attribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold);
    // On by default; set as PyTorch sets them, so that the replay does not depend on the default.
    int enable = 1;
    set_attribute(pool, CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES, &enable);
    set_attribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC, &enable);
    set_attribute(pool, CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES, &enable);
  } catch (...) {
    api.cuMemPoolDestroy(pool);
    throw;
  }
  return pool;
}

}  // namespace

CudaMemPool::CudaMemPool(void* context, int device, std::uint64_t max_size_bytes)
    : context_(context), max_size_bytes_(max_size_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  pool_ = created_pool(device, max_size_bytes);
}

CudaMemPool::~CudaMemPool() {
  const cuda::DriverApi& api = driver();  // loaded: the constructor succeeded
  try {
    const cuda::ScopedContext current(as_context(context_));
    for (const auto& [name, stream] : streams_) api.cuStreamSynchronize(static_cast<CUstream>(stream));
    api.cuMemPoolTrimTo(as_pool(pool_), 0);
    api.cuMemPoolDestroy(as_pool(pool_));
    for (const auto& [name, stream] : streams_) api.cuStreamDestroy(static_cast<CUstream>(stream));
  } catch (...) {
    // The context could not be made current: nothing more can be given back.
  }
}

void* CudaMemPool::stream_of(StreamId stream) {
  if (const auto it = streams_.find(stream); it != streams_.end()) return it->second;
  CUstream made = nullptr;
  check("cuStreamCreate", driver().cuStreamCreate(&made, CU_STREAM_NON_BLOCKING));
  try {
    streams_.emplace(stream, made);
  } catch (...) {
    driver().cuStreamDestroy(made);
    throw;
  }
  return made;
}

std::uintptr_t CudaMemPool::allocate_async(std::uint64_t size_bytes, StreamId stream) {
  const cuda::ScopedContext current(as_context(context_));
  const auto cu_stream = static_cast<CUstream>(stream_of(stream));
  CUdeviceptr address = 0;
  const CUresult result = driver().cuMemAllocFromPoolAsync(&address, size_bytes, as_pool(pool_), cu_stream);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) {
    std::uint64_t reserved = 0, used = 0;
    try {
      reserved = attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
      used = attribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
    } catch (const BackendError&) {
      // The figures stay 0: the out-of-memory is what the caller must learn.
    }
    throw OutOfMemoryError(size_bytes, reserved, used, max_size_bytes_,
                           "cuMemAllocFromPoolAsync: " + cuda::error_text(result));
  }
  check("cuMemAllocFromPoolAsync", result);
  return static_cast<std::uintptr_t>(address);
}

void CudaMemPool::free_async(std::uintptr_t address, StreamId stream) {
  const cuda::ScopedContext current(as_context(context_));
  check("cuMemFreeAsync", driver().cuMemFreeAsync(static_cast<CUdeviceptr>(address),
                                                  static_cast<CUstream>(stream_of(stream))));
}

void CudaMemPool::synchronize() {
  const cuda::ScopedContext current(as_context(context_));
  for (const auto& [name, stream] : streams_) {
    check("cuStreamSynchronize", driver().cuStreamSynchronize(static_cast<CUstream>(stream)));
  }
}

void CudaMemPool::trim_to(std::uint64_t keep_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  check("cuMemPoolTrimTo", driver().cuMemPoolTrimTo(as_pool(pool_), keep_bytes));
}

std::uint64_t CudaMemPool::attribute(int attr) const {
  cuuint64_t value = 0;
  check("cuMemPoolGetAttribute",
        driver().cuMemPoolGetAttribute(as_pool(pool_), static_cast<CUmemPool_attribute>(attr), &value));
  return value;
}

std::uint64_t CudaMemPool::reserved_bytes() const {
  const cuda::ScopedContext current(as_context(context_));
  return attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT);
}

std::uint64_t CudaMemPool::reserved_high_bytes() const {
  const cuda::ScopedContext current(as_context(context_));
  return attribute(CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH);
}

std::uint64_t CudaMemPool::used_bytes() const {
  const cuda::ScopedContext current(as_context(context_));
  return attribute(CU_MEMPOOL_ATTR_USED_MEM_CURRENT);
}

std::uint64_t CudaMemPool::used_high_bytes() const {
  const cuda::ScopedContext current(as_context(context_));
  return attribute(CU_MEMPOOL_ATTR_USED_MEM_HIGH);
}

void CudaMemPool::reset_high_marks() {
  const cuda::ScopedContext current(as_context(context_));
  // 0 is the one value the driver takes: it resets each mark to the current value.
  cuuint64_t zero = 0;
  set_attribute(as_pool(pool_), CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero);
  zero = 0;
  set_attribute(as_pool(pool_), CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero);
}

}  // namespace gmlake
