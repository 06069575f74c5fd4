// BlockPool: a fixed-size block pool. One region of memory from a Backend is cut into equal blocks; allocate
// and deallocate are O(1) pops and pushes on a free list. The free list and the per-block state live on the
// host, outside the blocks, so the pool works the same over memory the CPU cannot touch (CUDA backend).
//
// Layout: the pool reserves region_bytes x max_regions of virtual address space once and maps one region
// (one chunk) at construction. Block i starts at base + i x stride_bytes, where stride_bytes is block_bytes
// rounded up to alignment_bytes; blocks are numbered across regions without gaps (a block may straddle two
// regions: they are mapped side by side). When every mapped block is live, allocate maps one more region at
// the end of the mapped ones, if max_regions allows, else throws OutOfMemoryError. Memory goes back to the
// backend only when the pool is destroyed.
//
// Alignment: every block starts at a multiple of alignment_bytes (default alignof(std::max_align_t), 16 on
// x86-64; any power of two up to the backend's granularity; ask 256 or 512 for cudaMalloc-like alignment).
//
// Errors (the pool is unchanged after any of them):
//   - bad options at construction: Error(kInvalidArgument) (see BlockPoolOptions);
//   - exhaustion: OutOfMemoryError with requested = block_bytes, reserved = mapped bytes, allocated = live
//     blocks x stride_bytes, cap = region_bytes x max_regions; also when the backend has no memory for a new
//     region (the backend's message is in the reason);
//   - deallocate of a pointer that is not a live block's start (never returned, freed twice, interior,
//     another pool's): Error(kInvalidPointer), counted in stats().invalid_frees. deallocate(nullptr) does
//     nothing.
//
// Stats (gmlake::Stats, PyTorch's meanings): allocated_bytes = live blocks x stride_bytes, requested_bytes =
// live blocks x block_bytes, reserved_bytes = mapped bytes, num_allocs, num_frees, num_ooms, invalid_frees,
// chunks_created (= regions mapped), backend_calls. The other fields stay 0.
//
// Thread safety: none; one thread at a time. ConcurrentBlockPool (concurrent_block_pool.h) is the
// thread-safe variant. The Backend must outlive the pool and not be used by another thread meanwhile.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gmlake/backend.h"
#include "gmlake/classic/vmm_range.h"
#include "gmlake/stats.h"

namespace gmlake::classic {

struct BlockPoolOptions {
  std::uint64_t block_bytes = 0;                              // >= 1
  std::uint64_t alignment_bytes = alignof(std::max_align_t);  // a power of two <= the backend's granularity
  std::uint64_t region_bytes = 0;                             // 0: the backend's granularity; rounded up to it
  std::uint64_t max_regions = 1;                              // 1: fixed size; more: grows one region at a time
};

// How blocks are laid out in a block pool's reservation: validated options and the address arithmetic,
// shared by BlockPool and ConcurrentBlockPool.
class BlockGeometry {
 public:
  // Sentinel index_of result: not a block start.
  static constexpr std::uint64_t kNoBlock = ~std::uint64_t{0};
  // The most blocks a pool may have (block indices are 32-bit on the free lists).
  static constexpr std::uint64_t kMaxBlocks = (std::uint64_t{1} << 32) - 2;

  // Throws Error(kInvalidArgument) when block_bytes is 0; alignment_bytes is not a power of two or exceeds
  // granularity_bytes; region_bytes (rounded up to the granularity) holds no block; max_regions is 0; the
  // reservation (region x max_regions) overflows; or it would hold more than kMaxBlocks blocks.
  BlockGeometry(const BlockPoolOptions& options, std::uint64_t granularity_bytes);

  std::uint64_t block_bytes() const { return block_bytes_; }
  std::uint64_t alignment_bytes() const { return alignment_bytes_; }
  std::uint64_t stride_bytes() const { return stride_bytes_; }
  std::uint64_t region_bytes() const { return region_bytes_; }
  std::uint64_t max_regions() const { return max_regions_; }
  std::uint64_t reservation_bytes() const { return region_bytes_ * max_regions_; }
  std::uint64_t max_blocks() const { return blocks_within(reservation_bytes()); }
  // Whole blocks that fit in the first mapped_bytes of the reservation.
  std::uint64_t blocks_within(std::uint64_t mapped_bytes) const {
    return stride_shift_ >= 0 ? mapped_bytes >> stride_shift_ : mapped_bytes / stride_bytes_;
  }
  std::uintptr_t address_of(std::uintptr_t base, std::uint64_t index) const { return base + index * stride_bytes_; }
  // The index of the block that starts at `addr`, among the first `block_count` blocks at `base`; kNoBlock
  // when addr is outside them or not a block's start. O(1).
  std::uint64_t index_of(std::uintptr_t base, std::uintptr_t addr, std::uint64_t block_count) const {
    const std::uint64_t offset = addr - base;  // wraps to a huge value below base
    const std::uint64_t index = blocks_within(offset);
    if (index >= block_count || offset != index * stride_bytes_) return kNoBlock;
    return index;
  }

 private:
  std::uint64_t block_bytes_;
  std::uint64_t alignment_bytes_;
  std::uint64_t stride_bytes_;
  std::uint64_t region_bytes_;
  std::uint64_t max_regions_;
  int stride_shift_;  // log2(stride_bytes_) when it is a power of two, else -1
};

class BlockPool {
 public:
  // Reserves the pool's address space and maps its first region. `backend` must outlive the pool. Throws
  // Error(kInvalidArgument) for bad options (BlockGeometry), and what the backend throws (OutOfMemoryError,
  // BackendError), leaving nothing behind.
  BlockPool(Backend& backend, const BlockPoolOptions& options);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;
  // Returns every region to the backend, live blocks included (pointers into the pool become invalid).
  ~BlockPool() = default;

  // One block of block_bytes(), aligned to alignment_bytes(); never nullptr. O(1) (plus one region's backend
  // calls when it grows). Throws OutOfMemoryError when exhausted (see above).
  void* allocate();
  // Returns a block to the free list. O(1). Throws Error(kInvalidPointer) unless `ptr` is a live block's
  // start; nullptr does nothing.
  void deallocate(void* ptr);

  // Free blocks in the mapped regions (growth may add more). O(1).
  std::uint64_t available() const { return free_.size(); }
  // Blocks in the mapped regions, live or free.
  std::uint64_t capacity_blocks() const { return live_.size(); }
  // The most blocks the pool can grow to.
  std::uint64_t max_blocks() const { return geometry_.max_blocks(); }
  // True when ptr is the start of a live block of this pool.
  bool is_live(const void* ptr) const;
  const BlockGeometry& geometry() const { return geometry_; }
  std::uint64_t block_bytes() const { return geometry_.block_bytes(); }
  std::uint64_t alignment_bytes() const { return geometry_.alignment_bytes(); }
  const Backend& backend() const { return backend_; }

  Stats stats() const;
  void reset_peak_stats() { stats_.reset_peaks(); }
  // Checks that free + live blocks = capacity, that the free list holds each free block once, and that the
  // stats equal a recount; throws std::logic_error naming the first broken invariant. O(blocks): for tests.
  void check_invariants() const;

 private:
  void grow();
  [[noreturn]] void throw_exhausted(const std::string& reason);

  Backend& backend_;
  BlockGeometry geometry_;
  VmmRange range_;
  std::vector<std::uint32_t> free_;  // indices of free blocks; the back is allocated next (LIFO: warm reuse)
  std::vector<std::uint8_t> live_;   // per mapped block: 1 when live
  Stats stats_;
};

}  // namespace gmlake::classic
