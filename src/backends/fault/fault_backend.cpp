// FaultBackend: counts each call kind, throws where a fault is armed, forwards everything else to the inner
// backend's public calls (so the inner backend checks the contract again and keeps its own tables).
#include "fault_backend.h"

#include <string>

#include "gmlake/error.h"

namespace gmlake {

FaultBackend::FaultBackend(Backend& inner)
    : Backend(inner.granularity_bytes()), inner_(inner), name_("fault(" + std::string(inner.name()) + ")") {}

void FaultBackend::arm(const Fault& fault) {
  if (fault.call == BackendCall::kCount || fault.nth == 0 || fault.count == 0) {
    throw Error(ErrorCode::kInvalidArgument, "FaultBackend::arm: nth and count must be >= 1 and the call a kind");
  }
  const std::uint64_t seen = seen_[index(fault.call)];
  Armed& armed = armed_[index(fault.call)];
  armed.first_fail = seen + fault.nth;
  armed.last_fail = armed.first_fail + (fault.count - 1);
  armed.error = fault.error;
}

void FaultBackend::disarm_all() { armed_ = {}; }

void FaultBackend::enter(BackendCall kind, std::uint64_t size_bytes) {
  const std::uint64_t call = ++seen_[index(kind)];
  const Armed& armed = armed_[index(kind)];
  if (armed.first_fail == 0 || call < armed.first_fail || call > armed.last_fail) return;
  ++injected_;
  if (armed.error == FaultError::kOutOfMemory) {
    throw OutOfMemoryError(size_bytes, inner_.live_chunk_bytes(), 0, 0,
                           "injected fault: " + std::string(to_string(kind)) + " out of memory");
  }
  throw BackendError("fault:" + std::string(to_string(kind)), "injected fault");
}

std::uintptr_t FaultBackend::do_reserve(std::uint64_t size_bytes) {
  enter(BackendCall::kReserve, size_bytes);
  return inner_.reserve(size_bytes);
}

void FaultBackend::do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) {
  enter(BackendCall::kAddressFree, size_bytes);
  inner_.address_free(addr, size_bytes);
}

ChunkHandle FaultBackend::do_create(std::uint64_t size_bytes) {
  enter(BackendCall::kCreate, size_bytes);
  return inner_.create(size_bytes);
}

ChunkHandle FaultBackend::do_create_on(std::uint64_t size_bytes, DeviceId device) {
  enter(BackendCall::kCreate, size_bytes);
  return inner_.create(size_bytes, device);
}

void FaultBackend::do_release(ChunkHandle chunk, std::uint64_t size_bytes) {
  enter(BackendCall::kRelease, size_bytes);
  inner_.release(chunk);
}

void FaultBackend::do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) {
  enter(BackendCall::kMap, size_bytes);
  inner_.map(addr, size_bytes, chunk);
}

void FaultBackend::do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) {
  enter(BackendCall::kUnmap, size_bytes);
  inner_.unmap(addr, size_bytes);
}

void FaultBackend::do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) {
  enter(BackendCall::kSetAccess, size_bytes);
  inner_.set_access(addr, size_bytes);
}

}  // namespace gmlake
