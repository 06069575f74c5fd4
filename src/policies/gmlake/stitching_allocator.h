// StitchingAllocator: the `gmlake` policy, a short composer of the engine's parts.
//
// The idea (docs/design.md has the long form): placement is virtual, backing is physical.
//   - Each pool (small: requests <= small_request_max_bytes; large: the rest) has an arena (ArenaSet,
//     arena_set.h), one large reserved virtual range (per stream too when cross_stream_reuse is off). Blocks are
//     placed at 512 B granularity in its free ranges (FreeIndex), split and coalesced as in PyTorch's allocator.
//   - Physical memory is a set of chunks of several sizes (ChunkStore): 1 to max_chunk_bytes / page_bytes pages.
//     A chunk is mapped whole at a run of pages (PageMap) and backs them while any block overlaps it (ChunkUse,
//     chunk_use.h: which chunks blocks use, the idle queue, the page counts).
//   - Placement (Placer, placement.h) weighs the best-fitting free ranges (fit_candidates of them, each at its
//     start and at its end) by the pages they would still need mapped, then by the idle pages they would pin (a
//     chunk moves whole, so an idle chunk a block only partly covers is stranded while the block lives), and
//     takes the cheapest: a range already mapped costs no backend call (GMLake's stitched-block reuse).
//   - Under a cap (memory_first_under_cap, default; else past 90% of cap_bytes), memory comes first: page-sized
//     chunks and no grow-ahead, so nothing is stranded in a partly used chunk.
//   - Grow-ahead: in the large pool, a stitch that ends the block's range and is followed by unmapped pages
//     backs grow_bytes at once, so the pool grows by few large chunks (as PyTorch's 20 MiB segments).
//   - The unmapped pages of a placement are stitched (Stitcher): each run gets chunks (ChunkSource,
//     chunk_source.h) from, in order, a free chunk of at least half the run, a new chunk of the run's size while reserved bytes stay within headroom_permille
//     of the highest allocated bytes, and otherwise the memory of idle chunks, least recently idled first
//     (IdleChunks): unmapped, then mapped here if its size suits the run, or released and made anew at the run's
//     size. One set_access covers the whole run. So the backend calls of a stitch follow the number of runs and
//     chunks, not bytes, and reserved bytes grow only when no idle or free memory is left (or within headroom).
//   - The lake (peer_source.h): a run that obtain() cannot back (nothing idle, nothing free, the own device or
//     the cap refuses a page), or could back only by moving memory over the move budget while the own device
//     cannot grow, gets a chunk borrowed from a peer device (peer_devices) or lent by another process
//     (lake_socket: the ChunkProvider the Pool gives the engine), within peer_budget_bytes, for the block's own pages only (no grow-ahead while peers hold
//     memory); when the peers refuse, the own device serves it memory first. A peer chunk that turns free is
//     given back at once; cap_bytes and the headroom count the own device's bytes only. A lent chunk its lender
//     recalls takes no new block and goes back once no block uses it, at the next allocate or free
//     (serve_recalls, which the Pool calls around each).
//   - Growth chunks (growth_chunk_bytes, growth_chunk_share): where a run's chunk is new memory with nothing idle
//     or free left to move (the pool grows past its size), it covers up to growth_chunk_bytes of the run (and
//     1/growth_chunk_share of reserved bytes) instead of the block's share: few backend calls where a longer
//     batch grows the pool (ChunkSource::growth_limit).
//   - Chunks per block (chunks_per_block): a block's pages get chunks of at most 1/chunks_per_block of it, so a
//     smaller block that later lands on part of one strands little; an idle chunk a block would strand by more
//     than max_strand_bytes is re-cut first (ChunkSource::recut: unmapped, released, the pages stitched anew).
//   - Move budget (MoveBudget: move_share_permille after move_burst_ms of wall time, optionally
//     move_budget_ns_per_op): steps that move memory (releasing a free chunk to remake it, evicting an idle one,
//     a re-cut) are charged a modelled driver cost; while a bound refuses, with no cap set, the device not yet
//     found full and reserved bytes within move_headroom_permille, a new chunk is created instead; with peers
//     that may lend, a chunk is borrowed instead.
//   - Standby mappings (standby_mappings): an idle chunk evicted to back a run keeps its old mapping (address
//     space, no memory). A block placed there again while no block uses the chunk elsewhere takes it back with
//     no backend call (take_standby), so a repeating step stops moving memory once each chunk is mapped where
//     the step uses it: GMLake's stitched blocks, which keep the same physical chunks mapped at several ranges.
//   - Asynchronous streams (GPU): with StreamEvents, each stream has its own arenas, so a free range is reused
//     only by its own stream (safe in stream order); a chunk leaves its place only once a StreamFence says the
//     freeing stream's queued work has finished. When the oldest idle chunk is not known finished, a new chunk
//     is created instead, up to lag_grow_pages x page_bytes in a row, else the allocator waits (fence_waits).
//     A new stream takes over an arena of a stream that has finished (ArenaSet; arena_handover), with the
//     blocks that stream still keeps there (handover_quiet_ms); a kept block's free waits for its own stream.
//
// Invariants (check_invariants, after every step in the tests), for every arena A, chunk c and block b; each part
// checks its own first (ChunkStore, ArenaSet, FreeIndex, PageMap, ChunkUse: the equations in their headers), then
// check_invariants recounts the ones that span parts:
//   free ranges(A) + blocks(A) tile [0, A.virtual_bytes)
//   pages(b) is covered by mapped chunks of b's arena
//   c.users = #{ b : c backs b's first or last page };  used(c) <=> #{ b : pages(b) and pages(c) overlap } > 0,
//   and a chunk with users 0 that some b overlaps lies wholly inside that one b                  (mapped c)
//   every page of a block lies in an active mapping;  every PageMap entry is its chunk's active place or one
//   of its standby ones, and each standby place of a chunk is a PageMap entry; peer chunks have none
//   used_pages = sum of c.pages over mapped c used;  idle_pages = the same over the idle ones
//   reserved_bytes = sum of c.pages x page_bytes over all chunks = backend.live_chunk_bytes()
//   peer_reserved_bytes = same over chunks on peers = sum over peer devices d of backend.live_chunk_bytes(d)
//                       + the lent chunks' bytes (<= backend.live_imported_bytes())
//                       <= peer_budget_bytes (when set);  reserved_bytes - peer_reserved_bytes =
//                       backend.live_chunk_bytes(backend.device())
//   backend.live_mappings() = #mapped chunks + #standby mappings;   idle c  <=>  c's pages carry idle bits, and
//   IdleChunks holds an entry of c's idle tick over them (chunk_use.h)
//   allocated / active / requested bytes = the sums over live (and pending, for active) blocks (the live
//   table's own equations: BlockTable, block_table.h)
//   inactive_split_bytes = used_pages x page_bytes - active_bytes
// Failure atomicity: if a stitch fails (cap, backend out of memory, backend error), the block is not placed;
// chunks mapped with access for it stay mapped as idle chunks (usable later), a chunk mapped without access is
// unmapped and kept free, and the error propagates; the allocator stays consistent and usable.
// Thread safety: none (SynchronizedAllocator or the C API's lock serializes callers).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "../common/block_table.h"
#include "arena_set.h"
#include "chunk_store.h"
#include "chunk_use.h"
#include "page_geometry.h"
#include "peer_source.h"
#include "placement.h"
#include "chunk_source.h"
#include "stitcher.h"
#include "stream_fence.h"
#include "gmlake/allocator.h"

namespace gmlake::engine {

class StitchingAllocator final : public Allocator {
 public:
  // Empty per-stream arenas kept for streams that come back; at this many, they go back (ArenaSet).
  static constexpr std::uint64_t kSpareArenas = ArenaSet::kSpareArenas;
  // `events` (may be null: host, sim) tells when queued stream work has finished; with it, each stream has its
  // own arenas (cross_stream_reuse must be false) and an idle chunk moves only once the work queued on its
  // stream before it turned idle has finished. Both must outlive the allocator. Throws Error(kConfig) when the
  // config does not suit the backend (page_bytes not a multiple of its granularity) or the events.
  // `clock`: where the move budget reads wall time (null: the steady clock); must outlive the allocator.
  // `lake` (null: none): where chunks are borrowed from once the own device is full (make_peer_source: needed
  // when config.lake_socket is set, else Error(kConfig)); must outlive the allocator.
  StitchingAllocator(const Config& config, Backend& backend, StreamEvents* events = nullptr, Clock* clock = nullptr,
                     ChunkProvider* lake = nullptr);
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
  // Each maximal run of mapped pages of an arena, with its blocks and the chunks stitched into it
  // (stitching_allocator_segments.cpp). Free chunks (mapped nowhere) are in no segment: free_chunk_bytes().
  std::vector<SegmentInfo> segments() const override;
  void check_invariants() const override;
  // Takes the recalls that came in (PeerSource::take_recalls) and gives back every recalled chunk no block uses
  // (unmapped, then released: the lender is told); see allocator.h. One poll(2) while loans are out, nothing
  // otherwise. The engine never calls it itself: the Pool does, around every allocation and free.
  void serve_recalls() noexcept override;
  Policy policy() const override { return Policy::kGmlake; }
  const Backend& backend() const override { return backend_; }
  // Chunks now (tests, benchmarks): all of them, and those mapped nowhere.
  std::uint64_t live_chunks() const { return store_.live_chunks(); }
  std::uint64_t free_chunks() const { return store_.free_chunks(); }
  // Reserved bytes in chunks mapped nowhere: stats().reserved_bytes less the segments' sizes.
  std::uint64_t free_chunk_bytes() const { return page_.bytes_of(store_.free_pages()); }

 private:
  // Where a live block lies: the live table's record of it (its size, request, stream and pending free are
  // the table's).
  struct BlockPlace {
    std::uint32_t arena;
    PieceId piece;  // its piece in the arena's FreeIndex
    std::uint64_t offset;
    std::uint32_t generation;  // its arena's Arena::generation when placed (another: a kept block)
  };
  using LiveTable = policy::BlockTable<BlockPlace>;
  using Block = LiveTable::Block;
  PageNumber first_page(std::uint64_t offset) const { return page_.first_page(offset); }
  PageNumber last_page(std::uint64_t offset, std::uint64_t size_bytes) const {
    return page_.last_page(offset, size_bytes);
  }
  // Tells the stream fence that chunks of `arena` turned idle at `tick` (0: none did).
  void noted(Arena& arena, std::uint64_t tick) {
    if (tick == 0) return;
    arena.last_idle_tick = tick;
    fence_.note_idle(arena.stream, tick);
  }
  // ArenaSet's Handover: empty `arena` may pass to another stream once no work of its stream can touch its pages
  // (every idle tick of it safe, or the stream idle); returns the tick that divides before from after (0: not now).
  std::uint64_t handover_tick(const Arena& arena);
  // Maps every unmapped run of [first, last] (whose mapped chunks are used); returns the chunks mapped.
  std::uint64_t stitch(Arena& arena, PageNumber first, PageNumber last, std::uint64_t requested);
  // Backs pages [first, first + pages) (unmapped) with chunks and grants access, for the block on pages
  // [block_first, block_last]; chunks starting past `block_last` (grown ahead) are idle from the start.
  // `chunk_limit`: the largest chunk, in pages, a run of this block gets (chunks_per_block).
  std::uint64_t stitch_run(Arena& arena, PageNumber first, Pages pages, PageNumber block_first,
                           PageNumber block_last, Pages chunk_limit, std::uint64_t requested);
  // obtain() of at most min(pages, chunk_limit) pages, and with a peer source, a chunk of at most `block_pages`
  // pages (the block's own pages left in the run; 0 for pages grown ahead: never borrowed), not bounded by
  // chunk_limit, borrowed from a peer when obtain() runs out of memory or leaves an over-budget move to the peer
  // (stitching_allocator_lake.cpp). When the peers refuse, obtain() again with memory first; throws its
  // OutOfMemoryError when the own device cannot serve either.
  ChunkId obtain_or_borrow(Pages pages, Pages chunk_limit, Pages block_pages, std::uint64_t requested);
  // Pages the lake may still add beyond the own device's cap (without a budget, the pages in UINT64_MAX bytes;
  // 0 without peers).
  Pages peer_room_pages() const;
  // The lake's equations of the header comment (stitching_allocator_lake.cpp).
  void check_lake_invariants() const;
  // Gives recalled chunk `id` back if no block uses it and no queued work can touch it (evict, then release);
  // while queued work may, it makes sure a stream mark follows the chunk (StreamFence::cover), so that a later
  // call gives it back. A backend failure leaves it as it was, for the next call.
  void give_back_if_unused(ChunkId id);
  // Makes every standby mapping in pages [first, last] of `arena` (a block is about to use them) active, or
  // unmaps it where its chunk cannot come (a block uses it elsewhere, it is active in the range already, or
  // another stream's queued work may touch it): no backend call but those unmaps. Returns how many it unmapped.
  // Throws BackendError: what was done stays done (idle chunks at their new places), consistent.
  std::uint64_t take_standby(Arena& arena, PageNumber first, PageNumber last);
  // ArenaSet's Unmapper: evicts every chunk of `arena` (no block in it) once no queued work can touch any, and
  // unmaps the standby mappings in it; false (nothing done) while some may.
  bool unmap_arena(Arena& arena);
  void trim_idle(std::uint64_t max_idle_bytes);
  // Blocks until the work queued on `stream` has finished (nothing when cuStreamQuery finds it idle; a fence wait,
  // counted in fence_waits, otherwise; every stream's work when asking about `stream` fails). Before a kept
  // block's free (give_back). Never throws: when even waiting for every stream fails, the context has a sticky
  // error and runs no queued work.
  void wait_for_kept_stream(StreamId stream);
  // A block the live table has released: its pages are unused (chunks may turn idle), its range goes back to
  // the arena's free ranges, idle memory is trimmed (max_idle_mapped_bytes).
  void give_back(const Block& b);
  void* place(Arena& arena, PieceId piece, std::uint64_t offset, std::uint64_t rounded, std::uint64_t requested,
              StreamId stream);
  void update_inactive_split();

  Config config_;
  Backend& backend_;
  PageGeometry page_;             // the engine's page, handed to every part
  Pages grow_pages_;              // Config::grow_bytes in pages
  Stats stats_;
  ChunkStore store_;
  std::unique_ptr<PeerSource> peers_;  // peer_devices or the lake; set as store_'s source
  Stitcher stitcher_;
  Placer placer_;
  ChunkUse use_;
  StreamFence fence_;
  ArenaSet arenas_;
  ChunkSource source_;
  LiveTable blocks_;  // live and pending blocks by address; after stats_, which it updates
  std::vector<std::pair<PageNumber, Pages>> runs_;       // scratch: unmapped runs of a placement
  std::vector<std::pair<PageNumber, ChunkId>> standby_;  // scratch: standby mappings of a placement
};

}  // namespace gmlake::engine
