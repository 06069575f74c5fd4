// StitchingAllocator: the `gmlake` policy.
//
// Design (docs/design.md has the long form):
//   - Each pool (small: requests <= small_request_max_bytes; large: the rest) has an arena: one large
//     reserved virtual range (per stream too when cross_stream_reuse is off). Blocks are placed best-fit at
//     512 B granularity in the arena's free virtual ranges, split and coalesced as in PyTorch's allocator.
//   - Physical memory is a set of equal chunks (chunk_bytes, 2 MiB). A page of an arena is backed by a chunk
//     only while a block overlaps it. Placement prefers, among the fit_candidates best-fitting ranges, one whose
//     pages are all mapped already: no backend call at all (a stitched-range reuse).
//   - Otherwise the placement's unmapped pages are *stitched*: each gets a chunk from, in order, the free
//     (unmapped) chunks, the idle mapped pages anywhere (least recently idled first: GMLake's stitched-block
//     cache eviction), and only then a newly created chunk. So new physical memory is created only when no
//     chunk anywhere is free, and peak reserved equals the peak number of pages in use: the fragmentation
//     left is only the unused bytes of partly used pages.
//   - Aliasing (chunk_mappings > 1): an eviction leaves the idle page mapped (stale) and maps its chunk at the new
//     page too; a stale page turning used takes its chunk back with no backend call when the chunk's owner
//     page is idle and fence-safe, else unmaps its stale mapping first. At most chunk_mappings per chunk.
//   - set_access is called once per contiguous run of newly mapped pages (CUDA charges per chunk, not per
//     call, but fewer calls still save the fixed cost).
//   - Asynchronous streams (GPU): with StreamEvents, each stream has its own arenas, so a free range is reused
//     only by its own stream (safe in stream order); chunks move between pages, and streams, only once a
//     StreamFence says the freeing stream's queued work has finished. When the oldest idle page is not known
//     finished, a new chunk is created instead if the cap allows, else the allocator waits (fence_waits).
// Failure atomicity: if a stitch fails (cap, backend out of memory, backend error), the block is not placed,
// pages mapped for it stay mapped as idle pages (usable later), a chunk mapped but not given access is
// unmapped and kept free, and the error propagates; the allocator stays consistent and usable.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "arena.h"
#include "stream_fence.h"
#include "gmlake/allocator.h"

namespace gmlake::engine {

class StitchingAllocator final : public Allocator {
 public:
  // `events` (may be null: host, sim) tells when queued stream work has finished; with it, each stream has its
  // own arenas (cross_stream_reuse must be false) and an idle page is unmapped only once the work queued on its
  // stream before it turned idle has finished. Both must outlive the allocator.
  StitchingAllocator(const Config& config, Backend& backend, StreamEvents* events = nullptr);
  ~StitchingAllocator() override;  // unmaps and releases everything, live blocks included; never throws

  void* allocate(std::uint64_t size_bytes, StreamId stream) override;
  void deallocate(void* ptr) override;
  void begin_deferred_free(void* ptr) override;
  void end_deferred_free(void* ptr) override;
  void empty_cache() override;
  void set_cap_bytes(std::uint64_t cap_bytes) override;
  Stats stats() const override;
  void reset_peak_stats() override { stats_.reset_peaks(); }
  std::vector<BlockInfo> blocks() const override;
  std::optional<BlockInfo> find_block(const void* ptr) const override;
  void check_invariants() const override;
  Policy policy() const override { return Policy::kGmlake; }
  const Backend& backend() const override { return backend_; }
  // Aliasing figures (tests, benchmarks): stale pages that took their chunk back with no backend call, those
  // that could not and were unmapped, and stale mappings now.
  std::uint64_t take_backs() const { return take_backs_; }
  std::uint64_t take_back_misses() const { return take_back_misses_; }
  std::uint64_t stale_pages() const { return stale_pages_; }

 private:
  struct Block {
    std::uint32_t arena;
    bool pending_free;
    std::uint64_t offset;
    std::uint64_t size_bytes;
    std::uint64_t requested_bytes;
    StreamId stream;
  };
  using BlockMap = absl::flat_hash_map<std::uintptr_t, Block>;

  Arena& arena_for(bool small, StreamId stream);
  // True when every page of the range is mapped and owns its chunk, or is stale with a chunk it can take back.
  bool fully_mapped(const Arena& arena, std::uint64_t offset, std::uint64_t size_bytes);
  std::uint64_t unmapped_pages(const Arena& arena, std::uint64_t offset, std::uint64_t size_bytes) const;
  // Marks the pages of [offset, offset+size) used and maps the empty ones; returns chunks mapped.
  std::uint64_t back_pages(Arena& arena, std::uint64_t offset, std::uint64_t size_bytes, std::uint64_t requested);
  void unuse_pages(Arena& arena, std::uint64_t first_page, std::uint64_t last_page);
  void map_run(Arena& arena, std::uint64_t first_page, std::uint64_t count, std::uint64_t requested);
  // A chunk for an empty page: `from` valid when it is the oldest idle page's chunk, still mapped there and
  // still that page's until the caller commits the move (alias_commit) after mapping it.
  struct Source {
    ChunkHandle chunk;
    PageRef from;
  };
  Source obtain_chunk(std::uint64_t requested);
  // Aliasing (chunk_mappings > 1): a chunk's owner page and the stale pages still mapped to it.
  struct ChunkState {
    PageRef owner;
    std::vector<PageRef> stale;  // oldest first; size() < chunk_mappings
  };
  // Evictions keep stale mappings: chunk_mappings > 1, and no bound on idle mappings (max_idle_mapped_bytes
  // bounds mappings, so it turns aliasing off).
  bool aliasing() const { return config_.chunk_mappings > 1 && config_.max_idle_mapped_bytes == 0; }
  Page& page_of(PageRef ref) { return arenas_[ref.arena]->pages.at(ref.page); }
  // True when the owner of stale `page`'s chunk is idle and no queued work can touch it.
  bool can_take_back(const Page& page);
  // A stale page turning used: takes its chunk back from the owner (no backend call) when can_take_back,
  // else unmaps the stale mapping (the page is then empty). Throws (page unchanged) when the unmap fails.
  void take_back_or_drop(Arena& arena, std::uint64_t page);
  // Unmaps stale page `ref`; throws, changing nothing, when the unmap fails.
  void drop_stale(PageRef ref);
  // Unmaps every stale mapping of `chunk`; throws when one fails (those dropped before stay dropped).
  void drop_all_stale(ChunkHandle chunk);
  // `chunk`, unmapped from its owner page: hands it to its newest stale page (which turns idle), or to the
  // free chunks when it has none.
  void orphan(ChunkHandle chunk);
  struct IdlePage {
    PageRef ref;
    StreamId stream;           // of its arena
    std::uint64_t idle_since;  // idle-queue tick
  };
  IdlePage oldest_idle();  // requires idle_pages_ != 0
  void evict_oldest_idle();
  bool oldest_idle_is_safe();  // requires idle_pages_ != 0
  bool cap_allows_chunk() const;
  // True when one more chunk keeps reserved bytes within headroom_permille of the peak allocated bytes and
  // within the cap, and no headroom chunk has failed for lack of device memory since the last empty_cache.
  bool within_headroom() const;
  // Creates a chunk within the cap; false (nothing changed) when the cap or the backend has no room.
  bool try_create_chunk(ChunkHandle* out);
  void trim_idle(std::uint64_t max_idle_bytes);
  void release_free_chunks();
  BlockMap::iterator find_live(void* ptr, const char* call);
  void release_block(BlockMap::iterator it);
  void return_range(std::uint32_t arena, std::uint64_t offset, std::uint64_t size_bytes);
  void* place(Arena& arena, std::uint64_t offset, std::uint64_t rounded, std::uint64_t requested, StreamId stream);
  void update_inactive_split();
  [[noreturn]] void throw_oom(std::uint64_t requested, const std::string& reason);
  std::uintptr_t page_address(const Arena& arena, std::uint64_t page) const {
    return arena.base + (page << chunk_shift_);
  }

  // What IdleQueue calls to find an arena's pages.
  auto page_tables() const {
    return [this](std::uint32_t a) -> const PageTable& { return arenas_[a]->pages; };
  }

  Config config_;
  Backend& backend_;
  unsigned chunk_shift_;
  std::uint64_t cap_bytes_;
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::uint32_t shared_arena_[2] = {UINT32_MAX, UINT32_MAX};   // [small] when cross_stream_reuse
  std::map<std::pair<StreamId, bool>, std::uint32_t> stream_arena_;  // (stream, small) otherwise
  BlockMap blocks_;
  std::vector<ChunkHandle> free_chunks_;  // created, mapped nowhere
  absl::flat_hash_map<std::uint64_t, ChunkState> chunk_states_;  // every chunk a page owns, by handle
  std::uint64_t stale_pages_ = 0;
  IdleQueue idle_;
  StreamFence fence_;
  std::uint64_t allocated_high_bytes_ = 0;  // highest allocated bytes ever (reset_peak_stats leaves it)
  bool headroom_exhausted_ = false;         // a headroom chunk found the device full; reset by empty_cache
  std::uint64_t lag_grown_chunks_ = 0;  // chunks created in a row because the oldest idle page was uncovered
  std::uint64_t idle_pages_ = 0;
  std::uint64_t used_pages_ = 0;
  std::uint64_t take_backs_ = 0;
  std::uint64_t take_back_misses_ = 0;
  Stats stats_;
};

}  // namespace gmlake::engine
