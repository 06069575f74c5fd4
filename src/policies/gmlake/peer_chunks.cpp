#include "peer_chunks.h"

#include <algorithm>
#include <string>
#include <utility>

#include "gmlake/error.h"

namespace gmlake::engine {

PeerChunks::PeerChunks(const Backend& backend, std::vector<int> devices, std::uint64_t budget_bytes)
    : PeerSource(budget_bytes), devices_(std::move(devices)) {
  for (const int d : devices_) {
    if (d == backend.device()) {
      throw Error(ErrorCode::kConfig, "gmlake config: peer_devices: device " + std::to_string(d) +
                                          " is the pool's own device (list the peers whose memory it may borrow)");
    }
    if (static_cast<std::uint64_t>(d) >= backend.device_count()) {
      throw Error(ErrorCode::kConfig, "gmlake config: peer_devices: device " + std::to_string(d) + " is not a device of the " +
                                          std::string(backend.name()) + " backend, which has " +
                                          std::to_string(backend.device_count()) + " device(s)");
    }
  }
}

ChunkId PeerChunks::borrow(ChunkStore& store, Pages pages, std::uint64_t& retries) {
  const Pages room_pages = store.page().pages_in(room_bytes(store.peer_bytes()));
  for (const int device : devices_) {
    for (Pages n = std::min(pages, room_pages); n != Pages{0}; n = n / 2) {
      try {
        return store.create(n, device);
      } catch (const OutOfMemoryError&) {
        ++retries;
      }
    }
  }
  return kNoChunk;
}

}  // namespace gmlake::engine
