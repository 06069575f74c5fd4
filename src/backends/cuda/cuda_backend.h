// The CUDA backend: the backend contract (backend.h) on the CUDA driver's virtual memory management API, one
// driver call per backend call:
//
//   reserve       cuMemAddressReserve(size, alignment = granularity_bytes(), no address hint)
//   address_free  cuMemAddressFree
//   create        cuMemCreate: pinned device memory on this backend's device (CU_MEM_ALLOCATION_TYPE_PINNED,
//                 CU_MEM_LOCATION_TYPE_DEVICE), exportable as a POSIX file descriptor when asked (for IPC)
//   release       cuMemRelease
//   map           cuMemMap(offset 0, the whole chunk)
//   unmap         cuMemUnmap over the whole range (one call also for a run of several mappings)
//   set_access    cuMemSetAccess over the whole range, read/write for this backend's device (one descriptor)
//
// The driver is loaded at run time (src/backends/cuda/cuda_driver.h: dlopen of libcuda.so.1, cuInit(0) once per
// process), so programs that contain this backend start on machines without a GPU driver; constructing one
// there throws BackendError("cuInit", "libcuda.so.1 not found ...").
//
// Context: the backend retains its device's primary context (cuDevicePrimaryCtxRetain: the context the CUDA
// runtime and PyTorch use) for its whole life, and makes it current around each driver call (pushed only when
// another context, or none, is current on the calling thread; popped afterwards), so the caller's current
// context is never changed and any thread may make the calls. Addresses it returns are device addresses in
// that context (unified addressing: valid in every context of the process).
//
// What is safe when: the backend's calls return when the driver has done them on the host side; none waits for
// the device. Unmapping or releasing memory that kernels or copies still use is undefined behaviour (the
// driver does not synchronize): the caller must know the device is done with it (stream order, events, or a
// synchronize). Map and set_access of a fresh range are safe at any time. host_accessible() is false: the CPU
// must not dereference the addresses (copy with cuMemcpy* instead).
//
// Errors: a failing driver call throws BackendError(call, "<CUDA_ERROR_NAME> (<description>)"), call being the
// driver function's name ("cuMemMap"); CUDA_ERROR_OUT_OF_MEMORY from cuMemCreate, cuMemMap or cuMemSetAccess
// throws OutOfMemoryError instead (requested = the call's size, reserved = live_chunk_bytes(), allocated = 0,
// cap = physical_limit_bytes()), and from cuMemAddressReserve (no virtual address space left) OutOfMemoryError with
// reserved and cap 0, so that the engine's retire-and-retry runs (ArenaSet). A failed call leaves nothing behind
// that the driver lets us undo: cuMemCreate, cuMemAddressReserve and cuMemMap create nothing when they fail; a
// failed cuMemRelease, cuMemAddressFree or cuMemUnmap leaves the chunk, reservation or mappings live (and the base
// class still records them so). A cuMemUnmap over several mappings that fails part way, or a cuMemSetAccess that
// fails part way, may have unmapped or given access to part of the range: the driver gives no way back. The base
// class then still records the mappings as mapped (unmap) or as without access (set_access); a range recorded
// without access is never handed out, and is given access again before use, so this errs on the safe side.
//
// Thread safety: none beyond the driver's, like every Backend (one pool, one lock).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string_view>

#include "gmlake/backend.h"
#include "gmlake/units.h"

namespace gmlake {

struct CudaBackendOptions {
  int device = 0;                          // the device ordinal (cuDeviceGet)
  std::uint64_t granularity_bytes = kPageBytes;  // granularity_bytes(): a power-of-two multiple of the
                                                 // device's recommended allocation granularity (2 MiB on
                                                 // H100/H200)
  bool exportable = false;                 // chunks exportable as POSIX file descriptors (IPC, ipc.h) when the
                                           // device supports them; else (attribute 0, or cuMemCreate answers
                                           // CUDA_ERROR_NOT_SUPPORTED) chunks are made without, no error
  std::uint64_t physical_limit_bytes = 0;  // the most chunk bytes live at once, 0 for no limit but the device's
};

class CudaBackend final : public Backend {
 public:
  // Loads the driver if needed, checks the device (it must support virtual memory management, and POSIX
  // file descriptor handles when exportable), and retains its primary context. Throws:
  //   BackendError("cuInit", ...)                 no driver (libcuda.so.1 not found) or cuInit failed
  //   BackendError("cuDeviceGet", ...)            no such device ordinal
  //   BackendError("cuDeviceGetAttribute", ...)   the device lacks virtual memory management
  //   Error(kInvalidArgument)                     granularity_bytes not a power-of-two multiple of the device's
  //                                               recommended granularity
  explicit CudaBackend(const CudaBackendOptions& options = {});
  // Unmaps, releases and frees everything still live (mappings, chunks, reservations), then releases the
  // primary context. Never throws; driver failures here are ignored.
  ~CudaBackend() override;

  std::string_view name() const override { return "cuda"; }
  bool host_accessible() const override { return false; }
  bool imports_chunks() const override { return true; }
  DeviceId device() const override { return device_; }
  // cuDeviceGetCount (1 when the driver cannot say): create(size, peer) accepts ordinals below it.
  std::uint32_t device_count() const override;
  // What cuMemGetAllocationGranularity recommends for this device; granularity_bytes() is a multiple of it.
  std::uint64_t device_granularity_bytes() const { return device_granularity_bytes_; }
  // True while chunks are created exportable (options.exportable, and the device and driver allow it).
  bool exportable() const { return exportable_; }
  // The retained primary context (a CUcontext), for other CUDA helpers of this device (CudaStreamEvents).
  void* context() const { return context_; }
  // The limit create() enforces on live_chunk_bytes() before asking the driver, 0 for none.
  std::uint64_t physical_limit_bytes() const { return physical_limit_bytes_; }
  // A CudaMemPool (cuda_mem_pool.h) of this device in the retained primary context, at most
  // min(device_limit_bytes(), physical_limit_bytes()) (the non-zero ones) rounded down to granularity_bytes()
  // (one granule at least); 0: the device's memory. It must be destroyed before this backend. Throws as
  // CudaMemPool's constructor.
  std::unique_ptr<StreamOrderedPool> make_stream_ordered_pool() override;

 protected:
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override;
  void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) override;
  ChunkHandle do_create(std::uint64_t size_bytes) override;
  // The lake: cuMemCreate with location id = `device` (a peer GPU), exportable as do_create's chunks; do_map and
  // do_set_access then map it and grant this backend's device access over the peer link. Throws
  // BackendError("cuDeviceCanAccessPeer", ...) when this device cannot reach the peer's memory (no P2P path),
  // OutOfMemoryError when the peer is full. Not counted against physical_limit_bytes (that bounds this device).
  ChunkHandle do_create_on(std::uint64_t size_bytes, DeviceId device) override;
  void do_release(ChunkHandle chunk, std::uint64_t size_bytes) override;
  void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) override;
  void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) override;
  void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) override;
  // cuMemGetInfo's free bytes of this device (bounded by physical_limit_bytes when set); UINT64_MAX when the
  // driver fails to answer.
  std::uint64_t do_device_free_bytes() override;
  // IPC: cuMemExportToShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) once per chunk (the fd is kept,
  // FD_CLOEXEC, and closed when the chunk is released); cuMemImportFromShareableHandle, then the fd is closed
  // (the imported handle holds the memory). CUDA driver API, "Virtual Memory Management":
  // https://docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__VA.html
  ExportedChunk do_export_chunk(ChunkHandle chunk) override;
  ChunkHandle do_import_chunk(int fd, std::uint64_t fd_offset_bytes, std::uint64_t size_bytes) override;
  // The chunk mapped at a scratch reservation with access, cuMemsetD8(0) over it, cuCtxSynchronize, then
  // unmapped and the reservation freed: five driver calls plus the memset at device bandwidth (docs/reliability.md
  // has the cost). These calls bypass the base class's tables (the chunk stays unmapped there) and counters().
  void do_scrub(ChunkHandle chunk, std::uint64_t size_bytes) override;

 private:
  struct OpenedDevice;  // the device checked and its primary context retained, before the base class exists
  static OpenedDevice open_device(const CudaBackendOptions& options);
  CudaBackend(const CudaBackendOptions& options, OpenedDevice&& opened);
  // What a CUDA_ERROR_OUT_OF_MEMORY ran out of: device memory (cuMemCreate, cuMemMap, cuMemSetAccess), or the
  // process's virtual address space (cuMemAddressReserve: about 128 TiB a process on an H200, va_limit_h200.json).
  enum class Exhausted : std::uint8_t { kMemory, kAddressSpace };
  // Throws OutOfMemoryError for CUDA_ERROR_OUT_OF_MEMORY (requested = size_bytes; for kMemory reserved =
  // live_chunk_bytes() and cap = physical_limit_bytes(), for kAddressSpace both 0, the message naming the address
  // space), BackendError for any other failure of `call`.
  void check_memory(const char* call, int result, std::uint64_t size_bytes,
                    Exhausted exhausted = Exhausted::kMemory) const;
  // cuMemCreate of `size_bytes` on device `location` (this one or a peer), in the current context: exportable
  // (POSIX fd) while exportable_, plain when not or when the driver refuses export (CUDA_ERROR_NOT_SUPPORTED;
  // for this device's memory that turns exportable_ off for good); then tracked. Throws as check_memory.
  ChunkHandle created(std::uint64_t size_bytes, DeviceId location);
  // Records a handle (CUmemGenericAllocationHandle) the driver just made; releases it when that fails.
  ChunkHandle tracked(std::uint64_t handle);

  int device_;
  int cu_device_;  // the CUdevice of device_
  std::uint64_t device_granularity_bytes_;
  bool exportable_;
  std::uint64_t physical_limit_bytes_;
  void* context_ = nullptr;  // the retained primary context (a CUcontext: cuda.h stays out of this header)
  // What the destructor must give back: the base class keeps the same tables, privately.
  std::map<std::uintptr_t, std::uint64_t> reservations_;  // start -> size
  std::map<std::uintptr_t, std::uint64_t> mappings_;      // start -> size
  std::set<std::uint64_t> chunks_;                        // live handles
  std::map<std::uint64_t, int> exported_fds_;             // handle -> its exported fd, closed at release
};

}  // namespace gmlake
