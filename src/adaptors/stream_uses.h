// StreamUses: PyTorch's Tensor.record_stream for any Allocator, as an Allocator adaptor (the top of every Pool).
// record_stream(ptr, s) says that the block at
// `ptr`, allocated on one stream, is also used by stream `s`. When the block is later freed through
// deallocate(), its memory is not reused, by any stream, until the work queued on `s` up to the free has
// finished: the free is begun at once (begin_deferred_free: no longer allocated, still active) and completed
// (end_deferred_free) once an event recorded on each such stream at the free has finished.
//
// The algorithm is PyTorch's CUDACachingAllocator's (recordStream, insert_events, process_events,
// synchronize_and_free_events): one event per recorded stream at the free, kept in a queue per stream in the
// order recorded; each allocate first completes the frees whose events have all finished, polling each
// stream's queue from its front and stopping at its first unfinished event (a stream runs its work in order);
// an allocation that runs out of memory while frees are pending waits for all of them and retries once;
// empty_cache waits for all of them first.
//
// What it does not do: it tracks no block's use by its own stream (the allocator already frees in the
// block's stream order; PyTorch skips that stream too), and it sees only the frees made through it: a block
// freed behind its back (allocator.deallocate directly) must have no recorded streams.
//
// Without StreamEvents (host and sim backends) nothing runs asynchronously: record_stream only checks its
// pointer, and every free completes at once.
//
// Sizes are bytes, as in Allocator. Errors: those of the allocator, plus what the events throw (BackendError).
//
// Thread safety: none; a StreamUses is used under its pool's lock, with the allocator it wraps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "gmlake/allocator.h"
#include "gmlake/stats.h"
#include "gmlake/stream_events.h"

namespace gmlake {

class StreamUses final : public Allocator {
 public:
  // `events` is null when nothing runs asynchronously (host, sim). Both must outlive this object.
  StreamUses(Allocator& allocator, StreamEvents* events);
  // The allocator below from now on, which must serve the same blocks as the one before (the Pool swaps in its
  // tracer while it records, and takes it out of the call path while it does not: include/gmlake/pool.h). It
  // must outlive this object.
  void set_allocator(Allocator& allocator) { allocator_ = &allocator; }
  // Releases the events of frees still pending; their blocks stay pending in the allocator (its teardown
  // gives their memory back). Never throws.
  ~StreamUses() override;
  StreamUses(const StreamUses&) = delete;
  StreamUses& operator=(const StreamUses&) = delete;

  // Records that `stream` uses the live block starting at `ptr`. A stream already recorded for the block is
  // not recorded again; the block's own stream is not recorded at all. nullptr: nothing. Anything but a live block's
  // start (never returned, freed, interior) throws Error(kInvalidPointer) and changes nothing. Without events
  // it checks `ptr` and does nothing else. One table lookup in the allocator, one in this object.
  void record_stream(void* ptr, StreamId stream);

  // allocator.allocate(size_bytes, stream), after completing the pending frees whose events have finished
  // (nothing to do, and no cost, when none is pending). On OutOfMemoryError while frees are still pending,
  // waits for all of them (StreamEvents::wait), completes them and tries once more; the first attempt is then
  // counted in num_ooms as the allocator saw it. Throws what the allocator throws, and BackendError from
  // the events (the frees completed before it stay completed).
  void* allocate(std::uint64_t size_bytes, StreamId stream) override {
    if (pending_.empty()) return allocator_->allocate(size_bytes, stream);
    return allocate_with_pending(size_bytes, stream);
  }

  // Frees the block at `ptr`. With no stream recorded for it, allocator.deallocate(ptr) (no lookup at all when
  // no block has a recorded stream). Otherwise records one event per recorded stream, begins the deferred
  // free, and leaves it pending until every event has finished (counted in deferred_frees). Errors, each
  // changing nothing: Error(kInvalidPointer) as allocator.deallocate; BackendError when recording an event
  // fails: the events recorded before it are released, the block stays allocated with its streams recorded
  // (a free with fewer events would let another stream reuse memory the failed one may still use), and a
  // later deallocate may try again.
  void deallocate(void* ptr) override {
    if (recorded_.empty()) return allocator_->deallocate(ptr);
    deallocate_recorded(ptr);
  }

  // Waits for every pending free's events, completes those frees, then allocator.empty_cache(). Throws
  // BackendError from the events (frees completed before it stay completed) or what empty_cache throws.
  void empty_cache() override;

  // The rest of the Allocator interface is the wrapped allocator's. A deferred free begun here directly (a
  // trace's free_requested) is the caller's to complete: it is not one of this object's pending frees.
  void begin_deferred_free(void* ptr) override { allocator_->begin_deferred_free(ptr); }
  void end_deferred_free(void* ptr) override { allocator_->end_deferred_free(ptr); }
  void set_cap_bytes(std::uint64_t cap_bytes) override { allocator_->set_cap_bytes(cap_bytes); }
  void reset_peak_stats() override { allocator_->reset_peak_stats(); }
  std::vector<BlockInfo> blocks() const override { return allocator_->blocks(); }
  std::vector<SegmentInfo> segments() const override { return allocator_->segments(); }
  std::optional<BlockInfo> find_block(const void* ptr) const override { return allocator_->find_block(ptr); }
  Policy policy() const override { return allocator_->policy(); }
  const Backend& backend() const override { return allocator_->backend(); }

  // Frees begun by deallocate whose events have not all been seen finished yet.
  std::size_t pending_frees() const { return pending_.size(); }

  // allocator.stats(), with deferred_frees: the frees that had to wait for recorded streams.
  Stats stats() const override;

  // Checks the wrapped allocator's invariants, then that every block with recorded streams is live in it, every
  // pending free is pending there, and each pending free's count equals its marks still queued; throws
  // std::logic_error naming the first broken. O(n): for tests.
  void check_invariants() const override;

 private:
  using Streams = absl::InlinedVector<StreamId, 2>;
  struct Mark {  // an event recorded at a free, on one of the block's recorded streams
    StreamEvents::Token token;
    std::uintptr_t block;
  };

  void* allocate_with_pending(std::uint64_t size_bytes, StreamId stream);
  void deallocate_recorded(void* ptr);
  // Completes the frees whose marks have all finished, per stream from the oldest mark; with `wait`, waits for
  // every mark, so that nothing stays pending.
  void complete(bool wait);
  // Releases the oldest mark of `marks` and completes its block's free when it was the block's last.
  void complete_front(std::deque<Mark>& marks);

  Allocator* allocator_;  // never null
  StreamEvents* events_;
  absl::flat_hash_map<std::uintptr_t, Streams> recorded_;       // live blocks -> other streams using them
  absl::flat_hash_map<StreamId, std::deque<Mark>> marks_;        // per stream, oldest first
  absl::flat_hash_map<std::uintptr_t, std::uint32_t> pending_;  // freed blocks -> their marks not yet finished
  std::uint64_t deferred_frees_ = 0;
  std::uint64_t event_calls_ = 0;  // records, queries and waits: Stats::stream_event_calls
};

}  // namespace gmlake
