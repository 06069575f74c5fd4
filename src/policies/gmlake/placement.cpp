#include "placement.h"

#include <algorithm>
#include <string>

#include "engine_checks.h"
#include "gmlake/dcheck.h"
#include "gmlake/units.h"

namespace gmlake::engine {

namespace {

// The pages of the idle chunks at the ends of pages [first_raw, last_raw] outside them (a block there pins them),
// given whether each end page is idle. The page at an end is idle iff such a chunk lies there (idle bits cover an
// idle chunk's pages whole: ChunkUse's invariant), so an end not idle needs no look at its chunk; a chunk at both
// ends counts once. Inlined into both callers: it is most of the cost of the common block.
[[gnu::always_inline]] inline std::uint64_t pinned_at_ends(const Arena& arena, std::uint64_t first_raw,
                                                           std::uint64_t last_raw, bool first_idle, bool last_idle) {
  std::uint64_t pinned_waste = 0;
  std::uint64_t first_chunk_last = 0;  // the last page of the idle chunk at `first`, when there is one
  if (first_idle) {
    const auto [start, e] = arena.pages.at(PageNumber{first_raw});
    const std::uint64_t pages = e.pages.count();
    first_chunk_last = start.value() + pages - 1;
    const std::uint64_t covered = std::min(first_chunk_last, last_raw) - first_raw + 1;
    if (covered != pages) pinned_waste += pages - covered;
  }
  // The chunk at `last`, unless it is the one at `first` (counted there).
  if (last_idle && !(first_idle && first_chunk_last >= last_raw)) {
    const auto [start, e] = arena.pages.at(PageNumber{last_raw});
    const std::uint64_t pages = e.pages.count();
    const std::uint64_t covered = last_raw - std::max(start.value(), first_raw) + 1;
    if (covered != pages) pinned_waste += pages - covered;
  }
  return pinned_waste;
}

// Placer::cost_of while a chunk is recalled: a walk over the chunks mapped in the pages (one step each), which
// finds a recalled one. Kept out of line (noinline: it would be inlined), so that cost_of's common
// paths carry none of its state and save fewer registers per call.
[[gnu::noinline]] Placer::Cost cost_by_walk(const ChunkStore& store, const ChunkUse& use, const Arena& arena, PageNumber first,
                          PageNumber last, Pages unmapped_bound) {
  // The walk counts in raw page numbers (one step per chunk), typed once at the end.
  const std::uint64_t first_raw = first.value(), last_raw = last.value(), bound = unmapped_bound.count();
  std::uint64_t unmapped = last_raw - first_raw + 1, pinned_waste = 0, standby = 0;
  bool recalled = false;
  std::uint64_t next = first_raw;    // the first page not yet walked
  std::uint64_t known_unmapped = 0;  // pages before `next` that would have to be stitched
  arena.pages.for_each_until(first, last, [&](PageNumber start, const PageMap::Entry& e) {
    const std::uint64_t p = start.value(), pages = e.pages.count();
    const std::uint64_t lo = std::max(p, first_raw), hi = std::min(p + pages - 1, last_raw);
    const std::uint64_t covered = hi - lo + 1;
    known_unmapped += lo - next;  // the gap before this chunk
    next = hi + 1;
    const Chunk& c = store[e.chunk];
    standby += e.active ? 0 : 1;
    // An active place is idle when the page table says so; a standby mapping's chunk is used elsewhere or not.
    const bool used = e.active ? !arena.pages.idle_at(start) : use.used(e.chunk);
    // A standby mapping of a chunk that a block uses elsewhere goes: its pages are stitched anew.
    if (used && !e.active) {
      known_unmapped += covered;
    } else {
      unmapped -= covered;
      if (!used) pinned_waste += pages - covered;
      recalled = recalled || c.recalled;
    }
    return known_unmapped <= bound;
  });
  // Past the bound (the gaps walked, or all the unmapped pages once the walk is done), or on a recalled chunk (it
  // takes no new block): never chosen.
  if (recalled || known_unmapped > bound || unmapped > bound) return Placer::Cost{Pages::max(), Pages{0}};
  return Placer::Cost{Pages{unmapped}, Pages{pinned_waste}, standby};
}

// Placer::cost_of when no chunk is recalled and no standby mapping lies in the pages (the common block), from the
// bits of each word of 64 pages (PageMap::word_bits): the pages cost their unmapped ones, counted word by word
// (none in a word wholly mapped: bits_in's O(1) case) and given up past `bound` (the count only grows), and only
// where an end page is idle is the chunk there read (idle bits cover an idle chunk's pages whole: ChunkUse's
// invariant), for the pages it pins. Writes `cost` and returns true; false (`cost` unset) when a word holds a
// standby mapping (cost_with_standby prices those). O(n / 64) for n pages. Inlined into Placer::choose, which
// prices up to 2 x fit_candidates places a request.
[[gnu::always_inline]] inline bool cost_in_words(const Arena& arena, std::uint64_t first_raw, std::uint64_t last_raw,
                                                 std::uint64_t bound, Placer::Cost& cost) {
  std::uint64_t unmapped = 0;
  bool first_idle = false, last_idle = false;
  for (std::uint64_t lo = first_raw;;) {
    const std::uint64_t hi = std::min(lo | 63, last_raw);  // this word's part of the pages
    const PageMap::WordBits bits = arena.pages.word_bits(PageNumber{lo}, PageNumber{hi});
    if ((bits.mapped & ~bits.active) != 0) return false;
    unmapped += PageMap::bits_in(bits.pages & ~bits.active);
    if (unmapped > bound) {
      cost = Placer::Cost{Pages::max(), Pages{0}};
      return true;
    }
    if (lo == first_raw) first_idle = (bits.idle >> (lo & 63)) & 1;
    if (hi == last_raw) {
      last_idle = (bits.idle >> (hi & 63)) & 1;
      break;
    }
    lo = hi + 1;
  }
  cost = Placer::Cost{Pages{unmapped}, Pages{pinned_at_ends(arena, first_raw, last_raw, first_idle, last_idle)}, 0};
  return true;
}

// What the standby mappings (chunk_store.h) among pages [first_raw, last_raw] add to their cost: a mapping whose
// chunk a block uses is unmapped first, and its pages there stitched anew (`lost`); one whose chunk no block uses
// is taken back (its pages count as mapped), and pins the rest of the chunk when the pages cover it in part.
struct StandbyCost {
  std::uint64_t lost = 0, pinned_waste = 0, mappings = 0;
  std::uint64_t next = 0;  // pages below it lie in a mapping already counted
};

// Counts into `s` the standby mappings of `standby` (the standby pages of the word of 64 pages from `word_first`,
// among pages [first_raw, last_raw]) that start, or enter the pages, there: one page table lookup and one chunk
// record each; stops once s.lost exceeds `lost_bound` (the place is past its bound).
void count_standby(const ChunkUse& use, const PageMap& map, std::uint64_t first_raw, std::uint64_t last_raw,
                   std::uint64_t word_first, std::uint64_t standby, std::uint64_t lost_bound, StandbyCost& s) {
  for (standby &= PageMap::bits_from(s.next, word_first); standby != 0;
       standby &= PageMap::bits_from(s.next, word_first)) {
    const auto [start, e] = map.at(PageNumber{word_first + static_cast<std::uint64_t>(__builtin_ctzll(standby))});
    const std::uint64_t p = start.value(), pages = e.pages.count();
    const std::uint64_t covered = std::min(p + pages - 1, last_raw) - std::max(p, first_raw) + 1;
    ++s.mappings;
    if (use.used(e.chunk)) {
      s.lost += covered;
      if (s.lost > lost_bound) return;  // the place is past its bound: the rest need not be counted
    } else {
      s.pinned_waste += pages - covered;
    }
    s.next = p + pages;
  }
}

// Placer::cost_of when no chunk is recalled and standby mappings lie in the pages: as cost_in_words, with the
// standby mappings' lost pages counted as unmapped and the pages they pin (count_standby). O(n / 64 + s) for n
// pages holding s standby mappings. Out of line, as cost_by_walk: most blocks meet no standby mapping.
[[gnu::noinline]] Placer::Cost cost_with_standby(const ChunkUse& use, const Arena& arena, std::uint64_t first_raw,
                                                 std::uint64_t last_raw, std::uint64_t bound) {
  std::uint64_t unmapped = 0;  // pages no chunk backs
  StandbyCost standby;
  bool first_idle = false, last_idle = false;
  for (std::uint64_t lo = first_raw;;) {
    const std::uint64_t hi = std::min(lo | 63, last_raw);  // this word's part of the pages
    const PageMap::WordBits bits = arena.pages.word_bits(PageNumber{lo}, PageNumber{hi});
    unmapped += PageMap::bits_in(bits.pages & ~bits.mapped);
    if (const std::uint64_t standby_bits = bits.mapped & ~bits.active; standby_bits != 0) {
      if (unmapped > bound) return Placer::Cost{Pages::max(), Pages{0}};
      count_standby(use, arena.pages, first_raw, last_raw, lo & ~std::uint64_t{63}, standby_bits, bound - unmapped,
                    standby);
    }
    if (unmapped + standby.lost > bound) return Placer::Cost{Pages::max(), Pages{0}};
    if (lo == first_raw) first_idle = (bits.idle >> (lo & 63)) & 1;
    if (hi == last_raw) {
      last_idle = (bits.idle >> (hi & 63)) & 1;
      break;
    }
    lo = hi + 1;
  }
  // An idle chunk's active place that the pages cover in part pins the rest of it; only the chunks at the ends
  // can be (a standby mapping's pages are never idle: counted above).
  const std::uint64_t pinned_waste =
      standby.pinned_waste + pinned_at_ends(arena, first_raw, last_raw, first_idle, last_idle);
  return Placer::Cost{Pages{unmapped + standby.lost}, Pages{pinned_waste}, standby.mappings};
}

// Placer::cost_of, inlined into Placer::choose: from the page table's bitmaps while no chunk is recalled (the
// common case), else by the walk.
[[gnu::always_inline]] inline Placer::Cost cost_of_pages(const ChunkStore& store, const ChunkUse& use, const Arena& arena,
                                                 PageNumber first, PageNumber last, Pages unmapped_bound) {
  GMLAKE_DCHECK(first <= last, "the cost of an empty page range");
  if (!store.recalled().empty()) return cost_by_walk(store, use, arena, first, last, unmapped_bound);
  Placer::Cost cost;
  if (cost_in_words(arena, first.value(), last.value(), unmapped_bound.count(), cost)) return cost;
  return cost_with_standby(use, arena, first.value(), last.value(), unmapped_bound.count());
}

}  // namespace

Placer::Cost Placer::cost_of(const Arena& arena, PageNumber first, PageNumber last, Pages unmapped_bound) const {
  return cost_of_pages(store_, use_, arena, first, last, unmapped_bound);
}

Placer::Placement Placer::choose(const Arena& arena, std::uint64_t rounded_bytes) const {
  GMLAKE_DCHECK(rounded_bytes != 0 && rounded_bytes % kRoundBytes == 0, "a request not rounded to 512 B");
  // Most requests take the first range the search visits, at its start, at no cost (a step that repeats finds
  // its block's pages mapped and in use by nothing else: 95% of lora_ckpt_train's): priced here alone, it is
  // the search's own first choice, without its walk's bookkeeping.
  if (store_.recalled().empty()) {
    const FreeRange first = arena.free.first_candidate(rounded_bytes);
    if (first.size_bytes != 0) {
      Cost c;
      if (cost_in_words(arena, page_.first_page(first.offset).value(),
                        page_.last_page(first.offset, rounded_bytes).value(), 0, c) &&
          c.total() == Pages{0}) {
        const Placement at{first, first.offset, c};
        if constexpr (GMLAKE_DCHECK_IS_ON) check_invariants(arena, rounded_bytes, at);
        return at;
      }
    }
  }
  Placement best{{0, 0}, 0, {Pages::max(), Pages{0}}};
  // Prices the place at `offset` in `r` on pages [first, last]; true when it costs nothing (taken at once).
  auto price = [&](const FreeRange& r, std::uint64_t offset, PageNumber first, PageNumber last) {
    const Cost c = cost_of_pages(store_, use_, arena, first, last, best.cost.unmapped);
    if (c.unmapped < best.cost.unmapped ||
        (c.unmapped == best.cost.unmapped && c.pinned_waste < best.cost.pinned_waste)) {
      best = {r, offset, c};
    }
    return c.total() == Pages{0};
  };
  auto weigh = [&](const FreeRange& r) {
    const std::uint64_t end_offset = r.offset + r.size_bytes - rounded_bytes;
    const PageNumber start_first = page_.first_page(r.offset), start_last = page_.last_page(r.offset, rounded_bytes);
    if (price(r, r.offset, start_first, start_last)) return true;
    const PageNumber end_first = page_.first_page(end_offset), end_last = page_.last_page(end_offset, rounded_bytes);
    // The end on the start's pages (the end itself when the range fits exactly) costs what the start did, and a
    // tie keeps the start: it is not priced again.
    if (end_first == start_first && end_last == start_last) return false;
    return price(r, end_offset, end_first, end_last);
  };
  arena.free.best_fit(rounded_bytes, fit_candidates_, weigh);
  // Every candidate lay on a recalled chunk: look at every free range.
  if (best.range.size_bytes == 0 && !store_.recalled().empty()) arena.free.best_fit(rounded_bytes, UINT64_MAX, weigh);
  if constexpr (GMLAKE_DCHECK_IS_ON) check_invariants(arena, rounded_bytes, best);
  return best;
}

void Placer::check_invariants(const Arena& arena, std::uint64_t rounded_bytes, const Placement& p) const {
  if (p.range.size_bytes == 0) return;
  if (rounded_bytes == 0 || rounded_bytes % kRoundBytes != 0) broken("a placement for a request not rounded to 512 B");
  if (p.offset % kRoundBytes != 0) broken("a placement at offset " + std::to_string(p.offset) + " is not 512 B aligned");
  if (p.offset < p.range.offset || p.offset + rounded_bytes > p.range.offset + p.range.size_bytes)
    broken("a placement at offset " + std::to_string(p.offset) + " leaves its free range");
  const Cost c = cost_of(arena, page_.first_page(p.offset), page_.last_page(p.offset, rounded_bytes));
  if (c.unmapped != p.cost.unmapped || c.pinned_waste != p.cost.pinned_waste)
    broken("a placement's cost differs from the cost of its pages");
}

}  // namespace gmlake::engine
