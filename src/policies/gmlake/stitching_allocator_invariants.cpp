// StitchingAllocator::check_invariants: each part's own check (ChunkStore, ArenaSet, each arena's FreeIndex and
// PageMap, ChunkUse, the live table, the StreamFence, the ChunkSource and its MoveBudget), then the equations of
// stitching_allocator.h's header comment that span parts, recounted from the blocks, the page maps and the chunk
// store (tests call it after every step).
#include <algorithm>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "engine_checks.h"
#include "gmlake/units.h"
#include "stitching_allocator.h"

namespace gmlake::engine {

void StitchingAllocator::check_invariants() const {
  // Each part's own equations.
  store_.check_invariants();
  arenas_.check_invariants();
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    arenas_[a].pages.check_invariants();
    if (!arenas_[a].retired) arenas_[a].free.check_invariants();
  }
  use_.check_invariants();
  blocks_.check_invariants();
  fence_.check_invariants();
  source_.check_invariants();
  // Each arena is tiled exactly by its free ranges and its live and pending blocks.
  std::vector<std::vector<FreeRange>> tiles(arenas_.size());
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    if (!arenas_[a].retired) tiles[a] = arenas_[a].free.ranges();
  }
  std::vector<std::uint64_t> arena_blocks(arenas_.size(), 0), kept_blocks(arenas_.size(), 0);
  for (const auto& [address, b] : blocks_) {
    if (b.arena >= arenas_.size()) broken("a block names no arena");
    if (arenas_[b.arena].retired) broken("a block lies in a retired arena");
    ++arena_blocks[b.arena];
    kept_blocks[b.arena] += b.generation != arenas_[b.arena].generation;
  }
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    if (arenas_[a].blocks != arena_blocks[a]) broken("an arena's block count differs from the recount");
    if (arenas_[a].kept_blocks != kept_blocks[a]) broken("an arena's kept block count differs from the recount");
    if (arenas_[a].handover_tick > use_.last_tick() || arenas_[a].last_idle_tick > use_.last_tick())
      broken("an arena's handover or last idle tick is later than any tick handed out");
  }
  // Chunk users recounted from the blocks: the blocks overlapping each chunk, and those it backs an end page of
  // (what its record counts: chunk_use.h); every page of a block mapped.
  absl::flat_hash_map<ChunkId, std::uint32_t> users, end_users;
  for (const auto& [address, b] : blocks_) {
    const Arena& arena = arenas_[b.arena];
    if (address != arena.base + b.offset) broken("block address differs from its arena offset");
    if (b.offset % kRoundBytes || b.size_bytes % kRoundBytes || b.size_bytes < b.requested_bytes)
      broken("block " + hex(address) + " is not 512 B aligned or smaller than requested");
    tiles[b.arena].push_back({b.offset, b.size_bytes});
    if (!arena.free.used(b.piece)) broken("block " + hex(address) + " has no used piece");
    const FreeRange piece = arena.free.extent(b.piece);
    if (piece.offset != b.offset || piece.size_bytes != b.size_bytes) broken("block " + hex(address) + " differs from its piece");
    const PageNumber first = first_page(b.offset), last = last_page(b.offset, b.size_bytes);
    if (arena.pages.unmapped_pages(first, last) != Pages{0}) broken("block " + hex(address) + " has an unmapped page");
    const std::uintptr_t block_address = address;  // a structured binding cannot be captured before C++20
    arena.pages.for_each(first, last, [&](PageNumber p, const PageMap::Entry& e) {
      if (!store_[e.chunk].active_at(arena.id, p)) broken("block " + hex(block_address) + " lies on a standby mapping");
      ++users[e.chunk];
      if (p <= first || p + e.pages > last) ++end_users[e.chunk];
    });
  }
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    if (arenas_[a].retired) continue;
    auto& t = tiles[a];
    std::sort(t.begin(), t.end(), [](const FreeRange& x, const FreeRange& y) { return x.offset < y.offset; });
    std::uint64_t expect = 0;
    for (const FreeRange& r : t) {
      if (r.offset != expect) broken("arena " + std::to_string(a) + ": overlap or gap at offset " + std::to_string(r.offset));
      expect = r.offset + r.size_bytes;
    }
    if (expect != arenas_[a].virtual_bytes) broken("arena " + std::to_string(a) + " is not tiled to its end");
  }
  // Page map entries match their chunks.
  std::uint64_t mapped = 0, standby = 0;
  for (std::size_t a = 0; a < arenas_.size(); ++a) {
    arenas_[a].pages.for_all([&](PageNumber p, const PageMap::Entry& e) {
      const Chunk& c = store_[e.chunk];
      if (c.pages != e.pages) broken("a page map entry differs from its chunk's size");
      if (e.active != c.active_at(static_cast<std::uint32_t>(a), p)) {
        broken("a page map entry's active flag differs from its chunk's active place");
      }
      if (c.active_at(static_cast<std::uint32_t>(a), p)) {
        ++mapped;
      } else if (c.standby_at(static_cast<std::uint32_t>(a), p) != c.standby.end()) {
        ++standby;
      } else {
        broken("a page map entry is neither its chunk's active place nor a standby one");
      }
    });
  }
  std::uint64_t standby_listed = 0;
  store_.for_each([&](ChunkId, const Chunk& c) {
    standby_listed += c.standby.size();
    if (c.on_peer && !c.standby.empty()) broken("a peer chunk has a standby mapping");
    if (config_.standby_mappings != 0 && c.standby.size() > config_.standby_mappings)
      broken("a chunk has more standby mappings than standby_mappings");
  });
  if (standby_listed != standby) broken("standby mappings listed by the chunks differ from the page maps");
  // Chunk users recounted from the blocks (ChunkUse checked the page counts it keeps from them).
  Pages live_pages;
  std::uint64_t mapped_chunks = 0;
  store_.for_each([&](ChunkId id, const Chunk& c) {
    live_pages += c.pages;
    if (!c.mapped()) return;
    ++mapped_chunks;
    const auto it = users.find(id), end_it = end_users.find(id);
    const std::uint32_t expect = it == users.end() ? 0 : it->second;
    const std::uint32_t expect_ends = end_it == end_users.end() ? 0 : end_it->second;
    if (c.users != expect_ends) broken("chunk users (the blocks it ends) differ from the recount");
    if (use_.used(id) != (expect != 0)) broken("a chunk's use differs from the blocks overlapping it");
    if (expect_ends == 0 && expect > 1) broken("a chunk inside a block is overlapped by another");
    if (expect != 0) {
      const Arena& arena = arenas_[c.arena];
      if (!backend_.is_accessible(stitcher_.address(arena, c.first_page), page_.bytes_of(c.pages)))
        broken("a used chunk has no access at " + hex(stitcher_.address(arena, c.first_page)));
    }
  });
  if (mapped_chunks != mapped) broken("mapped chunks differ from the page map entries");
  if (backend_.live_mappings() != mapped + standby)
    broken("backend live mappings differ from the mapped chunks and standby mappings");
  const auto reserved = static_cast<std::int64_t>(page_.bytes_of(live_pages));
  if (stats_.reserved_bytes.current != reserved) broken("reserved_bytes differs from the recount");
  if (backend_.live_chunk_bytes() != static_cast<std::uint64_t>(reserved))
    broken("backend live chunk bytes differ from reserved_bytes");
  // active_bytes: recounted by the live table (blocks_.check_invariants above).
  const std::int64_t used_bytes = static_cast<std::int64_t>(page_.bytes_of(use_.used_pages()));
  if (stats_.inactive_split_bytes.current != used_bytes - stats_.active_bytes.current)
    broken("inactive_split_bytes differs from the recount");
  check_lake_invariants();
  for (const auto* g : {&stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
                        &stats_.requested_bytes, &stats_.inactive_split_bytes,
                        &stats_.peer_reserved_bytes}) {
    if (g->peak < g->current) broken("a peak is below its current value");
  }
}

}  // namespace gmlake::engine
