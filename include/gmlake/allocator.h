// The allocator interface every policy implements (gmlake, caching, expandable), and the factory.
//
// A policy serves blocks out of physical chunks it takes from a Backend it is given (it never owns or
// chooses one: the engine is device-agnostic and tests run on the sim and host backends with no GPU).
//
// Sizes: any size_bytes >= 1 is accepted; blocks are placed at a multiple of 512 B (kRoundBytes) and are at
// least 512 B-aligned. allocate(0) returns nullptr and changes nothing (PyTorch's answer to size 0).
//
// Streams: every block carries the stream it was allocated on. deallocate(ptr) frees it in that stream's
// order: the memory may serve that stream again at once, and other streams (when the policy shares memory
// across streams) once the free has completed. begin_deferred_free / end_deferred_free split a free whose
// completion the caller tracks (PyTorch's record_stream; a trace's free_requested ... free_completed): in
// between, the block is no longer allocated but still active, and nobody reuses its memory (StreamUses,
// stream_uses.h, builds record_stream on them).
//
// Errors: allocate throws OutOfMemoryError when the cap or the backend leaves no room, after releasing cached
// memory and retrying once (num_alloc_retries, num_ooms); deallocate of anything but a live block's start
// address (never returned, freed twice, interior pointer) throws Error(kInvalidPointer) and counts
// invalid_frees. Either way the allocator is unchanged and later calls work.
//
// Thread safety: none; an Allocator is one pool used under one lock (SynchronizedAllocator adds it).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/chunk_provider.h"
#include "gmlake/clock.h"
#include "gmlake/config.h"
#include "gmlake/stats.h"
#include "gmlake/stream_events.h"

namespace gmlake {


struct BlockInfo {
  std::uintptr_t address;
  std::uint64_t size_bytes;       // as placed (rounded)
  std::uint64_t requested_bytes;  // as asked
  StreamId stream;
  bool pending_free;              // between begin_deferred_free and end_deferred_free
};

// The pool's state in PyTorch's snapshot terms (torch.cuda.memory._snapshot()["segments"]): a segment is one
// contiguous virtual range with memory mapped behind every byte of it, cut into blocks that cover it exactly.
enum class SegmentBlockState : std::uint8_t {
  kActiveAllocated,    // handed out and not freed ("active_allocated")
  kActivePendingFree,  // freed, its free not completed yet: begin_deferred_free ("active_pending_free")
  kInactive,           // free memory of the segment ("inactive")
};
// "active_allocated", "active_pending_free", "inactive" (PyTorch's names).
inline const char* to_string(SegmentBlockState state) {
  switch (state) {
    case SegmentBlockState::kActiveAllocated: return "active_allocated";
    case SegmentBlockState::kActivePendingFree: return "active_pending_free";
    case SegmentBlockState::kInactive: return "inactive";
  }
  return "inactive";
}

struct SegmentBlock {
  std::uintptr_t address;
  std::uint64_t size_bytes;       // as placed (rounded); inactive blocks: the free bytes
  std::uint64_t requested_bytes;  // as asked; 0 for inactive blocks
  SegmentBlockState state;
};

// One physical chunk behind part of a segment: a segment of more than one chunk is stitched (gmlake) or made of
// pages mapped one by one (expandable).
struct SegmentChunk {
  std::uint64_t handle;        // the backend's ChunkHandle value
  std::uint64_t offset_bytes;  // from the segment's address
  std::uint64_t size_bytes;
};

// PyTorch's two pools: small requests (<= Config::small_request_max_bytes) and large ones.
enum class SegmentType : std::uint8_t { kSmall, kLarge };

struct SegmentInfo {
  std::uintptr_t address;
  std::uint64_t size_bytes;           // PyTorch's total_size
  StreamId stream;                    // 0 for a gmlake arena shared by every stream
  SegmentType type;
  bool is_expandable;                 // its mapped range grows and shrinks (expandable, gmlake)
  std::vector<SegmentBlock> blocks;   // in address order, covering [address, address + size_bytes) exactly
  std::vector<SegmentChunk> chunks;   // in offset order, covering the segment exactly
};

class Allocator {
 public:
  virtual ~Allocator() = default;

  virtual void* allocate(std::uint64_t size_bytes, StreamId stream) = 0;
  virtual void deallocate(void* ptr) = 0;
  virtual void begin_deferred_free(void* ptr) = 0;
  virtual void end_deferred_free(void* ptr) = 0;

  // Returns every free physical chunk to the backend (torch.cuda.empty_cache). Blocks stay where they are.
  virtual void empty_cache() = 0;
  // Sets the cap on reserved bytes (0 = none). Memory already reserved above it is kept until freed.
  virtual void set_cap_bytes(std::uint64_t cap_bytes) = 0;

  virtual Stats stats() const = 0;
  virtual void reset_peak_stats() = 0;

  // Live and pending blocks, in address order. O(n): for tests and snapshots, not the hot path.
  virtual std::vector<BlockInfo> blocks() const = 0;
  // The live or pending block that starts at `ptr`; nullopt for anything else (nullptr, an interior pointer, a
  // block whose free has completed, a pointer never returned). One table lookup; changes nothing.
  virtual std::optional<BlockInfo> find_block(const void* ptr) const = 0;
  // Every segment of the pool, in address order (see SegmentInfo): for `caching` each cudaMalloc-like
  // segment; for `expandable` each contiguous mapped range of a stream's expandable segment (as PyTorch's
  // snapshot reports expandable segments); for `gmlake` each maximal run of mapped pages of an arena, with the
  // chunks stitched into it. Sizes in bytes. Every segment's blocks add up to its size without gaps; the
  // active_allocated blocks add up to stats().allocated_bytes (and their requested_bytes to requested_bytes),
  // the active ones to active_bytes, the segments to reserved_bytes less the reserved memory mapped nowhere
  // (gmlake's free chunks, a chunk parked after a failed release). O(n log n) in blocks and chunks: for
  // snapshots and tests, not the hot path. Changes nothing; thread safety: none (as every call here).
  virtual std::vector<SegmentInfo> segments() const = 0;
  // Checks every invariant of the policy's data structures and that its stats equal a recount from them;
  // throws std::logic_error naming the first one broken. O(n): tests call it after every step.
  virtual void check_invariants() const = 0;

  // Serves what the pool's lake asked back (chunk_provider.h): takes the recalls that came in and gives back every
  // recalled chunk that no block uses and no queued work can touch. Best effort: never throws, and what could not
  // be done is tried again at the next call. A policy without a lake does nothing (the default). The Pool calls it
  // before every allocation and after every free when it has a lake (lake_socket); the adaptors do not forward
  // it. Thread safety: the policy's (its caller's lock).
  virtual void serve_recalls() noexcept {}

  virtual Policy policy() const = 0;
  virtual const Backend& backend() const = 0;
};

// The policy named by config.policy over `backend`, which must outlive the allocator. `events` (null for host
// and sim) makes the policy safe for asynchronous streams (see stream_events.h); only `gmlake` supports it yet.
// Throws Error(kConfig) when config.validate() fails, page_bytes is not a multiple of the backend's
// granularity, the policy cannot take `events`, or the policy is `async` and the backend has no stream-ordered
// pool (Backend::make_stream_ordered_pool: host and sim have none; src/policies/async/async_allocator.h).
// `clock` (null: the steady clock) is where `gmlake` reads wall time for its move budget
// (Config::move_share_permille); it must outlive the allocator. `lake` (null: none) is where `gmlake` borrows
// chunks once its own device is full (chunk_provider.h: the Pool makes one from config.lake_socket); it must
// outlive the allocator; `gmlake` with lake_socket set and no lake throws Error(kConfig), the other policies do
// not use it.
std::unique_ptr<Allocator> make_allocator(const Config& config, Backend& backend, StreamEvents* events = nullptr,
                                          Clock* clock = nullptr, ChunkProvider* lake = nullptr);

}  // namespace gmlake
