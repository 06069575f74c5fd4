// Writing PyTorch memory snapshots: the dict torch.cuda.memory._snapshot() returns and _dump_snapshot() pickles,
// so that PyTorch's viewers (torch.cuda._memory_viz segsum / trace / trace_plot, the memory_viz page) and
// `gmlake replay` read what gmlake writes.
//
// Schema written (PyTorch's keys; sizes in bytes, times in microseconds):
//   {"segments": [{"device", "address", "total_size", "allocated_size", "active_size", "requested_size",
//                  "stream", "segment_type": "large"|"small", "segment_pool_id": (0, 0), "is_expandable",
//                  "frames": [], "blocks": [{"address", "size", "requested_size", "state", "frames": []}, ...],
//                  "gmlake_chunks": [{"handle", "offset", "size"}, ...]}, ...],
//    "device_traces": [[{"action", "addr", "size", "stream", "time_us", "frames": []}, ...] per device],
//    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments", ..., "gmlake_policy"}}
// "gmlake_chunks" (the physical chunks behind a segment: several for a stitched range) is gmlake's own key,
// which PyTorch's readers ignore. An `oom` entry carries "device_free" instead of "addr", as PyTorch writes it.
// Segments' allocated_size / active_size / requested_size are recounted from their blocks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gmlake/allocator.h"

namespace gmlake {

enum class SnapshotAction : std::uint8_t {
  kAlloc,          // a block of size (as requested) at addr
  kFreeRequested,  // the program freed addr
  kFreeCompleted,  // its memory went back to the pool
  kSegmentAlloc,   // cudaMalloc-like segment reserved (caching)
  kSegmentFree,
  kSegmentMap,     // pages mapped at addr (expandable, gmlake)
  kSegmentUnmap,
  kOom,            // an allocation of size failed; addr holds the device's free bytes ("device_free")
};
// PyTorch's action names: "alloc", "free_requested", ..., "oom".
const char* to_string(SnapshotAction action);

struct SnapshotEvent {
  SnapshotAction action;
  std::uint64_t addr;  // kOom: device_free bytes
  std::uint64_t size_bytes;
  StreamId stream;
  std::int64_t time_us;
};

struct SnapshotSegment {
  int device;
  SegmentInfo segment;
};

struct MemorySnapshot {
  std::vector<SnapshotSegment> segments;                 // the state when the snapshot was taken
  std::vector<std::vector<SnapshotEvent>> device_traces;  // index: device; in time order
  // allocator_settings: the configuration in GMLAKE_CONF / PYTORCH_CUDA_ALLOC_CONF form, and the policy's name.
  std::string conf;
  std::string policy;
  bool expandable_segments = false;
};

// The snapshot as a pickle (protocol 2, data opcodes only). Throws Error(kInvalidArgument) when a device index is
// negative, or an address, size or time does not fit a signed 64-bit int (PyTorch's int64_t).
std::vector<std::uint8_t> snapshot_pickle(const MemorySnapshot& snapshot);

// Writes snapshot_pickle(snapshot) to `path` (uncompressed, whatever its name). Throws Error(kInvalidArgument)
// as snapshot_pickle, and Error(kInvalidArgument) naming `path` when it cannot be written.
void write_snapshot_file(const MemorySnapshot& snapshot, const std::string& path);

}  // namespace gmlake
