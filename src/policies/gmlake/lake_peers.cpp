#include "lake_peers.h"

#include <algorithm>
#include <string>

#include "gmlake/error.h"

namespace gmlake::engine {
namespace {

Backend& importing(Backend& backend) {
  if (backend.name() != "host" && backend.name() != "cuda") {
    throw Error(ErrorCode::kConfig, "gmlake config: lake_socket: the " + std::string(backend.name()) +
                                        " backend cannot import chunks from another process (use host or cuda)");
  }
  return backend;
}

}  // namespace

LakePeers::LakePeers(Backend& backend, const LakeAddress& address, std::uint64_t budget_bytes,
                     std::uint64_t answer_timeout_ms, const std::vector<std::uint32_t>& allowed_uids)
    : PeerSource(budget_bytes), borrower_(importing(backend), address, answer_timeout_ms, allowed_uids) {}

ChunkId LakePeers::borrow(ChunkPool& pool, std::uint64_t pages, std::uint64_t& retries) {
  const std::uint64_t room_pages = room_bytes(pool.peer_bytes()) / pool.page_bytes();
  for (std::uint64_t n = std::min(pages, room_pages); n != 0 && enabled(); n /= 2) {
    Loan loan;
    try {
      loan = borrower_.borrow(n * pool.page_bytes());
    } catch (const OutOfMemoryError&) {
      ++retries;  // the lender's device or budget: ask for less
      continue;
    } catch (const BackendError&) {
      if (borrower_.lender_gone()) return kNoChunk;  // no new loans; the held ones stay valid
      throw;
    } catch (const Error& e) {
      if (e.code() != ErrorCode::kInvalidArgument) throw;
      throw BackendError("lake", std::string(e.what()) + ": the lender's granularity does not divide chunk_bytes");
    }
    loans_.emplace(loan.chunk.value, loan.id);
    try {
      return pool.adopt(loan.chunk, n);
    } catch (...) {
      loans_.erase(loan.chunk.value);
      borrower_.give_back(loan.id);
      throw;
    }
  }
  return kNoChunk;
}

void LakePeers::give_back(Backend&, ChunkHandle handle) {
  const auto it = loans_.find(handle.value);
  if (it == loans_.end()) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake lake: chunk " + std::to_string(handle.value) + " is no loan");
  }
  borrower_.give_back(it->second);  // throws while mapped: nothing changed
  loans_.erase(it);
}

std::vector<ChunkHandle> LakePeers::take_recalls() {
  std::vector<std::uint64_t> ids;
  try {
    ids = borrower_.poll(0);
  } catch (const Error&) {
    return {};  // poll(2) failed: asked again at the next call
  }
  std::vector<ChunkHandle> handles;
  if (borrower_.lender_gone()) {  // gone: every loan goes back as soon as no block uses it
    gone_recalled_ = true;
    for (const auto& [id, loan] : borrower_.loans()) handles.push_back(loan.chunk);
    return handles;
  }
  for (const std::uint64_t id : ids) {
    const auto it = borrower_.loans().find(id);
    if (it != borrower_.loans().end()) handles.push_back(it->second.chunk);
  }
  return handles;
}

}  // namespace gmlake::engine
