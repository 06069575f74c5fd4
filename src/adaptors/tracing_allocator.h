// TracingAllocator: the memory history PyTorch's torch.cuda.memory._record_memory_history() keeps, for any
// Allocator: while tracing is on, each call's events are appended, in order, as PyTorch's trace entries
// (snapshot_writer.h: alloc, free_requested, free_completed, segment_map, segment_unmap, oom), and a front end
// takes them with drain() (the PyTorch extension drains after each call and adds its Python frames).
//
// What it records: allocate -> alloc (addr, the size asked, stream) or oom (size asked; addr 0); deallocate ->
// free_requested then free_completed; begin_deferred_free -> free_requested; end_deferred_free ->
// free_completed; and, as the BackendObserver of the pool's backend (the Pool registers it), each successful
// map and unmap -> segment_map / segment_unmap (stream 0: the pool's, not a block's). Times are microseconds
// since the Unix epoch (system clock), as PyTorch's time_us.
//
// Bound: at most max_events are kept undrained; older ones are dropped first and counted (dropped_events()).
// Cost with tracing off: one branch per call.
//
// Sizes are bytes; errors are the inner allocator's (a call that throws records only its oom, if it is one).
// Thread safety: none, like every Allocator (the pool's lock covers it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "forwarding_allocator.h"
#include "gmlake/allocator.h"
#include "gmlake/backend.h"
#include "gmlake/snapshot_writer.h"

namespace gmlake {

class TracingAllocator final : public ForwardingAllocator, public BackendObserver {
 public:
  explicit TracingAllocator(std::unique_ptr<Allocator> inner) : ForwardingAllocator(std::move(inner)) {}

  // Starts tracing (max_events >= 1 undrained events kept), or stops it (max_events = 0: events not yet drained
  // stay drainable). Starting again keeps what is there and applies the new bound.
  void set_tracing(std::uint64_t max_events);
  bool tracing() const { return max_events_ != 0; }
  // Moves the oldest `max` events recorded since the last drain (all by default), oldest first, to the end of
  // *out; the rest stay for the next drain.
  void drain(std::vector<SnapshotEvent>* out, std::size_t max = SIZE_MAX);
  std::uint64_t dropped_events() const { return dropped_; }

  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  void deallocate(void* ptr) override;
  void begin_deferred_free(void* ptr) override;
  void end_deferred_free(void* ptr) override;

  // Records an alloc entry for the live block at `ptr`, which a layer below made without an allocate call
  // (Pool::restore's allocate_at). Nothing for a pointer that is not a live block's start.
  void record_placed(void* ptr) noexcept;

  void on_map(std::uintptr_t addr, std::uint64_t size_bytes) noexcept override;
  void on_unmap(std::uintptr_t addr, std::uint64_t size_bytes) noexcept override;

 private:
  void record(SnapshotAction action, std::uint64_t addr, std::uint64_t size_bytes, StreamId stream) noexcept;

  std::uint64_t max_events_ = 0;  // 0: not tracing
  std::deque<SnapshotEvent> events_;
  std::uint64_t dropped_ = 0;
};

}  // namespace gmlake
