// Loading the CUDA driver: dlopen, dlsym for every entry point, cuInit(0); once per process.
#include "cuda_driver.h"

#include <dlfcn.h>

#include <optional>
#include <string>

#include "gmlake/error.h"

namespace gmlake::cuda {
namespace {

constexpr const char* kDriverLibrary = "libcuda.so.1";

// The outcome of loading: the table, or the error every call to driver() throws.
struct LoadedDriver {
  DriverApi api;
  std::optional<BackendError> error;
};

// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)", or the number when the driver does not know it.
std::string describe(const DriverApi& api, CUresult result) {
  const char* name = nullptr;
  const char* description = nullptr;
  std::string text = api.cuGetErrorName(result, &name) == CUDA_SUCCESS && name
                         ? std::string(name)
                         : "CUresult " + std::to_string(static_cast<int>(result));
  if (api.cuGetErrorString(result, &description) == CUDA_SUCCESS && description) {
    text += std::string(" (") + description + ")";
  }
  return text;
}

#define GMLAKE_CUDA_STRINGIFY_EXPANDED(x) GMLAKE_CUDA_STRINGIFY(x)
#define GMLAKE_CUDA_STRINGIFY(x) #x

// Resolves every entry point of `api` with dlsym, by the exact symbol cuda.h declares for it (its name after
// cuda.h's macros: "cuMemcpyDtoH_v2"), so each pointer has the ABI its type says. (cuGetProcAddress at the
// header's CUDA_VERSION is not that: for some names it returns a newer ABI, e.g. cuCtxSynchronize_v2(CUcontext)
// for "cuCtxSynchronize" on CUDA 13.) Returns "<symbol>: <why>" for the first one missing, nullopt when all
// were found.
std::optional<std::string> resolve_all(void* library, DriverApi& api) {
  std::optional<std::string> missing;
  const auto resolve = [&](const char* symbol, void** slot) {
    *slot = dlsym(library, symbol);
    if (*slot != nullptr) return true;
    missing = std::string(symbol) + ": not found in " + kDriverLibrary + " (driver too old?)";
    return false;
  };
#define GMLAKE_CUDA_DRIVER_RESOLVE(name) \
  if (!resolve(GMLAKE_CUDA_STRINGIFY_EXPANDED(name), reinterpret_cast<void**>(&api.name))) return missing;
  GMLAKE_CUDA_DRIVER_ENTRY_POINTS(GMLAKE_CUDA_DRIVER_RESOLVE)
#undef GMLAKE_CUDA_DRIVER_RESOLVE
  return std::nullopt;
}

LoadedDriver load() {
  LoadedDriver loaded;
  // Never closed: the driver stays loaded for the life of the process, as a linked libcuda would.
  void* library = dlopen(kDriverLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    loaded.error.emplace("cuInit", std::string(kDriverLibrary) + " not found (no NVIDIA driver on this machine?): " +
                                       (why ? why : "dlopen failed"));
    return loaded;
  }
  if (const std::optional<std::string> missing = resolve_all(library, loaded.api)) {
    loaded.error.emplace("dlsym", *missing);
    return loaded;
  }
  const CUresult result = loaded.api.cuInit(0);
  if (result != CUDA_SUCCESS) loaded.error.emplace("cuInit", describe(loaded.api, result));
  return loaded;
}

}  // namespace

const DriverApi& driver() {
  static const LoadedDriver loaded = load();
  if (loaded.error) throw *loaded.error;
  return loaded.api;
}

std::string error_text(CUresult result) { return describe(driver(), result); }

void check(const char* call, CUresult result) {
  if (result != CUDA_SUCCESS) throw BackendError(call, error_text(result));
}

ScopedContext::ScopedContext(CUcontext context) {
  const DriverApi& api = driver();
  CUcontext current = nullptr;
  check("cuCtxGetCurrent", api.cuCtxGetCurrent(&current));
  if (current == context) return;
  check("cuCtxPushCurrent", api.cuCtxPushCurrent(context));
  pushed_ = true;
}

ScopedContext::~ScopedContext() {
  if (!pushed_) return;
  CUcontext popped = nullptr;
  driver().cuCtxPopCurrent(&popped);  // cannot fail: this object pushed it on this thread
}

}  // namespace gmlake::cuda
