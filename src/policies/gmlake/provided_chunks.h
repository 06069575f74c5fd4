// ProvidedChunks: the borrowed source of peer chunks (peer_source.h): chunks a ChunkProvider creates for the
// engine (include/gmlake/chunk_provider.h; the lake between processes, src/lake/lake_peers.h), for a pool the
// Pool gave a provider (config.lake_socket set).
//
// borrow() asks the provider for a chunk of the run's size, halving the size on each OutOfMemoryError down to
// one page, within the budget, and records it in the ChunkStore (adopt: on_peer); give_back() has the provider
// release it. Recalls are the provider's: take_recalls() is ChunkProvider::recalled(). Once the provider has
// gone, enabled() is false: nothing new is borrowed, and the chunks held stay valid until the engine gives them
// back.
// Errors: borrow() answers kNoChunk when the budget is spent, every size was refused for memory or the provider
// is gone; it throws what ChunkProvider::create throws otherwise (BackendError), and then nothing changed.
// Accounting: each chunk is one chunk of the pool (on_peer), counted in peer_reserved_bytes, and imported in the
// backend (imported_bytes() = the provider's live_bytes()).
// Thread safety: none (the allocator's).
#pragma once

#include <cstdint>
#include <vector>

#include "gmlake/chunk_provider.h"
#include "peer_source.h"

namespace gmlake::engine {

class ProvidedChunks final : public PeerSource {
 public:
  // `provider` must outlive this; `budget_bytes`: Config::peer_budget_bytes (0: no bound but the provider's).
  ProvidedChunks(ChunkProvider& provider, std::uint64_t budget_bytes)
      : PeerSource(budget_bytes), provider_(provider) {}

  bool enabled() const override { return provider_.available(); }
  ChunkId borrow(ChunkStore& store, Pages pages, std::uint64_t& retries) override;
  // provider.release(handle): throws Error(kInvalidArgument) for a handle the provider did not create, or a
  // chunk still mapped; nothing changed.
  void give_back(Backend& backend, ChunkHandle handle) override;
  bool may_recall() const override { return provider_.may_recall(); }
  std::vector<ChunkHandle> take_recalls() override { return provider_.recalled(); }
  std::uint64_t imported_bytes() const override { return provider_.live_bytes(); }
  std::uint64_t refusals() const override { return provider_.refusals(); }

 private:
  ChunkProvider& provider_;
};

}  // namespace gmlake::engine
