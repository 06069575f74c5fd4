#include "chunk_store.h"

#include <stdexcept>
#include <string>

#include "gmlake/dcheck.h"
#include "gmlake/error.h"
#include "peer_source.h"

namespace gmlake::engine {
namespace {

// An unused record (pages 0), field by field: assigning a fresh Chunk would move its InlinedVector, which GCC 12
// flags as a read of uninitialized storage.
void clear(Chunk& c) {
  c.handle = ChunkHandle{};
  c.pages = Pages{0};
  c.arena = Chunk::kUnmapped;
  c.users = 0;
  c.first_page = PageNumber{0};
  c.on_peer = false;
  c.recalled = false;
  c.standby.clear();
}

}  // namespace

ChunkId ChunkStore::create(Pages pages, DeviceId device) {
  const ChunkHandle handle = backend_.create(page_.bytes_of(pages), device);  // throws: nothing changed
  try {
    return record(handle, pages, device != backend_.device());
  } catch (...) {
    backend_.release(handle);
    throw;
  }
}

ChunkId ChunkStore::adopt(ChunkHandle handle, Pages pages) { return record(handle, pages, true); }

ChunkId ChunkStore::record(ChunkHandle handle, Pages pages, bool on_peer) {
  ChunkId id;
  if (!spare_.empty()) {
    id = spare_.back();
    spare_.pop_back();
  } else {
    id = static_cast<ChunkId>(chunks_.size());
    chunks_.emplace_back();  // the only call that may throw (bad_alloc): nothing recorded yet
  }
  Chunk& c = chunks_[id];
  clear(c);
  c.handle = handle;
  c.pages = pages;
  c.on_peer = on_peer;
  stats_.reserved_bytes.increase(static_cast<std::int64_t>(page_.bytes_of(pages)));
  if (on_peer) stats_.peer_reserved_bytes.increase(static_cast<std::int64_t>(page_.bytes_of(pages)));
  ++stats_.chunks_created;
  return id;
}

void ChunkStore::release(ChunkId id) {
  Chunk& c = chunks_[id];
  GMLAKE_DCHECK(c.pages != Pages{0}, "releasing a chunk record that holds no chunk");
  if (c.on_peer && peers_ != nullptr) {
    peers_->give_back(backend_, c.handle);  // throws: nothing changed
  } else {
    backend_.release(c.handle);  // throws: nothing changed
  }
  stats_.reserved_bytes.decrease(static_cast<std::int64_t>(page_.bytes_of(c.pages)));
  if (c.on_peer) stats_.peer_reserved_bytes.decrease(static_cast<std::int64_t>(page_.bytes_of(c.pages)));
  ++stats_.chunks_released;
  if (c.recalled) std::erase(recalled_, id);
  clear(c);
  spare_.push_back(id);
}

void ChunkStore::recall(ChunkId id) {
  Chunk& c = chunks_[id];
  if (!c.on_peer || c.recalled) return;
  c.recalled = true;
  recalled_.push_back(id);
  if (!c.mapped()) erase_free(id);
}

ChunkId ChunkStore::find(ChunkHandle handle) const {
  for (ChunkId id = 0; id < chunks_.size(); ++id) {
    if (chunks_[id].pages != Pages{0} && chunks_[id].handle == handle) return id;
  }
  return kNoChunk;
}

bool ChunkStore::release_quietly(ChunkId id) {
  try {
    release(id);
    return true;
  } catch (const Error&) {  // any refusal (an injected OutOfMemoryError too): the chunk stays free
    return false;
  }
}

ChunkId ChunkStore::largest_free_at_most(Pages pages) const {
  auto it = free_.upper_bound(FreeKey{pages, UINT64_MAX});
  if (it == free_.begin()) return kNoChunk;
  return std::prev(it)->second;
}

void ChunkStore::take_free(ChunkId id) {
  if (!erase_free(id)) throw std::logic_error("gmlake invariant broken: a chunk taken from the free index is not in it");
}

bool ChunkStore::erase_free(ChunkId id) {
  const auto it = free_.find(FreeKey{chunks_[id].pages, chunks_[id].free_seq});
  if (it == free_.end() || it->second != id) return false;
  free_.erase(it);
  free_pages_ -= chunks_[id].pages;
  return true;
}

void ChunkStore::release_all_free() {
  while (!free_.empty()) {
    const ChunkId id = std::prev(free_.end())->second;
    const Pages pages = chunks_[id].pages;
    release(id);  // throws: it stays free
    free_.erase(std::prev(free_.end()));
    free_pages_ -= pages;
  }
}

void ChunkStore::check_invariants() const {
  auto broken = [](const std::string& what) { throw std::logic_error("gmlake invariant broken: " + what); };
  Pages pages;
  for (const auto& [key, id] : free_) {
    const Chunk& c = chunks_.at(id);
    const Pages size = key.first;
    if (c.pages != size) broken("a free chunk is indexed under another size");
    if (c.free_seq != key.second) broken("a free chunk is indexed under another entry than its own");
    if (c.mapped() || c.users != 0) broken("a free chunk is mapped or used");
    if (c.recalled) broken("a recalled chunk is in the free index");
    pages += size;
  }
  if (pages != free_pages_) broken("free pages differ from the recount");
  Pages peer_pages;
  std::uint64_t recalled = 0;
  for_each([&](ChunkId, const Chunk& c) {
    peer_pages += c.on_peer ? c.pages : Pages{0};
    recalled += c.recalled ? 1 : 0;
  });
  if (page_.bytes_of(peer_pages) != peer_bytes()) broken("peer_reserved_bytes differs from the recount");
  if (recalled != recalled_.size()) broken("recalled chunks differ from the recall list");
  for (const ChunkId id : recalled_) {
    if (!chunks_.at(id).recalled || !chunks_[id].on_peer) broken("a listed recalled chunk is not a recalled peer chunk");
  }
}

}  // namespace gmlake::engine
