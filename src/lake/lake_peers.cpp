#include "lake_peers.h"

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "gmlake/error.h"

namespace gmlake {
namespace {

Backend& importing(Backend& backend) {
  if (!backend.imports_chunks()) {
    throw Error(ErrorCode::kConfig, "gmlake config: lake_socket: the " + std::string(backend.name()) +
                                        " backend cannot import chunks from another process (use host or cuda)");
  }
  return backend;
}

// True the first time `address` is named in this process: pools of several devices borrowing from one lender say
// its refusal once.
bool first_refusal_of(const LakeAddress& address) {
  static std::mutex mutex;
  static std::set<LakeAddress>* reported = new std::set<LakeAddress>;  // never destroyed: pools may outlive statics
  const std::lock_guard<std::mutex> lock(mutex);
  try {
    return reported->insert(address).second;
  } catch (const std::bad_alloc&) {
    return true;  // said again rather than not at all
  }
}

}  // namespace

LakePeers::LakePeers(Backend& backend, const LakeAddress& address, std::uint64_t answer_timeout_ms,
                     const std::vector<std::uint32_t>& allowed_uids)
    : address_(address), borrower_(importing(backend), address, answer_timeout_ms, allowed_uids) {}

void LakePeers::report_refusal() {
  if (!borrower_.refused() || refusal_reported_) return;
  refusal_reported_ = true;
  if (!first_refusal_of(address_)) return;
  std::fprintf(stderr,
               "gmlake lake: the lender at '%s' refused this process (uid %u is not the lender's nor in its "
               "lake_allowed_uids): nothing is borrowed, the pool uses its own device only\n",
               address_.c_str(), static_cast<unsigned>(::geteuid()));
}

std::optional<ChunkHandle> LakePeers::create(std::uint64_t size_bytes) {
  Loan loan;
  try {
    loan = borrower_.borrow(size_bytes);
  } catch (const OutOfMemoryError&) {
    throw;  // the lender's device or budget: the caller asks for less
  } catch (const BackendError&) {
    if (!borrower_.lender_gone()) throw;
    report_refusal();
    return std::nullopt;  // no new loans; the held ones stay valid
  } catch (const Error& e) {
    if (e.code() != ErrorCode::kInvalidArgument) throw;
    throw BackendError("lake", std::string(e.what()) + ": the lender's granularity does not divide page_bytes");
  }
  try {
    loans_.emplace(loan.chunk.value, loan.id);
  } catch (...) {
    borrower_.give_back(loan.id);
    throw;
  }
  return loan.chunk;
}

void LakePeers::release(ChunkHandle chunk) {
  const auto it = loans_.find(chunk.value);
  if (it == loans_.end()) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake lake: chunk " + std::to_string(chunk.value) + " is no loan");
  }
  borrower_.give_back(it->second);  // throws while mapped: nothing changed
  loans_.erase(it);
}

std::vector<ChunkHandle> LakePeers::recalled() {
  std::vector<std::uint64_t> ids;
  try {
    ids = borrower_.poll(0);
  } catch (const Error&) {
    return {};  // poll(2) failed: asked again at the next call
  }
  std::vector<ChunkHandle> handles;
  if (borrower_.lender_gone()) {  // gone: every loan goes back as soon as no block uses it
    report_refusal();
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

std::unique_ptr<ChunkProvider> make_lake_peers(const Config& config, Backend& backend) {
  if (config.lake_socket == "none") return nullptr;
  return std::make_unique<LakePeers>(backend, config.lake_socket, config.lake_answer_timeout_ms,
                                     parse_lake_allowed_uids(config.lake_allowed_uids));
}

}  // namespace gmlake
