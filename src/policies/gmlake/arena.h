// Arena: one reserved virtual address range of a pool, with its free ranges and the chunks mapped in it.
//
// Blocks are placed anywhere in the arena at 512 B granularity, so neighbouring blocks share the pages at
// their edges; physical chunks back only the pages that blocks use (page_map.h). The arena's virtual size
// (Config::arena_virtual_bytes, 1 TiB by default) costs nothing physical.
// Invariants (StitchingAllocator::check_invariants): the free ranges and the live and pending blocks tile
// [0, virtual_bytes) exactly; handover_tick <= T and last_idle_tick <= T, for T the last tick handed out;
// kept_blocks = #{ blocks placed in an earlier generation } <= blocks.
#pragma once

#include <cstdint>

#include "free_index.h"
#include "page_map.h"
#include "gmlake/stream_events.h"

namespace gmlake::engine {

struct Arena {
  Arena(std::uint32_t id_in, StreamId stream_in, std::uintptr_t base_in, std::uint64_t virtual_bytes_in,
        bool small_in = false)
      : id(id_in), stream(stream_in), base(base_in), virtual_bytes(virtual_bytes_in), small(small_in),
        free(virtual_bytes_in) {}

  std::uint32_t id;
  StreamId stream;  // the stream whose blocks it holds; 0 for an arena shared by all streams
  std::uintptr_t base;
  std::uint64_t virtual_bytes;
  bool small;       // the small pool's (requests <= Config::small_request_max_bytes)
  FreeIndex free;
  PageMap pages;
  std::uint64_t blocks = 0;  // live and pending blocks placed in it
  // Handovers so far (ArenaSet; it wraps at 2^32), and the blocks placed before the last one: kept blocks, of its
  // earlier streams. kept_blocks = #{ blocks b in it : b's generation when placed != generation } <= blocks.
  std::uint32_t generation = 0;
  std::uint64_t kept_blocks = 0;
  // Handover (ArenaSet): an empty per-stream arena passes to a new stream once no work of its stream can touch
  // its pages, with its chunks mapped where they are. Idle ticks below handover_tick are from before (the previous
  // stream's, all finished): safe whatever `stream` has queued. 0: never handed over. It only comes down after
  // (ChunkUse::restore_taken: an idle chunk put back with an older tick of another arena's).
  std::uint64_t handover_tick = 0;
  std::uint64_t last_idle_tick = 0;  // the newest tick at which pages of it turned idle (0: none yet)
  std::uint64_t given_seq = 0;       // when it was made or handed over, in order: the oldest goes first
  // The clock's time at its last allocation (ArenaSet::get, only with a quiet time: Config::handover_quiet_ms).
  std::int64_t last_active_ns = 0;
  bool retired = false;      // its address space went back (a short-lived stream's); the id is reused
};

}  // namespace gmlake::engine
