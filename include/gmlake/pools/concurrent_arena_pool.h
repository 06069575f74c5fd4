// ConcurrentArenaPool: the thread-safe ArenaPool. Same region, sizes, alignment and errors as ArenaPool
// (arena_pool.h); allocate is lock-free (one compare-and-swap on the offset, retried when another thread
// moved it). There are no markers: rolling back would free other threads' allocations.
//
// reset() may run concurrently with allocate (each allocation lands wholly before or after it), but it
// frees every allocation made before it: call it when every thread is done with the arena's memory.
//
// Stats (gmlake::Stats): allocated_bytes = used_bytes() (its peak: the most used between resets),
// reserved_bytes = capacity_bytes(), num_ooms, chunks_created, backend_calls. num_allocs and
// requested_bytes are not counted (they would cost every call a shared atomic) and stay 0.
//
// Thread safety: every member may be called from any thread at once, except the destructor.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gmlake/backend.h"
#include "gmlake/pools/vmm_range.h"
#include "gmlake/stats.h"

namespace gmlake::pools {

class ConcurrentArenaPool {
 public:
  // As ArenaPool's constructor.
  ConcurrentArenaPool(Backend& backend, std::uint64_t capacity_bytes);
  ConcurrentArenaPool(const ConcurrentArenaPool&) = delete;
  ConcurrentArenaPool& operator=(const ConcurrentArenaPool&) = delete;
  ~ConcurrentArenaPool() = default;

  // size_bytes aligned to alignment_bytes; allocate(0) returns nullptr. Lock-free. Throws
  // Error(kInvalidArgument) for a bad alignment and OutOfMemoryError when the request does not fit.
  void* allocate(std::uint64_t size_bytes, std::uint64_t alignment_bytes = alignof(std::max_align_t));
  // Frees everything (see above).
  void reset();

  std::uint64_t used_bytes() const { return offset_bytes_.load(std::memory_order_relaxed); }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  void* data() const { return range_.data(); }
  const Backend& backend() const { return backend_; }

  Stats stats() const;

 private:
  void check_alignment(std::uint64_t alignment_bytes) const;

  Backend& backend_;
  VmmRange range_;
  const std::uint64_t capacity_bytes_;
  const std::uint64_t granularity_bytes_;
  std::atomic<std::uint64_t> num_ooms_{0};
  std::atomic<std::uint64_t> peak_before_reset_bytes_{0};  // the most used before the last reset
  alignas(64) std::atomic<std::uint64_t> offset_bytes_{0};
};

}  // namespace gmlake::pools
