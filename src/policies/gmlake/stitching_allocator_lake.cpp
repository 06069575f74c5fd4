// StitchingAllocator and the lake (peer_source.h; docs/design.md, "The lake"): when peer chunks are borrowed,
// how recalled ones go back, and the equations they keep.
#include <algorithm>
#include <string>
#include <vector>

#include "engine_checks.h"
#include "gmlake/error.h"
#include "stitching_allocator.h"

namespace gmlake::engine {
namespace {

// The largest loan: a peer chunk is given back as soon as no block uses it, so it strands nothing for long, and
// each loan costs a round trip and, from a peer GPU, a cuMemSetAccess over the link; so loans are not bounded by
// max_chunk_bytes (4 MiB) or chunks_per_block, only by this (the largest chunk of the engine before 2026-11-25).
constexpr std::uint64_t kMaxLoanBytes = 256ull << 20;

}  // namespace

ChunkId StitchingAllocator::obtain_or_borrow(Pages pages, Pages chunk_limit, Pages block_pages,
                                             std::uint64_t requested) {
  // The own device's chunks are at most chunk_limit pages (what a smaller block may later strand); a peer's are
  // as large as the block's pages allow: they go back as soon as no block uses them, and each loan costs a
  // round trip and a cuMemSetAccess over the peer link.
  const Pages own_pages = std::min(pages, chunk_limit);
  // Pages grown ahead of a block (block_pages 0) never borrow: a peer holds only what blocks need. Where the pool
  // grows, the own device's chunk may cover more of the run (ChunkSource::growth_limit).
  if (!peers_->enabled() || block_pages == Pages{0}) {
    return source_.obtain(own_pages, requested, ChunkSource::OverBudget::kOwnDevice, pages);
  }
  try {
    // The own device's idle, free and new memory, in its order, time first: a move over budget is left to the
    // peer (kNoChunk).
    const ChunkId id = source_.obtain(own_pages, requested, ChunkSource::OverBudget::kPeer);
    if (id != kNoChunk) return id;
  } catch (const OutOfMemoryError&) {
    // Nothing idle or free, and the own device or the cap refuses: the peer's turn.
  }
  const Pages max_loan_pages = std::max(Pages{1}, page_.pages_in(kMaxLoanBytes));
  const ChunkId id = peers_->borrow(store_, std::min({pages, block_pages, max_loan_pages}), stats_.num_alloc_retries);
  if (id != kNoChunk) return id;
  return source_.obtain(own_pages, requested);  // the peers refused: memory first on the own device, or its OutOfMemoryError
}

Pages StitchingAllocator::peer_room_pages() const {
  return page_.pages_in(peers_->room_bytes(store_.peer_bytes()));
}

void StitchingAllocator::serve_recalls() noexcept {
  if (!peers_->may_recall() && store_.recalled().empty()) return;  // the hot path: no loan out, none recalled
  try {
    for (const ChunkHandle handle : peers_->take_recalls()) {
      const ChunkId id = store_.find(handle);
      if (id != kNoChunk) store_.recall(id);
    }
    const std::vector<ChunkId> recalled = store_.recalled();  // a copy: each release takes its chunk off the list
    for (const ChunkId id : recalled) give_back_if_unused(id);
  } catch (...) {
    // bad_alloc: what was not marked or given back is seen again at the next call (the lender keeps the recall).
  }
}

void StitchingAllocator::give_back_if_unused(ChunkId id) {
  const Chunk& c = store_[id];
  if (use_.used(id)) return;  // a live block uses it: it goes back once the last one is freed
  try {
    if (c.mapped()) {
      if (!source_.safe_to_evict(id)) {
        // Queued work may still touch it. Make sure a mark follows it (a free between the stream's marks has
        // none of its own), so that a later call finds it safe even if nothing more is freed on that stream.
        fence_.cover(arenas_[c.arena].stream, use_.idle_since(id), use_.next_tick());
        return;
      }
      source_.evict(id);  // into the free chunks, which give a peer chunk back at once (ChunkStore::add_free)
    } else {
      store_.release(id);  // unmapped, out of the free index (ChunkStore::recall): a release that failed before
    }
  } catch (const Error&) {
    // Left as it was (idle, or free and indexed): tried again at the next allocate or free.
  }
}

void StitchingAllocator::check_lake_invariants() const {
  const auto peer = static_cast<std::uint64_t>(stats_.peer_reserved_bytes.current);
  const auto reserved = static_cast<std::uint64_t>(stats_.reserved_bytes.current);
  std::uint64_t on_peers = peers_->imported_bytes();
  if (on_peers > backend_.live_imported_bytes()) broken("lent chunks exceed the backend's imported bytes");
  for (DeviceId d = 0; static_cast<std::uint64_t>(d) < backend_.device_count(); ++d) {
    if (d != backend_.device()) on_peers += backend_.live_chunk_bytes(d);
  }
  if (on_peers != peer) broken("peer_reserved_bytes differs from the backend's bytes on other devices and the loans");
  if (backend_.live_chunk_bytes(backend_.device()) != reserved - peer)
    broken("reserved - peer_reserved differs from the backend's bytes on its own device");
  if (peers_->budget_bytes() != 0 && peer > peers_->budget_bytes()) broken("peer chunks exceed peer_budget_bytes");
}

}  // namespace gmlake::engine
