// The sim backend: a bump allocator of fake addresses and handles, and a physical byte count checked against
// a limit. Map, unmap and set_access do nothing here: the base class keeps the tables.
#include "gmlake/sim_backend.h"

#include <cstdint>

#include "gmlake/error.h"

namespace gmlake {

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes)
    : Backend(granularity_bytes, CallTiming::kUntimed),  // its calls are arithmetic: the clock would cost more
      physical_limit_bytes_(physical_limit_bytes),
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)) {}

std::uintptr_t SimBackend::do_reserve(std::uint64_t size_bytes) {
  const std::uintptr_t addr = next_addr_;
  if (addr == 0 || size_bytes > UINTPTR_MAX - addr) {
    throw BackendError("reserve", "the sim backend's address space is exhausted");
  }
  next_addr_ = addr + size_bytes;  // sizes are multiples of the granularity, so it stays aligned
  return addr;
}

void SimBackend::do_address_free(std::uintptr_t, std::uint64_t) {}

ChunkHandle SimBackend::do_create(std::uint64_t size_bytes) {
  const std::uint64_t live_bytes = live_chunk_bytes();
  if (physical_limit_bytes_ != 0 && size_bytes > physical_limit_bytes_ - live_bytes) {
    throw OutOfMemoryError(size_bytes, live_bytes, 0, physical_limit_bytes_, "sim backend physical limit");
  }
  return ChunkHandle{next_handle_++};
}

void SimBackend::do_release(ChunkHandle, std::uint64_t) {}
void SimBackend::do_map(std::uintptr_t, std::uint64_t, ChunkHandle) {}
void SimBackend::do_unmap(std::uintptr_t, std::uint64_t) {}
void SimBackend::do_set_access(std::uintptr_t, std::uint64_t) {}

}  // namespace gmlake
