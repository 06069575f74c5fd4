#include "provided_chunks.h"

#include <algorithm>
#include <optional>

#include "gmlake/error.h"

namespace gmlake::engine {

ChunkId ProvidedChunks::borrow(ChunkStore& store, Pages pages, std::uint64_t& retries) {
  const Pages room_pages = store.page().pages_in(room_bytes(store.peer_bytes()));
  for (Pages n = std::min(pages, room_pages); n != Pages{0} && enabled(); n = n / 2) {
    std::optional<ChunkHandle> chunk;
    try {
      chunk = provider_.create(store.page().bytes_of(n));
    } catch (const OutOfMemoryError&) {
      ++retries;  // the provider's device or budget: ask for less
      continue;
    }
    if (!chunk) return kNoChunk;  // gone: no new chunks; the held ones stay valid
    try {
      return store.adopt(*chunk, n);
    } catch (...) {
      provider_.release(*chunk);
      throw;
    }
  }
  return kNoChunk;
}

void ProvidedChunks::give_back(Backend&, ChunkHandle handle) { provider_.release(handle); }

}  // namespace gmlake::engine
