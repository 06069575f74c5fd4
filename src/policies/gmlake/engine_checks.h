// Small helpers shared by the gmlake engine's files: an address in hex for messages, and the exception an
// invariant check throws (std::logic_error: a bug in gmlake, never a user error).
#pragma once

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace gmlake::engine {

inline std::string hex(std::uintptr_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

[[noreturn]] inline void broken(const std::string& what) {
  throw std::logic_error("gmlake invariant broken: " + what);
}

}  // namespace gmlake::engine
