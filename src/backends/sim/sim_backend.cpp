// The sim backend: a bump allocator of fake addresses and handles, and a physical byte count checked against
// a limit. Map, unmap and set_access do nothing here: the base class keeps the tables.
#include "gmlake/sim_backend.h"

#include <cstdint>

#include "vmm_cost_model.h"
#include "gmlake/error.h"

namespace gmlake {

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes)
    : Backend(granularity_bytes, CallTiming::kUntimed),  // its calls are arithmetic: the clock would cost more
      physical_limit_bytes_(physical_limit_bytes),
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)) {}

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes, const VmmCostModel& model)
    : Backend(granularity_bytes, CallTiming::kModelled),
      physical_limit_bytes_(physical_limit_bytes),
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)),
      model_(new VmmCostModel(model)),
      name_("sim:" + std::string(model.name)) {}

SimBackend::~SimBackend() { delete model_; }

std::uintptr_t SimBackend::do_reserve(std::uint64_t size_bytes) {
  if (model_ != nullptr) charge(BackendCall::kReserve, model_->ns(BackendCall::kReserve, size_bytes));
  const std::uintptr_t addr = next_addr_;
  if (addr == 0 || size_bytes > UINTPTR_MAX - addr) {
    throw BackendError("reserve", "the sim backend's address space is exhausted");
  }
  next_addr_ = addr + size_bytes;  // sizes are multiples of the granularity, so it stays aligned
  return addr;
}

void SimBackend::do_address_free(std::uintptr_t, std::uint64_t size_bytes) {
  if (model_ != nullptr) charge(BackendCall::kAddressFree, model_->ns(BackendCall::kAddressFree, size_bytes));
}

ChunkHandle SimBackend::do_create(std::uint64_t size_bytes) {
  if (model_ != nullptr) charge(BackendCall::kCreate, model_->ns(BackendCall::kCreate, size_bytes));
  const std::uint64_t live_bytes = live_chunk_bytes();
  if (physical_limit_bytes_ != 0 && size_bytes > physical_limit_bytes_ - live_bytes) {
    throw OutOfMemoryError(size_bytes, live_bytes, 0, physical_limit_bytes_, "sim backend physical limit");
  }
  return ChunkHandle{next_handle_++};
}

void SimBackend::do_release(ChunkHandle, std::uint64_t size_bytes) {
  if (model_ != nullptr) charge(BackendCall::kRelease, model_->ns(BackendCall::kRelease, size_bytes));
}

void SimBackend::do_map(std::uintptr_t, std::uint64_t size_bytes, ChunkHandle) {
  if (model_ != nullptr) charge(BackendCall::kMap, model_->ns(BackendCall::kMap, size_bytes));
}

void SimBackend::do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) {
  if (model_ == nullptr) return;
  for_each_mapping_in(addr, size_bytes, [&](std::uint64_t s) { charge(BackendCall::kUnmap, model_->ns(BackendCall::kUnmap, s)); });
}

void SimBackend::do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) {
  if (model_ == nullptr) return;
  for_each_mapping_in(addr, size_bytes,
                      [&](std::uint64_t s) { charge(BackendCall::kSetAccess, model_->ns(BackendCall::kSetAccess, s)); });
}

}  // namespace gmlake
