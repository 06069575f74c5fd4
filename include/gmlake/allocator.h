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
  // Checks every invariant of the policy's data structures and that its stats equal a recount from them;
  // throws std::logic_error naming the first one broken. O(n): tests call it after every step.
  virtual void check_invariants() const = 0;

  virtual Policy policy() const = 0;
  virtual const Backend& backend() const = 0;
};

// The policy named by config.policy over `backend`, which must outlive the allocator. `events` (null for host
// and sim) makes the policy safe for asynchronous streams (see stream_events.h); only `gmlake` supports it yet.
// Throws Error(kConfig) when config.validate() fails, chunk_bytes is not a multiple of the backend's
// granularity, or the policy cannot take `events`.
std::unique_ptr<Allocator> make_allocator(const Config& config, Backend& backend, StreamEvents* events = nullptr);

}  // namespace gmlake
