// Helpers shared by the classic pools' tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <functional>

#include "gmlake/error.h"

namespace gmlake::pools::testing {

inline std::uint64_t page_bytes() { return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)); }

inline std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

// The code of the gmlake::Error that `call` throws; fails the test (and returns kTrace) when it throws none.
inline ErrorCode error_code_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.code();
  }
  ADD_FAILURE() << "expected a gmlake::Error";
  return ErrorCode::kTrace;
}

}  // namespace gmlake::pools::testing
