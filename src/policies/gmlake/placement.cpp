#include "placement.h"

#include <algorithm>
#include <string>

#include "engine_checks.h"
#include "gmlake/dcheck.h"
#include "gmlake/units.h"

namespace gmlake::engine {

Placer::Cost Placer::cost_of(const Arena& arena, std::uint64_t first, std::uint64_t last,
                             std::uint64_t unmapped_bound) const {
  GMLAKE_DCHECK(first <= last, "the cost of an empty page range");
  const bool any_recalled = !store_.recalled().empty();
  // No standby mapping and no recalled chunk in the pages (the common case): the page table's bitmaps give the
  // mapped pages, and only the chunks at the two ends can be covered in part, so no walk is needed.
  if (!any_recalled) {
    const PageMap::Summary sum = arena.pages.summarize(first, last);
    if (sum.standby_pages == 0) return cost_without_standby(arena, first, last, unmapped_bound, sum);
  }
  Cost cost{last - first + 1, 0};
  bool recalled = false;
  std::uint64_t next = first;       // the first page not yet walked
  std::uint64_t known_unmapped = 0;  // pages before `next` that would have to be stitched
  arena.pages.for_each_until(first, last, [&](std::uint64_t p, const PageMap::Entry& e) {
    const std::uint64_t lo = std::max(p, first), hi = std::min(p + e.pages - 1, last);
    const std::uint64_t covered = hi - lo + 1;
    known_unmapped += lo - next;  // the gap before this chunk
    next = hi + 1;
    // An active mapping the pages cover whole costs nothing, whatever its chunk's state: only the chunks at the
    // ends of the pages, and standby mappings, need the chunk's record.
    if (e.active && covered == e.pages && !any_recalled) {
      cost.unmapped -= covered;
      return known_unmapped <= unmapped_bound;
    }
    const Chunk& c = store_[e.chunk];
    cost.standby += e.active ? 0 : 1;
    // A standby mapping of a chunk that a block uses elsewhere goes: its pages are stitched anew.
    if (c.users != 0 && !e.active) {
      known_unmapped += covered;
    } else {
      cost.unmapped -= covered;
      if (c.users == 0) cost.pinned_waste += e.pages - covered;
      recalled = recalled || c.recalled;
    }
    return known_unmapped <= unmapped_bound;
  });
  // Past the bound, or on a recalled chunk (it takes no new block): never chosen.
  return recalled || known_unmapped > unmapped_bound ? Cost{UINT64_MAX, 0} : cost;
}

Placer::Cost Placer::cost_without_standby(const Arena& arena, std::uint64_t first, std::uint64_t last,
                                          std::uint64_t unmapped_bound, const PageMap::Summary& sum) const {
  // Pages before the last mapped one that are unmapped: what the walk would have found (it stops past the bound).
  const std::uint64_t before_last_mapped =
      sum.last_mapped == UINT64_MAX ? 0 : (sum.last_mapped - first + 1) - sum.active_pages;
  if (before_last_mapped > unmapped_bound) return Cost{UINT64_MAX, 0};
  Cost cost{last - first + 1 - sum.active_pages, 0};
  // An idle chunk the pages cover in part pins the rest of it; only the chunks at `first` and `last` can.
  const auto [first_start, at_first] = arena.pages.at(first);
  if (at_first.chunk != kNoChunk) {
    const std::uint64_t covered = std::min(first_start + at_first.pages - 1, last) - first + 1;
    if (covered != at_first.pages && store_[at_first.chunk].users == 0) cost.pinned_waste += at_first.pages - covered;
  }
  const auto [last_start, at_last] = arena.pages.at(last);
  if (at_last.chunk != kNoChunk && !(at_first.chunk != kNoChunk && last_start == first_start)) {
    const std::uint64_t covered = last - std::max(last_start, first) + 1;
    if (covered != at_last.pages && store_[at_last.chunk].users == 0) cost.pinned_waste += at_last.pages - covered;
  }
  return cost;
}

Placer::Placement Placer::choose(const Arena& arena, std::uint64_t rounded_bytes) const {
  GMLAKE_DCHECK(rounded_bytes != 0 && rounded_bytes % kRoundBytes == 0, "a request not rounded to 512 B");
  Placement best{{0, 0}, 0, {UINT64_MAX, 0}};
  auto weigh = [&](const FreeRange& r) {
    const std::uint64_t end_offset = r.offset + r.size_bytes - rounded_bytes;
    for (const std::uint64_t offset : {r.offset, end_offset}) {
      const Cost c = cost_of(arena, page_.first_page(offset), page_.last_page(offset, rounded_bytes),
                             best.cost.unmapped);
      if (c.unmapped < best.cost.unmapped ||
          (c.unmapped == best.cost.unmapped && c.pinned_waste < best.cost.pinned_waste)) {
        best = {r, offset, c};
      }
      if (c.total() == 0) return true;
      if (end_offset == r.offset) break;
    }
    return false;
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
