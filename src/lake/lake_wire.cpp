#include "lake_wire.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "gmlake/error.h"

namespace gmlake::lake {
namespace {

std::string os_text(int error_number) { return std::string(std::strerror(error_number)) + " (errno " + std::to_string(error_number) + ")"; }

[[noreturn]] void bad_message(const std::string& why) {
  throw Error(ErrorCode::kInvalidArgument, "gmlake lake: bad message: " + why);
}

template <typename T>
void put(unsigned char* out, std::size_t at, T v) { std::memcpy(out + at, &v, sizeof(T)); }
template <typename T>
T get(const unsigned char* in, std::size_t at) {
  T v;
  std::memcpy(&v, in + at, sizeof(T));
  return v;
}

sockaddr_un socket_address(const std::string& address, socklen_t* length) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (address.empty() || address.size() >= sizeof(a.sun_path)) {
    throw Error(ErrorCode::kInvalidArgument, "gmlake lake: address '" + address + "' is empty or longer than " +
                                                 std::to_string(sizeof(a.sun_path) - 1) + " bytes");
  }
  std::memcpy(a.sun_path, address.data(), address.size());
  if (address[0] == '@') a.sun_path[0] = '\0';  // abstract namespace: no file
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  return a;
}

int new_socket() {
  const int s = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) throw BackendError("socket", os_text(errno));
  return s;
}

}  // namespace

bool send_message(int socket, const Message& m, int fd) {
  unsigned char bytes[kMessageBytes] = {};
  put<std::uint32_t>(bytes, 0, kMagic);
  put<std::uint16_t>(bytes, 4, static_cast<std::uint16_t>(m.type));
  put<std::uint64_t>(bytes, 8, m.loan_id);
  put<std::uint64_t>(bytes, 16, m.size_bytes);
  put<std::uint64_t>(bytes, 24, m.fd_offset_bytes);
  put<std::uint64_t>(bytes, 32, m.arg);
  iovec io{bytes, sizeof(bytes)};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  }
  for (;;) {
    if (::sendmsg(socket, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(bytes))) return true;
    if (errno == EINTR) continue;
    if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) return false;
    throw BackendError("sendmsg", os_text(errno));
  }
}

std::optional<Message> receive_message(int socket, int* fd) {
  *fd = -1;
  unsigned char bytes[kMessageBytes + 1] = {};  // one more: a longer packet shows as truncated
  iovec io{bytes, sizeof(bytes)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  msghdr msg{};
  msg.msg_iov = &io;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = ::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == ECONNRESET || errno == ENOTCONN)) return std::nullopt;
  if (n < 0) throw BackendError("recvmsg", os_text(errno));
  // Take every descriptor that came, so that none leaks whatever the message is.
  int fds = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received = -1;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (fds++ == 0) *fd = received;
      else ::close(received);
    }
  }
  auto fail = [&](const std::string& why) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    bad_message(why);
  };
  if (n == 0) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
    return std::nullopt;  // end of file: the other process closed the socket or exited
  }
  if (fds > 1 || (msg.msg_flags & MSG_CTRUNC) != 0) fail("more than one descriptor");
  if (n != static_cast<ssize_t>(kMessageBytes) || (msg.msg_flags & MSG_TRUNC) != 0) {
    fail(std::to_string(n) + " bytes, expected " + std::to_string(kMessageBytes));
  }
  if (get<std::uint32_t>(bytes, 0) != kMagic) fail("wrong magic (not a gmlake lake peer?)");
  const auto type = get<std::uint16_t>(bytes, 4);
  if (type < 1 || type > 5) fail("unknown type " + std::to_string(type));
  Message m;
  m.type = static_cast<MessageType>(type);
  m.loan_id = get<std::uint64_t>(bytes, 8);
  m.size_bytes = get<std::uint64_t>(bytes, 16);
  m.fd_offset_bytes = get<std::uint64_t>(bytes, 24);
  m.arg = get<std::uint64_t>(bytes, 32);
  if ((*fd >= 0) != (m.type == MessageType::kGrant)) fail("a descriptor must come with GRANT and only with it");
  return m;
}

bool wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  for (;;) {
    const int n = ::poll(&p, 1, timeout_ms);
    if (n >= 0) return n > 0;
    if (errno != EINTR) throw BackendError("poll", os_text(errno));
  }
}

int listen_at(const std::string& address) {
  socklen_t length = 0;
  const sockaddr_un a = socket_address(address, &length);
  const int s = new_socket();
  if (::bind(s, reinterpret_cast<const sockaddr*>(&a), length) != 0) {
    const int e = errno;
    ::close(s);
    throw BackendError("bind", "'" + address + "': " + os_text(e));
  }
  if (address[0] != '@' && ::chmod(address.c_str(), 0600) != 0) {  // before listen: nobody connects meanwhile
    const int e = errno;
    ::close(s);
    ::unlink(address.c_str());
    throw BackendError("chmod", "'" + address + "': " + os_text(e));
  }
  if (::listen(s, 16) != 0) {
    const int e = errno;
    ::close(s);
    throw BackendError("listen", os_text(e));
  }
  return s;
}

int connect_to(const std::string& address) {
  constexpr int kBacklogWaitMs = 1000;  // a lender whose backlog is full (it does not accept, or is flooded)
  socklen_t length = 0;
  const sockaddr_un a = socket_address(address, &length);
  const int s = new_socket();
  try {
    set_nonblocking(s);  // connect included: a full backlog is EAGAIN, not a wait without end
  } catch (...) {
    ::close(s);
    throw;
  }
  int r;
  int waited_ms = 0;
  for (;;) {
    r = ::connect(s, reinterpret_cast<const sockaddr*>(&a), length);
    if (r == 0 || (errno != EINTR && errno != EAGAIN)) break;
    if (errno == EAGAIN) {
      if (waited_ms >= kBacklogWaitMs) break;
      ::poll(nullptr, 0, 10);
      waited_ms += 10;
    }
  }
  if (r != 0) {
    const int e = errno;
    ::close(s);
    throw BackendError("connect", "no gmlake lender at '" + address + "'" +
                                      (e == EAGAIN ? ": its backlog stayed full for " + std::to_string(kBacklogWaitMs) +
                                                         " ms (it does not accept connections)"
                                                   : ": " + os_text(e)));
  }
  return s;
}

void set_nonblocking(int socket) {
  const int flags = ::fcntl(socket, F_GETFL);
  if (flags < 0 || ::fcntl(socket, F_SETFL, flags | O_NONBLOCK) != 0) throw BackendError("fcntl", os_text(errno));
}

PeerCredentials peer_credentials(int socket) {
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    throw BackendError("getsockopt", "SO_PEERCRED: " + os_text(errno));
  }
  return PeerCredentials{cred.pid, cred.uid, cred.gid};
}

bool uid_allowed(std::uint32_t uid, const std::vector<std::uint32_t>& allowed_uids) {
  if (uid == ::geteuid()) return true;
  for (const std::uint32_t allowed : allowed_uids) {
    if (allowed == uid) return true;
  }
  return false;
}

}  // namespace gmlake::lake
