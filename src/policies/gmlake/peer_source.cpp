#include "peer_source.h"

#include <memory>

#include "gmlake/error.h"
#include "peer_chunks.h"
#include "provided_chunks.h"

namespace gmlake::engine {

std::uint64_t PeerSource::room_bytes(std::uint64_t peer_reserved_bytes) const {
  if (!enabled()) return 0;
  if (budget_bytes_ == 0) return UINT64_MAX;
  return peer_reserved_bytes >= budget_bytes_ ? 0 : budget_bytes_ - peer_reserved_bytes;
}

std::unique_ptr<PeerSource> make_peer_source(const Config& config, Backend& backend, ChunkStore& store,
                                             ChunkProvider* lake) {
  std::unique_ptr<PeerSource> source;
  if (lake != nullptr) {
    if (!parse_peer_devices(config.peer_devices).empty()) {
      throw Error(ErrorCode::kConfig, "gmlake config: peer_devices: cannot be combined with a lake: a pool takes "
                                      "peer memory from one source (set peer_devices to none)");
    }
    source = std::make_unique<ProvidedChunks>(*lake, config.peer_budget_bytes);
  } else if (config.lake_socket != "none") {
    throw Error(ErrorCode::kConfig, "gmlake config: lake_socket: set, but the engine was given no lake (the Pool "
                                    "connects one; an engine made alone takes it as its backend: make_allocator)");
  } else {
    source = std::make_unique<PeerChunks>(backend, parse_peer_devices(config.peer_devices), config.peer_budget_bytes);
  }
  store.set_peer_source(source.get());
  return source;
}

}  // namespace gmlake::engine
