// PeerChunks: the direct source of peer chunks (peer_source.h): chunks created on peer devices of the pool's own
// backend (peer_devices), in this process (docs/design.md, "The lake").
//
// A pool with peer_devices set may back a block's pages with chunks created on a peer device (cuMemCreate with
// the peer's location, mapped into the pool's arena and accessed over the peer link), within peer_budget_bytes
// for all peers together. Peers are tried in the configured order, the first with room; a chunk of the run's
// size, halved on OutOfMemoryError down to one page, then the next peer. Chunks on peers are counted in
// Stats::peer_reserved_bytes (and in reserved_bytes) by the ChunkStore, which gives a peer chunk back at once
// when it turns free (ChunkStore::add_free), so the next run that needs memory is made on the own device if it
// has room again. A peer device never recalls its memory: take_recalls() is always empty.
// Thread safety: none (the allocator's).
#pragma once

#include <cstdint>
#include <vector>

#include "peer_source.h"

namespace gmlake::engine {

class PeerChunks final : public PeerSource {
 public:
  // `devices`: the peers, in the order tried (Config::peer_devices); `budget_bytes`: Config::peer_budget_bytes
  // (0: no bound but the peers' memory). Throws Error(kConfig) naming peer_devices when a device is the
  // backend's own device or not one of its devices.
  PeerChunks(const Backend& backend, std::vector<int> devices, std::uint64_t budget_bytes);

  bool enabled() const override { return !devices_.empty(); }
  const std::vector<int>& devices() const { return devices_; }
  // Creates the chunk on the first peer with room (see above). Throws BackendError from the backend (a peer
  // the driver cannot reach): nothing changed.
  ChunkId borrow(ChunkStore& store, Pages pages, std::uint64_t& retries) override;
  // backend.release(handle).
  void give_back(Backend& backend, ChunkHandle handle) override { backend.release(handle); }

 private:
  std::vector<int> devices_;
};

}  // namespace gmlake::engine
