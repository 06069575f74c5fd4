// The sim backend: accounting only. It hands out fake addresses and handles and counts physical bytes, but
// touches no memory, so the engine can replay a trace of any size on any machine (host_accessible() is false:
// never dereference its addresses).
//
// Addresses: reserve() returns granularity-aligned ranges from kSimBaseAddress upward, in increasing order,
// never null, never overlapping and never reused within one backend's life, so a stale pointer into a freed
// reservation can never alias a later one. Handles are increasing ids from 1, also never reused.
// Physical memory: create() fails with OutOfMemoryError once live_chunk_bytes() + size would exceed
// physical_limit_bytes (0 = unlimited).
// Timing: its calls are not timed (CallTiming::kUntimed), so counters().time_ns stays 0; with a VmmCostModel
// (make_backend("sim:h100")) each call is charged the model's cost for its chunk sizes instead (kModelled).
//
// Thread safety: none, like every Backend.
#pragma once

#include <cstdint>
#include <string_view>

#include <optional>
#include <string>

#include "gmlake/backend.h"
#include "gmlake/units.h"

namespace gmlake {

// Where the sim backend's fake address space starts (1 TiB: far from null and from small integers).
inline constexpr std::uintptr_t kSimBaseAddress = kTiB;

class SimBackend final : public Backend {
 public:
  // granularity_bytes: a power of two (else Error(kInvalidArgument)). physical_limit_bytes: the most physical
  // memory live at once, 0 for no limit.
  explicit SimBackend(std::uint64_t granularity_bytes = kChunkBytes, std::uint64_t physical_limit_bytes = 0);
  // The same, charging each call the cost `model` gives it (see backends/sim/vmm_cost_model.h).
  SimBackend(std::uint64_t granularity_bytes, std::uint64_t physical_limit_bytes, const struct VmmCostModel& model);
  ~SimBackend() override;

  // "sim", or "sim:h100" / "sim:h200" with a cost model.
  std::string_view name() const override { return name_; }
  bool host_accessible() const override { return false; }
  // The limit create() enforces on live_chunk_bytes(), 0 for none. The OutOfMemoryError it throws carries
  // requested = the chunk's size, reserved = live_chunk_bytes(), allocated = 0, cap = this limit.
  std::uint64_t physical_limit_bytes() const { return physical_limit_bytes_; }

 protected:
  // Throws BackendError("reserve", ...) when the fake address space (up to 2^64) is exhausted.
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override;
  void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) override;
  // Throws OutOfMemoryError when the physical limit would be exceeded.
  ChunkHandle do_create(std::uint64_t size_bytes) override;
  void do_release(ChunkHandle chunk, std::uint64_t size_bytes) override;
  void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) override;
  void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) override;
  void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) override;

 private:
  std::uint64_t physical_limit_bytes_;
  std::uintptr_t next_addr_;       // the start of the next reservation
  std::uint64_t next_handle_ = 1;  // the next chunk handle
  const struct VmmCostModel* model_ = nullptr;  // owned; null: untimed
  std::string name_ = "sim";
};

}  // namespace gmlake
