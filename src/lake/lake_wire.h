// The lake's wire format and socket calls (include/gmlake/lake.h has the protocol): fixed 40-byte messages on a
// SOCK_SEQPACKET Unix socket, a file descriptor attached with SCM_RIGHTS to GRANT.
//
// Layout, host byte order (both ends are on one host): u32 magic "GLK1", u16 type, u16 zero, u64 loan_id,
// u64 size_bytes, u64 fd_offset_bytes, u64 arg (RECALL: the deadline is the lender's, never sent: 0; REFUSE: the
// reason).
// Errors: a malformed message (size, magic, type, a descriptor where none belongs) throws
// Error(kInvalidArgument) "gmlake lake: bad message ..." and closes any descriptor that came with it; a failing
// socket call throws BackendError naming it. End of file (and ECONNRESET) is not an error: nullopt.
// Thread safety: none needed (no state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gmlake::lake {

enum class MessageType : std::uint16_t { kRequest = 1, kGrant = 2, kRefuse = 3, kRecall = 4, kReturn = 5 };
// kNotAllowed: the borrower's uid is neither the lender's nor in its allowed uids; sent once, at connection, with
// loan id 0, and the connection is closed.
enum class RefuseReason : std::uint64_t { kOutOfMemory = 1, kBudget = 2, kBadSize = 3, kCannotLend = 4, kNotAllowed = 5 };

struct Message {
  MessageType type = MessageType::kRequest;
  std::uint64_t loan_id = 0;
  std::uint64_t size_bytes = 0;
  std::uint64_t fd_offset_bytes = 0;
  std::uint64_t arg = 0;
};

inline constexpr std::uint32_t kMagic = 0x314b4c47;  // "GLK1" little-endian
inline constexpr std::size_t kMessageBytes = 40;

// Sends `m`, with `fd` attached when fd >= 0 (it stays open and the caller's). Returns false when the other
// side is gone (EPIPE, ECONNRESET); throws BackendError("sendmsg", ...) for any other failure, among them
// EAGAIN on a non-blocking socket whose other side does not read (a flood: the caller treats that peer as
// misbehaving rather than waiting for it).
bool send_message(int socket, const Message& m, int fd = -1);
// The next message, and in *fd a descriptor that came with it (the caller owns it) or -1; nullopt at end of
// file. Blocks until one arrives. Throws as above.
std::optional<Message> receive_message(int socket, int* fd);
// True when `fd` is readable (or closed) within timeout_ms (-1: no limit). Throws BackendError("poll", ...).
bool wait_readable(int fd, int timeout_ms);
// A listening / connected SOCK_SEQPACKET socket at `address` (a path, or "@name" for the abstract namespace),
// close-on-exec. A path socket's file is made mode 0600 (owner only) before it listens, so no other uid can
// connect at any moment (the abstract namespace has no permissions: the lender's uid check is what guards it).
// connect_to's socket is non-blocking for sends (a lender that stops reading cannot hang the borrower; reads
// wait in wait_readable), and for the connect: a lender whose backlog is full (it does not accept, or other
// processes flood it with connections) is BackendError("connect") after 1 s, not a wait without end. Throw Error(kInvalidArgument) for an empty or too long address, BackendError("socket"
// | "bind" | "chmod" | "listen" | "connect", ...).
int listen_at(const std::string& address);
int connect_to(const std::string& address);
// Makes `socket` non-blocking (accepted borrowers' sockets: a borrower that floods requests without reading the
// answers is cut off, never waited for). Throws BackendError("fcntl", ...).
void set_nonblocking(int socket);

// The credentials of the process at the other end of connected `socket` (SO_PEERCRED: the kernel's record of
// the peer when it connected, or, for a connecting socket, when the lender called listen; they cannot be forged
// by the peer). Throws BackendError("getsockopt", ...).
struct PeerCredentials {
  int pid = 0;
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};
PeerCredentials peer_credentials(int socket);
// True when `uid` may take part: this process's effective uid, or one of `allowed_uids`.
bool uid_allowed(std::uint32_t uid, const std::vector<std::uint32_t>& allowed_uids);

}  // namespace gmlake::lake
