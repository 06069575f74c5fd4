// PageMap: which chunk backs which pages of one arena.
//
// An arena's virtual space is cut into pages of chunk_bytes (the backend granularity, 2 MiB on CUDA). A chunk of
// n pages is always mapped whole (cuMemMap maps a handle whole), so it backs n consecutive pages; the map holds
// one entry per mapped chunk, keyed by its first page, and every query costs O(log m + k) for m mapped chunks and
// k chunks in the asked range: the cost follows the number of chunks, not bytes.
//
// Invariant (check_invariants): every entry backs at least one page and entries never overlap,
//   e.pages >= 1,  e.first_page + e.pages <= next(e).first_page.
// Which chunk an entry names, and whether it is the chunk's active place or a standby one, is checked where the
// chunks are known (StitchingAllocator::check_invariants).
//
// Thread safety: none (the owning allocator is serialized by its caller).
#pragma once

#include <cstdint>
#include <string>

#include "absl/container/btree_map.h"
#include "engine_checks.h"
#include "gmlake/dcheck.h"

namespace gmlake::engine {

using ChunkId = std::uint32_t;
inline constexpr ChunkId kNoChunk = UINT32_MAX;

class PageMap {
 public:
  struct Entry {
    ChunkId chunk;
    std::uint64_t pages;
  };

  // Chunk `chunk` backs pages [first_page, first_page + pages), which no entry backs yet (pages >= 1).
  void insert(std::uint64_t first_page, ChunkId chunk, std::uint64_t pages) {
    GMLAKE_DCHECK(pages >= 1 && unmapped_pages(first_page, first_page + pages - 1) == pages,
                  "a chunk is mapped over pages another chunk backs");
    map_[first_page] = {chunk, pages};
  }
  void erase(std::uint64_t first_page) { map_.erase(first_page); }
  std::uint64_t mapped_chunks() const { return map_.size(); }

  // Calls f(first_page, entry) for every mapped chunk overlapping pages [first, last], in page order.
  template <typename F>
  void for_each(std::uint64_t first, std::uint64_t last, F&& f) const {
    auto it = map_.upper_bound(first);
    if (it != map_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second.pages > first) it = prev;
    }
    for (; it != map_.end() && it->first <= last; ++it) f(it->first, it->second);
  }

  // The first page of the first chunk mapped after `page` (at a higher page), or UINT64_MAX when none is.
  std::uint64_t next_mapped_after(std::uint64_t page) const {
    const auto it = map_.upper_bound(page);
    return it == map_.end() ? UINT64_MAX : it->first;
  }

  // Pages of [first, last] that no chunk backs.
  std::uint64_t unmapped_pages(std::uint64_t first, std::uint64_t last) const {
    std::uint64_t mapped = 0;
    for_each(first, last, [&](std::uint64_t p, const Entry& e) {
      const std::uint64_t lo = p < first ? first : p;
      const std::uint64_t hi = p + e.pages - 1 > last ? last : p + e.pages - 1;
      mapped += hi - lo + 1;
    });
    return (last - first + 1) - mapped;
  }

  // Calls gap(first_page, count) for every maximal run of unmapped pages inside [first, last], in page order.
  template <typename F>
  void for_each_gap(std::uint64_t first, std::uint64_t last, F&& gap) const {
    std::uint64_t next = first;  // first page not yet accounted for
    for_each(first, last, [&](std::uint64_t p, const Entry& e) {
      if (p > next) gap(next, p - next);
      next = p + e.pages;
    });
    if (next <= last) gap(next, last - next + 1);
  }

  // Checks the invariant above; throws std::logic_error (engine_checks.h) naming the first entry that breaks it.
  void check_invariants() const {
    std::uint64_t next_free_page = 0;  // the first page past the previous entry
    for (const auto& [p, e] : map_) {
      if (e.pages == 0) broken("a page map entry at page " + std::to_string(p) + " backs no page");
      if (p < next_free_page) broken("page map entries overlap at page " + std::to_string(p));
      next_free_page = p + e.pages;
    }
  }

  // Every entry in page order (checks, teardown).
  template <typename F>
  void for_all(F&& f) const {
    for (const auto& [p, e] : map_) f(p, e);
  }

 private:
  absl::btree_map<std::uint64_t, Entry> map_;
};

}  // namespace gmlake::engine
