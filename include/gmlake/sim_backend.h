// The sim backend: accounting only. It hands out fake addresses and handles and counts physical bytes, but
// touches no memory, so the engine can replay a trace of any size on any machine (host_accessible() is false:
// never dereference its addresses).
//
// Addresses: reserve() returns granularity-aligned ranges from kSimBaseAddress upward, in increasing order,
// never null, never overlapping and never reused within one backend's life, so a stale pointer into a freed
// reservation can never alias a later one. Handles are increasing ids from 1, also never reused.
// Physical memory: create() fails with OutOfMemoryError once live_chunk_bytes() + size would exceed
// physical_limit_bytes (0 = unlimited).
// Devices (the lake): constructed with a list of SimDevice, it models several GPUs of one host, each with its
// capacity (create(size, d) fails with OutOfMemoryError once device d's live bytes would exceed it) and the
// bandwidth at which device 0, the own device, reaches its memory (HBM for itself, NVLink for a peer), so that
// access_ns() gives a modelled cost of touching memory on each device. Chunks of any device map and get access
// alike (the base class's tables).
// Timing: its calls are not timed (CallTiming::kUntimed), so counters().time_ns stays 0; with a VmmCostModel
// (make_backend("sim:h100")) each call is charged the model's cost for its chunk sizes instead (kModelled).
//
// Thread safety: none, like every Backend.
#pragma once

#include <cstdint>
#include <string_view>

#include <optional>
#include <string>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/units.h"

namespace gmlake {

// One device of a multi-device sim backend.
struct SimDevice {
  std::uint64_t capacity_bytes = 0;    // the most chunk bytes live on it at once; 0 = unlimited
  std::uint64_t link_bytes_per_s = 0;  // how fast device 0 reads or writes its memory; 0 = not modelled
};
// An H100 SXM's HBM3 (3.35 TB/s) and one direction of its NVLink 4 (450 GB/s of the 900 GB/s both ways):
// NVIDIA H100 datasheet. A peer's memory is about 7.4x slower to reach than one's own.
inline constexpr std::uint64_t kH100HbmBytesPerS = 3'350'000'000'000;
inline constexpr std::uint64_t kH100NvlinkBytesPerS = 450'000'000'000;

// Where the sim backend's fake address space starts (1 TiB: far from null and from small integers).
inline constexpr std::uintptr_t kSimBaseAddress = kTiB;

class SimBackend final : public Backend {
 public:
  // granularity_bytes: a power of two (else Error(kInvalidArgument)). physical_limit_bytes: the most physical
  // memory live at once, 0 for no limit.
  explicit SimBackend(std::uint64_t granularity_bytes = kPageBytes, std::uint64_t physical_limit_bytes = 0);
  // The same, charging each call the cost `model` gives it (see backends/sim/vmm_cost_model.h).
  SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes, const struct VmmCostModel& model);
  // Several devices, device 0 the own one (devices.size() >= 1, else Error(kInvalidArgument)).
  SimBackend(std::uint64_t granularity_bytes, std::vector<SimDevice> devices);
  // The same, charging each call the cost `model` gives it; cuMemSetAccess over chunks of devices other than 0
  // is charged the model's peer costs (VmmCostModel::peer_set_access_*).
  SimBackend(std::uint64_t granularity_bytes, std::vector<SimDevice> devices, const struct VmmCostModel& model);
  ~SimBackend() override;

  // "sim", or "sim:h100" / "sim:h200" with a cost model.
  std::string_view name() const override { return name_; }
  bool host_accessible() const override { return false; }
  // The limit create() enforces on live_chunk_bytes(), 0 for none. The OutOfMemoryError it throws carries
  // requested = the chunk's size, reserved = live_chunk_bytes(), allocated = 0, cap = this limit.
  std::uint64_t physical_limit_bytes() const { return devices_[0].capacity_bytes; }
  std::uint32_t device_count() const override { return static_cast<std::uint32_t>(devices_.size()); }
  // Device `device` as constructed (0 .. device_count() - 1, else Error(kInvalidArgument)).
  const SimDevice& sim_device(DeviceId device) const;
  // Modelled ns for device 0 to read or write `bytes` of device `device`'s memory once: bytes / its
  // link_bytes_per_s (0 when that is 0). Throws Error(kInvalidArgument) for a device that is not one.
  std::uint64_t access_ns(DeviceId device, std::uint64_t bytes) const;

 protected:
  // Throws BackendError("reserve", ...) when the fake address space (up to 2^64) is exhausted.
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override;
  void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) override;
  // Throws OutOfMemoryError when the device's capacity would be exceeded.
  ChunkHandle do_create(std::uint64_t size_bytes) override;
  ChunkHandle do_create_on(std::uint64_t size_bytes, DeviceId device) override;
  void do_release(ChunkHandle chunk, std::uint64_t size_bytes) override;
  void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) override;
  void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) override;
  void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) override;
  std::uint64_t do_device_free_bytes() override;

 private:
  std::vector<SimDevice> devices_;
  std::uintptr_t next_addr_;       // the start of the next reservation
  std::uint64_t next_handle_ = 1;  // the next chunk handle
  const struct VmmCostModel* model_ = nullptr;  // owned; null: untimed
  std::string name_ = "sim";
};

}  // namespace gmlake
