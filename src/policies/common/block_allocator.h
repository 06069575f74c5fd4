// What the two PyTorch reference policies (caching, expandable) share: blocks cut from segments (block.h),
// PyTorch's free sets (block_sets.h), splitting and coalescing, the reserved and inactive split gauges, mapping
// and unmapping pages through the backend, and the invariant walk. The live blocks, deferred frees, the
// allocated/active/requested gauges and the rejection of invalid frees are a BlockTable's (block_table.h).
//
// What differs is left to the subclasses: how a request finds memory when no free block fits (allocate), what
// empty_cache gives back, and each policy's share of inactive_split_bytes per free block.
//
// Accounting (the gauges, kept incrementally and recounted by check_invariants):
//   allocated_bytes, active_bytes, requested_bytes: the live table's (BlockTable), whose entries are exactly
//                         the kAllocated (entry not pending) and kPendingFree (entry pending) blocks, with their
//                         sizes (as placed: an unsplit block counts whole) and requested sizes
//   reserved_bytes        sum of mapped pages' sizes (chunks created and not released)
//   inactive_split_bytes  sum over kFree blocks of inactive_split_share(block)
//
// Thread safety: none, like every Allocator.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <memory_resource>
#include <string>
#include <vector>

#include "gmlake/allocator.h"
#include "gmlake/backend.h"
#include "gmlake/config.h"
#include "gmlake/stats.h"
#include "block.h"
#include "block_recycler.h"
#include "block_sets.h"
#include "block_table.h"

namespace gmlake::policy {

class BlockAllocator : public Allocator {
 public:
  // Returns every chunk and reservation still held to the backend (live blocks included: the caller is done).
  ~BlockAllocator() override;
  BlockAllocator(const BlockAllocator&) = delete;
  BlockAllocator& operator=(const BlockAllocator&) = delete;

  // deallocate(nullptr) does nothing (PyTorch's raw_delete). Anything but a kAllocated block's address throws
  // Error(kInvalidPointer), counts invalid_frees and changes nothing else (BlockTable::release).
  void deallocate(void* ptr) override;
  // begin: `ptr` must be a kAllocated block; end: a kPendingFree one; else as deallocate (nullptr included:
  // an invalid pointer).
  void begin_deferred_free(void* ptr) override;
  void end_deferred_free(void* ptr) override;
  void set_cap_bytes(std::uint64_t cap_bytes) override { cap_bytes_ = cap_bytes; }
  Stats stats() const override;
  void reset_peak_stats() override { stats_.reset_peaks(); }
  std::vector<BlockInfo> blocks() const override;
  std::optional<BlockInfo> find_block(const void* ptr) const override;
  // Each segment's mapped runs of blocks (caching: the whole segment; expandable: each run between unmapped
  // blocks), with the chunk behind each page.
  std::vector<SegmentInfo> segments() const override;
  // Walks every segment and block: coverage, links, states, set and table membership, the policy's rules
  // (check_segment) and a recount of every gauge. Throws std::logic_error naming the first broken invariant.
  void check_invariants() const override;
  const Backend& backend() const override { return backend_; }

 protected:
  // Throws Error(kConfig) when config.validate() fails or small_segment_bytes or large_segment_bytes (segment
  // or page sizes for both policies) is not a multiple of the backend's granularity. `policy`: the subclass's
  // (it words the invalid-free errors).
  BlockAllocator(Policy policy, const Config& config, Backend& backend);
  // Throws Error(kConfig) naming `key` unless `value_bytes` is a multiple of the backend's granularity.
  void require_granularity_multiple(std::uint64_t value_bytes, const char* key) const;

  // What a policy's independent recount of one segment finds.
  struct SegmentTally {
    std::uint64_t reserved_bytes = 0;
    std::uint64_t inactive_split_bytes = 0;
  };
  // The share of inactive_split_bytes of `free_block`, a function of the block and its segment only.
  virtual std::uint64_t inactive_split_share(const Block& free_block) const = 0;
  // Checks the policy's own rules for `segment` and recounts its reserved and inactive split bytes without
  // using inactive_split_share. Throws std::logic_error.
  virtual SegmentTally check_segment(const Segment& segment) const = 0;

  // --- requests ---
  // `size_bytes` rounded to 512 B; throws OutOfMemoryError (and counts num_ooms) when that overflows or passes
  // kMaxRequestBytes.
  std::uint64_t rounded_or_throw(std::uint64_t size_bytes);
  // Counts num_ooms and throws OutOfMemoryError with the current reserved/allocated figures and the cap.
  [[noreturn]] void throw_oom(std::uint64_t requested_bytes, const std::string& reason);
  // Hands out `b` (kFree, in no set) for a request: when `split`, the part past `rounded_bytes` stays free.
  void* hand_out(Block* b, std::uint64_t rounded_bytes, std::uint64_t requested_bytes, bool split);

  // --- free blocks ---
  FreeBlockSet& free_set(PoolKind pool) { return free_[index(pool)]; }
  // Marks `b` kFree and puts it in its pool's free set (no merging).
  void insert_free(Block* b);
  // Takes a kFree block out of its free set (it stays kFree).
  void erase_free(Block* b);
  FreeBlockSet::iterator erase_free(FreeBlockSet::iterator it);
  // Merges kFree `b` (in no set) with kFree neighbours and puts the result in the free set.
  void release_to_free(Block* b);

  // --- block surgery ---
  // Cuts `b` after `head_bytes` (0 < head_bytes < size); returns the new tail block, same state and stream.
  Block* split_block(Block* b, std::uint64_t head_bytes);
  // `b` takes over b->next's range; the next block object is recycled. Neither may be in a set.
  void absorb_next(Block* b);

  // --- segments and pages ---
  // True when `extra_bytes` more reserved memory stays within the cap.
  bool fits_cap(std::uint64_t extra_bytes) const;
  // Reserves an address range of `size_bytes` (a multiple of page_bytes) covered by one kUnmapped block
  // (segment->first), or returns nullptr when the backend has no address space left.
  Segment* reserve_segment(std::uint64_t size_bytes, std::uint64_t page_bytes, StreamId stream, PoolKind pool);
  // Frees a segment with no mapped page; its only block is recycled. Never throws: when address_free fails,
  // the range is parked (below).
  void free_segment(Segment* segment);
  // Creates, maps and gives access to `count` unmapped pages from `first_page` (one set_access over them).
  // Returns false, changing nothing, when the cap or the backend's memory leaves no room (out-of-memory from
  // any of those calls). Other backend errors propagate, also changing nothing. Only the pages change, not
  // the blocks.
  bool map_pages(Segment& segment, std::size_t first_page, std::size_t count);
  // Unmaps `count` mapped pages from `first_page` (one unmap) and releases their chunks. When the unmap fails
  // it throws, changing nothing; once it has succeeded the pages are gone from the segment whatever follows: a
  // chunk whose release fails is parked.
  void unmap_pages(Segment& segment, std::size_t first_page, std::size_t count);

  // --- parked resources ---
  // A release or address_free that fails once the allocator has let go of what it frees (a chunk already
  // unmapped, a range whose segment is gone) cannot leave the allocator as it was. The chunk or range is
  // parked instead: still held (a parked chunk counts in reserved_bytes), retried by retry_parked(), which the
  // release paths (empty_cache, the out-of-memory retry) call first, and by the destructor. The first such
  // failure since the last retry_parked() is kept, so that empty_cache can report it when it is done.
  void retry_parked();
  // Throws the failure kept since the last retry_parked(), if any (empty_cache's last step).
  void throw_parked_failure() const;

  const Config& config() const { return config_; }
  // The pool the policy's own sets take their nodes from.
  std::pmr::memory_resource* node_pool() { return &node_pool_; }
  Stats& counters() { return stats_; }
  const std::map<std::uintptr_t, std::unique_ptr<Segment>>& segment_map() const { return segments_; }
  [[noreturn]] void fail(const std::string& what) const;

 private:
  // The live table's record of a block: the block itself.
  struct HeldBlock {
    Block* block;
  };
  using LiveTable = BlockTable<HeldBlock>;
  // A block the live table has released goes back to the free blocks (merged with free neighbours).
  void give_back(Block* b);
  void drop_new_chunks(Segment& segment, std::size_t first_page, std::size_t count);
  // Releases a chunk the allocator holds; parks it when the backend fails. `counted`: whether reserved_bytes
  // includes it already (false for chunks just created and never mapped).
  void release_chunk(ChunkHandle chunk, std::uint64_t size_bytes, bool counted);
  void park_range(std::uintptr_t address, std::uint64_t size_bytes);
  void check_segment_blocks(const Segment& segment, std::size_t* free_blocks, std::size_t* live_blocks) const;
  void check_gauges(const Stats& recount) const;

  Config config_;
  Backend& backend_;
  std::uint64_t cap_bytes_;
  Stats stats_;
  BlockRecycler recycler_;
  std::pmr::unsynchronized_pool_resource node_pool_;  // before the containers that use it
  std::array<FreeBlockSet, kPoolKinds> free_;
  LiveTable live_;  // kAllocated and kPendingFree blocks by address; after stats_, which it updates
  std::map<std::uintptr_t, std::unique_ptr<Segment>> segments_;  // by address
  struct Parked {
    std::uint64_t start;  // a chunk handle's value, or a range's address
    std::uint64_t size_bytes;
  };
  std::vector<Parked> parked_chunks_;
  std::vector<Parked> parked_ranges_;
  std::exception_ptr parked_failure_;
};

}  // namespace gmlake::policy
