// The C API's structs and arrays from the pool layer's types and back (include/gmlake/gmlake.h describes each
// struct): what the entry points copy out to their callers, with the checks of their output arguments.
//
// Errors: Error(kInvalidArgument) with the message given (or naming the call) for a NULL output argument, a
// NULL array with a capacity, a too small buffer where the call reports it; nothing is written then.
// Thread safety: none needed (plain functions over their arguments).
#pragma once

#include <cstddef>
#include <vector>

#include "gmlake/gmlake.h"
#include "gmlake/ipc.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/stats.h"
#include "pool/device_slot.h"
#include "pool/private_pools.h"

namespace gmlake::capi {

// Throws Error(kInvalidArgument, message) unless `ok`.
void require(bool ok, const char* message);

PoolId pool_id_of(gmlake_pool_id id);
gmlake_stats c_stats_of(const Stats& stats);

// *count = events.size(); out[0 .. *count) = events (the caller asked at most capacity of them).
void write_trace(const std::vector<SnapshotEvent>& events, gmlake_trace_event* out, std::size_t* count);
// *segment_count and *block_count = the numbers there are; the arrays are written only when both fit.
void write_segments(const std::vector<OwnedSegment>& found, gmlake_segment* segments, std::size_t segment_capacity,
                    std::size_t* segment_count, gmlake_block* blocks, std::size_t block_capacity,
                    std::size_t* block_count);
// *count = live.size(); blocks written only when they fit (state 0 allocated, 1 pending free).
void write_blocks(const std::vector<BlockInfo>& live, gmlake_block* blocks, std::size_t capacity, std::size_t* count);
// gmlake_pool_restore's blocks as BlockInfo. Throws Error(kInvalidArgument) for blocks NULL with a count, or a
// block whose state is not 0 (allocated).
std::vector<BlockInfo> blocks_from_c(const gmlake_block* blocks, std::size_t count);
// gmlake_ipc_export's outputs: *handle_bytes (capacity on entry) = the handle's size, *offset_bytes, and the
// handle into handle_out unless it is NULL. Throws Error(kInvalidArgument) when the buffer is too small (the
// sizes are set).
void write_ipc_export(const IpcExport& exported, char* handle_out, std::size_t* handle_bytes,
                      std::size_t* offset_bytes);

}  // namespace gmlake::capi
