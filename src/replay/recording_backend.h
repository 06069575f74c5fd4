// RecordingBackend: a Backend that forwards every call to an inner Backend and records where reserved memory
// became usable or stopped being so, as PyTorch's snapshot trace shows it: each successful map as segment_map
// (segment_alloc for the `caching` policy, whose segments are cudaMalloc-like) and each successful unmap as
// segment_unmap (segment_free), with the address and size of the call. The replay uses it for
// `--snapshot-out` (ReplayOptions::record).
//
// Its own calls are not timed (CallTiming::kUntimed): the inner backend's counters hold the real figures.
// Errors: those of the inner backend, unchanged; a failed call records nothing. Thread safety: none.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/config.h"
#include "gmlake/snapshot_writer.h"

namespace gmlake {

class RecordingBackend final : public Backend {
 public:
  struct Event {
    SnapshotAction action;
    std::uintptr_t addr;
    std::uint64_t size_bytes;
  };

  // `inner` must outlive this backend and must not be used directly while this one is. `policy` picks the
  // action names (segment_alloc / segment_free for caching, segment_map / segment_unmap otherwise).
  RecordingBackend(Backend& inner, Policy policy);

  std::string_view name() const override { return inner_.name(); }
  bool host_accessible() const override { return inner_.host_accessible(); }
  DeviceId device() const override { return inner_.device(); }
  std::uint32_t device_count() const override { return inner_.device_count(); }
  // Every map and unmap that succeeded, in call order.
  const std::vector<Event>& events() const { return events_; }
  const Backend& inner() const { return inner_; }

 protected:
  std::uintptr_t do_reserve(std::uint64_t size_bytes) override { return inner_.reserve(size_bytes); }
  void do_address_free(std::uintptr_t addr, std::uint64_t size_bytes) override { inner_.address_free(addr, size_bytes); }
  ChunkHandle do_create(std::uint64_t size_bytes) override { return inner_.create(size_bytes); }
  ChunkHandle do_create_on(std::uint64_t size_bytes, DeviceId device) override { return inner_.create(size_bytes, device); }
  void do_release(ChunkHandle chunk, std::uint64_t) override { inner_.release(chunk); }
  void do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) override;
  void do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) override;
  void do_set_access(std::uintptr_t addr, std::uint64_t size_bytes) override { inner_.set_access(addr, size_bytes); }

 private:
  Backend& inner_;
  SnapshotAction map_action_;
  SnapshotAction unmap_action_;
  std::vector<Event> events_;
};

}  // namespace gmlake
