#include "chunk_use.h"

#include "absl/container/flat_hash_set.h"
#include "engine_checks.h"
#include "gmlake/dcheck.h"

namespace gmlake::engine {

void ChunkUse::use(const Arena& arena, PageNumber first, PageNumber last) {
  // Counted in raw locals and stored once, as for count_idle (chunk_use.h).
  std::uint64_t used_pages = 0, used_chunks = 0;
  Chunk* const chunks = store_.records();  // in a register: the walk's writes to chunks cannot move it
  arena.pages.for_each(first, last, [&](PageNumber, const PageMap::Entry& e) {
    Chunk& c = chunks[e.chunk];
    if (c.users++ != 0) return;
    used_pages += c.pages.count();
    ++used_chunks;
  });
  idle_pages_ -= Pages{used_pages};
  idle_chunks_ -= used_chunks;
  used_ += Pages{used_pages};
}

std::uint64_t ChunkUse::unuse(const Arena& arena, PageNumber first, PageNumber last) {
  std::uint64_t tick = 0, idle_pages = 0;
  Chunk* const chunks = store_.records();  // as in use()
  // Each chunk overlapping the pages covers at least one of them: room for that many entries. The entries
  // written count the chunks turned idle.
  IdleChunks::Entry* const queued = idle_.room((last - first + Pages{1}).count());
  IdleChunks::Entry* next = queued;
  arena.pages.for_each(first, last, [&](PageNumber, const PageMap::Entry& e) {
    Chunk& c = chunks[e.chunk];
    if (--c.users != 0) return;
    if (tick == 0) tick = idle_.next_tick();
    c.idle_since = tick;  // turn_idle, its entry written at `next`
    *next++ = {e.chunk, tick};
    idle_pages += e.pages.count();  // the mapping's size: c.pages (PageMap's invariant)
  });
  const auto idle_chunks = static_cast<std::uint64_t>(next - queued);
  idle_.pushed(idle_chunks);
  count_idle(Pages{idle_pages}, idle_chunks);
  if (tick != 0) idle_.compact_if_dead(idle_chunks_, store_);
  return tick;
}

void ChunkUse::mapped_for_block(ChunkId id) {
  Chunk& c = store_[id];
  GMLAKE_DCHECK(c.mapped(), "a chunk counted as mapped for a block is mapped nowhere");
  c.users = 1;
  used_ += c.pages;
}

void ChunkUse::mapped_idle(ChunkId id) {
  Chunk& c = store_[id];
  GMLAKE_DCHECK(c.mapped(), "a chunk counted as mapped idle is mapped nowhere");
  c.users = 0;
  turn_idle(id, c, idle_.next_tick());
  idle_pages_ += c.pages;  // it was free: counted neither used nor idle
  ++idle_chunks_;
}

std::uint64_t ChunkUse::idle_past(const Arena& arena, PageNumber block_last, PageNumber last) {
  std::uint64_t tick = 0, idle_pages = 0, idle_chunks = 0;
  arena.pages.for_each(block_last + Pages{1}, last, [&](PageNumber p, const PageMap::Entry& e) {
    Chunk& c = store_[e.chunk];
    if (p <= block_last || c.users != 1) return;  // the chunk the block ends in stays used
    if (tick == 0) tick = idle_.next_tick();
    c.users = 0;
    turn_idle(e.chunk, c, tick);
    idle_pages += c.pages.count();
    ++idle_chunks;
  });
  count_idle(Pages{idle_pages}, idle_chunks);
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
  const ChunkId id = idle_.oldest(store_);
  if (id == kNoChunk) broken("idle chunks are counted but none is queued");
  return id;
}

void ChunkUse::check_invariants() const {
  idle_.check_invariants();
  absl::flat_hash_set<ChunkId> queued;
  for_each_idle([&](ChunkId id) { queued.insert(id); });
  Pages used, idle;
  std::uint64_t idle_chunks = 0;
  store_.for_each([&](ChunkId id, const Chunk& c) {
    if (!c.mapped()) return;
    if (c.users != 0) {
      used += c.pages;
      return;
    }
    idle += c.pages;
    ++idle_chunks;
    if (!queued.contains(id)) broken("an idle chunk is not queued");
  });
  if (used != used_) broken("used page count differs from the recount");
  if (idle != idle_pages_ || idle_chunks != idle_chunks_) broken("idle page count differs from the recount");
}

}  // namespace gmlake::engine
