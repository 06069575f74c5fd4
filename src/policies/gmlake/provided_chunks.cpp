#include "provided_chunks.h"

#include <algorithm>
#include <optional>

#include "gmlake/error.h"

namespace gmlake::engine {

ChunkId ProvidedChunks::borrow(ChunkStore& store, std::uint64_t pages, std::uint64_t& retries) {
  const std::uint64_t room_pages = room_bytes(store.peer_bytes()) / store.page_bytes();
  for (std::uint64_t n = std::min(pages, room_pages); n != 0 && enabled(); n /= 2) {
    std::optional<ChunkHandle> chunk;
    try {
      chunk = provider_.create(n * store.page_bytes());
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
