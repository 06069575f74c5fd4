// IdleChunks: the mapped chunks that no block uses, least recently idled first: GMLake's stitched-block cache.
// A stitched range stays mapped after its blocks are freed and serves the next request placed there with no
// backend call; when memory is needed elsewhere, the chunk idle the longest is unmapped first (the GMLake
// paper's oldest-first collection, ASPLOS 2024), whole.
//
// A chunk turning idle is pushed with a new tick (its idle_since). It is never unlinked when it turns used
// again: its entry just stops matching (the chunk is used, unmapped, or has a newer tick), and oldest() skips
// it. So each transition costs O(1); the queue (an array read from a head index) is compacted in place, in
// order, when its entries reach kCompactRatio (16) times the idle chunks and kMinCompact: after each free that
// turns a chunk idle, the queue holds fewer than max(kMinCompact, 16 x idle chunks) entries of 16 bytes, and the
// live entries a compaction scans again are at most a sixteenth of those it scans. A walk that turns many
// chunks idle writes their entries straight into room made beforehand (room, pushed): two stores each, no check
// of the capacity.
// Invariants: a chunk is idle  <=>  mapped, users == 0, and the queue holds {id, idle_since} for it (checked by
// ChunkUse::check_invariants, which counts the idle chunks); the queue's ticks never decrease from front to
// back and none is newer than the last tick handed out; head <= size <= capacity (check_invariants).
// Thread safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "chunk_store.h"
#include "engine_checks.h"

namespace gmlake::engine {

class IdleChunks {
 public:
  struct Entry {
    ChunkId id;
    std::uint64_t tick;
  };

  // A new tick for a chunk turning idle now; pass it to push().
  std::uint64_t next_tick() { return ++tick_; }
  void push(ChunkId id, std::uint64_t tick) {
    *room(1) = {id, tick};
    ++size_;
  }
  // Room for `n` more entries at the back: where they go, in order. Write k <= n of them from there, then
  // pushed(k); nothing else may touch the queue in between. The capacity grows to at least twice when it must
  // (amortized O(1) per entry). Throws std::bad_alloc (nothing changed).
  Entry* room(std::size_t n) {
    if (capacity_ - size_ < n) grow(n);
    return entries_.get() + size_;
  }
  // The k entries written at room() are queued.
  void pushed(std::size_t k) { size_ += k; }

  // The oldest chunk still idle with its queued tick (dead entries before it are dropped), or kNoChunk.
  ChunkId oldest(const ChunkStore& store) {
    for (; head_ < size_; ++head_) {
      if (current(store, entries_[head_])) return entries_[head_].id;
    }
    size_ = 0;
    head_ = 0;
    return kNoChunk;
  }
  // Drops dead entries, in place and in order, when they reach kCompactRatio times the idle chunks and
  // kMinCompact (amortized O(1) per push).
  void compact_if_dead(std::uint64_t idle_chunks, const ChunkStore& store) {
    if (size_ < kMinCompact || size_ < kCompactRatio * idle_chunks) return;
    Entry* const begin = entries_.get();
    Entry* const live =
        std::remove_if(begin + head_, begin + size_, [&](const Entry& e) { return !current(store, e); });
    Entry* const kept_end = head_ == 0 ? live : std::move(begin + head_, live, begin);
    size_ = static_cast<std::size_t>(kept_end - begin);
    head_ = 0;
  }
  // Entries queued, dead ones included (tests).
  std::size_t queued() const { return size_ - head_; }
  // Checks the queue's order (above); throws std::logic_error (engine_checks.h).
  void check_invariants() const {
    if (head_ > size_ || size_ > capacity_) broken("the idle queue's head, size and capacity are out of order");
    std::uint64_t previous = 0;
    for (std::size_t i = head_; i < size_; ++i) {
      const Entry& e = entries_[i];
      if (e.tick < previous) broken("the idle queue's ticks go back");
      if (e.tick > tick_) broken("the idle queue holds a tick not handed out yet");
      previous = e.tick;
    }
  }
  // Calls f(id) for every chunk the queue holds as idle, oldest first.
  template <typename F>
  void for_each_current(const ChunkStore& store, F&& f) const {
    for (std::size_t i = head_; i < size_; ++i) {
      if (current(store, entries_[i])) f(entries_[i].id);
    }
  }

 private:
  static constexpr std::size_t kMinCompact = 4096;
  static constexpr std::size_t kCompactRatio = 16;  // entries per idle chunk that trigger a compaction
  static bool current(const ChunkStore& store, const Entry& e) {
    const Chunk& c = store[e.id];
    return c.mapped() && c.users == 0 && c.idle_since == e.tick;
  }
  // Capacity for at least `n` entries past size_: twice the old, or more when that is short.
  void grow(std::size_t n) {
    const std::size_t capacity = std::max(2 * capacity_, size_ + std::max<std::size_t>(n, 16));
    std::unique_ptr<Entry[]> entries(new Entry[capacity]);  // throws bad_alloc: nothing changed
    std::copy(entries_.get(), entries_.get() + size_, entries.get());
    entries_ = std::move(entries);
    capacity_ = capacity;
  }

  std::unique_ptr<Entry[]> entries_;  // a queue: [head_, size_) is live, compact_if_dead drops the rest
  std::size_t head_ = 0;
  std::size_t size_ = 0;              // entries written, [0, size_)
  std::size_t capacity_ = 0;          // entries there is room for
  std::uint64_t tick_ = 0;
};

}  // namespace gmlake::engine
