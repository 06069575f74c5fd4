// LakePeers: the lake's ChunkProvider (include/gmlake/chunk_provider.h): chunks lent by another process through
// the lake's protocol (include/gmlake/lake.h), for a pool whose config sets lake_socket. The Pool makes it
// (make_lake_peers) and gives it to the gmlake engine, which borrows through it (policies/gmlake/
// provided_chunks.h) and knows nothing of sockets.
//
// create() asks the lender for a chunk (a REQUEST answered by GRANT and the chunk's fd, which the backend
// imports); release() releases the imported chunk and sends RETURN. Recalls come in on the socket: recalled()
// reads them (one poll(2), no wait) and names the chunks recalled. Once the lender has gone (exited, or cut this
// process off past a recall's deadline), available() is false: no new loan is asked for, and the loans held stay
// valid until the engine gives them back (they are then released here only). A lender gone recalls every loan
// at once, as far as the engine is concerned: each goes back (released here) as soon as no block uses it, since
// nobody else accounts for that memory any more (a lender restarted on that device gets it back once every loan
// went).
// A lender that refuses this process's uid (its lake_allowed_uids does not name it) is a lender gone, and it is
// said: one line on stderr, once per lender address in the process (not per allocation or per pool), and
// refusals() (Stats::lake_refusals) is 1 from then on.
// Errors: create() throws OutOfMemoryError for a refusal for memory or budget and returns nullopt once the
// lender is gone; it throws BackendError("lake", ...) when the lender refuses the size (its granularity does not
// divide it), and BackendError when the import or the socket fails: nothing changed on either side. create()
// waits for the lender's answer: a lender must keep polling (LakeLender::poll).
// Accounting: each loan is imported into the backend (kImportedDevice); live_bytes() = the loans' bytes.
// Thread safety: none (the allocator's).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmlake/chunk_provider.h"
#include "gmlake/config.h"
#include "gmlake/lake.h"

namespace gmlake {

class LakePeers final : public ChunkProvider {
 public:
  // Connects to the lender at `address` (Config::lake_socket); loans are imported into `backend`, which must
  // outlive this and be able to import (Backend::imports_chunks: else Error(kConfig) naming lake_socket). Throws
  // BackendError("connect", ...) when no lender listens there, BackendError("lake", ...) when the lender's uid
  // is neither this process's nor in `allowed_uids` (Config::lake_allowed_uids). `answer_timeout_ms`:
  // LakeBorrower's (0: none). A lender that refuses this process's uid reads as a lender gone (nullopt), said
  // once on stderr and counted in refusals().
  LakePeers(Backend& backend, const LakeAddress& address, std::uint64_t answer_timeout_ms = 0,
            const std::vector<std::uint32_t>& allowed_uids = {});

  bool available() const override { return !borrower_.lender_gone(); }
  std::optional<ChunkHandle> create(std::uint64_t size_bytes) override;
  // Releases the loan behind `chunk` and tells the lender (if it is still there). Throws Error(kInvalidArgument)
  // for a handle that is no loan of this provider, or a chunk still mapped: nothing changed.
  void release(ChunkHandle chunk) override;
  // Loans out (recalls may come), or a late answer to read (a loan to hand straight back).
  bool may_recall() const override {
    return (!loans_.empty() && !gone_recalled_) || borrower_.awaiting_answer();
  }
  std::vector<ChunkHandle> recalled() override;
  std::uint64_t live_bytes() const override { return borrower_.borrowed_bytes(); }
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

// The lake `config` names for a gmlake pool over `backend` (which must outlive it): a LakePeers connected to
// config.lake_socket (with lake_answer_timeout_ms and lake_allowed_uids), or null when lake_socket is none.
// Throws what LakePeers' constructor throws: Error(kConfig) naming lake_socket when the backend cannot import
// chunks (sim, or a wrapper over it), BackendError("connect", ...) when no lender listens at lake_socket,
// Error(kConfig) naming lake_allowed_uids for a list that does not parse.
std::unique_ptr<ChunkProvider> make_lake_peers(const Config& config, Backend& backend);

}  // namespace gmlake
