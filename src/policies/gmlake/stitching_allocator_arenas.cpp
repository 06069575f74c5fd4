// StitchingAllocator's arenas: one per pool (and per stream unless cross_stream_reuse), made on first use; the
// per-stream arenas of streams with nothing placed in them give their address space back (issue 15), so that
// short-lived streams never run a process out of it.
#include "gmlake/error.h"
#include "stitching_allocator.h"

namespace gmlake::engine {

Arena& StitchingAllocator::arena_for(bool small, StreamId stream) {
  std::uint32_t* slot;
  if (config_.cross_stream_reuse) {
    slot = &shared_arena_[small];
  } else {
    auto [it, inserted] = stream_arena_.try_emplace({stream, small}, UINT32_MAX);
    slot = &it->second;
  }
  if (*slot != UINT32_MAX) return *arenas_[*slot];
  // A new arena. Streams come and go (a server may make one per request): the arenas of streams with nothing
  // placed in them go back beyond kSpareArenas, and all of them when address space runs out, so it always
  // comes back (issue 15).
  std::uintptr_t base = 0;
  try {
    if (!config_.cross_stream_reuse && empty_stream_arenas() >= kSpareArenas) retire_empty_arenas(false);
    try {
      base = backend_.reserve(config_.arena_virtual_bytes);
    } catch (const OutOfMemoryError&) {
      if (retire_empty_arenas(true) == 0) throw;
      base = backend_.reserve(config_.arena_virtual_bytes);
    }
  } catch (...) {  // OutOfMemoryError (no address space left) or BackendError, as the backend said
    if (!config_.cross_stream_reuse) stream_arena_.erase({stream, small});
    throw;
  }
  const StreamId arena_stream = config_.cross_stream_reuse ? 0 : stream;
  std::uint32_t id;
  if (!retired_ids_.empty()) {
    id = retired_ids_.back();
    retired_ids_.pop_back();
    arenas_[id] = std::make_unique<Arena>(id, arena_stream, base, config_.arena_virtual_bytes);
    arena_small_[id] = small;
  } else {
    id = static_cast<std::uint32_t>(arenas_.size());
    arenas_.push_back(std::make_unique<Arena>(id, arena_stream, base, config_.arena_virtual_bytes));
    arena_small_.push_back(small);
  }
  // The slot may have moved while arenas were retired (stream_arena_ is a std::map: its nodes stay put).
  if (config_.cross_stream_reuse) {
    shared_arena_[small] = id;
  } else {
    stream_arena_[{stream, small}] = id;
  }
  return *arenas_[id];
}

std::uint64_t StitchingAllocator::empty_stream_arenas() const {
  std::uint64_t n = 0;
  for (const auto& [key, id] : stream_arena_) n += id != UINT32_MAX && arenas_[id]->blocks == 0;
  return n;
}

std::uint64_t StitchingAllocator::retire_empty_arenas(bool wait) {
  if (config_.cross_stream_reuse) return 0;
  if (wait) fence_.wait_all(idle_.next_tick());
  std::uint64_t retired = 0;
  for (auto it = stream_arena_.begin(); it != stream_arena_.end();) {
    const std::uint32_t id = it->second;
    if (id == UINT32_MAX || arenas_[id]->blocks != 0) {  // UINT32_MAX: the slot arena_for is filling
      ++it;
      continue;
    }
    Arena& arena = *arenas_[id];
    // Its chunks are all idle (no block is placed in it): unmapped first, once no queued work can touch them.
    std::vector<ChunkId> chunks;
    bool safe = true;
    arena.pages.for_all([&](std::uint64_t, const PageMap::Entry& e) {
      chunks.push_back(e.chunk);
      safe = safe && (!fence_.asynchronous() || fence_.safe(arena.stream, pool_[e.chunk].idle_since));
    });
    if (!safe) {
      ++it;
      continue;
    }
    try {
      for (const ChunkId c : chunks) evict(c);
      backend_.address_free(arena.base, arena.virtual_bytes);
    } catch (const Error&) {  // it stays, usable; what was evicted is free memory
      ++it;
      continue;
    }
    arena.retired = true;
    retired_ids_.push_back(id);
    it = stream_arena_.erase(it);
    ++retired;
  }
  return retired;
}

}  // namespace gmlake::engine
