// The CUDA driver API, loaded at run time: libcuda.so.1 is opened with dlopen the first time a CUDA backend (or
// a GPU test) asks for it, and every entry point gmlake uses is resolved with dlsym. Nothing links
// against libcuda, so the library, the `gmlake` CLI and the test programs start on machines with no GPU driver
// (CI), and a process that already runs PyTorch shares the driver PyTorch loaded (dlopen of the same soname
// returns the same library).
//
// Only cuda.h's declarations are used (for the function types): each entry point is looked up by the exact
// symbol cuda.h declares for it after its macros (cuMemcpyHtoD -> "cuMemcpyHtoD_v2"), which has the signature
// cuda.h declares, and legacy default-stream semantics. (Looking names up with cuGetProcAddress at the header's
// CUDA_VERSION does not guarantee that: on CUDA 13 it returned cuCtxSynchronize_v2(CUcontext) for
// "cuCtxSynchronize", seen on the H200 machine as CUDA_ERROR_CONTEXT_IS_DESTROYED.)
//
// Also: the error text of a CUresult, and ScopedContext, which makes a context current for the length of a
// scope and restores what was current before.
//
// Thread safety: driver() may be called from any thread; it loads and initializes once (std::call_once
// semantics of a function-local static). The table it returns is immutable.
#pragma once

#include <cuda.h>

#include <string>

namespace gmlake::cuda {

// One function pointer per driver entry point gmlake uses, named as in cuda.h (the names are macros there for
// some functions: the member then carries the versioned name, consistently with its type).
struct DriverApi {
#define GMLAKE_CUDA_DRIVER_ENTRY_POINTS(X) \
  X(cuGetErrorName)                         \
  X(cuGetErrorString)                       \
  X(cuInit)                                 \
  X(cuDriverGetVersion)                     \
  X(cuDeviceGet)                            \
  X(cuDeviceGetCount)                       \
  X(cuDeviceGetAttribute)                   \
  X(cuDeviceCanAccessPeer)                  \
  X(cuDeviceTotalMem)                       \
  X(cuDevicePrimaryCtxRetain)               \
  X(cuDevicePrimaryCtxRelease)              \
  X(cuCtxGetCurrent)                        \
  X(cuCtxPushCurrent)                       \
  X(cuCtxPopCurrent)                        \
  X(cuCtxSynchronize)                       \
  X(cuMemGetInfo)                           \
  X(cuMemGetAllocationGranularity)          \
  X(cuMemCreate)                            \
  X(cuMemRelease)                           \
  X(cuMemAddressReserve)                    \
  X(cuMemAddressFree)                       \
  X(cuMemMap)                               \
  X(cuMemUnmap)                             \
  X(cuMemSetAccess)                         \
  X(cuMemExportToShareableHandle)           \
  X(cuMemImportFromShareableHandle)         \
  X(cuMemsetD8)                             \
  X(cuMemsetD32)                            \
  X(cuMemcpyHtoD)                           \
  X(cuMemcpyDtoH)                           \
  X(cuMemcpyDtoD)                           \
  X(cuMemAlloc)                             \
  X(cuMemFree)                              \
  X(cuEventCreate)                          \
  X(cuEventRecord)                          \
  X(cuEventQuery)                           \
  X(cuEventSynchronize)                     \
  X(cuEventDestroy)                         \
  X(cuStreamCreate)                         \
  X(cuStreamDestroy)                        \
  X(cuMemsetD32Async)                       \
  X(cuStreamSynchronize)                    \
  X(cuStreamQuery)                          \
  X(cuMemPoolCreate)                        \
  X(cuMemPoolDestroy)                       \
  X(cuMemPoolSetAttribute)                  \
  X(cuMemPoolGetAttribute)                  \
  X(cuMemPoolTrimTo)                        \
  X(cuMemAllocFromPoolAsync)                \
  X(cuMemFreeAsync)
#define GMLAKE_CUDA_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  GMLAKE_CUDA_DRIVER_ENTRY_POINTS(GMLAKE_CUDA_DRIVER_MEMBER)
#undef GMLAKE_CUDA_DRIVER_MEMBER
};

// The driver, loaded and initialized (cuInit(0)) once per process. Throws BackendError:
//   ("cuInit", "libcuda.so.1 not found ...")       no driver library on this machine (CI, a CPU-only host)
//   ("dlsym", "<symbol>: ...")                     a driver too old for an entry point gmlake needs
//   ("cuInit", "CUDA_ERROR_NO_DEVICE ...")           cuInit failed (no device, stub library, ...)
// A failure is remembered: every later call throws the same error again without retrying.
const DriverApi& driver();

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)": the driver's name and description of `result`.
std::string error_text(CUresult result);

// Throws BackendError(call, error_text(result)) unless result is CUDA_SUCCESS.
void check(const char* call, CUresult result);

// Makes `context` current on this thread for the life of the object, unless it already is; the destructor
// restores the context that was current before (pops what it pushed). Throws BackendError("cuCtxPushCurrent",
// ...) when the push fails. Cheap when `context` is already current (one cuCtxGetCurrent).
class ScopedContext {
 public:
  explicit ScopedContext(CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;

 private:
  bool pushed_ = false;
};

}  // namespace gmlake::cuda
