// PeerChunks: the engine's side of the lake (docs/design.md, "The lake"): chunks borrowed from peer devices when
// the own device is full.
//
// A pool with peer_devices set may back a block's pages with chunks created on a peer device (cuMemCreate with
// the peer's location, mapped into the pool's arena and accessed over the peer link), within peer_budget_bytes
// for all peers together. What it does not do: decide when to borrow (StitchingAllocator::obtain_or_borrow does:
// only once obtain() found nothing idle, nothing free and the own device or the cap refused a page), or move a
// live block's bytes (a block's pages stay where they were stitched until it is freed).
//
// Policy: peers in the configured order, the first with room; a chunk of the run's size, halved on
// OutOfMemoryError down to one page, then the next peer. Chunks on peers are counted in
// Stats::peer_reserved_bytes (and in reserved_bytes) by the ChunkPool, which gives a peer chunk back at once
// when it turns free (ChunkPool::add_free), so the next run that needs memory is made on the own device if it
// has room again.
// Thread safety: none (the allocator's).
#pragma once

#include <cstdint>
#include <vector>

#include "chunk_pool.h"
#include "gmlake/backend.h"

namespace gmlake::engine {

class PeerChunks {
 public:
  // `devices`: the peers, in the order tried (Config::peer_devices); `budget_bytes`: Config::peer_budget_bytes
  // (0: no bound but the peers' memory). Throws Error(kConfig) naming peer_devices when a device is the
  // backend's own device or not one of its devices.
  PeerChunks(const Backend& backend, std::vector<int> devices, std::uint64_t budget_bytes);

  bool enabled() const { return !devices_.empty(); }
  const std::vector<int>& devices() const { return devices_; }
  std::uint64_t budget_bytes() const { return budget_bytes_; }
  // Bytes that may still be borrowed given `peer_reserved_bytes` held now: UINT64_MAX without a budget, 0
  // when disabled.
  std::uint64_t room_bytes(std::uint64_t peer_reserved_bytes) const;
  // A new chunk of at most `pages` pages (>= 1) on a peer, free and out of the free index (the caller maps it),
  // or kNoChunk when every peer is full or the budget is spent. Counts each refused create in `retries`.
  // Throws BackendError from the backend (a peer the driver cannot reach): nothing changed.
  ChunkId borrow(ChunkPool& pool, std::uint64_t pages, std::uint64_t& retries) const;

 private:
  std::vector<int> devices_;
  std::uint64_t budget_bytes_;
};

}  // namespace gmlake::engine
