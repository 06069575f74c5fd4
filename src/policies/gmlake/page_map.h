// PageMap: which chunk backs which pages of one arena.
//
// An arena's virtual space is cut into pages of page_bytes (the backend granularity, 2 MiB on CUDA). A chunk of
// n pages is always mapped whole (cuMemMap maps a handle whole), so it backs n consecutive pages.
//
// Structure: a two-level page table, as a CPU's: the page index picks a leaf of kLeafPages slots (made on first
// use, 64 KiB), and the slot of every page names its chunk, the page's place in it, the chunk's size and whether
// the mapping is the chunk's active place or a standby one (chunk_store.h). So the chunk that backs a page is
// found in O(1), and a walk over pages [first, last] costs one step per chunk (the next chunk of a block starts
// right after the last) and one per unmapped page inside leaves that hold any mapping; leaves with none are
// skipped whole. Each leaf also keeps two bitmaps, of its mapped pages and of its active ones, so that how many
// pages of a range are mapped, and how, costs one popcount per 64 pages (word_bits, a word at a time), and the
// standby mappings among them are found in the same words, with no walk.
//
// Two more bitmaps serve ChunkUse: the first page of every mapping (start_bits: how many chunks a run of pages
// holds is a popcount, with no walk) and the pages of idle chunks' active places (idle_bits, which ChunkUse sets
// and clears a span at a time: whether the chunk at a page is idle is one bit, with no chunk record read).
// Invariant (check_invariants): slot(first + k) = {chunk, k, pages, active} for every mapping of a chunk at
// `first` and k < pages; a leaf's `mapped` counts its mapped slots, and its bitmaps have a bit set exactly for
// its mapped slots (mapped_bits), for those that are active (active_bits) and for the first slot of each mapping
// (start_bits); idle_bits is a subset of active_bits (ChunkUse::check_invariants checks the rest: exactly the
// pages of idle chunks); mapped_chunks() counts the mappings' first pages. The owner keeps `active` equal to Chunk::active_at (StitchingAllocator::check_invariants
// checks it).
// Page numbers and counts are PageNumber and Pages (pages.h); the leaves index raw numbers inside.
// Thread safety: none (the owning allocator is serialized by its caller).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "engine_checks.h"
#include "gmlake/dcheck.h"
#include "pages.h"

namespace gmlake::engine {

using ChunkId = std::uint32_t;
inline constexpr ChunkId kNoChunk = UINT32_MAX;

class PageMap {
 public:
  struct Entry {
    ChunkId chunk;
    Pages pages;
    bool active;  // the chunk's active place, else a standby mapping
  };

  // Chunk `chunk` of `size` pages (1 <= size < 2^32) now backs pages [first, first + size), which no chunk backs
  // (the caller's invariant: GMLAKE_DCHECK checks it; check_invariants finds an overlap after the fact), as its
  // active place. An empty chunk (size 0) records nothing. Throws std::bad_alloc when a leaf cannot be made
  // (nothing changed).
  void insert(PageNumber first, ChunkId chunk, Pages size) {
    GMLAKE_DCHECK(
        size >= Pages{1} && size <= Pages{UINT32_MAX} && unmapped_pages(first, first + size - Pages{1}) == size,
        "a chunk is mapped over pages another chunk backs");
    if (size == Pages{0}) return;
    const std::uint64_t first_page = first.value(), pages = size.count();
    for (std::uint64_t i = first_page >> kLeafShift; i <= (first_page + pages - 1) >> kLeafShift; ++i) leaf_for(i);
    for (std::uint64_t k = 0; k < pages; ++k) {
      Leaf& leaf = *leaves_[(first_page + k) >> kLeafShift];
      Slot& s = leaf.slots[(first_page + k) & kLeafMask];
      if (s.chunk == kNoChunk) ++leaf.mapped;
      s = {chunk, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(pages), true};
      leaf.set_bits(first_page + k, true, true);
    }
    leaves_[first_page >> kLeafShift]->set_start(first_page, true);
    ++chunks_;
  }
  // The mapping that starts at `first` becomes the chunk's active place (`active`) or a standby one (no longer
  // idle: idle_bits); nothing happens when none starts there. O(pages of the chunk).
  void set_active(PageNumber first, bool active) {
    const std::uint64_t first_page = first.value();
    const Slot* start = slot(first_page);
    if (start == nullptr || start->chunk == kNoChunk || start->back != 0) return;
    const std::uint64_t pages = start->pages;
    for (std::uint64_t k = 0; k < pages; ++k) {
      Leaf& leaf = *leaves_[(first_page + k) >> kLeafShift];
      leaf.slots[(first_page + k) & kLeafMask].active = active;
      leaf.set_bits(first_page + k, true, active);
      if (!active) leaf.set_idle(first_page + k, false);
    }
  }

  // Pages [first, last] (pages of active mappings, none idle, first <= last) turned idle together at `tick`: an
  // idle span. Its first page is marked a span start with the tick, and no page after it up to `last` is one
  // any more; the pages after it keep the tick they had (a start is marked right after it, with the tick of the
  // start that held it). So the tick of an idle page is the one at the nearest span start at or before it
  // (idle_tick). Returns how many mappings start in [first, last]. O(leaves + pages / 64 + the pages back from
  // last to the span start that held it / 64).
  std::uint64_t mark_idle(PageNumber first, PageNumber last, std::uint64_t tick) {
    const std::uint64_t lo = first.value(), hi = last.value();
    const std::uint64_t after = hi + 1;
    const bool after_leaf = (after >> kLeafShift) < leaves_.size() && leaves_[after >> kLeafShift];
    const std::uint64_t held_by = after_leaf && !span_start_at(after) ? span_start_at_or_before(after) : UINT64_MAX;
    const bool split = held_by != UINT64_MAX;
    const std::uint64_t after_tick = split ? tick_at_start(held_by) : 0;
    std::uint64_t chunks = 0;
    for_words(lo, hi, [&](Leaf& leaf, std::uint64_t w, std::uint64_t mask) {
      leaf.idle_bits[w] |= mask;
      leaf.span_start_bits[w] &= ~mask;
      chunks += bits_in(leaf.start_bits[w] & mask);
    });
    set_span_start(lo, tick);
    if (split) set_span_start(after, after_tick);
    return chunks;
  }
  // The tick of the idle span holding page `page`: the tick marked at the nearest span start at or before it
  // (for a page not idle, the last span that held it, if any: 0 when none). O(pages back to that start / 64).
  std::uint64_t idle_tick(PageNumber page) const {
    const std::uint64_t start = span_start_at_or_before(page.value());
    return start == UINT64_MAX ? 0 : tick_at_start(start);
  }
  // The first span start in [first, last], or PageNumber::max(). O(leaves + pages / 64).
  PageNumber next_span_start(PageNumber first, PageNumber last) const {
    // Every leaf: a span start stays marked after its pages are unmapped (idle_tick reads it).
    return first_set<&Leaf::span_start_bits, false>(first.value(), last.value());
  }
  // Pages [first, last] (first <= last) are no longer idle: returns how many of them were, and how many chunks'
  // first pages among them. O(leaves + pages / 64).
  std::pair<Pages, std::uint64_t> clear_idle(PageNumber first, PageNumber last) {
    std::uint64_t pages = 0, chunks = 0;
    for_words(first.value(), last.value(), [&](Leaf& leaf, std::uint64_t w, std::uint64_t mask) {
      const std::uint64_t idle = leaf.idle_bits[w] & mask;
      if (idle == 0) return;
      pages += bits_in(idle);
      chunks += bits_in(idle & leaf.start_bits[w]);
      leaf.idle_bits[w] &= ~mask;
    });
    return {Pages{pages}, chunks};
  }
  // The first idle page in [first, last] (first <= last), or PageNumber::max(). O(leaves + pages / 64).
  PageNumber first_idle(PageNumber first, PageNumber last) const {
    return first_set<&Leaf::idle_bits, true>(first.value(), last.value());  // idle pages are mapped ones
  }
  // True when page `page` lies in an idle chunk's active place (set_idle). O(1).
  bool idle_at(PageNumber page) const {
    const std::uint64_t p = page.value(), i = p >> kLeafShift;
    if (i >= leaves_.size() || !leaves_[i]) return false;
    return (leaves_[i]->idle_bits[(p & kLeafMask) >> 6] >> (p & 63)) & 1;
  }
  // The bits of pages [first, last], which lie in one word of 64 pages (first / 64 = last / 64), each at its place
  // in that word (bit k: page first / 64 * 64 + k), the others 0: the pages themselves, then those mapped, active
  // (a subset of mapped) and idle (a subset of active); the last three 0 where no leaf is. O(1), one leaf lookup:
  // what the Placer reads of a block a word at a time, where a loop over leaves and words and the lookups of at()
  // and idle_at() would cost more than the answer.
  struct WordBits {
    std::uint64_t pages, mapped, active, idle;
  };
  WordBits word_bits(PageNumber first, PageNumber last) const {
    const std::uint64_t lo = first.value(), hi = last.value(), i = lo >> kLeafShift;
    GMLAKE_DCHECK(lo <= hi && (lo >> 6) == (hi >> 6), "word_bits of pages outside one word");
    const std::uint64_t mask = (~std::uint64_t{0} << (lo & 63)) & (~std::uint64_t{0} >> (63 - (hi & 63)));
    if (i >= leaves_.size() || !leaves_[i]) return {mask, 0, 0, 0};
    const Leaf& leaf = *leaves_[i];
    const std::uint64_t w = (lo & kLeafMask) >> 6;
    return {mask, leaf.mapped_bits[w] & mask, leaf.active_bits[w] & mask, leaf.idle_bits[w] & mask};
  }
  // Mappings (active or standby) whose first page lies in [first, last] (first <= last). O(leaves + pages / 64).
  std::uint64_t starts(PageNumber first, PageNumber last) const {
    std::uint64_t n = 0;
    const std::uint64_t lo = first.value(), hi = last.value();
    for (std::uint64_t i = lo >> kLeafShift; i <= (hi >> kLeafShift) && i < leaves_.size(); ++i) {
      const Leaf* leaf = leaves_[i].get();
      if (leaf == nullptr || leaf->mapped == 0) continue;
      const std::uint64_t a = i == (lo >> kLeafShift) ? lo & kLeafMask : 0;
      const std::uint64_t b = i == (hi >> kLeafShift) ? hi & kLeafMask : kLeafMask;
      for (std::uint64_t w = a >> 6; w <= b >> 6; ++w) n += bits_in(leaf->start_bits[w] & word_mask(w, a, b));
    }
    return n;
  }

  // The mapping that backs page `page`: its first page and entry; entry.chunk == kNoChunk when none does. O(1).
  std::pair<PageNumber, Entry> at(PageNumber page) const {
    const Slot* s = slot(page.value());
    if (s == nullptr || s->chunk == kNoChunk) return {page, Entry{kNoChunk, Pages{0}, false}};
    return {page - Pages{s->back}, Entry{s->chunk, Pages{s->pages}, s->active}};
  }
  // The chunk whose first page is `first` no longer backs its pages; nothing happens when none starts there.
  void erase(PageNumber first) {
    const std::uint64_t first_page = first.value();
    const Slot* start = slot(first_page);
    if (start == nullptr || start->chunk == kNoChunk || start->back != 0) return;
    const std::uint64_t pages = start->pages;
    for (std::uint64_t k = 0; k < pages; ++k) {
      Leaf& leaf = *leaves_[(first_page + k) >> kLeafShift];
      leaf.slots[(first_page + k) & kLeafMask] = Slot{};
      leaf.set_bits(first_page + k, false, false);
      leaf.set_idle(first_page + k, false);
      --leaf.mapped;
    }
    leaves_[first_page >> kLeafShift]->set_start(first_page, false);
    --chunks_;
  }
  std::uint64_t mapped_chunks() const { return chunks_; }

  // Calls f(first_page, entry) for every mapped chunk overlapping pages [first, last], in page order.
  template <typename F>
  void for_each(PageNumber first, PageNumber last, F&& f) const {
    for_each_until(first, last, [&](PageNumber p, const Entry& e) {
      f(p, e);
      return true;
    });
  }
  // The same, stopping after the first call of f that returns false. f must not change the map. The chunks that
  // follow one another inside one leaf (as a block's chunks do) are stepped through that leaf's slots, one slot
  // read each and no lookup of the leaf; a gap or a leaf's end falls back to the scan of next_start.
  template <typename F>
  void for_each_until(PageNumber first_page, PageNumber last_page, F&& f) const {
    const std::uint64_t first = first_page.value(), last = last_page.value();
    const Slot* s = slot(first);
    std::uint64_t p = s != nullptr && s->chunk != kNoChunk ? first - s->back : next_start(first, last);
    while (p <= last) {
      const std::uint64_t base = p & ~kLeafMask;  // the first page of p's leaf
      const Slot* const slots = leaves_[p >> kLeafShift]->slots.data();
      const std::uint64_t end = last - base < kLeafMask ? last - base : kLeafMask;  // in this leaf
      std::uint64_t k = p - base;
      for (;;) {
        const Slot& at = slots[k];
        if (!f(PageNumber{base + k}, Entry{at.chunk, Pages{at.pages}, at.active})) return;
        k += at.pages;
        if (k > end || slots[k].chunk == kNoChunk) break;
      }
      p = next_start(base + k, last);
    }
  }

  // The first page of the first chunk mapped after `page` (at a higher page), or PageNumber::max() when none is at
  // or before `upto` (the search stops there).
  PageNumber next_mapped_after(PageNumber page, PageNumber upto = PageNumber::max() - Pages{1}) const {
    const std::uint64_t p = page.value();
    const Slot* s = slot(p);
    const std::uint64_t from = s != nullptr && s->chunk != kNoChunk ? p - s->back + s->pages : p + 1;
    return PageNumber{next_start(from, upto.value())};
  }

  // Pages of [first, last] that no chunk backs.
  Pages unmapped_pages(PageNumber first, PageNumber last) const {
    Pages mapped;
    for_each(first, last, [&](PageNumber p, const Entry& e) {
      const PageNumber lo = p < first ? first : p;
      const PageNumber hi = p + e.pages - Pages{1} > last ? last : p + e.pages - Pages{1};
      mapped += hi - lo + Pages{1};
    });
    return (last - first + Pages{1}) - mapped;
  }

  // Calls gap(first_page, pages) for every maximal run of unmapped pages inside [first, last], in page order.
  template <typename F>
  void for_each_gap(PageNumber first, PageNumber last, F&& gap) const {
    PageNumber next = first;  // first page not yet accounted for
    for_each(first, last, [&](PageNumber p, const Entry& e) {
      if (p > next) gap(next, p - next);
      next = p + e.pages;
    });
    if (next <= last) gap(next, last - next + Pages{1});
  }

  // Every entry in page order (checks, teardown).
  template <typename F>
  void for_all(F&& f) const {
    if (chunks_ == 0) return;
    for_each(PageNumber{0}, PageNumber{(static_cast<std::uint64_t>(leaves_.size()) << kLeafShift) - 1}, f);
  }

  // The bits of the word of pages [word_first, word_first + 64) (word_first a multiple of 64) for pages at or
  // past `page`: all of them at or before word_first, none past the word.
  static std::uint64_t bits_from(std::uint64_t page, std::uint64_t word_first) {
    if (page <= word_first) return ~std::uint64_t{0};
    return page - word_first >= 64 ? 0 : ~std::uint64_t{0} << (page - word_first);
  }
  // The bits set in `w`: a popcount. One instruction where the build targets it (x86-64 with POPCNT:
  // GMLAKE_X86_POPCNT in CMakeLists.txt); else no call for an empty or full word, and the rest counted inline in
  // parallel (without the instruction, __builtin_popcountll would call libgcc).
  static std::uint64_t bits_in(std::uint64_t w) {
#if defined(__POPCNT__)
    return static_cast<std::uint64_t>(__builtin_popcountll(w));
#else
    if (w == 0) return 0;
    if (w == ~std::uint64_t{0}) return 64;
    w -= (w >> 1) & 0x5555555555555555ULL;
    w = (w & 0x3333333333333333ULL) + ((w >> 2) & 0x3333333333333333ULL);
    w = (w + (w >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
    return (w * 0x0101010101010101ULL) >> 56;
#endif
  }
  // The equations of the header comment; throws std::logic_error naming the first one broken. O(leaves + mapped
  // pages): every chunk's slots, and their bits, are read from its first page; the leaves' counts and the
  // popcounts of their bitmaps must then add up to them, so no slot or bit outside a chunk is set.
  void check_invariants() const {
    std::vector<std::uint64_t> per_leaf(leaves_.size(), 0), active_per_leaf(leaves_.size(), 0);
    std::uint64_t starts = 0, starts_total = 0;
    for_all([&](PageNumber first_page, const Entry& e) {
      ++starts;
      const std::uint64_t first = first_page.value();
      for (std::uint64_t k = 0; k < e.pages.count(); ++k) {
        const Slot* s = slot(first + k);
        if (s == nullptr || s->chunk != e.chunk || s->back != k || s->pages != e.pages.count() ||
            s->active != e.active) {
          broken("page map slot " + std::to_string(first + k) + " disagrees with the chunk at page " +
                 std::to_string(first) + " (chunks overlap there)");
        }
        const std::uint64_t page = first + k, i = page >> kLeafShift, w = (page & kLeafMask) >> 6;
        const Leaf& leaf = *leaves_[i];
        if (!((leaf.mapped_bits[w] >> (page & 63)) & 1) || ((leaf.active_bits[w] >> (page & 63)) & 1) != e.active) {
          broken("page map leaf " + std::to_string(i) + "'s bitmaps differ from its slots at page " +
                 std::to_string(page));
        }
        if (((leaf.start_bits[w] >> (page & 63)) & 1) != (k == 0 ? 1u : 0u)) {
          broken("page map leaf " + std::to_string(i) + "'s start bits differ from its slots at page " +
                 std::to_string(page));
        }
        ++per_leaf[i];
        active_per_leaf[i] += e.active ? 1 : 0;
      }
    });
    for (std::uint64_t i = 0; i < leaves_.size(); ++i) {
      if (per_leaf[i] != (leaves_[i] ? leaves_[i]->mapped : 0)) {
        broken("page map leaf " + std::to_string(i) + " has mapped slots outside every chunk");
      }
      if (!leaves_[i]) continue;
      std::uint64_t mapped_bits = 0, active_bits = 0, start_bits = 0;
      for (std::uint64_t w = 0; w < kLeafPages / 64; ++w) {
        mapped_bits += static_cast<std::uint64_t>(__builtin_popcountll(leaves_[i]->mapped_bits[w]));
        active_bits += static_cast<std::uint64_t>(__builtin_popcountll(leaves_[i]->active_bits[w]));
        start_bits += static_cast<std::uint64_t>(__builtin_popcountll(leaves_[i]->start_bits[w]));
        if ((leaves_[i]->idle_bits[w] & ~leaves_[i]->active_bits[w]) != 0) {
          broken("page map leaf " + std::to_string(i) + " has idle pages outside every active mapping");
        }
      }
      if (mapped_bits != per_leaf[i] || active_bits != active_per_leaf[i]) {
        broken("page map leaf " + std::to_string(i) + "'s bitmaps have bits set outside every chunk");
      }
      starts_total += start_bits;
    }
    if (starts != chunks_) broken("the page map's chunk count");
    if (starts_total != chunks_) broken("the page map's start bits have bits set outside every chunk's first page");
  }

 private:
  static constexpr unsigned kLeafShift = 12;
  static constexpr std::uint64_t kLeafPages = std::uint64_t{1} << kLeafShift;
  static constexpr std::uint64_t kLeafMask = kLeafPages - 1;
  struct Slot {
    ChunkId chunk = kNoChunk;
    std::uint32_t back = 0;   // pages from the chunk's first page to this one
    std::uint32_t pages = 0;  // the chunk's size
    bool active = false;      // the chunk's active place (else a standby mapping)
  };
  struct Leaf {
    std::array<Slot, kLeafPages> slots{};
    std::array<std::uint64_t, kLeafPages / 64> mapped_bits{};  // bit k: slot k has a chunk
    std::array<std::uint64_t, kLeafPages / 64> active_bits{};  // bit k: slot k is its chunk's active place
    std::array<std::uint64_t, kLeafPages / 64> start_bits{};   // bit k: slot k is its mapping's first page
    std::array<std::uint64_t, kLeafPages / 64> idle_bits{};    // bit k: slot k is an idle chunk's (ChunkUse)
    std::array<std::uint64_t, kLeafPages / 64> span_start_bits{};  // bit k: an idle span starts at slot k
    std::array<std::uint64_t, kLeafPages> span_ticks{};            // the tick of the span starting at slot k
    std::uint64_t mapped = 0;                                  // slots with a chunk
    void set_bits(std::uint64_t page, bool mapped_bit, bool active_bit) {
      const std::uint64_t w = (page & kLeafMask) >> 6, bit = std::uint64_t{1} << (page & 63);
      mapped_bits[w] = mapped_bit ? mapped_bits[w] | bit : mapped_bits[w] & ~bit;
      active_bits[w] = active_bit ? active_bits[w] | bit : active_bits[w] & ~bit;
    }
    void set_start(std::uint64_t page, bool on) {
      const std::uint64_t w = (page & kLeafMask) >> 6, bit = std::uint64_t{1} << (page & 63);
      start_bits[w] = on ? start_bits[w] | bit : start_bits[w] & ~bit;
    }
    void set_idle(std::uint64_t page, bool on) {
      const std::uint64_t w = (page & kLeafMask) >> 6, bit = std::uint64_t{1} << (page & 63);
      idle_bits[w] = on ? idle_bits[w] | bit : idle_bits[w] & ~bit;
    }
  };
  bool span_start_at(std::uint64_t page) const {
    const std::uint64_t i = page >> kLeafShift;
    if (i >= leaves_.size() || !leaves_[i]) return false;
    return (leaves_[i]->span_start_bits[(page & kLeafMask) >> 6] >> (page & 63)) & 1;
  }
  std::uint64_t tick_at_start(std::uint64_t page) const {
    return leaves_[page >> kLeafShift]->span_ticks[page & kLeafMask];
  }
  void set_span_start(std::uint64_t page, std::uint64_t tick) {
    Leaf& leaf = *leaves_[page >> kLeafShift];
    leaf.span_start_bits[(page & kLeafMask) >> 6] |= std::uint64_t{1} << (page & 63);
    leaf.span_ticks[page & kLeafMask] = tick;
  }
  // The nearest span start at or before `page`, or UINT64_MAX.
  std::uint64_t span_start_at_or_before(std::uint64_t page) const {
    std::uint64_t i = std::min<std::uint64_t>(page >> kLeafShift, leaves_.size());
    std::uint64_t w = (page & kLeafMask) >> 6;
    std::uint64_t mask = ~std::uint64_t{0} >> (63 - (page & 63));
    if ((page >> kLeafShift) >= leaves_.size()) {
      mask = ~std::uint64_t{0};
      w = kLeafPages / 64 - 1;
      if (i == 0) return UINT64_MAX;
      --i;
    }
    for (;;) {
      if (const Leaf* leaf = leaves_[i].get(); leaf != nullptr) {
        for (;;) {
          const std::uint64_t bits = leaf->span_start_bits[w] & mask;
          if (bits != 0) return (i << kLeafShift) + (w << 6) + 63 - static_cast<std::uint64_t>(__builtin_clzll(bits));
          if (w == 0) break;
          --w;
          mask = ~std::uint64_t{0};
        }
      }
      if (i == 0) return UINT64_MAX;
      --i;
      w = kLeafPages / 64 - 1;
      mask = ~std::uint64_t{0};
    }
  }
  // The bits of word `w` of a leaf for its slots [a, b] (a <= b, both in the leaf).
  static std::uint64_t word_mask(std::uint64_t w, std::uint64_t a, std::uint64_t b) {
    std::uint64_t mask = ~std::uint64_t{0};
    if (w == a >> 6) mask &= ~std::uint64_t{0} << (a & 63);
    if (w == b >> 6) mask &= ~std::uint64_t{0} >> (63 - (b & 63));
    return mask;
  }
  // The first page in [lo, hi] whose bit is set in every leaf's `kBits`, or PageNumber::max(); leaves with no
  // mapped slot are skipped when kMappedLeavesOnly. O(leaves + pages / 64).
  template <std::array<std::uint64_t, kLeafPages / 64> Leaf::*kBits, bool kMappedLeavesOnly>
  PageNumber first_set(std::uint64_t lo, std::uint64_t hi) const {
    for (std::uint64_t i = lo >> kLeafShift; i <= (hi >> kLeafShift) && i < leaves_.size(); ++i) {
      const Leaf* leaf = leaves_[i].get();
      if (leaf == nullptr || (kMappedLeavesOnly && leaf->mapped == 0)) continue;
      const std::uint64_t a = i == (lo >> kLeafShift) ? lo & kLeafMask : 0;
      const std::uint64_t b = i == (hi >> kLeafShift) ? hi & kLeafMask : kLeafMask;
      for (std::uint64_t w = a >> 6; w <= b >> 6; ++w) {
        const std::uint64_t bits = (leaf->*kBits)[w] & word_mask(w, a, b);
        if (bits != 0) {
          return PageNumber{(i << kLeafShift) + (w << 6) + static_cast<std::uint64_t>(__builtin_ctzll(bits))};
        }
      }
    }
    return PageNumber::max();
  }
  // Calls f(leaf, w, mask) for every word of the leaves that pages [first, last] touch (none where no leaf is:
  // no page there is mapped), with the mask of those pages in it.
  template <typename F>
  void for_words(std::uint64_t first, std::uint64_t last, F&& f) {
    if ((first >> 6) == (last >> 6)) {  // one word (most blocks' chunks): no loop over leaves and words
      const std::uint64_t i = first >> kLeafShift, a = first & kLeafMask, b = last & kLeafMask;
      if (i < leaves_.size() && leaves_[i]) f(*leaves_[i], a >> 6, word_mask(a >> 6, a, b));
      return;
    }
    for (std::uint64_t i = first >> kLeafShift; i <= last >> kLeafShift && i < leaves_.size(); ++i) {
      if (!leaves_[i]) continue;
      Leaf& leaf = *leaves_[i];
      const std::uint64_t a = i == (first >> kLeafShift) ? first & kLeafMask : 0;
      const std::uint64_t b = i == (last >> kLeafShift) ? last & kLeafMask : kLeafMask;
      for (std::uint64_t w = a >> 6; w <= b >> 6; ++w) f(leaf, w, word_mask(w, a, b));
    }
  }

  const Slot* slot(std::uint64_t page) const {
    const std::uint64_t i = page >> kLeafShift;
    if (i >= leaves_.size() || !leaves_[i]) return nullptr;
    return &leaves_[i]->slots[page & kLeafMask];
  }
  Leaf& leaf_for(std::uint64_t i) {
    if (i >= leaves_.size()) leaves_.resize(i + 1);
    if (!leaves_[i]) leaves_[i] = std::make_unique<Leaf>();
    return *leaves_[i];
  }
  // The first mapped page in [p, upto] (a chunk's first page when p is not inside a chunk), or UINT64_MAX.
  std::uint64_t next_start(std::uint64_t p, std::uint64_t upto) const {
    while (p <= upto) {
      const std::uint64_t i = p >> kLeafShift;
      if (i >= leaves_.size()) return UINT64_MAX;
      const Leaf* leaf = leaves_[i].get();
      const std::uint64_t leaf_last = ((i + 1) << kLeafShift) - 1;
      if (leaf != nullptr && leaf->mapped != 0) {
        const std::uint64_t end = upto < leaf_last ? upto : leaf_last;
        for (; p <= end; ++p) {
          if (leaf->slots[p & kLeafMask].chunk != kNoChunk) return p;
        }
      }
      if (leaf_last >= upto) return UINT64_MAX;
      p = leaf_last + 1;
    }
    return UINT64_MAX;
  }

  std::vector<std::unique_ptr<Leaf>> leaves_;
  std::uint64_t chunks_ = 0;
};

}  // namespace gmlake::engine
