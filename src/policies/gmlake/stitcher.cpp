#include "stitcher.h"

namespace gmlake::engine {

void Stitcher::map(Arena& arena, std::uint64_t first_page, ChunkId id) {
  Chunk& c = pool_[id];
  backend_.map(address(arena, first_page), c.pages << page_shift_, c.handle);  // throws: nothing changed
  c.arena = arena.id;
  c.first_page = first_page;
  c.users = 0;
  arena.pages.insert(first_page, id, c.pages);
}

void Stitcher::grant(Arena& arena, std::uint64_t first_page, std::uint64_t pages) {
  backend_.set_access(address(arena, first_page), pages << page_shift_);
}

void Stitcher::unmap(Arena& arena, ChunkId id) {
  Chunk& c = pool_[id];
  backend_.unmap(address(arena, c.first_page), c.pages << page_shift_);  // throws: nothing changed
  arena.pages.erase(c.first_page);
  c.arena = Chunk::kUnmapped;
  c.users = 0;
}

}  // namespace gmlake::engine
