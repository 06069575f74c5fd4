// The CUDA backend: see cuda_backend.h for which driver call plays which backend call. Each do_* makes its
// driver call with the primary context current and keeps the backend's own tables (what the destructor gives
// back) in step: an entry is added before the driver creates something (so bad_alloc leaves nothing behind) or
// right after with an undo on failure, and removed once the driver has destroyed it.
#include "cuda_backend.h"
#include <algorithm>

#include <cuda.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "cuda_driver.h"
#include "cuda_mem_pool.h"
#include "gmlake/error.h"

namespace gmlake {
namespace {

using cuda::check;
using cuda::driver;

CUcontext as_context(void* context) { return static_cast<CUcontext>(context); }

// The properties of every chunk: pinned memory on `device`, exportable as a file descriptor when asked.
CUmemAllocationProp allocation_prop(int device, bool exportable) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = exportable ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

// Throws BackendError("cuDeviceGetAttribute", ...) unless `attribute` of device `cu_device` is non-zero.
void require_attribute(CUdevice cu_device, int device, CUdevice_attribute attribute, const std::string& feature) {
  int value = 0;
  check("cuDeviceGetAttribute", driver().cuDeviceGetAttribute(&value, attribute, cu_device));
  if (value == 0) {
    throw BackendError("cuDeviceGetAttribute", "CUDA device " + std::to_string(device) + " does not support " + feature);
  }
}

}  // namespace

// Holds one retain of the device's primary context until the backend takes it over.
struct CudaBackend::OpenedDevice {
  int cu_device = 0;
  std::uint64_t granularity_bytes = 0;
  bool exportable = false;      // asked for and supported by the device
  CUcontext context = nullptr;  // retained: released here unless taken

  OpenedDevice() = default;
  OpenedDevice(OpenedDevice&& other) noexcept
      : cu_device(other.cu_device),
        granularity_bytes(other.granularity_bytes),
        exportable(other.exportable),
        context(other.context) {
    other.context = nullptr;
  }
  OpenedDevice& operator=(OpenedDevice&&) = delete;
  ~OpenedDevice() {
    if (context != nullptr) driver().cuDevicePrimaryCtxRelease(cu_device);
  }
};

CudaBackend::OpenedDevice CudaBackend::open_device(const CudaBackendOptions& options) {
  const cuda::DriverApi& api = driver();
  OpenedDevice opened;
  CUdevice cu_device = 0;
  check("cuDeviceGet", api.cuDeviceGet(&cu_device, options.device));
  opened.cu_device = cu_device;
  require_attribute(cu_device, options.device, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED,
                    "virtual memory management (cuMemCreate, cuMemMap)");
  if (options.exportable) {
    int supported = 0;
    check("cuDeviceGetAttribute",
          api.cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED,
                                   cu_device));
    opened.exportable = supported != 0;
  }
  check("cuDevicePrimaryCtxRetain", api.cuDevicePrimaryCtxRetain(&opened.context, cu_device));
  const cuda::ScopedContext current(opened.context);
  const CUmemAllocationProp prop = allocation_prop(options.device, opened.exportable);
  std::size_t granularity_bytes = 0;
  check("cuMemGetAllocationGranularity",
        api.cuMemGetAllocationGranularity(&granularity_bytes, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  opened.granularity_bytes = granularity_bytes;
  if (granularity_bytes == 0 || options.granularity_bytes % granularity_bytes != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "CudaBackend: granularity_bytes " + std::to_string(options.granularity_bytes) +
                    " is not a multiple of CUDA device " + std::to_string(options.device) +
                    "'s recommended allocation granularity " + std::to_string(granularity_bytes));
  }
  return opened;
}

CudaBackend::CudaBackend(const CudaBackendOptions& options) : CudaBackend(options, open_device(options)) {}

CudaBackend::CudaBackend(const CudaBackendOptions& options, OpenedDevice&& opened)
    : Backend(options.granularity_bytes),
      device_(options.device),
      cu_device_(opened.cu_device),
      device_granularity_bytes_(opened.granularity_bytes),
      exportable_(opened.exportable),
      physical_limit_bytes_(options.physical_limit_bytes),
      context_(opened.context) {
  opened.context = nullptr;  // ours now: released by the destructor
}

CudaBackend::~CudaBackend() {
  const cuda::DriverApi& api = driver();  // loaded: the constructor succeeded
  try {
    const cuda::ScopedContext current(as_context(context_));
    for (const auto& [handle, fd] : exported_fds_) close(fd);
    for (const auto& [addr, size_bytes] : mappings_) api.cuMemUnmap(addr, size_bytes);
    for (const std::uint64_t handle : chunks_) api.cuMemRelease(handle);
    for (const auto& [addr, size_bytes] : reservations_) api.cuMemAddressFree(addr, size_bytes);
  } catch (...) {
    // The context could not be made current: nothing more can be given back.
  }
  api.cuDevicePrimaryCtxRelease(cu_device_);
}

std::unique_ptr<StreamOrderedPool> CudaBackend::make_stream_ordered_pool() {
  std::uint64_t max_size_bytes = device_limit_bytes();
  if (physical_limit_bytes_ != 0 && (max_size_bytes == 0 || physical_limit_bytes_ < max_size_bytes)) {
    max_size_bytes = physical_limit_bytes_;
  }
  if (max_size_bytes != 0) {
    max_size_bytes = std::max(max_size_bytes / granularity_bytes(), std::uint64_t{1}) * granularity_bytes();
  }
  return std::make_unique<CudaMemPool>(context_, device_, max_size_bytes);
}

void CudaBackend::check_memory(const char* call, int result, std::uint64_t size_bytes,
                               Exhausted exhausted) const {
  const auto code = static_cast<CUresult>(result);
  if (code == CUDA_SUCCESS) return;
  if (code == CUDA_ERROR_OUT_OF_MEMORY) {
    const std::string where = std::string(call) + " on CUDA device " + std::to_string(device_) + ": ";
    if (exhausted == Exhausted::kAddressSpace) {
      throw OutOfMemoryError(size_bytes, 0, 0, 0,
                             where + "no virtual address space left for a reservation (" + cuda::error_text(code) +
                                 ")");
    }
    throw OutOfMemoryError(size_bytes, live_chunk_bytes(), 0, physical_limit_bytes_, where + cuda::error_text(code));
  }
  throw BackendError(call, cuda::error_text(code));
}

std::uintptr_t CudaBackend::do_reserve(std::uint64_t size_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  CUdeviceptr addr = 0;
  check_memory("cuMemAddressReserve",
               driver().cuMemAddressReserve(&addr, size_bytes, granularity_bytes(), 0, 0), size_bytes,
               Exhausted::kAddressSpace);
  try {
    reservations_.emplace(addr, size_bytes);
  } catch (...) {
    driver().cuMemAddressFree(addr, size_bytes);
    throw;
  }
  return addr;
}

std::uint64_t CudaBackend::do_device_free_bytes() {
  const cuda::ScopedContext current(as_context(context_));
  std::size_t free_bytes = 0, total_bytes = 0;
  if (driver().cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS) return UINT64_MAX;
  if (physical_limit_bytes_ == 0) return free_bytes;
  return std::min<std::uint64_t>(free_bytes, bytes_below(physical_limit_bytes_, live_chunk_bytes(device())));
}

void CudaBackend::do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  check("cuMemAddressFree", driver().cuMemAddressFree(addr, size_bytes));
  reservations_.erase(addr);
}

// Records a handle the driver just made in chunks_ (released again when the set cannot take it).
ChunkHandle CudaBackend::tracked(std::uint64_t handle) {
  try {
    chunks_.insert(handle);
  } catch (...) {
    driver().cuMemRelease(handle);
    throw;
  }
  return ChunkHandle{handle};
}

ChunkHandle CudaBackend::do_create(std::uint64_t size_bytes) {
  const std::uint64_t live_bytes = live_chunk_bytes(device_);
  if (physical_limit_bytes_ != 0 && size_bytes > physical_limit_bytes_ - live_bytes) {
    throw OutOfMemoryError(size_bytes, live_bytes, 0, physical_limit_bytes_, "cuda backend physical limit");
  }
  const cuda::ScopedContext current(as_context(context_));
  return created(size_bytes, device_);
}

ChunkHandle CudaBackend::created(std::uint64_t size_bytes, DeviceId location) {
  CUmemGenericAllocationHandle handle = 0;
  CUresult result = CUDA_ERROR_NOT_SUPPORTED;
  if (exportable_) {
    const CUmemAllocationProp prop = allocation_prop(location, true);
    result = driver().cuMemCreate(&handle, size_bytes, &prop, 0);
    // This driver cannot export the own device's memory: no IPC, no error (a peer's refusal changes nothing).
    if (result == CUDA_ERROR_NOT_SUPPORTED && location == device_) exportable_ = false;
  }
  if (!exportable_ || result == CUDA_ERROR_NOT_SUPPORTED) {
    const CUmemAllocationProp prop = allocation_prop(location, false);
    result = driver().cuMemCreate(&handle, size_bytes, &prop, 0);
  }
  check_memory("cuMemCreate", result, size_bytes);
  return tracked(handle);
}

std::uint32_t CudaBackend::device_count() const {
  int count = 0;
  if (driver().cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1) return 1;
  return static_cast<std::uint32_t>(count);
}

ChunkHandle CudaBackend::do_create_on(std::uint64_t size_bytes, DeviceId device) {
  const cuda::ScopedContext current(as_context(context_));
  CUdevice peer = 0;
  check("cuDeviceGet", driver().cuDeviceGet(&peer, device));
  int can_access = 0;
  check("cuDeviceCanAccessPeer", driver().cuDeviceCanAccessPeer(&can_access, cu_device_, peer));
  if (can_access == 0) {
    throw BackendError("cuDeviceCanAccessPeer", "CUDA device " + std::to_string(device_) +
                                                    " cannot access the memory of device " + std::to_string(device) +
                                                    " (no peer-to-peer path)");
  }
  return created(size_bytes, device);
}

void CudaBackend::do_release(ChunkHandle chunk, std::uint64_t) {
  const cuda::ScopedContext current(as_context(context_));
  check("cuMemRelease", driver().cuMemRelease(chunk.value));
  chunks_.erase(chunk.value);
  if (const auto exported = exported_fds_.find(chunk.value); exported != exported_fds_.end()) {
    close(exported->second);
    exported_fds_.erase(exported);
  }
}

void CudaBackend::do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) {
  const cuda::ScopedContext current(as_context(context_));
  const auto mapping = mappings_.emplace(addr, size_bytes).first;  // bad_alloc here leaves nothing behind
  const CUresult result = driver().cuMemMap(addr, size_bytes, 0, chunk.value, 0);
  if (result != CUDA_SUCCESS) {
    mappings_.erase(mapping);
    check_memory("cuMemMap", result, size_bytes);
  }
}

void CudaBackend::do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  check("cuMemUnmap", driver().cuMemUnmap(addr, size_bytes));
  mappings_.erase(mappings_.lower_bound(addr), mappings_.lower_bound(addr + size_bytes));
}

void CudaBackend::do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  check_memory("cuMemSetAccess", driver().cuMemSetAccess(addr, size_bytes, &access, 1), size_bytes);
}

ExportedChunk CudaBackend::do_export_chunk(ChunkHandle chunk) {
  if (const auto exported = exported_fds_.find(chunk.value); exported != exported_fds_.end()) {
    return ExportedChunk{exported->second, 0};
  }
  const auto entry = exported_fds_.emplace(chunk.value, -1).first;  // bad_alloc here leaves nothing behind
  const cuda::ScopedContext current(as_context(context_));
  int fd = -1;
  const CUresult result = driver().cuMemExportToShareableHandle(&fd, chunk.value,
                                                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  if (result != CUDA_SUCCESS) {
    exported_fds_.erase(entry);
    throw BackendError("cuMemExportToShareableHandle",
                       cuda::error_text(result) + " (was the chunk created exportable? ipc_handles:1, and a device "
                                                  "with CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)");
  }
  fcntl(fd, F_SETFD, FD_CLOEXEC);  // the chunk's fd is not for exec'd children
  entry->second = fd;
  return ExportedChunk{fd, 0};
}

void CudaBackend::do_scrub(ChunkHandle chunk, std::uint64_t size_bytes) {
  const cuda::ScopedContext current(as_context(context_));
  CUdeviceptr addr = 0;
  check("cuMemAddressReserve", driver().cuMemAddressReserve(&addr, size_bytes, granularity_bytes(), 0, 0));
  CUresult result = driver().cuMemMap(addr, size_bytes, 0, chunk.value, 0);
  if (result != CUDA_SUCCESS) {
    driver().cuMemAddressFree(addr, size_bytes);
    check_memory("cuMemMap", result, size_bytes);
  }
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  const char* call = "cuMemSetAccess";
  result = driver().cuMemSetAccess(addr, size_bytes, &access, 1);
  if (result == CUDA_SUCCESS) {
    call = "cuMemsetD8";
    result = driver().cuMemsetD8(addr, 0, size_bytes);
  }
  if (result == CUDA_SUCCESS) {
    call = "cuCtxSynchronize";
    result = driver().cuCtxSynchronize();  // the zeroes land before the chunk's fd leaves this process
  }
  driver().cuMemUnmap(addr, size_bytes);
  driver().cuMemAddressFree(addr, size_bytes);
  check_memory(call, result, size_bytes);
}

ChunkHandle CudaBackend::do_import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t) {
  if (fd_offset_bytes != 0) {
    close(fd);
    throw Error(ErrorCode::kInvalidArgument, "CudaBackend: import_chunk: a CUDA chunk's fd offset must be 0, not " +
                                                 std::to_string(fd_offset_bytes));
  }
  CUmemGenericAllocationHandle handle = 0;
  CUresult result = CUDA_SUCCESS;
  try {
    const cuda::ScopedContext current(as_context(context_));
    result = driver().cuMemImportFromShareableHandle(
        &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);  // the imported handle holds the memory
  check("cuMemImportFromShareableHandle", result);
  return tracked(handle);
}

}  // namespace gmlake
