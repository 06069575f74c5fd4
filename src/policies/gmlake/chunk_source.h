// ChunkSource: where the gmlake policy gets the physical memory for a run of pages it must stitch, and the bounds
// that decide it: the cap, the device's size, the headroom, the move budget and the device's lag behind the host.
//
// For a run of `pages` unmapped pages, obtain() returns one free chunk (mapped nowhere, out of the free index) of
// 1..pages pages; where the run is longer (run_pages), up to growth_limit() pages of it: a free chunk that fits in
// the run, or a new chunk where the pool grows or re-forms (growth chunks). Which step it takes is decided by decide()
// (obtain_decision.h: the order is the policy, written and tested as one table); obtain() fills the state, carries
// the step out and asks again.
// Near the cap (memory_first_under_cap, or past 90% of cap_bytes) or near the device's end (past 90% of what the
// device holds: Backend::device_free_bytes, cuMemGetInfo on cuda) the chunks are page-sized: they move one page
// at a time and strand nothing, before a refusal comes too late.
// recut() is the other move it makes: an idle chunk that a new block would strand (cover only in part, leaving
// more than max_strand_bytes uncovered while the block lives) is unmapped and released, so that the block's pages
// get chunks of the block's own size.
// An eviction made to back a run keeps the chunk's old mapping as a standby one (Config::standby_mappings), so
// that a repeating step, which needs the chunk back there later, takes it back with no backend call.
// Moves (evictions, re-cuts, releases to remake a chunk) are weighed by MoveBudget: a share of wall time (Clock)
// after a burst, charged only with the moves made while the device waits for the host (DeviceWaits: a move
// hidden behind queued work costs the user nothing); over it, the pool grows instead, within
// move_headroom_permille, while memory does not limit.
// Counts it keeps: reserved_now() = stats.reserved_bytes - stats.peer_reserved_bytes (the own device's bytes,
// what the cap and the headroom bound); the highest allocated bytes ever seen are the Headroom's (headroom.h:
// its three allowances, note_allocated).
// Errors: OutOfMemoryError (the cap or the device refuses, nothing idle or free) or BackendError; either way
// nothing changed but moves already made, which leave the pool consistent.
// Thread safety: none (the policy's lock).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "arena_set.h"
#include "gmlake/clock.h"
#include "obtain_decision.h"
#include "chunk_sizes.h"
#include "chunk_store.h"
#include "device_waits.h"
#include "headroom.h"
#include "page_geometry.h"
#include "pages.h"
#include "chunk_use.h"
#include "move_budget.h"
#include "stitcher.h"
#include "stream_fence.h"
#include "gmlake/config.h"
#include "gmlake/stats.h"

namespace gmlake::engine {

class ChunkSource {
 public:
  // The parts it reads and moves memory through; all must outlive it.
  struct Parts {
    Backend& backend;
    ChunkStore& store;
    ChunkUse& use;
    StreamFence& fence;
    ArenaSet& arenas;
    Stitcher& stitcher;
    Stats& stats;
    Clock& clock;
  };
  // What obtain() does when the own device cannot grow and moving memory is over budget. kOwnDevice: memory
  // first, it moves anyway. kPeer (a pool whose peers may lend): the move is left to the peer (kNoChunk), and
  // chunks keep the run's size under a cap too: what the own device would strand, the peer absorbs.
  enum class OverBudget : std::uint8_t { kOwnDevice, kPeer };

  // `page`: the engine's page (Config::page_bytes). Reads cap_bytes, max_chunk_bytes, growth_chunk_bytes,
  // growth_chunk_share, waiting_growth_chunk_share, assume_device_waits, chunks_per_block, max_strand_bytes,
  // headroom_permille, waiting_headroom_permille, memory_first_under_cap, lag_grow_pages, in_order_moves,
  // move_share_permille, move_burst_ms, move_headroom_permille and move_budget_ns_per_op from `config`.
  ChunkSource(const Config& config, PageGeometry page, Parts parts);

  // An allocation on `stream` begins: what obtain() and recut() learn of the device (its free bytes) is asked at
  // most once until the next begin(), and whether the device waits for the host on `stream` is asked again.
  void begin(StreamId stream) {
    stream_ = stream;
    device_free_known_ = false;
    waits_.begin(stream);
  }
  // The largest chunk, in pages, that a block of `block_pages` pages gets for its unmapped pages (chunk_sizes.h).
  Pages chunk_limit(Pages block_pages) const { return sizes_.chunk_limit(block_pages); }
  // A free chunk for a run of `pages` pages (> 0, at most chunk_limit() of the block) for a request of
  // `requested` bytes (for the error), as above. `run_pages` (>= pages; 0: `pages`): the pages of the run still
  // unbacked. Where the chunk is growth (ObtainStep::growth: new memory, no cap, and nothing idle or free or the
  // pool below its highest allocated bytes), it covers up to min(run_pages, growth_limit()) pages instead
  // (kOwnDevice only, never near the cap or the device's end).
  ChunkId obtain(Pages pages, std::uint64_t requested, OverBudget over_budget = OverBudget::kOwnDevice,
                 Pages run_pages = Pages{0});
  // The largest growth chunk now, in pages: ChunkSizes::growth_limit of the larger of the own device's reserved
  // bytes and the highest allocated bytes, with the share for a waiting device when `device_waits` (see
  // device_waits()).
  // Growth chunks are made only where the pool grows past its size or re-forms below its highest allocated bytes:
  // the run they cover is new memory the block uses whole, so nothing is stranded when they are made, and at the
  // default (16 MiB = max_strand_bytes) a block that later lands on part of one strands less than
  // max_strand_bytes, so it is never re-cut; the share keeps what later blocks strand of them
  // a small part of the pool (utilization within 0.002 on every shipped trace: docs/benchmarks.md).
  //
  // Time: a growth chunk of n pages costs one create, map and access grant where n page-sized chunks cost n
  // (the access grant scales with the chunks, not their bytes: ../shared/REFERENCE.md). While the stream has
  // queued work that time is hidden behind it; once the device waits for the host it is on the critical path,
  // so larger growth chunks may be made there (waiting_growth_chunk_share: 768 at the default, the busy share).
  // Why the high: a pool re-forming below the size the job has held (ObtainState::below_allocated_high) makes the
  // chunks that size calls for rather than those of the few bytes reserved so far.
  Pages growth_limit(bool device_waits = false) const {
    return sizes_.growth_limit(std::max(reserved_now(), headroom_.allocated_high_bytes()), device_waits);
  }
  // True when the device waits for the host on the allocation's stream (begin()): DeviceWaits::now, which asks
  // the stream (cuStreamQuery) or, without stream events, answers Config::assume_device_waits. Throws
  // BackendError.
  bool device_waits() { return waits_.now(); }
  // A block is about to use pages [first, last] of `arena`, which would strand `stranded_pages` pages of idle
  // chunks (Placer::Cost::pinned_waste). Above max_strand_bytes, and while the move budget allows, every idle
  // chunk of its own device that the pages cover only in part and that no queued work can touch is unmapped and
  // released (counted in Stats::evictions); returns how many. Throws BackendError: chunks re-cut before stay
  // released, the rest as they were; the pool stays consistent.
  std::uint64_t recut(Arena& arena, PageNumber first, PageNumber last, Pages stranded_pages);
  // Where an evicted chunk's mapping goes: unmapped, or kept as a standby mapping (chunk_store.h) when
  // Config::standby_mappings allows (never for a peer chunk; beyond the limit the chunk's oldest standby mapping
  // is unmapped first).
  enum class EvictTo : std::uint8_t { kUnmap, kStandby };
  // Moves idle chunk `id` into the free chunks (counted in Stats::evictions), its mapping unmapped or kept as
  // `to` says. Throws BackendError: nothing changed, the chunk is still idle and queued.
  void evict(ChunkId id, EvictTo to = EvictTo::kUnmap);
  // True when no queued work can touch the standby mapping of chunk `id` at `first_page` of arena `arena` any
  // more (its left_tick is safe), so that it may be unmapped now. Throws std::logic_error when there is none.
  bool standby_safe(ChunkId id, std::uint32_t arena, PageNumber first_page);
  // True when idle chunk `id` may move to back a run of the allocation's stream (begin()) with no wait although
  // queued work may still touch it: it is on that stream's arenas (the block's work is queued after that work:
  // stream order, as PyTorch reuses a freed block on its own stream), not a peer's, and an eviction to a standby
  // mapping unmaps nothing that queued work may touch (below the standby limit, or its oldest standby mapping is
  // safe). The old mapping stays until unmap_standby, which waits for the work. Asks the fence nothing more than
  // standby_safe; never blocks.
  bool moves_in_order(ChunkId id);
  // Blocks until no work queued on `stream` before `tick` can run (StreamFence::wait_safe), counted in
  // Stats::fence_waits, fence_drains (no mark covered `tick`: the stream's whole queue drains) and fence_wait_ns
  // (the clock's time across the wait). Throws BackendError: then nothing is counted.
  void wait_for_stream(StreamId stream, std::uint64_t tick);
  // Unmaps that standby mapping, first waiting (wait_for_stream) until no queued work can touch
  // it. Throws BackendError: nothing changed.
  void unmap_standby(ChunkId id, std::uint32_t arena, PageNumber first_page);
  // Unmaps every standby mapping of chunk `id` (before it is released). Throws BackendError: those unmapped
  // before stay unmapped, the rest stay.
  void drop_standby(ChunkId id);
  // Releases every free chunk, their standby mappings unmapped first. Throws BackendError: what was released
  // stays released, the rest stays free.
  void release_all_free();
  // True when no queued work can touch idle chunk `id` any more (StreamFence; always without StreamEvents), so
  // it may be unmapped now.
  bool safe_to_evict(ChunkId id) {
    return !fence_.asynchronous() || tick_safe(arenas_[store_[id].arena], use_.idle_since(id));
  }
  // Where the work that may touch pages of `arena` idle since `tick` stands: safe below the arena's handover tick
  // (its stream before had finished all its work: ArenaSet), else the fence's word on its stream. Never blocks.
  StreamFence::Readiness readiness(const Arena& arena, std::uint64_t tick) {
    return tick < arena.handover_tick ? StreamFence::Readiness::kSafe : fence_.readiness(arena.stream, tick);
  }
  bool tick_safe(const Arena& arena, std::uint64_t tick) {
    return readiness(arena, tick) == StreamFence::Readiness::kSafe;
  }

  // One allocation earned its move credit (MoveBudget::earn).
  void earn() { moves_.earn(); }
  // Allocated bytes now: raises the highest allocated bytes that the headroom follows (peak resets leave it).
  void note_allocated(std::uint64_t allocated_bytes) { headroom_.note_allocated(allocated_bytes); }
  // empty_cache gave memory back: the device has room again, headroom and growth for time may be spent again.
  void device_has_room() { headroom_.device_has_room(); }
  // A new cap (0: none); above it, free chunks are released and idle ones evicted (after waiting for queued
  // work) until reserved bytes fit or nothing idle is left. Throws BackendError (what was done stays done).
  void set_cap_bytes(std::uint64_t cap_bytes);

  std::uint64_t cap_bytes() const { return cap_bytes_; }
  Pages max_chunk_pages() const { return sizes_.max_chunk_pages(); }
  // The own device's reserved bytes (peer chunks are not counted).
  std::uint64_t reserved_now() const {
    return static_cast<std::uint64_t>(stats_.reserved_bytes.current - stats_.peer_reserved_bytes.current);
  }
  // True when `pages` more stay within the cap (or there is none).
  bool cap_allows(Pages pages) const;
  // True when memory comes first: a cap is set and memory_first_under_cap is on, or `pages` more would take
  // reserved bytes past 90% of it, or past 90% of what the device holds (reserved + device_free_bytes).
  bool near_cap(Pages pages);
  // True when `pages` more stay within headroom_permille of the highest allocated bytes (and the cap).
  bool within_headroom(Pages pages) const;
  // True when the device waits for the host (device_waits()) and `pages` more stay within
  // waiting_headroom_permille of the highest allocated bytes (and the cap), where there is idle or free memory
  // in `s` that the plain headroom would move: a move then delays the stream's next work by its whole time, a new
  // chunk costs about as many calls and spares the moves that the next layout would make (a layout cache).
  bool within_waiting_headroom(Pages pages, const ObtainState& s);
  // Checks its own state: the move budget's equations (move_budget.h), and the headroom's (headroom.h: the highest
  // allocated bytes it follows are at least the allocated bytes now). The parts it works on (pool, use, fence,
  // arenas) are checked by their own check_invariants. Throws std::logic_error (engine_checks.h). O(1).
  void check_invariants() const;
  // Throws OutOfMemoryError for a request of `requested` bytes, with the pool's figures and `reason`.
  [[noreturn]] void throw_oom(std::uint64_t requested, const std::string& reason) const;

 private:
  Backend& backend_;
  ChunkStore& store_;
  ChunkUse& use_;
  StreamFence& fence_;
  ArenaSet& arenas_;
  Stitcher& stitcher_;
  Stats& stats_;
  PageGeometry page_;
  ChunkSizes sizes_;  // max_chunk_bytes, chunks_per_block, growth_chunk_bytes and the growth shares
  Headroom headroom_;  // headroom_permille, waiting_headroom_permille, move_headroom_permille
  Pages lag_grow_pages_;
  bool lag_grow_covered_;  // Config::lag_grow_covered
  bool memory_first_under_cap_;
  std::uint64_t cap_bytes_;
  // Releases free chunk `id` (in the free index). Throws BackendError: nothing changed, it is still free.
  void release_free(ChunkId id);
  // True when a move may be made now (MoveBudget; the clock is read only for its wall-time share, and the
  // stream asked whether the device waits only where that share would refuse).
  bool moves_allowed() {
    const bool allowed =
        moves_.allows_move(moves_.timed() ? clock_.now_ns() : 0, [this] { return device_waits(); });
    if (!allowed) ++stats_.refused_moves;
    return allowed;
  }
  // True when `pages` more stay within move_headroom_permille of the highest allocated bytes (and the cap).
  bool within_move_headroom(Pages pages) const {
    return cap_allows(pages) && headroom_.move_allows(reserved_now(), page_.bytes_of(pages));
  }
  // Chunk `id`'s standby mapping at `first_page` of `arena`; throws std::logic_error when it has none there.
  const ChunkPlace& standby_place(ChunkId id, std::uint32_t arena, PageNumber first_page) const;
  // A move was made: charged to the wall-time share only where the device waits for the host (asked only when
  // that share is bounded).
  void charge_eviction() { moves_.charge_eviction(on_critical_path()); }
  void charge_release() { moves_.charge_release(on_critical_path()); }
  // Whether a move made now is charged to the wall-time share (Stats::critical_path_moves counts those).
  bool on_critical_path() {
    const bool critical = moves_.timed() && device_waits();
    if (critical) ++stats_.critical_path_moves;
    return critical;
  }
  std::uint64_t device_free_bytes();

  Clock& clock_;
  Pages max_strand_pages_;
  std::uint64_t standby_limit_;  // Config::standby_mappings; 0 with max_idle_mapped_bytes set
  bool in_order_moves_;          // Config::in_order_moves
  MoveBudget moves_;
  bool device_free_known_ = false;  // device_free_ was asked since begin()
  StreamId stream_ = 0;             // the allocation's stream (begin())
  DeviceWaits waits_;               // Config::assume_device_waits without stream events
  std::uint64_t device_free_ = 0;
  Pages lag_grown_pages_;                   // pages created in a row because the oldest idle chunk was not safe
};

}  // namespace gmlake::engine
