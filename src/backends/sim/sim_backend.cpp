// The sim backend: a bump allocator of fake addresses and handles, and a physical byte count checked against
// a limit. Map, unmap and set_access do nothing here: the base class keeps the tables.
#include "gmlake/sim_backend.h"

#include <cstdint>
#include <string>
#include <utility>

#include "vmm_cost_model.h"
#include "gmlake/error.h"

namespace gmlake {

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes)
    : Backend(granularity_bytes, CallTiming::kUntimed),  // its calls are arithmetic: the clock would cost more
      devices_{SimDevice{physical_limit_bytes, 0}},
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)) {}

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::vector<SimDevice> devices)
    : Backend(granularity_bytes, CallTiming::kUntimed),
      devices_(std::move(devices)),
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)) {
  if (devices_.empty()) throw Error(ErrorCode::kInvalidArgument, "SimBackend: at least one device is needed");
}

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes, const VmmCostModel& model)
    : Backend(granularity_bytes, CallTiming::kModelled),
      devices_{SimDevice{physical_limit_bytes, 0}},
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)),
      model_(new VmmCostModel(model)),
      name_("sim:" + std::string(model.name)) {}

SimBackend::SimBackend(std::uint64_t granularity_bytes, std::vector<SimDevice> devices, const VmmCostModel& model)
    : Backend(granularity_bytes, CallTiming::kModelled),
      devices_(std::move(devices)),
      next_addr_(round_up(kSimBaseAddress, granularity_bytes)),
      model_(new VmmCostModel(model)),
      name_("sim:" + std::string(model.name)) {
  if (devices_.empty()) throw Error(ErrorCode::kInvalidArgument, "SimBackend: at least one device is needed");
}

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

ChunkHandle SimBackend::do_create(std::uint64_t size_bytes) { return do_create_on(size_bytes, 0); }

ChunkHandle SimBackend::do_create_on(std::uint64_t size_bytes, DeviceId device) {
  if (model_ != nullptr) charge(BackendCall::kCreate, model_->ns(BackendCall::kCreate, size_bytes));
  const std::uint64_t live_bytes = live_chunk_bytes(device);
  const std::uint64_t limit = devices_[static_cast<std::size_t>(device)].capacity_bytes;
  if (limit != 0 && size_bytes > limit - live_bytes) {
    throw OutOfMemoryError(size_bytes, live_bytes, 0, limit,
                           device == 0 ? "sim backend physical limit"
                                       : "sim backend physical limit of device " + std::to_string(device));
  }
  return ChunkHandle{next_handle_++};
}

std::uint64_t SimBackend::do_device_free_bytes() {
  const std::uint64_t limit = devices_[0].capacity_bytes;
  return limit == 0 ? UINT64_MAX : bytes_below(limit, live_chunk_bytes(0));
}

const SimDevice& SimBackend::sim_device(DeviceId device) const {
  if (device < 0 || static_cast<std::size_t>(device) >= devices_.size()) {
    throw Error(ErrorCode::kInvalidArgument, "SimBackend: device " + std::to_string(device) + " is not one of its " +
                                                 std::to_string(devices_.size()) + " devices");
  }
  return devices_[static_cast<std::size_t>(device)];
}

std::uint64_t SimBackend::access_ns(DeviceId device, std::uint64_t bytes) const {
  const std::uint64_t rate = sim_device(device).link_bytes_per_s;
  if (rate == 0) return 0;
  return static_cast<std::uint64_t>(static_cast<long double>(bytes) * 1e9L / static_cast<long double>(rate));
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
  std::uint64_t peer_chunks = 0;
  for_each_mapping_device_in(addr, size_bytes, [&](std::uint64_t s, DeviceId d) {
    if (d == device()) {
      charge(BackendCall::kSetAccess, model_->ns(BackendCall::kSetAccess, s));
    } else {
      ++peer_chunks;
    }
  });
  if (peer_chunks != 0) {
    charge(BackendCall::kSetAccess, model_->peer_set_access_call_ns + peer_chunks * model_->peer_set_access_chunk_ns);
  }
}

}  // namespace gmlake
