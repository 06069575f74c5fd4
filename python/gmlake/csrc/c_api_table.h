// The C API of libgmlake_c.so (include/gmlake/gmlake.h) as the extension calls it: every entry point resolved by
// name in the library gmlake.torch loaded (dlopen of the same path gives the same instance, so Python's ctypes
// binding and the extension share one set of pools), and its errors raised as PyTorch's.
// Part of the extension's one translation unit (torch_allocator.cpp includes it).
#pragma once

#include <dlfcn.h>

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>

#include <string>

#include "gmlake/gmlake.h"

namespace gmlake_torch {

struct CApi {
  decltype(&gmlake_malloc) malloc = nullptr;
  decltype(&gmlake_free) free = nullptr;
  decltype(&gmlake_record_stream) record_stream = nullptr;
  decltype(&gmlake_empty_cache) empty_cache = nullptr;
  decltype(&gmlake_get_stats) get_stats = nullptr;
  decltype(&gmlake_reset_peak_stats) reset_peak_stats = nullptr;
  decltype(&gmlake_set_cap_bytes) set_cap_bytes = nullptr;
  decltype(&gmlake_last_error_code) last_error_code = nullptr;
  decltype(&gmlake_last_error) last_error = nullptr;
  // Memory history and segments (memory_history.h).
  decltype(&gmlake_set_tracing) set_tracing = nullptr;
  decltype(&gmlake_drain_trace) drain_trace = nullptr;
  decltype(&gmlake_get_segments) get_segments = nullptr;
  // Private pools (private_pools.h).
  decltype(&gmlake_pool_create) pool_create = nullptr;
  decltype(&gmlake_pool_release) pool_release = nullptr;
  decltype(&gmlake_pool_use_count) pool_use_count = nullptr;
  decltype(&gmlake_pool_malloc) pool_malloc = nullptr;
  decltype(&gmlake_pool_empty_cache) pool_empty_cache = nullptr;
  decltype(&gmlake_pool_blocks) pool_blocks = nullptr;
  decltype(&gmlake_pool_restore) pool_restore = nullptr;
};
inline CApi g_api;

template <typename F>
void resolve(void* library, const char* name, F* out) {
  void* symbol = dlsym(library, name);
  TORCH_CHECK(symbol != nullptr, "gmlake: the loaded libgmlake_c.so has no ", name,
              " (built from an older gmlake? rebuild it)");
  *out = reinterpret_cast<F>(symbol);
}

inline void load_api(const std::string& library_path) {
  void* library = dlopen(library_path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  TORCH_CHECK(library != nullptr, "gmlake: cannot load ", library_path, ": ", dlerror());
  resolve(library, "gmlake_malloc", &g_api.malloc);
  resolve(library, "gmlake_free", &g_api.free);
  resolve(library, "gmlake_record_stream", &g_api.record_stream);
  resolve(library, "gmlake_empty_cache", &g_api.empty_cache);
  resolve(library, "gmlake_get_stats", &g_api.get_stats);
  resolve(library, "gmlake_reset_peak_stats", &g_api.reset_peak_stats);
  resolve(library, "gmlake_set_cap_bytes", &g_api.set_cap_bytes);
  resolve(library, "gmlake_last_error_code", &g_api.last_error_code);
  resolve(library, "gmlake_last_error", &g_api.last_error);
  resolve(library, "gmlake_set_tracing", &g_api.set_tracing);
  resolve(library, "gmlake_drain_trace", &g_api.drain_trace);
  resolve(library, "gmlake_get_segments", &g_api.get_segments);
  resolve(library, "gmlake_pool_create", &g_api.pool_create);
  resolve(library, "gmlake_pool_release", &g_api.pool_release);
  resolve(library, "gmlake_pool_use_count", &g_api.pool_use_count);
  resolve(library, "gmlake_pool_malloc", &g_api.pool_malloc);
  resolve(library, "gmlake_pool_empty_cache", &g_api.pool_empty_cache);
  resolve(library, "gmlake_pool_blocks", &g_api.pool_blocks);
  resolve(library, "gmlake_pool_restore", &g_api.pool_restore);
}

// Raises the C API's last error as PyTorch's error of that kind (OutOfMemoryError for out of memory).
[[noreturn]] inline void raise_last_error(const char* what) {
  const int code = g_api.last_error_code();
  const std::string message = g_api.last_error();
  if (code == GMLAKE_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (gmlake, ", what, "): ", message);
  }
  TORCH_CHECK(false, "gmlake ", what, " failed: ", message);
}

inline void check(int status, const char* what) {
  if (status != GMLAKE_OK) raise_last_error(what);
}

}  // namespace gmlake_torch
