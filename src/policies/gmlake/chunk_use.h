// ChunkUse: which mapped chunks the blocks use and which are idle, with the page counts the policy's growth and
// its statistics read. The idle ones wait in IdleChunks, least recently idled first (GMLake's stitched-block
// cache: a range stays mapped after its blocks are freed and serves the next block placed there with no backend
// call).
//
// Only active mappings count (chunk_store.h): a block's pages are all active ones, so use() and unuse() see no
// standby mapping. A block overlapping pages [first, last] of an arena uses every chunk mapped there (a chunk
// moves whole, so a block that covers one page of it holds all of it). Only the chunks at a block's two ends can
// have another user: every chunk between them lies wholly inside the block, whose only user it is. So a chunk's
// record counts only the blocks it is an end of, and the chunks inside a block are told from the idle ones by
// the page table's idle bits (PageMap::idle_at), which a span of chunks turned idle together sets at once, with
// its tick at its first page (PageMap::mark_idle; IdleChunks keeps the spans' order). A block placed or freed
// costs O(pages / 64) (its two end chunks, word operations on the bitmaps), not a step per chunk.
// For every mapped chunk c:
//   c.users = #{ blocks b : c backs b's first or last page }
//           + (1 while c is mapped for the block being placed and lies past it, grown ahead, until idle_past)
//   used(c)  <=>  #{ blocks b : pages(b) and pages(c) overlap } > 0  <=>  c.users > 0 or c's pages are not idle
//   (so a chunk with users 0 that is not idle lies wholly inside exactly one block)  (StitchingAllocator::
//                                                                                    check_invariants: it knows
//                                                                                    the blocks)
//   idle c  <=>  the idle bits are set on all of c's active place (else on none of it)
//          ==>  an IdleChunks entry of c's idle tick (PageMap::idle_tick) holds c's pages
//   used_pages() = sum of c.pages over mapped c used;   idle_pages() = the same over idle c
//   idle_chunks() = #{ mapped c idle }
// (all but the first recounted from the chunk store and the page tables by check_invariants). Chunks that no
// block can overlap yet (mapped for a block being placed) count as used; so do idle chunks taken for the block
// being placed (take_idle) until use() counts it.
// Thread safety: none (the policy's lock).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "arena.h"
#include "arena_set.h"
#include "chunk_store.h"
#include "idle_chunks.h"

namespace gmlake::engine {

class ChunkUse {
 public:
  // `store` and `arenas` (where the chunks are mapped) must outlive this.
  ChunkUse(ChunkStore& store, const ArenaSet& arenas) : store_(store), arenas_(arenas) {}

  // A block now overlaps pages [first, last] of `arena` (the standby mappings there taken or dropped): its end
  // chunks count it, the idle chunks there turn used. O(pages / 64).
  void use(Arena& arena, PageNumber first, PageNumber last);
  // The block on pages [first, last] (all mapped: a live block) no longer overlaps them: its end chunks stop
  // counting it, and every chunk left unused turns idle, as one span. Returns the tick they turned idle at (for
  // the stream fence), or 0 when none did. O(pages / 64).
  std::uint64_t unuse(Arena& arena, PageNumber first, PageNumber last);
  // The same for a block whose placement failed, pages [first, last] perhaps not all mapped: O(chunks).
  std::uint64_t unuse_partly_mapped(Arena& arena, PageNumber first, PageNumber last);
  // Chunk `id`, just mapped for the block being placed on pages [block_first, block_last], is used by it (users
  // 1 when it backs an end of the block or lies past it, grown ahead; else it lies inside: users 0).
  void mapped_for_block(ChunkId id, PageNumber block_first, PageNumber block_last);
  // Free chunk `id` was given an active place in `arena` again (a standby mapping activated, no backend call):
  // it is idle there, with a new tick, until use() counts the block that takes it.
  void mapped_idle(Arena& arena, ChunkId id);
  // Idle chunk `id`, whose active place is in `arena`, is about to move to a standby mapping of it in the range of
  // the block being placed (Stitcher::activate, which clears the idle bits of the place it leaves: it must come
  // next): it is no longer idle, and counts as used until use() counts the block. O(1). Throws std::bad_alloc
  // (nothing changed).
  void take_idle(Arena& arena, ChunkId id);
  // The placement failed before use(): every chunk take_idle took since the last use() is idle again at its new
  // place in `arena`, with its old tick and its old place in the queue. O(queue) each.
  void restore_taken(Arena& arena);
  // Chunks of pages [block_last + 1, last] that lie wholly past the block (grown ahead: counted as the block's
  // while their run was stitched) turn idle, as one span. Returns their tick, or 0 when none did.
  std::uint64_t idle_past(Arena& arena, PageNumber block_last, PageNumber last);
  // A chunk of `pages` pages, used or idle as `was_used` says, was unmapped or turned standby (evicted, or a
  // stitch undone; the page table cleared its idle bits).
  void unmapped(Pages pages, bool was_used);

  // True when a block uses chunk `id` (mapped; false for a free chunk). O(1).
  bool used(ChunkId id) const {
    const Chunk& c = store_[id];
    return c.mapped() && (c.users != 0 || !arenas_[c.arena].pages.idle_at(c.first_page));
  }
  // The tick idle chunk `id` turned idle at (0 for a chunk not idle). O(pages back to its span's start / 64).
  std::uint64_t idle_since(ChunkId id) const {
    const Chunk& c = store_[id];
    if (!c.mapped() || c.users != 0 || !arenas_[c.arena].pages.idle_at(c.first_page)) return 0;
    return arenas_[c.arena].pages.idle_tick(c.first_page);
  }
  // The chunk idle the longest; requires idle_chunks() != 0 (throws std::logic_error when the queue disagrees).
  ChunkId oldest_idle();
  // A new tick: every chunk idle now turned idle before it (StreamFence marks and waits use it).
  std::uint64_t next_tick() { return idle_.next_tick(); }
  // The last tick handed out (0: none yet).
  std::uint64_t last_tick() const { return idle_.last_tick(); }
  // Calls f(id) for every idle chunk, oldest first (checks). O(entries x pages).
  template <typename F>
  void for_each_idle(F&& f) const {
    idle_.for_each_entry([&](const IdleChunks::Entry& q) {
      const PageMap& map = arenas_[q.arena].pages;
      map.for_each(q.first, q.last, [&](PageNumber p, const PageMap::Entry& e) {
        if (p >= q.first && e.active && map.idle_at(p) && map.idle_tick(p) == q.tick) f(e.chunk);
      });
    });
  }

  // Recounts used_pages(), idle_pages() and idle_chunks() from the store's mapped chunks and the page tables, and
  // checks the idle bits against the chunks and the spans (above) and the queue's order; throws std::logic_error
  // (engine_checks.h). O(chunks + pages).
  void check_invariants() const;

  Pages used_pages() const { return used_; }
  Pages idle_pages() const { return idle_pages_; }
  std::uint64_t idle_chunks() const { return idle_chunks_; }

 private:
  // An idle chunk take_idle took for the block being placed, and where it was (the page table still holds its
  // span's tick there: PageMap::idle_tick).
  struct Taken {
    ChunkId id;
    std::uint32_t arena;
    PageNumber first;
  };
  // Pages [first, last] of `arena` (whole chunks, all mapped and active, none idle) turn idle at `tick`: a span
  // marked in the page table and queued; counted.
  void add_span(Arena& arena, PageNumber first, PageNumber last, std::uint64_t tick);
  // IdleChunks' first_of: the first idle chunk of queue entry `e` (kNoChunk when none is left), moving e.first up
  // to it.
  ChunkId first_of(IdleChunks::Entry& e) const;
  void compact() {
    idle_.compact_if_dead(idle_chunks_, [this](IdleChunks::Entry& e) { return first_of(e); });
  }
  // `pages` pages of `chunks` chunks, used until now, turned idle.
  void count_idle(Pages pages, std::uint64_t chunks) {
    used_ -= pages;
    idle_pages_ += pages;
    idle_chunks_ += chunks;
  }

  ChunkStore& store_;
  const ArenaSet& arenas_;
  IdleChunks idle_;
  std::vector<Taken> taken_;       // take_idle's since the last use()
  Pages used_;                     // pages of mapped chunks used
  Pages idle_pages_;               // pages of idle chunks
  std::uint64_t idle_chunks_ = 0;  // those chunks
};

}  // namespace gmlake::engine
