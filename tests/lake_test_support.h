// Helpers for the lake's two-process tests (lake_lender_test.cpp, lake_borrower_test.cpp): unique socket
// addresses, a chunk mapped for the CPU on the host backend, and a lender that serves one borrower.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "gmlake/backend.h"
#include "gmlake/lake.h"

namespace gmlake::test {

// An abstract-namespace address no other test or run uses.
inline LakeAddress lake_address(const std::string& name) {
  return "@gmlake-lake-test-" + std::to_string(::getpid()) + "-" + name;
}

// `chunk` of `size_bytes` reserved, mapped and given access in `backend` (host: CPU-readable).
struct MappedChunk {
  Backend& backend;
  std::uintptr_t addr;
  std::uint64_t size_bytes;
  MappedChunk(Backend& b, ChunkHandle chunk, std::uint64_t size) : backend(b), addr(b.reserve(size)), size_bytes(size) {
    b.map(addr, size, chunk);
    b.set_access(addr, size);
  }
  unsigned char* bytes() const { return reinterpret_cast<unsigned char*>(addr); }
  void fill(unsigned char value) const { std::memset(bytes(), value, size_bytes); }
  // True when every byte is `value`.
  bool holds(unsigned char value) const {
    for (std::uint64_t i = 0; i < size_bytes; i += 4096) {
      if (bytes()[i] != value || bytes()[size_bytes - 1] != value) return false;
    }
    return true;
  }
  void unmap() const {
    backend.unmap(addr, size_bytes);
    backend.address_free(addr, size_bytes);
  }
};

// In a forked child: serves until one borrower has connected and gone again. Returns 0 when every chunk came
// back to `backend`, 10 otherwise.
inline int serve_one_borrower(LakeLender& lender, const Backend& backend) {
  while (lender.borrowers() == 0) lender.poll(-1, 0);
  while (lender.borrowers() != 0) lender.poll(-1, 0);
  return backend.live_chunks() == 0 && lender.lent_bytes() == 0 ? 0 : 10;
}

}  // namespace gmlake::test
