// ChunkStore: the physical chunks of one allocator, of several sizes, and the free ones among them.
//
// A chunk is one physical allocation (cuMemCreate) of `pages` x page_bytes, 1 <= pages <= the chunk limit of the
// block it was made for (ChunkSource::chunk_limit). The store creates and releases them through the backend and
// keeps every chunk's record; the chunks that are mapped nowhere ("free") are indexed by size, so the largest
// free chunk of at most n pages is found in O(log f). Which pages a chunk backs is the business of the arenas'
// PageMaps and of the Stitcher, which fill in `arena`, `first_page` and `users`.
//
// States of a chunk (the allocator moves them; the Stitcher is the only one that maps and unmaps):
//   free    arena == kUnmapped, users == 0, in the free index
//   used    mapped, a live or pending block overlaps its pages (`users` counts those it backs an end page of:
//           chunk_use.h)
//   idle    mapped, no block overlaps it (in an IdleChunks span since its tick: GMLake's stitched-block cache;
//           ChunkUse tells it from a chunk inside a block, which also has users == 0)
// "Mapped" is the chunk's active place (arena, first_page): where blocks may use it. A chunk may also keep
// standby mappings (`standby`, at most Config::standby_mappings of them, oldest first): places it was mapped at
// before it moved, left mapped (address space, no memory) so that a block placed there again takes it back with
// no backend call while no block uses it at its active place. A free chunk may have standby mappings too; a peer
// chunk never has one. Every mapping, active or standby, is a PageMap entry and a backend mapping.
// Peer chunks (the lake, peer_source.h): a chunk created on a peer device (create(pages, device)) or lent by
// another process (adopt) carries on_peer; it counts in peer_reserved_bytes as well, release gives it back
// through its PeerSource, and add_free does so at once (it enters the free index only when that fails).
// A recalled chunk (its lender asked for it back, recall()) takes no new block and goes back once no block
// uses it; recalled() lists them until they are released.
// Invariants (checked by StitchingAllocator::check_invariants):
//   reserved_bytes      = sum over live chunks of pages x page_bytes = backend.live_chunk_bytes()
//   peer_reserved_bytes = sum over live chunks on peers of pages x page_bytes = peer_bytes()
//   free_pages          = sum over free chunks of pages
//   recalled()          = the live chunks with recalled set, all of them on_peer and none in the free index
//
// Sizes: chunk sizes are multiples of page_bytes (the backend granularity: cuMemGetAllocationGranularity, 2 MiB
// on current NVIDIA GPUs). A driver call on a large chunk costs little more than one on a small chunk (the
// per-size table in docs/benchmarks.md, "Reference: CUDA VMM call costs", and bench/cuda/vmm_costs_h100.json),
// so a run backed by fewer, larger chunks needs fewer calls: hence several sizes.
// Errors: create() throws OutOfMemoryError or BackendError from the backend and then changes nothing;
// release() throws BackendError and then changes nothing (the chunk stays free).
// Thread safety: none.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/inlined_vector.h"
#include "page_geometry.h"
#include "page_map.h"
#include "gmlake/backend.h"
#include "gmlake/stats.h"

namespace gmlake::engine {

class PeerSource;

// A place a chunk is mapped at: page `first_page` of arena `arena`. For a standby mapping, also when it stopped
// being the chunk's active place: work queued on the arena's stream before idle tick `left_tick` may still touch
// it, so it is unmapped only once the StreamFence finds that tick safe (the chunk itself may have moved on in
// stream order, with no fence: the mapping's own last use is what counts). A block placed on it again is safe
// without the fence: it is on the same arena's stream, after that work. Only a fence with stream events reads
// left_tick: without them (host, sim) it is left 0, not looked up. Places are equal when arena and page are.
struct ChunkPlace {
  std::uint32_t arena;
  PageNumber first_page;
  std::uint64_t left_tick = 0;
  bool operator==(const ChunkPlace& o) const { return arena == o.arena && first_page == o.first_page; }
};

// 128 bytes (alignas(64) rounds its 104 up): the per-chunk walks find record `id` at base + id * 128, one shift,
// where 104 takes several instructions.
struct alignas(64) Chunk {
  static constexpr std::uint32_t kUnmapped = UINT32_MAX;
  ChunkHandle handle;
  Pages pages;                        // 0: this record is unused
  std::uint32_t arena = kUnmapped;    // the arena it is mapped in
  std::uint32_t users = 0;            // blocks it backs an end page of (mapped chunks only: chunk_use.h)
  PageNumber first_page;              // where it is mapped in `arena`
  bool on_peer = false;               // made on a peer device or lent by another process (the lake)
  bool recalled = false;              // its lender wants it back: no new block on it (ChunkStore::recall)
  absl::InlinedVector<ChunkPlace, 2> standby;  // standby mappings, oldest first (none on peer chunks)
  std::uint64_t free_seq = 0;         // its key in the free index while free (ChunkStore::add_free)
  bool mapped() const { return arena != kUnmapped; }
  // Its standby mapping at page `page` of arena `in_arena`, or standby.end() when it has none there.
  auto standby_at(std::uint32_t in_arena, PageNumber page) {
    return std::find(standby.begin(), standby.end(), ChunkPlace{in_arena, page});
  }
  auto standby_at(std::uint32_t in_arena, PageNumber page) const {
    return std::find(standby.begin(), standby.end(), ChunkPlace{in_arena, page});
  }
  // True when the mapping at page `page` of arena `in_arena` is the chunk's active place (else a standby one).
  bool active_at(std::uint32_t in_arena, PageNumber page) const { return arena == in_arena && first_page == page; }
};
static_assert(sizeof(Chunk) == 128, "a chunk record is 128 bytes (see Chunk)");

class ChunkStore {
 public:
  // `stats` receives reserved_bytes, peer_reserved_bytes, chunks_created and chunks_released; it must outlive
  // the store.
  ChunkStore(Backend& backend, PageGeometry page, Stats& stats) : backend_(backend), page_(page), stats_(stats) {}

  // Creates a chunk of `pages` pages (free, not yet in the free index: the caller maps it). Throws as above.
  ChunkId create(Pages pages) { return create(pages, backend_.device()); }
  // The same on `device` (the backend's own device, or a peer: then on_peer).
  ChunkId create(Pages pages, DeviceId device);
  // Records live chunk `handle` of `pages` pages that a PeerSource made (a loan, imported): on_peer, free and
  // not in the free index. Throws std::bad_alloc only (then nothing is recorded).
  ChunkId adopt(ChunkHandle handle, Pages pages);
  // Where peer chunks go back (make_peer_source sets it; null: the backend releases them like any chunk). It
  // must outlive the store's releases.
  void set_peer_source(PeerSource* source) { peers_ = source; }
  // Releases free chunk `id` (which must not be in the free index): a peer chunk through its PeerSource. Throws
  // BackendError or Error(kInvalidArgument) from the backend (nothing changed).
  void release(ChunkId id);
  // Marks peer chunk `id` recalled (once; a chunk not on_peer is left as it is), and takes it out of the free
  // index if it is there: a recalled chunk never serves a new block.
  void recall(ChunkId id);
  // The live recalled chunks, oldest recall first.
  const std::vector<ChunkId>& recalled() const { return recalled_; }
  // The live chunk whose handle is `handle`, or kNoChunk. O(chunks): for recalls.
  ChunkId find(ChunkHandle handle) const;

  // Free index: chunks mapped nowhere. A chunk on a peer is released instead (given back first), and indexed
  // only when that fails (BackendError, swallowed: it is tried again whenever it is taken and freed again).
  // A recalled chunk whose release fails stays out of the index (no new block may use it): it is free but
  // unindexed until a later release (StitchingAllocator::serve_recalls) succeeds.
  void add_free(ChunkId id) {
    if (chunks_[id].on_peer && release_quietly(id)) return;
    if (chunks_[id].recalled) return;
    chunks_[id].free_seq = ++free_seq_;
    free_.emplace(FreeKey{chunks_[id].pages, chunks_[id].free_seq}, id);
    free_pages_ += chunks_[id].pages;
  }
  // The largest free chunk of at most `pages` pages, or kNoChunk; it stays in the index.
  ChunkId largest_free_at_most(Pages pages) const;
  // The largest free chunk, or kNoChunk.
  ChunkId largest_free() const { return free_.empty() ? kNoChunk : std::prev(free_.end())->second; }
  // Removes free chunk `id` from the index (to map or release it).
  void take_free(ChunkId id);
  Pages free_pages() const { return free_pages_; }
  std::uint64_t free_chunks() const { return free_.size(); }
  // Releases every free chunk; stops at the first failure (BackendError), leaving that chunk and the rest free.
  void release_all_free();

  Chunk& operator[](ChunkId id) { return chunks_[id]; }
  const Chunk& operator[](ChunkId id) const { return chunks_[id]; }
  // The records, indexed by ChunkId, as one array: for the per-chunk walks, which keep its address in a register
  // (records()[id] is (*this)[id]). Valid until the next create() or adopt().
  Chunk* records() { return chunks_.data(); }
  std::uint64_t live_chunks() const { return chunks_.size() - spare_.size(); }
  // Calls f(id, chunk) for every live chunk.
  template <typename F>
  void for_each(F&& f) const {
    for (ChunkId id = 0; id < chunks_.size(); ++id) {
      if (chunks_[id].pages != Pages{0}) f(id, chunks_[id]);
    }
  }
  // The page its chunks are counted in (the engine's PageGeometry).
  PageGeometry page() const { return page_; }
  // Bytes of live chunks on peer devices (Stats::peer_reserved_bytes).
  std::uint64_t peer_bytes() const { return static_cast<std::uint64_t>(stats_.peer_reserved_bytes.current); }
  // Checks the free index against the chunks' records (throws std::logic_error).
  void check_invariants() const;

 private:
  // release(id); false when the backend refused (BackendError, or any other Error: then nothing changed).
  bool release_quietly(ChunkId id);
  // Takes free chunk `id` out of the index; false when it is not there.
  bool erase_free(ChunkId id);

  ChunkId record(ChunkHandle handle, Pages pages, bool on_peer);

  Backend& backend_;
  PageGeometry page_;
  Stats& stats_;
  PeerSource* peers_ = nullptr;
  std::vector<ChunkId> recalled_;
  std::vector<Chunk> chunks_;
  std::vector<ChunkId> spare_;                    // unused records
  // The free index: (pages, order of entry) -> free chunk. Among chunks of one size the latest entered is the
  // last, and each chunk is found by its own key (Chunk::free_seq) in O(log f), however many share its size.
  using FreeKey = std::pair<Pages, std::uint64_t>;
  absl::btree_map<FreeKey, ChunkId> free_;
  std::uint64_t free_seq_ = 0;  // entries made into the free index
  Pages free_pages_;
};

}  // namespace gmlake::engine
