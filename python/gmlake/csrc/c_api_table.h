// The C API of libgmlake_c.so (include/gmlake/gmlake.h) as the extension calls it: every entry point of the
// GMLAKE_C_API list, resolved by name in the library gmlake.torch loaded (dlopen of the same path gives the same
// instance, so Python's ctypes binding and the extension share one set of pools). Members are named as the
// functions: g_api.gmlake_malloc(...). No PyTorch here (c_api_errors.h raises the C API's errors as PyTorch's),
// so that the C++ tests compile this header and resolve the table against the library they build
// (tests/c_api_table_test.cpp).
// Part of the extension's one translation unit (torch_allocator.cpp includes it).
#pragma once

#include <dlfcn.h>

#include <string>

#include "gmlake/gmlake.h"

namespace gmlake_torch {

struct CApi {
#define GMLAKE_TORCH_API_MEMBER(name) decltype(&::name) name = nullptr;
  GMLAKE_C_API(GMLAKE_TORCH_API_MEMBER)
#undef GMLAKE_TORCH_API_MEMBER
};
inline CApi g_api;

// Loads `library_path` (RTLD_GLOBAL) and resolves every entry point of GMLAKE_C_API into *api. Returns "" on
// success, else what failed (the library cannot be loaded, or lacks an entry point: built from an older gmlake);
// *api is then unchanged.
inline std::string load_api(const std::string& library_path, CApi* api) {
  void* library = dlopen(library_path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (library == nullptr) return "gmlake: cannot load " + library_path + ": " + dlerror();
  CApi resolved;
#define GMLAKE_TORCH_API_RESOLVE(name)                                                                       \
  resolved.name = reinterpret_cast<decltype(&::name)>(dlsym(library, #name));                                \
  if (resolved.name == nullptr) {                                                                            \
    return "gmlake: the loaded " + library_path + " has no " #name " (built from an older gmlake? rebuild it)"; \
  }
  GMLAKE_C_API(GMLAKE_TORCH_API_RESOLVE)
#undef GMLAKE_TORCH_API_RESOLVE
  *api = resolved;
  return "";
}

}  // namespace gmlake_torch
