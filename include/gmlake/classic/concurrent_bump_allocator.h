// ConcurrentBumpAllocator: the thread-safe BumpAllocator. Same region, sizes, alignment and errors as BumpAllocator
// (bump_allocator.h), without markers (rolling back would free other threads' allocations).
//
// Thread buffers: each thread bumps inside its own buffer, a slice of thread_buffer_bytes that it claims
// from the shared offset with one compare-and-swap; inside it, allocation takes no atomic operation at all.
// Requests too large for a buffer (size + alignment > thread_buffer_bytes / 4) bump the shared offset
// directly (one compare-and-swap). thread_buffer_bytes = 0 turns buffers off: every allocation bumps the
// shared offset, and the allocator packs as tightly as the plain BumpAllocator. Buffers cost space: the unused tail
// of a buffer a thread abandons (when it needs a new one, or stops allocating) is lost until reset(), so an
// allocator may report out of memory with up to one buffer per thread unused. A thread keeps a buffer for each
// of the last 4 concurrent allocators it used.
//
// reset() frees everything, every thread buffer included. It must not run while another thread allocates
// from the allocator, nor while anyone still uses its memory (the end of a phase of work).
//
// Stats (gmlake::Stats): allocated_bytes = used_bytes(), the bytes claimed from the region (whole thread
// buffers included; its peak: the most claimed between resets), reserved_bytes = capacity_bytes(),
// num_ooms, chunks_created, backend_calls. num_allocs and requested_bytes are not counted (they would cost
// every call a shared atomic) and stay 0.
//
// Thread safety: allocate and the observers may be called from any thread at once; reset and the destructor
// as above.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "gmlake/backend.h"
#include "gmlake/classic/vmm_range.h"
#include "gmlake/stats.h"
#include "gmlake/units.h"

namespace gmlake::classic {

class ConcurrentBumpAllocator {
 public:
  static constexpr std::uint64_t kDefaultThreadBufferBytes = 64 * kKiB;

  // As BumpAllocator's constructor. thread_buffer_bytes: 0 (no buffers) or at most the capacity (else
  // Error(kInvalidArgument)); rounded up to 64 B.
  ConcurrentBumpAllocator(Backend& backend, std::uint64_t capacity_bytes,
                      std::uint64_t thread_buffer_bytes = kDefaultThreadBufferBytes);
  ConcurrentBumpAllocator(const ConcurrentBumpAllocator&) = delete;
  ConcurrentBumpAllocator& operator=(const ConcurrentBumpAllocator&) = delete;
  ~ConcurrentBumpAllocator() = default;

  // size_bytes aligned to alignment_bytes; allocate(0) returns nullptr. O(1), no atomic operation inside
  // the thread's buffer. Throws Error(kInvalidArgument) for a bad alignment, and OutOfMemoryError when
  // neither the thread's buffer nor the rest of the region can hold the request (requested = size_bytes,
  // reserved = cap = capacity_bytes(), allocated = used_bytes()).
  void* allocate(std::uint64_t size_bytes, std::uint64_t alignment_bytes = alignof(std::max_align_t));
  // Frees everything (see above).
  void reset();

  std::uint64_t used_bytes() const { return offset_bytes_.load(std::memory_order_relaxed); }
  std::uint64_t capacity_bytes() const { return capacity_bytes_; }
  std::uint64_t thread_buffer_bytes() const { return thread_buffer_bytes_; }
  void* data() const { return range_.data(); }
  const Backend& backend() const { return backend_; }

  Stats stats() const;

 private:
  struct Claim {
    std::uint64_t start;
    std::uint64_t end;
  };
  void check_alignment(std::uint64_t alignment_bytes) const;
  bool claim(std::uint64_t wanted_bytes, std::uint64_t alignment_bytes, std::uint64_t min_bytes, Claim* out);
  void* allocate_shared(std::uint64_t size_bytes, std::uint64_t alignment_bytes);
  void* allocate_buffered(std::uint64_t size_bytes, std::uint64_t alignment_bytes);
  [[noreturn]] void throw_full(std::uint64_t size_bytes);

  Backend& backend_;
  VmmRange range_;
  const std::uint64_t capacity_bytes_;
  const std::uint64_t granularity_bytes_;
  const std::uint64_t thread_buffer_bytes_;
  const std::uint64_t id_;  // unique in the process, never reused: names this allocator in the threads' buffers
  std::atomic<std::uint64_t> epoch_{0};  // resets so far: a thread's buffer from an older epoch is stale
  std::atomic<std::uint64_t> num_ooms_{0};
  std::atomic<std::uint64_t> peak_before_reset_bytes_{0};  // the most used before the last reset
  alignas(64) std::atomic<std::uint64_t> offset_bytes_{0};
};

}  // namespace gmlake::classic
