// Policy `caching`: a re-implementation of PyTorch's native CUDA caching allocator
// (c10/cuda/CUDACachingAllocator.cpp with default settings: no max_split_size, no roundup_power2_divisions,
// no garbage collection), written from its documented behaviour, so that a replay can set it beside gmlake.
//
//   - A request is rounded to 512 B and served from the small pool (<= small_request_max_bytes) or the large
//     pool. Each pool keeps its free blocks ordered by (stream, size, address); a request takes the first one
//     of its own stream that is large enough (best fit, lowest address among equals). Free blocks of other
//     streams are never used.
//   - When none fits, a new segment is made: small_segment_bytes (small pool), large_segment_bytes (large
//     requests under large_segment_threshold_bytes), else the request rounded up to large_round_bytes.
//     A segment is reserve + create + map + set_access of one chunk of that size (cudaMalloc).
//   - A block taken for a smaller request is split when the remainder is >= 512 B (small pool) or
//     > small_request_max_bytes (large pool); the request takes the low part, the rest stays free.
//   - A freed block merges with free neighbours of its segment. A segment is given back to the backend only
//     when it is one whole free block, by empty_cache or when a new segment cannot be had: then every such
//     segment is released (num_alloc_retries) and the segment tried once more before OutOfMemoryError.
//   - The cap (Config::cap_bytes, set_cap_bytes) fails a segment that would take reserved bytes past it,
//     like cudaMalloc failing under set_per_process_memory_fraction.
//   - inactive_split_bytes (PyTorch's meaning): free blocks that are not their segment's only block.
//   - allocate_at re-makes a block at a given address (PyTorch's setCheckpointPoolState, for CUDA graph trees):
//     the range is cut out of the free block that holds it, whatever the split rules above would do.
//
// Thread safety: none (wrap in SynchronizedAllocator to share).
#pragma once

#include <cstdint>

#include "gmlake/allocator.h"
#include "gmlake/backend.h"
#include "gmlake/config.h"
#include "../common/block_allocator.h"

namespace gmlake {

class CachingAllocator final : public policy::BlockAllocator {
 public:
  // `backend` must outlive the allocator. Throws Error(kConfig) when the config does not validate or its
  // segment sizes are not multiples of the backend's granularity.
  CachingAllocator(const Config& config, Backend& backend);

  // Returns a block of at least `size_bytes`, 512 B-aligned, on `stream`; nullptr for 0. Throws
  // OutOfMemoryError when no segment can be had even after releasing the cached ones.
  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  // Allocates exactly [address, address + size_bytes), on its segment's stream, counting requested_bytes as
  // asked: the block a checkpoint recorded, made again at its address (Pool::restore). The range is cut out of
  // the free block that holds it; the free pieces left before and after it stay free. size_bytes: a multiple of
  // 512 B, > 0; requested_bytes: 1 .. size_bytes. Throws Error(kInvalidArgument), changing nothing, when the
  // sizes are not so or the range is not wholly inside one free block of a segment. O(blocks of the segment).
  void* allocate_at(std::uintptr_t address, std::uint64_t size_bytes, std::uint64_t requested_bytes);
  // Releases every segment that is one whole free block.
  void empty_cache() override;
  Policy policy() const override { return Policy::kCaching; }

 private:
  std::uint64_t inactive_split_share(const policy::Block& free_block) const override;
  SegmentTally check_segment(const policy::Segment& segment) const override;

  policy::Block* free_block_holding(std::uintptr_t address, std::uint64_t size_bytes) const;
  policy::Block* take_best_fit(policy::PoolKind pool, StreamId stream, std::uint64_t rounded_bytes);
  policy::Block* new_segment(policy::PoolKind pool, StreamId stream, std::uint64_t segment_bytes);
  void release_segment(policy::Segment* segment);
  void release_free_segments();
};

}  // namespace gmlake
