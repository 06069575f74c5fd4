#include "chunk_pool.h"

#include <stdexcept>
#include <string>

#include "gmlake/error.h"

namespace gmlake::engine {

ChunkId ChunkPool::create(std::uint64_t pages, DeviceId device) {
  const ChunkHandle handle = backend_.create(pages * page_bytes_, device);  // throws: nothing changed
  ChunkId id;
  if (!spare_.empty()) {
    id = spare_.back();
    spare_.pop_back();
  } else {
    id = static_cast<ChunkId>(chunks_.size());
    chunks_.emplace_back();
  }
  chunks_[id] = Chunk{handle, pages};
  stats_.reserved_bytes.increase(static_cast<std::int64_t>(pages * page_bytes_));
  if (device != backend_.device()) {
    chunks_[id].on_peer = true;
    stats_.peer_reserved_bytes.increase(static_cast<std::int64_t>(pages * page_bytes_));
  }
  ++stats_.chunks_created;
  return id;
}

void ChunkPool::release(ChunkId id) {
  Chunk& c = chunks_[id];
  backend_.release(c.handle);  // throws: nothing changed
  stats_.reserved_bytes.decrease(static_cast<std::int64_t>(c.pages * page_bytes_));
  if (c.on_peer) stats_.peer_reserved_bytes.decrease(static_cast<std::int64_t>(c.pages * page_bytes_));
  ++stats_.chunks_released;
  c = Chunk{};
  spare_.push_back(id);
}

bool ChunkPool::release_quietly(ChunkId id) {
  try {
    release(id);
    return true;
  } catch (const BackendError&) {
    return false;
  }
}

ChunkId ChunkPool::largest_free_at_most(std::uint64_t pages) const {
  auto it = free_.upper_bound(pages);
  if (it == free_.begin()) return kNoChunk;
  return std::prev(it)->second;
}

void ChunkPool::take_free(ChunkId id) {
  auto [lo, hi] = free_.equal_range(chunks_[id].pages);
  for (auto it = lo; it != hi; ++it) {
    if (it->second == id) {
      free_.erase(it);
      free_pages_ -= chunks_[id].pages;
      return;
    }
  }
  throw std::logic_error("gmlake invariant broken: a chunk taken from the free index is not in it");
}

void ChunkPool::release_all_free() {
  while (!free_.empty()) {
    const ChunkId id = std::prev(free_.end())->second;
    const std::uint64_t pages = chunks_[id].pages;
    release(id);  // throws: it stays free
    free_.erase(std::prev(free_.end()));
    free_pages_ -= pages;
  }
}

void ChunkPool::check_invariants() const {
  auto broken = [](const std::string& what) { throw std::logic_error("gmlake invariant broken: " + what); };
  std::uint64_t pages = 0;
  for (const auto& [size, id] : free_) {
    const Chunk& c = chunks_.at(id);
    if (c.pages != size) broken("a free chunk is indexed under another size");
    if (c.mapped() || c.users != 0) broken("a free chunk is mapped or used");
    pages += size;
  }
  if (pages != free_pages_) broken("free pages differ from the recount");
  std::uint64_t peer_pages = 0;
  for_each([&](ChunkId, const Chunk& c) { peer_pages += c.on_peer ? c.pages : 0; });
  if (peer_pages * page_bytes_ != peer_bytes()) broken("peer_reserved_bytes differs from the recount");
}

}  // namespace gmlake::engine
