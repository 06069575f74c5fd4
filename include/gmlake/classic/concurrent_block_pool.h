// ConcurrentBlockPool: the thread-safe BlockPool. Same layout, options, alignment and errors as BlockPool
// (block_pool.h); allocate and deallocate are lock-free: the free list is a Treiber stack of block indices
// whose head carries a 32-bit version tag against ABA (a thread would have to sleep through 2^32 pops and
// pushes between reading the head and swapping it to be fooled). Growth takes a mutex, maps a region and
// pushes its blocks in one swap; threads that find the list empty meanwhile wait on that mutex.
//
// The free-list links and the live flags live on the host (one 8-byte slot per block, allocated a segment
// at a time as regions are mapped), never inside the blocks: the blocks may be GPU memory.
//
// Errors: as BlockPool. Double free is detected exactly (the live flag is swapped atomically), also between
// threads: of two threads freeing one block at once, one succeeds and the other gets Error(kInvalidPointer).
//
// Stats: allocated_bytes and requested_bytes (current and peak), reserved_bytes, num_ooms,
// invalid_frees, chunks_created, backend_calls. num_allocs and num_frees are not counted (they would cost
// every call one more shared atomic) and stay 0.
//
// Thread safety: every member may be called from any thread at once, except the destructor. available()
// and stats() are exact when no call runs concurrently and a recent snapshot otherwise. The Backend must
// outlive the pool and must not be used by other threads while the pool grows.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/mutex.h"
#include "gmlake/classic/block_pool.h"
#include "gmlake/classic/vmm_range.h"
#include "gmlake/stats.h"

namespace gmlake::classic {

class ConcurrentBlockPool {
 public:
  // As BlockPool's constructor.
  ConcurrentBlockPool(Backend& backend, const BlockPoolOptions& options);
  ConcurrentBlockPool(const ConcurrentBlockPool&) = delete;
  ConcurrentBlockPool& operator=(const ConcurrentBlockPool&) = delete;
  // Returns every region to the backend, live blocks included. No other call may run meanwhile.
  ~ConcurrentBlockPool() = default;

  // One block; lock-free unless the pool must grow. Throws OutOfMemoryError when exhausted.
  void* allocate();
  // Lock-free. Throws Error(kInvalidPointer) unless ptr is a live block's start; nullptr does nothing.
  void deallocate(void* ptr);

  std::uint64_t available() const;
  std::uint64_t capacity_blocks() const { return capacity_blocks_.load(std::memory_order_acquire); }
  std::uint64_t max_blocks() const { return geometry_.max_blocks(); }
  bool is_live(const void* ptr) const;
  const BlockGeometry& geometry() const { return geometry_; }
  std::uint64_t block_bytes() const { return geometry_.block_bytes(); }
  std::uint64_t alignment_bytes() const { return geometry_.alignment_bytes(); }
  const Backend& backend() const { return backend_; }

  Stats stats() const;
  // As BlockPool::check_invariants; only while no other call runs.
  void check_invariants() const;

 private:
  struct Slot {
    std::atomic<std::uint32_t> next{0};  // the next free block's index + 1; 0 ends the list
    std::atomic<std::uint8_t> live{0};
  };
  static constexpr unsigned kSegmentShift = 12;  // 4096 slots per segment
  static constexpr std::uint64_t kSegmentSlots = std::uint64_t{1} << kSegmentShift;

  Slot& slot(std::uint64_t index) const { return segments_[index >> kSegmentShift][index & (kSegmentSlots - 1)]; }
  std::uint64_t index_of(const void* ptr) const;
  void grow_or_throw();
  void grow_locked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(grow_mutex_);
  [[noreturn]] void throw_exhausted(const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(grow_mutex_);
  void push_chain(std::uint32_t first, std::uint32_t last);

  Backend& backend_;
  const BlockGeometry geometry_;
  mutable absl::Mutex grow_mutex_;
  VmmRange range_ ABSL_GUARDED_BY(grow_mutex_);
  std::vector<std::unique_ptr<Slot[]>> segments_;  // sized once; an entry is set (under grow_mutex_) before its
                                                   // blocks are published
  std::uintptr_t base_;
  std::atomic<std::uint64_t> capacity_blocks_{0};
  std::atomic<std::uint64_t> num_ooms_{0};
  std::atomic<std::uint64_t> invalid_frees_{0};
  alignas(64) std::atomic<std::uint64_t> head_{0};  // (tag << 32) | (top index + 1); low half 0: empty
  std::atomic<std::int64_t> live_blocks_{0};
  alignas(64) std::atomic<std::int64_t> peak_live_blocks_{0};
};

}  // namespace gmlake::classic
