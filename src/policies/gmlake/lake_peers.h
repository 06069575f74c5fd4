// LakePeers: the borrowed source of peer chunks (peer_source.h): chunks lent by another process through the
// lake's protocol (include/gmlake/lake.h), for a pool whose config sets lake_socket.
//
// borrow() asks the lender for a chunk of the run's size (a REQUEST answered by GRANT and the chunk's fd, which
// the backend imports), halving the size on each refusal for memory or budget down to one page; give_back()
// releases the imported chunk and sends RETURN. Recalls come in on the socket: take_recalls() reads them (one
// poll(2), no wait) and names the chunks recalled. Once the lender has gone (exited, or cut this process off
// past a recall's deadline), enabled() is false: no new loan is asked for, and the loans held stay valid until
// the engine gives them back (they are then released here only). A lender gone recalls every loan at once, as
// far as the engine is concerned: each goes back (released here) as soon as no block uses it, since nobody else
// accounts for that memory any more (a lender restarted on that device gets it back once every loan went).
// A lender that refuses this process's uid (its lake_allowed_uids does not name it) is a lender gone, and it is
// said: one line on stderr, once per lender address in the process (not per allocation or per pool), and
// refusals() (Stats::lake_refusals) is 1 from then on.
// Errors: borrow() answers kNoChunk for a refusal for memory or budget and once the lender is gone; it throws
// BackendError("lake", ...) when the lender refuses the size (its granularity does not divide chunk_bytes), and
// BackendError when the import or the socket fails: nothing changed on either side. borrow() waits for the
// lender's answer: a lender must keep polling (LakeLender::poll).
// Accounting: each loan is one chunk of the pool (on_peer), counted in peer_reserved_bytes, on
// kImportedDevice in the backend (imported_bytes() = the loans' bytes).
// Thread safety: none (the allocator's).
#pragma once

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmlake/lake.h"
#include "peer_source.h"

namespace gmlake::engine {

class LakePeers final : public PeerSource {
 public:
  // Connects to the lender at `address` (Config::lake_socket); loans are imported into `backend`, which must
  // outlive this and be able to import (Backend::imports_chunks: else Error(kConfig) naming lake_socket). Throws
  // BackendError("connect", ...) when no lender listens there, BackendError("lake", ...) when the lender's uid
  // is neither this process's nor in `allowed_uids` (Config::lake_allowed_uids). `answer_timeout_ms`:
  // LakeBorrower's (0: none). A lender that refuses this process's uid reads as a lender gone (kNoChunk), said
  // once on stderr and counted in refusals().
  LakePeers(Backend& backend, const LakeAddress& address, std::uint64_t budget_bytes,
            std::uint64_t answer_timeout_ms = 0, const std::vector<std::uint32_t>& allowed_uids = {});

  bool enabled() const override { return !borrower_.lender_gone(); }
  ChunkId borrow(ChunkPool& pool, std::uint64_t pages, std::uint64_t& retries) override;
  // Releases the loan behind `handle` and tells the lender (if it is still there). Throws Error(kInvalidArgument)
  // for a handle that is no loan of this source, or a chunk still mapped: nothing changed.
  void give_back(Backend& backend, ChunkHandle handle) override;
  // Loans out (recalls may come), or a late answer to read (a loan to hand straight back).
  bool may_recall() const override {
    return (!loans_.empty() && !gone_recalled_) || borrower_.awaiting_answer();
  }
  std::vector<ChunkHandle> take_recalls() override;
  std::uint64_t imported_bytes() const override { return borrower_.borrowed_bytes(); }
  std::uint64_t refusals() const override { return borrower_.refused() ? 1 : 0; }
  // The connection (tests: lender_gone(), loans()).
  const LakeBorrower& borrower() const { return borrower_; }

 private:
  // Once the lender refused this process: the line on stderr, unless one was written for this address already.
  void report_refusal();

  LakeAddress address_;
  LakeBorrower borrower_;
  absl::flat_hash_map<std::uint64_t, std::uint64_t> loans_;  // chunk handle -> loan id
  bool gone_recalled_ = false;  // the lender's departure was answered: every loan reported recalled
  bool refusal_reported_ = false;
};

}  // namespace gmlake::engine
