// Reports of replay results: the side-by-side table `gmlake replay` prints and its --json form.
#pragma once

#include <string>
#include <vector>

#include "gmlake/replay.h"

namespace gmlake {

// One block per (trace, device): a header line with the lower bound and PyTorch's recorded peak reserved,
// then one row per policy. Sizes in GB (10^9 bytes, as PyTorch's figures in traces/README.md). "vmm ns/op" is
// the time inside backend calls per op (part of ns/op), "vmm µs/stitch" the same time divided by the stitches
// ("-" without any): on the cuda backend, what the real VMM driver calls cost.
// On a trace of several streams, gmlake's row is also followed by a line that gives their number and whether its
// arenas were shared by them (cross_stream_reuse) or each stream had its own, as under PyTorch on the GPU.
std::string format_table(const std::vector<ReplayResult>& results);

// A JSON array, one object per result, with the keys: trace, device, policy, backend, ops, streams (distinct
// streams that allocate), cross_stream_reuse (gmlake's arenas shared by the streams, as replayed), lower_bound_bytes,
// lower_bound_held_bytes (deferred frees held until they complete),
// peak_reserved_bytes, peak_allocated_bytes, utilization, fragmentation, pytorch_peak_reserved_bytes (null
// where unknown), ns_per_op, stitches, ooms, backend_calls (object: call kind -> count), and besides those
// stitched_chunks, stitch_reuses, evictions, in_order_evictions (of those, moves in stream order with no wait:
// Config::in_order_moves), unknown_frees, peak_mappings, backend_time_ns (object: call kind ->
// wall time inside those calls, ns), assumed_device_waits, and device_lag_us, device_waits, device_wait_ns (the
// modelled device of `--device-lag-us`: 0 without one), stream_event_calls and arena_handovers (Stats: a new
// stream's arena taken over from an old one; per-stream arenas only, as on a GPU or with a device lag).
// With a device lag, gmlake's row is followed by a line naming the lag, the waits, the time they would block and
// the moves made in stream order.
std::string format_json(const std::vector<ReplayResult>& results);

}  // namespace gmlake
