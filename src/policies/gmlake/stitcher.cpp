#include "stitcher.h"

#include <algorithm>
#include <stdexcept>

#include "gmlake/dcheck.h"

namespace gmlake::engine {

void Stitcher::map(Arena& arena, PageNumber first_page, ChunkId id) {
  Chunk& c = store_[id];
  GMLAKE_DCHECK(c.pages != Pages{0} && !c.mapped(), "mapping a chunk that is not free");
  backend_.map(address(arena, first_page), page_.bytes_of(c.pages), c.handle);  // throws: nothing changed
  c.arena = arena.id;
  c.first_page = first_page;
  c.users = 0;
  arena.pages.insert(first_page, id, c.pages);
}

void Stitcher::grant(Arena& arena, PageNumber first_page, Pages pages) {
  backend_.set_access(address(arena, first_page), page_.bytes_of(pages));
}

void Stitcher::unmap(Arena& arena, ChunkId id) {
  Chunk& c = store_[id];
  backend_.unmap(address(arena, c.first_page), page_.bytes_of(c.pages));  // throws: nothing changed
  arena.pages.erase(c.first_page);
  c.arena = Chunk::kUnmapped;
  c.users = 0;
}

void Stitcher::to_standby(Arena& active_arena, ChunkId id, std::uint64_t left_tick) {
  Chunk& c = store_[id];
  c.standby.push_back({c.arena, c.first_page, left_tick});  // throws bad_alloc: nothing changed
  active_arena.pages.set_active(c.first_page, false);
  if (BackendObserver* o = backend_.observer()) o->on_unmap(address(active_arena, c.first_page), page_.bytes_of(c.pages));
  c.arena = Chunk::kUnmapped;
  c.users = 0;
}

void Stitcher::activate(Arena& arena, PageNumber first_page, ChunkId id, Arena* active_arena,
                        std::uint64_t left_tick) {
  Chunk& c = store_[id];
  const auto it = c.standby_at(arena.id, first_page);
  if (it == c.standby.end()) throw std::logic_error("gmlake invariant broken: activating a mapping a chunk lacks");
  BackendObserver* o = backend_.observer();
  if (c.mapped()) {
    if (active_arena == nullptr) {
      throw std::logic_error("gmlake invariant broken: activating a chunk mapped elsewhere, its arena not given");
    }
    if (o != nullptr) o->on_unmap(address(*active_arena, c.first_page), page_.bytes_of(c.pages));
    active_arena->pages.set_active(c.first_page, false);
    // The active place becomes a standby one, in the slot of the one activated: the stream's work before the
    // chunk's idle tick may still touch it.
    *it = {c.arena, c.first_page, left_tick};
    std::rotate(it, it + 1, c.standby.end());  // ... and the newest
  } else {
    c.standby.erase(it);
  }
  c.arena = arena.id;
  c.first_page = first_page;
  arena.pages.set_active(first_page, true);
  if (o != nullptr) o->on_map(address(arena, first_page), page_.bytes_of(c.pages));
}

void Stitcher::unmap_standby(Arena& arena, PageNumber first_page, ChunkId id) {
  Chunk& c = store_[id];
  const auto it = c.standby_at(arena.id, first_page);
  if (it == c.standby.end()) throw std::logic_error("gmlake invariant broken: unmapping a mapping a chunk lacks");
  unmap_unobserved(address(arena, first_page), page_.bytes_of(c.pages));  // throws: nothing changed
  arena.pages.erase(first_page);
  c.standby.erase(it);
}

void Stitcher::unmap_unobserved(std::uintptr_t addr, std::uint64_t size_bytes) {
  BackendObserver* o = backend_.observer();
  backend_.set_observer(nullptr);
  try {
    backend_.unmap(addr, size_bytes);
  } catch (...) {
    backend_.set_observer(o);
    throw;
  }
  backend_.set_observer(o);
}

}  // namespace gmlake::engine
