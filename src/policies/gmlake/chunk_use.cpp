#include "chunk_use.h"

#include "absl/container/flat_hash_set.h"
#include "engine_checks.h"
#include "gmlake/dcheck.h"

namespace gmlake::engine {

void ChunkUse::use(Arena& arena, PageNumber first, PageNumber last) {
  taken_.clear();  // counted as used already: the block holds them now
  PageMap& map = arena.pages;
  const auto [first_start, at_first] = map.at(first);
  const auto [last_start, at_last] = map.at(last);
  GMLAKE_DCHECK((at_first.chunk == kNoChunk || at_first.active) && (at_last.chunk == kNoChunk || at_last.active),
                "a block is placed over a standby mapping");
  Chunk* const chunks = store_.records();
  // The end chunks count the block; every chunk between them lies wholly inside it (idle until now, or mapped
  // later by the stitch).
  PageNumber lo = first, hi = last;
  if (at_first.chunk != kNoChunk) {
    ++chunks[at_first.chunk].users;
    lo = first_start;
  }
  if (at_last.chunk != kNoChunk) {
    if (at_last.chunk != at_first.chunk) ++chunks[at_last.chunk].users;
    hi = last_start + at_last.pages - Pages{1};
  }
  // The idle chunks in [lo, hi] turn used (their spans' ticks stay marked, stale: PageMap::mark_idle).
  const auto [pages, turned] = map.clear_idle(lo, hi);
  idle_pages_ -= pages;
  idle_chunks_ -= turned;
  used_ += pages;
}

void ChunkUse::add_span(Arena& arena, PageNumber first, PageNumber last, std::uint64_t tick) {
  idle_.push(arena.id, first, last, tick);
  count_idle(last - first + Pages{1}, arena.pages.mark_idle(first, last, tick));
}

ChunkId ChunkUse::first_of(IdleChunks::Entry& e) const {
  const PageMap& map = arenas_[e.arena].pages;
  PageNumber p = e.first;
  while (p <= e.last) {
    p = map.first_idle(p, e.last);
    if (p == PageNumber::max()) break;
    const auto [start, at] = map.at(p);
    if (map.idle_tick(p) == e.tick) {
      e.first = start;
      return at.chunk;
    }
    // A later span: skip to the next span start (whatever lies before it is that span's).
    if (p == e.last) break;
    p = map.next_span_start(p + Pages{1}, e.last);
  }
  e.first = e.last;
  return kNoChunk;
}

std::uint64_t ChunkUse::unuse(Arena& arena, PageNumber first, PageNumber last) {
  const PageMap& map = arena.pages;
  const auto [first_start, at_first] = map.at(first);
  const auto [last_start, at_last] = map.at(last);
  GMLAKE_DCHECK(at_first.chunk != kNoChunk && at_last.chunk != kNoChunk &&
                    map.unmapped_pages(first, last) == Pages{0},
                "unuse of a block not wholly mapped");
  Chunk* const chunks = store_.records();
  const bool first_idle = --chunks[at_first.chunk].users == 0;
  PageNumber lo = first_idle ? first_start : first_start + at_first.pages;
  PageNumber hi = last_start + at_last.pages - Pages{1};
  if (at_last.chunk == at_first.chunk) {
    if (!first_idle) return 0;  // one chunk, still used by a block at its other end
  } else if (--chunks[at_last.chunk].users != 0) {
    hi = last_start - Pages{1};  // last_start > first_start: no wrap
  }
  if (lo > hi) return 0;  // two end chunks, both still used, with nothing between them
  const std::uint64_t tick = idle_.next_tick();
  add_span(arena, lo, hi, tick);
  compact();
  return tick;
}

std::uint64_t ChunkUse::unuse_partly_mapped(Arena& arena, PageNumber first, PageNumber last) {
  // Maximal runs of adjacent chunks turned idle, each a span of the same tick, in page order (as unuse, whose
  // one span is the case with no gap).
  std::vector<std::pair<PageNumber, PageNumber>> runs;
  Chunk* const chunks = store_.records();
  arena.pages.for_each(first, last, [&](PageNumber p, const PageMap::Entry& e) {
    if (!e.active) return;  // (none: the standby mappings in the range were taken or dropped first)
    const PageNumber end = p + e.pages - Pages{1};
    const bool end_chunk = (p <= first && first <= end) || (p <= last && last <= end);
    if (end_chunk && --chunks[e.chunk].users != 0) return;  // still used at its other end
    if (!runs.empty() && runs.back().second + Pages{1} == p) {
      runs.back().second = end;
    } else {
      runs.emplace_back(p, end);
    }
  });
  if (runs.empty()) return 0;
  const std::uint64_t tick = idle_.next_tick();
  for (const auto& [a, b] : runs) add_span(arena, a, b, tick);
  compact();
  return tick;
}

void ChunkUse::mapped_for_block(ChunkId id, PageNumber block_first, PageNumber block_last) {
  Chunk& c = store_[id];
  GMLAKE_DCHECK(c.mapped(), "a chunk counted as mapped for a block is mapped nowhere");
  const PageNumber last = c.first_page + c.pages - Pages{1};
  const bool inside = c.first_page > block_first && last < block_last;
  c.users = inside ? 0 : 1;
  used_ += c.pages;
}

void ChunkUse::mapped_idle(Arena& arena, ChunkId id) {
  Chunk& c = store_[id];
  GMLAKE_DCHECK(c.mapped() && c.arena == arena.id, "a chunk counted as mapped idle is mapped elsewhere");
  c.users = 0;
  used_ += c.pages;  // it was free: counted neither used nor idle (add_span moves it to idle)
  add_span(arena, c.first_page, c.first_page + c.pages - Pages{1}, idle_.next_tick());
}

void ChunkUse::take_idle(Arena& arena, ChunkId id) {
  const Chunk& c = store_[id];
  if (c.users != 0 || !arena.pages.idle_at(c.first_page)) broken("a chunk taken as idle is not idle");
  taken_.push_back({id, arena.id, c.first_page});  // throws bad_alloc: nothing changed
  // Its idle bits go when Stitcher::activate makes this place a standby one (PageMap::set_active), next.
  idle_pages_ -= c.pages;
  --idle_chunks_;
  used_ += c.pages;
}

void ChunkUse::restore_taken(Arena& arena) {
  for (const Taken& t : taken_) {
    const Chunk& c = store_[t.id];
    if (!c.mapped() || c.arena != arena.id) broken("a chunk taken as idle left the block's arena");
    const PageNumber last = c.first_page + c.pages - Pages{1};
    const std::uint64_t tick = arenas_[t.arena].pages.idle_tick(t.first);  // still marked at its old place
    // An old tick from another arena is not one of this arena's from before its handover (Arena::handover_tick),
    // whose stream's work has finished: the handover's floor comes down below it, so that the fence judges it.
    if (tick < arena.handover_tick) arena.handover_tick = tick;
    idle_.push_moved(arena.id, c.first_page, last, tick, t.arena, t.first, t.first + c.pages - Pages{1});
    count_idle(c.pages, arena.pages.mark_idle(c.first_page, last, tick));
  }
  taken_.clear();
}

std::uint64_t ChunkUse::idle_past(Arena& arena, PageNumber block_last, PageNumber last) {
  // The chunks that start past the block: mapped for it (users 0 or 1 from mapped_for_block: those grown
  // ahead have 1).
  const auto [start, at] = arena.pages.at(block_last);
  const PageNumber lo = at.chunk == kNoChunk ? block_last + Pages{1} : start + at.pages;
  if (lo > last) return 0;
  Chunk* const chunks = store_.records();
  arena.pages.for_each(lo, last, [&](PageNumber, const PageMap::Entry& e) { chunks[e.chunk].users = 0; });
  const std::uint64_t tick = idle_.next_tick();
  add_span(arena, lo, last, tick);
  return tick;
}

void ChunkUse::unmapped(Pages pages, bool was_used) {
  GMLAKE_DCHECK(was_used ? used_ >= pages : idle_pages_ >= pages && idle_chunks_ != 0,
                "a chunk unmapped was not counted as mapped");
  if (was_used) {
    used_ -= pages;
  } else {
    idle_pages_ -= pages;
    --idle_chunks_;
  }
}

ChunkId ChunkUse::oldest_idle() {
  const ChunkId id = idle_.oldest([this](IdleChunks::Entry& e) { return first_of(e); });
  if (id == kNoChunk) broken("idle chunks are counted but none is queued");
  return id;
}

void ChunkUse::check_invariants() const {
  idle_.check_invariants();
  // Every idle chunk lies in a queue entry of its span's tick (entries of one tick do not overlap: IdleChunks),
  // once: the chunks for_each_idle reports.
  absl::flat_hash_set<ChunkId> queued;
  for_each_idle([&](ChunkId id) {
    if (!queued.insert(id).second) broken("an idle chunk is queued twice");
  });
  Pages used, idle;
  std::uint64_t idle_chunks = 0;
  store_.for_each([&](ChunkId id, const Chunk& c) {
    if (!c.mapped()) return;
    const PageMap& map = arenas_[c.arena].pages;
    const bool is_idle = map.idle_at(c.first_page);
    for (PageNumber q = c.first_page; q < c.first_page + c.pages; ++q) {
      if (map.idle_at(q) != is_idle) broken("a chunk's pages are idle in part");
    }
    if (!is_idle) {
      used += c.pages;
      return;
    }
    if (c.users != 0) broken("an idle chunk counts a block");
    if (map.idle_tick(c.first_page) > idle_.last_tick()) broken("an idle chunk's tick is not handed out yet");
    if (!queued.contains(id)) broken("an idle chunk is not queued with its tick");
    idle += c.pages;
    ++idle_chunks;
  });
  if (used != used_) broken("used page count differs from the recount");
  if (idle != idle_pages_ || idle_chunks != idle_chunks_) broken("idle page count differs from the recount");
}

}  // namespace gmlake::engine
