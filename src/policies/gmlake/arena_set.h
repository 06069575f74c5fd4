// ArenaSet: the gmlake policy's arenas (arena.h), one per pool (small: requests <= small_request_max_bytes; large:
// the rest), and per stream too when cross_stream_reuse is off (on the GPU, so that a free range is reused only in
// its own stream's order). Each is made on first use, one backend reservation of Config::arena_virtual_bytes.
//
// Streams come and go (a server may make one per request; a job that makes its side streams anew each step, as
// torch.cuda.Stream() in a loop does). A stream's first allocation in a pool takes over an empty per-stream arena
// of that pool, the one held longest, once no work of its old stream can touch it (the Handover the policy passes
// in says so): its chunks stay mapped where they are, so the new stream finds the old one's layout and moves
// nothing, where a new arena would have every chunk moved into it.
// With a clock and a quiet time (Config::handover_quiet_ms), a stream that has allocated nothing in either pool for
// that long is quiet, and its arena may pass even while it keeps a few blocks (kMaxKeptBlocks): PyTorch keeps a
// cuBLAS workspace for every stream that ran a matmul, so a finished stream's arena is never empty. Those kept
// blocks (Block::stream is not the arena's stream) stay where they are; freeing one later is the policy's business
// (it waits for the kept block's stream first). The order: the arenas of quiet streams, empty or keeping blocks,
// the quietest first (a job's new streams come in the order its old ones went quiet: each finds the arena of the
// stream in its role before), then a live stream's empty arena (the one held longest first). Only when none can be
// taken over is an arena made. The per-stream arenas with no block placed in them go back: beyond kSpareArenas of
// them whenever a new arena is made, and all of them when address space runs out, so it always comes back.
// A process has about 128 TiB of address space, the GPU's included (CUDA's unified addressing: 126 reservations of
// 1 TiB, 510 of 256 GiB on an H200, bench/cuda/va_limit_h200.json), so a job with many streams at once (each
// (stream, pool) an arena) would run out at the default 1 TiB an arena. So arena sizes halve as arenas multiply:
// the first kFullSizeArenas in use are made at Config::arena_virtual_bytes, then each doubling of the count halves
// the size of the arenas made (16-31 in use: half, 32-63: a quarter, ...), down to 1/2^kMaxArenaHalvings of it
// (1 GiB at the default): each step of the ladder takes half the address space of the first, 8 TiB at the default.
// And when address space runs out with no arena empty, the new arena is reserved at half its size, and half
// again, down to that floor. A smaller arena's blocks may total less (a block that finds no room in it fails as
// out of memory, as in a full one). Giving an arena back first unmaps its chunks, which is the policy's business:
// the Unmapper it passes in does that (and says no when queued work may still touch a chunk).
// Invariants (check_invariants): the arenas in use (not retired) are exactly those the slots name, each named
// once, by the slot of its own pool (Arena::small) and stream (0 when shared); kept_blocks <= blocks in each; a
// retired arena has no chunk mapped and no block, its address space went back, and its id waits in the spare ids
// for reuse, once.
// Thread safety: none (the policy's lock).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "arena.h"
#include "gmlake/backend.h"
#include "gmlake/clock.h"

namespace gmlake::engine {

class ArenaSet {
 public:
  // Empty per-stream arenas kept for streams that come back; at this many, they go back.
  static constexpr std::uint64_t kSpareArenas = 8;
  // The most blocks of its own stream (placed since it took the arena: Arena::blocks - Arena::kept_blocks) an arena
  // of a quiet stream may hold and still pass to another stream: what PyTorch keeps for a stream once it ran a
  // matmul, its cuBLAS workspace and its cuBLASLt one (aten/src/ATen/cuda/CublasHandlePool.cpp, one of each per
  // handle and stream, never freed but by torch.cuda.empty_cache). An arena holding more (a model's weights,
  // activations a pipeline stage waits with) stays its stream's however long it is quiet.
  static constexpr std::uint64_t kMaxKeptBlocks = 2;
  // Arenas in use below which a new one has Config::arena_virtual_bytes; past it sizes halve (above).
  static constexpr std::uint64_t kFullSizeArenas = 16;
  // The most a new arena's size is halved (above): the smallest arena is arena_virtual_bytes / 2^10.
  static constexpr unsigned kMaxArenaHalvings = 10;
  // Unmaps every chunk of `arena` (no block is placed in it): true when none is left mapped, false when queued
  // work may still touch one (the arena is kept). May throw Error: the arena is kept.
  using Unmapper = std::function<bool(Arena& arena)>;
  // Waits for all queued work of every stream (before every arena is given back, out of address space).
  using WaitAll = std::function<void()>;
  // Whether empty per-stream `arena` may pass to another stream now: 0 when work of its stream may still touch a
  // page of it, else the tick below which its pages' idle ticks are from before the handover (Arena::handover_tick).
  // May throw Error: nothing changes (get() throws it).
  using Handover = std::function<std::uint64_t(const Arena& arena)>;

  // `virtual_bytes`: each arena's size (Config::arena_virtual_bytes); `per_stream`: !Config::cross_stream_reuse.
  // The backend must outlive the set.
  // `handover`: none (the default) makes every new stream a new arena. `clock` (null: none) and `quiet_ns` (> 0)
  // let an arena with blocks pass once its stream has been quiet that long (above); each allocation of a
  // per-stream arena then reads the clock once. `retries` (null: none) counts the reservations that succeeded
  // after one failed out of memory (after empty arenas went back, or smaller: Stats::num_alloc_retries, as PyTorch
  // counts a cudaMalloc retried after freeing its cache). The backend, the clock and the counter must outlive the
  // set.
  ArenaSet(Backend& backend, std::uint64_t virtual_bytes, bool per_stream, Unmapper unmap, WaitAll wait_all,
           Handover handover = nullptr, Clock* clock = nullptr, std::int64_t quiet_ns = 0,
           std::uint64_t* retries = nullptr)
      : backend_(backend), virtual_bytes_(virtual_bytes), per_stream_(per_stream), unmap_(std::move(unmap)),
        wait_all_(std::move(wait_all)), handover_(std::move(handover)),
        clock_(handover_ && quiet_ns > 0 ? clock : nullptr), quiet_ns_(quiet_ns), retries_(retries) {}
  // Frees every arena's address space (best effort: the chunks must have been unmapped; never throws).
  ~ArenaSet();
  ArenaSet(const ArenaSet&) = delete;
  ArenaSet& operator=(const ArenaSet&) = delete;

  // The arena of (`stream`, the small or the large pool), taken over (above) or made on first use (stream is
  // ignored unless per_stream); with a quiet time, stamped with the clock's time (Arena::last_active_ns). A new
  // arena has Config::arena_virtual_bytes, or less past kFullSizeArenas in use or out of address space (above).
  // Throws OutOfMemoryError when no address space is left even after every empty arena went back and at the
  // smallest size, or BackendError, as the backend or the Handover said; nothing changes then. Inline for a shared
  // arena already made (every allocation asks).
  Arena& get(bool small, StreamId stream) {
    if (!per_stream_ && shared_[small] != UINT32_MAX) return *arenas_[shared_[small]];
    return get_or_make(small, stream);
  }
  // Gives back the address space of per-stream arenas with no block placed in them, unmapping their chunks
  // first (the Unmapper); with `wait`, after waiting for all queued work. Returns how many went back; none with
  // shared arenas.
  std::uint64_t retire_empty(bool wait);
  // Per-stream arenas in use with no block placed in them.
  std::uint64_t empty_stream_arenas() const;
  // Checks the invariants above; throws std::logic_error (engine_checks.h).
  void check_invariants() const;

  // Arena `id` (retired ones included: Arena::retired); ids are 0..size() - 1.
  Arena& operator[](std::uint32_t id) { return *arenas_[id]; }
  const Arena& operator[](std::uint32_t id) const { return *arenas_[id]; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(arenas_.size()); }

 private:
  Arena& get_or_make(bool small, StreamId stream);  // get(), past its inline case
  // The per-stream arena of the pool that `stream` takes over (above), its slot moved to `stream`; null when none
  // may pass. `now_ns`: the clock's time (0 without one). Throws what the Handover throws: nothing changed.
  Arena* take_over(bool small, StreamId stream, std::int64_t now_ns);
  // The size of the next arena made: virtual_bytes_ halved once per doubling of the arenas in use past
  // kFullSizeArenas, at most kMaxArenaHalvings times, and a multiple of the backend's granularity.
  std::uint64_t new_arena_bytes() const;
  // Reserves a new arena out of address space, at *bytes halved until it fits, down to virtual_bytes_ halved
  // kMaxArenaHalvings times (each a multiple of the backend's granularity): its base and size, or false when
  // none fits. Throws BackendError as the backend does.
  bool reserve_smaller(std::uintptr_t* base, std::uint64_t* bytes);
  // The newest Arena::last_active_ns of `stream`'s arenas (both pools).
  std::int64_t last_active_ns(StreamId stream) const;
  Backend& backend_;
  std::uint64_t virtual_bytes_;
  bool per_stream_;
  Unmapper unmap_;
  WaitAll wait_all_;
  Handover handover_;
  Clock* clock_;           // null: only empty arenas pass, and nothing reads the clock
  std::int64_t quiet_ns_;
  std::uint64_t* retries_;       // null: not counted
  std::uint64_t given_seq_ = 0;  // the last Arena::given_seq
  std::vector<std::unique_ptr<Arena>> arenas_;
  std::uint32_t shared_[2] = {UINT32_MAX, UINT32_MAX};             // [small], when shared
  std::map<std::pair<StreamId, bool>, std::uint32_t> per_stream_slots_;  // (stream, small), when per stream
  std::vector<std::uint32_t> retired_ids_;                          // ids whose address space went back
};

}  // namespace gmlake::engine
