#include "frontends/c_api/c_structs.h"

#include <cstdint>
#include <cstring>
#include <string>

#include "gmlake/error.h"

namespace gmlake::capi {

// gmlake_stats has exactly the fields of the stats table (c_stats_of fails to compile when one is missing).
#define GMLAKE_C_COUNT(name, torch_key) +1
constexpr std::size_t kGaugeFields = 0 GMLAKE_GAUGE_FIELDS(GMLAKE_C_COUNT);
constexpr std::size_t kCounterFields = 0 GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNT);
#undef GMLAKE_C_COUNT
static_assert(sizeof(gmlake_stats) == kGaugeFields * sizeof(gmlake_gauge) + kCounterFields * sizeof(std::uint64_t));

// The C API's numbers for trace actions and block states are the C++ enums' values.
static_assert(GMLAKE_TRACE_ALLOC == static_cast<int>(SnapshotAction::kAlloc) &&
              GMLAKE_TRACE_FREE_REQUESTED == static_cast<int>(SnapshotAction::kFreeRequested) &&
              GMLAKE_TRACE_FREE_COMPLETED == static_cast<int>(SnapshotAction::kFreeCompleted) &&
              GMLAKE_TRACE_SEGMENT_ALLOC == static_cast<int>(SnapshotAction::kSegmentAlloc) &&
              GMLAKE_TRACE_SEGMENT_FREE == static_cast<int>(SnapshotAction::kSegmentFree) &&
              GMLAKE_TRACE_SEGMENT_MAP == static_cast<int>(SnapshotAction::kSegmentMap) &&
              GMLAKE_TRACE_SEGMENT_UNMAP == static_cast<int>(SnapshotAction::kSegmentUnmap) &&
              GMLAKE_TRACE_OOM == static_cast<int>(SnapshotAction::kOom));
static_assert(static_cast<int>(SegmentBlockState::kActiveAllocated) == 0 &&
              static_cast<int>(SegmentBlockState::kActivePendingFree) == 1 &&
              static_cast<int>(SegmentBlockState::kInactive) == 2);

void require(bool ok, const char* message) {
  if (!ok) throw Error(ErrorCode::kInvalidArgument, message);
}

PoolId pool_id_of(gmlake_pool_id id) { return {id.first, id.second}; }

gmlake_stats c_stats_of(const Stats& s) {
  gmlake_stats out{};
#define GMLAKE_C_GAUGE(name, torch_key) out.name = gmlake_gauge{s.name.current, s.name.peak};
#define GMLAKE_C_COUNTER(name, torch_key) out.name = s.name;
  GMLAKE_GAUGE_FIELDS(GMLAKE_C_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_C_COUNTER)
#undef GMLAKE_C_GAUGE
#undef GMLAKE_C_COUNTER
  return out;
}

void write_trace(const std::vector<SnapshotEvent>& events, gmlake_trace_event* out, std::size_t* count) {
  for (std::size_t i = 0; i < events.size(); ++i) {
    const SnapshotEvent& e = events[i];
    out[i] = gmlake_trace_event{static_cast<int32_t>(e.action), e.addr, e.size_bytes, e.stream, e.time_us};
  }
  *count = events.size();
}

void write_segments(const std::vector<OwnedSegment>& found, gmlake_segment* segments, std::size_t segment_capacity,
                    std::size_t* segment_count, gmlake_block* blocks, std::size_t block_capacity,
                    std::size_t* block_count) {
  std::size_t total_blocks = 0;
  for (const OwnedSegment& owned : found) total_blocks += owned.segment.blocks.size();
  *segment_count = found.size();
  *block_count = total_blocks;
  if (found.size() > segment_capacity || total_blocks > block_capacity) return;
  std::size_t b = 0;
  for (std::size_t i = 0; i < found.size(); ++i) {
    const SegmentInfo& s = found[i].segment;
    segments[i] = gmlake_segment{s.address,   s.size_bytes,          s.stream,
                                 s.type == SegmentType::kLarge ? 1 : 0, s.is_expandable ? 1 : 0,
                                 b,           s.blocks.size(),       s.chunks.size(),
                                 gmlake_pool_id{found[i].pool.first, found[i].pool.second}};
    for (const SegmentBlock& block : s.blocks) {
      blocks[b++] = gmlake_block{block.address, block.size_bytes, block.requested_bytes,
                                 static_cast<int32_t>(block.state)};
    }
  }
}

void write_blocks(const std::vector<BlockInfo>& live, gmlake_block* blocks, std::size_t capacity, std::size_t* count) {
  *count = live.size();
  if (live.size() > capacity) return;
  for (std::size_t i = 0; i < live.size(); ++i) {
    blocks[i] = gmlake_block{live[i].address, live[i].size_bytes, live[i].requested_bytes,
                             live[i].pending_free ? 1 : 0};
  }
}

std::vector<BlockInfo> blocks_from_c(const gmlake_block* blocks, std::size_t count) {
  require(blocks != nullptr || count == 0, "gmlake_pool_restore: blocks is NULL with a count");
  std::vector<BlockInfo> wanted;
  wanted.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    if (blocks[i].state != 0) {
      throw Error(ErrorCode::kInvalidArgument, "gmlake_pool_restore: block " + std::to_string(i) + " has state " +
                                                   std::to_string(blocks[i].state) + ": only allocated blocks (0)");
    }
    wanted.push_back(BlockInfo{blocks[i].address, blocks[i].size_bytes, blocks[i].requested_bytes, 0, false});
  }
  return wanted;
}

void write_ipc_export(const IpcExport& exported, char* handle_out, std::size_t* handle_bytes,
                      std::size_t* offset_bytes) {
  const std::size_t capacity = *handle_bytes;
  *handle_bytes = exported.handle.size();
  *offset_bytes = exported.offset_bytes;
  if (handle_out == nullptr) return;  // the size asked for
  if (capacity < exported.handle.size()) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake_ipc_export: the handle needs " +
                                                 std::to_string(exported.handle.size()) + " bytes, the buffer has " +
                                                 std::to_string(capacity) + " (*handle_bytes now says how many)");
  }
  std::memcpy(handle_out, exported.handle.data(), exported.handle.size());
}

}  // namespace gmlake::capi
