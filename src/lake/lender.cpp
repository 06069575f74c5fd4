// LakeLender (include/gmlake/lake.h): lends chunks of its backend to borrower processes and takes them back.
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gmlake/error.h"
#include "gmlake/lake.h"
#include "lake_wire.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace gmlake {
namespace {

struct Lent {
  ChunkHandle chunk;
  std::uint64_t size_bytes = 0;
  bool recalled = false;
  std::uint64_t deadline_ns = 0;
};

struct Connection {
  int socket = -1;
  int pid = 0;  // SO_PEERCRED: whom to watch once cut off
  std::map<std::uint64_t, Lent> loans;
};

// Chunks of a cut-off borrower, kept until its process exits (pidfd readable), then released.
struct Stranded {
  int pidfd = -1;
  std::vector<Lent> chunks;
};

}  // namespace

struct LakeLender::State {
  explicit State(Backend& b) : backend(b) {}
  Backend& backend;
  int listener = -1;
  std::string path;  // a path socket's file, removed when the lender goes ("" for @name)
  std::uint64_t budget_bytes = 0;
  std::uint64_t next_loan = 1;
  std::vector<std::uint32_t> allowed_uids;
  LakeLog log;
  std::uint64_t refused_peers = 0;
  bool stopped = false;  // stop_lending(): every request refused
  std::vector<Connection> connections;
  std::vector<Stranded> stranded;
  std::vector<ChunkHandle> unreleased;  // releases that failed, retried at each poll

  void note(const std::string& line) {
    if (log) log(line);
  }
  void release(ChunkHandle chunk) {
    try {
      backend.release(chunk);
    } catch (const Error&) {
      unreleased.push_back(chunk);
    }
  }
  std::uint64_t held_bytes() const {
    std::uint64_t total = 0;
    for (const Connection& c : connections)
      for (const auto& [id, l] : c.loans) total += l.size_bytes;
    for (const Stranded& s : stranded)
      for (const Lent& l : s.chunks) total += l.size_bytes;
    return total;
  }
  // The borrower exited (or its socket failed): its mappings are gone, its chunks come back.
  void drop(Connection& c) {
    note("borrower pid " + std::to_string(c.pid) + " gone: " + std::to_string(c.loans.size()) + " loans back");
    for (const auto& [id, l] : c.loans) release(l.chunk);
    c.loans.clear();
    ::close(c.socket);
    c.socket = -1;
  }
  // The borrower is alive but misbehaved (missed a recall deadline, sent garbage, stopped reading): no more
  // loans; its chunks wait for its exit.
  void cut_off(Connection& c, const std::string& why) {
    note("borrower pid " + std::to_string(c.pid) + " cut off (" + why + "): " + std::to_string(c.loans.size()) +
         " loans stranded until it exits");
    Stranded s;
    for (const auto& [id, l] : c.loans) s.chunks.push_back(l);
    c.loans.clear();
    ::close(c.socket);
    c.socket = -1;
    if (s.chunks.empty()) return;
    errno = 0;
    const long pidfd = c.pid > 0 ? ::syscall(SYS_pidfd_open, c.pid, 0) : -1;
    if (pidfd < 0 && c.pid > 0 && errno == ESRCH) {  // it exited meanwhile: nothing maps them any more
      for (const Lent& l : s.chunks) release(l.chunk);
      return;
    }
    // No pidfd (an old kernel): pidfd -1, which poll(2) ignores; they stay until the lender goes.
    s.pidfd = static_cast<int>(pidfd);
    stranded.push_back(std::move(s));
  }
  // Sends `m` (with `fd`); false when the borrower is dropped (gone) or cut off (its socket is full: it does not
  // read; or the send failed otherwise). Never throws.
  bool send(Connection& c, const lake::Message& m, int fd = -1) {
    try {
      if (lake::send_message(c.socket, m, fd)) return true;
    } catch (const Error& e) {
      cut_off(c, e.what());
      return false;
    }
    drop(c);
    return false;
  }
  void accept_one();
  void grant(Connection& c, const lake::Message& m, std::uint64_t* refused);
  void handle(Connection& c, std::uint64_t* refused);
};

void LakeLender::State::accept_one() {
  const int socket = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (socket < 0) return;  // gone before it was accepted, or out of descriptors: tried again at the next poll
  lake::PeerCredentials peer;
  try {
    peer = lake::peer_credentials(socket);
  } catch (const Error&) {
    ::close(socket);
    return;
  }
  if (!lake::uid_allowed(peer.uid, allowed_uids)) {
    ++refused_peers;
    const std::string line = "refused borrower pid " + std::to_string(peer.pid) + " uid " +
                             std::to_string(peer.uid) + ": not this lender's uid " + std::to_string(::geteuid()) +
                             " nor in lake_allowed_uids; nothing lent";
    if (log) log(line);
    else std::fprintf(stderr, "gmlake lake: %s\n", line.c_str());
    lake::Message r;  // tells it why, without a descriptor; it may not read it: no wait
    r.type = lake::MessageType::kRefuse;
    r.arg = static_cast<std::uint64_t>(lake::RefuseReason::kNotAllowed);
    try {
      lake::send_message(socket, r);
      // Read what it sent already (unread data at close makes the kernel report ECONNRESET before the REFUSE).
      // At most a few: an unauthenticated peer must not keep the lender here.
      int fd = -1;
      for (int n = 0; n < 16 && lake::wait_readable(socket, 0) && lake::receive_message(socket, &fd); ++n, fd = -1) {
        if (fd >= 0) ::close(fd);
      }
    } catch (const Error&) {
    }
    ::close(socket);
    return;
  }
  note("borrower pid " + std::to_string(peer.pid) + " uid " + std::to_string(peer.uid) + " connected");
  try {
    connections.push_back(Connection{socket, peer.pid, {}});
  } catch (...) {
    ::close(socket);
    throw;
  }
}

void LakeLender::State::grant(Connection& c, const lake::Message& m, std::uint64_t* refused) {
  auto refuse = [&](lake::RefuseReason why) {
    ++*refused;
    lake::Message r;
    r.type = lake::MessageType::kRefuse;
    r.size_bytes = m.size_bytes;
    r.arg = static_cast<std::uint64_t>(why);
    note("refused " + std::to_string(m.size_bytes) + " bytes to pid " + std::to_string(c.pid) + " (reason " +
         std::to_string(r.arg) + ")");
    send(c, r);
  };
  const std::uint64_t g = backend.granularity_bytes();
  if (m.size_bytes == 0 || m.size_bytes % g != 0) return refuse(lake::RefuseReason::kBadSize);
  if (stopped || (budget_bytes != 0 && m.size_bytes > budget_bytes - std::min(budget_bytes, held_bytes()))) {
    return refuse(lake::RefuseReason::kBudget);
  }
  ChunkHandle chunk;
  try {
    chunk = backend.create(m.size_bytes);
  } catch (const OutOfMemoryError&) {
    return refuse(lake::RefuseReason::kOutOfMemory);
  }
  ExportedChunk exported;
  try {
    backend.scrub(chunk);  // none of this process's earlier bytes leave it (docs/reliability.md, the lake)
    exported = backend.export_chunk(chunk);
  } catch (const Error&) {
    release(chunk);
    return refuse(lake::RefuseReason::kCannotLend);
  }
  lake::Message r;
  r.type = lake::MessageType::kGrant;
  r.loan_id = next_loan++;
  r.size_bytes = m.size_bytes;
  r.fd_offset_bytes = exported.fd_offset_bytes;
  try {
    c.loans.emplace(r.loan_id, Lent{chunk, m.size_bytes, false, 0});
  } catch (...) {
    release(chunk);
    throw;
  }
  if (!send(c, r, exported.fd)) {
    // Not sent (the descriptor never left): the chunk went back or into the stranded list with the others;
    // this one nobody maps.
    return;
  }
  note("lent loan " + std::to_string(r.loan_id) + " (" + std::to_string(m.size_bytes) + " bytes) to pid " +
       std::to_string(c.pid));
}

void LakeLender::State::handle(Connection& c, std::uint64_t* refused) {
  int fd = -1;
  std::optional<lake::Message> m;
  try {
    m = lake::receive_message(c.socket, &fd);
  } catch (const Error& e) {
    cut_off(c, e.what());  // garbage from a live process: treat it as misbehaving
    return;
  }
  if (fd >= 0) ::close(fd);  // a borrower never sends a descriptor (a GRANT's, as a hostile one may): not kept
  if (!m) return drop(c);
  switch (m->type) {
    case lake::MessageType::kRequest:
      return grant(c, *m, refused);
    case lake::MessageType::kReturn: {
      const auto it = c.loans.find(m->loan_id);
      if (it == c.loans.end()) return cut_off(c, "RETURN of loan " + std::to_string(m->loan_id) + ", not its loan");
      release(it->second.chunk);
      c.loans.erase(it);
      note("loan " + std::to_string(m->loan_id) + " returned by pid " + std::to_string(c.pid));
      return;
    }
    default:
      return cut_off(c, "sent a lender's message");  // a borrower never sends GRANT, REFUSE or RECALL
  }
}

LakeLender::LakeLender(Backend& backend, const LakeAddress& address, std::uint64_t budget_bytes,
                       std::vector<std::uint32_t> allowed_uids, LakeLog log)
    : state_(std::make_unique<State>(backend)) {
  state_->budget_bytes = budget_bytes;
  state_->allowed_uids = std::move(allowed_uids);
  state_->log = std::move(log);
  state_->listener = lake::listen_at(address);
  if (!address.empty() && address[0] != '@') state_->path = address;
  try {
    lake::set_nonblocking(state_->listener);  // accept_one never waits
  } catch (...) {
    ::close(state_->listener);
    throw;
  }
}

LakeLender::~LakeLender() {
  for (Connection& c : state_->connections) {
    if (c.socket >= 0) state_->drop(c);
  }
  for (Stranded& s : state_->stranded) {
    for (const Lent& l : s.chunks) state_->release(l.chunk);
    if (s.pidfd >= 0) ::close(s.pidfd);
  }
  ::close(state_->listener);
  if (!state_->path.empty()) ::unlink(state_->path.c_str());  // a restarted lender binds again
}

std::uint64_t LakeLender::poll(int timeout_ms, std::uint64_t now_ns) {
  State& s = *state_;
  std::vector<ChunkHandle> retry;
  retry.swap(s.unreleased);
  for (const ChunkHandle c : retry) s.release(c);
  std::vector<pollfd> fds;
  fds.push_back({s.listener, POLLIN, 0});
  for (const Connection& c : s.connections) fds.push_back({c.socket, POLLIN, 0});
  for (const Stranded& st : s.stranded) fds.push_back({st.pidfd, POLLIN, 0});
  int ready;
  do {
    ready = ::poll(fds.data(), fds.size(), timeout_ms);
  } while (ready < 0 && errno == EINTR);
  if (ready < 0) throw BackendError("poll", std::strerror(errno));
  std::uint64_t handled = 0;
  const std::size_t connections = s.connections.size();
  // Only the stranded entries polled: handling a connection may cut it off and strand more (read from fds[]
  // beyond its end before: stranded chunks released at random while their borrower lived).
  const std::size_t stranded = s.stranded.size();
  for (std::size_t i = 0; i < connections; ++i) {
    if (fds[1 + i].revents == 0) continue;
    s.handle(s.connections[i], &refused_);
    ++handled;
  }
  for (std::size_t i = 0; i < stranded; ++i) {
    if (fds[1 + connections + i].revents == 0) continue;
    for (const Lent& l : s.stranded[i].chunks) s.release(l.chunk);  // the process exited: nothing maps them
    ::close(s.stranded[i].pidfd);
    s.stranded[i].pidfd = -2;
    ++handled;
  }
  std::erase_if(s.stranded, [](const Stranded& st) { return st.pidfd == -2; });
  if (fds[0].revents != 0) {
    for (int i = 0; i < 16; ++i) s.accept_one();  // a backlog's worth: one flooder does not starve the others
    ++handled;
  }
  // Recalls past their deadline: cut the borrower off.
  for (Connection& c : s.connections) {
    if (c.socket < 0) continue;
    for (const auto& [id, l] : c.loans) {
      if (l.recalled && l.deadline_ns < now_ns) {
        s.cut_off(c, "loan " + std::to_string(id) + " not returned by its recall deadline");
        break;
      }
    }
  }
  std::erase_if(s.connections, [](const Connection& c) { return c.socket < 0; });
  return handled;
}

void LakeLender::stop_lending() {
  state_->stopped = true;
  state_->note("stopping: no new loans");
}

std::uint64_t LakeLender::recall_all(std::uint64_t deadline_ns) {
  std::uint64_t recalled = 0;
  for (Connection& c : state_->connections) {
    for (auto& [id, l] : c.loans) {
      if (l.recalled) continue;
      l.recalled = true;
      l.deadline_ns = deadline_ns;
      lake::Message m;
      m.type = lake::MessageType::kRecall;
      m.loan_id = id;
      m.size_bytes = l.size_bytes;
      ++recalled;
      bool sent = false;
      try {
        sent = lake::send_message(c.socket, m);
      } catch (const Error&) {
        // Its socket is full (it does not read) or failed: the deadline cuts it off if it does not return.
      }
      if (!sent) break;  // gone: its end of file comes at the next poll
      state_->note("recalled loan " + std::to_string(id) + " from pid " + std::to_string(c.pid));
    }
  }
  return recalled;
}

std::map<std::uint64_t, std::uint64_t> LakeLender::loans() const {
  std::map<std::uint64_t, std::uint64_t> out;
  for (const Connection& c : state_->connections)
    for (const auto& [id, l] : c.loans) out.emplace(id, l.size_bytes);
  return out;
}

std::uint64_t LakeLender::lent_bytes() const {
  std::uint64_t total = 0;
  for (const Connection& c : state_->connections)
    for (const auto& [id, l] : c.loans) total += l.size_bytes;
  return total;
}

std::uint64_t LakeLender::stranded_bytes() const {
  std::uint64_t total = 0;
  for (const Stranded& s : state_->stranded)
    for (const Lent& l : s.chunks) total += l.size_bytes;
  return total;
}

ChunkHandle LakeLender::loan_chunk(std::uint64_t loan_id) const {
  for (const Connection& c : state_->connections) {
    if (const auto it = c.loans.find(loan_id); it != c.loans.end()) return it->second.chunk;
  }
  throw Error(ErrorCode::kInvalidArgument, "gmlake lake: loan " + std::to_string(loan_id) + " is not lent to a connected borrower");
}

std::uint64_t LakeLender::refused_borrowers() const { return state_->refused_peers; }

std::uint64_t LakeLender::borrowers() const { return state_->connections.size(); }

}  // namespace gmlake
