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

namespace gmlake::lake {

enum class MessageType : std::uint16_t { kRequest = 1, kGrant = 2, kRefuse = 3, kRecall = 4, kReturn = 5 };
enum class RefuseReason : std::uint64_t { kOutOfMemory = 1, kBudget = 2, kBadSize = 3, kCannotLend = 4 };

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
// side is gone (EPIPE, ECONNRESET); throws BackendError("sendmsg", ...) for any other failure.
bool send_message(int socket, const Message& m, int fd = -1);
// The next message, and in *fd a descriptor that came with it (the caller owns it) or -1; nullopt at end of
// file. Blocks until one arrives. Throws as above.
std::optional<Message> receive_message(int socket, int* fd);
// True when `fd` is readable (or closed) within timeout_ms (-1: no limit). Throws BackendError("poll", ...).
bool wait_readable(int fd, int timeout_ms);
// A listening / connected SOCK_SEQPACKET socket at `address` (a path, or "@name" for the abstract namespace),
// close-on-exec. Throw Error(kInvalidArgument) for an empty or too long address, BackendError("socket" |
// "bind" | "listen" | "connect", ...).
int listen_at(const std::string& address);
int connect_to(const std::string& address);

}  // namespace gmlake::lake
