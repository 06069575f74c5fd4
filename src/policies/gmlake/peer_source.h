// PeerSource: where the engine's peer chunks come from (the lake, docs/design.md): memory beyond the own device,
// borrowed once obtain() has nothing idle, nothing free and the own device (or the cap) refuses a page, and
// given back first.
//
// Two sources, one per pool (Config: peer_devices or lake_socket, not both):
//   PeerChunks     (peer_chunks.h)      chunks created on peer devices of the same backend, in this process
//   ProvidedChunks (provided_chunks.h)  chunks of a ChunkProvider the engine was given (include/gmlake/
//                                       chunk_provider.h): the lake's LakePeers (src/lake/lake_peers.h), chunks
//                                       lent by another process, given back, and asked back by it (recalls)
// A source makes each chunk's record in the ChunkStore (on_peer: counted in peer_reserved_bytes, bounded by
// budget_bytes for all of its chunks together), and the pool releases every peer chunk through give_back.
// Recalls (ProvidedChunks only): take_recalls() names the chunks whose owner wants them back; the engine marks them
// (Chunk::recalled: no new block is placed on them) and gives each back once no block uses it
// (StitchingAllocator::serve_recalls, stitching_allocator_lake.cpp).
// What a source does not do: decide when to borrow (StitchingAllocator::obtain_or_borrow does) or move a live
// block's bytes.
// Thread safety: none (the allocator's).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "chunk_store.h"
#include "pages.h"
#include "gmlake/backend.h"
#include "gmlake/chunk_provider.h"
#include "gmlake/config.h"

namespace gmlake::engine {

class PeerSource {
 public:
  // budget_bytes: Config::peer_budget_bytes (0: no bound but what the peers have).
  explicit PeerSource(std::uint64_t budget_bytes) : budget_bytes_(budget_bytes) {}
  virtual ~PeerSource() = default;
  PeerSource(const PeerSource&) = delete;
  PeerSource& operator=(const PeerSource&) = delete;

  // True while borrow() may still find memory: a peer is listed (PeerChunks); the provider is there
  // (ProvidedChunks).
  virtual bool enabled() const = 0;
  std::uint64_t budget_bytes() const { return budget_bytes_; }
  // Bytes that may still be borrowed given `peer_reserved_bytes` held now: UINT64_MAX without a budget, 0 when
  // not enabled.
  std::uint64_t room_bytes(std::uint64_t peer_reserved_bytes) const;
  // A new chunk of at most `pages` pages (>= 1), recorded in `store` as on_peer, free and out of the free index
  // (the caller maps it), or kNoChunk when no peer has room, the budget is spent or the source is gone. Counts
  // each refused size in `retries`. Throws BackendError when the backend or the link fails (nothing changed).
  virtual ChunkId borrow(ChunkStore& store, Pages pages, std::uint64_t& retries) = 0;
  // Gives live peer chunk `handle` (mapped nowhere) back: `backend` releases it and its owner is told. Throws
  // what Backend::release throws, and then nothing changed.
  virtual void give_back(Backend& backend, ChunkHandle handle) = 0;
  // True when take_recalls() may find something (a loan is out): the allocator's cheap test before it asks.
  virtual bool may_recall() const { return false; }
  // Handles of this source's chunks whose owner asked for them back since the last call, each once. Never
  // blocks and never throws (ChunkProvider::recalled).
  virtual std::vector<ChunkHandle> take_recalls() { return {}; }
  // Bytes of this source's live chunks that the backend counts as imported (kImportedDevice).
  virtual std::uint64_t imported_bytes() const { return 0; }
  // Providers that refused this process (Stats::lake_refusals): ProvidedChunks, 1 once its provider refused this
  // process; 0 otherwise.
  virtual std::uint64_t refusals() const { return 0; }

 private:
  std::uint64_t budget_bytes_;
};

// The source for `config`, registered with `store` (ChunkStore::set_peer_source): ProvidedChunks over `lake` when
// one is given (the Pool makes it from lake_socket: src/lake/lake_peers.h), else PeerChunks over peer_devices
// (none: a source that is never enabled). `backend` and `lake` must outlive the source. Throws Error(kConfig)
// naming peer_devices for a device the backend does not have or for peer devices beside a lake, and
// Error(kConfig) naming lake_socket when it is set but no lake was given (an engine made without the Pool gets
// its lake from the caller, as its backend).
std::unique_ptr<PeerSource> make_peer_source(const Config& config, Backend& backend, ChunkStore& store,
                                             ChunkProvider* lake = nullptr);

}  // namespace gmlake::engine
