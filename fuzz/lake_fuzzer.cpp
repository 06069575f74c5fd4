// libFuzzer target: the lake's two ends (src/lake/) driven by a hostile peer. Byte 0 picks the side under test:
//   even: a LakeLender (host backend, budget 16 chunks) and up to 4 raw borrower sockets of this process, whose
//         traffic the input writes: well-formed records of any type and field, truncated (0..39 bytes) and
//         oversized (41..120 bytes) ones, garbage, each with no descriptor or one of the wrong kind (a memfd, a
//         regular file, a socket, a pipe, /dev/null) or two; RETURNs of loans granted, of loans never granted and
//         twice; floods of REQUESTs that are never read; recalls, deadlines passing, sockets closed.
//   odd:  a LakeBorrower (host backend, answer timeout 1 ms) and the raw lender socket the input writes: GRANTs
//         with or without a descriptor, of a file too small, at offsets out of the file, of the wrong size, with
//         loan ids granted before, of every kind above; REFUSEs of every reason; RECALLs of unknown loans; floods;
//         the lender's file shrunk under the borrower's mappings (refused: sealed); the connection closed. The borrower borrows,
//         writes and reads every loan it holds, answers recalls and gives loans back.
// Checked after every input: nothing crashed (ASan, UBSan), the lender's backend holds exactly its lent and
// stranded chunks, a fresh well-formed request is still answered (GRANT with a mappable descriptor, or REFUSE for
// the budget), and once everything is closed no chunk is live and exactly the descriptors open before are open
// (no descriptor leaked, by /proc/self/fd). Allowed errors: those lake.h documents for each call.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_descriptors.h"
#include "gmlake/error.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"
#include "lake/lake_wire.h"

namespace gmlake::fuzz {
namespace {

constexpr std::uint64_t kGranule = 64 * 1024;  // the host backend's smallest: cheap chunks, many of them
constexpr std::uint64_t kBudgetBytes = 16 * kGranule;
constexpr std::size_t kMaxClients = 4;
constexpr int kMaxFlood = 2048;

const bool kTrace = std::getenv("GMLAKE_FUZZ_TRACE") != nullptr;

void trace(const char* format, unsigned long long a = 0, unsigned long long b = 0) {
  if (!kTrace) return;
  std::fprintf(stderr, format, a, b);
  std::fputc('\n', stderr);
}

[[noreturn]] void finding(const std::string& what) {
  std::fprintf(stderr, "gmlake lake fuzz finding: %s\n", what.c_str());
  std::abort();
}

class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return pos_ >= size_; }
  std::uint8_t next() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint64_t next64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= std::uint64_t{next()} << (8 * i);
    return v;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// "fd -> what" for every open descriptor, for a finding's message.
std::string descriptor_list() {
  std::string out;
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + e->d_name;
    if (::readlink(link.c_str(), target, sizeof(target) - 1) < 0) continue;
    out += std::string(" ") + e->d_name + "->" + target;
  }
  ::closedir(dir);
  return out;
}

// A number the input picks: small ones often (loan ids, sizes in granules), anything sometimes.
std::uint64_t pick(Bytes& in, std::uint64_t granted_max) {
  const std::uint8_t k = in.next();
  switch (k % 6) {
    case 0: return k / 6;
    case 1: return granted_max + (k / 6) % 3;  // around the loans granted so far
    case 2: return (k / 6) * kGranule;
    case 3: return (k / 6) * kGranule + 4096;
    case 4: return UINT64_MAX - (k / 6);
    default: return in.next64();
  }
}

// Descriptors of every kind a peer may attach; the caller closes what it gets. kind % 7: 0 none, 1 a memfd of
// `file_bytes`, 2 a regular file of `file_bytes`, 3 a socket, 4 a pipe's read end, 5 /dev/null, 6 two memfds.
std::vector<int> descriptors(std::uint8_t kind, std::uint64_t file_bytes) {
  std::vector<int> fds;
  auto memfd = [&] {
    const int fd = ::memfd_create("lake-fuzz", MFD_CLOEXEC);
    if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(file_bytes)) != 0) {
      ::close(fd);
      return -1;
    }
    return fd;
  };
  switch (kind % 7) {
    case 1: fds.push_back(memfd()); break;
    case 2: {
      const int fd = ::open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
      if (fd >= 0 && ::ftruncate(fd, static_cast<off_t>(file_bytes)) == 0) fds.push_back(fd);
      else if (fd >= 0) ::close(fd);
      break;
    }
    case 3: {
      int pair[2];
      if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0) {
        fds.push_back(pair[0]);
        ::close(pair[1]);
      }
      break;
    }
    case 4: {
      int pipe_fds[2];
      if (::pipe2(pipe_fds, O_CLOEXEC) == 0) {
        fds.push_back(pipe_fds[0]);
        ::close(pipe_fds[1]);
      }
      break;
    }
    case 5: fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC)); break;
    case 6: fds.push_back(memfd()); fds.push_back(memfd()); break;
    default: break;
  }
  std::erase_if(fds, [](int fd) { return fd < 0; });
  return fds;
}

// Sends `bytes` with `fds` attached as one packet, without waiting (MSG_DONTWAIT): false when it did not go.
bool send_raw(int socket, const std::vector<unsigned char>& bytes, const std::vector<int>& fds) {
  iovec io{const_cast<unsigned char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 2)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(socket, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) >= 0;
}

std::vector<unsigned char> record(std::uint16_t type, std::uint64_t loan, std::uint64_t size, std::uint64_t offset,
                                  std::uint64_t arg) {
  std::vector<unsigned char> b(lake::kMessageBytes, 0);
  const std::uint32_t magic = lake::kMagic;
  std::memcpy(b.data(), &magic, 4);
  std::memcpy(b.data() + 4, &type, 2);
  std::memcpy(b.data() + 8, &loan, 8);
  std::memcpy(b.data() + 16, &size, 8);
  std::memcpy(b.data() + 24, &offset, 8);
  std::memcpy(b.data() + 32, &arg, 8);
  return b;
}

// One record as the input shapes it (`max_id`: the highest loan id seen, for ids near real ones).
std::vector<unsigned char> shaped_record(Bytes& in, std::uint64_t max_id) {
  const std::uint8_t shape = in.next();
  const std::uint16_t type = static_cast<std::uint16_t>(in.next() % 7);  // 0 and 6: unknown types
  std::vector<unsigned char> b = record(type, pick(in, max_id), pick(in, 0), pick(in, 0), pick(in, 0));
  switch (shape % 8) {
    case 5: b.resize(shape / 8 % lake::kMessageBytes); break;                        // truncated
    case 6: b.resize(lake::kMessageBytes + 1 + shape / 8 % 80, shape); break;        // oversized
    case 7: b[shape / 8 % 4] ^= static_cast<unsigned char>(1 + shape / 32); break;  // a bad magic
    default: break;
  }
  return b;
}

// Reads and discards everything waiting on `socket` (closing descriptors); returns the loan ids GRANTed.
std::vector<std::uint64_t> drain(int socket, std::uint64_t* refused = nullptr) {
  std::vector<std::uint64_t> granted;
  for (int n = 0; n < 4 * kMaxFlood; ++n) {
    int fd = -1;
    std::optional<lake::Message> m;
    try {
      if (!lake::wait_readable(socket, 0)) break;
      m = lake::receive_message(socket, &fd);
    } catch (const Error&) {
      continue;  // malformed: its descriptor already closed
    }
    if (fd >= 0) ::close(fd);
    if (!m) break;
    if (m->type == lake::MessageType::kGrant) granted.push_back(m->loan_id);
    if (m->type == lake::MessageType::kRefuse && refused != nullptr) ++*refused;
  }
  return granted;
}

std::string address(const char* side) {
  return "@gmlake-lake-fuzz-" + std::string(side) + "-" + std::to_string(::getpid());
}

// --- The lender under a hostile borrower.

void fuzz_lender(Bytes& in) {
  HostBackend backend(kGranule);
  const std::string at = address("lender");
  std::optional<LakeLender> lender;
  lender.emplace(backend, at, kBudgetBytes);
  struct Client {
    int socket;
    std::vector<std::uint64_t> granted;
  };
  std::vector<Client> clients;
  std::uint64_t now_ns = 0, max_id = 0;
  int connects_unpolled = 0;
  auto poll_all = [&] {
    connects_unpolled = 0;
    for (int i = 0; i < 8 && lender->poll(0, now_ns) != 0; ++i) {
    }
  };
  while (!in.done()) {
    const std::uint8_t op = in.next();
    Client* c = clients.empty() ? nullptr : &clients[op / 16 % clients.size()];
    switch (op % 9) {
      case 0:
        trace("connect");
        if (clients.size() >= kMaxClients) break;
        if (++connects_unpolled > 8) poll_all();  // keeps the backlog (16) from filling: connect would wait 1 s
        try {
          clients.push_back({lake::connect_to(at), {}});
        } catch (const BackendError&) {
          // the backlog is full: the lender has not polled (its accepts come at the next poll)
        }
        break;
      case 1: {  // a record, any shape, any descriptor
        if (c == nullptr) break;
        const std::vector<unsigned char> b = shaped_record(in, max_id);
        const std::vector<int> fds = descriptors(in.next(), kGranule);
        trace("send %llu bytes, %llu fds", b.size(), fds.size());
        send_raw(c->socket, b, fds);
        for (const int fd : fds) ::close(fd);
        break;
      }
      case 2: poll_all(); break;
      case 3:
        if (c == nullptr) break;
        for (const std::uint64_t id : drain(c->socket)) {
          c->granted.push_back(id);
          max_id = std::max(max_id, id);
        }
        break;
      case 4: {  // RETURN of a loan it holds (or held: twice)
        if (c == nullptr || c->granted.empty()) break;
        const std::uint64_t id = c->granted[in.next() % c->granted.size()];
        trace("return %llu", id);
        send_raw(c->socket, record(5, id, 0, 0, 0), {});
        break;
      }
      case 5:
        if (c == nullptr) break;
        trace("close");
        ::close(c->socket);
        clients.erase(clients.begin() + (c - clients.data()));
        break;
      case 6: lender->recall_all(now_ns + in.next()); break;
      case 7: now_ns += in.next(); break;
      case 8: {  // a flood of requests, never read
        if (c == nullptr) break;
        const int n = 1 + in.next() * (kMaxFlood / 256);
        trace("flood %llu", n);
        const std::vector<unsigned char> request = record(1, 0, kGranule, 0, 0);
        for (int i = 0; i < n && send_raw(c->socket, request, {}); ++i) {
          if (i % 64 == 63) poll_all();
        }
        break;
      }
    }
  }
  poll_all();
  // The pool's books: every live chunk is lent or stranded.
  if (backend.live_chunk_bytes() != lender->lent_bytes() + lender->stranded_bytes()) {
    finding("the lender's backend holds " + std::to_string(backend.live_chunk_bytes()) + " bytes, lent " +
            std::to_string(lender->lent_bytes()) + " + stranded " + std::to_string(lender->stranded_bytes()));
  }
  // Still usable: a fresh borrower's request is answered, by a GRANT whose descriptor maps, or a budget REFUSE.
  {
    const int fresh = lake::connect_to(at);
    send_raw(fresh, record(1, 0, kGranule, 0, 0), {});
    std::optional<lake::Message> answer;
    int fd = -1;
    for (int i = 0; i < 64 && !answer; ++i) {
      lender->poll(0, now_ns);
      if (lake::wait_readable(fresh, 0)) answer = lake::receive_message(fresh, &fd);
    }
    if (!answer) finding("a well-formed request after the traffic got no answer");
    const bool full = lender->lent_bytes() + lender->stranded_bytes() + kGranule > kBudgetBytes;
    if (answer->type == lake::MessageType::kGrant) {
      void* p = ::mmap(nullptr, kGranule, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(answer->fd_offset_bytes));
      if (p == MAP_FAILED) finding("a GRANT's descriptor does not map");
      if (static_cast<const unsigned char*>(p)[kGranule - 1] != 0) finding("a lent chunk is not zero");
      ::munmap(p, kGranule);
    } else if (answer->type != lake::MessageType::kRefuse || !full) {
      finding("a well-formed request within the budget was not granted");
    }
    if (fd >= 0) ::close(fd);
    ::close(fresh);
  }
  for (const Client& client : clients) ::close(client.socket);
  for (int i = 0; i < 64 && lender->borrowers() != 0; ++i) lender->poll(0, now_ns);
  if (lender->borrowers() != 0) finding("closed borrowers still connected");
  if (lender->lent_bytes() != 0) finding("loans of closed borrowers not released");
  lender.reset();
  if (backend.live_chunks() != 0) finding("chunks live after the lender went");
}

// --- The borrower under a hostile lender.

void fuzz_borrower(Bytes& in) {
  HostBackend backend(kGranule);
  const std::string at = address("borrower");
  const int listener = lake::listen_at(at);
  // The file a real host lender would lend from: a memfd sealed against shrinking (unsealed ones, as the
  // descriptors() kinds, are refused at import: their owner could cut them under the borrower's mappings).
  const int lender_file = ::memfd_create("lake-fuzz-lender", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (lender_file < 0 || ::ftruncate(lender_file, 16 * kGranule) != 0 ||
      ::fcntl(lender_file, F_ADD_SEALS, F_SEAL_SHRINK) != 0) {
    finding("memfd");
  }
  std::optional<LakeBorrower> borrower;
  borrower.emplace(backend, at, /*answer_timeout_ms=*/1);
  int server = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (server < 0) finding("accept");
  struct Mapped {
    std::uintptr_t addr;
    std::uint64_t size_bytes;
  };
  std::map<std::uint64_t, Mapped> mapped;  // loan id -> its mapping here
  std::uint64_t max_id = 0;
  auto unmap = [&](std::uint64_t id) {
    const auto it = mapped.find(id);
    if (it == mapped.end()) return;
    backend.unmap(it->second.addr, it->second.size_bytes);
    backend.address_free(it->second.addr, it->second.size_bytes);
    mapped.erase(it);
  };
  auto give_back = [&](std::uint64_t id) {
    unmap(id);
    borrower->give_back(id);
  };
  while (!in.done()) {
    const std::uint8_t op = in.next();
    switch (op % 9) {
      case 0: {  // the lender sends a record, any shape and descriptor; a GRANT often with the right file
        if (server < 0) break;
        const std::vector<unsigned char> b = shaped_record(in, max_id);
        const std::uint8_t kind = in.next();
        std::vector<int> fds = descriptors(kind, (kind / 7) * kGranule);
        if (kind % 7 == 0 && op >= 128) fds.push_back(::dup(lender_file));
        trace("lender sends %llu bytes, %llu fds", b.size(), fds.size());
        send_raw(server, b, fds);
        for (const int fd : fds) ::close(fd);
        break;
      }
      case 1: {  // borrow: the answer is what the lender queued (or none: the 1 ms timeout)
        const std::uint64_t size = (1 + in.next() % 4) * kGranule;
        try {
          const Loan loan = borrower->borrow(size);
          max_id = std::max(max_id, loan.id);
          if (loan.size_bytes != size) finding("a loan of another size than asked");
          const std::uintptr_t addr = backend.reserve(size);
          backend.map(addr, size, loan.chunk);
          backend.set_access(addr, size);
          std::memset(reinterpret_cast<void*>(addr), 0x5A, size);  // the loan is usable memory
          mapped.emplace(loan.id, Mapped{addr, size});
          trace("borrowed %llu (%llu bytes)", loan.id, size);
        } catch (const Error& e) {
          if (kTrace) std::fprintf(stderr, "borrow: %s\n", e.what());
          const bool allowed = dynamic_cast<const OutOfMemoryError*>(&e) != nullptr ||
                               e.code() == ErrorCode::kBackend || e.code() == ErrorCode::kInvalidArgument;
          if (!allowed) throw;
        }
        break;
      }
      case 2:  // recalls answered
        for (const std::uint64_t id : borrower->poll(0)) give_back(id);
        break;
      case 3: {  // a loan given back unasked, or an id not held
        std::uint64_t id = pick(in, max_id);
        if (!borrower->loans().empty() && op >= 128) id = borrower->loans().begin()->first;
        try {
          give_back(id);
        } catch (const Error& e) {
          if (borrower->loans().contains(id) || e.code() != ErrorCode::kInvalidArgument) throw;
        }
        break;
      }
      case 4:  // every loan held is read and written: still this process's memory
        for (const auto& [id, m] : mapped) {
          volatile unsigned char* p = reinterpret_cast<unsigned char*>(m.addr);
          p[m.size_bytes - 1] = static_cast<unsigned char>(p[0] + 1);
        }
        break;
      case 5:
        if (server >= 0) drain(server);
        break;
      case 6: {  // a flood from the lender
        if (server < 0) break;
        const int n = 1 + in.next() * (kMaxFlood / 256);
        const std::vector<unsigned char> b = record(static_cast<std::uint16_t>(in.next() % 6), pick(in, max_id),
                                                    kGranule, 0, 0);
        for (int i = 0; i < n && send_raw(server, b, {}); ++i) {
        }
        break;
      }
      case 7:  // the lender tries to shrink the file it lends from, under the borrower's mappings
        if (::ftruncate(lender_file, static_cast<off_t>((in.next() % 16) * kGranule)) == 0) {
          finding("a lent file shrank: the borrower's mappings would fault (SIGBUS)");
        }
        break;
      case 8:
        if (server >= 0) ::close(server);
        server = -1;
        break;
    }
  }
  while (!mapped.empty()) give_back(mapped.begin()->first);
  while (!borrower->loans().empty()) borrower->give_back(borrower->loans().begin()->first);
  borrower.reset();
  if (backend.live_chunks() != 0) finding("chunks live after the borrower went");
  if (server >= 0) ::close(server);
  ::close(listener);
  ::close(lender_file);
}

}  // namespace
}  // namespace gmlake::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const int descriptors = gmlake::fuzz::open_descriptors();
  gmlake::fuzz::Bytes in(data, size);
  if (in.next() % 2 == 0) {
    gmlake::fuzz::fuzz_lender(in);
  } else {
    gmlake::fuzz::fuzz_borrower(in);
  }
  const int after = gmlake::fuzz::open_descriptors();
  if (after != descriptors) {
    gmlake::fuzz::finding("descriptors leaked: " + std::to_string(descriptors) + " open before, " +
                          std::to_string(after) + " after:" + gmlake::fuzz::descriptor_list());
  }
  return 0;
}
