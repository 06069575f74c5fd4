// Pages: the chunk_bytes (2 MiB) slots of an arena's virtual space, each mapped to one physical chunk or to
// none, and the queue of idle pages (mapped, used by no block) in least-recently-idled order.
//
// A page is *used* when at least one live or pending block overlaps it (users > 0), *idle* when it is
// mapped and unused, *empty* when unmapped, *stale* when still mapped to a chunk that an eviction gave to
// another page (the chunk's owner). Invariants (checked by StitchingAllocator::check_invariants):
//   users > 0  =>  chunk mapped with access, and the page owns it (not stale);
//   stale  =>  users == 0, and the chunk is owned by another page;
//   idle  <=>  the IdleQueue holds an entry {page, idle_since} that is the page's current one.
// The idle queue is GMLake's stitched-block cache: the oldest idle page is evicted first when a chunk is
// needed elsewhere.
#pragma once

#include <cstdint>
#include <algorithm>
#include <deque>
#include <span>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake::engine {

struct PageRef {
  std::uint32_t arena = UINT32_MAX;
  std::uint32_t page = UINT32_MAX;
  bool valid() const { return arena != UINT32_MAX; }
  friend bool operator==(PageRef a, PageRef b) = default;
};

// Fields ordered widest first, so a Page is 24 bytes, not 32: the hot loops walk pages by the thousand.
struct Page {
  ChunkHandle chunk;            // value 0: unmapped
  std::uint64_t idle_since = 0; // IdleQueue tick of the page's last transition to idle
  std::uint32_t users = 0;      // live or pending blocks overlapping this page
  // Mapped to `chunk`, which another page owns now (an eviction left this mapping in place). Never used
  // (users == 0 whenever stale, outside a back_pages call), never idle, never queued.
  bool stale = false;
  bool idle() const { return chunk.value != 0 && users == 0 && !stale; }
};

// An arena's pages, grown on demand up to the arena's high-water mark.
class PageTable {
 public:
  // Pages [first, last], grown to hold them; the pointer is valid until the next call that grows the table.
  Page* span(std::uint64_t first, std::uint64_t last) {
    if (last >= pages_.size()) pages_.resize(last + 1);
    return pages_.data() + first;
  }
  Page& at(std::uint64_t index) { return *span(index, index); }
  const Page* find(std::uint64_t index) const { return index < pages_.size() ? &pages_[index] : nullptr; }
  // The pages of [first, last] that exist (the table may end before `last`), without growing the table.
  std::span<const Page> existing(std::uint64_t first, std::uint64_t last) const {
    const std::uint64_t end = std::min<std::uint64_t>(last + 1, pages_.size());
    return first < end ? std::span<const Page>(pages_.data() + first, end - first) : std::span<const Page>();
  }
  std::uint64_t size() const { return pages_.size(); }

 private:
  std::vector<Page> pages_;
};

// Idle pages across every arena, least recently idled first. A free turns a run of adjacent pages idle at
// once; the run is queued as one entry, and its pages get the entry's tick as idle_since. Pages are never
// unlinked when they turn used again: they just stop matching the entry (idle() false, or a newer tick), and
// pop_oldest skips them. So the hot path costs one queue push per free, whatever the block's size. The queue
// is compacted when stale entries outnumber live pages.
class IdleQueue {
 public:
  struct Entry {
    std::uint32_t arena;
    std::uint64_t first_page;
    std::uint64_t count;  // pages first_page .. first_page + count - 1
    std::uint64_t tick;
  };

  // A new tick for pages turning idle now; pass it to push().
  std::uint64_t next_tick() { return ++tick_; }
  void push(std::uint32_t arena, std::uint64_t first_page, std::uint64_t count, std::uint64_t tick) {
    entries_.push_back({arena, first_page, count, tick});
  }
  // The oldest page that is still idle with its queued tick (stale entries before it are dropped); it stays
  // queued. !valid() when no idle page is left. `pages(arena)` gives that arena's PageTable.
  template <typename Pages>
  PageRef oldest(Pages&& pages) {
    while (!entries_.empty()) {
      Entry& e = entries_.front();
      const PageTable& table = pages(e.arena);  // once per entry: the walk below may skip many pages
      while (e.count != 0) {
        const Page* page = table.find(e.first_page);
        if (page != nullptr && page->idle() && page->idle_since == e.tick) {
          return {e.arena, static_cast<std::uint32_t>(e.first_page)};
        }
        ++e.first_page;
        --e.count;
      }
      entries_.pop_front();
    }
    return PageRef{};
  }
  // Removes the page oldest() returned.
  void pop_oldest() {
    Entry& e = entries_.front();
    ++e.first_page;
    if (--e.count == 0) entries_.pop_front();
  }
  std::uint64_t current_tick() const { return tick_; }
  // Drops stale pages from the queue when entries reach four times the idle pages (amortized O(1)).
  template <typename Pages>
  void compact_if_stale(std::uint64_t idle_pages, Pages&& pages) {
    if (entries_.size() < 1024 || entries_.size() < 4 * idle_pages) return;
    std::deque<Entry> kept;
    for (const Entry& e : entries_) {
      for (std::uint64_t p = e.first_page; p < e.first_page + e.count; ++p) {
        const Page* page = pages(e.arena).find(p);
        if (page != nullptr && page->idle() && page->idle_since == e.tick) kept.push_back({e.arena, p, 1, e.tick});
      }
    }
    entries_.swap(kept);
  }
  // Calls f(arena, page) for every queued page that is still current.
  template <typename Pages, typename F>
  void for_each_current(Pages&& pages, F&& f) const {
    for (const Entry& e : entries_) {
      for (std::uint64_t p = e.first_page; p < e.first_page + e.count; ++p) {
        const Page* page = pages(e.arena).find(p);
        if (page != nullptr && page->idle() && page->idle_since == e.tick) f(e.arena, p);
      }
    }
  }

 private:
  std::deque<Entry> entries_;
  std::uint64_t tick_ = 0;
};

}  // namespace gmlake::engine
