#include "peer_source.h"

#include <memory>

#include "lake_peers.h"
#include "peer_chunks.h"

namespace gmlake::engine {

std::uint64_t PeerSource::room_bytes(std::uint64_t peer_reserved_bytes) const {
  if (!enabled()) return 0;
  if (budget_bytes_ == 0) return UINT64_MAX;
  return peer_reserved_bytes >= budget_bytes_ ? 0 : budget_bytes_ - peer_reserved_bytes;
}

std::unique_ptr<PeerSource> make_peer_source(const Config& config, Backend& backend, ChunkPool& pool) {
  std::unique_ptr<PeerSource> source;
  if (config.lake_socket != "none") {
    source = std::make_unique<LakePeers>(backend, config.lake_socket, config.peer_budget_bytes,
                                         config.lake_answer_timeout_ms,
                                         parse_lake_allowed_uids(config.lake_allowed_uids));
  } else {
    source = std::make_unique<PeerChunks>(backend, parse_peer_devices(config.peer_devices), config.peer_budget_bytes);
  }
  pool.set_peer_source(source.get());
  return source;
}

}  // namespace gmlake::engine
