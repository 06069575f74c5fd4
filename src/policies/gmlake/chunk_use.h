// ChunkUse: which mapped chunks the blocks use and which are idle, with the page counts the policy's growth and
// its statistics read. The idle ones wait in IdleChunks, least recently idled first (GMLake's stitched-block
// cache: a range stays mapped after its blocks are freed and serves the next block placed there with no backend
// call).
//
// Only active mappings count (chunk_store.h): a block's pages are all active ones, so use() and unuse() see no
// standby mapping. A block overlapping pages [first, last] of an arena uses every chunk mapped there (a chunk moves whole, so a
// block that covers one page of it holds all of it). So, for every mapped chunk c and the counts kept here:
//   c.users = #{ blocks b : pages(b) and pages(c) overlap }       (StitchingAllocator::check_invariants: it
//                                                                    knows the blocks)
//   used_pages() = sum of c.pages over mapped c with users > 0;   idle_pages() = the same with users == 0
//   idle_chunks() = #{ mapped c : users == 0 };   c idle  <=>  the queue holds c at c.idle_since
// (all but the first recounted from the chunk store by check_invariants). Chunks that no block can overlap yet
// (mapped for a block being placed, users 1 until the run is whole) count as used.
// Thread safety: none (the policy's lock).
#pragma once

#include <cstdint>

#include "arena.h"
#include "chunk_store.h"
#include "idle_chunks.h"

namespace gmlake::engine {

class ChunkUse {
 public:
  // `store` must outlive this.
  explicit ChunkUse(ChunkStore& store) : store_(store) {}

  // A block now overlaps pages [first, last] of `arena`: users + 1 on each chunk mapped there.
  void use(const Arena& arena, PageNumber first, PageNumber last);
  // A block no longer overlaps them: users - 1; chunks left unused turn idle. Returns the tick they turned idle
  // at (for the stream fence), or 0 when none did.
  std::uint64_t unuse(const Arena& arena, PageNumber first, PageNumber last);
  // Chunk `id`, just mapped for the block being placed, is used by it (users 1).
  void mapped_for_block(ChunkId id);
  // Free chunk `id` was given an active place again (a standby mapping activated, no backend call): it is idle
  // there, with a new tick, until use() counts the block that takes it.
  void mapped_idle(ChunkId id);
  // Chunks of pages [block_last + 1, last] that lie wholly past the block (grown ahead: counted as the block's
  // while their run was stitched) turn idle. Returns their tick, or 0 when none did.
  std::uint64_t idle_past(const Arena& arena, PageNumber block_last, PageNumber last);
  // A chunk of `pages` pages, used or idle as `was_used` says, was unmapped (evicted, or a stitch undone).
  void unmapped(Pages pages, bool was_used);

  // The chunk idle the longest; requires idle_chunks() != 0 (throws std::logic_error when the queue disagrees).
  ChunkId oldest_idle();
  // A new tick: every chunk idle now turned idle before it (StreamFence marks and waits use it).
  std::uint64_t next_tick() { return idle_.next_tick(); }
  // Calls f(id) for every idle chunk, oldest first (checks).
  template <typename F>
  void for_each_idle(F&& f) const {
    idle_.for_each_current(store_, f);
  }

  // Recounts used_pages(), idle_pages() and idle_chunks() from the store's mapped chunks and checks that every
  // idle chunk is queued (above) and the queue's order; throws std::logic_error (engine_checks.h). O(chunks).
  void check_invariants() const;

  Pages used_pages() const { return used_; }
  Pages idle_pages() const { return idle_pages_; }
  std::uint64_t idle_chunks() const { return idle_chunks_; }

 private:
  // Chunk `c` (id `id`) turns idle at `tick`: queued (unuse, the walk of every freed block, writes the same into
  // room made for the block's chunks, IdleChunks::room). The walks that turn chunks idle add up the pages and
  // chunks in raw locals and count them once at the end (count_idle): the walk writes chunk records, which the
  // compiler must otherwise assume alias the counters, and a Pages local summed in the walk cost GCC an
  // instruction per chunk.
  void turn_idle(ChunkId id, Chunk& c, std::uint64_t tick) {
    c.idle_since = tick;
    idle_.push(id, tick);
  }
  // `pages` pages of `chunks` chunks, used until now, turned idle.
  void count_idle(Pages pages, std::uint64_t chunks) {
    used_ -= pages;
    idle_pages_ += pages;
    idle_chunks_ += chunks;
  }

  ChunkStore& store_;
  IdleChunks idle_;
  Pages used_;                     // pages of mapped chunks with users > 0
  Pages idle_pages_;               // pages of mapped chunks with users == 0
  std::uint64_t idle_chunks_ = 0;  // those chunks
};

}  // namespace gmlake::engine
