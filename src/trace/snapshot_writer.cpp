// PyTorch memory snapshots out: MemorySnapshot -> pickle (include/gmlake/snapshot_writer.h has the schema).
#include "gmlake/snapshot_writer.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "gmlake/error.h"
#include "pickle_writer.h"

namespace gmlake {
namespace {

// A value PyTorch writes as int64_t: refused beyond it, never wrapped to a negative number.
std::int64_t int64_of(std::uint64_t v, const char* what) {
  if (v > static_cast<std::uint64_t>(INT64_MAX)) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string("gmlake snapshot: ") + what + " " + std::to_string(v) + " does not fit a signed 64-bit int");
  }
  return static_cast<std::int64_t>(v);
}

void write_frames(pickle::PickleWriter& w) {
  w.key("frames");
  w.begin_list();
  w.end_list();
}

void write_segment(pickle::PickleWriter& w, const SnapshotSegment& s) {
  const SegmentInfo& seg = s.segment;
  std::uint64_t allocated = 0, active = 0, requested = 0;
  for (const SegmentBlock& b : seg.blocks) {
    if (b.state == SegmentBlockState::kInactive) continue;
    active += b.size_bytes;
    requested += b.requested_bytes;
    if (b.state == SegmentBlockState::kActiveAllocated) allocated += b.size_bytes;
  }
  w.begin_dict();
  w.key("device");
  w.integer(s.device);
  w.key("address");
  w.integer(int64_of(seg.address, "segment address"));
  w.key("total_size");
  w.integer(int64_of(seg.size_bytes, "segment size"));
  w.key("allocated_size");
  w.integer(int64_of(allocated, "allocated size"));
  w.key("active_size");
  w.integer(int64_of(active, "active size"));
  w.key("requested_size");
  w.integer(int64_of(requested, "requested size"));
  w.key("stream");
  w.integer(static_cast<std::int64_t>(seg.stream));  // a handle: kept bit for bit, as PyTorch's int64_t(stream)
  w.key("segment_type");
  w.str(seg.type == SegmentType::kLarge ? "large" : "small", true);
  w.key("segment_pool_id");
  w.int_pair(0, 0);
  w.key("is_expandable");
  w.boolean(seg.is_expandable);
  write_frames(w);
  w.key("blocks");
  w.begin_list();
  for (const SegmentBlock& b : seg.blocks) {
    w.begin_dict();
    w.key("address");
    w.integer(int64_of(b.address, "block address"));
    w.key("size");
    w.integer(int64_of(b.size_bytes, "block size"));
    w.key("requested_size");
    w.integer(int64_of(b.requested_bytes, "requested size"));
    w.key("state");
    w.str(to_string(b.state), true);
    write_frames(w);
    w.end_dict();
  }
  w.end_list();
  w.key("gmlake_chunks");
  w.begin_list();
  for (const SegmentChunk& c : seg.chunks) {
    w.begin_dict();
    w.key("handle");
    w.integer(static_cast<std::int64_t>(c.handle));  // opaque, kept bit for bit
    w.key("offset");
    w.integer(int64_of(c.offset_bytes, "chunk offset"));
    w.key("size");
    w.integer(int64_of(c.size_bytes, "chunk size"));
    w.end_dict();
  }
  w.end_list();
  w.end_dict();
}

void write_event(pickle::PickleWriter& w, const SnapshotEvent& e) {
  w.begin_dict();
  w.key("action");
  w.str(to_string(e.action), true);
  w.key(e.action == SnapshotAction::kOom ? "device_free" : "addr");
  w.integer(int64_of(e.addr, e.action == SnapshotAction::kOom ? "device_free" : "address"));
  w.key("size");
  w.integer(int64_of(e.size_bytes, "size"));
  w.key("stream");
  w.integer(static_cast<std::int64_t>(e.stream));
  w.key("time_us");
  w.integer(e.time_us);
  write_frames(w);
  w.end_dict();
}

void write_settings(pickle::PickleWriter& w, const MemorySnapshot& s) {
  w.begin_dict();
  w.key("PYTORCH_CUDA_ALLOC_CONF");
  w.str(s.conf);
  w.key("max_split_size");
  w.integer(-1);  // PyTorch's "no limit" (SIZE_MAX as int64_t)
  w.key("garbage_collection_threshold");
  w.number(0.0);
  w.key("expandable_segments");
  w.boolean(s.expandable_segments);
  w.key("pinned_num_register_threads");
  w.integer(1);
  w.key("release_lock_on_cudamalloc");
  w.boolean(false);
  w.key("pinned_use_cuda_host_register");
  w.boolean(false);
  w.key("roundup_power2_divisions");
  w.begin_dict();
  w.end_dict();
  w.key("gmlake_policy");
  w.str(s.policy);
  w.end_dict();
}

}  // namespace

const char* to_string(SnapshotAction action) {
  switch (action) {
    case SnapshotAction::kAlloc: return "alloc";
    case SnapshotAction::kFreeRequested: return "free_requested";
    case SnapshotAction::kFreeCompleted: return "free_completed";
    case SnapshotAction::kSegmentAlloc: return "segment_alloc";
    case SnapshotAction::kSegmentFree: return "segment_free";
    case SnapshotAction::kSegmentMap: return "segment_map";
    case SnapshotAction::kSegmentUnmap: return "segment_unmap";
    case SnapshotAction::kOom: return "oom";
  }
  return "oom";
}

std::vector<std::uint8_t> snapshot_pickle(const MemorySnapshot& snapshot) {
  pickle::PickleWriter w;
  w.begin_dict();
  w.key("segments");
  w.begin_list();
  for (const SnapshotSegment& s : snapshot.segments) {
    if (s.device < 0) throw Error(ErrorCode::kInvalidArgument, "gmlake snapshot: a segment's device is negative");
    write_segment(w, s);
  }
  w.end_list();
  w.key("device_traces");
  w.begin_list();
  for (const std::vector<SnapshotEvent>& events : snapshot.device_traces) {
    w.begin_list();
    for (const SnapshotEvent& e : events) write_event(w, e);
    w.end_list();
  }
  w.end_list();
  w.key("allocator_settings");
  write_settings(w, snapshot);
  w.end_dict();
  return w.finish();
}

void write_snapshot_file(const MemorySnapshot& snapshot, const std::string& path) {
  const std::vector<std::uint8_t> bytes = snapshot_pickle(snapshot);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (out) out.flush();
  if (!out) {
    const int err = errno;
    throw Error(ErrorCode::kInvalidArgument,
                "gmlake snapshot: cannot write " + path + (err != 0 ? std::string(": ") + std::strerror(err) : ""));
  }
}

}  // namespace gmlake
