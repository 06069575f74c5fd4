#include "gmlake/error.h"

#include <string>

namespace gmlake {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOutOfMemory: return "out of memory";
    case ErrorCode::kInvalidPointer: return "invalid pointer";
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kConfig: return "config";
    case ErrorCode::kBackend: return "backend";
    case ErrorCode::kTrace: return "trace";
  }
  return "unknown";
}

static std::string oom_message(std::uint64_t requested, std::uint64_t reserved, std::uint64_t allocated,
                               std::uint64_t cap, const std::string& reason) {
  std::string m = "gmlake: out of memory: tried to allocate " + std::to_string(requested) + " bytes; " +
                  std::to_string(reserved) + " bytes reserved, " + std::to_string(allocated) + " bytes allocated";
  m += cap ? ", cap " + std::to_string(cap) + " bytes" : ", no cap";
  if (!reason.empty()) m += " (" + reason + ")";
  return m;
}

OutOfMemoryError::OutOfMemoryError(std::uint64_t requested_bytes, std::uint64_t reserved_bytes,
                                   std::uint64_t allocated_bytes, std::uint64_t cap_bytes, const std::string& reason)
    : Error(ErrorCode::kOutOfMemory, oom_message(requested_bytes, reserved_bytes, allocated_bytes, cap_bytes, reason)),
      requested_bytes_(requested_bytes),
      reserved_bytes_(reserved_bytes),
      allocated_bytes_(allocated_bytes),
      cap_bytes_(cap_bytes) {}

}  // namespace gmlake
