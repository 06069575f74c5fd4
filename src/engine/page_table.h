// Pages: the 2 MiB (chunk_bytes) slots of an arena's virtual space, each mapped to one physical chunk or to
// none, and the idle list of mapped pages that no block uses.
//
// A page is *used* when at least one live or pending block overlaps it (users > 0), *idle* when it is mapped
// and unused, *empty* when unmapped. Invariants (checked by StitchingAllocator::check_invariants):
//   users > 0  =>  chunk mapped with access;
//   on the idle list  <=>  chunk mapped and users == 0.
// The idle list is ordered by the time pages became idle (oldest first): it is GMLake's stitched-block cache,
// evicted least-recently-used when a chunk is needed elsewhere.
#pragma once

#include <cstdint>
#include <vector>

#include "gmlake/backend.h"

namespace gmlake::engine {

struct PageRef {
  std::uint32_t arena = UINT32_MAX;
  std::uint32_t page = UINT32_MAX;
  bool valid() const { return arena != UINT32_MAX; }
  friend bool operator==(PageRef a, PageRef b) = default;
};

struct Page {
  ChunkHandle chunk;       // value 0: unmapped
  std::uint32_t users = 0; // live or pending blocks overlapping this page
  bool idle = false;       // on the idle list
  PageRef idle_prev, idle_next;
};

// An arena's pages, grown on demand up to the arena's high-water mark.
class PageTable {
 public:
  Page& at(std::uint64_t index) {
    if (index >= pages_.size()) pages_.resize(index + 1);
    return pages_[index];
  }
  const Page* find(std::uint64_t index) const { return index < pages_.size() ? &pages_[index] : nullptr; }
  std::uint64_t size() const { return pages_.size(); }

 private:
  std::vector<Page> pages_;
};

// Intrusive doubly linked list of idle pages across every arena. `Resolve` maps a PageRef to its Page&.
template <typename Resolve>
class IdleList {
 public:
  explicit IdleList(Resolve resolve) : resolve_(resolve) {}

  void push_back(PageRef ref) {
    Page& p = resolve_(ref);
    p.idle = true;
    p.idle_prev = tail_;
    p.idle_next = PageRef{};
    if (tail_.valid()) resolve_(tail_).idle_next = ref; else head_ = ref;
    tail_ = ref;
    ++size_;
  }
  void remove(PageRef ref) {
    Page& p = resolve_(ref);
    if (p.idle_prev.valid()) resolve_(p.idle_prev).idle_next = p.idle_next; else head_ = p.idle_next;
    if (p.idle_next.valid()) resolve_(p.idle_next).idle_prev = p.idle_prev; else tail_ = p.idle_prev;
    p.idle = false;
    p.idle_prev = p.idle_next = PageRef{};
    --size_;
  }
  // The least recently idled page; !valid() when empty.
  PageRef front() const { return head_; }
  std::uint64_t size() const { return size_; }

 private:
  Resolve resolve_;
  PageRef head_, tail_;
  std::uint64_t size_ = 0;
};

}  // namespace gmlake::engine
