#include "recording_backend.h"

namespace gmlake {

RecordingBackend::RecordingBackend(Backend& inner, Policy policy)
    : Backend(inner.granularity_bytes(), CallTiming::kUntimed),
      inner_(inner),
      map_action_(policy == Policy::kCaching ? SnapshotAction::kSegmentAlloc : SnapshotAction::kSegmentMap),
      unmap_action_(policy == Policy::kCaching ? SnapshotAction::kSegmentFree : SnapshotAction::kSegmentUnmap) {}

void RecordingBackend::do_map(std::uintptr_t addr, std::uint64_t size_bytes, ChunkHandle chunk) {
  inner_.map(addr, size_bytes, chunk);
  events_.push_back({map_action_, addr, size_bytes});
}

void RecordingBackend::do_unmap(std::uintptr_t addr, std::uint64_t size_bytes) {
  inner_.unmap(addr, size_bytes);
  events_.push_back({unmap_action_, addr, size_bytes});
}

}  // namespace gmlake
