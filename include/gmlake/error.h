// The errors gmlake raises. Every failure is one of these types, so a caller can tell an out-of-memory it
// may recover from (free something, lower the batch) from a programming error (double free, bad config).
//
// After any of these is thrown the object that threw is unchanged and usable (strong guarantee), unless its
// own documentation says otherwise.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gmlake {

enum class ErrorCode {
  kOutOfMemory,      // no physical memory within the cap or on the device
  kInvalidPointer,   // free of a pointer that is not a live block: never returned, already freed, interior
  kInvalidArgument,  // a size, alignment or id outside what the function accepts
  kConfig,           // unknown configuration key or bad value
  kBackend,          // the OS or driver call behind a backend failed
  kTrace,            // a trace file that cannot be read or is not a trace
};

const char* to_string(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Raised when an allocation cannot be served: the figures are the allocator's state at the failure, with
// PyTorch's meanings (reserved = physical memory held, allocated = bytes in live blocks).
class OutOfMemoryError : public Error {
 public:
  OutOfMemoryError(std::uint64_t requested_bytes, std::uint64_t reserved_bytes, std::uint64_t allocated_bytes,
                   std::uint64_t cap_bytes, const std::string& reason);
  std::uint64_t requested_bytes() const { return requested_bytes_; }
  std::uint64_t reserved_bytes() const { return reserved_bytes_; }
  std::uint64_t allocated_bytes() const { return allocated_bytes_; }
  std::uint64_t cap_bytes() const { return cap_bytes_; }  // 0 when no cap is set

 private:
  std::uint64_t requested_bytes_, reserved_bytes_, allocated_bytes_, cap_bytes_;
};

// A backend call (an OS call for `host`, a CUDA driver call for `cuda`) failed. `call` names it
// ("mmap", "cuMemMap"), `detail` carries the OS/driver error name.
class BackendError : public Error {
 public:
  BackendError(const std::string& call, const std::string& detail)
      : Error(ErrorCode::kBackend, call + " failed: " + detail), call_(call) {}
  const std::string& call() const { return call_; }

 private:
  std::string call_;
};

}  // namespace gmlake
