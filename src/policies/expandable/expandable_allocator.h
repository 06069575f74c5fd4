// Policy `expandable`: a re-implementation of PyTorch's caching allocator with expandable_segments:True
// (c10/cuda/CUDACachingAllocator.cpp, Note [Expandable Segments]), written from its documented behaviour.
//
//   - Rounding, pools and best fit as `caching` (request_sizing.h), over free *mapped* blocks only; as in
//     PyTorch, a free block followed by unmapped space counts, for best fit, as large as it could grow, so a
//     request prefers another block of adequate size to the segment's growing end.
//   - Each (stream, pool) has one virtual segment, reserved on first use: expandable_virtual_bytes rounded
//     down to the pool's page (small_segment_bytes for the small pool, large_segment_bytes for the large
//     one). Blocks tile it; each is mapped or unmapped, and only blocks in the same mapped state merge.
//   - When no free mapped block fits, the segment grows (PyTorch's find_expandable_block / map_block): from
//     the stream's lowest-address unmapped range, or the free block right before it, the allocator maps just
//     enough whole pages (create per page, map per page, one set_access over the new range) that the free
//     prefix plus the new pages hold the request; the new pages merge with the free block before them.
//   - Split (PyTorch's should_split under expandable segments): whenever the remainder is >= 512 B, in both
//     pools.
//   - Pages are unmapped only by empty_cache and by the out-of-memory path: every whole page lying inside a
//     free mapped block is unmapped and released; the range becomes unmapped and merges with unmapped
//     neighbours; a segment left wholly unmapped is given back (address_free). The OOM path then retries once
//     (num_alloc_retries) before OutOfMemoryError.
//   - The cap fails a growth whose new pages would take reserved bytes past it.
//   - reserved_bytes = mapped page bytes. inactive_split_bytes = free mapped bytes in pages that also hold
//     part of an active block (memory empty_cache cannot give back). PyTorch itself leaves expandable blocks
//     out of inactive_split entirely; we count what the stat means instead.
//
// Thread safety: none (wrap in SynchronizedAllocator to share).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/backend.h"
#include "gmlake/config.h"
#include "../common/block_allocator.h"
#include "../common/block_sets.h"

namespace gmlake {

class ExpandableAllocator final : public policy::BlockAllocator {
 public:
  // `backend` must outlive the allocator. Throws Error(kConfig) when the config does not validate, a page
  // size is not a multiple of the backend's granularity, or expandable_virtual_bytes holds no page.
  ExpandableAllocator(const Config& config, Backend& backend);

  // Returns a block of at least `size_bytes`, 512 B-aligned, on `stream`; nullptr for 0. Throws
  // OutOfMemoryError when the segment cannot grow enough even after unmapping free pages.
  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  // Unmaps and releases every whole page inside a free block; gives back wholly unmapped segments.
  void empty_cache() override;
  void check_invariants() const override;
  Policy policy() const override { return Policy::kExpandable; }

 private:
  struct Growth {
    policy::Block* unmapped;  // a kUnmapped block whose first `bytes` get mapped
    std::uint64_t bytes;
  };

  std::uint64_t inactive_split_share(const policy::Block& free_block) const override;
  SegmentTally check_segment(const policy::Segment& segment) const override;

  std::uint64_t page_bytes(policy::PoolKind pool) const;
  std::uint64_t segment_bytes(policy::PoolKind pool) const;
  policy::UnmappedBlockSet& unmapped_set(policy::PoolKind pool) { return unmapped_[policy::index(pool)]; }

  policy::Block* take_best_fit(policy::PoolKind pool, StreamId stream, std::uint64_t rounded_bytes);
  policy::Block* grow(policy::PoolKind pool, StreamId stream, std::uint64_t rounded_bytes);
  policy::Block* find_growth_start(policy::PoolKind pool, StreamId stream, std::uint64_t rounded_bytes);
  bool map_growth(policy::Block* start, std::uint64_t rounded_bytes);
  void unmap_growth(std::size_t count);
  void mark_mapped(const Growth& growth);
  void drop_unused_segment(policy::Segment* segment);
  void release_free_pages();
  void unmap_whole_pages(policy::Block* free_block);
  void insert_unmapped(policy::Block* b);

  std::array<policy::UnmappedBlockSet, policy::kPoolKinds> unmapped_;
  std::vector<Growth> growth_;          // scratch for map_growth
  std::vector<policy::Block*> blocks_;  // scratch for release_free_pages
};

}  // namespace gmlake
