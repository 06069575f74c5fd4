// The C API's errors raised as PyTorch's: out of memory as torch.OutOfMemoryError (PyTorch's contract for an
// allocator), every other status as a RuntimeError naming the status as the library names it
// (gmlake_status_name: the one list of statuses, include/gmlake/gmlake.h) and its message.
// Part of the extension's one translation unit (torch_allocator.cpp includes it).
#pragma once

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/Exception.h>

#include <string>

#include "c_api_table.h"

namespace gmlake_torch {

// Raises the C API's last error (of the call `what` names) as PyTorch's error of that kind.
[[noreturn]] inline void raise_last_error(const char* what) {
  const int code = g_api.gmlake_last_error_code();
  const std::string message = g_api.gmlake_last_error();
  if (code == GMLAKE_ERROR_OUT_OF_MEMORY) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "CUDA out of memory (gmlake, ", what, "): ", message);
  }
  TORCH_CHECK(false, "gmlake ", what, " failed (", g_api.gmlake_status_name(code), "): ", message);
}

inline void check(int status, const char* what) {
  if (status != GMLAKE_OK) raise_last_error(what);
}

}  // namespace gmlake_torch
