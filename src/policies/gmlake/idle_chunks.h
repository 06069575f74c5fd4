// IdleChunks: the mapped chunks that no block uses, least recently idled first: GMLake's stitched-block cache.
// A stitched range stays mapped after its blocks are freed and serves the next request placed there with no
// backend call; when memory is needed elsewhere, the chunk idle the longest is unmapped first (the GMLake
// paper's oldest-first collection, ASPLOS 2024), whole.
//
// Which chunks are idle, and since when, is in the page table (PageMap::mark_idle, kept by ChunkUse): the idle
// bits, and the tick of each idle span, the pages of one arena whose chunks turned idle together (a freed
// block's chunks). This queue keeps the order: one entry per span, in tick order, naming the pages [first, last]
// it was marked on. A chunk that turns used again costs nothing here (its idle bits are cleared); the chunks
// still idle from an entry are the idle ones in its pages whose span tick is the entry's (a later span over some
// of them has a later tick). So a block of many chunks is freed with one entry and placed again with no step
// here, and oldest() finds, for the oldest entry with an idle chunk left, the first such chunk in page order:
// the order the chunks turned idle in, by tick and within one tick (one free) by page.
// Entries share a tick only where one free made several spans (pages not all mapped: ChunkUse::
// unuse_partly_mapped) or where a chunk taken for a failed placement came back (push_moved, which splits its
// old entry around its old pages); their pages never overlap, so the tick and the pages tell an entry's chunks.
// The queue is compacted in place, in order, when its entries reach kCompactRatio (16) times the idle chunks and
// kMinCompact (amortized O(1) per push).
// Invariants (check_invariants): the queue's ticks never decrease from front to back and none is newer than the
// last tick handed out; entries of one tick do not overlap; head <= size. ChunkUse::check_invariants checks
// that every idle chunk lies in an entry of its span's tick.
// Thread safety: none.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine_checks.h"
#include "page_map.h"

namespace gmlake::engine {

class IdleChunks {
 public:
  struct Entry {
    std::uint64_t tick;
    std::uint32_t arena;
    PageNumber first;  // nothing of the entry is idle before it (oldest() moves it up)
    PageNumber last;
  };

  // A new tick for chunks turning idle now; pass it to push().
  std::uint64_t next_tick() { return ++tick_; }
  std::uint64_t last_tick() const { return tick_; }

  // The span marked at pages [first, last] of arena `arena` at `tick` is queued last. Throws std::bad_alloc
  // (nothing changed).
  void push(std::uint32_t arena, PageNumber first, PageNumber last, std::uint64_t tick) {
    queue_.push_back({tick, arena, first, last});
  }
  // A chunk that was idle at pages [from_first, from_last] of arena `from_arena` since `tick` is idle again at
  // pages [first, last] of `arena`: queued where it was (its old entry split around its old pages). O(queue).
  // Throws std::logic_error when no entry of that tick held them, or one holds the new pages.
  void push_moved(std::uint32_t arena, PageNumber first, PageNumber last, std::uint64_t tick, std::uint32_t from_arena,
                  PageNumber from_first, PageNumber from_last) {
    std::size_t at = queue_.size();
    for (std::size_t i = head_; i < queue_.size(); ++i) {
      const Entry& e = queue_[i];
      if (e.tick != tick) continue;
      if (e.arena == arena && e.first <= last && first <= e.last) broken("an idle chunk comes back into its own span");
      if (e.arena == from_arena && e.first <= from_first && from_last <= e.last) at = i;
    }
    if (at == queue_.size()) broken("an idle chunk's old queue entry is gone");
    const Entry old = queue_[at];
    std::vector<Entry> parts;
    if (old.first < from_first) parts.push_back({tick, old.arena, old.first, from_first - Pages{1}});
    parts.push_back({tick, arena, first, last});
    if (from_last < old.last) parts.push_back({tick, old.arena, from_last + Pages{1}, old.last});
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(at));
    queue_.insert(queue_.begin() + static_cast<std::ptrdiff_t>(at), parts.begin(), parts.end());
  }

  // The oldest idle chunk, or kNoChunk; first_of(entry) returns the first idle chunk of `entry` (moving its
  // `first` up past what it skipped), or kNoChunk. Entries with none left before it are dropped.
  template <typename FirstOf>
  ChunkId oldest(FirstOf&& first_of) {
    for (; head_ < queue_.size(); ++head_) {
      const ChunkId id = first_of(queue_[head_]);
      if (id != kNoChunk) return id;
    }
    queue_.clear();
    head_ = 0;
    return kNoChunk;
  }
  // Drops the entries with no idle chunk left, in place and in order, when the entries reach kCompactRatio
  // times `idle_chunks` and kMinCompact (amortized O(1) per push); first_of as for oldest().
  template <typename FirstOf>
  void compact_if_dead(std::uint64_t idle_chunks, FirstOf&& first_of) {
    if (queue_.size() < kMinCompact || queue_.size() < kCompactRatio * idle_chunks) return;
    std::size_t kept = 0;
    for (std::size_t i = head_; i < queue_.size(); ++i) {
      Entry e = queue_[i];
      if (first_of(e) != kNoChunk) queue_[kept++] = e;
    }
    queue_.resize(kept);
    head_ = 0;
  }

  // Entries queued, dead ones included (tests).
  std::size_t queued() const { return queue_.size() - head_; }
  // Calls f(entry) for every entry, oldest first (checks).
  template <typename F>
  void for_each_entry(F&& f) const {
    for (std::size_t i = head_; i < queue_.size(); ++i) f(queue_[i]);
  }
  // Checks the invariants above; throws std::logic_error (engine_checks.h).
  void check_invariants() const {
    if (head_ > queue_.size()) broken("the idle queue's head is past its end");
    std::uint64_t previous = 0;
    std::size_t tick_begin = head_;  // the first entry of the current tick
    for (std::size_t i = head_; i < queue_.size(); ++i) {
      const Entry& e = queue_[i];
      if (e.tick < previous) broken("the idle queue's ticks go back");
      if (e.tick > tick_) broken("the idle queue holds a tick not handed out yet");
      if (e.last < e.first) broken("an idle queue entry ends before it begins");
      if (e.tick != previous) tick_begin = i;
      for (std::size_t j = tick_begin; j < i; ++j) {
        const Entry& o = queue_[j];
        if (o.arena == e.arena && o.first <= e.last && e.first <= o.last) broken("idle queue entries of one tick overlap");
      }
      previous = e.tick;
    }
  }

 private:
  static constexpr std::size_t kMinCompact = 4096;
  static constexpr std::size_t kCompactRatio = 16;  // entries per idle chunk that trigger a compaction

  std::vector<Entry> queue_;  // [head_, size) is live, compact_if_dead drops the rest
  std::size_t head_ = 0;
  std::uint64_t tick_ = 0;
};

}  // namespace gmlake::engine
