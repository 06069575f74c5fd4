// LakeBorrower (include/gmlake/lake.h): takes chunks on loan from a lender process and gives them back.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/lake.h"
#include "lake_wire.h"

namespace gmlake {
namespace {

[[noreturn]] void broke_protocol(const std::string& why) {
  throw BackendError("lake", "the lender broke the protocol (" + why + "): treated as gone");
}

std::string refusal_message() {
  return "the lender refused this process: its uid " + std::to_string(::geteuid()) +
         " is not the lender's nor in the lender's lake_allowed_uids";
}

bool refuses_this_process(const lake::Message& m) {
  return m.type == lake::MessageType::kRefuse && m.arg == static_cast<std::uint64_t>(lake::RefuseReason::kNotAllowed);
}

}  // namespace

LakeBorrower::LakeBorrower(Backend& backend, const LakeAddress& address, std::uint64_t answer_timeout_ms,
                           const std::vector<std::uint32_t>& allowed_uids)
    : backend_(backend), socket_(lake::connect_to(address)), answer_timeout_ms_(answer_timeout_ms) {
  lake::PeerCredentials lender;
  try {
    lender = lake::peer_credentials(socket_);
  } catch (...) {
    ::close(socket_);
    throw;
  }
  if (!lake::uid_allowed(lender.uid, allowed_uids)) {
    ::close(socket_);  // nothing was sent: the lender sees a borrower that came and went
    throw BackendError("lake", "the lender at '" + address + "' (pid " + std::to_string(lender.pid) + ") runs as uid " +
                                   std::to_string(lender.uid) + ", neither this process's uid " +
                                   std::to_string(::geteuid()) + " nor in lake_allowed_uids: not trusted");
  }
}

LakeBorrower::~LakeBorrower() {
  for (const auto& [id, loan] : loans_) {
    try {
      backend_.release(loan.chunk);
    } catch (...) {
    }
  }
  if (socket_ >= 0) ::close(socket_);
}

bool LakeBorrower::receive_one(int timeout_ms, std::vector<std::uint64_t>* recalled, Loan* granted, bool* answered) {
  if (lender_gone_) return false;
  if (!lake::wait_readable(socket_, timeout_ms)) return true;  // nothing yet
  int fd = -1;
  std::optional<lake::Message> m;
  try {
    m = lake::receive_message(socket_, &fd);
  } catch (const Error&) {
    m.reset();  // a lender that sends garbage is treated as gone
  }
  // The refusal of this process's uid is no answer to a request (the lender sends it once, when it accepts the
  // connection, and closes it): never taken for the late answer to a request that timed out.
  if (m && refuses_this_process(*m)) {
    if (fd >= 0) ::close(fd);
    refused_ = true;
    lose_lender();
    if (granted != nullptr) throw BackendError("lake", refusal_message());
    return false;
  }
  const bool answer = m && (m->type == lake::MessageType::kGrant || m->type == lake::MessageType::kRefuse);
  if (answer && unanswered_ != 0) {  // answers come in request order: this one is for a request given up on
    --unanswered_;
    if (m->type == lake::MessageType::kGrant) {
      if (fd >= 0) ::close(fd);  // never imported: straight back, so the lender releases it
      return send_return(m->loan_id);
    }
    return true;
  }
  if (!m || (m->type != lake::MessageType::kRecall && granted == nullptr)) {
    if (fd >= 0) ::close(fd);
    // A lender that refused this uid closed with our request unread: the kernel reports ECONNRESET first, and
    // its REFUSE is still queued behind it. Say why if so (throws).
    if (!m && granted != nullptr) refusal_of_this_process();
    lose_lender();
    return false;
  }
  switch (m->type) {
    case lake::MessageType::kRecall:
      if (const auto it = loans_.find(m->loan_id); it != loans_.end() && !it->second.recalled) {
        it->second.recalled = true;
        recalled->push_back(m->loan_id);
      }
      return true;
    case lake::MessageType::kGrant:
      if (m->size_bytes != asked_bytes_ || loans_.contains(m->loan_id)) {
        ::close(fd);
        lose_lender();
        broke_protocol(loans_.contains(m->loan_id)
                           ? "loan id " + std::to_string(m->loan_id) + " granted twice"
                           : "a grant of " + std::to_string(m->size_bytes) + " bytes for a request of " +
                                 std::to_string(asked_bytes_));
      }
      granted->id = m->loan_id;
      granted->size_bytes = m->size_bytes;
      *answered = true;
      try {
        granted->chunk = backend_.import_chunk(fd, m->fd_offset_bytes, m->size_bytes);  // owns fd
      } catch (...) {
        send_return(m->loan_id);  // hand it straight back, so the lender releases it
        throw;
      }
      return true;
    case lake::MessageType::kRefuse: {
      *answered = true;
      const auto why = static_cast<lake::RefuseReason>(m->arg);  // kNotAllowed was handled above
      if (why == lake::RefuseReason::kBadSize) {
        throw Error(ErrorCode::kInvalidArgument, "gmlake lake: the lender refused a loan of " +
                                                     std::to_string(m->size_bytes) + " bytes (bad size)");
      }
      if (why == lake::RefuseReason::kCannotLend) {
        throw BackendError("lake", "the lender's backend cannot export chunks");
      }
      throw OutOfMemoryError(m->size_bytes, borrowed_bytes(), 0, 0,
                             why == lake::RefuseReason::kBudget ? "the lender's budget is spent"
                                                                : "the lender's device has no memory to lend");
    }
    default:
      return true;  // RETURN and REQUEST never come from a lender; ignored
  }
}

Loan LakeBorrower::borrow(std::uint64_t size_bytes) {
  if (size_bytes == 0 || size_bytes % backend_.granularity_bytes() != 0) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake lake: borrow(" + std::to_string(size_bytes) +
                                                 "): not a non-zero multiple of the granularity " +
                                                 std::to_string(backend_.granularity_bytes()));
  }
  if (lender_gone_) throw_lender_gone();
  // An earlier request that timed out: read what has come (its answer, maybe), without waiting.
  while (unanswered_ != 0 && !lender_gone_ && lake::wait_readable(socket_, 0)) {
    if (!receive_one(0, &pending_recalls_, nullptr, nullptr)) throw_lender_gone();
  }
  if (lender_gone_) throw_lender_gone();
  if (unanswered_ != 0) {
    throw OutOfMemoryError(size_bytes, borrowed_bytes(), 0, 0,
                           "the lender has not answered an earlier request yet (lake_answer_timeout_ms)");
  }
  lake::Message request;
  request.type = lake::MessageType::kRequest;
  request.size_bytes = size_bytes;
  bool sent = false;
  try {
    sent = lake::send_message(socket_, request);
  } catch (const Error&) {
    // the lender does not read (its socket is full) or the socket failed: as gone
  }
  if (!sent) {
    refusal_of_this_process();  // a lender that refused this uid said why before it closed the connection
    lose_lender();
    throw_lender_gone();
  }
  asked_bytes_ = size_bytes;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(answer_timeout_ms_);
  Loan granted;
  bool answered = false;
  constexpr int kReadsPastDeadline = 1024;  // what has arrived is still read once the time is up, up to a flood
  int reads_past_deadline = 0;
  while (!answered) {  // recalls that come first are kept for the next poll
    int wait_ms = -1;
    if (answer_timeout_ms_ != 0) {
      // Rounded up: a timeout that is nearly spent still waits for the next millisecond's tick, never 0 ms.
      const auto left_us = std::chrono::duration_cast<std::chrono::microseconds>(deadline - Clock::now()).count();
      const bool time_up = left_us <= 0;
      // Once the time is up, an answer already here still counts (before: a 1 ms timeout gave up without
      // reading a GRANT that was waiting, found by lake_fuzzer).
      if (time_up && (++reads_past_deadline > kReadsPastDeadline || !lake::wait_readable(socket_, 0))) {
        ++unanswered_;  // its answer, when it comes, is for nobody: read as a late answer
        throw OutOfMemoryError(size_bytes, borrowed_bytes(), 0, 0,
                               "the lender did not answer within " + std::to_string(answer_timeout_ms_) +
                                   " ms (lake_answer_timeout_ms)");
      }
      wait_ms = time_up ? 0 : static_cast<int>(std::min<long long>((left_us + 999) / 1000, INT32_MAX));
    }
    if (!receive_one(wait_ms, &pending_recalls_, &granted, &answered)) throw_lender_gone();
  }
  loans_.emplace(granted.id, granted);
  return granted;
}

std::vector<std::uint64_t> LakeBorrower::poll(int timeout_ms) {
  std::vector<std::uint64_t> recalled;
  recalled.swap(pending_recalls_);  // those that came while borrow() waited
  // ... and are still held: one given back since (unasked) is no longer the caller's to give back.
  std::erase_if(recalled, [&](std::uint64_t id) { return !loans_.contains(id); });
  int wait = recalled.empty() ? timeout_ms : 0;
  while (!lender_gone_ && lake::wait_readable(socket_, wait)) {
    if (!receive_one(0, &recalled, nullptr, nullptr)) break;
    wait = 0;
  }
  return recalled;
}

void LakeBorrower::give_back(std::uint64_t id) {
  const auto it = loans_.find(id);
  if (it == loans_.end()) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake lake: give_back(" + std::to_string(id) + "): no such loan held");
  }
  backend_.release(it->second.chunk);  // throws while mapped: nothing changed
  loans_.erase(it);
  if (lender_gone_) return;
  send_return(id);  // the chunk is released here already: a send that fails is a lender gone, not an error
}

bool LakeBorrower::send_return(std::uint64_t id) {
  lake::Message m;
  m.type = lake::MessageType::kReturn;
  m.loan_id = id;
  bool sent = false;
  try {
    sent = lake::send_message(socket_, m);
  } catch (const Error&) {
    // as a closed socket
  }
  if (!sent) lose_lender();
  return sent;
}

void LakeBorrower::refusal_of_this_process() {
  if (socket_ < 0) return;
  bool refused = false;
  try {
    if (!lake::wait_readable(socket_, 0)) return;
    int fd = -1;
    const std::optional<lake::Message> m = lake::receive_message(socket_, &fd);
    if (fd >= 0) ::close(fd);
    refused = m && refuses_this_process(*m);
  } catch (const Error&) {
    return;  // garbage or a failed socket: the caller treats the lender as gone
  }
  if (!refused) return;
  refused_ = true;
  lose_lender();
  throw BackendError("lake", refusal_message());
}

void LakeBorrower::throw_lender_gone() const {
  if (refused_) throw BackendError("lake", refusal_message() + ": no loans");
  throw BackendError("lake", "the lender has exited or cut this borrower off: no new loans (held ones stay valid)");
}

void LakeBorrower::lose_lender() {
  lender_gone_ = true;
  ::close(socket_);
  socket_ = -1;
}

std::uint64_t LakeBorrower::borrowed_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [id, loan] : loans_) total += loan.size_bytes;
  return total;
}

}  // namespace gmlake
