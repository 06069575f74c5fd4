// Helpers for the lake's two-process tests (lake_lender_test.cpp, lake_borrower_test.cpp, lake_peers_test.cpp):
// unique socket addresses, a chunk mapped for the CPU on the host backend, a lender that serves one borrower, and
// a lender driven by the test's commands.
#pragma once

#include <grp.h>
#include <poll.h>
#include <dirent.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "ipc_test_support.h"

#include "gmlake/backend.h"
#include "gmlake/host_backend.h"
#include "gmlake/lake.h"

namespace gmlake::test {

// A uid that is not this test's (nobody), for the lake's uid checks.
inline constexpr std::uint32_t kOtherUid = 65534;

// In a forked child: becomes kOtherUid (and its group) for good. False when this process may not (not root, no
// CAP_SETUID): the caller then says so and the test skips. A user namespace would not do: the kernel reports a
// namespaced process's uid to the other end of a socket as its uid outside, this test's own.
inline bool become_other_uid() {
  if (::setgroups(0, nullptr) != 0 && ::geteuid() == 0) return false;
  return ::setresgid(kOtherUid, kOtherUid, kOtherUid) == 0 && ::setresuid(kOtherUid, kOtherUid, kOtherUid) == 0 &&
         ::geteuid() == kOtherUid;
}
inline constexpr const char* kNoOtherUid =
    "cannot run a process as another uid here (neither root nor CAP_SETUID/CAP_SETGID; a user namespace maps "
    "back to this uid in SO_PEERCRED): the uid check is not exercised";

// Descriptors open in this process now (entries of /proc/self/fd, less the one that reads it).
inline int open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(dir)) n += e->d_name[0] != '.' ? 1 : 0;
  ::closedir(dir);
  return n - 1;
}

// An abstract-namespace address no other test or run uses.
inline LakeAddress lake_address(const std::string& name) {
  return "@gmlake-lake-test-" + std::to_string(::getpid()) + "-" + name;
}

// `chunk` of `size_bytes` reserved, mapped and given access in `backend` (host: CPU-readable).
struct MappedChunk {
  Backend& backend;
  std::uintptr_t addr;
  std::uint64_t size_bytes;
  MappedChunk(Backend& b, ChunkHandle chunk, std::uint64_t size) : backend(b), addr(b.reserve(size)), size_bytes(size) {
    b.map(addr, size, chunk);
    b.set_access(addr, size);
  }
  unsigned char* bytes() const { return reinterpret_cast<unsigned char*>(addr); }
  void fill(unsigned char value) const { std::memset(bytes(), value, size_bytes); }
  // True when every byte is `value`.
  bool holds(unsigned char value) const {
    for (std::uint64_t i = 0; i < size_bytes; i += 4096) {
      if (bytes()[i] != value || bytes()[size_bytes - 1] != value) return false;
    }
    return true;
  }
  void unmap() const {
    backend.unmap(addr, size_bytes);
    backend.address_free(addr, size_bytes);
  }
};

// In a forked child: serves until one borrower has connected and gone again. Returns 0 when every chunk came
// back to `backend`, 10 otherwise.
inline int serve_one_borrower(LakeLender& lender, const Backend& backend) {
  while (lender.borrowers() == 0) lender.poll(-1, 0);
  while (lender.borrowers() != 0) lender.poll(-1, 0);
  return backend.live_chunks() == 0 && lender.lent_bytes() == 0 ? 0 : 10;
}

// In a forked child: serves borrowers and answers the test's commands on pipe `down` (replies on `up`) until
// the pipe closes, handling everything pending on the socket before each answer:
//   "lent"       -> the bytes on loan now
//   "count V"    -> how many bytes of the chunks on loan hold V (each mapped here, read, unmapped)
//   "fill V"     -> writes V over every chunk on loan, answers "filled"
//   "recall"     -> recalls every loan (deadline 1000 in the lender's clock), answers how many
//   "expire"     -> polls at time 2000: a recall not answered by then cuts its borrower off; answers "expired"
// Then it serves until no borrower is left (the test closed its pool) and returns 0 when every chunk came back,
// 10 otherwise.
inline int serve_commands(LakeLender& lender, HostBackend& backend, int up, int down) {
  std::uint64_t now_ns = 0;
  auto drain = [&] {
    while (lender.poll(0, now_ns) != 0) {
    }
  };
  auto each_loan = [&](auto&& f) {
    for (const auto& [id, size] : lender.loans()) {
      MappedChunk m(backend, lender.loan_chunk(id), size);
      f(m);
      m.unmap();
    }
  };
  for (;;) {
    lender.poll(1, now_ns);
    pollfd p{down, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) continue;
    const std::string command = receive_message(down);
    if (command == "<eof>") break;
    drain();
    const unsigned value = command.find(' ') == std::string::npos ? 0 : std::stoul(command.substr(command.find(' ') + 1));
    if (command == "lent") {
      send_message(up, std::to_string(lender.lent_bytes()));
    } else if (command == "loans") {
      send_message(up, std::to_string(lender.loans().size()));
    } else if (command.rfind("count ", 0) == 0) {
      std::uint64_t n = 0;
      each_loan([&](const MappedChunk& m) {
        for (std::uint64_t i = 0; i < m.size_bytes; ++i) n += m.bytes()[i] == value ? 1 : 0;
      });
      send_message(up, std::to_string(n));
    } else if (command.rfind("fill ", 0) == 0) {
      each_loan([&](const MappedChunk& m) { m.fill(static_cast<unsigned char>(value)); });
      send_message(up, "filled");
    } else if (command == "recall") {
      send_message(up, std::to_string(lender.recall_all(1000)));
    } else if (command == "expire") {
      now_ns = 2000;
      drain();
      send_message(up, "expired");
    } else {
      send_message(up, "unknown command '" + command + "'");
    }
  }
  while (lender.borrowers() != 0) lender.poll(-1, now_ns);
  return lender.lent_bytes() == 0 && lender.stranded_bytes() == 0 && backend.live_chunks() == 0 ? 0 : 10;
}

}  // namespace gmlake::test
