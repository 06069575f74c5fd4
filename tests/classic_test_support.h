// Helpers shared by the classic pools' tests.
#pragma once

#include <unistd.h>

#include <cstdint>

namespace gmlake::classic::testing {

inline std::uint64_t page_bytes() { return static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE)); }

inline std::uintptr_t addr(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

}  // namespace gmlake::classic::testing
