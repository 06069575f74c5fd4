#include "gmlake/replay.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "gmlake/backend_factory.h"
#include "gmlake/error.h"
#include "gmlake/clock.h"
#include "gmlake/pool.h"
#include "lagging_stream_events.h"

namespace gmlake {
namespace {

enum class OpKind : std::uint8_t { kAlloc, kFree, kBeginDeferred, kEndDeferred };

struct Op {
  OpKind kind;
  std::uint32_t slot;
  std::uint64_t size_bytes;
  std::uint64_t stream;
};

struct Program {
  std::vector<Op> ops;
  std::vector<std::int64_t> time_us;  // per op: the time of the trace event it came from
  std::size_t initial_ops = 0;        // ops[0, initial_ops) allocate the initial blocks
  std::size_t last_pass_begin = 0;    // ops[last_pass_begin, ops.size()) are the last pass (repeat_program)
  std::uint32_t slots = 0;
  std::uint64_t unknown_frees = 0;
  std::uint64_t lower_bound_bytes = 0;
};

// a + b for the live-bytes sums, saturating: live blocks that add up past 64 bits (a corrupt trace; no device
// holds them) give a lower bound of 2^64 - 1, never a wrapped-around small one, and the replay goes on (it
// never throws for trace content: the allocations that cannot fit fail as out-of-memory). Found by the
// pickle_struct fuzzer after the checked sum threw.
std::uint64_t checked_add(std::uint64_t a, std::uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// The peak of the bytes requested by live blocks over `ops`, counting only allocations that succeeded
// (failed[slot] is set for those that did not): the lower bound of a replay in which some failed.
// With `held`, a deferred free (record_stream) keeps its bytes until it ends: the memory an allocator that
// honours stream uses cannot reuse earlier. With `live_after_op`, the live bytes after each op are appended there.
std::uint64_t lower_bound_of(const std::vector<Op>& ops, std::uint32_t slots, const std::vector<bool>& failed,
                             bool held = false, std::vector<std::uint64_t>* live_after_op = nullptr) {
  std::vector<std::uint64_t> size(slots, 0);
  std::uint64_t live = 0;
  std::uint64_t peak = 0;
  for (const Op& op : ops) {
    switch (op.kind) {
      case OpKind::kAlloc:
        if (!failed.empty() && failed[op.slot]) break;
        size[op.slot] = op.size_bytes;
        live = checked_add(live, op.size_bytes);
        peak = std::max(peak, live);
        break;
      case OpKind::kFree:
        live -= size[op.slot];
        size[op.slot] = 0;
        break;
      case OpKind::kBeginDeferred:  // the program freed it; its memory is the allocator's until the end
        if (held) break;
        live -= size[op.slot];
        size[op.slot] = 0;
        break;
      case OpKind::kEndDeferred:
        live -= size[op.slot];
        size[op.slot] = 0;
        break;
    }
    if (live_after_op != nullptr) live_after_op->push_back(live);
  }
  return peak;
}

// Turns trace events into allocator calls on slots (one slot per allocation), outside the timed loop.
Program compile(const DeviceTrace& device) {
  Program prog;
  prog.ops.reserve(device.events.size() + device.initial_blocks.size());
  struct Live {
    std::uint32_t slot;
    std::uint64_t size_bytes;
    bool pending;
  };
  std::unordered_map<std::uint64_t, Live> live;  // trace address -> live allocation
  std::uint64_t live_requested = 0;
  auto alloc = [&](std::uint64_t addr, std::uint64_t size, std::uint64_t stream) {
    if (size == 0) return;
    if (auto it = live.find(addr); it != live.end()) {  // the trace reuses a live address: it was freed unseen
      live_requested -= it->second.pending ? 0 : it->second.size_bytes;
      prog.ops.push_back({it->second.pending ? OpKind::kEndDeferred : OpKind::kFree, it->second.slot, 0, 0});
      live.erase(it);
    }
    const std::uint32_t slot = prog.slots++;
    live[addr] = {slot, size, false};
    prog.ops.push_back({OpKind::kAlloc, slot, size, stream});
    live_requested = checked_add(live_requested, size);
    prog.lower_bound_bytes = std::max(prog.lower_bound_bytes, live_requested);
  };
  for (const InitialBlock& b : device.initial_blocks) alloc(b.addr, b.size_bytes, b.stream);
  prog.initial_ops = prog.ops.size();
  const auto& ev = device.events;
  prog.time_us.assign(prog.ops.size(), ev.empty() ? 0 : ev.front().time_us);
  for (std::size_t i = 0; i < ev.size(); ++i) {
    const TraceEvent& e = ev[i];
    switch (e.action) {
      case TraceAction::kAlloc:
        alloc(e.addr, e.size_bytes, e.stream);
        break;
      case TraceAction::kFreeRequested: {
        auto it = live.find(e.addr);
        if (it == live.end() || it->second.pending) {
          ++prog.unknown_frees;
          break;
        }
        live_requested -= it->second.size_bytes;
        const bool completes_now = i + 1 < ev.size() && ev[i + 1].action == TraceAction::kFreeCompleted &&
                                   ev[i + 1].addr == e.addr;
        if (completes_now) {
          prog.ops.push_back({OpKind::kFree, it->second.slot, 0, 0});
          live.erase(it);
          ++i;  // the free_completed is consumed
        } else {
          prog.ops.push_back({OpKind::kBeginDeferred, it->second.slot, 0, 0});
          it->second.pending = true;
        }
        break;
      }
      case TraceAction::kFreeCompleted: {
        auto it = live.find(e.addr);
        if (it == live.end()) break;  // recording began between the request and the completion
        if (!it->second.pending) live_requested -= it->second.size_bytes;
        prog.ops.push_back({it->second.pending ? OpKind::kEndDeferred : OpKind::kFree, it->second.slot, 0, 0});
        live.erase(it);
        break;
      }
      default:
        break;  // PyTorch's segment events: not allocator calls
    }
    prog.time_us.resize(prog.ops.size(), e.time_us);
  }
  return prog;
}

// `prog` (one pass) `passes` times in a row (ReplayOptions::repeat): each pass on slots of its own, preceded by
// frees of every slot the pass before left live (kEndDeferred for an open deferred free, kFree otherwise), its
// times after the pass before's (saturating). lower_bound_bytes stays one pass's, as every pass starts empty.
void repeat_program(Program* prog, std::uint64_t passes) {
  if (passes <= 1 || prog->ops.empty()) return;
  if (passes > UINT32_MAX / std::max<std::uint64_t>(prog->slots, 1) ||
      prog->ops.size() > SIZE_MAX / 4 / passes) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("replay: {} passes of {} allocations do not fit the replay's 2^32 slots", passes,
                            prog->slots));
  }
  const Program one = *prog;
  enum class Slot : std::uint8_t { kUnused, kLive, kDeferred, kDone };
  std::vector<Slot> state(one.slots, Slot::kUnused);
  for (const Op& op : one.ops) {
    switch (op.kind) {
      case OpKind::kAlloc: state[op.slot] = Slot::kLive; break;
      case OpKind::kFree: state[op.slot] = Slot::kDone; break;
      case OpKind::kBeginDeferred: state[op.slot] = Slot::kDeferred; break;
      case OpKind::kEndDeferred: state[op.slot] = Slot::kDone; break;
    }
  }
  const std::int64_t first_us = one.time_us.front();
  for (std::uint64_t k = 1; k < passes; ++k) {
    const std::uint32_t base = static_cast<std::uint32_t>((k - 1) * one.slots);
    const std::int64_t end_us = prog->time_us.back();
    for (std::uint32_t slot = 0; slot < one.slots; ++slot) {
      if (state[slot] == Slot::kLive) prog->ops.push_back({OpKind::kFree, base + slot, 0, 0});
      if (state[slot] == Slot::kDeferred) prog->ops.push_back({OpKind::kEndDeferred, base + slot, 0, 0});
    }
    prog->time_us.resize(prog->ops.size(), end_us);
    if (k == passes - 1) prog->last_pass_begin = prog->ops.size();
    std::int64_t shift_us = 0;
    if (__builtin_add_overflow(end_us, 1, &shift_us) || __builtin_sub_overflow(shift_us, first_us, &shift_us)) {
      shift_us = 0;  // times past int64 (a corrupt trace): the pass keeps its own
    }
    for (std::size_t i = 0; i < one.ops.size(); ++i) {
      Op op = one.ops[i];
      op.slot += base + one.slots;
      prog->ops.push_back(op);
      std::int64_t t = 0;
      prog->time_us.push_back(__builtin_add_overflow(one.time_us[i], shift_us, &t) ? one.time_us[i] : t);
    }
  }
  prog->slots = static_cast<std::uint32_t>(passes * one.slots);
  prog->unknown_frees = one.unknown_frees * passes;
}

// Where reserved memory became usable or stopped being so, as PyTorch's snapshot trace shows it: the pool's own
// memory history (TracingAllocator, as torch.cuda.memory._record_memory_history() gets it) drained after each
// op, of which its segment_map / segment_unmap entries are kept (segment_alloc / segment_free for `caching`,
// whose segments are cudaMalloc-like); its alloc and free entries are left out, the replay writes its own with
// the trace's sizes and times.
class SegmentRecorder {
 public:
  struct Event {
    SnapshotAction action;
    std::uintptr_t addr;
    std::uint64_t size_bytes;
  };
  explicit SegmentRecorder(Policy policy) : caching_(policy == Policy::kCaching) {}
  // Takes the segment entries the pool traced since the last call.
  void take(Pool& pool) {
    scratch_.clear();
    pool.drain_trace(&scratch_);
    for (const SnapshotEvent& e : scratch_) {
      if (e.action == SnapshotAction::kSegmentMap) {
        events_.push_back({caching_ ? SnapshotAction::kSegmentAlloc : SnapshotAction::kSegmentMap, e.addr, e.size_bytes});
      } else if (e.action == SnapshotAction::kSegmentUnmap) {
        events_.push_back({caching_ ? SnapshotAction::kSegmentFree : SnapshotAction::kSegmentUnmap, e.addr, e.size_bytes});
      }
    }
  }
  const std::vector<Event>& events() const { return events_; }

 private:
  bool caching_;
  std::vector<SnapshotEvent> scratch_;
  std::vector<Event> events_;
};

// The ops as the policy served them (ReplayRecord::events): slots[] holds each allocation's address (nullptr
// when it failed), marks[i] the recorder's event count when op i ended.
std::vector<SnapshotEvent> served_events(const Program& prog, const std::vector<void*>& slots,
                                         const std::vector<std::size_t>& marks, const SegmentRecorder& recorder) {
  std::vector<SnapshotEvent> out;
  out.reserve(prog.ops.size() * 2 + recorder.events().size());
  std::vector<std::uint64_t> slot_size(prog.slots, 0);
  std::vector<std::uint64_t> slot_stream(prog.slots, 0);
  std::size_t next_backend_event = 0;
  auto backend_events_until = [&](std::size_t end, std::uint64_t stream, std::int64_t time_us) {
    for (; next_backend_event < end; ++next_backend_event) {
      const SegmentRecorder::Event& e = recorder.events()[next_backend_event];
      out.push_back({e.action, e.addr, e.size_bytes, stream, time_us});
    }
  };
  for (std::size_t i = 0; i < prog.ops.size(); ++i) {
    const Op& op = prog.ops[i];
    const std::int64_t t = prog.time_us[i];
    const auto addr = reinterpret_cast<std::uintptr_t>(slots[op.slot]);
    if (op.kind == OpKind::kAlloc) {
      slot_size[op.slot] = op.size_bytes;
      slot_stream[op.slot] = op.stream;
    }
    backend_events_until(marks[i], slot_stream[op.slot], t);
    const std::uint64_t size = slot_size[op.slot];
    const std::uint64_t stream = slot_stream[op.slot];
    switch (op.kind) {
      case OpKind::kAlloc:
        if (addr == 0) out.push_back({SnapshotAction::kOom, 0, size, stream, t});
        else if (i >= prog.initial_ops) out.push_back({SnapshotAction::kAlloc, addr, size, stream, t});
        break;
      case OpKind::kFree:
        if (addr == 0) break;
        out.push_back({SnapshotAction::kFreeRequested, addr, size, stream, t});
        out.push_back({SnapshotAction::kFreeCompleted, addr, size, stream, t});
        break;
      case OpKind::kBeginDeferred:
        if (addr != 0) out.push_back({SnapshotAction::kFreeRequested, addr, size, stream, t});
        break;
      case OpKind::kEndDeferred:
        if (addr != 0) out.push_back({SnapshotAction::kFreeCompleted, addr, size, stream, t});
        break;
    }
  }
  backend_events_until(recorder.events().size(), 0, prog.time_us.empty() ? 0 : prog.time_us.back());
  return out;
}

void mark_failed(std::vector<bool>* failed, std::uint32_t slots, std::uint32_t slot) {
  if (failed->empty()) failed->resize(slots, false);
  (*failed)[slot] = true;
}

// Appends reserved bytes after an op to `out`: the peak instead when the op raised it past `*peak_seen_bytes`, so
// that the series reaches every peak (ReplaySeries::reserved_bytes).
void sample_reserved(const Allocator& allocator, std::int64_t* peak_seen_bytes, std::vector<std::uint64_t>* out) {
  const Gauge reserved = allocator.stats().reserved_bytes;
  const bool new_peak = reserved.peak > *peak_seen_bytes;
  *peak_seen_bytes = reserved.peak;
  out->push_back(static_cast<std::uint64_t>(new_peak ? reserved.peak : reserved.current));
}

// The rest of a series once the ops have run: times, live requested bytes and failed allocations (`failed`: as
// lower_bound_of takes it).
void finish_series(const Program& prog, const std::vector<bool>& failed, ReplaySeries* series) {
  series->time_us = prog.time_us;
  series->requested_bytes.clear();
  series->requested_bytes.reserve(prog.ops.size());
  lower_bound_of(prog.ops, prog.slots, failed, /*held=*/false, &series->requested_bytes);
  series->failed_ops.clear();
  if (failed.empty()) return;
  for (std::size_t i = 0; i < prog.ops.size(); ++i) {
    if (prog.ops[i].kind == OpKind::kAlloc && failed[prog.ops[i].slot]) series->failed_ops.push_back(i);
  }
}

void empty_cache(Allocator& allocator, const ReplayOptions& options, ReplayResult* r) {
  try {
    allocator.empty_cache();
  } catch (const BackendError&) {
    if (!options.tolerate_backend_errors) throw;
    ++r->empty_cache_errors;
    allocator.check_invariants();
  }
}

}  // namespace

std::uint64_t lower_bound_bytes(const DeviceTrace& device) { return compile(device).lower_bound_bytes; }

ReplayResult replay(const Trace& trace, const DeviceTrace& device, const ReplayOptions& options) {
  // A sim backend gets the peer devices the config names (the lake), unbounded: `--cap` bounds the own one.
  std::unique_ptr<Backend> backend = make_backend(options.backend, options.config.page_bytes, false,
                                                  sim_devices_for(options.config.peer_devices));
  return replay(trace, device, options, *backend);
}

namespace {

// Nanoseconds from `first_us` to `now_us` (trace times, any int64 a file may hold): 0 when earlier, INT64_MAX
// when the difference does not fit.
std::int64_t ns_since(std::int64_t now_us, std::int64_t first_us) {
  if (now_us <= first_us) return 0;
  std::int64_t us = 0, ns = 0;
  if (__builtin_sub_overflow(now_us, first_us, &us) || __builtin_mul_overflow(us, std::int64_t{1000}, &ns)) {
    return INT64_MAX;
  }
  return ns;
}

// The trace's own time as the policy's clock: the time of the op being replayed (`op`, which the replay loop
// sets), from the first op's, converted only when the policy reads it (it does so only to weigh a move), so the
// timed loop pays one store per op. Never goes back, as a Clock must not: unordered trace times read as the
// latest seen.
class TraceClock final : public Clock {
 public:
  explicit TraceClock(const std::vector<std::int64_t>& time_us)
      : time_us_(time_us), first_us_(time_us.empty() ? 0 : time_us.front()) {}
  std::int64_t now_ns() override {
    if (op < time_us_.size()) last_ns_ = std::max(last_ns_, ns_since(time_us_[op], first_us_));
    return last_ns_;
  }
  std::size_t op = 0;

 private:
  const std::vector<std::int64_t>& time_us_;
  std::int64_t first_us_;
  std::int64_t last_ns_ = 0;
};

// How many distinct streams `prog` allocates on.
std::uint64_t streams_of(const Program& prog) {
  std::unordered_set<std::uint64_t> streams;
  for (const Op& op : prog.ops) {
    if (op.kind == OpKind::kAlloc) streams.insert(op.stream);
  }
  return streams.size();
}

// The replay over `backend`; with `recorder`, options.record is filled (the pool traces, and the time of
// draining its trace after each op is in ns_per_op).
ReplayResult replay_on(const Trace& trace, const DeviceTrace& device, const ReplayOptions& options, Backend& backend,
                       SegmentRecorder* recorder) {
  Program prog = compile(device);
  const std::uint64_t passes = std::max<std::uint64_t>(options.repeat, 1);
  repeat_program(&prog, passes);
  if (options.device_bytes != 0) backend.set_device_limit_bytes(options.device_bytes);
  // The policy's wall time is the trace's own (time_us of each op's event, from the first): its move budget
  // (move_share_permille) then decides as it did, or would have, while the workload ran.
  TraceClock clock(prog.time_us);
  // With a device lag, the gmlake policy's fence runs on a modelled device (the others take no StreamEvents).
  std::unique_ptr<LaggingStreamEvents> lagging;
  if (options.device_lag_us != 0 && options.config.policy == Policy::kGmlake) {
    lagging = std::make_unique<LaggingStreamEvents>(clock, static_cast<std::int64_t>(options.device_lag_us) * 1000);
  }
  Config config = options.config;
  if (lagging) config.cross_stream_reuse = false;  // as on the GPU: each stream keeps its own arenas
  auto allocator = std::make_unique<Pool>(config, backend, lagging.get(), &clock);  // every front end's stack
  if (recorder != nullptr) allocator->set_tracing(UINT64_MAX);

  ReplayResult r;
  r.trace = trace.name;
  r.device = device.device;
  r.policy = options.config.policy;
  r.assumed_device_waits = options.config.assume_device_waits;
  r.backend = std::string(backend.name());
  r.lower_bound_bytes = prog.lower_bound_bytes;
  r.streams = streams_of(prog);
  r.cross_stream_reuse = config.cross_stream_reuse;
  r.unknown_frees = prog.unknown_frees;
  r.pytorch_peak_reserved_bytes = recorded_peak_reserved_bytes(device);

  std::vector<void*> slots(prog.slots, nullptr);
  std::vector<std::size_t> marks;  // with a recorder: its event count after each op
  if (recorder != nullptr) marks.reserve(prog.ops.size());
  std::vector<bool> failed;  // sized on the first failure: slots whose allocation failed
  std::int64_t peak_seen_bytes = 0;  // with a series: the reserved peak after the last op sampled
  if (options.series != nullptr) {
    options.series->reserved_bytes.clear();
    options.series->reserved_bytes.reserve(prog.ops.size());
  }
  const std::uint64_t progress_every = std::max<std::uint64_t>(prog.ops.size() / 100, 1);
  const std::uint64_t block_ops = options.check_every_ops ? options.check_every_ops : progress_every;
  std::chrono::nanoseconds timed{0};
  const std::size_t half = prog.ops.size() / 2;
  BackendCounters at_half = backend.counters();
  BackendCounters at_last_pass = backend.counters();
  for (std::size_t begin = 0; begin < prog.ops.size(); begin += block_ops) {
    const std::size_t end = std::min<std::size_t>(begin + block_ops, prog.ops.size());
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = begin; i < end; ++i) {
      if (i == half) at_half = backend.counters();
      if (i == prog.last_pass_begin) at_last_pass = backend.counters();
      clock.op = i;
      const Op& op = prog.ops[i];
      void*& p = slots[op.slot];
      switch (op.kind) {
        case OpKind::kAlloc:
          try {
            p = allocator->allocate(op.size_bytes, op.stream);
          } catch (const OutOfMemoryError&) {
            ++r.ooms;
            mark_failed(&failed, prog.slots, op.slot);
            if (options.tolerate_backend_errors) allocator->check_invariants();
          } catch (const BackendError&) {
            if (!options.tolerate_backend_errors) throw;
            ++r.backend_errors;
            mark_failed(&failed, prog.slots, op.slot);
            allocator->check_invariants();
          }
          break;
        case OpKind::kFree:
          if (p) allocator->deallocate(p);
          break;
        case OpKind::kBeginDeferred:
          if (p) allocator->begin_deferred_free(p);
          break;
        case OpKind::kEndDeferred:
          if (p) allocator->end_deferred_free(p);
          break;
      }
      if (recorder != nullptr) {
        recorder->take(*allocator);
        marks.push_back(recorder->events().size());
      }
      if (options.empty_cache_every_ops != 0 && (i + 1) % options.empty_cache_every_ops == 0) {
        empty_cache(*allocator, options, &r);
      }
      if (options.series != nullptr) sample_reserved(*allocator, &peak_seen_bytes, &options.series->reserved_bytes);
      if (lagging) lagging->host_op();
    }
    timed += std::chrono::steady_clock::now() - t0;
    if (options.check_every_ops) {
      allocator->check_invariants();
      if (lagging) lagging->check_invariants();
    }
    if (options.on_progress) options.on_progress(static_cast<double>(end) / static_cast<double>(prog.ops.size()));
  }
  r.ops = prog.ops.size();
  // Failed allocations never held memory: the lower bound counts only those that succeeded, so that
  // utilization (lower bound / peak reserved) cannot exceed 1.
  if (!failed.empty()) r.lower_bound_bytes = lower_bound_of(prog.ops, prog.slots, failed);
  r.lower_bound_held_bytes = lower_bound_of(prog.ops, prog.slots, failed, /*held=*/true);
  if (options.series != nullptr) finish_series(prog, failed, options.series);
  r.stats = allocator->stats();
  r.stats.backend_calls = backend.counters();
  r.peak_reserved_bytes = static_cast<std::uint64_t>(r.stats.reserved_bytes.peak);
  r.peak_allocated_bytes = static_cast<std::uint64_t>(r.stats.allocated_bytes.peak);
  r.peak_mappings = backend.peak_mappings();
  r.backend_time_ns = r.stats.backend_calls.total_time_ns();
  r.passes = passes;
  for (std::size_t k = 0; k < kBackendCallKinds; ++k) {
    r.backend_calls_second_half.calls[k] = r.stats.backend_calls.calls[k] - at_half.calls[k];
    r.backend_calls_last_pass.calls[k] = r.stats.backend_calls.calls[k] - at_last_pass.calls[k];
    r.backend_calls_last_pass.time_ns[k] = r.stats.backend_calls.time_ns[k] - at_last_pass.time_ns[k];
  }
  if (r.peak_reserved_bytes) {
    r.utilization = static_cast<double>(r.lower_bound_bytes) / static_cast<double>(r.peak_reserved_bytes);
    r.fragmentation = 1.0 - static_cast<double>(r.peak_allocated_bytes) / static_cast<double>(r.peak_reserved_bytes);
  }
  // A modelled backend (sim:h100) charges time that the loop did not spend: added here, so ns_per_op is what
  // the allocator would cost on that GPU (its own CPU time here plus the modelled driver calls).
  const std::uint64_t modelled_ns = backend.time_is_modelled() ? r.backend_time_ns : 0;
  r.ns_per_op = r.ops ? static_cast<double>(timed.count() + static_cast<std::int64_t>(modelled_ns)) /
                            static_cast<double>(r.ops)
                      : 0;
  if (recorder != nullptr) {
    options.record->segments = allocator->segments();
    options.record->events = served_events(prog, slots, marks, *recorder);
  }
  if (lagging) {  // before the teardown, whose synchronization is not the workload's
    r.device_lag_us = options.device_lag_us;
    r.device_waits = lagging->waits();
    r.device_wait_ns = lagging->wait_ns();
  }
  allocator.reset();  // tear down before the backend it uses
  return r;
}

}  // namespace

Config replay_config(std::string_view text) {
  Config config;
  config.cross_stream_reuse = false;
  config.apply(text);
  return config;
}

ReplayResult replay(const Trace& trace, const DeviceTrace& device, const ReplayOptions& options, Backend& backend) {
  if (options.record == nullptr) return replay_on(trace, device, options, backend, nullptr);
  SegmentRecorder recorder(options.config.policy);
  return replay_on(trace, device, options, backend, &recorder);
}

}  // namespace gmlake
