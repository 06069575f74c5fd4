// Allocator statistics with PyTorch's names and meanings (torch.cuda.memory_stats), as a table declared once.
//
// Gauges (current and peak):
//   allocated_bytes       bytes in blocks handed out and not yet freed, each block's size rounded as placed
//   reserved_bytes        physical memory held from the backend (chunks, or segments for `caching`)
//   active_bytes          allocated, plus blocks freed whose free has not completed yet (record_stream)
//   requested_bytes       bytes the callers asked for, before rounding, of the allocated blocks
//   inactive_split_bytes  free bytes that cannot be given back to the backend because they share a
//                         segment (caching, expandable) or a mapped chunk (gmlake) with an active block
//   peer_reserved_bytes   the part of reserved_bytes held on peer devices (gmlake's lake: peer_devices); the
//                         own device holds reserved - peer_reserved; per peer: Backend::live_chunk_bytes(d)
// Counters:
//   num_alloc_retries  allocations that had to release cached memory and retry (PyTorch's meaning)
//   num_ooms           allocations that failed with OutOfMemoryError
//   num_allocs / num_frees
//   invalid_frees      frees of pointers that were not live blocks (rejected; the allocator is unchanged)
//   stitches           allocations that mapped chunks to make their range contiguous (gmlake)
//   stitched_chunks    chunks mapped by those stitches
//   stitch_reuses      allocations served by already-mapped memory that an earlier stitch mapped (gmlake)
//   evictions          idle mapped chunks unmapped to back another range or to honour a bound (gmlake)
//   fence_waits        times the host waited for a stream's queued work before unmapping (gmlake, GPU)
//   chunks_created / chunks_released
//   deferred_frees     frees that waited for the work of streams recorded with record_stream (StreamUses)
#pragma once

#include <cstdint>

#include "gmlake/backend.h"

namespace gmlake {

struct Gauge {
  std::int64_t current = 0;
  std::int64_t peak = 0;
  void increase(std::int64_t v) {
    current += v;
    if (current > peak) peak = current;
  }
  void decrease(std::int64_t v) { current -= v; }
  void reset_peak() { peak = current; }
};

#define GMLAKE_GAUGE_FIELDS(X) \
  X(allocated_bytes)           \
  X(reserved_bytes)            \
  X(active_bytes)              \
  X(requested_bytes)           \
  X(inactive_split_bytes)      \
  X(peer_reserved_bytes)

#define GMLAKE_COUNTER_FIELDS(X) \
  X(num_alloc_retries)           \
  X(num_ooms)                    \
  X(num_allocs)                  \
  X(num_frees)                   \
  X(invalid_frees)               \
  X(stitches)                    \
  X(stitched_chunks)             \
  X(stitch_reuses)               \
  X(evictions)                   \
  X(fence_waits)                 \
  X(chunks_created)              \
  X(chunks_released)             \
  X(deferred_frees)

struct Stats {
#define GMLAKE_STATS_GAUGE(name) Gauge name;
#define GMLAKE_STATS_COUNTER(name) std::uint64_t name = 0;
  GMLAKE_GAUGE_FIELDS(GMLAKE_STATS_GAUGE)
  GMLAKE_COUNTER_FIELDS(GMLAKE_STATS_COUNTER)
#undef GMLAKE_STATS_GAUGE
#undef GMLAKE_STATS_COUNTER
  BackendCounters backend_calls;  // filled in by Allocator::stats() from the backend

  // Sets every gauge's peak to its current value (torch.cuda.reset_peak_memory_stats).
  void reset_peaks();
};

}  // namespace gmlake
