// IdleChunks: the mapped chunks that no block uses, least recently idled first: GMLake's stitched-block cache.
// A stitched range stays mapped after its blocks are freed and serves the next request placed there with no
// backend call; when memory is needed elsewhere, the chunk idle the longest is unmapped first (the GMLake
// paper's oldest-first collection, ASPLOS 2024), whole.
//
// A chunk turning idle is pushed with a new tick (its idle_since). It is never unlinked when it turns used
// again: its entry just stops matching (the chunk is used, unmapped, or has a newer tick), and oldest() skips
// it. So each transition costs O(1); the queue (a vector read from a head index) is compacted in place, in
// order, when its entries reach four times the idle chunks.
// Invariants: a chunk is idle  <=>  mapped, users == 0, and the queue holds {id, idle_since} for it (checked by
// ChunkUse::check_invariants, which counts the idle chunks); the queue's ticks never decrease from front to
// back and none is newer than the last tick handed out (check_invariants).
// Thread safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "chunk_store.h"
#include "engine_checks.h"

namespace gmlake::engine {

class IdleChunks {
 public:
  // A new tick for a chunk turning idle now; pass it to push().
  std::uint64_t next_tick() { return ++tick_; }
  void push(ChunkId id, std::uint64_t tick) { entries_.push_back({id, tick}); }

  // The oldest chunk still idle with its queued tick (dead entries before it are dropped), or kNoChunk.
  ChunkId oldest(const ChunkStore& store) {
    for (; head_ < entries_.size(); ++head_) {
      if (current(store, entries_[head_])) return entries_[head_].id;
    }
    entries_.clear();
    head_ = 0;
    return kNoChunk;
  }
  // Drops dead entries, in place and in order, when they reach four times the idle chunks and kMinCompact
  // (amortized O(1) per push).
  void compact_if_dead(std::uint64_t idle_chunks, const ChunkStore& store) {
    if (entries_.size() < kMinCompact || entries_.size() < 4 * idle_chunks) return;
    const auto live = std::remove_if(entries_.begin() + static_cast<std::ptrdiff_t>(head_), entries_.end(),
                                     [&](const Entry& e) { return !current(store, e); });
    const auto kept_end = head_ == 0 ? live
                                     : std::move(entries_.begin() + static_cast<std::ptrdiff_t>(head_), live,
                                                 entries_.begin());
    entries_.erase(kept_end, entries_.end());
    head_ = 0;
  }
  // Entries queued, dead ones included (tests).
  std::size_t queued() const { return entries_.size() - head_; }
  // Checks the queue's order (above); throws std::logic_error (engine_checks.h).
  void check_invariants() const {
    std::uint64_t previous = 0;
    for (std::size_t i = head_; i < entries_.size(); ++i) {
      const Entry& e = entries_[i];
      if (e.tick < previous) broken("the idle queue's ticks go back");
      if (e.tick > tick_) broken("the idle queue holds a tick not handed out yet");
      previous = e.tick;
    }
  }
  // Calls f(id) for every chunk the queue holds as idle, oldest first.
  template <typename F>
  void for_each_current(const ChunkStore& store, F&& f) const {
    for (std::size_t i = head_; i < entries_.size(); ++i) {
      if (current(store, entries_[i])) f(entries_[i].id);
    }
  }

 private:
  static constexpr std::size_t kMinCompact = 4096;
  struct Entry {
    ChunkId id;
    std::uint64_t tick;
  };
  static bool current(const ChunkStore& store, const Entry& e) {
    const Chunk& c = store[e.id];
    return c.mapped() && c.users == 0 && c.idle_since == e.tick;
  }

  std::vector<Entry> entries_;  // a queue: [head_, size) is live, compact_if_dead drops the rest
  std::size_t head_ = 0;
  std::uint64_t tick_ = 0;
};

}  // namespace gmlake::engine
