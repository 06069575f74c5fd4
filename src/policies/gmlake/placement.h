// Placer: where in an arena the gmlake policy places a block, and what that place costs.
//
// A block may go anywhere in a free range of its arena (512 B granularity, FreeIndex); what differs between
// places is physical: pages already mapped cost no backend call (GMLake's stitched-block reuse), pages not mapped
// must be stitched, and a chunk moves whole, so a block that overlaps an idle chunk without covering it strands
// the rest of that chunk while the block lives. The Placer weighs the best-fitting free ranges (fit_candidates of
// them, in FreeIndex's good-fit order), each at its start and at its end (a block freed next to unmapped space
// leaves a range whose mapped part may lie at either end):
//   first by Cost::unmapped (time: backend calls), then by Cost::pinned_waste (memory);
// a standby mapping (chunk_store.h) counts as mapped while no block uses its chunk elsewhere, else as unmapped;
// a place that costs neither is taken at once; ties keep the start and the earlier candidate. A place on a
// recalled chunk (the lake: its lender wants it back) is never chosen.
// Invariant of a Placement p for a request of n bytes (n a multiple of 512), when p.range.size_bytes != 0
// (check_invariants; choose() checks each place it returns where GMLAKE_DCHECK is on):
//   p.range.offset <= p.offset  and  p.offset + n <= p.range.offset + p.range.size_bytes,  p.offset % 512 = 0
//   p.cost = cost_of(pages of [p.offset, p.offset + n))
// The Placer reads the arena and the chunk store and changes nothing. Thread safety: none (the policy's lock).
#pragma once

#include <cstdint>

#include "arena.h"
#include "chunk_store.h"
#include "chunk_use.h"
#include "page_geometry.h"

namespace gmlake::engine {

class Placer {
 public:
  // What placing a block on pages [first, last] costs: pages to map, and pages of idle chunks it would overlap
  // without covering them (pinned: unusable elsewhere while the block lives).
  struct Cost {
    Pages unmapped;
    Pages pinned_waste;
    std::uint64_t standby = 0;  // standby mappings in the pages (either kind: taken back, or unmapped first)
    Pages total() const { return unmapped + pinned_waste; }
  };
  // Where a block goes: `offset` (bytes from the arena's base) inside free range `range`, at cost `cost`.
  struct Placement {
    FreeRange range;
    std::uint64_t offset;
    Cost cost;
  };

  // `page`: the engine's page (Config::page_bytes); `fit_candidates`: free ranges weighed at most
  // (Config::fit_candidates, >= 1). `store` and `use` (which chunks blocks use) must outlive the Placer.
  Placer(const ChunkStore& store, const ChunkUse& use, PageGeometry page, std::uint64_t fit_candidates)
      : store_(store), use_(use), page_(page), fit_candidates_(fit_candidates) {}

  // The cost of pages [first, last] of `arena` (first <= last); unmapped == Pages::max() when a recalled chunk
  // backs any of them, or when more than `unmapped_bound` of the pages are unmapped (such a place cannot beat one
  // that costs `unmapped_bound`: the count stops as soon as it is past the bound). O(n / 64 + s) for n pages
  // holding s standby mappings, from the page table's bitmaps, while no chunk is recalled; else O(k) for the k
  // chunks mapped in the pages (fewer with a bound).
  Cost cost_of(const Arena& arena, PageNumber first, PageNumber last, Pages unmapped_bound = Pages::max()) const;
  // The cheapest place for `rounded_bytes` (> 0, a multiple of 512) in `arena`, as above; range.size_bytes == 0
  // when no free range is large enough. When every candidate lies on a recalled chunk, every free range is
  // weighed.
  Placement choose(const Arena& arena, std::uint64_t rounded_bytes) const;
  // Checks the invariant above for `p`, a place for `rounded_bytes` in `arena` as the arena and the store are now
  // (nothing to check when p.range.size_bytes == 0); throws std::logic_error (engine_checks.h).
  void check_invariants(const Arena& arena, std::uint64_t rounded_bytes, const Placement& p) const;

 private:
  const ChunkStore& store_;
  const ChunkUse& use_;
  PageGeometry page_;
  std::uint64_t fit_candidates_;
};

}  // namespace gmlake::engine
