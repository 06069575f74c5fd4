// Replay: feeds one device's allocation events from a trace (trace.h) to an allocator policy over a backend,
// and measures how much memory the policy needs for that exact workload and how long its calls take.
//
// Events become allocator calls: alloc -> allocate(size, stream); free_requested immediately followed by its
// free_completed -> deallocate; a free_requested whose free_completed comes later (record_stream) ->
// begin_deferred_free ... end_deferred_free. Initial blocks (alive before recording began) are allocated
// first. Segment events are PyTorch's own and are not replayed; they give pytorch_peak_reserved_bytes.
// A free of an address that is not live is counted (unknown_frees) and skipped; an allocation that fails
// with out-of-memory (under a cap) is counted (ooms) and its later free skipped. The replay goes on.
//
// Timing: the calls are resolved to slots before the timed loop, so ns_per_op is the allocator's own time
// (allocate / free call, including its lock when `synchronized`), averaged over all ops. backend_time_ns is the
// part of it spent inside backend calls (on cuda: the real VMM driver calls), per kind in
// stats.backend_calls.time_ns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/config.h"
#include "gmlake/snapshot_writer.h"
#include "gmlake/trace.h"

namespace gmlake {

// What a replay did, in PyTorch's snapshot terms (ReplayOptions::record; `gmlake replay --snapshot-out`).
struct ReplayRecord {
  // The policy's segments and blocks when the replay ended.
  std::vector<SegmentInfo> segments;
  // The trace's events as the policy served them, in order, with the addresses it returned: alloc (not for the
  // initial blocks, which a reader finds again from their frees and from `segments`), free_requested and
  // free_completed (a free that completes at once as the two in a row), oom for an allocation that failed (its
  // frees left out); before each, segment_map / segment_unmap (segment_alloc / segment_free for `caching`) for
  // the backend maps and unmaps the call made. time_us: the trace event's.
  std::vector<SnapshotEvent> events;
};

// Memory op by op (ReplayOptions::series; `gmlake replay --plot`): index i is op i, as ReplayResult::ops counts
// them (the initial blocks' allocations first), so every vector but failed_ops has ReplayResult::ops entries.
struct ReplaySeries {
  // The time of the trace event each op came from, in µs as the trace gives it (the initial blocks take the first
  // event's); all equal when the trace has no times.
  std::vector<std::int64_t> time_us;
  // Reserved bytes when the op ended, or, for an op during which they reached a new peak, that peak: the maximum
  // over the series is ReplayResult::peak_reserved_bytes exactly.
  std::vector<std::uint64_t> reserved_bytes;
  // Requested bytes of the live blocks when the op ended, counting the allocations that succeeded (a deferred
  // free's bytes leave when it is requested): the maximum is ReplayResult::lower_bound_bytes.
  std::vector<std::uint64_t> requested_bytes;
  // The ops whose allocation failed (out of memory under a cap, or a tolerated BackendError), ascending.
  std::vector<std::uint64_t> failed_ops;
};

// The configuration a replay starts from: the defaults with each stream its own arenas (cross_stream_reuse:false),
// as gmlake runs under PyTorch on the GPU (asynchronous streams refuse shared arenas: stream_events.h), so that a
// multi-stream trace's figures are the job's; then `text` (GMLAKE_CONF form), which may set it back. `gmlake replay`
// and scripts/replay-gate.py replay from it. Throws Error (kConfig) for a bad key or value.
Config replay_config(std::string_view text = {});

struct ReplayOptions {
  Config config;                // policy, cap and tuning (replay_config() for what `gmlake replay` starts from)
  std::string backend = "sim";  // a make_backend name (backend_factory.h)
  // The device's size in bytes (0: the backend's own): the backend never holds more chunk bytes on its device
  // at once (Backend::set_device_limit_bytes; `gmlake replay --device-bytes`). Unlike config.cap_bytes, the
  // policy is not told: it finds the device full, as on a GPU that other work has filled.
  std::uint64_t device_bytes = 0;
  // Called about every 1% of the ops with the fraction done (0..1); may be empty.
  std::function<void(double)> on_progress;
  // When non-zero, allocator.check_invariants() runs every this many ops (tests), and the modelled device's
  // (device_lag_us) with it; not timed.
  std::uint64_t check_every_ops = 0;
  // When true, an allocation that fails with BackendError is counted (backend_errors) and skipped like an
  // out-of-memory one, and the replay goes on; check_invariants() then runs right after every failed
  // allocation. For fault injection (fault_backend.h); when false, a BackendError ends the replay.
  bool tolerate_backend_errors = false;
  // When non-zero, allocator.empty_cache() runs every this many ops (timed), as a training loop that calls
  // torch.cuda.empty_cache() each step. With tolerate_backend_errors, one that fails with BackendError is
  // counted (empty_cache_errors) and the replay goes on.
  std::uint64_t empty_cache_every_ops = 0;
  // When set, filled with what the replay did (ReplayRecord). The backend is then wrapped in a recorder; the
  // result's backend figures are still the backend's own.
  ReplayRecord* record = nullptr;
  // When set, filled with reserved and requested bytes op by op (ReplaySeries). Reading the allocator's stats
  // after each op is then part of ns_per_op; without it the loop does no more than one test of this pointer.
  ReplaySeries* series = nullptr;
  // When non-zero, the gmlake policy's StreamFence runs on a model of a device that finishes the work the host
  // queued at each op this many microseconds later (src/replay/lagging_stream_events.h; `gmlake replay
  // --device-lag-us`): an idle chunk moves only once that lag has passed, else the pool waits or creates a chunk
  // (lag_grow_pages), and the stream counts as drained (device waits) only after a gap of the lag between ops,
  // where assume_device_waits is then not read; cross_stream_reuse is then off, as on the GPU (each stream keeps
  // its own arenas). 0: no model, every chunk is safe at once (the default).
  std::uint64_t device_lag_us = 0;
  // How many times the device's events are replayed in a row (`gmlake replay --repeat`; 0 counts as 1): as a
  // process that runs the recorded workload again and again (bench/torch/workload_ab.py, whose every run builds its
  // model anew). Before each pass but the first, every block the pass before left live is freed (a deferred free
  // it left open ends), so each pass starts from an empty job with the pool as the last left it; each pass's
  // times follow the last's. The lower bound is one pass's; backend_calls_last_pass shows what the pool still
  // does once its layout has formed (the moves of the first pass are the layout forming, not the steady state).
  std::uint64_t repeat = 1;
};

struct ReplayResult {
  std::string trace;
  int device = 0;
  Policy policy = Policy::kGmlake;
  std::string backend;
  std::uint64_t ops = 0;                   // allocator calls replayed (allocs + frees)
  std::uint64_t streams = 0;               // distinct streams the trace allocates on
  // The gmlake policy's arenas as replayed: shared by every stream (Config::cross_stream_reuse), or each stream
  // its own (false: as under PyTorch on the GPU, and always with device_lag_us). Not read for other policies.
  bool cross_stream_reuse = false;
  std::uint64_t lower_bound_bytes = 0;     // peak over time of live requested bytes (of the allocations that succeeded)
  // The same with a deferred free's bytes live until the free completes (record_stream): what an allocator
  // that honours stream uses needs at least. Equal to lower_bound_bytes on traces without deferred frees.
  std::uint64_t lower_bound_held_bytes = 0;
  std::uint64_t peak_reserved_bytes = 0;
  std::uint64_t peak_allocated_bytes = 0;
  double utilization = 0;                  // lower bound / peak reserved
  double fragmentation = 0;                // 1 - peak allocated / peak reserved (GMLake's metric)
  std::optional<std::uint64_t> pytorch_peak_reserved_bytes;
  double ns_per_op = 0;
  std::uint64_t ooms = 0;
  std::uint64_t unknown_frees = 0;
  std::uint64_t backend_errors = 0;        // allocations failed by BackendError (tolerate_backend_errors)
  std::uint64_t empty_cache_errors = 0;    // empty_cache calls failed by BackendError (tolerate_backend_errors)
  std::uint64_t peak_mappings = 0;         // most live backend mappings at once (host: VMAs, vm.max_map_count)
  std::uint64_t backend_time_ns = 0;       // wall time inside backend calls, all kinds (see Timing above)
  // Backend calls made during the second half of the ops (index ops/2 onwards): the steady state, once the
  // first half has warmed the allocator's caches up. Counts only (time_ns stays 0).
  BackendCounters backend_calls_second_half;
  // ReplayOptions::repeat as replayed (1: once), and the backend calls of the last pass with their time (on
  // sim:h100 the modelled driver time): with passes > 1, what each repetition of the workload costs once the pool
  // has seen it; equal to stats.backend_calls when passes = 1.
  std::uint64_t passes = 1;
  BackendCounters backend_calls_last_pass;
  // What the gmlake policy took the device to do where it grows (Config::assume_device_waits): a replay runs no
  // kernels and has no stream to ask (no StreamEvents), so this stands for cuStreamQuery. false: busy (queued
  // work hides backend calls: growth_chunk_share); true: waiting for the host (waiting_growth_chunk_share).
  bool assumed_device_waits = false;
  // With ReplayOptions::device_lag_us: the lag modelled (0: none), the waits the host made for the modelled
  // device (Stats::fence_waits and synchronizations) and the time they would have blocked it.
  std::uint64_t device_lag_us = 0;
  std::uint64_t device_waits = 0;
  std::int64_t device_wait_ns = 0;
  Stats stats;                             // the allocator's stats at the end (backend calls included)
};

// Replays `device` of `trace`. Throws Error for a bad backend name or config, or (kInvalidArgument) for a repeat
// whose passes would hold more than 2^32 allocations; never for trace content.
ReplayResult replay(const Trace& trace, const DeviceTrace& device, const ReplayOptions& options);

// The same over a backend the caller made (a FaultBackend, a backend with a physical limit); options.backend
// is not used, and the result names backend.name(). The allocator is torn down before this returns, so the
// backend's live_chunks(), live_mappings() and live_reservations() then show whatever it leaked.
ReplayResult replay(const Trace& trace, const DeviceTrace& device, const ReplayOptions& options, Backend& backend);

// Peak over time of live requested bytes: the least memory any allocator needs for this trace.
std::uint64_t lower_bound_bytes(const DeviceTrace& device);

}  // namespace gmlake
